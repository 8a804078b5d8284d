#!/usr/bin/env bats
# CodSpeed memtrack's artifact ({pid}.MemtrackArtifact.msgpack), both ways:
# `mt-encode --codspeed DIR` writes it, checked by a strict checker of
# memtrack's shape (tests/lib/codspeed_check.py, python3-msgpack and the
# zstd CLI) and event by event against mt's own artifact of the same trace.
load helpers
bats_require_minimum_version 1.5.0

CHECK="$TOP/tests/lib/codspeed_check.py"
RAWCHECK="$TOP/tests/lib/rawcheck.py"
GEN="$MT_BUILD/tests/mt-gen"

setup() {
	T="$BATS_TEST_TMPDIR"
}

# the kinds of mt's artifact FILE and their counts, "Kind N" a line
mt_kinds() {
	"$PY" -c '
import collections, sys
sys.path.insert(0, sys.argv[2])
import msgpack
from mtzstd import open_plain
c = collections.Counter(m["type"] for m in msgpack.Unpacker(open_plain(sys.argv[1]), raw=False))
for k in sorted(c): print(k, c[k])' "$1" "$TOP/tests/lib"
}

@test "--codspeed: DIR/PID.MemtrackArtifact.msgpack in memtrack's shape, every allocation event as mt's artifact has it" {
	# mt-gen's trace has every kind: allocator calls, mmap/munmap/mremap,
	# brk, RSS, fork/exec/exit, lost events
	"$GEN" --events 20000 --seed 31 --lost 40 --batch 500 -o "$T/run.raw"
	run --separate-stderr mt-encode --codspeed "$T/out" "$T/run.raw"
	assert_success
	# mt-gen's root pid is 1000 (read from the raw header with struct)
	pid=$("$PY" -c 'import struct, sys
print(struct.unpack_from("<I", open(sys.argv[1], "rb").read(), 28)[0])' "$T/run.raw")
	[ "$(ls "$T/out")" = "$pid.MemtrackArtifact.msgpack" ]
	f="$T/out/$pid.MemtrackArtifact.msgpack"
	zstd -t -q "$f"
	mt-encode -u -o "$T/run.msgpack" "$T/run.raw"
	run "$PY" "$CHECK" compare "$f" "$T/run.msgpack"
	assert_success
	echo "$output events"
	[ "$output" -gt 15000 ]
}

@test "--codspeed: what the format cannot hold is said once, with counts" {
	"$GEN" --events 20000 --seed 32 --lost 40 --batch 500 -o "$T/run.raw"
	mt-encode -u -o "$T/run.msgpack" "$T/run.raw"
	kinds=$(mt_kinds "$T/run.msgpack")
	count() { awk -v k="$1" '$1 == k { print $2 }' <<<"$kinds"; }
	# the counts as mt-encode prints them (thousands separated)
	fmt() { "$PY" -c 'import sys; print(f"{int(sys.argv[1]):,}")' "$1"; }
	run --separate-stderr mt-encode --codspeed "$T/out" "$T/run.raw"
	assert_success
	echo "$stderr"
	[ "$(grep -c "left out" <<<"$stderr")" = 1 ]
	for k in Rss Fork Exec Exit; do
		n=$(count "$k")
		[ -n "$n" ]
		[ "$n" -gt 0 ]
		grep -q "[ :]$(fmt "$n") $k\b" <<<"$stderr" ||
			{ echo "no count $n for $k"; false; }
	done
	n=$(count Mremap)
	grep -q ": $(fmt "$n") Mremap written as the Munmap + Mmap" <<<"$stderr"
	lost=$("$PY" -c '
import sys
sys.path.insert(0, sys.argv[2])
import msgpack
from mtzstd import open_plain
print(sum(m["count"] for m in msgpack.Unpacker(open_plain(sys.argv[1]), raw=False) if m["type"] == "Lost"))' "$T/run.msgpack" "$TOP/tests/lib")
	[ "$lost" -gt 0 ]
	grep -q ": $(fmt "$lost") events lost by the tracer" <<<"$stderr"
}

@test "--codspeed: the hand-written raw stream, values spelled out" {
	"$PY" "$RAWCHECK" write "$T/hand.raw"
	mt-encode --codspeed "$T/out" "$T/hand.raw" 2>/dev/null
	f=$(echo "$T"/out/*.MemtrackArtifact.msgpack)
	run "$PY" "$CHECK" check "$f"
	assert_success
	run "$PY" -c '
import io, subprocess, sys, msgpack
d = subprocess.run(["zstd", "-dc", sys.argv[1]], stdout=subprocess.PIPE).stdout
for m in msgpack.Unpacker(io.BytesIO(d), raw=False, object_pairs_hook=list):
    print(m)' "$f"
	assert_success
	assert_line --index 0 "[('pid', 10), ('tid', 11), ('timestamp', 100), ('addr', 4096), ('type', 'Malloc'), ('size', 24)]"
	mt-encode -u -o "$T/hand.msgpack" "$T/hand.raw"
	run "$PY" "$CHECK" compare "$f" "$T/hand.msgpack"
	assert_success
}

@test "--codspeed: a truncated trace leaves no file and exits 2" {
	"$GEN" --events 2000 --seed 33 --batch 100 --truncate -o "$T/run.raw"
	run --separate-stderr mt-encode --codspeed "$T/out" "$T/run.raw"
	assert_failure 2
	[[ "$stderr" == *"no trailer after batch"* ]]
	[[ "$stderr" == *".MemtrackArtifact.msgpack: not written: CodSpeed's format cannot say a trace is incomplete"* ]]
	[ -z "$(ls -A "$T/out")" ]
}

@test "--codspeed: usage errors" {
	run mt-encode --codspeed "$T/out" -o x
	assert_failure 2
	assert_line --index 0 --partial "mt-encode: $T/out: --codspeed writes its own file"
	run mt-encode --codspeed /nonexistent/a/b "$T/x"
	assert_failure 2
}

@test "--codspeed: a traced program's allocations, one by one" {
	require_bpf
	mt-trace -o "$T/run.raw" -- "$MT_FIXTURES/realloc" 2>/dev/null
	mt-encode --codspeed "$T/out" "$T/run.raw" 2>/dev/null
	mt-encode -u -o "$T/run.msgpack" "$T/run.raw"
	run "$PY" "$CHECK" compare "$T"/out/*.MemtrackArtifact.msgpack "$T/run.msgpack"
	assert_success
	[ "$output" -gt 10 ]
}

# ---- reading CodSpeed's stored files as they are ---------------------------

VECTOR="$TOP/tests/data/codspeed-realloc.MemtrackArtifact.msgpack"

@test "every stage reads CodSpeed's stored artifact as it is (zstd), as after zstd -dc" {
	zstd -dc "$VECTOR" > "$T/plain.msgpack"
	# mt-reconstruct: the same timelines, the one realloc of 42 bytes
	mt-reconstruct -o "$T/direct.json" "$VECTOR"
	mt-reconstruct -o "$T/plain.json" "$T/plain.msgpack"
	[ "$(jq -c .input "$T/direct.json")" = '{"format":"memtrack","complete":true,"has_trailer":false,"error":null}' ]
	diff <(jq 'del(.input)' "$T/direct.json") <(jq 'del(.input)' "$T/plain.json")
	[ "$(jq .tree.heap.peak "$T/direct.json")" = 42 ]
	[ "$(jq .tree.totals.calls.realloc "$T/direct.json")" = 1 ]
	# mt-report: the same report, its JSON too
	mt-report "$VECTOR" | diff - <(mt-report "$T/plain.msgpack")
	[ "$(mt-report --json "$VECTOR" | jq .events)" = 1 ]
	# from a pipe
	mt-report < "$VECTOR" | diff - <(mt-report "$T/plain.msgpack")
	# mt-encode reads it, and says it is not what it encodes
	run mt-encode -o "$T/x" "$VECTOR"
	assert_failure 2
	assert_output "mt-encode: $VECTOR: not a raw stream but memtrack (mt-encode reads what mt-trace writes)"
}

@test "mt-encode --codspeed's file, read back: the same allocator calls and bytes as mt's own artifact" {
	"$GEN" --events 20000 --seed 34 -o "$T/run.raw"
	mt-encode --codspeed "$T/out" --frame-size 8KiB "$T/run.raw" 2>/dev/null
	f=$(echo "$T"/out/*.MemtrackArtifact.msgpack)
	# many frames, as a long memtrack run's stream of frames
	[ "$(zstd -l "$f" | awk 'NR == 2 { print $1 }')" -gt 10 ]
	mt-encode -o "$T/run.msgpack" "$T/run.raw"
	mt-reconstruct -o "$T/cs.json" "$f"
	mt-reconstruct -o "$T/mt.json" "$T/run.msgpack"
	[ "$(jq -r .input.format "$T/cs.json")" = memtrack ]
	# every call and byte; not the peaks: without Exec and Exit records a
	# process's heap is never let go of at exec (CodSpeed cannot say)
	totals='.tree.totals | del(.reused_addresses)'
	[ "$(jq -c "$totals" "$T/cs.json")" = "$(jq -c "$totals" "$T/mt.json")" ]
	[ "$(jq .tree.totals.allocations "$T/cs.json")" -gt 5000 ]
}

@test "--codspeed: the lost events it cannot carry, singular when one (issue 35)" {
	require_built "$MT_BUILD/tests/mt-gen"
	for n in 1 2; do
		"$MT_BUILD/tests/mt-gen" --events 10 --lost "$n" -o "$T/l$n.raw"
		run --separate-stderr mt-encode --codspeed "$T/out$n" "$T/l$n.raw"
		assert_success
		echo "$stderr" >"$T/err$n"
	done
	grep -q ": 1 event lost by the tracer, not in it" "$T/err1"
	grep -q ": 2 events lost by the tracer, not in it" "$T/err2"
}
