// loadmgr dashboard: polls the broker's /loadmgr/v1 endpoints and draws what they say. No framework, no build
// step; every value from the server goes into the page as text (textContent, SVG attributes), never as HTML.
"use strict";

(() => {
  const API = "/loadmgr/v1";
  const TOKEN_KEY = "loadmgr-token";
  // Okabe–Ito, then black; lines also cycle through dash patterns so no two brokers differ by colour alone.
  const PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"];
  const DASHES = ["", "7 4", "2 3", "9 3 2 3"];
  const SVG_NS = "http://www.w3.org/2000/svg";
  const RING = 4294967296; // 2^32 hashes

  const state = {
    cluster: null,
    history: null,
    colours: new Map(), // broker id -> index, stable for the page's life
    clusterError: null,
    authNeeded: false,
    planLoaded: false,
    ringShown: false,
  };

  // ---------------------------------------------------------------- small helpers

  const $ = (id) => document.getElementById(id);

  function el(tag, props, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k === "title") e.title = v;
      else if (k.startsWith("data-")) e.setAttribute(k, v);
      else e[k] = v;
    }
    for (const c of children) {
      if (c === null || c === undefined) continue;
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v !== undefined && v !== null) e.setAttribute(k, String(v));
    }
    for (const c of children) {
      if (c !== null && c !== undefined) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return e;
  }

  function titled(node, text) {
    node.append(svg("title", {}, text));
    return node;
  }

  function colourIndex(id) {
    if (!state.colours.has(id)) state.colours.set(id, state.colours.size);
    return state.colours.get(id);
  }
  const colourOf = (id) => PALETTE[colourIndex(id) % PALETTE.length];
  // Colour i % 8 with a dash pattern shifted every 8 brokers: the first 32 brokers differ in colour or dash.
  const dashOf = (id) => {
    const i = colourIndex(id);
    return DASHES[(i + Math.floor(i / PALETTE.length)) % DASHES.length];
  };

  const pct = (x) => (x === null || x === undefined ? "–" : `${x.toFixed(1)} %`);
  const num = (x, digits = 0) => (x === null || x === undefined ? "–" :
    x.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits }));
  const clock = (ms) => new Date(ms).toLocaleTimeString("en-GB", { hour12: false });

  function duration(ms) {
    if (ms === null || ms === undefined) return "–";
    if (ms < 1000) return `${Math.round(ms)} ms`;
    if (ms < 60000) return `${(ms / 1000).toFixed(1)} s`;
    if (ms < 3600000) return `${Math.floor(ms / 60000)} min ${Math.round((ms % 60000) / 1000)} s`;
    return `${(ms / 3600000).toFixed(1)} h`;
  }

  function replaceChildren(node, ...children) {
    node.replaceChildren(...children.filter((c) => c !== null && c !== undefined));
  }

  // ---------------------------------------------------------------- talking to the broker

  class ApiError extends Error {
    constructor(status, reason) {
      super(reason);
      this.status = status;
    }
  }

  async function api(path) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    let response;
    try {
      response = await fetch(path, { headers, cache: "no-store" });
    } catch (e) {
      throw new ApiError(0, `cannot reach this broker (${location.host}): ${e.message}`);
    }
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      const reason = body && body.reason ? body.reason : `HTTP ${response.status}`;
      if (response.status === 401 || response.status === 403) needToken(reason);
      throw new ApiError(response.status, reason);
    }
    return body;
  }

  function needToken(reason) {
    state.authNeeded = true;
    $("login").hidden = false;
    $("login-why").textContent = reason;
  }

  function setBanner() {
    const banner = $("banner");
    const degraded = state.cluster && state.cluster.degraded;
    let message = state.clusterError;
    if (!message && degraded) {
      message = `The leader cannot be reached (${degraded}): the brokers below come from the reports in the store; history and moves wait for the leader.`;
    }
    banner.hidden = !message;
    banner.className = state.clusterError ? "banner error" : "banner";
    banner.textContent = message || "";
  }

  function setConnection(ok, text) {
    const conn = $("conn");
    conn.className = ok ? "conn ok" : "conn bad";
    conn.textContent = text;
  }

  // ---------------------------------------------------------------- cluster

  function bar(value, opts) {
    const over = opts.threshold !== undefined && value !== null && value >= opts.threshold;
    const b = el("div", { class: opts.small ? "bar small" : "bar" });
    const fill = el("div", { class: over ? "fill over" : "fill" });
    fill.style.width = `${Math.max(0, Math.min(100, value || 0))}%`;
    b.append(fill);
    if (opts.threshold !== undefined) {
      const m = el("div", { class: "mark thr", title: `overload threshold ${opts.threshold} %` });
      m.style.left = `${Math.min(100, opts.threshold)}%`;
      b.append(m);
    }
    if (opts.mean !== undefined && opts.mean !== null) {
      const m = el("div", { class: "mark mean", title: `cluster mean ${opts.mean.toFixed(1)} %` });
      m.style.left = `${Math.min(100, opts.mean)}%`;
      b.append(m);
    }
    const label = el("span", { class: over ? "val over" : "val", text: (over ? "▲ " : "") + pct(value) });
    return el("div", { class: "cell", title: opts.title }, b, label);
  }

  function renderCluster(c) {
    const t = c.thresholds;
    const s = c.status || {};
    const registered = c.brokers.filter((b) => b.goneMs === null || b.goneMs === undefined);
    replaceChildren($("summary"),
      el("span", {}, "Leader ", el("b", { class: "id", text: c.leader || "none elected" })),
      el("span", {}, "Brokers ", el("b", { text: String(registered.length) })),
      el("span", {}, "Strategy ", el("b", { text: c.strategy }), ` (placement ${c.placement})`),
      el("span", {}, "Spread now ", el("b", { "data-spread": "", text: c.spread === null ? "–" : `${c.spread.toFixed(1)} points` }),
        ` (AvgShedder acts on gaps over ${t.avgShedderLowGap} and ${t.avgShedderHighGap})`),
      el("span", {}, "Mean ", el("b", { text: pct(c.mean) })),
      el("span", {}, "Moves started ", el("b", { text: num(s.movesStarted) }), " · completed ", el("b", { text: num(s.movesCompleted) })),
      el("span", {}, "Shedding cycles ", el("b", { text: num(s.sheddingCycles) })),
      el("span", {}, "Reports applied ", el("b", { text: num(s.reportsApplied) })),
      c.sinceMs ? el("span", { class: "muted" }, `leader's memory since ${clock(c.sinceMs)}`) : null,
    );
    const rows = c.brokers.map((b) => {
      const sum = b.summary;
      const badges = [];
      if (b.leader) badges.push(el("span", { class: "badge leader", text: "★ leader" }));
      if (b.new) badges.push(el("span", { class: "badge new", text: "new", title: `first seen ${clock(b.firstSeenMs)}` }));
      if (b.goneMs) badges.push(el("span", { class: "badge gone", text: "left", title: `registration went at ${clock(b.goneMs)}` }));
      const swatch = el("span", { class: "swatch" });
      swatch.style.background = colourOf(b.id);
      const idCell = el("td", { class: "id" }, swatch, " ", b.id, ...badges);
      const row = el("tr", { class: b.goneMs ? "gone" : "", "data-broker": b.id, "data-leader": b.leader ? "true" : "false" }, idCell);
      if (!sum) {
        row.append(el("td", { colSpan: 11, class: "error-text", text: b.error || "no report" }));
        return row;
      }
      const small = (v, name) => el("td", {}, bar(v, { small: true, title: `${name} ${pct(v)}` }));
      row.append(
        el("td", {}, bar(sum.score, { threshold: t.overloaded, mean: c.mean, title: `score ${pct(sum.score)}` })),
        small(sum.cpu, "CPU"), small(sum.memory, "memory"), small(sum.directMemory, "direct memory"),
        small(sum.bandwidthIn, "NIC in"), small(sum.bandwidthOut, "NIC out"),
        el("td", { class: "num", text: num(sum.bundles) }),
        el("td", { class: "num", text: num(sum.topics) }),
        el("td", { class: "num", text: num(sum.msgRateIn, 1) }),
        el("td", { class: "num", text: num(sum.msgRateOut, 1) }),
        el("td", { class: "num", text: sum.lastUpdateMs ? duration(Math.max(0, c.nowMs - sum.lastUpdateMs)) : "–" }),
      );
      return row;
    });
    replaceChildren($("brokers").tBodies[0], ...rows);
    fillSelect($("f-broker"), c.brokers.map((b) => b.id));
    fillSelect($("f-namespace"), c.namespaces.map((n) => n.namespace));
    fillSelect($("ns-select"), c.namespaces.map((n) => n.namespace), true);
  }

  function fillSelect(select, values, noAll) {
    const current = select.value;
    const wanted = (noAll ? [] : [""]).concat(values);
    const have = [...select.options].map((o) => o.value);
    if (have.length === wanted.length && have.every((v, i) => v === wanted[i])) return;
    replaceChildren(select, ...wanted.map((v) => el("option", { value: v, text: v === "" ? "all" : v })));
    if (wanted.includes(current)) select.value = current;
  }

  // The chart's time window: the hour asked for, or less when the leader's memory is younger (at least the
  // last 5 minutes), so that a new leader's first minutes are not squeezed against the right edge.
  function windowOf(h) {
    let earliest = h.sinceMs;
    for (const samples of Object.values(h.scores)) if (samples.length) earliest = Math.min(earliest, samples[0][0]);
    const from = Math.max(h.fromMs, Math.min(earliest - 15000, h.nowMs - 300000));
    return [from, h.nowMs];
  }

  // A report's values hold until the next one, so a series is drawn as steps, the last one carried to `until`
  // (now, for a broker still registered).
  function stepPath(points, x, y, until) {
    let d = "";
    points.forEach(([t, v], i) => {
      const px = x(t).toFixed(1), py = y(v).toFixed(1);
      d += i === 0 ? `M${px},${py}` : `H${px}V${py}`;
    });
    if (until !== null && until !== undefined && points.length) d += `H${x(until).toFixed(1)}`;
    return d;
  }

  // ---------------------------------------------------------------- spread over the hour

  // The spread at each instant a sample arrived: max − min of every broker's latest score then.
  function spreadSeries(scores) {
    const events = [];
    for (const [id, samples] of Object.entries(scores)) for (const [t, s] of samples) events.push([t, id, s]);
    events.sort((a, b) => a[0] - b[0]);
    const latest = new Map();
    const out = [];
    for (const [t, id, s] of events) {
      latest.set(id, s);
      if (latest.size < 2) continue;
      const values = [...latest.values()];
      out.push([t, Math.max(...values) - Math.min(...values)]);
    }
    return out;
  }

  function renderSpread(h, c) {
    const series = spreadSeries(h.scores);
    const W = 520, H = 70, P = 4;
    const top = Math.max(10, c ? c.thresholds.avgShedderHighGap + 5 : 45, ...series.map((p) => p[1]));
    const [from, to] = windowOf(h);
    const x = (t) => P + ((Math.max(t, from) - from) / (to - from)) * (W - 2 * P);
    const y = (v) => H - P - (v / top) * (H - 2 * P);
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "spread over the last hour" });
    chart.append(svg("rect", { x: 0, y: 0, width: W, height: H, fill: "#f6f6f4", stroke: "#ddd" }));
    if (c) {
      for (const [gap, dash] of [[c.thresholds.avgShedderLowGap, "2 3"], [c.thresholds.avgShedderHighGap, "6 3"]]) {
        chart.append(titled(svg("line", { x1: P, x2: W - P, y1: y(gap), y2: y(gap), stroke: "#555", "stroke-dasharray": dash }), `AvgShedder gap ${gap}`));
      }
    }
    if (series.length > 0) {
      const d = stepPath(series, x, y, to);
      chart.append(svg("path", { d, fill: "none", stroke: "#0072B2", "stroke-width": 2 }));
    }
    const last = series.length ? series[series.length - 1][1] : null;
    const max = series.length ? Math.max(...series.map((p) => p[1])) : null;
    const span = Math.round((to - from) / 60000);
    replaceChildren($("spread"), el("span", {}, `Spread over the last ${span >= 60 ? "hour" : `${span} minutes`} `,
      el("span", { class: "muted", text: series.length ? `(max ${max.toFixed(1)}, now ${last.toFixed(1)} points; dashed: AvgShedder's gaps)` : "(no samples yet)" })), chart);
  }

  // ---------------------------------------------------------------- score over time

  function renderChart(h, c) {
    const W = 1000, H = 330, L = 44, R = 12, T = 14, B = 30;
    const [from, to] = windowOf(h);
    const ids = Object.keys(h.scores).sort();
    // The scale fits the scores (at least 0–20 %), so that brokers at a few percent are not a flat line.
    let highest = 0;
    for (const id of ids) for (const [, s] of h.scores[id]) highest = Math.max(highest, s);
    const top = Math.max(20, Math.ceil((highest * 1.25) / 10) * 10);
    const gridStep = top > 100 ? 50 : top > 50 ? 20 : top > 20 ? 10 : 5;
    const x = (t) => L + ((t - from) / (to - from)) * (W - L - R);
    const y = (v) => T + (1 - v / top) * (H - T - B);
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "each broker's score over time, with moves marked" });
    chart.append(svg("rect", { x: L, y: T, width: W - L - R, height: H - T - B, fill: "#fcfcfb", stroke: "#ccc" }));
    // Time before this leader took over: its memory starts then.
    if (h.sinceMs > from) {
      chart.append(titled(svg("rect", { x: L, y: T, width: Math.max(0, x(h.sinceMs) - L), height: H - T - B, fill: "#eeeeea" }), "before this leader took over"));
    }
    for (let v = 0; v <= top; v += gridStep) {
      chart.append(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), stroke: "#eee" }));
      chart.append(svg("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end", "font-size": 11, fill: "#555" }, `${v}%`));
    }
    const minutes = Math.floor((to - from) / 60000);
    const step = minutes > 30 ? 10 : minutes > 10 ? 5 : 1;
    for (let m = 0; m <= minutes; m += step) {
      const t = to - m * 60000;
      chart.append(svg("line", { x1: x(t), x2: x(t), y1: T, y2: H - B, stroke: "#f0f0f0" }));
      chart.append(svg("text", { x: x(t), y: H - B + 16, "text-anchor": "middle", "font-size": 11, fill: "#555" }, m === 0 ? "now" : `−${m} min`));
    }
    if (c) {
      const thr = c.thresholds.overloaded;
      if (thr <= top) {
        chart.append(titled(svg("line", { x1: L, x2: W - R, y1: y(thr), y2: y(thr), stroke: "#000", "stroke-dasharray": "6 4" }), `overload threshold ${thr} %`));
        chart.append(svg("text", { x: L + 4, y: y(thr) - 4, "text-anchor": "start", "font-size": 11, fill: "#000" }, `overload threshold ${thr}%`));
      } else {
        chart.append(svg("text", { x: L + 4, y: T + 14, "text-anchor": "start", "font-size": 11, fill: "#555" }, `overload threshold ${thr}% is above this scale`));
      }
    }
    // Moves: a tick at the top per move (shedding, unload, orphaned …), its details in the tooltip.
    const moveLayer = svg("g", { "data-moves": String(h.moves.length) });
    for (const m of h.moves) {
      const mx = x(m.createdMs);
      if (mx < L || mx > W - R) continue;
      const g = svg("g", {});
      g.append(svg("line", { x1: mx, x2: mx, y1: T, y2: H - B, stroke: "#999", "stroke-width": 1, "stroke-dasharray": "1 3" }));
      g.append(svg("path", { d: `M${mx - 5},${T} L${mx + 5},${T} L${mx},${T + 8} Z`, fill: m.cause === "shedding" ? "#000" : "#fff", stroke: "#000" }));
      titled(g, `${clock(m.createdMs)} ${m.cause}: ${m.bundle} ${m.source || "–"} → ${m.destination}`);
      moveLayer.append(g);
    }
    for (const s of h.splits) {
      const sx = x(s.atMs);
      if (sx < L || sx > W - R) continue;
      moveLayer.append(titled(svg("path", { d: `M${sx},${T + 1} l5,5 l-5,5 l-5,-5 Z`, fill: "#F0E442", stroke: "#000" }), `${clock(s.atMs)} split ${s.parent}`));
    }
    for (const id of ids) {
      const samples = h.scores[id];
      if (samples.length === 0) continue;
      const gone = c && c.brokers.some((b) => b.id === id && b.goneMs);
      const d = stepPath(samples, x, y, gone ? null : to);
      const path = svg("path", { d, fill: "none", stroke: colourOf(id), "stroke-width": 2, "stroke-dasharray": dashOf(id), "data-broker": id });
      chart.append(titled(path, id));
      const [lt, lv] = samples[samples.length - 1];
      chart.append(titled(svg("circle", { cx: x(lt), cy: y(lv), r: 3, fill: colourOf(id) }), `${id}: ${pct(lv)} reported at ${clock(lt)}`));
    }
    chart.append(moveLayer);
    replaceChildren($("chart"), chart);
    const legend = ids.map((id) => {
      const sample = svg("svg", { viewBox: "0 0 36 10" }, svg("line", { x1: 0, x2: 36, y1: 5, y2: 5, stroke: colourOf(id), "stroke-width": 3, "stroke-dasharray": dashOf(id) }));
      return el("span", { class: "key" }, sample, el("span", { class: "id", text: id }));
    });
    legend.push(el("span", { class: "key muted" }, "▼ shedding move (filled), other move (open); ◆ split; dashed line: overload threshold"));
    replaceChildren($("chart-legend"), ...legend);
  }

  // ---------------------------------------------------------------- moves

  async function loadMoves() {
    const q = new URLSearchParams({ limit: "100" });
    for (const [key, id] of [["namespace", "f-namespace"], ["broker", "f-broker"], ["cause", "f-cause"]]) {
      if ($(id).value) q.set(key, $(id).value);
    }
    const moves = await api(`${API}/moves?${q}`);
    const rows = moves.map((m) => {
      const took = m.completedMs ? m.completedMs - m.createdMs : null;
      const reason = m.reason.length > 90
        ? el("details", {}, el("summary", { text: `${m.reason.slice(0, 90)}…` }), m.reason)
        : m.reason;
      return el("tr", { "data-bundle": m.bundle, "data-cause": m.cause },
        el("td", { class: "num", text: clock(m.createdMs) }),
        el("td", { class: "bundle", text: m.bundle }),
        el("td", { class: "id", text: m.source || "–" }),
        el("td", { class: "id", text: m.destination }),
        el("td", { text: m.cause }),
        el("td", { class: `state-${m.state}`, text: m.state }),
        el("td", { class: "num", text: took !== null ? duration(took) : m.state === "assigning" ? "in progress" : "–" }),
        el("td", { class: "reason" }, reason));
    });
    if (rows.length === 0) rows.push(el("tr", {}, el("td", { colSpan: 8, class: "empty", text: "No moves match (the leader keeps its latest 2,000)." })));
    replaceChildren($("moves-table").tBodies[0], ...rows);
    $("moves-note").textContent = moves.length === 100 ? "showing the latest 100" : "";
  }

  // ---------------------------------------------------------------- namespaces

  function arc(cx, cy, r0, r1, a0, a1) {
    const p = (r, a) => [cx + r * Math.sin(a), cy - r * Math.cos(a)];
    const large = a1 - a0 > Math.PI ? 1 : 0;
    const [x0, y0] = p(r1, a0), [x1, y1] = p(r1, a1), [x2, y2] = p(r0, a1), [x3, y3] = p(r0, a0);
    return `M${x0},${y0} A${r1},${r1} 0 ${large} 1 ${x1},${y1} L${x2},${y2} A${r0},${r0} 0 ${large} 0 ${x3},${y3} Z`;
  }

  async function loadRing() {
    const ns = $("ns-select").value;
    if (!ns) {
      replaceChildren($("ring"), el("p", { class: "empty", text: "No namespace yet." }));
      return;
    }
    const [ring] = await api(`${API}/rings?namespace=${encodeURIComponent(ns)}`);
    if (!ring) {
      replaceChildren($("ring"), el("p", { class: "empty", text: `${ns} has no bundles.` }));
      return;
    }
    const SW = 480, SH = 380, C = 190, r1 = 160, r0 = 100;
    const picture = svg("svg", { viewBox: `0 0 ${SW} ${SH}`, role: "img", "aria-label": `${ns}: bundles around the hash ring, coloured by owner` });
    const counts = new Map();
    for (const b of ring.bundles) {
      const a0 = (b.lower / RING) * 2 * Math.PI;
      let a1 = ((b.upper + (b.upper === RING - 1 ? 1 : 0)) / RING) * 2 * Math.PI;
      if (a1 - a0 >= 2 * Math.PI - 1e-9) a1 = a0 + 2 * Math.PI - 1e-4;
      const owner = b.owner || "";
      counts.set(owner, (counts.get(owner) || 0) + 1);
      const seg = svg("path", {
        d: arc(SW / 2, C, r0, r1, a0, a1),
        fill: owner ? colourOf(owner) : "#ffffff",
        stroke: b.unloading ? "#000" : "#fff",
        "stroke-width": b.unloading ? 2 : 0.6,
        "stroke-dasharray": b.unloading ? "3 2" : null,
        "data-bundle": b.bundle,
      });
      titled(seg, `${b.bundle}\n${owner ? `owner ${owner}` : "unowned"}${b.unloading ? " (unloading)" : ""}`);
      picture.append(seg);
    }
    const X = SW / 2;
    picture.append(svg("circle", { cx: X, cy: C, r: r1, fill: "none", stroke: "#888" }));
    picture.append(svg("circle", { cx: X, cy: C, r: r0, fill: "none", stroke: "#888" }));
    // The four quarter hashes, outside the ring.
    for (const [label, x, y, anchor] of [["0x00000000", X, C - r1 - 6, "middle"], ["0x40000000", X + r1 + 6, C + 4, "start"],
      ["0x80000000", X, C + r1 + 16, "middle"], ["0xc0000000", X - r1 - 6, C + 4, "end"]]) {
      picture.append(svg("text", { x, y, "text-anchor": anchor, "font-size": 11, fill: "#555" }, label));
    }
    picture.append(svg("text", { x: X, y: C + 5, "text-anchor": "middle", "font-size": 14, "font-weight": 600 }, `${ring.bundles.length} bundle${ring.bundles.length === 1 ? "" : "s"}`));
    replaceChildren($("ring"), picture);
    const legend = [...counts.entries()].sort().map(([owner, n]) => {
      const sw = el("span", { class: "swatch" });
      sw.style.background = owner ? colourOf(owner) : "#ffffff";
      return el("div", {}, sw, el("span", { class: "id", text: owner || "unowned" }), el("span", { class: "muted", text: `${n} bundle${n === 1 ? "" : "s"}` }));
    });
    legend.push(el("div", { class: "muted", text: "Ranges to scale, clockwise from hash 0; a dashed black edge marks a bundle being unloaded. Hover a range for its bundle and owner." }));
    replaceChildren($("ring-legend"), ...legend);
    const splits = state.history ? state.history.splits.filter((s) => s.parent.startsWith(`${ns}/`)) : [];
    replaceChildren($("splits"), ...(splits.length
      ? splits.map((s) => el("li", {}, `${clock(s.atMs)} `, el("span", { class: "id", text: s.parent.slice(ns.length + 1) }), ` → ${s.children.map((c) => c.slice(ns.length + 1)).join(", ")}`, el("div", { class: "muted", text: s.reason })))
      : [el("li", { class: "empty", text: "No split in the leader's memory." })]));
  }

  // ---------------------------------------------------------------- plan

  function table(head, rows) {
    return el("table", {}, el("thead", {}, el("tr", {}, ...head.map((h) => el("th", { text: h })))),
      el("tbody", {}, ...rows.map((r) => el("tr", {}, ...r.map((v) => el("td", { text: v === null || v === undefined ? "–" : String(v) }))))));
  }

  async function loadPlan() {
    const body = $("plan-body");
    let plan;
    try {
      plan = await api(`${API}/plan`);
    } catch (e) {
      replaceChildren(body, el("p", { class: "error-text", text: `No plan: ${e.message}` }));
      return;
    }
    state.planLoaded = true;
    const parts = [el("p", {}, `${plan.strategy} with ${plan.placement} placement, on the data of ${clock(plan.now)}.`)];
    for (const w of plan.warnings || []) parts.push(el("p", { class: "error-text", text: `⚠ ${w}` }));
    if (plan.unloads.length === 0 && plan.splits.length === 0) {
      parts.push(el("p", { "data-plan": "idle" }, el("b", { text: "Nothing to move now." }), " Why it waits:"));
    } else {
      parts.push(el("p", { "data-plan": "moves" }, el("b", { text: `${plan.unloads.length} move${plan.unloads.length === 1 ? "" : "s"}, ${plan.splits.length} split${plan.splits.length === 1 ? "" : "s"}` })));
      if (plan.unloads.length) parts.push(table(["Bundle", "From", "To", "Why"], plan.unloads.map((u) => [u.bundle, u.source, u.destination, u.reason])));
      if (plan.splits.length) parts.push(table(["Bundle", "Owner", "At", "Why"], plan.splits.map((s) => [s.bundle, s.broker, s.boundaries.join(", "), s.reason])));
    }
    if (plan.prediction && plan.prediction.length) {
      parts.push(el("h3", { text: "Predicted scores" }));
      parts.push(table(["Broker", "Now", "After", "Out", "In"], plan.prediction.map((p) => [p.broker, pct(p.scoreNow), pct(p.scoreAfter), p.movesOut, p.movesIn])));
    }
    if (plan.skipped.length) {
      parts.push(el("h3", { text: "Considered and left alone" }));
      parts.push(table(["Subject", "Why", "Dropped at"], plan.skipped.slice(0, 200).map((s) => [s.subject, s.reason, s.dropped])));
    }
    if (plan.assignments.length) parts.push(el("p", { class: "muted", text: `${plan.assignments.length} unowned bundle(s) would be assigned on their next lookup.` }));
    replaceChildren(body, ...parts);
  }

  // ---------------------------------------------------------------- the loop

  async function guarded(fn, onError) {
    try {
      await fn();
      return true;
    } catch (e) {
      onError(e);
      return false;
    }
  }

  async function pollCluster() {
    const ok = await guarded(async () => {
      const c = await api(`${API}/cluster`);
      state.cluster = c;
      state.clusterError = null;
      renderCluster(c);
      if (state.history) renderSpread(state.history, c);
    }, (e) => {
      state.clusterError = e.status === 0 ? e.message : `The cluster cannot be shown: ${e.message}`;
    });
    if (ok && !state.ringShown && $("ns-select").value) {
      state.ringShown = true;
      pollRing();
    }
    if (ok && state.authNeeded) {
      state.authNeeded = false;
      $("login").hidden = true;
    }
    setConnection(ok, ok ? `live · ${clock(Date.now())}` : "not connected");
    setBanner();
  }

  async function pollHistory() {
    await guarded(async () => {
      const h = await api(`${API}/history?minutes=60&points=240`);
      state.history = h;
      renderChart(h, state.cluster);
      renderSpread(h, state.cluster);
    }, (e) => replaceChildren($("chart"), el("p", { class: "error-text", text: `No history: ${e.message}` })));
  }

  async function pollMoves() {
    await guarded(loadMoves, (e) =>
      replaceChildren($("moves-table").tBodies[0], el("tr", {}, el("td", { colSpan: 8, class: "error-text", text: `No moves: ${e.message}` }))));
  }

  async function pollRing() {
    await guarded(loadRing, (e) => replaceChildren($("ring"), el("p", { class: "error-text", text: `No ring: ${e.message}` })));
  }

  function every(ms, fn) {
    let running = false;
    const tick = async () => {
      if (running || document.hidden || state.authNeeded) return;
      running = true;
      try {
        await fn();
      } finally {
        running = false;
      }
    };
    tick();
    return setInterval(tick, ms);
  }

  async function start() {
    $("login").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const token = $("token").value.trim();
      if (token) sessionStorage.setItem(TOKEN_KEY, token);
      else sessionStorage.removeItem(TOKEN_KEY);
      $("token").value = "";
      state.authNeeded = false;
      $("login").hidden = true;
      pollCluster().then(() => Promise.all([pollHistory(), pollMoves(), pollRing(), loadPlan()]));
    });
    // Ask for a token before any data request when the brokers need one (a refused request is a console error).
    try {
      const info = await (await fetch("/dashboard/auth.json", { cache: "no-store" })).json();
      if (info.tokenNeeded && !sessionStorage.getItem(TOKEN_KEY)) {
        needToken("enter a token to see the cluster");
        setConnection(false, "token needed");
      }
    } catch (e) {
      state.clusterError = `cannot reach this broker (${location.host}): ${e.message}`;
      setBanner();
    }
    for (const id of ["f-namespace", "f-broker", "f-cause"]) $(id).addEventListener("change", pollMoves);
    $("ns-select").addEventListener("change", pollRing);
    $("plan-refresh").addEventListener("click", loadPlan);
    every(2000, pollCluster);
    every(5000, pollHistory);
    every(2000, pollMoves);
    every(5000, pollRing);
    every(30000, loadPlan);
    document.addEventListener("visibilitychange", () => {
      if (!document.hidden) pollCluster();
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
