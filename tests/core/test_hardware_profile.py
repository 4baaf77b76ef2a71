"""ODH hardware profiles: the CRD's checks, the dashboard-shape migration, and the mutating
webhook's injection into a Notebook (opendatahub-operator v3.0.0), table-driven."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuaas.core import hardware_profile as hp
from gpuaas.core.manifest_common import ManifestError

GPU = "nvidia.com/gpu"


def profile(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "infrastructure.opendatahub.io/v1",
        "kind": "HardwareProfile",
        "metadata": {"name": "l4", "namespace": "apps"},
        "spec": spec,
    }


GPU_ID = {"identifier": GPU, "displayName": "GPU", "minCount": 1, "maxCount": 2,
          "defaultCount": 1, "resourceType": "Accelerator"}  # fmt: skip
CPU_ID = {"identifier": "cpu", "displayName": "CPU", "minCount": "1", "defaultCount": "2",
          "resourceType": "CPU"}  # fmt: skip
QUEUE = {"type": "Queue", "kueue": {"localQueueName": "team-q", "priorityClass": "high"}}
NODE = {
    "type": "Node",
    "node": {
        "nodeSelector": {"gpu": "l4"},
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
    },
}


def notebook(resources: dict[str, Any] | None = None, **pod: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "nb", "image": "img"}
    if resources is not None:
        container["resources"] = resources
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "Notebook",
        "metadata": {
            "name": "nb",
            "namespace": "team",
            "annotations": {hp.NAME_ANNOTATION: "l4"},
        },
        "spec": {"template": {"spec": {"containers": [container], **pod}}},
    }


def container_of(doc: dict[str, Any]) -> dict[str, Any]:
    c: dict[str, Any] = doc["spec"]["template"]["spec"]["containers"][0]
    return c


INJECT_CASES = {
    "queue profile fills requests, limits from maxCount, queue and priority labels": (
        profile(identifiers=[GPU_ID, CPU_ID], scheduling=QUEUE),
        None,
        {"requests": {GPU: "1", "cpu": "2"}, "limits": {GPU: "2"}},
        {hp.QUEUE_LABEL: "team-q", hp.PRIORITY_CLASS_LABEL: "high"},
        None,
    ),
    "requests the container sets are kept": (
        profile(identifiers=[GPU_ID, CPU_ID], scheduling=QUEUE),
        {"requests": {GPU: 2}, "limits": {"cpu": "3"}},
        {"requests": {GPU: 2, "cpu": "2"}, "limits": {GPU: "2", "cpu": "3"}},
        {hp.QUEUE_LABEL: "team-q", hp.PRIORITY_CLASS_LABEL: "high"},
        None,
    ),
    "node profile sets nodeSelector and tolerations, no queue label": (
        profile(identifiers=[GPU_ID], scheduling=NODE),
        None,
        {"requests": {GPU: "1"}, "limits": {GPU: "2"}},
        {},
        ({"gpu": "l4"}, [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}]),
    ),
    "a profile with nothing to apply changes only the namespace annotation": (
        profile(),
        None,
        None,
        {},
        None,
    ),
}


@pytest.mark.parametrize(
    ("prof", "resources", "want_resources", "want_labels", "want_node"),
    list(INJECT_CASES.values()),
    ids=list(INJECT_CASES),
)
def test_inject(
    prof: dict[str, Any],
    resources: dict[str, Any] | None,
    want_resources: dict[str, Any] | None,
    want_labels: dict[str, str],
    want_node: tuple[dict[str, str], list[Any]] | None,
) -> None:
    doc = notebook(copy.deepcopy(resources) if resources is not None else None)
    out = hp.inject(doc, hp.parse_hardware_profile(prof))
    assert out["metadata"]["annotations"][hp.NAMESPACE_ANNOTATION] == "apps"
    assert container_of(out).get("resources") == want_resources
    assert out["metadata"].get("labels", {}) == want_labels
    pod = out["spec"]["template"]["spec"]
    if want_node is None:
        assert "nodeSelector" not in pod and "tolerations" not in pod
    else:
        assert (pod["nodeSelector"], pod["tolerations"]) == want_node
    assert doc == notebook(copy.deepcopy(resources) if resources is not None else None)


def test_a_request_above_the_maximum_is_refused_as_a_gpuaas_rule() -> None:
    prof = hp.parse_hardware_profile(profile(identifiers=[GPU_ID], scheduling=QUEUE))
    with pytest.raises(ManifestError) as err:
        hp.inject(notebook({"requests": {GPU: 3}}), prof)
    msg = str(err.value)
    assert "Notebook team/nb" in msg
    assert f"spec.template.spec.containers[0].resources.requests[{GPU}]" in msg
    assert "maxCount 2" in msg and "gpuaas rule" in msg


def test_profile_ref_defaults_to_the_workload_namespace() -> None:
    doc = notebook()
    assert hp.profile_ref(doc) == ("team", "l4")
    doc["metadata"]["annotations"][hp.NAMESPACE_ANNOTATION] = "apps"
    assert hp.profile_ref(doc) == ("apps", "l4")
    del doc["metadata"]["annotations"][hp.NAME_ANNOTATION]
    assert hp.profile_ref(doc) is None


def test_not_found_uses_the_webhook_wording() -> None:
    err = hp.not_found("Notebook", "team", "nb", ("apps", "l4"))
    assert "hardware profile 'l4' not found in namespace 'apps'" in str(err)


BAD_PROFILES = {
    "queue without localQueueName": (
        profile(scheduling={"type": "Queue", "kueue": {}}),
        "spec.scheduling",
    ),
    "queue with a node part": (
        profile(scheduling={"type": "Queue", "kueue": {"localQueueName": "q"}, "node": {}}),
        "spec.scheduling",
    ),
    "node with a kueue part": (
        profile(scheduling={"type": "Node", "node": {}, "kueue": {"localQueueName": "q"}}),
        "spec.scheduling",
    ),
    "unknown scheduling type": (profile(scheduling={"type": "Cloud"}), "spec.scheduling.type"),
    "missing defaultCount": (
        profile(identifiers=[{"identifier": GPU, "displayName": "G", "minCount": 1}]),
        "spec.identifiers[0].defaultCount",
    ),
    "default above max": (
        profile(identifiers=[{**GPU_ID, "defaultCount": 3}]),
        "spec.identifiers[0].defaultCount",
    ),
    "max below min": (
        profile(identifiers=[{**GPU_ID, "minCount": 3, "defaultCount": 3}]),
        "spec.identifiers[0].maxCount",
    ),
    "count not a quantity": (
        profile(identifiers=[{**CPU_ID, "defaultCount": "two"}]),
        "spec.identifiers[0].defaultCount",
    ),
    "count a boolean": (
        profile(identifiers=[{**CPU_ID, "minCount": True}]),
        "spec.identifiers[0].minCount",
    ),
    "unknown resource type": (
        profile(identifiers=[{**CPU_ID, "resourceType": "Disk"}]),
        "spec.identifiers[0].resourceType",
    ),
    "bad toleration": (
        profile(scheduling={"type": "Node", "node": {"tolerations": [{"operator": "Equal"}]}}),
        "spec.scheduling.node.tolerations[0].operator",
    ),
}


@pytest.mark.parametrize(("doc", "field"), list(BAD_PROFILES.values()), ids=list(BAD_PROFILES))
def test_bad_profiles_name_the_field(doc: dict[str, Any], field: str) -> None:
    with pytest.raises(ManifestError) as err:
        hp.parse_hardware_profile(doc)
    assert err.value.field == field
    assert "HardwareProfile apps/l4" in str(err.value)


def test_dashboard_profile_is_migrated_as_the_operator_does() -> None:
    old = {
        "apiVersion": hp.DASHBOARD_API_VERSION,
        "kind": "HardwareProfile",
        "metadata": {"name": "small", "namespace": "apps"},
        "spec": {
            "displayName": "Small GPU",
            "description": "one GPU",
            "enabled": False,
            "identifiers": [GPU_ID],
            "nodeSelector": {"gpu": "l4"},
            "tolerations": NODE["node"]["tolerations"],  # type: ignore[index]
        },
    }
    new = hp.migrate_dashboard_profile(old)
    assert new["apiVersion"] == "infrastructure.opendatahub.io/v1"
    ann = new["metadata"]["annotations"]
    assert ann[hp.MIGRATED_ANNOTATION] == "hardwareprofiles.dashboard.opendatahub.io/small"
    assert (ann[hp.DISPLAY_NAME_ANNOTATION], ann[hp.DISABLED_ANNOTATION]) == ("Small GPU", "true")
    assert new["spec"]["scheduling"]["type"] == "Node"
    parsed = hp.parse_hardware_profile(old)
    assert (parsed.display_name, parsed.enabled, parsed.scheduling_type) == (
        "Small GPU",
        False,
        "Node",
    )
    assert parsed.node_selector == {"gpu": "l4"}


@given(
    default=st.integers(min_value=0, max_value=8),
    extra=st.integers(min_value=0, max_value=8),
    asked=st.one_of(st.none(), st.integers(min_value=0, max_value=20)),
)
def test_injected_requests_never_exceed_the_maximum(
    default: int, extra: int, asked: int | None
) -> None:
    """Invariant: what inject returns never asks for more than maxCount; else it refuses."""
    ident = {"identifier": GPU, "displayName": "G", "minCount": 0,
             "defaultCount": default, "maxCount": default + extra}  # fmt: skip
    prof = hp.parse_hardware_profile(profile(identifiers=[ident], scheduling=QUEUE))
    resources = None if asked is None else {"requests": {GPU: asked}}
    try:
        out = hp.inject(notebook(resources), prof)
    except ManifestError:
        assert asked is not None and asked > default + extra
        return
    got = int(container_of(out)["resources"]["requests"][GPU])
    assert got <= default + extra
    assert got == (default if asked is None else asked)
