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
m = list(msgpack.Unpacker(open(sys.argv[1], "rb"), raw=False))
print(m[0]["command"], m[0]["host"], m[0]["start_time"])
print(m[1])
print(m[2]["path"])
print(m[6]["name"])
print(m[7], m[9], m[10])
print(m[8])
print(m[-1])' "$T/hand.msgpack"
	assert_success
	assert_line --index 0 "['/bin/prog', 'arg 1'] hand 1700000000123456789"
	assert_line --index 1 "{'type': 'Malloc', 'pid': 10, 'tid': 11, 'timestamp': 100, 'addr': 4096, 'size': 24}"
	assert_line --index 2 "/usr/lib/very/long/path/that/spans/two/slots/of/56/bytes/x"
	assert_line --index 3 "b'/tmp/\\xff\\xfe'"
	assert_line --index 4 "{'type': 'Exit', 'pid': 10, 'tid': 11, 'timestamp': 106, 'exit_code': 3} {'type': 'Lost', 'pid': 0, 'tid': 0, 'timestamp': 107, 'count': 4} {'type': 'Lost', 'pid': 0, 'tid': 0, 'timestamp': 200, 'count': 2}"
	assert_line --index 5 "{'type': 'Allocator', 'pid': 10, 'tid': 11, 'timestamp': 107, 'kind': 'jemalloc', 'path': '/usr/lib/very/long/path/that/spans/two/slots/of/56/bytes/x'}"
	assert_line --index 6 "{'type': 'Trailer', 'complete': True, 'signal': 15, 'end_monotonic': 300, 'events': 12, 'lost_events': 6, 'batches': 3}"
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
print(list(msgpack.Unpacker(open(sys.argv[1], "rb"), raw=False))[-1]["error"])' "$T/cut.msgpack"
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

@test "mt-encode: output errors exit 1 (ENOSPC, EPIPE)" {
	"$GEN" --events 200000 --seed 18 -o "$T/run.raw"
	run mt-encode "$T/run.raw" -o /dev/full
	assert_failure 1
	assert_output "mt-encode: /dev/full: No space left on device"
	run bash -c 'mt-encode "$1" | head -c 10 > /dev/null; echo "${PIPESTATUS[0]}"' _ "$T/run.raw"
	assert_line --index 1 "1"
	assert_line --index 0 "mt-encode: <stdout>: Broken pipe"
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
	"$GEN" --events 2000000 --seed 19 -o "$T/big.raw"
	/usr/bin/time -f "%M" -o "$T/rss" mt-encode "$T/big.raw" > /dev/null
	rss_kib=$(cat "$T/rss")
	echo "max RSS ${rss_kib} KiB"
	[ "$rss_kib" -lt 16384 ]
}

@test "mt-encode: reading a pipe, SIGINT (Ctrl-C) does not cut the artifact" {
	"$PY" "$CHECK" write "$T/hand.raw"
	# the writer sends half, waits while mt-encode gets SIGINT, then the
	# rest: the artifact must be whole, as after a Ctrl-C that mt-trace
	# survives to finish its trace
	size=$(stat -c %s "$T/hand.raw")
	mkfifo "$T/fifo"
	{
		head -c $((size / 2)) "$T/hand.raw"
		sleep 1
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
	for _ in $(seq 600); do
		ign=$(awk '/^SigIgn:/ { print $2 }' "/proc/$pid/status")
		[ "$(cat "/proc/$pid/comm")" = mt-encode ] &&
			(( 0x$ign & 2 )) && break
		sleep 0.05
	done
	kill -INT "$pid"
	wait "$pid" # fails the test unless it exits 0
	"$PY" "$CHECK" check "$T/hand.raw" "$T/hand.msgpack"
}
