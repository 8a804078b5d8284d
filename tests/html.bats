#!/usr/bin/env bats
# mt-report --html (issue 35): one self-contained page, checked as a
# browser shows it.  Headless Chromium (make deps) opens the pages, runs
# their script and dumps their DOM; tests/lib/html_dom.py reads what each
# page shows.  The run is an artifact made by hand (tests/lib/mkartifact.py)
# whose stacks point into tests/fixtures/sym/inlined.c, as in
# profiles.bats and sites.bats, so every value is known by construction.
# Chromium starts in 5-9 s on a busy machine: every page and view of the
# artifact is read by one Chromium, once for the file (setup_file).

load helpers
load lib/inlined

# views DIR PAGE[#FRAGMENT]...: each page as a browser shows it after its
# script ran, into DIR/view.N.json (html_dom.py), N from 0: the pages in
# frames of one page, each frame's DOM copied out when it has loaded
# (the load event of the page of frames waits for theirs)
views() {
	local dir=$1 u
	shift
	{
		printf '<!DOCTYPE html><html><body><script>\nvar urls = ['
		for u; do printf '"file://%s",' "$u"; done
		printf '];\n'
		cat <<-'EOF'
			urls.forEach(function (u, i) {
			  var f = document.createElement("iframe");
			  f.onload = function () {
			    var p = document.createElement("pre");
			    p.id = "view-" + i;
			    p.textContent = f.contentDocument.documentElement.outerHTML;
			    document.body.append(p);
			  };
			  f.src = u;
			  document.body.append(f);
			});
		EOF
		printf '</script></body></html>\n'
	} >"$dir/views.html"
	chromium --headless --no-sandbox --disable-gpu --no-first-run \
		--disable-background-networking --disable-component-update \
		--disable-sync --user-data-dir="$(mktemp -d "$dir/chr.XXXX")" \
		--allow-file-access-from-files \
		--dump-dom "file://$dir/views.html" 2>/dev/null >"$dir/views.dom"
	"$PY" "$TOP/tests/lib/html_dom.py" --views "$dir/views.dom" "$dir/view"
}

# The artifact, its page, its --json, and the page seen in each view the
# tests below read (view.N.json); the page of a run with markup in its
# command line and no stacks (odd.html, view.5.json).
setup_file() {
	local D="$BATS_FILE_TMPDIR"
	command -v chromium >/dev/null || return 0 # the tests skip or fail
	[ -x "$MT_FIXTURES/sym/inlined" ] || return 0
	chain_artifact "$D/run.msgpack"
	mt-report --html "$D/run.html" --json --compact "$D/run.msgpack" \
		>"$D/facts.json"
	"$PY" "$TOP/tests/lib/mkartifact.py" --command '</script><b>x</b>' \
		>"$D/odd.msgpack" <<-EOF
		Malloc addr=0x1000 size=64
		Exit exit_code=0
	EOF
	mt-report --html "$D/odd.html" -o /dev/null "$D/odd.msgpack"
	views "$D" "$D/run.html" \
		"$D/run.html#search=%5E(main%7Cmake_table)%24" \
		"$D/run.html#metric=1&search=main" \
		"$D/run.html#zoom=main;make_table" \
		"$D/run.html#t=2500000,7500000" \
		"$D/odd.html"
}

setup() {
	T="$BATS_TEST_TMPDIR"
	D="$BATS_FILE_TMPDIR"
	require_built "$MT_FIXTURES/sym/inlined"
	require_command chromium
}

@test "--html: the summary shows --json's numbers, as the text report words them" {
	cp "$D/view.0.json" "$T/dom.json"
	cp "$D/facts.json" "$T/facts.json"
	run jq -r .ready "$T/dom.json"
	assert_output true
	# every number of the summary is --json's
	run jq -r '.summary | to_entries[] | select(.value.v != null)
		| "\(.key)=\(.value.v)"' "$T/dom.json"
	assert_success
	expected=$(jq -r '.tree as $t | "duration_ns=\(.duration_ns)",
		"processes=\(.processes)", "events=\(.events)",
		"lost_events=\(.lost_events)", "peak_heap=\($t.peak_heap)",
		"total_allocated=\($t.total_allocated)",
		"allocations=\($t.allocations)", "frees=\($t.frees)",
		"reallocs=\($t.reallocs)", "realloc_frees=\($t.realloc_frees)",
		"not_freed=\($t.not_freed)",
		"not_freed_blocks=\($t.not_freed_blocks)",
		"temporary_allocations=\($t.temporary_allocations)",
		"peak_mapped=\($t.peak_mapped)"' "$T/facts.json")
	assert_output "$expected"
	# known by construction, and worded as the text report words them
	run jq -r '.summary | [.peak_heap.v, .peak_heap.text, .allocations.v,
		.frees.v, .not_freed.v, .duration_ns.text] | @tsv' "$T/dom.json"
	assert_output "$(printf '3200\t3.12 KiB\t5\t2\t300\t10.0 ms')"
	run mt-report "$D/run.msgpack"
	assert_output --partial "peak heap   3.12 KiB at 5 ms"
	# the top sites and the process, from the same facts
	run jq -c '[.sites[] | .[1:5]], [.procs[] | .[0:8]]' "$T/dom.json"
	assert_output "$(printf '%s\n' \
		'[["3000","3000","1","0"],["200","300","3","200"],["0","100","1","100"]]' \
		'[["100","","prog","3200","3400","5","2","300"]]')"
}

@test "--html: the flame graph has the run's frames, search marks them, a click's zoom from the address" {
	cp "$D/view.0.json" "$T/dom.json"
	# every frame of --folded, root first, each once
	run jq -r '[.flame[].name] | join(" ")' "$T/dom.json"
	assert_output "all [truncated] 0x7f0000001000 main make_table fill_row new_cell"
	run jq -r '[.flame[] | select(.match)] | length' "$T/dom.json"
	assert_output 0
	# search: the frames that match, and what they hold (main and
	# make_table: main holds 200 B at the peak through make_table, the
	# 100 B of main alone were allocated after it)
	cp "$D/view.1.json" "$T/dom.json"
	run jq -r '[.flame[] | select(.match) | .name] | join(" ")' "$T/dom.json"
	assert_output "main make_table"
	run jq -r '.status | "\(.frames) \(.value) \(.text)"' "$T/dom.json"
	assert_output "2 200 total 3.12 KiB; matched 2 frames, 200 B (6.3%)"
	# weighed by bytes allocated (metric 1): main holds 400 B
	cp "$D/view.2.json" "$T/dom.json"
	run jq -r '.status | "\(.frames) \(.value)"' "$T/dom.json"
	assert_output "1 400"
	# zoomed on make_table: its callers above (faded), nothing else
	cp "$D/view.3.json" "$T/dom.json"
	run jq -r '[.flame[] | "\(.name):\(.above)"] | join(" ")' "$T/dom.json"
	assert_output "all:true main:true make_table:false fill_row:false new_cell:false"
}

@test "--html: the timeline's ticks are round numbers, a time range from the address" {
	cp "$D/view.0.json" "$T/dom.json"
	run jq -c '.series, .xticks, .yticks' "$T/dom.json"
	assert_output "$(printf '%s\n' '["heap"]' '["0","2","4","6","8","10"]' \
		'["0 KiB","1 KiB","2 KiB","3 KiB"]')"
	# 2.5 ms to 7.5 ms: the heap's 200 B .. 3.13 KiB, ticks from a round 3
	cp "$D/view.4.json" "$T/dom.json"
	run jq -c '.xticks' "$T/dom.json"
	assert_output '["3","4","5","6","7"]'
}

@test "--html: nothing is fetched (no src, link, import or remote url), the data cannot end its script" {
	# a command line with markup in it: in the page's title and in its
	# data, it must not close the script nor open a tag
	cp "$D/odd.html" "$T/odd.html"
	run grep -ciE '<script[^>]* src=|<link|<img|@import|<iframe' "$T/odd.html"
	assert_output 0
	# the one address in the page is SVG's namespace (a name, not fetched)
	run grep -oE '(https?|ftp)://[^"'"'"' )]*' "$T/odd.html"
	assert_output "http://www.w3.org/2000/svg"
	run grep -c '</script>' "$T/odd.html"
	assert_output 2
	cp "$D/view.5.json" "$T/dom.json"
	run jq -r '.ready, .summary.peak_heap.v' "$T/dom.json"
	assert_output "$(printf 'true\n64')"
	run jq -r .heading "$T/dom.json"
	assert_output "mt report: '</script><b>x</b>'"
	# no stacks: no flame graph, no sites, the rest is there
	run jq -c '.flame, .sites' "$T/dom.json"
	assert_output "$(printf '[]\n[]')"
}

@test "--html of a traced run: heap, RSS and the process in the page" {
	require_bpf
	require_built "$MT_FIXTURES/stacks/stacks"
	mt-trace --stacks -o "$T/s.raw" -- "$MT_FIXTURES/stacks/stacks" direct \
		>/dev/null
	mt-report --html "$T/s.html" --json --compact "$T/s.raw" >"$T/facts.json"
	views "$T" "$T/s.html#search=stk_"
	cp "$T/view.0.json" "$T/dom.json"
	run jq -r '.ready, (.series | join(" ")), .summary.peak_heap.v' \
		"$T/dom.json"
	assert_output "$(printf 'true\nheap rss rss_anon\n4321')"
	run jq -r '.summary.peak_rss.v' "$T/dom.json"
	assert_output "$(jq .tree.peak_rss "$T/facts.json")"
	# stk_leaf and stk_mid (tests/fixtures/stacks/libstk.c) hold the
	# one block of 4,321 B
	run jq -r '([.flame[] | select(.match) | .name] | join(" ")),
		.status.value' "$T/dom.json"
	assert_output "$(printf 'stk_mid stk_leaf\n4321')"
	run jq -r '.procs[0][2]' "$T/dom.json"
	assert_output --partial "stacks"
}
