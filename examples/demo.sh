#!/usr/bin/env bash
# The README's main job: trace a real program end to end and report on it.
#   examples/demo.sh [CMD ARGS...]      (default: a small Python workload)
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${MT_BIN:-build/bin}
out=${MT_DEMO_OUT:-run.msgpack}

# The python3 first on PATH may be a shim (pyenv, asdf: a shell script that
# picks an interpreter); traced as is, the report would be about the shim's
# shell.  Ask the interpreter where it really is; without a working python3
# on PATH, Debian's.
real_python3() {
	local py

	py=$(python3 -c 'import os, sys; print(os.path.realpath(sys.executable))' \
		2>/dev/null) || py=
	if [ -z "$py" ] || [ ! -x "$py" ]; then
		py=/usr/bin/python3
	fi
	printf '%s\n' "$py"
}

if [ $# -eq 0 ]; then
	py=$(real_python3)
	echo "demo: tracing $py (python3 on PATH: $(command -v python3 || echo none))" >&2
	set -- "$py" -c 'x = [bytes(1000) for _ in range(1000)]'
fi
echo "+ mt-trace -- $* | mt-encode > $out" >&2
"$BIN/mt-trace" -- "$@" | "$BIN/mt-encode" > "$out"
echo "+ mt-report $out" >&2
"$BIN/mt-report" "$out"
