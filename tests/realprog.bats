#!/usr/bin/env bats
# Real programs traced: allocator event counts compared with an independent
# count of the same run, and every process of a pipeline seen.
#
# The independent count is build/preload/mtcount.so, an LD_PRELOAD
# interposer, loaded into the traced program itself:
#   mt-trace -- env LD_PRELOAD=mtcount.so MTCOUNT_OUT=FILE PROGRAM ...
# so it counts the very calls the uprobes see (each call it forwards to
# glibc is one call of glibc's malloc & co.).  What it cannot see are the
# nested calls inside glibc (realloc(NULL, n) -> malloc, realloc(p, 0) ->
# free, memalign -> malloc), which must not be events anyway.  So for a
# correct tracer the counts are equal, kind by kind, with no tolerance.
# `env` runs before the program under the same pid without the preload:
# the root's events before its last exec are left out (--root-after-exec).

load helpers

CHECK="$TOP/tests/lib/trace_check.py"
PRELOAD="$MT_BUILD/preload/mtcount.so"

setup() {
	T="$BATS_TEST_TMPDIR"
	export T
	[ -f "$PRELOAD" ] || fail "no $PRELOAD: run 'make fixtures'"
}

@test "the counter itself agrees with valgrind's heap summary on fixtures" {
	# no mt-trace here: once is enough (tests/run runs this file again
	# with MT_FAST=0, --no-fast, for the tracer's tests)
	[ "${MT_FAST:-}" != 0 ] || skip "no mt-trace in this test: run in the default pass"
	# (no realloc: valgrind counts a moving realloc as an alloc and a free;
	# no threads: valgrind's __libc_freeres frees libc's thread data at exit)
	for fixture in two_mallocs calloc four_sizes hundred posix_memalign; do
		rm -f "$T/counts.jsonl"
		MT_FIXTURE_LOG=/dev/null LD_PRELOAD="$PRELOAD" \
			MTCOUNT_OUT="$T/counts.jsonl" "$MT_FIXTURES/$fixture"
		counted=$(jq -s -r '[(map(.events.Malloc + .events.Calloc + .events.AlignedAlloc + .events.Realloc) | add), (map(.events.Free) | add)] | "\(.[0]) allocs \(.[1]) frees"' "$T/counts.jsonl")
		MT_FIXTURE_LOG=/dev/null valgrind "$MT_FIXTURES/$fixture" 2>"$T/vg.err"
		valgrind=$(sed -n 's/.*total heap usage: \([0-9,]*\) allocs, \([0-9,]*\) frees.*/\1 allocs \2 frees/p' "$T/vg.err" | tr -d ,)
		echo "$fixture: counter $counted, valgrind $valgrind"
		[ -n "$valgrind" ]
		[ "$counted" = "$valgrind" ]
	done
}

# trace_counted CMD...: trace CMD with the counter preloaded, into
# $T/out.msgpack and $T/counts.jsonl.  CMD's stdout goes to $T/cmd.out.
trace_counted() {
	run bash -c 'mt-trace --child-stdout "$T/cmd.out" -- \
			env LD_PRELOAD="$0" MTCOUNT_OUT="$T/counts.jsonl" "$@" \
			2>"$T/trace.err" | mt-encode >"$T/out.msgpack"
		echo "${PIPESTATUS[0]} ${PIPESTATUS[1]}"' "$PRELOAD" "$@"
	cat "$T/trace.err"
	assert_output "0 0"
}

# compare_counts: per pid and kind, counter == trace, exactly.
compare_counts() {
	run "$PY" "$CHECK" counts "$T/out.msgpack" "$T/counts.jsonl" --root-after-exec
	echo "$output"
	assert_success
}

@test "fixtures, whole processes (ld.so and libc included): counts equal the counter's" {
	require_bpf
	export MT_FIXTURE_LOG=/dev/null
	for fixture in realloc_edges memalign_family posix_memalign fork ctor; do
		rm -f "$T/counts.jsonl"
		echo "# $fixture"
		trace_counted "$MT_FIXTURES/$fixture"
		compare_counts
	done
}

@test "threaded fixtures: counts equal the counter's exactly (glibc's own frees of each thread's tcache not recorded)" {
	require_bpf
	export MT_FIXTURE_LOG=/dev/null
	# glibc 2.36 frees each thread's tcache at thread exit by calling free
	# from inside libc (tcache_thread_shutdown): a call no LD_PRELOAD
	# counter sees, of a block no malloc call returned, not the program's
	# (the probes leave it out: bpf/mt_probe.h, MT_COOKIE_SITE)
	for case in "thread 1" "threads 4"; do
		set -- $case
		rm -f "$T/counts.jsonl"
		echo "# $1"
		trace_counted "$MT_FIXTURES/$1"
		compare_counts
	done
}

@test "ls -la /usr/bin: allocator counts equal the LD_PRELOAD counter's" {
	require_bpf
	trace_counted ls -la /usr/bin
	# ls really ran: its listing is in the child's stdout file
	grep -q ' ls$' "$T/cmd.out"
	compare_counts
}

@test "tar: allocator counts equal the LD_PRELOAD counter's" {
	require_bpf
	mkdir -p "$T/tree/a/b"
	for i in $(seq 50); do head -c $((i * 100)) /dev/zero >"$T/tree/a/file$i"; done
	echo hello >"$T/tree/a/b/leaf"
	trace_counted tar -cf "$T/tree.tar" -C "$T" tree
	run tar -tf "$T/tree.tar"
	assert_line tree/a/b/leaf
	[ "${#lines[@]}" = 54 ]
	compare_counts
}

@test "python3 -c 'x=[bytes(1000) for _ in range(1000)]': counts equal, and the 1000 callocs are there" {
	require_bpf
	trace_counted /usr/bin/python3 -c 'x = [bytes(1000) for _ in range(1000)]'
	compare_counts
	# each bytes(1000) is a zeroed 1033-byte object (33-byte header), too
	# big for pymalloc: one calloc(1, 1033) each, in the root process
	root=$(jq -r '.header.root_pid' < <("$PY" "$CHECK" meta "$T/out.msgpack"))
	run jq_events "[.[] | select(.pid == $root and .type == \"Calloc\" and .size == 1033)] | length >= 1000"
	assert_output true
}

@test "sh -c 'ls / | wc -l': nonzero allocator events from every process" {
	require_bpf
	# no count to compare: once, in the default pass (not again with
	# MT_FAST=0, the exact counts' second pass)
	[ "${MT_FAST:-}" != 0 ] || skip "no exact count here: run in the default pass"
	run bash -c 'mt-trace --child-stdout "$T/cmd.out" -- sh -c "ls / | wc -l" \
			2>"$T/trace.err" | mt-encode >"$T/out.msgpack"
		echo "${PIPESTATUS[0]} ${PIPESTATUS[1]}"'
	assert_output "0 0"
	[ "$(cat "$T/cmd.out")" -eq "$(ls / | wc -l)" ]
	root=$(jq -r '.header.root_pid' < <("$PY" "$CHECK" meta "$T/out.msgpack"))
	# the processes: the root and every Fork child; ls and wc among them
	run jq_events '[.[] | select(.type == "Exec") | .path] | sort'
	assert_output '["/usr/bin/ls","/usr/bin/sh","/usr/bin/wc"]'
	pids=$(jq_events "[$root] + [.[] | select(.type == \"Fork\") | .pid] | unique | .[]")
	[ "$(echo "$pids" | wc -l)" -ge 3 ]
	for pid in $pids; do
		n=$(jq_events "[.[] | select(.pid == $pid and (.type | IN(\"Malloc\",\"Calloc\",\"Realloc\",\"AlignedAlloc\",\"Free\")))] | length")
		echo "pid $pid: $n allocator events"
		[ "$n" -gt 0 ]
	done
	# ls's and wc's own allocations (after their exec) are there too
	for prog in /usr/bin/ls /usr/bin/wc; do
		run jq_events "(.[] | select(.type == \"Exec\" and .path == \"$prog\")) as \$e |
			[.[] | select(.pid == \$e.pid and .timestamp > \$e.timestamp and .type == \"Malloc\")] | length > 0"
		assert_output true
	done
}

@test "sh -c 'ls / | wc -l' with the counter in every process: per-pid counts equal" {
	require_bpf
	trace_counted sh -c 'ls / | wc -l'
	# the counter wrote for sh and both children (children also before
	# their exec)
	[ "$(jq -s '[.[].pid] | unique | length' "$T/counts.jsonl")" -ge 3 ]
	compare_counts
}

@test "python3 from PATH (a pyenv shim: bash, then python): every process has allocator events" {
	require_bpf
	# no count to compare: once, in the default pass (not again with
	# MT_FAST=0, the exact counts' second pass)
	[ "${MT_FAST:-}" != 0 ] || skip "no exact count here: run in the default pass"
	run bash -c 'mt-trace --child-stdout "$T/cmd.out" -- python3 -c "x = [bytes(1000) for _ in range(1000)]" \
			2>"$T/trace.err" | mt-encode >"$T/out.msgpack"
		echo "${PIPESTATUS[0]} ${PIPESTATUS[1]}"'
	assert_output "0 0"
	root=$(jq -r '.header.root_pid' < <("$PY" "$CHECK" meta "$T/out.msgpack"))
	# each process's count in one pass over the events (a pass each for
	# the shim's 40 processes took 80 s)
	jq_events -r --argjson root "$root" '
		([$root] + [.[] | select(.type == "Fork") | .pid] | unique) as $pids
		| (map(select(.type | IN("Malloc", "Calloc", "Realloc",
			"AlignedAlloc", "Free"))) | group_by(.pid)
		   | map({key: (.[0].pid | tostring), value: length})
		   | from_entries) as $n
		| $pids[] | "\(.) \($n[tostring] // 0)"' >"$T/per_pid"
	sed 's/^\(.*\) \(.*\)$/pid \1: \2 allocator events/' "$T/per_pid"
	[ -s "$T/per_pid" ]
	# every process has some
	run awk '$2 == 0' "$T/per_pid"
	assert_output ""
	run jq_events '[.[] | select(.type == "Calloc" and .size == 1033)] | length >= 1000'
	assert_output true
}
