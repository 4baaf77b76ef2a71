// Clusters: a MultiKueue hub's workers as OCM sees them, over the Kubernetes API (admin only).
// Each worker's MultiKueueCluster (Active or why not), its ManagedCluster (labels, GPU model and
// free GPUs from the hub's live reading, in its ClusterClaims), its AddOnPlacementScores
// (resource-usage-score/gpuClusterAvailable, gpuaas-gpu-score/gpuClusterIdle), the
// MultiKueueConfigs that list it, and the hub's workloads running there (status.clusterName);
// then each Placement: satisfied or why not, and the clusters it chose.

const KUEUE = "/apis/kueue.x-k8s.io/v1beta2";
const OCM = "/apis/cluster.open-cluster-management.io";

export function clusterPages(ctx) {
  const { h, badge } = ctx;
  const cache = { data: null, at: 0, loading: false, error: "" };

  async function get(path) {
    const r = await fetch(path, { headers: { Authorization: `Bearer ${ctx.token()}` } });
    const doc = await r.json().catch(() => ({}));
    if (!r.ok) throw new Error(doc.message || `${r.status} ${r.statusText}`);
    return doc.items || [];
  }
  async function refresh() {
    if (cache.loading) return;
    cache.loading = true;
    try {
      const [mk, mc, scores, configs, placements, workloads] = await Promise.all([
        get(`${KUEUE}/multikueueclusters`), get(`${OCM}/v1/managedclusters`),
        get(`${OCM}/v1alpha1/addonplacementscores`), get(`${KUEUE}/multikueueconfigs`),
        get(`${OCM}/v1beta1/placements`), get(`${KUEUE}/workloads`),
      ]);
      cache.data = { mk, mc, scores, configs, placements, workloads };
      cache.error = "";
    } catch (e) {
      cache.error = e.message;
    } finally {
      cache.at = Date.now();
      cache.loading = false;
      ctx.rerender();
    }
  }
  setInterval(() => { if (ctx.page() === "clusters") refresh(); }, 1000);

  const cond = (doc, type) => ((doc.status || {}).conditions || []).find((c) => c.type === type) || {};
  const claim = (doc, name) => (((doc || {}).status || {}).clusterClaims || []).find((c) => c.name === name);

  function renderClusters() {
    if (!cache.data && !cache.error && Date.now() - cache.at > 700) setTimeout(refresh);
    if (cache.error) return `<div class="page-head"><h1>Clusters</h1></div><p class="error">${h(cache.error)}</p>`;
    if (!cache.data) return `<div class="page-head"><h1>Clusters</h1></div><p class="muted">loading…</p>`;
    const d = cache.data;
    const names = [...new Set([...d.mk, ...d.mc].map((o) => o.metadata.name))].sort();
    const score = (cluster, res, name) => {
      const s = d.scores.find((x) => x.metadata.namespace === cluster && x.metadata.name === res);
      const v = ((s && s.status && s.status.scores) || []).find((x) => x.name === name);
      return v ? String(v.value) : "–";
    };
    const rows = names.map((n) => {
      const mk = d.mk.find((o) => o.metadata.name === n);
      const mc = d.mc.find((o) => o.metadata.name === n);
      const active = mk ? cond(mk, "Active") : {};
      const labels = Object.entries((mc || mk || { metadata: {} }).metadata.labels || {}).map(([k, v]) => `${k}=${v}`);
      const inConfigs = d.configs.filter((c) => ((c.spec || {}).clusters || []).includes(n)).map((c) => c.metadata.name);
      const runs = d.workloads.filter((w) => (w.status || {}).clusterName === n).map((w) => `${w.metadata.namespace}/${w.metadata.name}`);
      const alloc = mc && mc.status && mc.status.allocatable ? mc.status.allocatable["nvidia.com/gpu"] : undefined;
      const free = claim(mc, "free-gpus.gpuaas.dev");
      const model = claim(mc, "gpu-model.gpuaas.dev");
      return `<tr data-cluster="${h(n)}"><td><b>${h(n)}</b></td>
        <td data-col="active">${mk ? badge(active.status === "True" ? "Active" : "Inactive") : "–"}<div class="small muted">${h(active.reason || "")}</div></td>
        <td class="small">${labels.map(h).join("<br>") || "–"}</td>
        <td>${h(model ? model.value : "–")}</td>
        <td data-col="gpus">${h(alloc === undefined ? "–" : alloc)}</td>
        <td data-col="free">${h(free ? free.value : "–")}</td>
        <td data-col="score">${h(score(n, "resource-usage-score", "gpuClusterAvailable"))}</td>
        <td data-col="idle">${h(score(n, "gpuaas-gpu-score", "gpuClusterIdle"))}</td>
        <td class="small" data-col="configs">${inConfigs.map(h).join(", ") || "–"}</td>
        <td class="small" data-col="runs">${runs.map(h).join("<br>") || "–"}</td></tr>`;
    });
    const prow = d.placements.map((p) => {
      const sat = cond(p, "PlacementSatisfied");
      const chosen = (p.status || {}).numberOfSelectedClusters;
      const cfg = d.configs.find((c) => c.metadata.name === p.metadata.name);
      return `<tr data-placement="${h(p.metadata.namespace)}/${h(p.metadata.name)}"><td>${h(p.metadata.namespace)}/<b>${h(p.metadata.name)}</b></td>
        <td>${badge(sat.status === "True" ? "Satisfied" : "Unsatisfied")} <span class="small muted">${h(sat.reason || "")}</span></td>
        <td>${h(chosen === undefined ? "–" : chosen)}</td>
        <td data-col="chosen">${cfg ? h(((cfg.spec || {}).clusters || []).join(", ")) : "<span class=\"muted\">no MultiKueueConfig</span>"}</td>
        <td class="small muted">${h(sat.message || "")}</td></tr>`;
    });
    return `<div class="page-head"><h1>Clusters</h1><p class="muted small">Worker clusters of this MultiKueue hub, their live GPUs and OCM placement scores, and what runs where.</p></div>
      <div class="card"><div class="table-wrap"><table id="clusters-table"><thead><tr><th>Cluster</th><th>Active</th><th>Labels</th><th>GPU model</th><th>GPUs</th><th>Free</th><th>gpuClusterAvailable</th><th>gpuClusterIdle</th><th>MultiKueueConfigs</th><th>Hub workloads there</th></tr></thead>
      <tbody>${rows.join("") || `<tr><td colspan="10" class="muted">No worker clusters: gpuaas cluster join adds one.</td></tr>`}</tbody></table></div></div>
      <h2>Placements</h2>
      <div class="card"><div class="table-wrap"><table id="placements-table"><thead><tr><th>Placement</th><th>Status</th><th>Selected</th><th>MultiKueueConfig</th><th>Why</th></tr></thead>
      <tbody>${prow.join("") || `<tr><td colspan="5" class="muted">No Placements.</td></tr>`}</tbody></table></div></div>`;
  }
  return { pages: { clusters: renderClusters } };
}
