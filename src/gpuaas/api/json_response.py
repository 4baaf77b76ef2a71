"""Large JSON answers (lists and Tables of thousands of objects) encoded with msgspec.

``kubectl get wl -A`` on 10,000 workloads is a few megabytes of JSON; the standard library's
encoder spent more time on it than building the Table did. Bodies here are documents that
passed the body gate (string keys, finite numbers), so msgspec encodes them exactly as ``json``
would. Only the encoding differs from Starlette's ``JSONResponse``.
"""

from __future__ import annotations

from typing import Any

import msgspec
from fastapi.responses import JSONResponse


class FastJSONResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return msgspec.json.encode(content)
