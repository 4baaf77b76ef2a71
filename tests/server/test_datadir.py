"""The data directory is private and used by one server at a time (issue 17, items 10 and 11).

Files the server makes (the database with token hashes, the usage database, the admin token, pod
logs) are 0600 and directories 0700; an existing directory left world-readable is tightened at
start. A second server on the same data directory is refused with a message, the lock is freed
when the first one closes, and ``gpuaas token list/revoke --data-dir`` work on its store.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuaas.cli.main import build_app
from gpuaas.datadir import DataDirLock, make_private
from gpuaas.server import ServerError, ServerOptions, build


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def _modes(root: Path) -> dict[str, int]:
    out = {".": _mode(root)}
    for dirpath, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = _mode(p)
    return out


def test_server_files_are_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    srv = build(ServerOptions(data, runtime="none"), say=lambda _: None)
    try:
        modes = _modes(data)
    finally:
        srv.close()
    assert {"gpuaas.db", "usage.db", "admin-token", "server.lock"} <= set(modes)
    loose = {name: oct(m) for name, m in modes.items() if m & 0o077}
    assert loose == {}


def test_an_existing_data_dir_is_tightened(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "runtime" / "w").mkdir(parents=True)
    os.chmod(data, 0o755)
    os.chmod(data / "runtime", 0o755)
    (data / "gpuaas.db").write_bytes(b"")
    os.chmod(data / "gpuaas.db", 0o644)
    script = data / "runtime" / "w" / "run.sh"
    script.write_text("#!/bin/sh\n")
    os.chmod(script, 0o755)
    make_private(data)
    assert _mode(data) == 0o700
    assert _mode(data / "runtime") == 0o700
    assert _mode(data / "gpuaas.db") == 0o600
    assert _mode(script) == 0o700  # its owner may still run it


def test_one_server_per_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = build(ServerOptions(data, runtime="none"), say=lambda _: None)
    try:
        with pytest.raises(
            ServerError, match=f"in use by another gpuaas server \\(pid {os.getpid()}\\)"
        ):
            build(ServerOptions(data, runtime="none"), say=lambda _: None)
    finally:
        first.close()
    again = build(ServerOptions(data, runtime="none"), say=lambda _: None)
    again.close()


def test_lock_is_released_and_can_be_retaken(tmp_path: Path) -> None:
    lock = DataDirLock(tmp_path).acquire()
    with pytest.raises(Exception, match="in use"):
        DataDirLock(tmp_path).acquire()
    lock.release()
    DataDirLock(tmp_path).acquire().release()


def test_token_cli_lists_and_revokes_in_the_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    build(ServerOptions(data, runtime="none"), say=lambda _: None).close()
    cli = build_app()
    runner = CliRunner()
    made = runner.invoke(
        cli, ["token", "create", "-n", "team-a", "--name", "ci", "--data-dir", str(data)]
    )
    assert made.exit_code == 0, made.output
    bad = runner.invoke(cli, ["token", "create", "-n", "../b", "--data-dir", str(data)])
    assert bad.exit_code == 1 and "not a namespace name" in bad.output
    listed = runner.invoke(cli, ["token", "list", "--data-dir", str(data)])
    assert listed.exit_code == 0, listed.output
    lines = listed.output.splitlines()
    assert lines[0].split() == ["ID", "NAME", "NAMESPACES", "ADMIN", "CREATED"]
    assert [line.split()[1:3] for line in lines[1:]] == [["admin", "*"], ["ci", "team-a"]]
    assert made.output.strip() not in listed.output
    gone = runner.invoke(cli, ["token", "revoke", "ci", "--data-dir", str(data)])
    assert gone.exit_code == 0 and "(ci)" in gone.output
    again = runner.invoke(cli, ["token", "revoke", "ci", "--data-dir", str(data)])
    assert again.exit_code == 1 and "no token" in again.output
    assert "ci" not in runner.invoke(cli, ["token", "list", "--data-dir", str(data)]).output
