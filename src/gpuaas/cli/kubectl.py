"""kubectl-like commands against a running server: apply, get, describe, delete, explain, login.

Each command resolves kinds and short names through ``vocab.kinds``, talks to the server through
``cli.client`` and prints through ``cli.printers``. Errors print as kubectl does ("Error from
server (Forbidden): ...") and exit 1, never with a traceback. ``register(app)`` adds the commands
to the root ``gpuaas`` app.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from gpuaas.cli import printers, token
from gpuaas.cli.client import Client, ClientError, Config, load_config, save_config
from gpuaas.cli.telemetry import get_hoarding
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
                client.create(kind, ns, doc)
                typer.echo(f"{ref} created")
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


def get(
    kind_name: Annotated[
        str, typer.Argument(metavar="KIND", help="Kind or short name (wl, cq...).")
    ],
    name: Annotated[str | None, typer.Argument(metavar="[NAME]")] = None,
    namespace: Namespace = None,
    all_namespaces: AllNs = False,
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="wide, yaml or json.")
    ] = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Stream changes.")] = False,
) -> None:
    """List objects, or show one, with Kueue's printer columns (``get hoarding``: offenders)."""
    if kind_name.lower() == "hoarding":
        return get_hoarding(output)
    kind = _kind(kind_name)
    if output not in (None, "wide", "yaml", "json"):
        raise _fail(f"error: unknown output format {output!r}: use wide, yaml or json")
    all_ns = all_namespaces and kind.namespaced and name is None
    ns = None if all_ns else _ns(kind, namespace)
    client = _client()
    wide = output == "wide"
    try:
        if watch:
            _watch(client, kind, ns, name, all_ns=all_ns, wide=wide, output=output)
            return
        if name:
            doc = client.get(kind, ns, name)
            docs = [doc]
        else:
            listing = client.list_objects(kind, ns)
            docs = listing.get("items", [])
            doc = listing
    except ClientError as exc:
        raise _fail(str(exc)) from exc
    if output in ("yaml", "json"):
        typer.echo(_dump(doc, output))
        return
    if not docs:
        where = f" in {ns} namespace" if ns else ""
        typer.echo(f"No resources found{where}.", err=True)
        return
    head = printers.header(kind, all_ns=all_ns, wide=wide)
    typer.echo(printers.table(head, printers.rows(kind, docs, all_ns=all_ns, wide=wide)))


def _dump(doc: JsonDoc, output: str) -> str:
    if output == "json":
        return json.dumps(doc, indent=2)
    return yaml.safe_dump(doc, sort_keys=False).rstrip()


def _watch(
    client: Client,
    kind: Kind,
    ns: str | None,
    name: str | None,
    *,
    all_ns: bool,
    wide: bool,
    output: str | None,
) -> None:
    head = printers.header(kind, all_ns=all_ns, wide=wide)
    widths = [max(len(h), 12) for h in head]
    widths[0 if not all_ns else 1] = max(widths[0 if not all_ns else 1], 24)
    printed_head = False
    try:
        for event in client.watch(kind, ns, name):
            obj = event.get("object") or {}
            if output in ("yaml", "json"):
                typer.echo(_dump(obj, output) + ("\n---" if output == "yaml" else ""))
                continue
            row = printers.rows(kind, [obj], all_ns=all_ns, wide=wide)[0]
            if event.get("type") == "DELETED":
                row[-1] = f"{row[-1]} (deleted)"
            text = printers.table(head, [row], widths).splitlines()
            if not printed_head:
                typer.echo(text[0])
                printed_head = True
            typer.echo(text[1])
            sys.stdout.flush()
    except ClientError as exc:
        raise _fail(str(exc)) from exc
    except KeyboardInterrupt:
        return


def describe(
    kind_name: Annotated[str, typer.Argument(metavar="KIND")],
    name: Annotated[str, typer.Argument(metavar="NAME")],
    namespace: Namespace = None,
) -> None:
    """Show an object with its conditions and its events (the audit trail)."""
    kind = _kind(kind_name)
    ns = _ns(kind, namespace)
    client = _client()
    try:
        doc = client.get(kind, ns, name)
        events = client.events(ns, kind.kind, name)
        if kind.job:
            seen = {e["metadata"]["name"] for e in events}
            events += [
                e for e in client.events(ns, "Workload", name) if e["metadata"]["name"] not in seen
            ]
            events.sort(key=lambda e: int(e["metadata"].get("resourceVersion", 0)))
    except ClientError as exc:
        raise _fail(str(exc)) from exc
    typer.echo(printers.describe(doc, events))


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
    ("get", get),
    ("describe", describe),
    ("delete", delete),
    ("explain", explain),
    ("login", login),
]


def register(app: typer.Typer) -> None:
    """Add apply, get, describe, delete, explain and login to the root app."""
    for name, fn in COMMANDS:
        app.command(name)(_closing(fn))


def build_app() -> typer.Typer:
    """A stand-alone app with these commands (tests and ``python -m gpuaas.cli.kubectl``)."""
    app = typer.Typer(no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
    register(app)
    app.add_typer(token.app, name="token", help="Create API tokens.")
    return app


if __name__ == "__main__":
    build_app()()
