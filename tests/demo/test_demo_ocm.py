"""``gpuaas demo 002`` end to end: a hub and three workers, the seed's three placement stories,
where each Job lands and why, and nothing left running afterwards."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_demo_002_headless() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gpuaas", "demo", "002", "--headless", "--speed", "8"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    landed = re.findall(r"Job default/(\S+) runs on (cluster\d)", out)
    assert len(landed) == 3, out
    (j1, _), (j2, where2), (j3, where3) = landed
    assert j1.startswith("demo1-job") and j2.startswith("demo2-job") and j3.startswith("demo2-job")
    assert where2 in ("cluster2", "cluster3")  # by label: the two T4 clusters
    assert where3 == "cluster2"  # by score: cluster3 runs a local GPU Job
    assert "not cluster1: matches none of the Placement's predicates" in out
    assert "not cluster3: score" in out
    assert out.rstrip().endswith("every process they started are gone")


REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "name",
    [
        "addon-hub.yaml",
        "multikueue-setup-demo2.yaml",
        "placement-demo2-1.yaml",
        "placement-demo2-2.yaml",
    ],
)
def test_packaged_manifests_are_the_examples(name: str) -> None:
    packaged = REPO / "src" / "gpuaas" / "demos" / "002" / name
    assert packaged.read_text() == (REPO / "examples" / "002-multi-cluster" / name).read_text()
