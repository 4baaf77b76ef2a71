"""A real ``gpuaas server`` process with 4 fake GPUs and the simulated collector.

``/metrics`` is scraped and parsed with prometheus-client's parser (Kueue's and DCGM's names and
labels), the usage report after a preemption is checked against totals computed by hand from
the server's own event times, and the CLI (``apply`` of a GpuaasConfiguration, ``report usage``,
``get hoarding``) runs as a separate process against it.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from live_server import cli, post, wait_for
from prometheus_client.parser import text_string_to_metric_families
from telemetry_docs import (
    cluster_queue,
    configuration,
    flavor,
    local_queue,
    namespace,
    priority_class,
    workload,
)

from gpuaas.api.testing import ServerProcess

pytestmark = pytest.mark.slow

CONFIG = configuration(
    {
        "hoarding": [{"clusterQueues": ["shared-cq"], "windowSeconds": 1, "action": "Notify"}],
        "prices": {"h100": {"gpuHour": 2.5}},
        "currency": "EUR",
        "telemetry": {"collector": "simulated"},  # the interval comes from the server flag
    }
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    extra = ("--runtime", "none", "--fake-gpus", "4", "--telemetry-interval", "0.2")
    srv = ServerProcess(tmp_path_factory.mktemp("telemetry"), extra=(*extra, "--tick", "0.1"))
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


Samples = dict[str, list[tuple[str, dict[str, str], float]]]


def scrape(c: httpx.Client) -> Samples:
    r = c.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    out: Samples = {}
    for family in text_string_to_metric_families(r.text):
        out[family.name] = [(s.name, s.labels, s.value) for s in family.samples]
    return out


def event_time(c: httpx.Client, ns: str, name: str, reason: str) -> float:
    items = c.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
    times = [
        dt.datetime.fromisoformat(e["eventTime"].replace("Z", "+00:00")).timestamp()
        for e in items
        if e["reason"] == reason and e["involvedObject"]["name"] == name
    ]
    assert times, f"no {reason} event for {ns}/{name}"
    return times[0]


def test_metrics_usage_and_hoarding_through_the_server_and_cli(
    server: ServerProcess, tmp_path: Path
) -> None:
    srv = server
    # 1. the configuration through `gpuaas apply`; a bad one is refused naming the field
    good, bad = tmp_path / "config.yaml", tmp_path / "bad.yaml"
    good.write_text(yaml.safe_dump(CONFIG))
    wrong = configuration({"hoarding": [{"action": "Kill"}]})
    bad.write_text(yaml.safe_dump(wrong))
    out = cli(srv, tmp_path, "apply", "-f", str(good))
    assert out.returncode == 0, out.stderr
    assert "gpuaasconfiguration.gpuaas.dev/default created" in out.stdout
    out = cli(srv, tmp_path, "apply", "-f", str(bad))
    assert out.returncode == 1
    assert "(Invalid)" in out.stderr
    assert "spec.hoarding[0].action: must be Notify or Evict, got 'Kill'" in out.stderr

    with srv.client() as c:
        # 2. queues; dev (low, idle GPUs) is admitted, then prod (high) preempts it
        for doc in (
            namespace("team-a"),
            namespace("team-b"),
            flavor(),
            priority_class("low", 1),
            priority_class("high", 100),
            cluster_queue("shared-cq", 4, cohort="org", preempt=True),
            local_queue("team-a", "lq", "shared-cq"),
            local_queue("team-b", "lq", "shared-cq"),
            workload("team-b", "dev", queue="lq", gpus=4, priority=("low", 1), profile="busy"),
        ):
            assert post(c, doc).status_code == 201, doc
        time.sleep(0.5)
        prod = workload(
            "team-a", "prod", queue="lq", gpus=4, priority=("high", 100), profile="idle"
        )
        assert post(c, prod).status_code == 201
        t_admit = event_time(c, "team-b", "dev", "QuotaReserved")
        t_preempt = event_time(c, "team-b", "dev", "EvictedDueToPreempted")
        assert event_time(c, "team-a", "prod", "QuotaReserved") == t_preempt

        # 3. /metrics: Kueue's names and labels, and DCGM's with the holder of each GPU
        def prod_on_gpus() -> Samples | None:
            m = scrape(c)
            util = m.get("DCGM_FI_DEV_GPU_UTIL", [])
            held = [s for s in util if s[1]["workload"] == "prod"]
            return m if len(held) == 4 else None

        m = wait_for(prod_on_gpus, "prod's GPUs in DCGM_FI_DEV_GPU_UTIL")
        for _, labels, value in m["DCGM_FI_DEV_GPU_UTIL"]:
            assert labels["namespace"] == "team-a" and labels["pod"] == "prod-0"
            assert labels["cluster_queue"] == "shared-cq"
            assert labels["UUID"] == f"GPU-fake-{int(labels['gpu']):04d}-0000-0000-000000000000"
            assert value < 5.0  # idle profile
        assert sorted(s[1]["gpu"] for s in m["DCGM_FI_DEV_GPU_UTIL"]) == ["0", "1", "2", "3"]
        for name in (
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE",
            "DCGM_FI_DEV_POWER_USAGE",
            "DCGM_FI_PROF_SM_OCCUPANCY",
        ):
            assert {s[1]["workload"] for s in m[name]} == {"prod"}, name

        def one(family: str, **want: str) -> float:
            hits = [v for _, lb, v in m[family] if all(lb.get(k) == w for k, w in want.items())]
            assert len(hits) == 1, (family, want, m.get(family))
            return float(hits[0])

        cq = {"cluster_queue": "shared-cq"}
        assert (
            one("kueue_pending_workloads", status="inadmissible", **cq)
            + one("kueue_pending_workloads", status="active", **cq)
            == 1.0
        )
        assert one("kueue_admitted_active_workloads", **cq) == 1.0
        assert one("kueue_quota_reserved_workloads", priority_class="low", **cq) == 1.0
        assert one("kueue_quota_reserved_workloads", priority_class="high", **cq) == 1.0
        assert one("kueue_evicted_workloads", reason="Preempted", **cq) == 1.0
        assert (
            one(
                "kueue_preempted_workloads",
                preempting_cluster_queue="shared-cq",
                reason="InClusterQueue",
            )
            == 1.0
        )
        gpu = {"flavor": "h100", "resource": "nvidia.com/gpu", "cohort": "org", **cq}
        assert one("kueue_cluster_queue_nominal_quota", **gpu) == 4.0
        assert one("kueue_cluster_queue_resource_usage", **gpu) == 4.0
        assert one("kueue_cluster_queue_borrowing_limit", **gpu) == float("inf")
        assert one("kueue_cluster_queue_lending_limit", **gpu) == float("inf")
        wait = [s for s in m["kueue_admission_wait_time_seconds"] if s[0].endswith("_count")]
        assert sum(s[2] for s in wait) == 2.0
        lq = {"namespace": "team-a", "name": "lq"}
        assert one("kueue_local_queue_admitted_active_workloads", **lq) == 1.0
        assert one("kueue_local_queue_resource_usage", resource="nvidia.com/gpu", **lq) == 4.0

        # 4. hoarding: prod idles past its 1 s window (Notify); namespace tokens see their own
        rows = wait_for(
            lambda: c.get("/apis/gpuaas.dev/v1alpha1/hoarding").json()["items"], "a flag"
        )
        assert [(r["namespace"], r["workload"], r["action"]) for r in rows] == [
            ("team-a", "prod", "Notify")
        ]
        m = scrape(c)
        assert one("gpuaas_hoarding_workload", workload="prod", namespace="team-a") == 1.0
        token = c.post("/apis/gpuaas.dev/v1alpha1/tokens", json={"namespaces": ["team-b"]})
        team_b = token.json()["token"]

    with srv.client(team_b) as tb:
        assert tb.get("/metrics").status_code == 403
        assert tb.get("/apis/gpuaas.dev/v1alpha1/hoarding").json()["items"] == []
    assert httpx.get(f"{srv.url}/metrics").status_code == 401

    out = cli(srv, tmp_path, "get", "hoarding")
    assert out.returncode == 0, out.stderr
    assert "prod" in out.stdout and "Notify" in out.stdout and "Flagged" in out.stdout
    header, prod_line = out.stdout.splitlines()[0].split(), out.stdout.splitlines()[1].split()
    assert header[-2:] == ["IDLE-EVICTIONS", "STATE"]
    assert prod_line[-2:] == ["0", "Flagged"]  # Notify never evicts

    # 5. the chargeback report against hand-computed totals from the server's event times
    until = t_preempt + 100.0
    out = cli(srv, tmp_path, "report", "usage", "--until", repr(until), "-o", "json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["currency"] == "EUR" and report["by"] == "namespace"
    rows = {r["namespace"]: r for r in report["rows"]}
    dev_h, prod_h = 4 * (t_preempt - t_admit) / 3600, 4 * 100.0 / 3600
    assert rows["team-b"]["gpuHours"] == pytest.approx(round(dev_h, 4), abs=1e-4)
    assert rows["team-a"]["gpuHours"] == pytest.approx(round(prod_h, 4), abs=1e-4)
    assert rows["team-a"]["cost"] == pytest.approx(round(prod_h * 2.5, 4), abs=1e-4)
    # prod was flagged idle: its idle GPU time counts as wasted, within its GPU-hours; dev never
    assert 0 < rows["team-a"]["wastedGPUHours"] <= rows["team-a"]["gpuHours"]
    assert rows["team-b"]["wastedGPUHours"] == 0
    with srv.client() as c:
        exact = c.get(
            "/apis/gpuaas.dev/v1alpha1/usage", params={"until": repr(until), "by": "namespace"}
        ).json()
    got = {r["group"]: r["gpuHours"] for r in exact["rows"]}
    # eventTime is a Kubernetes MicroTime: microseconds, so the hours agree to about 1e-5.
    assert got == pytest.approx({"team-a": prod_h, "team-b": dev_h}, rel=1e-4)
    out = cli(srv, tmp_path, "report", "usage", "--by", "flavor", "-o", "csv")
    assert out.returncode == 0, out.stderr
    table = list(csv.reader(io.StringIO(out.stdout)))
    assert table[0] == [
        "flavor",
        "gpu_hours",
        "cpu_core_hours",
        "memory_gb_hours",
        "cost_EUR",
        "wasted_gpu_hours",
    ]
    assert table[1][0] == "h100" and float(table[1][5]) > 0
    out = cli(srv, tmp_path, "report", "usage", "--by", "team")
    assert out.returncode == 1 and "--by: unknown 'team'" in out.stderr
    out = cli(srv, tmp_path, "report", "usage")
    assert out.returncode == 0 and "TOTAL" in out.stdout and "team-a" in out.stdout
    assert out.stdout.splitlines()[0].split()[-1] == "WASTED-GPU-HOURS"

    # 6. the GPUs are declared (--fake-gpus): `auto` samples them with the simulated collector
    #    and never tries NVML, so nothing in the log talks about it
    log = srv.log_path.read_text()
    assert "NVML" not in log and "falling back" not in log, log
    assert "Traceback" not in log


def _nvml_gpus() -> tuple[int, str]:
    from gpuaas.inventory.gpus import read_nvml_gpus

    gpus, reason = read_nvml_gpus()
    return len(gpus), reason or ""


@pytest.mark.gpu
def test_real_gpus_through_nvml_on_the_server(
    tmp_path: Path, require_service: Callable[[str, bool, str], None]
) -> None:
    count, reason = _nvml_gpus()
    if count == 0 and os.environ.get("GPUAAS_REQUIRE_GPU") != "1":
        # Not a service CI can provide: mandatory only where GPUAAS_REQUIRE_GPU=1.
        pytest.skip(f"no NVIDIA GPU with NVML: {reason or 'NVML lists no GPU'}")
    require_service("an NVIDIA GPU with NVML", count > 0, reason or "NVML lists no GPU")
    extra = ("--runtime", "none", "--telemetry-interval", "0.5", "--tick", "0.2")
    srv = ServerProcess(tmp_path / "data", extra=extra).start()
    try:
        with srv.client() as c:

            def dcgm() -> Samples | None:
                m = scrape(c)
                return m if len(m.get("DCGM_FI_DEV_GPU_UTIL", [])) == count else None

            m = wait_for(dcgm, "one DCGM_FI_DEV_GPU_UTIL series per NVML GPU")
    finally:
        srv.stop()
    for _, labels, value in m["DCGM_FI_DEV_GPU_UTIL"]:
        assert labels["UUID"].startswith(("GPU-", "MIG-")) and "fake" not in labels["UUID"]
        assert "Simulated" not in labels["modelName"]
        assert 0.0 <= value <= 100.0
        print(f"gpu {labels['gpu']} {labels['modelName']} {labels['UUID']}: util {value}%")
    assert len(m["DCGM_FI_DEV_FB_USED"]) == count
