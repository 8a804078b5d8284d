#!/usr/bin/env bats
# mt-encode: raw stream -> artifact, checked by decoders we did not write
# (python3-msgpack, python's json) against two truths: the raw stream parsed
# by tests/lib/rawcheck.py with struct, and mt-gen's own list of records.
load helpers
bats_require_minimum_version 1.5.0

CHECK="$TOP/tests/lib/rawcheck.py"
GEN="$MT_BUILD/tests/mt-gen"
READ="$MT_BUILD/tests/mt-read"

setup() {
	T="$BATS_TEST_TMPDIR"
}

@test "mt-encode: 20000 synthetic events, field by field (msgpack)" {
	"$GEN" --events 20000 --seed 11 --lost 300 --batch 200 \
		--expect "$T/expect.jsonl" -o "$T/run.raw"
	run mt-encode "$T/run.raw"
	assert_success
	mt-encode -o "$T/run.msgpack" "$T/run.raw"
	run "$PY" "$CHECK" check "$T/run.raw" "$T/run.msgpack" \
		--expect "$T/expect.jsonl"
	assert_success
	assert_output ""
}

@test "mt-encode --jsonl: the same maps as JSON lines" {
	"$GEN" --events 5000 --seed 12 --lost 10 -o "$T/run.raw"
	mt-encode --jsonl < "$T/run.raw" > "$T/run.jsonl"
	run "$PY" "$CHECK" check "$T/run.raw" "$T/run.jsonl" --jsonl
	assert_success
	# every line is one JSON object
	[ "$(wc -l < "$T/run.jsonl")" -eq "$("$PY" -c '
import json, sys
print(sum(1 for l in open(sys.argv[1]) if isinstance(json.loads(l), dict)))' "$T/run.jsonl")" ]
}

@test "mt-encode: a raw stream written by hand with struct.pack" {
	"$PY" "$CHECK" write "$T/hand.raw"
	mt-encode "$T/hand.raw" > "$T/hand.msgpack"
	run "$PY" "$CHECK" check "$T/hand.raw" "$T/hand.msgpack"
	assert_success
	# and the values spelled out, not only derived
	run "$PY" -c '
import msgpack, sys
from mtzstd import open_plain
m = list(msgpack.Unpacker(open_plain(sys.argv[1]), raw=False))
print(m[0]["command"], m[0]["host"], m[0]["start_time"])
print(m[1])
print(m[2]["path"])
print(m[6]["name"])
print(m[7], m[9], m[10])
print(m[8])
print(m[-1])
e = m[-2]
print(e["type"], e["pid"], e["path"], e["argv"][:3],
      e["argv"][3] == b"\xff" + b"x" * 60, len(e["argv"]), e["argv_bytes"])' "$T/hand.msgpack"
	assert_success
	assert_line --index 0 "['/bin/prog', 'arg 1'] hand 1700000000123456789"
	assert_line --index 1 "{'type': 'Malloc', 'pid': 10, 'tid': 11, 'timestamp': 100, 'addr': 4096, 'size': 24}"
	assert_line --index 2 "/usr/lib/very/long/path/that/spans/two/slots/of/56/bytes/x"
	assert_line --index 3 "b'/tmp/\\xff\\xfe'"
	assert_line --index 4 "{'type': 'Exit', 'pid': 10, 'tid': 11, 'timestamp': 106, 'exit_code': 3} {'type': 'Lost', 'pid': 0, 'tid': 0, 'timestamp': 107, 'count': 4} {'type': 'Lost', 'pid': 0, 'tid': 0, 'timestamp': 200, 'count': 2}"
	assert_line --index 5 "{'type': 'Allocator', 'pid': 10, 'tid': 11, 'timestamp': 107, 'kind': 'jemalloc', 'path': '/usr/lib/very/long/path/that/spans/two/slots/of/56/bytes/x'}"
	assert_line --index 6 "{'type': 'Trailer', 'complete': True, 'signal': 15, 'end_monotonic': 300, 'events': 13, 'lost_events': 6, 'batches': 3}"
	# an Exec's arguments (not UTF-8: bin), cut: argv_bytes
	assert_line --index 7 "Exec 12 /bin/prog ['prog', 'a b', ''] True 4 9000"
}

@test "mt-encode: the reader yields the same records from raw, msgpack and jsonl" {
	"$GEN" --events 3000 --seed 13 --lost 50 --batch 100 \
		--expect "$T/expect.jsonl" -o "$T/run.raw"
	mt-encode "$T/run.raw" > "$T/run.msgpack"
	mt-encode --jsonl "$T/run.raw" > "$T/run.jsonl"
	for f in run.raw run.msgpack run.jsonl; do
		"$READ" --dump "$T/$f" > "$T/$f.dump"
		diff -u "$T/expect.jsonl" "$T/$f.dump"
	done
}

# The raw reader takes most records without a call (raw_plain_next): its
# window must end at batch ends, refills of a pipe's 256 KiB buffer (56-byte
# records straddle them), a mapped file's 4 MiB steps, and padded records.
@test "raw reader: records taken fast are mt-gen's, from a file, a pipe, padded" {
	"$GEN" --events 150000 --seed 21 --lost 40 --batch 997 \
		--expect "$T/expect.jsonl" -o "$T/run.raw"
	"$GEN" --events 150000 --seed 21 --lost 40 --batch 997 \
		--event-size 72 -o "$T/padded.raw"
	[ "$(stat -c %s "$T/run.raw")" -gt $((8 << 20)) ]
	"$READ" --dump "$T/run.raw" > "$T/file.dump"
	diff -q "$T/expect.jsonl" "$T/file.dump"
	cat "$T/run.raw" | "$READ" --dump > "$T/pipe.dump"
	diff -q "$T/expect.jsonl" "$T/pipe.dump"
	"$READ" --dump "$T/padded.raw" > "$T/padded.dump"
	diff -q "$T/expect.jsonl" "$T/padded.dump"
}

# mt-encode writes most event maps through a MessagePack-only path (their
# first entries copied from the last map of the kind and thread); JSON
# Lines take the general one.  Both must give the same maps, keys in the
# same order, on traces that have every kind: mt-gen's (processes and
# threads interleaved), rawcheck's hand-made one (strings, exit statuses,
# lost batches) and a real one with call stacks (Stack, CodeFile, CodeMap,
# stack references).
@test "mt-encode: MessagePack's fast maps are the general path's, every kind" {
	"$GEN" --events 20000 --seed 22 --lost 30 --batch 300 -o "$T/gen.raw"
	"$PY" "$CHECK" write "$T/hand.raw"
	cp "$TOP/tests/data/stacks-dlopen.raw" "$T/stacks.raw"
	for t in gen hand stacks; do
		mt-encode -u -o "$T/$t.msgpack" "$T/$t.raw"
		mt-encode --jsonl -o "$T/$t.jsonl" "$T/$t.raw"
	done
	run "$PY" - "$T" <<'EOF'
import json, msgpack, sys
kinds = set()
for t in ("gen", "hand", "stacks"):
    base = sys.argv[1] + "/" + t
    packed = list(msgpack.Unpacker(open(base + ".msgpack", "rb"), raw=False))
    lines = [json.loads(l) for l in open(base + ".jsonl")]
    assert len(packed) == len(lines) > 2, (t, len(packed), len(lines))
    for i, (m, j) in enumerate(zip(packed, lines)):
        # JSON holds text only: a path that is not UTF-8 (bin in
        # MessagePack) has its bad bytes as U+FFFD there
        # (an Exec's argv too)
        fix = lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else v
        m = {k: [fix(x) for x in v] if k == "argv" else fix(v)
             for k, v in m.items()}
        if list(m.items()) != list(j.items()):
            sys.exit(f"{t} map {i}: {m} != {j}")
        kinds.add(m["type"])
print(" ".join(sorted(kinds - {"Header", "Trailer"})))
EOF
	assert_success
	assert_output "AlignedAlloc Allocator Brk Calloc CodeFile CodeMap Exec Exit Fork Free Lost Malloc Marker Mmap Mremap Munmap Pss Realloc Rss Stack"
}

@test "mt-encode: truncated input -> exit 2, offset, trailer complete false" {
	"$GEN" --events 2000 --seed 14 --batch 100 -o "$T/run.raw"
	size=$(stat -c %s "$T/run.raw")
	for cut in 70 100 20000 $((size / 2)) $((size - 48)) $((size - 1)); do
		head -c "$cut" "$T/run.raw" > "$T/cut.raw"
		run --separate-stderr mt-encode "$T/cut.raw" -o "$T/cut.msgpack"
		assert_failure 2
		[[ "$stderr" =~ ^mt-encode:\ $T/cut.raw:\ byte\ [0-9]+:\ .*truncated ]] ||
			{ echo "cut $cut: $stderr"; false; }
		if [ "$cut" -lt 104 ]; then # inside the 104-byte header
			assert_file_not_exists "$T/cut.msgpack"
			continue
		fi
		"$PY" "$CHECK" check-partial "$T/cut.raw" "$T/cut.msgpack" \
			"truncated"
	done
}

@test "mt-encode: the exact message for a cut batch body" {
	"$GEN" --events 100 --seed 15 --batch 100 -o "$T/run.raw"
	# where the first batch's body starts and how long it is, read with
	# python's struct from the layout in mt-format(5)
	read -r body bytes < <("$PY" -c '
import struct, sys
d = open(sys.argv[1], "rb").read()
hsize = struct.unpack_from("<I", d, 12)[0]
print(hsize + 32, struct.unpack_from("<I", d, hsize + 8)[0])' "$T/run.raw")
	head -c $((body + 1000)) "$T/run.raw" > "$T/cut.raw"
	run --separate-stderr mt-encode "$T/cut.raw" -o "$T/cut.msgpack"
	assert_failure 2
	msg="byte $body: batch 0: body truncated: expected $bytes bytes, got 1000"
	[ "$stderr" = "mt-encode: $T/cut.raw: $msg" ]
	"$PY" "$CHECK" check-partial "$T/cut.raw" "$T/cut.msgpack" "$msg"
	run "$PY" -c '
import msgpack, sys
from mtzstd import open_plain
print(list(msgpack.Unpacker(open_plain(sys.argv[1]), raw=False))[-1]["error"])' "$T/cut.msgpack"
	assert_output "$msg"
}

@test "mt-encode: no trailer (mt-gen --truncate) is never complete" {
	"$GEN" --events 1000 --seed 16 --batch 100 --truncate -o "$T/run.raw"
	run --separate-stderr mt-encode --jsonl "$T/run.raw" -o "$T/run.jsonl"
	assert_failure 2
	[[ "$stderr" == *": truncated: no trailer after batch "* ]]
	"$PY" "$CHECK" check-partial "$T/run.raw" "$T/run.jsonl" \
		"no trailer after batch" --jsonl
}

@test "mt-encode: corrupt batch magic -> exit 2 naming the offset" {
	"$GEN" --events 300 --seed 17 --batch 100 -o "$T/run.raw"
	# overwrite the second batch header's magic (found with struct)
	second=$("$PY" -c '
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
off = struct.unpack_from("<I", d, 12)[0]
off += 32 + struct.unpack_from("<I", d, off + 8)[0]
d[off:off + 4] = b"XXXX"
open(sys.argv[2], "wb").write(d)
print(off)' "$T/run.raw" "$T/bad.raw")
	run --separate-stderr mt-encode "$T/bad.raw" -o "$T/bad.msgpack"
	assert_failure 2
	[ "$stderr" = "mt-encode: $T/bad.raw: byte $second: batch header: bad magic 0x58585858" ]
	"$PY" "$CHECK" check-partial "$T/bad.raw" "$T/bad.msgpack" \
		"byte $second: batch header: bad magic"
}

# Packed batches (mt-format(5), "Packed batches"): what mt-trace writes.
@test "packed batches (mt-gen --packed): mt-gen's records, a fraction of the bytes, the same artifact as fixed" {
	"$GEN" --events 30000 --seed 31 --lost 40 --batch 997 \
		--expect "$T/expect.jsonl" -o "$T/fixed.raw"
	"$GEN" --events 30000 --seed 31 --lost 40 --batch 997 --packed \
		-o "$T/packed.raw"
	fixed=$(stat -c %s "$T/fixed.raw")
	packed=$(stat -c %s "$T/packed.raw")
	echo "fixed $fixed packed $packed"
	[ $((packed * 3)) -lt "$fixed" ]
	"$READ" --dump "$T/packed.raw" > "$T/file.dump"
	diff -q "$T/expect.jsonl" "$T/file.dump"
	cat "$T/packed.raw" | "$READ" --dump > "$T/pipe.dump"
	diff -q "$T/expect.jsonl" "$T/pipe.dump"
	mt-encode -u -o "$T/fixed.msgpack" "$T/fixed.raw"
	mt-encode -u -o "$T/packed.msgpack" "$T/packed.raw"
	cmp "$T/fixed.msgpack" "$T/packed.msgpack"
	run "$PY" "$CHECK" check "$T/packed.raw" "$T/packed.msgpack" \
		--expect "$T/expect.jsonl"
	assert_success
	assert_output ""
}

@test "packed batches: python's packer (rawcheck.py) and lib's reader agree, and the other way round" {
	"$PY" "$CHECK" write "$T/hand.raw"
	"$PY" "$CHECK" write "$T/handp.raw" --packed
	[ "$(stat -c %s "$T/handp.raw")" -lt "$(stat -c %s "$T/hand.raw")" ]
	mt-encode -u -o "$T/hand.msgpack" "$T/hand.raw"
	mt-encode -u -o "$T/handp.msgpack" "$T/handp.raw"
	cmp "$T/hand.msgpack" "$T/handp.msgpack"
	"$GEN" --events 5000 --seed 32 --lost 9 --batch 200 --packed \
		-o "$T/gen.raw"
	mt-encode -o "$T/gen.msgpack" "$T/gen.raw"
	run "$PY" "$CHECK" check "$T/gen.raw" "$T/gen.msgpack"
	assert_success
	assert_output ""
}

@test "packed batches cut short: exit 2, the offset, only whole batches' records" {
	"$GEN" --events 2000 --seed 33 --batch 100 --packed -o "$T/run.raw"
	size=$(stat -c %s "$T/run.raw")
	read -r body bytes < <("$PY" -c '
import struct, sys
d = open(sys.argv[1], "rb").read()
hsize = struct.unpack_from("<I", d, 12)[0]
print(hsize + 32, struct.unpack_from("<I", d, hsize + 8)[0])' "$T/run.raw")
	for cut in $((body - 10)) $((body + 1)) $((body + bytes - 1)) \
		$((size / 2)) $((size - 49)) $((size - 1)); do
		head -c "$cut" "$T/run.raw" > "$T/cut.raw"
		run --separate-stderr mt-encode "$T/cut.raw" -o "$T/cut.msgpack"
		assert_failure 2
		[[ "$stderr" =~ ^mt-encode:\ $T/cut.raw:\ byte\ [0-9]+:\ .*truncated ]] ||
			{ echo "cut $cut: $stderr"; false; }
		"$PY" "$CHECK" check-partial "$T/cut.raw" "$T/cut.msgpack" \
			"truncated"
	done
	head -c $((body + 5)) "$T/run.raw" > "$T/cut.raw"
	run --separate-stderr mt-encode "$T/cut.raw" -o "$T/cut.msgpack"
	[ "$stderr" = "mt-encode: $T/cut.raw: byte $body: batch 0: packed body truncated: expected $bytes bytes, got 5" ]
}

@test "packed batches: a changed byte is the batch's CRC error, never other records" {
	"$GEN" --events 3000 --seed 34 --batch 100 --packed -o "$T/run.raw"
	# flip a bit in the middle of the third batch's body (found with
	# struct); every batch before it is whole
	read -r third <<<"$("$PY" -c '
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
off = struct.unpack_from("<I", d, 12)[0]
for _ in range(2):
    off += 32 + struct.unpack_from("<I", d, off + 8)[0]
d[off + 32 + struct.unpack_from("<I", d, off + 8)[0] // 2] ^= 4
open(sys.argv[2], "wb").write(d)
print(off)' "$T/run.raw" "$T/bad.raw")"
	run --separate-stderr mt-encode "$T/bad.raw" -o "$T/bad.msgpack"
	assert_failure 2
	[[ "$stderr" == "mt-encode: $T/bad.raw: byte $third: batch 2: packed batch corrupt: expected CRC-32 0x"*", its bytes give 0x"* ]] ||
		{ echo "$stderr"; false; }
	"$PY" "$CHECK" check-partial "$T/bad.raw" "$T/bad.msgpack" \
		"byte $third: batch 2: packed batch corrupt"
}

# mt-trace writes packed batches: a test that fails if it wrote 56-byte
# records again, and python's reader (none of lib/) agreeing with mt-encode
# on real traces, --fast's and the BPF side's.
@test "mt-trace writes packed batches: --fast allocheavy under 14 bytes an event; python's reader agrees with mt-encode" {
	require_bpf
	# (--no-stacks: stacks, MT_STACKS=1 under make test-stacks, add
	# their records; the bound is for the default's)
	mt-trace --fast --no-stacks -o "$T/ah.raw" -- \
		"$MT_FIXTURES/allocheavy" 200000 >/dev/null
	run "$READ" "$T/ah.raw"
	assert_success
	events=$(sed -n 's/^format raw, \([0-9]*\) records.*/\1/p' <<<"$output")
	size=$(stat -c %s "$T/ah.raw")
	echo "$events events in $size bytes"
	[ "$events" -ge 400256 ]
	[ "$size" -lt $((events * 14)) ]
	run "$PY" -c '
import struct, sys
d = open(sys.argv[1], "rb").read()
off, kinds = struct.unpack_from("<I", d, 12)[0], set()
while struct.unpack_from("<I", d, off)[0] != 0x3145544D:
    kinds.add(d[off:off + 4])
    off += 32 + struct.unpack_from("<I", d, off + 8)[0]
print(struct.unpack_from("<I", d, 8)[0], sorted(kinds))' "$T/ah.raw"
	assert_output "2 [b'MTB2']"
	mt-encode -u -o "$T/ah.msgpack" "$T/ah.raw"
	run "$PY" "$CHECK" check "$T/ah.raw" "$T/ah.msgpack"
	assert_success
	mt-trace --no-stacks -o "$T/ls.raw" -- ls -la /usr/lib >/dev/null
	mt-encode -o "$T/ls.msgpack" "$T/ls.raw"
	run "$PY" "$CHECK" check "$T/ls.raw" "$T/ls.msgpack"
	assert_success
}

@test "mt-encode: input that is not a raw stream -> exit 2" {
	"$GEN" --events 10 -o "$T/run.raw"
	mt-encode "$T/run.raw" > "$T/run.msgpack"
	run mt-encode "$T/run.msgpack"
	assert_failure 2
	assert_output "mt-encode: $T/run.msgpack: not a raw stream but artifact (mt-encode reads what mt-trace writes)"
	run mt-encode /nonexistent
	assert_failure 2
	assert_output "mt-encode: /nonexistent: No such file or directory"
	run mt-encode < /dev/null
	assert_failure 2
	assert_output "mt-encode: <stdin>: byte 0: empty input"
}

@test "mt-encode: output errors exit 2 (ENOSPC, EPIPE)" {
	"$GEN" --events 200000 --seed 18 -o "$T/run.raw"
	run mt-encode "$T/run.raw" -o /dev/full
	assert_failure 2
	assert_output "mt-encode: /dev/full: No space left on device"
	# a reader gone: exit 2 without a message, as every stage
	run bash -c 'mt-encode "$1" | head -c 10 > /dev/null; echo "${PIPESTATUS[0]}"' _ "$T/run.raw"
	assert_output "2"
}

@test "mt-encode: options" {
	run mt-encode --help
	assert_success
	assert_line --index 0 --partial "usage: mt-encode"
	run mt-encode -h
	assert_success
	run mt-encode --bogus
	assert_failure 2
	run mt-encode a b
	assert_failure 2
}

@test "mt-encode: constant memory (2M events in a few MiB)" {
	skip_asan_rss_without_zero_page "$MT_BIN/mt-encode"
	"$GEN" --events 2000000 --seed 19 -o "$T/big.raw"
	/usr/bin/time -f "%M" -o "$T/rss" mt-encode "$T/big.raw" > /dev/null
	rss_kib=$(cat "$T/rss")
	echo "max RSS ${rss_kib} KiB"
	if grep -q __asan_init "$MT_BIN/mt-encode"; then
		# under ASan (make check-asan) its shadow and each thread's
		# caches are most of the RSS (17 MiB for 200,000 events already):
		# what must hold is that 10 times the events cost no more.  Its
		# quarantine keeps freed blocks too, the compressing threads' 1
		# MiB frames among them (21.9 -> 35.3 MiB): not for this test
		export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
		/usr/bin/time -f "%M" -o "$T/rss" mt-encode "$T/big.raw" >/dev/null
		rss_kib=$(cat "$T/rss")
		echo "2,000,000 events, no quarantine: max RSS ${rss_kib} KiB"
		"$GEN" --events 200000 --seed 19 -o "$T/small.raw"
		/usr/bin/time -f "%M" -o "$T/rss" mt-encode "$T/small.raw" > /dev/null
		echo "200,000 events: max RSS $(cat "$T/rss") KiB"
		[ "$rss_kib" -lt $(($(cat "$T/rss") + 4096)) ]
	else
		[ "$rss_kib" -lt 16384 ]
	fi
}

@test "mt-encode: reading a pipe, SIGINT (Ctrl-C) does not cut the artifact" {
	"$PY" "$CHECK" write "$T/hand.raw"
	# the writer sends half, waits until mt-encode has had its SIGINT,
	# then the rest: the artifact must be whole, as after a Ctrl-C that
	# mt-trace survives to finish its trace
	size=$(stat -c %s "$T/hand.raw")
	mkfifo "$T/fifo"
	{
		head -c $((size / 2)) "$T/hand.raw"
		wait_for 60 test -e "$T/interrupted"
		tail -c +$((size / 2 + 1)) "$T/hand.raw"
	} > "$T/fifo" &
	# as from a terminal: SIGINT at its default (bash ignores it in
	# background jobs of a script)
	"$PY" -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execvp(sys.argv[1], sys.argv[1:])' mt-encode < "$T/fifo" > "$T/hand.msgpack" &
	pid=$!
	# wait until mt-encode runs and has set SIGINT aside (bit 2 of SigIgn);
	# up to 30 s: under ASan on a loaded machine 5 s was once too short
	# comm first: the python wrapper ignores SIGINT too until it execs
	# (bash's background jobs start with it ignored), so SigIgn read before
	# the exec and comm read after it would pass too early
	for _ in $(seq 600); do
		if [ "$(cat "/proc/$pid/comm")" = mt-encode ]; then
			ign=$(awk '/^SigIgn:/ { print $2 }' "/proc/$pid/status")
			(( 0x$ign & 2 )) && break
		fi
		sleep 0.05
	done
	kill -INT "$pid"
	: >"$T/interrupted"
	wait "$pid" # fails the test unless it exits 0
	"$PY" "$CHECK" check "$T/hand.raw" "$T/hand.msgpack"
}

# ---- compression (issue 13) -------------------------------------------

# the number of zstd frames, as the zstd CLI counts them
zstd_frames() {
	zstd -l "$1" | awk 'NR == 2 { print $1 }'
}

@test "mt-encode --zstd: independent frames; zstd -dc gives exactly the --uncompressed bytes" {
	"$GEN" --events 20000 --seed 21 --lost 30 --batch 200 -o "$T/run.raw"
	mt-encode --zstd --frame-size 64KiB -o "$T/run.zst" "$T/run.raw"
	mt-encode --uncompressed -o "$T/run.msgpack" "$T/run.raw"
	head -c 4 "$T/run.zst" | od -An -tx1 | grep -q '28 b5 2f fd'
	zstd -t -q "$T/run.zst"
	frames=$(zstd_frames "$T/run.zst")
	echo "frames: $frames"
	# 20000 events of ~67 bytes in frames of 64 KiB: about 20
	[ "$frames" -ge 15 ]
	[ "$frames" -le 30 ]
	zstd -dc "$T/run.zst" | cmp - "$T/run.msgpack"
	# and python3-msgpack reads what the zstd CLI gives back, map for map
	run "$PY" "$CHECK" check "$T/run.raw" "$T/run.zst"
	assert_success
	# smaller than the plain artifact by far
	[ "$(stat -c %s "$T/run.zst")" -lt $(($(stat -c %s "$T/run.msgpack") / 3)) ]
}

@test "mt-encode --zstd: every frame holds whole maps (each decodes alone)" {
	"$GEN" --events 5000 --seed 22 -o "$T/run.raw"
	mt-encode --zstd --frame-size 16KiB -o "$T/run.zst" "$T/run.raw"
	# split the file at the frames' ends, found by walking the frame and
	# block headers with their layout in RFC 8878, and decode each frame
	# on its own with the zstd CLI
	run "$PY" -c '
import io, subprocess, sys, msgpack
d = open(sys.argv[1], "rb").read()
def frame_end(off):
    assert d[off:off + 4] == b"\x28\xb5\x2f\xfd", off
    fhd = d[off + 4]
    single, checksum = fhd >> 5 & 1, fhd >> 2 & 1
    fcs = [single, 2, 4, 8][fhd >> 6]
    p = off + 5 + (0 if single else 1) + [0, 1, 2, 4][fhd & 3] + fcs
    while True:
        h = int.from_bytes(d[p:p + 3], "little")
        last, btype, size = h & 1, h >> 1 & 3, h >> 3
        p += 3 + (1 if btype == 1 else size)
        if last:
            return p + 4 * checksum
off = n = maps = 0
while off < len(d):
    end = frame_end(off)
    plain = subprocess.run(["zstd", "-dc"], input=d[off:end],
                           stdout=subprocess.PIPE, check=True).stdout
    maps += sum(1 for _ in msgpack.Unpacker(io.BytesIO(plain), raw=False))
    off, n = end, n + 1
print(n > 5, maps)' "$T/run.zst"
	assert_success
	assert_output "True 5002"
}

@test "mt-encode --jsonl is text unless --zstd; --zstd --jsonl is zstd -dc of it" {
	"$GEN" --events 3000 --seed 23 -o "$T/run.raw"
	mt-encode --jsonl -o "$T/run.jsonl" "$T/run.raw"
	[ "$(head -c 1 "$T/run.jsonl")" = "{" ]
	mt-encode --jsonl --zstd -o "$T/run.jsonl.zst" "$T/run.raw"
	zstd -dc "$T/run.jsonl.zst" | cmp - "$T/run.jsonl"
}

# heavy_raw FILE N SPREAD: what a malloc+free loop records, N events: the
# addresses of SPREAD bytes apart at most (0: the same two), sizes of
# 1000-2000 bytes when spread, tids the same, timestamps ~1.4 us apart with
# jitter (mt-gen's are random); hand-made with python's struct in the raw
# layout of mt-format(5)
heavy_raw() {
	"$PY" - "$@" <<'PYEOF'
import random, struct, sys
random.seed(7)
n, spread = int(sys.argv[2]), int(sys.argv[3])
argv = [b"/tmp/allocheavy", b"%d" % (n // 2)]
strings = b"host\0" + b"\0".join(argv) + b"\0"
hsize = (64 + len(strings) + 7) // 8 * 8
out = bytearray(struct.pack("<8sIIIIIIIIQQII", b"\x89MTRAW\r\n", 1, hsize,
                56, 4096, 1, 4242, 1, len(argv), 10**9, 1700000000 * 10**9,
                len(strings), 0))
out += strings + b"\0" * (hsize - 64 - len(strings))
t, recs = 10**9, []
for i in range(n):
    t += 1300 + random.randrange(200)
    kind = 1 if i % 2 == 0 else 2
    addr = 0x55555555a2a0 + random.randrange(spread // 16 + 1) * 16
    size = 1000 + random.randrange(1000) if spread else 32
    recs.append(struct.pack("<QIIHHIQQQQ", t, 4242, 4242, kind, 0, 0,
                            addr, size if kind == 1 else 0, 0, 0))
for b in range(0, n, 1000):
    chunk = recs[b:b + 1000]
    out += struct.pack("<IIIIQQ", 0x3142544d, len(chunk), 56 * len(chunk),
                       0, b // 1000, 0) + b"".join(chunk)
out += struct.pack("<IIiIQQQQ", 0x3145544d, 1, 0, 0, t + 1, n, 0, n // 1000)
open(sys.argv[1], "wb").write(out)
PYEOF
}

@test "mt-encode: the allocation-heavy shape compresses to <= 8 bytes an event" {
	heavy_raw "$T/heavy.raw" 200000 0
	mt-encode --zstd -o "$T/heavy.zst" "$T/heavy.raw"
	size=$(stat -c %s "$T/heavy.zst")
	echo "$size bytes for 200000 events" >&3
	[ "$size" -le $((8 * 200000)) ]
}

# Without --level each frame is level 1's or zstd's quick search's,
# whichever the last probe made smaller (mt-encode(1), --level): on an
# allocation-heavy trace the quick one, on mt-gen's level 1.
@test "mt-encode: frames quicker than level 1 where they are smaller, the same bytes on one CPU and two" {
	heavy_raw "$T/heavy.raw" 200000 1048576
	mt-encode -u -o "$T/heavy.msgpack" "$T/heavy.raw"
	mt-encode --level 1 --frame-size 64KiB -o "$T/level1.zst" "$T/heavy.raw"
	for cpus in 0 0,1; do
		taskset -c "$cpus" mt-encode --frame-size 64KiB \
			-o "$T/heavy.$cpus.zst" "$T/heavy.raw"
		zstd -dc "$T/heavy.$cpus.zst" | cmp - "$T/heavy.msgpack"
	done
	cmp "$T/heavy.0.zst" "$T/heavy.0,1.zst"
	level1=$(stat -c %s "$T/level1.zst")
	chosen=$(stat -c %s "$T/heavy.0.zst")
	echo "level 1: $level1 bytes, chosen: $chosen" >&3
	# the quick frames are ~5% smaller here
	[ "$chosen" -lt $((level1 * 97 / 100)) ]
	# mt-gen's random values: level 1 wins every probe, its very bytes
	"$GEN" --events 100000 --seed 25 -o "$T/gen.raw"
	mt-encode --frame-size 64KiB -o "$T/gen.zst" "$T/gen.raw"
	mt-encode --level 1 --frame-size 64KiB -o "$T/gen1.zst" "$T/gen.raw"
	cmp "$T/gen.zst" "$T/gen1.zst"
}

@test "mt-encode: --level, --frame-size and --threads give the same bytes back" {
	"$GEN" --events 30000 --seed 24 -o "$T/run.raw"
	mt-encode -u -o "$T/run.msgpack" "$T/run.raw"
	for opts in "--level 1" "--level 9 --frame-size 4KiB" "--threads 2 --frame-size 1MiB"; do
		# shellcheck disable=SC2086
		mt-encode --zstd $opts -o "$T/run.zst" "$T/run.raw"
		zstd -dc "$T/run.zst" | cmp - "$T/run.msgpack"
	done
	run mt-encode --level 0 "$T/run.raw"
	assert_failure 2
	assert_line --index 0 "mt-encode: --level: expected 1 to 19, got '0'"
	run mt-encode --frame-size 1x "$T/run.raw"
	assert_failure 2
	assert_line --index 0 "mt-encode: --frame-size: expected 4KiB to 256MiB, got '1x'"
}

# ---- a new user's first hour (issue 14) ---------------------------------

@test "mt-encode --version: the one version of mt" {
	run mt-encode --version
	assert_success
	assert_line --index 0 --regexp '^mt-encode \(mt\) [0-9]+\.[0-9]+\.[0-9]+'
	run mt-encode -V
	assert_success
}

@test "mt-encode --help: every option, each one in the man page" {
	run mt-encode --help
	assert_success
	opts=$(grep -o -- '--[a-z][a-z-]*' <<<"$output" | sort -u)
	for o in --output --uncompressed --zstd --jsonl --codspeed --level \
		--frame-size --threads --version --help; do
		grep -qx -- "$o" <<<"$opts" || { echo "not in --help: $o"; false; }
	done
	for o in $opts; do
		grep -q -- "${o//-/\\\\-}" "$TOP/man/mt-encode.1" ||
			{ echo "not in mt-encode.1: $o"; false; }
	done
	run mt-encode a b
	assert_failure 2
	assert_line --index 0 "mt-encode: one input at most, got a second: 'b'"
}

@test "mt-encode: a binary artifact is never written to a terminal" {
	"$GEN" --events 100 --seed 25 -o "$T/run.raw"
	# script(1) gives the command a terminal as stdout
	run script -qec "mt-encode --zstd '$T/run.raw'" /dev/null
	assert_failure 2
	assert_output --partial "mt-encode: not writing a binary artifact to a terminal: give -o FILE or redirect stdout"
	run script -qec "mt-encode -u '$T/run.raw'" /dev/null
	assert_failure 2
	# -o, or text, is fine
	run script -qec "mt-encode --zstd -o '$T/run.zst' '$T/run.raw'" /dev/null
	assert_success
	zstd -t -q "$T/run.zst"
	run script -qec "mt-encode --jsonl '$T/run.raw' | head -c 2" /dev/null
	assert_success
}

@test "mt-encode: reading stdin from a terminal says what it waits for" {
	# stdin a terminal that closes at once: the message, then empty input
	run script -qec "mt-encode -o '$T/out' < /dev/tty" /dev/null < /dev/null
	assert_output --partial "mt-encode: reading mt-trace's raw stream from the terminal (stdin)"
}

@test "mt-encode: a progress line on a terminal for runs over a second" {
	"$GEN" --events 200000 --seed 26 -o "$T/run.raw"
	size=$(stat -c %s "$T/run.raw")
	mkfifo "$T/fifo"
	# half, a pause of 1.5 s, the rest: the run lasts over a second
	{
		head -c $((size / 2)) "$T/run.raw"
		sleep 1.5
		tail -c +$((size / 2 + 1)) "$T/run.raw"
	} > "$T/fifo" &
	run script -qec "mt-encode --zstd -o '$T/out.zst' '$T/fifo'" /dev/null
	assert_success
	assert_output --regexp 'mt-encode: 1[0-9][0-9],[0-9]{3} events, [0-9.]+ [KM]iB read, [0-9]+\.[0-9] s'
	# not on a file or pipe
	run --separate-stderr mt-encode --zstd -o "$T/out.zst" "$T/run.raw"
	assert_success
	[ -z "$stderr" ]
}

# ---- every stage reads zstd-compressed input (issue 13) ----------------

@test "compressed input of every format reads as the plain one (raw, artifact, JSON Lines)" {
	"$GEN" --events 20000 --seed 41 --lost 20 --batch 300 \
		--expect "$T/expect.jsonl" -o "$T/run.raw"
	mt-encode -u -o "$T/run.msgpack" "$T/run.raw"
	mt-encode --jsonl -o "$T/run.jsonl" "$T/run.raw"
	# compressed by the zstd CLI (one frame, no content size when piped)
	# and by mt-encode (many frames)
	zstd -q -c "$T/run.raw" > "$T/raw.zst"
	zstd -q -c < "$T/run.msgpack" > "$T/msgpack.zst"
	zstd -q -c < "$T/run.jsonl" > "$T/jsonl.zst"
	mt-encode --frame-size 8KiB -o "$T/frames.zst" "$T/run.raw"
	for f in raw.zst msgpack.zst jsonl.zst frames.zst; do
		"$READ" --dump "$T/$f" > "$T/$f.dump"
		diff -u "$T/expect.jsonl" "$T/$f.dump"
	done
	# mt-encode reads the compressed raw stream: the same artifact
	mt-encode -u "$T/raw.zst" | cmp - "$T/run.msgpack"
	# mt-reconstruct and mt-report: the same timelines and report
	mt-reconstruct "$T/run.msgpack" > "$T/plain.json"
	for f in msgpack.zst jsonl.zst frames.zst raw.zst; do
		mt-reconstruct "$T/$f" > "$T/$f.json"
		# the input section names the file and its format; the rest is equal
		diff <(jq 'del(.input)' "$T/plain.json") <(jq 'del(.input)' "$T/$f.json")
		mt-report "$T/$f" | diff - <(mt-report "$T/run.msgpack")
	done
	# and from a pipe
	mt-reconstruct < "$T/frames.zst" | jq 'del(.input)' | diff - <(jq 'del(.input)' "$T/plain.json")
}

@test "compressed input decoded ahead: maps across its blocks, over 64 KiB too, read as the plain one" {
	# one zstd frame without a content size (piped): the decoding thread
	# cuts the 20 MB into 1 MiB blocks anywhere, and the reader takes each
	# block as its buffer with what it kept of the last one in front; two
	# Exec paths of 100 and 300 KiB (more than that room) straddle too
	"$GEN" --events 300000 --seed 49 -o "$T/run.raw"
	mt-encode -u -o "$T/run.msgpack" "$T/run.raw"
	"$PY" - "$T/run.msgpack" "$T/long.msgpack" <<-'EOF'
		import msgpack, sys
		objs = list(msgpack.Unpacker(open(sys.argv[1], "rb"), raw=False))
		for at, n in ((15000, 100 * 1024), (160000, 300 * 1024)):
		    ev = objs[at]
		    objs.insert(at, {"type": "Exec", "pid": ev["pid"],
		                     "tid": ev["tid"], "timestamp": ev["timestamp"],
		                     "path": "/" + "p" * n})
		objs[-1]["events"] += 2  # the Trailer counts them
		with open(sys.argv[2], "wb") as f:
		    for o in objs:
		        f.write(msgpack.packb(o))
	EOF
	zstd -q -c < "$T/long.msgpack" > "$T/long.zst"
	"$READ" --dump "$T/long.msgpack" > "$T/plain.dump"
	[ "$(wc -l < "$T/plain.dump")" = 300002 ]
	# the records, and the paths in the timelines (mt-read does not dump
	# strings)
	mt-reconstruct "$T/long.msgpack" | jq -c 'del(.input)' > "$T/plain.json"
	[ "$(grep -o '/ppppp*' "$T/plain.json" | awk '{ print length }' |
		sort -u | tr '\n' ' ')" = "102401 307201 " ]
	for cpus in 0,1 0; do
		taskset -c "$cpus" "$READ" --dump "$T/long.zst" > "$T/zst.dump"
		cmp "$T/plain.dump" "$T/zst.dump"
		taskset -c "$cpus" mt-reconstruct "$T/long.zst" |
			jq -c 'del(.input)' | cmp - "$T/plain.json"
	done
}

@test "compressed input: skippable frames are skipped, empty frames are nothing" {
	"$GEN" --events 3000 --seed 42 -o "$T/run.raw"
	mt-encode -u -o "$T/run.msgpack" "$T/run.raw"
	mt-encode --frame-size 16KiB -o "$T/run.zst" "$T/run.raw"
	# a skippable frame (RFC 8878: magic 0x184D2A5X, 32-bit length) first,
	# an empty frame (zstd of nothing) and another skippable one inside
	printf '\x50\x2a\x4d\x18\x03\x00\x00\x00abc' > "$T/skip"
	zstd -q -c < /dev/null > "$T/empty.zst"
	cat "$T/skip" "$T/run.zst" "$T/empty.zst" "$T/skip" "$T/empty.zst" > "$T/odd.zst"
	zstd -dc "$T/odd.zst" | cmp - "$T/run.msgpack"
	"$READ" --dump "$T/odd.zst" > "$T/odd.dump"
	"$READ" --dump "$T/run.msgpack" > "$T/plain.dump"
	cmp "$T/odd.dump" "$T/plain.dump"
	# nothing but empty and skippable frames: empty input, exit 2
	cat "$T/skip" "$T/empty.zst" > "$T/nothing.zst"
	run mt-encode -o "$T/x" "$T/nothing.zst"
	assert_failure 2
	assert_output "mt-encode: $T/nothing.zst: byte 0 of the decompressed stream ($(stat -c %s "$T/nothing.zst") compressed bytes read): empty input"
}

@test "compressed input cut short: exit 2, the compressed offset, never complete" {
	"$GEN" --events 5000 --seed 43 --batch 100 -o "$T/run.raw"
	# the raw stream in independent frames of 20000 bytes, by the zstd CLI
	"$PY" - "$T/run.raw" "$T/raw.zst" <<'PYEOF'
import subprocess, sys
d = open(sys.argv[1], "rb").read()
out = b""
for i in range(0, len(d), 20000):
    out += subprocess.run(["zstd", "-q", "-c"], input=d[i:i + 20000],
                          stdout=subprocess.PIPE, check=True).stdout
open(sys.argv[2], "wb").write(out)
PYEOF
	size=$(stat -c %s "$T/raw.zst")
	# the frame ends, by the zstd CLI's own count of each frame's bytes
	first_end=$("$PY" -c '
import subprocess, sys
d = open(sys.argv[1], "rb").read()
one = subprocess.run(["zstd", "-q", "-c"], input=open(sys.argv[2], "rb").read()[:20000],
                     stdout=subprocess.PIPE).stdout
assert d.startswith(one)
print(len(one))' "$T/raw.zst" "$T/run.raw")
	for cut in 2 10 $((first_end - 1)) $((first_end + 7)) $((size / 2)) $((size - 1)); do
		head -c "$cut" "$T/raw.zst" > "$T/cut.zst"
		run --separate-stderr mt-encode -u -o "$T/cut.msgpack" "$T/cut.zst"
		assert_failure 2
		[[ "$stderr" =~ ^mt-encode:\ $T/cut.zst:\ byte\ $cut:\ zstd\ frame\ at\ byte\ [0-9]+\ cut\ short ]] ||
			[ "$cut" -lt 4 ] ||
			{ echo "cut $cut: $stderr"; false; }
		[ "$cut" -lt 200 ] && continue # not even the raw header
		run "$PY" -c '
import msgpack, sys
print(list(msgpack.Unpacker(open(sys.argv[1], "rb"), raw=False))[-1]["complete"])' "$T/cut.msgpack"
		assert_output "False"
	done
	# cut exactly after the first frame: the frames are whole, the raw
	# stream in them is not (no trailer): both offsets are named
	head -c "$first_end" "$T/raw.zst" > "$T/cut.zst"
	run --separate-stderr mt-encode -u -o "$T/cut.msgpack" "$T/cut.zst"
	assert_failure 2
	[[ "$stderr" == "mt-encode: $T/cut.zst: byte "*" of the decompressed stream ($first_end compressed bytes read): "*"truncated"* ]] ||
		{ echo "$stderr"; false; }
}

@test "compressed artifact cut short: mt-reconstruct and mt-report say where" {
	"$GEN" --events 20000 --seed 44 -o "$T/run.raw"
	mt-encode --frame-size 16KiB -o "$T/run.zst" "$T/run.raw"
	size=$(stat -c %s "$T/run.zst")
	head -c $((size / 2)) "$T/run.zst" > "$T/cut.zst"
	run --separate-stderr mt-reconstruct -o "$T/cut.json" "$T/cut.zst"
	[ "$status" -eq 2 ]
	[[ "$stderr" == *"$T/cut.zst: byte $((size / 2)): zstd frame at byte "*" cut short"* ]]
	[ "$(jq .input.complete "$T/cut.json")" = false ]
	run mt-report "$T/cut.zst"
	assert_failure 2
	assert_line --index 0 --partial "incomplete trace: $T/cut.zst: byte $((size / 2)): zstd frame at byte"
}

@test "compressed timelines: mt-report reads them as the plain ones (file, pipe, re-sorted keys); cut short: exit 2, where" {
	"$GEN" --events 20000 --seed 47 -o "$T/run.raw"
	mt-reconstruct -o "$T/tl.json" "$T/run.raw"
	mt-report "$T/tl.json" > "$T/plain.txt"
	zstd -q -c "$T/tl.json" > "$T/tl.zst"
	mt-report "$T/tl.zst" | diff - "$T/plain.txt"
	cat "$T/tl.zst" | mt-report | diff - "$T/plain.txt"
	mt-report --compare "$T/tl.json" "$T/tl.zst" > "$T/compare.txt"
	mt-report --compare "$T/tl.json" "$T/tl.json" | diff - "$T/compare.txt"
	# "format" no longer first: told by the reader, read through it
	jq -S . "$T/tl.json" > "$T/sorted.json"
	zstd -q -c "$T/sorted.json" > "$T/sorted.zst"
	mt-report "$T/sorted.zst" | diff - "$T/plain.txt"
	cat "$T/sorted.json" | mt-report | diff - "$T/plain.txt"
	# a frame cut short: the compressed offset, not a JSON parse error
	size=$(stat -c %s "$T/tl.zst")
	head -c $((size / 2)) "$T/tl.zst" > "$T/cut.zst"
	run mt-report "$T/cut.zst"
	assert_failure 2
	assert_output --regexp "^mt-report: $T/cut.zst: byte $((size / 2)): zstd frame at byte 0 cut short"
}

@test "compressed input with a flipped bit: exit 2, never other events" {
	"$GEN" --events 5000 --seed 45 -o "$T/run.raw"
	mt-encode -u -o "$T/run.msgpack" "$T/run.raw"
	mt-encode -o "$T/art.zst" "$T/run.raw"
	zstd -q -c "$T/run.raw" > "$T/raw.zst"
	size=$(stat -c %s "$T/raw.zst")
	for at in 20 $((size / 3)) $((size / 2)) $((size - 6)); do
		"$PY" -c '
import sys
d = bytearray(open(sys.argv[1], "rb").read())
d[int(sys.argv[2])] ^= 0x04
open(sys.argv[3], "wb").write(d)' "$T/raw.zst" "$at" "$T/bad.zst"
		run --separate-stderr mt-encode -u -o "$T/bad.msgpack" "$T/bad.zst"
		assert_failure 2
		[[ "$stderr" == "mt-encode: $T/bad.zst: byte "* ]] || { echo "$stderr"; false; }
	done
	# the later stages alike, on mt-encode's artifact damaged
	"$PY" -c '
import sys
d = bytearray(open(sys.argv[1], "rb").read())
d[len(d) // 2] ^= 0x04
open(sys.argv[2], "wb").write(d)' "$T/art.zst" "$T/badart.zst"
	for tool in mt-reconstruct mt-report; do
		run --separate-stderr "$tool" -o "$T/out.$tool" "$T/badart.zst"
		assert_failure 2
		[[ "$stderr" == *"$T/badart.zst: byte "* ]] || { echo "$stderr"; false; }
	done
}

@test "a large compressed input is read in bounded memory" {
	skip_asan_rss_without_zero_page "$READ"
	"$GEN" --events 2000000 --seed 46 -o "$T/big.raw"
	mt-encode -o "$T/big.zst" "$T/big.raw"
	rm "$T/big.raw"
	plain=$(zstd -dc "$T/big.zst" | wc -c)
	echo "compressed $(stat -c %s "$T/big.zst") bytes, plain $plain" >&3
	/usr/bin/time -f "%M" -o "$T/rss" "$READ" "$T/big.zst"
	rss_kib=$(cat "$T/rss")
	echo "mt-read max RSS ${rss_kib} KiB" >&3
	[ "$rss_kib" -lt 16384 ]
	[ $((plain / 1024)) -gt $((rss_kib * 5)) ]
	# the same through a pipe
	/usr/bin/time -f "%M" -o "$T/rss" "$READ" - < "$T/big.zst"
	[ "$(cat "$T/rss")" -lt 16384 ]
}

# Threads: of /proc/PID/status, once the reader has read the BYTES its
# pipe was given (rchar of /proc/PID/io) and waits for more.
threads_when_read() { # threads_when_read PID BYTES
	local i
	for i in $(seq 200); do
		[ "$(awk '/^rchar:/ { print $2 }' "/proc/$1/io")" -ge "$2" ] &&
			break
		sleep 0.05
	done
	awk '/^Threads:/ { print $2 }' "/proc/$1/status"
}

@test "compressed input: decoded in a second thread with two CPUs, in the reader's own with one" {
	[ "$(nproc)" -ge 2 ] || skip "one CPU: no second thread to check"
	"$GEN" --events 200000 --seed 47 -o "$T/run.raw"
	mt-encode -o "$T/run.zst" "$T/run.raw"
	mkfifo "$T/fifo"
	for cpus in 0,1 0; do
		# the first frames, then the pipe stays open and gives nothing
		# (opened read-write and under timeout: should the reader not
		# start, the writer neither blocks in open nor outlives the test)
		timeout 30 sh -c 'head -c 400000 "$1"; sleep 20' sh \
			"$T/run.zst" 1<>"$T/fifo" &
		writer=$!
		taskset -c "$cpus" "$READ" "$T/fifo" > /dev/null &
		reader=$!
		n=$(threads_when_read "$reader" 400000)
		kill "$writer" "$reader"
		wait "$reader" || true
		if [ "$cpus" = 0,1 ]; then
			[ "$n" = 2 ] || { echo "two CPUs: $n threads"; false; }
		else
			[ "$n" = 1 ] || { echo "one CPU: $n threads"; false; }
		fi
	done
}

@test "mt-encode compresses in a thread per CPU besides its own with two CPUs, in its own with one" {
	[ "$(nproc)" -ge 2 ] || skip "one CPU: no second thread to check"
	"$GEN" --events 200000 --seed 48 -o "$T/run.raw"
	mkfifo "$T/fifo"
	for cpus in 0,1 0; do
		# a raw stream's first 3 MB (frames to write), then the pipe
		# stays open and gives nothing
		timeout 30 sh -c 'head -c 3000000 "$1"; sleep 20' sh \
			"$T/run.raw" 1<>"$T/fifo" &
		writer=$!
		taskset -c "$cpus" mt-encode -o "$T/out.zst" "$T/fifo" &
		encoder=$!
		n=$(threads_when_read "$encoder" 3000000)
		kill "$writer" "$encoder"
		wait "$encoder" || true
		if [ "$cpus" = 0,1 ]; then
			# its own, and one compressing thread per CPU
			[ "$n" = 3 ] || { echo "two CPUs: $n threads"; false; }
		else
			[ "$n" = 1 ] || { echo "one CPU: $n threads"; false; }
		fi
	done
}

@test "compressed input through a pipe left open: a reader that fails early exits at once" {
	# a frame whose content is no format of mt's, then 3 MB in a skippable
	# frame (RFC 8878: magic 0x184D2A50, 32-bit length; the reader asks for
	# 2 MiB at a time), then the writer keeps the pipe open: the decoding
	# thread waits in read(2) for the rest, and must not keep the reader
	# from exiting 2 with its message
	mkfifo "$T/fifo"
	{
		printf 'hello, frames' | zstd -q -c
		printf '\x50\x2a\x4d\x18\xc0\xc6\x2d\x00'
		head -c 3000000 /dev/zero
		sleep 20
	} > "$T/fifo" &
	writer=$!
	run --separate-stderr timeout 10 mt-reconstruct -o "$T/out.json" "$T/fifo"
	kill "$writer" 2>/dev/null || true # gone already: the pipe closed
	assert_failure 2
	[[ "$stderr" == *"$T/fifo: byte 0"*"unknown format (first byte 0x68)"* ]] ||
		{ echo "$stderr"; false; }
}
