// The status page batond serves on GET / (status_page.cc): one
// self-contained document, HTML, CSS and JS together, nothing fetched from
// elsewhere. It opens an EventSource on /events (same prefix) and redraws
// from each snapshot; between snapshots the "time left" and "waited"
// figures tick locally from the time the snapshot arrived (rendering, no
// request). When the stream errors a banner says batond is unreachable;
// EventSource reconnects by itself (after a refused answer, such as 503,
// the page opens a new one 2 s later) and the banner goes on reconnect.
#include <string_view>

namespace baton::server {

std::string_view status_page_html() {
  static constexpr std::string_view kPage = R"page(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>batond status</title>
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
#empty { color:var(--mute); padding:18px; background:var(--card);
         border:1px dashed var(--line); border-radius:8px; }
</style>
</head>
<body>
<header>
  <h1>batond</h1>
  <span id="state">connecting…</span>
  <span id="clock"></span>
  <form id="filter">
    <label for="prefix">prefix</label>
    <input id="prefix" name="prefix" placeholder="all locks" autocomplete="off">
    <button>Filter</button>
  </form>
</header>
<div id="banner" role="alert">batond unreachable — reconnecting…</div>
<main id="main">
  <div id="stats"></div>
  <h2 id="locks-title">Locks</h2>
  <div id="locks"></div>
  <h2>Counters</h2>
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
  if (s.counters.length === 0) {
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
}
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
connect();
</script>
</body>
</html>
)page";
  return kPage;
}

}  // namespace baton::server
