#!/usr/bin/env bats
# SIGINT sent to mt-trace alone (kill -INT PID: a CI runner, a script that
# started it in the background, where it comes with SIGINT ignored) stops
# the trace cleanly (man/mt-trace.1, SIGNALS): the first is passed to
# every process of the traced tree, the next kills them; the session ends
# with the command, its trace complete, nothing of it left.
# Outside truths: what the sleeper fixture logs when a signal reaches it,
# mt-encode and python3-msgpack reading the trailer, /proc (every process
# mt-trace forks carries this test's token in its environment).

load helpers

CHECK="$TOP/tests/lib/trace_check.py"

setup() {
	require_bpf
	T="$BATS_TEST_TMPDIR"
	export T
	export MT_FIXTURE_LOG="$T/fixture.log"
	token="signals-$$-$RANDOM"
	session=""
}

teardown() {
	if [ -n "$session" ]; then
		kill -KILL "$session" 2>/dev/null || true
		wait "$session" 2>/dev/null || true
	fi
}

# start CMD...: mt-trace -o $T/t.raw -- CMD in the background (so with
# SIGINT ignored, as bash starts every background command of a script)
start() {
	MT_SIGNALS_TOKEN=$token mt-trace -o "$T/t.raw" -- "$@" 2>"$T/err" &
	session=$!
}

readies() { cat "$MT_FIXTURE_LOG" 2>/dev/null | grep -c "\"ready\"" || true; }
ready() { [ "$(readies)" -ge "$1" ]; }
alive() { kill -0 "$session" 2>/dev/null; }
token_procs() {
	grep -lz -x "MT_SIGNALS_TOKEN=$token" /proc/[0-9]*/environ 2>/dev/null |
		cut -d/ -f3
}
none_left() { [ -z "$(token_procs)" ]; }

# finish: mt-trace's exit status in $status; the trace read by mt-encode;
# nothing of the session left within 5 s
finish() {
	status=0
	wait "$session" || status=$?
	session=""
	cat "$T/err"
	mt-encode -o "$T/out.msgpack" "$T/t.raw"
	wait_for 5 none_left
}

@test "SIGINT to mt-trace alone reaches every process of the tree, the command's end ends the trace, complete" {
	# two sleepers that catch SIGINT (exit 42), under a shell that
	# ignores it (started so): only a SIGINT to each ends them
	start sh -c '"$0" 60 --catch & "$0" 60 --catch; s=$?; wait; exit $s' \
		"$MT_FIXTURES/sleeper"
	wait_for 20 ready 2
	kill -INT "$session"
	finish
	[ "$status" = 42 ]
	# each sleeper caught it
	run jq -c 'select(.info == "signal") | .value' "$MT_FIXTURE_LOG"
	assert_output $'2\n2'
	run "$PY" "$CHECK" meta "$T/out.msgpack"
	run jq -c '.trailer | [.complete, .exit_code]' <<<"$output"
	assert_output '[true,42]'
	grep -q 'interrupted: SIGINT passed to the 3 processes' "$T/err"
}

@test "a command that ignores SIGINT: the second SIGINT to mt-trace kills the tree; 137, the trace complete" {
	start "$MT_FIXTURES/sleeper" 60
	wait_for 20 ready 1
	kill -INT "$session"
	# the first is passed on, and ignored: the session goes on
	wait_for 5 grep -q 'another SIGINT kills them' "$T/err"
	sleep 0.2
	alive
	kill -INT "$session"
	finish
	[ "$status" = 137 ]
	run "$PY" "$CHECK" meta "$T/out.msgpack"
	run jq -c '.trailer | [.complete, .signal]' <<<"$output"
	assert_output '[true,9]'
}
