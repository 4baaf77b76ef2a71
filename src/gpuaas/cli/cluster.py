"""``gpuaas cluster join`` and ``gpuaas cluster list``: worker clusters of a MultiKueue hub.

``join`` runs against a worker (``GPUAAS_SERVER``/``GPUAAS_TOKEN``, or the login file): it makes
a token on the worker scoped to the namespaces that have LocalQueues there (MultiKueue needs the
worker to mirror the hub's namespaces and LocalQueues), writes a kubeconfig for it, and on the hub
creates the Secret ``multikueue-NAME`` (key ``kubeconfig``, in Kueue's namespace) and the
``MultiKueueCluster NAME`` with the given labels, as the OCM add-on's secret-copy controller does,
and the OCM ``ManagedCluster NAME`` with the same labels (what Placements select on); with
``--scores`` (the default) also Secret ``placement-score-NAME``, with which the hub reads the
worker's GPUs for its placement scores; ``--config`` also adds NAME to that MultiKueueConfig. ``list`` reads the hub's MultiKueueClusters
and says for each whether it is Active, or why not. Only API calls; no engine.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from gpuaas.cli.client import Client, ClientError, Config, load_config, object_path
from gpuaas.vocab.kinds import BY_KIND, MULTIKUEUE_CLUSTER, MULTIKUEUE_CONFIG, SECRET
from gpuaas.vocab.multikueue import DEFAULT_NAMESPACE, SECRET_KEY

SCORE_SECRET = "placement-score-"  # engine.multikueue.scores reads Secret placement-score-NAME
app = typer.Typer(help="Worker clusters of a MultiKueue hub (cluster join, cluster list).")
JsonDoc = dict[str, Any]


def kubeconfig_for(name: str, server: str, token: str, ca_pem: bytes | None) -> str:
    """A kubeconfig Kueue accepts: token auth, the CA inline (never a file path)."""
    cluster: JsonDoc = {"server": server}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return yaml.safe_dump(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": name, "cluster": cluster}],
            "users": [{"name": f"{name}-multikueue", "user": {"token": token}}],
            "contexts": [
                {"name": name, "context": {"cluster": name, "user": f"{name}-multikueue"}}
            ],
            "current-context": name,
        },
        sort_keys=False,
    )


def managed_cluster(name: str, server: str, labels: dict[str, str]) -> JsonDoc:
    """The OCM ManagedCluster of a joined worker: its labels are what Placements select on."""
    return {
        "apiVersion": "cluster.open-cluster-management.io/v1",
        "kind": "ManagedCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {"hubAcceptsClient": True, "managedClusterClientConfigs": [{"url": server}]},
    }


def _labels(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, eq, value = pair.partition("=")
        if not eq or not key:
            raise typer.BadParameter(f"--label {pair!r}: expected key=value")
        out[key] = value
    return out


def _upsert(client: Client, kind_name: str, namespace: str | None, doc: JsonDoc) -> str:
    kind = BY_KIND[kind_name]
    name = doc["metadata"]["name"]
    try:
        client.create(kind, namespace, doc)
        return "created"
    except ClientError as exc:
        if exc.status != 409:
            raise
    client.replace(kind, namespace, name, doc)
    return "configured"


def _worker_namespaces(worker: Client) -> list[str]:
    lqs = worker.list_objects(BY_KIND["LocalQueue"], None).get("items") or []
    return sorted({str(q["metadata"]["namespace"]) for q in lqs})


@app.command("join")
def join(
    hub: Annotated[str, typer.Option("--hub", help="The hub's API URL.")],
    hub_token: Annotated[str, typer.Option("--hub-token", help="An admin token of the hub.")],
    name: Annotated[str, typer.Option("--name", help="This worker's name on the hub.")],
    label: Annotated[
        list[str] | None, typer.Option("--label", help="key=value on the MultiKueueCluster.")
    ] = None,
    hub_namespace: Annotated[
        str,
        typer.Option("--hub-namespace", help="The hub's Kueue namespace (kubeconfig Secrets)."),
    ] = DEFAULT_NAMESPACE,
    hub_ca: Annotated[
        Path | None, typer.Option("--hub-ca", help="CA file to trust the hub's certificate.")
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace",
            "-n",
            help="Namespaces the hub may dispatch to (default: those with LocalQueues here).",
        ),
    ] = None,
    config: Annotated[
        str | None,
        typer.Option("--config", help="Also add this worker to that MultiKueueConfig."),
    ] = None,
    scores: Annotated[
        bool,
        typer.Option(
            "--scores/--no-scores",
            help="Let the hub read this worker's nodes, pods and /metrics for its OCM "
            "placement scores, with the token this command runs with (it must be the worker's "
            "admin token).",
        ),
    ] = True,
) -> None:
    """Join the worker that GPUAAS_SERVER points at to the hub at --hub."""
    labels = _labels(label or [])
    try:
        worker_cfg = load_config()
        worker = Client(worker_cfg)
        hub_client = Client(Config(server=hub, token=hub_token, ca=str(hub_ca) if hub_ca else None))
        try:
            namespaces = list(namespace or []) or _worker_namespaces(worker)
            if not namespaces:
                raise ClientError(
                    0,
                    "",
                    "the worker has no LocalQueue: create the hub's namespaces and LocalQueues "
                    "here first (MultiKueue dispatches to the same queue names), or pass "
                    "--namespace",
                )
            if worker_cfg.insecure and worker_cfg.server.startswith("https"):
                raise ClientError(
                    0,
                    "",
                    "the worker is reached with GPUAAS_INSECURE=1; MultiKueue refuses a "
                    "kubeconfig without TLS verification: set GPUAAS_CA to the worker's CA",
                )
            token = worker.create_token(namespaces, f"multikueue-hub-{name}", False)["token"]
            ca_pem = Path(worker_cfg.ca).read_bytes() if worker_cfg.ca else None
            kubeconfig = kubeconfig_for(name, worker_cfg.server.rstrip("/"), token, ca_pem)
            secret_name = f"multikueue-{name}"
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": secret_name, "namespace": hub_namespace},
                "type": "Opaque",
                "data": {SECRET_KEY: base64.b64encode(kubeconfig.encode()).decode()},
            }
            said = _upsert(hub_client, SECRET.kind, hub_namespace, secret)
            typer.echo(f"secret/{secret_name} {said} in namespace {hub_namespace} (hub)")
            cluster = {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": MULTIKUEUE_CLUSTER.kind,
                "metadata": {"name": name, "labels": labels},
                "spec": {
                    "clusterSource": {
                        "kubeConfig": {"locationType": "Secret", "location": secret_name}
                    }
                },
            }
            said = _upsert(hub_client, MULTIKUEUE_CLUSTER.kind, None, cluster)
            typer.echo(f"multikueuecluster.kueue.x-k8s.io/{name} {said} (hub)")
            said = _upsert(hub_client, "ManagedCluster", None, managed_cluster(
                name, worker_cfg.server.rstrip("/"), labels))  # fmt: skip
            typer.echo(f"managedcluster.cluster.open-cluster-management.io/{name} {said} (hub)")
            if scores:
                reader = kubeconfig_for(name, worker_cfg.server.rstrip("/"), worker_cfg.token,
                                        ca_pem)  # fmt: skip
                score_secret = {**secret, "metadata": {"name": f"{SCORE_SECRET}{name}",
                                                       "namespace": hub_namespace},
                                "data": {SECRET_KEY: base64.b64encode(reader.encode()).decode()}}  # fmt: skip
                said = _upsert(hub_client, SECRET.kind, hub_namespace, score_secret)
                typer.echo(f"secret/{SCORE_SECRET}{name} {said} in namespace {hub_namespace} "
                           "(hub: reads this worker's GPUs for placement scores)")  # fmt: skip
            if config is not None:
                _add_to_config(hub_client, config, name)
                typer.echo(f"multikueueconfig.kueue.x-k8s.io/{config} lists {name} (hub)")
            typer.echo(f"the hub may dispatch to namespaces: {', '.join(namespaces)}")
        finally:
            worker.close()
            hub_client.close()
    except (ClientError, OSError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc


def _add_to_config(hub: Client, config: str, name: str) -> None:
    try:
        doc = hub.get(MULTIKUEUE_CONFIG, None, config)
    except ClientError as exc:
        if exc.status != 404:
            raise
        doc = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": MULTIKUEUE_CONFIG.kind,
            "metadata": {"name": config},
            "spec": {"clusters": [name]},
        }
        hub.create(MULTIKUEUE_CONFIG, None, doc)
        return
    clusters = list((doc.get("spec") or {}).get("clusters") or [])
    if name not in clusters:
        doc.setdefault("spec", {})["clusters"] = [*clusters, name]
        hub.request("PUT", object_path(MULTIKUEUE_CONFIG, None, config), json=doc)


def _active(doc: JsonDoc) -> tuple[str, str, str]:
    for c in (doc.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Active":
            return str(c.get("status")), str(c.get("reason", "")), str(c.get("message", ""))
    return "Unknown", "", "not checked yet"


@app.command("list")
def list_clusters(
    output: Annotated[str, typer.Option("--output", "-o", help="table or json.")] = "table",
) -> None:
    """The hub's worker clusters (GPUAAS_SERVER is the hub): Active, or why not."""
    try:
        client = Client(load_config())
        try:
            doc = client.list_objects(MULTIKUEUE_CLUSTER, None)
        finally:
            client.close()
    except ClientError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    items = list(doc.get("items") or [])
    if output == "json":
        typer.echo(json.dumps(doc, indent=2, sort_keys=True))
        return
    if not items:
        typer.echo("No worker clusters (gpuaas cluster join adds one).")
        return
    rows = [["NAME", "ACTIVE", "REASON", "LABELS", "MESSAGE"]]
    for item in items:
        status, reason, message = _active(item)
        labels = ",".join(
            f"{k}={v}" for k, v in sorted((item["metadata"].get("labels") or {}).items())
        )
        rows.append([item["metadata"]["name"], status, reason, labels or "<none>", message])
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    for r in rows:
        typer.echo(
            "   ".join(c.ljust(w) for c, w in zip(r[:4], widths, strict=True)) + "   " + r[4]
        )
