#!/usr/bin/env bats
# Python (issue 34): CPython's own allocator (pymalloc) recorded as the
# heap it is, in the in-process recorder (--fast: a PyMem_SetAllocator
# hook, lib/preload/pymalloc.c) and what the probes path sees of the
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

@test "pymalloc (--no-fast): -v says once that CPython's own allocator is not recorded without the recorder (its calls are inlined: uprobes would miss most)" {
	MT_FAST=0 mt-trace -v -o "$T/out.raw" -- "$PYTHON" -c pass 2>"$T/trace.err"
	run grep -c "CPython's own allocator (pymalloc) is not recorded" "$T/trace.err"
	assert_output 1
	mt-trace --fast -v -o "$T/out.raw" -- "$PYTHON" -c pass 2>"$T/trace.err"
	run grep -c "pymalloc" "$T/trace.err"
	assert_output 0
}

# line MARK FILE: the line of FILE that carries "# shape: MARK" (or, for
# seabird.py, the text MARK).
line_of() {
	grep -n -- "$1" "$2" | head -1 | cut -d: -f1
}

@test "Python frames (--fast --stacks): the 2,000 bytes(5000) of gannet_rows, called from colony, with file and line (tests/lib/pyframes.py reads the PyCode line tables apart from lib/)" {
	MT_STACKS=1 trace --fast "$SEABIRD" bytes
	size=$("$PYTHON" -c 'import sys; print(sys.getsizeof(bytes(5000)))')
	want="gannet_rows seabird.py:$(line_of 'rows.append(bytes(5000))' "$SEABIRD")"
	want+=" < colony seabird.py:$(line_of 'rows.extend(gannet_rows' "$SEABIRD")"
	want+=" < <module> seabird.py:$(line_of 'kept = colony()' "$SEABIRD")"
	run bash -c "mt-encode --jsonl '$T/out.raw' | '$PY' '$TOP/tests/lib/pyframes.py' $size | sort | uniq -c"
	assert_output "   2000 $want"
}

@test "Python frames in mt-report: 'gannet_rows (seabird.py:11)' in the text report, JSON and --folded, each evaluation loop frame replaced; --python-only leaves no native frame between Python ones" {
	# -I -S: no site module, fewer start-up stacks for --folded to write
	MT_STACKS=1 trace --fast -I -S "$SEABIRD" bytes
	g="gannet_rows (seabird.py:$(line_of 'rows.append(bytes(5000))' "$SEABIRD"))"
	c="colony (seabird.py:$(line_of 'rows.extend(gannet_rows' "$SEABIRD"))"
	run mt-report --stack-depth 127 "$T/out.msgpack"
	assert_success
	assert_output --partial "        $g
        $c"
	# JSON: the frame's function, file and line
	run bash -c "mt-report --json '$T/out.msgpack' | jq -c '[.sites.top[0].frames[] | select(.python)][0] | [.function, (.file | split(\"/\") | last), .line]'"
	assert_output "[\"$g\",\"seabird.py\",$(line_of 'rows.append(bytes(5000))' "$SEABIRD")]"
	# folded: outermost first; the Python frames where the evaluation
	# loop's frame was, which is gone
	mt-report --folded "$T/out.msgpack" >"$T/folded"
	run grep -c -F "$c;$g;" "$T/folded"
	[ "$output" -ge 1 ]
	run grep -F "$g" "$T/folded"
	refute_output --partial "_PyEval_EvalFrameDefault"
	# --python-only: between <module> and gannet_rows, Python frames only
	mt-report --folded --python-only "$T/out.msgpack" >"$T/folded-py"
	m="<module> (seabird.py:$(line_of 'kept = colony()' "$SEABIRD"))"
	run grep -c -F "$m;$c;$g;" "$T/folded-py"
	[ "$output" -ge 1 ]
}

# shapes MODE: the shapes fixture traced with stacks in MODE, each
# shape's Python frames checked.
shapes() {
	SHAPES="$TOP/tests/fixtures/python/shapes.py"
	MOD="$TOP/tests/fixtures/python/shapes_mod.py"
	MT_STACKS=1 trace "$1" "$SHAPES"
	mt-encode --jsonl "$T/out.raw" |
		"$PY" "$TOP/tests/lib/pyframes.py" 6034 6035 6036 6037 6038 6039 \
			>"$T/frames"
	frames() { sed -n "s/^$(($1 + 33)): //p" "$T/frames" | sort | uniq -c; }
	at() { echo "shapes.py:$(line_of "# shape: $1" "$SHAPES")"; }
	top="<module> shapes.py:$(line_of '^kept = ' "$SHAPES")"
	r="down $(at 'recursion caller')"
	run frames 6001
	assert_output "      1 down $(at 'recursion$') < $r < $r < $r < $top"
	run frames 6002
	assert_output "      3 gen $(at generator) < $top"
	run frames 6003
	assert_output "      1 Nest.build $(at method) < $top"
	run frames 6004
	assert_output --regexp "^      1 worker $(at thread) < Thread.run threading.py:[0-9]+ < Thread._bootstrap_inner threading.py:[0-9]+ < Thread._bootstrap threading.py:[0-9]+\$"
	run frames 6005
	assert_output --regexp "^      1 <module> shapes_mod.py:$(line_of 'shape: module body' "$MOD") < .* < <module> $(at import)\$"
	run frames 6006
	assert_output "      3 comp.<locals>.<listcomp> $(at comprehension) < comp $(at comprehension) < $top"
	# the thread's frames ran in two evaluation loop calls (its target
	# called through PyObject_Call): each group in its own call's place,
	# no evaluation loop frame left
	mt-report --folded "$T/out.msgpack" >"$T/folded"
	run grep -F "worker (shapes.py:$(line_of '# shape: thread' "$SHAPES"))" "$T/folded"
	assert_output --partial "Thread.run"
	refute_output --partial "_PyEval_EvalFrameDefault"
}

@test "Python frames of every shape (--fast --stacks): recursion, a generator, a class method, a thread, a module body at import, a list comprehension (its own frame in 3.11)" {
	shapes --fast
}

@test "Python frames of every shape (--no-fast --stacks: the BPF walk): recursion, a generator, a class method, a thread, a module body at import (its code object freed before the drain), a list comprehension" {
	shapes probes
}

@test "Python frames (--no-fast --stacks: the BPF walk): the 2,000 bytes(5000) of gannet_rows, called from colony, with file and line; exact counts; in mt-report" {
	MT_STACKS=1 trace probes "$SEABIRD" bytes
	size=$("$PYTHON" -c 'import sys; print(sys.getsizeof(bytes(5000)))')
	g="gannet_rows seabird.py:$(line_of 'rows.append(bytes(5000))' "$SEABIRD")"
	c="colony seabird.py:$(line_of 'rows.extend(gannet_rows' "$SEABIRD")"
	m="<module> seabird.py:$(line_of 'kept = colony()' "$SEABIRD")"
	run bash -c "mt-encode --jsonl '$T/out.raw' | '$PY' '$TOP/tests/lib/pyframes.py' $size | sort | uniq -c"
	assert_output "   2000 $g < $c < $m"
	# the same site in the report, each evaluation loop frame replaced
	run mt-report --stack-depth 127 "$T/out.msgpack"
	assert_output --partial "        ${g/ seabird.py:/ (seabird.py:})
        ${c/ seabird.py:/ (seabird.py:})"
}

@test "Python frames (--no-fast): pyenv's CPython 3.12 the same; 3.13 gives native frames only, said once; MT_PYTHON_FRAMES=0 gives none" {
	MT_STACKS=1 MT_PYTHON_FRAMES=0 trace probes "$SEABIRD" bytes
	run bash -c "mt-encode --jsonl '$T/out.raw' | grep -c '\"type\":\"PyCode\"'"
	assert_output 0
	P12=/root/.pyenv/versions/3.12.1/bin/python3.12
	P13=/root/.pyenv/versions/3.13.0/bin/python3.13
	[ -x "$P12" ] || skip "no pyenv CPython 3.12 on this host"
	PYTHON=$P12 MT_STACKS=1 trace probes "$SEABIRD" bytes
	run bash -c "mt-encode --jsonl '$T/out.raw' | '$PY' '$TOP/tests/lib/pyframes.py' 5033 | sort | uniq -c"
	assert_output "   2000 gannet_rows seabird.py:$(line_of 'rows.append(bytes(5000))' "$SEABIRD") < colony seabird.py:$(line_of 'rows.extend(gannet_rows' "$SEABIRD") < <module> seabird.py:$(line_of 'kept = colony()' "$SEABIRD")"
	[ -x "$P13" ] || skip "no pyenv CPython 3.13 on this host"
	PYTHON=$P13 MT_STACKS=1 trace probes -c pass
	run grep -c "CPython 3.13: no Python frames" "$T/trace.err"
	assert_output 1
}

@test "Python frames: CPython 3.12 (pyenv's, if installed) the same; another version gives native frames only, said once" {
	P12=/root/.pyenv/versions/3.12.1/bin/python3.12
	P13=/root/.pyenv/versions/3.13.0/bin/python3.13
	[ -x "$P12" ] || skip "no pyenv CPython 3.12 on this host"
	PYTHON=$P12 MT_STACKS=1 trace --fast "$SEABIRD" bytes
	run bash -c "mt-encode --jsonl '$T/out.raw' | '$PY' '$TOP/tests/lib/pyframes.py' 5033 | sort | uniq -c"
	assert_output --partial "   2000 gannet_rows seabird.py:$(line_of 'rows.append(bytes(5000))' "$SEABIRD") < colony"
	[ -x "$P13" ] || skip "no pyenv CPython 3.13 on this host"
	PYTHON=$P13 MT_STACKS=1 trace --fast -c pass
	run grep -c "CPython 3.13: no Python frames" "$T/trace.err"
	assert_output 1
}
