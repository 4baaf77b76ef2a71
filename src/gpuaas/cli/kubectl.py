"""kubectl-like commands against a running server: apply, delete, explain, login (and, from
``cli.reading``, get, describe and version).

Each command resolves kinds and short names through ``vocab.kinds``, talks to the server through
``cli.client`` and prints through ``cli.printers``. Errors print as kubectl does ("Error from
server (Forbidden): ...") and exit 1, never with a traceback. ``register(app)`` adds the commands
to the root ``gpuaas`` app.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from gpuaas.cli import printers, token
from gpuaas.cli.client import Client, ClientError, Config, load_config, save_config
from gpuaas.vocab.kinds import Kind, for_api_version, lookup

JsonDoc = dict[str, Any]

Namespace = Annotated[str | None, typer.Option("--namespace", "-n", help="Namespace.")]
AllNs = Annotated[bool, typer.Option("--all-namespaces", "-A", help="Every namespace.")]


def _fail(message: str) -> typer.Exit:
    typer.echo(message, err=True)
    return typer.Exit(1)


_open: list[Client] = []


def _client() -> Client:
    """A client for this command; ``_closing`` closes it when the command returns."""
    try:
        client = Client(load_config())
    except ClientError as exc:
        raise _fail(f"error: {exc}") from exc
    _open.append(client)
    return client


def _closing(fn: Callable[..., None]) -> Callable[..., None]:
    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        finally:
            while _open:
                _open.pop().close()

    return run


def _kind(name: str) -> Kind:
    k = lookup(name)
    if k is None:
        raise _fail(f'error: the server doesn\'t have a resource type "{name}"')
    return k


def _ns(kind: Kind, namespace: str | None) -> str | None:
    if not kind.namespaced:
        return None
    return namespace or load_config().namespace or "default"


def _documents(path: str) -> Iterator[tuple[str, JsonDoc]]:
    """(source, doc) for every document in FILE, every *.yaml/*.yml/*.json in DIR, or stdin."""
    if path == "-":
        sources = [("<stdin>", sys.stdin.read())]
    else:
        p = Path(path)
        if p.is_dir():
            files = sorted(
                f for f in p.rglob("*") if f.suffix in (".yaml", ".yml", ".json") and f.is_file()
            )
        elif p.exists():
            files = [p]
        else:
            raise _fail(f'error: the path "{path}" does not exist')
        sources = [(str(f), f.read_text()) for f in files]
    for src, text in sources:
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            raise _fail(f"error: {src}: not valid YAML: {exc}") from exc
        for doc in docs:
            if doc is None:
                continue
            if not isinstance(doc, dict):
                raise _fail(f"error: {src}: a document must be an object")
            if doc.get("kind") == "Scenario" and str(doc.get("apiVersion", "")).startswith(
                "gpuaas.dev/"
            ):
                # examples/ keep a scenario beside their manifests: it is not an API object
                typer.echo(
                    f"note: {src}: a Scenario, skipped (run it: gpuaas scenario run)", err=True
                )
                continue
            if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
                for item in doc["items"]:
                    yield src, item
            else:
                yield src, doc


Files = Annotated[
    list[str],
    typer.Option("--filename", "-f", help="FILE, DIR or - (stdin); repeat for several."),
]


def _all_documents(filenames: list[str]) -> Iterator[tuple[str, JsonDoc]]:
    """Every document of every ``-f``, in the order given (kubectl reads them so)."""
    for filename in filenames:
        yield from _documents(filename)


def apply(filename: Files, namespace: Namespace = None) -> None:
    """Create or update every object in the given manifests (multi-document YAML or JSON)."""
    client = _client()
    failed = False
    for src, doc in _all_documents(filename):
        api_version, kind_name = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
        kind = for_api_version(api_version, kind_name)
        name = str((doc.get("metadata") or {}).get("name", ""))
        if kind is None:
            typer.echo(f'error: {src}: no kind "{kind_name}" in version "{api_version}"', err=True)
            failed = True
            continue
        ns = _ns(kind, (doc.get("metadata") or {}).get("namespace") or namespace)
        ref = f"{kind.kind.lower()}.{kind.group or 'core'}/{name}"
        try:
            try:
                made = client.create(kind, ns, doc)  # generateName: the server names it
                made_name = (made.get("metadata") or {}).get("name") or name
                typer.echo(f"{kind.kind.lower()}.{kind.group or 'core'}/{made_name} created")
            except ClientError as exc:
                if exc.status != 409 or not name:
                    raise
                current = client.get(kind, ns, name)
                if _same(current, doc):
                    typer.echo(f"{ref} unchanged")
                    continue
                client.replace(kind, ns, name, doc)
                typer.echo(f"{ref} configured")
        except ClientError as exc:
            typer.echo(f"{exc} ({src})", err=True)
            failed = True
    if failed:
        raise typer.Exit(1)


def _same(current: JsonDoc, desired: JsonDoc) -> bool:
    keys = set(desired) - {"metadata", "status", "apiVersion", "kind"}
    if any(current.get(k) != desired.get(k) for k in keys):
        return False
    cm, dm = current.get("metadata") or {}, desired.get("metadata") or {}
    return all(cm.get(k) == dm.get(k) for k in ("labels", "annotations") if k in dm)


def delete(
    kind_name: Annotated[str | None, typer.Argument(metavar="KIND")] = None,
    names: Annotated[list[str] | None, typer.Argument(metavar="NAME...")] = None,
    namespace: Namespace = None,
    filename: Annotated[
        list[str] | None,
        typer.Option("--filename", "-f", help="Delete the objects of FILE, DIR or - (stdin)."),
    ] = None,
) -> None:
    """Delete objects by name (KIND NAME...), or those in manifests (-f FILE...)."""
    targets: list[tuple[Kind, str | None, str]] = []
    if filename:
        if kind_name or names:
            raise _fail("error: give either KIND NAME... or -f FILE, not both")
        targets = _targets(filename, namespace)
    else:
        if not kind_name or not names:
            raise _fail("error: give KIND NAME... or -f FILE")
        kind = _kind(kind_name)
        targets = [(kind, _ns(kind, namespace), name) for name in names]
    client = _client()
    failed = False
    for kind, ns, name in targets:
        try:
            client.delete(kind, ns, name)
            typer.echo(f'{kind.kind.lower()}.{kind.group or "core"} "{name}" deleted')
        except ClientError as exc:
            typer.echo(str(exc), err=True)
            failed = True
    if failed:
        raise typer.Exit(1)


def _targets(filenames: list[str], namespace: str | None) -> list[tuple[Kind, str | None, str]]:
    """(kind, namespace, name) of every named object in the manifests, in their order."""
    out: list[tuple[Kind, str | None, str]] = []
    for src, doc in _all_documents(filenames):
        api_version, kind_name = str(doc.get("apiVersion", "")), str(doc.get("kind", ""))
        kind = for_api_version(api_version, kind_name)
        meta = doc.get("metadata") or {}
        name = str(meta.get("name", ""))
        if kind is None:
            raise _fail(f'error: {src}: no kind "{kind_name}" in version "{api_version}"')
        if not name:
            raise _fail(f"error: {src}: a {kind.kind} without metadata.name cannot be deleted")
        out.append((kind, _ns(kind, meta.get("namespace") or namespace), name))
    return out


def explain(
    kind_name: Annotated[str, typer.Argument(metavar="KIND", help="workload (or wl)")],
    name: Annotated[str, typer.Argument(metavar="NAME")],
    namespace: Namespace = None,
) -> None:
    """Why a workload is pending, its position in its queue, and what would have to change."""
    kind = _kind(kind_name)
    if kind.kind != "Workload" and not kind.job:
        raise _fail("error: explain works on workloads (and jobs, through their workload)")
    ns = _ns(kind, namespace) or "default"
    client = _client()
    try:
        info = client.explain(ns, name)
    except ClientError as exc:
        raise _fail(str(exc)) from exc
    lines = [
        f"Workload:       {info['workload']}",
        f"Phase:          {info['phase']}",
        f"Priority:       {info['priority']}",
        f"LocalQueue:     {info['queue']}",
        f"ClusterQueue:   {info.get('clusterQueue') or '<none>'}",
        f"Requests:       {', '.join(f'{k}={v}' for k, v in info['requests'].items())}",
        f"Why:            {info['reason']}",
    ]
    if info.get("position"):
        lines.append(f"Position:       {info['position']} of {info['queueLength']}")
        if info["ahead"]:
            lines.append(f"Ahead of it:    {', '.join(info['ahead'])}")
    if info.get("admissionChecks"):
        checks = [
            f"{c['name']}={c['state']}" + (f" ({c['message']})" if c.get("message") else "")
            for c in info["admissionChecks"]
        ]
        lines.append(f"Checks:         {', '.join(checks)}")
    for p in info.get("placements") or []:
        lines.append(f"Placement:      {p['placement']} (check {p['check']}): " + (
            f"{p['reason']}: {p['message']}; chosen: {', '.join(p['decisions']) or '<none>'}"
            if p.get("found") else "not found"))  # fmt: skip
        for cluster, why in (p.get("excluded") or {}).items():
            lines.append(f"  not {cluster}: {why}")
        if p.get("scores"):
            scores = ", ".join(f"{c}={v}" for c, v in p["scores"].items())
            lines.append(f"  scores: {scores}")
        lines.append(f"  {p['note']}")
    if info.get("clusterName"):
        lines.append(f"Runs on:        worker cluster {info['clusterName']} (MultiKueue)")
    elif info.get("nominatedClusterNames"):
        lines.append(f"Nominated:      {', '.join(info['nominatedClusterNames'])} (MultiKueue)")
    if info.get("quota"):
        head = ["FLAVOR", "RESOURCE", "REQUESTED", "NOMINAL", "USED", "FREE"]
        body = [
            [q["flavor"], q["resource"], q["requested"], q["nominal"], q["used"], q["free"]]
            for q in info["quota"]
        ]
        lines += ["Quota:"] + ["  " + ln for ln in printers.table(head, body).splitlines()]
    if info.get("suggestions"):
        lines += ["What would have to change:"] + [f"  - {s}" for s in info["suggestions"]]
    typer.echo("\n".join(lines))


def login(
    server: Annotated[str, typer.Argument(metavar="SERVER", help="https://host:port")],
    token: Annotated[str, typer.Option("--token", help="API token.")],
    ca: Annotated[str | None, typer.Option("--ca", help="CA certificate (PEM) to trust.")] = None,
    insecure: Annotated[bool, typer.Option("--insecure", help="Skip TLS verification.")] = False,
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="Default namespace.")] = (
        "default"
    ),
) -> None:
    """Remember the server and token (file mode 0600) for later commands."""
    cfg = Config(server=server, token=token, ca=ca, insecure=insecure, namespace=namespace)
    client = Client(cfg)
    try:
        client.request("GET", "/apis/gpuaas.dev/v1alpha1/clusterqueuestatus")
    except ClientError as exc:
        raise _fail(f"login failed: {exc}") from exc
    finally:
        client.close()
    typer.echo(f"logged in to {server}; configuration written to {save_config(cfg)}")


COMMANDS: list[tuple[str, Callable[..., None]]] = [
    ("apply", apply),
    ("delete", delete),
    ("explain", explain),
    ("login", login),
]


# Shared with ``cli.reading`` (get, describe, version), which prints through the server's Tables.
fail = _fail
client_for_command = _client
kind_named = _kind
namespace_for = _ns


def register(app: typer.Typer) -> None:
    """Add apply, delete, explain and login, and ``cli.reading``'s get, describe and version,
    to the root app."""
    from gpuaas.cli import reading  # it reads this module's helpers: imported once both exist

    for name, fn in COMMANDS + reading.COMMANDS:
        app.command(name)(_closing(fn))


def build_app() -> typer.Typer:
    """A stand-alone app with these commands (tests and ``python -m gpuaas.cli.kubectl``)."""
    app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
    register(app)
    app.add_typer(token.app, name="token", help="Create API tokens.")
    return app


if __name__ == "__main__":
    build_app()()
