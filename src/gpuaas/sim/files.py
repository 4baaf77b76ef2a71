"""Reading scenario and manifest files: multi-document YAML or JSON, fast, errors that say where.

This module owns turning a path into a list of plain Python documents (dicts, lists, scalars) and
finding the files under a directory. It knows nothing about what the documents mean (see
``sim.scenario``) and never raises anything but ``FileFormatError`` for a file it cannot read.

JSON is YAML, but PyYAML needs about 37 s for an 18 MB JSON trace while msgspec needs well under a
second, so JSON is recognised (``.json`` suffix, or a first non-blank character ``{`` or ``[``) and
decoded with msgspec.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
import yaml

SCENARIO_SUFFIXES = (".yaml", ".yml", ".json")

_BYTE_OFFSET = re.compile(r"\(byte (\d+)\)|at byte (\d+)")


class FileFormatError(Exception):
    """A file unreadable as YAML or JSON; ``str(e)`` names the file and, when known, the line."""

    def __init__(self, path: Path | str, reason: str, line: int | None = None) -> None:
        self.path = str(path)
        self.reason = reason
        self.line = line
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {reason}")


def looks_like_json(path: Path, data: bytes) -> bool:
    """True for a ``.json`` file or one whose first non-blank byte opens a JSON object or array."""
    if path.suffix.lower() == ".json":
        return True
    stripped = data.lstrip()
    if stripped.startswith(b"\xef\xbb\xbf"):
        stripped = stripped[3:].lstrip()
    return stripped[:1] in (b"{", b"[")


def load_documents(path: Path | str) -> list[Any]:
    """Every document in the file, in order; empty YAML documents (``---`` alone) are dropped.

    A JSON file holding an array is a list of documents, as ``kubectl`` treats a ``List``.
    """
    p = Path(path)
    try:
        data = p.read_bytes()
    except IsADirectoryError:
        raise FileFormatError(p, "is a directory, not a file") from None
    except FileNotFoundError:
        raise FileFormatError(p, "no such file") from None
    except OSError as exc:
        raise FileFormatError(p, f"cannot be read: {exc.strerror or exc}") from None
    if looks_like_json(p, data):
        return _load_json(p, data)
    return _load_yaml(p, data)


def _load_json(path: Path, data: bytes) -> list[Any]:
    try:
        doc = msgspec.json.decode(data)
    except msgspec.DecodeError as exc:
        message = str(exc)
        match = _BYTE_OFFSET.search(message)
        offset = int(match.group(1) or match.group(2)) if match else None
        line = data.count(b"\n", 0, offset) + 1 if offset is not None else None
        raise FileFormatError(path, f"invalid JSON: {message}", line) from None
    if isinstance(doc, list):
        return list(doc)
    return [doc]


def _load_yaml(path: Path, data: bytes) -> list[Any]:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise FileFormatError(path, "not UTF-8 text", line) from None
    try:
        docs = list(yaml.load_all(text, Loader=yaml.CSafeLoader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        yaml_line: int | None = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "malformed YAML"
        raise FileFormatError(path, f"invalid YAML: {problem}", yaml_line) from None
    except yaml.YAMLError as exc:
        raise FileFormatError(path, f"invalid YAML: {exc}") from None
    return [doc for doc in docs if doc is not None]


def expand_paths(paths: Iterable[Path | str]) -> list[Path]:
    """Files to run: a file as given; a directory as every YAML/JSON file under it, sorted.

    Hidden files and folders (a leading dot) under a directory are skipped, as editors and tools
    keep their own state there. A path that does not exist is kept so that running it reports it.
    """
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.is_dir():
            out.append(p)
            continue
        found = [
            f
            for f in p.rglob("*")
            if f.suffix.lower() in SCENARIO_SUFFIXES
            and f.is_file()
            and not any(part.startswith(".") for part in f.relative_to(p).parts)
        ]
        out.extend(sorted(found, key=lambda f: f.relative_to(p).as_posix()))
    return out
