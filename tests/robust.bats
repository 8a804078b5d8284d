#!/usr/bin/env bats
# mt-trace when things go wrong around it: its own death, a slow reader,
# many processes ending at once (issue 16).  The raw streams are read by
# tests/lib/rawcheck.py's parser (struct, none of lib/).

load helpers

setup() {
	T="$BATS_TEST_TMPDIR"
	export T
}

@test "a 2,000-process tree ending with munmaps: no event of a pid after its Exit, none before its Fork" {
	require_bpf
	# 200 processes at a time, each exits right after a munmap: the old
	# mt-trace read its events ring before its lifecycle ring and wrote a
	# Munmap after its process's Exit in 1 to 4 runs of 5 (by the load)
	for run in 1 2 3 4 5 6; do
		mt-trace -o "$T/tree.raw" -- "$MT_FIXTURES/exit_race" 2000 200 5
		run "$PY" "$TOP/tests/lib/order_check.py" "$T/tree.raw"
		echo "run $run: $output"
		assert_success
		assert_output "processes 2001 exits 2001"
	done
}

@test "a slow reader: the duration is the command's own, not the time mt-trace waited to write" {
	require_bpf
	# 4,000 allocator events (224 KB) fill the pipe: mt-trace waits 2 s
	# for the reader while the command, done in a few ms, has exited
	start=$(date +%s%N)
	mt-trace -- "$MT_FIXTURES/allocheavy" 2000 2>"$T/trace.err" |
		(sleep 2; cat) >"$T/slow.raw"
	waited_ms=$((($(date +%s%N) - start) / 1000000))
	echo "pipeline: $waited_ms ms"
	[ "$waited_ms" -ge 2000 ]
	run "$PY" "$TOP/tests/lib/order_check.py" times "$T/slow.raw"
	assert_success
	echo "$output"
	times=$output
	# the trailer ends at the last record, the root's Exit here, long
	# before the stream was all written (the old end: after the wait)
	[ "$(jq '.end == .last and .last == .root_exit' <<<"$times")" = true ]
	span_ms=$(jq '(.end - .start) / 1000000 | floor' <<<"$times")
	echo "traced span: $span_ms ms"
	[ "$span_ms" -lt 1500 ]
	# and that is the duration the later stages report
	run bash -c 'mt-encode "$T/slow.raw" | mt-reconstruct | jq .duration_ns'
	assert_success
	assert_output "$(jq '.end - .start' <<<"$times")"
}
