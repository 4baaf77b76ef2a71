"""The admission webhooks of a scenario replay: hardware profiles, queue defaulting, stopping.

A scenario file may hold ODH ``HardwareProfile`` objects and Kubeflow ``Notebook`` workbenches, as
the server's API accepts them (``engine.admission_hooks`` there). This is the same chain on the
scenario's documents, in file order: a profile is remembered (never given to the core); a
Notebook gets its profile injected (``core.hardware_profile``); every job kind gets Kueue's
LocalQueueDefaulting and RHOAI's managed-namespace check (``core.managed_namespaces``); a Notebook
carrying ``kubeflow-resource-stopped`` stands for its Workload's removal (its pods are gone,
``core.manifest_notebook``). Errors are ``ManifestError`` naming the object and the reason; the
runner turns them into scenario errors. Pure: the documents it is shown are its only input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuaas.core import hardware_profile, managed_namespaces
from gpuaas.core.manifest_common import ManifestError
from gpuaas.core.manifest_notebook import NOTEBOOK_KIND, notebook_stopped

JsonDoc = dict[str, Any]


@dataclass(slots=True)
class Admission:
    """What the webhooks know so far in a replay: profiles, namespaces' labels, LocalQueues."""

    profiles: dict[tuple[str, str], hardware_profile.HardwareProfile] = field(default_factory=dict)
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    local_queues: set[tuple[str, str]] = field(default_factory=set)

    def admit(self, doc: JsonDoc) -> tuple[JsonDoc | None, bool]:
        """(the document the core should see, or None; whether it stops a Notebook)."""
        kind = doc.get("kind")
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
        assert isinstance(meta, dict)
        ns = str(meta.get("namespace") or "default")
        if kind == hardware_profile.KIND:
            profile = hardware_profile.parse_hardware_profile(doc)
            self.profiles[(profile.namespace, profile.name)] = profile
            return None, False
        if kind == "Namespace":
            labels = meta.get("labels")
            self.namespace_labels[str(meta.get("name"))] = (
                {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}
            )
        elif kind == "LocalQueue":
            self.local_queues.add((ns, str(meta.get("name"))))
        if kind not in managed_namespaces.JOB_KINDS:
            return doc, False
        if kind == NOTEBOOK_KIND:
            ref = hardware_profile.profile_ref(doc)
            if ref is not None:
                found = self.profiles.get(ref)
                if found is None:
                    raise hardware_profile.not_found(str(kind), ns, str(meta.get("name")), ref)
                doc = hardware_profile.inject(doc, found)
        has_default = (ns, managed_namespaces.DEFAULT_LOCAL_QUEUE) in self.local_queues
        doc = managed_namespaces.default_local_queue(doc, has_default)
        managed_namespaces.check_queue_label(doc, self.namespace_labels.get(ns, {}))
        return doc, kind == NOTEBOOK_KIND and notebook_stopped(doc)


__all__ = ["Admission", "ManifestError"]
