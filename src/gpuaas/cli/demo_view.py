"""What ``gpuaas demo`` shows: the live rich view, the plain headless lines, the asciinema cast.

This module owns turning a ``Snapshot`` (read from the API) into a screen: the ClusterQueues with
quota bars (nominal, used, borrowed), the workloads with their state and processes, and the latest
events; in headless mode only what changed, one line each; and an asciinema v2 recording of the
frames (a JSON header line, then ``[seconds, "o", text]`` lines). It reads no API and decides
nothing; ``cli.demo`` drives it.
"""

from __future__ import annotations

import io
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gpuaas.core.quantity import format_quantity

JsonDoc = dict[str, Any]
BAR = 24
_STATE_STYLE = {
    "Running": "bold green",
    "Admitted": "green",
    "Evicting": "bold red",
    "Pending": "yellow",
    "Finished": "blue",
}


@dataclass(slots=True)
class Snapshot:
    queues: list[JsonDoc] = field(default_factory=list)
    workloads: list[JsonDoc] = field(default_factory=list)
    pods: dict[str, JsonDoc] = field(default_factory=dict)  # namespace/name -> runtime entry
    events: list[JsonDoc] = field(default_factory=list)


def _cond(doc: JsonDoc, type_: str) -> JsonDoc | None:
    for c in (doc.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return dict(c)
    return None


def _true(doc: JsonDoc, type_: str) -> bool:
    c = _cond(doc, type_)
    return c is not None and c.get("status") == "True"


def workload_state(doc: JsonDoc, run: JsonDoc | None) -> tuple[str, str]:
    """(state, detail): the workload as a user would say it, with its processes."""
    pods = (run or {}).get("pods") or []
    procs = ", ".join(
        f"pid {p['pid']}" + (f" GPU {','.join(map(str, p['gpus']))}" if p.get("gpus") else "")
        for p in pods
    )
    if _true(doc, "Finished"):
        c = _cond(doc, "Finished") or {}
        return "Finished", str(c.get("reason", ""))
    if _true(doc, "Evicted") and not _true(doc, "Admitted"):
        if pods:
            return "Evicting", f"SIGTERM sent, waiting for {procs} to exit"
        c = _cond(doc, "QuotaReserved") or {}
        return "Pending", str(c.get("message", "requeued"))
    if _true(doc, "Admitted"):
        if pods and not (run or {}).get("stopping"):
            return "Running", procs
        return "Admitted", "starting pods"
    c = _cond(doc, "QuotaReserved") or {}
    return "Pending", str(c.get("message", ""))


def _bar(used: int, nominal: int, borrowed: int) -> Text:
    scale = max(used, nominal, 1)
    own = min(used, nominal)
    n_own = round(BAR * own / scale)
    n_borrow = round(BAR * borrowed / scale)
    n_free = max(0, round(BAR * nominal / scale) - n_own)
    text = Text()
    text.append("█" * n_own, style="green")
    text.append("█" * n_borrow, style="magenta")
    text.append("░" * n_free, style="grey50")
    text.append(" " * max(0, BAR - n_own - n_borrow - n_free))
    return text


def queues_table(snap: Snapshot) -> Table:
    table = Table(title="ClusterQueues (cohort team-ab)", expand=True, title_justify="left")
    for col in ("queue", "flavor/resource", "quota", "used", "nominal", "borrowed"):
        table.add_column(col, no_wrap=True)
    for q in snap.queues:
        for i, r in enumerate(q.get("resources") or []):
            used, nominal, borrowed = int(r["usage"]), int(r["nominal"]), int(r["borrowed"])
            shown = r.get("display") or {}
            table.add_row(
                q["name"] if i == 0 else "",
                f"{r['flavor']}/{r['resource']}",
                _bar(used, nominal, borrowed),
                str(shown.get("usage", used)),
                str(shown.get("nominal", nominal)),
                Text(format_quantity(borrowed, r["resource"]), style="magenta" if borrowed else ""),
            )
    return table


def workloads_table(snap: Snapshot) -> Table:
    table = Table(title="Workloads", expand=True, title_justify="left")
    for col in ("namespace/name", "priority", "queue", "state", "processes / why"):
        table.add_column(col, overflow="fold")
    for doc in sorted(snap.workloads, key=lambda d: d["metadata"].get("creationTimestamp", "")):
        meta = doc["metadata"]
        key = f"{meta.get('namespace')}/{meta['name']}"
        state, detail = workload_state(doc, snap.pods.get(key))
        spec = doc.get("spec") or {}
        table.add_row(
            key,
            str(spec.get("priorityClassName") or spec.get("priority") or ""),
            str(spec.get("queueName", "")),
            Text(state, style=_STATE_STYLE.get(state, "")),
            detail,
        )
    return table


def events_panel(snap: Snapshot, last: int = 8) -> Panel:
    text = Text()
    for e in snap.events[-last:]:
        style = "bold red" if e.get("reason", "").startswith(("Evicted", "Preempted")) else ""
        obj = e.get("involvedObject") or {}
        text.append(f"{e.get('reason', ''):<24}", style=style or "cyan")
        text.append(f"{obj.get('namespace', '')}/{obj.get('name', '')}: ")
        text.append(str(e.get("message", ""))[:150] + "\n")
    return Panel(text, title="Events (latest last)", title_align="left")


def screen(snap: Snapshot, caption: str, audit: str | None = None) -> RenderableType:
    parts: list[RenderableType] = [
        Panel(Text(caption, style="bold"), title="gpuaas demo 004", title_align="left"),
        queues_table(snap),
        workloads_table(snap),
    ]
    if audit is not None:
        lines = audit.splitlines()
        start = next((i for i, ln in enumerate(lines) if ln.startswith("Status:")), 0)
        body = "\n".join(lines[:2] + lines[start:])  # name, namespace, then conditions and events
        parts.append(Panel(Text(body), title="Audit trail (describe)", title_align="left"))
    else:
        parts.append(events_panel(snap))
    return Group(*parts)


def changes(prev: Snapshot | None, cur: Snapshot) -> list[str]:
    """Headless: one plain line per workload state change and per new event."""
    out: list[str] = []
    before = {}
    if prev is not None:
        for doc in prev.workloads:
            key = f"{doc['metadata'].get('namespace')}/{doc['metadata']['name']}"
            before[key] = workload_state(doc, prev.pods.get(key))[0]
    for doc in cur.workloads:
        key = f"{doc['metadata'].get('namespace')}/{doc['metadata']['name']}"
        state, detail = workload_state(doc, cur.pods.get(key))
        if before.get(key) != state:
            out.append(f"  workload {key}: {state} ({detail})" if detail else f"  {key}: {state}")
    seen = {e["metadata"]["name"] for e in (prev.events if prev else [])}
    for e in cur.events:
        if e["metadata"]["name"] not in seen:
            obj = e.get("involvedObject") or {}
            who = f"{obj.get('namespace', '')}/{obj.get('name', '')}"
            out.append(f"  event {e.get('reason')} {who}: {e.get('message')}")
    return out


class CastRecorder:
    """Writes the frames it is given as an asciinema v2 file, a full redraw per frame."""

    def __init__(self, path: Path, width: int = 140, height: int = 60) -> None:
        self.path, self.width, self.height = path, width, height
        self._file: TextIO = path.open("w", encoding="utf-8")
        self._start = time.monotonic()
        self._last = ""
        header = {
            "version": 2,
            "width": width,
            "height": height,
            "timestamp": int(time.time()),
            "title": "gpuaas demo 004: GPU preemption",
            "env": {"TERM": "xterm-256color", "SHELL": "/bin/sh"},
        }
        self._file.write(json.dumps(header) + "\n")

    def frame(self, renderable: RenderableType) -> None:
        buf = io.StringIO()
        console = Console(
            file=buf,
            width=self.width,
            height=self.height,
            force_terminal=True,
            color_system="256",
            legacy_windows=False,
        )
        console.print(renderable)
        text = buf.getvalue()
        if text == self._last:
            return
        self._last = text
        self.write("\x1b[H\x1b[2J" + text.replace("\n", "\r\n"))

    def write(self, text: str) -> None:
        elapsed = round(time.monotonic() - self._start, 3)
        self._file.write(json.dumps([elapsed, "o", text]) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
