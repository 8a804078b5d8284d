#!/usr/bin/env bats
# Allocation sites (issue 11, offline side): sites, folded stacks, the
# flame graph, comparisons and offline symbolization, on artifacts made by
# hand (tests/lib/mkartifact.py) whose stacks point into a fixture built
# -O2 -g with inlining (tests/fixtures/sym/inlined.c).  Addresses come from
# objdump, names and lines from addr2line: binutils, not mt.

bats_require_minimum_version 1.5.0
load helpers
load lib/inlined

setup() {
	T="$BATS_TEST_TMPDIR"
	BIN="$MT_FIXTURES/sym/inlined"
	ID=$(readelf -n "$BIN" | sed -n 's/.*Build ID: //p')
	# return addresses: after make_table's call to malloc, after main's
	# call to make_table (every frame of a stack is one)
	RET_MALLOC=$(ret_after "$BIN" make_table 'malloc@plt')
	RET_TABLE=$(ret_after "$BIN" main 'make_table')
}

# addr2line's frames at a return address: "function file:line" lines
a2l() {
	addr2line -f -i -e "$1" "$(printf '0x%x' $(($2 - 1)))" |
		paste - - | sed 's/ (discriminator [0-9]*)//; s|\t.*/| |'
}

mk() { # mk NAME: the script on stdin -> $T/NAME.msgpack
	"$PY" "$TOP/tests/lib/mkartifact.py" >"$T/$1.msgpack"
}

# Three sites: 1 the fixture's chain (file 1), 2 a truncated stack in no
# known file, 3 the fixture again, another chain.  The peak (3,300 B) holds
# 300 B of site 1 and 3,000 of site 2; site 1 leaks 200 B, site 3 100 B.
chain_artifact() {
	local path=${1:-$BIN} id=${2:-$ID}
	mk "${3:-run}" <<-EOF
		CodeFile file=1 path=$path build_id=$id
		Stack stack=1 frames=1:$RET_MALLOC,1:$RET_TABLE
		Stack stack=2 frames=0:0x7f0000001000 truncated=1
		Stack stack=3 frames=1:$RET_TABLE
		Malloc addr=0x1000 size=100 stack=1
		Malloc addr=0x2000 size=100 stack=1
		Malloc addr=0x3000 size=100 stack=1
		Malloc addr=0x4000 size=3000 stack=2
		Free addr=0x4000
		Free addr=0x1000
		Malloc addr=0x5000 size=100 stack=3
	EOF
}

@test "sites: values per stack known by construction, frames named as addr2line names them" {
	[ -n "$RET_MALLOC" ]
	[ -n "$RET_TABLE" ]
	chain_artifact
	run mt-report --json "$T/run.msgpack"
	assert_success
	echo "$output" >"$T/r.json"
	run jq -c '.sites | [.count, .heap_peak, .sort]' "$T/r.json"
	assert_output '[3,3300,"peak"]'
	run jq -c '[.sites.top[] | [.stack, .peak_bytes, .allocated_bytes,
		.allocations, .not_freed_bytes, .not_freed_blocks, .truncated]]' "$T/r.json"
	assert_output '[[2,3000,3000,1,0,0,true],[1,300,300,3,200,2,false],[3,0,100,1,100,1,false]]'
	# the tree's own peak agrees with the sites'
	run jq '.tree.peak_heap' "$T/r.json"
	assert_output 3300
	# site 1: addr2line's frames at each return address - 1, in order
	{ a2l "$BIN" "$RET_MALLOC"; a2l "$BIN" "$RET_TABLE"; } >"$T/want"
	cat "$T/want"
	[ "$(wc -l <"$T/want")" -eq 4 ] # new_cell, fill_row, make_table, main
	jq -r '.sites.top[1].frames[] | "\(.function) \(.file | split("/")
		| last):\(.line)"' "$T/r.json" >"$T/got"
	diff "$T/want" "$T/got"
	run jq -c '[.sites.top[1].frames[] | [.inlined // false, .object]]' "$T/r.json"
	assert_output "[[true,\"$BIN\"],[true,\"$BIN\"],[false,\"$BIN\"],[false,\"$BIN\"]]"
	# no file: the address, never a name
	run jq -r '.sites.top[0].frames[0].function' "$T/r.json"
	assert_output 0x7f0000001000
}

@test "sites: the summary lists them with --top, --sort and --stack-depth" {
	chain_artifact
	run mt-report --top 2 --stack-depth 2 "$T/run.msgpack"
	assert_success
	assert_output --partial "top allocation sites by bytes live at the heap peak (3 distinct stacks)"
	assert_output --partial "#1   2.93 KiB at peak, 2.93 KiB allocated in 1 call, 0 B not freed"
	assert_output --partial "        0x7f0000001000"
	assert_output --partial "        new_cell  inlined.c:"
	assert_output --partial "... 2 more frames (--stack-depth)"
	assert_output --partial "(1 more site: --top all lists all)"
	refute_output --partial "#3 "
	run mt-report --sort leaked --top 1 "$T/run.msgpack"
	assert_success
	assert_output --partial "top allocation sites by bytes not freed"
	assert_output --partial "#1   300 B at peak, 300 B allocated in 3 calls, 200 B not freed"
	run mt-report --sort bytes "$T/run.msgpack"
	assert_failure 2
	assert_output --partial "--sort: not one of peak, allocated, count, not-freed: bytes"
}

@test "--folded: one line per stack, root first, the value per metric" {
	chain_artifact
	run mt-report --folded "$T/run.msgpack"
	assert_success
	assert_output "$(printf '%s\n' '[truncated];0x7f0000001000 3000' \
		'main;make_table;fill_row;new_cell 300')"
	run mt-report --folded --flamegraph-of count "$T/run.msgpack"
	assert_output "$(printf '%s\n' '[truncated];0x7f0000001000 1' \
		'main;make_table;fill_row;new_cell 3' 'main 1')"
	run mt-report --folded --flamegraph-of leaked "$T/run.msgpack"
	assert_output "$(printf '%s\n' 'main;make_table;fill_row;new_cell 200' \
		'main 100')"
}

@test "--flamegraph: a self-contained SVG, every frame with its value on hover; Chromium draws it" {
	chain_artifact
	run mt-report --flamegraph "$T/f.svg" --flamegraph-of allocated "$T/run.msgpack"
	assert_success
	assert_output --partial "top allocation sites"
	"$PY" - "$T/f.svg" <<-'EOF'
		import sys, xml.etree.ElementTree as ET
		ns = {"s": "http://www.w3.org/2000/svg"}
		root = ET.parse(sys.argv[1]).getroot()
		assert not root.findall(".//s:script", ns)
		frames = {}
		for g in root.findall(".//s:g", ns):
		    title = g.find("s:title", ns).text
		    rect = g.find("s:rect", ns)
		    frames[title] = float(rect.get("width"))
		print(frames)
		# allocated: 300 + 3000 + 100 = 3400 B; main holds 400 of it
		assert frames["all (3.32 KiB, 100.00%)"] > 1100
		assert frames["main (400 B, 11.76%)"] > 0
		assert frames["new_cell (300 B, 8.82%)"] > 0
		assert frames["0x7f0000001000 (2.93 KiB, 88.24%)"] > 0
		w = frames["all (3.32 KiB, 100.00%)"]
		assert abs(frames["main (400 B, 11.76%)"] / w - 400 / 3400) < 1e-3
		assert len(frames) == 7, len(frames)
	EOF
	CHROMIUM=$(command -v chromium || true)
	if [ -z "$CHROMIUM" ]; then
		[ -z "${CI:-}" ] || return 1
		skip "chromium not installed (make deps)"
	fi
	"$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
		--disable-background-networking --disable-component-update \
		--disable-sync --user-data-dir="$(mktemp -d "$T/chr.XXXX")" \
		--screenshot="$T/f.png" --window-size=1200,300 "$T/f.svg" 2>/dev/null
	run "$PY" "$TOP/tests/lib/pngstat.py" "$T/f.png"
	assert_success
	echo "$output"
	read -r size colors nonwhite <<<"$output"
	[ "$size" = 1200x300 ]
	[ "$colors" -gt 5 ]     # frames in several colours, and text
	[ "$nonwhite" -gt 100 ] # a tenth of the picture at least
	# to standard output instead of the summary
	run mt-report --flamegraph - "$T/run.msgpack"
	assert_success
	assert_line --index 0 '<?xml version="1.0" encoding="UTF-8"?>'
}

# The address space by the same three stacks: 1 maps 16 KiB that 2's
# mremap moves; 2 maps 8 KiB of which 3's munmap takes 4; 3 grows the break
# twice (4 + 8 KiB), 1 shrinks it by 4.  The peak (32 KiB, after the second
# brk) holds 16 KiB of 1, 4 of 2 and 12 of 3; 8 KiB of 3 and 4 of 2 stay
# mapped.
mapped_artifact() {
	mk mapped <<-EOF
		CodeFile file=1 path=$BIN build_id=$ID
		Stack stack=1 frames=1:$RET_MALLOC,1:$RET_TABLE
		Stack stack=2 frames=0:0x7f0000002000
		Stack stack=3 frames=1:$RET_TABLE
		Mmap addr=0x10000 size=16KiB stack=1
		Mmap addr=0x20000 size=8KiB stack=2
		Munmap addr=0x20000 size=4KiB stack=3
		Brk addr=0x101000 old_addr=0x100000 stack=3
		Brk addr=0x103000 old_addr=0x101000 stack=3
		Brk addr=0x102000 old_addr=0x103000 stack=1
		Mremap addr=0x40000 size=12KiB old_addr=0x10000 old_size=16KiB stack=2
		Malloc addr=0x1000 size=100 stack=1
		Munmap addr=0x40000 size=12KiB stack=3
	EOF
}

@test "address-space sites: mmap, mremap, munmap and brk by stack, apart from the heap" {
	mapped_artifact
	run mt-report --json "$T/mapped.msgpack"
	assert_success
	echo "$output" >"$T/r.json"
	run jq -c '.mapped_sites | [.count, .mapped_peak, .sort]' "$T/r.json"
	assert_output '[3,32768,"peak"]'
	run jq -c '[.mapped_sites.top[] | [.stack, .peak_bytes, .allocated_bytes,
		.allocations, .not_freed_bytes, .not_freed_blocks]]' "$T/r.json"
	assert_output '[[1,16384,16384,1,0,0],[3,12288,12288,2,8192,2],[2,4096,20480,2,4096,1]]'
	# the timelines' own mapped peak agrees; the heap is counted apart
	run jq -c '[.tree.peak_mapped, .sites.heap_peak,
		[.sites.top[] | [.stack, .allocated_bytes]]]' "$T/r.json"
	assert_output '[32768,100,[[1,100]]]'
	run jq -r '[.mapped_sites.top[0].frames[].function] | join(" ")' "$T/r.json"
	assert_output "new_cell fill_row make_table main"

	run mt-report "$T/mapped.msgpack"
	assert_success
	assert_output --partial "top address-space (mmap, mremap, brk) sites by bytes mapped at the peak (3 distinct stacks)"
	assert_output --partial "#2   12.0 KiB at peak, 12.0 KiB mapped in 2 calls, 8.00 KiB not unmapped"
	run mt-report --sort not-freed "$T/mapped.msgpack"
	assert_output --partial "sites by bytes not unmapped (3 distinct stacks)"

	run mt-report --folded --space mapped "$T/mapped.msgpack"
	assert_success
	assert_output "$(printf '%s\n' 'main;make_table;fill_row;new_cell 16384' \
		'main 12288' '0x7f0000002000 4096')"
	run mt-report --folded --space mapped --flamegraph-of count "$T/mapped.msgpack"
	assert_output "$(printf '%s\n' 'main;make_table;fill_row;new_cell 1' \
		'main 2' '0x7f0000002000 2')"
	# the heap's stay the default
	run mt-report --folded "$T/mapped.msgpack"
	assert_output 'main;make_table;fill_row;new_cell 100'

	run mt-report --flamegraph - --space mapped "$T/mapped.msgpack"
	assert_success
	assert_output --partial ">Address-space sites: bytes mapped at the peak</text>"
	assert_output --partial "<title>all (32.0 KiB, 100.00%)</title>"
	assert_output --partial "<title>main (28.0 KiB, 87.50%)</title>"
	assert_output --partial "<title>make_table (16.0 KiB, 50.00%)</title>"
	# --compare weighs the same space: against the heap-only run, every
	# mapped byte grew
	chain_artifact
	run mt-report --compare "$T/run.msgpack" "$T/mapped.msgpack" --space mapped
	assert_success
	assert_output --partial "address-space sites that grew most, by bytes mapped at the peak"
	assert_output --partial "#1   +16.0 KiB (0 B -> 16.0 KiB)"
	run mt-report --space stack "$T/mapped.msgpack"
	assert_failure 2
	assert_output --partial "--space: not one of heap, mapped: stack"
}

@test "address-space sites: no table when nothing was mapped with a stack" {
	chain_artifact
	run mt-report "$T/run.msgpack"
	assert_success
	refute_output --partial "address-space"
	run mt-report --json "$T/run.msgpack"
	run jq -c '.mapped_sites | [.count, .mapped_peak, .top]' <<<"$output"
	assert_output '[0,0,[]]'
}

@test "--flamegraph, --folded on a run without stacks: exit 2, said why" {
	mk nostack <<-EOF
		Malloc addr=0x1000 size=100
	EOF
	run mt-report --flamegraph "$T/f.svg" "$T/nostack.msgpack"
	assert_failure 2
	assert_output --partial "no call stacks in this run"
	run mt-report --json "$T/nostack.msgpack"
	assert_success
	run jq -c '[.sites, .mapped_sites]' <<<"$output"
	assert_output '[null,null]'
	run mt-report --folded "$T/nostack.msgpack"
	assert_failure 2
	assert_output "mt-report: --folded: no call stacks in this run (trace it with mt-trace --stacks)"
	run mt-report --folded --space mapped "$T/nostack.msgpack"
	assert_failure 2
	assert_output --partial "--folded: no call stacks in this run"
}

@test "symbolized offline: the binary gone, its debug file by build-id in --debug-dir; another build-id never used" {
	mkdir -p "$T/bin" "$T/dbg/.build-id/${ID:0:2}"
	cp "$BIN" "$T/bin/inlined"
	objcopy --only-keep-debug "$BIN" "$T/dbg/.build-id/${ID:0:2}/${ID:2}.debug"
	chain_artifact "$T/bin/inlined"
	rm "$T/bin/inlined"
	run mt-report --folded --debug-dir /nonexistent --debug-dir "$T/dbg" "$T/run.msgpack"
	assert_success
	assert_line "main;make_table;fill_row;new_cell 300"
	# the same through mt-reconstruct's timelines
	mt-reconstruct --debug-dir "$T/dbg" "$T/run.msgpack" >"$T/t.json"
	run mt-report --folded "$T/t.json"
	assert_line "main;make_table;fill_row;new_cell 300"
	# without the debug dir: the path and address, no name
	rm -r "$T/dbg"
	run mt-report --folded "$T/run.msgpack"
	assert_success
	assert_line "$(printf '%s+%#x;%s+%#x 300' "$T/bin/inlined" "$RET_TABLE" \
		"$T/bin/inlined" "$RET_MALLOC")"
	# a file with another build-id at the traced path: not used
	cp "$MT_FIXTURES/sym/inlined_otherid" "$T/bin/inlined"
	run mt-report --folded "$T/run.msgpack"
	assert_line "$(printf '%s+%#x;%s+%#x 300' "$T/bin/inlined" "$RET_TABLE" \
		"$T/bin/inlined" "$RET_MALLOC")"
}

@test "--sysroot: the traced files under another root" {
	mkdir -p "$T/root/opt/app"
	cp "$BIN" "$T/root/opt/app/inlined"
	chain_artifact /opt/app/inlined
	run mt-report --folded "$T/run.msgpack"
	assert_line "/opt/app/inlined+$RET_TABLE;/opt/app/inlined+$RET_MALLOC 300"
	run mt-report --folded --sysroot "$T/root" "$T/run.msgpack"
	assert_line "main;make_table;fill_row;new_cell 300"
}

@test "--compare: the sites that grew most, matched by their functions" {
	chain_artifact "$BIN" "$ID" base
	mk head <<-EOF
		CodeFile file=1 path=$BIN build_id=$ID
		Stack stack=1 frames=1:$RET_TABLE
		Stack stack=2 frames=1:$RET_MALLOC,1:$RET_TABLE
		Malloc addr=0x1000 size=1000 stack=2
		Malloc addr=0x5000 size=100 stack=1
	EOF
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack"
	assert_success
	assert_output --partial "allocation sites that grew most, by bytes live at the heap peak"
	assert_output --partial "#1   +700 B (300 B -> 1000 B)"
	assert_output --partial "#2   +100 B (0 B -> 100 B)"
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" --json
	assert_success
	run jq -c '[.sites_grown[] | [.growth, .base, .head, .frames[0]]]' <<<"$output"
	assert_output '[[700,300,1000,"new_cell"],[100,0,100,"main"]]'
}

@test "--compare: the sites are listed by the metric whose limit failed (bytes allocated, not live at the peak)" {
	chain_artifact "$BIN" "$ID" base
	# the chain allocates 1,000 B (base 300) in blocks freed at once:
	# nothing of it is live at the peak (3,000 B of site 2, base 3,300)
	{
		echo "CodeFile file=1 path=$BIN build_id=$ID"
		echo "Stack stack=1 frames=1:$RET_MALLOC,1:$RET_TABLE"
		echo "Stack stack=2 frames=0:0x7f0000001000 truncated=1"
		echo "Stack stack=3 frames=1:$RET_TABLE"
		for i in 1 2 3 4 5 6 7 8 9 10; do
			echo "Malloc addr=0x1000 size=100 stack=1"
			echo "Free addr=0x1000"
		done
		echo "Malloc addr=0x4000 size=3000 stack=2"
		echo "Free addr=0x4000"
		echo "Malloc addr=0x5000 size=100 stack=3"
	} | mk head
	# total allocated 3,400 B -> 4,100 B (+20.6%): the limit of 10% fails
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" \
		--max-growth total_allocated=10%
	assert_failure 1
	assert_output --partial "total allocated        3.32 KiB     4.00 KiB    +20.6%  FAIL"
	assert_output --partial "allocation sites that grew most, by bytes allocated"
	assert_output --partial "#1   +700 B (300 B -> 1000 B)"
	refute_output --partial "(none grew)"
	run --separate-stderr mt-report --compare "$T/base.msgpack" \
		"$T/head.msgpack" --json --max-growth total_allocated=10%
	assert_failure 1
	run jq -c '.sites_grown_by, [.sites_grown[] | [.growth, .base, .head,
		.frames[0]]]' <<<"$output"
	assert_output "$(printf '%s\n' '{"space":"heap","metric":"allocated"}' \
		'[[700,300,1000,"new_cell"]]')"
	# a gate on HEAD alone, the same
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" \
		--max-total-allocated 4000
	assert_failure 1
	assert_output --partial "allocation sites that grew most, by bytes allocated"
	assert_output --partial "#1   +700 B (300 B -> 1000 B)"
	# calls: 3 -> 10 at the chain
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" \
		--max-growth allocations=0
	assert_output --partial "allocation sites that grew most, by allocation calls"
	assert_output --partial "#1   +7 (3 -> 10)"
	# --sort chooses: by bytes live at the peak, nothing grew
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" \
		--max-growth total_allocated=10% --sort peak
	assert_output --partial "allocation sites that grew most, by bytes live at the heap peak"
	assert_output --partial "(none grew)"
	# no limit failed: by --sort's default, as before
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack"
	assert_success
	assert_output --partial "(none grew)"
}

@test "a truncated stack says which file the unwinder stopped in" {
	mk t <<-EOF
		CodeFile file=1 path=$BIN build_id=$ID
		Stack stack=1 frames=1:$RET_TABLE truncated=1
		Stack stack=2 frames=0:0x7f0000001000 truncated=1
		Malloc addr=0x1000 size=100 stack=1
		Malloc addr=0x2000 size=50 stack=2
	EOF
	run mt-report --folded "$T/t.msgpack"
	assert_success
	assert_output "$(printf '%s\n' '[truncated in inlined];main 100' \
		'[truncated];0x7f0000001000 50')"
	mt-report --flamegraph "$T/t.svg" "$T/t.msgpack"
	grep -q '<title>\[truncated in inlined\] (100 B, 66.67%)</title>' "$T/t.svg"
	# the name is the flame graph's: --json's sites stay as they were
	run mt-report --json --flamegraph "$T/u.svg" "$T/t.msgpack"
	assert_output --partial "\"truncated\":true"
	refute_output --partial "_trunc"
}

@test "traced with --stacks: one name per frame, without symbol versions (__libc_start_main, not @@GLIBC_2.34)" {
	require_bpf
	require_built "$MT_FIXTURES/stacks/stacks"
	mt-trace --stacks -o "$T/s.raw" -- "$MT_FIXTURES/stacks/stacks" direct \
		>/dev/null
	run mt-report --folded "$T/s.raw"
	assert_success
	refute_output --partial "@"
	assert_line --partial ";__libc_start_main;__libc_start_call_main;main;app_outer;app_inner;stk_mid;stk_leaf 4321"
	run mt-report --stack-depth 0 "$T/s.raw"
	refute_output --partial "@GLIBC"
}

@test "traced with --stacks: the fixture's site exact, its frames as addr2line names them" {
	require_bpf
	run bash -c 'mt-trace --stacks -- "$1" 100 2>"$2/trace.err" |
		mt-encode >"$2/real.msgpack"' _ "$BIN" "$T"
	assert_success
	run mt-report --json --sort count --top 1 "$T/real.msgpack"
	assert_success
	echo "$output" >"$T/r.json"
	# 100 blocks of 64..163 bytes, all still live at exit
	run jq -c '.sites.top[0] | [.allocations, .allocated_bytes,
		.peak_bytes, .not_freed_bytes, .not_freed_blocks, .truncated]' "$T/r.json"
	assert_output '[100,11350,11350,11350,100,false]'
	run jq -r '[.sites.top[0].frames[0:4][].function] | join(" ")' "$T/r.json"
	assert_output "new_cell fill_row make_table main"
	# every frame of the fixture's own code (with line tables; _start
	# has none): addr2line's names and lines at the recorded return
	# address - 1, inlined frames included, in order
	mine=".sites.top[0].frames[] | select(.object == \"$BIN\" and .file)"
	jq -r "$mine | .address" "$T/r.json" | uniq | while read -r a; do
		a2l "$BIN" "$a"
	done >"$T/want"
	jq -r "$mine | \"\(.function) \(.file | split(\"/\") | last):\(.line)\"" \
		"$T/r.json" >"$T/got"
	cat "$T/got"
	[ "$(wc -l <"$T/got")" -eq 4 ]
	diff "$T/want" "$T/got"
}

@test "mt-reconstruct --max-sites: the heaviest by each measure, the rest counted" {
	chain_artifact
	mt-reconstruct --max-sites 1 "$T/run.msgpack" >"$T/t.json"
	# peak and allocated: site 2; count and leaked: site 1
	run jq -c '.sites | [.count, .omitted, .omitted_peak_bytes,
		[.sites[].stack]]' "$T/t.json"
	assert_output '[3,1,0,[2,1]]'
	mt-reconstruct "$T/run.msgpack" >"$T/all.json"
	run jq -c '.sites | [.omitted, [.sites[].stack]]' "$T/all.json"
	assert_output '[0,[2,1,3]]'
	run mt-reconstruct --max-sites x "$T/run.msgpack"
	assert_failure 2
}
