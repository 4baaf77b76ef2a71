"""Runs scenarios on the core ``Cluster`` on simulated time and checks their expectations.

This module owns the timeline of a scenario: objects at time 0, then each step's apply, delete,
finish and admission-check states (the runner plays every AdmissionCheck's controller: each check
is Active, its states change only through ``admissionChecks`` steps), self-finishing workloads
(``gpuaas.dev/runtime-seconds``, counted from admission, so after every check is Ready) in time
order between steps, and the comparison of the settled state with ``expect``. It decides nothing about scheduling (the core
does) and prints nothing (``sim.report`` does); it never sleeps. Bad input becomes a
``ScenarioOutcome`` with an ``error``, never an exception, so the other files still run.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuaas.core import ocm
from gpuaas.core.cluster import ApplyError, Cluster
from gpuaas.core.manifests import ManifestError, core_kind, parse_object_with_ref
from gpuaas.core.objects import AdmissionCheck, KueueObject, Workload
from gpuaas.core.quantity import format_quantity, parse_quantity
from gpuaas.core.state import Phase
from gpuaas.sim import placements
from gpuaas.sim.admission import Admission
from gpuaas.sim.files import FileFormatError, expand_paths
from gpuaas.sim.placements import PlacementBook
from gpuaas.sim.scenario import Expectation, Scenario, ScenarioError, Step, Time, load_scenarios
from gpuaas.vocab.multikueue import prebuilt_workload_name

NAMESPACED_KINDS = frozenset({"Workload", "LocalQueue"})
Ref = tuple[str, str | None, str]  # (core kind, namespace or None, name)


@dataclass(slots=True)
class CheckResult:
    at: Time
    step: int
    passed: bool
    observed: dict[str, Any]
    mismatches: list[str]


@dataclass(slots=True)
class ScenarioOutcome:
    file: str
    name: str | None
    checks: list[CheckResult] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def passed(self) -> bool:
        return self.error is None and all(c.passed for c in self.checks)


@dataclass(slots=True)
class RunReport:
    outcomes: list[ScenarioOutcome]

    @property
    def exit_code(self) -> int:
        """0 every expectation held; 1 one did not; 2 a file could not be used (2 wins)."""
        if any(o.error is not None for o in self.outcomes):
            return 2
        return 0 if all(o.passed for o in self.outcomes) else 1


@dataclass(slots=True)
class _PreparedStep:
    step: Step
    apply: list[KueueObject | _Prebuilt]
    delete: list[Ref]
    usage: dict[str, dict[tuple[str, str], int]]  # expected CQ usage, parsed
    # deletes that name the Workload object itself (kind Workload): a job's is made again
    workload_objects: set[Ref] = field(default_factory=set)


# -- preparing: every object parsed and every reference checked before anything runs -------------


def _ref_of(kind: str, namespace: str | None, name: str) -> Ref:
    ck = core_kind(kind)
    if ck in NAMESPACED_KINDS:
        return (ck, namespace or "default", name)
    return (ck, None, name)


def _parse(doc: dict[str, Any], file: str, where: str) -> tuple[KueueObject, Ref]:
    try:
        obj, (kind, namespace, name) = parse_object_with_ref(doc)
    except ManifestError as exc:
        raise ScenarioError(file, where, str(exc)) from None
    return obj, _ref_of(kind, namespace, name)


@dataclass(frozen=True, slots=True)
class _Prebuilt:
    """A job that names an existing Workload as its own (prebuilt): it makes no Workload; its
    apply checks that Workload against it (``Cluster.sync_prebuilt``)."""

    job: Workload
    name: str


def _admitted(
    hooks: Admission, doc: dict[str, Any], file: str, where: str
) -> tuple[KueueObject | _Prebuilt | None, Ref | None, bool]:
    """The webhooks first (``sim.admission``): (object, its ref, whether it stops a Notebook);
    a HardwareProfile gives no object."""
    try:
        admitted, stops = hooks.admit(doc)
    except ManifestError as exc:
        raise ScenarioError(file, where, str(exc)) from None
    if admitted is None:
        return None, None, False
    obj, ref = _parse(admitted, file, where)
    named = prebuilt_workload_name(admitted.get("metadata") or {})
    if admitted.get("kind") != "Workload" and named is not None and isinstance(obj, Workload):
        # Kueue's job reconciler takes the Workload the label names as the job's own and makes
        # none (ensureOneWorkload): that Workload, applied as itself, is the one that queues.
        return _Prebuilt(obj, named[0]), None, False
    return obj, ref, stops


def _check_ocm(doc: dict[str, Any], file: str, where: str) -> None:
    try:
        placements.check(doc)
    except ManifestError as exc:
        raise ScenarioError(file, where, str(exc)) from None


def prepare(scenario: Scenario) -> tuple[list[KueueObject | _Prebuilt], list[_PreparedStep]]:
    """Parse all objects; reject a finish or delete of something never applied before it."""
    file, label = scenario.file, f"scenario {scenario.name!r}"
    applied: set[Ref] = set()
    objects: list[KueueObject | _Prebuilt] = []
    hooks = Admission()
    for j, doc in enumerate(scenario.objects):
        if placements.is_ocm(doc):  # OCM objects: sim.placements, never the core
            _check_ocm(doc, file, f"{label}: spec.objects[{j}]")
            continue
        obj, ref, stops = _admitted(hooks, doc, file, f"{label}: spec.objects[{j}]")
        if isinstance(obj, _Prebuilt):
            objects.append(obj)
        elif obj is not None and ref is not None and not stops:
            objects.append(obj)
            applied.add(ref)
    prepared: list[_PreparedStep] = []
    for step in scenario.steps:
        where = f"{label}: step {step.index} (at {step.at})"
        apply: list[KueueObject | _Prebuilt] = []
        deletes: list[Ref] = []
        workload_objects: set[Ref] = set()
        for j, doc in enumerate(step.apply):
            if placements.is_ocm(doc):
                _check_ocm(doc, file, f"{where}: apply[{j}]")
                continue
            obj, ref, stops = _admitted(hooks, doc, file, f"{where}: apply[{j}]")
            if isinstance(obj, _Prebuilt):
                apply.append(obj)
                continue
            if obj is None or ref is None:
                continue
            if stops:  # a stopped Notebook: its Workload goes, if it was there
                if ref in applied:
                    deletes.append(ref)
                continue
            apply.append(obj)
            applied.add(ref)
        for j, d in enumerate(step.delete):
            if d.kind in ocm.KINDS:
                continue  # forgotten by sim.placements when the step runs
            try:
                ref = _ref_of(d.kind, d.namespace, d.name)
            except ManifestError as exc:
                raise ScenarioError(file, where, f"delete[{j}]: {exc}") from None
            if ref not in applied:
                shown = f"{d.kind} {d.namespace + '/' if d.namespace else ''}{d.name}"
                raise ScenarioError(
                    file, where, f"delete[{j}]: {shown} was never applied before this step"
                )
            deletes.append(ref)
            if d.kind == "Workload":
                workload_objects.add(ref)
        keyed = [("finish", step.finish), ("podsReady", step.pods_ready)]
        for fld, keys in [*keyed, ("podsNotReady", step.pods_not_ready)]:
            for j, key in enumerate(keys):
                ns, name = key.split("/", 1)
                if ("Workload", ns, name) not in applied:
                    raise ScenarioError(
                        file,
                        where,
                        f"{fld}[{j}]: workload {key} was never applied before this step",
                    )
        usage = _expected_usage(step.expect, file, where)
        prepared.append(_PreparedStep(step, apply, deletes, usage, workload_objects))
    return objects, prepared


def _expected_usage(
    expect: Expectation | None, file: str, where: str
) -> dict[str, dict[tuple[str, str], int]]:
    out: dict[str, dict[tuple[str, str], int]] = {}
    if expect is None:
        return out
    for cq, exp in expect.cluster_queues.items():
        if exp.usage is None:
            continue
        parsed: dict[tuple[str, str], int] = {}
        for flavor, resources in exp.usage.items():
            for res, qty in resources.items():
                try:
                    parsed[(flavor, res)] = parse_quantity(qty, res)
                except (ManifestError, ValueError) as exc:
                    fld = f"expect.clusterQueues.{cq}.usage.{flavor}.{res}"
                    raise ScenarioError(file, where, f"{fld}: {exc}") from None
        out[cq] = parsed
    return out


# -- running ----------------------------------------------------------------------------------


class _Simulation:
    """A Cluster plus the heap of self-finishing workloads and the warnings seen so far."""

    def __init__(self, scenario: Scenario) -> None:
        # A replay reports states, not events: the engine is told not to record them.
        self.cluster = Cluster(scenario.config, record_events=False)
        self._due: list[tuple[float, int, str, int, int]] = []  # (time, seq, key, uid, count)
        self._started: set[tuple[str, int]] = set()  # (key, admission count) with a due time
        self._seq = 0
        self.warnings: list[str] = []
        self._seen_warnings: set[str] = set()
        self.placements = PlacementBook()  # OCM objects: their decisions, for expect.placements

    def apply(self, obj: KueueObject | _Prebuilt, now: float) -> None:
        if isinstance(obj, _Prebuilt):
            self.cluster.sync_prebuilt(obj.job, obj.name, now)
            return
        if isinstance(obj, Workload) and obj.kind == "Workload":
            cur = self.cluster.workloads.get(obj.key)
            if cur is not None and cur.workload.kind != "Workload":
                # A Workload applied under a job's name is that job's own Workload: only its
                # spec.active is the Workload's to set (as the server takes it); the rest is
                # the job's.
                if obj.active_given:
                    own = replace(cur.workload, active=obj.active, active_given=True)
                    self.cluster.apply(own, now)
                return
        self.cluster.apply(obj, now)
        if isinstance(obj, AdmissionCheck):
            self.cluster.set_check_active(obj.name, True)  # the runner is its controller

    def settle(self, now: float, checked: Iterable[str] = ()) -> None:
        self.cluster.schedule(now)
        # Admitted in that call, first admission first; then those whose checks got Ready.
        self._note_admissions(self.cluster.admitted_now)
        self._note_admissions(checked, now)
        for w in self.cluster.warnings():
            if w not in self._seen_warnings:
                self._seen_warnings.add(w)
                self.warnings.append(w)

    def _note_admissions(self, keys: Iterable[str], now: float | None = None) -> None:
        for key in keys:
            state = self.cluster.workloads.get(key)
            if state is None or state.phase != Phase.ADMITTED or state.awaiting_checks:
                continue
            runtime = state.workload.runtime_seconds
            if runtime is None or state.admitted_at is None:
                continue
            started = (key, state.admission_count)
            if started in self._started:
                continue
            self._started.add(started)
            self._seq += 1
            start = state.admitted_at if now is None else now
            entry = (start + runtime, self._seq, key, state.uid, state.admission_count)
            heapq.heappush(self._due, entry)

    def finish_due(self, until: float) -> None:
        """Finish every self-finishing workload due by ``until``, one instant at a time; also
        settle at the instants the engine asked to be woken (a minimum runtime running out)."""
        while True:
            wake = self.cluster.next_wakeup()
            due = self._due[0][0] if self._due else None
            if wake is not None and wake <= until and (due is None or wake < due):
                self.settle(wake)
                continue
            if due is None or due > until:
                return
            now = due
            finished = False
            while self._due and self._due[0][0] == now:
                _, _, key, uid, count = heapq.heappop(self._due)
                state = self.cluster.workloads.get(key)
                if (
                    state is None
                    or state.uid != uid
                    or state.phase != Phase.ADMITTED
                    or state.admission_count != count
                ):
                    continue  # evicted, finished or replaced since: a stale entry
                finished = self.cluster.finish(key, now) or finished
            if finished:
                self.settle(now)


def run_scenario(
    scenario: Scenario, on_step: Callable[[Step, Cluster], None] | None = None
) -> ScenarioOutcome:
    """Run one scenario; a file error becomes the outcome's ``error``. ``on_step`` sees the
    settled cluster after each step (tests use it to look at what expectations cannot state)."""
    outcome = ScenarioOutcome(file=scenario.file, name=scenario.name)
    try:
        objects, steps = prepare(scenario)
    except ScenarioError as exc:
        outcome.error = str(exc)
        return outcome
    sim = _Simulation(scenario)
    sim.placements.apply(scenario.objects)
    cluster = sim.cluster
    label = f"scenario {scenario.name!r}"
    try:
        for j, obj in enumerate(objects):
            try:
                sim.apply(obj, 0)
            except ApplyError as exc:
                raise _StepError(f"{label}: spec.objects[{j}]: {exc}") from None
        sim.settle(0)
        for ps in steps:
            _run_step(sim, ps, label)
            if on_step is not None:
                on_step(ps.step, cluster)
            if ps.step.expect is not None:
                outcome.checks.append(_check(cluster, ps, ps.step.expect, sim.placements))
    except _StepError as exc:
        outcome.error = f"{scenario.file}: {exc}"
    outcome.warnings = sim.warnings
    return outcome


class _StepError(Exception):
    """An object the engine refused at run time (an update Kueue's webhooks would reject)."""


def _run_step(sim: _Simulation, ps: _PreparedStep, label: str) -> None:
    cluster, at = sim.cluster, ps.step.at
    sim.finish_due(at)
    where = f"{label}: step {ps.step.index} (at {at})"
    for j, obj in enumerate(ps.apply):
        try:
            sim.apply(obj, at)
        except ApplyError as exc:
            raise _StepError(f"{where}: apply[{j}]: {exc}") from None
    sim.placements.apply(ps.step.apply)
    for d in ps.step.delete:
        sim.placements.delete(d.kind, d.namespace, d.name)
    for ref in ps.delete:
        kind, namespace, name = ref
        if ref in ps.workload_objects and namespace is not None:
            again = cluster.delete_workload_object(namespace, name, at)
            if again is not None:  # a job's Workload: its job gets a new one
                sim.apply(again, at)
        else:
            cluster.delete(kind, namespace, name, at)
    for key in ps.step.finish:
        cluster.finish(key, at)
    checked: list[str] = []
    for j, u in enumerate(ps.step.admission_checks):
        try:
            cluster.set_check_state(
                u.workload, u.check, u.state, u.message, at, u.requeue_after_seconds
            )
        except ApplyError as exc:
            raise _StepError(f"{where}: admissionChecks[{j}]: {exc}") from None
        checked.append(u.workload)
    for keys, ready in ((ps.step.pods_ready, True), (ps.step.pods_not_ready, False)):
        for key in keys:  # waitForPodsReady: the runner plays the job controller
            cluster.set_pods_ready(key, ready, at)
    sim.settle(at, checked)


# -- checking ---------------------------------------------------------------------------------


def observe(cluster: Cluster) -> dict[str, Any]:
    admitted: dict[str, Any] = {}
    pending: list[str] = []
    awaiting: list[str] = []
    for key, state in cluster.workloads.items():
        if state.phase == Phase.ADMITTED and state.admission is not None:
            if state.awaiting_checks:
                awaiting.append(key)
            admitted[key] = {
                "clusterQueue": state.admission.cluster_queue,
                "flavors": {ps.name: dict(ps.flavors) for ps in state.admission.pod_sets},
                "count": {ps.name: ps.count for ps in state.admission.pod_sets},
            }
        elif state.phase == Phase.PENDING:
            pending.append(key)
    return {
        "admitted": dict(sorted(admitted.items())),
        "pending": sorted(pending),
        "preempted": sorted(cluster.preempted_keys),
        "awaitingChecks": sorted(awaiting),
    }


def _set_mismatch(
    at: Time, what: str, expected: Iterable[str], observed: Iterable[str]
) -> str | None:
    exp, obs = sorted(set(expected)), sorted(set(observed))
    if exp == obs:
        return None
    details = []
    missing = [k for k in exp if k not in obs]
    extra = [k for k in obs if k not in exp]
    if missing:
        details.append("missing " + ", ".join(missing))
    if extra:
        details.append("unexpected " + ", ".join(extra))
    return f"at {at}: {what}: expected {exp}, observed {obs} ({'; '.join(details)})"


def _check(
    cluster: Cluster, ps: _PreparedStep, expect: Expectation, book: PlacementBook
) -> CheckResult:
    at = ps.step.at
    observed = observe(cluster)
    out: list[str] = []
    if expect.placements is not None:
        observed["placements"], wrong = book.mismatches(float(at), expect.placements)
        out.extend(wrong)
    if expect.admitted is not None:
        m = _set_mismatch(at, "admitted", expect.admitted, observed["admitted"])
        if m:
            out.append(m)
        for key, exp in expect.admitted.items():
            obs = observed["admitted"].get(key)
            if obs is None:
                continue
            if exp.cluster_queue is not None and exp.cluster_queue != obs["clusterQueue"]:
                out.append(
                    f"at {at}: admitted {key}: clusterQueue expected {exp.cluster_queue},"
                    f" observed {obs['clusterQueue']}"
                )
            for pod_set, resources in (exp.flavors or {}).items():
                for res, flavor in resources.items():
                    got = obs["flavors"].get(pod_set, {}).get(res)
                    if got != flavor:
                        out.append(
                            f"at {at}: admitted {key}: flavor of {pod_set}/{res} expected"
                            f" {flavor}, observed {got}"
                        )
            for pod_set, count in (exp.count or {}).items():
                got_count = obs["count"].get(pod_set)
                if got_count != count:
                    out.append(
                        f"at {at}: admitted {key}: count of {pod_set} expected {count},"
                        f" observed {got_count}"
                    )
    for name, attr in (
        ("pending", "pending"),
        ("preempted", "preempted"),
        ("awaitingChecks", "awaiting_checks"),
    ):
        expected_keys: list[str] | None = getattr(expect, attr)
        if expected_keys is not None:
            m = _set_mismatch(at, name, expected_keys, observed[name])
            if m:
                out.append(m)
    out.extend(_check_cluster_queues(cluster, ps, expect))
    return CheckResult(at=at, step=ps.step.index, passed=not out, observed=observed, mismatches=out)


def _check_cluster_queues(cluster: Cluster, ps: _PreparedStep, expect: Expectation) -> list[str]:
    at = ps.step.at
    out: list[str] = []
    for cq, exp in expect.cluster_queues.items():
        if exp.admitted_workloads is not None:
            n = sum(
                1
                for s in cluster.workloads.values()
                if s.admission is not None
                and s.admission.cluster_queue == cq
                and s.phase in (Phase.ADMITTED, Phase.EVICTING)
            )
            if n != exp.admitted_workloads:
                out.append(
                    f"at {at}: clusterQueue {cq}: admittedWorkloads expected"
                    f" {exp.admitted_workloads}, observed {n}"
                )
        if exp.pending_workloads is not None:
            n = sum(
                1
                for s in cluster.workloads.values()
                if s.phase == Phase.PENDING and s.cluster_queue == cq
            )
            if n != exp.pending_workloads:
                out.append(
                    f"at {at}: clusterQueue {cq}: pendingWorkloads expected"
                    f" {exp.pending_workloads}, observed {n}"
                )
        expected_usage = ps.usage.get(cq)
        if expected_usage is not None:
            used = cluster.cluster_queue_usage(cq)
            for (flavor, res), qty in expected_usage.items():
                got = used.get((flavor, res), 0)
                if got != qty:
                    out.append(
                        f"at {at}: clusterQueue {cq}: usage of {flavor}/{res} expected"
                        f" {format_quantity(qty, res)}, observed {format_quantity(got, res)}"
                    )
    return out


# -- files ------------------------------------------------------------------------------------


def run_file(path: Path | str, *, skip_manifests: bool = False) -> list[ScenarioOutcome]:
    """Every scenario of one file; a file that cannot be used gives one outcome with an error."""
    file = str(path)
    try:
        scenarios = load_scenarios(path, skip_manifests=skip_manifests)
    except FileFormatError as exc:
        return [ScenarioOutcome(file=file, name=None, error=str(exc))]
    except ScenarioError as exc:
        return [ScenarioOutcome(file=file, name=exc.scenario, error=str(exc))]
    outcomes: list[ScenarioOutcome] = []
    for scenario in scenarios:
        try:
            outcomes.append(run_scenario(scenario))
        except Exception as exc:  # an engine failure must not stop the other files
            if os.environ.get("GPUAAS_DEBUG") == "1":
                raise
            message = (
                f"{file}: scenario {scenario.name!r}: internal error: {type(exc).__name__}: {exc}"
            )
            outcomes.append(ScenarioOutcome(file=file, name=scenario.name, error=message))
    return outcomes


def run_paths(paths: Sequence[Path | str]) -> RunReport:
    """Run files and directories. Under a directory, files holding only Kubernetes manifests (an
    example's setup.yaml beside its scenario.yaml) are not scenarios and are passed over."""
    outcomes: list[ScenarioOutcome] = []
    for raw in paths:
        p = Path(raw)
        if not p.is_dir():
            outcomes.extend(run_file(p))
            continue
        found = [o for f in expand_paths([p]) for o in run_file(f, skip_manifests=True)]
        if not found:
            found = [
                ScenarioOutcome(file=str(p), name=None, error=f"{p}: no scenario file under it")
            ]
        outcomes.extend(found)
    return RunReport(outcomes)
