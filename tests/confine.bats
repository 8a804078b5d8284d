#!/usr/bin/env bats
# Probes trap only the traced tree (issue 12 part 2; lib/capture/probes/confine.c):
# a process started outside the tree is never trapped by a session's
# allocator probes, its libc text stays the file's, valgrind beside a
# session works; --global-probes and a missing CAP_SYS_ADMIN fall back to
# probes for everyone, said on stderr and in the raw header.
# Outside truths: the kernel's own run count of the session's BPF program
# (BPF_ENABLE_STATS, tests/lib/probe_hits.py), /proc/PID/mem against the
# ELF file, valgrind's exit status.

load helpers

HITS="$TOP/tests/lib/probe_hits.py"
HOST_LIBC=$(realpath /lib/x86_64-linux-gnu/libc.so.6)

setup() {
	require_bpf
	T="$BATS_TEST_TMPDIR"
	export T
	# where libc's probes trap: with the recorder (the default) libc and
	# libstdc++ carry none, so every session here is probes alone
	# (--no-fast); the recorder's own confinement is fast.bats's
	export MT_FAST=0
	session=""
	outside=""
	watcher=""
}

teardown() {
	if [ -n "${shared_dir:-}" ]; then
		rm -rf "$shared_dir"
	fi
	for p in $watcher $outside $session; do
		kill "$p" 2>/dev/null || true
	done
	for p in $session; do
		wait "$p" 2>/dev/null || true
	done
}

# start_session [MT-TRACE OPTIONS]: mt-trace -o $T/s.raw -- sleeper, in
# the background; returns once the sleeper runs.  Sets session (mt-trace's
# pid) and tree_pid (the sleeper's).
start_session() {
	rm -f "$T/tree.log"
	MT_FIXTURE_LOG="$T/tree.log" mt-trace "$@" -o "$T/s.raw" -- \
		"$MT_FIXTURES/sleeper" 60 2>"$T/session.err" &
	session=$!
	wait_ready "$T/tree.log"
	tree_pid=$(jq -r 'select(.info == "ready") | .pid' "$T/tree.log")
}

# start_outside: a sleeper that is not part of any session; sets outside.
start_outside() {
	MT_FIXTURE_LOG="$T/outside.log" "$MT_FIXTURES/sleeper" 60 &
	outside=$!
	wait_ready "$T/outside.log"
}

wait_ready() {
	for _ in $(seq 200); do
		grep -q '"ready"' "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	echo "$1: never ready" >&2
	cat "$T/session.err" >&2 2>/dev/null
	return 1
}

# end_session: the sleeper ends, mt-trace writes its trailer and exits.
end_session() {
	kill "$tree_pid"
	wait "$session" || true
	session=""
}

header_flags() {
	"$PY" -c 'import struct, sys
d = open(sys.argv[1], "rb").read(36)
print(struct.unpack_from("<I", d, 32)[0])' "$1"
}

# start_watch / stop_watch: the other mt-trace sessions (not ours) that
# ran meanwhile, sampled every 50 ms; stop_watch prints how many.
start_watch() {
	(while :; do
		pgrep -x mt-trace
		sleep 0.05
	done) >"$T/others" 2>/dev/null &
	watcher=$!
}

stop_watch() {
	kill "$watcher"
	wait "$watcher" 2>/dev/null || true
	watcher=""
	grep -vx "$session" "$T/others" | sort -u | grep -c . || true
}

# Another mt-trace session with global probes (an older binary, or one
# run with --global-probes) patches every process's libc: what a test
# then sees outside the tree is not this session's doing.
foreign_probes_note() {
	if [ -n "${CI:-}" ]; then
		echo "another session's global probes are on this machine: $1" >&2
		return 1
	fi
	skip "another session's global probes are on this machine: $1"
}

@test "a bystander's 100,000 malloc+free pairs: the session's allocator program runs 0 times (--global-probes: >= 200,000)" {
	start_session
	run "$PY" "$HITS" runs "$session" -- "$MT_FIXTURES/bystander" 100000 1
	assert_success
	echo "$output"
	confined=$(echo "$output" | jq -s '.[1].runs')
	[ "$(echo "$output" | jq -s '.[1].status')" = 0 ]
	end_session
	[ "$confined" -eq 0 ]

	start_session --global-probes
	run "$PY" "$HITS" runs "$session" -- "$MT_FIXTURES/bystander" 100000 1
	assert_success
	echo "$output"
	global=$(echo "$output" | jq -s '.[1].runs')
	end_session
	[ "$global" -ge 200000 ]
}

@test "a known allocator library (jemalloc) the tree preloads is a copy too: a bystander preloading it is not trapped (--global-probes: it is)" {
	local je=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
	for probes in confined global; do
		rm -f "$T/tree.log"
		MT_FIXTURE_LOG="$T/tree.log" mt-trace -v \
			$([ $probes = global ] && echo --global-probes) \
			-o "$T/s.raw" -- env LD_PRELOAD="$je" \
			"$MT_FIXTURES/sleeper" 60 2>"$T/session.err" &
		session=$!
		wait_ready "$T/tree.log"
		tree_pid=$(jq -r 'select(.info == "ready") | .pid' "$T/tree.log")
		# the tree's jemalloc is probed (found when it was mapped)
		grep -q "libjemalloc.so.2: jemalloc" "$T/session.err"
		run "$PY" "$HITS" runs "$session" -- \
			env LD_PRELOAD="$je" "$MT_FIXTURES/bystander" 100000 1
		assert_success
		echo "$probes: $output"
		hits=$(echo "$output" | jq -s '.[1].runs')
		end_session
		if [ $probes = confined ]; then
			[ "$hits" -eq 0 ]
		else
			[ "$hits" -ge 200000 ]
		fi
	done
}

@test "the tree maps a private copy of libc with the probe's int3 at malloc; a process outside keeps the host's file, its malloc bytes the file's" {
	start_outside
	run "$PY" "$HITS" code "$outside" malloc
	assert_success
	before="$output"
	start_session
	run "$PY" "$HITS" code "$tree_pid" malloc
	assert_success
	tree="$output"
	start_watch
	run "$PY" "$HITS" code "$outside" malloc
	foreign=$(stop_watch)
	assert_success
	during="$output"
	end_session
	echo "tree: $tree" "outside before: $before" "during: $during"
	host=$(stat -L -c '%i' "$HOST_LIBC")
	# the tree: another inode, and the probe in its text
	[ "$(echo "$tree" | jq -r '.dev_ino | split(" ")[1]')" != "$host" ]
	[ "$(echo "$tree" | jq -r '.mem[0:2]')" = cc ]
	[ "$(echo "$tree" | jq -r '.file[0:2]')" != cc ]
	# outside: the host's inode, and its text untouched by this session
	[ "$(echo "$during" | jq -r '.dev_ino | split(" ")[1]')" = "$host" ]
	if [ "$(echo "$before" | jq -r '.mem == .file')" != true ]; then
		foreign_probes_note "malloc was patched before this session"
	fi
	if [ "$(echo "$during" | jq -r '.mem == .file')" != true ] &&
		[ "$foreign" -gt 0 ]; then
		foreign_probes_note "malloc was patched while $foreign other session(s) ran"
	fi
	[ "$(echo "$during" | jq -r '.mem == .file')" = true ]
}

@test "valgrind beside a session exits 0 (beside --global-probes it dies of SIGTRAP)" {
	run valgrind -q --error-exitcode=99 /bin/ls /
	if [ "$status" -ne 0 ]; then
		foreign_probes_note "valgrind failed with no session of ours ($status)"
	fi
	start_session
	start_watch
	run valgrind -q --error-exitcode=99 /bin/ls /
	foreign=$(stop_watch)
	end_session
	echo "$output" | tail -5
	if [ "$status" -ne 0 ] && [ "$foreign" -gt 0 ]; then
		foreign_probes_note "valgrind failed while $foreign other session(s) ran"
	fi
	assert_success

	start_session --global-probes
	run valgrind -q --error-exitcode=99 /bin/ls /
	end_session
	[ "$status" -eq 133 ] # 128 + SIGTRAP
}

@test "raw header: the confined flag (0x20) by default, not with --global-probes; no warning either way" {
	run mt-trace -o "$T/a.raw" -- "$MT_FIXTURES/malloc_free"
	assert_success
	refute_output --partial "probes are global"
	(($(header_flags "$T/a.raw") & 0x20))
	run mt-trace --global-probes -o "$T/b.raw" -- "$MT_FIXTURES/malloc_free"
	assert_success
	refute_output --partial "probes are global"
	((($(header_flags "$T/b.raw") & 0x20) == 0))
	(($(header_flags "$T/b.raw") & 0x1)) # allocators traced
}

@test "mt-trace probes the copy the tree maps: libc is found once, before the command, not again when the command maps it" {
	# the copies are bound by a thread while the BPF side loads; had
	# mt-trace looked at libc from another mount namespace, it would
	# have probed the host's file (for everyone) and found the tree's
	# copy again at the command's exec
	run mt-trace -v -o "$T/a.raw" -- "$MT_FIXTURES/malloc_free"
	assert_success
	[ "$(grep -c 'libc.so.6: libc, [0-9]* probes' <<<"$output")" -eq 1 ]
	(($(header_flags "$T/a.raw") & 0x20))
}

@test "without CAP_SYS_ADMIN: probes for everyone, said once on stderr, flag clear, the calls still traced" {
	MT_FIXTURE_LOG="$T/fx.log" run setpriv --bounding-set=-sys_admin \
		mt-trace -o "$T/c.raw" -- "$MT_FIXTURES/malloc_free"
	assert_success
	echo "$output"
	[ "$(echo "$output" | grep -c "allocator probes are global")" = 1 ]
	echo "$output" | grep -q "unshare(CLONE_NEWNS): Operation not permitted"
	((($(header_flags "$T/c.raw") & 0x20) == 0))
	run sh -c "mt-encode <'$T/c.raw' >'$T/out.msgpack'"
	assert_success
	[ "$(jq_events '[.[] | select(.type == "Malloc" and .size == 4321)] | length')" = 1 ]
}

@test "an exec'd program, a fork-only subshell and a grandchild shell of the tree all map the copy, not the host's libc" {
	host=$(stat -L -c '%i' "$HOST_LIBC")
	run mt-trace -o "$T/d.raw" -- sh -c '
		grep -m1 libc.so.6 /proc/self/maps
		(while read -r l; do
			case $l in *libc.so.6*) echo "$l"; break ;; esac
		done </proc/self/maps)
		sh -c "grep -m1 libc.so.6 /proc/\$\$/maps"'
	assert_success
	echo "$output"
	[ "$(echo "$output" | grep -c 'libc\.so\.6$')" = 3 ]
	echo "$output" | grep 'libc\.so\.6$' | awk '{print $5}' | {
		while read -r ino; do [ "$ino" != "$host" ]; done
	}
}

@test "a setuid-root program run by nobody inside the tree (AT_SECURE) maps the copy and is traced: its malloc(4321) and free" {
	shared_dir=$(mktemp -d /tmp/mt-confine.XXXXXX)
	chmod 755 "$shared_dir"
	cp "$MT_FIXTURES/malloc_free" "$shared_dir/suid_malloc_free"
	chmod 4755 "$shared_dir/suid_malloc_free"
	# a nosuid mount would run it without AT_SECURE, proving nothing
	run findmnt -n -o OPTIONS --target "$shared_dir"
	refute_output --partial nosuid
	trace_ok -- setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$shared_dir/suid_malloc_free"
	# the setuid process: uid 65534 ran it, euid 0, its own pid
	pid=$(jq_events -r '[.[] | select(.type == "Exec" and (.path // "" | endswith("suid_malloc_free")))][0].pid')
	[ -n "$pid" ]
	[ "$pid" != null ]
	[ "$(jq_events "[.[] | select(.pid == $pid and .type == \"Malloc\" and .size == 4321)] | length")" = 1 ]
	[ "$(jq_events "[.[] | select(.pid == $pid and .type == \"Free\")] | length")" -ge 1 ]
}

# libc_inode PID: the inode of the libc.so.6 that PID maps
libc_inode() {
	awk '/libc\.so\.6$/ { print $5; exit }' "/proc/$1/maps"
}

# libc_dev PID: the device (MAJOR:MINOR, as mountinfo writes it) of the
# libc.so.6 that PID maps
libc_dev() {
	local hex
	hex=$(awk '/libc\.so\.6$/ { print $4; exit }' "/proc/$1/maps")
	[ -n "$hex" ] && echo "$((16#${hex%:*})):$((16#${hex#*:}))"
}

@test "each session copies afresh: its tree maps a private copy, not the host's libc, with the probe at malloc, on a file system no host mount shows" {
	start_session -v
	cat "$T/session.err"
	grep -q 'private copies, ' "$T/session.err"
	host=$(stat -L -c '%i' "$HOST_LIBC")
	tree=$(libc_inode "$tree_pid")
	dev=$(libc_dev "$tree_pid")
	echo "tree's libc: inode $tree on $dev; host's: inode $host"
	[ -n "$tree" ]
	[ "$tree" != "$host" ]
	# the copy's file system is mounted in the session's namespace alone
	# (a bind over the path there): the host's mount table has no mount of
	# it, the session's has
	[ -n "$dev" ]
	run awk -v dev="$dev" '$3 == dev' /proc/self/mountinfo
	assert_output ""
	run awk -v dev="$dev" '$3 == dev { print $5 }' "/proc/$tree_pid/mountinfo"
	assert_output --partial "libc.so.6"
	run "$PY" "$HITS" code "$tree_pid" malloc
	assert_success
	[ "$(echo "$output" | jq -r '.mem[0:2]')" = cc ]
	end_session
	# and the trace is whole: the sleeper's own start-up is there
	run mt-encode "$T/s.raw"
	assert_success
}

@test "two sessions at once map different copies, neither the host's libc" {
	start_session -v
	outside="$tree_pid $session" # the first: teardown ends it
	first_tree=$tree_pid
	start_session -v
	host=$(stat -L -c '%i' "$HOST_LIBC")
	a=$(libc_inode "$first_tree")
	b=$(libc_inode "$tree_pid")
	echo "first $a on $(libc_dev "$first_tree"), second $b on $(libc_dev "$tree_pid"), host $host"
	[ -n "$a" ]
	[ -n "$b" ]
	[ "$(libc_dev "$first_tree")" != "$(libc_dev "$tree_pid")" ]
	[ "$a" != "$host" ]
	[ "$b" != "$host" ]
	end_session
}

@test "--no-keep-copies (obsolete: nothing is kept between sessions) is accepted and changes nothing" {
	start_session -v --no-keep-copies
	cat "$T/session.err"
	grep -q 'private copies, ' "$T/session.err"
	host=$(stat -L -c '%i' "$HOST_LIBC")
	tree=$(libc_inode "$tree_pid")
	[ -n "$tree" ]
	[ "$tree" != "$host" ]
	end_session
	run mt-encode "$T/s.raw"
	assert_success
}
