# mt - memory tracking for any Linux command.  One entry point:
#   make            build tools into build/bin
#   make deps       install the Debian packages the build and tests need
#   make test       run the whole test suite (needs root for eBPF tests)
#   make test-stacks  the whole suite again with call stacks on (MT_STACKS=1)
#   make check-asan C unit tests and offline stages under ASan + UBSan
#   make fuzz       run the libFuzzer targets for a short while
#   make bench      run the benchmarks with hyperfine
#   make install    PREFIX=/usr/local DESTDIR= (tools, man pages, mt_section.h,
#                   bash completion)
# V=1 shows the full commands.

OUTPUT ?= build
# The one version of mt (every tool's --version); the git revision is added
# when built from a git checkout.
MT_VERSION := 0.4.0
PREFIX ?= /usr/local
DESTDIR ?=

CC ?= cc
CLANG ?= clang
BPFTOOL ?= bpftool
LLVM_STRIP ?= llvm-strip
ARCH := $(shell uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')

CFLAGS ?= -O2 -g
# lib/ by stage (lib/README.md): every folder's headers are on the path;
# capture/ is laid out in sub-folders by job, each on the path too
CAPTURE_DIRS := $(addprefix capture/,session probes recorder stacks writer)
LIB_DIRS := common format $(CAPTURE_DIRS) analysis report
LIB_INCLUDES := $(addprefix -Ilib/,$(LIB_DIRS))
LIB_HDRS := $(wildcard $(addsuffix /*.h,$(addprefix lib/,$(LIB_DIRS))))
CFLAGS += -std=gnu11 -Wall -Wextra -Werror -Wno-missing-field-initializers \
	  -I$(OUTPUT) $(LIB_INCLUDES) -Ibpf -D_GNU_SOURCE
LDLIBS_COMMON := -lmsgpackc -ljansson -lzstd -lz -lm -lprotobuf-c
LDLIBS_BPF := -lbpf -ldw -lelf -lz -lpthread -lZydis
# libdw: offline symbolization (lib/analysis/symbolize.c), in what links
# the analysis stage
LDLIBS_DW := -ldw -lelf -lstdc++
# mt-trace links the Debian packages' archives of its libraries (glibc and
# Zydis, which has none, stay shared): the dynamic linker's mapping and
# relocating nine shared libraries took 0.4-0.7 ms of every session's
# start (hyperfine, `mt-trace --version`: 1.6 ms against 1.2 ms, min of
# 100), a twentieth of `mt-trace -- true`.
LDLIBS_TRACE := -Wl,-Bstatic -lbpf -ldw -lelf -llzma -lbz2 -lmsgpackc \
	-ljansson -lzstd -lz -Wl,-Bdynamic -lpthread -lZydis -lm

ifeq ($(V),1)
Q =
msg =
else
Q = @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

DEB_PACKAGES := build-essential binutils clang llvm bpftool libbpf-dev libelf-dev \
	zlib1g-dev libzydis-dev libmsgpack-dev libjansson-dev libzstd-dev \
	liblzma-dev libbz2-dev pkg-config bats bats-support \
	bats-assert bats-file python3-msgpack valgrind hyperfine zstd time \
	util-linux procps chromium jq libdw-dev strace gdb python3-yaml \
	libprotobuf-c-dev protobuf-c-compiler protobuf-compiler golang-go \
	libclang-rt-14-dev

LIB_SRCS := $(wildcard $(addsuffix /*.c,$(addprefix lib/,$(LIB_DIRS))))
LIB_OBJS := $(patsubst lib/%.c,$(OUTPUT)/lib/%.o,$(LIB_SRCS)) \
	$(OUTPUT)/lib/mt_trace_btf.o $(OUTPUT)/gen/profile.pb-c.o \
	$(OUTPUT)/lib/report/html_assets.o
LIBMT := $(OUTPUT)/libmt.a

TOOLS := mt-trace mt-encode mt-reconstruct mt-report
TOOL_BINS := $(addprefix $(OUTPUT)/bin/,$(TOOLS))

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_SKELS := $(patsubst bpf/%.bpf.c,$(OUTPUT)/%.skel.h,$(BPF_SRCS))

FIXTURE_SRCS := $(wildcard tests/fixtures/*.c)
FIXTURES := $(patsubst tests/fixtures/%.c,$(OUTPUT)/fixtures/%,$(FIXTURE_SRCS))
UNIT_SRCS := $(wildcard tests/unit/*.c)
UNITS := $(patsubst tests/unit/%.c,$(OUTPUT)/unit/%,$(UNIT_SRCS))

.PHONY: all deps demo test test-bench test-stacks check check-asan fuzz bench install clean format fixtures
.DELETE_ON_ERROR:
.SECONDARY:

# mt-trace --fast's in-process recorder (lib/preload/, LD_PRELOAD): a
# library of its own, outside libmt.a, sharing only
# lib/capture/recorder/mt_fast.h
PRELOAD := $(OUTPUT)/lib/libmt-preload.so

all: $(TOOL_BINS) $(PRELOAD)

$(OUTPUT) $(OUTPUT)/lib $(OUTPUT)/bin $(OUTPUT)/fixtures $(OUTPUT)/unit \
		$(OUTPUT)/preload:
	$(Q)mkdir -p $@

# vmlinux.h -> .bpf.o -> .skel.h -> the program that includes it
$(OUTPUT)/vmlinux.h: | $(OUTPUT)
	$(call msg,GEN,$@)
	$(Q)$(BPFTOOL) btf dump file /sys/kernel/btf/vmlinux format c > $@

$(OUTPUT)/%.bpf.o: bpf/%.bpf.c bpf/*.h $(OUTPUT)/vmlinux.h | $(OUTPUT)
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -Wall -Werror -target bpf -D__TARGET_ARCH_$(ARCH) \
		-I$(OUTPUT) -Ibpf -c $< -o $@
	$(Q)$(LLVM_STRIP) -g $@

# The kernel types the program reads, cut from the build kernel's BTF, and
# that kernel's notes (build ID): mt-trace carries both (bpf/mt_trace_btf.S)
# and uses the types on that kernel only, to skip parsing its 5 MB BTF.
# Without bpftool's min_core_btf the file is empty and the kernel's is read.
$(OUTPUT)/mt_trace.min.btf: $(OUTPUT)/mt_trace.bpf.o
	$(call msg,BTF,$@)
	$(Q)$(BPFTOOL) gen min_core_btf /sys/kernel/btf/vmlinux $@ $< \
		2>/dev/null || : > $@
$(OUTPUT)/kernel.notes: $(OUTPUT)/mt_trace.bpf.o
	$(Q)cat /sys/kernel/notes > $@ 2>/dev/null || : > $@
$(OUTPUT)/lib/mt_trace_btf.o: bpf/mt_trace_btf.S $(OUTPUT)/mt_trace.min.btf \
		$(OUTPUT)/kernel.notes | $(OUTPUT)/lib
	$(call msg,AS,$@)
	$(Q)$(CC) -c -I$(OUTPUT) $< -o $@

$(OUTPUT)/%.skel.h: $(OUTPUT)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $* > $@

# -fexceptions: a C++ exception out of operator new unwinds through it.
# Never with the sanitizers of CFLAGS (check-asan): it is loaded into
# programs that have no sanitizer runtime.  Frame pointers: --stacks
# finds the program's call into it by its own frame chain.
PRELOAD_CFLAGS := -std=gnu11 -O2 -g -Wall -Wextra -Werror -D_GNU_SOURCE \
	-Ilib/capture/recorder -Ibpf -fPIC -shared -fexceptions -fvisibility=hidden \
	-fno-builtin -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer
PRELOAD_SRCS := $(wildcard lib/preload/*.c)
$(PRELOAD): $(PRELOAD_SRCS) $(wildcard lib/preload/*.h) \
		lib/capture/recorder/mt_fast.h bpf/mt_python.h \
		bpf/mt_event.h bpf/mt_stack.h \
		| $(OUTPUT)/lib
	$(call msg,CCLD,$@)
	$(Q)$(CC) $(PRELOAD_CFLAGS) $(PRELOAD_SRCS) -o $@ -ldl -pthread \
		-Wl,--as-needed

$(OUTPUT)/lib/%.o: lib/%.c $(LIB_HDRS) bpf/mt_event.h | $(OUTPUT)/lib
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@

# The tracer's objects embed the BPF program (the skeleton holds its bytes)
# or its layout: those that include it must be rebuilt whenever it changes
# (a stale one reads another program's or map's place in it).
SKEL_USERS := $(patsubst %.c,$(OUTPUT)/%.o,$(shell grep -l \
	'include "mt_trace.skel.h"' lib/capture/*/*.c))
$(SKEL_USERS): $(BPF_SKELS)
$(LIB_OBJS): | $(BPF_SKELS)

# Rewritten only when the version or the revision changes.
MT_GIT_REVISION := $(shell git describe --always --dirty --abbrev=7 \
	2>/dev/null)
$(OUTPUT)/mt_version_gen.h: FORCE | $(OUTPUT)
	$(Q)printf '#define MT_VERSION "%s"\n#define MT_GIT_REVISION "%s"\n' \
		'$(MT_VERSION)' '$(MT_GIT_REVISION)' > $@.tmp
	$(Q)cmp -s $@.tmp $@ && rm -f $@.tmp || mv -f $@.tmp $@
$(OUTPUT)/lib/common/version.o: $(OUTPUT)/mt_version_gen.h
.PHONY: FORCE
FORCE:

# pprof's profile.proto (lib/report/profile.proto) as C, for libprotobuf-c
# (mt-report --pprof, lib/report/pprof.c); generated at build time by
# protoc-c (protobuf-c-compiler)
$(OUTPUT)/gen:
	$(Q)mkdir -p $@
$(OUTPUT)/gen/profile.pb-c.c $(OUTPUT)/gen/profile.pb-c.h &: \
		lib/report/profile.proto | $(OUTPUT)/gen
	$(call msg,PROTOC,$@)
	$(Q)protoc-c --c_out=$(OUTPUT)/gen -Ilib/report $<
$(OUTPUT)/gen/profile.pb-c.o: $(OUTPUT)/gen/profile.pb-c.c \
		$(OUTPUT)/gen/profile.pb-c.h
	$(call msg,CC,$@)
	$(Q)$(CC) $(CFLAGS) -c $< -o $@
$(OUTPUT)/lib/report/pprof.o: $(OUTPUT)/gen/profile.pb-c.h

# mt-report --html's script and style, built in (lib/report/html_assets.S)
$(OUTPUT)/lib/report/html_assets.o: lib/report/html_assets.S \
		lib/report/html_page.js lib/report/html_page.css | $(OUTPUT)/lib
	$(call msg,AS,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -c $< -o $@

$(LIBMT): $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(OUTPUT)/bin/mt-trace: tools/mt-trace.c $(LIBMT) $(BPF_SKELS) | $(OUTPUT)/bin
	$(call msg,CCLD,$@)
	$(Q)$(CC) $(CFLAGS) $< $(LIBMT) $(LDLIBS_TRACE) -o $@

$(OUTPUT)/bin/%: tools/%.c $(LIBMT) | $(OUTPUT)/bin
	$(call msg,CCLD,$@)
	$(Q)$(CC) $(CFLAGS) $< $(LIBMT) $(LDLIBS_COMMON) -o $@

# Fixture programs: no optimisation and no builtins, so every call the source
# makes is a call the binary makes (gcc folds malloc/free pairs otherwise).
FIXTURE_CFLAGS := -std=gnu11 -O0 -g -fno-builtin -Wall -Wextra -Werror -pthread
$(OUTPUT)/fixtures/%: tests/fixtures/%.c tests/fixtures/*.h | $(OUTPUT)/fixtures
	$(call msg,CC,$@)
	$(Q)$(CC) $(FIXTURE_CFLAGS) $< -o $@ -ldl

# A program built with AddressSanitizer (gcc: libasan.so in its DT_NEEDED,
# a runtime that refuses to start unless it is the first library loaded,
# before any LD_PRELOAD): tests/fast.bats traces it both ways.
$(OUTPUT)/fixtures/hundred_asan: tests/fixtures/hundred.c tests/fixtures/*.h \
		| $(OUTPUT)/fixtures
	$(call msg,CC,$@)
	$(Q)$(CC) $(FIXTURE_CFLAGS) -fsanitize=address $< -o $@ -ldl
fixtures: $(OUTPUT)/fixtures/hundred_asan

# glibc linked in statically: its thread-exit frees are direct calls, as
# the program's own are (tests/fast.bats, issue 33)
$(OUTPUT)/fixtures/tcache_threads_static: tests/fixtures/tcache_threads.c \
		tests/fixtures/*.h | $(OUTPUT)/fixtures
	$(call msg,CC,$@)
	$(Q)$(CC) $(FIXTURE_CFLAGS) -static $< -o $@
fixtures: $(OUTPUT)/fixtures/tcache_threads_static

# The tests' independent allocation counter (LD_PRELOAD), see its header.
$(OUTPUT)/preload/mtcount.so: tests/preload/mtcount.c | $(OUTPUT)/preload
	$(call msg,CCLD,$@)
	$(Q)$(CC) -std=gnu11 -O2 -g -fno-builtin -fPIC -shared -Wall -Wextra \
		-Werror $< -o $@ -ldl -pthread

fixtures: $(FIXTURES) $(OUTPUT)/preload/mtcount.so

# The symbolizer's fixtures (tests/fixtures/sym/): built as real programs
# ship, optimised with inlining and no frame pointers, with DWARF; a
# position-dependent copy (addresses are not file offsets there) and one
# with another build-id (which the symbolizer must not use).
SYM_OUT := $(OUTPUT)/fixtures/sym
SYM_CFLAGS := -std=gnu11 -O2 -g -fomit-frame-pointer -Wall -Wextra -Werror
SYM_FIXTURES := $(addprefix $(SYM_OUT)/,inlined inlined_exec inlined_otherid)
$(SYM_OUT):
	$(Q)mkdir -p $@
$(SYM_OUT)/inlined: tests/fixtures/sym/inlined.c | $(SYM_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(SYM_CFLAGS) $< -o $@
$(SYM_OUT)/inlined_exec: tests/fixtures/sym/inlined.c | $(SYM_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(SYM_CFLAGS) -no-pie $< -o $@
$(SYM_OUT)/inlined_otherid: tests/fixtures/sym/inlined.c | $(SYM_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(SYM_CFLAGS) -Wl,--build-id=0x0123456789abcdef0123456789abcdef01234567 $< -o $@
fixtures: $(SYM_FIXTURES)

$(OUTPUT)/unit/%: tests/unit/%.c $(LIBMT) | $(OUTPUT)/unit
	$(call msg,CCLD,$@)
	$(Q)$(CC) $(CFLAGS) $< $(LIBMT) $(LDLIBS_COMMON) -o $@
$(OUTPUT)/bin/mt-reconstruct $(OUTPUT)/bin/mt-report $(UNITS): \
	LDLIBS_COMMON += $(LDLIBS_DW)
# test_elf checks where uprobes go: the ELF and x86 decoding of the tracer
$(OUTPUT)/unit/test_elf: LDLIBS_COMMON += $(LDLIBS_BPF)

# The README's test command.  Runs every suite and ends with
# "N passed, N failed"; exits non-zero on any failure.  At most 10 minutes
# on 2 CPUs (tests/run prints each suite's time at the end).
test check: all fixtures $(UNITS)
	$(Q)tests/run

# The benchmark suites (tests/bench/*.bats): the quick run of make bench
# and its table, minutes on 2 CPUs, so not in make test.  .ci/run runs
# them after make test.
test-bench: all fixtures $(UNITS) $(OUTPUT)/tests/mt-gen $(OUTPUT)/tests/mt-read
	$(Q)tests/run tests/bench/*.bats

# Every suite again with call stacks on in each mt-trace session (issue 11:
# every earlier test passes with stacks on).  Slower than make test; the
# normal suite keeps a part of it (tests/stacks.bats, "stacks on").
test-stacks: all fixtures $(UNITS) $(OUTPUT)/tests/mt-gen $(OUTPUT)/tests/mt-read
	$(Q)MT_STACKS=1 tests/run

# The README's main job: trace a real program and report on it.
demo: all
	examples/demo.sh

deps:
	@if ! dpkg -s $(DEB_PACKAGES) >/dev/null 2>&1; then \
		apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends $(DEB_PACKAGES); \
	fi

# The tools, their man pages, the header a traced program includes to mark
# its sections, and bash completion (one file, loaded on demand by
# bash-completion under each tool's name).
COMPLETIONS := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 \
		$(DESTDIR)$(PREFIX)/share/man/man5 $(DESTDIR)$(PREFIX)/include \
		$(COMPLETIONS)
	install -m 755 $(TOOL_BINS) $(DESTDIR)$(PREFIX)/bin
	install -d $(DESTDIR)$(PREFIX)/lib/mt
	install -m 644 $(PRELOAD) $(DESTDIR)$(PREFIX)/lib/mt
	install -m 644 man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 man/*.5 $(DESTDIR)$(PREFIX)/share/man/man5
	install -m 644 examples/mt_section.h $(DESTDIR)$(PREFIX)/include
	install -m 644 completion/mt.bash $(COMPLETIONS)/mt
	for t in $(TOOLS); do ln -sf mt $(COMPLETIONS)/$$t; done

format:
	clang-format -i bpf/*.c bpf/*.h lib/*/*.c lib/*/*.h lib/capture/*/*.c \
		lib/capture/*/*.h tools/*.c \
		$(wildcard tests/fixtures/*.c tests/fixtures/*.h tests/unit/*.c)

clean:
	rm -rf $(OUTPUT)

# ---- formats: synthetic raw streams, sanitizer builds, fuzzing ----------
# mt-gen writes deterministic synthetic raw streams for tests and benchmarks.
$(OUTPUT)/tests:
	$(Q)mkdir -p $@

# mt-read reads any stream through lib/format/mt_input.h (counts, speed, --dump).
$(OUTPUT)/tests/%: tests/gen/%.c $(LIBMT) | $(OUTPUT)/tests
	$(call msg,CCLD,$@)
	$(Q)$(CC) $(CFLAGS) $< $(LIBMT) $(LDLIBS_COMMON) -o $@

test check: $(OUTPUT)/tests/mt-gen $(OUTPUT)/tests/mt-read

# The whole suite again with lib, tools and unit tests under ASan + UBSan,
# built into build-asan/ (CFLAGS through the environment, so the flags the
# Makefile appends still apply); then the --fast drain fuzzed (ASan) for a
# few seconds: the traced command's memory, which no suite test covers
# byte by byte.
ASAN_CFLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined \
	-fno-sanitize-recover=all
check-asan:
	$(Q)CFLAGS="$(ASAN_CFLAGS)" $(MAKE) --no-print-directory \
		OUTPUT=build-asan test
	$(Q)$(MAKE) --no-print-directory FUZZ_TIME=10 \
		FUZZ_TARGETS=build-fuzz/fuzz_fastdrain fuzz

# libFuzzer targets (tests/fuzz/fuzz_*.c) built with clang; `make fuzz` runs
# each for FUZZ_TIME seconds from a corpus seeded with mt-gen output.
# MT_FUZZ_DIFF: the reader checks its flat-map decoder against msgpack-c.
FUZZ_TIME ?= 60
FUZZ_LIB_SRCS := $(wildcard lib/format/*.c) lib/common/allocators.c
FUZZ_TARGETS := $(patsubst tests/fuzz/%.c,build-fuzz/%,\
	$(wildcard tests/fuzz/fuzz_*.c))
build-fuzz/fuzz_%: tests/fuzz/fuzz_%.c $(FUZZ_LIB_SRCS) $(LIB_HDRS) bpf/mt_event.h
	$(call msg,FUZZ-CC,$@)
	$(Q)mkdir -p build-fuzz
	$(Q)$(CLANG) -g -O1 -fsanitize=fuzzer,address,undefined \
		-fno-sanitize-recover=all -std=gnu11 $(LIB_INCLUDES) -Ibpf -D_GNU_SOURCE \
		-DMT_FUZZ_DIFF \
		$< $(FUZZ_LIB_SRCS) $(FUZZ_EXTRA_SRCS) $(LDLIBS_COMMON) \
		$(FUZZ_EXTRA_LIBS) -o $@
# fuzz_report runs the analysis stages too
FUZZ_REPORT_SRCS := $(wildcard lib/analysis/*.c lib/report/*.c) lib/common/human.c \
	lib/report/html_assets.S lib/common/version.c
build-fuzz/fuzz_report: FUZZ_EXTRA_SRCS := $(FUZZ_REPORT_SRCS) \
	$(OUTPUT)/gen/profile.pb-c.c -I$(OUTPUT)
build-fuzz/fuzz_report: $(FUZZ_REPORT_SRCS) $(OUTPUT)/gen/profile.pb-c.c
# fuzz_elf parses ELF files as mt-trace does (lib/capture/probes/elf.c)
# (and its caches' key, lib/capture/probes/file_id.c)
FUZZ_ELF_SRCS := lib/capture/probes/elf.c lib/capture/probes/file_id.c \
	lib/common/xalloc.c lib/common/log.c
build-fuzz/fuzz_elf: FUZZ_EXTRA_SRCS := $(FUZZ_ELF_SRCS)
build-fuzz/fuzz_elf: FUZZ_EXTRA_LIBS := -lelf -lZydis
build-fuzz/fuzz_elf: $(FUZZ_ELF_SRCS)
build-fuzz/fuzz_report: FUZZ_EXTRA_LIBS := $(LDLIBS_DW) -lprotobuf-c
# fuzz_fastdrain drains the --fast rings as mt-trace does
FUZZ_FASTDRAIN_SRCS := lib/capture/recorder/tracer_fast_drain.c \
	lib/common/xalloc.c lib/common/log.c
build-fuzz/fuzz_fastdrain: FUZZ_EXTRA_SRCS := $(FUZZ_FASTDRAIN_SRCS)
build-fuzz/fuzz_fastdrain: $(FUZZ_FASTDRAIN_SRCS)

# the seed makers, from the format sources alone (not all of libmt)
build-fuzz/mt-gen: tests/gen/mt-gen.c $(FUZZ_LIB_SRCS) $(LIB_HDRS) bpf/mt_event.h
	$(call msg,CCLD,$@)
	$(Q)mkdir -p build-fuzz
	$(Q)$(CC) $(CFLAGS) $< $(FUZZ_LIB_SRCS) $(LDLIBS_COMMON) -o $@
# mt-encode also parses sizes, prints the version and its progress line
# (lib/common)
FUZZ_ENCODE_SRCS := $(FUZZ_LIB_SRCS) lib/common/human.c lib/common/version.c \
	lib/common/cli.c
build-fuzz/mt-encode: tools/mt-encode.c $(FUZZ_ENCODE_SRCS) $(LIB_HDRS) \
		bpf/mt_event.h $(OUTPUT)/mt_version_gen.h
	$(call msg,CCLD,$@)
	$(Q)mkdir -p build-fuzz
	$(Q)$(CC) $(CFLAGS) $< $(FUZZ_ENCODE_SRCS) $(LDLIBS_COMMON) -o $@

fuzz: $(FUZZ_TARGETS) build-fuzz/mt-gen build-fuzz/mt-encode
	$(Q)tests/fuzz/run $(FUZZ_TIME) $(FUZZ_TARGETS)

# ---- benchmarks (issue 6): bench/run with hyperfine; codspeed.yml -------
# `make bench` prints the table (about 5 minutes on 2 cores);
# `BENCH_QUICK=1 make bench` is a short smoke run (tests/bench/make-bench.bats,
# make test-bench).
# `make bench-data` makes the saved trace the offline stages are timed on.
BENCH_EVENTS ?= $(if $(filter 1,$(BENCH_QUICK)),100000,10000000)
.PHONY: bench-data bench-deps
# What make bench uses beyond `make deps` (not the tests): heaptrack, whose
# `heaptrack -- true` is timed beside `mt-trace -- true` (bench/run).
BENCH_DEB_PACKAGES := heaptrack
bench-deps:
	@if ! dpkg -s $(BENCH_DEB_PACKAGES) >/dev/null 2>&1; then \
		apt-get update -qq && \
		apt-get install -y -qq --no-install-recommends \
			$(BENCH_DEB_PACKAGES); \
	fi
$(OUTPUT)/bench:
	$(Q)mkdir -p $@

# mt-trace's own peak RSS, not its children's (see the source)
$(OUTPUT)/bench/peakrss: bench/peakrss.c | $(OUTPUT)/bench
	$(call msg,CCLD,$@)
	$(Q)$(CC) $(CFLAGS) $< -o $@

# how long the traced command itself ran, read from its trace
$(OUTPUT)/bench/trace-span: bench/trace-span.c $(LIBMT) | $(OUTPUT)/bench
	$(call msg,CCLD,$@)
	$(Q)$(CC) $(CFLAGS) $< $(LIBMT) $(LDLIBS_COMMON) -o $@

# packed batches, as mt-trace writes them (mt_raw.h)
$(OUTPUT)/bench/trace-%.raw: $(OUTPUT)/tests/mt-gen | $(OUTPUT)/bench
	$(call msg,GEN,$@)
	$(Q)$(OUTPUT)/tests/mt-gen --events $* --seed 1 --packed -o $@

$(OUTPUT)/bench/trace-%.msgpack: $(OUTPUT)/bench/trace-%.raw \
		$(OUTPUT)/bin/mt-encode
	$(call msg,ENCODE,$@)
	$(Q)$(OUTPUT)/bin/mt-encode -o $@ $<

$(OUTPUT)/bench/trace-%.plain.msgpack: $(OUTPUT)/bench/trace-%.raw \
		$(OUTPUT)/bin/mt-encode
	$(call msg,ENCODE,$@)
	$(Q)$(OUTPUT)/bin/mt-encode -u -o $@ $<

bench-data: $(OUTPUT)/bench/trace-$(BENCH_EVENTS).msgpack \
	$(OUTPUT)/bench/trace-$(BENCH_EVENTS).plain.msgpack

bench: all $(OUTPUT)/fixtures/allocheavy $(OUTPUT)/fixtures/bystander \
		$(OUTPUT)/fixtures/storm_threads \
		$(OUTPUT)/bench/peakrss $(OUTPUT)/bench/trace-span bench-data
	$(Q)OUTPUT=$(OUTPUT) BENCH_EVENTS=$(BENCH_EVENTS) \
		BENCH_QUICK=$(BENCH_QUICK) \
		BENCH_CMD="$(if $(filter 1,$(BENCH_QUICK)),BENCH_QUICK=1 )make bench" \
		bench/run

# ---- allocator fixtures (issue 5): real allocators from Debian packages --
# tests/fixtures/alloc/: C and C++ programs whose allocator calls are known
# (tests/allocators.bats), built against glibc/libstdc++ and the allocators
# of libjemalloc-dev, libmimalloc-dev and libgoogle-perftools-dev: linked
# dynamically; with the static archives the packages ship (libjemalloc.a,
# libtcmalloc_minimal.a; mimalloc ships none), also stripped; with
# jemalloc's public names renamed je_* / _rjem_* (a prefixed build); and
# inside a dlopen'ed library.  -O0 -fno-builtin and, for C++, no elision,
# so each call in the source is one call in the binary (g++ -O2 deletes
# new/delete pairs).
DEB_PACKAGES += g++ libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev

ALLOC_DIR := tests/fixtures/alloc
ALLOC_OUT := $(OUTPUT)/fixtures/alloc
ALLOC_LIBDIR := /usr/lib/$(shell $(CC) -print-multiarch)
ALLOC_HDRS := tests/fixtures/fixture.h $(ALLOC_DIR)/alloc.h
ALLOC_CFLAGS := -std=gnu11 -O0 -g -fno-builtin -Wall -Wextra -Werror -pthread
ALLOC_CXXFLAGS := -std=gnu++17 -O0 -g -fno-builtin -fno-elide-constructors \
	-fsized-deallocation -faligned-new -Wall -Wextra -Werror -pthread
ALLOC_JEMALLOC_A := $(ALLOC_LIBDIR)/libjemalloc.a -lpthread -lm -ldl
ALLOC_CXX := cxx_sequence cxx_operators
ALLOC_FIXTURES := $(addprefix $(ALLOC_OUT)/, $(ALLOC_CXX) \
	$(foreach a,jemalloc mimalloc tcmalloc,$(addsuffix _$(a),$(ALLOC_CXX))) \
	cxx_sequence_jemalloc_static jemalloc_api jemalloc_static \
	jemalloc_static_nodebug jemalloc_static_stripped jemalloc_je \
	jemalloc_rjem mimalloc_api tcmalloc_api tcmalloc_static \
	tcmalloc_static_nodebug libmyalloc.so dlopen_alloc libc_family \
	libc_family_fullstatic jemalloc_fullstatic jemalloc_fullstatic_stripped \
	cxx_sequence_static_libstdcxx cxx_new_loop_static_libstdcxx)

$(ALLOC_OUT):
	$(Q)mkdir -p $@

# C++: libstdc++'s operator new, then each allocator's replacing it
$(addprefix $(ALLOC_OUT)/,$(ALLOC_CXX)): $(ALLOC_OUT)/%: $(ALLOC_DIR)/%.cc \
		$(ALLOC_HDRS) | $(ALLOC_OUT)
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(ALLOC_CXXFLAGS) $< -o $@ -ldl
$(patsubst %,$(ALLOC_OUT)/%_jemalloc,$(ALLOC_CXX)): $(ALLOC_OUT)/%_jemalloc: \
		$(ALLOC_DIR)/%.cc $(ALLOC_HDRS) | $(ALLOC_OUT)
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(ALLOC_CXXFLAGS) $< -o $@ -ljemalloc -ldl
$(patsubst %,$(ALLOC_OUT)/%_mimalloc,$(ALLOC_CXX)): $(ALLOC_OUT)/%_mimalloc: \
		$(ALLOC_DIR)/%.cc $(ALLOC_HDRS) | $(ALLOC_OUT)
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(ALLOC_CXXFLAGS) $< -o $@ -lmimalloc -ldl
$(patsubst %,$(ALLOC_OUT)/%_tcmalloc,$(ALLOC_CXX)): $(ALLOC_OUT)/%_tcmalloc: \
		$(ALLOC_DIR)/%.cc $(ALLOC_HDRS) | $(ALLOC_OUT)
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(ALLOC_CXXFLAGS) $< -o $@ -ltcmalloc -ldl
$(ALLOC_OUT)/cxx_sequence_jemalloc_static: $(ALLOC_DIR)/cxx_sequence.cc \
		$(ALLOC_HDRS) | $(ALLOC_OUT)
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(ALLOC_CXXFLAGS) $< $(ALLOC_JEMALLOC_A) -o $@

# AddressSanitizer's runtime replaces operator new and delete too
$(ALLOC_OUT)/cxx_operators_asan: $(ALLOC_DIR)/cxx_operators.cc $(ALLOC_HDRS) \
		| $(ALLOC_OUT)
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(ALLOC_CXXFLAGS) -fsanitize=address $< -o $@ -ldl
fixtures: $(ALLOC_OUT)/cxx_operators_asan

# libstdc++ linked into the executable (-static-libstdc++, as gcc's cc1plus
# is): its operator new and delete are the executable's own, probed, and
# call glibc's malloc and free (the recorder's under --fast)
$(ALLOC_OUT)/%_static_libstdcxx: $(ALLOC_DIR)/%.cc $(ALLOC_HDRS) \
		| $(ALLOC_OUT)
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(ALLOC_CXXFLAGS) -static-libstdc++ $< -o $@ -ldl

# jemalloc: shared, static (the executable defines malloc), stripped
$(ALLOC_OUT)/jemalloc_api: $(ALLOC_DIR)/jemalloc_api.c $(ALLOC_HDRS) \
		| $(ALLOC_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALLOC_CFLAGS) $< -o $@ -ljemalloc -ldl
$(ALLOC_OUT)/jemalloc_static: $(ALLOC_DIR)/jemalloc_api.c $(ALLOC_HDRS) \
		| $(ALLOC_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALLOC_CFLAGS) $< $(ALLOC_JEMALLOC_A) -o $@
# fully static (-static): no ld.so, no .dynsym; glibc's malloc inside too
$(ALLOC_OUT)/jemalloc_fullstatic: $(ALLOC_DIR)/jemalloc_api.c $(ALLOC_HDRS) \
		| $(ALLOC_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALLOC_CFLAGS) -static $< $(ALLOC_JEMALLOC_A) -o $@
# no symbol table at all (a static binary has no .dynsym): only --scan
# naming the unstripped copy finds its allocator
$(ALLOC_OUT)/jemalloc_fullstatic_stripped: $(ALLOC_OUT)/jemalloc_fullstatic
	$(call msg,STRIP,$@)
	$(Q)strip --strip-all -o $@ $<
$(ALLOC_OUT)/libc_family: $(ALLOC_DIR)/libc_family.c $(ALLOC_HDRS) \
		| $(ALLOC_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALLOC_CFLAGS) $< -o $@ -ldl
$(ALLOC_OUT)/libc_family_fullstatic: $(ALLOC_DIR)/libc_family.c \
		$(ALLOC_HDRS) | $(ALLOC_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALLOC_CFLAGS) -static $< -o $@
# no debug info, .symtab kept
$(ALLOC_OUT)/%_static_nodebug: $(ALLOC_OUT)/%_static
	$(call msg,STRIP,$@)
	$(Q)strip --strip-debug -o $@ $<
# no .symtab either: only the exported names in .dynsym remain
$(ALLOC_OUT)/%_static_stripped: $(ALLOC_OUT)/%_static
	$(call msg,STRIP,$@)
	$(Q)strip --strip-all -o $@ $<

# jemalloc's public names renamed, as a build with a prefix has them
ALLOC_JE_PREFIX_je := je_
ALLOC_JE_PREFIX_rjem := _rjem_
ALLOC_JE_API := malloc calloc realloc free aligned_alloc memalign \
	posix_memalign valloc mallocx rallocx xallocx dallocx sdallocx nallocx \
	sallocx mallctl mallctlnametomib mallctlbymib malloc_usable_size \
	malloc_stats_print malloc_conf malloc_message
$(ALLOC_OUT)/libjemalloc-%.a: | $(ALLOC_OUT)
	$(call msg,OBJCOPY,$@)
	$(Q)for sym in $(ALLOC_JE_API); do \
		echo "$$sym $(ALLOC_JE_PREFIX_$*)$$sym"; done > $@.syms
	$(Q)objcopy --redefine-syms=$@.syms $(ALLOC_LIBDIR)/libjemalloc.a $@
$(ALLOC_OUT)/jemalloc_%: $(ALLOC_DIR)/jemalloc_api.c $(ALLOC_HDRS) \
		$(ALLOC_OUT)/libjemalloc-%.a | $(ALLOC_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALLOC_CFLAGS) -DJE_PREFIXED \
		-DJE_PREFIX=$(ALLOC_JE_PREFIX_$*) $< \
		$(ALLOC_OUT)/libjemalloc-$*.a -lpthread -lm -ldl -o $@

$(ALLOC_OUT)/mimalloc_api: $(ALLOC_DIR)/mimalloc_api.c $(ALLOC_HDRS) \
		| $(ALLOC_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALLOC_CFLAGS) $< -o $@ -lmimalloc -ldl

$(ALLOC_OUT)/tcmalloc_api: $(ALLOC_DIR)/tcmalloc_api.cc $(ALLOC_HDRS) \
		| $(ALLOC_OUT)
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(ALLOC_CXXFLAGS) $< -o $@ -ltcmalloc -ldl
$(ALLOC_OUT)/tcmalloc_static: $(ALLOC_DIR)/tcmalloc_api.cc $(ALLOC_HDRS) \
		| $(ALLOC_OUT)
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(ALLOC_CXXFLAGS) $< \
		$(ALLOC_LIBDIR)/libtcmalloc_minimal.a -lpthread -ldl -o $@

# a library with jemalloc inside, loaded with dlopen
$(ALLOC_OUT)/libmyalloc.so: $(ALLOC_DIR)/myalloc.c | $(ALLOC_OUT)
	$(call msg,CCLD,$@)
	$(Q)$(CC) $(ALLOC_CFLAGS) -fPIC -shared $< \
		$(ALLOC_LIBDIR)/libjemalloc_pic.a -Wl,-Bsymbolic -lpthread -lm \
		-ldl -o $@
$(ALLOC_OUT)/dlopen_alloc: $(ALLOC_DIR)/dlopen_alloc.c $(ALLOC_HDRS) \
		| $(ALLOC_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(ALLOC_CFLAGS) $< -o $@ -ldl

fixtures: $(ALLOC_FIXTURES)

# ---- call stack fixtures (issue 11): tests/stacks.bats -------------------
# A known call chain without frame pointers (-O2 -fomit-frame-pointer, as
# Debian builds): the executable, the library it links and the same
# library loaded with dlopen; -g so addr2line and gdb name the frames.
STACKS_DIR := tests/fixtures/stacks
STACKS_OUT := $(OUTPUT)/fixtures/stacks
STACKS_CFLAGS := -std=gnu11 -O2 -g -fomit-frame-pointer -Wall -Wextra -Werror
STACKS_FIXTURES := $(addprefix $(STACKS_OUT)/,stacks libstk.so libstk_dl.so)

$(STACKS_OUT):
	$(Q)mkdir -p $@
$(STACKS_OUT)/libstk.so: $(STACKS_DIR)/libstk.c | $(STACKS_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STACKS_CFLAGS) -fPIC -shared $< -o $@
# its calls bind to its own functions, not to libstk.so's of the same name
$(STACKS_OUT)/libstk_dl.so: $(STACKS_DIR)/libstk.c | $(STACKS_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STACKS_CFLAGS) -fPIC -shared -Wl,-Bsymbolic $< -o $@
$(STACKS_OUT)/stacks: $(STACKS_DIR)/stacks.c $(STACKS_OUT)/libstk.so \
		| $(STACKS_OUT)
	$(call msg,CC,$@)
	$(Q)$(CC) $(STACKS_CFLAGS) -pthread $< -o $@ -L$(STACKS_OUT) -lstk \
		-Wl,-rpath,'$$ORIGIN' -ldl

fixtures: $(STACKS_FIXTURES)
