#!/usr/bin/env bats
# Nothing shared between sessions, nothing left on the host (issue 31
# part 2; man/mt-trace.1, FILES): once a session has ended and its
# background detacher has finished, the host holds nothing of it: no BPF
# program, link or map, no mount, no file under /run, no process, no
# kernel log line.
# Outside truths: the kernel's ids of the BPF objects the session held
# (/proc/PID/fdinfo while it runs, `bpftool -j ... show` after), its mount
# namespace (/proc/PID/ns/mnt: every process mt-trace forks after entering
# it is in it, its detacher included), the host's /proc/self/mountinfo,
# dmesg, strace's record of every path the session's processes named.
# Other mt-trace sessions run on this machine: only what this test's own
# session made is counted.

load helpers

STATE="$TOP/tests/lib/host_state.py"

setup() {
	require_bpf
	require_command bpftool jq
	T="$BATS_TEST_TMPDIR"
	export T
	session=""
	tree_pid=""
	ns_pin=""
}

teardown() {
	[ -z "$ns_pin" ] || exec {ns_pin}<&-
	for p in $tree_pid $session; do
		kill -KILL "$p" 2>/dev/null || true
	done
	for p in $session; do
		wait "$p" 2>/dev/null || true
	done
}

wait_ready() {
	for _ in $(seq 400); do
		grep -q '"ready"' "$1" 2>/dev/null && return 0
		kill -0 "$session" 2>/dev/null || break
		sleep 0.05
	done
	echo "$1: never ready" >&2
	cat "$T/session.err" >&2
	return 1
}

# before: what the host holds before the session (mounts, dmesg's length,
# whether /run/mt-trace is there)
before() {
	"$PY" "$STATE" mounts >"$T/mounts.before"
	dmesg | wc -l >"$T/dmesg.before"
	if [ -e /run/mt-trace ]; then echo yes; else echo no; fi >"$T/run.before"
}

# start_session [MT-TRACE OPTIONS]: mt-trace -- sleeper in the background,
# until the sleeper runs; then what the session holds, in $T/held.json.
# Sets session (mt-trace's pid), tree_pid (the sleeper's), ns.
start_session() {
	rm -f "$T/tree.log"
	before
	MT_FIXTURE_LOG="$T/tree.log" mt-trace "$@" -o "$T/s.raw" -- \
		"$MT_FIXTURES/sleeper" 60 2>"$T/session.err" &
	session=$!
	wait_ready "$T/tree.log"
	tree_pid=$(jq -r 'select(.info == "ready") | .pid' "$T/tree.log")
	"$PY" "$STATE" held "$session" >"$T/held.json"
	ns=$(jq -r .ns "$T/held.json")
	# held open until the test ends: a namespace's number is free for a
	# new one once its last process is gone, and another suite's session
	# (hostile.bats' fixture, once) then showed as this one's, "left"
	exec {ns_pin}<"/proc/$session/ns/mnt"
	[ "mnt:[$(stat -L -c %i "/proc/self/fd/$ns_pin")]" = "$ns" ]
	echo "session $session in $ns holds: $(jq -c 'del(.ns) | map_values(length)' "$T/held.json")"
	# the control: a session holds links (probes, tracepoints), programs
	# and maps, and is in a mount namespace of its own (the tree's private
	# copies)
	[ "$(jq '.links | length' "$T/held.json")" -ge 5 ]
	[ "$(jq '.progs | length' "$T/held.json")" -ge 5 ]
	[ "$(jq '.maps | length' "$T/held.json")" -ge 5 ]
	[ "$ns" != "$(readlink /proc/self/ns/mnt)" ]
	[ -n "$("$PY" "$STATE" in_ns "$ns")" ]
}

# end_session: the sleeper ended (SIGTERM), mt-trace with it (its exit
# status says so: 128 + 15)
end_session() {
	local status=0
	kill "$tree_pid"
	wait "$session" || status=$?
	session=""
	[ "$status" = 143 ]
}

# wait_gone: the session's processes all gone (mt-trace's detacher, its
# watchdog, its closer: every one is in its mount namespace), waited for
# as they end; the man page's "within a second or so", with room for a
# busy machine: 5 s at most
wait_gone() {
	local left end=$(($(date +%s%N) + 5000000000))
	while :; do
		left=$("$PY" "$STATE" in_ns "$ns")
		[ -z "$left" ] && return 0
		[ "$(date +%s%N)" -lt "$end" ] || break
		sleep 0.05
	done
	echo "processes of the session still there 5 s after its end:" >&2
	for p in $left; do
		echo "$p $(cat "/proc/$p/comm" 2>/dev/null)" >&2
	done
	return 1
}

# assert_nothing_left: none of the session's BPF objects, no mount, no
# /run/mt-trace made, no kernel log line of it.  (Earlier versions of
# mt-trace kept state in /run/mt-trace, and may still run on a machine:
# what this session did there, nothing, is strace's to tell, below.)
assert_nothing_left() {
	# the kernel frees a program's maps after an RCU grace period once the
	# program's last reference is gone (bpf_prog_put: deferred work), a
	# moment after the last process: waited for, as the processes are
	local end=$(($(date +%s%N) + 5000000000))
	until "$PY" "$STATE" left "$T/held.json" >/dev/null; do
		[ "$(date +%s%N)" -lt "$end" ] || break
		sleep 0.05
	done
	run "$PY" "$STATE" left "$T/held.json"
	echo "BPF objects of the session left 5 s after its processes: ${output:-none}"
	assert_success
	assert_output ""
	# mounts: none of its made on the host (bpffs, ramfs, /run/mt-trace)
	"$PY" "$STATE" mounts >"$T/mounts.after"
	run awk 'NR == FNR { was[$1] = 1; next }
		!($1 in was) && ($2 ~ "^/run/mt-trace" || $3 == "bpf" ||
			$3 == "ramfs")' "$T/mounts.before" "$T/mounts.after"
	echo "new mounts: ${output:-none}"
	assert_output ""
	# /run/mt-trace: not made
	if [ "$(cat "$T/run.before")" = no ]; then
		[ ! -e /run/mt-trace ]
	fi
	# the kernel's log: no line of it
	run bash -c 'dmesg | tail -n +$(($(cat "$T/dmesg.before") + 1)) |
		grep -i -E "mt-trace|uprobe|bpf"'
	echo "new kernel log lines: ${output:-none}"
	assert_output ""
}

@test "a session's end leaves nothing on the host once its detacher is done: no BPF program, link or map, no mount, no file under /run, no process, no kernel log line" {
	start_session
	end_session
	wait_gone
	assert_nothing_left
	# and the trace is whole
	run mt-encode -o "$T/s.msgpack" "$T/s.raw"
	assert_success
}

@test "--wait-detach: the probes and tracepoints are gone when mt-trace exits, the rest once its watchdog is" {
	start_session --wait-detach
	end_session
	# no link is left at the moment it is gone (its watchdog, killed on
	# the way out, holds three maps, no link)
	run "$PY" "$STATE" left "$T/held.json"
	echo "left at mt-trace's exit: ${output:-none}"
	refute_output --partial link
	wait_gone
	assert_nothing_left
}

@test "--fast: nothing left either (its recorder's rings, the links of processes without it, their closer)" {
	start_session --fast
	end_session
	wait_gone
	assert_nothing_left
}

@test "mt-trace killed with SIGKILL mid-session: once its tree is gone, nothing of it is left" {
	start_session
	kill -KILL "$session"
	wait "$session" || true
	session=""
	kill "$tree_pid"
	wait_gone
	assert_nothing_left
}

@test "no path under /run is ever named and no BPF object pinned or taken from a pin by a session's processes, its detacher included (strace -f)" {
	require_command strace
	# strace -f follows every process mt-trace forks and exits once the
	# last is gone: the detacher too
	ASAN_OPTIONS=detect_leaks=0 run strace -f -qq -o "$T/st" \
		-e trace=%file,bpf,mount,fsmount,move_mount \
		mt-trace -o "$T/t.raw" -- "$MT_FIXTURES/malloc_free"
	assert_success
	# the control: strace saw the session's BPF calls and its paths
	grep -q 'BPF_PROG_LOAD' "$T/st"
	grep -q 'libc.so.6' "$T/st"
	run grep -E '"/run[/"]|BPF_OBJ_(PIN|GET),' "$T/st"
	echo "${output:-none}"
	assert_output ""
}
