#!/usr/bin/env bats
# mt-trace end to end: fixture programs with exactly known calls, traced
# with `mt-trace -- FIXTURE | mt-encode`, the artifact decoded by
# python3-msgpack (tests/lib/trace_check.py) and compared event by event
# with what the fixture logged (tests/fixtures/fixture.h).

load helpers

CHECK="$TOP/tests/lib/trace_check.py"

setup() {
	T="$BATS_TEST_TMPDIR"
	export T
	export MT_FIXTURE_LOG="$T/fixture.log" MT_FIXTURES
}

# a directory a test made outside $T (one every user can reach), removed,
# and the kernel's BPF run statistics a test turned on, turned back off,
# whether the test passed or not (left on, every BPF program on the machine
# pays two clock reads a run)
teardown() {
	if [ -n "${shared_dir:-}" ]; then
		rm -rf "$shared_dir"
	fi
	if [ -n "${old_bpf_stats:-}" ]; then
		sysctl -qw kernel.bpf_stats_enabled="$old_bpf_stats"
	fi
}

# check_fixture NAME [KINDS]: trace the fixture and compare its windows,
# in the default mode (the recorder where it loads) and with --no-fast
# (probes alone): both exact (CHECK_MODES: the modes, one of them).
check_fixture() {
	local mode
	for mode in ${CHECK_MODES:---fast --no-fast}; do
		rm -f "$MT_FIXTURE_LOG"
		trace_ok "$mode" -- "$MT_FIXTURES/$1"
		run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" \
			--kinds "${2:-alloc}"
		echo "$mode: $output"
		assert_success
	done
}

meta() {
	"$PY" "$CHECK" meta "$T/out.msgpack" | jq -c "$@"
}

# log_info NAME: the value of the fixture log's {"info": NAME} line.
log_info() {
	jq -r "select(.info == \"$1\") | .value" "$MT_FIXTURE_LOG"
}

# session_progs PID: the ids of the programs mt-trace PID loaded, once it
# has; only this session's links are counted (other mt-trace sessions may
# run on this machine).
session_progs() {
	local i
	for i in $(seq 100); do
		"$PY" "$BATS_TEST_DIRNAME/lib/mt_links.py" progs "$1" && return 0
		sleep 0.05
	done
	return 1
}

# ---- the checker itself can fail (no BPF needed) ------------------------

@test "trace_check: a synthetic artifact with exactly the logged events matches" {
	MT_FIXTURE_LOG="$T/log" "$MT_FIXTURES/realloc_edges"
	"$PY" "$TOP/tests/lib/synth_artifact.py" "$T/log" "$T/a.msgpack"
	run "$PY" "$CHECK" expect "$T/a.msgpack" "$T/log"
	assert_success
	assert_output --partial "10 expected, 10 traced: match"
}

@test "trace_check: a missing, an extra and a wrong event are each caught" {
	MT_FIXTURE_LOG="$T/log" "$MT_FIXTURES/realloc_edges"
	for spoil in "--drop 2" "--duplicate 0" "--bump 3"; do
		# shellcheck disable=SC2086
		"$PY" "$TOP/tests/lib/synth_artifact.py" "$T/log" "$T/a.msgpack" $spoil
		run "$PY" "$CHECK" expect "$T/a.msgpack" "$T/log"
		assert_failure 1
		assert_output --partial "MISMATCH"
	done
}

@test "the trace never to a terminal; a warning when it and CMD's stdout share a file" {
	run script -qec "mt-trace -- true" /dev/null
	assert_failure 125
	assert_output --partial "mt-trace: refusing to write a binary trace to a terminal; pipe it to mt-encode or use -o FILE"
	require_bpf
	msg="mt-trace: the trace and CMD's stdout both go to"
	run --separate-stderr bash -c 'mt-trace -o "$1" -- echo hi >>"$1"' _ "$T/t.raw"
	assert_success
	[ "$stderr" = "$msg $T/t.raw: they will mix; give CMD's stdout its own file with --child-stdout FILE, or the trace with -o FILE" ]
	run --separate-stderr bash -c 'mt-trace -o "$1" --child-stdout "$1" -- true' _ "$T/t.raw"
	[[ "$stderr" == "$msg $T/t.raw: "* ]]
	run bash -c 'mt-trace -- true 2>&1 | grep -a "$1"' _ "$msg standard output"
	assert_success
	# apart: no warning
	run --separate-stderr bash -c 'mt-trace -o "$1" -- echo hi >"$1.out"' _ "$T/t.raw"
	assert_success
	[ "$stderr" = "" ]
	[ "$(cat "$T/t.raw.out")" = hi ]
}

# ---- allocator calls: exact events, addresses from the fixture ----------

@test "malloc + free: one Malloc(4321), one Free, same address" {
	require_bpf
	check_fixture malloc_free
}

@test "the artifact decodes with python3-msgpack: header, trailer, fields" {
	require_bpf
	trace_ok -- "$MT_FIXTURES/malloc_free"
	root=$(jq -r 'select(.mark == "begin") | .pid' "$MT_FIXTURE_LOG")
	run meta '.header | [.format, .version, .command, .root_pid, .page_size, .clock, .allocators_tracked, .syscalls_tracked]'
	assert_output "[\"mt\",1,[\"$MT_FIXTURES/malloc_free\"],$root,$(getconf PAGESIZE),\"CLOCK_MONOTONIC\",true,true]"
	run meta '.trailer | [.complete, .exit_code, .lost_events, .events]'
	events=$("$PY" "$CHECK" dump "$T/out.msgpack" | wc -l)
	assert_output "[true,0,0,$events]"
	# every event: pid, tid, a timestamp inside [start, end] of the trace
	start=$(meta '.header.start_monotonic')
	end=$(meta '.trailer.end_monotonic')
	run jq_events "[.[] | select((.pid|type) != \"number\" or (.tid|type) != \"number\" or .timestamp < $start or .timestamp > $end)] | length"
	assert_output 0
	# the root's allocator events are all of that one thread
	run jq_events "[.[] | select(.pid == $root and .type == \"Malloc\" and .tid != $root)] | length"
	assert_output 0
}

@test "two mallocs then two frees" {
	require_bpf
	check_fixture two_mallocs
}

# (--no-fast: the probes' own rule; the recorder makes no record of
# free(NULL) either, fast.bats)
@test "free(NULL) is no event and no probe hit: free is probed past its NULL test" {
	require_bpf
	require_command bpftool
	# the kernel's own count of program runs is the outside truth
	old_bpf_stats=$(sysctl -n kernel.bpf_stats_enabled)
	sysctl -qw kernel.bpf_stats_enabled=1
	mkfifo "$T/out" "$T/hold"
	# the command reports the fixture's system time (the kernel's
	# accounting: each probe hit is a trap, ~1-10 us here), then waits on
	# $T/hold, so that this session's programs can be read meanwhile
	mt-trace --no-fast --child-stdout "$T/out" -o "$T/t.raw" -- sh -c '
		fixture=$1 hold=$2
		"$fixture" 200000
		read -r stat </proc/$$/stat; set -- $stat
		echo "${17}"
		read -r _ <"$hold"' sh "$MT_FIXTURES/free_null" "$T/hold" 2>"$T/err" &
	tracer=$!
	exec 4<"$T/out"
	read -r line <&4
	read -r child_ticks <&4
	exec 4<&-
	progs=$(session_progs "$tracer")
	# the allocator entry program (alloc_session, session_stacks under
	# --stacks, or alloc_enter where the kernel has no uprobe sessions);
	# its links are global, so it also runs for whatever else the machine
	# allocates meanwhile
	# shellcheck disable=SC2086
	runs=$("$PY" "$BATS_TEST_DIRNAME/lib/mt_links.py" runs $progs |
		awk '$1 == "alloc_session" || $1 == "session_stacks" ||
			$1 == "alloc_enter" { print $2 }')
	echo >"$T/hold"
	wait "$tracer"
	[ "$line" = done ]
	echo "200,000 free(NULL): the fixture spent $child_ticks ticks in the kernel; the program ran $runs times" >&3
	[ "$runs" -ge 2 ]
	# 200,000 traps would be 0.2-2 s of system time: none is under 0.1 s
	[ "$child_ticks" -lt $(($(getconf CLK_TCK) / 10)) ]
	# and the trace has exactly the malloc and the free
	mt-encode -o "$T/out.msgpack" "$T/t.raw"
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" --kinds alloc
	echo "$output"
	assert_success
}

# session_sizes [MT-TRACE OPTIONS]: "NAME INSNS" of each program a session
# loaded, as the kernel keeps it, asked once its command runs (everything
# is loaded and attached by then) and waits on $T/hold
session_sizes() {
	local tracer progs
	mkfifo "$T/hold"
	rm -f "$T/ready"
	mt-trace "$@" -o "$T/sizes.raw" -- \
		sh -c ': >"$1"; read -r _ <"$0"' "$T/hold" "$T/ready" &
	tracer=$!
	for _ in $(seq 200); do
		[ -e "$T/ready" ] && break
		sleep 0.05
	done
	progs=$("$PY" "$BATS_TEST_DIRNAME/lib/mt_links.py" progs "$tracer")
	# shellcheck disable=SC2086
	"$PY" "$BATS_TEST_DIRNAME/lib/mt_links.py" sizes $progs
	echo >"$T/hold"
	wait "$tracer"
	rm -f "$T/hold"
}

@test "the kernel verifies the stack walk only with --stacks, and alloc_session in one record site" {
	require_bpf
	require_command bpftool
	# every program is verified at every start: what --stacks alone
	# needs comes in programs of their own
	run session_sizes --no-stacks
	assert_success
	echo "$output"
	assert_line --regexp '^on_sys_exit [0-9]+$'
	refute_output --partial _stacks
	# the syscalls' arguments are read at their exit: no sys_enter
	refute_line --regexp '^on_sys_enter '
	# the allocator programs: one record site per program, not one per
	# function (alloc_session was 1,224 instructions with one each)
	echo "$output" | awk '$1 ~ /^alloc_/ && $2 >= 700 { bad = 1 }
		$1 ~ /^alloc_/ { n++ } END { exit bad || !n }'
	run session_sizes --stacks
	assert_success
	echo "$output"
	assert_line --regexp '^sys_exit_stacks [0-9]+$'
	assert_line --regexp '^(session|return)_stacks [0-9]+$'
	refute_line --regexp '^(on_sys_exit|alloc_session|alloc_return) '
}

@test "a session makes three hash tables keyed by process, not six: each ~1-2 ms of every start" {
	require_bpf
	local tracer big sizes pid_max slots
	mkfifo "$T/hold"
	# (--no-stacks: --stacks, MT_STACKS=1, adds its own two, stacks and
	# stack_files; --no-fast: the recorder's mode, the default, adds two
	# more, pid_links and fork_stops, for processes without the recorder)
	mt-trace --no-stacks --no-fast -o "$T/t.raw" -- \
		sh -c ': >"$1"; read -r _ <"$0"' "$T/hold" "$T/ready" &
	tracer=$!
	for _ in $(seq 200); do
		[ -e "$T/ready" ] && break
		sleep 0.05
	done
	# the kernel's own view (fdinfo of the maps mt-trace holds): hash
	# tables (map_type 1) of 1,024 slots or more, whose bucket arrays
	# the kernel builds when they are made: traced, resumed and
	# unthrottled (MT_PROCESS_SLOTS each), code_files
	big=$(cat /proc/"$tracer"/fdinfo/* 2>/dev/null | awk '
		/^map_type:/ { type = $2 }
		/^max_entries:/ { if (type == 1 && $2 >= 1024) n++ }
		END { print n + 0 }')
	# and their sizes (man/mt-trace.1 LIMITS): the three process tables
	# 8,192 slots (pid_max when lower), code_files 4,096
	sizes=$(cat /proc/"$tracer"/fdinfo/* 2>/dev/null | awk '
		/^map_type:/ { type = $2 }
		/^max_entries:/ { if (type == 1 && $2 >= 1024) print $2 }' |
		sort -n | tr '\n' ' ')
	echo >"$T/hold"
	wait "$tracer"
	echo "hash tables of 1,024 slots or more: $big: $sizes"
	[ "$big" -eq 4 ]
	pid_max=$(cat /proc/sys/kernel/pid_max)
	slots=$((pid_max < 8192 ? pid_max : 8192))
	[ "$sizes" = "$(printf '%s\n' 4096 "$slots" "$slots" "$slots" |
		sort -n | tr '\n' ' ')" ]
}

@test "each way of attaching the probes (session, uprobe_multi, classic) gives the same exact events" {
	require_bpf
	for mode in session multi classic; do
		# nested and tail calls (realloc(NULL, n) jumps to malloc), and
		# failures, are where the ways differ inside
		for fixture in realloc_edges memalign_family hundred; do
			: >"$MT_FIXTURE_LOG"
			CHECK_MODES=--no-fast MT_PROBES=$mode check_fixture "$fixture"
		done
		MT_PROBES=$mode trace_ok -v -- true
		case $mode in
		session) want="uprobe session links" ;;
		multi) want="uprobe_multi links" ;;
		classic) want="classic uprobes" ;;
		esac
		assert_file_contains "$T/trace.err" "allocator probes: $want"
	done
}

@test "calloc(10, 100): one Calloc of 1000 bytes" {
	require_bpf
	check_fixture calloc
}

@test "malloc / realloc (moving) / free: Realloc with old_addr" {
	require_bpf
	check_fixture realloc
}

@test "aligned_alloc(64, 512): one AlignedAlloc, not one per alias" {
	require_bpf
	check_fixture aligned_alloc
}

@test "posix_memalign: the address stored through arg 1; EINVAL is no event" {
	require_bpf
	check_fixture posix_memalign
	run log_info einval
	assert_output 22
}

@test "four sizes then four frees (one above the mmap threshold)" {
	require_bpf
	check_fixture four_sizes
}

@test "1 + 100 mallocs and 101 frees" {
	require_bpf
	check_fixture hundred
	run jq -s '[.[] | select(.type)] | length' "$MT_FIXTURE_LOG"
	assert_output 202
}

@test "realloc edge cases: realloc(NULL,n) one Realloc old_addr 0, realloc(p,0) one Free, failures and free(NULL) no event" {
	require_bpf
	check_fixture realloc_edges
}

@test "realloc of mmapped blocks (mremap, malloc+copy+munmap inside): one Realloc per call" {
	require_bpf
	check_fixture realloc_mmapped
}

@test "memalign, small-alignment memalign/aligned_alloc, valloc, pvalloc: one AlignedAlloc each" {
	require_bpf
	check_fixture memalign_family
}

@test "a malloc in a constructor is traced (the child waited for the probes)" {
	require_bpf
	check_fixture ctor
}

# ---- processes and threads ----------------------------------------------

@test "fork: the child's events under the child's pid, a Fork event with ppid" {
	require_bpf
	check_fixture fork
	parent=$(jq -r 'select(.info == "child") | .pid' "$MT_FIXTURE_LOG")
	child=$(log_info child)
	[ "$child" -gt 0 ]
	[ "$child" != "$parent" ]
	run jq_events "[.[] | select(.type == \"Fork\") | [.pid, .ppid]]"
	assert_output "[[$child,$parent]]"
	# the child's Malloc(2222) is under the child's pid only
	run jq_events "[.[] | select(.type == \"Malloc\" and .size == 2222) | .pid]"
	assert_output "[$child]"
	run jq_events "[.[] | select(.type == \"Exit\") | [.pid, .exit_code]] | sort"
	assert_output "$(jq -n -c "[[$parent,0],[$child,0]] | sort")"
}

@test "fork chain of depth 3: children of children traced, Fork events chain by ppid" {
	require_bpf
	check_fixture fork_chain
	# the pids by level, from the fixture
	mapfile -t pids < <(jq -s -r 'map(select(.info == "level")) | sort_by(.value) | .[].pid' "$MT_FIXTURE_LOG")
	[ "${#pids[@]}" = 4 ]
	run jq_events '[.[] | select(.type == "Fork") | [.ppid, .pid]] | sort'
	assert_output "$(jq -n -c "[[${pids[0]},${pids[1]}],[${pids[1]},${pids[2]}],[${pids[2]},${pids[3]}]] | sort")"
}

@test "posix_spawn (clone with CLONE_VM|CLONE_VFORK): the child is followed" {
	require_bpf
	trace_ok -- "$MT_FIXTURES/spawn" "$MT_FIXTURES/malloc_free"
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG"
	echo "$output"
	assert_success
	parent=$(jq -r 'select(.info == "spawned") | .pid' "$MT_FIXTURE_LOG")
	child=$(log_info spawned)
	run jq_events "[.[] | select(.type == \"Fork\") | [.ppid, .pid]]"
	assert_output "[[$parent,$child]]"
	run jq_events "[.[] | select(.type == \"Exec\") | [.pid, .path]]"
	assert_output "[[$parent,\"$MT_FIXTURES/spawn\"],[$child,\"$MT_FIXTURES/malloc_free\"]]"
}

@test "200 short-lived processes: every Fork, Exec and Exit, nothing lost" {
	require_bpf
	trace_ok -- sh -c 'i=0; while [ $i -lt 200 ]; do /bin/true; i=$((i + 1)); done'
	run jq_events '[([.[] | select(.type == "Fork")] | length),
		([.[] | select(.type == "Exec" and .path == "/bin/true")] | length),
		([.[] | select(.type == "Exit" and .exit_code == 0)] | length)]'
	assert_output '[200,200,201]'
	# each child: Fork, then its Exec, then its Exit, under its own pid
	run jq_events '[.[] | select(.type == "Fork") | .pid] as $kids |
		[$kids[] as $k | [.[] | select(.pid == $k and (.type | IN("Exec", "Exit"))) | .type]] |
		map(select(. != ["Exec", "Exit"])) | length'
	assert_output 0
	run meta '.trailer.lost_events'
	assert_output 0
}

@test "a descendant still running when CMD exits: the trace ends with CMD, the descendant runs on" {
	require_bpf
	start=$(date +%s%N)
	# (the descendant gets no copy of bats' descriptor 3, so that even a
	# process left behind cannot hold up the suite)
	trace_ok -- sh -c 'sleep 30 3>&- & echo $! >"$0"; exit 0' "$T/bg.pid"
	elapsed_ms=$((($(date +%s%N) - start) / 1000000))
	bg=$(cat "$T/bg.pid")
	# not stopped (nobody would ever continue it): asleep in its
	# sleep(30), which a stop while mt-trace attached may delay a little
	wait_for 10 grep -q '^State:.S' "/proc/$bg/status" || true
	state=$(awk '/^State:/ {print $2}' "/proc/$bg/status" 2>/dev/null || echo gone)
	kill -KILL "$bg" 2>/dev/null || true
	echo "descendant $bg: state $state after mt-trace ended"
	[ "$state" = S ]
	# mt-trace did not wait for it (30 s); the bound is far from both
	# the few ms this takes and the descendant's end, so load cannot flake it
	[ "$elapsed_ms" -lt 15000 ]
	run meta '.trailer | [.complete, .exit_code]'
	assert_output '[true,0]'
	run jq_events '[.[] | select(.type == "Fork")] | length'
	assert_output 1
}

# By default a process that maps new code is stopped (SIGSTOP) until its
# allocators are attached: lossless, but visible to a parent waiting with
# WUNTRACED and to a SIGCONT handler (man mt-trace, BUGS).  --no-stop trades
# the first calls of new code for invisibility; these two tests hold it to
# that.
@test "--no-stop: the traced program never sees its children stopped (waitpid WUNTRACED, job control)" {
	require_bpf
	# distinct programs: each is new code for the tracer to look at
	programs="/usr/bin/true /usr/bin/id /usr/bin/uname /usr/bin/date /usr/bin/nproc /usr/bin/whoami /usr/bin/hostname /usr/bin/sync /usr/bin/printenv /usr/bin/arch"
	# a parent waiting with WUNTRACED, as shells with job control do
	# shellcheck disable=SC2086
	trace --no-stop --child-stdout /dev/null -- "$MT_FIXTURES/wait_untraced" $programs
	run log_info stopped_total
	echo "children seen stopped, of 10: $output (signals: $(log_info stopped | tr '\n' ' '))"
	assert_output 0
	[ "$trace_status" = 0 ]
	# bash with job control: each child's status must be its own, 0
	trace_ok --no-stop --child-stdout "$T/bash.out" -- bash -c 'set -m
		for p in /usr/bin/ls /usr/bin/wc /usr/bin/cat /usr/bin/sort /usr/bin/head; do
			"$p" </dev/null >/dev/null; echo "$p $?"
		done'
	run cat "$T/bash.out"
	assert_output "$(printf '%s 0\n' /usr/bin/ls /usr/bin/wc /usr/bin/cat /usr/bin/sort /usr/bin/head)"
}

@test "--no-stop: the traced program receives no signal from the tracer (SIGCONT handler, dlopen)" {
	require_bpf
	trace --no-stop -- "$MT_FIXTURES/sigcont" libz.so.1
	run log_info sigcont
	assert_output 0
	[ "$trace_status" = 0 ]
}

@test "thread: its events carry its tid (!= pid), and a thread is no Fork" {
	require_bpf
	check_fixture thread
	pid=$(jq -r 'select(.info == "thread") | .pid' "$MT_FIXTURE_LOG")
	tid=$(log_info thread)
	[ "$tid" != "$pid" ]
	run jq_events "[.[] | select(.type == \"Malloc\" and .size == 3333) | [.pid, .tid]]"
	assert_output "[[$pid,$tid]]"
	run jq_events '[.[] | select(.type == "Fork")] | length'
	assert_output 0
	# and a thread's end is no Exit: one Exit, the process's
	run jq_events "[.[] | select(.type == \"Exit\") | .pid]"
	assert_output "[$pid]"
}

@test "exec from a second thread: the program goes on under the same pid, still traced" {
	require_bpf
	trace_ok -- "$MT_FIXTURES/exec_thread" "$MT_FIXTURES/malloc_free"
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG"
	echo "$output"
	assert_success
	pid=$(log_info pid)
	[ "$(log_info exec_tid)" != "$pid" ]
	run jq_events "[.[] | select(.type | IN(\"Exec\", \"Exit\", \"Fork\")) | [.type, .pid, .path]]"
	assert_output "[[\"Exec\",$pid,\"$MT_FIXTURES/exec_thread\"],[\"Exec\",$pid,\"$MT_FIXTURES/malloc_free\"],[\"Exit\",$pid,null]]"
}

@test "4 threads allocating at once: each thread's 1000 events exact, under its tid" {
	require_bpf
	check_fixture threads
	run jq -s '[.[] | select(.mark == "begin") | .tid] | unique | length' "$MT_FIXTURE_LOG"
	assert_output 4
}

@test "a process outside the traced tree, allocating at the same time, is not in the trace" {
	require_bpf
	MT_FIXTURE_LOG=/dev/null "$MT_FIXTURES/storm" 2000000 &
	bystander=$!
	trace_ok -- "$MT_FIXTURES/hundred"
	kill "$bystander" 2>/dev/null || true
	wait "$bystander" || true
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG"
	assert_success
	root=$(meta '.header.root_pid')
	run jq_events "[.[] | select(.pid != $root) | .pid] | unique"
	assert_output '[]'
}

@test "exec: the Exec event carries the new program's path" {
	require_bpf
	trace_ok -- "$MT_FIXTURES/malloc_free"
	root=$(meta '.header.root_pid')
	run jq_events "[.[] | select(.type == \"Exec\") | [.pid, .path]]"
	assert_output "[[$root,\"$MT_FIXTURES/malloc_free\"]]"
	# nothing of mt-trace's own forked copy before the exec: no allocator
	# or syscall event of the root comes before its Exec
	# (Rss comes from the kernel's exec itself; Allocator records are the
	# probes mt-trace placed before the start, charged to the root)
	run jq_events "[.[] | select(.pid == $root and .type != \"Rss\" and .type != \"Allocator\")][0].type"
	assert_output '"Exec"'
}

# The program and the libraries ld.so loads for it are inspected before
# the command runs (tracer_code.c): neither the exec nor those mappings
# stop.  -v counts the stops for new code made.
@test "the program, found through PATH, and its libraries are inspected before it runs: no stop for new code" {
	require_bpf
	# ls needs libraries besides libc (libselinux, libpcre2 on Debian):
	# each stopped it as ld.so mapped it, as its exec did
	libs=$(ldd "$(command -v ls)" | grep -c '=> /')
	[ "$libs" -ge 2 ]
	# (--no-fast: the recorder is one library more, mapped by ld.so)
	trace_ok -v --no-fast -- ls /
	assert_file_contains "$T/trace.err" \
		"^mt-trace: stops for new code: 0; inspected ahead, programs: 1, libraries: $((libs - 1))$"
	# the Exec is still the root's first event of its own
	root=$(meta '.header.root_pid')
	run jq_events "[.[] | select(.pid == $root and .type != \"Rss\" and .type != \"Allocator\")][0].type"
	assert_output '"Exec"'
}

@test "a script is left to its exec's stop (its interpreter is what runs); a program it runs has its libraries inspected at its exec's stop" {
	require_bpf
	libs=$(ldd "$(command -v ls)" | grep -c '=> /')
	printf '#!/bin/sh\nls / >/dev/null\n' >"$T/script"
	chmod +x "$T/script"
	trace_ok -v --no-fast -- "$T/script"
	# sh's exec and ls's stop; ls's libraries (but libc) are inspected
	# at its exec's stop, and do not stop it again when ld.so maps them
	assert_file_contains "$T/trace.err" \
		"^mt-trace: stops for new code: 2; inspected ahead, programs: 0, libraries: $((libs - 1))$"
}

@test "RSS of the root starts from the new program's, not mt-trace's forked copy" {
	require_bpf
	trace_ok -- "$MT_FIXTURES/malloc_free"
	root=$(meta '.header.root_pid')
	# A fresh mm starts from zero, and one fault adds at most 16 pages
	# (fault-around), so the first Rss value of each member is at most
	# 64 KiB.  A larger first value is the counter of mt-trace's own
	# forked process (about 1 MB of file pages) before the exec.
	run jq_events "[.[] | select(.pid == $root and .type == \"Rss\")] |
		group_by(.member) | map({member: .[0].member, first: .[0].size}) |
		map(select(.first > 65536))"
	assert_output '[]'
	# and there are RSS events of both members to look at (and of shmem:
	# the recorder's rings in the process's memory, the default; not
	# with --no-fast)
	run jq_events "[.[] | select(.pid == $root and .type == \"Rss\") | .member] | unique"
	assert_output '["anon","file","shmem"]'
	trace_ok --no-fast -- "$MT_FIXTURES/malloc_free"
	root=$(meta '.header.root_pid')
	run jq_events "[.[] | select(.pid == $root and .type == \"Rss\") | .member] | unique"
	assert_output '["anon","file"]'
}

# ---- address-space calls --------------------------------------------------

@test "mmap/mremap (moving, in place)/munmap (whole, partial)/MAP_FIXED/file map/sbrk +-64 KiB: exact events; failed calls none" {
	require_bpf
	check_fixture mmap_calls all
}

@test "--track-allocators=false: no allocator event, mmap events still there" {
	require_bpf
	trace_ok --track-allocators=false -- "$MT_FIXTURES/mmap_calls"
	run meta '.header.allocators_tracked'
	assert_output false
	run jq_events '[.[] | select(.type | IN("Malloc","Free","Calloc","Realloc","AlignedAlloc"))] | length'
	assert_output 0
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" --kinds mem
	echo "$output"
	assert_success
}

@test "MT_TRACK_ALLOCATORS=0 does the same" {
	require_bpf
	export MT_TRACK_ALLOCATORS=0
	trace_ok -- "$MT_FIXTURES/malloc_free"
	run jq_events '[.[] | select(.type | IN("Malloc","Free","Calloc","Realloc","AlignedAlloc"))] | length'
	assert_output 0
	run jq_events '[.[] | select(.type == "Mmap")] | length > 0'
	assert_output true
}

# ---- exit status and signals ---------------------------------------------

@test "exit status passes through: exit 3 -> mt-trace exits 3, trailer says 3" {
	require_bpf
	trace -- "$MT_FIXTURES/exitwith" 3
	[ "$trace_status" = 3 ]
	[ "$encode_status" = 0 ]
	run meta '.trailer | [.complete, .exit_code, .signal]'
	assert_output '[true,3,null]'
	root=$(meta '.header.root_pid')
	run jq_events "[.[] | select(.type == \"Exit\" and .pid == $root) | .exit_code]"
	assert_output '[3]'
}

@test "a child killed by a signal: its Exit event says so; the root's exit code passes" {
	require_bpf
	trace -- sh -c '"$0" -s 9; exit 5' "$MT_FIXTURES/exitwith"
	[ "$trace_status" = 5 ]
	root=$(meta '.header.root_pid')
	run jq_events "[.[] | select(.type == \"Exit\") | [.pid == $root, .exit_code, .signal]] | sort"
	assert_output '[[false,null,9],[true,5,null]]'
	run meta '.header.command'
	assert_output "[\"sh\",\"-c\",\"\\\"\$0\\\" -s 9; exit 5\",\"$MT_FIXTURES/exitwith\"]"
}

@test "CMD's stdout: to mt-trace's stderr when the trace is on stdout, to stdout with -o" {
	require_bpf
	run bash -c 'mt-trace -- echo hello-from-cmd 2>"$T/err" | mt-encode >/dev/null'
	assert_success
	grep -qx hello-from-cmd "$T/err"
	run mt-trace -o "$T/raw" -- echo hello-from-cmd
	assert_success
	assert_line hello-from-cmd
	mt-encode "$T/raw" >"$T/out.msgpack"
	run meta '.trailer.complete'
	assert_output true
}

@test "killed by SIGKILL -> mt-trace exits 137, trailer says signal 9" {
	require_bpf
	trace -- "$MT_FIXTURES/exitwith" -s 9
	[ "$trace_status" = 137 ]
	[ "$encode_status" = 0 ]
	run meta '.trailer | [.complete, .exit_code, .signal]'
	assert_output '[true,null,9]'
}

@test "mt-trace -- true: a complete trace, and no wait on anything after the command" {
	require_bpf
	start=$(date +%s%N)
	trace_ok -- true
	elapsed_ms=$((($(date +%s%N) - start) / 1000000))
	run meta '.trailer | [.complete, .exit_code]'
	assert_output '[true,0]'
	run jq_events '[.[] | select(.type == "Exec") | .path]'
	assert_output '["/usr/bin/true"]'
	echo "mt-trace -- true | mt-encode: ${elapsed_ms} ms" >&3
	# Speed is measured by make bench (the "true" row: the fixed cost of a
	# session); this bound only catches a hang, e.g. waiting on the
	# background detach or a stop nobody undoes, and holds at any load.
	[ "$elapsed_ms" -lt 10000 ]
}

@test "the kernel's 5 MB BTF is not read: the built-in BTF of this kernel serves CO-RE" {
	require_bpf
	require_command strace
	# (LeakSanitizer cannot run under ptrace: off for check-asan's build)
	ASAN_OPTIONS=detect_leaks=0 run strace -f -e trace=openat \
		-o "$T/strace.txt" mt-trace -v -o "$T/t.raw" -- true
	assert_success
	refute_output --partial "reading the kernel's BTF"
	run grep -c "/sys/kernel/btf/vmlinux" "$T/strace.txt"
	assert_output 0
	# and the trace is whole: the root's Exec and Exit are there
	run mt-encode --jsonl "$T/t.raw"
	assert_success
	assert_output --partial '"type":"Exec"'
	assert_output --partial '"type":"Exit"'
}

# links_of: how many links run $progs, and how many of $progs are still
# loaded (a program goes when no link and no process holds it any more)
links_of() {
	# shellcheck disable=SC2086
	"$PY" "$BATS_TEST_DIRNAME/lib/mt_links.py" count $progs
}

@test "the probes go: just after mt-trace exits by default, before it exits with --wait-detach" {
	require_bpf
	require_command bpftool
	# while a trace runs, its links are there (the check can see them;
	# --no-fast: libc's too, the recorder's mode leaves it without)
	mt-trace --no-fast --wait-detach -o "$T/sleep.raw" -- sleep 1 \
		2>/dev/null &
	tracer=$!
	for _ in $(seq 50); do
		# asked again each time: taken while mt-trace is still loading
		# them, the set lacks the programs the verifier is still on
		# (with --stacks, MT_STACKS=1, the longest to check)
		progs=$(session_progs "$tracer")
		read -r links _ < <(links_of)
		[ "$links" -ge 5 ] && break
		sleep 0.02
	done
	[ "$links" -ge 5 ]
	# --wait-detach: none left the moment mt-trace is gone
	wait "$tracer"
	read -r links _ < <(links_of)
	[ "$links" = 0 ]
	# default: the background detacher removes them, then exits (it
	# held the programs: they are unloaded only when it is gone)
	mt-trace -o "$T/sleep.raw" -- sleep 0.5 2>/dev/null &
	tracer=$!
	progs=$(session_progs "$tracer")
	wait "$tracer"
	for _ in $(seq 100); do
		[ "$(links_of)" = "0 0" ] && break
		sleep 0.1
	done
	[ "$(links_of)" = "0 0" ]
}

@test "without privileges: mt-trace exits 125 and names the missing capability" {
	require_bpf
	# nobody must be able to reach the binary and run the command
	[ -x "$MT_BIN/mt-trace" ]
	run setpriv --reuid=65534 --regid=65534 --clear-groups \
		"$MT_BIN/mt-trace" -o /dev/null -- true
	echo "$output"
	assert_failure 125
	assert_output --partial "CAP_BPF"
}

@test "under sudo (SUDO_UID/SUDO_GID set), CMD runs as the invoking user" {
	require_bpf
	# --child-stdout is opened as that user: a directory nobody can write
	shared_dir=$(mktemp -d /tmp/mt-sudo.XXXXXX)
	chmod 1777 "$shared_dir"
	SUDO_UID=65534 SUDO_GID=65534 SUDO_USER=nobody \
		trace_ok --child-stdout "$shared_dir/id.out" -- id -u
	run cat "$shared_dir/id.out"
	assert_output 65534
}

@test "CMD not found -> 127, not executable -> 126; the trace is still complete" {
	require_bpf
	trace -- "$T/no-such-program"
	[ "$trace_status" = 127 ]
	run meta '.trailer | [.complete, .exit_code]'
	assert_output '[true,127]'
	touch "$T/not-executable"
	trace -- "$T/not-executable"
	[ "$trace_status" = 126 ]
	run meta '.trailer | [.complete, .exit_code]'
	assert_output '[true,126]'
}

@test "bad options: a message naming the option, exit 125, nothing run" {
	require_bpf
	for args in "--ring-size 1000" "--ring-size abc" "--track-allocators=maybe" "--bogus"; do
		# shellcheck disable=SC2086
		run mt-trace $args -- "$MT_FIXTURES/exitwith" 9
		echo "$args: $output"
		assert_failure 125
		option=${args%% *}
		assert_output --partial "${option%%=*}"
	done
	run mt-trace --help
	assert_success
	assert_output --partial "--ring-size"
}

@test "no spelling of an option becomes the command: a value without '=', a missing value, an ambiguous name are usage errors" {
	require_bpf
	# '--track-allocators false' once ran /usr/bin/false: the value only
	# comes with '=', and the next word is neither value nor command
	run mt-trace --track-allocators false -o "$T/t.raw" -- "$MT_FIXTURES/exitwith" 9
	echo "$output"
	assert_failure 125
	assert_output --partial "--track-allocators takes its value after '=' (--track-allocators=false)"
	[ ! -e "$T/t.raw" ]
	run mt-trace --track-allocators "$MT_FIXTURES/exitwith" 9
	assert_failure 125
	assert_output --partial "--track-allocators"
	run mt-trace --stacks true -- "$MT_FIXTURES/exitwith" 9
	assert_failure 125
	assert_output --partial "--stacks takes its value after '=' (--stacks=true)"
	# an option's value forgotten before '--'
	for opt in -o --child-stdout --control --libc --scan; do
		run mt-trace "$opt" -- "$MT_FIXTURES/exitwith" 9
		echo "$opt: $output"
		assert_failure 125
		assert_output --partial "$opt needs a value before '--'"
	done
	# a prefix that could be two options
	run mt-trace --no -- "$MT_FIXTURES/exitwith" 9
	assert_failure 125
	assert_output --partial "mt-trace: option '--no' is ambiguous"
	# nothing was run by any of them (exitwith would have exited 9)
	refute_output --partial "exitwith"
}

@test "--track-allocators=false, --no-track-allocators, and a bare --track-allocators before '--'" {
	require_bpf
	for spelling in --track-allocators=false --no-track-allocators --track-allocators=off; do
		trace_ok "$spelling" -- "$MT_FIXTURES/exitwith" 0
		run meta '.header.allocators_tracked'
		assert_output false
	done
	MT_TRACK_ALLOCATORS=0 trace_ok --track-allocators -- "$MT_FIXTURES/exitwith" 0
	run meta '.header.allocators_tracked'
	assert_output true
	# the first word that is not an option is the command, as documented
	run mt-trace --no-track-allocators -o "$T/t.raw" "$MT_FIXTURES/exitwith" 7
	assert_failure 7
}

@test "--start-disabled without --control: a usage error saying why, nothing run" {
	require_bpf
	run mt-trace --start-disabled -o "$T/t.raw" -- "$MT_FIXTURES/exitwith" 9
	echo "$output"
	assert_failure 125
	assert_output --partial "--start-disabled needs --control FIFO"
	[ ! -e "$T/t.raw" ]
}

@test "--version; --help and the man page list the same options" {
	run mt-trace --version
	assert_success
	assert_output --regexp "^mt-trace \(mt\) [0-9]+\.[0-9]+"
	help=$(mt-trace --help | grep -o -- '--[a-z][a-z-]*' | sort -u)
	# the SYNOPSIS (.Op) and OPTIONS (.It) lines; "Fl -x" prints "--x"
	man=$(grep -E '^\.(It|Op) ' "$TOP/man/mt-trace.1" |
		grep -o -- 'Fl -[a-z][a-z-]*' | sed 's/^Fl /-/' | sort -u)
	[ "$(wc -l <<<"$help")" -ge 16 ]
	diff <(echo "$help") <(echo "$man")
	# the short ones too
	for short in -o -v -h; do
		mt-trace --help | grep -q -- "^  $short, "
		grep -q "^\.It Fl ${short#-}" "$TOP/man/mt-trace.1"
	done
}

# wait_ready: wait (up to 10 s) for the sleeper's "ready" line; its pid.
wait_ready() {
	local i
	for i in $(seq 100); do
		if [ -s "$MT_FIXTURE_LOG" ] && grep -q '"ready"' "$MT_FIXTURE_LOG"; then
			log_info ready
			return 0
		fi
		sleep 0.1
	done
	echo "the sleeper never said ready" >&2
	return 1
}

@test "SIGTERM, SIGINT, SIGHUP to mt-trace reach the child; the trace ends with its trailer" {
	require_bpf
	for sig in TERM INT HUP; do
		rm -f "$MT_FIXTURE_LOG" "$T/raw"
		mt-trace -o "$T/raw" -- "$MT_FIXTURES/sleeper" 30 --catch 2>"$T/trace.err" &
		tracer=$!
		child=$(wait_ready)
		kill -s "$sig" "$tracer"
		rc=0
		wait "$tracer" || rc=$?
		num=$(kill -l "$sig")
		# the child's handler ran (it logs the signal and exits 40 + N)
		run log_info signal
		assert_output "$num"
		[ "$rc" = $((40 + num)) ]
		[ ! -d "/proc/$child" ] || refute grep -q "^State:.*[TtZ]" "/proc/$child/status"
		run mt-encode "$T/raw"
		assert_success
		mt-encode "$T/raw" >"$T/out.msgpack"
		run meta '.trailer | [.complete, .exit_code]'
		assert_output "[true,$((40 + num))]"
	done
}

@test "Ctrl-C on 'mt-trace -- CMD | mt-encode' (SIGINT to the whole group): complete artifact" {
	require_bpf
	setsid bash -c 'mt-trace -- "$MT_FIXTURES/sleeper" 30 --catch 2>"$T/trace.err" |
		mt-encode >"$T/out.msgpack" 2>"$T/encode.err"
		echo "${PIPESTATUS[0]} ${PIPESTATUS[1]}" >"$T/status"' &
	child=$(wait_ready)
	group=$(ps -o pgid= -p "$child" | tr -d ' ')
	[ -n "$group" ]
	[ "$group" != "$(ps -o pgid= -p $$ | tr -d ' ')" ]
	kill -INT -- "-$group"
	for i in $(seq 100); do [ -s "$T/status" ] && break; sleep 0.1; done
	run cat "$T/status"
	assert_output "$((40 + 2)) 0"
	run meta '.trailer | [.complete, .exit_code]'
	assert_output '[true,42]'
}

@test "SIGTERM to mt-trace, child with default disposition: exits 143, trailer signal 15" {
	require_bpf
	mt-trace -o "$T/raw" -- "$MT_FIXTURES/sleeper" 30 2>"$T/trace.err" &
	tracer=$!
	wait_ready >/dev/null
	kill -TERM "$tracer"
	rc=0
	wait "$tracer" || rc=$?
	[ "$rc" = 143 ]
	mt-encode "$T/raw" >"$T/out.msgpack"
	run meta '.trailer | [.complete, .signal]'
	assert_output '[true,15]'
}

@test "the stdout reader goes away: mt-trace exits non-zero quickly, says so, child not left stopped" {
	require_bpf
	start=$(date +%s%N)
	run bash -c 'mt-trace -- "$MT_FIXTURES/sleeper" 5 2>"$T/trace.err" | head -c 1 >/dev/null
		echo "${PIPESTATUS[0]}"'
	elapsed_ms=$((($(date +%s%N) - start) / 1000000))
	trace_status=$output
	child=$(log_info ready || true)
	if [ -n "$child" ] && [ -d "/proc/$child" ]; then
		state=$(awk '/^State:/ {print $2}' "/proc/$child/status")
		kill -KILL "$child" 2>/dev/null || true
		[ "$state" != T ]
		[ "$state" != t ]
	fi
	echo "mt-trace exited $trace_status after ${elapsed_ms} ms: $(cat "$T/trace.err")" >&3
	[ "$trace_status" != 0 ]
	[ "$elapsed_ms" -lt 3000 ]
	# said once (its epoll and its write both tell)
	[ "$(grep -c "the reader went away" "$T/trace.err")" = 1 ]
}

# none_stopped: no process with $TAG on its command line is stopped
none_stopped() {
	local pid
	for pid in $(pgrep -f -- "$TAG"); do
		[ "$(proc_state "$pid")" != T ] || return 1
	done
}

# command_left: the processes with $TAG on their command line but
# mt-trace's own (its background detacher)
command_left() {
	local pid
	for pid in $(pgrep -f -- "$TAG"); do
		case $(cat "/proc/$pid/comm" 2>/dev/null) in
		mt-trace-detach | "") ;;
		*) echo "$pid" ;;
		esac
	done
}

no_command_left() { [ -z "$(command_left)" ]; }

@test "the reader goes away while the command starts: no process of it is left stopped" {
	require_bpf
	# the BPF side stops a process that maps new code (its exec, its
	# libraries) until mt-trace has inspected it; mt-trace must not leave
	# it stopped when it gives up
	export TAG="--tag=$T"
	for i in 1 2 3 4 5; do
		bash -c 'mt-trace -- "$MT_FIXTURES/sleeper" 2 "$TAG" 2>/dev/null | head -c 1 >/dev/null' || true
	done
	# a stop of mt-trace's undone as it ends may be seen a moment later
	wait_for 5 none_stopped || true
	stopped=""
	for pid in $(pgrep -f -- "$TAG" || true); do
		state=$(awk '/^State:/ {print $2}' "/proc/$pid/status" 2>/dev/null || true)
		[ "$state" = T ] && stopped="$stopped $pid"
		kill -CONT "$pid" 2>/dev/null || true
		kill -KILL "$pid" 2>/dev/null || true
	done
	[ -z "$stopped" ]
}

@test "the reader is gone before the command starts: mt-trace fails, no command left behind" {
	require_bpf
	export TAG="--tag=$T"
	run bash -c 'mt-trace -- "$MT_FIXTURES/sleeper" 23 "$TAG" 2>"$T/trace.err" | true
		echo "${PIPESTATUS[0]}"'
	[ "$output" != 0 ]
	[ -s "$T/trace.err" ]
	# a leftover would be the sleeper (23 s), or mt-trace's child still
	# held before its exec; both have the unique tag on their command
	# line (as mt-trace's background detacher has, for a moment: not the
	# command).  One on its way out may be seen a moment longer.
	wait_for 5 no_command_left || true
	left=$(command_left)
	for pid in $left; do kill -KILL "$pid" || true; done
	[ -z "$left" ]
}

# ---- lost events ----------------------------------------------------------

# total_events: delivered events + the trailer's lost count, of
# $T/out.msgpack.  Rss events are left out: their number changes from run
# to run (page faults), and they travel on the lifecycle ring, which a
# flood of allocator events cannot fill.
total_events() {
	# the events delivered but Rss and Lost, and those lost; counted by
	# the decoder in one pass (not a JSON dump of 200,000 events)
	meta '.events - (.by_type.Rss // 0) + .trailer.lost_events'
}

@test "lost events: a 4 KiB ring under a storm: delivered + lost == the calls made" {
	require_bpf
	# (--no-fast: the storm's calls go through the BPF ring; the
	# recorder's rings wait instead of dropping, fast.bats)
	# the same program with 1 pair: everything but the storm (ld.so's
	# mmaps, the heap's brk, exec and exit) plus 2 events; deterministic
	trace_ok --no-fast -- "$MT_FIXTURES/storm" 1
	run meta '.trailer.lost_events'
	assert_output 0
	base=$(($(total_events) - 2))
	pairs=50000  # 100,000 events: 5.6 MB, less than a 16 MiB ring
	# a ring big enough loses nothing and sees every call
	trace_ok --no-fast --ring-size 16MiB -- "$MT_FIXTURES/storm" "$pairs"
	run total_events
	assert_output "$((base + 2 * pairs))"
	# a tiny ring without backpressure (tests/lossless.bats) loses
	# events, and counts every one it lost (a longer storm, so that even a
	# fast consumer falls behind)
	pairs=200000
	trace_ok --no-fast --ring-size 4096 --no-backpressure -- "$MT_FIXTURES/storm" "$pairs"
	lost=$(meta '.trailer.lost_events')
	echo "ring 4 KiB: $lost of $((base + 2 * pairs)) events lost" >&3
	[ "$lost" -gt 0 ]
	run total_events
	assert_output "$((base + 2 * pairs))"
	# lost counts also reach the reader as Lost records, summing the same
	run meta '.lost_records == .trailer.lost_events'
	assert_output true
	# lifecycle events are on their own path: the exit is never lost
	run meta '.by_type.Exit'
	assert_output 1
}

# ---- where tracefs is not mounted ------------------------------------------

@test "tracefs not mounted (private mount namespace): tracing still works" {
	require_bpf
	run unshare -m bash -c '
		for m in /sys/kernel/tracing /sys/kernel/debug/tracing; do
			while mountpoint -q "$m"; do umount "$m" || exit 97; done
		done
		mt-trace -- "$MT_FIXTURES/malloc_free" 2>"$T/trace.err" |
			mt-encode >"$T/out.msgpack"
		echo "${PIPESTATUS[0]} ${PIPESTATUS[1]}"'
	cat "$T/trace.err"
	assert_output "0 0"
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG"
	echo "$output"
	assert_success
	run jq_events '[.[] | select(.type == "Mmap")] | length > 0'
	assert_output true
	# RSS needs the classic tracepoint: mt-trace mounts tracefs for itself
	run meta '.header.rss_tracked'
	assert_output true
	run jq_events '[.[] | select(.type == "Rss")] | length > 0'
	assert_output true
}

@test "-vv times each step of the start-up and of the exit, and they add up to the totals" {
	require_bpf
	trace_ok -vv -- true
	grep 'start-up:' "$T/trace.err" >"$T/phases"
	for step in "BPF load" "first allocators" "tracepoints" "total"; do
		assert_file_contains "$T/phases" "start-up: $step "
	done
	# the steps are the parts of the total, and each took some time; each
	# figure is rounded to 0.01 ms, so the parts' sum may pass the total
	# by half of that for each of them and for the total
	run awk '/start-up: total/ { total = $(NF - 1); next }
		 { sum += $(NF - 1); n++; if ($(NF - 1) < 0) bad = 1 }
		 END { exit !(total > 0 && !bad && sum <= total + 0.005 * (n + 1) &&
			      sum > total * 0.8) }' "$T/phases"
	assert_success
	# and the exit: from the command's end to mt-trace's
	grep 'mt-trace: exit:' "$T/trace.err" >"$T/exit"
	for step in "last drain, end" "detach" "free" "total"; do
		assert_file_contains "$T/exit" "exit: $step "
	done
	run awk '/exit: total/ { total = $(NF - 1); next }
		 { sum += $(NF - 1); n++; if ($(NF - 1) < 0) bad = 1 }
		 END { exit !(total > 0 && !bad && sum <= total + 0.005 * (n + 1)) }' \
		"$T/exit"
	assert_success
}

@test "-vvv gives the verifier's time and instructions walked for each program loaded, and their total" {
	require_bpf
	trace_ok -vvv -- true
	grep 'mt-trace: verifier: ' "$T/trace.err" >"$T/verifier"
	# the programs every session loads, each with its figures
	for prog in on_exec on_fork on_exit; do
		grep -Eq "verifier: $prog +[0-9]+\.[0-9]{2} ms, [1-9][0-9]* instructions walked" \
			"$T/verifier"
	done
	# of the two sys_exit programs, the one loaded and not the other:
	# with --stacks (make test-stacks: MT_STACKS=1) the one that takes a
	# stack
	loaded=on_sys_exit other=sys_exit_stacks
	[ "${MT_STACKS:-0}" != 1 ] || loaded=sys_exit_stacks other=on_sys_exit
	grep -q "verifier: $loaded " "$T/verifier"
	! grep -q "verifier: $other " "$T/verifier"
	# the total is the sum of the programs' times (each rounded)
	run awk '/verifier: total/ { total = $(NF - 1); next }
		 { sum += $(NF - 4); n++ }
		 END { d = sum - total; if (d < 0) d = -d
		       exit !(n >= 4 && total > 0 && d <= 0.005 * (n + 1)) }' \
		"$T/verifier"
	assert_success
}

@test "kmem:rss_stat's perf event is opened beside the BPF load, and RSS is recorded through it" {
	require_bpf
	require_command strace
	id=$(tracefs_event_id kmem/rss_stat)
	[ -n "$id" ]
	# opening it waits for the kernel's event_mutex, which a session
	# detaching its own holds through a grace period: not on the thread
	# that loads the programs (LeakSanitizer cannot run under ptrace).
	# A file a thread (-ff): strace prints perf_event_open's attr when the
	# call returns, so with -f a call that waits while another thread's is
	# reported is split into "perf_event_open( <unfinished ...>" and
	# "<... perf_event_open resumed>{type=...": the old check missed it
	# whenever another session was detaching.
	ASAN_OPTIONS=detect_leaks=0 run strace -ff \
		-e trace=perf_event_open,bpf -o "$T/st" \
		mt-trace -o "$T/t.raw" -- true
	assert_success
	echo "$output" # mt-trace's own words (a warning without RSS?)
	grep -H 'perf_event_open' "$T"/st.* | cut -c1-200 || true
	# each open of the tracepoint's event, as "thread fd"
	opens=$(awk -v config="config=$id," '
		/^perf_event_open\(\{type=PERF_TYPE_TRACEPOINT,/ &&
		index($0, config) && match($0, /\) = [0-9]+$/) {
			n = split(FILENAME, part, ".")
			print part[n], substr($0, RSTART + 4)
		}' "$T"/st.*)
	# the program, as "thread fd"
	loads=$(awk '/^bpf\(BPF_PROG_LOAD, .*prog_name="on_rss_size"/ &&
		match($0, /\) = [0-9]+$/) {
			n = split(FILENAME, part, ".")
			print part[n], substr($0, RSTART + 4)
		}' "$T"/st.*)
	echo "opened (thread fd): $opens; loaded (thread fd): $loads"
	# one event, opened by another thread than the loader's
	[ "$(echo "$opens" | wc -l)" -eq 1 ]
	[ "$(echo "$loads" | wc -l)" -eq 1 ]
	read -r opener event_fd <<<"$opens"
	read -r loader prog_fd <<<"$loads"
	[ -n "$event_fd" ]
	[ -n "$prog_fd" ]
	[ "$opener" != "$loader" ]
	# the program is attached to that event
	run grep -l "^bpf(BPF_LINK_CREATE, {link_create={prog_fd=$prog_fd, target_fd=$event_fd, attach_type=BPF_PERF_EVENT,.*) = [0-9]*$" "$T"/st.*
	assert_success
	# and the root's RSS is there
	run mt-encode --jsonl "$T/t.raw"
	assert_success
	assert_output --regexp '"type":"Rss","pid":[0-9]+,'
}

# The kernel builds a hash table's buckets and a ring's pages when the map
# is made: the largest are made by a thread while the command is forked
# (parallel_maps.c), and the load takes them instead of making its own.
@test "the largest maps are made beside the fork, once, and the load uses them" {
	require_bpf
	require_command strace
	ASAN_OPTIONS=detect_leaks=0 run strace -f -e trace=bpf \
		-o "$T/strace.txt" mt-trace -o "$T/t.raw" -- true
	assert_success
	loader=$(awk '/BPF_PROG_LOAD.*prog_name="on_exit"/ { print $1 }' "$T/strace.txt")
	[ -n "$loader" ]
	for map in traced resumed unthrottled code_files events lifecycle; do
		makers=$(awk -v name="map_name=\"$map\"" \
			'/BPF_MAP_CREATE/ && index($0, name) { print $1 }' \
			"$T/strace.txt")
		echo "$map: made by" $makers "; programs loaded by $loader"
		[ "$(echo $makers | wc -w)" -eq 1 ]
		[ "$makers" != "$loader" ]
	done
	# and they work: the command's exec and exit are in the trace
	run mt-encode --jsonl "$T/t.raw"
	assert_success
	assert_output --regexp '"type":"Exec"'
	assert_output --regexp '"type":"Exit"'
}

# The first uprobe registration after a quiet spell waits for an RCU grace
# period (5-15 ms); a thread takes that wait beside the BPF load with probes
# on a file nobody maps (uprobe_grace.c).  The kernels here have uprobe_multi
# links, so it must work.  (--no-fast: the recorder's mode, whose
# libc and libstdc++ carry no probes, waits for nothing unless --scan or
# MT_SCAN names a file to probe, parallel_start.c.)
@test "-vv: the first uprobe registration's wait is taken beside the BPF load" {
	require_bpf
	trace_ok -vv --no-fast -- true
	run grep -E 'uprobe grace period taken beside the BPF load: the first registration in [0-9.]+ ms, [1-9][0-9]* in all' "$T/trace.err"
	assert_success
	run grep 'not taken beside' "$T/trace.err"
	assert_failure
}
