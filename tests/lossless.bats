#!/usr/bin/env bats
# Nothing is lost (issue 12, part 3): a traced process that finds a ring
# past its high-water mark is stopped until mt-trace has drained it
# (backpressure), instead of its events being dropped.  Counts come from
# the fixtures' own loops (storm: N malloc(48)+free pairs, exactly) and
# are read by python3-msgpack (tests/lib/storm_counts.py), not mt's reader.
#
# Sizes are kept so the suite takes about a minute on a busy 2-core VM;
# the issue's full storm (20 x 100,000 pairs, ten runs; 64 threads x
# 100,000) is MT_STORM_PAIRS=100000 MT_STORM_RUNS=10 MT_THREAD_PAIRS=100000.
# The default options record the storms' calls with the preloaded
# recorder, whose rings make a thread wait rather than drop (fast.bats);
# the tests of the BPF ring's own backpressure, of its 64 KiB size and of
# --no-backpressure say --no-fast, probes alone.

load helpers

STORM_PAIRS=${MT_STORM_PAIRS:-20000}
STORM_RUNS=${MT_STORM_RUNS:-3}
THREAD_PAIRS=${MT_THREAD_PAIRS:-5000}

setup() {
	T="$BATS_TEST_TMPDIR"
	export T
	hog=""
}

teardown() {
	if [ -n "$hog" ]; then
		kill "$hog" 2>/dev/null || true
		wait "$hog" 2>/dev/null || true
	fi
}

# A CPU hog beside the trace (not in it): the consumer gets less CPU.
start_hog() {
	(while :; do :; done) &
	hog=$!
}

# storm_tree STORM N: 20 STORM processes of N pairs at once, under one
# shell, which fails when one of them does.
storm_tree() {
	local pids=() pid
	for i in $(seq 20); do
		"$1" "$2" &
		pids+=($!)
	done
	for pid in "${pids[@]}"; do
		wait "$pid" || return 1
	done
}
export -f storm_tree

counts() {
	"$PY" "$TOP/tests/lib/storm_counts.py" "$T/out.msgpack" "$1"
}

@test "20 storms at once beside a CPU hog, default options: nothing lost, every call counted" {
	require_bpf
	start_hog
	n=$STORM_PAIRS
	for run in $(seq "$STORM_RUNS"); do
		MT_FIXTURE_LOG=/dev/null trace_ok -- \
			bash -c 'storm_tree "$@"' _ "$MT_FIXTURES/storm" "$n"
		run counts storm
		echo "run $run: $output"
		assert_output "{\"lost\": 0, \"lost_records\": 0, \"processes\": 20, \"counts\": {\"[$n, $n]\": 20}}"
		refute grep -q "lost" "$T/trace.err"
	done
}

@test "a 64 KiB ring under 20 storms: backpressure loses nothing; --no-backpressure loses (and counts) events" {
	require_bpf
	start_hog
	n=$STORM_PAIRS
	# 20 x 2 n events of 64 bytes through a ring of 1,024: full many times
	MT_FIXTURE_LOG=/dev/null trace_ok --no-fast --ring-size 64KiB -- \
		bash -c 'storm_tree "$@"' _ "$MT_FIXTURES/storm" "$n"
	run counts storm
	echo "backpressure: $output"
	assert_output "{\"lost\": 0, \"lost_records\": 0, \"processes\": 20, \"counts\": {\"[$n, $n]\": 20}}"
	# the same without it drops: what the test above would see on a
	# tracer that only counts (the old mt-trace)
	MT_FIXTURE_LOG=/dev/null trace_ok --no-fast --ring-size 64KiB --no-backpressure \
		-- bash -c 'storm_tree "$@"' _ "$MT_FIXTURES/storm" "$n"
	run "$PY" -c '
import json, sys
c = json.load(sys.stdin)
print(c["lost"] > 0 and c["lost"] == c["lost_records"])' <<<"$(counts storm)"
	echo "no backpressure: $(counts storm)"
	assert_output True
	run grep -c "events lost" "$T/trace.err"
	assert_output 1
}

@test "64 threads storming at once beside a CPU hog, default options: nothing lost, every call counted" {
	require_bpf
	start_hog
	n=$THREAD_PAIRS
	MT_FIXTURE_LOG=/dev/null trace_ok -- "$MT_FIXTURES/storm_threads" 64 "$n"
	run counts storm_threads
	echo "$output"
	assert_output "{\"lost\": 0, \"lost_records\": 0, \"processes\": 1, \"counts\": {\"[$((64 * n)), $((64 * n))]\": 1}}"
	# the same with a ring of 64 KiB (one process stopped as a group)
	MT_FIXTURE_LOG=/dev/null trace_ok --no-fast --ring-size 64KiB -- \
		"$MT_FIXTURES/storm_threads" 64 "$n"
	run counts storm_threads
	echo "64 KiB: $output"
	assert_output "{\"lost\": 0, \"lost_records\": 0, \"processes\": 1, \"counts\": {\"[$((64 * n)), $((64 * n))]\": 1}}"
}

@test "mt-trace killed while a process waits for it to drain: the watchdog continues it" {
	require_bpf
	MT_FIXTURE_LOG=/dev/null mt-trace --no-fast --ring-size 64KiB -o "$T/out.raw" \
		-- "$MT_FIXTURES/storm" 2000000 2>"$T/trace.err" &
	tracer=$!
	storm=""
	for i in $(seq 100); do
		storm=$(pgrep -P "$tracer" -x storm) && break
		sleep 0.1
	done
	[ -n "$storm" ]
	# mt-trace reads nothing: the ring fills and the BPF side stops it
	kill -STOP "$tracer"
	for i in $(seq 100); do
		[ "$(proc_state "$storm")" = T ] && break
		sleep 0.1
	done
	run proc_state "$storm"
	assert_output T
	kill -KILL "$tracer"
	wait "$tracer" || true
	# continued by the watchdog, untraced now: it runs to its end
	for i in $(seq 200); do
		[ -z "$(proc_state "$storm")" ] && break
		sleep 0.1
	done
	run proc_state "$storm"
	assert_output ""
	run grep -c "watchdog: mt-trace (pid $tracer) ended with 1 processes stopped" "$T/trace.err"
	assert_output 1
}
