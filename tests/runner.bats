#!/usr/bin/env bats
# tests/run itself (make test's runner), on small suites made here: each
# result as it comes with its time, the counts of the last line, the exit
# status, a suite that cannot run counted as a failure, a suite run with
# variables of its own, and a line whenever a test is silent too long.

load helpers

setup() {
	T="$BATS_TEST_TMPDIR"
	# (printf: bats would take a line of a here-document that starts
	# with @test for a test of this file)
	printf '%s\n' '@test "passes" { true; }' \
		'@test "is skipped" { skip "a reason"; }' \
		'@test "fails" { false; }' >"$T/mixed.bats"
	printf '%s\n' '@test "one" { true; }' \
		'@test "two" { [ "${MT_RUNNER_VAR:-unset}" = "${WANT:-unset}" ]; }' \
		>"$T/good.bats"
}

# runner ARGS...: tests/run on the suites ARGS (OUTPUT where no unit test
# is, so that only these suites run), without this bats's own variables
# (a bats started under another takes them for its own)
runner() {
	local unset=() v
	for v in $(compgen -e | grep '^BATS_'); do
		unset+=(-u "$v")
	done
	env "${unset[@]}" OUTPUT=none "$TOP/tests/run" "$@"
}

@test "tests/run: each result with its time, the counts last, non-zero exit on a failure" {
	run runner "$T/mixed.bats"
	assert_failure
	assert_line "# suite: $T/mixed.bats"
	assert_line --regexp '^ok 1 passes in [0-9]+ms$'
	assert_line --regexp '^ok 2 is skipped in [0-9]+ms # skip a reason$'
	assert_line --regexp '^not ok 3 fails in [0-9]+ms$'
	assert_line --regexp "^# suite: $T/mixed.bats: [0-9.]+ s\$"
	assert_line --regexp "^# +[0-9.]+ s  mixed.bats: fails\$"
	[ "${lines[-1]}" = "1 passed, 1 failed, 1 skipped" ]

	run runner "$T/good.bats"
	assert_success
	[ "${lines[-1]}" = "2 passed, 0 failed" ]
}

@test "tests/run: a suite that does not exist or does not parse is a failure" {
	run runner "$T/good.bats" "$T/none.bats"
	assert_failure
	assert_line "not ok - $T/none.bats: bats exited 1"
	[ "${lines[-1]}" = "2 passed, 1 failed" ]
	printf '@test "unclosed" {\n' >"$T/broken.bats"
	run runner "$T/broken.bats"
	assert_failure
	[ "${lines[-1]}" = "0 passed, 1 failed" ]
}

@test "tests/run: VAR=VALUE,...:SUITE runs the suite with them, and says so" {
	WANT=set run runner "MT_RUNNER_VAR=set,OTHER=1:$T/good.bats"
	assert_success
	assert_line "# suite: $T/good.bats (MT_RUNNER_VAR=set,OTHER=1)"
	[ "${lines[-1]}" = "2 passed, 0 failed" ]
	# without them, the test that looks for the variable fails
	WANT=set run runner "$T/good.bats"
	assert_failure
}

@test "tests/run: a test silent longer than MT_TEST_QUIET_MAX seconds gets a line saying so" {
	printf '@test "slow" { sleep 2.5; }\n' >"$T/slow.bats"
	MT_TEST_QUIET_MAX=1 run runner "$T/slow.bats"
	assert_success
	assert_line "# still running: $T/slow.bats, 1 s since the last result"
	assert_line "# still running: $T/slow.bats, 2 s since the last result"
	assert_line --regexp '^ok 1 slow in [0-9]+ms$'
}
