"""``gpuaas get``, ``describe`` and ``version``: reading objects as kubectl reads them.

``get`` asks the server for its ``meta.k8s.io/v1 Table`` (Kueue's printer columns, kube-apiserver's
for Job, Pod, Node, Namespace, Event) and prints it as kubectl does: the priority-0 columns, all
of them with ``-o wide``, a NAMESPACE column first with ``-A``, ``kind.group/name`` names when
several kinds are asked for (``get cq,lq``). So the columns live in one place, the server
(``api.tables``). ``-l`` and ``--field-selector`` are the server's selectors; ``-o
name|yaml|json|jsonpath=TEMPLATE`` print the objects themselves. ``describe KIND`` without a
name describes every object of the kind. ``version`` prints this client's version and the
server's. Errors print as kubectl prints them and exit 1.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator
from typing import Annotated, Any

import typer
import yaml

from gpuaas import __version__
from gpuaas.api.tables import TABLE_MEDIA, jsonpath
from gpuaas.cli import printers
from gpuaas.cli.client import Client, ClientError, object_path
from gpuaas.cli.kubectl import AllNs, Namespace, client_for_command, fail, kind_named, namespace_for
from gpuaas.cli.telemetry import get_hoarding
from gpuaas.vocab.kinds import Kind

JsonDoc = dict[str, Any]

Output = Annotated[
    str | None,
    typer.Option("--output", "-o", help="wide, yaml, json, name or jsonpath=TEMPLATE."),
]
Selector = Annotated[
    str | None, typer.Option("--selector", "-l", help="Label selector (a=b,c!=d,e in (f))")
]
FieldSelector = Annotated[
    str | None,
    typer.Option("--field-selector", help="Field selector (metadata.name=x, status.phase=...)"),
]


def _params(selector: str | None, field_selector: str | None, name: str | None) -> JsonDoc:
    params: JsonDoc = {}
    if selector:
        params["labelSelector"] = selector
    fields = [f for f in (field_selector, f"metadata.name={name}" if name else None) if f]
    if fields:
        params["fieldSelector"] = ",".join(fields)
    return params


def ref(kind: Kind, name: str) -> str:
    """kubectl's ``-o name``: ``clusterqueue.kueue.x-k8s.io/x``, ``job.batch/x``, ``pod/x``."""
    return f"{kind.kind.lower()}{'.' + kind.group if kind.group else ''}/{name}"


_TEMPLATE = re.compile(r"\{([^{}]*)\}")


def render_jsonpath(template: str, doc: JsonDoc) -> str:
    """kubectl's ``-o jsonpath=``: ``{...}`` expressions replaced by their values, several
    values joined by spaces; the text between them kept as written."""

    def value(m: re.Match[str]) -> str:
        expr = m.group(1).strip()
        if expr in ("", "."):
            return json.dumps(doc)
        found = jsonpath(doc, expr if expr.startswith((".", "[")) else f".{expr}")
        return " ".join(v if isinstance(v, str) else json.dumps(v) for v in found)

    text = _TEMPLATE.sub(value, template)
    return text.encode().decode("unicode_escape") if "\\" in text else text


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def table_lines(
    table: JsonDoc, *, wide: bool, all_ns: bool, kind: Kind | None = None
) -> list[list[str]]:
    """The header and rows kubectl prints for a server Table (``kind``: names as
    ``kind.group/name``, as kubectl prints them when several kinds are asked for)."""
    defs = table.get("columnDefinitions") or []
    shown = [i for i, c in enumerate(defs) if wide or int(c.get("priority", 0)) == 0]
    head = [str(defs[i]["name"]).upper() for i in shown]
    out = [["NAMESPACE", *head] if all_ns else head]
    for row in table.get("rows") or []:
        cells = row.get("cells") or []
        line = [_cell(cells[i]) if i < len(cells) else "" for i in shown]
        if kind is not None and shown and defs[shown[0]].get("format") == "name":
            line[0] = ref(kind, line[0])
        if all_ns:
            meta = (row.get("object") or {}).get("metadata") or {}
            line.insert(0, str(meta.get("namespace", "")))
        out.append(line)
    return out


def _list(client: Client, kind: Kind, ns: str | None, params: JsonDoc, table: bool) -> JsonDoc:
    headers = {"Accept": f"{TABLE_MEDIA}, application/json"} if table else {}
    return client.request("GET", object_path(kind, ns), params=params, headers=headers)


def get(
    kinds: Annotated[
        str, typer.Argument(metavar="KIND[,KIND...]", help="Kinds or short names (wl, cq,lq...).")
    ],
    names: Annotated[list[str] | None, typer.Argument(metavar="[NAME...]")] = None,
    namespace: Namespace = None,
    all_namespaces: AllNs = False,
    output: Output = None,
    selector: Selector = None,
    field_selector: FieldSelector = None,
    watch: Annotated[bool, typer.Option("--watch", "-w", help="Stream changes.")] = False,
) -> None:
    """List objects, or show some, with the server's printer columns (``get hoarding``:
    offenders)."""
    if kinds.lower() == "hoarding":
        return get_hoarding(output)
    wanted = [kind_named(k) for k in kinds.split(",") if k]
    if output not in (None, "wide", "yaml", "json", "name") and not (output or "").startswith(
        "jsonpath="
    ):
        raise fail(
            f"error: unknown output format {output!r}: use wide, yaml, json, name or jsonpath="
        )
    client = client_for_command()
    if watch:
        if len(wanted) != 1:
            raise fail("error: you may only watch one kind at a time")
        kind = wanted[0]
        all_ns = all_namespaces and kind.namespaced
        ns = None if all_ns else namespace_for(kind, namespace)
        name = names[0] if names else None
        return _watch(client, kind, ns, _params(selector, field_selector, name), all_ns, output)
    several = len(wanted) > 1
    blocks: list[list[list[str]]] = []
    items: list[JsonDoc] = []
    for kind in wanted:
        all_ns = all_namespaces and kind.namespaced and not names
        ns = None if all_ns else namespace_for(kind, namespace)
        as_table = output in (None, "wide")
        for name in names or [None]:  # type: ignore[list-item]
            try:
                found = _list(client, kind, ns, _params(selector, field_selector, name), as_table)
            except ClientError as exc:
                raise fail(str(exc)) from exc
            if name and not (found.get("rows") if as_table else found.get("items")):
                where = kind.plural + (f".{kind.group}" if kind.group else "")
                raise fail(f'Error from server (NotFound): {where} "{name}" not found')
            if as_table:
                lines = table_lines(found, wide=output == "wide", all_ns=all_ns,
                                    kind=kind if several else None)  # fmt: skip
                if len(lines) > 1:
                    if blocks and blocks[-1][0] == lines[0]:
                        blocks[-1] += lines[1:]
                    else:
                        blocks.append(lines)
            else:
                items += [_with_kind(kind, d) for d in found.get("items") or []]
    _print(blocks, items, output, wanted, namespace if not all_namespaces else None, names)


def _with_kind(kind: Kind, doc: JsonDoc) -> JsonDoc:
    return {"apiVersion": kind.api_version, "kind": kind.kind, **doc}


def _print(
    blocks: list[list[list[str]]],
    items: list[JsonDoc],
    output: str | None,
    kinds: list[Kind],
    namespace: str | None,
    names: list[str] | None,
) -> None:
    if output in (None, "wide"):
        if not blocks:
            where = f" in {namespace} namespace" if namespace else ""
            typer.echo(f"No resources found{where}.", err=True)
            return
        typer.echo("\n\n".join(printers.table(b[0], b[1:]) for b in blocks))
        return
    if output == "name":
        by_kind = {k.kind: k for k in kinds}
        for d in items:
            typer.echo(ref(by_kind[d["kind"]], d["metadata"]["name"]))
        return
    single = names is not None and len(names) == 1 and len(items) == 1 and len(kinds) == 1
    doc: JsonDoc = (
        items[0] if single else {"apiVersion": "v1", "kind": "List", "metadata": {}, "items": items}
    )
    if output and output.startswith("jsonpath="):
        typer.echo(render_jsonpath(output.removeprefix("jsonpath="), doc))
        return
    typer.echo(_dump(doc, output or "yaml"))


def _dump(doc: JsonDoc, output: str) -> str:
    if output == "json":
        return json.dumps(doc, indent=2)
    return yaml.safe_dump(doc, sort_keys=False).rstrip()


def _events(client: Client, kind: Kind, ns: str | None, params: JsonDoc) -> Iterator[JsonDoc]:
    headers = {"Accept": f"{TABLE_MEDIA}, application/json"}
    yield from client.watch_path(object_path(kind, ns), params, headers)


def _watch(
    client: Client, kind: Kind, ns: str | None, params: JsonDoc, all_ns: bool, output: str | None
) -> None:
    printed_head = False
    widths: list[int] = []
    try:
        for event in _events(client, kind, ns, params):
            obj = event.get("object") or {}
            if event.get("type") in ("BOOKMARK", "ERROR"):
                if event.get("type") == "ERROR":
                    raise fail(f"Error from server: {obj.get('message', '')}")
                continue
            if output not in (None, "wide"):
                rows = obj.get("rows") or []
                doc = (rows[0].get("object") if rows else None) or obj
                typer.echo(_dump(doc, output or "yaml") + ("\n---" if output == "yaml" else ""))
                continue
            lines = table_lines(obj, wide=output == "wide", all_ns=all_ns)
            if not widths:
                widths = [max(len(h), 12) for h in lines[0]]
                widths[1 if all_ns else 0] = max(widths[1 if all_ns else 0], 24)
            text = printers.table(lines[0], lines[1:], widths).splitlines()
            if not printed_head:
                typer.echo(text[0])
                printed_head = True
            for line in text[1:]:
                typer.echo(line)
            sys.stdout.flush()
    except ClientError as exc:
        raise fail(str(exc)) from exc
    except KeyboardInterrupt:
        return


def describe(
    kind_name: Annotated[str, typer.Argument(metavar="KIND")],
    name: Annotated[str | None, typer.Argument(metavar="[NAME]")] = None,
    namespace: Namespace = None,
    all_namespaces: AllNs = False,
    selector: Selector = None,
) -> None:
    """Show an object (every object of KIND without NAME) with its conditions and events."""
    kind = kind_named(kind_name)
    all_ns = all_namespaces and kind.namespaced and name is None
    ns = None if all_ns else namespace_for(kind, namespace)
    client = client_for_command()
    out = []
    try:
        if name:
            docs = [client.get(kind, ns, name)]
        else:
            docs = (
                client.request(
                    "GET", object_path(kind, ns), params=_params(selector, None, None)
                ).get("items")
                or []
            )
        for doc in docs:
            meta = doc.get("metadata") or {}
            where = meta.get("namespace")
            events = client.events(where, kind.kind, meta.get("name", ""))
            if kind.job:
                seen = {e["metadata"]["name"] for e in events}
                events += [
                    e
                    for e in client.events(where, "Workload", meta.get("name", ""))
                    if e["metadata"]["name"] not in seen
                ]
                events.sort(key=lambda e: int(e["metadata"].get("resourceVersion", 0)))
            out.append(printers.describe(_with_kind(kind, doc), events))
    except ClientError as exc:
        raise fail(str(exc)) from exc
    if not out:
        where = f" in {ns} namespace" if ns else ""
        typer.echo(f"No resources found{where}.", err=True)
        return
    typer.echo("\n\n\n".join(out))


def version() -> None:
    """This client's version and the server's (its Kubernetes API level and gpuaas version)."""
    typer.echo(f"Client Version: gpuaas {__version__}")
    client = client_for_command()
    try:
        info = client.request("GET", "/version")
    except ClientError as exc:
        raise fail(str(exc)) from exc
    typer.echo(f"Server Version: {info.get('gitVersion', '')}")


COMMANDS: list[tuple[str, Callable[..., None]]] = [
    ("get", get),
    ("describe", describe),
    ("version", version),
]
