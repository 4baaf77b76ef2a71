"""The ``gpuaas`` command: the root typer app and the list of command modules it registers.

This module owns only the root command (``--version``, help) and the registration list. Each
command module under ``gpuaas.cli`` offers one of two hooks: ``register(app)``, which adds its
commands to the root (``gpuaas apply``, ``gpuaas server``), or a ``typer.Typer`` named ``app``,
mounted as a group under the name given here (``gpuaas scenario run``). Adding commands means
adding a line to ``COMMAND_MODULES``, not code here; this module must not hold command logic.
"""

from __future__ import annotations

import importlib
from typing import Annotated

import typer

from gpuaas import __version__

# (module, group name for an ``app`` hook or None for a ``register`` hook, one-line help).
COMMAND_MODULES: list[tuple[str, str | None, str]] = [
    ("gpuaas.cli.scenario", "scenario", "Run scenario files: a configuration, a timeline, checks."),
    ("gpuaas.cli.server", None, ""),
    ("gpuaas.cli.logs", None, ""),
    ("gpuaas.cli.demo", None, ""),
    ("gpuaas.cli.kubectl", None, ""),
    ("gpuaas.cli.kubeconfig", None, ""),
    ("gpuaas.cli.node", "node", "Nodes: labels, GPUs and who holds them (node list)."),
    ("gpuaas.cli.token", "token", "Create API tokens."),
    ("gpuaas.cli.cluster", "cluster", "MultiKueue worker clusters (cluster join, cluster list)."),
    ("gpuaas.cli.telemetry", "report", "Reports: usage and chargeback (report usage)."),
]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpuaas {__version__}")
        raise typer.Exit()


def _register(app: typer.Typer, module_name: str, group: str | None, help_text: str) -> None:
    module = importlib.import_module(module_name)
    if group is None:
        register = getattr(module, "register", None)
        if not callable(register):
            raise TypeError(f"{module_name} has no register(app) function")
        register(app)
        return
    sub = getattr(module, "app", None)
    if not isinstance(sub, typer.Typer):
        raise TypeError(f"{module_name}.app must be a typer.Typer")
    app.add_typer(sub, name=group, help=help_text or None)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="gpuaas",
        help="GPU-as-a-Service control plane with Kueue's admission and preemption semantics.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )

    @app.callback()
    def root(
        version: Annotated[
            bool,
            typer.Option(
                "--version", help="Print the version and exit.", callback=_version, is_eager=True
            ),
        ] = False,
    ) -> None:
        """GPU-as-a-Service control plane with Kueue's admission and preemption semantics."""

    for module_name, group, help_text in COMMAND_MODULES:
        _register(app, module_name, group, help_text)
    return app


def main() -> None:
    build_app()()
