#!/usr/bin/env bats
# mt-trace runs as root beside programs and users it does not control
# (issue 16): it never destroys what it did not make, never obeys or writes
# through what another user planted, and under sudo acts as the invoking
# user.  "Another user" is nobody (uid 65534), made to plant things with
# setpriv; the planting happens in a sticky directory anyone may write to,
# as /tmp is, made by each test and removed after it.

load helpers

NOBODY=65534

setup() {
	T="$BATS_TEST_TMPDIR"
	export T
	# a /tmp of the test's own: mode 1777, reachable by every user
	S=$(mktemp -d /tmp/mt-sticky.XXXXXX)
	chmod 1777 "$S"
}

teardown() {
	rm -rf "$S"
	if [ -n "${made_user:-}" ]; then
		# retried while another session holds /etc/passwd's lock
		for _ in 1 2 3 4 5; do
			userdel "$made_user" 2>/dev/null && break
			id "$made_user" >/dev/null 2>&1 || break
			sleep 0.5
		done
		for _ in 1 2 3 4 5; do
			groupdel "$made_user-x" 2>/dev/null && break
			getent group "$made_user-x" >/dev/null || break
			sleep 0.5
		done
	fi
}

as_nobody() {
	setpriv --reuid=$NOBODY --regid=$NOBODY --clear-groups "$@"
}

# owner PATH: "uid:gid" of PATH itself (not of a link's target)
owner() {
	stat -c %u:%g "$1"
}

# ---- --control (issue 16 items 1 and 2) ------------------------------------

@test "--control over an existing file: refused with a clear message, exit 125, the file and FILE.ack kept, no -o file left" {
	require_bpf
	echo data >"$S/f"
	echo answer >"$S/f.ack"
	run mt-trace --control "$S/f" -o "$S/out.raw" -- true
	echo "$output"
	assert_failure 125
	assert_output --partial "$S/f already exists"
	[ "$(cat "$S/f")" = data ]
	[ "$(cat "$S/f.ack")" = answer ]
	# the trace file this run made is gone with the run
	[ ! -e "$S/out.raw" ]
	# FILE free but FILE.ack taken: FILE, made by this run, is removed
	rm "$S/f"
	run mt-trace --control "$S/f" -o /dev/null -- true
	assert_failure 125
	assert_output --partial "$S/f.ack already exists"
	[ ! -e "$S/f" ]
	[ "$(cat "$S/f.ack")" = answer ]
}

@test "--control: a FIFO another user made is refused (never obeyed), and so is a symbolic link" {
	require_bpf
	as_nobody mkfifo -m 666 "$S/c.ctl"
	[ "$(owner "$S/c.ctl")" = "$NOBODY:$NOBODY" ]
	run mt-trace --control "$S/c.ctl" -o /dev/null -- true
	echo "$output"
	assert_failure 125
	assert_output --partial "$S/c.ctl already exists"
	[ -p "$S/c.ctl" ]
	[ "$(owner "$S/c.ctl")" = "$NOBODY:$NOBODY" ]
	# a link (dangling or not) is not followed, its target not made
	ln -s "$S/target" "$S/link.ctl"
	run mt-trace --control "$S/link.ctl" -o /dev/null -- true
	assert_failure 125
	assert_output --partial "$S/link.ctl already exists"
	[ ! -e "$S/target" ]
	[ -L "$S/link.ctl" ]
	as_nobody ln -s "$S/nobody.fifo" "$S/nlink.ctl"
	as_nobody mkfifo -m 666 "$S/nobody.fifo"
	run mt-trace --control "$S/nlink.ctl" -o /dev/null -- true
	assert_failure 125
}

@test "--control: the FIFOs are new, mode 0600, owned by the invoking user under sudo, and removed at the end" {
	require_bpf
	# the command looks at them while they exist, as the invoking user
	SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody \
		trace_ok --control "$S/ctl" --child-stdout "$S/stat.out" -- \
		sh -c 'stat -c "%F %a %u:%g" "$MT_CONTROL" "$MT_CONTROL.ack"
			echo "marker from-nobody" >"$MT_CONTROL"'
	run cat "$S/stat.out"
	assert_output "fifo 600 $NOBODY:$NOBODY
fifo 600 $NOBODY:$NOBODY"
	[ ! -e "$S/ctl" ]
	[ ! -e "$S/ctl.ack" ]
	run jq_events -r '.[] | select(.type == "Marker") | .name'
	assert_output from-nobody
}

# ---- -o and --child-stdout (issue 16 item 3) -------------------------------

@test "-o and --child-stdout: a symbolic link another user planted in a sticky directory is refused, its target untouched" {
	require_bpf
	echo precious >"$S/victim"
	as_nobody ln -s "$S/victim" "$S/out.raw"
	run mt-trace -o "$S/out.raw" -- "$MT_FIXTURES/exitwith" 9
	echo "$output"
	assert_failure 125
	assert_output --partial "$S/out.raw: a symbolic link owned by uid $NOBODY"
	run mt-trace --child-stdout "$S/out.raw" -o "$T/t.raw" -- echo overwritten
	echo "$output"
	assert_failure 125
	assert_output --partial "--child-stdout: $S/out.raw: a symbolic link"
	[ "$(cat "$S/victim")" = precious ]
	# nothing was run, and the trace file this run made is removed
	[ ! -e "$T/t.raw" ]
	# a link of the user's own is followed, as the shell would
	ln -s "$S/mine" "$S/mylink"
	run mt-trace -o "$S/mylink" -- true
	assert_success
	[ -s "$S/mine" ]
}

@test "-o and --child-stdout: another user's file in a sticky directory is refused and left as it was" {
	require_bpf
	as_nobody sh -c "echo theirs >'$S/theirs'"
	run mt-trace -o "$S/theirs" -- true
	echo "$output"
	assert_failure 125
	assert_output --partial "$S/theirs: a file owned by uid $NOBODY"
	run mt-trace --child-stdout "$S/theirs" -o /dev/null -- echo mine
	assert_failure 125
	[ "$(cat "$S/theirs")" = theirs ]
	# the user's own file there is truncated and written, as before
	echo "an older, longer content" >"$S/own"
	run mt-trace --child-stdout "$S/own" -o /dev/null -- echo new
	assert_success
	[ "$(cat "$S/own")" = new ]
}

@test "under sudo: -o and --child-stdout are created by and owned by the invoking user" {
	require_bpf
	SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody \
		run mt-trace -o "$S/t.raw" --child-stdout "$S/c.out" -- echo hi
	echo "$output"
	assert_success
	[ "$(owner "$S/t.raw")" = "$NOBODY:$NOBODY" ]
	[ "$(owner "$S/c.out")" = "$NOBODY:$NOBODY" ]
	[ "$(cat "$S/c.out")" = hi ]
	mt-encode "$S/t.raw" >/dev/null
	# opened with the user's rights: where nobody may not write, nothing
	mkdir -m 755 "$S/roots"
	SUDO_UID=$NOBODY SUDO_GID=$NOBODY SUDO_USER=nobody \
		run mt-trace -o "$S/roots/t.raw" -- true
	assert_failure 125
	assert_output --partial "$S/roots/t.raw: Permission denied"
	[ ! -e "$S/roots/t.raw" ]
}

@test "without privileges: one message naming the missing capabilities, exit 125, no -o file left" {
	require_bpf
	[ -x "$MT_BIN/mt-trace" ]
	run as_nobody "$MT_BIN/mt-trace" -o "$S/np.raw" -- true
	echo "$output"
	assert_failure 125
	assert_output --partial "CAP_BPF"
	[ "$(grep -c "missing capability" <<<"$output")" = 1 ]
	[ ! -e "$S/np.raw" ]
}

# ---- the command's environment under sudo (issue 16 item 4) --------------

# make_user: a user of the test's own, with a supplementary group; its name
# in made_user (teardown removes both).  useradd retries while another
# session holds /etc/passwd's lock.
make_user() {
	local name="mt$$x$RANDOM" i
	for i in 1 2 3 4 5; do
		groupadd "$name-x" 2>/dev/null && break
		sleep 0.5
	done
	for i in 1 2 3 4 5; do
		useradd -M -N -g nogroup -G "$name-x" -d "/home/$name" \
			-s /bin/bash "$name" && break
		sleep 0.5
	done
	made_user=$name
	id "$name" >/dev/null
}

@test "under sudo: the command has the user's HOME, USER, LOGNAME, SHELL and supplementary groups" {
	require_bpf
	make_user
	uid=$(id -u "$made_user")
	gid=$(id -g "$made_user")
	SUDO_UID=$uid SUDO_GID=$gid SUDO_USER=$made_user HOME=/root \
		USER=root LOGNAME=root SHELL=/bin/sh \
		trace_ok --child-stdout "$S/env.out" -- sh -c \
		'id -u; id -G | tr " " "\n" | sort -n | tr "\n" " "; echo
		 echo "$HOME"; echo "$USER"; echo "$LOGNAME"; echo "$SHELL"'
	# what the passwd and group databases say (getent, id USER)
	IFS=: read -r _ _ _ _ _ home shell < <(getent passwd "$made_user")
	groups=$(id -G "$made_user" | tr " " "\n" | sort -n | tr "\n" " ")
	[ "$(wc -w <<<"$groups")" = 2 ]
	run cat "$S/env.out"
	assert_output "$uid
$groups
$home
$made_user
$made_user
$shell"
}

# ---- code files: identity (a deleted file's inode number reused) -----------

@test "a new library on a deleted one's inode number is inspected: its allocator traced" {
	require_bpf
	# python maps a library without allocator (inspected: nothing), drops
	# and deletes it, then creates files until one gets the same inode
	# number (ext4 and xfs hand a freed one out again), writes a library
	# with jemalloc inside into it and calls its mallocx 100 times.  Keyed
	# by device and inode only, it was taken as inspected: 0 traced.
	mkdir "$T/d"
	cat >"$T/reuse.py" <<-'PYTHON'
		import ctypes, sys
		sys.path.insert(0, sys.argv[4])
		from inode_reuse import swap_library
		d, lib_a, lib_b = sys.argv[1:4]
		path, reused, fillers = swap_library(d, lib_a, lib_b,
		                                     lambda a: a.stk_leaf(5))
		print("reused" if reused else "not reused", fillers, flush=True)
		b = ctypes.CDLL(path)
		blocks = (ctypes.c_void_p * 100)()
		b.myalloc_fill(blocks, 100, 7000)
		b.myalloc_release(blocks, 100)
	PYTHON
	GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384 \
		mt-trace -o "$T/run.raw" -- "$PY" "$T/reuse.py" "$T/d" \
		"$MT_FIXTURES/stacks/libstk.so" "$MT_FIXTURES/alloc/libmyalloc.so" \
		"$TOP/tests/lib" >"$T/out" 2>"$T/err" || { cat "$T/err"; false; }
	cat "$T/out" >&2
	if grep -q "not reused" "$T/out"; then
		# tmpfs and btrfs never hand an inode number out again: the
		# case cannot arise there (and cannot be tested)
		[ -z "${CI:-}" ] || { echo "inode numbers not reused in $T" >&2; false; }
		skip "this file system does not reuse inode numbers"
	fi
	mt-encode -o "$T/run.msgpack" "$T/run.raw"
	run "$PY" "$TOP/tests/lib/trace_check.py" dump "$T/run.msgpack" --type Malloc
	[ "$(jq -s '[.[] | select(.size >= 7000 and .size < 7100)] | length' <<<"$output")" = 100 ]
}
