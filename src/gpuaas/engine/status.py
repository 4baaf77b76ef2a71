"""Writes through the status subresource: admission check states and an AdmissionCheck's Active.

On Kubernetes an external check controller writes a Workload's ``status.admissionChecks`` and its
AdmissionCheck's ``status.conditions`` (Active). These are those two writes, with the engine's
usual steps: check everything first (a refused request changes nothing), apply to the core,
settle, commit, wait until durable. Only what the core allows is accepted (a state on a workload
holding quota, for a check that applies to it); the rest of a status is the engine's own and a
body cannot change it. The HTTP routes and who may call them are the API's business.
"""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

from gpuaas.core.errors import ApplyError
from gpuaas.core.manifests import ManifestError, parse_object
from gpuaas.core.objects import AdmissionCheck
from gpuaas.core.state import CheckStateValue, Phase
from gpuaas.engine.errors import Invalid, NotFound
from gpuaas.store import Ack
from gpuaas.vocab.kinds import BY_KIND, WORKLOAD

if TYPE_CHECKING:
    from gpuaas.engine.engine import Engine

JsonDoc = dict[str, Any]
_STATES = tuple(s.value for s in CheckStateValue)


def _entries(owner: str, doc: Any) -> list[tuple[str, str, str, int | None]]:
    """``status.admissionChecks`` of a body: (name, state, message, requeueAfterSeconds)."""
    status = doc.get("status") if isinstance(doc, dict) else None
    raw = status.get("admissionChecks") if isinstance(status, dict) else None
    if raw is None and isinstance(status, dict) and "nominatedClusterNames" in status:
        return []  # an External MultiKueue dispatcher writes only its nomination
    if not isinstance(raw, list):
        raise Invalid(f"{owner}: status.admissionChecks: required, a list of check states")
    out = []
    for i, entry in enumerate(raw):
        path = f"{owner}: status.admissionChecks[{i}]"
        if not isinstance(entry, dict):
            raise Invalid(f"{path}: must be an object")
        name, state = entry.get("name"), entry.get("state")
        if not isinstance(name, str) or not name:
            raise Invalid(f"{path}.name: required string")
        if state not in _STATES:
            raise Invalid(f"{path}.state: must be one of {', '.join(_STATES)}, got {state!r}")
        message = entry.get("message", "")
        if not isinstance(message, str):
            raise Invalid(f"{path}.message: must be a string")
        after = entry.get("requeueAfterSeconds")
        if after is not None and (
            isinstance(after, bool) or not isinstance(after, int) or after < 0
        ):
            raise Invalid(f"{path}.requeueAfterSeconds: must be a non-negative integer")
        out.append((name, str(state), message, after))
    return out


def update_check_states(engine: Engine, namespace: str, name: str, doc: JsonDoc) -> JsonDoc:
    """Set admission check states on a Workload from a body's ``status.admissionChecks``.

    Checks the body names are set; the others keep their states. Every entry is checked
    against the workload before any is applied.
    """
    key = f"{namespace}/{name}"
    owner = f"Workload {key}"
    with engine._lock:
        engine._reload_if_failed()
        entries = _entries(owner, doc)
        st = engine._cluster.workloads.get(key)
        if st is None:
            raise NotFound(f"{owner} not found")
        changes = []
        for i, (check, state, message, after) in enumerate(entries):
            path = f"{owner}: status.admissionChecks[{i}]"
            if st.phase != Phase.ADMITTED:
                raise Invalid(
                    f"{path}: the workload holds no quota ({st.phase.value}); admission "
                    "check states are set only while quota is reserved"
                )
            current = st.admission_checks.get(check)
            if current is None:
                applies = ", ".join(st.admission_checks) or "none"
                raise Invalid(
                    f"{path}.name: admission check {check} does not apply (applies: {applies})"
                )
            if (current.state.value, current.message) != (state, message) or (
                after is not None and after != current.requeue_after_seconds
            ):
                changes.append((check, state, message, after))
        nominated = _nominated(owner, doc, st.phase == Phase.ADMITTED)
        now = engine.clock()
        try:
            if nominated is not None and st.phase == Phase.ADMITTED:
                engine._cluster.set_cluster_nomination(key, nominated, st.cluster_name)
            for check, state, message, after in changes:
                engine._cluster.set_check_state(key, check, state, message, now, after)
        except ApplyError as exc:  # checked above; a refusal here would be a bug
            engine._load_after_failure()
            raise Invalid(str(exc)) from exc
        fut = _settle_and_commit(engine, now)
    engine._wait(fut)
    return engine.get(WORKLOAD, namespace, name)


def _nominated(owner: str, doc: JsonDoc, holds_quota: bool) -> tuple[str, ...] | None:
    """``status.nominatedClusterNames`` of a body (an External MultiKueue dispatcher's), checked."""
    status = doc.get("status") if isinstance(doc, dict) else None
    if not isinstance(status, dict) or "nominatedClusterNames" not in status:
        return None
    raw = status["nominatedClusterNames"]
    field = f"{owner}: status.nominatedClusterNames"
    if raw is None:
        raw = []
    if not isinstance(raw, list) or not all(isinstance(n, str) and n for n in raw):
        raise Invalid(f"{field}: must be a list of MultiKueueCluster names")
    if raw and not holds_quota:
        raise Invalid(f"{field}: the workload holds no quota; clusters are nominated only then")
    return tuple(raw)


def update_admission_check_status(engine: Engine, name: str, doc: JsonDoc) -> JsonDoc:
    """Write an AdmissionCheck's ``status.conditions`` (its controller's Active condition)."""
    kind = BY_KIND["AdmissionCheck"]
    owner = f"AdmissionCheck {name}"
    status = doc.get("status") if isinstance(doc, dict) else None
    conditions = status.get("conditions") if isinstance(status, dict) else None
    if not isinstance(conditions, list):
        raise Invalid(f"{owner}: status.conditions: required, a list of conditions")
    with engine._lock:
        engine._reload_if_failed()
        key = engine.key_of(kind, None, name)
        old = engine.objects.get(key)
        if old is None:
            raise NotFound(f"{owner} not found")
        new_doc = copy.deepcopy(old.doc)
        new_doc["status"] = {"conditions": copy.deepcopy(conditions)}
        try:
            obj = parse_object(new_doc)
        except ManifestError as exc:
            raise Invalid(str(exc)) from exc
        assert isinstance(obj, AdmissionCheck)
        now = engine.clock()
        rv = engine._next_rv()
        new_doc["metadata"]["resourceVersion"] = str(rv)
        batch = engine._new_batch()
        engine._put(batch, old.replace(rv=rv, doc=new_doc), "MODIFIED")
        engine._apply(obj, now)
        engine._settle(now, batch)
        fut = engine._commit(batch)
    engine._wait(fut)
    return engine.get(kind, None, name)


def _settle_and_commit(engine: Engine, now: float) -> Ack:
    batch = engine._new_batch()
    engine._settle(now, batch)
    return engine._commit(batch)


__all__ = ["update_admission_check_status", "update_check_states"]
