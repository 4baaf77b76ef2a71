"""A workbench's server process: JupyterLab behind the gpuaas server, on a port gpuaas chooses.

Kubeflow's notebook images start JupyterLab themselves (their entrypoint reads ``NB_PREFIX``, the
base URL Kubeflow serves the notebook under). On the host there is no image entrypoint, so a
Notebook container with no command runs JupyterLab from the ``workbench`` extra with the same
settings a Kubeflow image uses: base URL ``NB_PREFIX``, listening on 127.0.0.1 only, on a port
gpuaas picks, with no token or password of its own (the gpuaas server is its one door: it checks
the user's gpuaas token before proxying, ``api.workbench_proxy``). A container with its own
command runs that command, with ``NB_PREFIX`` and ``NB_PORT`` in its environment.

The port is kept in the workload's runtime directory (``workbench.json``) so that the proxy and a
restarted server find it again. This module picks ports and builds commands; it starts nothing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

from gpuaas.runtimes.base import RuntimeRequestError

RECORD = "workbench.json"
PREFIX_ENV = "NB_PREFIX"  # Kubeflow's notebook images read the base URL from it
PORT_ENV = "NB_PORT"


@dataclass(slots=True, frozen=True)
class Workbench:
    port: int
    base_url: str  # "/workbenches/NS/NAME/"

    @property
    def env(self) -> tuple[tuple[str, str], ...]:
        return ((PREFIX_ENV, self.base_url.rstrip("/")), (PORT_ENV, str(self.port)))


def base_url(namespace: str, name: str) -> str:
    """Where the gpuaas server serves a workbench (the Notebook's ``status.url``)."""
    return f"/workbenches/{namespace}/{name}/"


def jupyterlab_installed() -> bool:
    return importlib.util.find_spec("jupyterlab") is not None


def jupyter_command(bench: Workbench, root_dir: Path) -> tuple[str, ...]:
    """JupyterLab as a Kubeflow image starts it, on the host's Python; refused without the extra."""
    if not jupyterlab_installed():
        raise RuntimeRequestError(
            "no command, and JupyterLab is not installed here: install the extra, "
            "pip install 'gpuaas[workbench]' (or give the container a command)"
        )
    root = ("--allow-root",) if os.geteuid() == 0 else ()  # containers often run as root too
    return (
        sys.executable,
        "-m",
        "jupyterlab",
        *root,
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={bench.port}",
        "--ServerApp.port_retries=0",
        f"--ServerApp.base_url={bench.base_url}",
        f"--ServerApp.root_dir={root_dir}",
        "--IdentityProvider.token=",
        "--ServerApp.password=",
        # The gpuaas server is the only client, on loopback; it forwards the browser's Origin.
        "--ServerApp.allow_remote_access=True",
        "--ServerApp.trust_xheaders=True",
        # Its runtime files (cookie secret, kernel connection files) stay in the workbench.
        f"--ServerApp.runtime_dir={root_dir / '.jupyter-runtime'}",
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def load(workload_dir: Path) -> Workbench | None:
    """The workbench recorded for a workload, if any (None when unreadable)."""
    try:
        raw = json.loads((workload_dir / RECORD).read_text())
        return Workbench(int(raw["port"]), str(raw["baseUrl"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def ensure(workload_dir: Path, namespace: str, name: str) -> Workbench:
    """The recorded workbench, or a new one on a free port, recorded."""
    found = load(workload_dir)
    if found is not None:
        return found
    bench = Workbench(free_port(), base_url(namespace, name))
    workload_dir.mkdir(parents=True, exist_ok=True)
    (workload_dir / RECORD).write_text(json.dumps({"port": bench.port, "baseUrl": bench.base_url}))
    return bench
