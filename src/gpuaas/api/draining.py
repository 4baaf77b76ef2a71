"""Ending open streams when the server stops: watches, log follows and the dashboard's events.

A stream answers until its client goes away, so a server asked to stop used to wait its whole
graceful-shutdown timeout for them and then cancel them, logging a CancelledError traceback per
stream. ``Draining`` wraps the HTTP app: while it drains, a GET request's next ``receive`` says the
client disconnected, which Starlette's streaming responses take as the end of the stream, so every
stream ends at once and cleanly (clients reconnect, as they do after any disconnect). Requests
with bodies are passed through untouched; a stream that stopped this way gets its last, empty
chunk, so the client reads a clean end of the response. ``DrainingServer`` is uvicorn's server that drains the
app before it shuts down. Nothing here knows what a stream carries.
"""

from __future__ import annotations

import asyncio
from typing import Any

import uvicorn

Scope = dict[str, Any]
Message = dict[str, Any]
_DISCONNECT: Message = {"type": "http.disconnect"}


class Draining:
    """An ASGI app around ``app`` whose GET streams end when ``drain`` is called."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._drained: asyncio.Event | None = None

    def _event(self) -> asyncio.Event:
        if self._drained is None:
            self._drained = asyncio.Event()
        return self._drained

    def drain(self) -> None:
        """From the server's event loop: every open and later GET stream sees a disconnect."""
        self._event().set()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope.get("type") != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        drained = self._event()

        async def receive_or_drain() -> Message:
            if drained.is_set():
                return _DISCONNECT
            message = asyncio.ensure_future(receive())
            stop = asyncio.ensure_future(drained.wait())
            done, _ = await asyncio.wait({message, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if message in done:
                result: Message = message.result()
                return result
            message.cancel()
            return _DISCONNECT

        state = {"started": False, "done": False}

        async def tracking_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                state["done"] = True
            await send(message)

        await self.app(scope, receive_or_drain, tracking_send)
        if drained.is_set() and state["started"] and not state["done"]:
            # The stream stopped on our disconnect: end the response so the client sees a clean
            # end of stream (and the server has nothing to complain about).
            await send({"type": "http.response.body", "body": b"", "more_body": False})


class DrainingServer(uvicorn.Server):
    """uvicorn's server that ends the app's open streams before its graceful shutdown."""

    def __init__(self, config: uvicorn.Config, app: Draining) -> None:
        super().__init__(config)
        self._draining = app

    async def shutdown(self, sockets: Any = None) -> None:
        self._draining.drain()
        await super().shutdown(sockets)
