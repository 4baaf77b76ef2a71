"""Where a RayCluster's pods find each other on the Ray runtime, whatever machine each is on.

A RayCluster's head, workers and (a RayJob's) submitter are pods placed by Ray on any node, so
they cannot meet in a directory: no filesystem is shared between machines. They meet in the outer
Ray cluster itself, through one **detached, named actor** (``Rendezvous``, ``gpuaas-rendezvous``):
the records ``ray_pod`` writes (the head's address and ports, each node's readiness, a RayJob's
end) are kept there by workload, and the Kueue-side reader (``RayRuntime.ray_records``) asks it.
Why an actor: Ray has no public key-value API (``ray.experimental.internal_kv`` is internal),
and an actor is reachable from every node and from the server; the per-node launcher actors
already run every pod, so they relay (``Relay``): each pod gets a directory of its own on its
node (``GPUAAS_RAY_STATE_DIR``), ``ray_pod`` keeps reading and writing its files there exactly as
on the local runtime (no Ray client in the pod, whose ``ray start`` is another cluster), and every
``SYNC_EVERY`` seconds the launcher sends the pod's own records to the actor and writes the other
pods' records (the head's, the end of a RayJob) back into the directory. Each sync sends the
pod's whole set, so an actor that restarted empty (``max_restarts=-1``, its node died) is filled
again within one sync. A pod's records leave the actor when its launcher releases it; a RayJob's
end and its job's last status stay until the workload is forgotten, since the submitter is gone
before the head reads the end.
It decides nothing and starts no process.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from pathlib import Path
from typing import Any

RENDEZVOUS_NAME = "gpuaas-rendezvous"
STATE_DIR_ENV = "GPUAAS_RAY_STATE_DIR"  # the pod's own record directory on its node
NODE_IP_ENV = "GPUAAS_NODE_IP"  # the IP the outer Ray reports for the pod's node
# a RayJob's end and its job's last status: kept after their writer (the submitter) is released
STICKY = ("finished", "submitter")
SYNC_EVERY = 0.2
READ_TIMEOUT = 5.0
Records = dict[str, dict[str, Any]]


class Rendezvous:
    """Runs as a Ray actor; every record by workload key, then by writer (a pod attempt)."""

    def __init__(self) -> None:
        self._records: dict[str, dict[str, Records]] = {}
        self._sticky: dict[str, Records] = {}

    def put(self, key: str, writer: str, records: Records) -> Records:
        """Replace ``writer``'s records of ``key``; answer every record of ``key``."""
        self._records.setdefault(key, {})[writer] = dict(records)
        for stem in STICKY:
            if stem in records:
                self._sticky.setdefault(key, {})[stem] = records[stem]
        return self.read(key)

    def read(self, key: str) -> Records:
        out: Records = dict(self._sticky.get(key, {}))
        for records in self._records.get(key, {}).values():
            out.update(records)
        return out

    def drop(self, key: str, writer: str) -> None:
        """The writer's pod is gone: its records go (a RayJob's end and job status stay)."""
        writers = self._records.get(key, {})
        writers.pop(writer, None)
        if not writers:
            self._records.pop(key, None)

    def clear(self, key: str) -> None:
        """The workload is forgotten: nothing of it stays."""
        self._records.pop(key, None)
        self._sticky.pop(key, None)


def ensure(ray: Any, namespace: str) -> Any:
    """The cluster's rendezvous actor: found by name, or started (once, on any node)."""
    return (
        ray.remote(Rendezvous)
        .options(
            name=RENDEZVOUS_NAME,
            namespace=namespace,
            get_if_exists=True,
            lifetime="detached",
            max_restarts=-1,
            num_cpus=0,
        )
        .remote()
    )


def read(ray: Any, actor: Any, key: str) -> Records | None:
    """The server's read of ``key``'s records; None when the actor cannot answer (restarting,
    or gone: it comes back filled at the launchers' next sync). Raises nothing."""
    try:
        found: Records = ray.get(actor.read.remote(key), timeout=READ_TIMEOUT)
    except Exception:
        return None
    return found


def read_dir(path: Path) -> Records:
    """Every record file (``*.json``) in ``path`` by its stem; unreadable ones are skipped."""
    out: Records = {}
    if not path.is_dir():
        return out
    for file in sorted(path.glob("*.json")):
        try:
            data = json.loads(file.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict):
            out[file.stem] = data
    return out


def write_record(path: Path, data: dict[str, Any]) -> None:
    """Write one record atomically (a reader never sees half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


class PodDir:
    """One Ray pod's directory on this node and the records the relay wrote into it."""

    def __init__(self, key: str, path: Path) -> None:
        self.key, self.path = key, path
        self.relayed: dict[str, dict[str, Any]] = {}  # stem -> what the relay last wrote

    def own(self) -> Records:
        """What the pod itself wrote: every record but those the relay put there."""
        found = read_dir(self.path)
        return {s: r for s, r in found.items() if self.relayed.get(s) != r}

    def take(self, everyone: Records, own: Records) -> None:
        """Write the other pods' records here; remove those that left the rendezvous."""
        for stem, record in everyone.items():
            if stem not in own and self.relayed.get(stem) != record:
                write_record(self.path / f"{stem}.json", record)
                self.relayed[stem] = record
        for stem in [s for s in self.relayed if s not in everyone]:
            with contextlib.suppress(OSError):
                (self.path / f"{stem}.json").unlink()
            del self.relayed[stem]


class Relay:
    """Held by a node's launcher: syncs its Ray pods' directories with the rendezvous actor."""

    def __init__(self, ray: Any, namespace: str) -> None:
        self._ray, self._namespace = ray, namespace
        self._pods: dict[str, PodDir] = {}  # by attempt
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._actor: Any = None

    def add(self, attempt: str, key: str, path: Path) -> None:
        with self._lock:
            self._pods[attempt] = PodDir(key, path)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, daemon=True)
                self._thread.start()

    def remove(self, attempt: str) -> None:
        """The pod was released: its records leave the rendezvous, its directory the node."""
        with self._lock:
            pod = self._pods.pop(attempt, None)
        if pod is None:
            return
        with contextlib.suppress(Exception):
            # a last sync first: a submitter writes the RayJob's end just before it exits, maybe
            # after the loop's last sync, and that end must reach the head (sticky records stay)
            own = pod.own()
            if own:
                self._ray.get(self._rendezvous().put.remote(pod.key, attempt, own), timeout=10)
        with contextlib.suppress(Exception):
            self._ray.get(self._rendezvous().drop.remote(pod.key, attempt), timeout=10)
        for file in pod.path.glob("*"):
            with contextlib.suppress(OSError):
                file.unlink()
        with contextlib.suppress(OSError):
            pod.path.rmdir()

    def _loop(self) -> None:
        while True:
            self._wake.wait(SYNC_EVERY)
            with self._lock:
                pods = list(self._pods.items())
            for attempt, pod in pods:
                try:
                    self._sync(attempt, pod)
                except Exception:  # the actor restarting, or gone: look for it anew next time
                    self._actor = None

    def _sync(self, attempt: str, pod: PodDir) -> None:
        own = pod.own()
        everyone = self._ray.get(self._rendezvous().put.remote(pod.key, attempt, own), timeout=10)
        with self._lock:
            if attempt in self._pods:  # not released meanwhile
                pod.take(everyone, own)

    def _rendezvous(self) -> Any:
        if self._actor is None:  # found, or started if it is gone (Ray gave up restarting it)
            self._actor = ensure(self._ray, self._namespace)
        return self._actor


__all__ = [
    "NODE_IP_ENV",
    "RENDEZVOUS_NAME",
    "STATE_DIR_ENV",
    "PodDir",
    "Records",
    "Relay",
    "Rendezvous",
    "ensure",
    "read",
    "read_dir",
    "write_record",
]
