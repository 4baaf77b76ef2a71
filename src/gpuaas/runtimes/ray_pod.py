"""Inside a Ray pod: pick ports, run ``ray start --block``, record the address, stop it whole.

``python -m gpuaas.runtimes.ray_pod head|worker --state-dir D --run R --pod P -- ray start ...``
is the command ``ray_plan`` gives a RayCluster's (or a RayJob's cluster's) pod, and
``... submitter ... -- ray job submit ... -- ENTRYPOINT`` a RayJob's submitter pod. It owns what KubeRay does around
``ray start`` in a real cluster:

- the IP: Ray listens on the pod's node's IP (``GPUAAS_NODE_IP``, set by the Ray runtime's
  launcher to the IP the outer Ray reports for the node; 127.0.0.1 on the local runtime), which
  replaces the plan's ``--node-ip-address`` and ``--dashboard-host``;
- ports: free ones on that IP are picked when the pod starts (GCS, dashboard, client server, the
  dashboard agent, the raylet), so two clusters on one host never clash;
- the address: the head writes ``D/head.json`` (run id, IP, ports, ready); workers wait for the
  head of their own run to answer at its IP, as KubeRay's ``wait-gcs-ready`` init container does,
  and each writes ``D/worker-<pod>.json``; ``ready`` turns true once ``ray start`` says it is up
  and the node's dashboard agent answers. ``D`` is ``--state-dir`` (the workload's directory,
  shared by every pod on the local runtime) or, on the Ray runtime, ``GPUAAS_RAY_STATE_DIR``: the
  pod's own directory on its node, which its launcher keeps in step with the other pods' through
  the outer Ray cluster (``ray_rendezvous``), so nodes on other machines meet;
- a RayJob: the submitter waits for its head and dashboard, submits the entrypoint and follows
  it, writing the Ray job's id and status as the cluster's Jobs API says (``D/submitter.json``,
  read each second); its exit code is the pod's; when the job succeeded it writes
  ``D/finished.json`` and the cluster's nodes stop and exit 0, so the workload succeeds (Kueue
  requires ``shutdownAfterJobFinishes``: the cluster goes with the job);
- stopping: Ray's core workers put themselves in process groups of their own, so SIGTERM to the
  pod's group does not reach them and, once the raylet is gone, they linger, holding GPU memory.
  On SIGTERM (or when ``ray start`` ends) this launcher waits for ``ray start`` (up to
  ``--stop-after`` seconds, less than the pod's grace period), then SIGKILLs every process left in
  the pod's session and waits until they are gone, so the pod ends only when all of Ray has.

Each node removes its Ray temp dir when it ends. ``read_states`` is the reader the server uses.
It decides nothing about admission and never signals a process outside its pod's session.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

import psutil

from gpuaas.runtimes import procs
from gpuaas.runtimes.ray_rendezvous import NODE_IP_ENV, STATE_DIR_ENV, read_dir, write_record

HEAD_FILE = "head.json"
FINISHED_FILE = "finished.json"  # a RayJob's submitter writes it when the job succeeded
SUBMITTER_FILE = "submitter.json"  # the RayJob's job, as the submitter last read it
_JOB_POLL = 1.0  # seconds between two reads of the Ray job's status
# seconds ``ray job submit``'s log tail gets to end once the job itself has ended: the tail now
# and then never returns (seen here), and KubeRay too reads the job's status, not the tail
_TAIL_GRACE = 10.0
_JOB_ENDED = {"SUCCEEDED", "FAILED", "STOPPED"}
LOOPBACK = "127.0.0.1"
_POLL = 0.1
_WAIT_NOTE_EVERY = 10.0
_SWEEP_TIMEOUT = 5.0
STOPPED_EXIT = 128 + signal.SIGTERM
_BANNER = b"will now block forever"  # `ray start --block`, once its node is up
_BANNER_FALLBACK = 30.0  # seconds a node answers without that line before it counts as up


def state_file(state_dir: Path, role: str, pod: str) -> Path:
    if role == "submitter":
        return state_dir / SUBMITTER_FILE
    return state_dir / (HEAD_FILE if role == "head" else f"worker-{pod}.json")


def job_info(dashboard: str) -> dict[str, Any] | None:
    """The Ray job on the cluster at ``dashboard`` (its Jobs REST API, ``/api/jobs/``): the one
    submitted last, as a RayJob's cluster runs one; None if the dashboard does not answer."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"{dashboard}/api/jobs/", timeout=2) as r:
            jobs = json.loads(r.read())
    except (OSError, ValueError):
        return None
    jobs = [j for j in jobs if isinstance(j, dict)] if isinstance(jobs, list) else []
    return max(jobs, key=lambda j: j.get("start_time") or 0) if jobs else None


def read_states(state_dir: Path) -> dict[str, dict[str, Any]]:
    """Every Ray pod's record in ``state_dir``, by file stem (``head``, ``worker-<pod>``)."""
    return read_dir(state_dir)


def node_ip() -> str:
    """The IP this pod's Ray listens on: its node's, as the outer Ray reports it (the Ray
    runtime's launcher says so in ``GPUAAS_NODE_IP``), else 127.0.0.1 (the local runtime)."""
    return os.environ.get(NODE_IP_ENV) or LOOPBACK


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct free ports on ``host`` (all held open until all are chosen)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind((host, 0))
            socks.append(s)
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def answers(port: int, host: str = LOOPBACK) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _dashboard_answers(host: str, port: int) -> bool:
    """The Ray dashboard's HTTP API answers (``ray job submit`` needs it, not just the port)."""
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{host}:{port}/api/version", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


class _Launcher:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.role: str = args.role
        # on the Ray runtime: the pod's own directory on its node, relayed (``ray_rendezvous``)
        self.state_dir = Path(os.environ.get(STATE_DIR_ENV) or args.state_dir)
        self.ip = node_ip()
        self.path = state_file(self.state_dir, self.role, args.pod)
        self.stopping = False
        self.record: dict[str, Any] = {}
        self._answered_at: float | None = None

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stopping = True

    def run(self) -> int:
        ray_argv = list(self.args.ray)
        if not ray_argv:
            print("ray_pod: no `ray` command after --", file=sys.stderr, flush=True)
            return 2
        if self.role == "submitter":
            return self._submit(ray_argv)
        child: subprocess.Popen[bytes] | None = None
        code = STOPPED_EXIT
        try:
            # 1. a worker waits for the head of its own run; the head needs nothing
            head = None if self.role == "head" else self._wait_for_head()
            if self.role != "head" and head is None:
                return 0 if self._finished() else STOPPED_EXIT
            # 2. ports, then the record (not ready yet), then `ray start`
            ray_argv = [_on_ip(a, self.ip) for a in ray_argv] + self._ports(head)
            self._write(ready=False)
            child = subprocess.Popen(
                ray_argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
            started = threading.Event()
            relay = threading.Thread(target=_relay, args=(child, started), daemon=True)
            relay.start()
            # 3. ready once `ray start` is up; over when it ends or we are stopped
            finished = False
            while child.poll() is None and not self.stopping:
                if not self.record["ready"] and self._is_up(started):
                    self._write(ready=True)
                    print(f"ray_pod: {self.role} ready: {self._summary()}", flush=True)
                if self._finished():  # the RayJob is done: its cluster shuts down, as KubeRay's
                    print("ray_pod: the RayJob succeeded: stopping this node", flush=True)
                    finished = self.stopping = True
                    child.send_signal(signal.SIGTERM)
                    break
                time.sleep(_POLL)
            code = self._stop(child)
            code = 0 if finished else code  # a finished RayJob's nodes end cleanly
            self._sweep()  # first: what is left may hold the relay's pipe open
            relay.join(timeout=1.0)
        finally:
            self._sweep()
            with contextlib.suppress(OSError):
                self.path.unlink()
            if self.args.temp_dir:  # Ray's session files (its logs are in the pod's log too)
                shutil.rmtree(self.args.temp_dir, ignore_errors=True)
        return code

    def _wait_for_head(self) -> dict[str, Any] | None:
        started = last_note = time.monotonic()
        head_path = state_file(self.state_dir, "head", "")
        while not self.stopping and not self._finished():
            head = read_states(self.state_dir).get(head_path.stem)
            mine = head is not None and head.get("run") == self.args.run
            host = str(head.get("nodeIP") or LOOPBACK) if head is not None else LOOPBACK
            if head is not None and mine and answers(int(head["ports"]["gcs"]), host):
                if self.role != "submitter":
                    return head
                dashboard = head["ports"].get("dashboard")
                if dashboard is None:
                    print("ray_pod: the RayJob's head has no dashboard to submit to", flush=True)
                    return None
                if head.get("ready") and _dashboard_answers(host, int(dashboard)):
                    return head
            if time.monotonic() - last_note >= _WAIT_NOTE_EVERY:
                last_note = time.monotonic()
                waited = int(last_note - started)
                print(f"ray_pod: waiting for the Ray head ({waited}s)", flush=True)
            time.sleep(_POLL * 2)
        return None

    def _ports(self, head: dict[str, Any] | None) -> list[str]:
        if head is None:
            gcs, client, agent, node, dash = free_ports(5, self.ip)
            ports = {"gcs": gcs, "client": client, "agent": agent, "nodeManager": node}
            flags = [f"--port={gcs}", f"--ray-client-server-port={client}"]
            if self.args.dashboard:
                ports["dashboard"] = dash
                flags.append(f"--dashboard-port={dash}")
        else:
            agent, node = free_ports(2, self.ip)
            ports = {"agent": agent, "nodeManager": node}
            flags = [f"--address={head.get('nodeIP') or LOOPBACK}:{int(head['ports']['gcs'])}"]
        flags += [f"--dashboard-agent-listen-port={agent}", f"--node-manager-port={node}"]
        self.record = {
            "run": self.args.run,
            "role": self.role,
            "pod": self.args.pod,
            "pid": os.getpid(),
            "nodeIP": self.ip,
            "ports": ports,
            "readyPort": agent,  # the dashboard agent answers once its raylet has registered
            "ready": False,
        }
        return flags

    def _finished(self) -> bool:
        """This run's RayJob succeeded (its submitter said so)."""
        try:
            data = json.loads((self.state_dir / FINISHED_FILE).read_text())
        except (OSError, ValueError):
            return False
        return isinstance(data, dict) and data.get("run") == self.args.run

    def _submit(self, argv: list[str]) -> int:
        """The RayJob's submitter: once its cluster's head and dashboard answer, ``ray job
        submit`` the entrypoint there and follow it; its exit code is the pod's. On success the
        cluster is told to shut down (``finished.json``), as KubeRay deletes a finished RayJob's
        cluster (Kueue requires ``shutdownAfterJobFinishes``)."""
        head = self._wait_for_head()
        if head is None:
            return 1 if not self.stopping else STOPPED_EXIT
        split = argv.index("--") if "--" in argv else len(argv)
        host = head.get("nodeIP") or LOOPBACK
        dashboard = f"http://{host}:{int(head['ports']['dashboard'])}"
        argv = [*argv[:split], f"--address={dashboard}", *argv[split:]]
        print(f"ray_pod: submitting the RayJob's entrypoint to {dashboard}", flush=True)
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)
        read_at = 0.0
        ended_at: float | None = None  # when the job's own status said it ended
        while child.poll() is None and not self.stopping:
            if time.monotonic() - read_at >= _JOB_POLL:
                read_at = time.monotonic()
                self._record_job(dashboard)
                if ended_at is None and self.record.get("jobStatus") in _JOB_ENDED:
                    ended_at = time.monotonic()
            if ended_at is not None and time.monotonic() - ended_at > _TAIL_GRACE:
                break
            time.sleep(_POLL)
        self._record_job(dashboard)  # the job's last status (what it ended as)
        if child.poll() is None and not self.stopping:  # the job ended, its log tail did not
            status = str(self.record.get("jobStatus"))
            print(f"ray_pod: the Ray job ended {status}; its log tail did not, stopped", flush=True)
            child.kill()
            child.wait()
            child.returncode = 0 if status == "SUCCEEDED" else 1
        if child.poll() is None:  # stopped: the cluster goes too
            child.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(timeout=5)
            child.kill()
            child.wait()
            self._sweep()
            return STOPPED_EXIT
        self._sweep()
        if child.returncode == 0:
            path = self.state_dir / FINISHED_FILE
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps({"run": self.args.run, "time": time.time()}))
            os.replace(tmp, path)
        return child.returncode

    def _record_job(self, dashboard: str) -> None:
        """Write the submitter's record: the Ray job's id and status (PENDING, RUNNING,
        SUCCEEDED, FAILED, STOPPED), read from the cluster, as KubeRay reads them."""
        info = job_info(dashboard)
        if info is None:
            return
        record = {
            "run": self.args.run,
            "role": "submitter",
            "pod": self.args.pod,
            "dashboardURL": dashboard,
            "jobId": str(info.get("submission_id") or info.get("job_id") or ""),
            "jobStatus": str(info.get("status") or ""),
            "message": str(info.get("message") or ""),
        }
        if record != self.record:
            self.record = record
            write_record(self.path, record)

    def _is_up(self, started: threading.Event) -> bool:
        """``ray start`` said it now blocks (its node is registered) and the node answers."""
        if not answers(self.record["readyPort"], self.ip):
            self._answered_at = None
            return False
        if started.is_set():
            return True
        # A Ray that words its banner differently: trust the port once it has answered a while.
        now = time.monotonic()
        self._answered_at = self._answered_at or now
        return now - self._answered_at >= _BANNER_FALLBACK

    def _write(self, *, ready: bool) -> None:
        self.record["ready"] = ready
        self.record["time"] = time.time()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.record, sort_keys=True))
        os.replace(tmp, self.path)

    def _summary(self) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(self.record["ports"].items()))

    def _stop(self, child: subprocess.Popen[bytes]) -> int:
        """``ray start`` ends by itself (its code) or on our stop (it got SIGTERM with us).

        A Ray that is still starting sits in a blocking call and handles SIGTERM only when that
        returns, which can take most of the grace period: there is nothing to drain yet, so it
        is killed at once. A started one gets ``--stop-after`` seconds to stop by itself.
        """
        if child.poll() is not None:
            return child.returncode if not self.stopping else STOPPED_EXIT
        # No second SIGTERM: the pod's group got one, and Ray's handler does not take two.
        wait = self.args.stop_after if self.record.get("ready") else 0.0
        deadline = time.monotonic() + wait
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(_POLL)
        if child.poll() is None:
            child.kill()
            child.wait()
        return STOPPED_EXIT

    def _sweep(self) -> None:
        """SIGKILL what is left of Ray in this pod's session, and wait until it is gone."""
        deadline = time.monotonic() + _SWEEP_TIMEOUT
        left = _session_leftovers()
        while left and time.monotonic() < deadline:
            for pid in left:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
            left = _session_leftovers()
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass


def _on_ip(arg: str, ip: str) -> str:
    """``ray start``'s flags that name the node's IP, set to ``ip`` (the plan says 127.0.0.1)."""
    for flag in ("--node-ip-address=", "--dashboard-host="):
        if arg.startswith(flag):
            return flag + ip
    return arg


def _relay(child: subprocess.Popen[bytes], started: threading.Event) -> None:
    """Copy ``ray start``'s output to the pod's log; note the line saying it is up."""
    assert child.stdout is not None
    out = sys.stdout.buffer
    for line in child.stdout:
        if _BANNER in line:
            started.set()
        with contextlib.suppress(OSError):
            out.write(line)
            out.flush()


def _session_leftovers() -> list[int]:
    """Live processes of this session but this one and its ancestors (the pod's wrapper and
    ``pod_init``).

    Only when the session is the pod's own (its leader is an ancestor of ours within a few
    steps: the runtime's ``setsid`` pod_init, then its wrapper): run by hand from a terminal, the
    session is the terminal's, and nothing is swept.
    """
    sid, me = os.getsid(0), os.getpid()
    ancestors = {me}
    with contextlib.suppress(psutil.Error):
        for parent in psutil.Process(me).parents()[:3]:
            ancestors.add(parent.pid)
    if sid not in ancestors:
        return []
    return procs.live_with_stat_field(procs.SESSION_FIELD, sid, spare=frozenset(ancestors))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpuaas.runtimes.ray_pod")
    parser.add_argument("role", choices=["head", "worker", "submitter"])
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--pod", required=True)
    parser.add_argument("--stop-after", type=float, default=10.0)
    parser.add_argument("--dashboard", action="store_true")
    parser.add_argument("--temp-dir", default="")
    argv = list(sys.argv[1:] if argv is None else argv)
    split = argv.index("--") if "--" in argv else len(argv)
    args = parser.parse_args(argv[:split])
    args.ray = argv[split + 1 :]
    launcher = _Launcher(args)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, launcher.on_signal)
    return launcher.run()


if __name__ == "__main__":
    sys.exit(main())
