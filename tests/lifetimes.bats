#!/usr/bin/env bats
# Temporary allocations and block lifetimes (issue 35).  A block is
# temporary (heaptrack's definition) when it is freed, or released by
# realloc, before the thread that allocated it allocates again.  The
# artifact below is made by hand (tests/lib/mkartifact.py): which blocks
# are temporary, and how long each lived, is known by construction.

load helpers

setup() {
	T="$BATS_TEST_TMPDIR"
}

# Thread 101 and 102 of process 100; three sites.
#   A  101 site 1, freed by 101 at once          temporary     500 ns
#   B  101 site 1, freed after 101 allocated C   not           5 us
#   C  101 site 2, freed by 101; 102 allocated D in between: another
#      thread's allocation does not count        temporary     50 us
#   D  102 site 2, freed by 101 before 102 allocated again
#                                                temporary     500 us
#   E  101 site 3, released by a realloc         temporary     5 ms
#   F  101 site 3 (the realloc's), freed after G not           49.5 ms
#   G  101 site 3, never freed
# 4 temporary of 7 allocations (the realloc counts); per site 1, 2, 1.
temp_artifact() {
	"$PY" "$TOP/tests/lib/mkartifact.py" >"$T/run.msgpack" <<-EOF
		Stack stack=1 frames=0:0x1000
		Stack stack=2 frames=0:0x2000
		Stack stack=3 frames=0:0x3000
		Malloc tid=101 addr=0x1000 size=16 stack=1 t=1000
		Free tid=101 addr=0x1000 t=1500
		Malloc tid=101 addr=0x2000 size=32 stack=1 t=2000
		Malloc tid=101 addr=0x3000 size=64 stack=2 t=3000
		Malloc tid=102 addr=0x4000 size=128 stack=2 t=4000
		Free tid=101 addr=0x2000 t=7000
		Free tid=101 addr=0x3000 t=53000
		Free tid=101 addr=0x4000 t=504000
		Malloc tid=101 addr=0x5000 size=256 stack=3 t=1000000
		Realloc tid=101 addr=0x6000 old_addr=0x5000 size=512 stack=3 t=6000000
		Malloc tid=101 addr=0x7000 size=1024 stack=3 t=6500000
		Free tid=101 addr=0x6000 t=56000000
		Exit exit_code=0 t=100000000
	EOF
}

@test "temporary allocations: in total, per process and per site, by construction" {
	temp_artifact
	run mt-report "$T/run.msgpack"
	assert_success
	assert_line "temporary   4 of 7 allocations (57.1%) freed before their thread's next allocation"
	assert_output --partial "#2   0 B at peak, 192 B allocated in 2 calls, 0 B not freed
        2 of the calls temporary (freed before their thread's next allocation)
        0x2000"
	run mt-report --json --compact "$T/run.msgpack"
	assert_success
	run jq -c '[.tree.temporary_allocations, .tree.allocations,
		.top_processes[0].temporary_allocations,
		([.sites.top[] | [.frames[0].address, .temporary]] | sort)]' <<<"$output"
	assert_output '[4,7,4,[["0x1000",1],["0x2000",2],["0x3000",1]]]'
	# the timelines carry it: mt-reconstruct's document, read again
	mt-reconstruct "$T/run.msgpack" >"$T/run.json"
	run jq -c '[.tree.totals.temporary, .processes[0].totals.temporary]' \
		"$T/run.json"
	assert_output '[4,4]'
	run mt-report --json --compact "$T/run.json"
	run jq .tree.temporary_allocations <<<"$output"
	assert_output 4
}

@test "lifetimes: the blocks freed by how long they lived (a decade a bucket), text and JSON" {
	temp_artifact
	run mt-report "$T/run.msgpack"
	assert_success
	assert_output --partial "lifetimes of the blocks freed (allocation to free or realloc)
  lifetime                         count       bytes
  under 1 us                           1        16 B  ##############################
  [1 us, 10 us)                        1        32 B  ##############################
  [10 us, 100 us)                      1        64 B  ##############################
  [100 us, 1 ms)                       1       128 B  ##############################
  [1 ms, 10 ms)                        1       256 B  ##############################
  [10 ms, 100 ms)                      1       512 B  ##############################
"
	run mt-report --json --compact "$T/run.msgpack"
	run jq -c '[.lifetimes[] | [.from_ns, .to_ns, .count, .bytes]]' <<<"$output"
	assert_output "$(printf '%s' '[[0,1000,1,16],[1000,10000,1,32],' \
		'[10000,100000,1,64],[100000,1000000,1,128],' \
		'[1000000,10000000,1,256],[10000000,100000000,1,512],' \
		'[100000000,1000000000,0,0],[1000000000,10000000000,0,0],' \
		'[10000000000,null,0,0]]')"
}

@test "temporary allocations of a traced fixture: 150 of 200, as it makes them" {
	require_bpf
	require_built "$MT_FIXTURES/temporaries"
	mt-trace -o "$T/t.raw" -- "$MT_FIXTURES/temporaries"
	run mt-report --json --compact "$T/t.raw"
	assert_success
	run jq -c '[.tree.allocations, .tree.frees, .tree.temporary_allocations,
		([.lifetimes[].count] | add)]' <<<"$output"
	assert_output '[200,200,150,200]'
}

@test "the counts add up: allocs - frees - blocks released by realloc = blocks not freed" {
	temp_artifact
	run mt-report "$T/run.msgpack"
	assert_success
	assert_output --partial "(allocs: calls that returned a block, realloc's included; frees: free() of a block
 allocated in the trace; besides them realloc released 1 block)"
	run mt-report --json --compact "$T/run.msgpack"
	run jq -c '.tree | [.allocations, .frees, .realloc_frees, .not_freed_blocks,
		.allocations - .frees - .realloc_frees == .not_freed_blocks]' <<<"$output"
	assert_output '[7,5,1,1,true]'
}
