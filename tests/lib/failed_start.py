#!/usr/bin/python3
"""One mt-trace start made to fail at a step, and what it left
(tests/startup.bats).

  failed_start.py DIR STEP [MT-TRACE OPTION...]

runs `MT_TRACE_FAIL_AT="STEP:stop" mt-trace OPTION... -o DIR/t.raw --
touch DIR/ran` and checks, with the kernel and /proc as the truth:
  - at the failure (mt-trace stopped itself): the ids of the BPF
    programs, links and maps it holds (/proc/PID/fdinfo);
  - once it let go of everything (stopped again): one thread
    (/proc/PID/task), no descriptor but those it inherited and the trace's
    (/proc/PID/fd);
  - its end: exit status 125, a message naming STEP, the command never
    run (DIR/ran not made);
  - within 5 s: no process carrying this run's token in its environment
    (every process mt-trace forks inherits it: the command, the watchdog,
    a detacher), none of the BPF objects it held (BPF_*_GET_FD_BY_ID:
    ENOENT), no mount the host did not have.
Prints what it held; on a failure, what was left, and exits 1.  Other
mt-trace sessions run on this machine: only this one's are looked at.
mt-trace is found on PATH.
"""
import os
import secrets
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bpf_gone  # noqa: E402
import host_state  # noqa: E402


def wait_stopped(pid, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            return False
        if state == "T":
            return True
        time.sleep(0.005)
    return False


def session_procs(token):
    want = f"MT_STARTUP_TOKEN={token}".encode()
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    pids.append(int(name))
        except OSError:
            pass  # gone, or a zombie's
    return pids


def bpf_left(held):
    left = []
    for name, cmd in bpf_gone.GET_FD_BY_ID.items():
        left += [f"{bpf_gone.KIND[name]} {i}" for i in held[name]
                 if bpf_gone.exists(cmd, i)]
    return left


def mounts():
    with open("/proc/self/mountinfo") as f:
        return {line.split()[0]: line.strip() for line in f}


def within(seconds, probe):
    """probe() until it returns nothing (then None), or what it returned
    last once seconds have passed."""
    end = time.monotonic() + seconds
    while True:
        got = probe()
        if not got:
            return None
        if time.monotonic() > end:
            return got
        time.sleep(0.02)


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    out, step, opts = argv[0], argv[1], argv[2:]
    raw, ran = os.path.join(out, "t.raw"), os.path.join(out, "ran")
    for f in (raw, ran):
        if os.path.exists(f):
            os.unlink(f)
    token = secrets.token_hex(8)
    before = mounts()
    inherited = set(os.listdir("/proc/self/fd"))
    env = dict(os.environ, MT_STARTUP_TOKEN=token,
               MT_TRACE_FAIL_AT=f"{step}:stop")
    p = subprocess.Popen(["mt-trace", *opts, "-o", raw, "--", "touch", ran],
                         env=env, stderr=subprocess.PIPE, close_fds=False)
    problems = []
    try:
        if not wait_stopped(p.pid):
            problems.append("never stopped at the failure")
            held = {"progs": [], "links": [], "maps": []}
        else:
            held = host_state.held(p.pid)
            os.kill(p.pid, signal.SIGCONT)
            if not wait_stopped(p.pid):
                problems.append("never stopped after letting go")
            else:
                threads = os.listdir(f"/proc/{p.pid}/task")
                if len(threads) != 1:
                    problems.append(f"{len(threads)} threads left")
                fds = []
                for fd in os.listdir(f"/proc/{p.pid}/fd"):
                    try:
                        target = os.readlink(f"/proc/{p.pid}/fd/{fd}")
                    except OSError:
                        continue
                    # its stderr is this script's pipe, not inherited
                    if fd in inherited or fd == "2" or target == raw:
                        continue
                    fds.append(f"{fd} -> {target}")
                if fds:
                    problems.append("descriptors left: " + ", ".join(fds))
                os.kill(p.pid, signal.SIGCONT)
        err = p.communicate(timeout=60)[1].decode(errors="replace")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode != 125:
        problems.append(f"exit status {p.returncode}")
    if f"mt-trace: start-up: {step}: failed" not in err:
        problems.append("no message naming the step")
    if os.path.exists(ran):
        problems.append("the command ran")
    left = within(5, lambda: session_procs(token))
    if left:
        problems.append(f"processes left: {left}")
    left = within(5, lambda: bpf_left(held))
    if left:
        problems.append(f"BPF objects left: {left}")
    new = [m for k, m in mounts().items() if k not in before]
    if new:
        problems.append(f"new mounts: {new}")
    counts = {k: len(v) for k, v in held.items() if k != "ns"}
    if problems:
        print(f"{step}: " + "; ".join(problems))
        print(err, end="")
        return 1
    print(f"{step}: held {counts}, all let go")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
