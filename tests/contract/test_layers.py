"""Import contracts for the layers (house style): the core stays pure, adapters stay apart.

- ``gpuaas.core`` imports nothing from the rest of gpuaas and no module that does I/O, threads,
  clocks or global randomness.
- adapters (store, runtimes, telemetry, inventory) never import each other (the runtime may read
  the node inventory), the engine, the API or the CLI.
- nothing below the API imports the API or the CLI.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "gpuaas"

FORBIDDEN_IN_CORE = {
    "os",
    "sys",
    "io",
    "time",
    "datetime",
    "random",
    "socket",
    "threading",
    "asyncio",
    "subprocess",
    "pathlib",
    "shutil",
    "logging",
    "sqlite3",
    "urllib",
    "http",
}
ADAPTERS = {"store", "runtimes", "telemetry", "inventory"}
# The node inventory (what GPUs this machine has) is a description the runtime pins against.
ALLOWED = {"runtimes": {"inventory"}, "telemetry": {"inventory"}}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def _package_files(pkg: str) -> list[Path]:
    return sorted((SRC / pkg).rglob("*.py"))


@pytest.mark.parametrize("path", _package_files("core"), ids=lambda p: p.name)
def test_core_is_pure(path: Path) -> None:
    for mod in _imports(path):
        top = mod.split(".")[0]
        assert top not in FORBIDDEN_IN_CORE, f"{path.name} imports {mod}"
        if mod.startswith("gpuaas."):
            assert mod.startswith("gpuaas.core"), f"{path.name} imports {mod}"


@pytest.mark.parametrize("pkg", sorted(ADAPTERS))
def test_adapters_do_not_import_each_other_or_outer_layers(pkg: str) -> None:
    for path in _package_files(pkg):
        for mod in _imports(path):
            parts = mod.split(".")
            if parts[0] != "gpuaas" or len(parts) < 2:
                continue
            layer = parts[1]
            banned = ADAPTERS - {pkg} - ALLOWED.get(pkg, set())
            assert layer not in banned, f"{pkg}/{path.name} imports {mod}"
            assert layer not in {"api", "cli", "dashboard", "engine"}, (
                f"{pkg}/{path.name} imports {mod}"
            )
