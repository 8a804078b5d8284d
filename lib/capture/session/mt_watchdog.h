/* SPDX-License-Identifier: MIT */
/* mt_watchdog.h - continue the processes mt-trace stopped, should it die
 * (watchdog.c). */
#ifndef MT_WATCHDOG_H
#define MT_WATCHDOG_H

/*
 * Fork the watchdog of this process (mt-trace): it keeps only the BPF
 * maps traced_fd (tgid -> struct mt_traced, whose stops the BPF side
 * writes before or after each stop: `stopped` for new code, `throttled`
 * for backpressure), resumed_fd and unthrottled_fd (tgid -> the latest
 * stop of each kind mt-trace undid), and waits for this process to end;
 * then it sends SIGCONT to every process stopped and not resumed, and
 * exits.  Returns its pid, or -1 (message printed).
 */
int mt_watchdog_start(int traced_fd, int resumed_fd, int unthrottled_fd);

#endif /* MT_WATCHDOG_H */
