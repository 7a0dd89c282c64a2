"""The store cases of ``tests/stores/test_stores*.py``: the store contract
(:mod:`a2a_flask.testing.store_contract`) and what it leaves open, persistence and
several processes on the shared stores.

Written once here, run by one module per store (``test_stores.py`` the memory
stores, ``test_stores_<kind>.py`` each other built-in): each defines the ``kind``
fixture (:func:`kind_fixture`) and imports the cases that apply to its store, so
that under ``pytest -n 6 --dist loadfile`` the stores run side by side.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import multiprocessing
import threading
import time
from typing import Any, Set, Tuple

import pytest

from a2a_flask.protocol.events import apply_event
from a2a_flask.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
)
from a2a_flask.stores import MemoryStore, ShelveStore, SQLiteStore
from a2a_flask.stores.redis import RedisStore
from a2a_flask.stores.base import LogEntry, SequenceConflict, TaskQuery
# The contract's helpers, which test modules import from here (or test_stores.py).
from a2a_flask.testing.store_contract import (  # noqa: F401
    S,
    StoreContract,
    append,
    chunk_event,
    config,
    create,
    ids,
    make_task,
    stamp,
    status_event,
    target,
    user_turn,
)

from tests.conftest import (REDIS_URL, SQL_STORES, drop_redis_prefix, drop_sql_database, redis_up,
                            sql_test_url)


def open_store(kind: str, path: str):
    """A store of ``kind``; ``path`` names it (a file, or for Redis a key prefix).

    ``memory-frozen`` is the memory store freezing each task as soon as it
    finishes (its default keeps the last 32 as objects), so that every test of
    the contract also runs on frozen tasks.
    """
    if kind == "memory":
        return MemoryStore()
    if kind == "memory-frozen":
        store = MemoryStore()
        store.freeze_lag = 0
        return store
    if kind == "redis":
        redis_up()
        prefix = "a2atest-" + hashlib.sha1(path.encode()).hexdigest()[:12]
        _REDIS_PREFIXES.add(prefix)
        return RedisStore(f"{REDIS_URL}?prefix={prefix}")
    if kind in SQL_STORES:  # a schema / database per path, dropped after the test
        from a2a_flask.stores.sql import open_sql_store

        name = "a2atest_" + hashlib.sha1(path.encode()).hexdigest()[:12]
        _SQL_NAMES.add((kind, name))
        return open_sql_store(sql_test_url(kind, name))
    return ShelveStore(path) if kind == "shelve" else SQLiteStore(path)


#: Stores shared between processes (and, for Redis, hosts).
SHARED_STORES = ["shelve", "sqlite", "redis", *SQL_STORES]
_REDIS_PREFIXES: Set[str] = set()
_SQL_NAMES: Set[Tuple[str, str]] = set()


@pytest.fixture(autouse=True)
def _drop_store_names():
    yield
    while _REDIS_PREFIXES:
        drop_redis_prefix(_REDIS_PREFIXES.pop())
    while _SQL_NAMES:
        drop_sql_database(*_SQL_NAMES.pop())


#: Every built-in store, as the contract suite runs on it.
ALL_STORES = ["memory", "memory-frozen", *SHARED_STORES]


def kind_fixture(*kinds: str) -> Any:
    """The ``kind`` fixture of a per-store module: its stores, as the ids
    (``test_name[store]``)."""
    @pytest.fixture(params=kinds)
    def kind(request) -> str:
        return request.param
    return kind


class TestStoreContract(StoreContract):
    """The contract suite on the module's ``kind`` of store."""

    @pytest.fixture
    def store_factory(self, kind, tmp_path):
        return lambda: open_store(kind, str(tmp_path / "tasks"))


@pytest.fixture
def store(kind, tmp_path):
    made = open_store(kind, str(tmp_path / "tasks"))
    yield made
    made.close()


# ================================================================ what the contract leaves open


def test_read_slices_end_where_each_store_keeps_its_records(store):
    """A read returns the first read_slice entries, or (shelve) a few more to the end
    of the record it read: the contract allows either; this pins each store's."""
    store.read_slice = 3
    create(store, "t1")
    for batch in range(3):  # four events an append: the slices cut across appends
        append(store, "t1", [user_turn("t1", f"{batch}-{i}") for i in range(4)])
    append(store, "t1", [status_event("t1", S.COMPLETED)])
    rounds_up = isinstance(store, ShelveStore)  # to the end of the record (an append) it read
    assert [e.seq for e in store.read("t1", 0)] == ([1, 2, 3, 4, 5] if rounds_up else [1, 2, 3])
    assert [e.seq for e in store.read("t1", 3)] == ([4, 5, 6, 7, 8, 9] if rounds_up else [4, 5, 6])


def test_stores_of_json_text_hand_out_the_text(store):
    """The memory store keeps objects (no text); every other built-in keeps each
    event's StreamResponse text and hands it out (the contract allows either)."""
    from a2a_flask.protocol.jsontext import stream_response_text

    create(store, "t1")
    events = [chunk_event("t1", 0), status_event("t1", S.COMPLETED)]
    append(store, "t1", events)
    texts = [entry.stream_response for entry in store.read("t1", 1)]
    if isinstance(store, MemoryStore):
        assert texts == [None, None]
    else:
        assert [json.loads(text) for text in texts] == [
            json.loads(stream_response_text(event)) for event in events]


# ================================================================ read slices


def test_a_read_slice_is_decoded_entry_by_entry(kind, tmp_path):
    """Stores that keep JSON hand out a slice as its text (shelve: as the JSON
    it parsed), each entry decoded when it is looked at: Python's collector
    never finds a whole slice of events alive (what it finds alive it moves to
    older generations, and the more it moves the more often it walks the
    whole process)."""
    import gc

    store = open_store(kind, str(tmp_path / "tasks"))
    try:
        create(store, "t1")
        chunks = [chunk_event("t1", i) for i in range(200)]
        append(store, "t1", chunks)
        decoded = (LogEntry, TaskArtifactUpdateEvent, Artifact, Part)

        def alive() -> int:
            return sum(isinstance(thing, decoded) for thing in gc.get_objects())

        before = alive()
        entries = store.read("t1", 1)
        # A decoded slice would add four objects per entry; what the process's other
        # threads (an earlier test's deliveries, say) make or drop meanwhile is far less.
        assert alive() - before < len(chunks), "the slice was decoded when read"
        assert len(entries) == 200 and entries[-1].seq == 201 and entries[0].seq == 2
        assert [e.event for e in entries] == chunks and [e.event for e in entries] == chunks
        assert [e.seq for e in entries[10:13]] == [12, 13, 14] and entries[-2].event == chunks[-2]
        assert store.read("t1", 201) == []
    finally:
        store.close()


# ================================================================ push configs


def test_redis_sweeps_only_tasks_that_may_still_owe_a_push(kind, tmp_path):
    """A finished task whose webhooks had everything leaves the set the sweep reads:
    the sweep's cost follows the tasks in flight, not every task ever pushed."""
    store = open_store(kind, str(tmp_path / "tasks"))
    try:
        def swept() -> Set[str]:
            return {i.decode() for i in store._redis.smembers(store._pushing)}

        for task_id in ("done", "running", "owed", "gave-up"):
            create(store, task_id)
            store.put_push_target(task_id, target("a"))
        append(store, "running", [status_event("running", S.WORKING)])
        for task_id in ("done", "owed", "gave-up"):
            append(store, task_id, [status_event(task_id, S.COMPLETED)])
        store.record_push_progress("done", "a", 2, 0, False)
        store.record_push_progress("running", "a", 2, 0, False)
        store.record_push_progress("gave-up", "a", 1, 8, True)
        assert store.push_backlog() == ["owed"]
        assert swept() == {"running", "owed"}  # running: more events may come
        store.put_push_target("done", target("b"))  # a webhook on a finished task: owed again
        assert sorted(store.push_backlog()) == ["done", "owed"]
        store.record_push_progress("done", "b", 2, 0, False)
        store.record_push_progress("owed", "a", 2, 0, False)
        assert store.push_backlog() == [] and swept() == {"running"}
    finally:
        store.close()


# ================================================================ long streams


def stored_snapshot_seq(store, task_id: str) -> int:
    """The last event the stored snapshot of a lazy store includes."""
    if isinstance(store, SQLiteStore):
        return store._query("SELECT snap_seq FROM tasks WHERE id=?", (task_id,))[0][0]
    if isinstance(store, ShelveStore):
        return store._read(lambda: store._tasks[task_id].snap_seq)
    return int(store._redis.hget(store._key("task", task_id), "snap_seq"))




def test_chunks_are_appended_without_rewriting_the_snapshot_each_time(tmp_path, kind):
    store = open_store(kind, str(tmp_path / "tasks"))
    try:
        create(store, "t1")
        seq = append(store, "t1", [status_event("t1", S.WORKING)])
        record = store.load("t1")
        task = record.task
        snapshots = []
        for i in range(600):
            event = chunk_event("t1", i)
            task = apply_event(task, event)
            record = record.after([event])
            seq = store.append("t1", seq, [event], record)
            snapshots.append(stored_snapshot_seq(store, "t1"))
        # Stored when the chunks since the last snapshot are as many as before it:
        # a handful of rewrites (O(n) bytes in all), not one per chunk.
        assert len(set(snapshots)) <= 6
        assert snapshots[-1] < seq
        assert store.load("t1").task == task
        append(store, "t1", [status_event("t1", S.COMPLETED, 2)])
        assert stored_snapshot_seq(store, "t1") == seq + 1  # a settled task is stored whole
        if kind == "shelve":  # a compacted log keeps the snapshot where it was
            store.append("t1", seq + 1, [chunk_event("t1", 600)],
                         store.load("t1").after([chunk_event("t1", 600)]))
            store.compact()
            assert stored_snapshot_seq(store, "t1") == seq + 1
            assert store.load("t1").task.artifacts[0].parts[-1].text == "c600"
    finally:
        store.close()


def test_a_task_stored_before_lazy_snapshots_still_loads_and_appends(kind, tmp_path):
    store = open_store(kind, str(tmp_path / "tasks"))
    try:
        create(store, "t1")
        append(store, "t1", [status_event("t1", S.WORKING)])
        # What an older store wrote: the snapshot with every append, and no snap_seq
        # (nor the byte counts).
        from a2a_flask.stores.serial import dump_task

        key = store._key("task", "t1")
        store._redis.hset(key, "snapshot", dump_task(store.load("t1").task))
        store._redis.hdel(key, "snap_seq", "snap_bytes", "log_bytes", "history_len")
        # Read by a process of this version that did not write it (one that wrote the
        # head remembers its counts: only another process's write changes them, and
        # that moves the head).
        store.close()
        store = open_store(kind, str(tmp_path / "tasks"))
        assert store.load("t1").state is S.WORKING
        append(store, "t1", [chunk_event("t1", 0)])
        assert store.load("t1").task.artifacts[0].parts[0].text == "c0"
    finally:
        store.close()


#: The tasks table of a2a_flask 0.1.0's SQLite files: the snapshot in the task's row.
SQLITE_0_1_TASKS = """CREATE TABLE tasks (id TEXT PRIMARY KEY, tenant TEXT NOT NULL,
    owner TEXT NOT NULL, dialect TEXT NOT NULL, context_id TEXT NOT NULL, state TEXT NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, seq INTEGER NOT NULL,
    snapshot TEXT NOT NULL{extra});
CREATE INDEX tasks_by_update ON tasks (tenant, owner, updated_at DESC, id DESC);
CREATE TABLE events (task_id TEXT NOT NULL, seq INTEGER NOT NULL, event TEXT NOT NULL,
    PRIMARY KEY (task_id, seq)) WITHOUT ROWID;"""


@pytest.mark.parametrize("snap_seq", [False, True], ids=["0.1.0", "0.2-dev"])
def test_an_sqlite_file_with_snapshots_in_the_task_rows_is_migrated_on_open(tmp_path, snap_seq):
    import sqlite3

    from a2a_flask.stores.serial import dump_event, dump_task

    path = str(tmp_path / "old.db")
    working = apply_event(Task(id="t1", context_id="ctx", status=TaskStatus(state=S.SUBMITTED)),
                          status_event("t1", S.WORKING))
    old = sqlite3.connect(path)
    old.executescript(SQLITE_0_1_TASKS.format(extra=", snap_seq INTEGER" if snap_seq else ""))
    columns = "?,?,?,?,?,?,?,?,?,?" + (",NULL" if snap_seq else "")
    old.execute(f"INSERT INTO tasks VALUES ({columns})", (
        "t1", "acme", "alice", "1.0", "ctx", "working", "2026-01-01T00:00:00Z",
        "2026-01-01T00:00:01Z", 2, dump_task(working)))
    old.executemany("INSERT INTO events VALUES (?,?,?)", [
        ("t1", 1, dump_event(Task(id="t1", context_id="ctx",
                                  status=TaskStatus(state=S.SUBMITTED)))),
        ("t1", 2, dump_event(status_event("t1", S.WORKING)))])
    old.commit()
    old.close()

    store = SQLiteStore(path)
    again = SQLiteStore(path)  # a second worker opening the migrated file changes nothing
    try:
        columns = {row[1] for row in store._query("PRAGMA table_info(tasks)")}
        assert "snapshot" not in columns and "snap_seq" in columns
        record = store.load("t1")
        assert (record.seq, record.state, record.tenant, record.owner) == (
            2, S.WORKING, "acme", "alice")
        assert record.task == working
        seq = append(store, "t1", [chunk_event("t1", i) for i in range(3)])
        assert [p.text for p in again.load("t1").task.artifacts[0].parts] == ["c0", "c1", "c2"]
        assert ids(again.list_tasks(TaskQuery(tenant="acme", owner="alice"))) == ["t1"]
        assert [e.seq for e in again.read("t1", 0)] == list(range(1, seq + 1))
    finally:
        again.close()
        store.close()


# ================================================================ file stores: persistence


def test_file_store_persists_across_reopening(tmp_path, kind):
    path = str(tmp_path / "persist" / "tasks")
    first = open_store(kind, path)
    create(first, "t1", tenant="acme", owner="alice")
    append(first, "t1", [user_turn("t1", "a"), status_event("t1", S.COMPLETED)])
    first.put_push_target("t1", dataclasses.replace(target("cfg", token="tok"), delivered_seq=2))
    first.close()

    second = open_store(kind, path)
    try:
        record = second.load("t1")
        assert record.seq == 3 and record.state is S.COMPLETED
        assert (record.tenant, record.owner) == ("acme", "alice")
        assert [e.seq for e in second.read("t1", 0)] == [1, 2, 3]
        assert second.read("t1", 1)[0].event.message_id == "msg-a"
        assert ids(second.list_tasks(TaskQuery(tenant="acme", owner="alice"))) == ["t1"]
        assert [(t.config.id, t.config.token, t.delivered_seq)
                for t in second.push_targets("t1")] == [("cfg", "tok", 2)]
        # And it keeps working: the reopened store appends after the persisted log.
        with pytest.raises(SequenceConflict):
            second.append("t1", 2, [status_event("t1", S.FAILED)],
                          record.after([status_event("t1", S.FAILED)]))
    finally:
        second.close()


def test_two_instances_on_one_path_see_each_other(tmp_path, kind):
    path = str(tmp_path / "shared")
    left, right = open_store(kind, path), open_store(kind, path)
    try:
        create(left, "t1")
        assert right.load("t1") is not None
        timer = threading.Timer(0.1, lambda: append(right, "t1", [status_event("t1", S.WORKING)]))
        timer.start()
        started = time.monotonic()
        left.wait("t1", 1, 5.0)  # woken by polling, not by its own notifier
        timer.join()
        assert time.monotonic() - started < 4.0  # woken, not the wait's 5 s timeout
        assert left.load("t1").seq == 2
    finally:
        left.close()
        right.close()


# ================================================================ file stores: several processes


def _append_many(kind: str, path: str, task_id: str, worker: str, count: int, start,
                 conflicts) -> None:
    """Child process: append ``count`` user turns with compare-and-set, retrying on conflicts."""
    store = open_store(kind, path)
    start.wait(10)
    done = 0
    while done < count:
        record = store.load(task_id)
        event = Message(message_id=f"{worker}-{done}", role=Role.USER,
                        parts=[Part(text=f"{worker} {done}")], task_id=task_id, context_id="ctx")
        try:
            store.append(task_id, record.seq, [event], record.after([event]))
        except SequenceConflict:
            with conflicts.get_lock():
                conflicts.value += 1
            continue
        done += 1
    store.close()


def _append_later(kind: str, path: str, task_id: str, delay: float) -> None:
    time.sleep(delay)
    store = open_store(kind, path)
    append(store, task_id, [status_event(task_id, S.WORKING)])
    store.close()


def test_two_processes_appending_to_one_file_keep_a_dense_sequence(tmp_path, kind):
    path = str(tmp_path / "multi")
    store = open_store(kind, path)
    create(store, "t1")
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    conflicts = ctx.Value("i", 0)
    count = 25
    workers = [ctx.Process(target=_append_many, args=(kind, path, "t1", name, count, start, conflicts))
               for name in ("A", "B")]
    for worker in workers:
        worker.start()
    try:
        start.set()
        for worker in workers:
            worker.join(30)
    finally:
        for worker in workers:
            if worker.is_alive():
                worker.kill()
    assert [w.exitcode for w in workers] == [0, 0]

    record = store.load("t1")
    assert record.seq == 1 + 2 * count
    entries = store.read("t1", 0)
    assert [e.seq for e in entries] == list(range(1, 2 * count + 2))
    logged = [e.event.message_id for e in entries[1:]]
    for name in ("A", "B"):  # each worker's turns exactly once, in its own order
        assert [m for m in logged if m.startswith(name)] == [f"{name}-{i}" for i in range(count)]
    # The snapshot saw every append: no lost update.
    assert [m.message_id for m in record.task.history[1:]] == logged
    store.close()


def test_wait_notices_an_append_from_another_process(tmp_path, kind):
    path = str(tmp_path / "xproc")
    store = open_store(kind, path)
    create(store, "t1")
    ctx = multiprocessing.get_context("spawn")
    child = ctx.Process(target=_append_later, args=(kind, path, "t1", 0.2))
    child.start()
    try:
        deadline = time.monotonic() + 20
        while store.load("t1").seq == 1 and time.monotonic() < deadline:
            store.wait("t1", 1, 1.0)
        assert store.load("t1").seq == 2
        assert store.load("t1").state is S.WORKING
    finally:
        child.join(20)
        if child.is_alive():
            child.kill()
        store.close()
    assert child.exitcode == 0
