"""Turns a ``RunReport`` into what ``gpuaas scenario run`` prints: human lines or one JSON document.

This module owns the output formats of the scenario runner, and nothing else: it does not run
scenarios and does not choose exit codes (``RunReport.exit_code`` does). The JSON shape is the one
/work/shared/scenario-format.md fixes, so that CI and other tools can read it.
"""

from __future__ import annotations

from typing import Any

import msgspec

from gpuaas.sim.runner import RunReport, ScenarioOutcome


def to_document(report: RunReport) -> dict[str, Any]:
    """The ``--output json`` document; a file error is a scenario entry with an ``error``."""
    scenarios: list[dict[str, Any]] = []
    for o in report.outcomes:
        entry: dict[str, Any] = {
            "file": o.file,
            "name": o.name,
            "passed": o.passed,
            "checks": [
                {
                    "at": c.at,
                    "passed": c.passed,
                    "observed": c.observed,
                    "mismatches": list(c.mismatches),
                }
                for c in o.checks
            ],
        }
        if o.error is not None:
            entry["error"] = o.error
        scenarios.append(entry)
    passed = sum(1 for o in report.outcomes if o.passed)
    return {"scenarios": scenarios, "passed": passed, "failed": len(report.outcomes) - passed}


def render_json(report: RunReport) -> str:
    return msgspec.json.format(msgspec.json.encode(to_document(report)), indent=2).decode()


def render_human(report: RunReport) -> str:
    """One line per scenario, the mismatches or the error indented beneath, then a total."""
    lines: list[str] = []
    for o in report.outcomes:
        lines.extend(_scenario_lines(o))
    passed = sum(1 for o in report.outcomes if o.passed)
    errors = sum(1 for o in report.outcomes if o.error is not None)
    failed = len(report.outcomes) - passed - errors
    summary = f"{passed} passed, {failed} failed"
    if errors:
        summary += f", {errors} could not be used"
    lines.append(summary)
    return "\n".join(lines)


def _scenario_lines(o: ScenarioOutcome) -> list[str]:
    if o.error is not None:
        return [f"ERROR {o.name or '-'} ({o.file})", f"    {o.error}"]
    if o.passed:
        return [f"PASS {o.name} ({o.file})"]
    out = [f"FAIL {o.name} ({o.file})"]
    for c in o.checks:
        out.extend(f"    {m}" for m in c.mismatches)
    return out


def warning_lines(report: RunReport) -> list[str]:
    """Warnings for stderr: a reference to a missing object is not an error, as in Kueue."""
    return [f"warning: {o.file}: {o.name}: {w}" for o in report.outcomes for w in o.warnings]
