"""The Ray runtime's view of its per-node launchers, and of the resources its groups give back.

This module owns two pieces of the Ray runtime's bookkeeping that talk to Ray but decide
nothing: ``Launchers``, the handles of the detached ``ray_actor.NodeLauncher`` actors (one per
node, found by name or started once, with ``num_cpus=0`` so they never hold a pod's resources)
with one outstanding ``watch`` call each, and ``Release``, the wait after a placement group is
removed until Ray's resource view shows its resources free again. Ray places a new group at once
only if its view already has room; a group asked for a moment too early waits for Ray's retry
back-off (0.7-1 s measured here), which would be on the critical path of every preemption (the
preemptor's group is created as soon as the victim's quota is released). The runtime therefore
reports a run ended only when its resources are back in that view, or after ``RELEASE_WAIT``.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from gpuaas.runtimes.ray_actor import LAUNCHER_PREFIX, launcher_name

WATCH_TIMEOUT = 5.0
RELEASE_WAIT = 1.5  # seconds: past this a run is reported ended anyway (another took the room)


@dataclass(slots=True)
class _Launcher:
    handle: Any
    version: int = -1
    watch: Any = None  # the ObjectRef of its outstanding ``watch`` call


class Launchers:
    def __init__(self, ray: Any, namespace: str) -> None:
        from gpuaas.runtimes.ray_actor import NodeLauncher

        self._ray = ray
        self._namespace = namespace
        self._class = ray.remote(NodeLauncher)
        self._known: dict[str, _Launcher] = {}

    def get(self, node_id: str) -> Any:
        """The launcher of ``node_id``: known, found by name, or started there (once)."""
        known = self._known.get(node_id)
        if known is None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            handle = self._class.options(
                name=launcher_name(node_id),
                namespace=self._namespace,
                get_if_exists=True,
                lifetime="detached",
                max_restarts=0,
                max_concurrency=32,
                num_cpus=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            ).remote()
            known = self._known[node_id] = _Launcher(handle)
            known.watch = handle.watch.remote(known.version, 0.0)
        return known.handle

    def known(self, node_id: str) -> Any | None:
        """The launcher of ``node_id`` if this runtime knows it alive, else None."""
        known = self._known.get(node_id)
        return None if known is None else known.handle

    def find(self, node_id: str) -> Any | None:
        """An existing launcher of ``node_id`` (after a server restart), else None."""
        if node_id in self._known:
            return self._known[node_id].handle
        try:
            self._ray.get_actor(launcher_name(node_id), namespace=self._namespace)
        except ValueError:
            return None
        return self.get(node_id)

    def warm(self, node_ids: list[str]) -> None:
        """Start the launchers of these nodes now (asynchronously), so no pod waits for one."""
        for node_id in node_ids:
            with contextlib.suppress(Exception):
                self.get(node_id)

    def answers(self) -> tuple[list[tuple[str, dict[str, dict[str, Any]]]], list[str]]:
        """The watches that answered: (node id, every pod's state on it), and the nodes whose
        launcher died (its node or raylet died, or it was killed); issue the next watches."""
        refs = {k.watch: (node_id, k) for node_id, k in self._known.items() if k.watch}
        if not refs:
            return [], []
        ready, _ = self._ray.wait(list(refs), num_returns=len(refs), timeout=0)
        got, dead = [], []
        for ref in ready:
            node_id, known = refs[ref]
            known.watch = None
            try:
                known.version, states = self._ray.get(ref)
            except self._ray.exceptions.ActorUnavailableError:
                pass  # unreachable for a moment (a busy or restarting raylet): ask again
            except self._ray.exceptions.RayError:
                del self._known[node_id]
                dead.append(node_id)
                continue
            else:
                got.append((node_id, states))
            known.watch = known.handle.watch.remote(known.version, WATCH_TIMEOUT)
        return got, dead

    def forget(self, node_id: str) -> None:
        self._known.pop(node_id, None)

    def named(self) -> list[str]:
        """Node ids of every gpuaas launcher alive on the cluster (by their names)."""
        names = self._ray.util.list_named_actors()
        return [n[len(LAUNCHER_PREFIX) :] for n in names if n.startswith(LAUNCHER_PREFIX)]

    def stop_all(self) -> None:
        """Kill every known launcher (graceful server stop: their pods are gone already)."""
        for known in self._known.values():
            with contextlib.suppress(Exception):
                self._ray.kill(known.handle, no_restart=True)
        self._known.clear()


@dataclass(slots=True)
class Release:
    """A run whose group was removed, waiting for its resources to show free in Ray's view."""

    event: Any  # the RuntimeEvent to emit once released
    wanted: dict[str, dict[str, float]]  # node id -> resource -> free amount to wait for
    status: Any = None  # the run's last WorkloadRun: still shown by ``running()`` meanwhile
    deadline: float = field(default_factory=lambda: time.monotonic() + RELEASE_WAIT)

    def done(self, free: dict[str, dict[str, float]] | None) -> bool:
        if free is None or time.monotonic() >= self.deadline:
            return True
        return all(
            free.get(node, {}).get(name, 0.0) >= amount - 1e-6
            for node, need in self.wanted.items()
            for name, amount in need.items()
        )


def free_per_node(ray: Any) -> dict[str, dict[str, float]] | None:
    """Ray's view of each node's free resources (one GCS call); None if Ray cannot say.

    A private module, kept on purpose: no public Ray API (checked with Ray 2.60) gives free
    resources per node. ``ray.available_resources()`` is the whole cluster's sum, which cannot
    tell that the removed group's node has its room back; ``ray.nodes()`` and
    ``ray.util.state.list_nodes()`` give only each node's totals (``resources_total``)."""
    try:
        from ray._private import state

        found = state.available_resources_per_node()  # type: ignore[no-untyped-call]
    except Exception:  # an API Ray may move: then the runtime simply does not wait
        return None
    return {str(n): {str(k): float(v) for k, v in r.items()} for n, r in found.items()}
