"""The dashboard's workbench pages in a real browser: the "New workbench" form, a full pool that
queues the second workbench (position and why), Stop freeing the GPU, the admin's profiles page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from dashboard_helpers import namespace_token

from gpuaas.api.testing import ServerProcess
from gpuaas.vocab.kinds import BY_KIND

pytestmark = pytest.mark.browser
GPU = "nvidia.com/gpu"
SETUP: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace",
     "metadata": {"name": "ds", "labels": {"kueue.openshift.io/managed": "true"}}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "l4"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["cpu", GPU],
              "flavors": [{"name": "l4", "resources": [{"name": "cpu", "nominalQuota": 8},
                                                        {"name": GPU, "nominalQuota": 1}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "ds-queue", "namespace": "ds"}, "spec": {"clusterQueue": "cq"}},
    {"apiVersion": "infrastructure.opendatahub.io/v1", "kind": "HardwareProfile",
     "metadata": {"name": "l4-1gpu", "namespace": "ds",
                  "annotations": {"opendatahub.io/display-name": "NVIDIA L4 1GPU"}},
     "spec": {"identifiers": [
         {"identifier": "cpu", "displayName": "CPU", "minCount": 1, "defaultCount": 1},
         {"identifier": GPU, "displayName": "L4", "minCount": 1, "defaultCount": 1, "maxCount": 1}],
      "scheduling": {"type": "Queue", "kueue": {"localQueueName": "ds-queue"}}}},
]  # fmt: skip


def _path(doc: dict[str, Any]) -> str:
    k = BY_KIND[doc["kind"]]
    ns = doc["metadata"].get("namespace")
    return f"{k.base_path()}/namespaces/{ns}/{k.plural}" if ns else f"{k.base_path()}/{k.plural}"


def _login(browser: Any, server: ServerProcess, token: str) -> Any:
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    page.goto(server.url + "/")
    page.fill("#token", token)
    page.click("#login-submit")
    page.wait_for_selector("#live.on", timeout=10_000)
    return page


def _create(page: Any, name: str) -> None:
    page.fill("#wb-name", name)
    page.select_option("#wb-profile", "ds/l4-1gpu")
    page.fill("#wb-command", "sleep 600")
    page.click("#wb-create")


def test_new_workbench_queues_then_runs_when_a_gpu_frees(
    browser: Any, server: ServerProcess, artifacts: Path
) -> None:
    with server.client() as c:
        for doc in SETUP:
            assert c.post(_path(doc), json=doc).status_code == 201
        token = namespace_token(c, "ds")
    page = _login(browser, server, token)
    assert page.locator('#nav a[data-page="hardwareprofiles"]').is_hidden()
    page.goto(server.url + "/#/workbenches")
    page.wait_for_selector('#wb-profile option[value="ds/l4-1gpu"]', state="attached")
    _create(page, "first")
    first = page.locator('tr[data-wb="ds/first"]')
    first.locator(".badge.wb-Running").wait_for(timeout=20_000)
    open_link = first.locator("a.open")
    assert open_link.get_attribute("href").startswith("/workbenches/ds/first/lab?token=")
    _create(page, "second")
    second = page.locator('tr[data-wb="ds/second"]')
    second.locator(".badge.wb-Queued").wait_for(timeout=20_000)
    position = "document.querySelector('tr[data-wb=\"ds/second\"] .position')"
    page.wait_for_function(f"() => {position}?.textContent.trim() === '1 / 1'", timeout=10_000)
    assert "insufficient unused quota" in second.locator(".why").inner_text()
    page.screenshot(path=str(artifacts / "workbenches-queued.png"), full_page=True)
    # Stop, clicked in the same task as a fresh render (as a live update can land between a
    # press and its release): a page rendered again keeps the elements it shows unchanged, and
    # a click on one rendered anew still acts (handlers are on the document, not bound after).
    kept, replaced = page.evaluate(
        """() => {
          const stop = () => document.querySelector('tr[data-wb="ds/first"] [data-stop]');
          const before = stop();
          window.dispatchEvent(new HashChangeEvent("hashchange"));  // render() again
          const kept = stop() === before;
          const name = document.getElementById("wb-name");  // the form's markup changes
          name.value = "typed";
          name.dispatchEvent(new Event("input", { bubbles: true }));
          window.dispatchEvent(new HashChangeEvent("hashchange"));  // all of it anew
          const after = stop();
          after.click();
          return [kept, after !== before];
        }"""
    )
    assert kept and replaced
    first.locator(".badge.wb-Stopped").wait_for(timeout=20_000)
    second.locator(".badge.wb-Running").wait_for(timeout=20_000)
    page.screenshot(path=str(artifacts / "workbenches-admitted.png"), full_page=True)
    # A bad name is refused by the API and the reason shown, nothing created.
    page.fill("#wb-name", "Bad_Name")
    page.evaluate("document.getElementById('wb-name').removeAttribute('pattern')")
    page.click("#wb-create")
    page.wait_for_selector("#wb-error:not([hidden])", timeout=10_000)
    assert "Bad_Name" in page.inner_text("#wb-error")
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as c:
        notebooks = "/apis/kubeflow.org/v1/namespaces/ds/notebooks"
        names = [n["metadata"]["name"] for n in c.get(notebooks).json()["items"]]
        assert sorted(names) == ["first", "second"]
        for name in names:
            assert c.delete(f"{notebooks}/{name}").status_code == 200
    admin = _login(browser, server, server.admin_token)
    admin.goto(server.url + "/#/hardwareprofiles")
    row = admin.locator('tr[data-hwp="ds/l4-1gpu"]')
    row.wait_for(timeout=10_000)
    text = row.inner_text()
    assert "NVIDIA L4 1GPU" in text and "Queue → ds-queue" in text and "L4: 1 / 1 / 1" in text
