"""A live TLS server with an admin kubeconfig, for tests that drive the real ``kubectl`` and the
``kubernetes`` client (a plain module, as the test folders are not packages:
``from kubectl_harness import Kube, start_kube``).

kubectl sends a bearer token only over TLS, so the server runs with a self-signed certificate and
the kubeconfig comes from ``gpuaas kubeconfig``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuaas.api.testing import ServerProcess, self_signed_cert

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@dataclass
class Kube:
    srv: ServerProcess
    kubeconfig: Path
    home: Path

    def run(
        self, *args: str, check: bool = True, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        full = {
            **os.environ,
            "KUBECONFIG": str(self.kubeconfig),
            "HOME": str(self.home),
            **(env or {}),
        }
        out = subprocess.run(
            [KUBECTL, *args], env=full, capture_output=True, text=True, timeout=60, check=False
        )
        if check and out.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {out.returncode}\n{out.stderr}")
        return out

    def out(self, *args: str) -> str:
        return self.run(*args).stdout

    def get(self, *args: str) -> str:
        return self.run("get", *args).stdout

    def config_for(self, token: str, name: str, namespace: str | None = None) -> Kube:
        path = self.home / f"{name}.kubeconfig"
        path.write_text(kubeconfig(self.srv, token, namespace))
        return Kube(self.srv, path, self.home)


def kubeconfig(srv: ServerProcess, token: str, namespace: str | None = None) -> str:
    env = {
        **os.environ,
        "GPUAAS_SERVER": srv.url,
        "GPUAAS_TOKEN": token,
        "GPUAAS_CA": str(srv.data_dir.parent / "cert.pem"),
        "GPUAAS_CONFIG": str(srv.data_dir.parent / "none.json"),
    }
    args = [sys.executable, "-m", "gpuaas", "kubeconfig"]
    if namespace:
        args += ["--namespace", namespace]
    return subprocess.run(args, env=env, capture_output=True, text=True, check=True).stdout


def start_kube(
    tmp_path: Path,
    db_url: str | None,
    servers: Callable[..., ServerProcess],
    require_service: Callable[[str, bool, str], None],
    extra: tuple[str, ...] = (),
) -> Kube:
    """A TLS server (``extra`` adds server options, such as a runtime) and its admin kubeconfig."""
    require_service(
        "kubectl", os.access(KUBECTL, os.X_OK), f"{KUBECTL} missing (kubernetes-client)"
    )
    require_service("openssl", shutil.which("openssl") is not None, "openssl CLI missing")
    cert, key = self_signed_cert(tmp_path)
    srv = servers(db_url, extra=("--tls-cert", str(cert), "--tls-key", str(key), *extra), tls=True)
    home = tmp_path / "home"
    home.mkdir()
    path = home / "admin.kubeconfig"
    path.write_text(kubeconfig(srv, srv.admin_token))
    return Kube(srv, path, home)


def apply_file(k: Kube, path: Path) -> None:
    """Create every object of a manifest file through the API (the admin's client, not kubectl)."""
    import yaml

    with k.srv.client() as c:
        for doc in yaml.safe_load_all(path.read_text()):
            kind, ns = doc["kind"], doc["metadata"].get("namespace")
            base = {
                "Namespace": "/api/v1/namespaces",
                "Job": f"/apis/batch/v1/namespaces/{ns}/jobs",
            }.get(kind)
            if base is None:
                plural = kind.lower() + ("es" if kind.endswith("s") else "s")
                plural = {"WorkloadPriorityClasses": "workloadpriorityclasses"}.get(plural, plural)
                version = doc["apiVersion"]
                base = (
                    f"/apis/{version}/namespaces/{ns}/{plural}"
                    if ns
                    else f"/apis/{version}/{plural}"
                )
            r = c.post(base, json=doc)
            assert r.status_code == 201, r.text


def rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.strip().splitlines()]


def wait_for(check: Callable[[], object], what: str, timeout: float = 90.0) -> object:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)
