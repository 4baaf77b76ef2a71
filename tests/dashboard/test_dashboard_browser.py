"""The dashboard in a real browser: login, seed 004's preemption live, tenancy, screenshots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dashboard_helpers import apply_seed, namespace_token

from gpuaas.api.testing import ServerProcess

pytestmark = pytest.mark.browser

VIEWPORT = {"width": 1440, "height": 900}


def open_dashboard(browser: Any, server: ServerProcess, token: str) -> Any:
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server.url + "/")
    page.fill("#token", token)
    page.click("#login-submit")
    page.wait_for_selector("#live.on", timeout=10_000)
    return page


# How many times the page asked for the whole summary: at sign-in, and then only as its
# fallback while the live stream is down.
SUMMARY_FETCHES = (
    "performance.getEntriesByType('resource')"
    ".filter((e) => new URL(e.name).pathname.endsWith('/dashboard/summary')).length"
)


def row(page: Any, key: str) -> Any:
    return page.locator(f'tr[data-key="{key}"]')


def test_preemption_shows_live_without_reload(
    browser: Any, server: ServerProcess, artifacts: Path
) -> None:
    with server.client() as c:
        apply_seed(c, "setup.yaml", "team-b-job.yaml")
    page = open_dashboard(browser, server, server.admin_token)
    page.screenshot(path=str(artifacts / "01-overview-before.png"), full_page=True)
    page.goto(server.url + "/#/workloads")
    b = row(page, "team-b/team-b-job")
    b.locator(".badge.Admitted").wait_for(timeout=5_000)
    page.evaluate("window.__sameDocument = true")  # a reload would drop this
    fetched = page.evaluate(SUMMARY_FETCHES)  # the sign-in's

    with server.client() as c:
        apply_seed(c, "team-a-job.yaml")
    a = row(page, "team-a/team-a-job")
    a.wait_for(timeout=5_000)
    # It came down the live stream: the page never fell back to polling the summary (how soon
    # a change is pushed is measured by bench/dashboard_push.py, not asserted here).
    assert page.evaluate(SUMMARY_FETCHES) == fetched, "the page polled /dashboard/summary"
    assert page.locator("#live.on").count() == 1
    # team-b's pods are stopped by the local runtime first, then team-a-job is admitted
    a.locator(".badge.Admitted").wait_for(timeout=10_000)
    b.locator(".badge.Evicted").wait_for(timeout=10_000)
    page.screenshot(path=str(artifacts / "02-workloads-preempted.png"), full_page=True)

    assert page.evaluate("window.__sameDocument") is True, "the page reloaded"
    b_text = b.inner_text()
    assert "Evicted" in b_text and "Pending" in b_text
    assert "team-a/team-a-job" in b_text  # preempted by
    assert "InCohortReclaimWhileBorrowing" in b_text
    assert "insufficient unused quota" in b_text  # why pending, on the row
    assert "Admitted" in a.inner_text()
    banner = page.locator("#banner")
    assert banner.is_visible()
    assert "team-a-job" in banner.inner_text() and "team-b-job" in banner.inner_text()

    page.goto(server.url + "/#/overview")
    page.locator(".events li.preempt").first.wait_for(timeout=5_000)
    page.screenshot(path=str(artifacts / "03-overview-after.png"), full_page=True)
    with server.client() as c:  # a flavor this node cannot serve, for the Flavors page
        h100 = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor",
                "metadata": {"name": "h100-flavor"},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100"}}}  # fmt: skip
        assert c.post("/apis/kueue.x-k8s.io/v1beta1/resourceflavors", json=h100).status_code == 201
    for name in ("clusterqueues", "cohorts", "localqueues", "flavors", "gpus"):
        page.goto(f"{server.url}/#/{name}")
        page.wait_for_selector("main h1")
        if name == "flavors":  # seed 004's two flavors fit this node (4 fake GPUs); H100 does not
            page.locator('.node-match[data-matches="false"]').wait_for(timeout=5_000)
            assert page.locator('.node-match[data-matches="true"]').count() == 2
            assert "needs label nvidia.com/gpu.product=NVIDIA-H100" in page.inner_text("main")
            assert page.locator(".node-match.ok .node-gpus li").count() == 8
            # every node of the runtime (GET /nodes; here this server's one node), with the
            # flavors whose nodeLabels it carries: not the H100 one
            card = page.locator("[data-node-card]")
            card.first.wait_for(timeout=5_000)
            assert card.count() == 1
            chips = card.first.locator(".node-flavors .chip").all_inner_texts()
            assert "h100-flavor" not in chips and len(chips) == 2
        if name == "gpus":  # each node's GPUs, and the pod holding each
            slots = page.locator("[data-node-gpu]")
            held_slots = page.locator('[data-node-gpu][data-holder*="/team-a-job/"]')
            held_slots.nth(1).wait_for(timeout=10_000)  # the node list is re-read every 2 s
            assert slots.count() == 4
            holders = [slots.nth(i).get_attribute("data-holder") for i in range(4)]
            assert sorted(h.split("/")[1] for h in holders if h) == ["team-a-job"] * 2
        page.screenshot(path=str(artifacts / f"04-{name}.png"), full_page=True)
    # the GPU panel (fake GPUs, live pinning) names team-a-job as the holder of two GPUs
    held = page.locator(".gpu[data-key]", has_text="team-a/team-a-job")  # the telemetry panel
    held.first.wait_for(timeout=5_000)
    assert held.count() == 2
    assert page.locator(".gpu[data-key]", has_text="free").count() == 2

    page.goto(server.url + "/#/workload/team-b/team-b-job")
    page.locator("pre.yaml", has_text="kind: Workload").wait_for(timeout=5_000)
    page.locator(".timeline li.preempt").first.wait_for(timeout=5_000)
    detail = page.inner_text("main")
    assert "Why pending" in detail and "Preempted" in detail
    page.screenshot(path=str(artifacts / "05-workload-detail.png"), full_page=True)


def test_namespace_token_sees_only_its_namespace(
    browser: Any, server: ServerProcess, artifacts: Path
) -> None:
    with server.client() as c:
        apply_seed(c, "setup.yaml", "team-b-job.yaml", "team-a-job.yaml")
        token = namespace_token(c, "team-a")
    page = open_dashboard(browser, server, token)
    page.goto(server.url + "/#/workloads")
    row(page, "team-a/team-a-job").wait_for(timeout=5_000)
    assert row(page, "team-b/team-b-job").count() == 0
    page.goto(server.url + "/#/localqueues")
    page.wait_for_selector("main table")
    assert "team-b" not in page.inner_text("main table")
    page.goto(server.url + "/#/clusterqueues")  # cluster-scoped: visible to every token
    page.locator('[data-cq="team-b-cq"]').wait_for(timeout=5_000)
    page.goto(server.url + "/#/workload/team-b/team-b-job")
    page.locator("main", has_text="may not get workloads in namespace team-b").wait_for(
        timeout=5_000
    )
    page.screenshot(path=str(artifacts / "06-namespace-token.png"), full_page=True)
    assert "team-a" in page.inner_text("#who")


def test_bad_token_is_refused_at_login(browser: Any, server: ServerProcess) -> None:
    page = browser.new_page(viewport=VIEWPORT)
    page.goto(server.url + "/")
    page.fill("#token", "not-a-token")
    page.click("#login-submit")
    page.locator("#login-error", has_text="unknown token").wait_for(timeout=5_000)
    assert page.locator("#login").is_visible()


def test_workload_filters_act_even_on_a_page_rendered_that_moment(
    browser: Any, server: ServerProcess
) -> None:
    """The Workloads toolbar: typing filters the rows by name, a state button by state. Each is
    done in the same task as a render that replaced the toolbar (as a live update can land
    between a press and its release): the handlers are on the document, so nothing is lost."""
    with server.client() as c:
        apply_seed(c, "setup.yaml", "team-b-job.yaml")
    page = open_dashboard(browser, server, server.admin_token)
    page.goto(server.url + "/#/workloads")
    row(page, "team-b/team-b-job").locator(".badge.Admitted").wait_for(timeout=5_000)
    with server.client() as c:
        apply_seed(c, "team-a-job.yaml")
    row(page, "team-b/team-b-job").locator(".badge.Evicted").wait_for(timeout=10_000)
    replaced = page.evaluate(
        """() => {
          const before = document.querySelector('[data-filter="Admitted"]');
          const search = document.getElementById("wl-search");
          search.value = "team-";  // the toolbar's markup changes: rendered anew
          search.dispatchEvent(new Event("input", { bubbles: true }));
          const after = document.querySelector('[data-filter="Admitted"]');
          after.click();
          return after !== before;
        }"""
    )
    assert replaced
    page.wait_for_function(
        "() => [...document.querySelectorAll('#workloads tbody tr')].map(r => r.dataset.key)"
        ".join() === 'team-a/team-a-job'",
        timeout=10_000,
    )
    page.fill("#wl-search", "team-b")
    page.click('[data-filter="all"]')
    page.wait_for_function(
        "() => [...document.querySelectorAll('#workloads tbody tr')].map(r => r.dataset.key)"
        ".join() === 'team-b/team-b-job'",
        timeout=10_000,
    )
