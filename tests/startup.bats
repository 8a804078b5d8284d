#!/usr/bin/env bats
# mt-trace's start-up, one plan of named steps (lib/capture, startup.c):
# -vv times each under its name, and a start that fails at any of them
# lets go of everything it took.  MT_TRACE_FAIL_AT=NAME makes the step
# NAME fail (mt-trace(1), ENVIRONMENT); with ":stop", mt-trace stops
# itself (SIGSTOP) once at the failure and once after it let go, so that
# this test can read what it holds at both moments.
# Outside truths: the kernel's ids of the BPF objects the session held
# (/proc/PID/fdinfo at the failure, `bpftool -j ... show` after), its
# threads and descriptors (/proc/PID/task, /proc/PID/fd), the processes
# carrying this test's token in their environment (every process mt-trace
# forks inherits it: the command, the watchdog, the detacher), the host's
# mounts.  Other sessions run on this machine: only this one's are counted.

load helpers

setup() {
	require_bpf
	T="$BATS_TEST_TMPDIR"
	export T
}

# The plan's steps, as -vv names them (a new step is in it by itself).
plan_steps() {
	mt-trace -vv "$@" -o /dev/null -- true 2>&1 >/dev/null |
		sed -n 's/^mt-trace: start-up: \(.*[^ ]\)  *[0-9.]* ms$/\1/p' |
		grep -v -e ' (waited)$' -e '^total$'
}

# fail_at STEP [OPTIONS]: a session made to fail at STEP, checked
# (tests/lib/failed_start.py says how)
fail_at() {
	"$PY" "$TOP/tests/lib/failed_start.py" "$T" "$@"
}

@test "-vv names the plan's steps; every one of them is one MT_TRACE_FAIL_AT makes fail" {
	plan_steps >"$T/steps"
	cat "$T/steps"
	# the control: the plan's main steps are there
	for step in "open BPF object" "fork" "BPF load" "first allocators" \
		"tracepoints" "release"; do
		grep -q -x -F "$step" "$T/steps"
	done
	# a name not in the plan fails nothing
	MT_TRACE_FAIL_AT="no such step" run mt-trace -o /dev/null -- true
	assert_success
}

@test "a start failed at each step of the plan: 125, the step named, the command not run, nothing of the session left (processes, threads, descriptors, BPF objects, mounts)" {
	plan_steps >"$T/steps"
	[ "$(wc -l <"$T/steps")" -ge 15 ]
	while IFS= read -r step; do
		fail_at "$step"
	done <"$T/steps"
}

@test "--fast: a start failed after its recorders' rings are made lets go of them too" {
	plan_steps --fast >"$T/steps"
	# the steps after the rings' (each of the others is the test above's)
	for step in "mount namespace" "fork" "BPF load" "first allocators" \
		"release"; do
		grep -q -x -F "$step" "$T/steps"
		fail_at "$step" --fast
	done
}
