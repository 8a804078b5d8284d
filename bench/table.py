#!/usr/bin/python3
"""bench/table.py RESULTS_DIR: print the table of a bench/run.

Reads RESULTS_DIR/manifest.jsonl (one row a line, written by bench/run) and
the files it names: hyperfine --export-json output, peakrss lines, trace
summaries, fixture logs.  Prints the tracer table (median untraced, median
traced, ratio, time added, mt-trace's own peak RSS, events, lost), the
per-call cost on the allocation-heavy fixture, the cost of call stacks
(--stacks), the bystander's cost, the offline stages' events per second,
and issue 6's (and 11's) targets with met / NOT MET.
"""
import json
import os
import sys

# issue 6's targets
LS_MAX_S = 0.10
WORKLOAD_FACTOR, WORKLOAD_ADD_S = 1.1, 0.1
PER_CALL_MAX_NS = 1000.0
RSS_MAX_BYTES = 10e6
OFFLINE_MIN_EVENTS_S = 10e6
# issue 12: the recorder (--fast then, the default since issue 33) on
# allocation-heavy programs, traced / untraced
FAST_MAX_RATIO = {"allocheavy": 1.5, "python": 2.0}
# issue 33: the default on the 2 M-pair loop, with start-up and without it
# (less `mt-trace -- true`'s fixed cost), and on tar; call stacks by
# default only within these of untraced
DEFAULT_MAX_RATIO = {"allocheavy": 3.0, "tar": 2.0}
DEFAULT_MAX_RATIO_NO_STARTUP = {"allocheavy": 1.5}
DEFAULT_STACKS_MAX_RATIO = {"allocheavy": 3.0, "tar": 1.5, "python": 1.5,
                            "python3": 1.5}
# issue 13: the compressed artifact of the allocation-heavy trace
HEAVY_MAX_BYTES_PER_EVENT = 8.0
# issue 11: call stacks, at ~20 frames, and on python3 and tar
STACK_MAX_NS = 500.0
STACK_MAX_RATIO = 1.5
# issue 34: python3 --fast --stacks with its Python frames / without them
PYFRAMES_MAX_RATIO = 1.5

VARIANT_LABEL = {
    "default": "default (recorder)",
    "nofast": "--no-fast",
    "nofaststacks": "--no-fast --stacks",
    "heaptrack": "heaptrack",
    "noalloc": "--track-allocators=false",
    "physical": "--physical",
    "stacks": "--stacks",
    "fast": "--fast",
    "faststacks": "--fast --stacks",
    "faststacksnopy": "--fast --stacks, MT_PYTHON_FRAMES=0",
    "nofaststacksnopy": "--no-fast --stacks, MT_PYTHON_FRAMES=0",
    "all": "all variants",
}


def load(results, name):
    with open(os.path.join(results, name)) as f:
        return json.load(f)


def medians(results, row):
    """(untraced, traced) median seconds of a row's hyperfine run."""
    runs = load(results, row["hf"])["results"]
    return runs[row["base_index"]]["median"], runs[row["index"]]["median"]


def runs_of(results, row):
    return len(load(results, row["hf"])["results"][row["index"]]["times"])


def fixture_info(path):
    """{"loop_ns": N, ...} from a fixture log (fixture.h "info" lines)."""
    info = {}
    with open(path) as f:
        for line in f:
            obj = json.loads(line)
            if "info" in obj:
                info[obj["info"]] = obj["value"]
    return info


def secs(s):
    if s < 0:
        return "-" + secs(-s)
    if s < 1e-3:
        return "%.0f us" % (s * 1e6)
    if s < 1:
        return "%.1f ms" % (s * 1e3)
    return "%.2f s" % s


def count(n):
    return "{:,}".format(n)


def rate(per_s):
    return "%.2f M/s" % (per_s / 1e6)


class Table:
    def __init__(self, results):
        self.results = results
        rows = []
        with open(os.path.join(results, "manifest.jsonl")) as f:
            for line in f:
                rows.append(json.loads(line))
        self.rows = rows
        self.targets = []  # (what, target, measured, met or None)
        self.notes = []

    def of_kind(self, kind):
        return [r for r in self.rows if r["kind"] == kind]

    def target(self, what, goal, measured, met):
        self.targets.append((what, goal, measured, met))

    def header(self):
        meta = self.of_kind("meta")[0]
        print("mt benchmarks, %s: %s" % (meta["date"], meta["command"]))
        print("machine: %s CPUs (%s), Linux %s%s" % (
            meta["nproc"], meta["cpu"], meta["kernel"],
            ", QUICK MODE (smoke run: few runs, small inputs)"
            if meta["quick"] else ""))
        if meta.get("only"):
            print("PARTIAL RUN: only the groups %s (BENCH_ONLY)" % meta["only"])
        print("times are hyperfine medians; CMD ran: the traced command's "
              "own run (exec to exit, from the trace)")
        print("in one traced run: the rest of \"traced\" is mt-trace's "
              "start-up and exit; RSS: mt-trace's own peak")
        print("(VmHWM at its exit, bench/peakrss) and mt CPU its own user + "
              "system time, of that same run")
        for row in self.of_kind("trap"):
            alone = load(self.results, row["alone"])
            trap = load(self.results, row["trap"])
            print("trap floor of this kernel: one uprobe trap %.2f us "
                  "(bench/uprobe-trap: a bare tracefs uprobe on malloc, no "
                  "BPF; %.0f ns a pair under it, %.0f ns alone)"
                  % ((trap["ns_per_pair"] - alone["ns_per_pair"]) / 1e3,
                     trap["ns_per_pair"], alone["ns_per_pair"]))
        if meta.get("bpf_stats"):
            print("WARNING: kernel.bpf_stats_enabled was 1: every BPF program "
                  "run also read the clock twice")
        busy = self.others_running()
        if busy:
            print("WARNING: other mt-trace sessions were running during: %s;"
                  % "; ".join(busy))
            print("  their global uprobes slow every process: those numbers "
                  "are not clean")
        print()

    def others_running(self):
        """The stages that started while other mt-trace sessions ran."""
        busy = []
        path = os.path.join(self.results, "others.txt")
        if os.path.exists(path):
            with open(path) as f:
                for line in f:
                    n, _, stage = line.rstrip("\n").partition(" ")
                    if int(n) > 0:
                        busy.append("%s (%s)" % (stage, n))
        return busy

    def tracer(self):
        if not self.of_kind("trace"):
            return  # a partial run without them (BENCH_ONLY)
        fmt = "%-26s %-25s %9s %9s %8s %9s %9s %8s %9s %10s %6s"
        print(fmt % ("mt-trace on", "variant", "untraced", "traced",
                     "ratio", "added", "CMD ran", "mt CPU", "RSS", "events",
                     "lost"))
        last = None
        for row in self.of_kind("trace"):
            label = row["label"] if row["label"] != last else ""
            last = row["label"]
            variant = VARIANT_LABEL[row["variant"]]
            if "skipped" in row:
                print("%-26s %-25s skipped: %s" % (label, variant,
                                                   row["skipped"]))
                continue
            base, traced = medians(self.results, row)
            if "rss" not in row:  # another tracer: its times only
                print(fmt % (label, variant, secs(base), secs(traced),
                             "%.2fx" % (traced / base),
                             "+" + secs(traced - base), "", "", "", "", ""))
                row.update(base=base, traced=traced)
                continue
            own = load(self.results, row["rss"])
            rss = own["vm_hwm_kb"] * 1024
            trace = load(self.results, row["trace"])
            print(fmt % (label, variant, secs(base), secs(traced),
                         "%.2fx" % (traced / base), ("+" if traced >= base else "") + secs(traced - base),
                         secs(trace["run_ns"] / 1e9)
                         if trace["run_ns"] >= 0 else "?",
                         secs(own["cpu_ms"] / 1e3),
                         "%.1f MB" % (rss / 1e6), count(trace["events"]),
                         count(trace["lost"])))
            row.update(base=base, traced=traced, rss_bytes=rss,
                       events=trace["events"], lost=trace["lost"],
                       run_s=trace["run_ns"] / 1e9)
            self.tracer_targets(row)
        print()

    def peers(self):
        """Another memory tracer's fixed cost beside mt-trace's."""
        for row in self.of_kind("peer"):
            if "skipped" in row:
                print("%s -- true: skipped: %s" % (row["name"],
                                                   row["skipped"]))
                print()
                continue
            runs = load(self.results, row["hf"])["results"]
            alone, mt, peer = (r["median"] for r in runs[:3])
            print("fixed cost, median: true %s; mt-trace -- true %s "
                  "(+%s); %s -- true %s (+%s)"
                  % (secs(alone), secs(mt), secs(mt - alone), row["name"],
                     secs(peer), secs(peer - alone)))
            print()

    def fast_targets(self, row):
        limit = FAST_MAX_RATIO.get(row["name"])
        if limit is None:
            return
        ratio = row["traced"] / row["base"]
        self.target("mt-trace -- %s (issue 12)" % row["label"],
                    "<= %.1fx untraced" % limit, "%.2fx" % ratio,
                    ratio <= limit)

    def fixed_cost(self):
        """mt-trace -- true less true, this run's (None: not run)."""
        for row in self.of_kind("trace"):
            if row["name"] == "true" and row["variant"] == "default" and \
                    "traced" in row:
                return row["traced"] - row["base"]
        return None

    def default_targets(self, row):
        name, ratio = row["name"], row["traced"] / row["base"]
        if row["variant"] == "stacks":
            limit = DEFAULT_STACKS_MAX_RATIO.get(name)
            if limit is not None:
                self.target("mt-trace --stacks -- %s" % row["label"],
                            "<= %.1fx untraced (issue 33)" % limit,
                            "%.2fx" % ratio, ratio <= limit)
            return
        limit = DEFAULT_MAX_RATIO.get(name)
        if limit is not None:
            self.target("mt-trace -- %s" % row["label"],
                        "<= %.1fx untraced (issue 33)" % limit,
                        "%.2fx" % ratio, ratio <= limit)
        limit = DEFAULT_MAX_RATIO_NO_STARTUP.get(name)
        if limit is not None:
            fixed = self.fixed_cost()
            if fixed is None:
                self.target("mt-trace -- %s, less mt-trace -- true"
                            % row["label"], "<= %.1fx untraced" % limit,
                            "no true row in this run", None)
            else:
                less = (row["traced"] - fixed) / row["base"]
                self.target("mt-trace -- %s, less mt-trace -- true"
                            % row["label"],
                            "<= %.1fx untraced (issue 33)" % limit,
                            "%.2fx (%s fixed)" % (less, secs(fixed)),
                            less <= limit)

    def tracer_targets(self, row):
        if row["variant"] in ("default", "stacks"):
            self.default_targets(row)
        if row["variant"] in ("fast", "default"):
            self.fast_targets(row)
        if row["variant"] != "default":
            return
        name = row["name"]
        if name == "true":
            self.notes.append(
                "mt-trace -- true: %s of the traced times above is the "
                "fixed cost of a session (start-up + exit)"
                % secs(row["traced"] - row["base"]))
        elif name == "ls":
            self.target("mt-trace -- ls -la /usr/lib", "<= %.2f s" % LS_MAX_S,
                        secs(row["traced"]), row["traced"] <= LS_MAX_S)
            self.target("mt-trace own peak RSS on ls", "<= 10 MB",
                        "%.1f MB" % (row["rss_bytes"] / 1e6),
                        row["rss_bytes"] <= RSS_MAX_BYTES)
        elif name in ("dd", "tar"):
            limit = WORKLOAD_FACTOR * row["base"] + WORKLOAD_ADD_S
            self.target("mt-trace -- %s" % row["label"],
                        "<= 1.1x + 0.1 s = %s" % secs(limit),
                        secs(row["traced"]), row["traced"] <= limit)

    def percall(self):
        fast = [r for r in self.of_kind("percall")
                if r.get("variant") == "fast"]
        for row in self.of_kind("percall"):
            if row.get("variant") == "fast":
                continue
            base, traced = medians(self.results, row)
            untraced_info = fixture_info(
                os.path.join(self.results, row["untraced_log"]))
            traced_info = fixture_info(
                os.path.join(self.results, row["traced_log"]))
            calls = untraced_info["mallocs"] + untraced_info["frees"]
            wall_ns = (traced - base) * 1e9 / calls
            loop_calls = 2 * untraced_info["pairs"]
            loop_ns = (traced_info["loop_ns"] -
                       untraced_info["loop_ns"]) / loop_calls
            print("allocation-heavy fixture: %s malloc+free pairs, %s "
                  "allocator calls" % (count(untraced_info["pairs"]),
                                       count(calls)))
            print("  added per call, (traced - untraced) / calls, "
                  "wall clock:  %8.0f ns" % wall_ns)
            print("  added per call, inside the fixture's loop only:      "
                  "     %8.0f ns   (loop %s -> %s, no start-up or exit)"
                  % (loop_ns, secs(untraced_info["loop_ns"] / 1e9),
                     secs(traced_info["loop_ns"] / 1e9)))
            for f in fast:
                self.percall_fast(f)
            print()
            self.target("allocation-heavy: added per allocator call",
                        "<= %.0f ns" % PER_CALL_MAX_NS, "%.0f ns" % wall_ns,
                        wall_ns <= PER_CALL_MAX_NS)

    def percall_fast(self, row):
        """--fast on the allocation-heavy fixture: what the recorder and
        mt-trace's drain add per call, from the --fast trace row's run."""
        fast = [r for r in self.of_kind("trace")
                if r["name"] == "allocheavy" and r["variant"] == "fast" and
                "index" in r]
        if not fast:
            return
        base, traced = medians(self.results, dict(row, index=fast[0]["index"]))
        untraced_info = fixture_info(
            os.path.join(self.results, row["untraced_log"]))
        traced_info = fixture_info(
            os.path.join(self.results, row["traced_log"]))
        calls = untraced_info["mallocs"] + untraced_info["frees"]
        loop_calls = 2 * untraced_info["pairs"]
        # the columns of the lines above (percall)
        print("  --fast: added per call, wall clock:".ljust(60) +
              "%8.0f ns" % ((traced - base) * 1e9 / calls))
        print("  --fast: added per call, inside the fixture's loop:".ljust(60)
              + "%8.0f ns   (loop %s -> %s, no start-up or exit)"
              % ((traced_info["loop_ns"] - untraced_info["loop_ns"]) /
                 loop_calls, secs(untraced_info["loop_ns"] / 1e9),
                 secs(traced_info["loop_ns"] / 1e9)))

    def stacks(self):
        """Call stacks: the cost of one stack by depth, and each command
        traced with --stacks against traced without (same hyperfine run)."""
        calls = self.of_kind("stackcall")
        traced = {(r["name"], r["variant"]): r for r in self.of_kind("trace")
                  if "traced" in r}
        ratios = [(name, traced[(name, base)], row, label)
                  for base, stacked, label in (
                      ("default", "stacks", "--stacks"),
                      ("nofast", "nofaststacks", "--no-fast --stacks"),
                      ("fast", "faststacks", "--fast --stacks"),
                      ("faststacksnopy", "faststacks", "Python frames"),
                      ("nofaststacksnopy", "nofaststacks",
                       "Python frames, --no-fast"))
                  for (name, variant), row in traced.items()
                  if variant == stacked and (name, base) in traced]
        if not calls and not ratios:
            return
        print("call stacks (--stacks): added per allocator call that takes "
              "a stack, wall clock:")
        print("  ((with - without) - the same for one call) / calls; "
              "rec.: the preloaded recorder's walk (the default), the "
              "others --no-fast's")
        starts = []
        for row in calls:
            fast = row.get("mode") == "fast"
            runs = load(self.results, row["hf"])["results"]
            idle, idle_stacks, without, with_ = (r["median"] for r in runs)
            trace = load(self.results, row["trace"])
            per_ns = ((with_ - without) - (idle_stacks - idle)) * 1e9 / \
                row["pairs"]
            fresh = row.get("walk") == "fresh"
            print("  %-7s%3d frames, %s malloc+free pairs:  %s -> %s   "
                  "+%5.0f ns a stack   (%s events, %s lost)"
                  % ("rec." if fast else "fresh" if fresh else "",
                     row["frames"],
                     count(row["pairs"]), secs(without), secs(with_), per_ns,
                     count(trace["events"]), count(trace["lost"])))
            if fast:
                if row["frames"] >= 15:
                    self.target("stacks, recorder: added per allocator call, "
                                "%d frames" % row["frames"],
                                "<= %.0f ns" % STACK_MAX_NS,
                                "%.0f ns" % per_ns, per_ns <= STACK_MAX_NS)
                continue
            starts.append(idle_stacks - idle)
            if row["frames"] >= 15:
                self.target("stacks: added per allocator call, %d frames%s"
                            % (row["frames"], ", fresh" if fresh else ""),
                            "<= %.0f ns" % STACK_MAX_NS,
                            "%.0f ns" % per_ns, per_ns <= STACK_MAX_NS)
        if starts:
            print("  a session's start-up and exit, added by --stacks: %s"
                  % secs(sorted(starts)[len(starts) // 2]))
        for name, without, with_, label in ratios:
            ratio = with_["traced"] / without["traced"]
            print("  %-26s traced %s -> %s with %s: %.2fx "
                  "(the command's own run: %s -> %s, %.2fx)"
                  % (with_["label"], secs(without["traced"]),
                     secs(with_["traced"]), label, ratio,
                     secs(without["run_s"]), secs(with_["run_s"]),
                     with_["run_s"] / max(without["run_s"], 1e-9)))
            if name == "python3" and label == "Python frames":
                self.target("stacks: python3, Python frames / without",
                            "<= %.1fx" % PYFRAMES_MAX_RATIO,
                            "%.2fx" % ratio, ratio <= PYFRAMES_MAX_RATIO)
            if name == "python" and label == "Python frames, --no-fast":
                self.target("stacks: python3 --no-fast, Python frames / "
                            "without", "<= %.1fx" % PYFRAMES_MAX_RATIO,
                            "%.2fx" % ratio, ratio <= PYFRAMES_MAX_RATIO)
            if name in ("python3", "tar") and label == "--stacks":
                self.target("stacks: %s, --stacks / traced" % name,
                            "<= %.1fx" % STACK_MAX_RATIO, "%.2fx" % ratio,
                            ratio <= STACK_MAX_RATIO)
        print()

    def storm(self):
        """Lost events at a sustained rate: the storm's runs, each rate
        from its own trace (events over the storm's exec-to-exit span)."""
        rows = self.of_kind("storm")
        if not rows:
            return
        print("lost events under a storm: storm_threads, %d threads of "
              "malloc(48)+free, traced" % rows[0]["threads"])
        worst = None
        for row in rows:
            t = load(self.results, row["trace"])
            events_s = t["events"] / (t["run_ns"] / 1e9)
            print("  run %d: %s events in %s: %s sustained, %s lost%s" % (
                row["run"], count(t["events"]), secs(t["run_ns"] / 1e9),
                rate(events_s), count(t["lost"]),
                "" if t["complete"] else " (trace INCOMPLETE)"))
            if worst is None or events_s < worst[0]:
                worst = (events_s, t["lost"], t["complete"])
        lost = sum(load(self.results, r["trace"])["lost"] for r in rows)
        print()
        self.target("lost events at 1 M events/s sustained", "0",
                    "%s lost, slowest run %s" % (count(lost),
                                                  rate(worst[0])),
                    lost == 0 if worst[0] >= 1e6 else None)
        if worst[0] < 1e6:
            self.notes.append(
                "lost events: the slowest storm run made %s with the "
                "tracer on; below 1 M/s the target is not tested"
                % rate(worst[0]))

    def bystander(self):
        for row in self.of_kind("bystander"):
            alone = load(self.results, row["alone"])
            print("bystander (a process NOT traced), malloc(32)+free pair, "
                  "median of %d rounds of %s:" % (alone["rounds"],
                                                  count(alone["pairs"])))
            print("  alone:                                       %8.1f ns"
                  % alone["ns_per_pair"])
            if "skipped" in row:
                print("  during an mt-trace session: skipped: %s"
                      % row["skipped"])
            else:
                for key, what in (("during", "default"),
                                  ("during_global", "--global-probes"),
                                  ("during_noalloc",
                                   "--track-allocators=false")):
                    if key not in row:
                        continue
                    during = load(self.results, row[key])
                    print("  during an mt-trace %-24s %8.1f ns  (%.1fx)" % (
                        what + " session:", during["ns_per_pair"],
                        during["ns_per_pair"] / alone["ns_per_pair"]))
            if row.get("trap"):
                trap = load(self.results, row["trap"])
                one = trap["ns_per_pair"] - alone["ns_per_pair"]
                print("  under one bare uprobe on malloc, no BPF:     "
                      "%8.1f ns  (one trap: %.0f ns)"
                      % (trap["ns_per_pair"], one))
                print("  a traced malloc+free pair hits three probes (malloc "
                      "entry and return, free):\n  %.0f ns a call before any "
                      "BPF runs, on this machine" % (1.5 * one))
            print()

    def fork_rss(self):
        for row in self.of_kind("fork_rss"):
            runs = [(what, load(self.results, row[key]))
                    for key, what in (("untraced", "untraced"),
                                      ("default", "traced"),
                                      ("global", "traced, --global-probes"))]
            print("RSS a traced process gains (fork_rss: 100 malloc+free "
                  "pairs, fork, 100 more in the child), kB")
            fmt = "  %-8s %-24s %6s %6s %6s %6s %6s"
            print(fmt % ("process", "run", "VmRSS", "anon", "file", "shmem",
                         "Pss"))
            for who in ("parent", "child"):
                for what, fig in runs:
                    f = fig[who]
                    print(fmt % (who, what, f["rss"], f["anon"], f["file"],
                                 f["shmem"], f["pss"]))
            if row.get("others"):
                print("  note: %s other mt-trace session(s) ran: global "
                      "probes of theirs change the untraced figures too"
                      % row["others"])
            print()

    def offline(self):
        """A block per trace: the real ones bench/run kept, then mt-gen's."""
        rows = self.of_kind("offline")
        if not rows:
            return
        traces = {r["trace"]: r for r in self.of_kind("offline_trace")}
        fmt = "%-22s %10s %11s %9s %10s %12s"
        print("offline stages, %d runs each; the readers read mt-encode's "
              "artifact (zstd); 1 CPU: taskset -c 0"
              % runs_of(self.results, rows[0]))
        for name, t in traces.items():
            if "skipped" in t:
                print("%s: skipped (%s)" % (name, t["skipped"]))
        order = [n for n in traces if "skipped" not in traces[n]]
        for r in rows:  # manifests of runs before traces were named
            r.setdefault("trace", "mt-gen %s" % count(r["events"]))
            if r["trace"] not in order:
                order.append(r["trace"])
        for name in order:
            t = traces.get(name, {})
            size = ""
            if t.get("events"):
                size = ", artifact %.2f bytes an event" % (
                    t["zstd_bytes"] / t["events"])
            print()
            print("%s: %s events%s%s" % (
                name, count(t.get("events", 0)) if t else "?", size,
                " (synthetic, random values: the worst case for zstd)"
                if name.startswith("mt-gen") else ""))
            print(fmt % ("stage", "input", "cat input", "median",
                         "events/s", "input MB/s"))
            for row in [r for r in rows if r["trace"] == name]:
                base, median = medians(self.results, row)
                events_s = row["events"] / median
                print(fmt % (row["label"],
                             "%.0f MB" % (row["input_bytes"] / 1e6),
                             secs(base), secs(median), rate(events_s),
                             "%.0f" % (row["input_bytes"] / 1e6 / median)))
                if row.get("target"):
                    # "mt-encode --threads 2", "mt-report, 1 CPU": the stage
                    stage = row["label"].split(",")[0].split(" --")[0]
                    self.target("%s events/s (zstd), %s, %s"
                                % (stage, row["target"],
                                   name.split(" ")[0]),
                                ">= 10 M/s", rate(events_s),
                                events_s >= OFFLINE_MIN_EVENTS_S)
        print()

    def sizes(self):
        rows = self.of_kind("size")
        if not rows:
            return
        fmt = "%-24s %12s %10s %13s %12s"
        print("artifact size, bytes an event (mt-encode: zstd level 1 or "
              "its quick search by frame, 1 MiB frames; -u: plain)")
        print(fmt % ("trace", "events", "raw", "plain (-u)", "zstd"))
        for row in rows:
            per = lambda key: row[key] / max(row["events"], 1)
            print(fmt % (row["name"], count(row["events"]),
                         "%.1f" % per("raw_bytes"),
                         "%.1f" % per("plain_bytes"),
                         "%.2f" % per("zstd_bytes")))
            if row["heavy"]:
                self.target("artifact bytes/event, allocation-heavy",
                            "<= %.0f" % HEAVY_MAX_BYTES_PER_EVENT,
                            "%.2f" % per("zstd_bytes"),
                            per("zstd_bytes") <= HEAVY_MAX_BYTES_PER_EVENT)
        print()

    def target_table(self):
        fmt = "%-52s %-28s %-32s %s"
        print(fmt % ("target (issue 6)", "goal", "measured", "met"))
        for what, goal, measured, met in self.targets:
            verdict = {True: "met", False: "NOT MET", None: "not tested"}[met]
            print(fmt % (what, goal, measured, verdict))
        for note in self.notes:
            print("note: " + note)
        for row in self.of_kind("elapsed"):
            print()
            print("bench/run took %d s" % row["seconds"])


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: bench/table.py RESULTS_DIR")
    table = Table(sys.argv[1])
    table.header()
    table.tracer()
    table.peers()
    table.percall()
    table.stacks()
    table.storm()
    table.bystander()
    table.fork_rss()
    table.offline()
    table.sizes()
    table.target_table()


if __name__ == "__main__":
    main()
