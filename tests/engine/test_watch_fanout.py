"""The watch hub: each change encoded once per encoding, in order, never holding up a writer.

``publish`` runs on the committer's thread and only queues; the hub's dispatcher matches every
subscriber's filter, encodes a change once per ``Encoding.key`` for all the subscribers sharing
it, and hands each its lines in resourceVersion order. A subscriber that blocks or raises holds
up neither ``publish`` nor the others.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import pytest

from gpuaas.engine.watch import Encoding, Lines, WatchHub, interval_for
from gpuaas.store import Change, ObjectKey


def change(rv: int, ns: str) -> Change:
    key = ObjectKey("kueue.x-k8s.io/Workload", ns, f"w{rv}")
    return Change(rv, "ADDED", key, {"metadata": {"name": f"w{rv}", "namespace": ns}})


class Collector:
    def __init__(self, want: int) -> None:
        self.got: list[tuple[int, bytes]] = []
        self.done = threading.Event()
        self.want = want

    def __call__(self, lines: Lines) -> None:
        self.got += [(c.rv, data) for c, data in lines]
        if len(self.got) >= self.want:
            self.done.set()


def in_ns(ns: str) -> object:
    return lambda c: c.key.namespace == ns


@pytest.mark.parametrize(
    ("subscribers", "keys", "encodes"),
    [
        pytest.param(50, 1, 10, id="fifty watchers of one encoding: once per change"),
        pytest.param(50, 2, 20, id="two encodings (JSON and Table): twice per change"),
        pytest.param(1, 1, 10, id="one watcher: once per change"),
    ],
)
def test_each_change_is_encoded_once_per_encoding(
    subscribers: int, keys: int, encodes: int
) -> None:
    hub = WatchHub()
    calls: list[int] = []
    lock = threading.Lock()

    def encoder(tag: str) -> Encoding:
        def encode(c: Change) -> bytes:
            with lock:
                calls.append(c.rv)
            return f"{tag}:{c.rv}".encode()

        return Encoding(("v1beta1", tag), encode)

    encodings = [encoder(f"fmt{k}") for k in range(keys)]
    collectors = []
    for i in range(subscribers):
        col = Collector(10)
        hub.subscribe_encoded(lambda c: True, encodings[i % keys], col)
        collectors.append((col, i % keys))
    hub.publish([change(rv, "a") for rv in range(1, 6)])
    hub.publish([change(rv, "a") for rv in range(6, 11)])
    try:
        for col, k in collectors:
            assert col.done.wait(30), "a watcher never got its changes"
            assert col.got == [(rv, f"fmt{k}:{rv}".encode()) for rv in range(1, 11)]
        assert len(calls) == encodes
    finally:
        hub.close()


def test_filters_are_per_watcher_and_the_encoding_is_shared() -> None:
    hub = WatchHub()
    encoded: list[int] = []
    enc = Encoding("json", lambda c: (encoded.append(c.rv), str(c.rv).encode())[1])
    a, b = Collector(2), Collector(2)
    hub.subscribe_encoded(lambda c: c.key.namespace == "a", enc, a)
    hub.subscribe_encoded(lambda c: c.key.namespace == "b", enc, b)
    hub.publish([change(1, "a"), change(2, "b"), change(3, "a"), change(4, "b")])
    try:
        assert a.done.wait(30) and b.done.wait(30)
        assert [rv for rv, _ in a.got] == [1, 3]
        assert [rv for rv, _ in b.got] == [2, 4]
        assert sorted(encoded) == [1, 2, 3, 4]
    finally:
        hub.close()


def test_a_blocked_watcher_holds_up_neither_publish_nor_the_others() -> None:
    hub = WatchHub()
    release = threading.Event()
    entered = threading.Event()

    def stuck(lines: Lines) -> None:
        entered.set()
        release.wait()

    enc = Encoding("json", lambda c: b"x")
    hub.subscribe_encoded(lambda c: True, enc, stuck)
    hub.publish([change(1, "a")])
    assert entered.wait(30)
    # The dispatcher is stuck inside that watcher; the committer's publish still returns.
    published = threading.Event()

    def writer() -> None:
        for rv in range(2, 2002):
            hub.publish([change(rv, "a")])
        published.set()

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        assert published.wait(60), "publish waited on a watcher"
    finally:
        release.set()
        hub.close()


def test_a_watcher_that_raises_is_dropped_and_the_rest_go_on() -> None:
    hub = WatchHub()

    def broken(lines: Sequence[object]) -> None:
        raise RuntimeError("gone")

    enc = Encoding("json", lambda c: b"x")
    hub.subscribe_encoded(lambda c: True, enc, broken)
    good = Collector(3)
    hub.subscribe_encoded(lambda c: True, enc, good)
    hub.publish([change(1, "a")])
    hub.publish([change(2, "a"), change(3, "a")])
    try:
        assert good.done.wait(30)
        assert [rv for rv, _ in good.got] == [1, 2, 3]
        assert len(hub) == 1
    finally:
        hub.close()


@pytest.mark.parametrize(
    ("subscribers", "interval"),
    [(0, 0.0), (10, 0.005), (100, 0.05), (1000, 0.5), (100_000, 0.5)],
)
def test_many_watchers_are_handed_changes_in_bounded_batches(
    subscribers: int, interval: float
) -> None:
    assert interval_for(subscribers) == pytest.approx(interval)


def test_watchers_with_one_filter_key_share_one_match_per_change() -> None:
    hub = WatchHub()
    matched: list[int] = []
    lock = threading.Lock()

    def match(c: Change) -> bool:
        with lock:
            matched.append(c.rv)
        return c.key.namespace == "a"

    enc = Encoding("json", lambda c: str(c.rv).encode())
    cols = [Collector(2) for _ in range(20)]
    for col in cols:
        hub.subscribe_encoded(match, enc, col, filter_key=("tenant-a", ""))
    hub.publish([change(1, "a"), change(2, "b"), change(3, "a")])
    try:
        for col in cols:
            assert col.done.wait(30)
            assert [rv for rv, _ in col.got] == [1, 3]
        assert sorted(matched) == [1, 2, 3]
    finally:
        hub.close()
