#!/usr/bin/env bats
# mt-report --pprof and --dhat (issue 35): the heap's sites in the formats
# other tools read.  The pprof profile is decoded by protoc (Debian's
# protobuf-compiler, not mt) with lib/report/profile.proto; DHAT's JSON is
# compared with valgrind --tool=dhat's own file for the same fixture.
# Exact values come from artifacts made by hand (tests/lib/mkartifact.py)
# whose stacks point into tests/fixtures/sym/inlined.c, as in sites.bats.

load helpers
load lib/inlined

setup() {
	T="$BATS_TEST_TMPDIR"
	BIN="$MT_FIXTURES/sym/inlined"
	ID=$(readelf -n "$BIN" | sed -n 's/.*Build ID: //p')
	RET_MALLOC=$(ret_after "$BIN" make_table 'malloc@plt')
	RET_TABLE=$(ret_after "$BIN" main 'make_table')
}

# decode FILE: a gzipped profile as protoc decodes it, then as lines:
# "types T/U ...", one "S root;...;leaf V V V V" per sample (a location's
# inlined lines expanded, innermost last), and "F name file:line" per
# line of a location
decode() {
	gzip -dc "$1" >"$T/profile.pb" &&
		protoc --decode perftools.profiles.Profile \
			-I"$TOP/lib/report" "$TOP/lib/report/profile.proto" \
			<"$T/profile.pb" >"$T/profile.txt" &&
		"$PY" - "$T/profile.txt" <<-'EOF'
			import ast, sys
			stack = [{}]
			for ln in open(sys.argv[1]):
			    ln = ln.strip()
			    if ln.endswith("{"):
			        d = {}
			        stack[-1].setdefault(ln[:-1].strip(), []).append(d)
			        stack.append(d)
			    elif ln == "}":
			        stack.pop()
			    elif ln:
			        k, v = ln.split(":", 1)
			        v = v.strip()
			        v = ast.literal_eval(v) if v[0] == '"' else \
			            (v == "true") if v in ("true", "false") else int(v)
			        stack[-1].setdefault(k, []).append(v)
			p = stack[0]
			s = p["string_table"]
			g = lambda d, k: d.get(k, [0])[0]
			print("types", " ".join(s[g(t, "type")] + "/" + s[g(t, "unit")]
			                        for t in p["sample_type"]))
			fn = {g(f, "id"): f for f in p["function"]}
			loc = {g(l, "id"): l for l in p["location"]}
			for smp in p["sample"]:
			    names = []
			    for i in reversed(smp["location_id"]):
			        for ln in reversed(loc[i]["line"]):
			            names.append(s[g(fn[g(ln, "function_id")], "name")])
			    print("S", ";".join(names), *smp["value"])
			for l in p["location"]:
			    for ln in l["line"]:
			        f = fn[g(ln, "function_id")]
			        print("F", s[g(f, "name")], "%s:%d" % (
			            s[g(f, "filename")].split("/")[-1], g(ln, "line")))
		EOF
}

@test "--pprof: Go's heap sample types, one sample per site, values known by construction (protoc decodes it)" {
	[ -n "$RET_MALLOC" ]
	chain_artifact "$T/run.msgpack"
	run mt-report --pprof "$T/p.pb.gz" -o /dev/null "$T/run.msgpack"
	assert_success
	# gzip's magic, as pprof reads it
	[ "$(head -c2 "$T/p.pb.gz" | od -An -tx1 | tr -d ' ')" = 1f8b ]
	run decode "$T/p.pb.gz"
	assert_success
	assert_line --index 0 "types alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"
	assert_line --index 1 "S [truncated];0x7f0000001000 1 3000 1 3000"
	assert_line --index 2 "S main;make_table;fill_row;new_cell 3 300 2 200"
	assert_line --index 3 "S main 1 100 0 0"
	# each frame's file and line as addr2line (binutils) names them
	for ret in "$RET_MALLOC" "$RET_TABLE"; do
		addr2line -f -i -e "$BIN" "$(printf '0x%x' $((ret - 1)))" |
			paste - - | sed 's/ (discriminator [0-9]*)//; s|\t.*/| |; s/^/F /'
	done >"$T/want"
	grep '^F [a-z_]* inlined.c' <<<"$output" >"$T/got"
	diff "$T/want" "$T/got"
	# the object the code is in, as a mapping already symbolized
	grep -A6 '^mapping {' "$T/profile.txt" >"$T/mapping"
	grep -q 'has_functions: true' "$T/mapping"
	grep -q 'has_line_numbers: true' "$T/mapping"
	grep -q 'has_inline_frames: true' "$T/mapping"
	grep -qF "string_table: \"$BIN\"" "$T/profile.txt"
}

@test "--pprof-inuse exit: inuse is what was not freed; a bad value is a usage error" {
	chain_artifact "$T/run.msgpack"
	run mt-report --pprof "$T/p.pb.gz" --pprof-inuse exit -o /dev/null "$T/run.msgpack"
	assert_success
	run decode "$T/p.pb.gz"
	assert_line --index 1 "S [truncated];0x7f0000001000 1 3000 0 0"
	assert_line --index 2 "S main;make_table;fill_row;new_cell 3 300 2 200"
	assert_line --index 3 "S main 1 100 1 100"
	run mt-report --pprof "$T/p.pb.gz" --pprof-inuse end "$T/run.msgpack"
	assert_failure 2
	assert_output --partial "--pprof-inuse: not one of peak, exit: end"
}

@test "--pprof - and --dhat -: the profile alone on standard output" {
	chain_artifact "$T/run.msgpack"
	run sh -c 'mt-report --pprof - "$1" | gzip -dc | wc -c' sh "$T/run.msgpack"
	assert_success
	[ "$output" -gt 100 ]
	run sh -c 'mt-report --dhat - "$1" | jq .dhatFileVersion' sh "$T/run.msgpack"
	assert_output 2
}

@test "--dhat: version 2 heap JSON, program points known by construction, frames as valgrind writes them" {
	chain_artifact "$T/run.msgpack"
	run mt-report --dhat "$T/d.json" -o /dev/null "$T/run.msgpack"
	assert_success
	run jq -c '[.dhatFileVersion, .mode, .verb, .bklt, .bkacc, .cmd, .pid, .te, .tg]' "$T/d.json"
	assert_output '[2,"heap","Allocated",true,false,"prog",100,10001,5000]'
	# te: the trace's length, in µs (its trailer, 1 µs after the exit)
	run sh -c 'mt-report --json "$1" | jq ".duration_ns / 1000"' sh "$T/run.msgpack"
	assert_output 10001
	run jq -c '[.pps[] | [.tb, .tbk, .tl, .mb, .mbk, .gb, .gbk, .eb, .ebk]]' "$T/d.json"
	assert_output '[[3000,1,2000,3000,1,3000,1,0,0],[300,3,18000,300,3,200,2,200,2],[100,1,2000,100,1,0,0,100,1]]'
	run jq -r '.ftbl[0], (.pps[] | [.fs[] as $i | $i] | map(tostring) | join(","))' "$T/d.json"
	assert_output "$(printf '%s\n' '[root]' 1,2 3,4,5,6 6)"
	run jq -r '.ftbl[3], .ftbl[6], .ftbl[2]' "$T/d.json"
	assert_line --index 0 --regexp '^0x[0-9a-f]+: new_cell \(.*inlined\.c:[0-9]+\)$'
	assert_line --index 1 --regexp '^0x[0-9a-f]+: main \(.*inlined\.c:[0-9]+\)$'
	assert_line --index 2 '[truncated]'
}

@test "--pprof, --dhat on a run without stacks: exit 2, said why" {
	"$PY" "$TOP/tests/lib/mkartifact.py" >"$T/nostack.msgpack" <<-EOF
		Malloc addr=0x1000 size=100
	EOF
	run mt-report --pprof "$T/p.pb.gz" "$T/nostack.msgpack"
	assert_failure 2
	assert_output --partial "--pprof: no call stacks in this run (trace it with mt-trace --stacks)"
	run mt-report --dhat "$T/d.json" "$T/nostack.msgpack"
	assert_failure 2
	assert_output --partial "--dhat: no call stacks in this run"
	run mt-report --compare "$T/nostack.msgpack" --pprof x "$T/nostack.msgpack"
	assert_failure 2
}

# A traced fixture: 1 + 100 mallocs (7,777 B, then 100..199 B), all freed.
trace_hundred() {
	require_bpf
	mt-trace --stacks -o "$T/h.raw" -- "$MT_FIXTURES/hundred" >/dev/null
	mt-report --json "$T/h.raw" >"$T/h.json"
}

@test "--pprof of a traced run: the samples add up to mt-report --json's totals" {
	trace_hundred
	run jq -c '.tree | [.allocations, .total_allocated, .peak_heap, .not_freed]' "$T/h.json"
	assert_output '[101,22727,22727,0]'
	mt-report --pprof "$T/peak.pb.gz" -o /dev/null "$T/h.raw"
	mt-report --pprof "$T/exit.pb.gz" --pprof-inuse exit -o /dev/null "$T/h.raw"
	sum() { decode "$1" | awk '/^S /{for (i = 0; i < 4; i++) s[i] += $(NF - 3 + i)}
		END {printf "%d %d %d %d\n", s[0], s[1], s[2], s[3]}'; }
	run sum "$T/peak.pb.gz"
	assert_output "101 22727 101 22727"
	run sum "$T/exit.pb.gz"
	assert_output "101 22727 0 0"
	# every sample's innermost frame is in the fixture's main
	run decode "$T/peak.pb.gz"
	refute_line --regexp '^S .*[^n] [0-9]+ [0-9]+ [0-9]+ [0-9]+$'
}

@test "--pprof of a traced run: go tool pprof reads it: Go's sample types, the fixture's two sites, main's lines" {
	trace_hundred
	mt-report --pprof "$T/h.pb.gz" -o /dev/null "$T/h.raw"
	run go tool pprof -raw "$T/h.pb.gz"
	assert_success
	assert_line "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes"
	# 100 blocks of 100..199 B (14,950 B) in the loop, one of 7,777 B
	assert_line --regexp '^ +100 +14950 +100 +14950: [0-9 ]+$'
	assert_line --regexp '^ +1 +7777 +1 +7777: [0-9 ]+$'
	# the two calls to malloc, at the fixture's lines (its source)
	for n in $(grep -n '= malloc(' "$TOP/tests/fixtures/hundred.c" | cut -d: -f1); do
		assert_line --regexp "M=1 main tests/fixtures/hundred.c:$n s=0\$"
	done
	run go tool pprof -top -sample_index=inuse_space "$T/h.pb.gz"
	assert_success
	assert_line --regexp '^ +22[.]19kB +100% +100% +22[.]19kB +100% +main$'
}

@test "--dhat of a traced run: valgrind's DHAT file for the same fixture has the same keys and totals" {
	trace_hundred
	mt-report --dhat "$T/mt.json" -o /dev/null "$T/h.raw"
	valgrind --tool=dhat --dhat-out-file="$T/vg.json" "$MT_FIXTURES/hundred" \
		>/dev/null 2>&1
	# the same top-level keys; valgrind also counts accesses (bkacc)
	run diff <(jq -c 'keys' "$T/vg.json") <(jq -c 'keys' "$T/mt.json")
	assert_success
	# a program point's: valgrind's less its access counts (rb, wb: mt
	# does not see loads and stores)
	run jq -c '[.pps[] | keys - ["rb", "wb"]] | unique' "$T/vg.json"
	assert_output '[["eb","ebk","fs","gb","gbk","mb","mbk","tb","tbk","tl"]]'
	run jq -c '[.pps[] | keys] | unique' "$T/mt.json"
	assert_output '[["eb","ebk","fs","gb","gbk","mb","mbk","tb","tbk","tl"]]'
	# the totals: bytes and blocks allocated, at the peak, at the end
	tot='[([.pps[].tb] | add), ([.pps[].tbk] | add), ([.pps[].gb] | add),
		([.pps[].ebk] | add), .ftbl[0], .mode, .dhatFileVersion]'
	run jq -c "$tot" "$T/vg.json"
	assert_output '[22727,101,22727,0,"[root]","heap",2]'
	run jq -c "$tot" "$T/mt.json"
	assert_output '[22727,101,22727,0,"[root]","heap",2]'
	# valgrind's innermost frame is malloc itself (in its preload); mt's
	# is the call in main, the frame after it in valgrind's stacks
	run jq -r '[.pps[].fs[0] as $i | .ftbl[$i]] | unique | .[]' "$T/vg.json"
	assert_output --regexp '^0x[0-9A-F]+: malloc \(in .*vgpreload_dhat.*\.so\)$'
	run jq -r '[.pps[] | .fs[0]] as $f | [$f[] as $i | .ftbl[$i]
		| sub("^0x[0-9a-fA-F]+: "; "") | sub(" \\(.*/"; " (")] | unique | .[]' "$T/mt.json"
	assert_output --partial "main (hundred.c:"
}

@test "--dhat of a traced run: valgrind's own viewer (dh_view.js, in headless Chromium) reads it" {
	trace_hundred
	CHROMIUM=$(command -v chromium || true)
	if [ -z "$CHROMIUM" ]; then
		[ -z "${CI:-}" ] || return 1
		skip "chromium not installed (make deps)"
	fi
	VIEW=/usr/libexec/valgrind/dh_view.js # valgrind's package
	[ -f "$VIEW" ]
	mt-report --dhat "$T/mt.json" -o /dev/null "$T/h.raw"
	# the viewer's page, the file handed to it as its "Load..." would
	{
		printf '<!DOCTYPE html><html><head><meta charset="UTF-8">'
		printf '<script src="file://%s"></script><script>var mt = ' "$VIEW"
		cat "$T/mt.json"
		printf ';</script></head><body onload="onLoad(); tryFunc(() => '
		printf '{ gData = mt; buildTree(); displayTree(0, 0, 0); })">'
		printf '</body></html>\n'
	} >"$T/dh.html"
	"$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
		--disable-background-networking --disable-component-update \
		--disable-sync --user-data-dir="$(mktemp -d "$T/chr.XXXX")" \
		--allow-file-access-from-files --dump-dom "$T/dh.html" \
		2>/dev/null >"$T/dom.html"
	run grep -c 'class="error"' "$T/dom.html"
	assert_output 0
	run sh -c 'sed "s/<[^>]*>//g" "$1" | tr -s " \n" " "' sh "$T/dom.html"
	assert_output --partial "Total: 22,727 bytes (100%"
	assert_output --partial "101 blocks (100%"
	assert_output --partial "At t-gmax: 22,727 bytes (100%) in 101 blocks (100%)"
	assert_output --partial "At t-end: 0 bytes (0%) in 0 blocks (0%)"
	assert_output --partial "Max: 14,950 bytes in 100 blocks"
	assert_output --regexp "#1: 0x[0-9a-f]+: main \(tests/fixtures/hundred.c:15\)"
	assert_output --partial "avg lifetime"
	refute_output --partial "NaN"
}

@test "a truncated stack's frame has one name in --pprof, --dhat and --folded: the file it was cut in" {
	"$PY" "$TOP/tests/lib/mkartifact.py" >"$T/tr.msgpack" <<-EOF
		CodeFile file=1 path=$BIN build_id=$ID
		Stack stack=1 frames=1:$RET_TABLE truncated=1
		Malloc addr=0x1000 size=100 stack=1
	EOF
	run mt-report --folded "$T/tr.msgpack"
	assert_output "[truncated in inlined];main 100"
	mt-report --dhat "$T/tr.json" --pprof "$T/tr.pb.gz" -o /dev/null \
		"$T/tr.msgpack"
	run jq -r '.ftbl[-1]' "$T/tr.json"
	assert_output "[truncated in inlined]"
	run decode "$T/tr.pb.gz"
	assert_line --index 1 "S [truncated in inlined];main 1 100 1 100"
}
