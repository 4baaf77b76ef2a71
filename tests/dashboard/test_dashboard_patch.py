"""The live feed's patches: applying one to the summary before gives exactly the summary after.

Table of named cases over rows (each its own workload key), as the feed diffs two summaries;
where a patch could not give the new order, ``patch`` answers None and the feed sends the whole
summary.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuaas.api.dashboard_patch import CHANGED, REMOVED, apply_patch, patch


def row(key: str, state: str = "Admitted") -> dict[str, Any]:
    return {"key": key, "state": state, "position": None}


def summary(*rows: dict[str, Any], rv: int = 1) -> dict[str, Any]:
    return {"resourceVersion": str(rv), "totals": {"workloads": len(rows)}, "workloads": list(rows)}


CASES: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]], list[str], list[str] | None]] = {
    # name: (rows before, rows after, keys sent as changed, keys sent as removed; None: no patch)
    "nothing changed": ([row("a"), row("b")], [row("a"), row("b")], [], []),
    "a row changed in place": (
        [row("a", "Pending"), row("b")],
        [row("a"), row("b")],
        ["a"],
        [],
    ),
    "new rows appended": ([row("a")], [row("a"), row("b"), row("c", "Pending")], ["b", "c"], []),
    "a row removed": ([row("a"), row("b"), row("c")], [row("a"), row("c")], [], ["b"]),
    "removed, changed and new at once": (
        [row("a"), row("b", "Pending"), row("c")],
        [row("b"), row("c"), row("d")],
        ["b", "d"],
        ["a"],
    ),
    "from nothing": ([], [row("a")], ["a"], []),
    "to nothing": ([row("a")], [], [], ["a"]),
    "a kept row moved": ([row("a"), row("b")], [row("b"), row("a")], [], None),
    "a new row before a kept one": ([row("b")], [row("a"), row("b")], [], None),
}


@pytest.mark.parametrize(("before", "after", "changed", "removed"), CASES.values(), ids=CASES)
def test_a_patch_turns_the_summary_before_into_the_one_after(
    before: list[dict[str, Any]],
    after: list[dict[str, Any]],
    changed: list[str],
    removed: list[str] | None,
) -> None:
    old, new = summary(*before, rv=1), summary(*after, rv=2)
    p = patch(old["workloads"], new)
    if removed is None:
        assert p is None
        return
    assert p is not None
    assert [w["key"] for w in p[CHANGED]] == changed and p[REMOVED] == removed
    assert "workloads" not in p and p["resourceVersion"] == "2"
    assert apply_patch(old, p) == new
    assert [w["key"] for w in apply_patch(old, p)["workloads"]] == [w["key"] for w in after]
