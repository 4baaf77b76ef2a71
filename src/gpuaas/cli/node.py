"""``gpuaas node list``: the nodes pods run on, their labels, GPUs, and who holds the GPUs.

One line per node (the local runtime's one node, or every node of the Ray cluster): name, status,
GPUs in use of the total and the model, CPUs, memory, labels (Kubernetes' default ``ray.io/`` and
hostname labels left out), taints, and the pods holding GPUs with their GPU ids. ``-o json``
prints the API's NodeList. It reads ``GET /apis/gpuaas.dev/v1alpha1/nodes`` only.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from gpuaas.cli.client import Client, ClientError, load_config

GPUAAS = "/apis/gpuaas.dev/v1alpha1"
_HIDDEN_LABELS = ("ray.io/", "kubernetes.io/hostname")

app = typer.Typer(help="Nodes: where pods run (the Ray cluster's, or this server's).")


@app.command("list")
def list_nodes(
    output: Annotated[str, typer.Option("--output", "-o", help="table or json.")] = "table",
) -> None:
    """List the nodes, their labels and GPUs, and the pods holding the GPUs."""
    try:
        client = Client(load_config(), timeout=30.0)
        try:
            doc = client.request("GET", f"{GPUAAS}/nodes")
        finally:
            client.close()
    except ClientError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from exc
    items: list[dict[str, Any]] = list(doc.get("items", []))
    if output == "json":
        typer.echo(json.dumps(doc, indent=2, sort_keys=True))
        return
    typer.echo(table(items))


def table(items: list[dict[str, Any]]) -> str:
    rows = [["NAME", "STATUS", "GPUS", "MODEL", "CPUS", "MEMORY", "LABELS", "TAINTS", "GPU PODS"]]
    for item in items:
        cap = item.get("capacity", {})
        used = item.get("gpusInUse") or {}
        in_use = sum(len(ids) for ids in used.values())
        labels = ",".join(
            f"{k}={v}"
            for k, v in sorted((item.get("labels") or {}).items())
            if not k.startswith(_HIDDEN_LABELS)
        )
        taints = ",".join(
            f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t['effect']}"
            for t in item.get("taints") or []
        )
        pods = " ".join(f"{pod}[{','.join(ids)}]" for pod, ids in sorted(used.items()))
        model = item.get("gpuModel") or next(
            (g.get("model") for g in item.get("gpus") or [] if g.get("model")), ""
        )
        cpus = cap.get("cpu", 0)
        cpus = cpus / 1000 if "gpus" in item else cpus  # the local node counts millicores
        rows.append(
            [
                str(item.get("name", "")),
                "Ready" if item.get("alive", True) else "NotReady",
                f"{in_use}/{cap.get('nvidia.com/gpu', 0)}",
                model or "-",
                f"{cpus:g}",
                f"{int(cap.get('memory', 0)) / 2**30:.1f}Gi",
                labels or "-",
                taints or "-",
                pods or "-",
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )
