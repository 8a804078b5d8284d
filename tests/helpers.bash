# Shared set-up for the bats suites: load with `load helpers`.
load '/usr/lib/bats/bats-support/load.bash'
load '/usr/lib/bats/bats-assert/load.bash'
load '/usr/lib/bats/bats-file/load.bash'

# the checkout: helpers.bash is in its tests/ (a suite may be deeper)
TOP="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MT_BIN="${MT_BIN:-$TOP/build/bin}"
MT_FIXTURES="${MT_FIXTURES:-$TOP/build/fixtures}"
MT_BUILD="${MT_BUILD:-$TOP/build}"
PATH="$MT_BIN:$PATH"
# Debian's python3 has python3-msgpack; the pyenv one on PATH does not.
PY=/usr/bin/python3
# tests/lib's modules for inline python too (mtzstd.open_plain: an
# artifact's MessagePack, through the zstd CLI when it is compressed)
export PYTHONPATH="$TOP/tests/lib${PYTHONPATH:+:$PYTHONPATH}"

# eBPF tests need root (CAP_BPF + CAP_PERFMON + CAP_SYS_ADMIN for tracefs).
# In CI a missing privilege is a failure, never a skip.
require_bpf() {
	local why=""
	if [ "$(id -u)" -ne 0 ]; then
		why="not root (eBPF tracing needs CAP_BPF, CAP_PERFMON)"
	elif [ ! -r /sys/kernel/btf/vmlinux ]; then
		why="no BTF at /sys/kernel/btf/vmlinux"
	fi
	if [ -n "$why" ]; then
		if [ -n "${CI:-}" ]; then
			echo "BPF unavailable in CI: $why" >&2
			return 1
		fi
		skip "$why"
	fi
}

# require_built FILE...: a program or fixture `make test` builds; one
# missing is a failure (a build step is broken), never a skip.
require_built() {
	local f
	for f in "$@"; do
		[ -x "$f" ] && continue
		fail "${f#"$TOP"/}: not built (make test builds it)"
		return 1
	done
}

# require_command NAME...: a program `make deps` installs.  One missing
# fails in CI (CI set) and is skipped elsewhere, with the reason.
require_command() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null && continue
		if [ -n "${CI:-}" ]; then
			fail "$c not installed in CI (make deps installs it)"
			return 1
		fi
		skip "$c not installed (make deps)"
	done
}

# tracefs_event_id SYSTEM/EVENT: the id of a tracepoint's event (its
# perf_event_open config), read from tracefs wherever it is mounted; where
# it is not (a fresh machine mounts neither tracefs nor debugfs), from a
# tracefs mounted in a mount namespace of the reader's own, so that the
# host is left as it was.
tracefs_event_id() {
	local m
	for m in /sys/kernel/tracing /sys/kernel/debug/tracing; do
		if [ -r "$m/events/$1/id" ]; then
			cat "$m/events/$1/id"
			return
		fi
	done
	unshare -m sh -c 'mount -t tracefs tracefs /sys/kernel/tracing &&
		cat "/sys/kernel/tracing/events/$1/id"' _ "$1"
}

# wait_for SECONDS CONDITION...: runs CONDITION (a command) every 20 ms
# until it succeeds; fails, naming it, when SECONDS pass first.  The way
# a test waits for an event another process makes (never a bare sleep).
wait_for() {
	local secs=$1 deadline
	shift
	deadline=$(($(date +%s%N) + secs * 1000000000))
	until "$@"; do
		if [ "$(date +%s%N)" -gt "$deadline" ]; then
			echo "waited ${secs} s, in vain, for: $*" >&2
			return 1
		fi
		sleep 0.02
	done
}

# The traced-run helpers of the eBPF suites ($T: the test's own directory,
# exported by its setup).
# trace [MT-TRACE OPTIONS] -- CMD...: mt-trace | mt-encode > $T/out.msgpack.
# Sets trace_status and encode_status; stderr in $T/trace.err, encode.err.
trace() {
	run bash -c 'mt-trace "$@" 2>"$T/trace.err" |
		mt-encode >"$T/out.msgpack" 2>"$T/encode.err"
		echo "${PIPESTATUS[0]} ${PIPESTATUS[1]}"' _ "$@"
	read -r trace_status encode_status <<<"$output"
	if [ "$encode_status" != 0 ]; then
		echo "mt-encode exited $encode_status:" >&2
		cat "$T/encode.err" >&2
	fi
}

# trace_ok CMD...: trace, and both tools must succeed.
trace_ok() {
	trace "$@"
	if [ "$trace_status" != 0 ]; then
		echo "mt-trace exited $trace_status:" >&2
		cat "$T/trace.err" >&2
		return 1
	fi
	[ "$encode_status" = 0 ]
}

# jq_events FILTER...: the events of $T/out.msgpack, decoded by
# tests/lib/trace_check.py (python3-msgpack), as one JSON array through jq.
jq_events() {
	# decode once per artifact: a test asks many questions of one trace
	local key
	key=$(cksum <"$T/out.msgpack")
	if [ "$key" != "$(cat "$T/events.key" 2>/dev/null)" ]; then
		"$PY" "$TOP/tests/lib/trace_check.py" dump "$T/out.msgpack" |
			jq -s -c . >"$T/events.json"
		echo "$key" >"$T/events.key"
	fi
	jq -c "$@" "$T/events.json"
}

# The BPF map id of the table named $2 that process $1 holds (its fds'
# fdinfo says which maps they are, bpftool their names): to force a state
# the tests cannot otherwise arrange.
map_of() {
	local f id
	for f in /proc/"$1"/fdinfo/*; do
		id=$(awk '$1 == "map_id:" { print $2 }' "$f" 2>/dev/null)
		[ -n "$id" ] || continue
		if bpftool -j map show id "$id" 2>/dev/null |
			grep -q "\"name\":\"$2\""; then
			echo "$id"
			return 0
		fi
	done
	return 1
}

# skip_asan_rss_without_zero_page BINARY: under ASan (make check-asan), a
# bound on RSS holds only where reading untouched memory maps the kernel's
# shared zero page: ASan reads its shadow (1/8 of what the program reads)
# and, on a kernel without the zero page (pvm_no_zero_page=1 on the PVM
# guests seen in session 10), every shadow page read becomes a private page
# (mt-encode under ASan: +7 MiB a million events).  Skips with that reason
# there; a build without ASan, or a kernel with the zero page, is checked.
skip_asan_rss_without_zero_page() {
	grep -q __asan_init "$1" || return 0
	local gained
	gained=$("$PY" -c '
import mmap, re
def rss():
    return int(re.search(r"VmRSS:\s+(\d+)", open("/proc/self/status").read()).group(1))
before = rss()
m = mmap.mmap(-1, 16 << 20)
sum(m[i] for i in range(0, 16 << 20, 4096))
print(rss() - before)')
	[ "$gained" -lt 8192 ] ||
		skip "ASan's shadow reads count in RSS here: the kernel maps no zero page (16 MiB read untouched: +$gained KiB RSS)"
}

# proc_state PID: the one-letter state of /proc/PID/stat ("" once gone).
proc_state() {
	sed -n 's/^[0-9]* (.*) \(.\) .*/\1/p' "/proc/$1/stat" 2>/dev/null
}
