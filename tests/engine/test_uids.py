"""``engine.uids``: the uids ``uuid.uuid4()`` would make, never the same one twice."""

from __future__ import annotations

import os
import threading
import uuid

from gpuaas.engine import uids


def test_text_is_what_uuid_makes_of_the_same_bytes() -> None:
    for raw in [bytes(16), b"\xff" * 16, *(os.urandom(16) for _ in range(2000))]:
        assert uids.text(raw) == str(uuid.UUID(bytes=raw, version=4))


def test_new_uids_are_version_4_and_distinct_across_threads() -> None:
    got: list[list[str]] = []

    def draw() -> None:
        got.append([uids.new() for _ in range(3 * uids.BLOCK)])

    threads = [threading.Thread(target=draw) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [u for one in got for u in one]
    assert len(set(every)) == len(every) == 8 * 3 * uids.BLOCK
    assert all(uuid.UUID(u).version == 4 and str(uuid.UUID(u)) == u for u in every)
