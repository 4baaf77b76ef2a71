"""How soon a change reaches an open dashboard stream: create to the patch that shows it.

The dashboard's live feed (``api/dashboard_routes.py``) promises a push within a fraction of a
second of every committed change, well inside 1 s, and otherwise refreshes every ``REFRESH_S``
seconds. The tests check that a change arrives as a patch; this script measures how soon. It
starts a real server (``--runtime none``), opens ``--streams`` streams with the admin token (the
first is timed; the others share its feed, as a room of dashboards would), then creates
``--changes`` Workloads one at a time, each after the last was seen, with a random pause of up
to ``--gap`` seconds between them, so a create can land anywhere in the feed's cycle. Printed:
create (just before the request is sent) to the first patch holding the new row, p50, p99 and
max, beside the promise and the refresh period a change-less push would take.

Usage: python bench/dashboard_push.py [--changes 100] [--streams 1] [--gap 0.3]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from api import NS, SETUP, workload  # bench/api.py: the same namespace, queues and Workload
from gpuaas.api.dashboard_patch import apply_patch
from gpuaas.api.dashboard_routes import DASHBOARD, REFRESH_S
from gpuaas.api.testing import ServerProcess
from machine import python_speed

WORKLOADS = f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads"


class Stream:
    """One dashboard stream read in a thread; ``seen[key]`` is when a row first arrived."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url, token
        self.seen: dict[str, float] = {}
        self.cond = threading.Condition()
        self.opened = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with contextlib.suppress(httpx.HTTPError):  # the server stopped at the end of the run
            self._follow()

    def _follow(self) -> None:
        summary: dict[str, Any] = {}
        kind = ""
        params = {"token": self.token}
        with httpx.stream("GET", f"{self.url}{DASHBOARD}/stream", params=params, timeout=None) as r:
            for line in r.iter_lines():
                if line.startswith("event:"):
                    kind = line[6:].strip()
                elif line.startswith("data:"):
                    data = json.loads(line[5:])
                    summary = apply_patch(summary, data) if kind == "patch" else data
                    now = time.monotonic()
                    with self.cond:
                        for row in summary["workloads"]:
                            self.seen.setdefault(row["key"], now)
                        self.cond.notify_all()
                    self.opened.set()

    def wait(self, key: str, timeout: float) -> float | None:
        with self.cond:
            self.cond.wait_for(lambda: key in self.seen, timeout)
            return self.seen.get(key)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--changes", type=int, default=100)
    ap.add_argument("--streams", type=int, default=1)
    ap.add_argument("--gap", type=float, default=0.3, help="most seconds between two creates")
    args = ap.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory(prefix="gpuaas-push-bench-") as tmp:
        srv = ServerProcess(Path(tmp), extra=("--runtime", "none")).start()
        try:
            headers = {"Authorization": f"Bearer {srv.admin_token}"}
            with httpx.Client(base_url=srv.url, headers=headers, timeout=30) as c:
                for path, doc in SETUP:
                    c.post(path, json=doc).raise_for_status()
                streams = [Stream(srv.url, srv.admin_token) for _ in range(args.streams)]
                for s in streams:
                    if not s.opened.wait(30):
                        raise SystemExit("a dashboard stream did not open in 30 s")
                timed = streams[0]
                lat: list[float] = []
                for i in range(args.changes):
                    time.sleep(rng.uniform(0, args.gap))
                    name = f"push-{i}"
                    sent = time.monotonic()
                    c.post(WORKLOADS, json=workload(name)).raise_for_status()
                    got = timed.wait(f"{NS}/{name}", REFRESH_S * 3)
                    if got is None:
                        raise SystemExit(f"{NS}/{name} never reached the stream")
                    lat.append(got - sent)
        finally:
            srv.kill()
    lat.sort()
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    print(f"dashboard push: {args.changes} creates, {args.streams} stream(s) open, "
          f"up to {args.gap:g} s apart")  # fmt: skip
    print(f"  {python_speed()}")
    print(f"  create -> patch with the row: p50 {statistics.median(lat) * 1000:.0f} ms, "
          f"p99 {p99 * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms "
          f"(promise: well inside 1 s; a refresh without a change comes every {REFRESH_S:g} s)")  # fmt: skip


if __name__ == "__main__":
    main()
