"""sim.files: YAML and JSON loading, error locations, directory expansion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuaas.sim.files import FileFormatError, expand_paths, load_documents, looks_like_json


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        ("a.json", b"kind: x", True),
        ("a.yaml", b'{"kind": "x"}', True),
        ("a.yaml", b'  \n\t[{"kind": "x"}]', True),
        ("a.yml", b"\xef\xbb\xbf{}", True),
        ("a.yaml", b"kind: x\n", False),
        ("a.yaml", b"# {comment}\nkind: x\n", False),
        ("a.yaml", b"", False),
    ],
)
def test_looks_like_json(name: str, content: bytes, expected: bool) -> None:
    assert looks_like_json(Path(name), content) is expected


@pytest.mark.parametrize(
    ("name", "text", "docs"),
    [
        ("multi.yaml", "a: 1\n---\nb: 2\n", [{"a": 1}, {"b": 2}]),
        ("empty-docs.yaml", "---\n---\na: 1\n---\n", [{"a": 1}]),
        ("obj.json", '{"a": [1, 2.5, "x"]}', [{"a": [1, 2.5, "x"]}]),
        ("list.json", '[{"a": 1}, {"b": 2}]', [{"a": 1}, {"b": 2}]),
        ("json-in.yaml", '{"a": 1}', [{"a": 1}]),
        (
            "quantities.yaml",
            "cpu: 500m\nmem: 64Gi\nn: 2\n",
            [{"cpu": "500m", "mem": "64Gi", "n": 2}],
        ),
    ],
)
def test_load_documents(tmp_path: Path, name: str, text: str, docs: list[object]) -> None:
    p = tmp_path / name
    p.write_text(text)
    assert load_documents(p) == docs


@pytest.mark.parametrize(
    ("name", "data", "reason", "line"),
    [
        ("bad.yaml", b"a: 1\nb: [1, 2\nc: 3\n", "invalid YAML", 3),
        ("bad2.yaml", b"a:\n  b: 1\n c: 2\n", "invalid YAML", 3),
        ("bad.json", b'{\n  "a": 1,\n  "b": \n}', "invalid JSON", 4),
        ("latin1.yaml", b"a: 1\nb: caf\xe9\n", "not UTF-8", 2),
    ],
)
def test_load_errors_name_file_and_line(
    tmp_path: Path, name: str, data: bytes, reason: str, line: int
) -> None:
    p = tmp_path / name
    p.write_bytes(data)
    with pytest.raises(FileFormatError) as exc:
        load_documents(p)
    assert exc.value.line == line
    assert reason in str(exc.value)
    assert str(exc.value).startswith(f"{p}:{line}: ")


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(FileFormatError, match="no such file"):
        load_documents(tmp_path / "nope.yaml")
    with pytest.raises(FileFormatError, match="is a directory"):
        load_documents(tmp_path)


def test_expand_paths_recursive_sorted_and_hidden_skipped(tmp_path: Path) -> None:
    for rel in [
        "b/2.yaml",
        "a/1.yml",
        "a/z.json",
        "c.txt",
        ".hidden/x.yaml",
        "a/.swp.yaml",
        "0.YAML",
    ]:
        f = tmp_path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text("a: 1\n")
    single = tmp_path / "c.txt"
    got = expand_paths([tmp_path, single])
    assert [p.relative_to(tmp_path).as_posix() for p in got] == [
        "0.YAML",
        "a/1.yml",
        "a/z.json",
        "b/2.yaml",
        "c.txt",
    ]


def test_large_json_is_decoded_as_json_whatever_its_suffix(tmp_path: Path) -> None:
    """A ~6 MB JSON trace named ``.yaml`` goes to the JSON decoder (PyYAML would need over ten
    seconds for it). The witness is a value the two read differently, not a clock: ``1e3`` is a
    number to JSON and a string to PyYAML (YAML 1.1's floats need a dot)."""
    doc = {
        "items": [
            {"name": f"wl-{i}", "cpu": "500m", "labels": {"k": "v" * 20}} for i in range(80_000)
        ],
        "scale": 1000.0,
    }
    p = tmp_path / "trace.yaml"  # the suffix says YAML: detection is by content
    p.write_text(json.dumps(doc).replace('"scale": 1000.0', '"scale": 1e3'))
    assert p.stat().st_size > 5_000_000 and '"scale": 1e3' in p.read_text()[-20:]
    assert load_documents(p) == [doc]
