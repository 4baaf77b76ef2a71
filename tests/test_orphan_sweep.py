"""The session's orphan sweep takes only this session's pods, never another test run's.

Several test runs share a machine; a pod that carries ``GPUAAS_POD_UID`` but another session's
mark (``TESTS_GPUAAS_SESSION``) is theirs: sweeping it killed their pods mid-test.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

# tests/conftest.py by its path: ``import conftest`` may find another folder's conftest
_spec = importlib.util.spec_from_file_location(
    "root_conftest", Path(__file__).with_name("conftest.py")
)
assert _spec is not None and _spec.loader is not None
_root = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_root)
SESSION_ENV, _orphaned_pods = _root.SESSION_ENV, _root._orphaned_pods


def test_only_this_sessions_pods_are_swept() -> None:
    env = {**os.environ, "GPUAAS_POD_UID": "sweep-test"}
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    mine = subprocess.Popen(sleep, env=env)
    theirs = subprocess.Popen(sleep, env={**env, SESSION_ENV: "another-session"})
    try:
        deadline = time.monotonic() + 10
        found: set[int] = set()
        while mine.pid not in found and time.monotonic() < deadline:
            time.sleep(0.1)
            found = {p.pid for p in _orphaned_pods(None)}
        assert mine.pid in found
        assert theirs.pid not in found
    finally:
        for proc in (mine, theirs):
            proc.kill()
            proc.wait()
