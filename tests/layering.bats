#!/usr/bin/env bats
# The dependency rule between lib/'s folders (docs/ARCHITECTURE.md):
# tests/layering.sh finds no upward include in this checkout, and finds
# each kind of one put into a copy of lib/.

load helpers

setup() {
	T="$BATS_TEST_TMPDIR"
}

@test "lib/ keeps its dependency rule: no include reaches a folder above" {
	run "$TOP/tests/layering.sh"
	assert_success
	assert_output ""
}

# add_include FILE HEADER: the first include of FILE preceded by HEADER's
add_include() {
	sed -i "0,/^#include \"/s//#include \"$2\"\n#include \"/" "$1"
}

@test "layering.sh: each kind of upward include is caught, and named" {
	cp -r "$TOP/lib" "$T/lib"
	run "$TOP/tests/layering.sh" "$T/lib"
	assert_success
	add_include "$T/lib/format/input.c" mt_reconstruct.h
	add_include "$T/lib/analysis/sites.c" mt_tracer.h
	add_include "$T/lib/capture/writer/tracer_drain.c" mt_input.h
	add_include "$T/lib/preload/mt_preload.c" mt_user.h
	add_include "$T/lib/common/human.c" mt_raw.h
	run "$TOP/tests/layering.sh" "$T/lib"
	assert_failure 1
	assert_line --partial "lib/format/input.c includes mt_reconstruct.h (lib/analysis)"
	assert_line --partial "lib/analysis/sites.c includes mt_tracer.h (lib/capture/session)"
	assert_line --partial "lib/capture/writer/tracer_drain.c includes mt_input.h (lib/format)"
	assert_line --partial "lib/preload/mt_preload.c includes mt_user.h (lib/capture/session)"
	assert_line --partial "lib/common/human.c includes mt_raw.h (lib/format)"
	[ "${#lines[@]}" -eq 5 ]
}

@test "layering.sh: a header name in two folders, a folder in no layer are caught" {
	cp -r "$TOP/lib" "$T/lib"
	printf '#pragma once\n' >"$T/lib/report/mt_job.h"
	mkdir "$T/lib/extra" && printf '#include "mt_raw.h"\n' >"$T/lib/extra/x.c"
	run "$TOP/tests/layering.sh" "$T/lib"
	assert_failure 1
	assert_line "layering: mt_job.h is in lib/capture/session and lib/report"
	assert_line --partial "lib/extra/x.c: folder extra is in no layer"
}
