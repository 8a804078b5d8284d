#!/usr/bin/env bats
# Python (issue 34): CPython's own allocator (pymalloc) recorded as the
# heap it is, in the in-process recorder (--fast: a PyMem_SetAllocator
# hook, lib/preload/mt_preload.c) and what the probes path sees of the
# same program.  The fixture is tests/fixtures/python/seabird.py; the
# interpreter is Debian's python3.11 (the pyenv one on PATH is a shim).
# Outside truths: sys.getsizeof (the size CPython asks for a bytes
# object), tracemalloc's peak for the same script.

load helpers

SEABIRD="$TOP/tests/fixtures/python/seabird.py"
PYTHON=/usr/bin/python3.11

setup() {
	require_bpf
	[ -x "$PYTHON" ] || fail "$PYTHON: not installed"
	T="$BATS_TEST_TMPDIR"
}

# trace MODE ARGS...: the fixture traced into $T/out.msgpack; MODE is
# --fast (the recorder) or probes (MT_FAST=0: uprobes).
trace() {
	local mode=$1
	shift
	if [ "$mode" = probes ]; then
		MT_FAST=0 mt-trace -o "$T/out.raw" -- "$PYTHON" "$@" \
			2>"$T/trace.err"
	else
		mt-trace "$mode" -o "$T/out.raw" -- "$PYTHON" "$@" \
			2>"$T/trace.err"
	fi || {
		cat "$T/trace.err"
		return 1
	}
	mt-encode "$T/out.raw" >"$T/out.msgpack"
}

# blocks SIZE: allocation events of exactly SIZE bytes in the trace.
blocks() {
	mt-encode --jsonl "$T/out.raw" | jq -c "select(.size == $1 and
		(.type == \"Malloc\" or .type == \"Calloc\" or
		 .type == \"Realloc\"))" | wc -l
}

@test "pymalloc: 2,000 bytes(5000) are 2,000 allocations (never 4,000: the malloc pymalloc makes for them is its own), with --fast and with probes" {
	size=$("$PYTHON" -c 'import sys; print(sys.getsizeof(bytes(5000)))')
	for mode in --fast probes; do
		trace "$mode" "$SEABIRD" bytes
		run blocks "$size"
		assert_output 2000
	done
}

@test "pymalloc (--fast): 100,000 small tuples, peak heap within 10% of tracemalloc's peak; pymalloc's arenas stay mapped" {
	truth=$(PYTHONTRACEMALLOC=1 "$PYTHON" "$SEABIRD" tuples tracemalloc)
	trace --fast "$SEABIRD" tuples
	peak=$(mt-report --json "$T/out.msgpack" | jq .tree.peak_heap)
	echo "mt: $peak, tracemalloc: $truth"
	[ "$((peak * 10))" -ge "$((truth * 9))" ]
	[ "$((peak * 10))" -le "$((truth * 11))" ]
	# the 1 MiB arenas pymalloc maps: mmap events, as before
	arenas=$(mt-encode --jsonl "$T/out.raw" |
		jq -c 'select(.type == "Mmap" and .size == 1048576)' | wc -l)
	[ "$arenas" -ge 10 ]
}
