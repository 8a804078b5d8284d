// mt-report --html: draws the run's data (the JSON in #mt-data) into the
// page.  Hand-written, no library, nothing fetched.  The address's
// fragment sets the view: #t=FROM,TO (ns: the timeline's range),
// search=REGEX (frames marked), zoom=NAME;NAME (the flame graph's frame,
// root first), space=heap|mapped, metric=0..3.
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("mt-data").textContent);
  const F = D.facts;
  const main = document.getElementById("mt");
  const SVGNS = "http://www.w3.org/2000/svg";

  // ---- numbers for people, as mt-report's text (lib/common/human.c) ----
  // v with d decimals as C's printf has it: a tie to the even digit
  // (JS's toFixed takes the larger: 3.125 would read 3.13, not 3.12)
  function fixed(v, d) {
    const f = Math.pow(10, d), x = v * f, n = Math.floor(x);
    const r = x - n === 0.5 ? (n % 2 ? n + 1 : n) : Math.round(x);
    return (r / f).toFixed(d);
  }
  function fmtBytes(b) {
    if (b === null || b === undefined) return "-";
    const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    if (b < 1024) return Math.round(b) + " B";
    let v = b, u = 0;
    while (v >= 1024 && u + 1 < units.length) { v /= 1024; u++; }
    return (v < 9.995 ? fixed(v, 2) : v < 99.95 ? fixed(v, 1) : fixed(v, 0)) +
      " " + units[u];
  }
  function fmtCount(n) {
    if (n === null || n === undefined) return "-";
    return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  }
  function fmtDur(ns) {
    if (ns === null || ns === undefined) return "-";
    const three = (v, u) =>
      (v < 9.995 ? fixed(v, 2) : v < 99.95 ? fixed(v, 1) : fixed(v, 0)) + " " + u;
    if (ns < 1000) return Math.round(ns) + " ns";
    if (ns < 999500) return three(ns / 1e3, "us");
    if (ns < 999500000) return three(ns / 1e6, "ms");
    if (ns < 999.5e9) return three(ns / 1e9, "s");
    return Math.round(ns / 1e9) + " s";
  }
  const plural = (n) => (n === 1 ? "" : "s");

  // ---- DOM helpers ----
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    for (const c of kids) e.append(c);
    return e;
  }
  function sv(tag, attrs, ...kids) {
    const e = document.createElementNS(SVGNS, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    for (const c of kids) e.append(c);
    return e;
  }
  function section(id, title) {
    const s = el("section", { id: id }, el("h2", {}, title));
    main.append(s);
    return s;
  }
  // a cell holding a number: the text for people, data-v for scripts
  function num(v, fmt, attrs) {
    const a = Object.assign({ "data-v": v === null || v === undefined ? "" : String(v) }, attrs || {});
    return el("td", a, fmt(v));
  }

  // ---- the view asked for in the address ----
  const want = {};
  for (const kv of location.hash.replace(/^#/, "").split("&")) {
    const i = kv.indexOf("=");
    if (i > 0) want[kv.slice(0, i)] = decodeURIComponent(kv.slice(i + 1));
  }

  // ---- summary ----
  function summary() {
    const T = F.tree;
    main.append(el("h1", {}, "mt report: ", el("code", {}, F.command_line)));
    if (!F.complete)
      main.append(el("div", { class: "warn" }, "incomplete trace: " +
        (F.incomplete_reason || "the stream ended without its trailer") +
        " (figures cover only what was recorded)"));
    if (F.lost_events)
      main.append(el("div", { class: "warn" }, "lost events: " + fmtCount(F.lost_events) +
        " (a ring buffer was full: the figures miss them)"));
    const s = section("summary", "Summary");
    const t = el("table");
    const row = (key, label, cell, at) => {
      const tr = el("tr", {}, el("td", { class: "k" }, label), cell);
      cell.id = "s-" + key;
      cell.className = "v";
      if (at !== undefined) tr.append(el("td", { class: "k" }, at === null ? "" : "at " + fmtDur(at)));
      t.append(tr);
    };
    const ex = F.exit || {};
    row("exit", "exit", el("td", {}, ex.code !== undefined ? String(ex.code) :
      ex.signal !== undefined ? "killed by signal " + ex.signal : "unknown"));
    row("duration_ns", "duration", num(F.duration_ns, fmtDur));
    row("processes", "processes", num(F.processes, fmtCount));
    row("events", "events", num(F.events, fmtCount));
    row("lost_events", "lost events", num(F.lost_events, fmtCount));
    if (F.allocators_tracked) {
      row("peak_heap", "peak heap", num(T.peak_heap, fmtBytes), T.peak_heap_t_ns);
      row("total_allocated", "allocated", num(T.total_allocated, fmtBytes));
      row("allocations", "allocations (realloc included)", num(T.allocations, fmtCount));
      row("frees", "frees (free() calls)", num(T.frees, fmtCount));
      row("reallocs", "reallocs", num(T.reallocs, fmtCount));
      if (T.realloc_frees !== undefined && T.realloc_frees !== null)
        row("realloc_frees", "blocks released by realloc", num(T.realloc_frees, fmtCount));
      row("not_freed", "not freed", num(T.not_freed, fmtBytes));
      row("not_freed_blocks", "blocks not freed", num(T.not_freed_blocks, fmtCount));
      if (T.temporary_allocations !== undefined)
        row("temporary_allocations", "temporary allocations", num(T.temporary_allocations, fmtCount));
    } else {
      t.append(el("tr", {}, el("td", { class: "k" }, "allocators"),
        el("td", { class: "v" }, "not tracked: no heap figures for this run")));
    }
    row("peak_mapped", "peak mapped", num(T.peak_mapped, fmtBytes), T.peak_mapped_t_ns);
    if (T.peak_rss !== null)
      row("peak_rss", "peak RSS", num(T.peak_rss, fmtBytes), T.peak_rss_t_ns);
    s.append(t);
  }

  // ---- ticks: round numbers ----
  function niceStep(span, unit, want) {
    const raw = span / unit / want;
    const mag = Math.pow(10, Math.floor(Math.log10(raw > 0 ? raw : 1)));
    const f = raw / mag;
    return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag * unit;
  }
  function byteUnit(max) {
    const names = ["B", "KiB", "MiB", "GiB", "TiB"];
    let u = 0, unit = 1;
    while (u < 4 && max >= 1024 * unit * 2) { unit *= 1024; u++; }
    return [unit, names[u]];
  }
  function timeUnit(span) {
    if (span >= 2e9) return [1e9, "s"];
    if (span >= 2e6) return [1e6, "ms"];
    if (span >= 2e3) return [1e3, "us"];
    return [1, "ns"];
  }
  const trimNum = (v) => String(Number(v.toPrecision(12)));

  // ---- timeline ----
  const SERIES = [
    { key: "heap", label: "heap", color: "#c0392b" },
    { key: "rss", label: "RSS", color: "#2471a3" },
    { key: "rss_anon", label: "RSS anon", color: "#76b7e5" },
    { key: "physical", label: "physical (PSS)", color: "#7d3c98" },
    { key: "mapped", label: "mapped", color: "#7f8c8d" },
  ];
  // [[t, v], ...]: the value from t on; each bucket at its maximum first
  function steps(s) {
    const out = [];
    if (!s || !s.points) return out;
    const bucket = s.bucket_ns || 1;
    for (const p of s.points) {
      out.push([p[0], p[1]]);
      if (p[2] !== p[1]) out.push([p[0] + Math.max(bucket, 1), p[2]]);
    }
    return out;
  }
  function valueAt(st, t) {
    let lo = 0, hi = st.length - 1, v = 0;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (st[mid][0] <= t) { v = st[mid][1]; lo = mid + 1; } else hi = mid - 1;
    }
    return v;
  }
  function timeline() {
    const have = SERIES.filter((d) => D.series[d.key] && D.series[d.key].points &&
      D.series[d.key].points.length);
    if (!have.length) return;
    const s = section("timeline", "Memory over time");
    // mapped memory is often ten times the heap: off unless alone
    const shown = {};
    for (const d of have) shown[d.key] = d.key !== "mapped" || have.length === 1;
    const st = {};
    for (const d of have) st[d.key] = steps(D.series[d.key]);
    const dur = Math.max(F.duration_ns || 0, 1);
    let range = [0, dur];
    if (want.t) {
      const r = want.t.split(",").map(Number);
      if (r.length === 2 && r[0] < r[1]) range = r;
    }
    const controls = el("div", { class: "controls" });
    for (const d of have) {
      const cb = el("input", { type: "checkbox", id: "tl-" + d.key });
      cb.checked = shown[d.key];
      cb.addEventListener("change", () => { shown[d.key] = cb.checked; draw(); });
      controls.append(el("label", { style: "color:" + d.color }, cb, " " + d.label +
        " (peak " + fmtBytes(D.series[d.key].peak) + ")"));
    }
    const reset = el("button", { id: "tl-reset", type: "button" }, "whole run");
    reset.addEventListener("click", () => { range = [0, dur]; draw(); });
    controls.append(reset, el("span", { class: "note" }, "drag across the plot to zoom on a time range"));
    const readout = el("div", { class: "readout", id: "tl-readout" }, "\u00a0");
    const W = 1000, H = 300, L = 80, R = 20, TP = 10, B = 40, PW = W - L - R, PH = H - TP - B;
    const svg = sv("svg", { id: "tl-svg", viewBox: "0 0 " + W + " " + H, width: W, height: H });
    s.append(controls, svg, readout);
    let vmax = 1;
    const X = (t) => L + (t - range[0]) / (range[1] - range[0]) * PW;
    const Y = (v) => TP + PH - v / vmax * PH;
    const T = (x) => range[0] + (x - L) / PW * (range[1] - range[0]);

    function draw() {
      svg.textContent = "";
      vmax = 1;
      for (const d of have) {
        if (!shown[d.key]) continue;
        const a = st[d.key];
        let v = valueAt(a, range[0]);
        vmax = Math.max(vmax, v);
        for (const p of a) if (p[0] >= range[0] && p[0] <= range[1]) vmax = Math.max(vmax, p[1]);
      }
      vmax *= 1.05;
      const [unit, uname] = byteUnit(vmax);
      const ystep = niceStep(vmax, unit, 5);
      const axes = sv("g", { class: "axes" });
      for (let v = 0; v <= vmax; v += ystep) {
        axes.append(sv("line", { x1: L, x2: W - R, y1: Y(v), y2: Y(v), stroke: "#ddd" }),
          sv("text", { x: L - 6, y: Y(v) + 4, "text-anchor": "end", class: "ytick" },
            trimNum(v / unit) + " " + uname));
      }
      const span = range[1] - range[0];
      const [tu, tname] = timeUnit(span);
      const tstep = niceStep(span, tu, 8);
      for (let t = Math.ceil(range[0] / tstep) * tstep; t <= range[1]; t += tstep) {
        axes.append(sv("line", { x1: X(t), x2: X(t), y1: TP, y2: TP + PH, stroke: "#eee" }),
          sv("text", { x: X(t), y: TP + PH + 16, "text-anchor": "middle", class: "xtick" },
            trimNum(t / tu)));
      }
      axes.append(sv("text", { x: L + PW / 2, y: H - 4, "text-anchor": "middle" },
        "time since start (" + tname + ")"),
        sv("rect", { x: L, y: TP, width: PW, height: PH, fill: "none", stroke: "#888" }));
      svg.append(axes);
      const clip = sv("clipPath", { id: "tl-clip" }, sv("rect", { x: L, y: TP, width: PW, height: PH }));
      svg.append(clip);
      for (const d of have) {
        if (!shown[d.key]) continue;
        const a = st[d.key];
        let path = "M" + X(range[0]) + "," + Y(valueAt(a, range[0]));
        for (const p of a) {
          if (p[0] <= range[0]) continue;
          if (p[0] > range[1]) break;
          path += "H" + X(p[0]).toFixed(2) + "V" + Y(p[1]).toFixed(2);
        }
        path += "H" + X(range[1]);
        const ser = D.series[d.key];
        svg.append(sv("path", { d: path, fill: "none", stroke: d.color, "stroke-width": 1.5,
          "clip-path": "url(#tl-clip)", class: "series", "data-key": d.key },
          sv("title", {}, d.label + ": peak " + fmtBytes(ser.peak) +
            (ser.peak_t_ns !== null ? " at " + fmtDur(ser.peak_t_ns) : ""))));
      }
      cursor = sv("line", { y1: TP, y2: TP + PH, stroke: "#000", "stroke-dasharray": "3,3", visibility: "hidden" });
      sel = sv("rect", { y: TP, height: PH, fill: "rgba(36,113,163,0.15)", visibility: "hidden" });
      svg.append(cursor, sel);
    }
    let cursor, sel, dragFrom = null;
    function svgX(ev) {
      const r = svg.getBoundingClientRect();
      return Math.min(Math.max((ev.clientX - r.left) / r.width * W, L), L + PW);
    }
    function read(t) {
      const parts = ["t = " + fmtDur(t)];
      for (const d of have)
        if (shown[d.key]) parts.push(d.label + " " + fmtBytes(valueAt(st[d.key], t)));
      readout.textContent = parts.join("   ");
    }
    svg.addEventListener("mousemove", (ev) => {
      const x = svgX(ev);
      cursor.setAttribute("x1", x);
      cursor.setAttribute("x2", x);
      cursor.setAttribute("visibility", "visible");
      read(T(x));
      if (dragFrom !== null) {
        sel.setAttribute("x", Math.min(dragFrom, x));
        sel.setAttribute("width", Math.abs(x - dragFrom));
        sel.setAttribute("visibility", "visible");
      }
    });
    svg.addEventListener("mouseleave", () => cursor.setAttribute("visibility", "hidden"));
    svg.addEventListener("mousedown", (ev) => { dragFrom = svgX(ev); ev.preventDefault(); });
    window.addEventListener("mouseup", (ev) => {
      if (dragFrom === null) return;
      const x = svgX(ev), a = Math.min(dragFrom, x), b = Math.max(dragFrom, x);
      dragFrom = null;
      if (b - a >= 3) {
        const t0 = T(a), t1 = T(b);
        range = [t0, t1];
      }
      draw();
    });
    draw();
  }

  // ---- flame graph ----
  function flame() {
    const spaces = ["heap", "mapped"].filter((k) => D.flame[k] && D.flame[k].v.some((x) => x > 0));
    if (!spaces.length) return;
    const s = section("flame", "Flame graph of the allocation sites");
    let space = spaces.includes(want.space) ? want.space : spaces[0];
    let metric = /^[0-3]$/.test(want.metric || "") ? Number(want.metric) : 0;
    let zoom = [D.flame[space]];  // the path from the root to the frame shown whole
    let search = want.search || "";
    const spaceSel = el("select", { id: "fl-space" });
    for (const k of spaces) spaceSel.append(el("option", { value: k }, k === "heap" ? "heap (malloc family)" : "address space (mmap, mremap, brk)"));
    spaceSel.value = space;
    const metricSel = el("select", { id: "fl-metric" });
    const fillMetrics = () => {
      metricSel.textContent = "";
      D.metric_words[space].forEach((w, i) => metricSel.append(el("option", { value: i }, w)));
      metricSel.value = metric;
    };
    fillMetrics();
    const input = el("input", { id: "fl-search", type: "search", placeholder: "search (regular expression)", size: 28 });
    input.value = search;
    const reset = el("button", { type: "button", id: "fl-reset" }, "reset zoom");
    const status = el("span", { id: "fl-status", class: "note" });
    s.append(el("div", { class: "controls" }, el("label", {}, "space ", spaceSel),
      el("label", {}, "weigh by ", metricSel), input, reset, status));
    s.append(el("div", { class: "note" }, "callers above callees; click a frame to zoom on it, click a frame above to zoom out; hover for its value"));
    const svg = sv("svg", { id: "flame-svg" });
    s.append(svg);
    const W = 1200, ROW = 17, CHAR = 6.6;

    function colour(name) {
      let h = 2166136261;
      for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 16777619) >>> 0;
      return "rgb(" + (205 + h % 50) + "," + (80 + (h >>> 8) % 150) + "," + ((h >>> 16) % 55) + ")";
    }
    function valueText(v) {
      return metric === 2 ? fmtCount(v) + " call" + plural(v) : fmtBytes(v);
    }
    function matcher() {
      if (!search) return null;
      try { return new RegExp(search); } catch (e) { return { test: (n) => n.includes(search) }; }
    }
    // the frame at a path of names below the root (for #zoom=)
    function findPath(names) {
      const path = [D.flame[space]];
      for (const n of names) {
        const c = (path[path.length - 1].c || []).find((k) => k.n === n);
        if (!c) break;
        path.push(c);
      }
      return path;
    }
    if (want.zoom) zoom = findPath(want.zoom.split(";"));

    function draw() {
      const re = matcher();
      const top = zoom[zoom.length - 1];
      const total = D.flame[space].v[metric];
      const scale = top.v[metric] ? (W - 20) / top.v[metric] : 0;
      const rows = [];
      let depth = 0, matchedFrames = 0, matchedValue = 0;
      function frame(n, x, w, d, above, path) {
        const g = sv("g", { class: "f" + (above ? " above" : ""), "data-name": n.n });
        const pct = total ? (100 * n.v[metric] / total).toFixed(2) : "0.00";
        g.append(sv("title", {}, n.n + " (" + valueText(n.v[metric]) + ", " + pct + "%)"),
          sv("rect", { x: x.toFixed(2), y: d * ROW, width: w.toFixed(2), height: ROW - 1, fill: colour(n.n), rx: 2 }));
        if (w > 3 * CHAR) {
          const fit = Math.floor((w - 6) / CHAR), shown = n.s || n.n;
          g.append(sv("text", { x: (x + 3).toFixed(2), y: d * ROW + ROW - 5 },
            shown.length <= fit ? shown : shown.slice(0, fit - 2) + ".."));
        }
        if (re && re.test(n.n)) g.classList.add("match");
        g.addEventListener("click", () => { zoom = path; draw(); });
        rows.push(g);
        depth = Math.max(depth, d + 1);
      }
      // ancestors of the frame shown whole, full width, faded
      zoom.forEach((n, i) => { if (i < zoom.length - 1) frame(n, 10, W - 20, i, true, zoom.slice(0, i + 1)); });
      function below(n, x, d, path, inMatch) {
        const w = n.v[metric] * scale;
        if (w < 0.3) return;
        frame(n, x, w, d, false, path);
        const m = re && re.test(n.n);
        if (m) matchedFrames++;
        if (m && !inMatch) matchedValue += n.v[metric];
        let cx = x;
        for (const k of n.c || []) {
          if (!k.v[metric]) continue;
          below(k, cx, d + 1, path.concat([k]), inMatch || m);
          cx += k.v[metric] * scale;
        }
      }
      below(top, 10, zoom.length - 1, zoom, false);
      svg.textContent = "";
      const H = depth * ROW + 4;
      svg.setAttribute("viewBox", "0 0 " + W + " " + H);
      svg.setAttribute("width", W);
      svg.setAttribute("height", H);
      for (const g of rows) svg.append(g);
      status.textContent = "total " + valueText(total) +
        (zoom.length > 1 ? "; shown: " + top.n + " (" + valueText(top.v[metric]) + ")" : "") +
        (re ? "; matched " + matchedFrames + " frame" + plural(matchedFrames) + ", " +
          valueText(matchedValue) + " (" + (total ? (100 * matchedValue / total).toFixed(1) : "0.0") + "%)" : "");
      status.setAttribute("data-matched-frames", re ? matchedFrames : "");
      status.setAttribute("data-matched-value", re ? matchedValue : "");
    }
    spaceSel.addEventListener("change", () => {
      space = spaceSel.value; zoom = [D.flame[space]]; fillMetrics(); draw();
    });
    metricSel.addEventListener("change", () => { metric = Number(metricSel.value); zoom = [D.flame[space]]; draw(); });
    input.addEventListener("input", () => { search = input.value; draw(); });
    reset.addEventListener("click", () => { zoom = [D.flame[space]]; draw(); });
    draw();
  }

  // ---- top sites ----
  function frameText(f) {
    let t = f.function || "?";
    if (f.file && f.line) t += "  " + f.file.replace(/.*\//, "") + ":" + f.line;
    else if (f.object) t += "  (" + f.object.replace(/.*\//, "") + ")";
    if (f.inlined) t += " (inlined)";
    return t;
  }
  function sites(key, title) {
    const S = F[key];
    if (!S || !S.top || !S.top.length) return;
    const s = section(key === "sites" ? "sites" : "mapped-sites", title);
    s.append(el("div", { class: "note" }, fmtCount(S.count) + " distinct stack" + plural(S.count) +
      "; the " + S.top.length + " heaviest by bytes live at the peak; innermost frame first"));
    const t = el("table", {}, el("tr", {}, el("th", {}, "#"), el("th", {}, "at peak"),
      el("th", {}, key === "sites" ? "allocated" : "mapped"), el("th", {}, "calls"),
      el("th", {}, key === "sites" ? "not freed" : "not unmapped"),
      ...(key === "sites" && S.top[0].temporary !== undefined ? [el("th", {}, "temporary")] : []),
      el("th", { class: "l" }, "stack")));
    S.top.forEach((site, i) => {
      const frames = site.frames || [];
      const cell = el("td", { class: "l stack" });
      const first = frames.slice(0, 6), rest = frames.slice(6);
      for (const f of first) cell.append(el("div", { title: f.function || "" }, frameText(f)));
      if (!frames.length) cell.append(el("div", {}, "(no stack recorded)"));
      if (rest.length) {
        const det = el("details", {}, el("summary", {}, rest.length + " more frame" + plural(rest.length)));
        for (const f of rest) det.append(el("div", { title: f.function || "" }, frameText(f)));
        cell.append(det);
      }
      if (site.truncated) cell.append(el("div", {}, "... (stack truncated when traced)"));
      t.append(el("tr", { class: "site" }, el("td", {}, String(i + 1)), num(site.peak_bytes, fmtBytes),
        num(site.allocated_bytes, fmtBytes), num(site.allocations, fmtCount),
        num(site.not_freed_bytes, fmtBytes),
        ...(key === "sites" && site.temporary !== undefined ? [num(site.temporary, fmtCount)] : []),
        cell));
    });
    s.append(t);
  }

  // ---- processes ----
  function processes() {
    const P = F.top_processes || [];
    if (!P.length) return;
    const s = section("processes", "Processes");
    s.append(el("div", { class: "note" }, "heaviest first; " + fmtCount(F.processes) + " process" +
      (F.processes === 1 ? "" : "es") + " in all"));
    const t = el("table", {}, el("tr", {}, el("th", {}, "pid"), el("th", {}, "parent"),
      el("th", { class: "l" }, "process"), el("th", {}, "peak heap"), el("th", {}, "allocated"),
      el("th", { title: "malloc, calloc, realloc, aligned allocations" }, "allocs"),
      el("th", { title: "free calls; blocks released by realloc not included" }, "frees"),
      el("th", {}, "not freed"), el("th", {}, "peak mapped"), el("th", {}, "peak RSS"), el("th", {}, "exit")));
    for (const p of P) {
      const ex = p.exit || {};
      t.append(el("tr", { class: "proc" }, el("td", {}, String(p.pid)),
        el("td", {}, p.ppid === null ? "" : String(p.ppid)),
        el("td", { class: "l mono" }, p.command_line || p.name),
        num(p.peak_heap, fmtBytes), num(p.total_allocated, fmtBytes), num(p.allocations, fmtCount),
        num(p.frees, fmtCount), num(p.not_freed, fmtBytes), num(p.peak_mapped, fmtBytes),
        num(p.peak_rss, fmtBytes),
        el("td", {}, ex.code !== undefined ? String(ex.code) : ex.signal !== undefined ? "signal " + ex.signal : "")));
    }
    s.append(t);
  }

  summary();
  timeline();
  flame();
  sites("sites", "Top allocation sites");
  sites("mapped_sites", "Top address-space sites (mmap, mremap, brk)");
  processes();
  main.append(el("p", { class: "note" }, "mt-report " + D.version + " (mt, memory tracking for any Linux command)"));
  document.body.setAttribute("data-ready", "1");
})();
