/* SPDX-License-Identifier: MIT */
/* mt_watchdog.h - continue the processes mt-trace stopped, should it die
 * (watchdog.c). */
#ifndef MT_WATCHDOG_H
#define MT_WATCHDOG_H

/*
 * Fork the watchdog of this process (mt-trace): it keeps only the BPF
 * maps stopped_fd (tgid -> the latest stop, written by the BPF side before
 * each stop) and resumed_fd (tgid -> the latest stop mt-trace undid), and
 * the same pair for backpressure's stops (throttled_fd, unthrottled_fd),
 * and waits for this process to end; then it sends SIGCONT to every
 * process stopped and not resumed, and exits.  Returns its pid, or -1
 * (message printed).
 */
int mt_watchdog_start(int stopped_fd, int resumed_fd, int throttled_fd,
		      int unthrottled_fd);

#endif /* MT_WATCHDOG_H */
