#!/usr/bin/env bats
# mt-reconstruct on hand-made artifacts (tests/lib/mkartifact.py) whose
# peaks, totals and leaks are known by construction, on the memtrack test
# vector, and on mt-gen raw streams checked against mt-gen's own --expect.

load helpers

MK="$TOP/tests/lib/mkartifact.py"
MiB=1048576

setup() {
	T="$BATS_TEST_TMPDIR"
}

# mk NAME [MKARTIFACT OPTIONS] < script: writes $T/NAME.msgpack
mk() {
	local name=$1
	shift
	"$PY" "$MK" "$@" >"$T/$name.msgpack"
}

# recon NAME [OPTIONS]: $T/NAME.json from $T/NAME.msgpack, must succeed
recon() {
	local name=$1
	shift
	mt-reconstruct "$@" "$T/$name.msgpack" >"$T/$name.json"
}

# j NAME FILTER: a jq value of $T/NAME.json
j() {
	jq -c "$2" "$T/$1.json"
}

# The issue's example: 10 x 1 MiB, free 5, 2 MiB more; exit.
ten_mib() {
	for i in 0 1 2 3 4 5 6 7 8 9; do
		echo "Malloc addr=$((0x100000 + i * 0x200000)) size=1MiB"
	done
	for i in 0 1 2 3 4; do
		echo "Free addr=$((0x100000 + i * 0x200000))"
	done
	echo "Malloc addr=0x9000000 size=2MiB"
	echo "Exit exit_code=0"
}

@test "peak, totals and leaks of 10 x 1 MiB, free 5, 2 MiB" {
	ten_mib | mk a --command "./ten a"
	recon a
	[ "$(j a .format)" = '"mt-timelines"' ]
	[ "$(j a .tree.heap.peak)" = $((10 * MiB)) ]
	# events every 1000 ns from the start: the 10th malloc is at 10 us
	[ "$(j a .tree.heap.peak_t_ns)" = 10000 ]
	[ "$(j a .tree.totals.allocated_bytes)" = $((12 * MiB)) ]
	[ "$(j a .tree.totals.allocations)" = 11 ]
	[ "$(j a .tree.totals.frees)" = 5 ]
	[ "$(j a .tree.totals.calls.malloc)" = 11 ]
	[ "$(j a .tree.not_freed.bytes)" = $((7 * MiB)) ]
	[ "$(j a .tree.not_freed.count)" = 6 ]
	[ "$(j a '.tree.not_freed.blocks[0].size')" = $((2 * MiB)) ]
	[ "$(j a '.tree.not_freed.blocks[0].at')" = '"exit"' ]
	[ "$(j a '.tree.not_freed.blocks[0].first_seen_ns')" = 16000 ]
	[ "$(j a .command)" = '["./ten","a"]' ]
	[ "$(j a .exit)" = '{"code":0}' ]
	[ "$(j a .input.complete)" = true ]
	[ "$(j a '.processes | length')" = 1 ]
	[ "$(j a '.processes[0].pid')" = 100 ]
	[ "$(j a '.processes[0].end_ns')" = 17000 ]
}

@test "fork: the child starts with the parent's blocks; freeing them is no error" {
	mk a <<-EOF
		Malloc addr=0xa000 size=100
		Malloc addr=0xb000 size=50
		Fork pid=200 ppid=100
		Free pid=200 addr=0xa000
		Malloc pid=200 addr=0xc000 size=30
		Free addr=0xa000
		Exit pid=200 exit_code=1
		Exit exit_code=0
	EOF
	recon a
	[ "$(j a .tree.totals.unknown_frees)" = 0 ]
	# inherited blocks count once, in the parent: 150 + the child's 30
	[ "$(j a .tree.heap.peak)" = 180 ]
	[ "$(j a '.processes[1].pid')" = 200 ]
	[ "$(j a '.processes[1].ppid')" = 100 ]
	[ "$(j a '.processes[1].heap.peak')" = 30 ]
	[ "$(j a '.processes[1].not_freed.bytes')" = 30 ]
	[ "$(j a '.processes[1].exit')" = '{"code":1}' ]
	[ "$(j a '.processes[0].not_freed.bytes')" = 50 ]
}

@test "exec ends the address space: live blocks are leaks at exec" {
	mk a <<-EOF
		Malloc addr=0xa000 size=64
		Exec path=/usr/bin/next
		Free addr=0xa000
		Malloc addr=0xa000 size=8
		Free addr=0xa000
		Exit signal=9
	EOF
	recon a
	[ "$(j a '.processes[0].execs[0].path')" = '"/usr/bin/next"' ]
	[ "$(j a '.processes[0].not_freed.bytes')" = 64 ]
	[ "$(j a '.processes[0].not_freed.blocks[0].at')" = '"exec"' ]
	[ "$(j a '.processes[0].not_freed.blocks[0].at_ns')" = 2000 ]
	# the free after exec is of an address the new program never had
	[ "$(j a .tree.totals.unknown_frees)" = 1 ]
	[ "$(j a .tree.totals.frees)" = 1 ]
	[ "$(j a '.processes[0].exit')" = '{"signal":9}' ]
}

@test "a free of an unknown address is counted, never a negative heap" {
	mk a <<-EOF
		Free addr=0xdead0
		Free addr=0xdead0
		Malloc addr=0xa000 size=10
		Free addr=0xbeef0
		Exit exit_code=0
	EOF
	recon a
	[ "$(j a .tree.totals.unknown_frees)" = 3 ]
	[ "$(j a .tree.heap.peak)" = 10 ]
	[ "$(j a '[.tree.heap.points[][1,2]] | min')" = 0 ]
	[ "$(j a '[.tree.heap.points[][1,2]] | max')" = 10 ]
}

@test "realloc moves bytes; realloc(NULL) allocates; realloc(p, 0) frees" {
	mk a <<-EOF
		Realloc addr=0xa000 size=100 old_addr=0
		Realloc addr=0xb000 size=300 old_addr=0xa000
		Realloc addr=0xb000 size=200 old_addr=0xb000
		Realloc addr=0 size=0 old_addr=0xb000
		Exit exit_code=0
	EOF
	recon a
	[ "$(j a .tree.heap.peak)" = 300 ]
	[ "$(j a '[.tree.heap.points[][2]]')" = '[100,300,200,0]' ]
	[ "$(j a .tree.totals.allocations)" = 3 ]
	[ "$(j a .tree.totals.reallocs)" = 4 ]
	[ "$(j a .tree.totals.allocated_bytes)" = 600 ]
	[ "$(j a .tree.not_freed.bytes)" = 0 ]
}

@test "mapped memory: munmap of a hole, MAP_FIXED over, mremap, brk without old_addr" {
	mk a <<-EOF
		Mmap addr=0x100000 size=12288
		Munmap addr=0x101000 size=4096
		Mmap addr=0x100000 size=4096
		Mremap addr=0x300000 size=65536 old_addr=0x102000 old_size=4096
		Brk addr=0x500000
		Brk addr=0x504000
		Brk addr=0x501000
		Exit exit_code=0
	EOF
	recon a
	[ "$(j a '[.tree.mapped.points[][2]]')" = "[12288,8192,69632,86016,73728,0]" ]
	[ "$(j a .tree.mapped.peak)" = 86016 ]
}

# The recorder's mappings (prot's MT_MMAP_TRACER, 0x8000) are the
# tracer's: never in mapped, and tracer_mapped is the most live at once,
# not the sum of every mapping made (a ring unmapped and mapped again,
# MAP_FIXED over its own mapping).
@test "the tracer's mappings: out of mapped; tracer_mapped is the most live at once, unmaps and MAP_FIXED counted" {
	mk a <<-EOF
		Mmap addr=0x100000 size=1MiB prot=0x8003 flags=0x21
		Mmap addr=0x400000 size=8192 prot=3 flags=0x22
		Munmap addr=0x100000 size=1MiB
		Mmap addr=0x600000 size=1MiB prot=0x8003 flags=0x21
		Mmap addr=0x600000 size=4096 prot=0x8003 flags=0x31
		Munmap addr=0x400000 size=8192
		Exit exit_code=0
	EOF
	recon a
	[ "$(j a .tree.mapped.peak)" = 8192 ]
	[ "$(j a '.processes[0].tracer_mapped')" = 1048576 ]
}

@test "--resolution 1ms buckets the series and keeps the exact peak" {
	# 20,000 events 1 us apart: a saw tooth of 100 B with one 7777 B spike
	"$PY" - >"$T/s" <<-'EOF'
		for i in range(10000):
		    print("Malloc addr=0xa000 size=%d" % (7777 if i == 4321 else 100))
		    print("Free addr=0xa000")
		print("Exit exit_code=0")
	EOF
	mk a <"$T/s"
	recon a --resolution 1ms
	[ "$(j a .resolution.mode)" = '"fixed"' ]
	[ "$(j a .tree.heap.bucket_ns)" = 1000000 ]
	[ "$(j a .tree.heap.peak)" = 7777 ]
	# malloc number 4321 is event 8643: at 8,643,000 ns
	[ "$(j a .tree.heap.peak_t_ns)" = 8643000 ]
	[ "$(j a '.tree.heap.points | length')" -le 22 ]
	[ "$(j a '[.tree.heap.points[][1]] | max')" = 7777 ]
	[ "$(j a '.tree.heap.points[] | select(.[1] == 7777) | .[0]')" = 8000000 ]
	recon a --resolution 0
	# one point per heap change: 10,000 mallocs and 10,000 frees
	[ "$(j a .resolution.mode)" = '"exact"' ]
	[ "$(j a '.tree.heap.points | length')" = 20000 ]
	recon a --max-points 10
	[ "$(j a '.tree.heap.points | length')" -le 10 ]
	[ "$(j a '[.tree.heap.points[][1]] | max')" = 7777 ]
}

@test "lost events and allocators_tracked are carried into the timelines" {
	mk a --no-allocators <<-EOF
		Lost count=3
		Mmap addr=0x100000 size=4096
		Lost count=2
		Exit exit_code=0
	EOF
	recon a
	[ "$(j a .lost_events)" = 5 ]
	[ "$(j a .allocators_tracked)" = false ]
	[ "$(j a .tree.mapped.peak)" = 4096 ]
}

@test "the CodSpeed memtrack vector (zstd -dc) reconstructs" {
	zstd -dc "$TOP/tests/data/codspeed-realloc.MemtrackArtifact.msgpack" \
		>"$T/m.msgpack"
	recon m
	[ "$(j m .input.format)" = '"memtrack"' ]
	[ "$(j m .input.complete)" = true ]
	[ "$(j m .exit)" = null ]
	[ "$(j m .tree.heap.peak)" = 42 ]
	[ "$(j m .tree.totals.allocations)" = 1 ]
	[ "$(j m .tree.totals.calls.realloc)" = 1 ]
	[ "$(j m .tree.not_freed.bytes)" = 42 ]
	[ "$(j m '.tree.not_freed.blocks[0].at')" = '"end"' ]
	[ "$(j m '.processes[0].pid')" = 1 ]
}

@test "memtrack-style events without header: same heap as the artifact" {
	ten_mib | mk a
	ten_mib | mk m --memtrack
	recon a
	recon m
	[ "$(j m .tree.heap.peak)" = "$(j a .tree.heap.peak)" ]
	[ "$(j m .tree.totals)" = "$(j a .tree.totals)" ]
	[ "$(j m .tree.not_freed.bytes)" = "$(j a .tree.not_freed.bytes)" ]
}

@test "JSON Lines input gives the same timelines as MessagePack" {
	ten_mib | mk a
	ten_mib | "$PY" "$MK" --jsonl >"$T/l.jsonl"
	mt-reconstruct "$T/l.jsonl" >"$T/l.json"
	recon a
	[ "$(jq -c 'del(.input)' "$T/l.json")" = "$(j a 'del(.input)')" ]
}

@test "reads stdin and writes -o FILE" {
	ten_mib | mk a
	mt-reconstruct -o "$T/o.json" <"$T/a.msgpack"
	[ "$(jq .tree.heap.peak "$T/o.json")" = $((10 * MiB)) ]
}

@test "a truncated artifact: exit 2 (0 with --allow-incomplete), timelines marked incomplete" {
	ten_mib | mk a --no-trailer
	run mt-reconstruct --allow-incomplete -o "$T/a.json" "$T/a.msgpack"
	assert_success
	run mt-reconstruct -o "$T/a.json" "$T/a.msgpack"
	assert_failure 2
	assert_output --partial "mt-reconstruct: incomplete trace: $T/a.msgpack: byte"
	assert_output --partial "--allow-incomplete accepts it"
	[ "$(j a .input.complete)" = false ]
	[ "$(j a .tree.heap.peak)" = $((10 * MiB)) ]
	# cut in the middle of an event map
	ten_mib | mk b
	head -c 300 "$T/b.msgpack" >"$T/c.msgpack"
	run mt-reconstruct -o "$T/c.json" "$T/c.msgpack"
	assert_failure 2
	[ "$(j c .input.complete)" = false ]
	[ "$(j c .input.error | grep -c byte)" = 1 ]
}

@test "unusable input: exit 2 with the reason" {
	printf 'hello' >"$T/bad"
	run mt-reconstruct "$T/bad"
	assert_failure 2
	assert_output --partial "mt-reconstruct: $T/bad: byte 0: unknown format"
	: >"$T/empty"
	run mt-reconstruct "$T/empty"
	assert_failure 2
	run mt-reconstruct "$T/missing"
	assert_failure 2
	ten_mib | mk a
	recon a
	run mt-reconstruct "$T/a.json"
	assert_failure 2
	assert_output --partial "timelines"
	run mt-reconstruct --resolution 5 "$T/a.msgpack"
	assert_failure 2
}

@test "--help prints the usage" {
	run mt-reconstruct --help
	assert_success
	assert_output --partial "usage: mt-reconstruct"
}

@test "mt-gen raw stream: calls and events agree with mt-gen's own truth" {
	require_built "$MT_BUILD/tests/mt-gen"
	"$MT_BUILD/tests/mt-gen" --events 20000 --seed 7 --expect "$T/x.jsonl" \
		-o "$T/g.raw"
	mt-reconstruct "$T/g.raw" >"$T/g.json"
	# mt-gen's events of each kind, counted in one pass
	jq -s 'group_by(.kind) | map({key: (.[0].kind | tostring),
		value: length}) | from_entries' "$T/x.jsonl" >"$T/kinds.json"
	for k in 1:malloc 3:calloc 4:realloc 5:aligned_alloc 2:free; do
		want=$(jq ".\"${k%%:*}\" // 0" "$T/kinds.json")
		[ "$want" -gt 0 ]
		[ "$(j g ".tree.totals.calls.${k#*:}")" = "$want" ]
	done
	[ "$(j g .events)" = "$(wc -l <"$T/x.jsonl")" ]
	[ "$(j g .input.complete)" = true ]
	want=$(jq '.["10"] // 0' "$T/kinds.json")
	# every fork makes one process; the others were seen without a fork
	[ "$(j g '[.processes[] | select(.ppid != null)] | length')" = "$want" ]
}

@test "RSS by member and physical: tree sums, fork seeds, exit resets, peaks stay" {
	mk a <<-EOF
		Rss member=anon size=1MiB
		Rss member=file size=2MiB
		Rss member=swap size=5MiB
		Fork pid=101 ppid=100
		Rss pid=101 member=anon size=3MiB
		Pss pid=101 pss=2MiB pss_anon=1MiB pss_file=1MiB pss_shmem=0
		Pss pss=1MiB pss_anon=1MiB pss_file=0 pss_shmem=0
		Exit pid=101 exit_code=0
		Rss member=shmem size=1MiB
		Exit exit_code=0
	EOF
	recon a
	# parent 3 MiB resident (swap is not); the child starts with the
	# parent's 3 MiB, then its anon grows to 3 MiB: 5 MiB; tree 8 MiB
	[ "$(j a .tree.rss.total.peak)" = $((8 * MiB)) ]
	[ "$(j a .tree.rss.total.peak_t_ns)" = 5000 ]
	[ "$(j a .tree.rss.anon.peak)" = $((4 * MiB)) ]
	# swap entries are copied at fork too: 5 MiB in each
	[ "$(j a .tree.rss.swap.peak)" = $((10 * MiB)) ]
	[ "$(j a '.processes[1].rss.total.peak')" = $((5 * MiB)) ]
	[ "$(j a '.processes[1].rss.total.final')" = 0 ]
	[ "$(j a .tree.physical.total.peak)" = $((3 * MiB)) ]
	[ "$(j a '.processes[0].physical.total.peak')" = $MiB ]
	# after the child's exit: the parent's 3 MiB + 1 MiB shmem
	[ "$(j a '[.tree.rss.total.points[][2]] | .[-2]')" = $((4 * MiB)) ]
	[ "$(j a .tree.rss.total.final)" = 0 ]
	# no RSS events and no rss_tracked: null, not zero
	ten_mib | mk b
	recon b
	[ "$(j b .tree.rss)" = null ]
	[ "$(j b .tree.physical)" = null ]
}

@test "--process-series N: the N heaviest processes get exactly the series 'all' gives" {
	require_built "$MT_BUILD/tests/mt-gen"
	"$MT_BUILD/tests/mt-gen" --events 100000 --seed 5 -o "$T/g.raw"
	mt-reconstruct --process-series 3 "$T/g.raw" >"$T/a.json"
	mt-reconstruct --process-series all "$T/g.raw" >"$T/b.json"
	heaviest='[.processes[] | {pid, start_ns, k: [.heap.peak, (.rss.total.peak // 0), .mapped.peak]}]
		| sort_by(.k, -.start_ns) | reverse | .[0:3] | map(.pid) | sort'
	[ "$(j a '[.processes[] | select(.heap.points) | .pid] | sort')" = "$(j b "$heaviest")" ]
	[ "$(j b '[.processes[] | select(.heap.points)] | length')" = "$(j b '.processes | length')" ]
	pids=$(j b "$heaviest")
	pick='[.processes[] | select(.heap.points and (.pid as $p | $pids | index($p)))]'
	[ "$(jq -c --argjson pids "$pids" "$pick" "$T/a.json")" = \
		"$(jq -c --argjson pids "$pids" "$pick" "$T/b.json")" ]
	[ "$(jq -c --argjson pids "$pids" "$pick | length" "$T/a.json")" = 3 ]
}

@test "--section: only what happens between NAME and NAME-end counts" {
	# 1 MiB outside the section, 3 x 1 MiB inside, twice in and out
	mk a <<-EOF
		Malloc addr=0x100000 size=1MiB
		Mmap addr=0x7f0000000000 size=4MiB
		Marker name=bench
		Malloc addr=0x200000 size=1MiB
		Malloc addr=0x300000 size=1MiB
		Free addr=0x100000
		Mmap addr=0x7f1000000000 size=1MiB
		Marker name=bench-end
		Malloc addr=0x400000 size=5MiB
		Marker name=bench-start
		Malloc addr=0x500000 size=1MiB
		Free addr=0x200000
		Marker name=bench-end
		Exit exit_code=0
	EOF
	recon a --section bench
	[ "$(j a .section.name)" = '"bench"' ]
	[ "$(j a .section.intervals)" = '[[3000,8000],[10000,13000]]' ]
	[ "$(j a .section.duration_ns)" = 8000 ]
	[ "$(j a .tree.heap.peak)" = $((3 * MiB)) ]
	[ "$(j a .tree.totals.allocations)" = 3 ]
	[ "$(j a .tree.totals.allocated_bytes)" = $((3 * MiB)) ]
	# the free of the outside block counts as a free, not as heap
	[ "$(j a .tree.totals.frees)" = 2 ]
	[ "$(j a .tree.totals.unknown_frees)" = 0 ]
	[ "$(j a .tree.mapped.peak)" = $MiB ]
	# retained: the section's blocks still live at exit
	[ "$(j a .tree.not_freed.bytes)" = $((2 * MiB)) ]
	# without --section: everything
	recon a
	[ "$(j a .section)" = null ]
	[ "$(j a .tree.heap.peak)" = $((8 * MiB)) ]
	[ "$(j a .tree.totals.allocations)" = 5 ]
	run mt-reconstruct --section nope "$T/a.msgpack"
	assert_failure 2
	assert_output --partial 'no marker "nope"'
}

@test "events of pid 0 (the tracer's own markers) make no process" {
	mk a <<-EOF
		Marker pid=0 name=bench
		Fork pid=0 ppid=100
		Rss pid=0 member=anon size=4096
		Malloc addr=0x1000 size=10
		Marker pid=0 name=bench-end
		Exit exit_code=0
	EOF
	recon a --section bench
	[ "$(j a '[.processes[].pid]')" = "[100]" ]
	[ "$(j a '.markers | length')" = 2 ]
	[ "$(j a .tree.heap.peak)" = 10 ]
	[ "$(j a .tree.rss)" = null ]
}

@test "memory follows what is live, not the length of the trace" {
	# n events: malloc(48) of block i, free of block i - 1000: 1,000 live
	cat >"$T/churn.py" <<-'PY'
		import sys, msgpack
		n, t0 = int(sys.argv[1]), 10**9
		out, pack = sys.stdout.buffer, msgpack.Packer().pack
		out.write(pack({"type": "Header", "format": "mt", "version": 1,
		    "command": ["churn"], "page_size": 4096, "root_pid": 100,
		    "start_monotonic": t0, "allocators_tracked": True}))
		# one map of each kind, its fields set for each event: the bytes of
		# dict(type=..., pid=100, tid=100, timestamp=..., ...) in that order
		malloc = dict(type="Malloc", pid=100, tid=100, timestamp=0, addr=0, size=48)
		free = dict(type="Free", pid=100, tid=100, timestamp=0, addr=0)
		lost = dict(type="Lost", pid=100, tid=100, timestamp=0, count=0)
		chunk = []
		for i in range(n // 2):
		    malloc["timestamp"], malloc["addr"] = t0 + 200 * i, 0x100000 + (i % 2000) * 64
		    chunk.append(pack(malloc))
		    if i >= 1000:
		        free["timestamp"] = t0 + 200 * i + 100
		        free["addr"] = 0x100000 + ((i - 1000) % 2000) * 64
		        chunk.append(pack(free))
		    else:
		        lost["timestamp"] = t0 + 200 * i + 100
		        chunk.append(pack(lost))
		    if len(chunk) >= 65536:
		        out.write(b"".join(chunk))
		        chunk.clear()
		out.write(b"".join(chunk))
		out.write(pack({"type": "Trailer", "complete": True,
		    "exit_code": 0, "end_monotonic": t0 + 100 * n, "events": n,
		    "lost_events": 0, "batches": 1}))
	PY
	"$PY" "$T/churn.py" 100000 >"$T/small.msgpack"
	"$PY" "$T/churn.py" 2000000 >"$T/big.msgpack"
	for s in small big; do
		/usr/bin/time -f %M -o "$T/$s.kb" mt-reconstruct -o "$T/$s.json" "$T/$s.msgpack"
		# 1,001 live just before each free
		[ "$(jq .tree.heap.peak "$T/$s.json")" = 48048 ]
		[ "$(jq '.tree.heap.points | length' "$T/$s.json")" -le 2000 ]
	done
	small=$(cat "$T/small.kb") big=$(cat "$T/big.kb")
	echo "max RSS: 100,000 events $small KiB, 2,000,000 events $big KiB" >&2
	# 20 times the events, not 20 times the memory
	[ "$big" -lt $((small * 3 / 2 + 1024)) ]
}

@test "allocator events in a trace whose header says not tracked: tracked" {
	mk a --no-allocators <<-EOF
		Malloc addr=0x1000 size=10
		Exit exit_code=0
	EOF
	recon a
	[ "$(j a .allocators_tracked)" = true ]
	[ "$(j a .tree.heap.peak)" = 10 ]
}

@test "an input over 4 GiB: mt-read, mt-encode, mt-reconstruct and mt-report keep their memory bounded" {
	# 80,000 records padded to 64 KiB each (the padding a hole): a 5.3 GB
	# raw stream on ~330 MB of disk.  Mapped input is let go 4 MiB at a
	# time; a 32-bit mask of the offset once stopped that past 4 GiB, and
	# every page read there stayed (a page a record: 60 MB or more, where
	# 6-8 MB is the reader's own).
	local big="$T/big.raw" tool rss asan=
	# under ASan (make check-asan) the shadow memory is most of the RSS:
	# the tools still read it all, but their RSS says nothing
	! grep -q __asan_init "$MT_BIN/mt-reconstruct" || asan=1
	"$MT_BUILD/tests/mt-gen" --events 80000 --event-size 65536 --seed 3 \
		-o "$big"
	[ "$(stat -c %s "$big")" -gt $((4 << 30)) ]
	for tool in "$MT_BUILD/tests/mt-read" "mt-encode -u -o $T/big.msgpack" \
		"mt-reconstruct -o $T/big.json" "mt-report"; do
		/usr/bin/time -f %M -o "$T/rss" $tool "$big" >"$T/out" 2>"$T/err" ||
			{ cat "$T/err"; false; }
		rss=$(tail -1 "$T/rss")
		echo "$tool: peak RSS $rss KiB"
		[ "$asan" ] || [ "$rss" -lt 32768 ]
		# and every record was read (mt-read says how many)
		[ "$tool" != "$MT_BUILD/tests/mt-read" ] ||
			grep "format raw, 80000 records, 0 lost" "$T/err"
	done
	jq -e '.input.complete and .events == 80000' "$T/big.json"
	"$PY" -c 'import msgpack, sys
n = sum(1 for m in msgpack.Unpacker(open(sys.argv[1], "rb")) if m["type"] not in ("Header", "Trailer"))
assert n == 80000, n' "$T/big.msgpack"
	rm -f "$big"
}

@test "a late event of an exited process (its Munmap written after its Exit) is counted, never a second process" {
	# 101's Munmap happened at 4 us, before its Exit at 5 us, but was
	# written after it (mt-trace read its two rings one after the other).
	mk late <<-'SCRIPT'
		Malloc pid=100 addr=0x1000 size=100 t=1000
		Fork pid=101 ppid=100 t=2000
		Mmap pid=101 addr=0x7f0000000000 size=1MiB t=3000
		Exit pid=101 exit_code=0 t=5000
		Munmap pid=101 addr=0x7f0000000000 size=1MiB t=4000
		Free pid=101 addr=0x1000 t=4500
		Exit pid=100 exit_code=0 t=9000
	SCRIPT
	recon late
	[ "$(j late .late_events)" = 2 ]
	[ "$(j late .processes_count)" = 2 ]
	[ "$(j late '[.processes[] | [.pid, .ppid]]')" = "[[100,null],[101,100]]" ]
	# 101 ended with its mapping and the block it inherited: its own
	# mapped bytes peaked at 1 MiB, and it leaked nothing of its own
	[ "$(j late '.processes[1].mapped.peak')" = $MiB ]
	[ "$(j late '.processes[1].events')" = 2 ]
	[ "$(j late .events)" = 7 ]
	[ "$(j late .tree.not_freed.count)" = 1 ] # 100's block, at its exit

	# a Fork of an ended pid is its reuse: a new process, no late event
	mk reuse <<-'SCRIPT'
		Fork pid=101 ppid=100 t=2000
		Exit pid=101 exit_code=0 t=5000
		Fork pid=101 ppid=100 t=7000
		Malloc pid=101 addr=0x2000 size=10 t=7500
		Exit pid=101 exit_code=0 t=8000
	SCRIPT
	recon reuse
	[ "$(j reuse .late_events)" = 0 ]
	[ "$(j reuse '[.processes[] | [.pid, .ppid, .totals.allocations]]')" = "[[101,100,0],[101,100,1]]" ]
}

@test "an ended process keeps little: bytes per ended process, from peak RSS over 20,000 and 60,000 processes" {
	# each process: Fork, Exec, Malloc (leaked), Mmap, two Rss, Exit;
	# mt-reconstruct's peak RSS grows by what each ended one keeps.
	# 1,757 bytes a process before its leak array, PSS series and slack
	# went; 1,170 while it kept its whole model (blocks' and ranges'
	# headers, 7 series of 80 bytes); about 630 now that only its
	# summary stays.
	local n kib20 kib60
	! grep -q __asan_init "$MT_BIN/mt-reconstruct" ||
		skip "peak RSS says nothing under ASan (make test measures it)"
	for n in 20000 60000; do
		"$PY" - "$n" "$T/p$n.msgpack" <<-'PYTHON'
			import sys, msgpack
			n, out = int(sys.argv[1]), open(sys.argv[2], "wb")
			pack = msgpack.Packer().pack
			out.write(pack({"type": "Header", "format": "mt", "version": 1,
			                "root_pid": 1, "start_monotonic": 1000,
			                "allocators_tracked": True}))
			t, events = 1000, 0
			for pid in range(2, n + 2):
			    for ev in ({"type": "Fork", "ppid": 1},
			               {"type": "Exec", "path": "/usr/bin/cc1"},
			               {"type": "Malloc", "addr": 4096, "size": 100},
			               {"type": "Mmap", "addr": 1 << 40, "size": 8192},
			               {"type": "Rss", "member": "anon", "size": 40960},
			               {"type": "Rss", "member": "file", "size": 40960},
			               {"type": "Exit", "exit_code": 0}):
			        ev.update(pid=pid, tid=pid, timestamp=t)
			        out.write(pack(ev))
			        events += 1
			        t += 1
			out.write(pack({"type": "Trailer", "complete": True,
			                "events": events, "lost_events": 0}))
		PYTHON
		/usr/bin/time -f %M -o "$T/rss$n" \
			mt-reconstruct -o "$T/p$n.json" "$T/p$n.msgpack"
		[ "$(jq .processes_count "$T/p$n.json")" = $((n)) ]
	done
	kib20=$(tail -1 "$T/rss20000")
	kib60=$(tail -1 "$T/rss60000")
	echo "per ended process: $(((kib60 - kib20) * 1024 / 40000)) bytes"
	[ $(((kib60 - kib20) * 1024 / 40000)) -lt 800 ]
}
