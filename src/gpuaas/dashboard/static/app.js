// gpuaas dashboard: a single page over the HTTP API. No framework, no build step.
// The server pushes the whole (token-filtered) summary over SSE on every change; each push
// re-renders the current page and highlights what changed since the previous push.

import { workbenchPages } from "./workbenches.js";
import { clusterPages } from "./clusters.js";

const API = "/apis/gpuaas.dev/v1alpha1";
const KUEUE = "/apis/kueue.x-k8s.io/v1beta1";
const TOKEN_KEY = "gpuaas.token";
const STATE_ORDER = ["Evicted", "Evicting", "Pending", "Admitted", "Inactive", "Finished"];

const $ = (sel) => document.querySelector(sel);
const state = {
  token: sessionStorage.getItem(TOKEN_KEY) || "",
  summary: null,
  changed: new Set(), // workload keys whose state changed in the last push
  freshEvents: new Set(), // event names first seen in the last push
  banner: null, // {text, until}
  stream: null,
  poll: null,
  filter: { text: "", state: "all" },
  detail: null, // {key, doc, events, explain, error}
  nodes: null, // GET /nodes: every node of the runtime (the Ray cluster's, or this server's)
  nodesAt: 0, // when the node list was last asked for (ms)
};

// ---------------------------------------------------------------- helpers
function h(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}
function fmtTime(ts) {
  if (!ts) return "";
  const d = new Date(typeof ts === "number" ? ts * 1000 : ts);
  return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
}
function ago(ts) {
  if (!ts) return "";
  const s = Math.max(0, Date.now() / 1000 - ts);
  if (s < 60) return `${Math.round(s)}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  return `${Math.round(s / 3600)}h ago`;
}
function badge(text, cls = text) { return `<span class="badge ${h(cls)}">${h(text)}</span>`; }
function wlLink(key) {
  const [ns, name] = key.split("/");
  return `<a href="#/workload/${encodeURIComponent(ns)}/${encodeURIComponent(name)}">${h(key)}</a>`;
}
function fmtQty(resource, v) {
  if (v === null || v === undefined) return "—";
  if (resource === "cpu") return v % 1000 === 0 ? String(v / 1000) : `${v}m`;
  if (resource === "memory" || resource.endsWith("storage")) {
    const units = [["Ti", 2 ** 40], ["Gi", 2 ** 30], ["Mi", 2 ** 20], ["Ki", 2 ** 10]];
    for (const [u, n] of units) if (v >= n && v % n === 0) return `${v / n}${u}`;
    for (const [u, n] of units) if (v >= n) return `${(v / n).toFixed(1)}${u}`;
  }
  return String(v);
}
function toYaml(value, indent = "") {
  if (value === null || value === undefined) return "null";
  if (Array.isArray(value)) {
    if (!value.length) return "[]";
    return value.map((v) => {
      const inner = toYaml(v, indent + "  ");
      return `\n${indent}- ${typeof v === "object" && v !== null ? inner.trimStart() : inner}`;
    }).join("");
  }
  if (typeof value === "object") {
    const keys = Object.keys(value);
    if (!keys.length) return "{}";
    return keys.map((k) => {
      const v = value[k];
      const scalar = v === null || typeof v !== "object" || (Array.isArray(v) ? !v.length : !Object.keys(v).length);
      return `\n${indent}${k}:${scalar ? " " + toYaml(v, indent + "  ") : toYaml(v, indent + "  ")}`;
    }).join("");
  }
  if (typeof value === "string") {
    return /^[\w./@:-][\w ./@:,()-]*$/.test(value) && !/^(true|false|null|yes|no|[\d.]+)$/i.test(value) ? value : JSON.stringify(value);
  }
  return String(value);
}

// ---------------------------------------------------------------- API
async function api(path) {
  const r = await fetch(path, { headers: { Authorization: `Bearer ${state.token}` } });
  if (r.status === 401) { logout("Your token was refused (401). Sign in again."); throw new Error("unauthorized"); }
  const body = await r.json().catch(() => ({}));
  if (!r.ok) throw new Error(body.message || `${r.status} ${r.statusText}`);
  return body;
}

// ---------------------------------------------------------------- live updates
function connect() {
  disconnect();
  const es = new EventSource(`${API}/dashboard/stream?token=${encodeURIComponent(state.token)}`);
  state.stream = es;
  es.addEventListener("summary", (e) => { setLive(true); receive(JSON.parse(e.data)); });
  // after the whole summary, the feed sends only what changed (api/dashboard_patch.py)
  es.addEventListener("patch", (e) => { if (state.summary) { setLive(true); receive(patched(state.summary, JSON.parse(e.data))); } });
  es.onerror = () => {
    setLive(false);
    if (es.readyState === EventSource.CLOSED) {
      // the stream refused us (bad token?) or the server went away: poll until it is back
      state.stream = null;
      startPolling();
    }
  };
}
// A patch: the summary's fields but its workloads, plus the rows that changed or appeared and the
// keys of those that went. A changed row keeps its place and a new one goes last, as on the server.
function patched(prev, p) {
  const rows = new Map(prev.workloads.map((w) => [w.key, w]));
  for (const key of p.workloadsRemoved) rows.delete(key);
  for (const w of p.workloadsChanged) rows.set(w.key, w);
  const { workloadsChanged, workloadsRemoved, ...rest } = p;
  return { ...rest, workloads: [...rows.values()] };
}
function startPolling() {
  if (state.poll) return;
  state.poll = setInterval(async () => {
    try {
      receive(await api(`${API}/dashboard/summary`));
      clearInterval(state.poll); state.poll = null; connect();
    } catch { /* keep polling */ }
  }, 2000);
}
function disconnect() {
  if (state.stream) state.stream.close();
  state.stream = null;
  if (state.poll) clearInterval(state.poll);
  state.poll = null;
}
function setLive(on) {
  const el = $("#live");
  el.className = `live ${on ? "on" : "off"}`;
  el.textContent = on ? "live" : "reconnecting";
}

function receive(summary) {
  const prev = state.summary;
  state.changed = new Set();
  state.freshEvents = new Set();
  if (prev) {
    const before = new Map(prev.workloads.map((w) => [w.key, w.state]));
    for (const w of summary.workloads) if (before.get(w.key) !== w.state) state.changed.add(w.key);
    const seen = new Set(prev.events.map((e) => e.metadata.name));
    for (const e of summary.events) {
      if (seen.has(e.metadata.name)) continue;
      state.freshEvents.add(e.metadata.name);
      if (e.reason === "Preempted") {
        const victim = `${e.involvedObject.namespace}/${e.involvedObject.name}`;
        const by = e.related ? e.related.name : "another workload";
        state.banner = { text: `Preemption: ${by} evicted ${victim}`, detail: e.message, until: Date.now() + 20000 };
      }
    }
  }
  state.summary = summary;
  loadNodes();
  render();
  if (state.detail && (state.changed.has(state.detail.key) || state.freshEvents.size)) loadDetail(state.detail.key);
}

// The runtime's nodes are not part of the summary push: asked for at most every 2 s, and the
// flavors and GPU pages re-rendered when they arrive.
async function loadNodes() {
  if (Date.now() - state.nodesAt < 2000) return;
  state.nodesAt = Date.now();
  try {
    state.nodes = (await api(`${API}/nodes`)).items || [];
  } catch { return; }
  if (["flavors", "gpus"].includes(route().page)) render();
}

// ---------------------------------------------------------------- session
function showLogin(message) {
  $("#login").hidden = false;
  const err = $("#login-error");
  err.hidden = !message;
  err.textContent = message || "";
  $("#token").focus();
}
function logout(message) {
  disconnect();
  sessionStorage.removeItem(TOKEN_KEY);
  state.token = "";
  state.summary = null;
  $("#who").textContent = "";
  $("#logout").hidden = true;
  setLive(false);
  $("#live").textContent = "offline";
  $("#view").innerHTML = "";
  shown = null;
  showLogin(message);
}
async function login(token) {
  state.token = token;
  WORKBENCHES.prefetch(); // in parallel with the summary
  try {
    const summary = await fetch(`${API}/dashboard/summary`, { headers: { Authorization: `Bearer ${token}` } });
    if (!summary.ok) {
      const body = await summary.json().catch(() => ({}));
      showLogin(body.message || `sign-in failed (${summary.status})`);
      state.token = "";
      return;
    }
    sessionStorage.setItem(TOKEN_KEY, token);
    $("#login").hidden = true;
    $("#logout").hidden = false;
    const s = await summary.json();
    const p = s.principal;
    $("#who").textContent = p.admin ? `${p.name} (admin)` : `${p.name} · ${p.namespaces.join(", ")}`;
    for (const a of document.querySelectorAll("#nav [data-admin]")) a.hidden = !p.admin;
    state.summary = null;
    receive(s);
    connect();
    WORKBENCHES.prefetch(); // again if the first is done: the admin's namespaces need the principal
  } catch (e) {
    showLogin(`cannot reach the server: ${e.message}`);
  }
}

// ---------------------------------------------------------------- rendering
const WORKBENCHES = workbenchPages({
  h,
  badge,
  token: () => state.token,
  principal: () => (state.summary ? state.summary.principal : null),
  page: () => route().page,
  rerender: () => render(),
});
const CLUSTERS = clusterPages({
  h,
  badge,
  token: () => state.token,
  page: () => route().page,
  rerender: () => render(),
});
const PAGES = {
  overview: renderOverview,
  clusterqueues: renderClusterQueues,
  cohorts: renderCohorts,
  localqueues: renderLocalQueues,
  workloads: renderWorkloads,
  workload: renderWorkloadDetail,
  flavors: renderFlavors,
  gpus: renderGpus,
  ...WORKBENCHES.pages,
  ...CLUSTERS.pages,
};
function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  const page = PAGES[parts[0]] ? parts[0] : "overview";
  return { page, args: parts.slice(1) };
}
let shown = null; // the markup #view holds, as render() last put it there
function render() {
  const s = state.summary;
  if (!s) return;
  const { page, args } = route();
  for (const a of document.querySelectorAll("#nav a")) {
    a.classList.toggle("active", a.dataset.page === page || (page === "workload" && a.dataset.page === "workloads"));
  }
  renderBanner();
  const html = PAGES[page](s, args);
  // Markup the view shows already is not put in again: a page is rendered on every live update
  // and refresh, mostly unchanged, and replacing its elements between a button's press and its
  // release loses that click.
  if (html !== shown) {
    const focus = document.activeElement && document.activeElement.id;
    const caret = focus && document.activeElement.selectionStart;
    $("#view").innerHTML = html;
    shown = html;
    if (focus && document.getElementById(focus)) {
      const el = document.getElementById(focus);
      el.focus();
      if (caret !== null && caret !== undefined && el.setSelectionRange) el.setSelectionRange(caret, caret);
    }
  }
  for (const el of document.querySelectorAll("[data-key]")) {
    if (state.changed.has(el.dataset.key)) el.classList.add(el.dataset.state === "Admitted" ? "flash" : "flash-red");
  }
  for (const el of document.querySelectorAll("[data-event]")) {
    if (state.freshEvents.has(el.dataset.event)) el.classList.add("flash");
  }
}
function renderBanner() {
  const b = $("#banner");
  if (!state.banner || Date.now() > state.banner.until) { b.hidden = true; state.banner = null; return; }
  b.hidden = false;
  b.innerHTML = `<div class="text"><span>⚡ ${h(state.banner.text)}</span><span class="small" style="font-weight:400;opacity:.9">${h(state.banner.detail || "")}</span></div><button class="x" id="banner-close">dismiss</button>`;
  $("#banner-close").onclick = () => { state.banner = null; b.hidden = true; };
}

function stat(label, value, cls = "") {
  return `<div class="card stat ${cls}"><div class="value">${h(value)}</div><div class="label">${h(label)}</div></div>`;
}
function utilBar(used, cap, { borrowedFrom = null } = {}) {
  const scale = Math.max(cap, used, 1);
  const own = Math.min(used, borrowedFrom ?? used);
  const pct = (v) => `${(100 * v / scale).toFixed(2)}%`;
  let fills = `<div class="fill ${used > cap && borrowedFrom === null ? "over" : ""}" style="width:${pct(own)}"></div>`;
  if (borrowedFrom !== null && used > borrowedFrom) {
    fills += `<div class="fill borrowed" style="left:${pct(borrowedFrom)};width:${pct(used - borrowedFrom)}"></div>`;
  }
  return `<div class="bar">${fills}</div>`;
}

function renderOverview(s) {
  const t = s.totals;
  const borrowing = s.clusterQueues.filter((q) => q.borrowing).length;
  const preempts = s.events.filter((e) => e.reason === "Preempted" && state.freshEvents.has(e.metadata.name));
  return `
  <div class="page-head"><h1>Overview</h1><span class="muted small">updated ${fmtTime(s.generatedAt)} · rv ${h(s.resourceVersion)}</span></div>
  <div class="grid stats">
    ${stat("Admitted", t.admitted, "admitted")}
    ${stat("Pending", t.pending, "pending")}
    ${stat("Evicted", t.evicted + t.evicting, "evicted")}
    ${stat("Borrowing CQs", borrowing, "borrow")}
    ${stat("Cluster queues", t.clusterQueues)}
    ${stat("Cohorts", t.cohorts)}
    ${stat("GPUs in use", `${t.gpusInUse} / ${t.gpuQuota}`)}
  </div>
  <div class="grid two">
    <div class="card"><h2>Cohort utilization</h2>${s.cohorts.length ? s.cohorts.map(cohortBars).join("") : `<p class="empty">No cohorts.</p>`}
      ${s.clusterQueues.filter((q) => !q.cohort).map((q) => cohortBars({ name: q.name, members: [], resources: cqTotals(q), standalone: true })).join("")}</div>
    <div class="card"><h2>Recent events</h2>
      ${preempts.map((e) => `<div class="feed-banner">⚡ ${h(e.related ? e.related.name : "a workload")} preempted ${h(e.involvedObject.namespace)}/${h(e.involvedObject.name)}</div>`).join("")}
      ${eventList(s.events.slice(0, 14))}</div>
  </div>
  <div class="section card"><h2>Cluster queues</h2>${cqTable(s)}</div>`;
}
function cqTotals(q) {
  const by = {};
  for (const r of q.resources) {
    const x = (by[r.resource] ||= { resource: r.resource, capacity: 0, usage: 0 });
    x.capacity += r.nominal; x.usage += r.usage;
  }
  return Object.values(by);
}
function cohortBars(c) {
  const rows = c.resources.map((r) => `
    <div class="bar-row"><div class="bar-label"><span class="what">${h(r.resource)}</span>
      <span>${fmtQty(r.resource, r.usage)} / ${fmtQty(r.resource, r.capacity)} <span class="muted">(${r.capacity ? Math.round(100 * r.usage / r.capacity) : 0}%)</span></span></div>
      ${utilBar(r.usage, r.capacity)}</div>`).join("");
  const who = c.standalone ? "ClusterQueue without cohort" : `${c.members.length} cluster queue(s)`;
  return `<div class="flavor-block"><h3>${h(c.name)} <span class="muted small">${who}</span></h3><div class="bars">${rows || `<span class="muted small">no quota</span>`}</div></div>`;
}
function eventClass(e) {
  if (e.reason === "Preempted" || e.reason === "EvictedDueToPreempted" || e.reason === "Evicted") return "preempt";
  if (e.reason === "Admitted" || e.reason === "QuotaReserved") return "admit";
  return e.type;
}
function eventList(events) {
  if (!events.length) return `<p class="empty">No events yet.</p>`;
  return `<ul class="events">${events.map((e) => {
    const io = e.involvedObject;
    const obj = io.namespace ? `${io.namespace}/${io.name}` : io.name;
    const link = io.kind === "Workload" && io.namespace ? wlLink(obj) : h(obj);
    return `<li class="${eventClass(e)} ${h(e.type)}" data-event="${h(e.metadata.name)}"><span class="time">${fmtTime(e.eventTime)}</span>
      <div><span class="reason">${h(e.reason)}</span><span class="obj">${h(io.kind)} ${link}</span><div class="small">${h(e.message)}</div></div></li>`;
  }).join("")}</ul>`;
}
function cqTable(s) {
  if (!s.clusterQueues.length) return `<p class="empty">No cluster queues.</p>`;
  return `<div class="table-wrap"><table><thead><tr><th>Name</th><th>Cohort</th><th class="num">Pending</th><th class="num">Admitted</th><th>Usage</th><th>History</th></tr></thead><tbody>
    ${s.clusterQueues.map((q) => `<tr><td><a href="#/clusterqueues">${h(q.name)}</a> ${q.active ? "" : badge("inactive")} ${q.borrowing ? badge("borrowing") : ""}</td>
      <td>${h(q.cohort || "—")}</td><td class="num">${q.pendingWorkloads}</td><td class="num">${q.admittedWorkloads}</td>
      <td>${cqTotals(q).map((r) => `<span class="chip">${h(r.resource)} ${fmtQty(r.resource, r.usage)}/${fmtQty(r.resource, r.capacity)}</span>`).join("")}</td>
      <td>${sparkline(q, 160, 28)}</td></tr>`).join("")}
  </tbody></table></div>`;
}
function sparkline(q, w = 220, hgt = 36) {
  const series = q.history.resources;
  const names = Object.keys(series).sort((a, b) => (b === "nvidia.com/gpu") - (a === "nvidia.com/gpu") || a.localeCompare(b));
  const res = names.find((r) => series[r].some((v) => v > 0)) || names[0];
  if (!res || series[res].length < 2) return `<span class="muted small">collecting…</span>`;
  const vals = series[res];
  const cap = Math.max(...vals, ...q.resources.filter((r) => r.resource === res).map((r) => r.nominal), 1);
  const step = w / (vals.length - 1);
  const pts = vals.map((v, i) => `${(i * step).toFixed(1)},${(hgt - 3 - (hgt - 6) * v / cap).toFixed(1)}`).join(" ");
  const last = vals[vals.length - 1];
  return `<span class="spark"><svg width="${w}" height="${hgt}" viewBox="0 0 ${w} ${hgt}" role="img" aria-label="${h(res)} usage history">
    <polyline points="0,${hgt} ${pts} ${w},${hgt}" fill="rgba(79,70,229,.12)" stroke="none"/>
    <polyline points="${pts}" fill="none" stroke="#4f46e5" stroke-width="2"/></svg>${h(res)} ${fmtQty(res, last)}</span>`;
}

function renderClusterQueues(s) {
  const cards = s.clusterQueues.map((q) => {
    const byFlavor = {};
    for (const r of q.resources) (byFlavor[r.flavor] ||= []).push(r);
    const blocks = Object.entries(byFlavor).map(([flavor, rs]) => `<div class="flavor-block"><h4>flavor ${h(flavor)}</h4><div class="bars">${rs.map(quotaBar).join("")}</div></div>`).join("");
    const p = q.policies;
    return `<div class="card" data-cq="${h(q.name)}">
      <div class="cq-head"><div><h3>${h(q.name)}</h3><span class="muted small">cohort ${h(q.cohort || "—")}</span></div>
        <div class="counts">${badge(`${q.admittedWorkloads} admitted`, "Admitted")} ${badge(`${q.pendingWorkloads} pending`, "Pending")} ${q.borrowing ? badge("borrowing") : ""} ${q.active ? "" : badge("inactive")}</div></div>
      ${q.warnings.map((w) => `<div class="note">${h(w)}</div>`).join("")}
      ${blocks || `<p class="muted small">no resource groups</p>`}
      <div class="spark">${sparkline(q)}</div>
      <div class="policies">preemption: within CQ <b>${h(p.withinClusterQueue)}</b> · reclaim in cohort <b>${h(p.reclaimWithinCohort)}</b> · borrow in cohort <b>${h(p.borrowWithinCohort.policy)}</b>${p.borrowWithinCohort.maxPriorityThreshold !== null ? ` (≤ ${h(p.borrowWithinCohort.maxPriorityThreshold)})` : ""} · ${h(p.queueingStrategy)}</div>
    </div>`;
  }).join("");
  return `<div class="page-head"><h1>Cluster queues</h1></div>
    <div class="legend"><span><i style="background:var(--admitted)"></i>usage within nominal quota</span><span><i style="background:var(--borrow)"></i>borrowed from the cohort</span><span><i style="background:var(--ink);opacity:.55"></i>nominal quota</span><span><i style="background:rgba(100,116,139,.35)"></i>beyond the borrowing limit</span></div>
    ${cards ? `<div class="grid cards">${cards}</div>` : `<p class="empty">No cluster queues.</p>`}`;
}
function quotaBar(r) {
  const d = r.display;
  const limitTop = r.borrowingLimit === null ? null : r.nominal + r.borrowingLimit;
  const scale = Math.max(r.usage, limitTop ?? r.nominal * 2, r.nominal, 1);
  const pct = (v) => `${(100 * v / scale).toFixed(2)}%`;
  const own = Math.min(r.usage, r.nominal);
  const over = Math.max(0, r.usage - r.nominal);
  const limitShade = limitTop !== null && limitTop < scale ? `<div class="limit" style="width:${pct(scale - limitTop)}"></div>` : "";
  return `<div class="bar-row"><div class="bar-label"><span class="what">${h(r.resource)}</span><span>${h(d.usage)} used of ${h(d.nominal)} nominal</span></div>
    <div class="bar">${limitShade}<div class="fill" style="width:${pct(own)}"></div>${over ? `<div class="fill borrowed" style="left:${pct(r.nominal)};width:${pct(over)}"></div>` : ""}<div class="mark" style="left:calc(${pct(r.nominal)} - 1px)"></div></div>
    <div class="bar-meta"><span>borrowed <b style="color:${over ? "var(--borrow)" : "inherit"}">${h(d.borrowed)}</b></span><span>borrowing limit ${h(d.borrowingLimit ?? "none")}</span><span>lending limit ${h(d.lendingLimit ?? "none")}</span></div></div>`;
}

function renderCohorts(s) {
  const byName = new Map(s.cohorts.map((c) => [c.name, c]));
  const cqs = new Map(s.clusterQueues.map((q) => [q.name, q]));
  const node = (c) => `<li><div class="node-cohort">◆ ${h(c.name)} ${c.explicit ? "" : `<span class="muted small">(implicit)</span>`} <span class="muted small">fair weight ${h(c.fairWeight)}</span></div>
      <div class="chips small">${c.resources.map((r) => `<span class="chip">${h(r.resource)} ${h(r.display.usage)} / ${h(r.display.capacity)}</span>`).join("")}</div>
      <ul class="tree">${c.members.map((m) => cqNode(cqs.get(m))).join("")}${c.children.map((ch) => byName.has(ch) ? node(byName.get(ch)) : "").join("")}</ul></li>`;
  const roots = s.cohorts.filter((c) => !c.parent || !byName.has(c.parent));
  const loose = s.clusterQueues.filter((q) => !q.cohort);
  return `<div class="page-head"><h1>Cohorts</h1></div>
    <div class="card">${roots.length ? `<ul class="tree">${roots.map(node).join("")}</ul>` : `<p class="empty">No cohorts.</p>`}</div>
    ${loose.length ? `<div class="card section"><h2>Cluster queues without a cohort</h2><ul class="tree">${loose.map(cqNode).join("")}</ul></div>` : ""}`;
}
function cqNode(q) {
  if (!q) return "";
  const p = q.policies;
  return `<li class="node-cq"><span>▸ <b>${h(q.name)}</b></span> ${badge(`${q.admittedWorkloads} admitted`, "Admitted")} ${badge(`${q.pendingWorkloads} pending`, "Pending")} ${q.borrowing ? badge("borrowing") : ""}
    <span class="muted small">reclaimWithinCohort ${h(p.reclaimWithinCohort)} · borrowWithinCohort ${h(p.borrowWithinCohort.policy)}${p.borrowWithinCohort.maxPriorityThreshold !== null ? ` ≤ ${h(p.borrowWithinCohort.maxPriorityThreshold)}` : ""} · withinClusterQueue ${h(p.withinClusterQueue)} · ${h(p.queueingStrategy)}</span></li>`;
}

function renderLocalQueues(s) {
  return `<div class="page-head"><h1>Local queues</h1></div><div class="card">${s.localQueues.length ? `<div class="table-wrap"><table>
    <thead><tr><th>Namespace</th><th>Name</th><th>Cluster queue</th><th class="num">Pending</th><th class="num">Admitted</th></tr></thead><tbody>
    ${s.localQueues.map((q) => `<tr><td>${h(q.namespace)}</td><td><b>${h(q.name)}</b></td><td>${h(q.clusterQueue)}</td><td class="num">${q.pending}</td><td class="num">${q.admitted}</td></tr>`).join("")}
    </tbody></table></div>` : `<p class="empty">No local queues you can see.</p>`}</div>`;
}

function renderWorkloads(s) {
  const f = state.filter;
  const text = f.text.toLowerCase();
  const rows = s.workloads
    .filter((w) => f.state === "all" || w.state === f.state)
    .filter((w) => !text || `${w.key} ${w.queue} ${w.clusterQueue}`.toLowerCase().includes(text))
    .sort((a, b) => STATE_ORDER.indexOf(a.state) - STATE_ORDER.indexOf(b.state) || (a.position ?? 0) - (b.position ?? 0) || a.key.localeCompare(b.key));
  const counts = {};
  for (const w of s.workloads) counts[w.state] = (counts[w.state] || 0) + 1;
  const filters = ["all", ...STATE_ORDER.filter((x) => counts[x])].map((x) => `<button class="filter ${f.state === x ? "on" : ""}" data-filter="${x}">${x === "all" ? `All ${s.workloads.length}` : `${x} ${counts[x]}`}</button>`).join("");
  return `<div class="page-head"><h1>Workloads</h1></div>
  <div class="card"><div class="toolbar"><input id="wl-search" placeholder="filter by name, namespace or queue" value="${h(f.text)}">${filters}</div>
  ${rows.length ? `<div class="table-wrap"><table id="workloads"><thead><tr><th>Namespace</th><th>Name</th><th>Queue</th><th>Status</th><th>Priority</th><th>Flavors</th><th>Preempted by / reason</th><th class="num">Position</th><th>Why pending</th></tr></thead><tbody>
  ${rows.map(workloadRow).join("")}</tbody></table></div>` : `<p class="empty">No workloads${f.state !== "all" || f.text ? " match the filter" : ""}.</p>`}</div>`;
}
function workloadRow(w) {
  const flavors = Object.entries(w.flavors).map(([r, fl]) => `<span class="chip">${h(r)}: ${h(fl)}</span>`).join("") || `<span class="muted">—</span>`;
  const idle = w.idleGpu ? ` <span class="badge hoarding" title="${h(w.idleGpu)}">GPU idle</span>` : "";
  const status = (w.state === "Evicted" ? `${badge("Evicted")} ${badge("Pending")}` : badge(w.state)) + idle;
  const preempted = w.preemptedBy ? `${wlLink(w.preemptedBy)}<div class="small muted">${h(w.preemptionReason || "")}</div>` : w.evictionReason ? h(w.evictionReason) : `<span class="muted">—</span>`;
  return `<tr class="state-${h(w.state)}" data-key="${h(w.key)}" data-state="${h(w.state)}">
    <td class="nowrap">${h(w.namespace)}</td><td class="nowrap"><a href="#/workload/${encodeURIComponent(w.namespace)}/${encodeURIComponent(w.name)}"><b>${h(w.name)}</b></a><div class="small muted">${h(w.kind)}</div></td>
    <td class="nowrap">${h(w.queue)}<div class="small muted">${h(w.clusterQueue || "unrouted")}</div></td>
    <td class="status">${status}</td>
    <td class="nowrap">${h(w.priority)}<div class="small muted">${h(w.priorityClass || "")}</div></td>
    <td>${flavors}</td><td>${preempted}</td>
    <td class="num">${w.position ? `${w.position} / ${w.queueLength}` : "—"}</td>
    <td class="why">${h(w.whyPending || checksWaiting(w))}</td></tr>`;
}
function checksWaiting(w) {
  if (!w.awaitingChecks) return "";
  const open = w.admissionChecks.filter((c) => c.state !== "Ready").map((c) => `${c.name} (${c.state})`);
  return `quota reserved; waiting for admission checks: ${open.join(", ")}`;
}
// The toolbar's handlers are on the document, bound once (at boot), like the workbench page's:
// bound on each render's elements a timer later, a click in between was lost.
function bindWorkloadToolbar() {
  document.addEventListener("input", (e) => {
    if (e.target instanceof Element && e.target.id === "wl-search") { state.filter.text = e.target.value; render(); }
  });
  document.addEventListener("click", (e) => {
    const b = e.target instanceof Element ? e.target.closest("[data-filter]") : null;
    if (b) { state.filter.state = b.dataset.filter; render(); }
  });
}

function renderWorkloadDetail(s, [ns, name]) {
  const key = `${ns}/${name}`;
  const w = s.workloads.find((x) => x.key === key);
  if (!state.detail || state.detail.key !== key) { state.detail = { key }; loadDetail(key); }
  const d = state.detail;
  if (!w) return `<div class="page-head"><h1>${h(key)}</h1></div><div class="card"><p class="empty">${h(d.error || "This workload does not exist or belongs to a namespace your token cannot see.")}</p></div>`;
  const conds = (d.doc?.status?.conditions || []).map((c) => `<tr><td><b>${h(c.type)}</b></td><td>${h(c.status)}</td><td>${h(c.reason)}</td><td class="msg">${h(c.message)}</td><td class="small muted nowrap">${h(fmtTime(c.lastTransitionTime))}</td></tr>`).join("");
  const ex = d.explain;
  const why = w.state === "Pending" || w.state === "Evicted" ? `<div class="card"><h2>Why pending</h2><div class="why-box">${h(w.whyPending || "")}</div>
    ${w.position ? `<p>Position <b>${w.position}</b> of ${w.queueLength} in ClusterQueue ${h(w.clusterQueue)}.</p>` : ""}
    ${ex && ex.suggestions.length ? `<h3>What would admit it</h3><ul class="suggest">${ex.suggestions.map((x) => `<li>${h(x)}</li>`).join("")}</ul>` : ""}
    ${ex && ex.quota.length ? `<table class="section"><thead><tr><th>Flavor</th><th>Resource</th><th class="num">Requested</th><th class="num">Nominal</th><th class="num">Used</th><th class="num">Free</th></tr></thead><tbody>${ex.quota.map((q) => `<tr><td>${h(q.flavor)}</td><td>${h(q.resource)}</td><td class="num">${h(q.requested)}</td><td class="num">${h(q.nominal)}</td><td class="num">${h(q.used)}</td><td class="num">${h(q.free)}</td></tr>`).join("")}</tbody></table>` : ""}</div>` : "";
  const checks = w.admissionChecks && w.admissionChecks.length ? `<div class="card"><h2>Admission checks</h2>${w.awaitingChecks ? `<p class="why-box">${h(checksWaiting(w))}</p>` : ""}<table class="section"><thead><tr><th>Check</th><th>State</th><th>Message</th></tr></thead><tbody>${w.admissionChecks.map((c) => `<tr data-check="${h(c.name)}"><td><b>${h(c.name)}</b></td><td>${h(c.state)}</td><td class="msg">${h(c.message)}</td></tr>`).join("")}</tbody></table></div>` : "";
  const timeline = (d.events || []).slice().reverse().map((e) => `<li class="${eventClass(e)} ${h(e.type)}"><span class="muted small">${fmtTime(e.eventTime)}</span> <b>${h(e.reason)}</b><div class="small">${h(e.message)}</div></li>`).join("");
  return `<div class="page-head"><div><a href="#/workloads" class="small">← Workloads</a><h1>${h(key)} <span data-key="${h(key)}" data-state="${h(w.state)}">${w.state === "Evicted" ? `${badge("Evicted")} ${badge("Pending")}` : badge(w.state)}</span></h1></div></div>
  <div class="grid two">
    <div class="card"><h2>Summary</h2><dl class="kv">
      <dt>Kind</dt><dd>${h(w.kind)}</dd><dt>Queue</dt><dd>${h(w.queue)} → ${h(w.clusterQueue || "unrouted")}</dd>
      <dt>Priority</dt><dd>${h(w.priority)} ${w.priorityClass ? `<span class="muted">(${h(w.priorityClass)})</span>` : ""}</dd>
      <dt>Requests</dt><dd>${Object.entries(w.requests).map(([r, v]) => `<span class="chip">${h(r)} ${h(v)}</span>`).join("") || "—"}</dd>
      <dt>Flavors</dt><dd>${Object.entries(w.flavors).map(([r, f]) => `<span class="chip">${h(r)}: ${h(f)}</span>`).join("") || "—"}</dd>
      <dt>Created</dt><dd>${fmtTime(w.createdAt)} <span class="muted">(${ago(w.createdAt)})</span></dd>
      <dt>Admitted</dt><dd>${w.admittedAt ? `${fmtTime(w.admittedAt)} <span class="muted">(${ago(w.admittedAt)})</span>` : "—"}</dd>
      <dt>Preempted by</dt><dd>${w.preemptedBy ? `${wlLink(w.preemptedBy)} <span class="muted">${h(w.preemptionReason || "")}</span>` : "—"}</dd>
      <dt>Requeues</dt><dd>${h(w.requeues)}</dd></dl></div>
    ${why || `<div class="card"><h2>Admission</h2><p>${w.state === "Admitted" ? `Holds quota in ClusterQueue <b>${h(w.clusterQueue)}</b>.` : h(w.state)}</p></div>`}
  </div>
  ${checks}
  <div class="grid section" style="grid-template-columns: minmax(0, 3fr) minmax(0, 2fr)">
    <div class="card"><h2>Conditions</h2>${conds ? `<div class="table-wrap"><table><thead><tr><th>Type</th><th>Status</th><th>Reason</th><th>Message</th><th>Since</th></tr></thead><tbody>${conds}</tbody></table></div>` : `<p class="empty">${d.doc ? "No conditions." : "Loading…"}</p>`}</div>
    <div class="card"><h2>Events</h2>${timeline ? `<ul class="timeline">${timeline}</ul>` : `<p class="empty">${d.events ? "No events." : "Loading…"}</p>`}</div>
  </div>
  <div class="card section"><h2>YAML</h2><pre class="yaml">${d.doc ? h(toYaml(d.doc).trimStart()) : "Loading…"}</pre></div>`;
}
async function loadDetail(key) {
  const [ns, name] = key.split("/");
  const q = encodeURIComponent;
  // allSettled, and the first failure in this fixed order: the workload's own refusal is the
  // message to show, whichever of the three requests happens to answer first.
  const results = await Promise.allSettled([
    api(`${KUEUE}/namespaces/${q(ns)}/workloads/${q(name)}`),
    api(`/api/v1/namespaces/${q(ns)}/events?fieldSelector=${q(`involvedObject.kind=Workload,involvedObject.name=${name}`)}`),
    api(`${API}/namespaces/${q(ns)}/workloads/${q(name)}/explain`),
  ]);
  const failed = results.find((r) => r.status === "rejected");
  if (state.detail && state.detail.key === key) {
    if (failed) state.detail.error = failed.reason.message;
    else {
      const [doc, events, explain] = results.map((r) => r.value);
      Object.assign(state.detail, { doc, events: events.items, explain, error: null });
    }
  }
  if (route().page === "workload") {
    const changed = state.changed;
    state.changed = new Set();
    render();
    state.changed = changed;
  }
}

function renderFlavors(s) {
  const gpusBy = {};
  for (const g of s.gpus.gpus) (gpusBy[g.flavor || g.node] ||= []).push(g);
  const cards = s.flavors.map((f) => `<div class="card"><h3>${h(f.name)}</h3><dl class="kv">
    <dt>Node labels</dt><dd class="chips">${Object.entries(f.labels).map(([k, v]) => `<span class="chip">${h(k)}=${h(v)}</span>`).join("") || `<span class="muted">none</span>`}</dd>
    <dt>Node taints</dt><dd class="chips">${f.taints.map((t) => `<span class="chip">${h(t.key)}${t.value ? `=${h(t.value)}` : ""}:${h(t.effect)}</span>`).join("") || `<span class="muted">none</span>`}</dd>
    <dt>Tolerations</dt><dd class="chips">${f.tolerations.map((t) => `<span class="chip">${h(t.key || "*")} ${h(t.operator)} ${h(t.value)} ${h(t.effect)}</span>`).join("") || `<span class="muted">none</span>`}</dd>
    <dt>Resources</dt><dd class="chips">${f.resources.map((r) => `<span class="chip">${h(r)}</span>`).join("") || `<span class="muted">none</span>`}</dd>
    <dt>Cluster queues</dt><dd class="chips">${f.clusterQueues.map((q) => `<span class="chip">${h(q)}</span>`).join("") || `<span class="muted">unused</span>`}</dd>
    <dt>GPUs in use</dt><dd>${flavorGpus(s, f, gpusBy)}</dd>
  </dl><div class="flavor-block"><h4>Nodes</h4>${flavorNodes(f)}</div></div>`).join("");
  return `<div class="page-head"><h1>Resource flavors</h1></div>${cards ? `<div class="grid cards">${cards}</div>` : `<p class="empty">No resource flavors.</p>`}
    ${nodeSection(s, "Nodes and the flavors whose nodeLabels they carry")}`;
}

// ---------------------------------------------------------------- nodes (GET /nodes)
function nodeGpuCount(n) {
  const c = (n.capacity || {})["nvidia.com/gpu"];
  return c !== undefined ? Number(c) : (n.gpus || []).length;
}
// GPU id -> the pod holding it ("ns/workload/pod"), from the node's gpusInUse.
function nodeHolders(n) {
  const by = {};
  for (const [pod, ids] of Object.entries(n.gpusInUse || {})) for (const id of ids) by[String(id)] = pod;
  return by;
}
// Flavors whose nodeLabels this node carries (as Kueue's injected nodeSelector matches them).
function nodeFlavors(s, n) {
  const labels = n.labels || {};
  return s.flavors.filter((f) => Object.entries(f.labels).every(([k, v]) => labels[k] === v)).map((f) => f.name);
}
function nodeCard(s, n) {
  const gpus = nodeGpuCount(n);
  const holders = nodeHolders(n);
  const cpu = n.nodeID ? n.capacity.cpu : (n.capacity.cpu || 0) / 1000; // Ray: CPUs, local: millicores
  const mem = n.capacity.memory ? fmtQty("memory", n.capacity.memory) : "—";
  const wl = new Map(s.workloads.map((w) => [w.key, w]));
  const slots = [...Array(gpus).keys()].map((i) => {
    const pod = holders[String(i)];
    const key = pod ? pod.split("/").slice(0, 2).join("/") : "";
    const holder = pod ? (wl.has(key) ? `${wlLink(key)} <span class="muted small">${h(pod.split("/")[2] || "")}</span>` : h(pod)) : `<span class="muted">free</span>`;
    return `<div class="gpu ${pod ? "Admitted" : "free"}" data-node-gpu="${h(n.name)}/${i}" data-holder="${h(pod || "")}"><div class="idx">GPU ${i}</div><div class="holder">${holder}</div></div>`;
  }).join("");
  const flavors = nodeFlavors(s, n).map((f) => `<span class="chip">${h(f)}</span>`).join("") || `<span class="muted">none</span>`;
  return `<div class="card node-card" data-node-card="${h(n.name)}" data-alive="${n.alive === false ? "false" : "true"}">
    <h3>${h(n.name)} ${n.alive === false ? badge("dead", "Evicted") : badge("alive", "Admitted")}</h3>
    <dl class="kv">
      <dt>Labels</dt><dd class="chips">${Object.entries(n.labels || {}).map(([k, v]) => `<span class="chip">${h(k)}=${h(v)}</span>`).join("") || `<span class="muted">none</span>`}</dd>
      <dt>Taints</dt><dd class="chips">${(n.taints || []).map((t) => `<span class="chip">${h(t.key)}${t.value ? `=${h(t.value)}` : ""}:${h(t.effect)}</span>`).join("") || `<span class="muted">none</span>`}</dd>
      <dt>Capacity</dt><dd>${h(cpu)} CPU · ${h(mem)} · ${gpus} GPU${n.gpuModel ? ` (${h(n.gpuModel)})` : ""}</dd>
      <dt>Flavors</dt><dd class="chips node-flavors">${flavors}</dd>
      <dt>GPUs in use</dt><dd>${Object.keys(holders).length} / ${gpus}</dd>
    </dl>${gpus ? `<div class="gpu-grid">${slots}</div>` : ""}</div>`;
}
function nodeSection(s, title) {
  if (state.nodes === null) return `<div class="card section" id="nodes"><h2>Nodes</h2><p class="muted">loading…</p></div>`;
  const cards = state.nodes.map((n) => nodeCard(s, n)).join("");
  return `<div class="section" id="nodes"><h2>${h(title)} <span class="muted small">${state.nodes.length} node(s)</span></h2>
    ${cards ? `<div class="grid cards">${cards}</div>` : `<p class="empty">The runtime lists no node.</p>`}</div>`;
}

// The server's node(s) this flavor's labels and taints fit, with their GPUs; or why not.
function flavorNodes(f) {
  if (!f.nodes || !f.nodes.length) return `<span class="muted small">no node inventory</span>`;
  return f.nodes.map((n) => {
    const head = `${n.matches ? badge("matches", "Admitted") : badge("no match", "Inactive")} <b>${h(n.name)}</b>`;
    if (!n.matches) return `<div class="node-match no" data-node="${h(n.name)}" data-matches="false">${head}<div class="small muted">${h(n.reason)}</div></div>`;
    const models = [...new Set(n.gpus.map((g) => g.model))].join(", ");
    const gpus = n.gpus.map((g) => `<li><span class="idx">GPU ${h(g.index)}</span><span class="mono muted" title="${h(g.model)}">${h(g.uuid)}</span></li>`).join("");
    return `<div class="node-match ok" data-node="${h(n.name)}" data-matches="true">${head}
      <span class="muted small">${n.gpus.length ? `${n.gpus.length} × ${h(models)}` : "no GPUs"}</span>
      ${gpus ? `<ul class="node-gpus">${gpus}</ul>` : ""}</div>`;
  }).join("");
}

function flavorGpus(s, f, gpusBy) {
  if (!f.resources.includes("nvidia.com/gpu")) return `<span class="muted">no GPU quota</span>`;
  if (s.gpus.source === "quota") {
    const n = (gpusBy[f.name] || []).length;
    return `${n} in use <span class="muted small">(implied by quota; node telemetry not wired)</span>`;
  }
  const nodes = Object.entries(gpusBy).map(([node, gs]) => `<span class="chip">${h(node)}: ${gs.filter((g) => g.workload).length} / ${gs.length} held</span>`);
  return nodes.join("") || `<span class="muted">no GPUs reported</span>`;
}

function renderGpus(s) {
  const g = s.gpus;
  const byNode = {};
  for (const x of g.gpus) (byNode[x.node] ||= []).push(x);
  const wl = new Map(s.workloads.map((w) => [w.key, w]));
  const metric = (label, v, unit = "") => (v === null || v === undefined ? "" : `<div class="small muted">${label} ${h(v)}${unit}</div>`);
  const nodes = Object.entries(byNode).map(([node, gpus]) => `<div class="card section"><h2>${g.source === "quota" ? "flavor" : "node"} ${h(node)} <span class="muted small">${gpus.length} GPU(s)</span></h2><div class="gpu-grid">
    ${gpus.map((x) => {
      const holder = x.workload ? (wl.has(x.workload) ? wlLink(x.workload) : h(x.workload)) : `<span class="muted">free</span>`;
      const st = x.workload ? (wl.get(x.workload)?.state || x.state || "Admitted") : "free";
      return `<div class="gpu ${h(st)}" data-key="${h(x.workload || "")}" data-state="${h(st)}"><div class="idx">GPU ${h(x.index)} ${x.model ? `<span class="muted small">${h(x.model)}</span>` : ""}</div>
        <div class="holder">${holder}</div>${metric("util", x.utilization, "%")}${metric("memory", x.memoryUsed)}${metric("power", x.power, " W")}</div>`;
    }).join("")}</div></div>`).join("");
  return `<div class="page-head"><h1>GPUs</h1><span class="muted">${s.totals.gpusInUse} in use · ${s.totals.gpuQuota} in nominal quota</span></div>
    ${g.note ? `<div class="note">${h(g.note)}</div>` : ""}
    ${nodes || `<div class="card"><p class="empty">No GPU is held by an admitted workload you can see.</p></div>`}
    ${nodeSection(s, "Every node's GPUs and the pod holding each")}`;
}

// ---------------------------------------------------------------- boot
$("#login-form").addEventListener("submit", (e) => { e.preventDefault(); login($("#token").value.trim()); });
$("#logout").addEventListener("click", () => logout());
bindWorkloadToolbar();
window.addEventListener("hashchange", () => {
  if (route().page !== "workload") state.detail = null;
  state.changed = new Set(); state.freshEvents = new Set(); render();
});
setInterval(() => { if (state.banner && Date.now() > state.banner.until) renderBanner(); }, 1000);
// pods start and stop between summary pushes: the node pages ask for the nodes again meanwhile
setInterval(() => { if (state.summary && ["flavors", "gpus"].includes(route().page)) loadNodes(); }, 2000);
if (state.token) login(state.token); else showLogin();
