#!/usr/bin/python3
"""Which of a session's BPF objects still exist (tests/startup.bats).

  bpf_gone.py FILE   FILE: host_state.py held's JSON.  Prints "KIND ID"
                     for each program, link or map of it the kernel still
                     has; exit 1 if any.

The kernel is asked for each id alone (BPF_*_GET_FD_BY_ID: ENOENT once the
object is freed), not for a list of every object on the machine (bpftool
show: seconds where other sessions hold many)."""
import ctypes
import errno
import json
import os
import sys

SYS_BPF = 321  # x86_64
GET_FD_BY_ID = {"progs": 13, "maps": 14, "links": 30}
KIND = {"progs": "prog", "maps": "map", "links": "link"}

libc = ctypes.CDLL(None, use_errno=True)


def exists(cmd, ident):
    attr = (ctypes.c_uint32 * 4)(ident, 0, 0, 0)
    fd = libc.syscall(SYS_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    if fd >= 0:
        os.close(fd)
        return True
    err = ctypes.get_errno()
    if err == errno.ENOENT:
        return False
    raise OSError(err, os.strerror(err))


def main(argv):
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        held = json.load(f)
    left = 0
    for name, cmd in GET_FD_BY_ID.items():
        for ident in held.get(name, []):
            if exists(cmd, ident):
                print(KIND[name], ident)
                left += 1
    return 1 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
