"""The Ray runtime's recovery and log reading: what a restarted server finds, and pods' logs.

This module owns the parts of ``ray_runtime.RayRuntime`` that read back what runs without it: a
recorded run's placement group and pods found again on their nodes' launchers after a server
restart (``adopt_run``), pods, actors and groups of gpuaas that no record names (``remove_strays``),
and a workload's log lines, from the server's copy and from the launchers of pods still running
(``log_lines``). They are functions of the runtime, called under its lock (logs: outside it); they
decide nothing about admission or retries.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from gpuaas.runtimes.ray_actor import LAUNCHER_PREFIX
from gpuaas.runtimes.ray_records import LOST_EXIT_CODE, NAMESPACE, RayRun, lines
from gpuaas.runtimes.ray_rendezvous import RENDEZVOUS_NAME

if TYPE_CHECKING:
    from gpuaas.runtimes.ray_runtime import RayRuntime


def adopt_run(rt: RayRuntime, run: RayRun) -> RayRun:
    """Find the recorded run's placement group by name and its pods on their launchers; a
    pod its launcher does not know is a pod lost while the server was down (retried within
    the backoffLimit). A missing group (the Ray head was lost and this is a new cluster)
    loses the run whole: it ends as ``Stopped``, so the engine, which still holds it
    admitted, starts it anew."""
    from ray.util import get_placement_group

    with contextlib.suppress(ValueError):
        run.pg = get_placement_group(run.pg_name)
    if run.pg is None:
        for pod in run.pods.values():
            launcher = rt._launchers.find(pod.node_id) if pod.node_id else None
            if launcher is not None and not pod.gone:
                launcher.terminate.remote(pod.attempt, 0.0)
            pod.gone, pod.phase = True, "Failed"
            pod.exit_code = pod.exit_code if pod.exit_code is not None else LOST_EXIT_CODE
        run.stopping = True
        return run
    for pod in run.pods.values():
        if pod.gone:
            continue
        if not pod.node_id:  # it was being placed when the server stopped: place it again
            rt._spawn(run, pod)
            continue
        launcher = rt._launchers.find(pod.node_id)
        state = None
        if launcher is not None:
            with contextlib.suppress(rt._ray.exceptions.RayError, TimeoutError):
                state = rt._ray.get(launcher.state.remote(pod.attempt), timeout=20)
        if state is None:
            rt._lost(run, pod, "not found on its node after the server restarted")
            continue
        rt._apply(run, pod, state)
    return run


def remove_strays(rt: RayRuntime, known: set[str]) -> None:
    """Pods, actors and placement groups of gpuaas that no record names: stop them."""
    from ray.util.placement_group import placement_group_table

    for node_id in rt._launchers.named():
        launcher = rt._launchers.find(node_id)
        if launcher is None:
            continue
        with contextlib.suppress(rt._ray.exceptions.RayError, TimeoutError):
            for attempt in rt._ray.get(launcher.attempts.remote(), timeout=20):
                if attempt not in known:
                    launcher.terminate.remote(attempt, 0.0)
                    launcher.release.remote(attempt)
    for name in rt._ray.util.list_named_actors():
        # pod actors of an older gpuaas; the launchers and the rendezvous are kept
        if not name.startswith(LAUNCHER_PREFIX) and name != RENDEZVOUS_NAME:
            with contextlib.suppress(Exception):
                rt._ray.kill(rt._ray.get_actor(name, namespace=NAMESPACE), no_restart=True)
    names = {r.pg_name for r in rt._runs.values()}
    for info in placement_group_table().values():
        name = info.get("name", "")
        if name.startswith("gpuaas:") and name not in names and info.get("state") != "REMOVED":
            from ray.util import get_placement_group
            from ray.util.placement_group import remove_placement_group

            with contextlib.suppress(Exception):
                remove_placement_group(get_placement_group(name))


def log_lines(rt: RayRuntime, key: str, names: list[str], follow: bool) -> Iterator[str]:
    offsets = dict.fromkeys(names, 0)
    saved = dict.fromkeys(names, b"")
    attempts: dict[str, str] = {}
    while True:
        with rt._lock:
            run = rt._runs.get(key)
            where = {
                n: (rt._launchers.known(run.pods[n].node_id), run.pods[n].attempt)
                for n in names
                if run and n in run.pods and run.pods[n].node_id and not run.pods[n].gone
            }
        for name in names:
            path = rt._dir.log_path(key, name)
            with contextlib.suppress(OSError):
                data = path.read_bytes()
                if len(data) > len(saved[name]):
                    yield from lines(data[len(saved[name]) :], name, len(names))
                    saved[name] = data
            launcher, attempt = where.get(name, (None, ""))
            if launcher is not None:
                if attempts.get(name) != attempt:  # a new attempt: its log from the start
                    attempts[name], offsets[name] = attempt, 0
                with contextlib.suppress(rt._ray.exceptions.RayError, TimeoutError):
                    data, offsets[name] = rt._ray.get(
                        launcher.read_log.remote(attempt, offsets[name]), timeout=10
                    )
                    yield from lines(data, name, len(names))
        if not follow or run is None:
            return
        time.sleep(0.5)
