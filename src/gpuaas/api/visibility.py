"""Kueue's visibility API (``visibility.kueue.x-k8s.io/v1beta1``): pending workloads."""

from __future__ import annotations

from fastapi import FastAPI


def install(app: FastAPI) -> None:
    return None
