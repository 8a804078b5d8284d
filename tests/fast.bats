#!/usr/bin/env bats
# mt-trace --fast (issue 12, part 1): allocator calls into libc.so.6 and
# libstdc++ recorded in-process by libmt-preload.so, into shared-memory
# rings mt-trace drains and merges with its eBPF events.  The events must
# be --no-fast's (probes alone) exactly: every fixture's logged calls (checked by
# tests/lib/trace_check.py, python3-msgpack), the same per-process counts
# as --no-fast, nothing lost when a process forks, execs, _exits,
# aborts or is killed, and the allocator suite passing whole under --fast.

load helpers

CHECK="$TOP/tests/lib/trace_check.py"
PRELOAD="$MT_BUILD/lib/libmt-preload.so"

setup() {
	require_bpf
	T="$BATS_TEST_TMPDIR"
	export T
	export MT_FIXTURE_LOG="$T/fixture.log"
	outside_dir=""
	pids_to_end=""
}

teardown() {
	for p in $pids_to_end; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	if [ -n "$outside_dir" ]; then
		rm -rf "$outside_dir"
	fi
}

# check_log: every window of the fixture log matches the trace exactly.
check_log() {
	run "$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" \
		--kinds alloc
	if [ "$status" != 0 ]; then
		echo "--- mt-trace's stderr:"
		cat "$T/trace.err"
	fi
	assert_success
}

# windows: how many windows of the fixture log matched.
windows_matched() {
	"$PY" "$CHECK" expect "$T/out.msgpack" "$MT_FIXTURE_LOG" \
		--kinds alloc | grep -c 'traced: match$'
}

# counts: "allocations frees reallocs total_allocated unknown_frees" of
# every process in the trace, by program name, sorted (mt-report --json).
counts() {
	mt-report --json "$T/out.msgpack" | jq -r '
		.top_processes[] | "\(.name) \(.allocations) \(.frees) " +
		"\(.reallocs) \(.total_allocated) \(.unknown_frees)"' | sort
}

@test "--fast: the malloc fixtures' calls, exactly (one event per call, realloc and posix_memalign rules, free(NULL) none)" {
	for f in malloc_free two_mallocs calloc realloc aligned_alloc \
		posix_memalign four_sizes hundred realloc_edges \
		realloc_mmapped memalign_family free_null ctor; do
		rm -f "$MT_FIXTURE_LOG"
		trace_ok --fast -- "$MT_FIXTURES/$f" ||
			fail "$f: mt-trace --fast failed"
		echo "# $f"
		check_log
	done
}

@test "--fast: the same counts per process as --no-fast (allocations, frees, reallocs, bytes), no unknown free" {
	for f in "realloc_edges" "memalign_family" "hundred" "fork" \
		"four_sizes" "alloc/cxx_operators"; do
		# shellcheck disable=SC2086 # the fixture's arguments
		trace_ok --no-fast -- $MT_FIXTURES/$f || fail "$f: --no-fast failed"
		counts >"$T/default.counts"
		# shellcheck disable=SC2086
		trace_ok --fast -- $MT_FIXTURES/$f || fail "$f: --fast failed"
		counts >"$T/fast.counts"
		echo "# $f"
		cat "$T/fast.counts"
		diff "$T/default.counts" "$T/fast.counts"
		! awk '$6 != 0 { exit 1 }' "$T/fast.counts" &&
			fail "$f: unknown frees under --fast"
		[ -s "$T/fast.counts" ]
	done
}

# Threads: glibc frees each thread's tcache at its exit with an internal
# call to free's entry point, which a uprobe sees and an interposer cannot
# (the block came from no malloc call: --no-fast reports these as
# unknown frees); and the recorder's own TLS makes each thread's DTV
# (calloc'ed by ld.so) one slot longer.  Everything else is equal.
@test "--fast: threads: the same allocations and frees; none of --no-fast's unknown frees (glibc's internal tcache frees)" {
	trace_ok --no-fast -- "$MT_FIXTURES/threads" 4 300
	read -r _ d_alloc d_free _ _ d_unknown < <(counts)
	trace_ok --fast -- "$MT_FIXTURES/threads" 4 300
	read -r _ f_alloc f_free _ _ f_unknown < <(counts)
	echo "default: $d_alloc $d_free $d_unknown; fast: $f_alloc $f_free $f_unknown"
	[ "$f_alloc" = "$d_alloc" ]
	[ "$f_alloc" = 1204 ]
	[ "$f_unknown" = 0 ]
	# mt-report counts an unknown free apart from the frees
	[ "$f_free" = "$d_free" ]
	[ "$f_free" = 1200 ]
}

@test "--fast: the recorder's files are not probed (libc and libstdc++ recorded by it), nor the recorder itself" {
	trace_ok -v --fast -- "$MT_FIXTURES/alloc/cxx_sequence"
	run cat "$T/trace.err"
	assert_line --regexp "libc\.so\.6: libc, recorded by the preload \(--fast\)$"
	assert_line --regexp "libstdc\+\+\.so\.6.*: libstdc\+\+, recorded by the preload \(--fast\)$"
	refute_line --partial "libmt-preload.so: "
	refute_line --regexp "libc\.so\.6: libc, [0-9]+ probes"
	check_log
}

@test "--fast: nothing made before the end is lost: exit, _exit, abort (SIGABRT), SIGKILL, exec, fork; 20,000 calls each (rings of 8,192 wrap)" {
	local how want
	for how in exit _exit abort kill exec fork; do
		rm -f "$MT_FIXTURE_LOG"
		MT_FAST_RING_RECORDS=8192 \
			trace --fast -- "$MT_FIXTURES/die_after" 20000 "$how"
		case $how in
		abort) want=134 ;;
		kill) want=137 ;;
		*) want=0 ;;
		esac
		[ "$trace_status" = "$want" ] ||
			fail "$how: mt-trace exited $trace_status, not $want"
		echo "# $how"
		check_log
		want=1
		[ "$how" = fork ] && want=2
		[ "$(windows_matched)" = "$want" ] ||
			fail "$how: $want windows expected"
	done
}

@test "--fast: 3 threads x 5,000 pairs at once (10,000 records each: rings of 8,192 wrap): each thread's calls exact under its tid, 0 lost" {
	MT_FAST_RING_RECORDS=8192 trace_ok --fast -- "$MT_FIXTURES/threads" 3 5000
	check_log
	[ "$(windows_matched)" = 3 ]
	run mt-report --json "$T/out.msgpack"
	[ "$(jq .lost_events <<<"$output")" = 0 ]
}

@test "--fast: allocheavy 200,000 pairs: 200,256 allocations and 200,000 frees of its pid, 0 lost, nothing unknown" {
	trace_ok --fast -- "$MT_FIXTURES/allocheavy" 200000
	run mt-report --json "$T/out.msgpack"
	assert_success
	[ "$(jq .lost_events <<<"$output")" = 0 ]
	run jq -r '.top_processes[] | select(.name == "allocheavy") |
		"\(.allocations) \(.frees) \(.unknown_frees)"' <<<"$output"
	assert_output "200256 200000 0"
}

# in_time_order RAW: the raw stream's records in time order (mt-trace
# writes them so; mt-encode does not sort), with rawcheck.py's parser.
# Prints "mallocs N frees N rss N" of the process that made the most calls.
in_time_order() {
	"$PY" - "$1" "$TOP/tests/lib" <<'PYEOF'
import collections, sys
sys.path.insert(0, sys.argv[2])
import rawcheck
MALLOC, FREE, RSS = 1, 2, 14
header, recs, trailer, err = rawcheck.parse_raw(open(sys.argv[1], "rb").read())
if err or trailer is None:
    sys.exit("raw stream incomplete: %s" % err)
last = 0
for i, r in enumerate(recs):
    if r["timestamp"] < last:
        sys.exit("record %d (kind %d, pid %d) at %d, after one at %d"
                 % (i, r["kind"], r["pid"], r["timestamp"], last))
    last = r["timestamp"]
calls = collections.Counter(r["pid"] for r in recs if r["kind"] == MALLOC)
pid = calls.most_common(1)[0][0]
n = collections.Counter(r["kind"] for r in recs if r["pid"] == pid)
print("mallocs %d frees %d rss %d" % (n[MALLOC], n[FREE], n[RSS]))
PYEOF
}

@test "--fast: the drains merge the BPF side's events (RSS, brk) with the recorder's records by time: allocheavy 200,000 pairs, the raw stream in time order" {
	# ~550 RSS events of the BPF side land among allocheavy's records:
	# written after the ring's records of their drain, a few would be out
	# of time order
	run mt-trace --fast -o "$T/out.raw" -- "$MT_FIXTURES/allocheavy" 200000
	assert_success
	run in_time_order "$T/out.raw"
	echo "$output"
	assert_success
	assert_output --regexp "^mallocs 200256 frees 200000 rss [0-9]+$"
	[ "$(awk '{print $6}' <<<"$output")" -gt 100 ]
}

# repacked RAW: each packed batch of the raw stream is rawcheck.py's
# packer's bytes (python, none of lib/) for the records it holds, its
# header and CRC too: --fast's drain packs the recorders' records as it
# reads them, the writer thread the rest, and together they must write
# what one packer would.  Prints "batches N packed N records N".
repacked() {
	"$PY" - "$1" "$TOP/tests/lib" <<'PYEOF'
import struct, sys
sys.path.insert(0, sys.argv[2])
import rawcheck
d = open(sys.argv[1], "rb").read()
off = struct.unpack_from("<I", d, 12)[0]
nb = npk = recs = 0
while struct.unpack_from("<I", d, off)[0] != rawcheck.TRAILER_MAGIC:
    m, count, nbytes, check, seq, lost = rawcheck.BATCH.unpack_from(d, off)
    body = d[off + 32:off + 32 + nbytes]
    if m == rawcheck.PACKED_MAGIC:
        npk += 1
        again = rawcheck.pack(rawcheck.unpack(body, count))
        if again != body:
            sys.exit("batch %d: not the packer's bytes for its records" % nb)
        if rawcheck.packed_batch(count, body, seq, lost) != d[off:off + 32 + nbytes]:
            sys.exit("batch %d: its header or CRC" % nb)
    nb += 1
    recs += count
    off += 32 + nbytes
print("batches %d packed %d records %d" % (nb, npk, recs))
PYEOF
}

@test "--fast: the raw stream's packed batches are the packer's bytes for their records (rawcheck.py), those the drain packs as it reads the rings among them: allocheavy 100,000 pairs" {
	run mt-trace --fast -o "$T/out.raw" -- "$MT_FIXTURES/allocheavy" 100000
	assert_success
	run repacked "$T/out.raw"
	echo "$output"
	assert_success
	# every batch packed; the pairs, the 256 kept and the BPF side's
	assert_output --regexp "^batches ([0-9]+) packed \1 records [0-9]+$"
	[ "$(awk '{print $6}' <<<"$output")" -gt 200256 ]
}

@test "--fast: the command sees LD_PRELOAD, the recorder first, then its own (kept, and still counted once)" {
	# the tools inherit the interposer too: under ASan (make check-asan)
	# its runtime then no longer comes first, which it refuses by default
	export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}verify_asan_link_order=0"
	LD_PRELOAD="$MT_BUILD/preload/mtcount.so" \
		trace_ok --fast -- sh -c 'echo "$LD_PRELOAD" >"$T/seen"'
	[ "$(cat "$T/seen")" = "$(realpath "$PRELOAD"):$MT_BUILD/preload/mtcount.so" ]
	# another interposer before glibc: the recorder passes its calls on,
	# the interposer's own functions carry uprobes, one event a call
	rm -f "$MT_FIXTURE_LOG"
	LD_PRELOAD="$MT_BUILD/preload/mtcount.so" \
		trace_ok --fast -- "$MT_FIXTURES/hundred"
	check_log
}

@test "--fast: a fully static program (its own glibc) is traced by uprobes, exactly" {
	rm -f "$MT_FIXTURE_LOG"
	trace_ok --fast -- "$MT_FIXTURES/alloc/libc_family_fullstatic"
	check_log
}

@test "--fast with MT_STACKS=1 (a default): the exact events, each allocation with its stack (stacks.bats has the frames)" {
	rm -f "$MT_FIXTURE_LOG"
	MT_STACKS=1 trace_ok --fast -- "$MT_FIXTURES/malloc_free"
	check_log
	zstd -dcf "$T/out.msgpack" | "$PY" -c '
import sys, msgpack
stacks, allocs = set(), []
for m in msgpack.Unpacker(sys.stdin.buffer, raw=False):
    if m["type"] == "Stack":
        stacks.add(m["stack"])
    elif m["type"] == "Malloc":
        allocs.append(m.get("stack") in stacks)
print(len(allocs) > 0, all(allocs))' >"$T/with"
	run cat "$T/with"
	assert_output "True True"
}

@test "--fast: rings of 64 records (MT_FAST_RING_RECORDS): 3 threads x 2,000 pairs, each ring wrapped 62 times, each call exact, 0 lost" {
	MT_FAST_RING_RECORDS=64 trace_ok -v --fast -- \
		"$MT_FIXTURES/threads" 3 2000
	grep -q "rings of 64 records" "$T/trace.err"
	# -v counts the threads' sleeps on a full ring (how many: timing)
	grep -q "a full ring put a thread to sleep [0-9]* times" "$T/trace.err"
	check_log
	[ "$(windows_matched)" = 3 ]
	run mt-report --json "$T/out.msgpack"
	[ "$(jq .lost_events <<<"$output")" = 0 ]
}

@test "--fast: MT_FAST_RING_RECORDS not a power of two from 64 to 262144: a message, 125, nothing run" {
	local bad
	for bad in 100 32 524288 x 1k; do
		MT_FAST_RING_RECORDS=$bad \
			run mt-trace --fast -- touch "$BATS_TEST_TMPDIR/ran"
		[ "$status" = 125 ] || fail "$bad: exit $status"
		assert_output --partial "MT_FAST_RING_RECORDS: '$bad'"
		[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	done
}

# in_causal_order: the trace of realloc_mmapped in time order is the
# allocator's calls and glibc's own system calls in the order they
# happened (a Malloc or Realloc is stamped after the call returns, so after
# its mmap or mremap; a Free before the block is given back, so before its
# munmap), each of the fixture's calls inside its begin and end marks (the
# fixture's own clock_gettime): the recorder's times are on the BPF
# events' time line, whichever clock stamped them.
in_causal_order() {
	"$PY" - "$T/out.msgpack" "$MT_FIXTURE_LOG" "$CHECK" <<'PYEOF'
import json, subprocess, sys
art, log, check = sys.argv[1:]
marks = {}
for line in open(log):
    rec = json.loads(line)
    if "mark" in rec:
        marks[rec["mark"]] = rec["t"]
        pid = rec["pid"]
out = subprocess.run([sys.executable, check, "dump", art, "--pid", str(pid),
                      "--type", "Malloc,Realloc,Free,Mmap,Munmap,Mremap"],
                     capture_output=True, text=True, check=True).stdout
evs = [json.loads(l) for l in out.splitlines()]
evs = [e for e in evs if e["timestamp"] >= marks["begin"]]
kinds = [e["type"] for e in evs]
want = ["Mmap", "Malloc", "Mremap", "Realloc", "Mremap", "Realloc", "Free",
        "Munmap", "Malloc", "Mmap", "Realloc", "Free", "Munmap"]
times = [e["timestamp"] for e in evs]
alloc = [e["timestamp"] for e in evs if e["type"] in ("Malloc", "Realloc", "Free")]
ok = kinds == want and times == sorted(times) and \
    all(marks["begin"] <= t <= marks["end"] for t in alloc)
if not ok:
    print("got   ", kinds, "\nwanted", want, "\ntimes ", times, "\nmarks ", marks)
sys.exit(0 if ok else 1)
PYEOF
}

@test "--fast: the recorders' clock (TSC or clock_gettime, -v says which and why; MT_FAST_CLOCK=gettime forces clock_gettime): both place the calls in order with glibc's system calls and inside the fixture's own times" {
	MT_FAST_CLOCK=auto trace_ok -v --fast -- "$MT_FIXTURES/realloc_mmapped"
	grep -E "times from (the TSC|clock_gettime) \(.+\)" "$T/trace.err"
	check_log
	in_causal_order
	rm -f "$MT_FIXTURE_LOG"
	MT_FAST_CLOCK=gettime trace_ok -v --fast -- \
		"$MT_FIXTURES/realloc_mmapped"
	grep -q "times from clock_gettime (MT_FAST_CLOCK=gettime)" \
		"$T/trace.err"
	check_log
	in_causal_order
}

# The rule itself, every clocksource and CPU flag, is test_fast_clock's;
# here the decision mt-trace makes on this machine's clocksource, and says.
@test "--fast: the TSC where the clocksource is tsc, or kvm-clock with constant_tsc, nonstop_tsc and the vDSO's clock_gettime; clock_gettime elsewhere (-v: why)" {
	local cs
	cs=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)
	MT_FAST_CLOCK=auto trace_ok -v --fast -- true
	case $cs in
	tsc)
		grep -q "times from the TSC (the clocksource is the TSC)" \
			"$T/trace.err"
		;;
	kvm-clock)
		if grep -qw constant_tsc /proc/cpuinfo &&
			grep -qw nonstop_tsc /proc/cpuinfo &&
			"$MT_BUILD/unit/test_fast_clock" |
			grep -q "MONOTONIC served"; then
			grep -q "times from the TSC (kvm-clock over a stable TSC" \
				"$T/trace.err"
		else
			grep -q "times from clock_gettime (kvm-clock, but" \
				"$T/trace.err"
		fi
		;;
	*)
		grep -q "times from clock_gettime (the clocksource is neither tsc nor kvm-clock)" \
			"$T/trace.err"
		;;
	esac
}

@test "--fast: MT_FAST_CLOCK neither auto nor gettime: a message, 125, nothing run" {
	MT_FAST_CLOCK=tsc run mt-trace --fast -- touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" = 125 ]
	assert_output --partial "MT_FAST_CLOCK: 'tsc' is neither auto nor gettime"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
	MT_FAST_CLOCK=auto trace_ok --fast -- true
}

@test "--fast: no recorder to preload (MT_PRELOAD names none): a message, 125, nothing run" {
	MT_PRELOAD=/nonexistent/libmt-preload.so \
		run mt-trace --fast -- touch "$BATS_TEST_TMPDIR/ran"
	[ "$status" = 125 ]
	assert_output --partial "libmt-preload.so not found"
	[ ! -e "$BATS_TEST_TMPDIR/ran" ]
}

# Issue 33: the recorder is the default; --no-fast and MT_FAST=0 are probes
# alone; --fast and MT_FAST=1 are the default.  The trace's header says
# which (flag 64, mt-format(5)), and mt-report prints it.
@test "default: the recorder without an option, probes alone with --no-fast or MT_FAST=0; the header and mt-report say which" {
	local how var opt want
	# VARIABLE:OPTION, either empty; the option wins over the variable
	for how in : :--fast :--no-fast MT_FAST=0: MT_FAST=1: MT_FAST=0:--fast; do
		var=${how%%:*} opt=${how#*:}
		case $how in
		*:--fast | : | MT_FAST=1:) want=recorder ;;
		*) want=probes ;;
		esac
		rm -f "$MT_FIXTURE_LOG"
		# shellcheck disable=SC2086 # none, or one word each
		env $var bash -c 'mt-trace "$@" 2>"$T/trace.err" |
			mt-encode >"$T/out.msgpack"' _ $opt -v -- \
			sh -c 'echo "$LD_PRELOAD" >"$T/seen"; exec "$0"' \
			"$MT_FIXTURES/hundred"
		check_log
		run mt-report --json "$T/out.msgpack"
		assert_success
		[ "$(jq -r .allocator_recording <<<"$output")" = $want ] ||
			fail "'$how': not $want: $output"
		run mt-report "$T/out.msgpack"
		if [ $want = recorder ]; then
			assert_line "allocators  recorded in-process where the recorder loaded, by probes elsewhere"
			[ "$(cat "$T/seen")" = "$(realpath "$PRELOAD")" ]
			grep -q "^mt-trace: pid [0-9]*: recorded by the preloaded recorder$" "$T/trace.err"
		else
			assert_line "allocators  recorded by probes (mt-trace --no-fast)"
			[ -z "$(cat "$T/seen")" ]
			! grep "recorded by the preloaded recorder" "$T/trace.err"
		fi
	done
}

@test "default: no recorder to preload beside mt-trace: a warning, probes alone, each call exact (--fast: 125)" {
	# a copy of mt-trace with no ../lib beside it
	mkdir -p "$T/bin"
	cp "$MT_BIN/mt-trace" "$T/bin/"
	rm -f "$MT_FIXTURE_LOG"
	run bash -c '"$T/bin/mt-trace" -- "$MT_FIXTURES/hundred" 2>"$T/trace.err" |
		mt-encode >"$T/out.msgpack"'
	assert_success
	grep -q "libmt-preload.so not found beside mt-trace .*: allocator calls recorded by probes alone, as with --no-fast" "$T/trace.err"
	check_log
	[ "$(mt-report --json "$T/out.msgpack" | jq -r .allocator_recording)" = probes ]
	run "$T/bin/mt-trace" --fast -- touch "$T/ran"
	[ "$status" = 125 ]
	[ ! -e "$T/ran" ]
}

# The allocator suite (tests/allocators.bats) runs whole in the default
# mode, the recorder's, and again with MT_FAST=0 (--no-fast): C++
# operators, jemalloc, mimalloc and tcmalloc (shared, static, renamed),
# edges, dlopen, exec'd grandchildren, a real C++ program against
# valgrind.  Where its fixtures ask which file holds malloc or operator
# new, the recorder answers with the allocator it passes the calls to
# (mt_preload_next, tests/fixtures/alloc/alloc.h).  tests/run runs the
# second pass as a suite of its own, last ("tests/allocators.bats
# (MT_FAST=0)"), and tests/realprog.bats (counts against an LD_PRELOAD
# counter and valgrind) so too.

# Processes that run without the recorder get uprobe links of their own
# on libc and libstdc++ (lib/capture/recorder/fast_links.c), made before their
# first instruction: a program exec'd without LD_PRELOAD, a set-user-ID
# one (the loader ignores LD_PRELOAD), and the fork children of either.
# The truths: each fixture's own log of its calls (check_log: every call
# once, inside its window) and --no-fast's counts per process.

# fast_as_default CMD...: CMD traced with --no-fast (probes alone), then
# under --fast: the same counts per process (by name), and under --fast every
# window of the fixture log matched; nothing said of a recorder missing.
fast_as_default() {
	trace_ok --no-fast -- "$@" || fail "$*: --no-fast failed"
	counts >"$T/default.counts"
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -v --fast -- "$@" || fail "$*: --fast failed"
	counts >"$T/fast.counts"
	echo "# $*"
	cat "$T/fast.counts"
	diff "$T/default.counts" "$T/fast.counts"
	check_log
	! grep 'ran without the recorder' "$T/trace.err" ||
		fail "$*: a process said to run unrecorded"
}

@test "--fast: a program exec'd without LD_PRELOAD (env -u) gets links of its own: its calls exactly once, --no-fast's counts" {
	for f in hundred realloc_edges memalign_family alloc/cxx_operators; do
		fast_as_default env -u LD_PRELOAD "$MT_FIXTURES/$f"
		grep -q "LD_PRELOAD without the recorder: traced by uprobe links of its own" "$T/trace.err"
		[ "$(windows_matched)" = 1 ]
	done
	# a program that keeps the recorder, and a static one: no links
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -v --fast -- sh -c "$MT_FIXTURES/hundred; $MT_FIXTURES/alloc/libc_family_fullstatic"
	check_log
	[ "$(windows_matched)" = 3 ] # the static program logs two
	run grep -c "links of its own" "$T/trace.err"
	assert_output 0
}

@test "--fast: a set-user-ID program (nobody's: the loader ignores LD_PRELOAD) gets links of its own: its calls exactly, --no-fast's counts" {
	# the set-user-ID copies live where nobody may reach them
	outside_dir=$(mktemp -d /tmp/mt-fast-suid.XXXXXX)
	chmod 755 "$outside_dir"
	for prog in "$MT_FIXTURES/hundred" "$MT_FIXTURES/alloc/cxx_operators" /usr/bin/id; do
		cp "$prog" "$outside_dir/"
		chown nobody "$outside_dir/${prog##*/}"
		chmod 4755 "$outside_dir/${prog##*/}"
	done
	# the file system honours the bit: the copy of id runs as nobody
	run "$outside_dir/id"
	assert_output --partial "euid=65534"
	export MT_FIXTURE_LOG="$outside_dir/fixture.log"
	for f in hundred cxx_operators; do
		rm -f "$MT_FIXTURE_LOG"
		install -m 666 /dev/null "$MT_FIXTURE_LOG"
		trace_ok --no-fast -- "$outside_dir/$f" || fail "--no-fast failed"
		counts >"$T/default.counts"
		rm -f "$MT_FIXTURE_LOG"
		install -m 666 /dev/null "$MT_FIXTURE_LOG"
		trace_ok -v --fast -- "$outside_dir/$f" || fail "--fast failed"
		counts >"$T/fast.counts"
		cat "$T/fast.counts"
		diff "$T/default.counts" "$T/fast.counts"
		check_log
		[ "$(windows_matched)" = 1 ]
		grep -q "set-user-ID or with capabilities: the loader ignores LD_PRELOAD: traced by uprobe links of its own" "$T/trace.err"
	done
}

# Issue 33: the recorder is the default, probes where it cannot go.  An
# AddressSanitizer program (gcc's: libasan.so in its DT_NEEDED) refuses to
# start unless its runtime is the first library loaded, which the
# preloaded recorder is not ("ASan runtime does not come first in initial
# library list"): the recorder's __asan_default_options turns that check
# off, and since the next malloc is ASan's, not glibc's, the recorder
# passes the calls on and ASan's allocator carries the probes.
# The C++ fixture's trace has 2 frees more in the default than with
# --no-fast (105 against 103), both real: ASan's start-up leaves a dlerror
# result pending (a 24-byte record and its 69-byte message, "libasan.so.8:
# undefined symbol: swift_demangle"), and glibc frees it at the process's
# next dl* call.  Under the recorder the fixture makes one (fx_where asks
# dlsym for mt_preload_next, tests/fixtures/alloc/alloc.h); without it
# none, and the two blocks stay allocated to the end (gdb: no free after
# main starts).  The fixture's own difference, not the recorder's.
@test "default: an AddressSanitizer program (C, C++) starts, each of its calls recorded once (probes on ASan's allocator), as with --no-fast; -v says how" {
	for f in hundred_asan alloc/cxx_operators_asan; do
		rm -f "$MT_FIXTURE_LOG"
		trace_ok --no-fast -- "$MT_FIXTURES/$f" || fail "$f: --no-fast failed"
		check_log
		[ "$(windows_matched)" = 1 ]
		rm -f "$MT_FIXTURE_LOG"
		trace_ok -v -- "$MT_FIXTURES/$f" || fail "$f: the default failed"
		! grep "ASan runtime does not come first" "$T/trace.err"
		check_log
		[ "$(windows_matched)" = 1 ]
		grep -q "^mt-trace: pid [0-9]*: recorded by probes: its malloc is not glibc's" "$T/trace.err"
		! grep 'ran without the recorder' "$T/trace.err"
	done
}

# A command run with its own LD_PRELOAD (jemalloc): the recorder comes
# first and passes the calls on to jemalloc, which carries the probes.
@test "default: the command's own LD_PRELOAD (jemalloc) after the recorder: each call once, as with --no-fast" {
	je="/usr/lib/$(gcc -print-multiarch)/libjemalloc.so.2"
	[ -e "$je" ] || fail "$je missing (make deps: libjemalloc-dev)"
	# mt-trace inherits it too: an AddressSanitizer build of it (make
	# check-asan) dies at start with two allocators in one process
	if grep -q __asan_init "$MT_BIN/mt-trace"; then
		skip "mt-trace built with ASan cannot run with jemalloc preloaded"
	fi
	rm -f "$MT_FIXTURE_LOG"
	LD_PRELOAD=$je trace_ok --no-fast -- "$MT_FIXTURES/hundred"
	counts >"$T/default.counts"
	check_log
	rm -f "$MT_FIXTURE_LOG"
	LD_PRELOAD=$je trace_ok -v -- "$MT_FIXTURES/hundred"
	counts >"$T/fast.counts"
	diff "$T/default.counts" "$T/fast.counts"
	check_log
	[ "$(windows_matched)" = 1 ]
	grep -q "^mt-trace: pid [0-9]*: recorded by probes: its malloc is not glibc's" "$T/trace.err"
}

# A process in the tree that replaces LD_PRELOAD runs without the recorder
# and gets links of its own; env -i (no environment at all) too.
@test "default: LD_PRELOAD replaced inside the tree (jemalloc), env -i: links of their own, each call once" {
	je="/usr/lib/$(gcc -print-multiarch)/libjemalloc.so.2"
	[ -e "$je" ] || fail "$je missing (make deps: libjemalloc-dev)"
	# the fixture's windows only: what env allocates before its exec
	# depends on the environment's size, which the recorder's variables
	# make larger
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -v -- env LD_PRELOAD="$je" "$MT_FIXTURES/hundred"
	check_log
	[ "$(windows_matched)" = 1 ]
	grep -q "LD_PRELOAD without the recorder: traced by uprobe links of its own" "$T/trace.err"
	fast_as_default env -i MT_FIXTURE_LOG="$MT_FIXTURE_LOG" "$MT_FIXTURES/hundred"
	[ "$(windows_matched)" = 1 ]
	grep -q "LD_PRELOAD without the recorder: traced by uprobe links of its own" "$T/trace.err"
}

@test "default: -v says for each process how it was recorded: the recorder, probes for a static program, links of its own without LD_PRELOAD" {
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -v -- sh -c "$MT_FIXTURES/hundred; $MT_FIXTURES/alloc/libc_family_fullstatic; env -u LD_PRELOAD $MT_FIXTURES/hundred"
	check_log
	[ "$(windows_matched)" = 4 ] # the static program logs two
	# (the program's file as the kernel names it: no symbolic link)
	grep -q "^mt-trace: pid [0-9]* ($(realpath "$MT_FIXTURES/alloc/libc_family_fullstatic")): recorded by probes: a static program" "$T/trace.err"
	grep -q "^mt-trace: --fast: pid [0-9]*: LD_PRELOAD without the recorder: traced by uprobe links of its own" "$T/trace.err"
	# the processes that loaded the recorder: sh, hundred, env (dash
	# starts each command with vfork, whose child runs no fork handler:
	# the child that execs the static program never carried it)
	run grep -c "^mt-trace: pid [0-9]*: recorded by the preloaded recorder$" "$T/trace.err"
	[ "$output" = 3 ]
}

@test "--fast: the fork children of a process without the recorder each get links before they run (fork, a chain of 4, posix_spawn): exact" {
	fast_as_default env -u LD_PRELOAD "$MT_FIXTURES/fork"
	[ "$(windows_matched)" = 2 ]
	grep -q "forked by a process without the recorder: traced by uprobe links of its own" "$T/trace.err"
	fast_as_default env -u LD_PRELOAD "$MT_FIXTURES/fork_chain" 4
	[ "$(windows_matched)" = 5 ]
	# posix_spawn: clone(CLONE_VM | CLONE_VFORK), then exec
	fast_as_default env -u LD_PRELOAD "$MT_FIXTURES/spawn" "$MT_FIXTURES/hundred"
	[ "$(windows_matched)" = 1 ]
}

# (Only the fixtures' windows here: what sh's children allocate before
# their exec depends on the size of the environment, which --fast makes
# larger.)
@test "--fast: across exec both ways: a process with the recorder forks one that execs without it, which execs one with it again: every call once" {
	# sh carries the recorder; its second child drops it
	trace_ok -v --fast -- sh -c "$MT_FIXTURES/two_mallocs; env -u LD_PRELOAD $MT_FIXTURES/hundred; $MT_FIXTURES/four_sizes"
	check_log
	[ "$(windows_matched)" = 3 ]
	[ "$(grep -c "traced by uprobe links of its own" "$T/trace.err")" = 1 ]
	# without it, then with it again (the same pid: its links go, the
	# recorder records): each call once, in the windows
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -v --fast -- env -u LD_PRELOAD env LD_PRELOAD="$(realpath "$PRELOAD")" "$MT_FIXTURES/hundred"
	check_log
	[ "$(windows_matched)" = 1 ]
	run mt-report --json "$T/out.msgpack"
	run jq -r '.top_processes[] | "\(.name) \(.unknown_frees)"' <<<"$output"
	assert_output "hundred 0"
}

@test "--fast: a process without the recorder: its threads' calls exactly; an exec from a thread (the old leader's links die with it) gets new ones" {
	fast_as_default env -u LD_PRELOAD "$MT_FIXTURES/threads" 3 100
	[ "$(windows_matched)" = 3 ]
	fast_as_default env -u LD_PRELOAD "$MT_FIXTURES/exec_thread" "$MT_FIXTURES/hundred"
	[ "$(windows_matched)" = 1 ]
}

@test "--fast: a process without the recorder traps (int3 at its malloc); a bystander's 100,000 malloc+free pairs outside the tree run the session's program 0 times" {
	local hits="$TOP/tests/lib/probe_hits.py" tree_pid session runs
	mt-trace -v --fast -o "$T/s.raw" -- env -u LD_PRELOAD \
		"$MT_FIXTURES/sleeper" 60 2>"$T/session.err" &
	session=$!
	pids_to_end="$session"
	for _ in $(seq 200); do
		grep -q '"ready"' "$MT_FIXTURE_LOG" 2>/dev/null && break
		sleep 0.05
	done
	tree_pid=$(jq -r 'select(.info == "ready") | .pid' "$MT_FIXTURE_LOG")
	[ -n "$tree_pid" ]
	# the tree's process: the probe's breakpoint in its copy of malloc
	run "$PY" "$hits" code "$tree_pid" malloc
	assert_success
	echo "tree: $output"
	[ "$(jq -r .mem <<<"$output" | cut -c1-2)" = cc ]
	# a process outside: its calls never reach the session's program
	run "$PY" "$hits" runs "$session" -- "$MT_FIXTURES/bystander" 100000 1
	assert_success
	echo "$output"
	runs=$(echo "$output" | jq -s '.[1].runs')
	[ "$(echo "$output" | jq -s '.[1].status')" = 0 ]
	kill "$tree_pid"
	wait "$session" || : # the command's status: killed
	pids_to_end=""
	[ "$runs" -eq 0 ]
}

# Each process without the recorder makes links (at its fork and its
# exec) that are closed when it exits, by mt-trace's closing process,
# each close waiting out grace periods (30-60 ms).  A closing process
# that waited for its closes before reading more let its socket fill and
# mt-trace's send wait: 200 such processes took 14 s (0.4 s now).  The
# bound only catches that.
@test "--fast: 200 short processes without the recorder, one after another: each exact; their links closed off mt-trace's path" {
	SECONDS=0
	trace_ok -v --fast -- env -u LD_PRELOAD sh -c \
		"for i in \$(seq 200); do $MT_FIXTURES/two_mallocs; done"
	echo "$SECONDS s"
	check_log
	[ "$(windows_matched)" = 200 ]
	grep -q "^mt-trace: --fast: 202 processes without the recorder traced by links of their own" "$T/trace.err"
	[ "$SECONDS" -lt 10 ]
}

# kernel_leaks SINCE PID...: the kernel's "mt-trace-close:PID failed to
# unregister, leaking uprobe" lines stamped after SINCE (/proc/uptime) of
# the closers PID... (other sessions' closers may run on this machine)
kernel_leaks() {
	local since=$1
	shift
	dmesg | awk -v t0="$since" -v pids=" $* " '
		match($0, /mt-trace-close:[0-9]+ failed to unregister/) {
			pid = substr($0, RSTART + 15, RLENGTH - 15 - 21)
			# "[  123.456789] ...": the stamp is padded with spaces
			ts = substr($0, 2, index($0, "]") - 2) + 0
			if (ts > t0 && index(pids, " " pid " ")) n++
		} END { print n + 0 }'
}

# gone PID...: none of the processes is running any more
gone() {
	local pid
	for pid in "$@"; do
		[ -d "/proc/$pid" ] && return 1
	done
	return 0
}

@test "--fast: the links of processes without the recorder are closed whole: the closer waits for its closes before it exits, no uprobe leaked (dmesg)" {
	if ! dmesg >/dev/null 2>&1; then
		[ -z "${CI:-}" ] || fail "dmesg cannot be read in CI"
		skip "dmesg cannot be read here"
	fi
	local since i closers
	since=$(awk '{ print $1 }' /proc/uptime)
	rm -f "$T/closers"
	for i in 1 2 3 4 5 6 7 8; do
		# the command's parent is mt-trace: its closer (by then started
		# for the links of the first process) is a child of it
		trace_ok --fast -- sh -c \
			"for j in 1 2 3 4 5 6; do env -u LD_PRELOAD $MT_FIXTURES/two_mallocs; done
			pgrep -P \$PPID -x mt-trace-close >>$T/closers"
	done
	closers=$(sort -u "$T/closers" | tr '\n' ' ')
	echo "this test's closers: $closers"
	[ "$(wc -w <<<"$closers")" = 8 ]
	# until they are done (each exits after its last close)
	# shellcheck disable=SC2086
	wait_for 30 gone $closers
	# shellcheck disable=SC2086
	echo "leaks: $(kernel_leaks "$since" $closers)"
	# shellcheck disable=SC2086
	[ "$(kernel_leaks "$since" $closers)" = 0 ]
}

# Every exec under --fast is looked at, but one whose program will carry
# the recorder (LD_PRELOAD and MT_FAST_SHM as mt-trace set them, the
# memfd still open, not set-user-ID) is told apart by the BPF side and is
# not stopped: a parent waiting with WUNTRACED (job control) sees no stop
# of a program it runs again (stopping every exec: 14 of 20 seen).
@test "--fast: a program that keeps the recorder is not stopped at its exec (a WUNTRACED parent sees at most the first, new-code stop of 20)" {
	local programs
	programs=$(for _ in $(seq 20); do printf '/usr/bin/true '; done)
	# shellcheck disable=SC2086
	trace --fast --child-stdout /dev/null -- "$MT_FIXTURES/wait_untraced" $programs
	[ "$trace_status" -le 1 ]
	run jq -r 'select(.info == "stopped_total") | .value' "$MT_FIXTURE_LOG"
	echo "children seen stopped, of 20: $output"
	[ "$output" -le 1 ]
	# one that drops the recorder still stops, and is traced by links
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -v --fast -- env -u LD_PRELOAD "$MT_FIXTURES/hundred"
	check_log
	grep -q "LD_PRELOAD without the recorder: traced by uprobe links of its own" "$T/trace.err"
}

# An exec's environment scan (bpf/mt_trace.bpf.c, exec_keeps_recorder) uses
# its CPU's env_strings value; a scan preempted on a kernel that preempts
# BPF programs leaves the value's busy flag taken, and a scan started
# meanwhile must not use it: its exec stops for mt-trace to look, as any
# exec the BPF side cannot vouch for.  Preemption cannot be arranged here,
# so the flag is taken on every CPU with bpftool once mt-trace is up: each
# of ten execs of a recorder-carrying program then stops (-v counts them;
# untouched, only the first, a file not seen before, stops), and every
# call of each is still recorded.
@test "--fast: an exec whose CPU's environment scan is under way stops for mt-trace, nothing lost" {
	local id size value n
	rm -f "$T/go"
	mt-trace -v --fast -o "$T/out.raw" -- sh -c \
		'while [ ! -e "$1" ]; do sleep 0.01; done
		for i in 1 2 3 4 5 6 7 8 9 10; do "$2"; done' \
		_ "$T/go" "$MT_FIXTURES/hundred" 2>"$T/trace.err" &
	pids_to_end=$!
	for _ in $(seq 200); do
		id=$(map_of "$pids_to_end" env_strings) && break
		sleep 0.05
	done
	[ -n "$id" ]
	size=$(bpftool -j map show id "$id" | jq .bytes_value)
	value="1 $(yes 0 | head -n $((size - 1)) | tr '\n' ' ')"
	# shellcheck disable=SC2086
	bpftool map update id "$id" key 0 0 0 0 value $value
	touch "$T/go"
	wait "$pids_to_end"
	pids_to_end=""
	mt-encode <"$T/out.raw" >"$T/out.msgpack"
	check_log
	[ "$(grep -c '"mark":"begin"' "$MT_FIXTURE_LOG")" = 10 ]
	n=$(sed -n 's/^mt-trace: --fast: \([0-9]*\) execs stopped .*/\1/p' \
		"$T/trace.err")
	echo "execs stopped: $n"
	[ "$n" -ge 10 ]
}

# storm_mallocs ARTIFACT: "MALLOCS WITH_STACK" of storm_threads's threads
# (48-byte mallocs of a tid other than the pid), decoded by python3-msgpack.
storm_mallocs() {
	"$PY" - "$1" <<'PY'
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
}

# A StackRef and its event were appended apart, and a batch that filled
# between them ended in the StackRef: every later stage rejected the trace
# ("StackRef ends its batch") while mt-trace exited 0 (7 runs of 10 here
# before the fix).  Three threads fill the rings faster than a drain
# empties them: drains of more than a batch.
@test "--fast --stacks: 3 threads x 20,000 allocations, 10 runs: each trace whole, all 60,000 allocations with their stacks" {
	for run in $(seq 10); do
		trace_ok --fast --stacks -- "$MT_FIXTURES/storm_threads" 3 20000 ||
			fail "run $run: $(cat "$T/encode.err")"
		run storm_mallocs "$T/out.msgpack"
		[ "$output" = "60000 60000" ] || fail "run $run: $output"
	done
}

# thread_order ARTIFACT: per thread, every record of the file stamped at or
# after the one before it (python3-msgpack); prints "records N threads N",
# or the first records out of order and fails.
thread_order() {
	"$PY" - "$1" <<'PY'
import sys
import msgpack
from mtzstd import open_plain
last, n, bad = {}, 0, []
with open_plain(sys.argv[1]) as f:
    for i, m in enumerate(msgpack.Unpacker(f, raw=False,
                                           strict_map_key=False)):
        if "tid" not in m or "timestamp" not in m:
            continue
        n += 1
        k, t = (m["pid"], m["tid"]), m["timestamp"]
        if k in last and t < last[k][0]:
            bad.append("record %d (%s, tid %d) at %d after a %s at %d"
                       % (i, m["type"], k[1], t, last[k][1], last[k][0]))
            continue
        last[k] = (t, m["type"])
print("records %d threads %d" % (n, len(last)))
if bad:
    sys.exit("\n".join(bad[:5]))
PY
}

# A recorder stamped a record, then claimed its thread's ring (its first
# page faulted: an Rss event of the BPF side, stamped later) or walked its
# stack (--stacks: up to 1.2 ms) and published it: a drain in between
# wrote the later Rss events first (6 runs of 10 with 32 threads here).
# Records are stamped as published, and one that comes late anyway (its
# thread preempted) is placed at the drain's watermark.
@test "--fast, --fast --stacks and --no-fast: 32 threads, per thread every record in time order (the encoded file, python3-msgpack)" {
	for opts in "--fast --stacks" "--fast" "--no-fast"; do
		for run in 1 2 3 4 5; do
			# shellcheck disable=SC2086 # the options
			trace_ok $opts -- "$MT_FIXTURES/threads" 32 50 ||
				fail "$opts: run $run"
			run thread_order "$T/out.msgpack"
			echo "# $opts run $run: $output"
			assert_success
			assert_output --regexp "^records [0-9]+ threads 33$"
			[ "$opts" = --no-fast ] && break # the probes: one run
		done
	done
}

# glibc frees each thread's tcache at the thread's exit: every block the
# tcache holds (blocks the program freed, each a Free already) and the
# tcache itself (no malloc made it), by calling free directly inside
# libc.so.6.  The recorder never sees those calls; the probes did, and
# reported them as unknown frees (3,536 for these 8 threads: 7 blocks of
# each of 63 sizes and the tcache, a thread, glibc 2.36).  They are not
# the program's: the probes do not record them either, and -v says how
# many they left out.
@test "glibc's thread-exit frees (8 threads' tcaches) are not the program's: each call exact, 4,097 allocations, 4,096 frees, 0 unknown, --no-fast and --fast" {
	for opts in "--no-fast" "--fast"; do
		rm -f "$MT_FIXTURE_LOG"
		# shellcheck disable=SC2086 # the options
		trace_ok -v $opts -- "$MT_FIXTURES/tcache_threads" 8 ||
			fail "'$opts' failed"
		echo "# '$opts'"
		check_log
		[ "$(windows_matched)" = 8 ]
		run counts
		echo "$output"
		# 8 x 64 sizes x 8 blocks, and the DTV ld.so grows for the
		# threads (272 bytes by default, a slot more under --fast)
		assert_output --regexp "^tcache_threads 4097 4096 0 [0-9]+ 0$"
	done
	trace_ok -v --no-fast -- "$MT_FIXTURES/tcache_threads" 8
	run counts
	assert_output "tcache_threads 4097 4096 0 2097424 0"
	run grep "frees glibc made itself" "$T/trace.err"
	assert_output "mt-trace: 3536 frees glibc made itself (its threads' tcaches at their exits) not recorded"
}

# The same, glibc linked in statically (probes in every mode): its
# thread-exit frees are direct calls as the program's own are; only those
# inside glibc's thread-exit function (__malloc_arena_thread_freeres, by
# the program's .symtab) are left out.  Before: 3,536 unknown frees.
@test "a static program's glibc thread-exit frees are not the program's either: 0 unknown, every window exact, the program's own frees all recorded" {
	rm -f "$MT_FIXTURE_LOG"
	trace_ok -v -- "$MT_FIXTURES/tcache_threads_static" 8
	check_log
	[ "$(windows_matched)" = 8 ]
	run counts
	echo "$output"
	assert_output --regexp "^tcache_threads_static [0-9]+ 4096 0 [0-9]+ 0$"
	run grep "frees glibc made itself" "$T/trace.err"
	assert_output "mt-trace: 3536 frees glibc made itself (its threads' tcaches at their exits) not recorded"
}

# The recorder's memory is the tracer's: its shared memory (256 MiB of
# rings and their headers, mapped MAP_SHARED in every process: peak mapped
# 256 MiB more for any program) and its own library are flagged by the BPF side
# (MT_MMAP_TRACER), kept out of mapped and shown apart.  What still
# differs from the probes' (--no-fast), 136 KiB here: libgcc_s.so.1 (128 KiB of
# mappings, which the recorder needs and this C program does not) and
# the 8 KiB of the recorder's zero-filled data that ld.so maps
# anonymous over its library.
@test "--fast: the recorder's mappings are the tracer's: out of peak mapped (within 136 KiB of --no-fast's), 256 MiB and its library shown apart" {
	trace_ok --no-fast -- "$MT_FIXTURES/hundred"
	read -r d_mapped d_tracer d_rss < <(mt-report --json "$T/out.msgpack" |
		jq -r '.top_processes[0] |
			"\(.peak_mapped) \(.tracer_mapped) \(.peak_rss)"')
	trace_ok --fast -- "$MT_FIXTURES/hundred"
	read -r f_mapped f_tracer f_rss < <(mt-report --json "$T/out.msgpack" |
		jq -r '.top_processes[0] |
			"\(.peak_mapped) \(.tracer_mapped) \(.peak_rss)"')
	echo "--no-fast: mapped $d_mapped tracer $d_tracer rss $d_rss"
	echo "--fast:  mapped $f_mapped tracer $f_tracer rss $f_rss"
	[ "$d_tracer" = 0 ]
	[ "$f_tracer" -gt $((256 << 20)) ]
	[ "$f_mapped" -ge "$d_mapped" ]
	# 8 KiB since the recorder no longer loads libgcc_s (issue 33)
	[ $((f_mapped - d_mapped)) -le $((136 * 1024)) ]
	run mt-report "$T/out.msgpack"
	# 256 MiB of rings; with --stacks (make test-stacks: MT_STACKS=1)
	# also the unwind rows the recorders share (276 MiB here)
	if [ "${MT_STACKS:-0}" = 1 ]; then size='2[6-9][0-9]'; else size='25[6-9]'; fi
	assert_line --regexp "^tracer      $size MiB mapped, [0-9.]+ KiB resident by mt-trace's recorder, not counted as the program's\$"
}

# libstdc++ linked into the executable (-static-libstdc++, as gcc's
# cc1plus is): its operator new and delete are probed, and call glibc's
# malloc and free, which the recorder records: 2,000 new char[777] gave
# 4,001 allocations and 2,000 unknown frees under --fast.  One call, one
# event: the second sight of a call, by the other path, right after the
# first on its thread, is dropped.
@test "-static-libstdc++: each call once, --no-fast, --fast and --fast --stacks: 2,000 new[] and delete[] are 2,000 allocations and frees, 0 unknown; the C++ sequence exact" {
	for opts in "--no-fast" "--fast" "--fast --stacks"; do
		rm -f "$MT_FIXTURE_LOG"
		# shellcheck disable=SC2086 # the options
		trace_ok $opts -- \
			"$MT_FIXTURES/alloc/cxx_new_loop_static_libstdcxx" ||
			fail "'$opts' failed"
		echo "# '$opts'"
		check_log
		run counts
		echo "$output"
		# and libstdc++'s emergency pool (72,704 bytes, at start)
		assert_output "cxx_new_loop_static_libstdcxx 2001 2000 0 1626704 0"
		rm -f "$MT_FIXTURE_LOG"
		# shellcheck disable=SC2086
		trace_ok $opts -- \
			"$MT_FIXTURES/alloc/cxx_sequence_static_libstdcxx" ||
			fail "'$opts' failed"
		check_log
		[ "$(windows_matched)" -ge 1 ]
	done
}
