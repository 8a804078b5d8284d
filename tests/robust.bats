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

# ended PID: the process has exited (a zombie, or gone)
ended() {
	case "$(proc_state "$1")" in
	Z | "") return 0 ;;
	esac
	return 1
}

@test "a slow reader: the duration is the command's own, not the time mt-trace waited to write" {
	require_bpf
	# 4,000 allocator events (224 KB) fill the pipe: the reader reads
	# nothing until the command, done in a few ms, has exited (the log's
	# last line is written, then the process is a zombie or gone), and
	# 2 s more: mt-trace waits for it all that time
	export MT_FIXTURE_LOG="$T/allocheavy.log"
	start=$(date +%s%N)
	mt-trace -- "$MT_FIXTURES/allocheavy" 2000 2>"$T/trace.err" |
		(
			wait_for 60 grep -qs '"live_at_exit"' "$MT_FIXTURE_LOG"
			pid=$(jq -r 'select(.info == "live_at_exit") | .pid' "$MT_FIXTURE_LOG")
			wait_for 60 ended "$pid"
			echo $((($(date +%s%N) - start) / 1000000)) >"$T/exited_ms"
			sleep 2 # the slow reader's wait
			cat
		) >"$T/slow.raw"
	waited_ms=$((($(date +%s%N) - start) / 1000000))
	exited_ms=$(cat "$T/exited_ms")
	echo "pipeline: $waited_ms ms; the command seen ended at $exited_ms ms"
	[ "$waited_ms" -ge $((exited_ms + 2000)) ]
	run "$PY" "$TOP/tests/lib/order_check.py" times "$T/slow.raw"
	assert_success
	echo "$output"
	times=$output
	# the trailer ends at the last record, the root's Exit here, long
	# before the stream was all written (the old end: after the wait)
	[ "$(jq '.end == .last and .last == .root_exit' <<<"$times")" = true ]
	span_ms=$(jq '(.end - .start) / 1000000 | floor' <<<"$times")
	echo "traced span: $span_ms ms"
	# the command had ended when the reader saw it had (a span that
	# took in the reader's wait would be 2 s longer)
	[ "$span_ms" -le "$exited_ms" ]
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

# state PID: the state letter of /proc/PID/stat ("gone" once reaped).
state() {
	local stat
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo gone; return; }
	stat=${stat##*) }
	echo "${stat%% *}"
}

# all_in STATES PID...: every PID's state is one of STATES (a regexp).
all_in() {
	local want=$1 pid
	shift
	for pid in "$@"; do
		[[ $(state "$pid") =~ ^($want)$ ]] || return 1
	done
}

# What a test of this file started and must not leave behind (stopped
# processes above all): mt-trace's pid in $mt, the tree's in $T/code/pids.
teardown() {
	[ -n "${mt:-}" ] && kill -KILL "$mt" 2>/dev/null
	if [ -f "$T/code/pids" ]; then
		touch "$T/code/finish"
		xargs -r kill -KILL <"$T/code/pids" 2>/dev/null
	fi
	return 0
}

@test "SIGKILL of mt-trace while its processes are stopped for new code: the watchdog continues them, they finish" {
	require_bpf
	mkdir "$T/code"
	# the fixture and 3 children map a new file executable, again and
	# again: every mapping stops the process until mt-trace looks at it
	mt-trace -o "$T/t.raw" -- "$MT_FIXTURES/code_loop" "$T/code" 3 \
		2>"$T/trace.err" &
	mt=$!
	for _ in $(seq 100); do
		[ -f "$T/code/pids" ] && [ "$(wc -l <"$T/code/pids")" = 4 ] &&
			break
		sleep 0.1
	done
	mapfile -t pids <"$T/code/pids"
	[ "${#pids[@]}" = 4 ]
	# the watchdog: a child of mt-trace in a session of its own
	watchdog=$(pgrep -P "$mt" -x mt-trace-watch || true)
	# mt-trace stopped too: nobody undoes a stop any more, so each
	# process ends up stopped (T) at its next mapping
	kill -STOP "$mt"
	for _ in $(seq 100); do
		all_in T "${pids[@]}" && break
		sleep 0.1
	done
	for pid in "${pids[@]}"; do echo "pid $pid: $(state "$pid")"; done
	all_in T "${pids[@]}"
	touch "$T/code/finish"
	kill -KILL "$mt"
	wait "$mt" || true
	# every process runs again and finishes (the old mt-trace left them
	# stopped for good, their parent init)
	for _ in $(seq 100); do
		all_in "Z|gone" "${pids[@]}" && break
		sleep 0.1
	done
	for pid in "${pids[@]}"; do echo "pid $pid: $(state "$pid")"; done
	all_in "Z|gone" "${pids[@]}"
	[ "$(sort "$T/code/done")" = "$(sort "$T/code/pids")" ]
	# and the watchdog said so, then went
	[ -n "$watchdog" ]
	for _ in $(seq 50); do
		all_in "Z|gone" "$watchdog" && break
		sleep 0.1
	done
	all_in "Z|gone" "$watchdog"
	run cat "$T/trace.err"
	assert_output --regexp "mt-trace: watchdog: mt-trace \(pid $mt\) ended with 4 processes stopped for it; continued them"
}

@test "mt-trace ending normally leaves no watchdog behind; --no-stop starts none" {
	require_bpf
	mkdir "$T/code"
	mt-trace -o "$T/t.raw" -- "$MT_FIXTURES/code_loop" "$T/code" 1 &
	mt=$!
	for _ in $(seq 100); do
		watchdog=$(pgrep -P "$mt" -x mt-trace-watch) && break
		sleep 0.05
	done
	[ -n "$watchdog" ]
	touch "$T/code/finish"
	wait "$mt"
	# killed on mt-trace's way out (a zombie until init reaps it)
	for _ in $(seq 50); do
		all_in "Z|gone" "$watchdog" && break
		sleep 0.1
	done
	all_in "Z|gone" "$watchdog"
	[ "$(wc -l <"$T/code/done")" = 2 ]
	# the watchdog would be there before the command runs: asked while
	# the command waits on $T/hold
	mkfifo "$T/hold"
	mt-trace --no-stop -o "$T/t.raw" -- \
		sh -c ': >"$0"; read -r _ <"$1"' "$T/ready" "$T/hold" &
	mt=$!
	wait_for 30 test -e "$T/ready"
	run pgrep -P "$mt" -x mt-trace-watch
	echo >"$T/hold"
	assert_failure
	wait "$mt"
}

@test "a reader that went away: every stage exits 2 without a message, never SIGPIPE (141)" {
	require_built "$MT_BUILD/tests/mt-gen"
	"$MT_BUILD/tests/mt-gen" --events 200000 --seed 23 -o "$T/run.raw"
	mt-encode "$T/run.raw" -o "$T/run.msgpack"
	# the pipe's reader is closed before the stage writes (no race with
	# its exit), then one that leaves after 10 bytes of a large output
	"$PY" - "$T/run.raw" "$T/run.msgpack" <<-'PYTHON' >"$T/st"
		import os, subprocess, sys
		raw, art = sys.argv[1], sys.argv[2]
		stages = (["mt-encode", raw], ["mt-encode", "-u", raw],
		          ["mt-encode", "--jsonl", "-u", raw],
		          ["mt-reconstruct", art],
		          ["mt-reconstruct", "--pretty", "--process-series", "all", art],
		          ["mt-report", art], ["mt-report", "--json", art])
		for cmd in stages:
		    r, w = os.pipe()
		    os.close(r)
		    p = subprocess.run(cmd, stdout=w, stderr=subprocess.PIPE)
		    os.close(w)
		    print("closed", p.returncode, p.stderr.decode().strip() or "-", *cmd[:2])
		    r, w = os.pipe()
		    p = subprocess.Popen(cmd, stdout=w, stderr=subprocess.PIPE)
		    os.close(w)
		    os.read(r, 10)
		    os.close(r)
		    err = p.stderr.read().decode().strip()
		    print("left", p.wait(), err or "-", *cmd[:2])
	PYTHON
	cat "$T/st" >&2
	[ "$(wc -l <"$T/st")" = 14 ]
	# mt-report's table is short enough to fit the pipe: it may exit 0
	# there; every other line is exit 2 with nothing on stderr
	run grep -v -e '^closed 2 - ' -e '^left 2 - ' -e '^left 0 - mt-report ' "$T/st"
	assert_output ""
}

@test "symbolizing a trace that names more code files than the descriptor limit: every frame named" {
	# 40 copies of a fixture built -g, each its own code file in the
	# trace, one allocation site in each; 16 descriptors.  The symbolizer
	# kept a session (and its descriptor) open per file, to the end: past
	# the limit, files could not be opened and frames read "path+0x..."
	local bin="$MT_FIXTURES/sym/inlined" id ret_malloc ret_table i
	id=$(readelf -n "$bin" | sed -n 's/.*Build ID: //p')
	ret_malloc=$(objdump -d --no-show-raw-insn "$bin" | sed -n '/<make_table>:/,/^$/p' |
		grep -A1 'call.*<malloc@plt>' | sed -n '2s/^ *\([0-9a-f]*\):.*/0x\1/p')
	ret_table=$(objdump -d --no-show-raw-insn "$bin" | sed -n '/<main>:/,/^$/p' |
		grep -A1 'call.*<make_table>' | sed -n '2s/^ *\([0-9a-f]*\):.*/0x\1/p')
	[ -n "$id" ]
	[ -n "$ret_malloc" ]
	[ -n "$ret_table" ]
	for i in $(seq 1 40); do
		cp "$bin" "$T/copy$i"
		echo "CodeFile file=$i path=$T/copy$i build_id=$id"
		echo "Stack stack=$i frames=$i:$ret_malloc,$i:$ret_table"
		echo "Malloc addr=$((4096 * i)) size=$((100 + i)) stack=$i"
	done | "$PY" "$TOP/tests/lib/mkartifact.py" >"$T/run.msgpack"
	# the frames of one file, symbolized with descriptors to spare
	want=$(mt-report --json --top all "$T/run.msgpack" |
		jq -c '[.sites.top[] | select(.stack == 1) | .frames | map(del(.object))] | .[0]')
	[[ "$want" == *'"make_table"'* ]]
	[[ "$want" == *'"main"'* ]]
	run bash -c 'ulimit -n 16 && mt-report --json --top all "$1"' _ "$T/run.msgpack"
	assert_success
	[ "$(jq '.sites.top | length' <<<"$output")" = 40 ]
	[ "$(jq -c "[.sites.top[] | select((.frames | map(del(.object))) == $want)] | length" <<<"$output")" = 40 ]
}

@test "a stop someone else makes while backpressure holds a process stays: mt-trace continues only its own stop" {
	require_bpf
	local n=200003 pid="" i size=-1
	# the reader waits for go: mt-trace blocks writing, its rings fill,
	# and storm is stopped by backpressure (state T)
	# (--no-fast: backpressure holds what the BPF rings carry; the
	# recorder's rings wait in the process instead)
	mt-trace --no-fast --ring-size 64KiB -- "$MT_FIXTURES/storm" $n 2>"$T/err" |
		{ while [ ! -e "$T/go" ]; do sleep 0.05; done; cat >"$T/run.raw"; } &
	# (stopped in three looks 0.3 s apart: not the short stop at its
	# exec, while mt-trace inspects its code)
	local stopped=0
	for i in $(seq 200); do
		pid=$(pgrep -f "^$MT_FIXTURES/storm $n\$" | head -1)
		if [ -n "$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat")" = T ]; then
			stopped=$((stopped + 1))
		else
			stopped=0
		fi
		[ $stopped = 3 ] && break
		sleep 0.3
	done
	if [ "$stopped" != 3 ]; then
		# never held: let the pipeline end rather than leave it waiting
		touch "$T/go"
		wait
		false
	fi
	kill -STOP "$pid" # the user's stop, from another process
	touch "$T/go"
	# drained: the trace stops growing (storm, continued, would go on)
	for i in $(seq 100); do
		sleep 0.5
		[ "$(stat -c %s "$T/run.raw")" = "$size" ] && break
		size=$(stat -c %s "$T/run.raw")
	done
	# still stopped, the user's SIGSTOP still pending: no SIGCONT came
	# (one would have discarded it)
	[ "$(awk '{print $3}' "/proc/$pid/stat")" = T ]
	shdpnd=$(awk '/^ShdPnd:/ {print $2}' "/proc/$pid/status")
	echo "ShdPnd $shdpnd" >&2
	[ $(((0x$shdpnd >> 18) & 1)) = 1 ] # SIGSTOP, 19
	kill -CONT "$pid"
	wait
	mt-encode -o "$T/run.msgpack" "$T/run.raw"
	run "$PY" "$TOP/tests/lib/storm_counts.py" "$T/run.msgpack" storm
	echo "$output" >&2
	assert_output --partial "\"counts\": {\"[$n, $n]\": 1}"
}
