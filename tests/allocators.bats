#!/usr/bin/env bats
# Every allocator (issue 5): real allocators from Debian packages (glibc,
# libstdc++, jemalloc, mimalloc, tcmalloc), linked dynamically, statically,
# stripped, renamed with a prefix, dlopen'ed, in an exec'd grandchild.
# Each fixture (tests/fixtures/alloc/, built into build/fixtures/alloc/)
# logs the events its own calls must give; tests/lib/trace_check.py checks
# that inside each window the trace holds exactly those, in order, field by
# field: one event per call, none from the malloc a wrapper calls inside.
# Some tests also compare with literal sequences from the issue, and check
# the fixture is what it claims (where its malloc really lives, which ELF
# sections it has), so a build that silently fell back to glibc fails.

load helpers

CHECK="$TOP/tests/lib/trace_check.py"
ALLOC="$MT_FIXTURES/alloc"
ALLOC_SRC="$TOP/tests/fixtures/alloc"
# jemalloc's thread-local data needs more static TLS than glibc keeps spare
# for dlopen (tests/fixtures/alloc/myalloc.c).
DLOPEN_TUNABLES=glibc.rtld.optional_static_tls=16384

setup() {
	T="$BATS_TEST_TMPDIR"
	export T
	export MT_FIXTURE_LOG="$T/fixture.log" MT_FIXTURES
}

# check_log [N]: every window of the fixture log (or only the Nth, from 0)
# matches the trace exactly.
check_log() {
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" \
		--kinds alloc ${1:+--window "$1"}
	if [ "$status" != 0 ]; then
		echo "--- mt-trace's stderr:"
		cat "$T/trace.err"
	fi
	assert_success
}

# check_alloc NAME [ARGS]: trace build/fixtures/alloc/NAME, compare windows.
check_alloc() {
	local name=$1
	shift
	trace_ok -- "$ALLOC/$name" "$@"
	check_log
}

# check_alloc_window N NAME [ARGS]: the same for the Nth window only, for
# a test about one part of a fixture.
check_alloc_window() {
	local window=$1 name=$2
	shift 2
	trace_ok -- "$ALLOC/$name" "$@"
	check_log "$window"
}

# where SYMBOL: the file the fixture's dynamic linker says defines SYMBOL.
where() {
	jq -r "select(.info == \"where\" and .symbol == \"$1\") | .path" \
		"$MT_FIXTURE_LOG" | head -n 1
}

# window N: the traced allocator events inside the log's Nth window (from
# 0), one "Type size [alignment]" line each, in trace order.
window() {
	local pid tid t0 t1
	read -r pid tid t0 t1 < <(jq -s -r --argjson n "$1" '
		[.[] | select(.mark == "begin")][$n] as $b |
		[.[] | select(.mark == "end" and .pid == $b.pid and
			.tid == $b.tid and .t >= $b.t)][0] as $e |
		"\($b.pid) \($b.tid) \($b.t) \($e.t)"' "$MT_FIXTURE_LOG")
	"$PY" "$CHECK" dump "$T/out.msgpack" --pid "$pid" --tid "$tid" \
		--type alloc | jq -s -r "
		map(select(.timestamp >= $t0 and .timestamp <= $t1)) |
		sort_by(.timestamp) | .[] |
		[.type, .size, .alignment] | map(select(. != null)) |
		map(tostring) | join(\" \")"
}

# allocators: "KIND REALPATH" for every allocator the artifact lists, from
# Allocator records and from a header or trailer "allocators" list.
allocators() {
	local kind path
	{
		"$PY" "$CHECK" dump "$T/out.msgpack" --type Allocator |
			jq -r '"\(.kind) \(.path)"'
		"$PY" "$CHECK" meta "$T/out.msgpack" | jq -r '
			[.header.allocators, .trailer.allocators] | .[] |
			select(type == "array") | .[] | "\(.kind) \(.path)"'
	} | while read -r kind path; do
		echo "$kind $(realpath -m "$path")"
	done | sort -u
}

# listed KIND PATH: the artifact lists PATH (any spelling) as KIND.
listed() {
	run allocators
	echo "$output"
	assert_line "$1 $(realpath -m "$2")"
}

# The issue's C++ sequence, as every build must trace it.
CXX_SEQUENCE="Malloc 44444
Free
Malloc 8
Free
Malloc 88888
AlignedAlloc 32768 4096
Free
Free"

# check_cxx_sequence NAME NEW_FILE [MALLOC_FILE]: NAME's operator new is
# in NEW_FILE, its malloc in MALLOC_FILE (default the same; path patterns),
# and it traces as the issue's sequence.
check_cxx_sequence() {
	check_alloc "$1"
	[[ "$(where "operator new")" == $2 ]] ||
		fail "operator new is in $(where "operator new"), not $2"
	[[ "$(where malloc)" == ${3:-$2} ]] ||
		fail "malloc is in $(where malloc), not ${3:-$2}"
	run window 0
	assert_output "$CXX_SEQUENCE"
}

# ---- C++: operator new / delete -----------------------------------------

@test "C++ with libstdc++: new char[44444], delete[], new 8 B, delete, malloc 88888, aligned new 32 KiB, frees: one event each" {
	require_bpf
	check_cxx_sequence cxx_sequence "*/libstdc++.so.6" "*/libc.so.6"
}

@test "C++ with jemalloc (-ljemalloc replaces new/delete and malloc): the same events, no extra" {
	require_bpf
	check_cxx_sequence cxx_sequence_jemalloc "*/libjemalloc.so.2"
}

@test "C++ with mimalloc (-lmimalloc): the same events, no extra" {
	require_bpf
	check_cxx_sequence cxx_sequence_mimalloc "*/libmimalloc.so.2"
}

@test "C++ with tcmalloc (-ltcmalloc): the same events, no extra" {
	require_bpf
	check_cxx_sequence cxx_sequence_tcmalloc "*/libtcmalloc.so.4"
}

@test "C++ with libjemalloc.a inside the executable: the same events, no extra" {
	require_bpf
	check_cxx_sequence cxx_sequence_jemalloc_static \
		"$ALLOC/cxx_sequence_jemalloc_static"
}

# Every replaceable operator: plain, array, nothrow, sized, aligned,
# aligned nothrow, sized aligned.  libstdc++'s aligned new rounds the size
# up before calling aligned_alloc: the event must have the size asked.
CXX_OPERATORS="Malloc 1001
Free
Malloc 1002
Free
Malloc 1003
Free
Malloc 1004
Free
Malloc 1005
Free
Malloc 1006
Free
AlignedAlloc 1007 64
Free
AlignedAlloc 1008 128
Free
AlignedAlloc 1009 256
Free
AlignedAlloc 1010 512
Free
AlignedAlloc 1011 1024
Free
AlignedAlloc 1012 2048
Free"

# check_cxx_operators NAME LIBRARY
check_cxx_operators() {
	check_alloc "$1"
	[[ "$(where "operator new")" == $2 ]] ||
		fail "operator new is in $(where "operator new"), not $2"
	run window 0
	assert_output "$CXX_OPERATORS"
}

@test "C++ operators with libstdc++: new/new[] plain and nothrow, aligned (size asked, not rounded), delete plain/sized/aligned/nothrow" {
	require_bpf
	check_cxx_operators cxx_operators "*/libstdc++.so.6"
}

@test "C++ operators with jemalloc: one event per operator" {
	require_bpf
	check_cxx_operators cxx_operators_jemalloc "*/libjemalloc.so.2"
}

@test "C++ operators with mimalloc (its missing nothrow deletes go through libstdc++'s to mimalloc's): one event per operator" {
	require_bpf
	check_cxx_operators cxx_operators_mimalloc "*/libmimalloc.so.2"
}

@test "C++ operators with tcmalloc: one event per operator" {
	require_bpf
	check_cxx_operators cxx_operators_tcmalloc "*/libtcmalloc.so.4"
}

# ---- jemalloc -------------------------------------------------------------

JEMALLOC_FAMILY="Malloc 4321
Free
Calloc 1234
Free
Malloc 4
Free
Malloc 1111
Realloc 2222
Free
AlignedAlloc 640 64
AlignedAlloc 700 128
AlignedAlloc 800 256
AlignedAlloc 900 $(getconf PAGESIZE)
Free
Free
Free
Free"

JEMALLOC_ALLOCX="Malloc 5555
Free
Malloc 6666
Realloc 7777
Malloc 4000
Realloc 4096
Free
Free"

@test "jemalloc (libjemalloc.so.2): malloc 4321, free, calloc 1234, free, malloc 4, free, malloc 1111, realloc 2222, free, aligned family" {
	require_bpf
	check_alloc_window 0 jemalloc_api
	[[ "$(where malloc)" == */libjemalloc.so.2 ]]
	run window 0
	assert_output "$JEMALLOC_FAMILY"
}

@test "jemalloc *allocx: mallocx, sdallocx, rallocx, xallocx in place (Realloc) and not (no event), dallocx; nallocx no event" {
	require_bpf
	check_alloc_window 1 jemalloc_api
	run window 1
	assert_output "$JEMALLOC_ALLOCX"
	# xallocx in place: the same address before and after
	run jq -s -r '[.[] | select(.type == "Realloc" and .size == 4096)] |
		map(.addr == .old_addr) | @json' "$MT_FIXTURE_LOG"
	assert_output "[true]"
}

@test "jemalloc static (libjemalloc.a in the executable): every call" {
	require_bpf
	check_alloc jemalloc_static
	[[ "$(where malloc)" == "$ALLOC/jemalloc_static" ]]
	run window 0
	assert_output "$JEMALLOC_FAMILY"
	run window 1
	assert_output "$JEMALLOC_ALLOCX"
}

# The command's program is inspected before it runs (tracer_code.c), so
# its exec does not stop; its allocator must be probed all the same.
@test "jemalloc static, its program inspected before the command runs: no stop, every call" {
	require_bpf
	trace_ok -v -- "$ALLOC/jemalloc_static"
	check_log
	# by default the recorder ld.so preloads stops it once; with
	# --no-fast (tests/run runs this file again with MT_FAST=0) nothing
	stops=1
	[ "${MT_FAST:-}" != 0 ] || stops=0
	assert_file_contains "$T/trace.err" \
		"^mt-trace: stops for new code: $stops; inspected ahead, programs: 1, "
	listed jemalloc "$ALLOC/jemalloc_static"
	run window 1
	assert_output "$JEMALLOC_ALLOCX"
}

# A library with an allocator in it is never inspected on a guess: it
# stops when ld.so maps it, and its calls are traced as ever.
@test "jemalloc shared: the library with the allocator stops for its inspection, every call" {
	require_bpf
	trace_ok -v -- "$ALLOC/jemalloc_api"
	check_log
	run grep -o "^mt-trace: stops for new code: [0-9]*; inspected ahead, programs: 1, " "$T/trace.err"
	assert_success
	[ "$(awk '{print $6}' <<<"$output" | tr -d ';')" -ge 1 ]
	listed jemalloc "$(where malloc)"
}

@test "jemalloc static, stripped of debug info (.symtab kept): every call" {
	require_bpf
	run readelf -S -W "$ALLOC/jemalloc_static_nodebug"
	refute_output --partial ".debug_info"
	assert_output --partial ".symtab"
	check_alloc jemalloc_static_nodebug
	run window 1
	assert_output "$JEMALLOC_ALLOCX"
}

@test "jemalloc static, no .symtab at all: the malloc family found from .dynsym" {
	require_bpf
	run readelf -S -W "$ALLOC/jemalloc_static_stripped"
	refute_output --partial ".symtab"
	run readelf --dyn-syms -W "$ALLOC/jemalloc_static_stripped"
	assert_output --regexp "FUNC +GLOBAL +DEFAULT +[0-9]+ malloc"
	check_alloc jemalloc_static_stripped plain
	run window 0
	assert_output "$JEMALLOC_FAMILY"
}

# check_prefixed PREFIX: jemalloc_PREFIX calls jemalloc only as PREFIX*
# (static, .symtab only), next to glibc's malloc.
check_prefixed() {
	run nm "$ALLOC/jemalloc_$1"
	assert_line --regexp " T $2malloc$"
	assert_line --regexp " T $2mallocx$"
	assert_line --regexp " U malloc@GLIBC"
	check_alloc "jemalloc_$1"
	run window 0
	assert_output "$JEMALLOC_FAMILY
Malloc 3210
Free"
	run window 1
	assert_output "$JEMALLOC_ALLOCX"
}

@test "jemalloc with prefix je_ (static, renamed), next to glibc's malloc: both traced, once each" {
	require_bpf
	check_prefixed je je_
}

@test "jemalloc with prefix _rjem_ (as Rust's tikv-jemallocator), next to glibc's malloc: both traced, once each" {
	require_bpf
	check_prefixed rjem _rjem_
}

# ---- mimalloc ------------------------------------------------------------

@test "mimalloc mi_* API: malloc/zalloc/new/calloc/mallocn, realloc/rezalloc/reallocn/reallocarray, free/free_size" {
	require_bpf
	check_alloc_window 0 mimalloc_api
	[[ "$(where mi_malloc)" == */libmimalloc.so.2 ]]
	run window 0
	assert_output "Malloc 1001
Malloc 1002
Malloc 1003
Calloc 3012
Malloc 5025
Realloc 20001
Realloc 20002
Realloc 60009
Realloc 80016
Free
Free
Free
Free
Free"
}

@test "mimalloc aligned API (each argument order): malloc/zalloc/new_aligned, aligned_alloc, memalign, posix_memalign, calloc_aligned, realloc_aligned, free_aligned/free_size_aligned" {
	require_bpf
	check_alloc_window 1 mimalloc_api
	run window 1
	assert_output "AlignedAlloc 3001 64
AlignedAlloc 3002 128
AlignedAlloc 3003 256
AlignedAlloc 3072 512
AlignedAlloc 3005 1024
AlignedAlloc 3006 2048
Calloc 6014
Realloc 4001
Free
Free
Free
Free
Free
Free
Free"
}

# The malloc family through a replacing allocator (alloc.h).
MALLOC_FAMILY="Malloc 4321
Free
Calloc 1234
Free
Malloc 1111
Realloc 2222
Free
AlignedAlloc 640 64
AlignedAlloc 700 128
AlignedAlloc 800 256
AlignedAlloc 900 $(getconf PAGESIZE)
AlignedAlloc 1000 $(getconf PAGESIZE)
Free
Free
Free
Free
Free"

@test "mimalloc's own malloc, calloc, realloc, free, aligned_alloc, memalign, posix_memalign, valloc, pvalloc: one event each" {
	require_bpf
	check_alloc_window 2 mimalloc_api
	[[ "$(where malloc)" == */libmimalloc.so.2 ]]
	run window 2
	assert_output "$MALLOC_FAMILY"
}

# ---- tcmalloc ------------------------------------------------------------

TC_API="Malloc 1001
Malloc 1002
Malloc 1003
Malloc 1004
Malloc 1005
Calloc 3018
Realloc 20001
AlignedAlloc 3001 64
AlignedAlloc 3002 128
AlignedAlloc 3003 $(getconf PAGESIZE)
AlignedAlloc 3004 $(getconf PAGESIZE)
Free
Free
Free
Free
Free
Free
Free
Free
Free
Free"

@test "tcmalloc tc_* API (libtcmalloc.so.4): malloc/new/newarray(+nothrow), calloc, realloc, memalign, posix_memalign, valloc, pvalloc, free/delete/deletearray/delete_sized" {
	require_bpf
	check_alloc_window 0 tcmalloc_api
	[[ "$(where tc_malloc)" == */libtcmalloc.so.4 ]]
	run window 0
	assert_output "$TC_API"
}

@test "tcmalloc's own malloc family (libtcmalloc.so.4): one event each" {
	require_bpf
	check_alloc_window 1 tcmalloc_api
	[[ "$(where malloc)" == */libtcmalloc.so.4 ]]
	run window 1
	assert_output "$MALLOC_FAMILY"
}

@test "tcmalloc static (libtcmalloc_minimal.a in the executable): tc_* API and malloc family" {
	require_bpf
	check_alloc tcmalloc_static
	[[ "$(where tc_malloc)" == "$ALLOC/tcmalloc_static" ]]
	run window 0
	assert_output "$TC_API"
	run window 1
	assert_output "$MALLOC_FAMILY"
}

@test "tcmalloc static, stripped of debug info: tc_* API and malloc family" {
	require_bpf
	run readelf -S -W "$ALLOC/tcmalloc_static_nodebug"
	refute_output --partial ".debug_info"
	check_alloc tcmalloc_static_nodebug
	run window 0
	assert_output "$TC_API"
}

# ---- glibc, and fully static executables (no ld.so, no .dynsym) ----------

@test "glibc's malloc family (libc.so.6): one event each, the same sequence as the replacing allocators'" {
	require_bpf
	check_alloc libc_family
	[[ "$(where malloc)" == */libc.so.6 ]]
	run window 0
	assert_output "$MALLOC_FAMILY"
}

@test "fully static glibc program (-static): glibc's malloc family inside the executable, one event each" {
	require_bpf
	run readelf -l -W "$ALLOC/libc_family_fullstatic"
	refute_output --partial "INTERP"
	check_alloc libc_family_fullstatic
	run window 0
	assert_output "$MALLOC_FAMILY"
}

@test "fully static jemalloc program (-static, libjemalloc.a and libc.a): every call" {
	require_bpf
	run readelf -l -W "$ALLOC/jemalloc_fullstatic"
	refute_output --partial "INTERP"
	check_alloc jemalloc_fullstatic
	run window 0
	assert_output "$JEMALLOC_FAMILY"
	run window 1
	assert_output "$JEMALLOC_ALLOCX"
}

# ---- edge cases: one event per call, none for a failed call --------------

# fx_realloc_edges_window (alloc.h) where realloc(p, 0) frees p and
# returns NULL (glibc, jemalloc, tcmalloc; the fixture logs which).
REALLOC_EDGES="Realloc 3333
Free
Malloc 0
Free"

# check_edges N NAME: window N of NAME is the realloc edge cases.
check_edges() {
	check_alloc_window "$1" "$2"
	run window "$1"
	if [ "$(jq -r 'select(.info == "realloc_0_returned_null") | .value' \
		"$MT_FIXTURE_LOG")" = 1 ]; then
		assert_output "$REALLOC_EDGES"
	else # realloc(p, 0) gave a block: a Realloc to 0, then its free
		assert_output "Realloc 3333
Realloc 0
Free
Malloc 0
Free"
	fi
}

@test "glibc edges: realloc(NULL, n) one Realloc, realloc(p, 0) one Free, failed realloc/malloc/calloc and free(NULL) none, malloc(0) one" {
	require_bpf
	check_edges 1 libc_family
}

@test "jemalloc edges: realloc(NULL, n), realloc(p, 0), failures, free(NULL), malloc(0): one event per call, none for a failure" {
	require_bpf
	check_edges 2 jemalloc_api
}

@test "mimalloc edges (its realloc(p, 0) returns a block): one event per call, none for a failure" {
	require_bpf
	check_edges 3 mimalloc_api
	run jq -r 'select(.info == "realloc_0_returned_null") | .value' "$MT_FIXTURE_LOG"
	assert_output 0
}

@test "tcmalloc edges: one event per call, none for a failure" {
	require_bpf
	check_edges 2 tcmalloc_api
}

# ---- libraries loaded later, programs exec'd later -----------------------

# A library loaded with dlopen stops for its inspection (its allocator);
# the libraries it needs (libm, libgcc_s: its own, not the program's) are
# inspected while it waits, and their mappings do not stop it again.
@test "dlopen: the library with an allocator stops once; the libraries it needs are inspected at that stop" {
	require_bpf
	run readelf -d "$ALLOC/dlopen_alloc"
	assert_output --partial "[libc.so.6]"
	refute_output --partial "[libm.so.6]"
	run readelf -d "$ALLOC/libmyalloc.so"
	assert_output --partial "[libm.so.6]"
	assert_output --partial "[libgcc_s.so.1]"
	export GLIBC_TUNABLES=$DLOPEN_TUNABLES
	trace_ok -v -- "$ALLOC/dlopen_alloc" main
	check_log
	# by default the preloaded recorder stops once more (not with
	# --no-fast, MT_FAST=0)
	stops=2
	[ "${MT_FAST:-}" != 0 ] || stops=1
	run grep -o "^mt-trace: stops for new code: $stops; inspected ahead, programs: 1, libraries: [0-9]*$" "$T/trace.err"
	assert_success
	[ "${output##* }" -ge 2 ]
}

# check_dlopen MODE: 100 mallocx then 100 dallocx through libmyalloc.so,
# right after the loading thread's dlopen.
check_dlopen() {
	export GLIBC_TUNABLES=$DLOPEN_TUNABLES
	check_alloc dlopen_alloc "$1"
	[[ "$(where mallocx)" == "$ALLOC/libmyalloc.so" ]]
	run window 0
	assert_output "$(for i in $(seq 1000 1099); do echo "Malloc $i"; done
		for i in $(seq 100); do echo Free; done)"
}

@test "dlopen'ed library with jemalloc inside, from the main thread: all 100 allocations and frees seen" {
	require_bpf
	check_dlopen main
}

@test "dlopen'ed library with jemalloc inside, loaded by a second thread: all 100 seen, under that thread's tid" {
	require_bpf
	check_dlopen thread
	main=$(jq -r 'select(.info == "main") | .value' "$MT_FIXTURE_LOG")
	loader=$(jq -r 'select(.info == "loader") | .value' "$MT_FIXTURE_LOG")
	[ "$loader" != "$main" ]
	run "$PY" "$CHECK" dump "$T/out.msgpack" --tid "$loader" --type Malloc
	[ "$(jq -s '[.[] | select(.size >= 1000 and .size < 1100)] | length' <<<"$output")" = 100 ]
}

@test "dlopen by a second thread while the main thread keeps allocating: both threads' calls exact, none lost or doubled by the stop while attaching" {
	require_bpf
	export GLIBC_TUNABLES=$DLOPEN_TUNABLES
	check_alloc dlopen_alloc busy
	run jq -r 'select(.info == "pairs") | .value' "$MT_FIXTURE_LOG"
	[ "$output" -ge 1000 ]
	run jq -s '[.[] | select(.mark == "begin") | .tid] | unique | length' \
		"$MT_FIXTURE_LOG"
	assert_output 2
}

@test "a shell script whose child shell runs a static-jemalloc grandchild: its allocations are seen" {
	require_bpf
	trace_ok -- "$ALLOC_SRC/exec_chain.sh" "$ALLOC/jemalloc_static"
	check_log
	run window 1
	assert_output "$JEMALLOC_ALLOCX"
	# root sh -> sh -c -> jemalloc_static: two Forks, the second to the
	# fixture's pid, which then execs the static binary
	root=$("$PY" "$CHECK" meta "$T/out.msgpack" | jq '.header.root_pid')
	grandchild=$(jq -s '[.[] | select(.mark == "begin")][0].pid' "$MT_FIXTURE_LOG")
	run "$PY" "$CHECK" dump "$T/out.msgpack" --type Fork
	middle=$(jq -s ".[] | select(.pid == $grandchild) | .ppid" <<<"$output")
	[ -n "$middle" ]
	[ "$middle" != "$root" ]
	[ "$(jq -s ".[] | select(.pid == $middle) | .ppid" <<<"$output")" = "$root" ]
	run "$PY" "$CHECK" dump "$T/out.msgpack" --pid "$grandchild" --type Exec
	assert_output --partial "\"path\": \"$ALLOC/jemalloc_static\""
}

@test "a shell script that execs a static-jemalloc program (same pid, new executable): its allocations are seen" {
	require_bpf
	trace_ok -- "$ALLOC_SRC/exec_chain.sh" --exec "$ALLOC/jemalloc_static"
	check_log
	root=$("$PY" "$CHECK" meta "$T/out.msgpack" | jq '.header.root_pid')
	run jq -s '[.[] | select(.mark == "begin")][0].pid' "$MT_FIXTURE_LOG"
	assert_output "$root"
}

@test "a descendant still running when CMD exits is not left stopped (the stop while attaching is always undone)" {
	require_bpf
	# mt-trace stops a process that maps code until its probes are
	# attached; a descendant that execs while mt-trace ends must still get
	# its SIGCONT (or never be stopped), not hang stopped for ever.
	for run in 1 2 3; do
		rm -f "$T/bg.pid"
		trace_ok -- sh -c 'sleep 1 </dev/null >/dev/null 2>&1 3>&- &
			echo $! >"$T/bg.pid"; exit 0'
		bg=$(cat "$T/bg.pid")
		state=
		for _ in $(seq 30); do
			state=$(awk '{ print $3 }' "/proc/$bg/stat" 2>/dev/null) ||
				true
			[ -z "$state" ] || [ "$state" = Z ] && break
			sleep 0.1
		done
		if [ "$state" = T ]; then
			kill -CONT "$bg" # ours: let it end, then report
			fail "run $run: sleep (pid $bg) still stopped 3 s after mt-trace ended"
		fi
	done
}

# ---- --scan / MT_SCAN: files the automatic detection misses ---------------

@test "a binary stripped of every symbol: not found by itself; --scan naming its unstripped copy traces every call (man page)" {
	require_bpf
	run readelf -S -W "$ALLOC/jemalloc_fullstatic_stripped"
	refute_output --partial "symtab"
	refute_output --partial ".dynsym"
	# without --scan: nothing names its allocator, so no allocator event
	trace_ok -- "$ALLOC/jemalloc_fullstatic_stripped"
	run window 1
	assert_output ""
	rm -f "$MT_FIXTURE_LOG"
	trace_ok --scan "$ALLOC/jemalloc_fullstatic" -- \
		"$ALLOC/jemalloc_fullstatic_stripped"
	check_log
	run window 1
	assert_output "$JEMALLOC_ALLOCX"
}

@test "MT_SCAN=FILE:FILE does what --scan does: each file inspected at the start (listed, or a warning naming it)" {
	require_bpf
	# libmyalloc.so is never mapped by libc_family: only MT_SCAN lists it
	MT_SCAN="/etc/hostname:$ALLOC/libmyalloc.so" \
		trace_ok -- "$ALLOC/libc_family"
	check_log
	listed jemalloc "$ALLOC/libmyalloc.so"
	run cat "$T/trace.err"
	assert_output --regexp "mt-trace: warning: .*/etc/hostname"
	trace_ok -- "$ALLOC/libc_family"
	run allocators
	refute_output --partial "libmyalloc.so"
}

@test "--scan of a library the program also dlopens: probed once, each of the 100 calls one event, listed once" {
	require_bpf
	export GLIBC_TUNABLES=$DLOPEN_TUNABLES
	trace_ok --scan "$ALLOC/libmyalloc.so" -- "$ALLOC/dlopen_alloc" main
	check_log
	run allocators
	[ "$(grep -c "/libmyalloc.so\$" <<<"$output")" = 1 ]
}

@test "--scan of a file that is not ELF: a warning naming it, the command runs and is traced; a missing file: exit 125, nothing run" {
	require_bpf
	trace_ok --scan /etc/passwd -- "$ALLOC/libc_family"
	run cat "$T/trace.err"
	assert_output --regexp "mt-trace: warning: .*/etc/passwd"
	check_log
	trace --scan "$T/missing" -- touch "$T/ran"
	[ "$trace_status" = 125 ]
	run cat "$T/trace.err"
	assert_output --partial "$T/missing"
	assert_file_not_exist "$T/ran"
}

# ---- a real C++ program ---------------------------------------------------

@test "a real C++ program (apt-config dump: libstdc++ new/delete): allocations, frees and bytes equal valgrind's" {
	require_bpf
	command -v valgrind >/dev/null || fail "valgrind not installed"
	ldd /usr/bin/apt-config | grep -q 'libstdc++' ||
		fail "apt-config is not a libstdc++ program here"
	# valgrind replaces malloc and operator new/delete and counts each
	# call once: a moving realloc as one alloc and one free, operator new
	# with the size asked.  Not the LD_PRELOAD counter: it writes its
	# counts from an ELF destructor, before libstdc++'s and libapt-pkg's
	# own destructors have made their last frees.  apt-config forks a
	# child (dpkg): only the root process is compared.  No freeres: those
	# frees at exit are valgrind's, not the program's.
	valgrind --child-silent-after-fork=yes --run-libc-freeres=no \
		--run-cxx-freeres=no apt-config dump \
		>/dev/null 2>"$T/vg"
	read -r allocs frees bytes <<<"$(sed -n 's/.*total heap usage: \([0-9,]*\) allocs, \([0-9,]*\) frees, \([0-9,]*\) bytes allocated/\1 \2 \3/p' "$T/vg" | tr -d ,)"
	[ -n "$allocs" ]
	trace_ok --child-stdout /dev/null -- apt-config dump
	root=$("$PY" "$CHECK" meta "$T/out.msgpack" | jq '.header.root_pid')
	"$PY" "$CHECK" dump "$T/out.msgpack" --pid "$root" --type alloc \
		>"$T/root.jsonl"
	run jq -s -r '[(map(select(.type != "Free")) | length),
		(map(select(.type == "Free" or
			(.type == "Realloc" and .old_addr != 0))) | length),
		(map(select(.type != "Free") | .size) | add)] |
		map(tostring) | join(" ")' "$T/root.jsonl"
	echo "valgrind: $allocs $frees $bytes; mt: $output"
	assert_output "$allocs $frees $bytes"
	# the trace did see operator new: libstdc++ is listed
	run allocators
	assert_line --regexp '^libstdc\+\+ .*/libstdc\+\+\.so\.6'
}

# ---- the expectations themselves (no BPF) -------------------------------

# offline NAME [ARGS]: run the fixture untraced and make an artifact of
# exactly its logged events (tests/lib/synth_artifact.py).
offline() {
	local name=$1
	shift
	rm -f "$MT_FIXTURE_LOG"
	GLIBC_TUNABLES=$DLOPEN_TUNABLES "$ALLOC/$name" "$@"
	"$PY" "$TOP/tests/lib/synth_artifact.py" "$MT_FIXTURE_LOG" \
		"$T/out.msgpack"
}

@test "every allocator fixture runs untraced, and its log is the sequence these tests expect" {
	offline cxx_sequence
	run window 0
	assert_output "$CXX_SEQUENCE"
	for a in jemalloc mimalloc tcmalloc; do
		offline "cxx_operators_$a"
		run window 0
		assert_output "$CXX_OPERATORS"
	done
	offline jemalloc_static
	run window 0
	assert_output "$JEMALLOC_FAMILY"
	run window 1
	assert_output "$JEMALLOC_ALLOCX"
	offline jemalloc_rjem
	run window 0
	assert_output "$JEMALLOC_FAMILY
Malloc 3210
Free"
	offline libc_family_fullstatic
	run window 0
	assert_output "$MALLOC_FAMILY"
	offline mimalloc_api
	run window 2
	assert_output "$MALLOC_FAMILY"
	# --window N checks that window alone: spoil the first event of
	# window 1 (window 0 has 14)
	"$PY" "$TOP/tests/lib/synth_artifact.py" "$MT_FIXTURE_LOG" \
		"$T/out.msgpack" --bump 14
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" --window 0
	assert_success
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" --window 1
	assert_failure 1
	assert_output --partial "size=3002"
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" --window 2
	assert_success
	offline tcmalloc_static
	run window 0
	assert_output "$TC_API"
	offline dlopen_alloc thread
	run window 0
	assert_line --index 0 "Malloc 1000"
	assert_line --index 99 "Malloc 1099"
	assert_line --index 199 "Free"
	# and a spoiled artifact fails the same check
	"$PY" "$TOP/tests/lib/synth_artifact.py" "$MT_FIXTURE_LOG" \
		"$T/out.msgpack" --bump 5
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG"
	assert_failure 1
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" --window 0
	assert_failure 1
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" --window 1
	assert_failure 2
	run window 0
	assert_line --index 5 "Malloc 1006"
}

@test "synth_artifact: two windows of one thread less than 1 us apart keep the noise outside both" {
	# A fixture's end mark and its next begin are one write(2) apart
	# (2.2 us here, less on a faster machine): the noise stamped 1 us
	# before a window fell into the previous one, and the test above
	# failed once in a while.
	cat >"$T/log" <<-'LOG'
		{"mark":"begin","pid":100,"tid":100,"t":1000000}
		{"type":"Malloc","pid":100,"tid":100,"addr":4096,"size":10}
		{"mark":"end","pid":100,"tid":100,"t":1005000}
		{"mark":"begin","pid":100,"tid":100,"t":1005500}
		{"type":"Malloc","pid":100,"tid":100,"addr":8192,"size":20}
		{"type":"Free","pid":100,"tid":100,"addr":8192}
		{"type":"Free","pid":100,"tid":100,"addr":4096}
		{"mark":"end","pid":100,"tid":100,"t":1005520}
	LOG
	"$PY" "$TOP/tests/lib/synth_artifact.py" "$T/log" "$T/out.msgpack"
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$T/log"
	echo "$output"
	assert_success
	assert_output --partial "1 expected, 1 traced: match"
	assert_output --partial "3 expected, 3 traced: match"
	# the noise is there, between the windows
	run "$PY" "$CHECK" dump "$T/out.msgpack" --pid 100 --type Malloc
	assert_line --partial '"timestamp": 1005001'
}

# ---- the artifact lists what was traced ----------------------------------

@test "allocators listed: libc and libstdc++ for a C++ program; libjemalloc.so.2 as jemalloc" {
	require_bpf
	trace_ok -- "$ALLOC/cxx_sequence"
	listed libc "$(where malloc)"
	listed libstdc++ "$(where "operator new")"
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -- "$ALLOC/jemalloc_api"
	listed jemalloc "$(where mallocx)"
}

@test "allocators listed: mimalloc and tcmalloc libraries by kind" {
	require_bpf
	trace_ok -- "$ALLOC/mimalloc_api"
	listed mimalloc "$(where mi_malloc)"
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -- "$ALLOC/tcmalloc_api"
	listed tcmalloc "$(where tc_malloc)"
}

@test "allocators listed: a static executable and a dlopen'ed library, as jemalloc" {
	require_bpf
	trace_ok -- "$ALLOC/jemalloc_rjem"
	listed jemalloc "$ALLOC/jemalloc_rjem"
	listed libc "$(ldd "$ALLOC/jemalloc_rjem" | awk '$1 == "libc.so.6" { print $3 }')"
	rm -f "$MT_FIXTURE_LOG"
	export GLIBC_TUNABLES=$DLOPEN_TUNABLES
	trace_ok -- "$ALLOC/dlopen_alloc" main
	listed jemalloc "$ALLOC/libmyalloc.so"
}
