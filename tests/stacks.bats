#!/usr/bin/env bats
# Call stacks (mt-trace --stacks, issue 11), checked against tools mt did
# not write: addr2line names each recorded frame from the fixture's own
# debug information, gdb's backtrace at a breakpoint on the same malloc
# gives the chain to expect, readelf the entry point a complete stack
# ends in (tests/lib/stacks_check.py; python3-msgpack decodes).
#
# The fixture (tests/fixtures/stacks/) is built -O2 -fomit-frame-pointer,
# the library that calls malloc too, like Debian's own binaries: no frame
# pointer chain to follow.

load helpers

CHECK="$TOP/tests/lib/stacks_check.py"
STACKS="$MT_FIXTURES/stacks/stacks"

setup() {
	require_bpf
	T="$BATS_TEST_TMPDIR"
	export T
	[ -x "$STACKS" ] || fail "no $STACKS: run 'make fixtures'"
}

# The chain gdb shows where the malloc of SIZE bytes in `stacks MODE` is
# called (the entry of stk_leaf, the function that calls it: a breakpoint
# in libc's malloc itself meets the int3 of any global uprobe another
# session put there), down to the frame named LAST.  MODE: the fixture's
# arguments, split at spaces.
gdb_chain() {
	gdb -batch -nx -ex 'set debuginfod enabled off' \
		-ex 'set breakpoint pending on' \
		-ex "break stk_leaf if \$rdi == $1" -ex run -ex bt \
		--args "$STACKS" $2 </dev/null 2>/dev/null |
		"$PY" "$CHECK" gdb-chain | sed -n "1,/^$3\$/p"
}

# The recorded chain of the same malloc, to the same frame.
mt_chain() {
	"$PY" "$CHECK" chain "$T/out.msgpack" "$1" | sed -n "1,/^$2\$/p"
}

@test "a malloc in a shared library: the chain to main, frame by frame as gdb sees it" {
	trace_ok --stacks -- "$STACKS" direct
	run mt_chain 4321 main
	assert_output "stk_leaf
stk_mid
app_inner
app_outer
main"
	[ "$output" = "$(gdb_chain 4321 direct main)" ]
	# and on to the program's entry: a complete stack
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4321
	assert_line --index 5 "__libc_start_call_main"
	assert_line --index 7 "_start"
	assert_line "truncated: false"
}

@test "the same library loaded with dlopen: the chain to main, as gdb sees it" {
	trace_ok --stacks -- "$STACKS" dlopen
	run mt_chain 4322 main
	assert_output "stk_leaf
stk_mid
app_inner
app_outer
use_dlopen
main"
	[ "$output" = "$(gdb_chain 4322 dlopen main)" ]
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4322 --files
	assert_line --index 0 "stk_leaf libstk_dl.so"
	assert_line --index 1 "stk_mid libstk_dl.so"
	assert_line --index 2 "app_inner stacks"
	assert_line "truncated: false"
}

@test "on a second thread: the chain to the thread's routine and its start in libc" {
	trace_ok --stacks -- "$STACKS" thread
	run mt_chain 4323 thread_main
	assert_output "stk_leaf
stk_mid
app_inner
app_outer
thread_main"
	[ "$output" = "$(gdb_chain 4323 thread thread_main)" ]
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4323
	assert_line --index 5 "start_thread"
	assert_line "truncated: false"
}

@test "a library closed and another opened where it was: frames name the new one" {
	# the BPF side keeps each thread's code mappings while the process's
	# mappings stay as they were; closing and opening a library changes
	# them, and the frames must follow (two copies: two files)
	cp "$MT_FIXTURES/stacks/libstk_dl.so" "$T/libA.so"
	cp "$MT_FIXTURES/stacks/libstk_dl.so" "$T/libB.so"
	trace_ok --stacks -- "$STACKS" reload "$T/libA.so" "$T/libB.so"
	# the second library really is where the first one was
	run grep -o 'stk_mid at 0x[0-9a-f]*' "$T/trace.err"
	[ "${#lines[@]}" = 2 ]
	[ "${lines[0]}" = "${lines[1]}" ]
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4325 --files
	assert_line --index 0 "stk_leaf libA.so"
	assert_line --index 1 "stk_mid libA.so"
	assert_line "truncated: false"
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4326 --files
	assert_line --index 0 "stk_leaf libB.so"
	assert_line --index 1 "stk_mid libB.so"
	assert_line --index 2 "app_inner stacks"
	assert_line "truncated: false"
}

# What walks found (code mappings, each return address's frame and rule,
# whole walks) is kept per CPU for the process that walked, and is valid
# only for that address space (its x86 context id) while its mappings
# (mm_lock_seq) and the published files stay as they were.  Here 12
# processes of one program take turns on one CPU (each yields it after
# each allocation) without ASLR, so their code lies at the same addresses
# and their mappings change in the same steps: half of them allocate
# through one copy of the library, half through another, at the same
# address; each allocation's innermost frame must name its own process's
# copy.  (With the address-space check off, processes take each other's
# cached frames: libA.so for libB.so and the other way round.)
@test "processes by turns on one CPU, a library each at the same address: every frame names its own process's copy" {
	cp "$MT_FIXTURES/stacks/libstk_dl.so" "$T/libA.so"
	cp "$MT_FIXTURES/stacks/libstk_dl.so" "$T/libB.so"
	trace_ok --stacks -- taskset -c 0 setarch -R sh -c "
		for i in 1 2 3 4 5 6; do
			'$STACKS' via '$T/libA.so' 2000 4329 &
			'$STACKS' via '$T/libB.so' 2000 4330 &
		done
		wait"
	run "$PY" "$CHECK" leaf-files "$T/out.msgpack" 4329
	assert_output "12000 libA.so"
	run "$PY" "$CHECK" leaf-files "$T/out.msgpack" 4330
	assert_output "12000 libB.so"
}

# The BPF side remembers each thread's last walks and gives a walk that
# starts at the same place (return address, stack pointer) the remembered
# stack when the stack words it read still hold the same values.  Here the
# two mallocs start at the same place, 200 times each, alternating: only
# the return address two frames up differs, and each must name its caller.
@test "one call site, one stack pointer, two callers: each of 400 allocations names its own caller, as gdb sees it" {
	trace_ok --stacks -- "$STACKS" twins 200
	for size in 4327 4328; do
		twin=twin_a
		[ $size = 4328 ] && twin=twin_b
		run "$PY" "$CHECK" chains "$T/out.msgpack" $size
		assert_output --regexp "^200 stk_leaf;stk_mid;$twin;main;__libc_start_call_main;[^;]+;_start\$"
		[ "$(gdb_chain $size "twins 1" main | paste -sd';')" = "stk_leaf;stk_mid;$twin;main" ]
	done
}

# A library dropped and deleted, and another written on a file that got
# its inode number (ext4 hands a freed one out again): the unwinder's file
# table was keyed by device and inode only, so the new library's frames
# were taken for the old one's (its rows, its CodeFile and build-id).
@test "a new library on a deleted one's inode number: its frames name it, not the deleted one (also under --fast)" {
	cat >"$T/reuse.py" <<-'PYTHON'
		import ctypes, os, sys
		sys.path.insert(0, sys.argv[4])
		from inode_reuse import swap_library
		d, lib_a, lib_b = sys.argv[1:4]
		path, reused, fillers = swap_library(d, lib_a, lib_b,
		                                     lambda a: a.stk_mid(4341))
		with open(os.path.join(d, "..", "reuse.out"), "w") as f:
		    print("reused" if reused else "not reused", fillers, file=f)
		b = ctypes.CDLL(path)
		b.stk_mid(4342)
	PYTHON
	local lib_a="$MT_FIXTURES/stacks/libstk_dl.so" lib_b="$MT_FIXTURES/stacks/libstk.so"
	# --fast: the recorder finds the file by its path's inode, the newest
	# file mt-trace published on it
	for fast in "" --fast; do
		rm -rf "$T/d" && mkdir "$T/d"
		trace_ok $fast --stacks -- "$PY" "$T/reuse.py" "$T/d" "$lib_a" \
			"$lib_b" "$TOP/tests/lib"
		run cat "$T/reuse.out"
		assert_output --regexp "^reused "
		for size in 4341 4342; do
			lib=$lib_a
			[ $size = 4342 ] && lib=$lib_b
			want=$(readelf -n "$lib" | sed -n 's/.*Build ID: //p')
			run "$PY" "$CHECK" leaf-file "$T/out.msgpack" $size
			assert_output "$want $T/d/plugin.so"
		done
	done
}

@test "recursion 500 deep: the stack stops at the depth limit, marked truncated" {
	trace_ok --stacks -- "$STACKS" recurse 500
	[ "$trace_status" = 0 ]
	run "$PY" "$CHECK" depth "$T/out.msgpack" 4324
	assert_output "127 true"
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4324
	assert_line --index 0 "stk_leaf"
	assert_line --index 1 "stk_mid"
	assert_line --index 2 "recurse"
	assert_line --index 126 "recurse"
	# a shallow one is not
	trace_ok --stacks --stack-depth 5 -- "$STACKS" direct
	run "$PY" "$CHECK" depth "$T/out.msgpack" 4321
	assert_output "5 true"
}

@test "python3 (Debian's, no frame pointers): 99% of allocation stacks reach the program's entry" {
	trace_ok --stacks -- /usr/bin/python3 -c 'x = [bytes(100) for _ in range(20000)]; import json, decimal'
	run "$PY" "$CHECK" complete "$T/out.msgpack"
	echo "complete/total: $output"
	read -r done total <<<"$output"
	[ "$total" -gt 1000 ]
	[ $((done * 100)) -ge $((total * 99)) ]
}

@test "python3 building a big list: the top site is the list's own storage, grown from the eval loop" {
	# The list's item array is 8 bytes a slot it has room for: python
	# itself says how big it is (getsizeof less an empty list's), and the
	# top site at the heap peak must hold exactly that.  Debian's
	# python3.11 has no .symtab: the function that grows the array
	# (list_resize in _PyList_AppendTakeRefListResize, static) has a name
	# only with python3.11-dbgsym, so it prints as python3.11+0x...; what
	# places it on the list-building path is its caller, the eval loop's
	# LIST_APPEND (_PyEval_EvalFrameDefault, exported), with nothing of
	# libc's between, and the exact bytes.
	# (--no-fast, MT_PYTHON_FRAMES=0: the BPF walk's native frames; with
	# Python frames both walks put the script's own in place of the eval
	# loop: python.bats)
	MT_PYTHON_FRAMES=0 trace_ok --no-fast --stacks --child-stdout "$T/py.out" -- /usr/bin/python3 -c \
		'import sys; l = [None for _ in range(2000000)]; print(sys.getsizeof(l) - sys.getsizeof([]))'
	array=$(cat "$T/py.out")
	[ "$array" -ge 16000000 ]
	mt-report --json --top 1 "$T/out.msgpack" >"$T/r.json"
	run jq -r '.sites.top[0].peak_bytes' "$T/r.json"
	assert_output "$array"
	# from the allocator's caller to the eval loop, only python3.11's code
	run jq -c '.sites.top[0].frames | (map(.function) |
		index("_PyEval_EvalFrameDefault")) as $eval |
		[$eval, (.[0:$eval] | map(.object | split("/") | last) | unique)]' "$T/r.json"
	assert_output --regexp '^\[[1-3],\["python3\.11"\]\]$'
	run jq -r '[.sites.top[0].frames[].function] | join(" ")' "$T/r.json"
	assert_output --regexp " _PyEval_EvalFrameDefault PyEval_EvalCode .* Py_BytesMain "
}

@test "each stack and each code file is described once, before its first use" {
	trace_ok --stacks -- "$STACKS" direct
	zstd -dcf "$T/out.msgpack" >"$T/out.plain"
	run "$PY" - "$T/out.plain" <<-'EOF'
	import sys, msgpack
	seen_stacks, seen_files, uses = set(), set(), 0
	for m in msgpack.Unpacker(open(sys.argv[1], "rb"), raw=False):
	    if m["type"] == "CodeFile":
	        assert m["file"] not in seen_files, m
	        assert len(m.get("build_id", "")) in (0, 40), m
	        seen_files.add(m["file"])
	    elif m["type"] == "Stack":
	        assert m["stack"] == len(seen_stacks) + 1, m
	        for f, a in m["frames"]:
	            assert f == 0 or f in seen_files, m
	        seen_stacks.add(m["stack"])
	    elif "stack" in m:
	        assert m["stack"] in seen_stacks, m
	        uses += 1
	print(len(seen_files), len(seen_stacks), uses)
	EOF
	assert_success
	read -r files stacks uses <<<"$output"
	[ "$files" -ge 4 ] # stacks, libstk.so, libc, ld.so
	[ "$uses" -ge "$stacks" ]
}

@test "CodeMap: every executable mapping of a file, as the process's own /proc/self/maps has it" {
	trace_ok --stacks --child-stdout "$T/maps" -- "$STACKS" maps
	# the process's view: start, end, offset and path of its r-x files
	awk '$2 ~ /x/ && $6 ~ /^\// { print $1, $3, $6 }' "$T/maps" |
		sort >"$T/want"
	zstd -dcf "$T/out.msgpack" >"$T/out.plain"
	"$PY" - "$T/out.plain" <<-'EOF' | sort >"$T/got"
	import sys, msgpack
	files = {}
	for m in msgpack.Unpacker(open(sys.argv[1], "rb"), raw=False):
	    if m["type"] == "CodeFile":
	        files[m["file"]] = m["path"]
	    elif m["type"] == "CodeMap":
	        print(f'{m["addr"]:x}-{m["addr"] + m["size"]:x} '
	              f'{m["offset"]:08x} {files[m["file"]]}')
	EOF
	cat "$T/want"
	[ "$(wc -l <"$T/want")" -ge 5 ] # program, ld.so, libc, libstk, libstk_dl
	# the same mappings (libc's path may be written through /lib)
	diff <(sed 's| /lib/| /usr/lib/|' "$T/want") \
		<(sed 's| /lib/| /usr/lib/|' "$T/got")
}

@test "address-space sites: mmap, mremap, munmap and brk from known functions, exact bytes per site" {
	trace_ok --stacks -- "$STACKS" mmap
	mt-report --json --top all "$T/out.msgpack" >"$T/r.json"
	# per function of the fixture (sites whose stack passes through it):
	# bytes mapped, calls, bytes at the tree's mapped peak, not unmapped
	run jq -r '.mapped_sites.top as $s | ("map_kept", "map_dropped",
		"map_small", "map_moved", "brk_grow", "map_peak", "brk_shrink",
		"unmap_range") as $f
		| [$s[] | select([.frames[].function] | index($f))]
		| "\($f) \(map(.allocated_bytes) | add // 0) \(map(.allocations)
		| add // 0) \(map(.peak_bytes) | add // 0) \(map(.not_freed_bytes)
		| add // 0)"' "$T/r.json"
	assert_output "map_kept 12288 1 12288 12288
map_dropped 20480 1 0 0
map_small 8192 1 0 0
map_moved 24576 1 0 0
brk_grow 131072 2 65536 65536
map_peak 16777216 1 16777216 0
brk_shrink 0 0 0 0
unmap_range 0 0 0 0"
	# every mapped byte at the peak belongs to one site: the sites add up
	# to the timelines' own peak (ld.so's mappings included)
	run jq -r '[([.mapped_sites.top[].peak_bytes] | add),
		.mapped_sites.mapped_peak, .tree.peak_mapped] | unique | length' "$T/r.json"
	assert_output 1
	# and the stack of map_kept's mmap: libc's mmap (inlined in itself with
	# its debug file), then the fixture's chain (address_space inlined)
	run jq -r '.mapped_sites.top[] | select([.frames[].function]
		| index("map_kept")) | [.frames[].function] | join(" ")' "$T/r.json"
	assert_output --regexp "^([^ ]*mmap[^ ]* ){1,2}map_pages map_kept address_space main "
}

# The part of `make test-stacks` (every suite with MT_STACKS=1) kept in
# the normal suite: trace.bats' fixtures whose events are known, traced
# with stacks, still give exactly the events they log (trace_check.py),
# and each allocation and mapping call in their window names a stack.
@test "stacks on (MT_STACKS=1): trace.bats' fixtures give exactly the events they log, each call with its stack" {
	export MT_FIXTURES
	for fixture in malloc_free realloc_edges realloc_mmapped \
		memalign_family fork threads "mmap_calls all"; do
		set -- $fixture
		export MT_FIXTURE_LOG="$T/$1.log"
		MT_STACKS=1 trace_ok -- "$MT_FIXTURES/$1"
		run "$PY" "$TOP/tests/lib/trace_check.py" expect "$T/out.msgpack" \
			"$MT_FIXTURE_LOG" --kinds "${2:-alloc}"
		echo "$1: $output"
		assert_success
		run "$PY" "$CHECK" windows "$T/out.msgpack" "$MT_FIXTURE_LOG"
		echo "$1: calls, without a stack: $output"
		read -r calls without <<<"$output"
		# (malloc_free: its malloc, and with --no-fast the brk of the
		# heap's start; the recorder, the default, started the heap
		# before the window)
		[ "$calls" -ge 1 ]
		[ "$without" = 0 ]
	done
}

@test "--no-stacks and MT_STACKS=0: no stack records, no stack keys" {
	trace_ok --no-stacks -- "$STACKS" direct
	run "$PY" -c 'import sys, msgpack; print(sum(1 for m in msgpack.Unpacker(sys.stdin.buffer, raw=False) if m["type"] in ("Stack", "CodeFile") or "stack" in m))' < <(zstd -dcf "$T/out.msgpack")
	assert_output 0
	MT_STACKS=0 trace_ok -- "$STACKS" direct
	run "$PY" -c 'import sys, msgpack; print(sum(1 for m in msgpack.Unpacker(sys.stdin.buffer, raw=False) if m["type"] in ("Stack", "CodeFile") or "stack" in m))' < <(zstd -dcf "$T/out.msgpack")
	assert_output 0
	MT_STACKS=1 trace_ok -- "$STACKS" direct
	run "$PY" -c 'import sys, msgpack; print(sum(1 for m in msgpack.Unpacker(sys.stdin.buffer, raw=False) if m["type"] == "Malloc" and m["size"] == 4321 and "stack" in m))' < <(zstd -dcf "$T/out.msgpack")
	assert_output 1
}

# The unwind rows (16 MiB of room) and their page index (2 MiB) are BPF
# arrays that mt-trace writes through mappings; the kernel maps such an
# array's pages all at once, so mapped whole they were 18 MiB of
# mt-trace's RSS (28 MiB with --stacks, 9 without).  Only the pages a
# file's rows go to are mapped, while they are written.  (Under ASan, make
# check-asan, freed blocks wait in its quarantine, 18 MiB of libdw's here:
# not kept for this test.)
@test "--stacks adds less than 4 MiB to mt-trace's own peak RSS" {
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0:malloc_context_size=0"
	/usr/bin/time -f %M -o "$T/without" mt-trace -o /dev/null -- "$STACKS" dlopen
	/usr/bin/time -f %M -o "$T/with" mt-trace --stacks -o /dev/null -- "$STACKS" dlopen
	echo "max RSS without --stacks $(cat "$T/without") KiB, with $(cat "$T/with") KiB"
	[ "$(cat "$T/with")" -lt $(($(cat "$T/without") + 4096)) ]
}

@test "--stack-depth: a bad value is refused with mt-trace's status" {
	run mt-trace --stack-depth 0 -- true
	assert_failure 125
	assert_output --partial "--stack-depth: '0' is not a number of frames from 1 to 127"
	run mt-trace --stack-depth 128 -- true
	assert_failure 125
}

# ---- mt-trace --fast --stacks: the preloaded recorder walks the stack in
# process with mt-trace's rows; the stream must be the BPF walk's.

# The allocation stacks of $1 (an artifact): one line per allocation
# event, sorted: kind, size, truncated, then each frame as file name and
# ELF address (file ids are the trace's own; the files' names are not).
alloc_stacks() {
	zstd -dcf "$1" | "$PY" -c '
import sys, msgpack
files, stacks, out = {}, {}, []
for m in msgpack.Unpacker(sys.stdin.buffer, raw=False):
    t = m["type"]
    if t == "CodeFile":
        files[m["file"]] = m["path"].split("/")[-1]
    elif t == "Stack":
        stacks[m["stack"]] = "%s %s" % (m.get("truncated", False), " ".join(
            "%s+%#x" % (files[f] if f else "-", a) for f, a in m["frames"]))
    elif t in ("Malloc", "Calloc", "Realloc", "AlignedAlloc"):
        out.append("%s %d %s" % (t, m["size"], stacks.get(m.get("stack"), "none")))
print("\n".join(sorted(out)))'
}

@test "--fast --stacks: every allocation's stack is the BPF walk's, frame by frame; mt-report's sites the same" {
	trace_ok --stacks -- "$STACKS" direct
	alloc_stacks "$T/out.msgpack" >"$T/bpf"
	mv "$T/out.msgpack" "$T/bpf.msgpack"
	trace_ok --fast --stacks -- "$STACKS" direct
	alloc_stacks "$T/out.msgpack" >"$T/fast"
	run grep -c "stk_mid\|libstk.so+" "$T/fast"
	[ "$output" -ge 1 ]
	run grep -c " none$" "$T/fast"
	assert_output 0
	diff "$T/bpf" "$T/fast"
	# the heap's sites as mt-report ranks and folds them
	for f in bpf.msgpack out.msgpack; do
		mt-report --json --top 10 "$T/$f" | jq -c '[.sites.top[] |
			[.peak_bytes, .allocated_bytes, [.frames[].function]]]'
		mt-report --folded --space heap "$T/$f"
	done >"$T/sites"
	run cat "$T/sites"
	[ "${#lines[@]}" = 4 ] # one site, one folded stack, each
	assert_line --index 0 --partial '[4321,4321,["stk_leaf","stk_mid","app_inner","app_outer","main",'
	[ "${lines[0]}" = "${lines[2]}" ]
	[ "${lines[1]}" = "${lines[3]}" ]
	# and the chain is gdb's
	run mt_chain 4321 main
	assert_output "$(gdb_chain 4321 direct main)"
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4321
	assert_line --index 7 "_start"
	assert_line "truncated: false"
}

@test "--fast --stacks: dlopen, a second thread, a library closed and another opened where it was" {
	for mode in dlopen thread; do
		trace_ok --stacks -- "$STACKS" $mode
		alloc_stacks "$T/out.msgpack" | grep " 432[23] " >"$T/bpf"
		trace_ok --fast --stacks -- "$STACKS" $mode
		alloc_stacks "$T/out.msgpack" | grep " 432[23] " >"$T/fast"
		[ -s "$T/fast" ]
		diff "$T/bpf" "$T/fast"
	done
	run mt_chain 4323 thread_main
	assert_output "$(gdb_chain 4323 thread thread_main)"
	# the recorder's cached code ranges follow a dlclose
	cp "$MT_FIXTURES/stacks/libstk_dl.so" "$T/libA.so"
	cp "$MT_FIXTURES/stacks/libstk_dl.so" "$T/libB.so"
	trace_ok --fast --stacks -- "$STACKS" reload "$T/libA.so" "$T/libB.so"
	run grep -o 'stk_mid at 0x[0-9a-f]*' "$T/trace.err"
	[ "${lines[0]}" = "${lines[1]}" ]
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4325 --files
	assert_line --index 1 "stk_mid libA.so"
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4326 --files
	assert_line --index 1 "stk_mid libB.so"
	assert_line --index 2 "app_inner stacks"
	assert_line "truncated: false"
}

@test "--fast --stacks: recursion 500 deep stops at the depth limit, marked truncated; --stack-depth 5" {
	trace_ok --fast --stacks -- "$STACKS" recurse 500
	run "$PY" "$CHECK" depth "$T/out.msgpack" 4324
	assert_output "127 true"
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4324
	assert_line --index 0 "stk_leaf"
	assert_line --index 126 "recurse"
	trace_ok --fast --stacks --stack-depth 5 -- "$STACKS" direct
	run "$PY" "$CHECK" depth "$T/out.msgpack" 4321
	assert_output "5 true"
}

@test "--fast --stacks: python3's allocation stacks reach the program's entry in 99%" {
	trace_ok --fast --stacks -- /usr/bin/python3 -c 'x = [bytes(100) for _ in range(20000)]; import json, decimal'
	run "$PY" "$CHECK" complete "$T/out.msgpack"
	echo "complete/total: $output"
	read -r done total <<<"$output"
	[ "$total" -gt 1000 ]
	[ $((done * 100)) -ge $((total * 99)) ]
}

@test "--fast --stacks: trace.bats' fixtures (fork, threads) give exactly the events they log, each call with its stack" {
	export MT_FIXTURES
	for fixture in malloc_free realloc_edges memalign_family fork threads; do
		export MT_FIXTURE_LOG="$T/$fixture.log"
		trace_ok --fast --stacks -- "$MT_FIXTURES/$fixture"
		run "$PY" "$TOP/tests/lib/trace_check.py" expect "$T/out.msgpack" \
			"$MT_FIXTURE_LOG" --kinds alloc
		echo "$fixture: $output"
		assert_success
		run "$PY" "$CHECK" windows "$T/out.msgpack" "$MT_FIXTURE_LOG"
		echo "$fixture: calls, without a stack: $output"
		read -r calls without <<<"$output"
		# at least the fixture's own calls, as it logs them (malloc_free's
		# window holds its Malloc alone: the recorder set the heap up
		# before the program ran, so no brk, and maps nothing of its
		# own there)
		logged=$("$PY" "$CHECK" logged-calls "$MT_FIXTURE_LOG")
		[ "$logged" -ge 1 ]
		[ "$calls" -ge "$logged" ]
		[ "$without" = 0 ]
	done
}

# Stack-taking events (allocations, address-space calls) in $T/out.msgpack:
# "ALL WITHOUT", how many, how many of them with no stack.
stackless() {
	"$PY" -c 'import sys, msgpack
from mtzstd import open_plain
kinds = ("Malloc", "Calloc", "Realloc", "AlignedAlloc", "Mmap", "Munmap",
         "Mremap", "Brk")
n = without = 0
with open_plain(sys.argv[1]) as f:
    for m in msgpack.Unpacker(f, raw=False, strict_map_key=False):
        if m.get("type") in kinds:
            n += 1
            without += "stack" not in m
print(n, without)' "$T/out.msgpack"
}

# malloc_free, started once the file go exists; mt-trace's pid in $tracer.
# (--no-fast: the BPF side's walk, whose flag these tests take; the
# recorder, the default, walks the malloc's stack in process)
trace_when_go() {
	export MT_FIXTURE_LOG="$T/malloc_free.log"
	rm -f "$T/go" "$MT_FIXTURE_LOG"
	mt-trace --no-fast -v --stacks -o "$T/out.raw" -- sh -c \
		'while [ ! -e "$1" ]; do sleep 0.01; done; exec "$2"' \
		_ "$T/go" "$MT_FIXTURES/malloc_free" 2>"$T/trace.err" &
	tracer=$!
}

# A walk preempted on a kernel that preempts BPF programs leaves its CPU's
# stack_walking flag taken: a walk started meanwhile must take no stack
# rather than a mix of two threads' stacks, and be counted.  Preemption
# cannot be arranged here (this kernel runs BPF programs unpreempted), so
# the flag is taken from outside, on every CPU, with bpftool: each stack is
# then left out, every event is still recorded, and -v counts each one.
@test "a walk under way on the CPU: stacks left out and counted, events all there" {
	local id calls without all n
	trace_when_go
	for _ in $(seq 200); do
		id=$(map_of "$tracer" stack_walking) && break
		sleep 0.05
	done
	[ -n "$id" ] && bpftool map update id "$id" key 0 0 0 0 \
		value 1 0 0 0 0 0 0 0
	touch "$T/go"
	wait "$tracer"
	[ -n "$id" ]
	mt-encode <"$T/out.raw" >"$T/out.msgpack"
	run "$PY" "$TOP/tests/lib/trace_check.py" expect "$T/out.msgpack" \
		"$MT_FIXTURE_LOG" --kinds alloc
	assert_success
	run "$PY" "$CHECK" windows "$T/out.msgpack" "$MT_FIXTURE_LOG"
	read -r calls without <<<"$output"
	[ "$calls" -ge 2 ]
	[ "$without" = "$calls" ]
	n=$(sed -n 's/^mt-trace: \([0-9]*\) stacks not taken .*/\1/p' \
		"$T/trace.err")
	read -r all without <<<"$(stackless)"
	echo "events $all, without a stack $without, counted $n"
	[ "$n" -ge "$calls" ]
	[ "$without" = "$n" ]
}

@test "no walk under way: none left out, every flag released (-v counts 0)" {
	local all without
	trace_when_go
	touch "$T/go"
	wait "$tracer"
	mt-encode <"$T/out.raw" >"$T/out.msgpack"
	grep -x 'mt-trace: 0 stacks not taken (a walk was under way on the CPU: preempted)' "$T/trace.err"
	read -r all without <<<"$(stackless)"
	echo "events $all, without a stack $without"
	[ "$all" -ge 10 ]
	[ "$without" = 0 ]
}

# libc's unwind rows are built by a thread while the BPF side loads; the
# tree maps a private copy of libc (another file, the same bytes): the rows
# are taken for it by build-id, and its frames unwind as before.
@test "libc's unwind rows, built beside the BPF load, serve the tree's libc: the chain through libc's start to _start" {
	trace_ok -vv --stacks -- "$STACKS" direct
	grep -E '^mt-trace: .*/libc\.so\.6: [0-9]+ unwind rows \([0-9]+ it cannot follow\), built beside the BPF load$' "$T/trace.err"
	run "$PY" "$CHECK" chain "$T/out.msgpack" 4321
	assert_line --index 4 "main"
	assert_line --index 5 "__libc_start_call_main"
	assert_line --index 7 "_start"
	assert_line "truncated: false"
}

# A StackRef and its event were appended apart, and a batch that filled
# between them ended in the StackRef: every later stage rejected the trace
# ("StackRef ends its batch", 4 runs of 4 before the fix) while mt-trace
# exited 0.  A drain of more than a batch: mt-trace stopped while three
# threads allocate (its trace under way, 200 KB written), continued once
# they are done (the fixture's last log line), a ring large enough that
# nothing waits for it.
@test "--stacks: a drain of more than a batch (mt-trace stopped during 3 threads x 60,000 allocations): the trace whole, all 180,000 with their stacks" {
	export MT_FIXTURE_LOG="$T/fixture.log"
	# (--no-fast: the BPF side's drain; with the recorder the threads are
	# done before the trace is 200 KB)
	mt-trace --no-fast --stacks --ring-size 128M -o "$T/out.raw" -- \
		"$MT_FIXTURES/storm_threads" 3 60000 2>"$T/trace.err" &
	local tracer=$! size=0
	for _ in $(seq 500); do
		size=$(stat -c %s "$T/out.raw" 2>/dev/null || echo 0)
		[ "$size" -ge 200000 ] && break
		sleep 0.02
	done
	kill -STOP "$tracer"
	grep -q loop_ns "$MT_FIXTURE_LOG" 2>/dev/null &&
		fail "the threads were done before mt-trace was stopped"
	for _ in $(seq 1000); do
		grep -q loop_ns "$MT_FIXTURE_LOG" 2>/dev/null && break
		sleep 0.02
	done
	kill -CONT "$tracer"
	wait "$tracer"
	run mt-encode -o "$T/out.msgpack" "$T/out.raw"
	assert_success
	run "$PY" - "$T/out.msgpack" <<'PY'
import sys
import msgpack
from mtzstd import open_plain
n = stacked = 0
with open_plain(sys.argv[1]) as f:
    for m in msgpack.Unpacker(f, raw=False, strict_map_key=False):
        if (m.get("type") == "Malloc" and m.get("size") == 48
                and m.get("tid") != m.get("pid")):
            n += 1
            stacked += "stack" in m
print(n, stacked)
PY
	assert_output "180000 180000"
}
