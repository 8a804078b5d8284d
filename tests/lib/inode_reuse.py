"""inode_reuse.py - a library replaced by another on the same inode number.

A test loads lib_a from DIR/plugin.so, calls it, unloads and deletes it,
then creates files until one gets the freed inode number (ext4 and xfs
hand a freed one out again), writes lib_b into it and moves it to the
same path: a new library that a table keyed by device and inode alone
would take for the deleted one.  Used by stacks.bats and hardening.bats
under mt-trace (the script runs in the traced process).
"""
import _ctypes
import ctypes
import os


def swap_library(d, lib_a, lib_b, use_a):
    """Load lib_a as d/plugin.so, call use_a(handle), drop it, and put lib_b
    on the same inode number if the file system gives it out again.
    Returns (path, reused, number of files made before it was)."""
    path = os.path.join(d, "plugin.so")
    with open(lib_a, "rb") as f, open(path, "wb") as g:
        g.write(f.read())
    ino = os.stat(path).st_ino
    a = ctypes.CDLL(path)
    use_a(a)
    _ctypes.dlclose(a._handle)
    del a
    os.unlink(path)
    reused, fillers = False, []
    for i in range(20000):
        name = os.path.join(d, "f%d" % i)
        fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o755)
        if os.fstat(fd).st_ino == ino:
            with open(lib_b, "rb") as f:
                os.write(fd, f.read())
            os.close(fd)
            os.rename(name, path)
            reused = True
            break
        os.close(fd)
        fillers.append(name)
    for name in fillers:
        os.unlink(name)
    return path, reused, len(fillers)
