# Artifacts made by hand (tests/lib/mkartifact.py) whose stacks point into
# the fixture tests/fixtures/sym/inlined.c (built -O2 -g with inlining), so
# that every value a report shows is known by construction.  Addresses come
# from objdump: binutils, not mt.  Loaded by profiles.bats and html.bats,
# and by sites.bats for ret_after (its own chain_artifact takes a path, a
# build id and a base).

# ret_after BIN FUNCTION CALLEE: the address after FUNCTION's call to CALLEE
ret_after() {
	objdump -d --no-show-raw-insn "$1" |
		sed -n "/<$2>:/,/^\$/p" |
		grep -A1 "call.*<$3>" | sed -n '2s/^ *\([0-9a-f]*\):.*/0x\1/p'
}

# chain_artifact OUT: three sites into OUT.  Site 1 is the fixture's chain
# main > make_table > fill_row > new_cell (the last two inlined), 300 B in
# 3 calls; it holds 3 blocks (300 B) at most, then 2 (200 B) at the peak
# (3,200 B, at 5 ms) beside site 2's one (3,000 B, a truncated stack in no
# known file); site 3 is main alone, 100 B.  Two frees; site 1 leaks 2
# blocks, site 3 one (300 B in all) when the process exits at 10 ms.
# Block lifetimes: site 1 3 + 8 + 7 ms, site 2 2 ms, site 3 2 ms.
chain_artifact() {
	local bin="$MT_FIXTURES/sym/inlined" id ret_malloc ret_table
	id=$(readelf -n "$bin" | sed -n 's/.*Build ID: //p')
	ret_malloc=$(ret_after "$bin" make_table 'malloc@plt')
	ret_table=$(ret_after "$bin" main 'make_table')
	[ -n "$id" ] && [ -n "$ret_malloc" ] && [ -n "$ret_table" ] || {
		echo "chain_artifact: no build id or call in $bin" >&2
		return 1
	}
	"$PY" "$TOP/tests/lib/mkartifact.py" >"$1" <<-EOF
		CodeFile file=1 path=$bin build_id=$id
		Stack stack=1 frames=1:$ret_malloc,1:$ret_table
		Stack stack=2 frames=0:0x7f0000001000 truncated=1
		Stack stack=3 frames=1:$ret_table
		Malloc addr=0x1000 size=100 stack=1 t=1000000
		Malloc addr=0x2000 size=100 stack=1 t=2000000
		Malloc addr=0x3000 size=100 stack=1 t=3000000
		Free addr=0x1000 t=4000000
		Malloc addr=0x4000 size=3000 stack=2 t=5000000
		Free addr=0x4000 t=7000000
		Malloc addr=0x5000 size=100 stack=3 t=8000000
		Exit exit_code=0 t=10000000
	EOF
}
