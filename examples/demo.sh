#!/usr/bin/env bash
# The README's main job: trace a real program end to end and report on it.
#   examples/demo.sh [CMD ARGS...]      (default: a small Python workload)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MT_BIN:-build/bin}
out=${MT_DEMO_OUT:-run.msgpack}
if [ $# -eq 0 ]; then
	set -- python3 -c 'x = [bytes(1000) for _ in range(1000)]'
fi
echo "+ mt-trace -- $* | mt-encode > $out" >&2
"$BIN/mt-trace" -- "$@" | "$BIN/mt-encode" > "$out"
echo "+ mt-report $out" >&2
"$BIN/mt-report" "$out"
