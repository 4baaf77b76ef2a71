"""The scenario file model (/work/shared/scenario-format.md) and its structural validation.

This module owns the ``Scenario`` envelope: metadata, configuration, the objects created at time 0,
the steps and their expectations, each checked for shape with an error that names the file, the
step and the field. It does not interpret the Kubernetes objects inside (``core.manifests`` does,
called by ``sim.runner``) and it runs nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuaas.core.config import API_VERSIONS, SchedulerConfig, parse_configuration
from gpuaas.core.errors import ApplyError
from gpuaas.sim.files import load_documents

API_GROUP = "gpuaas.dev"
API_VERSION = "gpuaas.dev/v1alpha1"
KIND = "Scenario"

_STEP_FIELDS = {
    "at",
    "apply",
    "delete",
    "finish",
    "admissionChecks",
    "podsReady",
    "podsNotReady",
    "expect",
}
_EXPECT_FIELDS = {
    "admitted", "pending", "preempted", "awaitingChecks", "clusterQueues", "placements"
}  # fmt: skip
_CHECK_FIELDS = {"workload", "check", "state", "message", "requeueAfterSeconds"}
CHECK_STATES = ("Pending", "Ready", "Retry", "Rejected")
_ADMITTED_FIELDS = {"clusterQueue", "flavors", "count"}
_CQ_FIELDS = {"admittedWorkloads", "pendingWorkloads", "usage"}
_DELETE_FIELDS = {"apiVersion", "kind", "namespace", "name"}


class ScenarioError(Exception):
    """A scenario file that cannot be used; ``str(e)`` is the whole one-line message."""

    def __init__(self, file: str, where: str, reason: str, scenario: str | None = None) -> None:
        self.file = file
        self.where = where
        self.reason = reason
        self.scenario = scenario  # the scenario's name, when the error comes after it is known
        super().__init__(f"{file}: {where}: {reason}" if where else f"{file}: {reason}")


Time = int | float


@dataclass(slots=True, frozen=True)
class DeleteRef:
    api_version: str
    kind: str
    namespace: str | None
    name: str


@dataclass(slots=True)
class ExpectedAdmission:
    cluster_queue: str | None = None
    flavors: dict[str, dict[str, str]] | None = None  # podSet -> resource -> flavor
    count: dict[str, int] | None = None  # podSet -> admitted pods


@dataclass(slots=True)
class ExpectedClusterQueue:
    admitted_workloads: int | None = None
    pending_workloads: int | None = None
    usage: dict[str, dict[str, Any]] | None = None  # flavor -> resource -> quantity as written


@dataclass(slots=True, frozen=True)
class CheckUpdate:
    """One ``admissionChecks`` entry: the runner plays the check's controller."""

    workload: str
    check: str
    state: str
    message: str = ""
    requeue_after_seconds: int | None = None


@dataclass(slots=True)
class Expectation:
    admitted: dict[str, ExpectedAdmission] | None = None
    pending: list[str] | None = None
    preempted: list[str] | None = None
    awaiting_checks: list[str] | None = None
    cluster_queues: dict[str, ExpectedClusterQueue] = field(default_factory=dict)
    placements: dict[str, list[str]] | None = None  # OCM Placement ns/name -> its clusters


@dataclass(slots=True)
class Step:
    index: int
    at: Time
    apply: list[dict[str, Any]] = field(default_factory=list)
    delete: list[DeleteRef] = field(default_factory=list)
    finish: list[str] = field(default_factory=list)
    admission_checks: list[CheckUpdate] = field(default_factory=list)
    # waitForPodsReady: the runner plays the job controller, saying whose pods all run (or not)
    pods_ready: list[str] = field(default_factory=list)
    pods_not_ready: list[str] = field(default_factory=list)
    expect: Expectation | None = None


@dataclass(slots=True)
class Scenario:
    file: str
    name: str
    source: str | None
    config: SchedulerConfig
    objects: list[dict[str, Any]]
    steps: list[Step]


def is_scenario_document(doc: object) -> bool:
    """A document meant as a scenario: kind Scenario or an apiVersion in gpuaas.dev."""
    if not isinstance(doc, dict):
        return False
    api = doc.get("apiVersion")
    return doc.get("kind") == KIND or (isinstance(api, str) and api.startswith(API_GROUP + "/"))


def load_scenarios(path: Path | str, *, skip_manifests: bool = False) -> list[Scenario]:
    """Every scenario in a file. With ``skip_manifests`` a file of plain Kubernetes manifests
    (no scenario document at all) gives an empty list instead of an error: a directory of
    examples keeps each scenario's manifests beside it."""
    file = str(path)
    docs = load_documents(path)
    if (
        skip_manifests
        and docs
        and not any(is_scenario_document(d) for d in docs)
        and all(isinstance(d, dict) and "kind" in d and "apiVersion" in d for d in docs)
    ):
        return []
    if not docs:
        raise ScenarioError(file, "", "no document in file; expected a Scenario")
    return [parse_scenario(doc, file, i, len(docs)) for i, doc in enumerate(docs)]


def parse_scenario(doc: object, file: str, index: int = 0, total: int = 1) -> Scenario:
    where = f"document {index + 1}" if total > 1 else ""
    root = _mapping(doc, file, where, "document")
    if root.get("kind") != KIND:
        raise ScenarioError(file, where, f"kind: expected {KIND!r}, got {root.get('kind')!r}")
    if root.get("apiVersion") != API_VERSION:
        got = root.get("apiVersion")
        raise ScenarioError(file, where, f"apiVersion: expected {API_VERSION!r}, got {got!r}")
    meta = _mapping(root.get("metadata"), file, where, "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ScenarioError(file, where, "metadata.name: required, a non-empty string")
    try:
        return _parse_spec(root, file, name)
    except ScenarioError as exc:
        exc.scenario = name
        raise


def _parse_spec(root: dict[str, Any], file: str, name: str) -> Scenario:
    where = f"scenario {name!r}"
    source = root["metadata"].get("source")
    spec = _mapping(root.get("spec", {}), file, where, "spec")
    unknown = set(spec) - {"configuration", "objects", "steps"}
    if unknown:
        raise ScenarioError(file, where, f"spec.{sorted(unknown)[0]}: unknown field")
    config = _parse_configuration(spec.get("configuration"), file, where)
    objects = _objects(spec.get("objects", []), file, where, "spec.objects")
    raw_steps = spec.get("steps", [])
    if not isinstance(raw_steps, list):
        raise ScenarioError(file, where, "spec.steps: expected a list of steps")
    steps: list[Step] = []
    for i, raw in enumerate(raw_steps):
        step = _parse_step(raw, i, file, where)
        if steps and step.at < steps[-1].at:
            raise ScenarioError(
                file,
                f"{where}: step {i}",
                f"at: {step.at} is earlier than the previous step's {steps[-1].at};"
                " steps must be in non-decreasing order",
            )
        steps.append(step)
    return Scenario(
        file=file,
        name=name,
        source=str(source) if source is not None else None,
        config=config,
        objects=objects,
        steps=steps,
    )


def _parse_configuration(raw: object, file: str, where: str) -> SchedulerConfig:
    """Kueue's Configuration fields that change scheduling, read by the core's parser."""
    if raw is None:
        return SchedulerConfig()
    conf = _mapping(raw, file, where, "spec.configuration")
    try:
        return parse_configuration({"apiVersion": API_VERSIONS[0], "kind": "Configuration", **conf})
    except ApplyError as exc:
        raise ScenarioError(file, where, f"spec.configuration.{exc.field}: {exc.reason}") from None


def _parse_step(raw: object, i: int, file: str, scenario_where: str) -> Step:
    where = f"{scenario_where}: step {i}"
    step = _mapping(raw, file, where, "step")
    unknown = set(step) - _STEP_FIELDS
    if unknown:
        raise ScenarioError(file, where, f"{sorted(unknown)[0]}: unknown field")
    if "at" not in step:
        raise ScenarioError(file, where, "at: required (simulated seconds)")
    at = step["at"]
    if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at) or at < 0:
        raise ScenarioError(file, where, f"at: expected a non-negative number, got {at!r}")
    where = f"{where} (at {at})"
    apply = _objects(step.get("apply", []), file, where, "apply")
    delete = [
        _delete_ref(d, j, file, where) for j, d in enumerate(_list(step, "delete", file, where))
    ]
    finish = [
        _workload_key(k, file, where, f"finish[{j}]")
        for j, k in enumerate(_list(step, "finish", file, where))
    ]
    checks = [
        _check_update(c, j, file, where)
        for j, c in enumerate(_list(step, "admissionChecks", file, where))
    ]
    ready = {
        name: [
            _workload_key(k, file, where, f"{name}[{j}]")
            for j, k in enumerate(_list(step, name, file, where))
        ]
        for name in ("podsReady", "podsNotReady")
    }
    expect = _parse_expect(step["expect"], file, where) if step.get("expect") is not None else None
    return Step(
        index=i,
        at=at,
        apply=apply,
        delete=delete,
        finish=finish,
        admission_checks=checks,
        pods_ready=ready["podsReady"],
        pods_not_ready=ready["podsNotReady"],
        expect=expect,
    )


def _check_update(raw: object, j: int, file: str, where: str) -> CheckUpdate:
    fld = f"admissionChecks[{j}]"
    entry = _mapping(raw, file, where, fld)
    unknown = set(entry) - _CHECK_FIELDS
    if unknown:
        raise ScenarioError(file, where, f"{fld}.{sorted(unknown)[0]}: unknown field")
    workload = _workload_key(entry.get("workload"), file, where, f"{fld}.workload")
    check = _string(entry.get("check"), file, where, f"{fld}.check")
    state = entry.get("state")
    if state not in CHECK_STATES:
        raise ScenarioError(
            file, where, f"{fld}.state: expected one of {', '.join(CHECK_STATES)}, got {state!r}"
        )
    message = entry.get("message", "")
    if not isinstance(message, str):
        raise ScenarioError(file, where, f"{fld}.message: expected a string")
    after = entry.get("requeueAfterSeconds")
    if after is not None:
        after = _count(after, file, where, f"{fld}.requeueAfterSeconds")
        if state != "Retry":
            raise ScenarioError(
                file, where, f"{fld}.requeueAfterSeconds: only a Retry state carries it"
            )
    return CheckUpdate(workload, check, str(state), message, after)


def _parse_expect(raw: object, file: str, where: str) -> Expectation:
    exp = _mapping(raw, file, where, "expect")
    unknown = set(exp) - _EXPECT_FIELDS
    if unknown:
        raise ScenarioError(file, where, f"expect.{sorted(unknown)[0]}: unknown field")
    out = Expectation()
    if "admitted" in exp:
        out.admitted = _parse_admitted(exp["admitted"], file, where)
    for name, attr in (
        ("pending", "pending"),
        ("preempted", "preempted"),
        ("awaitingChecks", "awaiting_checks"),
    ):
        if name in exp:
            keys = exp[name] if exp[name] is not None else []
            if not isinstance(keys, list):
                raise ScenarioError(
                    file, where, f"expect.{name}: expected a list of namespace/name"
                )
            parsed = [
                _workload_key(k, file, where, f"expect.{name}[{j}]") for j, k in enumerate(keys)
            ]
            setattr(out, attr, parsed)
    if "placements" in exp:
        out.placements = {}
        for key, clusters in _mapping(exp["placements"] or {}, file, where,
                                      "expect.placements").items():  # fmt: skip
            fld = f"expect.placements.{key}"
            _workload_key(key, file, where, fld)  # namespace/name
            if not isinstance(clusters, list) or not all(isinstance(c, str) for c in clusters):
                raise ScenarioError(file, where, f"{fld}: expected a list of cluster names")
            out.placements[str(key)] = list(clusters)
    cqs = _mapping(exp.get("clusterQueues") or {}, file, where, "expect.clusterQueues")
    for cq_name, cq_raw in cqs.items():
        out.cluster_queues[str(cq_name)] = _parse_cq(
            cq_raw, file, where, f"expect.clusterQueues.{cq_name}"
        )
    return out


def _parse_admitted(raw: object, file: str, where: str) -> dict[str, ExpectedAdmission]:
    if raw is None:
        return {}
    if isinstance(raw, list):
        keys = [_workload_key(k, file, where, f"expect.admitted[{j}]") for j, k in enumerate(raw)]
        return {k: ExpectedAdmission() for k in keys}
    entries = _mapping(raw, file, where, "expect.admitted")
    out: dict[str, ExpectedAdmission] = {}
    for key, body in entries.items():
        fld = f"expect.admitted.{key}"
        k = _workload_key(key, file, where, "expect.admitted")
        spec = _mapping(body if body is not None else {}, file, where, fld)
        unknown = set(spec) - _ADMITTED_FIELDS
        if unknown:
            raise ScenarioError(file, where, f"{fld}.{sorted(unknown)[0]}: unknown field")
        exp = ExpectedAdmission()
        if spec.get("clusterQueue") is not None:
            exp.cluster_queue = _string(spec["clusterQueue"], file, where, f"{fld}.clusterQueue")
        if spec.get("flavors") is not None:
            exp.flavors = {}
            for ps, res_map in _mapping(spec["flavors"], file, where, f"{fld}.flavors").items():
                rm = _mapping(res_map, file, where, f"{fld}.flavors.{ps}")
                exp.flavors[str(ps)] = {
                    str(r): _string(f, file, where, f"{fld}.flavors.{ps}.{r}")
                    for r, f in rm.items()
                }
        if spec.get("count") is not None:
            exp.count = {}
            for ps, n in _mapping(spec["count"], file, where, f"{fld}.count").items():
                exp.count[str(ps)] = _count(n, file, where, f"{fld}.count.{ps}")
        out[k] = exp
    return out


def _parse_cq(raw: object, file: str, where: str, fld: str) -> ExpectedClusterQueue:
    spec = _mapping(raw if raw is not None else {}, file, where, fld)
    unknown = set(spec) - _CQ_FIELDS
    if unknown:
        raise ScenarioError(file, where, f"{fld}.{sorted(unknown)[0]}: unknown field")
    out = ExpectedClusterQueue()
    if spec.get("admittedWorkloads") is not None:
        out.admitted_workloads = _count(
            spec["admittedWorkloads"], file, where, f"{fld}.admittedWorkloads"
        )
    if spec.get("pendingWorkloads") is not None:
        out.pending_workloads = _count(
            spec["pendingWorkloads"], file, where, f"{fld}.pendingWorkloads"
        )
    if spec.get("usage") is not None:
        out.usage = {}
        for flavor, res_map in _mapping(spec["usage"], file, where, f"{fld}.usage").items():
            rm = _mapping(res_map, file, where, f"{fld}.usage.{flavor}")
            for res, qty in rm.items():
                if isinstance(qty, bool) or not isinstance(qty, str | int | float):
                    raise ScenarioError(
                        file, where, f"{fld}.usage.{flavor}.{res}: expected a quantity, got {qty!r}"
                    )
            out.usage[str(flavor)] = {str(r): q for r, q in rm.items()}
    return out


def _delete_ref(raw: object, j: int, file: str, where: str) -> DeleteRef:
    fld = f"delete[{j}]"
    d = _mapping(raw, file, where, fld)
    unknown = set(d) - _DELETE_FIELDS
    if unknown:
        raise ScenarioError(file, where, f"{fld}.{sorted(unknown)[0]}: unknown field")
    kind = d.get("kind")
    name = d.get("name")
    if not isinstance(kind, str) or not kind:
        raise ScenarioError(file, where, f"{fld}.kind: required")
    if not isinstance(name, str) or not name:
        raise ScenarioError(file, where, f"{fld}.name: required")
    ns = d.get("namespace")
    if ns is not None and not isinstance(ns, str):
        raise ScenarioError(file, where, f"{fld}.namespace: expected a string")
    api = d.get("apiVersion", "")
    return DeleteRef(api_version=str(api), kind=kind, namespace=ns or None, name=name)


def _workload_key(raw: object, file: str, where: str, fld: str) -> str:
    if not isinstance(raw, str) or raw.count("/") != 1 or raw.startswith("/") or raw.endswith("/"):
        raise ScenarioError(file, where, f"{fld}: expected namespace/name, got {raw!r}")
    return raw


def _objects(raw: object, file: str, where: str, fld: str) -> list[dict[str, Any]]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ScenarioError(file, where, f"{fld}: expected a list of objects")
    out: list[dict[str, Any]] = []
    for j, obj in enumerate(raw):
        if not isinstance(obj, dict):
            raise ScenarioError(file, where, f"{fld}[{j}]: expected an object (a mapping)")
        out.append(obj)
    return out


def _list(step: dict[str, Any], name: str, file: str, where: str) -> list[Any]:
    raw = step.get(name)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ScenarioError(file, where, f"{name}: expected a list")
    return raw


def _mapping(raw: object, file: str, where: str, fld: str) -> dict[str, Any]:
    if not isinstance(raw, dict):
        raise ScenarioError(file, where, f"{fld}: expected a mapping, got {type(raw).__name__}")
    return raw


def _string(raw: object, file: str, where: str, fld: str) -> str:
    if not isinstance(raw, str) or not raw:
        raise ScenarioError(file, where, f"{fld}: expected a name, got {raw!r}")
    return raw


def _count(raw: object, file: str, where: str, fld: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ScenarioError(file, where, f"{fld}: expected a non-negative integer, got {raw!r}")
    return raw
