# bench/py-malloc.py N: an allocation-heavy CPython workload for bench/run's
# --fast rows (issue 12): N dict entries of a string key and a small list,
# dropped at the end.  Under PYTHONMALLOC=malloc every object is one malloc
# and one free.
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
table = {}
for i in range(n):
    table[str(i)] = [i, str(i) * 2]
del table
