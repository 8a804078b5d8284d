#!/usr/bin/env bats
# Under sudo, mt-trace acts as the invoking user for every path a user
# names (issue 31, section 3): --scan, --libc, MT_SCAN and MT_PRELOAD are
# opened with the user's rights, and a file the user may not read fails
# with the user's errno, saying nothing of whether it exists, is ELF or
# which allocator it holds; -o, --child-stdout and --control are created
# by the user.  What mt-trace sees under sudo is root's uid with SUDO_UID,
# SUDO_GID and SUDO_USER set: the tests set them as root (no sudoers
# needed).  The user is nobody (uid 65534).  A set-user-ID root mt-trace
# acts for the real uid the same way.

load helpers

NOBODY=65534
CHECK="$TOP/tests/lib/trace_check.py"
ALLOC="$MT_FIXTURES/alloc"
# jemalloc's thread-local data needs more static TLS than glibc keeps spare
# for dlopen (as in allocators.bats)
DLOPEN_TUNABLES=glibc.rtld.optional_static_tls=16384

setup() {
	T="$BATS_TEST_TMPDIR"
	export T
	# S: anyone may write (the user's outputs, the fixture's log);
	# R: only root may enter; O: anyone may read, its files root's
	S=$(mktemp -d /tmp/mt-sudo-s.XXXXXX)
	R=$(mktemp -d /tmp/mt-sudo-r.XXXXXX)
	O=$(mktemp -d /tmp/mt-sudo-o.XXXXXX)
	chmod 1777 "$S"
	chmod 700 "$R"
	chmod 755 "$O"
	export MT_FIXTURE_LOG="$S/fixture.log" MT_FIXTURES
}

teardown() {
	rm -rf "$S" "$R" "$O"
}

# sudo_mt ARGS...: mt-trace as sudo runs it for nobody
sudo_mt() {
	env SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody mt-trace "$@"
}

# hidden FILE: copies of FILE the user may not read: in R (with a text
# file beside it, and a name nothing has), and in O with mode 0600.
# Prints the four paths.
hidden() {
	local base
	base=$(basename "$1")
	cp "$1" "$R/$base"
	echo "not ELF" >"$R/text"
	cp "$1" "$O/$base"
	chmod 600 "$O/$base"
	echo "$R/$base $R/text $R/missing $O/$base"
}

# refused WHAT PATH STATUS-LINE...: the run failed (125) with exactly
# "mt-trace: WHAT PATH: Permission denied" first, nothing ran, no trace
# file was left
refused() {
	echo "$output"
	assert_failure 125
	assert_line --index 0 "mt-trace: $1: Permission denied"
	refute_output --partial "ELF"
	refute_output --partial "probes"
	refute_output --partial "allocator"
	[ ! -e "$S/ran" ]
	[ ! -e "$S/t.raw" ]
}

check_log() {
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" \
		--kinds alloc
	if [ "$status" != 0 ]; then
		echo "--- mt-trace's stderr:"
		cat "$T/trace.err"
	fi
	assert_success
}

# allocator_paths: the path of every Allocator record of the trace
allocator_paths() {
	"$PY" "$CHECK" dump "$T/out.msgpack" --type Allocator | jq -r .path
}

# ---- files the user may not read --------------------------------------------

@test "--scan of a file the user may not read: their errno, naming it; the same whether it exists, is ELF or not; nothing runs" {
	require_bpf
	for f in $(hidden "$ALLOC/libmyalloc.so"); do
		run sudo_mt --scan "$f" -o "$S/t.raw" -- touch "$S/ran"
		refused "--scan $f"
		[ "${#lines[@]}" = 1 ]
	done
	# root itself reads it, as before: the file is an allocator's
	run mt-trace -v --scan "$O/libmyalloc.so" -o "$S/t.raw" -- true
	assert_success
	assert_output --partial "$O/libmyalloc.so: jemalloc"
}

@test "MT_SCAN naming a file the user may not read: their errno, naming it, whatever the file; nothing runs" {
	require_bpf
	for f in $(hidden "$ALLOC/libmyalloc.so"); do
		# a readable file first: each entry is opened as the user
		MT_SCAN="$ALLOC/libmyalloc.so:$f" \
			run sudo_mt -o "$S/t.raw" -- touch "$S/ran"
		refused "MT_SCAN: $f"
		[ "${#lines[@]}" = 1 ]
	done
	MT_SCAN="$O/libmyalloc.so" run mt-trace -v -o "$S/t.raw" -- true
	assert_success
	assert_output --partial "$O/libmyalloc.so: jemalloc"
}

@test "--libc naming a file the user may not read: their errno, naming it, whatever the file; nothing runs" {
	require_bpf
	libc=$(ldd "$ALLOC/libc_family" | awk '/libc.so.6/ { print $3 }')
	[ -r "$libc" ]
	for f in $(hidden "$libc"); do
		run sudo_mt --libc "$f" -o "$S/t.raw" -- touch "$S/ran"
		refused "--libc $f"
		[ "${#lines[@]}" = 1 ]
	done
}

@test "--fast with MT_PRELOAD naming a file the user may not read: their errno, naming it; nothing runs, no trace file left" {
	require_bpf
	for f in $(hidden "$MT_BUILD/lib/libmt-preload.so"); do
		MT_PRELOAD="$f" \
			run sudo_mt --fast -o "$S/t.raw" -- touch "$S/ran"
		refused "MT_PRELOAD: $f"
	done
}

@test "-o, --child-stdout and --control where the user may not write: their errno, naming the path; nothing made, nothing run" {
	require_bpf
	for dir in "$R" "$O"; do
		run sudo_mt -o "$dir/t.raw" -- touch "$S/ran"
		echo "$output"
		assert_failure 125
		assert_output "mt-trace: $dir/t.raw: Permission denied"
		run sudo_mt --child-stdout "$dir/c.out" -o "$S/t.raw" -- \
			touch "$S/ran"
		assert_failure 125
		assert_output "mt-trace: --child-stdout: $dir/c.out: Permission denied"
		run sudo_mt --control "$dir/ctl" -o "$S/t.raw" -- touch "$S/ran"
		echo "$output"
		assert_failure 125
		assert_output --partial "$dir/ctl: Permission denied"
		[ ! -e "$S/ran" ]
		[ ! -e "$S/t.raw" ]
		run ls -A "$dir"
		refute_output --partial t.raw
		refute_output --partial c.out
		refute_output --partial ctl
	done
}

# ---- files the user may read: traced as before --------------------------------

@test "under sudo, --scan and MT_SCAN of a readable library: each of its 100 calls one event, named as the user named it" {
	require_bpf
	export GLIBC_TUNABLES=$DLOPEN_TUNABLES
	SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody \
		trace_ok --scan "$ALLOC/libmyalloc.so" -- "$ALLOC/dlopen_alloc" main
	check_log
	run allocator_paths
	assert_line "$ALLOC/libmyalloc.so"
	refute_output --partial /proc/self/fd
	rm -f "$MT_FIXTURE_LOG"
	SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody \
		MT_SCAN="$ALLOC/libmyalloc.so" \
		trace_ok -- "$ALLOC/dlopen_alloc" main
	check_log
	run allocator_paths
	assert_line "$ALLOC/libmyalloc.so"
	refute_output --partial /proc/self/fd
}

@test "under sudo, --libc naming the C library the program uses: every call traced, the file named as the user named it" {
	require_bpf
	libc=$(ldd "$ALLOC/libc_family" | awk '/libc.so.6/ { print $3 }')
	SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody \
		trace_ok --libc "$libc" -- "$ALLOC/libc_family"
	check_log
	run allocator_paths
	assert_line "$libc"
	refute_output --partial /proc/self/fd
}

@test "under sudo, --fast with MT_PRELOAD naming a readable copy of the recorder: every call traced" {
	require_bpf
	cp "$MT_BUILD/lib/libmt-preload.so" "$O/p.so"
	chmod 644 "$O/p.so"
	SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody MT_PRELOAD="$O/p.so" \
		trace_ok --fast -- "$ALLOC/libc_family"
	check_log
	grep -q "MT_PRELOAD" "$T/trace.err" && fail "a message about MT_PRELOAD"
	true
}

# ---- set-user-ID root ---------------------------------------------------------

@test "a set-user-ID root mt-trace acts for the real user, whatever SUDO_UID says: their errno, their files" {
	require_bpf
	cp "$MT_BIN/mt-trace" "$O/mt-trace"
	chmod 4755 "$O/mt-trace"
	set -- $(hidden "$ALLOC/libmyalloc.so")
	run setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups \
		env SUDO_UID=0 SUDO_GID=0 "$O/mt-trace" --no-fast --scan "$1" \
		-o "$S/t.raw" -- touch "$S/ran"
	refused "--scan $1"
	run setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups \
		env SUDO_UID=0 SUDO_GID=0 "$O/mt-trace" \
		--scan "$ALLOC/libmyalloc.so" -o "$S/t.raw" -- \
		sh -c 'id -u >"$0"' "$S/id"
	echo "$output"
	assert_success
	[ "$(stat -c %u:%g "$S/t.raw")" = "$NOBODY:$NOBODY" ]
	[ "$(stat -c %u "$S/id")" = "$NOBODY" ]
	[ "$(cat "$S/id")" = "$NOBODY" ]
	mt-encode "$S/t.raw" >/dev/null
}

# ---- programs with more rights than the user --------------------------------

# mallocs: the Malloc events of the trace, and the processes' exits
mallocs() {
	jq_events -r '[([.[] | select(.type == "Malloc")] | length),
		([.[] | select(.type == "Exit")] | length)] | @tsv'
}

@test "under sudo, a set-user-ID program the command runs is not looked into (its exit alone), with and without --fast; as root, traced as before" {
	require_bpf
	cp "$MT_FIXTURES/hundred" "$O/hundred_suid"
	chmod 4755 "$O/hundred_suid"
	# the program itself, under sudo: all its 101 mallocs
	SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody \
		trace_ok -- "$MT_FIXTURES/hundred"
	run mallocs
	assert_output "101	1"
	for fast in "" --fast; do
		SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody \
			trace_ok $fast -- "$O/hundred_suid"
		run mallocs
		assert_output "0	1"
		# in a tree: the user's own program beside it is traced
		SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody \
			trace_ok $fast -- sh -c \
			"'$O/hundred_suid'; '$MT_FIXTURES/hundred'"
		run jq_events '[.[] | select(.type == "Malloc" and
			.size == 7777)] | length'
		assert_output 1
	done
	trace_ok -- "$O/hundred_suid"
	run mallocs
	assert_output "101	1"
}
