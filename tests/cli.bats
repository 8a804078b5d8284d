#!/usr/bin/env bats
# The command line's conventions, the same on every tool: a usage error is
# "mt-X: what was wrong" then "Try 'mt-X --help'." on stderr and exit 2
# (125 for mt-trace, whose 2 may be the command's); messages name the
# tool, not the path it was run by; -V is --version.

bats_require_minimum_version 1.5.0
load helpers

TOOLS="mt-trace mt-encode mt-reconstruct mt-report"

usage_status() {
	[ "$1" = mt-trace ] && echo 125 || echo 2
}

@test "an unknown option: the tool's name (run by a path), what, Try --help; exit 2 (mt-trace 125)" {
	cd "$MT_BIN"
	for t in $TOOLS; do
		run --separate-stderr "./$t" --bogus
		[ "$status" = "$(usage_status "$t")" ]
		assert_output ""
		[ "$stderr" = "$t: unrecognized option '--bogus'
Try '$t --help'." ]
	done
}

@test "a bad value: the same two lines on every tool" {
	run --separate-stderr mt-encode --level 99
	assert_failure 2
	[ "$stderr" = "mt-encode: --level: expected 1 to 19, got '99'
Try 'mt-encode --help'." ]
	run --separate-stderr mt-report --top many x
	assert_failure 2
	[ "$stderr" = "mt-report: --top: not a count or \"all\": many
Try 'mt-report --help'." ]
	run --separate-stderr mt-reconstruct --max-points 2 x
	assert_failure 2
	[ "$stderr" = "mt-reconstruct: --max-points: at least 4, not 2
Try 'mt-reconstruct --help'." ]
	run --separate-stderr mt-trace --ring-size 3 -- true
	assert_failure 125
	[ "${stderr_lines[1]}" = "Try 'mt-trace --help'." ]
	[[ "${stderr_lines[0]}" == "mt-trace: --ring-size: '3' is not a power of two"* ]]
}

@test "-V is --version on every tool, documented in --help and the man page" {
	for t in $TOOLS; do
		run "$t" -V
		assert_success
		[ "$output" = "$("$t" --version)" ]
		[[ "$output" == "$t (mt) "* ]]
		"$t" --help | grep -q -- "-V, --version"
		grep -q 'Fl V , Fl -version\|^\.BR \\-V ", " \\-\\-version' "$TOP/man/$t.1"
	done
}
