#!/usr/bin/env bats
# `make bench` (BENCH_QUICK=1: small inputs, one run of each) prints its
# table with every benchmark.  Minutes on 2 CPUs, so not in `make test`:
# `make test-bench` runs it (and .ci/run, after `make test`).  No timing
# is asserted: a slow machine fails nothing here.
bats_require_minimum_version 1.5.0
load ../helpers

@test "make bench (BENCH_QUICK=1) prints the table with every benchmark" {
	require_bpf
	# each line as it comes, as a TAP comment: minutes of progress, not
	# of silence
	run bash -c 'make -C "$1" --no-print-directory -s OUTPUT="$2" \
		BENCH_QUICK=1 bench 2>&1 | tee >(sed -u "s/^/# /" >&3)
		exit "${PIPESTATUS[0]}"' _ "$TOP" "$MT_BUILD"
	assert_success
	assert_output --partial "BENCH_QUICK=1 make bench"
	assert_output --partial "machine: $(nproc) CPUs"
	local num='[0-9][0-9.]* (us|ms|s)'
	for workload in "ls -la /usr/lib" "dd bs=1M count=200" \
		"tar -cf - /usr/share/doc" "allocheavy 20000"; do
		assert_output --regexp "$workload +default \(recorder\) +$num +$num +[0-9.]+x "
	done
	assert_line --regexp "^ +--track-allocators=false +$num +$num"
	if mt-trace --help | grep -q -- --physical; then
		assert_line --regexp "^ +--physical +$num +$num +[0-9.]+x .* MB "
	else
		assert_line --regexp "^ +--physical +skipped: mt-trace has no --physical"
	fi
	# --fast --stacks: allocheavy against untraced, and a stack's cost in
	# the recorder at two depths
	assert_line --regexp "^ +--fast --stacks +$num +$num +[0-9.]+x "
	assert_line --regexp "^  fresh +21 frames, 20,000 malloc\+free pairs: .* ns a stack "
	assert_line --regexp "^  rec\. +9 frames, 200,000 malloc\+free pairs: .* ns a stack "
	assert_line --regexp "^  rec\. +21 frames, 200,000 malloc\+free pairs: .* ns a stack "
	assert_line --regexp "^allocation-heavy fixture: 20,000 malloc\+free pairs, 40,256 allocator calls"
	assert_line --regexp "wall clock: +-?[0-9]+ ns"
	assert_line --regexp "^  during an mt-trace default session: +[0-9.]+ ns"
	assert_line --regexp "^  under one bare uprobe on malloc, no BPF: +[0-9.]+ ns  \(one trap: -?[0-9]+ ns\)"
	assert_line --regexp "^  -?[0-9]+ ns a call before any BPF runs, on this machine"
	# the storm: 2 threads x 20,000 pairs, each run's events and rate
	assert_line --regexp "^  run 1: [0-9,]+ events in $num: [0-9.]+ M/s sustained, [0-9,]+ lost"
	assert_line --regexp "^lost events at 1 M events/s sustained +0 +[0-9,]+ lost, slowest run"
	for stage in mt-encode mt-reconstruct mt-report; do
		assert_line --regexp "^$stage +[0-9]+ MB +$num +$num +[0-9.]+ M/s"
	done
	# the offline stages on each real trace, then mt-gen's; one and two
	# CPUs each, the artifact's size
	for trace in "allocheavy 20000" "python3 20000 objects --stacks" \
		"tar -cf - /usr/share/doc --stacks"; do
		assert_line --regexp "^$trace: [0-9,]+ events, artifact [0-9.]+ bytes an event\$"
	done
	assert_line --regexp "^mt-gen 100000: 100,000 events, artifact [0-9.]+ bytes an event \(synthetic"
	[ "$(grep -cE '^mt-encode, 1 CPU +[0-9]+ MB' <<<"$output")" -eq 4 ]
	[ "$(grep -cE '^mt-report +[0-9]+ MB' <<<"$output")" -eq 4 ]
	assert_line --regexp "^mt-trace own peak RSS on ls +<= 10 MB +[0-9.]+ MB +(met|NOT MET)"
	# the table is saved too, and the events counted are the trace's
	assert_file_exists "$MT_BUILD/bench/table.txt"
	run "$PY" -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["lost"] >= 0, r["events"] >= 40256)
' "$MT_BUILD/bench/results/allocheavy-default.trace.json"
	assert_output "True True"
}
