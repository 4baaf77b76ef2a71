"""Durable-write throughput of ``gpuaas server``, printed beside Slurm's ``sbatch``.

Every acknowledged create is durable (SQLite with synchronous=FULL in WAL mode, or a PostgreSQL
commit). This script starts a real server (``--runtime none``: admission only, telemetry on) and
drives it with a load generator that runs outside the server's process: Debian's ``wrk`` with a
Lua script posting distinct Workloads when it is installed, else client processes with httpx
keep-alive. It prints the generator's CPU share beside the server's, so a reader can see which of
the two was the bottleneck on this machine. Figures, each on its own line:

1. creates/s and p50/p99 latency with 1 client and with 32 clients, on an empty server;
2. the same at ``--admitted`` admitted workloads, the issue's point: a fresh server is filled to
   exactly that many before its 1-client run (its 32-client run follows at that many plus the
   1-client run's), each rate compared with the empty-server rate of the same run; beside it,
   the harsher figure on the empty runs' own server, at whatever count those runs left
   (at least ``--admitted``): every line says the count it was measured at;
3. on a fresh server, 32 clients without and then with ``--watches`` open watches and
   ``--streams`` dashboard streams (read as fast as they come, by a separate process);
4. the server's RSS as workloads accumulate, up to ``--rss-workloads``.

Slurm's sbatch rates are quoted from issue 18 and ``../shared/bench/slurm/README.md`` (measured on
this kind of machine): starting Slurm here needs its packages, MariaDB and munge.

Usage:
    python bench/api.py [--duration 8] [--admitted 10000] [--watches 1000] [--streams 300]
                        [--rss-workloads 100000] [--db postgresql://postgres@127.0.0.1:5432/test]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx

from gpuaas.api.testing import ServerProcess
from machine import python_speed  # bench/machine.py: this script's own directory

NS = "bench"
WORKLOADS = f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads"
CQ = "/apis/kueue.x-k8s.io/v1beta1/clusterqueues/cq"
QUOTA = 10_000_000  # every bench workload is admitted: the point is a growing admitted set

SETUP = [
    ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}),
    (
        "/apis/kueue.x-k8s.io/v1beta1/resourceflavors",
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
         "metadata": {"name": "rf"}},
    ),
    (
        "/apis/kueue.x-k8s.io/v1beta1/clusterqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "ClusterQueue",
            "metadata": {"name": "cq"},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": QUOTA}]}
                        ],
                    }
                ],
            },
        },
    ),
    (
        f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/localqueues",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta1",
            "kind": "LocalQueue",
            "metadata": {"name": "lq", "namespace": NS},
            "spec": {"clusterQueue": "cq"},
        },
    ),
]  # fmt: skip

SBATCH_QUOTED = (
    "sbatch (quoted, not run here: issue 18 and ../shared/bench/slurm/README.md, same kind of "
    "machine): sequential 188-253/s (README: 191/s); 8 submitters 366-370/s (README: 302/s with 4)"
)
SBATCH_SEQ, SBATCH_8 = 253.0, 370.0  # the best quoted figures: targets are ratios to these


def workload(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]
                        }
                    },
                }
            ],
        },
    }


@dataclass(slots=True)
class Result:
    clients: int
    created: int
    errors: int
    wall: float
    p50_ms: float
    p99_ms: float
    gen_cpu: float  # generator CPU seconds
    srv_cpu: float  # server CPU seconds

    @property
    def rate(self) -> float:
        return self.created / self.wall if self.wall else 0.0

    def line(self, label: str) -> str:
        cores = os.cpu_count() or 1
        return (
            f"  {label:<34} {self.clients:>2} client(s): {self.rate:7,.0f} creates/s  "
            f"p50 {self.p50_ms:6.1f} ms  p99 {self.p99_ms:7.1f} ms  "
            f"(generator {100 * self.gen_cpu / self.wall / cores:3.0f}% of {cores} cores, "
            f"server {100 * self.srv_cpu / self.wall / cores:3.0f}%, "
            f"{1000 * self.srv_cpu / max(self.created, 1):.2f} ms CPU/create"
            + (f", {self.errors} errors)" if self.errors else ")")
        )


def proc_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (and its reaped children) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(f) for f in fields[11:15]) / ticks


def machine_ticks() -> tuple[int, int]:
    """(busy, all) CPU ticks of the whole machine so far, from /proc/stat."""
    ticks = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- the load generator: wrk with Lua ---------------------------------------------------------------
LUA = """
local counter = 0
local threads = {}
local template = [[%s]]
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  prefix = args[1]
  hdrs = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. args[2]}
end
function request()
  counter = counter + 1
  local body = string.gsub(template, "NAME", prefix .. "-" .. tid .. "-" .. counter)
  return wrk.format("POST", "%s", hdrs, body)
end
function done(summary, latency, requests)
  local errs = summary.errors.status + summary.errors.connect + summary.errors.read
             + summary.errors.write + summary.errors.timeout
  io.write(string.format("RESULT %%d %%d %%d %%d %%d\\n", summary.requests, errs,
    summary.duration, latency:percentile(50), latency:percentile(99)))
end
"""


def run_wrk(url: str, token: str, clients: int, duration: float, srv_pid: int) -> Result:
    template = json.dumps(workload("NAME"))
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(LUA % (template, WORKLOADS))
        script = f.name
    prefix = "w" + uuid.uuid4().hex[:8]
    threads = min(clients, 2)
    cmd = ["wrk", f"-t{threads}", f"-c{clients}", f"-d{max(1, round(duration))}s", "--timeout", "30s",
           "-s", script, url, "--", prefix, token]  # fmt: skip
    s0 = proc_cpu(srv_pid)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    out = proc.stdout.read() if proc.stdout else ""
    wall = time.perf_counter() - t0
    s1 = proc_cpu(srv_pid)
    os.unlink(script)
    line = next((x for x in out.splitlines() if x.startswith("RESULT")), None)
    if line is None:
        raise RuntimeError(f"wrk failed: {out} {proc.stderr.read() if proc.stderr else ''}")
    n, errs, dur_us, p50, p99 = (int(x) for x in line.split()[1:])
    del wall
    return Result(clients, n - errs, errs, dur_us / 1e6, p50 / 1000, p99 / 1000,
                  usage.ru_utime + usage.ru_stime, s1 - s0)  # fmt: skip


# -- the fallback generator: httpx clients in separate processes ----------------------------------
def _client_proc(url: str, token: str, per_client: int, threads: int, out: Any) -> None:
    import threading

    lat: list[float] = []
    lock = threading.Lock()
    errors = [0]

    def one() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(headers=headers, timeout=60) as c:
            for _ in range(per_client):
                t0 = time.perf_counter()
                r = c.post(url + WORKLOADS, json=workload(f"p-{uuid.uuid4().hex[:12]}"))
                dt = time.perf_counter() - t0
                with lock:
                    if r.status_code == 201:
                        lat.append(dt)
                    else:
                        errors[0] += 1

    ts = [threading.Thread(target=one) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put((lat, errors[0]))


def run_processes(url: str, token: str, clients: int, total: int, srv_pid: int) -> Result:
    procs_n = min(clients, 4)
    per_proc_threads = max(1, clients // procs_n)
    per_client = max(1, total // (procs_n * per_proc_threads))
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    s0 = proc_cpu(srv_pid)
    t0 = time.perf_counter()
    before = os.times()
    ps = [
        ctx.Process(target=_client_proc, args=(url, token, per_client, per_proc_threads, q))
        for _ in range(procs_n)
    ]
    for p in ps:
        p.start()
    lat: list[float] = []
    errs = 0
    for _ in ps:
        got, e = q.get()
        lat += got
        errs += e
    for p in ps:
        p.join()
    wall = time.perf_counter() - t0
    after = os.times()
    gen = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    lat.sort()
    p99 = lat[int(0.99 * (len(lat) - 1))] * 1000 if lat else 0.0
    med = statistics.median(lat) * 1000 if lat else 0.0
    return Result(clients, len(lat), errs, wall, med, p99, gen, proc_cpu(srv_pid) - s0)


class Bench:
    def __init__(self, srv: ServerProcess, duration: float, use_wrk: bool) -> None:
        self.srv, self.duration, self.use_wrk = srv, duration, use_wrk
        self.token = srv.admin_token
        self.created = 0
        assert srv.proc is not None
        self.pid = srv.proc.pid
        self.http = httpx.Client(
            base_url=srv.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=120
        )

    def setup(self) -> None:
        for path, doc in SETUP:
            r = self.http.post(path, json=doc)
            if r.status_code != 409:
                r.raise_for_status()

    def load(self, clients: int, duration: float | None = None) -> Result:
        duration = duration or self.duration
        if self.use_wrk:
            res = run_wrk(self.srv.url, self.token, clients, duration, self.pid)
        else:  # a count, sized to last about ``duration`` at 300 creates/s per... client mix
            res = run_processes(self.srv.url, self.token, clients, int(duration * 400), self.pid)
        self.created += res.created
        try:
            self.settled()
        except (RuntimeError, httpx.HTTPError) as exc:  # say so, and measure the rest
            print(f"  (not settled: {exc})", flush=True)
        return res

    def settled(self, timeout: float = 300.0) -> None:
        """Wait until every created workload is admitted (the ClusterQueue's own count)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                st = self.http.get(CQ).json().get("status", {})
            except httpx.TransportError:  # a keep-alive connection the server closed while idle
                continue
            if int(st.get("admittedWorkloads", 0)) >= self.created:
                return
            time.sleep(0.2)
        raise RuntimeError(f"{self.created} created, not all admitted in {timeout}s")

    def admitted(self) -> int:
        """The ClusterQueue's admitted count once it has stopped moving for half a second."""
        last = -1
        while True:
            now = int(self.http.get(CQ).json().get("status", {}).get("admittedWorkloads", 0))
            if now == last:
                return now
            last = now
            time.sleep(0.5)

    def fill(self, target: int) -> None:
        """Create workloads (32 clients) until at least ``target`` exist."""
        while self.created < target:
            rate = max(self.created / 10, 200.0)
            secs = min(60.0, max(2.0, (target - self.created) / max(rate, 200.0)))
            r = self.load(32, secs)
            rate = r.rate
            del rate

    def fill_exactly(self, target: int, topup: int = 3000) -> None:
        """Create workloads until exactly ``target`` exist, all admitted.

        The generator runs for whole seconds (wrk) or a share of a count (processes): it fills
        while more than ``topup`` are missing, in runs sized to stop short of ``target`` at the
        last run's rate; 8 keep-alive clients then create exactly the rest.
        """
        rate = 0.0  # unknown: the first run is one second long, and sizes the next ones
        while target - self.created > topup:
            secs = 1.0 if not rate else max(1.0, 0.7 * (target - self.created - topup) / rate)
            if self.use_wrk:
                secs = max(1.0, float(int(secs)))  # wrk's -d is whole seconds: rounded down
            r = self.load(32, secs)
            rate = max(r.rate, 100.0)
            self.created = self.admitted()  # wrk leaves out the creates in flight at its end
        missing = target - self.created
        if missing < 0:
            raise RuntimeError(f"filled past {target}: {self.created} created")
        names = iter(range(missing))
        lock = threading.Lock()
        failed: list[str] = []

        def client() -> None:
            with httpx.Client(base_url=self.srv.url, timeout=120,
                              headers={"Authorization": f"Bearer {self.token}"}) as c:  # fmt: skip
                while True:
                    with lock:
                        i = next(names, None)
                    if i is None:
                        return
                    r = c.post(WORKLOADS, json=workload(f"fill-{uuid.uuid4().hex[:8]}-{i}"))
                    if r.status_code != 201:
                        failed.append(f"{r.status_code} {r.text[:200]}")

        threads = [threading.Thread(target=client) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if failed:
            raise RuntimeError(f"{len(failed)} fill creates failed: {failed[0]}")
        self.created += missing
        self.settled()
        admitted = self.admitted()
        if admitted != target:
            raise RuntimeError(f"filled to {admitted} admitted, not {target}")

    def rss(self) -> float:
        return rss_mb(self.pid)


# -- watchers and dashboard streams in their own process ------------------------------------------
async def _open_streams(
    port: int, token: str, watches: int, streams: int, rv: str, ready: Any, counts: Any
) -> None:
    """``counts``: shared [bytes received, streams that ended], for the bench to print."""
    paths = []
    for i in range(watches):
        accept = "application/json"
        if i % 4 == 3:  # a quarter ask for Tables, as kubectl get -w does
            accept = "application/json;as=Table;v=v1;g=meta.k8s.io"
        # from the list's resourceVersion, as an informer watches after listing
        # (bookmarks: the server answers at once, so the bench knows the watch is open)
        paths.append(
            (f"{WORKLOADS}?watch=true&resourceVersion={rv}&allowWatchBookmarks=true", accept)
        )
    for _ in range(streams):
        paths.append((f"/apis/gpuaas.dev/v1alpha1/dashboard/stream?token={token}", "*/*"))
    opened = [0]
    scratch = memoryview(bytearray(1 << 20))  # every stream reads into it: the bytes are dropped
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    left = [len(paths)]

    class Reader(asyncio.BufferedProtocol):
        """Reads a stream as fast as it comes, counting its bytes: the kernel copies them
        straight into one scratch buffer (a StreamReader copied each chunk twice more, in
        Python, and the readers took 0.7 of the machine's two cores from the server)."""

        def __init__(self, request: bytes) -> None:
            self.request, self.first = request, True

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            assert isinstance(transport, asyncio.Transport)
            transport.write(self.request)

        def get_buffer(self, sizehint: int) -> memoryview:
            return scratch

        def buffer_updated(self, nbytes: int) -> None:
            if self.first:
                self.first = False
                opened[0] += 1
                if opened[0] == len(paths):
                    ready.set()  # every stream is open and has had its first answer
            counts[0] += nbytes

        def connection_lost(self, exc: Exception | None) -> None:
            counts[1] += 1  # the server ended it (a watcher too far behind is dropped)
            left[0] -= 1
            if not left[0] and not done.done():
                done.set_result(None)

    loop = asyncio.get_running_loop()
    for n, (path, accept) in enumerate(paths, 1):
        request = (
            f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n"
            f"Accept: {accept}\r\n\r\n"
        ).encode()
        await loop.create_connection(partial(Reader, request), "127.0.0.1", port)
        if n % 100 == 0:
            await asyncio.sleep(0.05)
    await done


def _streams_proc(
    port: int, token: str, watches: int, streams: int, rv: str, ready: Any, counts: Any
) -> None:
    asyncio.run(_open_streams(port, token, watches, streams, rv, ready, counts))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=8.0, help="seconds per measured run")
    ap.add_argument("--admitted", type=int, default=10_000)
    ap.add_argument("--watches", type=int, default=1000)
    ap.add_argument("--streams", type=int, default=300)
    ap.add_argument("--rss-workloads", type=int, default=100_000)
    ap.add_argument("--db", default=None, help="PostgreSQL URL (default: SQLite in a temp dir)")
    ap.add_argument("--generator", choices=("auto", "wrk", "processes"), default="auto")
    ap.add_argument(
        "--parts", default="rate,admitted,fanout,rss", help="comma list of the parts to run"
    )
    ap.add_argument(
        "--baseline",
        metavar="SRC",
        help="also run every part (but rss) on the gpuaas source at SRC (e.g. ../main/src), "
        "each part first there and then here, so both see the same machine load",
    )
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run the rate and admitted parts this many times (with --baseline, the trees' order "
        "alternates) and print each figure's median: one 8 s run can swing 2x on a shared host",
    )
    args = ap.parse_args()
    use_wrk = args.generator == "wrk" or (args.generator == "auto" and shutil.which("wrk"))
    parts = set(args.parts.split(","))
    store = "SQLite, durable" if args.db is None else "PostgreSQL"
    gen = "wrk + Lua" if use_wrk else "httpx client processes"
    print(f"gpuaas API bench ({store}; generator: {gen}; {args.duration:g} s per run)")
    print(f"  {SBATCH_QUOTED}")
    print(f"  {python_speed()}")
    here = str(Path(__file__).resolve().parent.parent / "src")
    trees = [("before", str(Path(args.baseline).resolve()))] if args.baseline else []
    trees.append(("after" if args.baseline else "gpuaas", here))

    def fresh(tmp: Path, src: str) -> ServerProcess:
        os.environ["PYTHONPATH"] = src  # the server process imports gpuaas from here
        db = args.db
        if db is not None:  # a schema of its own, so every run starts empty
            schema = f"bench_{uuid.uuid4().hex[:8]}"
            db = f"{db}{'&' if '?' in db else '?'}schema={schema}"
        return ServerProcess(tmp, db).start()

    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        if parts & {"rate", "admitted"}:
            empty: dict[tuple[str, int], Result] = {}
            servers = {}
            seen: dict[tuple[str, str], list[float]] = {}  # (tree, figure) -> one per repetition

            def note(label: str, what: str, value: float) -> None:
                seen.setdefault((label, what), []).append(value)

            def admitted_runs(label: str, b: Bench, where: str) -> None:
                for c in (1, 32):
                    r = b.load(c)
                    at = b.created - r.created
                    print(r.line(f"{label}: {where}, {at:,} admitted"))
                    ratio = 100 * r.rate / empty[(label, c)].rate
                    note(label, f"{c:>2} client(s), {where}, % of the empty rate", ratio)
                    print(
                        f"  -> {label}: {ratio:.0f}% of the "
                        f"empty-server rate with {c} client(s) (target >= 90%), measured at "
                        f"{at:,} admitted ({where})",
                        flush=True,
                    )

            order = [trees if i % 2 == 0 else trees[::-1] for i in range(args.repeat)]
            try:
                for rep, (label, src) in ((i, t) for i, ts in enumerate(order) for t in ts):
                    srv = servers[label] = fresh(Path(tmp) / f"a-{label}-{rep}", src)
                    b = Bench(srv, args.duration, bool(use_wrk))
                    b.setup()
                    for c in (1, 32):
                        empty[(label, c)] = b.load(c)
                        print(empty[(label, c)].line(f"{label}: empty server"), flush=True)
                        e = empty[(label, c)]
                        note(label, f"{c:>2} client(s), empty server, creates/s", e.rate)
                        cpu_ms = 1000 * e.srv_cpu / max(e.created, 1)
                        note(label, f"{c:>2} client(s), empty server, ms CPU/create", cpu_ms)
                    e1, e32 = empty[(label, 1)], empty[(label, 32)]
                    print(
                        f"  -> {label}: 32 clients {e32.rate / SBATCH_8:.1f}x sbatch with 8 "
                        f"submitters (target 5x, >= 2,000/s, p99 < 100 ms); 1 client "
                        f"{e1.rate / SBATCH_SEQ:.1f}x sequential sbatch (target 2x)"
                    )
                    if "admitted" in parts:
                        # the harsher figure: the empty runs' server, at the count they left
                        b.fill(args.admitted)
                        print(f"  ({label}: the same server, {b.created:,} admitted after the "
                              f"empty runs; server RSS {b.rss():.0f} MB)")  # fmt: skip
                        admitted_runs(label, b, "same server")
                    srv.stop()
                    if "admitted" in parts:
                        # the point: a fresh server filled to exactly --admitted
                        srv = servers[label] = fresh(Path(tmp) / f"f-{label}-{rep}", src)
                        b = Bench(srv, args.duration, bool(use_wrk))
                        b.setup()
                        b.fill_exactly(args.admitted)
                        print(f"  ({label}: a fresh server filled to exactly {b.created:,} "
                              f"admitted; server RSS {b.rss():.0f} MB)")  # fmt: skip
                        admitted_runs(label, b, "fresh server")
                        srv.stop()
            finally:
                for srv in servers.values():
                    srv.stop()
            if args.repeat > 1:
                print(f"  medians of {args.repeat} repetitions (tree order alternated):")
                for (label, what), xs in sorted(seen.items(), key=lambda kv: (kv[0][1], kv[0][0])):
                    runs = ", ".join(f"{x:,.2f}" if x < 10 else f"{x:,.0f}" for x in xs)
                    med = statistics.median(xs)
                    shown = f"{med:,.2f}" if med < 10 else f"{med:,.0f}"
                    print(f"  {label:>6}: {what:<52} median {shown}  ({runs})", flush=True)
        if "fanout" in parts:
            for label, src in trees:
                srv = fresh(Path(tmp) / f"b-{label}", src)
                try:
                    b = Bench(srv, args.duration, bool(use_wrk))
                    b.setup()
                    base = b.load(32)
                    print(base.line(f"{label}: fresh server, no streams"))
                    ctx = multiprocessing.get_context("spawn")
                    ready = ctx.Event()
                    counts = ctx.Array("q", 2, lock=False)  # bytes read, streams ended
                    listed = b.http.get(WORKLOADS, params={"limit": 1}).json()
                    rv = listed["metadata"]["resourceVersion"]
                    sp = ctx.Process(
                        target=_streams_proc,
                        args=(srv.port, b.token, args.watches, args.streams, rv, ready, counts),
                    )
                    sp.start()
                    t0 = time.perf_counter()
                    if not ready.wait(600):
                        print("  (not every stream opened in 600 s)")
                    print(f"  ({label}: {args.watches} watches and {args.streams} streams open "
                          f"in {time.perf_counter() - t0:.0f} s)", flush=True)  # fmt: skip
                    time.sleep(1)
                    assert sp.pid is not None
                    c0, got0, ended0 = proc_cpu(sp.pid), counts[0], counts[1]
                    m0 = machine_ticks()
                    r = b.load(32)
                    m1 = machine_ticks()
                    cpu = proc_cpu(sp.pid) - c0
                    got, ended = counts[0] - got0, counts[1]
                    print(r.line(f"{label}: {args.watches} watches + {args.streams} streams"))
                    print(
                        f"  -> {label}: p50 {r.p50_ms / base.p50_ms:.1f}x the figure without "
                        f"them (target <= 2x); stream reader {100 * cpu / r.wall / cores:.0f}% "
                        f"of {cores} cores, read {got / 1e6 / r.wall:,.0f} MB/s during the run; "
                        f"{ended} of {args.watches + args.streams} streams ended by the server "
                        f"({ended - ended0} during the run); machine busy "
                        f"{100 * (m1[0] - m0[0]) / max(m1[1] - m0[1], 1):.0f}%",
                        flush=True,
                    )
                    sp.kill()
                    sp.join()
                finally:
                    srv.stop()
        if "rss" in parts:
            srv = fresh(Path(tmp) / "c", here)
            try:
                b = Bench(srv, args.duration, bool(use_wrk))
                b.setup()
                print(f"  server RSS: {b.rss():.0f} MB empty")
                t0 = time.perf_counter()
                step = max(args.rss_workloads // 4, 1)
                while b.created < args.rss_workloads:  # exact steps: a fast machine overshot
                    b.fill_exactly(min(b.created + step, args.rss_workloads))
                    print(f"  server RSS: {b.rss():.0f} MB with {b.created:,} workloads "
                          f"({time.perf_counter() - t0:.0f} s filling)", flush=True)  # fmt: skip
            finally:
                srv.stop()


if __name__ == "__main__":
    main()
