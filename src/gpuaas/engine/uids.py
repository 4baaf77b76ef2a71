"""New objects' uids: random (version 4) UUIDs as text, drawn from the OS in blocks.

``str(uuid.uuid4())`` asks the OS for 16 random bytes per uid, and ``os.urandom`` releases the
GIL for it: on the create path (one or two uids per create, thousands of creates a second) each
release hands the GIL to another thread and back, and ``UUID``'s constructor and ``__str__`` are
Python code. ``new()`` takes 16 bytes at a time from a block of ``BLOCK`` uids drawn at once and
writes the text itself: the same format and the same randomness as ``uuid.uuid4()`` (122 random
bits, version 4, RFC 4122 variant).

No clock, no state but the block; safe from any thread (a chunk is taken by one atomic
``deque.popleft``, so no two callers get the same bytes).
"""

from __future__ import annotations

import os
from collections import deque

BLOCK = 256  # uids per draw from the OS
_VERSION_MASK = ~((0xF000 << 64) | (0xC000 << 48))
_VERSION_BITS = (4 << 76) | (0x8000 << 48)  # version 4, variant RFC 4122 (as uuid.UUID sets)

_chunks: deque[bytes] = deque()


def new() -> str:
    """A fresh random uid, ``xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`` as ``str(uuid.uuid4())``."""
    try:
        raw = _chunks.popleft()
    except IndexError:
        block = os.urandom(16 * BLOCK)
        _chunks.extend(block[i : i + 16] for i in range(16, len(block), 16))
        raw = block[:16]
    return text(raw)


def text(raw: bytes) -> str:
    """The version 4 uid made of these 16 random bytes (``str(uuid.UUID(bytes=raw, version=4))``)."""
    h = "%032x" % (int.from_bytes(raw) & _VERSION_MASK | _VERSION_BITS)
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
