// Squall UI: polls the REST API (/api/v1/) every second and renders each topology.
// No framework and nothing fetched from elsewhere: the package ships this file.
"use strict";

const REFRESH_MS = 1000;
const state = { window: "600", sections: new Map(), token: null, busy: false };

function tokenFromUrl() {
  const m = /(?:^|[#&])token=([^&]+)/.exec(location.hash.slice(1));
  if (m) { sessionStorage.setItem("squall-token", decodeURIComponent(m[1])); }
  return sessionStorage.getItem("squall-token");
}
state.token = tokenFromUrl();

// No answer at all (the process serving the page has exited, or the network is down), as
// opposed to an answer that is an error.
class ServerGone extends Error {}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (state.token) headers["Authorization"] = "Bearer " + state.token;
  let res;
  try {
    res = await fetch(path, Object.assign({}, options, { headers }));
  } catch (e) {
    throw new ServerGone("no answer from the Squall process");
  }
  if (res.status === 401) {
    const token = window.prompt("This Squall UI needs its token:");
    if (token) {
      state.token = token;
      sessionStorage.setItem("squall-token", token);
      return api(path, options);
    }
  }
  let body = null;
  try { body = await res.json(); } catch (e) { body = null; }
  if (!res.ok) {
    const msg = body && body.errorMessage ? body.errorMessage : res.status + " " + res.statusText;
    throw new Error(msg);
  }
  return body;
}

const fmtInt = (n) => (n === null || n === undefined ? "–" : Number(n).toLocaleString("en-US"));
const fmtMs = (n) => (n === null || n === undefined ? "–" : n < 10 ? n.toFixed(3) : n.toFixed(1));
const fmtRate = (n) => (n >= 100 ? Math.round(n).toLocaleString("en-US") : n.toFixed(1));
const el = (tag, attrs = {}, text) => {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
};

function toast(message, bad) {
  const t = document.getElementById("toast");
  t.textContent = message;
  t.className = "toast show" + (bad ? " bad" : "");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => { t.className = "toast"; }, 3500);
}

function topologyPath(id) { return "/api/v1/topology/" + encodeURIComponent(id); }

// --- sections -------------------------------------------------------------------------
function section(id) {
  let s = state.sections.get(id);
  if (s) return s;
  const node = document.getElementById("topology-template").content.firstElementChild.cloneNode(true);
  node.dataset.topology = id;
  node.querySelector(".name").textContent = id;
  s = { id, node, graphKey: null, configKey: null, selected: null, data: null, killRequested: false };
  for (const button of node.querySelectorAll("button[data-action]")) {
    button.addEventListener("click", () => act(s, button));
  }
  node.querySelector(".component-detail .close").addEventListener("click", () => {
    s.selected = null;
    node.querySelector(".component-detail").hidden = true;
    highlight(s);
  });
  document.getElementById("topologies").appendChild(node);
  state.sections.set(id, s);
  return s;
}

async function act(s, button) {
  const action = button.dataset.action;
  let path = topologyPath(s.id) + "/" + action;
  let body;
  if (action === "kill" && !button.classList.contains("armed")) {
    button.classList.add("armed");
    button.textContent = "Confirm kill";
    setTimeout(() => { button.classList.remove("armed"); button.textContent = "Kill"; }, 4000);
    return;
  }
  if (action === "kill") {
    button.classList.remove("armed");
    button.textContent = "Kill";
    path += "/0";
  }
  if (action === "rebalance") {
    const component = s.node.querySelector(".rebalance-component").value;
    const n = parseInt(s.node.querySelector(".rebalance-n").value, 10);
    body = JSON.stringify({ rebalanceOptions: { executors: { [component]: n } } });
  }
  button.disabled = true;
  try {
    const res = await api(path, { method: "POST", body, headers: body ? { "Content-Type": "application/json" } : {} });
    if (action === "kill") s.killRequested = true;
    const notes = res.notes && res.notes.length ? " · " + res.notes.join(" · ") : "";
    toast(action + " " + s.id + ": " + res.status + " (" + res.topologyStatus + ")" + notes);
  } catch (e) {
    toast(action + " " + s.id + " failed: " + e.message, true);
  } finally {
    button.disabled = false;
    refresh();
  }
}

// --- rendering ------------------------------------------------------------------------
function setField(s, name, value) {
  const f = s.node.querySelector('[data-field="' + name + '"]');
  if (f) f.textContent = value;
}

function cell(tr, value, stat, cls) {
  const td = el("td", stat ? { "data-stat": stat } : {}, value);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}

function setStatus(s, status) {
  const badge = s.node.querySelector(".status");
  badge.textContent = status;
  badge.className = "status " + status;
}

function renderHead(s, t) {
  s.node.classList.remove("ended");
  s.node.querySelector(".ended-note").hidden = true;
  setStatus(s, t.status);
  setField(s, "uptime", t.uptime);
  setField(s, "executors", t.executorsTotal + " / " + t.tasksTotal);
  setField(s, "emitted", fmtInt(t.emitted));
  setField(s, "acked", fmtInt(t.acked));
  setField(s, "failed", fmtInt(t.failed));
  setField(s, "pendingTrees", fmtInt(t.pendingTrees));
  setField(s, "errors", fmtInt(t.errors));
  const stopped = t.status === "KILLED" || t.status === "COMPLETED";
  for (const b of s.node.querySelectorAll("button[data-action]")) {
    const a = b.dataset.action;
    b.disabled = stopped || (a === "activate" && t.status === "ACTIVE") || (a === "deactivate" && t.status === "INACTIVE");
  }
}

function errorCell(tr, row) {
  const td = cell(tr, row.lastError ? row.lastError.split("\n")[0] : "", "lastError", "error-cell");
  if (row.lastError) td.title = row.lastError + " (" + row.errorLapsedSecs + " s ago)";
}

function capacityClass(c) { return c >= 0.8 ? "hot" : c >= 0.5 ? "warm" : ""; }

function renderTables(s, t) {
  for (const h of s.node.querySelectorAll(".window-hint")) h.textContent = t.windowHint + (t.window === ":all-time" ? "" : " (" + t.spanSeconds.toFixed(0) + " s sampled)");
  const ts = s.node.querySelector(".topology-stats tbody");
  ts.replaceChildren();
  for (const w of t.topologyStats) {
    const tr = el("tr", { "data-window": w.window });
    cell(tr, w.windowPretty);
    cell(tr, fmtInt(w.emitted), "emitted");
    cell(tr, fmtInt(w.transferred), "transferred");
    cell(tr, fmtInt(w.acked), "acked");
    cell(tr, fmtRate(w.ackedPerSec), "ackedPerSec");
    cell(tr, fmtInt(w.failed), "failed");
    cell(tr, fmtInt(w.timedOut), "timedOut");
    cell(tr, fmtMs(w.completeLatency), "completeLatency");
    ts.appendChild(tr);
  }
  const sp = s.node.querySelector(".spouts tbody");
  sp.replaceChildren();
  for (const r of t.spouts) {
    const tr = el("tr", { "data-component": r.spoutId, class: "clickable" });
    cell(tr, r.spoutId);
    cell(tr, r.executors, "executors");
    cell(tr, r.tasks, "tasks");
    cell(tr, fmtInt(r.emitted), "emitted");
    cell(tr, fmtInt(r.transferred), "transferred");
    cell(tr, fmtInt(r.acked), "acked");
    cell(tr, fmtInt(r.failed), "failed");
    cell(tr, fmtInt(r.timedOut), "timedOut");
    cell(tr, fmtInt(r.pending), "pending");
    cell(tr, fmtMs(r.completeLatency), "completeLatency");
    cell(tr, fmtMs(r.latencyP99), "latencyP99");
    errorCell(tr, r);
    tr.addEventListener("click", () => select(s, r.spoutId));
    sp.appendChild(tr);
  }
  const bo = s.node.querySelector(".bolts tbody");
  bo.replaceChildren();
  for (const r of t.bolts) {
    const tr = el("tr", { "data-component": r.boltId, class: "clickable" });
    cell(tr, r.boltId);
    cell(tr, r.executors, "executors");
    cell(tr, r.tasks, "tasks");
    cell(tr, fmtInt(r.emitted), "emitted");
    cell(tr, fmtInt(r.transferred), "transferred");
    cell(tr, fmtInt(r.executed), "executed");
    cell(tr, fmtInt(r.acked), "acked");
    cell(tr, fmtInt(r.failed), "failed");
    cell(tr, r.capacity.toFixed(3), "capacity", capacityClass(r.capacity));
    cell(tr, fmtMs(r.executeLatency), "executeLatency");
    cell(tr, fmtMs(r.processLatency), "processLatency");
    cell(tr, fmtMs(r.latencyP99), "latencyP99");
    errorCell(tr, r);
    tr.addEventListener("click", () => select(s, r.boltId));
    bo.appendChild(tr);
  }
  highlight(s);
  const sel = s.node.querySelector(".rebalance-component");
  const ids = [...t.spouts.map((r) => r.spoutId), ...t.bolts.map((r) => r.boltId)];
  if (sel.options.length !== ids.length) {
    const keep = sel.value;
    sel.replaceChildren(...ids.map((id) => el("option", { value: id }, id)));
    if (ids.includes(keep)) sel.value = keep;
  }
}

// Errors are reconciled by key, not rebuilt: a traceback the user opened stays open (and its
// text selectable) across the redraw every second; only the "s ago" in its summary moves.
function renderErrors(container, errors) {
  const existing = new Map();
  for (const d of container.querySelectorAll("details.error")) existing.set(d.dataset.key, d);
  const seen = new Map();
  const nodes = [];
  for (const e of [...errors].reverse()) {
    const base = e.component + "/" + e.task + "/" + e.time;
    const n = (seen.get(base) || 0) + 1;
    seen.set(base, n);
    const key = base + "#" + n;
    let d = existing.get(key);
    if (!d) {
      d = el("details", { class: "error", "data-key": key });
      d.appendChild(el("summary"));
      d.appendChild(el("pre", {}, e.traceback || e.error));
    }
    d.querySelector("summary").textContent = "[" + e.component + " task " + e.task + ", " + e.errorLapsedSecs.toFixed(1) + " s ago] " + e.error.split("\n")[0];
    nodes.push(d);
  }
  if (!nodes.length) nodes.push(el("p", { class: "muted" }, "none"));
  const same = nodes.length === container.children.length && nodes.every((d, i) => container.children[i] === d);
  if (!same) container.replaceChildren(...nodes);
}

async function renderGraph(s, t) {
  const key = t.spouts.map((r) => r.spoutId + r.executors).join() + "|" + t.bolts.map((r) => r.boltId + r.executors).join();
  if (key !== s.graphKey) {
    s.graphKey = key;
    let svg;
    try {
      const res = await fetch(topologyPath(s.id) + "/visualization.svg", { headers: state.token ? { Authorization: "Bearer " + state.token } : {} });
      svg = await res.text();
    } catch (e) {
      s.graphKey = null;
      throw new ServerGone("no answer from the Squall process");
    }
    const holder = s.node.querySelector(".graph");
    holder.innerHTML = svg;
    for (const g of holder.querySelectorAll(".node")) {
      g.addEventListener("click", () => select(s, g.dataset.component));
    }
  }
  const span = t.spanSeconds || 1;
  const rows = [...t.spouts, ...t.bolts];
  for (const r of rows) {
    const id = r.spoutId || r.boltId;
    const g = s.node.querySelector('.graph .node[data-component="' + CSS.escape(id) + '"] .node-stat');
    if (!g) continue;
    g.textContent = r.spoutId
      ? "acked " + fmtRate(r.acked / span) + "/s"
      : "executed " + fmtRate(r.executed / span) + "/s · cap " + r.capacity.toFixed(2);
  }
}

// A step for the time axis: the smallest of these giving at most 5 ticks over the span.
const TICK_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600];

function fmtUptime(secs) {
  const s = Math.round(secs), h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), r = s % 60;
  const pad = (v) => String(v).padStart(2, "0");
  return h ? h + ":" + pad(m) + ":" + pad(r) : m + ":" + pad(r);
}

// Lines are drawn in the order given, later ones on top; each has its own dash pattern, so
// two series with the same values (emitted and acked, when every tree is acked) both show.
function plot(holder, series, lines) {
  const W = 420, H = 140, L = 46, R = 8, T = 10, B = 36;
  const bottom = H - B;
  const pts = series.filter((p) => lines.some((l) => p[l.key] !== null && p[l.key] !== undefined));
  let max = 0;
  for (const p of pts) for (const l of lines) if (p[l.key] > max) max = p[l.key];
  max = max > 0 ? max * 1.1 : 1;
  // The time axis spans every sample, whichever have values: the charts line up.
  const t0 = series.length ? series[0].time : 0, t1 = series.length ? series[series.length - 1].time : 1;
  const x = (t) => L + (W - L - R) * (t1 > t0 ? (t - t0) / (t1 - t0) : 1);
  const y = (v) => T + (bottom - T) * (1 - v / max);
  let svg = '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ' + W + " " + H + '" font-size="10" font-family="system-ui, sans-serif">';
  for (const f of [0, 0.5, 1]) {
    const v = max * f;
    svg += '<line x1="' + L + '" x2="' + (W - R) + '" y1="' + y(v) + '" y2="' + y(v) + '" stroke="#e1e5ee"/>';
    svg += '<text x="' + (L - 6) + '" y="' + (y(v) + 3) + '" text-anchor="end" fill="#6b7385">' + (v >= 100 ? Math.round(v).toLocaleString("en-US") : v.toFixed(v >= 10 ? 0 : 2)) + "</text>";
  }
  if (series.length >= 2 && t1 > t0) {
    const step = TICK_STEPS.find((st) => (t1 - t0) / st <= 5) || TICK_STEPS[TICK_STEPS.length - 1];
    for (let t = Math.ceil(t0 / step) * step; t <= t1 + 1e-9; t += step) {
      const tx = x(t).toFixed(1);
      svg += '<line class="x-tick-mark" x1="' + tx + '" x2="' + tx + '" y1="' + bottom + '" y2="' + (bottom + 4) + '" stroke="#9aa3b5"/>';
      svg += '<text class="x-tick" x="' + tx + '" y="' + (bottom + 14) + '" text-anchor="middle" fill="#6b7385">' + fmtUptime(t) + "</text>";
    }
  }
  for (const l of lines) {
    const d = pts.filter((p) => p[l.key] !== null && p[l.key] !== undefined).map((p, i) => (i ? "L" : "M") + x(p.time).toFixed(1) + " " + y(p[l.key]).toFixed(1)).join(" ");
    if (d) svg += '<path data-series="' + l.key + '" d="' + d + '" fill="none" stroke="' + l.color + '" stroke-width="' + l.width + '"' + (l.dash ? ' stroke-dasharray="' + l.dash + '"' : "") + ' stroke-opacity="' + (l.opacity || 1) + '" stroke-linejoin="round"/>';
  }
  const span = t1 - t0;
  svg += '<text class="x-caption" x="' + L + '" y="' + (H - 4) + '" fill="#6b7385">' + (pts.length ? "uptime (m:ss) · last " + (span >= 120 ? (span / 60).toFixed(0) + " min" : span.toFixed(0) + " s") : "waiting for samples…") + "</text>";
  let lx = W - R;
  for (const l of [...lines].reverse()) {
    const width = 26 + 6 * l.label.length;
    lx -= width;
    svg += '<g class="legend" data-series="' + l.key + '">';
    svg += '<line x1="' + lx + '" x2="' + (lx + 16) + '" y1="' + (H - 7) + '" y2="' + (H - 7) + '" stroke="' + l.color + '" stroke-width="' + l.width + '"' + (l.dash ? ' stroke-dasharray="' + l.dash + '"' : "") + ' stroke-opacity="' + (l.opacity || 1) + '"/>';
    svg += '<text x="' + (lx + 20) + '" y="' + (H - 4) + '" fill="' + l.color + '">' + l.label + "</text></g>";
    lx -= 6;
  }
  svg += "</svg>";
  holder.innerHTML = svg;
  holder.dataset.points = String(pts.length);
}

function renderPlots(s, t) {
  // acked: wide and pale, underneath; emitted: dashed on top of it; failed: on top of both.
  plot(s.node.querySelector('[data-plot="throughput"]'), t.series, [
    { key: "acked", label: "acked/s", color: "#1f8a70", width: 4, opacity: 0.45 },
    { key: "emitted", label: "emitted/s", color: "#4257b2", width: 1.6, dash: "5 3" },
    { key: "failed", label: "failed/s", color: "#c0392b", width: 1.6 },
  ]);
  plot(s.node.querySelector('[data-plot="latency"]'), t.series, [
    { key: "completeLatency", label: "complete latency ms", color: "#b7791f", width: 1.8 },
  ]);
}

// The effective configuration (defaults merged), drawn again only when it changes.
function renderConfig(s, t) {
  const conf = t.configuration || {};
  const key = JSON.stringify(conf);
  if (key === s.configKey) return;
  s.configKey = key;
  const body = s.node.querySelector(".configuration tbody");
  body.replaceChildren();
  for (const [k, v] of Object.entries(conf)) {
    const tr = el("tr", { "data-key": k });
    cell(tr, k);
    cell(tr, typeof v === "string" ? v : JSON.stringify(v), "value");
    body.appendChild(tr);
  }
  s.node.querySelector(".config-count").textContent = Object.keys(conf).length + " keys";
}

function highlight(s) {
  for (const tr of s.node.querySelectorAll("tr[data-component]")) {
    tr.classList.toggle("selected", tr.dataset.component === s.selected);
  }
}

function select(s, component) {
  s.selected = component;
  highlight(s);
  renderComponent(s);
}

async function renderComponent(s) {
  if (!s.selected) return;
  const box = s.node.querySelector(".component-detail");
  let c;
  try {
    c = await api(topologyPath(s.id) + "/component/" + encodeURIComponent(s.selected) + "?window=" + encodeURIComponent(state.window));
  } catch (e) {
    if (e instanceof ServerGone) throw e;  // keep the last tasks shown
    box.hidden = true;
    return;
  }
  box.hidden = false;
  box.querySelector(".component-name").textContent = c.id + " (" + c.componentType + ")";
  const spout = c.componentType === "spout";
  const cols = spout
    ? ["task", "executor", "emitted", "transferred", "acked", "failed", "timed out", "pending", "complete latency (ms)", "p99 (ms, all time)", "queue", "errors"]
    : ["task", "executor", "emitted", "transferred", "executed", "acked", "failed", "capacity", "execute latency (ms)", "process latency (ms)", "p99 (ms, all time)", "queue", "errors"];
  const head = el("tr");
  for (const name of cols) head.appendChild(el("th", {}, name));
  box.querySelector("thead").replaceChildren(head);
  const body = box.querySelector("tbody");
  body.replaceChildren();
  for (const r of c.executorStats) {
    const tr = el("tr", { "data-task": r.task });
    cell(tr, r.task);
    cell(tr, r.id);
    cell(tr, fmtInt(r.emitted), "emitted");
    cell(tr, fmtInt(r.transferred), "transferred");
    if (!spout) cell(tr, fmtInt(r.executed), "executed");
    cell(tr, fmtInt(r.acked), "acked");
    cell(tr, fmtInt(r.failed), "failed");
    if (spout) {
      cell(tr, fmtInt(r.timedOut), "timedOut");
      cell(tr, fmtInt(r.pending), "pending");
      cell(tr, fmtMs(r.completeLatency), "completeLatency");
      cell(tr, r.completeLatencyAllTime ? fmtMs(r.completeLatencyAllTime.p99) : "–");
    } else {
      cell(tr, r.capacity.toFixed(3), "capacity", capacityClass(r.capacity));
      cell(tr, fmtMs(r.executeLatency), "executeLatency");
      cell(tr, fmtMs(r.processLatency), "processLatency");
      cell(tr, r.executeLatencyAllTime ? fmtMs(r.executeLatencyAllTime.p99) : "–");
    }
    const q = r.queue || {};
    cell(tr, q.capacity ? fmtInt(q.queued) + " / " + fmtInt(q.capacity) : "–", "queue");
    cell(tr, fmtInt(r.errors), "errors");
    body.appendChild(tr);
  }
  renderErrors(box.querySelector(".component-errors"), c.componentErrors);
}

// --- the loop -------------------------------------------------------------------------
const STOPPED = ["KILLED", "COMPLETED"];

// How a topology ended, when the page knows: killed from here, or last seen stopped.
function finalStatus(s) {
  if (s.data && STOPPED.includes(s.data.status)) return s.data.status;
  return s.killRequested ? "KILLED" : null;
}

// A topology this page can no longer follow keeps its last state on the page, says why,
// and offers no actions.
function markEnded(s, why) {
  const status = finalStatus(s);
  if (status) setStatus(s, status);
  s.node.classList.add("ended");
  const note = s.node.querySelector(".ended-note");
  note.textContent = why;
  note.hidden = false;
  for (const b of s.node.querySelectorAll("button[data-action]")) b.disabled = true;
}

function serverGone(conn) {
  const shown = [...state.sections.values()];
  const ended = shown.filter(finalStatus);
  for (const s of shown) {
    const status = finalStatus(s);
    markEnded(s, (status ? "Topology " + status.toLowerCase() + "; the" : "The") + " process that served it has exited or does not answer: its last state is shown.");
  }
  if (shown.length && ended.length === shown.length) {
    conn.textContent = "ended: " + shown.map((s) => "'" + s.id + "' " + finalStatus(s).toLowerCase()).join(", ") + "; the process has exited";
    conn.className = "conn ended";
  } else {
    conn.textContent = "disconnected: no answer from the Squall process" + (state.lastOk ? " since " + state.lastOk : "") + "; last state shown";
    conn.className = "conn down";
  }
}

async function refresh() {
  if (state.busy) return;
  state.busy = true;
  const conn = document.getElementById("conn");
  try {
    const summary = await api("/api/v1/topology/summary");
    const ids = new Set(summary.topologies.map((t) => t.id));
    for (const [id, s] of state.sections) {
      if (!ids.has(id)) {
        const status = finalStatus(s);
        markEnded(s, (status ? "Topology " + status.toLowerCase() + " and" : "Topology") + " no longer shown by this process: its last state is shown.");
      }
    }
    document.getElementById("empty").hidden = state.sections.size > 0 || ids.size > 0;
    for (const entry of summary.topologies) {
      const s = section(entry.id);
      const t = await api(topologyPath(entry.id) + "?window=" + encodeURIComponent(state.window));
      s.data = t;
      renderHead(s, t);
      renderTables(s, t);
      renderPlots(s, t);
      renderConfig(s, t);
      renderErrors(s.node.querySelector(".errors"), t.topologyErrors);
      await renderGraph(s, t);
      await renderComponent(s);
    }
    state.lastOk = new Date().toLocaleTimeString();
    conn.textContent = "live · " + state.lastOk;
    conn.className = "conn live";
    document.body.dataset.refreshed = String(Number(document.body.dataset.refreshed || 0) + 1);
  } catch (e) {
    if (e instanceof ServerGone) {
      serverGone(conn);
    } else {
      conn.textContent = "error: " + e.message;
      conn.className = "conn down";
    }
  } finally {
    state.busy = false;
  }
}

document.getElementById("window").addEventListener("change", (ev) => {
  state.window = ev.target.value;
  refresh();
});
refresh();
setInterval(() => { if (!document.hidden) refresh(); }, REFRESH_MS);
