#!/usr/bin/env bats
# A process is named by its command line (issue 35): mt-trace records each
# exec'd program's arguments (the first 4096 bytes of its argument area,
# man/mt-format.5 "Exec arguments"), in the default mode and --no-fast
# alike; mt-encode writes them as "argv", mt-report names processes by
# them.  The arguments are known by construction (tests/fixtures/execargs.c
# runs itself again with them); python3-msgpack reads the artifact.

load helpers

setup() {
	T="$BATS_TEST_TMPDIR"
}

# trace MODE ARGS...: execargs ARGS traced in MODE ("" for the default)
# into $T/run.raw and $T/run.msgpack
trace() {
	local mode=$1
	shift
	mt-trace $mode --no-stacks -o "$T/run.raw" -- \
		"$MT_FIXTURES/execargs" "$@" 2>"$T/err" || {
		cat "$T/err"
		return 1
	}
	mt-encode -o "$T/run.msgpack" "$T/run.raw"
}

# The Exec maps of $T/run.msgpack, one JSON line each (bytes as latin-1)
execs() {
	"$PY" - "$T/run.msgpack" <<-'EOF'
		import json, sys, msgpack
		from mtzstd import open_plain
		for m in msgpack.Unpacker(open_plain(sys.argv[1]), raw=False):
		    if isinstance(m, dict) and m.get("type") == "Exec":
		        print(json.dumps({k: v for k, v in m.items()
		                          if k in ("path", "argv", "argv_bytes")}))
	EOF
}

@test "argv: each exec's arguments in the artifact, the report's text and JSON (default, --no-fast)" {
	require_bpf
	require_built "$MT_FIXTURES/execargs"
	want='["child", "a b", "", "tab\there", "\u001b[31mred", "it'"'"'s"]'
	# what a shell reads back: quoted, the escape and tab as $'...'
	line="child 'a b' '' \$'tab\\there' \$'\\x1b[31mred' 'it'\\''s'"
	for mode in "" --no-fast; do
		trace "$mode"
		run execs
		assert_success
		assert_line --index 0 "{\"path\": \"$MT_FIXTURES/execargs\", \"argv\": [\"$MT_FIXTURES/execargs\"]}"
		assert_line --index 1 "{\"path\": \"$(readlink -f "$MT_FIXTURES/execargs")\", \"argv\": $want}"
		[ "${#lines[@]}" -eq 2 ]
		# the raw stream's records are the artifact's (an outside parser)
		run "$PY" "$TOP/tests/lib/rawcheck.py" check "$T/run.raw" "$T/run.msgpack"
		assert_success
		run mt-report "$T/run.msgpack"
		assert_success
		assert_line --regexp "^ +[0-9]+ $(printf '%s' "$line" | sed 's/[][\\.$*^]/\\&/g') +4\.14 KiB "
		assert_line --regexp "^ +[0-9]+ execargs +0 B "
		run mt-report --json "$T/run.msgpack"
		assert_success
		run "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read())
c = [p for p in d["top_processes"] if p["peak_heap"] == 4242][0]
print(json.dumps(c["argv"]), c["argv_cut"], c["name"])
print(c["command_line"])' <<<"$output"
		assert_success
		assert_line --index 0 "$want False execargs"
		assert_line --index 1 "$line"
	done
}

@test "argv: arguments past 4096 bytes are cut, and marked cut (default, --no-fast)" {
	require_bpf
	require_built "$MT_FIXTURES/execargs"
	for mode in "" --no-fast; do
		trace "$mode" long 6000
		# "child\0long\0" is 11 bytes: 4085 of the 6000 x fit; the whole
		# area is 11 + 6001 bytes
		run "$PY" - "$T/run.msgpack" <<-'EOF'
			import sys, msgpack
			from mtzstd import open_plain
			for m in msgpack.Unpacker(open_plain(sys.argv[1]), raw=False):
			    if isinstance(m, dict) and m.get("type") == "Exec" \
			            and m["argv"][0] == "child":
			        a = m["argv"]
			        print(a[:2], len(a), a[2] == "x" * 4085, m["argv_bytes"])
		EOF
		assert_success
		assert_output "['child', 'long'] 3 True 6012"
		run "$PY" "$TOP/tests/lib/rawcheck.py" check "$T/run.raw" "$T/run.msgpack"
		assert_success
		run mt-report --json "$T/run.msgpack"
		run "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read())
c = [p for p in d["top_processes"] if p["peak_heap"] == 4242][0]
print(c["argv_cut"], len(c["argv"][2]), len(c["command_line"]))' <<<"$output"
		assert_output "True 4085 4096"
		# the text cuts the name, with an ellipsis
		run mt-report "$T/run.msgpack"
		assert_line --regexp "^ +[0-9]+ child long x{40,}… +4\.14 KiB "
	done
}

@test "argv: characters that would move the cursor or reorder the line are escaped in the text" {
	require_bpf
	# U+202E (right-to-left override), a byte that is not UTF-8, a newline
	mt-trace --no-stacks -o "$T/run.raw" -- /bin/true \
		"$(printf '\342\200\256abc\377')" "$(printf 'a\nb')" 2>/dev/null
	run mt-report "$T/run.raw"
	assert_success
	assert_line --regexp "^ +[0-9]+ true \\\$'\\\\u202eabc"$'\xef\xbf\xbd'"' \\\$'a\\\\nb' "
	run mt-report --json "$T/run.raw"
	run "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read())
print(json.dumps(d["top_processes"][0]["argv"]))' <<<"$output"
	assert_output '["/bin/true", "\u202eabc\ufffd", "a\nb"]'
}

@test "argv: a trace without arguments (mt 0.4) names processes by their program" {
	require_bpf
	require_built "$MT_FIXTURES/execargs"
	trace ""
	# the same artifact, its Exec maps without argv
	"$PY" - "$T/run.msgpack" "$T/old.msgpack" <<-'EOF'
		import sys, msgpack
		from mtzstd import open_plain
		with open(sys.argv[2], "wb") as out:
		    for m in msgpack.Unpacker(open_plain(sys.argv[1]), raw=False):
		        if isinstance(m, dict):
		            m.pop("argv", None)
		        out.write(msgpack.packb(m))
	EOF
	run mt-report "$T/old.msgpack"
	assert_success
	assert_line --regexp "^ +[0-9]+ execargs +4\.14 KiB "
	run mt-report --json "$T/old.msgpack"
	run "$PY" -c '
import json, sys
d = json.loads(sys.stdin.read())
print(sorted((p["name"], p["command_line"], p["argv"]) for p in d["top_processes"]))' <<<"$output"
	assert_output "[('execargs', None, None), ('execargs', None, None)]"
}
