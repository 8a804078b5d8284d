#!/usr/bin/env bats
# The BPF side kept for later sessions (issue 12; lib/capture/tracer_kept.c):
# programs and maps pinned in /run/mt-trace/bpf/SLOT/KEY, reused by a later
# session with the same key; the allocator probes' links on the private
# copies pinned there between sessions only.
# Outside truths: the kernel's ids of programs and links (bpftool, the
# fdinfo of the session's descriptors), the flock(2) a session holds on its
# slot (/proc/locks), the fixtures' own logs of their calls.
# Other sessions may run on the machine: a session's slot is read from the
# lock it holds, and what a test counts is its own sessions' doing.

load helpers

KEPT=/run/mt-trace/bpf
CHECK="$TOP/tests/lib/trace_check.py"

setup() {
	require_bpf
	T="$BATS_TEST_TMPDIR"
	export T
	session=""
	outside=""
	holders=""
}

teardown() {
	# (a fixture left stopped, as a broken session could leave it, ends
	# only by SIGKILL)
	for p in $outside; do
		kill -KILL "$p" 2>/dev/null || true
	done
	for s in 0 1 2 3; do # hold_slot's holders let go
		touch "$T/release$s"
	done
	for p in $session $holders; do
		kill "$p" 2>/dev/null || true
	done
	for p in $session $holders; do
		wait "$p" 2>/dev/null || true
	done
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

# start_session [MT-TRACE OPTIONS]: mt-trace -v -o $T/s.raw -- sleeper, in
# the background, until the sleeper runs.  Sets session (mt-trace's pid),
# tree_pid (the sleeper's); mt-trace's stderr in $T/session.err.
start_session() {
	rm -f "$T/tree.log"
	MT_FIXTURE_LOG="$T/tree.log" mt-trace -v "$@" -o "$T/s.raw" -- \
		"$MT_FIXTURES/sleeper" 60 2>"$T/session.err" &
	session=$!
	wait_ready "$T/tree.log"
	tree_pid=$(jq -r 'select(.info == "ready") | .pid' "$T/tree.log")
}

end_session() {
	kill "$tree_pid"
	wait "$session" || true
	session=""
}

# slot_id SLOT: the "dev:inode" /proc/locks names slot SLOT's directory by
slot_id() {
	stat -c '%Hd %Ld %i' "$KEPT/$1" 2>/dev/null |
		awk '{ printf "%02x:%02x:%s\n", $1, $2, $3 }'
}

# bpf_slot PID: the slot whose lock process PID took (mt-trace takes it
# before it loads anything, and holds it to its end)
bpf_slot() {
	local s id
	for s in 0 1 2 3; do
		id=$(slot_id "$s")
		[ -n "$id" ] || continue
		if awk -v p="$1" -v d="$id" '$2 == "FLOCK" && $5 == p &&
			$6 == d { f = 1 } END { exit !f }' /proc/locks; then
			echo "$s"
			return 0
		fi
	done
	return 1
}

# wait_unlocked SLOT: until nobody holds slot SLOT's lock (a session's
# background detacher holds it until the links are gone; up to 10 s)
wait_unlocked() {
	local id
	id=$(slot_id "$1")
	for _ in $(seq 200); do
		awk -v d="$id" '$2 == "FLOCK" && $6 == d { f = 1 }
			END { exit f }' /proc/locks && return 0
		sleep 0.05
	done
	echo "slot $1 still locked" >&2
	return 1
}

# key_dirs SLOT: the key directories in slot SLOT
key_dirs() {
	find "$KEPT/$1" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort
}

# pinned_progs SLOT: "NAME ID" of the programs pinned in slot SLOT
pinned_progs() {
	local p
	for p in "$KEPT/$1"/*/p-*; do
		[ -e "$p" ] || continue
		echo "${p##*/p-} $(bpftool -j prog show pinned "$p" | jq .id)"
	done | sort
}

# session_links PID [TYPE]: "LINK_ID PROG_ID" of every BPF link process
# PID holds (TYPE: only links of that link_type, as fdinfo says it)
session_links() {
	local f
	for f in /proc/"$1"/fdinfo/*; do
		awk -v t="${2:-}" '$1 == "link_type:" { lt = $2 }
			$1 == "link_id:" { l = $2 } $1 == "prog_id:" { p = $2 }
			END { if (lt != "" && (t == "" || lt == t)) print l, p }' \
			"$f" 2>/dev/null
	done | sort -n
}

# link_pins SLOT INODE: the link pins in slot SLOT for the copy of inode
# INODE (decimal)
link_pins() {
	local hex
	hex=$(printf '%x' "$2")
	find "$KEPT/$1" -mindepth 2 -maxdepth 2 -name "l-$hex-*" -printf '%f\n'
}

# pinned_link_ids: the ids of the links pinned in every slot
pinned_link_ids() {
	local p
	for p in "$KEPT"/*/*/l-*; do
		[ -e "$p" ] || continue
		bpftool -j link show pinned "$p" 2>/dev/null | jq .id
	done
}

# libc_inode PID: the inode of the libc.so.6 that PID maps
libc_inode() {
	awk '/libc\.so\.6$/ { print $5; exit }' "/proc/$1/maps"
}

# copies_slot ERR: the cache slot of the copies, from mt-trace -v's line
copies_slot() {
	sed -n 's/.*private copies (.*, slot \([0-9]*\)).*/\1/p' "$1"
}

# reused_slot ERR: the slot mt-trace -v says it reused the BPF side of
reused_slot() {
	sed -n 's/^mt-trace: BPF programs and maps kept by an earlier session (slot \([0-9]*\))$/\1/p' "$1"
}

# links_kept ERR: how many links on copies were kept by an earlier session
links_kept() {
	sed -n "s/^mt-trace: libc's allocator probes: \([0-9]*\) links kept by an earlier session$/\1/p" "$1"
}

# check_log: the fixture's logged calls are exactly the trace's, the trace
# lost nothing (tests/lib/trace_check.py)
check_log() {
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" --kinds alloc
	if [ "$status" != 0 ]; then
		echo "--- mt-trace's stderr:"
		cat "$T/trace.err"
	fi
	assert_success
	run "$PY" "$CHECK" meta "$T/out.msgpack"
	assert_success
	[ "$(echo "$output" | jq '.lost_records')" = 0 ]
	[ "$(echo "$output" | jq '.trailer.lost_events // 0')" = 0 ]
}

@test "a second session reuses the first one's programs and maps: the same program ids pinned, its tracepoint and probe links run them" {
	local round a_slot b_slot
	for round in 1 2 3 4 5; do # another session took the slot: again
		start_session --wait-detach
		a_slot=$(bpf_slot "$session")
		pinned_progs "$a_slot" >"$T/a.progs"
		session_links "$session" >"$T/a.links"
		end_session
		start_session --wait-detach
		b_slot=$(bpf_slot "$session")
		echo "round $round: slots $a_slot, $b_slot, reused: $(reused_slot "$T/session.err")"
		# (another key's session may have emptied the slot between)
		[ "$a_slot" = "$b_slot" ] &&
			[ "$(reused_slot "$T/session.err")" = "$b_slot" ] && break
		end_session
	done
	cat "$T/session.err"
	[ "$a_slot" = "$b_slot" ]
	[ "$(reused_slot "$T/session.err")" = "$b_slot" ]
	[ "$(key_dirs "$b_slot" | wc -l)" = 1 ]
	pinned_progs "$b_slot" >"$T/b.progs"
	session_links "$session" >"$T/b.links"
	end_session
	echo "pinned: $(tr "\n" " " <"$T/a.progs")"
	echo "first's links: $(tr "\n" " " <"$T/a.links")"
	echo "second's links: $(tr "\n" " " <"$T/b.links")"
	# the programs: at least the tracepoints' and the allocators'
	[ "$(wc -l <"$T/a.progs")" -ge 6 ]
	diff "$T/a.progs" "$T/b.progs"
	# the second session's links (tracepoints, libc's probes) run the
	# pinned programs, every one; the first's ran them too (and, had it
	# loaded afresh, the uprobe warm-up's own program: uprobe_warm.c)
	[ "$(wc -l <"$T/b.links")" -ge 7 ]
	awk '{ print $2 }' "$T/a.links" | sort -u >"$T/a.ids"
	awk '{ print $2 }' "$T/b.links" | sort -u >"$T/b.ids"
	awk '{ print $2 }' "$T/a.progs" | sort -u >"$T/pinned.ids"
	diff "$T/pinned.ids" "$T/b.ids"
	[ -z "$(comm -23 "$T/pinned.ids" "$T/a.ids")" ]
}

@test "sessions in a row on a kept BPF side: each one's allocator calls exactly the fixture's, nothing lost" {
	local f reused=0 slot
	export MT_FIXTURE_LOG="$T/fixture.log"
	# every session after the first finds its object kept, unless
	# another key's session took the slot between: until 4 did
	for f in hundred four_sizes hundred four_sizes hundred four_sizes \
		hundred four_sizes hundred four_sizes; do
		rm -f "$MT_FIXTURE_LOG"
		trace_ok -v --wait-detach -- "$MT_FIXTURES/$f"
		slot=$(reused_slot "$T/trace.err")
		echo "# $f: ${slot:+kept BPF side of slot }${slot:-loaded afresh}"
		[ -n "$slot" ] && reused=$((reused + 1))
		check_log
		[ "$reused" -ge 4 ] && break
	done
	[ "$reused" -ge 4 ]
}

@test "--fast sessions in a row on a kept BPF side: exact counts; an exec naming this session's memfd not stopped; a program without the recorder traced through the kept programs" {
	local reused=0 slot stops
	export MT_FIXTURE_LOG="$T/fixture.log"
	for _ in $(seq 10); do
		rm -f "$MT_FIXTURE_LOG"
		trace_ok -v --fast --wait-detach -- sh -c \
			"$MT_FIXTURES/hundred; $MT_FIXTURES/hundred; $MT_FIXTURES/four_sizes; $MT_FIXTURES/hundred; env -u LD_PRELOAD $MT_FIXTURES/hundred"
		slot=$(reused_slot "$T/trace.err")
		stops=$(sed -n 's/^mt-trace: --fast: \([0-9]*\) execs stopped.*/\1/p' "$T/trace.err")
		echo "# ${slot:+kept BPF side of slot }${slot:-loaded afresh}: $stops execs stopped"
		check_log
		# the first hundred and four_sizes (files not seen before), env
		# (new too), and hundred without LD_PRELOAD; not the two
		# hundreds after the first: their environment names this
		# session's memfd, which a reused object must know (global data)
		[ "$stops" = 4 ]
		grep -q "LD_PRELOAD without the recorder: traced by uprobe links of its own" "$T/trace.err"
		[ -n "$slot" ] && reused=$((reused + 1))
		[ "$reused" -ge 4 ] && break
	done
	[ "$reused" -ge 4 ]
}

@test "process-life links kept between sessions: a process an earlier session left running is neither stopped nor followed, and no later session traces it" {
	local taken=0 i
	export MT_FIXTURE_LOG="$T/fixture.log"
	# the first session leaves a loop behind that forks and execs a
	# program every 20 ms for about 4 s, while later sessions run
	trace_ok -v --wait-detach -- sh -c \
		"setsid sh -c 'for i in \$(seq 200); do /usr/bin/env true; sleep 0.02; done; echo done >$T/left.done' </dev/null >/dev/null 2>&1 &"
	left=$(pgrep -f "seq 200" | head -1)
	outside="$left"
	for i in 1 2 3 4 5; do
		rm -f "$MT_FIXTURE_LOG"
		# (--wait-detach: the next one finds the slot free)
		trace_ok -v --wait-detach -- "$MT_FIXTURES/hundred"
		grep -q "tracepoints: [0-9]* links kept" \
			"$T/trace.err" && taken=$((taken + 1))
		check_log
		# its own program only: the leftover's execs are not in it
		run jq_events '[.[] | select(.type == "Exec") | .path]'
		assert_output "[\"$MT_FIXTURES/hundred\"]"
		# the leftover runs, never stopped
		[ "$(proc_state "$left")" != T ]
	done
	echo "sessions that took kept process-life links: $taken of 5"
	[ "$taken" -ge 3 ]
	for _ in $(seq 200); do
		[ -e "$T/left.done" ] && break
		[ "$(proc_state "$left")" != T ]
		sleep 0.05
	done
	[ -e "$T/left.done" ]
}

# tracepoints_taken ERR: how many tracepoint links mt-trace -v says it
# took from an earlier session
tracepoints_taken() {
	sed -n 's/^mt-trace: tracepoints: \([0-9]*\) links kept by an earlier session$/\1/p' "$1"
}

# traced_memory_events: "MMAPS RSS_UPDATES" of $T/out.msgpack (sys_exit's
# and rss_stat's programs at work)
traced_memory_events() {
	jq_events '[([.[] | select(.type == "Mmap")] | length),
		([.[] | select(.type == "Rss")] | length)] | join(" ")' | tr -d '"'
}

@test "sys_exit's and rss_stat's links linger a second after a session: the next session takes them and records with them; one after the linger, or after --wait-detach, attaches its own" {
	local slot counts i
	export MT_FIXTURE_LOG="$T/fixture.log"
	# until a session reuses a kept BPF side (an earlier test may have
	# left another key in the slot: the first loads afresh and keeps it)
	for i in 1 2 3; do
		rm -f "$MT_FIXTURE_LOG"
		trace_ok -v -- "$MT_FIXTURES/hundred"
		slot=$(reused_slot "$T/trace.err")
		[ -n "$slot" ] && break
		slot=$(sed -n 's/^mt-trace: BPF programs and maps kept in slot \([0-9]\).*/\1/p' "$T/trace.err")
		[ -z "$slot" ] || wait_unlocked "$slot"
	done
	echo "# reused the BPF side of slot $slot after $i sessions"
	[ -n "$slot" ]
	check_log
	# the detacher lets go of the slot, then lingers: the next session
	# takes all 7 (fork, exec, exit, signal_generate, sys_exit,
	# rss_stat's raw and perf ones)
	wait_unlocked "$slot"
	ls "$KEPT/$slot"/*/ | grep -E '^t-on_(sys_exit|rss_owner|rss_size)$'
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -v -- "$MT_FIXTURES/hundred"
	[ "$(reused_slot "$T/trace.err")" = "$slot" ]
	[ "$(tracepoints_taken "$T/trace.err")" = 7 ]
	check_log
	counts=$(traced_memory_events)
	echo "mmaps, RSS updates with the lingering links: $counts"
	[ "${counts% *}" -gt 0 ]
	[ "${counts#* }" -gt 0 ]
	# a second on, nobody took them: the lingering detacher unpinned
	# them, the next session attaches sys_exit and rss_stat anew
	wait_unlocked "$slot"
	for _ in $(seq 50); do
		pgrep -x mt-trace-linger >/dev/null || break
		sleep 0.1
	done
	[ -z "$(ls "$KEPT/$slot"/*/ | grep -E '^t-on_(sys_exit|rss)')" ]
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -v --wait-detach -- "$MT_FIXTURES/hundred"
	[ "$(reused_slot "$T/trace.err")" = "$slot" ]
	[ "$(tracepoints_taken "$T/trace.err")" = 4 ]
	check_log
	counts=$(traced_memory_events)
	[ "${counts% *}" -gt 0 ]
	[ "${counts#* }" -gt 0 ]
	# --wait-detach: closed at its exit, none lingers
	[ -z "$(ls "$KEPT/$slot"/*/ | grep -E '^t-on_(sys_exit|rss)')" ]
	ls "$KEPT/$slot"/*/ | grep -E '^t-on_(fork|exec|exit|signal_generate)$'
}

# our_plan: the file /run/mt-trace/plans keeps libc's probe plan in for
# this build of mt-trace (named LIBC_BUILD_ID-MT_TRACE_BUILD_ID; mt-trace
# probes its own libc first)
our_plan() {
	local self libc
	self=$(readelf -n "$MT_BIN/mt-trace" | awk '/Build ID/ { print $3 }')
	libc=$(ldd "$MT_BIN/mt-trace" | awk '/libc\.so/ { print $3 }')
	libc=$(readelf -n "$libc" | awk '/Build ID/ { print $3 }')
	ls /run/mt-trace/plans/"$libc-$self"
}

@test "libc's probe plan is kept for later sessions: the next one uses it (exact counts); a damaged plan file is not used, and is made anew the same" {
	export MT_FIXTURE_LOG="$T/fixture.log"
	trace_ok -v -- "$MT_FIXTURES/hundred"
	check_log
	plan=$(our_plan)
	[ "$(wc -l <<<"$plan")" = 1 ]
	cp "$plan" "$T/plan"
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -v -- "$MT_FIXTURES/hundred"
	grep -q "^mt-trace: libc's probe plan: kept by an earlier session$" "$T/trace.err"
	check_log
	# damaged: cut short, a probe of no function, another magic
	for damage in "head -c 40" "sed s/MTPLAN1/MTPLAN9/" \
		"$PY -c 'import sys; b=bytearray(sys.stdin.buffer.read()); b[32:36]=bytes(4); sys.stdout.buffer.write(b)'"; do
		sh -c "$damage" <"$T/plan" >"$T/bad"
		if cmp -s "$T/bad" "$T/plan"; then false; fi
		cp "$T/bad" "$plan"
		rm -f "$MT_FIXTURE_LOG"
		trace_ok -v -- "$MT_FIXTURES/hundred"
		if grep "probe plan: kept" "$T/trace.err"; then false; fi
		check_log
		cmp "$plan" "$T/plan" # made anew, the same
	done
}

# map_ids PID: the ids of the BPF maps process PID holds
map_ids() {
	local f
	for f in /proc/"$1"/fdinfo/*; do
		awk '$1 == "map_id:" { print $2 }' "$f" 2>/dev/null
	done | sort -un
}

# kill_mid_trace: a session of allocheavy (a kept link taken, if it can),
# stopped until its rings are full and its tree stopped by backpressure,
# then killed with SIGKILL; its slot is then held by the test (hold_slot)
# so that no other session on the machine takes it first.  Checks its tree
# was continued, then ends it.  Sets k_slot, k_pid (the tree), $T/k.links
# (its uprobe links), k_ring (the id of the events ring, unread records in
# it).
kill_mid_trace() {
	local round others p
	for round in 1 2 3 4; do
		rm -f "$T/k.pid"
		mt-trace -v --wait-detach -o "$T/k.raw" -- sh -c 'echo $$ >"$0"; exec "$1" 2000000000' \
			"$T/k.pid" "$MT_FIXTURES/allocheavy" 2>"$T/k.err" &
		session=$!
		for _ in $(seq 200); do
			k_pid=$(cat "$T/k.pid" 2>/dev/null || true)
			[ -n "$k_pid" ] &&
				[[ "$(readlink "/proc/$k_pid/exe")" == */allocheavy ]] && break
			sleep 0.05
		done
		[ -n "$k_pid" ]
		outside=$k_pid # teardown ends it
		k_slot=$(bpf_slot "$session")
		echo "round $round: slot $k_slot, links kept: $(links_kept "$T/k.err")"
		[ -n "$(links_kept "$T/k.err")" ] && break
		kill "$k_pid"
		wait "$session" || true
		session=""
	done
	cat "$T/k.err"
	[ -n "$k_slot" ]
	[ "$(reused_slot "$T/k.err")" = "$k_slot" ]
	session_links "$session" uprobe_multi >"$T/k.links"
	echo "the killed session's uprobe links: $(tr "\n" " " <"$T/k.links")"
	[ -s "$T/k.links" ]
	k_ring=$(bpftool -j map show pinned "$KEPT/$k_slot"/*/m-events | jq .id)
	grep -qx "$k_ring" <(map_ids "$session")
	# its rings fill up: the tree stops (backpressure) with records unread
	kill -STOP "$session"
	for _ in $(seq 200); do
		[[ "$(ps -o stat= -p "$k_pid")" == T* ]] && break
		sleep 0.05
	done
	echo "the tree, mt-trace stopped: $(ps -o stat= -p "$k_pid")"
	others=$(pgrep -P "$session" | grep -vx "$k_pid" || true)
	hold_slot "$k_slot" wait # ours once mt-trace is gone
	kill -KILL "$session"
	wait "$session" 2>/dev/null || true
	session=""
	for _ in $(seq 200); do
		[ -e "$T/held$k_slot" ] && break
		sleep 0.05
	done
	# the watchdog continues the tree
	for _ in $(seq 200); do
		[[ "$(ps -o stat= -p "$k_pid")" != T* ]] && break
		sleep 0.05
	done
	echo "the tree, mt-trace killed: $(ps -o stat= -p "$k_pid")"
	[[ "$(ps -o stat= -p "$k_pid")" != T* ]]
	kill -KILL "$k_pid"
	for p in $k_pid $others; do
		while kill -0 "$p" 2>/dev/null; do sleep 0.05; done
	done
	outside=""
	[ -e "$T/held$k_slot" ]
}

# hold_slot SLOT [wait]: a process of the test holds slot SLOT's lock
# ($T/heldSLOT once it does) until $T/releaseSLOT exists; with wait, it
# waits for the lock, else it gives up at once if another holds it.
# Adds its pid to holders.
hold_slot() {
	local how=-n
	[ -z "${2:-}" ] || how="-w 20"
	rm -f "$T/held$1" "$T/release$1"
	# shellcheck disable=SC2086 # the option and its argument
	flock $how "$KEPT/$1" sh -c \
		': >"$0"; until [ -e "$1" ]; do sleep 0.01; done' \
		"$T/held$1" "$T/release$1" &
	holders="$holders $!"
	hold_pids[$1]=$!
}

# traced_pids SLOT: the pids in the `traced` table kept in slot SLOT
traced_pids() {
	bpftool -j map dump pinned "$KEPT/$1"/*/m-traced |
		jq -r '.[].formatted.key'
}

# killed_links_gone: the killed session's uprobe links are gone, none
# pinned
killed_links_gone() {
	local link
	while read -r link _; do
		for _ in $(seq 200); do
			bpftool link show id "$link" >/dev/null 2>&1 || break
			sleep 0.05
		done
		run bpftool link show id "$link"
		assert_failure
	done <"$T/k.links"
	pinned_link_ids >"$T/pinned.links"
	[ -z "$(awk '{ print $1 }' "$T/k.links" | grep -Fxf - "$T/pinned.links")" ]
}

# next_in_slot: the next session after the killed one in its slot, ours:
# the test holds the slots below it (those it can have) so the session
# does not take them, lets go of the killed one's slot just before the
# session starts, and of the others once it runs.  The session runs
# hundred once told to ($T/go).  Sets got (the slot it took, "" if it
# proves nothing), next (its pid).
next_in_slot() {
	local s
	for s in $(seq 0 $((k_slot - 1))); do
		hold_slot "$s"
	done
	for s in $(seq 0 $((k_slot - 1))); do
		while kill -0 "${hold_pids[$s]}" 2>/dev/null && [ ! -e "$T/held$s" ]; do
			sleep 0.01
		done
	done
	touch "$T/release$k_slot"
	wait "${hold_pids[$k_slot]}"
	rm -f "$T/ready" "$T/go"
	MT_FIXTURE_LOG="$T/next.log" mt-trace -v -o "$T/next.raw" -- \
		sh -c ': >"$2"; until [ -e "$0" ]; do sleep 0.02; done; exec "$1"' \
		"$T/go" "$MT_FIXTURES/hundred" "$T/ready" 2>"$T/next.err" &
	next=$!
	for _ in $(seq 200); do
		[ -e "$T/ready" ] && break
		kill -0 "$next" 2>/dev/null || break
		sleep 0.05
	done
	got=$(bpf_slot "$next" || true)
	echo "the next session: slot ${got:-none}"
	# (a session of this key that took the slot between would have reset
	# it, the ring the same: its traced table tells)
	if [ "$got" = "$k_slot" ]; then
		map_ids "$next" >"$T/next.maps"
		traced_pids "$k_slot" >"$T/next.traced"
	fi
	touch "$T/go"
	for s in $(seq 0 $((k_slot - 1))); do
		touch "$T/release$s"
	done
	wait "$next" || true
	for s in $holders; do
		wait "$s" || true
	done
	holders=""
}

@test "a session killed with SIGKILL mid-trace: its tree is not left stopped, its links are gone, the next session in its slot resets the dirty maps (exact counts, none of the killed tree's records)" {
	local attempt got="" next k_slot k_pid k_ring ids
	declare -A hold_pids
	mt-trace --wait-detach -o /dev/null -- true
	for attempt in 1 2 3; do
		kill_mid_trace
		# the killed session's maps are dirty: its tree is in `traced`
		traced_pids "$k_slot" >"$T/killed.traced"
		grep -qx "$k_pid" "$T/killed.traced"
		next_in_slot
		killed_links_gone
		[ "$got" = "$k_slot" ] && break
	done
	[ "$got" = "$k_slot" ]
	cat "$T/next.err"
	# it reused the killed session's maps, its ring among them, and
	# emptied `traced` of the killed tree
	[ "$(reused_slot "$T/next.err")" = "$k_slot" ]
	grep -qx "$k_ring" "$T/next.maps"
	echo "traced, killed: $(tr "\n" " " <"$T/killed.traced"); next: $(tr "\n" " " <"$T/next.traced")"
	refute grep -qx "$k_pid" "$T/next.traced"
	mt-encode <"$T/next.raw" >"$T/out.msgpack"
	cp "$T/next.err" "$T/trace.err"
	MT_FIXTURE_LOG="$T/next.log" check_log
	# none of the killed tree's records (the ring's unread ones) in it
	ids=$(jq_events -r '[.[] | select(.pid == '"$k_pid"')] | length')
	echo "records of the killed tree ($k_pid): $ids"
	[ "$ids" = 0 ]
}

@test "links kept: the detacher pins the link on the copy, a session takes it (unpinned while it runs) and says so; not pinned while a process the tree left maps the copy" {
	local round slot ino b_slot dir ok=""
	mt-trace --wait-detach -o /dev/null -- true
	# (another key's session may take the slot between two of ours and
	# empty it: again)
	for round in 1 2 3 4 5; do
		start_session
		slot=$(bpf_slot "$session")
		ino=$(libc_inode "$tree_pid")
		dir=$(stat -c %i "$KEPT/$slot"/*)
		if [ "$(copies_slot "$T/session.err")" != "$slot" ]; then
			echo "round $round: copies in another slot than $slot"
			end_session
			continue
		fi
		# the session holds the link on its copy: not pinned
		[ -n "$(session_links "$session" uprobe_multi)" ]
		[ -z "$(link_pins "$slot" "$ino")" ]
		end_session
		# its background detacher pins it again
		for _ in $(seq 200); do
			[ -n "$(link_pins "$slot" "$ino")" ] && break
			[ "$(stat -c %i "$KEPT/$slot"/* 2>/dev/null)" = "$dir" ] || break
			sleep 0.05
		done
		echo "round $round: slot $slot, copy $ino: $(link_pins "$slot" "$ino")"
		[ -n "$(link_pins "$slot" "$ino")" ] || continue
		wait_unlocked "$slot"
		start_session
		b_slot=$(bpf_slot "$session")
		echo "round $round: then slot $b_slot"
		if [ "$b_slot" = "$slot" ] && [ -n "$(links_kept "$T/session.err")" ]; then
			ok=1
			break
		fi
		end_session
	done
	cat "$T/session.err"
	[ -n "$ok" ]
	# the third session took the pinned link: said, and unpinned
	[ "$(links_kept "$T/session.err")" -ge 1 ]
	[ "$(libc_inode "$tree_pid")" = "$ino" ]
	[ -z "$(link_pins "$slot" "$ino")" ]
	end_session

	# a process the tree leaves running maps the copy: no pin for it
	for round in 1 2 3 4 5; do
		rm -f "$T/left.log" "$T/go"
		MT_FIXTURE_LOG="$T/left.log" mt-trace -v --wait-detach -o "$T/left.raw" -- \
			sh -c '"$0" 60 >/dev/null 2>&1 </dev/null &
				until [ -e "$1" ]; do sleep 0.05; done' \
			"$MT_FIXTURES/sleeper" "$T/go" 2>"$T/left.err" &
		session=$!
		wait_ready "$T/left.log"
		outside=$(jq -r 'select(.info == "ready") | .pid' "$T/left.log")
		slot=$(bpf_slot "$session")
		ino=$(libc_inode "$outside")
		touch "$T/go"
		wait "$session"
		session=""
		echo "round $round: slot $slot, copies' slot $(copies_slot "$T/left.err"), copy $ino"
		[ "$(copies_slot "$T/left.err")" = "$slot" ] && break
		kill "$outside"
	done
	cat "$T/left.err"
	[ "$(copies_slot "$T/left.err")" = "$slot" ]
	grep -q " $ino " "/proc/$outside/maps" # still mapped, the session over
	[ -z "$(link_pins "$slot" "$ino")" ]
	kill "$outside"
	outside=""
}

@test "--no-keep-copies: no slot taken, nothing reused, nothing pinned" {
	local link prog
	mt-trace --wait-detach -o /dev/null -- true
	# the control: an object is kept for this session's key
	[ -n "$(find "$KEPT" -mindepth 3 -maxdepth 3 -name 'p-*' -print -quit)" ]
	start_session --wait-detach --no-keep-copies
	cat "$T/session.err"
	run bpf_slot "$session"
	assert_failure
	refute grep -q 'kept by an earlier session' "$T/session.err"
	session_links "$session" >"$T/links"
	[ "$(wc -l <"$T/links")" -ge 7 ]
	# none of its programs is pinned
	for slot in 0 1 2 3; do
		pinned_progs "$slot"
	done | awk '{ print $2 }' | sort -u >"$T/pinned.ids"
	for prog in $(awk '{ print $2 }' "$T/links" | sort -u); do
		refute grep -qx "$prog" "$T/pinned.ids"
	done
	link=$(session_links "$session" uprobe_multi | awk '{ print $1 }')
	[ -n "$link" ]
	end_session
	# its link on the copy went with it, pinned nowhere
	pinned_link_ids >"$T/pinned.links"
	refute grep -qx "$link" "$T/pinned.links"
}

@test "another key (--ring-size 2MiB) loads afresh and leaves one key directory in its slot; the default key then loads afresh too" {
	local round slot key1 key2 b_slot c_slot
	for round in 1 2 3 4 5; do # another session took the slot: again
		start_session --wait-detach
		slot=$(bpf_slot "$session")
		key1=$(key_dirs "$slot")
		end_session
		start_session --wait-detach --ring-size 2MiB
		b_slot=$(bpf_slot "$session")
		[ "$b_slot" = "$slot" ] && break
		end_session
	done
	cat "$T/session.err"
	[ "$b_slot" = "$slot" ]
	[ -z "$(reused_slot "$T/session.err")" ]
	key2=$(key_dirs "$slot")
	end_session
	echo "slot $slot: $key1, then $key2"
	[ "$(echo "$key1" | wc -l)" = 1 ]
	[ "$(echo "$key2" | wc -l)" = 1 ]
	[ "$key1" != "$key2" ]
	start_session --wait-detach
	c_slot=$(bpf_slot "$session")
	echo "the default key again: slot $c_slot"
	if [ "$c_slot" = "$slot" ]; then
		[ -z "$(reused_slot "$T/session.err")" ]
		[ "$(key_dirs "$slot")" = "$key1" ]
	fi
	end_session
}

@test "sessions that load afresh (another key) keep their link on the copy too: their background detacher pins it" {
	local size slot ino dir checked=0
	# ring sizes in turn, each replacing the other's object in the slot
	# (a session that found its key kept, or another key's session that
	# emptied the slot meanwhile, proves nothing here): 3 fresh loads
	for size in 4MiB 8MiB 4MiB 8MiB 4MiB 8MiB 4MiB 8MiB; do
		start_session --ring-size "$size"
		slot=$(bpf_slot "$session")
		ino=$(libc_inode "$tree_pid")
		dir=$(stat -c %i "$KEPT/$slot"/*)
		if [ -n "$(reused_slot "$T/session.err")" ] ||
			[ "$(copies_slot "$T/session.err")" != "$slot" ]; then
			echo "$size: slot $slot kept this key, or copies in another slot"
			end_session
			wait_unlocked "$slot"
			continue
		fi
		end_session
		for _ in $(seq 200); do
			[ -n "$(link_pins "$slot" "$ino")" ] && break
			[ "$(stat -c %i "$KEPT/$slot"/* 2>/dev/null)" = "$dir" ] || break
			sleep 0.05
		done
		echo "$size: slot $slot loaded afresh; copy $ino: $(link_pins "$slot" "$ino")"
		if [ "$(stat -c %i "$KEPT/$slot"/* 2>/dev/null)" = "$dir" ]; then
			[ -n "$(link_pins "$slot" "$ino")" ]
			checked=$((checked + 1))
			[ "$checked" -ge 3 ] && break
		fi
		wait_unlocked "$slot"
	done
	[ "$checked" -ge 3 ]
}
