# bench/py-alloc.py N: a python3 workload for bench/run's stack rows (issue
# 11): N small objects in a list, a dict of them, their JSON text.  Debian's
# python3 has no frame pointers; its allocation stacks are 20-100 frames.
import json
import sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
items = [bytes(100) + str(i).encode() for i in range(n)]
index = {i: len(b) for i, b in enumerate(items)}
text = json.dumps({str(k): v for k, v in index.items()})
print(len(items), len(index), len(text))
