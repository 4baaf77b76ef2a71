"""Import contracts for the layers (house style): the core stays pure, adapters stay apart.

- ``gpuaas.core`` imports nothing from the rest of gpuaas and no module that does I/O, threads,
  clocks or global randomness.
- adapters (store, runtimes, telemetry, inventory) never import each other (the runtime may read
  the node inventory), the engine, the API, the CLI or the server's composition.
- ``vocab`` (the API's kinds and wire rendering) imports only ``core``.
- nothing below the API imports the API, the CLI or the composition; the API imports neither the
  CLI nor the composition; the CLI does not import the engine (it reads ``vocab``).
- no ``_private`` name is reached across packages: no ``from gpuaas.x import _y`` from outside
  ``x``, no ``obj._y`` where ``_y`` is defined only in another package.

Relative imports count: they are resolved to absolute module names first.
"""

from __future__ import annotations

import ast
from functools import cache
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
OUTER = {"api", "cli", "dashboard", "server"}
# Layers each package must not import (beyond the adapter and core rules above).
BANNED: dict[str, set[str]] = {
    "engine": OUTER,
    "vocab": OUTER | ADAPTERS | {"engine", "sim"},
    "api": {"cli", "server"},
    "cli": {"engine"},
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package_of(path: Path) -> str:
    """The layer a file belongs to: ``engine`` for gpuaas/engine/*, ``server`` for server.py."""
    return path.relative_to(SRC).with_suffix("").parts[0]


def _resolve(path: Path, node: ast.ImportFrom) -> str:
    """``node``'s module as an absolute name (``from .x import y`` in gpuaas/a/b.py: gpuaas.a.x)."""
    if node.level == 0:
        return node.module or ""
    package = _module_name(path).split(".")
    if path.name != "__init__.py":
        package.pop()
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), filename=str(path))


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(path, node)
            out.add(module)
            if node.module is None:  # from . import x: x may be a module
                out.update(f"{module}.{a.name}" for a in node.names)
    return out


def _package_files(pkg: str) -> list[Path]:
    return sorted((SRC / pkg).rglob("*.py"))


def _all_files() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _layer(mod: str) -> str | None:
    parts = mod.split(".")
    return parts[1] if parts[0] == "gpuaas" and len(parts) > 1 else None


def test_relative_imports_are_resolved() -> None:
    pkg = SRC / "engine"
    tree = ast.parse("from . import views\nfrom ..api.app import create_app\nfrom .x import y\n")
    froms = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    got = [_resolve(pkg / "bridge.py", n) for n in froms]
    assert got == ["gpuaas.engine", "gpuaas.api.app", "gpuaas.engine.x"]
    assert _resolve(pkg / "__init__.py", froms[0]) == "gpuaas.engine"


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
            layer = _layer(mod)
            if layer is None:
                continue
            banned = ADAPTERS - {pkg} - ALLOWED.get(pkg, set())
            assert layer not in banned, f"{pkg}/{path.name} imports {mod}"
            assert layer not in OUTER | {"engine", "vocab", "sim"}, (
                f"{pkg}/{path.name} imports {mod}"
            )


@pytest.mark.parametrize("pkg", sorted(BANNED))
def test_layers_point_inward(pkg: str) -> None:
    wrong = sorted(
        f"{path.relative_to(SRC)} imports {mod}"
        for path in _package_files(pkg)
        for mod in _imports(path)
        if _layer(mod) in BANNED[pkg]
    )
    assert not wrong, "\n".join(wrong)


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@cache
def _defined_privates() -> dict[str, set[str]]:
    """Private names each package defines: functions, classes, assigned names and attributes."""
    out: dict[str, set[str]] = {}
    for path in _all_files():
        names = out.setdefault(_package_of(path), set())
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = node.name
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                name = node.id
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                name = node.attr
            elif isinstance(node, ast.alias):
                name = node.asname or node.name
            else:
                continue
            if _private(name):
                names.add(name)
    return out


def _class_name(annotation: ast.expr | None) -> str | None:
    """``Engine`` for ``Engine``, ``x.Engine``, ``Engine | None`` and ``"Engine"``."""
    match annotation:
        case ast.Name(id=name) | ast.Attribute(attr=name):
            return name
        case ast.BinOp(left=left):
            return _class_name(left)
        case ast.Constant(value=str(text)):
            return _class_name(ast.parse(text, mode="eval").body)
    return None


def _foreign_classes(path: Path, tree: ast.Module, pkg: str) -> set[str]:
    """Classes this file imports from another gpuaas package."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _layer(_resolve(path, node)) not in (None, pkg):
            out.update(a.asname or a.name for a in node.names if a.name[:1].isupper())
    return out


def _typed_names(tree: ast.Module, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> dict[str, str]:
    """Local names whose class the code states: annotated parameters and variables, and names
    unpacked from a call to a function of this file annotated ``-> tuple[A, B, ...]``."""
    returns = {
        f.name: f.returns
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    args = fn.args
    typed = {
        a.arg: cls
        for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]
        if (cls := _class_name(a.annotation)) is not None
    }
    for node in ast.walk(fn):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if (cls := _class_name(node.annotation)) is not None:
                typed[node.target.id] = cls
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple):
            call = node.value.value if isinstance(node.value, ast.Await) else node.value
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
                continue
            ret = returns.get(call.func.id)
            if isinstance(ret, ast.Subscript) and isinstance(ret.slice, ast.Tuple):
                for target, elt in zip(node.targets[0].elts, ret.slice.elts, strict=False):
                    if isinstance(target, ast.Name) and (cls := _class_name(elt)) is not None:
                        typed[target.id] = cls
    return typed


def _reaches(path: Path, tree: ast.Module, pkg: str) -> list[str]:
    """The private names of other packages that one file of ``pkg`` reaches.

    A private attribute is reached across packages when its receiver is stated to be a class
    imported from another package (``engine: Engine``, then ``engine._lock``), or when the name is
    defined in another package and nowhere in this one. ``self`` and ``cls`` are the file's own.
    """
    defined = _defined_privates()
    elsewhere = set().union(*(names for p, names in defined.items() if p != pkg))
    mine = defined.get(pkg, set())
    where = path.relative_to(SRC)
    foreign = _foreign_classes(path, tree, pkg)
    typed: dict[int, str] = {}  # id(a Name node) -> the class its function states for it
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names = _typed_names(tree, fn)
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and node.id in names:
                    typed[id(node)] = names[node.id]
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = _resolve(path, node)
            if _layer(module) not in (None, pkg):
                found += [
                    f"{where}:{node.lineno} imports {a.name} from {module}"
                    for a in node.names
                    if _private(a.name)
                ]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
                continue
            cls = typed.get(id(owner))
            if cls in foreign:
                found.append(f"{where}:{node.lineno} reaches {cls}.{node.attr}")
            elif node.attr in elsewhere and node.attr not in mine:
                found.append(f"{where}:{node.lineno} reaches .{node.attr}")
    return found


def test_the_private_name_check_sees_each_kind_of_reach() -> None:
    defined = _defined_privates()
    engine_only = min(
        defined["engine"] - set().union(*(defined[p] for p in defined if p != "engine"))
    )
    code = (
        "from gpuaas.engine.engine import Engine\n"
        "from gpuaas.engine.views import _helper\n"
        "from gpuaas.api.auth import Principal\n"
        "async def _who() -> tuple[Engine, Principal]: ...\n"
        "async def f(engine: Engine | None, p: Principal) -> None:\n"
        "    e, who = await _who()\n"
        f"    e._lock, engine._cluster_private, who._own, p._own, self._mine, x.{engine_only}\n"
    )
    found = _reaches(SRC / "api" / "example.py", ast.parse(code), "api")
    assert [f.split(" ", 1)[1] for f in found] == [
        "imports _helper from gpuaas.engine.views",
        "reaches Engine._lock",
        "reaches Engine._cluster_private",
        f"reaches .{engine_only}",
    ]


@pytest.mark.parametrize("pkg", sorted({_package_of(p) for p in _all_files()}))
def test_no_private_name_is_reached_across_packages(pkg: str) -> None:
    files = sorted(SRC.glob(f"{pkg}/**/*.py")) or [SRC / f"{pkg}.py"]
    found = [reach for path in files for reach in _reaches(path, _tree(path), pkg)]
    assert not found, "\n".join(found)
