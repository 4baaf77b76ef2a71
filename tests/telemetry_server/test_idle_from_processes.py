"""Idle detection without GPUs tells the truth: the local runtime runs real processes on fake
GPUs, and the simulated collector reads each GPU's load from the holding pod's CPU time.

A Job running ``sleep`` is flagged idle with no profile annotation; a Job running a busy loop on
the same node is not. The engine runs on a virtual clock (the hoarding window is counted in
samples); the processes run for real, and their CPU time is measured between samples by the
runtime's own clock. Nothing here asserts how long anything took.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from telemetry_docs import configuration

from gpuaas.engine.engine import Engine
from gpuaas.engine.runtime_bridge import RuntimeBridge
from gpuaas.engine.telemetry_bridge import TelemetryBridge
from gpuaas.inventory import parse_fake_gpus
from gpuaas.runtimes import LocalRuntime
from gpuaas.store import open_store
from gpuaas.vocab.kinds import BY_KIND

pytestmark = pytest.mark.slow

T0 = 1_700_000_000.0
INTERVAL, WINDOW = 15.0, 45.0


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


def job(name: str, script: str) -> dict[str, Any]:
    requests = {"cpu": "1", "nvidia.com/gpu": 1}
    container = {
        "name": "main",
        "command": ["sh", "-c", script],
        "resources": {"requests": requests},
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "labels": {"kueue.x-k8s.io/queue-name": "lq"},
        },
        "spec": {
            "template": {
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "restartPolicy": "Never",
                    "containers": [container],
                }
            }
        },
    }


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Engine, RuntimeBridge, TelemetryBridge, Clock]]:
    clock = Clock()
    store = open_store(f"sqlite:///{tmp_path / 'gpuaas.db'}")
    engine = Engine(store, clock=clock, live_runtime=True)
    gpus = parse_fake_gpus("2")
    runtime = RuntimeBridge(LocalRuntime(tmp_path / "runtime", gpus))
    runtime.attach(engine)
    telemetry = TelemetryBridge(
        gpus=gpus, owners=runtime.gpu_owners, pod_cpu=runtime.pod_cpu, hostname="node-1"
    ).attach(engine)
    try:
        yield engine, runtime, telemetry, clock
    finally:
        runtime.shutdown(grace_seconds=0)
        telemetry.close()
        engine.close()
        store.close()


def test_sleep_is_flagged_idle_from_its_processes_and_a_busy_loop_is_not(
    node: tuple[Engine, RuntimeBridge, TelemetryBridge, Clock],
) -> None:
    engine, runtime, telemetry, clock = node
    config = {
        "hoarding": [{"windowSeconds": WINDOW, "action": "Notify"}],
        "telemetry": {"intervalSeconds": INTERVAL, "collector": "simulated"},
    }
    for kind, ns, doc in (
        ("GpuaasConfiguration", None, configuration(config)),
        ("Namespace", None, {"metadata": {"name": "ns"}}),
        ("ResourceFlavor", None, {"metadata": {"name": "rf"}}),
        (
            "ClusterQueue",
            None,
            {
                "metadata": {"name": "cq"},
                "spec": {
                    "namespaceSelector": {},
                    "resourceGroups": [
                        {
                            "coveredResources": ["cpu", "nvidia.com/gpu"],
                            "flavors": [
                                {
                                    "name": "rf",
                                    "resources": [
                                        {"name": "cpu", "nominalQuota": 4},
                                        {"name": "nvidia.com/gpu", "nominalQuota": 2},
                                    ],
                                }
                            ],
                        }
                    ],
                },
            },
        ),
        ("LocalQueue", "ns", {"metadata": {"name": "lq"}, "spec": {"clusterQueue": "cq"}}),
        ("Job", "ns", job("sleeper", "sleep 300")),
        ("Job", "ns", job("spinner", "while :; do :; done")),
    ):
        engine.create(BY_KIND[kind], ns, doc)

    def running() -> bool:
        engine.poll_observers()
        cpu = runtime.pod_cpu()
        return {key for key, _ in cpu} == {"ns/sleeper", "ns/spinner"}

    deadline = time.monotonic() + 20
    while not running():
        assert time.monotonic() < deadline, "the pods never started"
        time.sleep(0.05)

    def flagged(key: str) -> bool:
        w = engine.workload(key)
        return w is not None and w.condition("GPUIdle") is not None

    # Sample every virtual 15 s; between samples the processes really run for a moment.
    utilization: dict[str, list[float]] = {"ns/sleeper": [], "ns/spinner": []}
    for _ in range(12):
        time.sleep(0.4)
        clock.t += INTERVAL
        engine.tick()
        for a in telemetry.latest:
            if a.holder is not None:
                utilization[a.holder.workload_key].append(a.sample.utilization_percent)
        if flagged("ns/sleeper"):
            break
    assert flagged("ns/sleeper"), utilization
    assert not flagged("ns/spinner"), utilization
    assert "gpuaas.dev/simulated-gpu-profile" not in (engine.workload("ns/sleeper").annotations)
    # sleep reads about 0 %; the busy loop reads its share of a core (100 % on an idle machine,
    # its fair share where other processes compete for the cores), always above the threshold
    assert utilization["ns/sleeper"][-1] < 5.0
    assert min(utilization["ns/spinner"]) > 5.0
    (row,) = telemetry.offenders(clock.t)
    assert (row.workload, row.state) == ("sleeper", "Flagged")
