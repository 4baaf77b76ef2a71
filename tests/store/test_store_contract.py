"""The Store contract: every adapter keeps objects, changes, events and tokens the same way."""

from __future__ import annotations

import threading
import time

import pytest

from gpuaas.store import (
    Ack,
    AppendChange,
    AppendEvent,
    Change,
    DeleteObject,
    DeleteToken,
    EventRecord,
    GroupCommitter,
    ObjectKey,
    ObjectRecord,
    PutObject,
    PutToken,
    Store,
    StoreError,
    TokenRecord,
    open_store,
)


def _obj(name: str, rv: int, ns: str = "team-a", spec: int = 0) -> ObjectRecord:
    return ObjectRecord(
        key=ObjectKey("kueue.x-k8s.io/Workload", ns, name),
        rv=rv,
        seq=rv,
        created=1000.0 + rv,
        doc={"metadata": {"name": name, "namespace": ns}, "spec": {"x": spec}},
        internal={"uid": rv},
    )


def test_empty_store_loads_nothing(store: Store) -> None:
    loaded = store.load()
    assert (loaded.objects, loaded.max_rv, loaded.max_event_id) == ([], 0, 0)


def test_objects_round_trip_in_creation_order(store: Store) -> None:
    b, a = _obj("b", 2), _obj("a", 1)
    store.commit([PutObject(b), PutObject(a)])
    loaded = store.load()
    assert [o.key.name for o in loaded.objects] == ["a", "b"]
    assert loaded.objects[0] == a
    assert loaded.max_rv == 2


def test_last_write_per_key_wins_within_a_batch(store: Store) -> None:
    first, second = _obj("a", 1, spec=1), _obj("a", 2, spec=2)
    store.commit([PutObject(first), PutObject(second)])
    assert store.load().objects == [second]
    store.commit([PutObject(_obj("a", 3)), DeleteObject(first.key)])
    assert store.load().objects == []
    store.commit([DeleteObject(first.key), PutObject(_obj("a", 4))])
    assert [o.rv for o in store.load().objects] == [4]


def test_change_log_replays_after_a_resource_version(store: Store) -> None:
    key = ObjectKey("kueue.x-k8s.io/Workload", "team-a", "a")
    changes = [Change(rv, t, key, {"rv": rv}) for rv, t in [(1, "ADDED"), (2, "MODIFIED")]]
    store.commit([AppendChange(c) for c in changes] + [AppendChange(Change(3, "DELETED", key, {}))])
    assert [c.rv for c in store.changes_since(1)] == [2, 3]
    assert store.changes_since(0)[:2] == changes
    assert store.changes_since(3) == []
    assert store.load().max_rv == 3


def test_a_failed_batch_leaves_nothing_behind(store: Store) -> None:
    key = ObjectKey("kueue.x-k8s.io/Workload", "team-a", "a")
    store.commit([AppendChange(Change(1, "ADDED", key, {}))])
    with pytest.raises(StoreError, match="committing"):
        # the duplicate resourceVersion violates the change log's primary key
        store.commit([PutObject(_obj("x", 5)), AppendChange(Change(1, "ADDED", key, {}))])
    assert store.load().objects == []
    store.commit([PutObject(_obj("y", 6))])  # the store is still usable
    assert [o.key.name for o in store.load().objects] == ["y"]


def test_events_filter_by_namespace_and_object(store: Store) -> None:
    evs = [
        EventRecord(1, 1.0, "team-b", "Normal", "Admitted", "Workload team-b/w", "ok", "team-b/w"),
        EventRecord(2, 2.0, "team-a", "Normal", "Admitted", "Workload team-a/p", "ok", "team-a/p"),
        EventRecord(
            3, 3.0, "team-b", "Normal", "Preempted", "Workload team-b/w", "by p", "team-b/w", "p"
        ),
        EventRecord(4, 4.0, "", "Warning", "Inactive", "ClusterQueue cq", "no flavor"),
    ]
    store.commit([AppendEvent(e) for e in evs])
    assert [e.id for e in store.events()] == [1, 2, 3, 4]
    assert [e.id for e in store.events(namespace="team-b")] == [1, 3]
    assert [e.id for e in store.events(obj="Workload team-b/w")] == [1, 3]
    assert store.events(obj="Workload team-b/w")[1] == evs[2]
    assert [e.id for e in store.events(limit=2)] == [3, 4]
    assert store.load().max_event_id == 4


def test_tokens_are_kept_by_hash(store: Store) -> None:
    t = TokenRecord("h1", "team-a", ("team-a", "team-c"), False, 5.0)
    admin = TokenRecord("h0", "admin", (), True, 1.0)
    store.commit([PutToken(t), PutToken(admin)])
    assert store.token("h1") == t
    assert store.token("nope") is None
    assert store.tokens() == [admin, t]
    store.commit([DeleteToken("h1")])
    assert store.token("h1") is None


def test_data_survives_reopening(store_url: str) -> None:
    s = open_store(store_url)
    s.commit([PutObject(_obj("a", 1))])
    s.close()
    s2 = open_store(store_url)
    try:
        assert [o.key.name for o in s2.load().objects] == ["a"]
    finally:
        s2.close()


def test_reads_see_commits_from_another_connection(store_url: str) -> None:
    writer, reader = open_store(store_url), open_store(store_url)
    try:
        assert reader.token("h") is None
        writer.commit([PutToken(TokenRecord("h", "n", ("a",), False, 1.0))])
        assert reader.token("h") is not None
    finally:
        writer.close()
        reader.close()


def test_group_commit_batches_concurrent_writers(store: Store) -> None:
    gc = GroupCommitter(store)
    futures: list[Ack] = []
    lock = threading.Lock()
    published: list[int] = []

    def writer(base: int) -> None:
        for i in range(50):
            rv = base * 1000 + i + 1
            fut = gc.submit(
                [PutObject(_obj(f"w{rv}", rv))], after=lambda rv=rv: published.append(rv)
            )
            with lock:
                futures.append(fut)

    threads = [threading.Thread(target=writer, args=(b,)) for b in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for fut in futures:
        fut.result(timeout=60)
    gc.close()
    assert len(store.load().objects) == 400
    assert sorted(published) == sorted(int(o.key.name[1:]) for o in store.load().objects)
    assert gc.items == 400
    assert gc.batches < 400  # several writers shared a transaction


def test_group_commit_writes_nobody_waits_for_join_the_next_waited_ones(store: Store) -> None:
    gc = GroupCommitter(store, linger=600.0)  # only a waited write (or close) ends the lingering
    try:
        behind = gc.submit([PutObject(_obj("status", 1))], waiting=False)
        time.sleep(0.05)  # the writer thread has taken it and lingers: nothing is committed
        gc.submit([PutObject(_obj("create", 2))]).result(timeout=30)  # not held up by the linger
        assert behind.done()
        assert (gc.batches, gc.items) == (1, 2)  # one transaction, one fsync for both
        assert sorted(o.key.name for o in store.load().objects) == ["create", "status"]
    finally:
        gc.close()


def test_group_commit_lingers_only_for_writes_nobody_waits_for(store: Store) -> None:
    gc = GroupCommitter(store, linger=600.0)
    gc.submit([PutObject(_obj("waited", 1))]).result(timeout=30)  # committed at once
    behind = gc.submit([PutObject(_obj("behind", 2))], waiting=False)
    gc.close()  # ends the lingering: what lingers is committed, not dropped
    behind.result(timeout=30)
    assert gc.batches == 2
    assert sorted(o.key.name for o in store.load().objects) == ["behind", "waited"]


def test_group_commit_waits_for_the_writers_at_work_and_no_longer(store: Store) -> None:
    gc = GroupCommitter(store, linger=600.0)
    try:
        gc.siblings = lambda: 1  # a lone writer: its write is committed at once
        gc.submit([PutObject(_obj("alone", 1))]).result(timeout=30)
        gc.siblings = lambda: 2  # two writers at work: the first write waits for the second's
        first = gc.submit([PutObject(_obj("first", 2))])
        time.sleep(0.05)
        assert not first.done()
        gc.submit([PutObject(_obj("second", 3))]).result(timeout=30)
        assert first.done()
        assert (gc.batches, gc.items) == (2, 3)
    finally:
        gc.close()


def test_group_commit_runs_its_hook_once_a_batch_is_stored(store: Store) -> None:
    seen: list[tuple[list[str], list[str]]] = []  # (names written, names already in the store)
    futures: list[Ack] = []

    def stored(writes: object) -> None:
        assert isinstance(writes, list) and not any(f.done() for f in futures[len(seen) :])
        names = [w.record.key.name for w in writes if isinstance(w, PutObject)]
        seen.append((names, [o.key.name for o in store.load().objects]))
        if names == ["boom"]:
            raise RuntimeError("a failing hook loses nothing")

    gc = GroupCommitter(store, stored=stored)
    for i, name in enumerate(["a", "boom", "c"]):
        futures.append(gc.submit([PutObject(_obj(name, i + 1))]))
        futures[-1].result(timeout=30)  # answered, the failing hook's batch included
    gc.close()
    assert seen == [(["a"], ["a"]), (["boom"], ["a", "boom"]), (["c"], ["a", "boom", "c"])]


def test_group_commit_fails_the_batch_and_what_follows(store: Store) -> None:
    key = ObjectKey("kueue.x-k8s.io/Workload", "team-a", "a")
    gc = GroupCommitter(store)
    gc.submit([AppendChange(Change(1, "ADDED", key, {}))]).result(timeout=30)
    bad = gc.submit([AppendChange(Change(1, "ADDED", key, {}))])
    with pytest.raises(StoreError):
        bad.result(timeout=30)
    assert gc.failed
    after = gc.submit([PutObject(_obj("b", 2))])
    with pytest.raises(StoreError, match="reloading"):
        after.result(timeout=30)
    gc.reset()
    gc.submit([PutObject(_obj("c", 3))]).result(timeout=30)
    gc.close()
    assert [o.key.name for o in store.load().objects] == ["c"]


def test_bad_urls_are_refused() -> None:
    with pytest.raises(StoreError, match="sqlite:///PATH"):
        open_store("mysql://x")
    with pytest.raises(StoreError, match="schema"):
        open_store("postgresql://postgres@127.0.0.1:5432/test?schema=a;drop")


def test_an_ack_answers_every_waiter_once_given() -> None:
    ok, failed = Ack(), Ack()
    with pytest.raises(TimeoutError):
        ok.result(timeout=0.01)
    assert not ok.done()
    seen: list[BaseException | None] = []
    waiters = [threading.Thread(target=lambda: seen.append(failed.exception())) for _ in range(3)]
    for t in waiters:
        t.start()
    ok.set_result(None)
    failed.set_exception(StoreError("disk full"))
    for t in waiters:
        t.join(timeout=30)
    assert ok.done() and failed.done()
    ok.result(timeout=0)
    ok.result()
    assert ok.exception() is None
    assert [str(e) for e in seen] == ["disk full"] * 3
    with pytest.raises(StoreError, match="disk full"):
        failed.result(timeout=1)
