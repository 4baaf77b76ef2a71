"""The load generator of ``bench/multicluster.py``: N distinct Jobs posted to a server, each
one's send time taken on the system's monotonic clock, from outside the bench's own process.

Issue 18's rule for a throughput figure is a load generator that is not the bottleneck and
prints its CPU share. Eight httpx client threads inside the bench took about 1.6 ms of CPU per
Job on the same two cores as the four servers, and shared the bench's GIL with the watch that
times the admissions. Here the creates come from Debian's ``wrk`` with a Lua script (LuaJIT's
FFI reads ``CLOCK_MONOTONIC``, the clock of Python's ``time.monotonic``, so send times and the
bench's watch times compare), else from httpx clients in separate processes. Either way each
Job's name and the moment just before its request was sent are what the bench gets back, as
its own clients used to record them: the latency definitions do not change.

Open loop (``rate``): Job i is due at ``t0 + i / rate`` (a monotonic ``t0`` shared by every
client) and is not sent before; a client free before the next due time waits for it, so Jobs go
out at the offered rate, not as fast as the server answers. Each send also records its due time:
if the clients fall behind (every connection waits on a slow answer) the send times slip, and the
bench says by how much, since latency measured from a late send hides that wait.

Nothing here reads what the server does with the Jobs; it only posts them and says when.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

JOBS = "/apis/batch/v1/namespaces/default/jobs"
PLACEHOLDER = "@@NAME@@"


@dataclass
class Load:
    """What a generator did: each Job's send time, the time of the last answer, errors, and
    the generator's own CPU seconds."""

    sent: dict[str, float]
    last_answer: float
    errors: int
    cpu: float
    # open loop only: each send's lag behind its due time
    late: list[float] = field(default_factory=list)


def names(n: int) -> list[str]:
    return [f"bench-{i:05d}" for i in range(n)]


# -- wrk with Lua ----------------------------------------------------------------------------
# Thread t (of T) posts the Jobs t, t + T, t + 2T, ... below N. wrk asks ``delay`` before each
# request a connection sends: that is where a Job is claimed, and once a thread's share is
# claimed its connections stay idle (a day). ``request`` posts the next claimed Job, or (called
# without a claim: wrk's own check of the script before it starts, or a reconnect of a parked
# connection the server closed) sends a ``GET /healthz``, which is not counted; so each Job is
# posted once. Each send is written "name seconds" to the thread's own file, the last answer
# "END seconds errors"; the bench interrupts wrk (SIGINT) once it has seen what it waits for.
# With a rate, ``delay`` holds a claimed Job until it is due (``t0 + i / rate``) and its line
# gets the due time as a third field.
LUA = r"""
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clk_id, bench_timespec *tp);
]]
local ts = ffi.new("bench_timespec")
local function now()
  ffi.C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end
local threads = {}
function setup(thread)
  thread:set("tid", #threads)
  table.insert(threads, thread)
end
function init(args)
  total, nthreads, out = tonumber(args[1]), tonumber(args[2]), args[3]
  hdrs = {["Content-Type"] = "application/json", ["Authorization"] = "Bearer " .. args[4]}
  template = args[5]
  rate, t0 = tonumber(args[6]), tonumber(args[7])
  share = 0
  for i = tid, total - 1, nthreads do share = share + 1 end
  claimed, answered, errors, queued = 0, 0, 0, {}
  log = io.open(out .. "." .. tid, "w")
  if share == 0 then log:write("END ", string.format("%.6f", now()), " 0\n"); log:close() end
end
function delay()
  if claimed < share then
    claimed = claimed + 1
    local i = tid + (claimed - 1) * nthreads
    table.insert(queued, i)
    if rate > 0 then
      local wait = (t0 + i / rate - now()) * 1000
      if wait > 0 then return wait end
    end
    return 0
  end
  return 86400000
end
function request()
  local i = table.remove(queued, 1)
  if i == nil then  -- not after a delay: wrk's check of the script, or a reconnect
    return wrk.format("GET", "/healthz")
  end
  local name = string.format("bench-%05d", i)
  if rate > 0 then
    log:write(name, " ", string.format("%.6f %.6f", now(), t0 + i / rate), "\n")
  else
    log:write(name, " ", string.format("%.6f", now()), "\n")
  end
  return wrk.format("POST", nil, hdrs, (string.gsub(template, "@@NAME@@", name)))
end
function response(status, headers, body)
  if status == 200 then return end  -- /healthz (a create answers 201, or an error)
  answered = answered + 1
  if status ~= 201 then errors = errors + 1 end
  if answered == share then
    log:write("END ", string.format("%.6f", now()), " ", errors, "\n")
    log:close()
    wrk.thread:stop()
  end
end
"""


def run_wrk(
    url: str, token: str, job: Callable[[str], dict[str, Any]], n: int, clients: int,
    finished: Callable[[], bool], timeout: float, rate: float = 0.0,
) -> Load:  # fmt: skip
    """Post ``n`` Jobs with ``clients`` connections (at ``rate`` per second from now on if
    given, else as fast as they are answered); interrupt wrk once every Job is answered
    and ``finished()``, or ``timeout`` seconds after the start or after the last answer
    (whichever comes later), and return what it did."""
    threads = min(clients, 2)
    work = Path(tempfile.mkdtemp(prefix="gpuaas-mk-wrk-"))
    script = work / "jobs.lua"
    script.write_text(LUA)
    template = json.dumps(job(PLACEHOLDER), separators=(",", ":"))
    out = work / "sent"
    cmd = ["wrk", f"-t{threads}", f"-c{clients}", "-d1h", "--timeout", "30s", "-s", str(script),
           f"{url}{JOBS}", "--", str(n), str(threads), str(out), token, template, str(rate),
           f"{time.monotonic() + 0.2:.6f}"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ended: dict[int, tuple[float, int]] = {}
    deadline = time.monotonic() + timeout
    try:
        while True:
            for t in range(threads):
                if t not in ended:
                    end = _end(out.with_name(f"sent.{t}"))
                    if end is not None:
                        ended[t] = end
            if len(ended) == threads:
                if finished():
                    break
                deadline = max(deadline, max(e[0] for e in ended.values()) + timeout)
            if time.monotonic() > deadline:
                break
            if proc.poll() is not None:
                raise RuntimeError(f"wrk ended early: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # wrk runs for its duration (-d) unless interrupted
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        sent: dict[str, float] = {}
        late: list[float] = []
        for t in range(threads):
            for line in out.with_name(f"sent.{t}").read_text().splitlines():
                name, *times = line.split()
                if name != "END":
                    sent[name] = float(times[0])
                    if len(times) > 1:
                        late.append(float(times[0]) - float(times[1]))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
        shutil.rmtree(work, ignore_errors=True)
    last = max((e[0] for e in ended.values()), default=time.monotonic())
    errors = sum(e[1] for e in ended.values()) + n - len(sent)
    return Load(sent, last, errors, usage.ru_utime + usage.ru_stime, late)


def _end(path: Path) -> tuple[float, int] | None:
    try:
        text = path.read_text()
    except OSError:
        return None
    for line in reversed(text.splitlines()):
        if line.startswith("END "):
            _, t, errors = line.split()
            return float(t), int(errors)
    return None


# -- the fallback: httpx clients in separate processes ---------------------------------------
def _client_proc(
    url: str, token: str, job: Callable[[str], dict[str, Any]], mine: list[str], threads: int,
    out: Any, rate: float, t0: float,
) -> None:  # fmt: skip
    sent: dict[str, float] = {}
    late: list[float] = []
    errors = [0]
    last = [0.0]
    lock = threading.Lock()

    def one(part: list[str]) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=url, headers=headers, timeout=60) as c:
            for name in part:
                due = t0 + int(name.rpartition("-")[2]) / rate if rate > 0 else 0.0
                if due > time.monotonic():
                    time.sleep(due - time.monotonic())
                t = time.monotonic()
                r = c.post(JOBS, json=job(name))
                with lock:
                    sent[name] = t
                    if rate > 0:
                        late.append(t - due)
                    last[0] = max(last[0], time.monotonic())
                    errors[0] += r.status_code != 201

    ts = [threading.Thread(target=one, args=(mine[i::threads],)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put((sent, last[0], errors[0], late))


def run_processes(
    url: str, token: str, job: Callable[[str], dict[str, Any]], n: int, clients: int,
    rate: float = 0.0,
) -> Load:  # fmt: skip
    """``clients`` httpx clients over two processes (threads within each), each Job once (at
    ``rate`` per second if given: Job i is due ``i / rate`` seconds after the clients start)."""
    procs_n = min(clients, 2)
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    before = os.times()
    all_names = names(n)
    t0 = time.monotonic() + 1.0  # the spawned processes import httpx first
    ps = [
        ctx.Process(
            target=_client_proc,
            args=(url, token, job, all_names[i::procs_n], max(1, clients // procs_n), q, rate, t0),
        )
        for i in range(procs_n)
    ]
    for p in ps:
        p.start()
    sent: dict[str, float] = {}
    last, errors, late = 0.0, 0, []
    for _ in ps:
        got, t, e, lags = q.get()
        sent |= got
        last, errors = max(last, t), errors + e
        late += lags
    for p in ps:
        p.join()
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return Load(sent, last, errors, cpu, late)
