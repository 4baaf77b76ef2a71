// Workbenches and hardware profiles: two dashboard pages over the Kubernetes API (kubeflow.org
// Notebooks, infrastructure.opendatahub.io HardwareProfiles). The "New workbench" form writes a
// Notebook as RHOAI's dashboard does: a hardware profile annotation and no resources (the profile
// webhook fills them in). Queue position and why come from the SSE summary's workload of the
// same name; readiness and the Open link from the Notebook's status (status.url).

const NB = "/apis/kubeflow.org/v1";
const HWP = "/apis/infrastructure.opendatahub.io/v1";
const NAME_ANN = "opendatahub.io/hardware-profile-name";
const NS_ANN = "opendatahub.io/hardware-profile-namespace";
const STOPPED = "kubeflow-resource-stopped";
const DISPLAY = "opendatahub.io/display-name";
const DEFAULT_IMAGE = "quay.io/modh/odh-pytorch-notebook:v3-2024b";

export function workbenchPages(ctx) {
  const { h, badge } = ctx;
  const cache = { notebooks: null, profiles: null, namespaces: null, at: 0, loading: false, error: "" };
  const form = { name: "", namespace: "", profile: "", image: DEFAULT_IMAGE, command: "", error: "", busy: false };

  async function call(method, path, body, contentType = "application/json") {
    const headers = { Authorization: `Bearer ${ctx.token()}` };
    if (body !== undefined) headers["Content-Type"] = contentType;
    const r = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const doc = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(doc.message || `${r.status} ${r.statusText}`);
    return doc;
  }

  async function refresh() {
    if (cache.loading) return;
    cache.loading = true;
    try {
      const p = ctx.principal(); // null while signing in: the namespaces come on a later refresh
      const nsList = cache.namespaces || !p ? null : p.admin ? call("GET", "/api/v1/namespaces") : { items: p.namespaces.map((n) => ({ metadata: { name: n } })) };
      const [nbs, hwps, nss] = await Promise.all([call("GET", `${NB}/notebooks`), call("GET", `${HWP}/hardwareprofiles`), nsList]);
      cache.notebooks = nbs.items || [];
      cache.profiles = hwps.items || [];
      if (nss) cache.namespaces = (nss.items || []).map((n) => n.metadata.name);
      cache.error = "";
    } catch (e) {
      cache.error = e.message;
    } finally {
      cache.at = Date.now();
      cache.loading = false;
      ctx.rerender();
    }
  }
  function maybeRefresh() {
    if (!cache.loading && Date.now() - cache.at > 700) setTimeout(refresh);
  }
  setInterval(() => { if (["workbenches", "hardwareprofiles"].includes(ctx.page())) refresh(); }, 2000);

  function profileLabel(p) {
    const ann = p.metadata.annotations || {};
    return ann[DISPLAY] || p.metadata.name;
  }
  function profileEnabled(p) {
    return ((p.metadata.annotations || {})["opendatahub.io/disabled"] || "false") !== "true";
  }

  function stateOf(nb, byKey) {
    const ann = nb.metadata.annotations || {};
    const st = nb.status || {};
    const w = byKey.get(`${nb.metadata.namespace}/${nb.metadata.name}`);
    if (STOPPED in ann) return { state: "Stopped", w };
    if (st.readyReplicas > 0) return { state: "Running", w };
    const cs = st.containerState || {};
    if (cs.waiting && cs.waiting.reason === "SchedulingGated") return { state: "Queued", w, why: cs.waiting.message };
    if (cs.terminated) return { state: "Finished", w, why: cs.terminated.message };
    if (cs.waiting) return { state: "Starting", w, why: cs.waiting.reason };
    return { state: w ? w.state : "Starting", w };
  }

  function renderWorkbenches(s) {
    maybeRefresh();
    const nbs = cache.notebooks;
    const profiles = (cache.profiles || []).filter(profileEnabled);
    const p = ctx.principal();
    const nss = cache.namespaces || (p && !p.admin ? [...p.namespaces] : []);
    if (!form.namespace && nss.length) form.namespace = nss[0];
    if (!form.profile && profiles.length) form.profile = `${profiles[0].metadata.namespace}/${profiles[0].metadata.name}`;
    const options = (items, selected) => items.map(([value, label]) => `<option value="${h(value)}" ${value === selected ? "selected" : ""}>${h(label)}</option>`).join("");
    const formHtml = `<form id="wb-form" class="card wb-form">
      <h2>New workbench</h2>
      <div class="form-grid">
        <label>Name <input id="wb-name" required pattern="[a-z0-9]([-a-z0-9]*[a-z0-9])?" value="${h(form.name)}" placeholder="my-workbench"></label>
        <label>Namespace <select id="wb-namespace">${options(nss.map((n) => [n, n]), form.namespace)}</select></label>
        <label>Hardware profile <select id="wb-profile">${options(profiles.map((p) => [`${p.metadata.namespace}/${p.metadata.name}`, `${profileLabel(p)} (${p.metadata.namespace})`]), form.profile)}</select></label>
        <label>Image <input id="wb-image" value="${h(form.image)}"></label>
        <label>Command <input id="wb-command" value="${h(form.command)}" placeholder="empty: JupyterLab"></label>
      </div>
      <p id="wb-error" class="error" ${form.error ? "" : "hidden"}>${h(form.error)}</p>
      <button type="submit" id="wb-create" ${form.busy ? "disabled" : ""}>Create workbench</button>
      ${profiles.length ? "" : `<p class="muted small">No hardware profile is visible to this token: an admin creates one in your namespace.</p>`}
    </form>`;
    let table;
    if (nbs === null) table = `<p class="empty">Loading workbenches…</p>`;
    else if (!nbs.length) table = `<p class="empty">No workbenches yet.</p>`;
    else {
      const byKey = new Map((s.workloads || []).map((w) => [w.key, w]));
      const rows = nbs.map((nb) => {
        const { state, w, why } = stateOf(nb, byKey);
        const ann = nb.metadata.annotations || {};
        const key = `${nb.metadata.namespace}/${nb.metadata.name}`;
        const url = (nb.status || {}).url;
        const open = state === "Running" && url ? `<a class="open" href="${h(url)}lab?token=${encodeURIComponent(ctx.token())}" target="_blank" rel="noopener">Open</a>` : "";
        const pos = w && w.position ? `${w.position} / ${w.queueLength}` : "—";
        const reason = state === "Queued" ? (w && w.whyPending) || why || "" : state === "Stopped" ? "stopped (kubeflow-resource-stopped)" : why || "";
        const toggle = state === "Stopped" ? `<button class="ghost" data-start="${h(key)}">Start</button>` : `<button class="ghost" data-stop="${h(key)}">Stop</button>`;
        return `<tr data-wb="${h(key)}" data-state="${h(state)}">
          <td class="nowrap">${h(nb.metadata.namespace)}</td><td class="nowrap"><b>${h(nb.metadata.name)}</b></td>
          <td class="nowrap">${h(ann[NAME_ANN] || "—")}</td>
          <td class="status">${badge(state, `wb-${state}`)}</td>
          <td class="num position">${pos}</td><td class="why">${h(reason)}</td>
          <td class="nowrap actions">${open} ${toggle} <button class="ghost" data-delete="${h(key)}">Delete</button></td></tr>`;
      }).join("");
      table = `<div class="table-wrap"><table id="workbenches"><thead><tr><th>Namespace</th><th>Name</th><th>Hardware profile</th><th>Status</th><th class="num">Position</th><th>Why</th><th></th></tr></thead><tbody>${rows}</tbody></table></div>`;
    }
    return `<div class="page-head"><h1>Workbenches</h1><span class="muted">${nbs ? nbs.length : 0} workbench(es)</span></div>
      ${cache.error ? `<div class="note error">${h(cache.error)}</div>` : ""}
      ${formHtml}<div class="card">${table}</div>`;
  }

  function readForm() {
    for (const f of ["name", "namespace", "profile", "image", "command"]) {
      const el = document.getElementById(`wb-${f}`);
      if (el) form[f] = el.value.trim();
    }
  }

  // Bound once, on the document, never on the rendered elements: the page is rendered again on
  // every live update and every refresh, and handlers set on the new elements after a render
  // (a timer later) left a moment in which a click on Stop, or Create (a native form submit),
  // found none and was lost.
  const patch = (key, value) => {
    const [ns, name] = key.split("/");
    return call("PATCH", `${NB}/namespaces/${ns}/notebooks/${name}`, { metadata: { annotations: { [STOPPED]: value } } }, "application/merge-patch+json");
  };
  const actions = {
    "data-stop": (key) => patch(key, new Date().toISOString()),
    "data-start": (key) => patch(key, null),
    "data-delete": (key) => {
      const [ns, name] = key.split("/");
      return call("DELETE", `${NB}/namespaces/${ns}/notebooks/${name}`);
    },
  };
  document.addEventListener("click", async (e) => {
    for (const [attr, fn] of Object.entries(actions)) {
      const b = e.target instanceof Element ? e.target.closest(`#workbenches [${attr}]`) : null;
      if (!b) continue;
      try { await fn(b.getAttribute(attr)); } catch (err) { cache.error = err.message; }
      await refresh();
      return;
    }
  });
  document.addEventListener("input", (e) => {
    if (e.target instanceof Element && e.target.closest("#wb-form")) readForm();
  });
  document.addEventListener("submit", async (e) => {
    if (!(e.target instanceof Element) || e.target.id !== "wb-form") return;
    e.preventDefault();
    readForm();
    const [pns, pname] = form.profile.split("/");
    const container = { name: form.name, image: form.image || DEFAULT_IMAGE };
    if (form.command) container.command = ["/bin/sh", "-c", form.command];
    const doc = {
      apiVersion: "kubeflow.org/v1", kind: "Notebook",
      metadata: { name: form.name, namespace: form.namespace, annotations: pname ? { [NAME_ANN]: pname, [NS_ANN]: pns } : {} },
      spec: { template: { spec: { containers: [container] } } },
    };
    form.busy = true; form.error = "";
    try {
      await call("POST", `${NB}/namespaces/${encodeURIComponent(form.namespace)}/notebooks`, doc);
      form.name = ""; form.command = "";
    } catch (err) {
      form.error = err.message;
    } finally {
      form.busy = false;
      await refresh();
    }
  });

  function countText(v) { return v === undefined || v === null ? "—" : String(v); }

  function renderProfiles(s) {
    maybeRefresh();
    const profiles = cache.profiles;
    let table;
    if (profiles === null) table = `<p class="empty">Loading hardware profiles…</p>`;
    else if (!profiles.length) table = `<p class="empty">No hardware profiles.</p>`;
    else {
      table = `<div class="table-wrap"><table id="hardwareprofiles"><thead><tr><th>Namespace</th><th>Name</th><th>Display name</th><th>Enabled</th><th>Identifiers (min / default / max)</th><th>Scheduling</th></tr></thead><tbody>${profiles.map((p) => {
        const spec = p.spec || {};
        const ids = (spec.identifiers || []).map((i) => `<span class="chip">${h(i.displayName || i.identifier)}: ${h(countText(i.minCount))} / ${h(countText(i.defaultCount))} / ${h(countText(i.maxCount))}</span>`).join("") || `<span class="muted">—</span>`;
        const sch = spec.scheduling || {};
        const where = sch.type === "Queue" ? `Queue → ${h(sch.kueue.localQueueName)}${sch.kueue.priorityClass ? ` (priority ${h(sch.kueue.priorityClass)})` : ""}` : sch.type === "Node" ? `Node ${h(JSON.stringify((sch.node || {}).nodeSelector || {}))}` : "—";
        return `<tr data-hwp="${h(p.metadata.namespace)}/${h(p.metadata.name)}"><td>${h(p.metadata.namespace)}</td><td><b>${h(p.metadata.name)}</b></td><td>${h(profileLabel(p))}</td><td>${profileEnabled(p) ? "yes" : "no"}</td><td>${ids}</td><td>${where}</td></tr>`;
      }).join("")}</tbody></table></div>`;
    }
    const admin = (ctx.principal() || {}).admin;
    return `<div class="page-head"><h1>Hardware profiles</h1><span class="muted">infrastructure.opendatahub.io/v1</span></div>
      ${admin ? "" : `<div class="note">Hardware profiles are managed by an admin; this token sees the ones in its namespaces.</div>`}
      ${cache.error ? `<div class="note error">${h(cache.error)}</div>` : ""}
      <div class="card">${table}</div>`;
  }

  // Fetched at sign-in, beside the summary, so the Workbenches page renders from memory.
  function prefetch() {
    if (cache.loading) return;
    cache.at = 0; // a second call after the summary fetches what needed the principal
    refresh();
  }
  return { pages: { workbenches: renderWorkbenches, hardwareprofiles: renderProfiles }, prefetch };
}
