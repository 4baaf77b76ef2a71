"""``gpuaas scenario ...``: run scenario files and report, for people or for CI.

This module owns the command-line surface of the scenario runner: arguments, output choice,
where each kind of message goes (results to stdout, warnings to stderr) and the exit status. The
running and checking live in ``gpuaas.sim``; nothing here decides or compares.
"""

from __future__ import annotations

import gc
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from gpuaas.sim.report import render_human, render_json, warning_lines
from gpuaas.sim.runner import run_paths

app = typer.Typer(no_args_is_help=True)


class OutputFormat(StrEnum):
    HUMAN = "human"
    JSON = "json"


@app.callback()
def scenario() -> None:
    """Run scenario files: a configuration, a timeline, checks."""


@app.command("run")
def run(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Scenario files, or directories to search for *.yaml, *.yml and *.json.",
            show_default=False,
        ),
    ],
    output: Annotated[
        OutputFormat, typer.Option("--output", "-o", help="human or json.")
    ] = OutputFormat.HUMAN,
) -> None:
    """Run scenarios. Exit 0: every expectation held; 1: one did not; 2: a file was unusable."""
    # A replay allocates millions of small, long-lived objects and, while it runs, makes no
    # reference cycles (a finished Cluster is one, freed at exit): the cyclic GC would only
    # rescan them, about 5% of a 50,000-workload run. It is off for this process.
    gc.disable()
    report = run_paths(paths)
    for line in warning_lines(report):
        typer.echo(line, err=True)
    typer.echo(render_json(report) if output is OutputFormat.JSON else render_human(report))
    raise typer.Exit(report.exit_code)
