#!/usr/bin/env bats
# mt-trace when things go wrong around it: its own death, a slow reader,
# many processes ending at once (issue 16).  The raw streams are read by
# tests/lib/rawcheck.py's parser (struct, none of lib/).

load helpers

setup() {
	T="$BATS_TEST_TMPDIR"
	export T
}

@test "a 2,000-process tree ending with munmaps: no event of a pid after its Exit, none before its Fork" {
	require_bpf
	# 200 processes at a time, each exits right after a munmap: the old
	# mt-trace read its events ring before its lifecycle ring and wrote a
	# Munmap after its process's Exit in 1 to 4 runs of 5 (by the load)
	for run in 1 2 3 4 5 6; do
		mt-trace -o "$T/tree.raw" -- "$MT_FIXTURES/exit_race" 2000 200 5
		run "$PY" "$TOP/tests/lib/order_check.py" "$T/tree.raw"
		echo "run $run: $output"
		assert_success
		assert_output "processes 2001 exits 2001"
	done
}

@test "a slow reader: the duration is the command's own, not the time mt-trace waited to write" {
	require_bpf
	# 4,000 allocator events (224 KB) fill the pipe: mt-trace waits 2 s
	# for the reader while the command, done in a few ms, has exited
	start=$(date +%s%N)
	mt-trace -- "$MT_FIXTURES/allocheavy" 2000 2>"$T/trace.err" |
		(sleep 2; cat) >"$T/slow.raw"
	waited_ms=$((($(date +%s%N) - start) / 1000000))
	echo "pipeline: $waited_ms ms"
	[ "$waited_ms" -ge 2000 ]
	run "$PY" "$TOP/tests/lib/order_check.py" times "$T/slow.raw"
	assert_success
	echo "$output"
	times=$output
	# the trailer ends at the last record, the root's Exit here, long
	# before the stream was all written (the old end: after the wait)
	[ "$(jq '.end == .last and .last == .root_exit' <<<"$times")" = true ]
	span_ms=$(jq '(.end - .start) / 1000000 | floor' <<<"$times")
	echo "traced span: $span_ms ms"
	[ "$span_ms" -lt 1500 ]
	# and that is the duration the later stages report
	run bash -c 'mt-encode "$T/slow.raw" | mt-reconstruct | jq .duration_ns'
	assert_success
	assert_output "$(jq '.end - .start' <<<"$times")"
}

# map_exec FILE...: python3 maps each FILE executable (as a JIT or a loader
# of its own format would), then exits.
map_exec() {
	"$PY" -c 'import mmap, sys
for name in sys.argv[1:]:
    with open(name, "rb") as f:
        mmap.mmap(f.fileno(), 0, mmap.MAP_PRIVATE,
                  mmap.PROT_READ | mmap.PROT_EXEC).close()' "$@"
}
export -f map_exec
export PY

@test "a file that is not ELF mapped executable: no warning; a refused ELF file: named by its path" {
	require_bpf
	printf 'plain text, mapped as code\n%.0s' $(seq 200) >"$T/data.txt"
	# an ELF header announcing 65,537 sections (extended numbering)
	"$PY" - "$T/sections.so" <<'PYEOF'
import struct, sys
eh = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
eh += struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, 64, 0, 64, 56, 0,
                  64, 0, 0)
sh0 = struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 65537, 0, 0, 0, 0)
open(sys.argv[1], "wb").write(eh + sh0 + bytes(4096))
PYEOF
	run mt-trace -o "$T/t.raw" -- bash -c 'map_exec "$1" "$2"' _ \
		"$T/data.txt" "$T/sections.so"
	echo "$output"
	assert_success
	# the old message: "$T/data.txt: its allocator cannot be traced:
	# /proc/self/fd/N: not an ELF file"
	refute_output --partial "data.txt"
	refute_output --partial "/proc/self/fd"
	assert_output --partial "mt-trace: warning: $T/sections.so: allocators not traced: more sections than mt-trace reads"
	[ "$(grep -c warning <<<"$output")" = 1 ]
}
