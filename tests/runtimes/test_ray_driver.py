"""The Ray runtime's driver process: degraded while the head is lost, joins again when it answers.

``RayDriver`` runs its runtime in a child process and watches the head's GCS port. No Ray cluster
is needed here: the child runs ``testing.fake_runtime`` (built as ``RayRuntime`` is) and the
"head" is a TCP listener this test opens and closes. A three-node Ray cluster checks the same
with Ray itself (``test_ray_runtime.py``, the lost head).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuaas.runtimes.base import AlreadyRunning, EventKind, PodSpec, RuntimeUnavailable
from gpuaas.runtimes.ray_driver import RayDriver

FAKE = "gpuaas.testing.fake_runtime:for_ray_driver"
POD = [PodSpec("main-0", ("sleep", "1"))]


class Head:
    """A port that answers (a listening socket) or refuses connections (closed)."""

    def __init__(self) -> None:
        self.sock: socket.socket | None = None
        self.port = 0
        self.up()

    def up(self) -> None:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", self.port))
        s.listen()
        self.sock, self.port = s, s.getsockname()[1]

    def down(self) -> None:
        assert self.sock is not None
        self.sock.close()
        self.sock = None


@pytest.fixture
def head() -> Iterator[Head]:
    h = Head()
    yield h
    if h.sock is not None:
        h.down()


@pytest.fixture
def driver(tmp_path: Path, head: Head) -> Iterator[RayDriver]:
    d = RayDriver(tmp_path / "rt", f"127.0.0.1:{head.port}", local_gpus=2, runtime=FAKE)
    yield d
    d.shutdown()


def _until(what: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_calls_go_to_the_child(driver: RayDriver) -> None:
    assert driver.describe().startswith("fake:")
    driver.start("ns/a", POD)
    assert "ns/a" in driver.running()  # stoppable at once
    with pytest.raises(AlreadyRunning):  # the child's refusal, as raised there
        driver.start("ns/a", POD)
    assert [e.kind for e in _until(driver.poll)] == [EventKind.STARTED]


def test_degraded_while_the_head_is_lost_then_joined_again(driver: RayDriver, head: Head) -> None:
    driver.start("ns/a", POD)
    head.down()
    _until(lambda: (driver.poll(), driver.degraded_since)[1])
    assert "refuses connections" in driver.degraded_reason
    assert "ns/a" in driver.running()  # shown as last seen
    with pytest.raises(RuntimeUnavailable):  # a start waits (the bridge: FailedScheduling)
        driver.start("ns/b", POD)
    assert driver.stop("ns/a") is True  # kept for later
    assert driver.running()["ns/a"].stopping
    assert driver.nodes() == []
    head.up()  # a head answers at the same address: a new child joins and re-adopts
    _until(lambda: (driver.poll(), driver.degraded_since is None)[1])
    assert driver.running() == {}  # a new cluster: nothing of the old one is left
    driver.start("ns/b", POD)
    assert "ns/b" in driver.running()
