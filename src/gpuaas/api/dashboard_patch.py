"""What changed between two dashboard summaries: the ``patch`` event of the live feed.

A summary carries every workload its caller may read, so pushing it whole on every burst of
changes to every open stream cost O(workloads x streams) bytes: with 300 streams and 10,000
workloads about 1.5 GB a push, and the event loop's writes starved every create. A stream
therefore gets the whole summary once (when it connects, or when it fell behind) and then
``patch`` events: every top-level field but ``workloads`` as the new summary has it, the rows
that changed or appeared (``workloadsChanged``) and the keys of those that went
(``workloadsRemoved``). Applying a patch (``apply_patch`` here, ``patched`` in the dashboard's
``app.js``) gives exactly the new summary: a changed row keeps its place, a new one is appended
(``api.dashboard_rows`` keeps the feed's rows in that order).

Pure: it reads no engine and does no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

JsonDoc = dict[str, Any]
CHANGED = "workloadsChanged"
REMOVED = "workloadsRemoved"


def patch(summary: JsonDoc, changed: Sequence[JsonDoc], removed: Sequence[str]) -> JsonDoc:
    """The patch that turns the summary before into ``summary``: ``changed`` are its rows that
    changed or appeared since, ``removed`` the keys of those that went."""
    out = {k: v for k, v in summary.items() if k != "workloads"}
    out[CHANGED] = list(changed)
    out[REMOVED] = list(removed)
    return out


def apply_patch(summary: JsonDoc, p: JsonDoc) -> JsonDoc:
    """``summary`` with ``p`` applied: what a dashboard shows after a ``patch`` event."""
    rows = {w["key"]: w for w in summary["workloads"]}
    for key in p[REMOVED]:
        rows.pop(key, None)
    for w in p[CHANGED]:
        rows[w["key"]] = w  # an existing key keeps its place, a new one goes last
    out = {k: v for k, v in p.items() if k not in (CHANGED, REMOVED)}
    out["workloads"] = list(rows.values())
    return out
