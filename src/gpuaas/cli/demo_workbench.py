"""``gpuaas demo 001``: seed 001's workbenches, live: hardware profiles, a full GPU pool, a queue.

Two hardware profiles ("NVIDIA L4 1GPU", "NVIDIA L4 2GPU") and three users' workbenches (Kubeflow
Notebooks as RHOAI's dashboard writes them) on a pool of 3 GPUs: alice's 2-GPU workbench runs a
training loop, bob's 1-GPU workbench a real JupyterLab (the ``workbench`` extra) reached through
the gpuaas server; carol's is queued, with its place and why in its Notebook's status. Bob's
JupyterLab sits idle: the idle detector (the demo's GpuaasConfiguration: a 20 s window, action
Evict, which for a Notebook means Stop) reads the GPU's load from the pod's processes and stops it
with Kubeflow's ``kubeflow-resource-stopped``, as RHOAI's culler does; carol's is admitted on the
freed GPU by itself and her JupyterLab answers. The drawing is ``cli.demo_view`` (the workloads
of the Notebooks, their processes, the queue), as in demo 004.
"""

from __future__ import annotations

import time

import httpx

from gpuaas.cli.demo import Demo, DemoError
from gpuaas.vocab.kinds import NOTEBOOK

NS = "private-ai"
NB_PATH = f"/apis/kubeflow.org/v1/namespaces/{NS}/notebooks"
MERGE = {"content-type": "application/merge-patch+json"}


class WorkbenchDemo(Demo):
    demo_id = "001"

    def notebook_status(self, name: str) -> dict[str, object]:
        doc = self.client.request("GET", f"{NB_PATH}/{name}")
        status = doc.get("status")
        return status if isinstance(status, dict) else {}

    def annotations(self, name: str) -> dict[str, str]:
        meta = self.client.request("GET", f"{NB_PATH}/{name}").get("metadata") or {}
        found = meta.get("annotations")
        return found if isinstance(found, dict) else {}

    def say(self, line: str) -> None:
        if self.headless:
            self.out.print(line, markup=False, highlight=False)
        else:
            self.caption = f"{self.caption}\n{line}"
            self.show()

    def wait_jupyter(self, name: str, timeout: float = 180.0) -> str:
        """Wait until the workbench's JupyterLab answers through the server; its Open link."""
        url = f"{self.client.cfg.server}/workbenches/{NS}/{name}/"
        token = self.client.cfg.token or ""
        deadline = time.monotonic() + timeout
        while True:
            self.show()
            try:
                r = httpx.get(f"{url}api/status", headers={"Authorization": f"Bearer {token}"})
                if r.status_code == 200:
                    return f"{url}lab?token={token}"
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise DemoError(f"JupyterLab of {name} did not answer within {timeout:.0f}s")
            time.sleep(0.5)

    def run(self) -> None:
        with self.live():
            self.step("Applying seed 001: ClusterQueue rhoai-main-queue (3 GPUs), LocalQueue "
                      "private-ai-queue, hardware profiles 'NVIDIA L4 1GPU' and 'NVIDIA L4 2GPU'")  # fmt: skip
            self.apply("setup.yaml")
            self.hold(1.5)
            for user, profile in (("alice", "NVIDIA L4 2GPU"), ("bob", "NVIDIA L4 1GPU")):
                self.step(f"{user} creates a workbench with the '{profile}' profile: the profile "
                          "fills in its resources and queue; Kueue admits it; its pod starts")  # fmt: skip
                self.apply(f"{user}-workbench.yaml")
                key = f"{NS}/{user}-workbench"
                self.wait(f"{user}'s workbench to run", lambda k=key: self.state(k) == "Running")  # type: ignore[misc]
            link = self.wait_jupyter("bob-workbench")
            self.say(f"bob's JupyterLab answers through the server: Open {link}")
            self.step("carol creates a workbench with 'NVIDIA L4 1GPU': all 3 GPUs are held, so "
                      "Kueue queues it (Pending)")  # fmt: skip
            self.apply("carol-workbench.yaml")
            self.wait(
                "carol's workbench to be queued",
                lambda: self.state(f"{NS}/carol-workbench") == "Pending",
            )
            waiting = self.notebook_status("carol-workbench").get("containerState")
            self.say(f"carol's Notebook status: {waiting}")
            self.step("bob's JupyterLab sits idle (alice's loop keeps her GPUs busy): the idle "
                      "detector reads each GPU's load from its pod's processes and, after 20 s "
                      "idle, stops bob's workbench as RHOAI's culler does "
                      "(kubeflow-resource-stopped); its GPU is freed")  # fmt: skip
            self.wait(
                "the idle detector to stop bob's workbench",
                lambda: "kubeflow-resource-stopped" in self.annotations("bob-workbench"),
                timeout=180,
            )
            self.say(
                "bob's Notebook: kubeflow-resource-stopped="
                + self.annotations("bob-workbench")["kubeflow-resource-stopped"]
            )
            self.wait(
                "carol's workbench to run on the freed GPU",
                lambda: self.state(f"{NS}/carol-workbench") == "Running",
                timeout=30,
            )
            link = self.wait_jupyter("carol-workbench")
            self.say(f"carol's JupyterLab answers: Open {link}")
            self.hold(3)
            self.step("Cleaning up: deleting the workbenches; their JupyterLabs are stopped")
            for user in ("alice", "bob", "carol"):
                self.client.delete(NOTEBOOK, NS, f"{user}-workbench")
            self.wait("every process to be gone", lambda: not self.snap.pods, timeout=60)
