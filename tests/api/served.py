"""Serve a ``gpuaas.server.Server`` built in-process with uvicorn on a thread, for API tests.

A plain module (the test folders are not packages): ``from served import serve``.
"""

from __future__ import annotations

import httpx
import uvicorn

from gpuaas.api import fast_paths
from gpuaas.api.testing import serve_in_thread
from gpuaas.server import Server


def serve(server: Server, token: str | None = None) -> tuple[httpx.Client, uvicorn.Server]:
    """A client with the admin token (or ``token``) and the uvicorn server; set
    ``should_exit`` on the latter to stop it."""
    app = fast_paths.outermost(server.app)  # as ``server.run`` serves it
    web = serve_in_thread(
        lambda port: uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error")
    )
    token = token or server.admin_token_path.read_text().strip()
    client = httpx.Client(
        base_url=f"http://127.0.0.1:{web.port}",
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    return client, web.server
