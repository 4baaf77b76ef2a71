"""``gpuaas demo 002``: seed 002's three OCM placement stories, live, with a hub and three workers.

It starts four ``gpuaas server`` processes on this machine: a MultiKueue hub and three workers with
fake GPUs of two models (cluster1: 3 NVIDIA L4, labelled ``accelerator=nvidia-l4``; cluster2 and
cluster3: 3 Tesla T4 each, ``accelerator=nvidia-tesla-t4``), gives each worker the kueue-addon
chart's spoke queues, joins them with ``gpuaas cluster join --label`` and applies the chart's
hub objects. Then OCM's three stories with their manifests unchanged (shipped in
``gpuaas.demos``): all clusters (the chart's Placement ``default``), by label (``placement-demo2-1``)
and by live GPU score (``placement-demo2-2``, ``numberOfClusters: 1``). After each, a table of the
clusters (labels, GPU model, free-GPU score, in the MultiKueueConfig or not, what runs there) and
where the submitted Job landed and why (the hub's ``explain``: the Placement's choice, scores, why
each other cluster was not chosen). At the end it deletes the Jobs and stops every server (each
stops its pods), so nothing outlives it. API calls and ``gpuaas cluster join`` only.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from gpuaas import demos
from gpuaas.cli.client import Client, ClientError, Config
from gpuaas.cli.demo import DemoError, Server
from gpuaas.vocab.kinds import BY_KIND, for_api_version

JsonDoc = dict[str, Any]
KUEUE = "/apis/kueue.x-k8s.io/v1beta2"
OCM = "/apis/cluster.open-cluster-management.io"
WORKERS = {  # name -> (fake GPUs, accelerator label)
    "cluster1": ("3:NVIDIA-L4", "nvidia-l4"),
    "cluster2": ("3:Tesla-T4", "nvidia-tesla-t4"),
    "cluster3": ("3:Tesla-T4", "nvidia-tesla-t4"),
}


class OcmDemo:
    """The script; ``servers`` are stopped by ``close`` whatever happened."""

    def __init__(self, data_dir: Path, out: Console, *, speed: float) -> None:
        self.data_dir, self.out, self.speed = data_dir, out, speed
        self.servers: dict[str, Server] = {}
        self.clients: dict[str, Client] = {}
        self.jobs: list[str] = []

    # -- servers ----------------------------------------------------------------------------------
    def start(self) -> None:
        for name, gpus in [("hub", None), *((n, g) for n, (g, _) in WORKERS.items())]:
            folder = self.data_dir / name
            folder.mkdir(parents=True, exist_ok=True)
            srv = self.servers[name] = Server(folder, gpus)
            token = srv.start()
            self.clients[name] = Client(Config(server=srv.url, token=token))
            self.say(f"{name}: gpuaas server {srv.url}" + (f", fake GPUs {gpus}" if gpus else ""))

    def delete_jobs(self) -> None:
        hub = self.clients.get("hub")
        for name in self.jobs:
            if hub is not None:
                with contextlib.suppress(ClientError):
                    hub.delete(BY_KIND["Job"], "default", name)
        self.jobs = []

    def close(self) -> None:
        self.delete_jobs()
        for c in self.clients.values():
            c.close()
        for srv in self.servers.values():
            srv.stop()

    def join(self, name: str, label: str) -> None:
        hub, worker = self.servers["hub"], self.servers[name]
        env = {**os.environ, "GPUAAS_SERVER": worker.url,
               "GPUAAS_TOKEN": self.clients[name].cfg.token or "",
               "GPUAAS_CONFIG": str(self.data_dir / "cli.json")}  # fmt: skip
        cmd = [sys.executable, "-m", "gpuaas", "cluster", "join", "--hub", hub.url, "--hub-token",
               self.clients["hub"].cfg.token or "", "--name", name, "--label",
               f"accelerator={label}"]  # fmt: skip
        done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise DemoError(f"cluster join {name}: {done.stderr or done.stdout}")

    # -- API --------------------------------------------------------------------------------------
    def apply(self, where: str, filename: str) -> list[JsonDoc]:
        """``kubectl apply`` (``create`` for generateName) of a packaged file on ``where``."""
        client, out = self.clients[where], []
        for doc in demos.manifests("002", filename):
            kind = for_api_version(str(doc.get("apiVersion")), str(doc.get("kind")))
            if kind is None:
                raise DemoError(f"{filename}: no kind {doc.get('kind')} in {doc.get('apiVersion')}")
            ns = (doc.get("metadata") or {}).get("namespace") or "default"
            ns = ns if kind.namespaced else None
            try:
                out.append(client.create(kind, ns, doc))
            except ClientError as exc:
                if exc.status != 409:
                    raise DemoError(f"{filename}: {exc}") from exc
                name = doc["metadata"]["name"]
                out.append(client.replace(kind, ns, name, doc))
        return out

    def get(self, path: str) -> JsonDoc:
        try:
            return self.clients["hub"].request("GET", path)
        except ClientError:
            return {}

    def config(self, name: str) -> list[str] | None:
        doc = self.get(f"{KUEUE}/multikueueconfigs/{name}")
        return list((doc.get("spec") or {}).get("clusters") or []) if doc else None

    def wait(self, what: str, done: Callable[[], Any], timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            got = done()
            if got:
                return got
            if time.monotonic() > deadline:
                raise DemoError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.2)

    def say(self, line: str) -> None:
        self.out.print(line, markup=False, highlight=False)

    def hold(self, seconds: float) -> None:
        time.sleep(seconds / self.speed)

    # -- showing ----------------------------------------------------------------------------------
    def table(self, config: str) -> None:
        chosen = self.config(config) or []
        wls = self.get(f"{KUEUE}/workloads").get("items") or []
        t = Table(title=f"clusters (MultiKueueConfig {config}: {', '.join(chosen) or 'none'})",
                  title_justify="left")  # fmt: skip
        for col in (
            "cluster",
            "accelerator",
            "GPUs",
            "gpuClusterAvailable",
            "chosen",
            "hub Jobs there",
        ):
            t.add_column(col)
        for name, (gpus, label) in WORKERS.items():
            score = self.get(f"{OCM}/v1alpha1/namespaces/{name}/addonplacementscores/"
                             "resource-usage-score")  # fmt: skip
            values = {
                s["name"]: s["value"] for s in (score.get("status") or {}).get("scores") or []
            }
            runs = [w["metadata"]["name"] for w in wls
                    if (w.get("status") or {}).get("clusterName") == name]  # fmt: skip
            t.add_row(name, label, gpus.replace(":", " x "),
                      str(values.get("gpuClusterAvailable", "-")),
                      "yes" if name in chosen else "no", ", ".join(runs) or "-")  # fmt: skip
        self.out.print(t)

    def submit(self, filename: str) -> str:
        job = self.apply("hub", filename)[0]
        name = str(job["metadata"]["name"])
        self.jobs.append(name)
        where = str(self.wait(f"Job {name} to land on a worker", lambda: (self.get(
            f"{KUEUE}/namespaces/default/workloads/{name}").get("status") or {}).get("clusterName")))  # fmt: skip
        info = self.get(f"/apis/gpuaas.dev/v1alpha1/namespaces/default/workloads/{name}/explain")
        self.say(f"Job default/{name} runs on {where}")
        for p in info.get("placements") or []:
            self.say(f"  why: Placement {p['placement']}: {p['reason']}; chosen "
                     f"{', '.join(p['decisions']) or 'none'}")  # fmt: skip
            if p.get("scores"):
                self.say("  scores: " + ", ".join(f"{c}={v}" for c, v in p["scores"].items()))
            for c, why in (p.get("excluded") or {}).items():
                self.say(f"  not {c}: {why}")
        return where

    # -- the script -------------------------------------------------------------------------------
    def story(self, title: str, files: list[str], config: str, want: list[str] | None) -> None:
        self.out.rule(title)
        for f in files:
            self.apply("hub", f)
        self.wait(f"MultiKueueConfig {config} to list {want}",
                  lambda: self.config(config) == want if want else self.config(config))  # fmt: skip

    def run(self) -> None:
        self.out.rule("seed 002: a hub and three workers on this machine")
        self.start()
        for name, (_, label) in WORKERS.items():
            self.apply(name, "addon-spoke.yaml")
            self.join(name, label)
            self.say(f"{name} joined the hub with label accelerator={label}")
        self.apply("hub", "addon-hub.yaml")
        self.story("Story 1: all clusters (the add-on chart's Placement `default`)",
                   ["multikueue-setup-demo1.yaml"], "default",
                   ["cluster1", "cluster2", "cluster3"])  # fmt: skip
        self.submit("job-demo1.yaml")
        self.table("default")
        self.hold(2)
        self.story("Story 2: by label accelerator=nvidia-tesla-t4 (placement-demo2-1.yaml)",
                   ["placement-demo2-1.yaml", "multikueue-setup-demo2.yaml"],
                   "multikueue-config-demo2", ["cluster2", "cluster3"])  # fmt: skip
        first = self.submit("job-demo2.yaml")
        self.table("multikueue-config-demo2")
        self.hold(2)
        self.delete_jobs()
        self.say("The Jobs of stories 1 and 2 are deleted. A team on cluster3 runs a 1-GPU Job "
                 "there directly (not through the hub), as story 2's Job did in OCM's "
                 "walkthrough")  # fmt: skip
        self.apply("cluster3", "job-demo2.yaml")
        self.story("Story 3: the T4 cluster with the most free GPUs now (placement-demo2-2.yaml)",
                   ["placement-demo2-2.yaml"], "multikueue-config-demo2", ["cluster2"])  # fmt: skip
        self.say("cluster3 has 2 free GPUs (-80), cluster2 3 (-70): the Placement chooses cluster2")
        self.submit("job-demo2.yaml")
        self.table("multikueue-config-demo2")
        self.say(f"(story 2's Job ran on {first})")
        self.hold(2)
        self.out.rule("Cleaning up: deleting the Jobs, stopping the four servers")


def run_ocm_demo(data_dir: Path, out: Console, *, speed: float) -> None:
    demo = OcmDemo(data_dir, out, speed=speed)
    try:
        demo.run()
    finally:
        demo.close()
