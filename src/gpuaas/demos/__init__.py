"""The seed demos that ``gpuaas demo`` knows: which ones run live here, and their manifests.

The manifests ship inside the package (``demos/<id>/*.yaml``), since a pip-installed gpuaas has no
``examples/`` folder; ``tests/demo`` checks they stay equal to the examples. This module only
describes and reads them; running a demo is ``gpuaas.cli.demo``.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from importlib import resources
from typing import Any

import yaml


@dataclass(slots=True, frozen=True)
class DemoInfo:
    id: str
    title: str
    live: bool  # runs live with ``gpuaas demo ID``
    needs: str = ""  # an optional extra it needs, "" if none
    how: str = ""  # how to see it when it does not run live

    def available(self) -> tuple[bool, str]:
        """Whether it can run here, and if not, why."""
        if self.needs == "ray" and importlib.util.find_spec("ray") is None:
            return False, "not available: needs the ray extra (pip install 'gpuaas[ray]')"
        if self.needs == "workbench" and importlib.util.find_spec("jupyterlab") is None:
            return False, (
                "not available: needs the workbench extra (pip install 'gpuaas[workbench]'); "
                + self.how
            )
        if not self.live:
            return False, self.how
        return True, "runs live"


CATALOGUE: tuple[DemoInfo, ...] = (
    DemoInfo("004", "Jobs: team A's prod GPU Job preempts team B's dev Job (SLA tiers)", True),
    DemoInfo(
        "001",
        "Workbenches: hardware profiles, a full GPU pool queues a JupyterLab, a stop frees it",
        True,
        needs="workbench",
        how="on simulated time: gpuaas scenario run examples/001-gpu-pool/",
    ),
    DemoInfo(
        "002",
        "Multi-cluster: a hub and three workers, OCM placement by label and by live free GPUs",
        True,
    ),
    DemoInfo(
        "003",
        "RayClusters: team A's prod RayCluster suspends team B's dev RayCluster",
        False,
        needs="ray",
        how="runs with the ray extra on a server (gpuaas server, then gpuaas apply -f "
        "examples/003-rayclusters/setup.yaml and each RayCluster: real Ray clusters, "
        "gpuaas get raycluster -A); on simulated time: gpuaas scenario run "
        "examples/003-rayclusters/",
    ),
)


def find(demo_id: str) -> DemoInfo | None:
    return next((d for d in CATALOGUE if d.id == demo_id), None)


def manifests(demo_id: str, filename: str) -> list[dict[str, Any]]:
    """The documents of one packaged manifest file, in order."""
    text = resources.files("gpuaas").joinpath(f"demos/{demo_id}/{filename}").read_text()
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]
