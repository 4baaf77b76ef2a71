"""Shared test policy: outside services, and no child process left behind.

``require_service`` is the one place where the service policy lives: a test that needs PostgreSQL,
Chromium, Ray or a GPU calls it; when the service is missing the test is skipped with the reason,
unless ``GPUAAS_REQUIRE_SERVICES=1`` (CI) in which case it fails, so CI can never pass by skipping.
The session hooks check that the tests left no process of theirs running.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from gpuaas.runtimes.procs import LEADER_PREFIX

pytest_plugins = ["pytester"]  # tests/test_service_policy.py runs pytest on this very policy

REPO_ROOT = Path(__file__).resolve().parent.parent

RequireService = Callable[[str, bool, str], None]


def services_required() -> bool:
    return os.environ.get("GPUAAS_REQUIRE_SERVICES") == "1"


def require_service(name: str, available: bool, reason: str) -> None:
    """Skip (or, with GPUAAS_REQUIRE_SERVICES=1, fail) when ``name`` is not available."""
    if available:
        return
    if services_required():
        pytest.fail(
            f"{name} is required (GPUAAS_REQUIRE_SERVICES=1) but not available: {reason}",
            pytrace=False,
        )
    pytest.skip(f"{name} not available: {reason}")


@pytest.fixture(name="require_service")
def require_service_fixture() -> RequireService:
    """The policy as a fixture: ``require_service("PostgreSQL", ok, "connection refused")``."""
    return require_service


# -- no leftover child processes ---------------------------------------------------------------

_children_at_start: set[int] = set()


def _children() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


_session_started = 0.0
# Marks every process this session starts (servers, their pods, Ray nodes and the pods Ray runs
# inherit it; the runtimes drop only GPUAAS_* and RAY_* names from a pod's environment), so the
# orphan sweep below never takes another session's pods for ours: on a machine shared by several
# test runs, it used to SIGKILL their pods (a Ray pod restarted "without SIGTERM and without its
# actor being lost", the dead-node test's rare flake).
SESSION_ENV = "TESTS_GPUAAS_SESSION"


def pytest_sessionstart(session: pytest.Session) -> None:
    global _session_started
    _session_started = time.time() - 1
    _children_at_start.update(p.pid for p in _children())
    os.environ[SESSION_ENV] = secrets.token_hex(8)


def _orphaned_pods(basetemp: str | None) -> list[psutil.Process]:
    """Pods started during this session that outlived their server: a server killed by a test
    leaves its pods reparented to init, out of reach of the children check, so they are found
    by the GPUAAS_POD_UID every pod carries. Only pods of this session's servers count (their
    data dirs are under its ``basetemp``): the machine is shared, and a pod of someone else's
    server is not ours to stop."""
    found = []
    for p in psutil.process_iter(["create_time"]):
        try:
            if p.info["create_time"] < _session_started or p.pid == os.getpid():
                continue
            if basetemp is not None and not any(basetemp in a for a in p.cmdline()):
                continue
            env = p.environ()
            ours = env.get(SESSION_ENV) == os.environ.get(SESSION_ENV)
            # a pod's leader forked by the pod launcher has the launcher's environment and the
            # pod's token in its name instead
            pod = "GPUAAS_POD_UID" in env or p.name().startswith(LEADER_PREFIX)
            if pod and ours and p.status() != psutil.STATUS_ZOMBIE:
                found.append(p)
        except psutil.Error:
            continue
    return found


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if a test left a process of its own running (after a short grace period)."""
    deadline = time.monotonic() + 2.0
    leftovers = [p for p in _children() if p.pid not in _children_at_start]
    seen = {p.pid for p in leftovers}
    factory = getattr(session.config, "_tmp_path_factory", None)
    basetemp = str(factory.getbasetemp()) if factory is not None else None
    leftovers += [p for p in _orphaned_pods(basetemp) if p.pid not in seen]
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.1)
        leftovers = [p for p in leftovers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    if not leftovers:
        return
    lines = []
    for p in leftovers:
        try:
            lines.append(f"  pid {p.pid}: {' '.join(p.cmdline()) or p.name()}")
            p.kill()  # a descendant of this test session: ours to stop
        except psutil.Error:
            continue
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and lines:
        reporter.write_line("tests left child processes running (now killed):", red=True)
        for line in lines:
            reporter.write_line(line, red=True)
    if lines and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="module", autouse=True)
def _one_ray_module_at_a_time(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Ray's nodes give their agents 15 s to start: two Ray clusters starting at once on two
    xdist workers of a 2-core machine time out. A module with Ray tests holds a lock shared by
    this run's workers (their basetemps share a parent) for as long as it runs."""
    module = request.module
    if not any(i.get_closest_marker("ray") and i.module is module for i in request.session.items):
        yield
        return
    lock = tmp_path_factory.getbasetemp().parent / "ray-tests.lock"
    with open(lock, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
