#!/usr/bin/env bats
# mt-report: the summary, --json, gates, --compare, SVG (rendered by
# headless Chromium), any stage's output as input, truncated and unusable
# inputs.  Inputs are hand-made artifacts with values known by construction.

load helpers

MK="$TOP/tests/lib/mkartifact.py"
MiB=1048576

setup() {
	T="$BATS_TEST_TMPDIR"
}

mk() {
	local name=$1
	shift
	"$PY" "$MK" "$@" >"$T/$name.msgpack"
}

# 10 x 1 MiB, free 5, 2 MiB more (peak 10 MiB, 12 MiB allocated in 11
# calls, 7 MiB leaked), a child that leaks 300 B, and one 8 MiB mapping.
ten_mib() {
	local n=${1:-1}
	for i in 0 1 2 3 4 5 6 7 8 9; do
		echo "Malloc addr=$((0x100000 + i * 0x200000)) size=$((n * MiB))"
	done
	for i in 0 1 2 3 4; do
		echo "Free addr=$((0x100000 + i * 0x200000))"
	done
	echo "Malloc addr=0x9000000 size=$((2 * n * MiB))"
	echo "Fork pid=101 ppid=100"
	echo "Exec pid=101 path=/usr/bin/child"
	echo "Malloc pid=101 addr=0xc0000 size=300"
	echo "Exit pid=101 exit_code=3"
	echo "Mmap addr=0x7f0000000000 size=8MiB"
	echo "Exit exit_code=0"
}

@test "summary: command, exit, counts and the table in human units" {
	ten_mib | mk a --command "./ten --x"
	run mt-report "$T/a.msgpack"
	assert_success
	assert_line --index 0 "command     ./ten --x"
	assert_line --index 1 "exit        0"
	assert_line --index 2 "duration    23 us"
	assert_line --index 3 "processes   2"
	assert_line --index 4 "events      22 (lost 0)"
	assert_line "peak heap   10.0 MiB at 10 us"
	assert_line --regexp '^tree +10\.0 MiB +12\.0 MiB +12 +5 +.* 7\.00 MiB +8\.00 MiB$'
	assert_line --regexp '^ +100 ten --x +10\.0 MiB +12\.0 MiB +11 +5 +1\.09 MiB +7\.00 MiB +8\.00 MiB$'
	assert_line --regexp '^ +101 child +300 B +300 B +1 +0 +300 B +300 B +0 B$'
	assert_line --regexp '^  \[1\.00 MiB, 2\.00 MiB\) +10 +10\.0 MiB'
	assert_line --regexp '^ +1,048,576 +10$'
	refute_output --partial "incomplete"
}

@test "thousands separators and --top" {
	"$PY" - >"$T/s" <<-'EOF'
		for i in range(12345):
		    print("Malloc addr=%d size=16" % (0x10000 + 16 * i))
		for p in range(3):
		    print("Fork pid=%d ppid=100" % (200 + p))
		    print("Malloc pid=%d addr=0x10 size=%d" % (200 + p, p + 1))
		print("Exit exit_code=0")
	EOF
	mk a <"$T/s"
	run mt-report --top 2 "$T/a.msgpack"
	assert_success
	assert_line --regexp '^tree +.* 12,348 +0 '
	assert_line --regexp '^ +16 +12,345$'
	assert_line "(2 more processes: --top all lists all)"
	# forked without exec: it runs its parent's program
	assert_line --regexp '^ +202 prog +3 B '
	refute_line --regexp '^ +201 '
	run mt-report --top all "$T/a.msgpack"
	assert_line --regexp '^ +200 prog +1 B '
	refute_line --partial "more processes"
	run mt-report --top 0 "$T/a.msgpack"
	refute_line --regexp '^ +20[0-2] '
	assert_line "(4 more processes: --top all lists all)"
	run mt-report --top many "$T/a.msgpack"
	assert_failure 2
	assert_line 'mt-report: --top: not a count or "all": many'
}

@test "--json: the same facts for scripts" {
	ten_mib | mk a
	mt-report --json "$T/a.msgpack" >"$T/r.json"
	[ "$(jq .tree.peak_heap "$T/r.json")" = $((10 * MiB)) ]
	[ "$(jq .tree.total_allocated "$T/r.json")" = $((12 * MiB + 300)) ]
	[ "$(jq .tree.allocations "$T/r.json")" = 12 ]
	[ "$(jq .tree.not_freed "$T/r.json")" = $((7 * MiB + 300)) ]
	[ "$(jq .tree.not_freed_blocks "$T/r.json")" = 7 ]
	[ "$(jq .tree.peak_mapped "$T/r.json")" = $((8 * MiB)) ]
	[ "$(jq .processes "$T/r.json")" = 2 ]
	[ "$(jq -c '[.top_processes[].pid]' "$T/r.json")" = "[100,101]" ]
	[ "$(jq -r '.top_processes[1].name' "$T/r.json")" = child ]
	[ "$(jq .complete "$T/r.json")" = true ]
	[ "$(jq -c .exit "$T/r.json")" = '{"code":0}' ]
	[ "$(jq -c '.top_sizes[0]' "$T/r.json")" = "{\"size\":$MiB,\"count\":10}" ]
}

@test "every stage's output gives the same report (artifact, JSON Lines, timelines, stdin)" {
	ten_mib | mk a
	ten_mib | "$PY" "$MK" --jsonl >"$T/a.jsonl"
	mt-reconstruct "$T/a.msgpack" >"$T/a.json"
	mt-reconstruct --pretty "$T/a.msgpack" >"$T/p.json"
	mt-report --json "$T/a.msgpack" | jq -c 'del(.input_format)' >"$T/1"
	for f in "$T/a.jsonl" "$T/a.json" "$T/p.json"; do
		mt-report --json "$f" | jq -c 'del(.input_format)' >"$T/2"
		diff "$T/1" "$T/2"
	done
	mt-report --json <"$T/a.msgpack" | jq -c 'del(.input_format)' >"$T/2"
	diff "$T/1" "$T/2"
	mt-report --json <"$T/a.json" | jq -c 'del(.input_format)' >"$T/2"
	diff "$T/1" "$T/2"
	# keys re-sorted by a JSON tool: "format" is no longer first
	jq -S . "$T/a.json" >"$T/s.json"
	jq -S -c . "$T/1" >"$T/1s"
	mt-report --json "$T/s.json" | jq -S -c 'del(.input_format)' >"$T/2"
	diff "$T/1s" "$T/2"
	mt-report --json <"$T/s.json" | jq -S -c 'del(.input_format)' >"$T/2"
	diff "$T/1s" "$T/2"
}

@test "a raw stream (mt-gen) is reconstructed in-process" {
	require_built "$MT_BUILD/tests/mt-gen"
	"$MT_BUILD/tests/mt-gen" --events 5000 --seed 3 -o "$T/g.raw"
	mt-reconstruct "$T/g.raw" >"$T/g.json"
	run mt-report --json "$T/g.raw"
	assert_success
	[ "$(echo "$output" | jq .tree.peak_heap)" = "$(jq .tree.heap.peak "$T/g.json")" ]
	[ "$(echo "$output" | jq .input_format)" = '"raw"' ]
	cat "$T/g.raw" | mt-report >"$T/out"
	grep -q '^command ' "$T/out"
}

@test "gates: each passes at its limit and fails just below with one line" {
	ten_mib | mk a
	run mt-report --max-peak-heap 10MiB --max-total-allocated $((12 * MiB + 300)) \
		--max-allocations 12 --max-not-freed $((7 * MiB + 300)) --strict "$T/a.msgpack"
	assert_success
	run mt-report --max-peak-heap 9.9MiB "$T/a.msgpack"
	assert_failure 1
	assert_line "mt-report: max-peak-heap: 10.0 MiB exceeds the limit of 9.90 MiB"
	run mt-report --max-total-allocated 12MiB "$T/a.msgpack"
	assert_failure 1
	assert_line --partial "mt-report: max-total-allocated: 12.0 MiB exceeds"
	run mt-report --max-allocations 11 "$T/a.msgpack"
	assert_failure 1
	assert_line "mt-report: max-allocations: 12 exceeds the limit of 11"
	run mt-report --max-not-freed 7MiB "$T/a.msgpack"
	assert_failure 1
	assert_line --partial "mt-report: max-not-freed: 7.00 MiB exceeds the limit of 7.00 MiB"
	# the gate's old name still works
	run mt-report --max-leaked 7MiB "$T/a.msgpack"
	assert_failure 1
	assert_line --partial "mt-report: max-not-freed: 7.00 MiB exceeds"
	run mt-report --json --max-allocations 11 "$T/a.msgpack"
	assert_failure 1
	[ "$(mt-report --json --max-allocations 11 "$T/a.msgpack" 2>/dev/null | jq -c '[.ok, .gates[0].value]')" = "[false,12]" ]
}

@test "--strict fails on lost events and on an incomplete trace" {
	ten_mib | sed '1i Lost count=4' | mk a
	run mt-report "$T/a.msgpack"
	assert_success
	assert_line "events      23 (lost 4)"
	run mt-report --allow-incomplete --strict "$T/a.msgpack"
	assert_failure 1
	assert_line "mt-report: strict: 4 events were lost"
	ten_mib | mk b --no-trailer
	run mt-report --allow-incomplete --strict "$T/b.msgpack"
	assert_failure 1
	assert_line "mt-report: strict: incomplete trace"
}

@test "a gate on a trace with lost events does not pass: exit 2 unless --allow-incomplete" {
	ten_mib | sed '1i Lost count=4' | mk a
	ten_mib | mk clean
	# no verdict asked: the report, its warning, exit 0
	run mt-report "$T/a.msgpack"
	assert_success
	# every gate the heap would pass: incomplete, exit 2, said why
	for gate in "--max-peak-heap 1GiB" "--max-allocations 1000" \
		"--max-total-allocated 1GiB" "--max-not-freed 1GiB" "--strict"; do
		run mt-report $gate "$T/a.msgpack"
		assert_failure 2
		assert_line "mt-report: incomplete trace: $T/a.msgpack: 4 events were lost, the figures the gates check miss them (--allow-incomplete accepts it)"
		run mt-report $gate "$T/clean.msgpack"
		[ "$status" -le 1 ] # --strict passes, the others too
	done
	# accepted: the gate decides, the reason still on stderr
	run mt-report --allow-incomplete --max-peak-heap 1GiB "$T/a.msgpack"
	assert_success
	assert_line "mt-report: incomplete trace: $T/a.msgpack: 4 events were lost, the figures the gates check miss them"
	run mt-report --allow-incomplete --max-peak-heap 1KiB "$T/a.msgpack"
	assert_failure 1
	# a failed gate on lost events: still 2 (unusable over failed)
	run mt-report --max-peak-heap 1KiB "$T/a.msgpack"
	assert_failure 2
	# --json: the same status; the facts say the gate passed
	run bash -c 'mt-report --json --max-peak-heap 1GiB "$1" 2>/dev/null' _ "$T/a.msgpack"
	assert_failure 2
	[ "$(jq -c '[.ok, .lost_events]' <<<"$output")" = "[true,4]" ]
	# --compare --max-growth: lost events in base or head
	run mt-report --compare "$T/clean.msgpack" "$T/a.msgpack" --max-growth 50%
	assert_failure 2
	assert_line --partial "incomplete trace: $T/a.msgpack: 4 events were lost"
	run mt-report --compare "$T/a.msgpack" "$T/clean.msgpack" --max-growth 50%
	assert_failure 2
	run mt-report --compare "$T/a.msgpack" "$T/clean.msgpack"
	assert_success
	run mt-report --allow-incomplete --compare "$T/a.msgpack" "$T/clean.msgpack" --max-growth 50%
	assert_success
	grep -q "lost events under a gate" "$TOP/man/mt-report.1"
}

@test "a truncated input says incomplete trace at the top, exits 2 unless --allow-incomplete" {
	ten_mib | mk a --no-trailer
	mt-report "$T/a.msgpack" >"$T/out" 2>"$T/err" || status=$?
	[ "$status" = 2 ]
	head -1 "$T/out" | grep -q "^incomplete trace: $T/a.msgpack: byte [0-9]*: "
	# the reason on stderr too, for a CI log
	grep -q "^mt-report: incomplete trace: $T/a.msgpack: byte [0-9]*: .*(--allow-incomplete accepts it)$" "$T/err"
	mt-report --allow-incomplete "$T/a.msgpack" >"$T/out"
	head -1 "$T/out" | grep -q "^incomplete trace: $T/a.msgpack: byte [0-9]*: "
	# a gate that passes does not pass off a truncated trace (a CI run
	# cut short by a timeout)
	run mt-report --max-peak-heap 1GiB "$T/a.msgpack"
	assert_failure 2
	run mt-report --json --max-peak-heap 1GiB "$T/a.msgpack"
	assert_failure 2
	run mt-report --allow-incomplete --max-peak-heap 1GiB "$T/a.msgpack"
	assert_success
	mt-reconstruct --allow-incomplete "$T/a.msgpack" >"$T/a.json" 2>/dev/null
	run mt-report "$T/a.json"
	assert_failure 2
	assert_line --partial "mt-report: incomplete trace: $T/a.msgpack: byte"
	mt-report --allow-incomplete "$T/a.json" | head -1 | grep -q "^incomplete trace: "
	ten_mib | mk b
	head -c 250 "$T/b.msgpack" | mt-report --allow-incomplete >"$T/out"
	head -1 "$T/out" | grep -q '^incomplete trace: <stdin>: byte '
	# --compare with HEAD (or BASE) truncated, also when no metric grew
	run mt-report --compare "$T/b.msgpack" "$T/a.msgpack" --max-growth 1000%
	assert_failure 2
	assert_line --partial "mt-report: incomplete trace: $T/a.msgpack: byte"
	mt-report --allow-incomplete --compare "$T/b.msgpack" "$T/a.msgpack" |
		head -1 | grep -q "^incomplete trace in head: $T/a.msgpack: byte"
	run mt-report --compare "$T/a.msgpack" "$T/b.msgpack" --max-growth 1000%
	assert_failure 2
	run mt-report --allow-incomplete --compare "$T/b.msgpack" "$T/a.msgpack" --max-growth 1000%
	assert_success
	run mt-report --compare "$T/b.msgpack" "$T/b.msgpack" --max-growth 1000%
	assert_success
}

@test "allocators not tracked: said so, never 0 allocations" {
	mk a --no-allocators <<-EOF
		Mmap addr=0x100000 size=1MiB
		Exit exit_code=0
	EOF
	run mt-report "$T/a.msgpack"
	assert_success
	assert_line "allocators  not tracked: heap figures are not available for this run"
	assert_line --regexp '^tree +- +- +- +- +- +- +1\.00 MiB$'
	run mt-report --max-allocations 100 "$T/a.msgpack"
	assert_failure 1
	assert_line "mt-report: max-allocations: allocators were not tracked"
	[ "$(mt-report --json "$T/a.msgpack" | jq -c '[.allocators_tracked, .tree.allocations, .tree.peak_mapped]')" = "[false,null,$MiB]" ]
}

@test "--compare: table of changes, --max-growth gates" {
	ten_mib 1 | mk base
	ten_mib 2 | mk head
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack"
	assert_success
	assert_line --regexp '^peak heap +10\.0 MiB +20\.0 MiB +\+100\.0%$'
	assert_line --regexp '^allocations +12 +12 +\+0\.0%$'
	assert_line --regexp '^peak mapped +8\.00 MiB +8\.00 MiB +\+0\.0%$'
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" --max-growth 99%
	assert_failure 1
	assert_line "mt-report: peak heap grew by +100.0% (limit 99%)"
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" --max-growth 100
	assert_success
	# shrinking is never a failure
	run mt-report --compare "$T/head.msgpack" "$T/base.msgpack" --max-growth 0
	assert_success
	assert_line --regexp '^peak heap +20\.0 MiB +10\.0 MiB +-50\.0%$'
	run mt-report --json --compare "$T/base.msgpack" "$T/head.msgpack" --max-growth 5%
	assert_failure 1
	[ "$(mt-report --json --compare "$T/base.msgpack" "$T/head.msgpack" 2>/dev/null | jq -c '.metrics[0] | [.base, .head, .change_pct]')" = "[$((10 * MiB)),$((20 * MiB)),100]" ]
	run mt-report --compare "$T/base.msgpack" "$T/missing"
	assert_failure 2
}

@test "unusable input: exit 2 with the reason" {
	printf 'hello' >"$T/bad"
	run mt-report "$T/bad"
	assert_failure 2
	assert_output --partial "mt-report: $T/bad: byte 0: unknown format"
	run mt-report "$T/missing"
	assert_failure 2
	echo '{"format": "mt-timelines", "version": 99}' >"$T/v.json"
	run mt-report "$T/v.json"
	assert_failure 2
	assert_output --partial "not version 1"
	run mt-report --max-peak-heap 12Q "$T/bad"
	assert_failure 2
	run mt-report --max-growth 5% "$T/bad"
	assert_failure 2
}

# chromium: a missing browser fails in CI, is skipped elsewhere
require_chromium() {
	CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
	if [ -z "$CHROMIUM" ]; then
		[ -z "${CI:-}" ] || return 1
		skip "chromium not installed (make deps)"
	fi
}

# screenshot SVG PNG: headless Chromium renders the file
screenshot() {
	"$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run \
		--disable-background-networking --disable-component-update \
		--disable-sync --user-data-dir="$(mktemp -d "$T/chr.XXXX")" \
		--screenshot="$2" --window-size=1000,700 "$1" 2>/dev/null
}

@test "--svg: a self-contained SVG with axes, units and the peak" {
	ten_mib | mk a --command "./ten <&>"
	run mt-report --svg "$T/a.svg" "$T/a.msgpack"
	assert_success
	assert_line --index 0 "command     ./ten '<&>'"
	# well-formed XML, nothing fetched from outside
	"$PY" -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$T/a.svg"
	refute grep -q 'href\|<script\|url(' "$T/a.svg"
	grep -q '>peak heap 10.0 MiB at 10 us<' "$T/a.svg"
	grep -q '>memory (MiB)<' "$T/a.svg"
	grep -q '>time since start (us)<' "$T/a.svg"
	grep -q ">./ten '&lt;&amp;&gt;'<" "$T/a.svg"
	mt-report --svg - "$T/a.msgpack" >"$T/b.svg"
	cmp "$T/a.svg" "$T/b.svg"
}

@test "--svg renders in headless Chromium: heap and mapped lines drawn" {
	require_chromium
	"$PY" - >"$T/s" <<-'EOF'
		import random
		random.seed(1)
		live = []
		for i in range(2000):
		    if live and random.random() < 0.45:
		        print("Free addr=%d" % live.pop(random.randrange(len(live))))
		    else:
		        live.append(0x100000 + i * 4096)
		        print("Malloc addr=%d size=%d" % (live[-1], random.randint(1, 20000)))
		    if i % 500 == 0:  # mapped within 4 times the heap: drawn
		        print("Mmap addr=%d size=1MiB" % (0x7f0000000000 + i * 0x1000000))
		print("Exit exit_code=0")
	EOF
	mk a <"$T/s"
	mt-report --svg "$T/a.svg" "$T/a.msgpack" >/dev/null
	screenshot "$T/a.svg" "$T/a.png"
	read -r size colors permille red blue <<<"$("$PY" "$TOP/tests/lib/pngstat.py" "$T/a.png" d62728 1f77b4)"
	echo "$size $colors colours, $permille per mille drawn, red $red, blue $blue" >&2
	[ "$size" = 1000x700 ]
	[ "$colors" -gt 50 ]
	[ "$permille" -gt 10 ]
	[ "$red" -gt 500 ]
	[ "$blue" -gt 500 ]
	# and an empty page really is blank, so the checks above can fail
	echo '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"/>' >"$T/e.svg"
	screenshot "$T/e.svg" "$T/e.png"
	read -r size colors permille red blue <<<"$("$PY" "$TOP/tests/lib/pngstat.py" "$T/e.png" d62728 1f77b4)"
	[ "$colors" -le 2 ]
	[ "$red" = 0 ]
}

@test "--help prints the usage" {
	run mt-report --help
	assert_success
	assert_output --partial "usage: mt-report"
}

# ---- end to end with real traced programs (needs eBPF) ------------------

@test "traced: 1 + 100 mallocs then 101 frees, piped straight into mt-report" {
	require_bpf
	# hundred: malloc(7777) and malloc(100..199), all freed at the end
	mt-trace -- "$MT_FIXTURES/hundred" 2>/dev/null | mt-report --json >"$T/r.json"
	[ "$(jq -c '[.tree.peak_heap, .tree.total_allocated, .tree.allocations, .tree.frees, .tree.not_freed, .complete, .exit]' "$T/r.json")" = "[$((7777 + 14950)),$((7777 + 14950)),101,101,0,true,{\"code\":0}]" ]
}

@test "traced: fork: the child's blocks count once, the parent's are inherited" {
	require_bpf
	# fork: parent malloc(1111), child malloc(2222) + free, parent free
	mt-trace -- "$MT_FIXTURES/fork" 2>/dev/null | mt-encode >"$T/f.msgpack"
	mt-report --json "$T/f.msgpack" >"$T/r.json"
	[ "$(jq -c '[.tree.peak_heap, .tree.allocations, .tree.frees, .tree.unknown_frees, .tree.not_freed, .processes]' "$T/r.json")" = "[3333,2,2,0,0,2]" ]
	[ "$(jq -c '[.top_processes[] | [.peak_heap, .exit.code]]' "$T/r.json")" = "[[2222,0],[1111,0]]" ]
	run mt-report --max-peak-heap 3332 "$T/f.msgpack"
	assert_failure 1
	run mt-report --max-peak-heap 3333 "$T/f.msgpack"
	assert_success
}

@test "RSS: peak line, column, --max-peak-rss, compare, green line in the SVG" {
	mk a <<-EOF
		Malloc addr=0x1000 size=100
		Rss member=anon size=3MiB
		Rss member=file size=1MiB
		Rss member=anon size=1MiB
		Exit exit_code=0
	EOF
	run mt-report "$T/a.msgpack"
	assert_success
	assert_line "peak RSS    4.00 MiB at 3 us"
	assert_line "  anon      3.00 MiB at 2 us"
	assert_line --regexp '^tree +100 B .* 0 B +4\.00 MiB$'
	run mt-report --max-peak-rss 4MiB "$T/a.msgpack"
	assert_success
	run mt-report --max-peak-rss 3.9MiB "$T/a.msgpack"
	assert_failure 1
	assert_line "mt-report: max-peak-rss: 4.00 MiB exceeds the limit of 3.90 MiB"
	[ "$(mt-report --json "$T/a.msgpack" | jq -c '[.tree.peak_rss, .tree.peak_rss_anon, .tree.peak_physical]')" = "[$((4 * MiB)),$((3 * MiB)),null]" ]
	ten_mib | mk b
	run mt-report --max-peak-rss 1GiB "$T/b.msgpack"
	assert_failure 1
	assert_line "mt-report: max-peak-rss: RSS was not recorded"
	refute_output --partial "peak RSS"
	run mt-report --compare "$T/a.msgpack" "$T/a.msgpack"
	assert_line --regexp '^peak rss +4\.00 MiB +4\.00 MiB +\+0\.0%$'
	assert_line --regexp '^peak physical +- +- +-$'
	mt-report --svg "$T/a.svg" "$T/a.msgpack" >/dev/null
	grep -q '>peak RSS 4.00 MiB at 3 us<' "$T/a.svg"
}

@test "traced: tar's allocations and bytes allocated equal valgrind's" {
	require_bpf
	require_command valgrind
	mt-trace -- tar cf /dev/null -C "$TOP" lib 2>/dev/null | mt-report --json >"$T/r.json"
	valgrind tar cf /dev/null -C "$TOP" lib 2>"$T/vg" >/dev/null
	# "total heap usage: 407 allocs, 398 frees, 102,837 bytes allocated"
	read -r allocs bytes <<<"$(sed -n 's/.*total heap usage: \([0-9,]*\) allocs, [0-9,]* frees, \([0-9,]*\) bytes allocated/\1 \2/p' "$T/vg" | tr -d ,)"
	echo "valgrind: $allocs allocs, $bytes bytes; mt: $(jq -c '[.tree.allocations, .tree.total_allocated]' "$T/r.json")" >&2
	[ -n "$allocs" ]
	[ "$(jq .tree.allocations "$T/r.json")" = "$allocs" ]
	[ "$(jq .tree.total_allocated "$T/r.json")" = "$bytes" ]
}

@test "--section: the report says so and counts only inside" {
	mk a <<-EOF
		Malloc addr=0x100000 size=1MiB
		Marker name=bench
		Malloc addr=0x200000 size=1MiB
		Malloc addr=0x300000 size=2MiB
		Marker name=bench-end
		Exit exit_code=0
	EOF
	run mt-report --section bench "$T/a.msgpack"
	assert_success
	assert_line "section     bench: 1 interval, 3 us (figures below count only inside it)"
	assert_line "peak heap   3.00 MiB at 4 us"
	run mt-report --section bench --max-peak-heap 3MiB "$T/a.msgpack"
	assert_success
	mt-reconstruct --section bench "$T/a.msgpack" >"$T/s.json"
	run mt-report --section bench "$T/s.json"
	assert_success
	assert_line "peak heap   3.00 MiB at 4 us"
	run mt-report "$T/s.json"
	assert_line --partial "section     bench:"
	run mt-report "$T/a.msgpack"
	assert_line "markers     bench x1, bench-end x1"
	mt-reconstruct "$T/a.msgpack" >"$T/all.json"
	run mt-report --section bench "$T/all.json"
	assert_failure 2
	assert_output --partial "timelines not made for --section bench"
	run mt-report --section other "$T/a.msgpack"
	assert_failure 2
	assert_output --partial 'no marker "other"'
	[ "$(mt-report --json --section bench "$T/a.msgpack" | jq -c '[.section.name, .tree.peak_heap]')" = "[\"bench\",$((3 * MiB))]" ]
	# the SVG shades the section and draws the markers
	mt-report --section bench --svg "$T/a.svg" "$T/a.msgpack" >/dev/null
	[ "$(grep -c 'fill="#fff3cc"' "$T/a.svg")" = 1 ]
	grep -q '>bench-end</text>' "$T/a.svg"
}

@test "traced: examples/section_bench: the bench section reports exactly 3 MiB" {
	require_bpf
	cc -O2 -I"$TOP/examples" "$TOP/examples/section_bench.c" -o "$T/section_bench"
	mt-trace --control "$T/ctl" --start-disabled -- "$T/section_bench" 2>/dev/null |
		mt-encode >"$T/s.msgpack"
	mt-report --json --section bench "$T/s.msgpack" >"$T/r.json"
	[ "$(jq -c '[.tree.peak_heap, .tree.allocations, .tree.total_allocated, (.section.intervals | length)]' "$T/r.json")" = "[$((3 * MiB)),3,$((3 * MiB)),1]" ]
	run mt-report --section bench --max-peak-heap 3MiB "$T/s.msgpack"
	assert_success
}

@test "traced: 10 x 1 MiB, free 5, 2 MiB: peak 10 MiB, 7 MiB live at exit" {
	require_bpf
	cat >"$T/ten.c" <<-'C'
		#include <stdlib.h>
		void *volatile sink[11];
		int main(void)
		{
			for (int i = 0; i < 10; i++)
				sink[i] = malloc(1 << 20);
			for (int i = 0; i < 5; i++)
				free(sink[i]);
			sink[10] = malloc(2 << 20);
			return 0;
		}
	C
	cc -O0 -fno-builtin "$T/ten.c" -o "$T/ten"
	mt-trace -- "$T/ten" 2>/dev/null | mt-encode >"$T/ten.msgpack"
	[ "$(mt-report --json "$T/ten.msgpack" | jq -c '[.tree.peak_heap, .tree.not_freed, .tree.allocations, .tree.frees]')" = "[$((10 * MiB)),$((7 * MiB)),11,5]" ]
	run mt-report "$T/ten.msgpack"
	assert_line --regexp '^tree +10\.0 MiB +12\.0 MiB +11 +5 '
	run mt-report --max-leaked 7MiB --max-peak-heap 10MiB "$T/ten.msgpack"
	assert_success
	run mt-report --max-leaked 6MiB "$T/ten.msgpack"
	assert_failure 1
}

@test "program names: whole in a column as wide as the longest (UTF-8), cut only past 56 characters, with an ellipsis" {
	long=$(printf 'x%.0s' $(seq 70))
	mk a <<-EOF
		Malloc addr=0x1000 size=10
		Fork pid=101 ppid=100
		Exec pid=101 path=/bin/été-très-long-nom-de-programme
		Malloc pid=101 addr=0x2000 size=5
		Exit exit_code=0
	EOF
	run mt-report "$T/a.msgpack"
	assert_line "    101 été-très-long-nom-de-programme        5 B         5 B           1           0       5 B        5 B         0 B"
	assert_line --regexp '^tree +15 B +15 B +2 '
	echo "$output" | iconv -f UTF-8 -t UTF-8 >/dev/null
	# header and rows: one width in characters
	echo "$output" | sed -n '/ peak heap  *allocated/,/^$/p' | sed '/^$/d' >"$T/table"
	[ "$("$PY" -c 'import sys; print(len({len(l.rstrip("\n")) for l in open(sys.argv[1], encoding="utf-8")}))' "$T/table")" = 1 ]
	mk b <<-EOF
		Fork pid=101 ppid=100
		Exec pid=101 path=/bin/$long
		Malloc pid=101 addr=0x2000 size=5
		Exit exit_code=0
	EOF
	run mt-report "$T/b.msgpack"
	assert_line --regexp "^    101 $(printf 'x%.0s' $(seq 55))… +5 B "
	# the JSON has the whole name
	[ "$(mt-report --json "$T/b.msgpack" | jq -r '.top_processes[] | select(.pid == 101) | .name')" = "$long" ]
}

@test "--svg: a long quiet start is left out of the time axis" {
	mk a <<-EOF
		+900ms
		Malloc addr=0x1000 size=1MiB
		+50ms
		Free addr=0x1000
		Exit exit_code=0
	EOF
	mt-report --svg "$T/a.svg" "$T/a.msgpack" >/dev/null
	grep -q '>910</text>' "$T/a.svg"
	refute grep -q '>0</text>' "$T/a.svg"
	grep -q '>time since start (ms)<' "$T/a.svg"
	# a short quiet start stays: the axis begins at 0
	mk b <<-EOF
		+5ms
		Malloc addr=0x1000 size=1MiB
		+50ms
		Exit exit_code=0
	EOF
	mt-report --svg "$T/b.svg" "$T/b.msgpack" >/dev/null
	grep -q '>0</text>' "$T/b.svg"
}

# ---- a new user's first hour (issue 14), exit statuses CI can trust (16) --

@test "--version on mt-report and mt-reconstruct" {
	run mt-report --version
	assert_success
	assert_output --regexp '^mt-report \(mt\) [0-9]+\.[0-9]+\.[0-9]+'
	run mt-reconstruct --version
	assert_success
	assert_output --regexp '^mt-reconstruct \(mt\) [0-9]+\.[0-9]+\.[0-9]+'
}

# the long options a tool's --help lists, and those its man page documents
help_options() { "$1" --help | grep -o -- '--[a-z][a-z-]*' | sort -u; }
man_options() {
	# the tag line after each .TP of the OPTIONS section
	sed -n '/^\.SH OPTIONS/,/^\.SH /p' "$TOP/man/$1.1" | sed -n '/^\.TP/{n;p}' |
		grep -o -- '\\-\\-[a-z][a-z\\-]*' | sed 's/\\-/-/g' | sort -u
}

@test "--help is complete and matches the man page, option for option" {
	for tool in mt-report mt-reconstruct; do
		run "$tool" --help
		assert_success
		assert_line --index 0 --partial "usage: $tool"
		assert_line --partial "exit status: 0 ok"
		help_options "$tool" >"$T/help"
		man_options "$tool" >"$T/man"
		# every option the tool accepts is in both
		[ "$(wc -l <"$T/help")" -ge 10 ]
		diff "$T/help" "$T/man"
		# (in $T: "-o --help" writes a file named --help)
		for o in $(cat "$T/help"); do
			run bash -c 'cd "$1" && "$2" "$3" --help' _ "$T" "$tool" "$o"
			# an unknown option would be a usage error (2); one
			# taking a value swallows --help (2 or 0 from --help)
			[ "$status" = 0 ] || [ "$status" = 2 ]
			refute_output --partial "unrecognized option"
		done
	done
	# both man pages document the one exit-status rule
	for m in mt-report mt-reconstruct; do
		grep -q 'The same rule for every mt tool: 0 ok, 1 a gate failed' "$TOP/man/$m.1"
	done
}

@test "usage errors say what was wrong" {
	ten_mib | mk a
	run mt-report a b
	assert_failure 2
	assert_line "mt-report: one FILE at a time, not 2 (a, b); --compare BASE HEAD compares two runs"
	assert_line "Try 'mt-report --help'."
	run mt-report --compare "$T/a.msgpack"
	assert_failure 2
	assert_line "mt-report: --compare BASE HEAD: HEAD is missing (the run to compare with $T/a.msgpack)"
	run mt-report --compare a b c
	assert_failure 2
	assert_line --partial "one HEAD, not 2 files (b, c)"
	run mt-report --frobnicate
	assert_failure 2
	assert_line "mt-report: unrecognized option '--frobnicate'"
	assert_line "Try 'mt-report --help'."
	run mt-report --max-growth 5% "$T/a.msgpack"
	assert_failure 2
	assert_line --partial "--max-growth needs --compare BASE HEAD"
	run mt-reconstruct a b
	assert_failure 2
	assert_line "mt-reconstruct: one FILE at a time, not 2 (a, b)"
	run mt-reconstruct --max-points 2
	assert_failure 2
	assert_line --partial "--max-points: at least 4, not 2"
}

@test "a closed pipe: exit 2, quietly, never SIGPIPE (141)" {
	ten_mib | mk a
	# the reader is gone before the tool writes: no race with its exit
	"$PY" - "$T/a.msgpack" <<-'EOF' >"$T/st"
		import os, subprocess, sys
		r, w = os.pipe()
		os.close(r)
		for cmd in (["mt-report", sys.argv[1]],
		            ["mt-report", "--json", sys.argv[1]],
		            ["mt-report", "--svg", "-", sys.argv[1]],
		            ["mt-report", "--compare", sys.argv[1], sys.argv[1]],
		            ["mt-reconstruct", sys.argv[1]]):
		    p = subprocess.run(cmd, stdout=w, stderr=subprocess.PIPE)
		    print(p.returncode, len(p.stderr))
	EOF
	cat "$T/st" >&2
	[ "$(sort -u "$T/st")" = "2 0" ]
	# any other write error has a message
	run mt-report -o /dev/full "$T/a.msgpack"
	assert_failure 2
	assert_line "mt-report: /dev/full: No space left on device"
	run mt-reconstruct -o /dev/full "$T/a.msgpack"
	assert_failure 2
	assert_line "mt-reconstruct: /dev/full: No space left on device"
}

@test "sizes near 2^64 are unsigned: 16.0 EiB, never -1 B" {
	mk a <<-EOF
		Malloc addr=0x1000 size=18446744073709551615
		Exit exit_code=0
	EOF
	run mt-report "$T/a.msgpack"
	assert_success
	assert_line "peak heap   16.0 EiB at 1 us"
	assert_line --regexp '^tree +16\.0 EiB +16\.0 EiB +1 +0 '
	refute_output --partial -- "-1 B"
}

@test "--compare: no -0.0%, a limit per metric with --max-growth" {
	mk base <<-EOF
		Malloc addr=0x1000 size=100000
		Mmap addr=0x7f0000000000 size=1MiB
		Exit exit_code=0
	EOF
	mk head <<-EOF
		Malloc addr=0x1000 size=99999
		Mmap addr=0x7f0000000000 size=1100KiB
		Exit exit_code=0
	EOF
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack"
	assert_success
	assert_line --regexp '^peak heap +97\.7 KiB +97\.7 KiB +-0\.001%$'
	refute_output --partial -- "-0.0%"
	# peak mapped grew 7.4%: a limit for it alone, the rest at 0%
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" --max-growth 0,peak_mapped=8%
	assert_success
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" --max-growth peak_mapped=7%
	assert_failure 1
	assert_line "mt-report: peak mapped grew by +7.4% (limit 7%)"
	assert_line --regexp '^peak mapped .* +\+7\.4%  FAIL$'
	run mt-report --compare "$T/head.msgpack" "$T/base.msgpack" --max-growth 5%,peak_heap=0
	assert_failure 1
	assert_line "mt-report: peak heap grew by +0.001% (limit 0%)"
	[ "$(mt-report --json --compare "$T/base.msgpack" "$T/head.msgpack" --max-growth peak_mapped=7% 2>/dev/null |
		jq -c '[.ok, (.metrics[] | select(.metric == "peak_mapped") | [.max_growth_pct, .ok])]')" = '[false,[7,false]]' ]
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" --max-growth peak_hep=2%
	assert_failure 2
	assert_line --partial 'unknown metric "peak_hep"'
	run mt-report --compare "$T/base.msgpack" "$T/head.msgpack" --max-growth peak_rss=lots
	assert_failure 2
	assert_line "mt-report: --max-growth: not a percentage (e.g. 5%): lots"
}

@test "not freed: named what it is in the table, JSON, gate and list" {
	ten_mib | mk a
	run mt-report "$T/a.msgpack"
	assert_line --regexp '^ +peak heap +allocated +allocs +frees +avg size +not freed +peak mapped$'
	refute_output --partial leak
	assert_line "largest blocks not freed (still allocated at exit, exec or the end of the trace)"
	# the list's length: --leaks N
	run mt-report --leaks 2 "$T/a.msgpack"
	[ "$(echo "$output" | sed -n '/^largest blocks not freed/,$p' | grep -c ' exit$')" = 2 ]
	run mt-report --leaks all "$T/a.msgpack"
	[ "$(echo "$output" | sed -n '/^largest blocks not freed/,$p' | grep -c ' exit$')" = 7 ]
	run mt-report --leaks 0 "$T/a.msgpack"
	refute_output --partial "largest blocks"
	[ "$(mt-report --json --leaks 3 "$T/a.msgpack" | jq -c '[.largest_not_freed[].size]')" = "[$((2 * MiB)),$MiB,$MiB]" ]
	grep -q 'in use at exit' "$TOP/man/mt-report.1"
	grep -q 'still reachable' "$TOP/man/mt-report.1"
}

@test "one of a thing is singular: 1 event was lost, 1 free, 1 more process" {
	{
		echo "Lost count=1"
		ten_mib
		echo "Free addr=0x77000"
		echo "Fork pid=200 ppid=100"
		echo "Fork pid=201 ppid=100"
	} | mk a
	run mt-report --top 4 "$T/a.msgpack"
	assert_success
	assert_line "lost events: 1 (a ring buffer was full: the figures miss them; --strict fails on any)"
	assert_line "unknown     1 free of addresses never allocated in the trace"
	assert_line "(1 more process: --top all lists all)"
	run mt-report --allow-incomplete --strict "$T/a.msgpack"
	assert_failure 1
	assert_line "mt-report: strict: 1 event was lost"
	run mt-report --max-peak-heap 1GiB "$T/a.msgpack"
	assert_failure 2
	assert_line "mt-report: incomplete trace: $T/a.msgpack: 1 event was lost, the figures the gates check miss them (--allow-incomplete accepts it)"
	mt-report --allow-incomplete --svg "$T/a.svg" "$T/a.msgpack" >/dev/null
	grep -q '>1 event lost<' "$T/a.svg"
}

@test "lost events and an incomplete trace come first, in every mode" {
	ten_mib | sed '1i Lost count=4' | mk a --no-trailer
	run bash -c 'mt-report --allow-incomplete "$1" 2>/dev/null' _ "$T/a.msgpack"
	assert_line --index 0 --partial "incomplete trace: $T/a.msgpack: byte"
	assert_line --index 2 "lost events: 4 (a ring buffer was full: the figures miss them; --strict fails on any)"
	run bash -c 'mt-report --allow-incomplete --compare "$1" "$1" 2>/dev/null' _ "$T/a.msgpack"
	assert_line --index 2 --partial "lost events in base: 4"
	assert_line --index 5 --partial "lost events in head: 4"
	[ "$(mt-report --allow-incomplete --json "$T/a.msgpack" | jq -c '[keys_unsorted[0:3], .lost_events]')" = '[["complete","incomplete_reason","lost_events"],4]' ]
	mt-report --allow-incomplete --svg "$T/a.svg" "$T/a.msgpack" >/dev/null
	grep -q '>incomplete trace<' "$T/a.svg"
	grep -q '>4 events lost<' "$T/a.svg"
}

@test "JSON: indented on a terminal, one line otherwise, the same rule in both tools" {
	ten_mib | mk a
	for tool in "mt-report --json" mt-reconstruct; do
		[ "$($tool "$T/a.msgpack" | wc -l)" = 1 ]
		[ "$($tool --pretty "$T/a.msgpack" | wc -l)" -gt 20 ]
		$tool -o "$T/o.json" "$T/a.msgpack"
		[ "$(wc -l <"$T/o.json")" = 1 ]
		# a terminal (script's pty) gets it indented; --compact wins
		[ "$(script -qec "$tool $T/a.msgpack" /dev/null | wc -l)" -gt 20 ]
		[ "$(script -qec "$tool --compact $T/a.msgpack" /dev/null | wc -l)" = 1 ]
	done
	mt-report -o "$T/r.txt" "$T/a.msgpack"
	grep -q '^command     prog$' "$T/r.txt"
}

@test "a terminal on stdin: the tools say they are waiting" {
	for tool in mt-report mt-reconstruct; do
		timeout 1 script -qec "$tool" /dev/null </dev/null >"$T/out" || true
		grep -q "^$tool: reading a trace from standard input (a terminal): pipe one in or name a FILE" "$T/out"
	done
	# not when the input is a pipe
	ten_mib | mk a
	mt-report <"$T/a.msgpack" 2>"$T/err" >/dev/null
	[ ! -s "$T/err" ]
}

@test "durations in one style; the command line shell-quoted" {
	mk a --command "it's a b+c" <<-EOF
		+1500ms
		Malloc addr=0x1000 size=10
		+123s
		Exit exit_code=0
	EOF
	run mt-report "$T/a.msgpack"
	assert_line "command     'it'\\''s' a b+c"
	assert_line "duration    125 s"
	assert_line "peak heap   10 B at 1.5 s"
	[ "$(mt-report --json "$T/a.msgpack" | jq -r .command_line)" = "'it'\\''s' a b+c" ]
}

@test "make install: tools, man pages, mt_section.h and bash completion" {
	make -s -C "$TOP" OUTPUT="$MT_BUILD" install DESTDIR="$T/root" PREFIX=/usr >/dev/null
	R="$T/root/usr"
	for t in mt-trace mt-encode mt-reconstruct mt-report; do
		[ -x "$R/bin/$t" ]
		[ -f "$R/share/man/man1/$t.1" ]
		# bash-completion loads completions/NAME for the command NAME
		[ "$(readlink "$R/share/bash-completion/completions/$t")" = mt ]
	done
	[ -f "$R/share/man/man5/mt-format.5" ]
	cmp "$TOP/examples/mt_section.h" "$R/include/mt_section.h"
	# the installed header is an include file a program builds with
	printf '#include <mt_section.h>\nint main(void) { return mt_marker("x"); }\n' >"$T/m.c"
	cc -I"$R/include" "$T/m.c" -o "$T/m"
	"$T/m"
	cmp "$TOP/completion/mt.bash" "$R/share/bash-completion/completions/mt"
}

# complete WORDS...: what the completion offers for the last word
complete_words() {
	bash -c 'PATH="$1:$PATH"; source "$2"; shift 2
		COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _mt
		printf "%s\n" "${COMPREPLY[@]}"' _ "$MT_BIN" "$TOP/completion/mt.bash" "$@"
}

@test "bash completion: options from each tool's --help, values, the command after --" {
	run bash -c 'source "$1"; complete -p mt-trace mt-encode mt-reconstruct mt-report' _ "$TOP/completion/mt.bash"
	assert_success
	assert_line "complete -F _mt mt-report"
	assert_line "complete -F _mt mt-trace"
	run complete_words mt-report --max-g
	assert_output "--max-growth"
	run complete_words mt-reconstruct --pr
	assert_output "$(printf -- '--pretty\n--process-series')"
	run complete_words mt-encode --js
	assert_output "--jsonl"
	run complete_words mt-trace --track-allocators = f
	assert_output "false"
	run complete_words mt-report --top ""
	assert_output "all"
	# a size: nothing to offer, never file names
	run complete_words mt-report --max-peak-heap ""
	assert_output ""
	touch "$T/run.msgpack"
	run complete_words mt-report --svg "$T/run.m"
	assert_output "$T/run.msgpack"
	run complete_words mt-report "$T/run.m"
	assert_output "$T/run.msgpack"
	# after --, a command
	mkdir "$T/bin"
	printf '#!/bin/sh\n' >"$T/bin/mtdemo-cmd"
	chmod +x "$T/bin/mtdemo-cmd"
	PATH="$T/bin:$PATH" run complete_words mt-trace -v -- mtdemo-c
	assert_output "mtdemo-cmd"
	# values of the options that take a name
	run complete_words mt-report --sort ""
	assert_output "$(printf '%s\n' peak allocated count not-freed)"
	run complete_words mt-report --flamegraph-of n
	assert_output "not-freed"
	run complete_words mt-report --space ""
	assert_output "$(printf '%s\n' heap mapped)"
	# every option --help lists is offered, once
	for t in mt-trace mt-encode mt-reconstruct mt-report; do
		diff <("$MT_BIN/$t" --help | grep -oE -- '--[a-z][a-z-]*' | sort -u) \
			<(complete_words "$t" - | sort)
	done
}

@test "traced: make demo traces the real python3 behind a shim, and says which" {
	require_bpf
	real=$(/usr/bin/python3 -c 'import os, sys; print(os.path.realpath(sys.executable))')
	# a pyenv-like shim first on PATH: a shell script that runs python3
	mkdir "$T/shims"
	printf '#!/bin/sh\nexec /usr/bin/python3 "$@"\n' >"$T/shims/python3"
	chmod +x "$T/shims/python3"
	PATH="$T/shims:$PATH" MT_BIN="$MT_BIN" MT_DEMO_OUT="$T/demo.msgpack" \
		"$TOP/examples/demo.sh" >"$T/out" 2>"$T/err"
	grep -q "^demo: tracing $real (python3 on PATH: $T/shims/python3)$" "$T/err"
	[ "$(mt-report --json "$T/demo.msgpack" | jq -r '.command[0]')" = "$real" ]
	grep -q "^command     $real -c " "$T/out"
	# one process: the interpreter, no shell in front of it
	[ "$(mt-report --json "$T/demo.msgpack" | jq .processes)" = 1 ]
}

# svg_clashes SVG: every pair of peak labels that overlap, and every label
# a drawn line runs through, computed from the SVG's own coordinates (text
# boxes 7 px a character at 12 px, as wide as sans-serif ever is)
svg_clashes() {
	"$PY" - "$1" <<-'PYEOF'
		import re, sys, xml.etree.ElementTree as E
		ns = "{http://www.w3.org/2000/svg}"
		root = E.parse(sys.argv[1]).getroot()
		boxes = []
		for t in root.iter(ns + "text"):
		    if (t.text or "").startswith("peak "):
		        x, y = float(t.get("x")), float(t.get("y"))
		        w = 7 * len(t.text)
		        if t.get("text-anchor") == "end":
		            x -= w
		        boxes.append((t.text, x, y - 11, x + w, y + 2))
		segs = []
		for p in root.iter(ns + "path"):
		    toks = re.findall(r"[MHV]|-?[0-9.]+", p.get("d"))
		    x = y = 0.0
		    i = 0
		    while i < len(toks):
		        c = toks[i]
		        if c == "M":
		            x, y = float(toks[i + 1]), float(toks[i + 2]); i += 3
		        elif c == "H":
		            nx = float(toks[i + 1]); segs.append((x, y, nx, y)); x = nx; i += 2
		        elif c == "V":
		            ny = float(toks[i + 1]); segs.append((x, y, x, ny)); y = ny; i += 2
		def meet(a, b):
		    return a[1] < b[3] and b[1] < a[3] and a[2] < b[4] and b[2] < a[4]
		for i, a in enumerate(boxes):
		    for b in boxes[i + 1:]:
		        if meet(a, b):
		            print("overlap: %s / %s" % (a[0], b[0]))
		    for (x0, y0, x1, y1) in segs:
		        s = (None, min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
		        if meet(a, s) or (s[1] == s[3] and a[1] < s[1] < a[3] and a[2] < s[4] and s[2] < a[4]) \
		           or (s[2] == s[4] and a[2] < s[2] < a[4] and a[1] < s[3] and s[1] < a[3]):
		            print("line through: %s" % a[0]); break
	PYEOF
}

@test "--svg: peak labels clear of each other and of every line; a start tick; the section named" {
	# heap and mapped peak together: their labels used to overlap, and
	# the heap's crossed the mapped line
	mk a <<-EOF
		Malloc addr=0x100000 size=2MiB
		Mmap addr=0x7f0000000000 size=2MiB
		+10us
		Free addr=0x100000
		Munmap addr=0x7f0000000000 size=2MiB
		+10us
		Exit exit_code=0
	EOF
	mt-report --svg "$T/a.svg" "$T/a.msgpack" >/dev/null
	[ "$(grep -c '>peak ' "$T/a.svg")" = 2 ]
	run svg_clashes "$T/a.svg"
	assert_output ""
	# a section late in the run: the axis starts at it, with a tick
	mk s <<-EOF
		Malloc addr=0x100000 size=1MiB
		+200us
		Marker name=bench
		Malloc addr=0x200000 size=1MiB
		Mmap addr=0x7f0000000000 size=2MiB
		Malloc addr=0x300000 size=2MiB
		+50us
		Free addr=0x300000
		+20us
		Marker name=bench-end
		+100us
		Exit exit_code=0
	EOF
	mt-report --section bench --svg "$T/s.svg" "$T/s.msgpack" >/dev/null
	run svg_clashes "$T/s.svg"
	assert_output ""
	# (a round number: 202 us, the section's start, was labelled so)
	grep -q '<text x="90.0" y="550">200</text>' "$T/s.svg"
	grep -q '>section bench</text>' "$T/s.svg"
	# the checker does see a clash where there is one
	sed '/>peak heap /p' "$T/s.svg" >"$T/bad.svg"
	run svg_clashes "$T/bad.svg"
	assert_output --partial "overlap: peak heap"
	sed 's/\(>peak heap [^<]*\)/\1 and much more text to run into a line/' "$T/a.svg" >"$T/bad.svg"
	run svg_clashes "$T/bad.svg"
	assert_output --partial "line through: peak heap"
}

@test "--svg: mapped memory many times the heap is not drawn (the legend says so); values on hover" {
	# 100 MiB mapped, 1 MiB of heap: on one axis the heap would be a
	# line along the bottom
	mk a <<-EOF
		Mmap addr=0x7f0000000000 size=100MiB
		+1ms
		Malloc addr=0x1000 size=1MiB
		+1ms
		Free addr=0x1000
		+1ms
		Exit exit_code=0
	EOF
	mt-report --svg "$T/a.svg" "$T/a.msgpack" >/dev/null
	refute grep -q 'stroke="#1f77b4"' "$T/a.svg"
	grep -q '>mapped, tree (peak 100 MiB: 100 times the rest, not drawn)<' "$T/a.svg"
	grep -q '>memory (KiB)<' "$T/a.svg"
	grep -q '<title>heap: peak 1.00 MiB at 1 ms, at the end 0 B</title>' "$T/a.svg"
	# hover: 100 columns over the plot, each with what the series held
	[ "$(grep -c '<rect [^>]*><title>' "$T/a.svg")" = 100 ]
	grep -q '<title>1.5 ms - 1.53 ms: heap 1.00 MiB, mapped 100 MiB</title>' "$T/a.svg"
	grep -q '<title>2.97 ms - 3 ms: heap 0 B, mapped 100 MiB</title>' "$T/a.svg"
	# 2 MiB of heap, 4 MiB mapped: one axis for both
	mk b <<-EOF
		Mmap addr=0x7f0000000000 size=4MiB
		Malloc addr=0x1000 size=2MiB
		+1ms
		Exit exit_code=0
	EOF
	mt-report --svg "$T/b.svg" "$T/b.msgpack" >/dev/null
	grep -q 'stroke="#1f77b4"' "$T/b.svg"
	grep -q '>mapped, tree (peak 4.00 MiB)<' "$T/b.svg"
}

@test "--svg: a line for each of the heaviest processes besides the tree's" {
	"$PY" - >"$T/s" <<-'EOF'
		for p in range(4):
		    pid = 200 + p
		    print("Fork pid=%d ppid=100" % pid)
		    print("Exec pid=%d path=/usr/bin/w%d" % (pid, p))
		    print("Malloc pid=%d addr=0x1000 size=%d" % (pid, (p + 1) << 20))
		    print("+100us")
		    print("Free pid=%d addr=0x1000" % pid)
		    print("Exit pid=%d exit_code=0" % pid)
		print("Exit exit_code=0")
	EOF
	mk a <"$T/s"
	mt-report --top 2 --svg "$T/a.svg" "$T/a.msgpack" >/dev/null
	grep -q '>203 w3: heap (peak 4.00 MiB)</text>' "$T/a.svg"
	grep -q '>202 w2: heap (peak 3.00 MiB)</text>' "$T/a.svg"
	refute grep -q '>201 w1: heap' "$T/a.svg"
	# the tree's heap (no mapping: no mapped line) and two processes'
	[ "$(grep -c '<path .*stroke-width="1.0"' "$T/a.svg")" = 2 ]
	[ "$(grep -c '<path .*stroke-width="1.5"' "$T/a.svg")" = 1 ]
	mt-report --top 0 --svg "$T/b.svg" "$T/a.msgpack" >/dev/null
	[ "$(grep -c '<path .*stroke-width="1.0"' "$T/b.svg")" = 0 ]
	require_chromium
	screenshot "$T/a.svg" "$T/a.png"
	read -r size colors permille orange brown <<<"$("$PY" "$TOP/tests/lib/pngstat.py" "$T/a.png" ff7f0e 8c564b)"
	echo "orange $orange, brown $brown" >&2
	[ "$orange" -gt 100 ]
	[ "$brown" -gt 100 ]
}

@test "a child forked without exec is named after its parent's program, also when the parent is not listed" {
	# 100 runs the command, 101 forks from it without exec and execs
	# nothing; 102 execs, 103 forks from 102 without exec
	mk a --command "./parent-prog --flag" <<-EOF
		Malloc addr=0x1000 size=1
		Fork pid=101 ppid=100
		Malloc pid=101 addr=0x2000 size=10MiB
		Fork pid=102 ppid=100
		Exec pid=102 path=/usr/bin/worker
		Fork pid=103 ppid=102
		Malloc pid=103 addr=0x3000 size=5MiB
		Exit exit_code=0
	EOF
	mt-reconstruct "$T/a.msgpack" >"$T/a.json"
	[ "$(jq -c '[.processes[] | [.pid, .program]]' "$T/a.json")" = '[[100,"./parent-prog"],[101,"./parent-prog"],[102,"/usr/bin/worker"],[103,"/usr/bin/worker"]]' ]
	# --top 2: the parents (100, 102) are not in the document reconstructed
	# in-process, the children still have their names
	run mt-report --top 2 "$T/a.msgpack"
	assert_line --regexp '^ +101 parent-prog +10\.0 MiB '
	assert_line --regexp '^ +103 worker +5\.00 MiB '
	[ "$(mt-report --json --top 2 "$T/a.msgpack" | jq -c '[.top_processes[].name]')" = '["parent-prog","worker"]' ]
}

@test "a progress line on a terminal (stderr) once a run takes more than a second" {
	require_built "$MT_BUILD/tests/mt-gen"
	"$MT_BUILD/tests/mt-gen" --events 300000 --seed 5 -o "$T/g.raw"
	size=$(stat -c %s "$T/g.raw")
	head -c $((size / 4)) "$T/g.raw" >"$T/head"
	tail -c +$((size / 4 + 1)) "$T/g.raw" >"$T/tail"
	cat "$T/head" "$T/tail" | cmp - "$T/g.raw"
	# the input stalls for 1.5 s after its first quarter: the run is
	# longer than a second, with events still to come.  The four runs
	# (each tool, stderr a terminal or not) stall side by side.
	local tool pids=()
	for tool in mt-reconstruct mt-report; do
		script -qec "sh -c '(cat $T/head; sleep 1.5; cat $T/tail) | $tool -o /dev/null'" /dev/null >"$T/$tool.tty" &
		pids+=($!)
		(cat "$T/head"; sleep 1.5; cat "$T/tail") |
			$tool -o /dev/null 2>"$T/$tool.err" &
		pids+=($!)
	done
	for pid in "${pids[@]}"; do
		wait "$pid"
	done
	for tool in mt-reconstruct mt-report; do
		grep -q "$tool: [0-9,]* events, [0-9.]* [KM]iB read, [0-9.]* s" "$T/$tool.tty"
		# and the line is erased at the end
		grep -q $'\r\033\[K' "$T/$tool.tty"
		# stderr not a terminal: no progress
		[ ! -s "$T/$tool.err" ]
	done
}

@test "timelines: not_freed in the document; one of an earlier mt-reconstruct (leaks) still reports" {
	ten_mib | mk a
	mt-reconstruct "$T/a.msgpack" >"$T/a.json"
	[ "$(jq -c '[.tree.not_freed.bytes, .tree.not_freed.count, has("leaks"), (.tree | has("leaks"))]' "$T/a.json")" = "[$((7 * MiB + 300)),7,false,false]" ]
	[ "$(jq -c '[.processes[].not_freed.bytes]' "$T/a.json")" = "[$((7 * MiB)),300]" ]
	# the key as mt-reconstruct wrote it before
	jq -c '.tree |= (.leaks = .not_freed | del(.not_freed)) |
		.processes |= map(.leaks = .not_freed | del(.not_freed))' "$T/a.json" >"$T/old.json"
	grep -q '"leaks"' "$T/old.json"
	mt-report --json "$T/a.json" | jq -c 'del(.input_format)' >"$T/1"
	mt-report --json "$T/old.json" | jq -c 'del(.input_format)' >"$T/2"
	diff "$T/1" "$T/2"
	[ "$(jq .tree.not_freed "$T/2")" = $((7 * MiB + 300)) ]
}
