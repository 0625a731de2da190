// The status page served on GET / by batond and `baton status --serve`:
// one self-contained document, HTML, CSS, JS and inline SVG together,
// nothing fetched from elsewhere. It opens an EventSource on /events (same
// prefix) and redraws from each snapshot; between snapshots the "time
// left" and "waited" figures tick locally from the time the snapshot
// arrived (rendering, no request). When the stream errors a banner says
// the server is unreachable; EventSource reconnects by itself (after a
// refused answer, such as 503, the page opens a new one 2 s later) and the
// banner goes on reconnect. The timeline is drawn from /history.json (same
// prefix), fetched again after each snapshot (at most once a second) and
// every 5 s: one row per lock, one bar per lease (label and fencing
// token), waits shaded, expiries and losses marked at the bar's end.
#include "statuspage/status_page.h"

namespace baton::statuspage {

std::string_view page_html() {
  static constexpr std::string_view kPage = R"page(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>baton status</title>
<style>
:root { --bg:#f5f6f8; --card:#fff; --ink:#1d2430; --mute:#667085; --line:#e3e6eb;
        --acc:#2456c7; --ok:#16794c; --warn:#b54708; --bad:#b42318; }
* { box-sizing: border-box; }
body { margin:0; font:14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif;
       background:var(--bg); color:var(--ink); }
header { display:flex; flex-wrap:wrap; gap:12px 20px; align-items:center;
         padding:14px 24px; background:#101828; color:#fff; }
header h1 { font-size:18px; margin:0; font-weight:600; letter-spacing:.2px; }
#state { font-size:12px; padding:2px 10px; border-radius:999px; background:#344054; }
#state.live { background:var(--ok); }
#state.down { background:var(--bad); }
#clock { color:#d0d5dd; font-size:12px; }
form { margin-left:auto; display:flex; gap:8px; align-items:center; }
form label { font-size:12px; color:#d0d5dd; }
#prefix { font:13px ui-monospace, monospace; padding:5px 8px; border-radius:6px;
          border:1px solid #475467; background:#1d2939; color:#fff; width:220px; }
form button { padding:5px 12px; border-radius:6px; border:0; background:var(--acc);
              color:#fff; font-weight:600; cursor:pointer; }
#banner { display:none; padding:10px 24px; background:#fef3f2; color:var(--bad);
          border-bottom:1px solid #fecdca; font-weight:600; }
#banner.on { display:block; }
main { padding:18px 24px 32px; max-width:1200px; }
main.stale { opacity:.55; }
#stats { display:flex; flex-wrap:wrap; gap:8px; margin-bottom:16px; }
.chip { background:var(--card); border:1px solid var(--line); border-radius:8px;
        padding:6px 12px; }
.chip b { font-size:16px; display:block; }
.chip span { color:var(--mute); font-size:11px; text-transform:uppercase; letter-spacing:.4px; }
h2 { font-size:14px; margin:18px 0 8px; color:var(--mute); text-transform:uppercase;
     letter-spacing:.5px; }
table { width:100%; border-collapse:collapse; background:var(--card);
        border:1px solid var(--line); border-radius:8px; overflow:hidden; }
th, td { text-align:left; padding:8px 12px; border-bottom:1px solid var(--line);
         vertical-align:top; }
th { background:#f9fafb; font-size:12px; color:var(--mute); font-weight:600; }
tr:last-child td { border-bottom:0; }
.name { font:600 13px ui-monospace, monospace; word-break:break-all; }
.cap { white-space:nowrap; }
.full { color:var(--warn); font-weight:600; }
ol { margin:0; padding-left:20px; }
ul { margin:0; padding:0; list-style:none; }
li { margin:2px 0; }
.who { font-weight:600; }
.tok { font:12px ui-monospace, monospace; background:#eef4ff; color:var(--acc);
       padding:0 6px; border-radius:4px; }
.mode { font-size:11px; padding:0 6px; border-radius:4px; background:#f2f4f7;
        color:#344054; }
.mode.shared { background:#ecfdf3; color:var(--ok); }
.t { color:var(--mute); font-variant-numeric:tabular-nums; }
.none { color:var(--mute); }
#storeerr { display:none; padding:10px 24px; background:#fffaeb; color:var(--warn);
            border-bottom:1px solid #fedf89; font-weight:600; }
#storeerr.on { display:block; }
#tl-bar { display:flex; gap:10px; align-items:center; margin:18px 0 8px; }
#tl-bar h2 { margin:0; }
#tl-span { font-size:12px; }
#timeline { background:var(--card); border:1px solid var(--line); border-radius:8px;
            padding:8px 12px; overflow-x:auto; }
#timeline svg { display:block; }
#timeline .lk { font:600 12px ui-monospace, monospace; fill:var(--ink); }
#timeline .axis { font:11px system-ui, sans-serif; fill:var(--mute); }
#timeline .grid { stroke:var(--line); }
#timeline .bar rect { fill:#d1e0ff; stroke:var(--acc); }
#timeline .bar.shared rect { fill:#d1fadf; stroke:var(--ok); }
#timeline .bar.open rect { stroke-dasharray:4 2; }
#timeline .bar text { font:11px ui-monospace, monospace; fill:#102a56; }
#timeline .wait rect { fill:#fef0c7; stroke:#fdb022; stroke-dasharray:2 2; }
#timeline .wait text { font:10px system-ui, sans-serif; fill:var(--warn); }
#timeline .end-expire { fill:var(--bad); }
#timeline .end-lost { fill:#7a271a; }
#timeline .now { stroke:var(--bad); stroke-width:1; }
.legend { font-size:12px; color:var(--mute); margin-top:4px; }
.legend i { display:inline-block; width:18px; height:9px; margin:0 4px 0 10px;
            vertical-align:middle; border:1px solid; }
#empty { color:var(--mute); padding:18px; background:var(--card);
         border:1px dashed var(--line); border-radius:8px; }
</style>
</head>
<body>
<header>
  <h1 id="source">baton status</h1>
  <span id="state">connecting…</span>
  <span id="feed"></span>
  <span id="clock"></span>
  <form id="filter">
    <label for="prefix">prefix</label>
    <input id="prefix" name="prefix" placeholder="all locks" autocomplete="off">
    <button>Filter</button>
  </form>
</header>
<div id="banner" role="alert">server unreachable — reconnecting…</div>
<div id="storeerr" role="status"></div>
<main id="main">
  <div id="stats"></div>
  <h2 id="locks-title">Locks</h2>
  <div id="locks"></div>
  <div id="tl-bar"><h2>Timeline</h2>
    <select id="tl-span" aria-label="time span">
      <option value="0">fit</option><option value="60000">1 min</option>
      <option value="600000">10 min</option><option value="3600000">1 h</option>
    </select><span id="tl-note" class="t"></span></div>
  <div id="timeline"></div>
  <svg id="svg-ns" width="0" height="0" aria-hidden="true"></svg>
  <div class="legend"><i style="background:#d1e0ff;border-color:#2456c7"></i>exclusive
    <i style="background:#d1fadf;border-color:#16794c"></i>shared
    <i style="background:#fef0c7;border-color:#fdb022"></i>waiting
    <b style="color:#b42318;margin-left:10px">◆</b> expired
    <b style="color:#7a271a;margin-left:10px">✕</b> lost</div>
  <h2 id="counters-title">Counters</h2>
  <div id="counters"></div>
</main>
<script>
"use strict";
const $ = (id) => document.getElementById(id);
let prefix = new URLSearchParams(location.search).get("prefix") || "";
let es = null, retry = null, snap = null, at = 0, serverAt = 0;
$("prefix").value = prefix;

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}
function dur(ms) {
  if (ms < 0) ms = 0;
  if (ms < 1000) return Math.round(ms) + " ms";
  const s = ms / 1000;
  if (s < 60) return s.toFixed(1) + " s";
  if (s < 3600) return Math.floor(s / 60) + " m " + String(Math.floor(s % 60)).padStart(2, "0") + " s";
  return Math.floor(s / 3600) + " h " + String(Math.floor(s / 60) % 60).padStart(2, "0") + " m";
}
// A figure that ticks between snapshots: base ms, +1 (waited) or -1 (left).
function ticking(base, dir, suffix) {
  const e = el("span", "t");
  e.dataset.base = base; e.dataset.dir = dir; e.dataset.suffix = suffix;
  return e;
}
function tick() {
  const d = performance.now() - at;
  for (const e of document.querySelectorAll("[data-base]")) {
    const v = Number(e.dataset.base) + Number(e.dataset.dir) * d;
    e.textContent = (e.dataset.dir < 0 && v <= 0) ? "expiring" : dur(v) + e.dataset.suffix;
  }
  if (serverAt) $("clock").textContent = "server time " + new Date(serverAt + d).toLocaleTimeString();
}
function online(on) {
  $("banner").classList.toggle("on", !on);
  $("main").classList.toggle("stale", !on);
  $("state").textContent = on ? "live" : "unreachable";
  $("state").className = on ? "live" : "down";
}
function render() {
  const s = snap.snapshot;
  const src = s.source || "server";
  $("source").textContent = src;
  document.title = src + " status";
  $("banner").textContent = src + " unreachable — reconnecting…";
  $("storeerr").textContent = s.store_error ? "the store did not answer the last poll: " + s.store_error : "";
  $("storeerr").classList.toggle("on", !!s.store_error);
  $("feed").textContent = s.fed_by === "push" ? "· on the store's changes" :
      s.fed_by === "poll" ? "· polled every " + s.poll_interval_ms / 1000 + " s" : "";
  const stats = $("stats");
  stats.replaceChildren();
  if (s.stats) {
    for (const [k, label] of [["locks", "locks"], ["leases", "leases"], ["waiters", "waiters"],
        ["counters", "counters"], ["grants", "grants"], ["expirations", "expirations"],
        ["wait_timeouts", "wait timeouts"], ["connections", "connections"],
        ["fencing_high_water", "fencing high water"]]) {
      const c = el("div", "chip");
      c.append(el("b", "", String(s.stats[k])), el("span", "", label));
      stats.append(c);
    }
  }
  $("locks-title").textContent = "Locks" + (s.prefix ? " under “" + s.prefix + "”" : "") +
      " (" + s.locks.length + (s.locks_truncated ? "+, first shown" : "") + ")";
  const locks = $("locks");
  locks.replaceChildren();
  if (s.locks.length === 0) {
    locks.append(el("div", "", "No lock is held or waited on" + (s.prefix ? " under this prefix." : ".")));
    locks.firstChild.id = "empty";
  } else {
    const t = el("table");
    const hr = el("tr");
    for (const h of ["Lock", "Holders / capacity", "Holders", "Waiters (queue order)"]) hr.append(el("th", "", h));
    t.append(hr);
    for (const l of s.locks) {
      const r = el("tr");
      r.dataset.lock = l.name;
      r.append(el("td", "name", l.name));
      const full = l.holders.length >= l.capacity && !l.holders.every((h) => h.mode === "shared");
      r.append(el("td", "cap" + (full ? " full" : ""),
                  l.holders.length + " / " + l.capacity));
      const hs = el("td");
      if (l.holders.length === 0) hs.append(el("span", "none", "free"));
      const ul = el("ul");
      for (const h of l.holders) {
        const li = el("li", "holder");
        li.append(el("span", "who", h.label || "(no label)"), " ",
                  el("span", "tok", "token " + h.fencing_token), " ",
                  el("span", "mode " + h.mode, h.mode), " ");
        if (h.holds > 1) li.append(el("span", "mode", "×" + h.holds), " ");
        li.append(ticking(h.time_left_ms, -1, " left"));
        ul.append(li);
      }
      hs.append(ul);
      r.append(hs);
      const ws = el("td");
      if (l.waiters.length === 0) ws.append(el("span", "none", "none"));
      const ol = el("ol");
      for (const w of l.waiters) {
        const li = el("li", "waiter");
        li.append(el("span", "who", w.label || "(no label)"), " ",
                  el("span", "mode " + w.mode, w.mode + (w.all_or_nothing ? ", all-or-nothing" : "")),
                  " waited ", ticking(w.waited_ms, 1, ""));
        ol.append(li);
      }
      ws.append(ol);
      r.append(ws);
      t.append(r);
    }
    locks.append(t);
  }
  const counters = $("counters");
  counters.replaceChildren();
  $("counters-title").style.display = s.counters ? "" : "none";
  if (!s.counters) {
    // This store's snapshots have no counters.
  } else if (s.counters.length === 0) {
    counters.append(el("div", "none", "No counters" + (s.prefix ? " under this prefix." : ".")));
  } else {
    const t = el("table");
    const hr = el("tr");
    hr.append(el("th", "", "Counter"), el("th", "", "Value"));
    t.append(hr);
    for (const c of s.counters) {
      const r = el("tr");
      r.append(el("td", "name", c.name), el("td", "", String(c.value)));
      t.append(r);
    }
    counters.append(t);
  }
  tick();
  drawTimeline();
  if (performance.now() - histAt > 1000) loadHistory();
  else if (!histTimer) histTimer = setTimeout(loadHistory, 1000);
}
// --- the timeline --------------------------------------------------------
let hist = null, histAt = -1e9, histTimer = null, histBusy = false;
// The SVG namespace, from an inline <svg> (the page names no URL at all).
const NS = $("svg-ns").namespaceURI;
function svg(tag, attrs, text) {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
async function loadHistory() {
  clearTimeout(histTimer);
  histTimer = null;
  if (histBusy) return;
  histBusy = true;
  histAt = performance.now();
  try {
    const r = await fetch("history.json?prefix=" + encodeURIComponent(prefix), {cache: "no-store"});
    if (r.ok) { hist = await r.json(); hist.at = performance.now(); }
  } catch (e) { /* the stream's banner reports an outage */ }
  histBusy = false;
  drawTimeline();
}
// Leases (grant to end) and waits per lock, from the history and the
// snapshot (leases still held, waits still queued).
function spans(now) {
  const rows = new Map();
  const row = (n) => { if (!rows.has(n)) rows.set(n, {bars: [], waits: []}); return rows.get(n); };
  const open = new Map();
  for (const e of (hist ? hist.events : [])) {
    const key = e.lock + "\u0000" + e.fencing_token;
    if (e.kind === "grant") {
      const b = {label: e.label, token: e.fencing_token, mode: e.mode, from: e.at_ms, to: null, end: null};
      row(e.lock).bars.push(b);
      open.set(key, b);
    } else if (e.kind === "wait") {
      row(e.lock).waits.push({label: e.label, from: e.at_ms, to: e.end_ms});
    } else {
      let b = open.get(key);
      if (!b) {  // its grant is older than the window: start at the edge
        b = {label: e.label, token: e.fencing_token, mode: e.mode, from: null, to: null};
        row(e.lock).bars.push(b);
      }
      b.to = e.at_ms; b.end = e.kind;
      open.delete(key);
    }
  }
  const s = snap ? snap.snapshot : null;
  for (const l of (s ? s.locks : [])) {
    const r = row(l.name);
    for (const h of l.holders) {
      if (!r.bars.some((b) => b.token === h.fencing_token && b.to === null)) {
        r.bars.push({label: h.label, token: h.fencing_token, mode: h.mode, from: null, to: null});
      }
    }
    for (const w of l.waiters) r.waits.push({label: w.label, from: now - w.waited_ms, to: null, live: true});
  }
  return rows;
}
function drawTimeline() {
  const box = $("timeline");
  const now = serverAt ? serverAt + (performance.now() - at) : Date.now();
  const rows = spans(now);
  box.replaceChildren();
  if (rows.size === 0) {
    box.append(el("div", "none", hist ? "Nothing granted in the history window yet." : "Loading the history…"));
    return;
  }
  const win = hist ? hist.window_ms : 3600000;
  let span = Number($("tl-span").value);
  let first = now;
  for (const r of rows.values()) {
    for (const b of r.bars) if (b.from !== null) first = Math.min(first, b.from);
    for (const w of r.waits) first = Math.min(first, w.from);
  }
  if (!span) span = Math.min(win, Math.max(10000, (now - first) * 1.08));
  const t0 = now - span, W = Math.max(640, box.clientWidth - 26), left = 170, right = 14;
  const x = (t) => left + (Math.max(t, t0) - t0) / span * (W - left - right);
  $("tl-note").textContent = "last " + dur(span) + (hist ? ", history window " + dur(win) : "") +
      (hist && hist.dropped ? ", " + hist.dropped + " oldest events dropped" : "");
  const laneH = 22, pad = 6;
  let y = 22;
  const g = svg("g");
  for (const [name, r] of [...rows].sort((a, b) => a[0] < b[0] ? -1 : 1)) {
    // Lanes: overlapping bars (shared, semaphores) stack.
    const ends = [];
    const items = [...r.bars.map((b) => ({b})), ...r.waits.map((w) => ({w}))];
    for (const it of items) {
      const o = it.b || it.w;
      const from = o.from === null ? t0 : o.from, to = o.to === null ? now : o.to;
      if (to < t0) { it.skip = true; continue; }
      let lane = ends.findIndex((e) => e <= from);
      if (lane < 0) { lane = ends.length; ends.push(0); }
      ends[lane] = to + 1;
      Object.assign(it, {lane, from, to});
    }
    const lanes = Math.max(1, ends.length);
    const rowG = svg("g", {"class": "row", "data-lock": name});
    rowG.append(svg("line", {x1: 0, x2: W, y1: y - 3, y2: y - 3, "class": "grid"}));
    const nameText = svg("text", {x: 4, y: y + 14, "class": "lk"}, name.length > 22 ? name.slice(0, 21) + "…" : name);
    nameText.append(svg("title", {}, name));
    rowG.append(nameText);
    for (const it of items) {
      if (it.skip) continue;
      const x1 = x(it.from), x2 = Math.max(x(it.to), x1 + 3), yy = y + it.lane * laneH;
      if (it.w) {
        const wg = svg("g", {"class": "wait", "data-label": it.w.label});
        wg.append(svg("rect", {x: x1, y: yy + 2, width: x2 - x1, height: laneH - 6, rx: 3}));
        wg.append(svg("title", {}, (it.w.label || "(no label)") + " waited " + dur(it.to - it.from) + (it.w.live ? " (still waiting)" : "")));
        if (x2 - x1 > 50) wg.append(svg("text", {x: x1 + 4, y: yy + 14}, "wait " + (it.w.label || "")));
        rowG.append(wg);
        continue;
      }
      const b = it.b;
      const cls = "bar " + (b.mode === "shared" ? "shared" : "exclusive") + (b.to === null ? " open" : "") + (b.end ? " " + b.end : "");
      const bg = svg("g", {"class": cls, "data-label": b.label, "data-token": b.token,
                           "data-end": b.end || "held", "data-from": Math.round(it.from)});
      bg.append(svg("rect", {x: x1, y: yy, width: x2 - x1, height: laneH - 4, rx: 3}));
      const txt = (b.label || "(no label)") + " #" + b.token;
      const fit = Math.floor((x2 - x1 - 8) / 6.7);
      if (fit >= 3) bg.append(svg("text", {x: x1 + 4, y: yy + 13}, txt.length > fit ? txt.slice(0, fit - 1) + "…" : txt));
      bg.append(svg("title", {}, txt + " (" + b.mode + "), " + (b.from === null ? "granted before the window" : "granted " + new Date(b.from).toLocaleTimeString()) +
                    ", " + (b.end ? b.end + (b.end === "expire" ? "d" : b.end === "release" ? "d" : "") + " " + new Date(b.to).toLocaleTimeString() : "held now")));
      if (b.end === "expire") bg.append(svg("path", {d: `M${x2} ${yy - 2} l5 ${laneH / 2 - 1} l-5 ${laneH / 2 - 1} l-5 ${-(laneH / 2 - 1)} z`, "class": "end-expire"}));
      if (b.end === "lost") bg.append(svg("text", {x: x2 - 4, y: yy + 14, "class": "end-lost"}, "✕"));
      rowG.append(bg);
    }
    g.append(rowG);
    y += lanes * laneH + pad;
  }
  const H = y + 4;
  const root = svg("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: "timeline-svg"});
  // Axis: about six ticks at a round step.
  const steps = [1e3, 2e3, 5e3, 1e4, 15e3, 3e4, 6e4, 12e4, 3e5, 6e5, 9e5, 18e5, 36e5];
  const step = steps.find((s2) => span / s2 <= 7) || 36e5;
  for (let t = Math.ceil(t0 / step) * step; t <= now; t += step) {
    root.append(svg("line", {x1: x(t), x2: x(t), y1: 14, y2: H, "class": "grid"}));
    root.append(svg("text", {x: x(t) - 24, y: 11, "class": "axis"}, new Date(t).toLocaleTimeString()));
  }
  root.append(svg("line", {x1: x(now), x2: x(now), y1: 14, y2: H, "class": "now"}));
  root.append(g);
  box.append(root);
}
$("tl-span").addEventListener("change", drawTimeline);
setInterval(loadHistory, 5000);
function connect() {
  clearTimeout(retry);
  if (es) es.close();
  es = new EventSource("events?prefix=" + encodeURIComponent(prefix));
  es.onopen = () => online(true);
  es.onmessage = (ev) => {
    snap = JSON.parse(ev.data);
    at = performance.now();
    serverAt = snap.server_time_ms;
    online(true);
    render();
  };
  es.onerror = () => {
    online(false);
    // A refused answer (503, 401) ends an EventSource: open a new one.
    if (es.readyState === EventSource.CLOSED) retry = setTimeout(connect, 2000);
  };
}
$("filter").addEventListener("submit", (ev) => {
  ev.preventDefault();
  prefix = $("prefix").value;
  history.replaceState(null, "", prefix ? "?prefix=" + encodeURIComponent(prefix) : location.pathname);
  connect();
});
setInterval(tick, 250);
setInterval(drawTimeline, 1000);  // the "now" line moves
connect();
</script>
</body>
</html>
)page";
  return kPage;
}

}  // namespace baton::statuspage
