"""``GET /apis/gpuaas.dev/v1alpha1/nodes`` and ``gpuaas node list`` on the local runtime.

The local runtime has one node, this server's: its labels, its declared GPUs, and the pods that
hold them (none here). A tenant token sees the node too, but not other namespaces' pods.
"""

from __future__ import annotations

from pathlib import Path

from gpuaas.api.testing import ServerProcess
from gpuaas.cli.node import table

GPUAAS = "/apis/gpuaas.dev/v1alpha1"


def test_the_local_node_is_listed_with_its_gpus(tmp_path: Path) -> None:
    extra = ("--runtime", "local", "--fake-gpus", "2:NVIDIA-L4")
    with ServerProcess(tmp_path / "data", extra=extra) as server, server.client() as c:
        r = c.get(f"{GPUAAS}/nodes")
        assert r.status_code == 200, r.text
        (node,) = r.json()["items"]
        assert node["capacity"]["nvidia.com/gpu"] == 2
        assert node["labels"]["nvidia.com/gpu.product"] == "NVIDIA-L4"
        assert node["gpusInUse"] == {} and node["alive"] is True
        lines = table([node]).splitlines()
        assert lines[0].split()[:4] == ["NAME", "STATUS", "GPUS", "MODEL"]
        assert lines[1].split()[1:4] == ["Ready", "0/2", "NVIDIA-L4"]
        assert c.get(f"{GPUAAS}/nodes", headers={"Authorization": "Bearer nope"}).status_code == 401
