"""Kubeconfigs as Kueue's MultiKueue accepts them (``validateKubeconfig``), by reason."""

from __future__ import annotations

import base64

import pytest

from gpuaas.engine.multikueue.remote import KubeConfigError, parse_kubeconfig

CTX = "contexts: [{name: x, context: {cluster: x, user: x}}]\ncurrent-context: x\n"


def kubeconfig(cluster: str, user: str = "{token: t}") -> bytes:
    return f"clusters: [{{name: x, cluster: {cluster}}}]\n{CTX}users: [{{name: x, user: {user}}}]\n".encode()


@pytest.mark.parametrize(
    ("case", "raw", "reason", "message"),
    [
        ("insecure", kubeconfig("{server: 'https://a', insecure-skip-tls-verify: true}"),
         "InsecureKubeConfig", "insecure TLS verification is not allowed for cluster x"),
        ("CA file", kubeconfig("{server: 'https://a', certificate-authority: /ca.pem}"),
         "InsecureKubeConfig", "certificate-authority file paths are not allowed"),
        ("no server", kubeconfig("{}"), "InsecureKubeConfig", "server URL is required"),
        ("token file", kubeconfig("{server: 'https://a'}", "{tokenFile: /t}"),
         "InsecureKubeConfig", "tokenFile is not allowed"),
        ("basic auth", kubeconfig("{server: 'https://a'}", "{username: u, password: p}"),
         "InsecureKubeConfig", "basic auth is not allowed"),
        ("exec", kubeconfig("{server: 'https://a'}", "{exec: {command: x}}"),
         "InsecureKubeConfig", "exec plugins are not allowed"),
        ("not yaml", b":: [", "BadKubeConfig", "failed to parse kubeconfig"),
    ],
)  # fmt: skip
def test_refused(case: str, raw: bytes, reason: str, message: str) -> None:
    with pytest.raises(KubeConfigError) as exc:
        parse_kubeconfig(raw)
    assert exc.value.reason == reason and message in str(exc.value), case


def test_accepted() -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----").decode()
    target = parse_kubeconfig(
        kubeconfig(f"{{server: 'https://w:6443/', certificate-authority-data: {ca}}}")
    )
    assert target.server == "https://w:6443" and target.token == "t"
    assert target.ca_data == b"-----BEGIN CERTIFICATE-----"
