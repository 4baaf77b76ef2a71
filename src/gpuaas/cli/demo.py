"""``gpuaas demo``: seed 004's GPU preemption, live, on this machine, in under 30 seconds.

It starts a real ``gpuaas server`` as a child process (SQLite in a temporary dir unless
``--data-dir``, the local runtime, 4 fake GPUs when NVML finds none), applies seed 004's setup
(shipped in ``gpuaas.demos``), submits team-b's dev Job (busybox ``sleep 3600`` runs as
``sleep 3600`` here), then team-a's prod Job, and shows the queues, the workloads and their
processes while team-b's Job is preempted (SIGTERM, quota released only once it is gone) and
team-a's starts; then the audit trail (``describe`` of the evicted workload). At the end it
deletes the Jobs, waits for their processes to be gone and stops the server (which stops any pod
left), so nothing outlives it. ``--headless`` prints plain lines (tests, CI); ``--record`` writes
an asciinema v2 cast; ``--list`` shows the other seed demos. The drawing is ``cli.demo_view``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from gpuaas import demos
from gpuaas.cli import printers
from gpuaas.cli.client import Client, ClientError, Config
from gpuaas.cli.demo_view import CastRecorder, Snapshot, changes, screen, workload_state
from gpuaas.inventory import read_nvml_gpus
from gpuaas.server_child import free_port, start_child
from gpuaas.vocab.kinds import BY_KIND, for_api_version

JsonDoc = dict[str, Any]
GPUAAS = "/apis/gpuaas.dev/v1alpha1"
KUEUE = "/apis/kueue.x-k8s.io/v1beta1"
FRAME = 0.2  # seconds between API reads while waiting


class DemoError(Exception):
    """The demo cannot go on; the message says which step and why."""


class Server:
    """A ``gpuaas server`` child process on a free port, in its own session; always stopped."""

    def __init__(self, data_dir: Path, fake_gpus: str | None) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.fake_gpus = fake_gpus
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir / "server.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 30.0) -> str:
        """Start and wait until healthy; returns the admin token. Healthy means this data
        dir's token is accepted (``gpuaas.server_child``: another process may take the free
        port first); a child that lost its port is started again on another."""
        child = start_child(
            self._spawn, self.port, self.data_dir, self.tail, time.monotonic() + timeout
        )
        if child.token is not None:
            return child.token
        if child.proc.poll() is not None:
            raise DemoError(f"the server exited with {child.proc.returncode}: {self.tail()}")
        raise DemoError(f"the server did not answer within {timeout:.0f}s: {self.tail()}")

    def _spawn(self, port: int) -> subprocess.Popen[bytes]:
        self.port = port
        cmd = [sys.executable, "-m", "gpuaas.cli.server", "--data-dir", str(self.data_dir),
               "--port", str(port), "--runtime", "local"]  # fmt: skip
        if self.fake_gpus:
            cmd += ["--fake-gpus", self.fake_gpus]
        env = {k: v for k, v in os.environ.items() if k != "GPUAAS_RUNTIME"}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
            )
        return self.proc

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (the server stops its pods, then exits); SIGKILL only if it hangs."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def tail(self) -> str:
        try:
            return self.log.read_text()[-2000:]
        except OSError:
            return ""


def _fake_gpus_if_none() -> str | None:
    gpus, _ = read_nvml_gpus()
    return None if gpus else "4"


class Demo:
    """The script of seed 004, drawn live, headless or into a cast as it runs (other seeds'
    scripts subclass it: ``cli.demo_workbench``)."""

    demo_id = "004"  # whose packaged manifests ``apply`` reads

    def __init__(
        self,
        client: Client,
        out: Console,
        *,
        headless: bool,
        speed: float,
        cast: CastRecorder | None,
    ) -> None:
        self.client, self.out, self.headless, self.speed = client, out, headless, speed
        self.cast = cast
        self.snap = Snapshot()
        self.caption = ""
        self.audit: str | None = None
        self._live: Live | None = None
        self._prev: Snapshot | None = None

    # -- reading the API ------------------------------------------------------------------------
    def read(self) -> Snapshot:
        c = self.client
        pods = c.request("GET", f"{GPUAAS}/runtime/pods").get("items", [])
        snap = Snapshot(
            queues=c.request("GET", f"{GPUAAS}/clusterqueuestatus").get("items", []),
            workloads=c.request("GET", f"{KUEUE}/workloads").get("items", []),
            pods={f"{p['namespace']}/{p['workload']}": p for p in pods},
            events=c.request("GET", "/api/v1/events").get("items", []),
        )
        snap.events.sort(key=lambda e: int(e["metadata"].get("resourceVersion", 0)))
        return snap

    def state(self, key: str) -> str:
        for doc in self.snap.workloads:
            if f"{doc['metadata'].get('namespace')}/{doc['metadata']['name']}" == key:
                return workload_state(doc, self.snap.pods.get(key))[0]
        return "absent"

    # -- showing --------------------------------------------------------------------------------
    def show(self) -> None:
        self.snap = self.read()
        if self.headless:
            for line in changes(self._prev, self.snap):
                self.out.print(line, markup=False, highlight=False)
            self._prev = self.snap
        frame = screen(self.snap, self.caption, self.audit)
        if self._live is not None:
            self._live.update(frame)
        if self.cast is not None:
            self.cast.frame(frame)

    def step(self, caption: str) -> None:
        self.caption = caption
        if self.headless:
            self.out.print(f"== {caption}", markup=False, highlight=False)
        self.show()

    def wait(self, what: str, done: Callable[[], bool], timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            self.show()
            if done():
                return
            if time.monotonic() > deadline:
                raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(FRAME)

    def hold(self, seconds: float) -> None:
        end = time.monotonic() + seconds / self.speed
        while time.monotonic() < end:
            time.sleep(min(FRAME, max(0.0, end - time.monotonic())))
            self.show()

    @contextmanager
    def live(self) -> Iterator[None]:
        if self.headless:
            yield
            return
        with Live(console=self.out, refresh_per_second=10, transient=False) as live:
            self._live = live
            try:
                yield
            finally:
                self._live = None

    # -- the script -----------------------------------------------------------------------------
    def apply(self, filename: str) -> None:
        for doc in demos.manifests(self.demo_id, filename):
            kind = for_api_version(str(doc.get("apiVersion")), str(doc.get("kind")))
            if kind is None:
                raise DemoError(f"{filename}: no kind {doc.get('kind')} in {doc.get('apiVersion')}")
            ns = (doc.get("metadata") or {}).get("namespace") if kind.namespaced else None
            try:
                self.client.create(kind, ns, doc)
            except ClientError as exc:
                if exc.status != 409:
                    raise DemoError(f"{filename}: {exc}") from exc

    def run(self) -> None:
        trail = ""
        with self.live():
            self.step("Applying seed 004: ClusterQueues team-a-cq, team-b-cq, shared-cq (10 CPU) "
                      "in cohort team-ab; priority classes prod (1000) and dev (100)")  # fmt: skip
            self.apply("setup.yaml")
            self.hold(1.5)
            self.step("team-b submits its dev Job (priority 100): 5 CPU borrowed from shared-cq; "
                      "busybox `sleep 3600` runs as a process here")  # fmt: skip
            self.apply("team-b-job.yaml")
            self.wait("team-b-job to run", lambda: self.state("team-b/team-b-job") == "Running")
            self.hold(3)
            self.step("team-a submits its prod Job (priority 1000): 7 CPU + 2 GPUs; it must "
                      "borrow CPU, and borrowWithinCohort lets it preempt team-b's dev Job")  # fmt: skip
            self.apply("team-a-job.yaml")
            self.wait("team-a-job to run", lambda: self.state("team-a/team-a-job") == "Running")
            self.hold(3)
            self.step("Audit trail: describe workload team-b-job -n team-b")
            self.audit = self.describe("team-b", "team-b-job")
            trail = self.audit
            if self.headless:
                self.out.print(self.audit, markup=False, highlight=False)
            self.hold(5)
            self.audit = None
            self.step("Cleaning up: deleting the Jobs; their processes are stopped")
            for ns, name in (("team-b", "team-b-job"), ("team-a", "team-a-job")):
                self.client.delete(BY_KIND["Job"], ns, name)
            self.wait("every process to be gone", lambda: not self.snap.pods)
        if not self.headless:
            # The live view is cut to the terminal's height (80x24 loses the audit trail's panel)
            # and replaced as the demo goes on: the trail is printed in full once it is over.
            self.out.rule("Audit trail: describe workload team-b-job -n team-b")
            self.out.print(trail, markup=False, highlight=False)

    def describe(self, ns: str, name: str) -> str:
        doc = self.client.get(BY_KIND["Workload"], ns, name)
        events = self.client.events(ns, "Workload", name)
        events.sort(key=lambda e: int(e["metadata"].get("resourceVersion", 0)))
        return printers.describe(doc, events)


def _list(out: Console) -> None:
    table = Table(title="Seed demos", title_justify="left")
    for col in ("id", "what it shows", "here"):
        table.add_column(col)
    for d in demos.CATALOGUE:
        ok, why = d.available()
        table.add_row(d.id, d.title, ("gpuaas demo " + d.id) if ok else why)
    out.print(table)


def demo(
    demo_id: Annotated[str, typer.Argument(metavar="DEMO", help="Which seed demo.")] = "004",
    list_: Annotated[bool, typer.Option("--list", help="List the seed demos and exit.")] = False,
    headless: Annotated[
        bool, typer.Option("--headless", help="Plain lines instead of the live view (CI).")
    ] = False,
    record: Annotated[
        Path | None, typer.Option("--record", help="Write an asciinema v2 recording (.cast).")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Keep the server's data here (default: temp).")
    ] = None,
    speed: Annotated[
        float, typer.Option("--speed", min=0.1, help="Faster pauses between steps (2 = half).")
    ] = 1.0,
) -> None:
    """Run a seed demo live: a real server and real processes, preemption as it happens."""
    if not headless and not sys.stdout.isatty():
        headless = True  # piped or redirected: a live view would keep only its last frame
    out = (
        Console(highlight=False)
        if not headless
        else Console(highlight=False, no_color=True, soft_wrap=True, width=200)
    )
    if list_:
        _list(out)
        return
    info = demos.find(demo_id)
    if info is None:
        typer.echo(f"error: no demo {demo_id!r}; see gpuaas demo --list", err=True)
        raise typer.Exit(1)
    ok, why = info.available()
    if not ok:
        typer.echo(f"demo {demo_id} does not run live: {why}", err=True)
        raise typer.Exit(1)
    with tempfile.TemporaryDirectory(prefix="gpuaas-demo-") as tmp:
        target = (data_dir or Path(tmp)).expanduser()
        target.mkdir(parents=True, exist_ok=True)
        if demo_id == "002":  # four servers: its own runner (cli.demo_ocm)
            _run_ocm(target, out, speed=speed)
            return
        _run(target, out, headless=headless, speed=speed, record=record, demo_id=demo_id)


def _run_ocm(data_dir: Path, out: Console, *, speed: float) -> None:
    from gpuaas.cli.demo_ocm import run_ocm_demo  # it imports this module's Server

    try:
        run_ocm_demo(data_dir, out, speed=speed)
    except (DemoError, ClientError) as exc:
        typer.echo(f"gpuaas demo: {exc}", err=True)
        raise typer.Exit(1) from exc
    except KeyboardInterrupt:
        typer.echo("gpuaas demo: interrupted; stopping the servers and their processes", err=True)
        raise typer.Exit(130) from None
    out.print("demo finished: the four servers and every process they started are gone",
              markup=False)  # fmt: skip


def _script(demo_id: str) -> type[Demo]:
    if demo_id == "001":
        from gpuaas.cli.demo_workbench import WorkbenchDemo  # it subclasses Demo

        return WorkbenchDemo
    return Demo


def _run(
    data_dir: Path,
    out: Console,
    *,
    headless: bool,
    speed: float,
    record: Path | None,
    demo_id: str = "004",
) -> None:
    server = Server(data_dir, _fake_gpus_if_none())
    cast = CastRecorder(record) if record is not None else None
    client: Client | None = None
    try:
        token = server.start()
        if headless:
            out.print(f"server {server.url} (data in {data_dir})", markup=False)
        client = Client(Config(server=server.url, token=token))
        _script(demo_id)(client, out, headless=headless, speed=speed, cast=cast).run()
    except (DemoError, ClientError) as exc:
        typer.echo(f"gpuaas demo: {exc}", err=True)
        raise typer.Exit(1) from exc
    except KeyboardInterrupt:
        typer.echo("gpuaas demo: interrupted; stopping the server and its processes", err=True)
        raise typer.Exit(130) from None
    finally:
        if client is not None:
            client.close()
        server.stop()
        if cast is not None:
            cast.close()
    out.print("demo finished: the server and every process it started are gone", markup=False)


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the root app."""
    app.command("demo")(demo)
