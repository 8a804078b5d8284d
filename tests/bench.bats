#!/usr/bin/env bats
# The benchmark machinery of issue 6: the fixtures and helpers it relies on
# measure what they claim, and every command of codspeed.yml runs.  The
# quick run of `make bench` itself (minutes) is tests/bench/make-bench.bats,
# run by `make test-bench`.  No timing is asserted: a slow machine fails
# nothing here.
bats_require_minimum_version 1.5.0
load helpers

PEAKRSS="$MT_BUILD/bench/peakrss"

setup_file() {
	# peakrss and the quick offline trace (build/bench/trace-100000.*)
	make -C "$TOP" --no-print-directory -s OUTPUT="$MT_BUILD" \
		BENCH_QUICK=1 "$MT_BUILD/bench/peakrss" "$MT_BUILD/bench/trace-span" bench-data >&2
}

setup() {
	T="$BATS_TEST_TMPDIR"
}

# value KEY FILE: a number from peakrss's JSON line
value() {
	"$PY" -c 'import json, sys; print(json.load(open(sys.argv[2]))[sys.argv[1]])' "$1" "$2"
}

@test "peakrss: the process's own peak, not its child's" {
	# sh forks python, which writes 64 MiB; sh itself stays small.
	local touch64='b = b"x" * (64 << 20)'
	run "$PEAKRSS" -o "$T/sh.json" -- sh -c "$PY -c '$touch64'; true"
	assert_success
	[ "$(value vm_hwm_kb "$T/sh.json")" -lt $((16 * 1024)) ]
	[ "$(value with_children_maxrss_kb "$T/sh.json")" -ge $((64 * 1024)) ]

	run "$PEAKRSS" -o "$T/py.json" -- "$PY" -c "$touch64"
	assert_success
	[ "$(value vm_hwm_kb "$T/py.json")" -ge $((64 * 1024)) ]
}

@test "peakrss: the process's own CPU time, not its child's" {
	local burn='import time
t = time.process_time()
while time.process_time() - t < 0.5:
    pass'
	run "$PEAKRSS" -o "$T/sh.json" -- sh -c "$PY -c '$burn'; true"
	assert_success
	[ "$(value cpu_ms "$T/sh.json")" -lt 100 ]
	run "$PEAKRSS" -o "$T/py.json" -- "$PY" -c "$burn"
	assert_success
	[ "$(value cpu_ms "$T/py.json")" -ge 490 ]
}

@test "peakrss: passes on the exit status, 127 for a missing command" {
	run "$PEAKRSS" -o "$T/x.json" -- sh -c 'exit 7'
	assert_failure 7
	[ "$(value status "$T/x.json")" -eq 7 ]
	run -127 "$PEAKRSS" -o "$T/y.json" -- "$T/no-such-command"
}

@test "allocheavy: PAIRS malloc+free pairs and 256 blocks live, by the LD_PRELOAD counter" {
	MT_FIXTURE_LOG="$T/log" LD_PRELOAD="$MT_BUILD/preload/mtcount.so" \
		MTCOUNT_OUT="$T/counts.jsonl" "$MT_FIXTURES/allocheavy" 1000
	run "$PY" -c '
import json, sys
counts = [json.loads(l) for l in open(sys.argv[1])]
assert len(counts) == 1, counts
ev = counts[0]["events"]
info = {}
for line in open(sys.argv[2]):
    obj = json.loads(line)
    info[obj["info"]] = obj["value"]
print(ev["Malloc"], ev["Free"], ev["Calloc"] + ev["Realloc"] + ev["AlignedAlloc"],
      info["mallocs"], info["frees"], info["loop_ns"] > 0)
' "$T/counts.jsonl" "$T/log"
	assert_success
	assert_output "1256 1000 0 1256 1000 True"
}

@test "bystander: prints the median ns per malloc+free pair" {
	run "$MT_FIXTURES/bystander" 1000 3
	assert_success
	assert_output --regexp '^\{"pairs":1000,"rounds":3,"ns_per_pair":[0-9.]+,"min_ns_per_pair":[0-9.]+\}$'
}

@test "codspeed.yml: CodSpeed's schema, and every command runs" {
	require_bpf
	# the commands, in CodSpeed's shape, with the big inputs made small
	run "$PY" -c '
import sys, yaml
config = yaml.safe_load(open(sys.argv[1]))
assert set(config) <= {"$schema", "options", "benchmarks"}, set(config)
assert {"warmup-time", "max-time"} <= set(config["options"]), config["options"]
names = [b["name"] for b in config["benchmarks"]]
assert len(names) == len(set(names)), names
for b in config["benchmarks"]:
    assert set(b) <= {"name", "exec", "options"}, b
    print(b["exec"].replace("trace-10000000", "trace-100000")
                   .replace("allocheavy 2000000", "allocheavy 2000")
                   .replace("storm_threads 2 1000000", "storm_threads 2 2000")
                   .replace("count=2000", "count=20")
                   .replace("loop 300000", "loop 2000")
                   .replace("fresh 300000", "fresh 2000")
                   .replace("py-alloc.py 200000", "py-alloc.py 2000")
                   .replace("py-malloc.py 200000", "py-malloc.py 2000"))
' "$TOP/codspeed.yml"
	assert_success
	local commands="$output" cmd n=0
	for name in "ls -la /usr/lib" "dd if=/dev/zero" "tar -cf -" allocheavy \
		storm_threads mt-encode mt-reconstruct mt-report; do
		assert_output --partial "$name"
	done
	[ "$(grep -c -- '--track-allocators=false' <<<"$commands")" -eq 3 ]
	[ "$(grep -c -- 'physical-or-skip' <<<"$commands")" -eq 3 ]
	[ "$(grep -c -- '--stacks' <<<"$commands")" -eq 7 ]
	# the fixed cost of a session, beside heaptrack's (a bench dependency
	# only: run where it is installed)
	grep -qx 'build/bin/mt-trace -o build/bench/codspeed-true.raw -- /usr/bin/true' <<<"$commands"
	grep -qx 'bench/installed-or-skip heaptrack .* /usr/bin/true' <<<"$commands"
	cd "$TOP"
	while IFS= read -r cmd; do
		# shellcheck disable=SC2086  # CodSpeed splits exec into words too
		run $cmd
		[ "$status" -eq 0 ] || {
			echo "failed ($status): $cmd" >&2
			echo "$output" | tail -5 >&2
			return 1
		}
		n=$((n + 1))
	done <<<"$(sed "s|build/|${MT_BUILD#"$TOP"/}/|g" <<<"$commands")"
	[ "$n" -eq 38 ]
	# the default (the recorder) beside probes alone and heaptrack
	[ "$(grep -c -- '--no-fast' <<<"$commands")" -eq 6 ]
	[ "$(grep -c -- 'installed-or-skip heaptrack' <<<"$commands")" -eq 4 ]
}

@test "physical-or-skip: runs --physical only when mt-trace offers it" {
	# two stand-ins for mt-trace: one whose --help lists --physical
	printf '#!/bin/sh\n[ "$1" = --help ] && { echo "  --physical  PSS"; exit 0; }\necho "ran: $*"\n' >"$T/with"
	printf '#!/bin/sh\n[ "$1" = --help ] && { echo "  -o FILE"; exit 0; }\necho "ran: $*"\n' >"$T/without"
	chmod +x "$T/with" "$T/without"
	run "$TOP/bench/physical-or-skip" "$T/with" -o x -- ls
	assert_success
	assert_output "ran: --physical -o x -- ls"
	run "$TOP/bench/physical-or-skip" "$T/without" -o x -- ls
	assert_success
	assert_output --partial "skipped"
	refute_output --partial "ran:"
}

@test "installed-or-skip: runs a command only where it is installed" {
	printf '#!/bin/sh\necho "ran: $*"\n' >"$T/present"
	chmod +x "$T/present"
	PATH="$T:$PATH" run "$TOP/bench/installed-or-skip" present -o x true
	assert_success
	assert_output "ran: -o x true"
	run "$TOP/bench/installed-or-skip" mt-no-such-tool -o x true
	assert_success
	assert_output --partial "skipped, mt-no-such-tool is not installed"
}

@test "trace-span: the command's own run, exec to exit; a truncated trace is an error" {
	require_bpf
	mt-trace -o "$T/sleep.raw" -- sleep 0.3
	run "$MT_BUILD/bench/trace-span" "$T/sleep.raw"
	assert_success
	run "$PY" -c '
import json, sys
s = json.loads(sys.argv[1])
print(300e6 <= s["run_ns"] < 3e9, s["run_ns"] <= s["first_to_last_ns"],
      s["records"] > 0, s["complete"])
' "$output"
	assert_output "True True True True"

	"$MT_BUILD/tests/mt-gen" --events 1000 --truncate -o "$T/cut.raw"
	run "$MT_BUILD/bench/trace-span" "$T/cut.raw"
	assert_failure 2
}

@test "bench/quiesce: removes the traces the run before wrote, keeps the rest" {
	printf 'last run' >"$T/a.raw"
	printf 'last run' >"$T/b.raw"
	printf 'kept' >"$T/c.raw"
	run "$TOP/bench/quiesce" "$T/a.raw" "$T/b.raw" "$T/none.raw"
	assert_success
	assert_file_not_exists "$T/a.raw"
	assert_file_not_exists "$T/b.raw"
	assert_file_exists "$T/c.raw"
}

@test "bench/warm: removes the stale output, reads the input, fails on none" {
	printf 'trace bytes' >"$T/in"
	printf 'last run' >"$T/out"
	run "$TOP/bench/warm" "$T/in" "$T/out"
	assert_success
	assert_file_not_exists "$T/out"
	assert_file_exists "$T/in"
	run "$TOP/bench/warm" "$T/missing"
	assert_failure
}

@test "BENCH_ONLY: an unknown group is refused by name, before anything runs" {
	run env BENCH_QUICK=1 BENCH_ONLY="true nosuch" OUTPUT="$MT_BUILD" \
		"$TOP/bench/run"
	assert_failure
	assert_output --partial "BENCH_ONLY: no group 'nosuch'"
	refute_output --partial "bench: mt-trace on"
}

@test "BENCH_ONLY: a partial run says so, and runs only its groups" {
	run env BENCH_QUICK=1 BENCH_ONLY="sizes" OUTPUT="$MT_BUILD" \
		"$TOP/bench/run"
	assert_success
	assert_line "PARTIAL RUN: only the groups sizes (BENCH_ONLY)"
	refute_output --partial "bench: mt-trace on"
	refute_output --partial "storm"
}
