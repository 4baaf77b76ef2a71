"""OpenAPI v2 and v3 as kube-apiserver serves them."""

from __future__ import annotations

from fastapi import FastAPI


def install(app: FastAPI) -> None:
    return None
