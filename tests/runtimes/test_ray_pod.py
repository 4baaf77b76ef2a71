"""The Ray pod launcher with real processes and a stand-in ``ray`` (Ray itself is not needed).

The stand-in behaves as ``ray start --block`` does where it matters here: it listens on the ports
it is given, says it now blocks, and starts a "core worker" that moves to a process group of its
own, as Ray's do, so SIGTERM to the pod's group cannot reach it. Through the real local runtime:
the head records its ports, the worker is pointed at the head's GCS, and a stop leaves nothing of
either pod, the escaped process included, even when ``ray start`` ignores SIGTERM.
"""

from __future__ import annotations

import copy
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from runtime_helpers import MakeRuntime, wait_for

from gpuaas.core.manifests import parse_object
from gpuaas.core.objects import Workload
from gpuaas.runtimes.base import EventKind
from gpuaas.runtimes.podspecs import build_run_plan
from gpuaas.runtimes.ray_pod import read_states

SEED = Path(__file__).resolve().parents[2] / "examples" / "003-rayclusters"
KEY = "team-b/raycluster-dev"
FAKE_RAY = """
import os, signal, socket, subprocess, sys, time
args = dict(a[2:].split("=", 1) for a in sys.argv[2:] if a.startswith("--") and "=" in a)
if os.environ.get("FAKE_RAY_IGNORES_TERM"):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
listening = []
for name in ("dashboard-agent-listen-port", "port"):
    if name in args:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", int(args[name])))
        s.listen()
        listening.append(s)
# a "core worker" in a process group of its own, as Ray's are; the group is set before exec
# (process_group=0), so it has left the pod's group before the banner says the node is up
escaped = "import time; time.sleep(600)"
subprocess.Popen([sys.executable, "-c", escaped], start_new_session=False, process_group=0)
print("argv:", " ".join(sys.argv[1:]), flush=True)
print("This command will now block forever until terminated by a signal.", flush=True)
time.sleep(600)
"""


def _fake_ray(tmp_path: Path) -> Path:
    path = tmp_path / "bin" / "ray"
    path.parent.mkdir()
    path.write_text(f"#!{sys.executable}\n{FAKE_RAY}")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _dev(grace: int) -> dict[str, Any]:
    doc = copy.deepcopy(yaml.safe_load((SEED / "team-b-ray-cluster-dev.yaml").read_text()))
    doc["spec"]["workerGroupSpecs"][0]["replicas"] = 1
    for group in (doc["spec"]["headGroupSpec"], doc["spec"]["workerGroupSpecs"][0]):
        group["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    return dict(doc)


def _session(sids: set[int]) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) in sids and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc)
        except (psutil.Error, OSError):
            continue
    return out


@pytest.mark.parametrize("ignores_term", [False, True], ids=["stops", "ignores-sigterm"])
def test_launcher_records_ports_and_stops_every_process(
    make_runtime: MakeRuntime, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ignores_term: bool
) -> None:
    if ignores_term:
        monkeypatch.setenv("FAKE_RAY_IGNORES_TERM", "1")
    runtime = make_runtime()
    doc = _dev(grace=2)
    wl = parse_object(doc)
    assert isinstance(wl, Workload)
    ray_dir = runtime.workload_dir(KEY) / "ray"
    plan = build_run_plan(wl, None, doc, ray_dir=ray_dir, ray_bin=_fake_ray(tmp_path))
    temps = [Path(p.argv[p.argv.index("--temp-dir") + 1]) for p in plan.pods]
    runtime.start(KEY, plan.pods)
    try:
        # 1. both nodes up: the head's ports recorded, the worker pointed at its GCS
        deadline = time.monotonic() + 30
        states: dict[str, Any] = {}
        while time.monotonic() < deadline:
            runtime.poll()
            states = read_states(ray_dir)
            if len(states) == 2 and all(s["ready"] for s in states.values()):
                break
            time.sleep(0.05)
        assert sorted(states) == ["head", "worker-raycluster-dev-small-group-test-0"]
        head = states["head"]
        assert set(head["ports"]) == {"gcs", "client", "agent", "nodeManager", "dashboard"}
        assert len(set(head["ports"].values())) == 5
        worker_log = "".join(runtime.logs(KEY, "raycluster-dev-small-group-test-0"))
        assert f"--address=127.0.0.1:{head['ports']['gcs']}" in worker_log
        assert "ray_pod: worker ready" in worker_log
        sids = {p.pid for p in runtime.running()[KEY].pods if p.pid is not None}
        escaped = [p for p in _session(sids) if os.getpgid(p.pid) not in sids]
        assert len(escaped) == 2  # one "core worker" per node, outside the pod's group
        # 2. a stop: every process of both pods is gone before the runtime says Stopped
        runtime.stop(KEY)
        event, _ = wait_for(runtime, EventKind.STOPPED, KEY, timeout=15)
        # both launchers ended on the SIGTERM within their grace: past it, the runtime's
        # SIGKILL would have made them 137 (the exit codes say it, not a clock)
        assert "[143, 143]" in event.message, event.message
        assert _session(sids) == []
        assert read_states(ray_dir) == {}
        assert not any(t.exists() for t in temps)
    finally:
        runtime.shutdown(grace_seconds=0)
