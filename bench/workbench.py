"""Workbench speed: the dashboard's workbench pages with many Notebooks, and a freed GPU's handover.

1. Pages: a real server (no pods) holds N workbenches (Notebooks with a hardware profile, one GPU
   each on a pool of 8 GPUs, so most are queued). Prints the time of the API reads the Workbenches
   page makes (Notebooks, hardware profiles, the dashboard summary) and, when Chromium and
   Playwright are here, of the page itself: login to the table showing all N rows, and the
   Hardware profiles page. Target: under 1 s with 500 workbenches.
2. Handover: a real server with the local runtime and one fake GPU; workbench A runs (`sleep`),
   B is queued behind it. A is stopped (``kubeflow-resource-stopped``) and the script measures
   until B's Workload is Admitted and until its pod runs. Kueue's 1 s inadmissible-requeue batch
   is part of it, on the wall clock. Target: under 2 s.

Usage:
    python bench/workbench.py [--workbenches 500] [--handovers 5]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from gpuaas.api.testing import ServerProcess
from gpuaas.vocab.kinds import BY_KIND

GPU = "nvidia.com/gpu"
NB = "/apis/kubeflow.org/v1/namespaces/ds/notebooks"
CHROMIUM = Path("/usr/bin/chromium")


def setup(gpus: int) -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ds"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
         "metadata": {"name": "l4"}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue",
         "metadata": {"name": "cq"},
         "spec": {"namespaceSelector": {}, "resourceGroups": [
             {"coveredResources": ["cpu", GPU], "flavors": [{"name": "l4", "resources": [
                 {"name": "cpu", "nominalQuota": 1000}, {"name": GPU, "nominalQuota": gpus}]}]}]}},
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
         "metadata": {"name": "q", "namespace": "ds"}, "spec": {"clusterQueue": "cq"}},
        {"apiVersion": "infrastructure.opendatahub.io/v1", "kind": "HardwareProfile",
         "metadata": {"name": "l4", "namespace": "ds",
                      "annotations": {"opendatahub.io/display-name": "NVIDIA L4 1GPU"}},
         "spec": {"identifiers": [
             {"identifier": "cpu", "displayName": "CPU", "minCount": 1, "defaultCount": 1},
             {"identifier": GPU, "displayName": "L4", "minCount": 1, "defaultCount": 1,
              "maxCount": 1}],
          "scheduling": {"type": "Queue", "kueue": {"localQueueName": "q"}}}},
    ]  # fmt: skip


def notebook(name: str, command: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name, "image": "jupyter"}
    if command:
        container["command"] = command
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {
            "name": name,
            "namespace": "ds",
            "annotations": {"opendatahub.io/hardware-profile-name": "l4"},
        },
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def _path(doc: dict[str, Any]) -> str:
    k = BY_KIND[doc["kind"]]
    ns = doc["metadata"].get("namespace")
    return f"{k.base_path()}/namespaces/{ns}/{k.plural}" if ns else f"{k.base_path()}/{k.plural}"


def _timed(c: httpx.Client, path: str, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        r = c.get(path)
        r.raise_for_status()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def pages(n: int) -> None:
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(Path(tmp) / "data").start() as srv:
        with srv.client() as c:
            for doc in setup(8):
                c.post(_path(doc), json=doc).raise_for_status()
            t = time.perf_counter()
            for i in range(n):
                c.post(NB, json=notebook(f"wb-{i:04d}")).raise_for_status()
            made = time.perf_counter() - t
            print(f"pages: {n} workbenches created in {made:.1f}s ({n / made:.0f}/s)")
            reads = {
                "GET notebooks (all namespaces)": "/apis/kubeflow.org/v1/notebooks",
                "GET hardwareprofiles": "/apis/infrastructure.opendatahub.io/v1/hardwareprofiles",
                "GET dashboard summary": "/apis/gpuaas.dev/v1alpha1/dashboard/summary",
            }
            total = 0.0
            for label, path in reads.items():
                took = _timed(c, path)
                total += took
                print(f"  {label:36s} {took * 1000:7.1f} ms (median of 5)")
            print(f"  the Workbenches page's reads, one after another: {total * 1000:.1f} ms")
        _browser(srv, n)


def _browser(srv: ServerProcess, n: int) -> None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("  browser: playwright is not installed; page load not measured")
        return
    if not CHROMIUM.exists():
        print(f"  browser: {CHROMIUM} not found; page load not measured")
        return
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.goto(srv.url + "/")
            page.fill("#token", srv.admin_token)
            page.click("#login-submit")
            page.wait_for_selector("#live.on", timeout=20_000)
            for hash_, rows in (("#/workbenches", "#workbenches tbody tr"),
                                ("#/hardwareprofiles", "#hardwareprofiles tbody tr")):  # fmt: skip
                page.goto(srv.url + "/#/overview")
                page.wait_for_selector("#view .page-head", timeout=20_000)
                want = n if hash_ == "#/workbenches" else 1
                t = time.perf_counter()
                page.goto(srv.url + "/" + hash_)
                # Polled every 10 ms: the default, requestAnimationFrame, is throttled in a
                # headless browser and would add its own delay to the figure.
                page.wait_for_function(
                    f"() => document.querySelectorAll('{rows}').length === {want}",
                    timeout=30_000,
                    polling=10,
                )
                took = time.perf_counter() - t
                print(
                    f"  browser: {hash_} shows all {want} row(s) {took * 1000:.0f} ms after navigation"
                )
            page.goto(srv.url + "/#/workbenches")
            page.wait_for_selector("#workbenches", timeout=30_000)
            t = time.perf_counter()
            page.reload()
            page.wait_for_function(
                f"() => document.querySelectorAll('#workbenches tbody tr').length === {n}",
                timeout=30_000,
                polling=10,
            )
            took = time.perf_counter() - t
            print(
                f"  browser: reload of #/workbenches (login from the saved token): {took * 1000:.0f} ms"
            )
        finally:
            browser.close()


def _admitted(c: httpx.Client, name: str) -> bool:
    r = c.get(f"/apis/kueue.x-k8s.io/v1beta1/namespaces/ds/workloads/{name}")
    if r.status_code != 200:
        return False
    conds = (r.json().get("status") or {}).get("conditions", [])
    return any(x["type"] == "Admitted" and x["status"] == "True" for x in conds)


def _ready(c: httpx.Client, name: str) -> bool:
    st = c.get(f"{NB}/{name}").json().get("status") or {}
    return bool(st.get("readyReplicas"))


def _until(check: Any, timeout: float = 30.0) -> float:
    t = time.perf_counter()
    while not check():
        if time.perf_counter() - t > timeout:
            raise SystemExit("timed out")
        time.sleep(0.01)
    return time.perf_counter()


def handover(rounds: int) -> None:
    extra = ("--runtime", "local", "--fake-gpus", "1")
    with tempfile.TemporaryDirectory() as tmp:
        srv = ServerProcess(Path(tmp) / "data", extra=extra).start()
        try:
            _handover(srv, rounds)
        finally:
            srv.stop()


def _handover(srv: ServerProcess, rounds: int) -> None:
    sleep = ["sleep", "600"]
    admitted_after, running_after = [], []
    with srv.client() as c:
        for doc in setup(1):
            c.post(_path(doc), json=doc).raise_for_status()
        c.post(NB, json=notebook("a-0", sleep)).raise_for_status()
        _until(lambda: _ready(c, "a-0"))
        for i in range(rounds):
            holder, waiting = f"a-{i}", f"a-{i + 1}"
            c.post(NB, json=notebook(waiting, sleep)).raise_for_status()
            time.sleep(1.5)  # queued and marked inadmissible, as on a full pool
            assert not _admitted(c, waiting)
            stop = {"metadata": {"annotations": {"kubeflow-resource-stopped": "bench"}}}
            t = time.perf_counter()
            c.patch(
                f"{NB}/{holder}",
                json=stop,
                headers={"content-type": "application/merge-patch+json"},
            ).raise_for_status()
            admitted_after.append(_until(lambda w=waiting: _admitted(c, w)) - t)  # type: ignore[misc]
            running_after.append(_until(lambda w=waiting: _ready(c, w)) - t)  # type: ignore[misc]
            c.delete(f"{NB}/{holder}")
    print(f"handover: {rounds} stops of a running workbench with one queued behind it (1 GPU)")
    print(
        f"  stop -> next Admitted: median {statistics.median(admitted_after):.2f}s, "
        f"max {max(admitted_after):.2f}s"
    )
    print(
        f"  stop -> next pod running: median {statistics.median(running_after):.2f}s, "
        f"max {max(running_after):.2f}s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workbenches", type=int, default=500)
    ap.add_argument("--handovers", type=int, default=5)
    args = ap.parse_args()
    load = os.getloadavg()
    print(f"machine: {os.cpu_count()} CPUs, load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    pages(args.workbenches)
    handover(args.handovers)
    load = os.getloadavg()
    print(f"machine after: load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")


if __name__ == "__main__":
    main()
