"""The TaskStore contract on every backend; persistence and several processes on the file stores."""
from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import multiprocessing
import threading
import time
from typing import List, Set, Tuple

import pytest

from a2a_flask.protocol.errors import InvalidParamsError
from a2a_flask.protocol.models import (
    Artifact,
    AuthenticationInfo,
    Message,
    Part,
    Role,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
)
from a2a_flask.protocol.events import apply_event
from a2a_flask.stores import MemoryStore, ShelveStore, SQLiteStore
from a2a_flask.stores.redis import RedisStore
from a2a_flask.stores.base import LogEntry, PushTarget, SequenceConflict, TaskQuery, TaskRecord

from .conftest import (REDIS_URL, SQL_STORES, drop_redis_prefix, drop_sql_database, redis_up,
                       sql_test_url)
from .helpers import wait_until

S = TaskState


# ----------------------------------------------------------------- helpers


def stamp(second: int) -> str:
    return f"2025-01-01T00:00:{second:02d}.000Z"


def make_task(task_id: str, state: TaskState = S.SUBMITTED, *, context_id: str = "ctx",
              second: int = 0) -> Task:
    first = Message(message_id=f"{task_id}-m0", role=Role.USER, parts=[Part(text="hi")],
                    task_id=task_id, context_id=context_id)
    return Task(id=task_id, context_id=context_id,
                status=TaskStatus(state=state, timestamp=stamp(second)), history=[first])


def create(store, task_id: str, state: TaskState = S.SUBMITTED, *, context_id: str = "ctx",
           second: int = 0, tenant: str = "", owner: str = "") -> TaskRecord:
    task = make_task(task_id, state, context_id=context_id, second=second)
    record = TaskRecord(task, 1, tenant, owner, "1.0", stamp(second))
    store.create(record, task)
    return record


def user_turn(task_id: str, text: str) -> Message:
    return Message(message_id=f"msg-{text}", role=Role.USER, parts=[Part(text=text)],
                   task_id=task_id, context_id="ctx")


def status_event(task_id: str, state: TaskState, second: int = 1) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id, "ctx", TaskStatus(state=state, timestamp=stamp(second)))


def append(store, task_id: str, events: list) -> int:
    """Append after the current sequence number, with the record the events produce."""
    record = store.load(task_id)
    return store.append(task_id, record.seq, events, record.after(events))


def ids(page) -> List[str]:
    return [r.task.id for r in page.records]


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
def _drop_redis_keys():
    yield
    while _REDIS_PREFIXES:
        drop_redis_prefix(_REDIS_PREFIXES.pop())
    while _SQL_NAMES:
        drop_sql_database(*_SQL_NAMES.pop())


@pytest.fixture(params=["memory", "memory-frozen", *SHARED_STORES])
def store(request, tmp_path):
    made = open_store(request.param, str(tmp_path / "tasks"))
    yield made
    made.close()


# ================================================================ tasks and logs


def test_create_then_load_returns_the_record(store):
    record = create(store, "t1", tenant="acme", owner="alice")
    loaded = store.load("t1")
    assert loaded.task == record.task
    assert (loaded.seq, loaded.tenant, loaded.owner, loaded.dialect) == (1, "acme", "alice", "1.0")
    assert loaded.created_at == stamp(0)
    assert loaded.state is S.SUBMITTED
    assert store.load("missing") is None


def test_create_refuses_an_existing_task(store):
    create(store, "t1")
    with pytest.raises(SequenceConflict):
        store.create(TaskRecord(make_task("t1", S.WORKING), 1), make_task("t1", S.WORKING))
    assert store.load("t1").state is S.SUBMITTED
    assert len(store.read("t1", 0)) == 1


def test_append_stores_events_and_snapshot_together(store):
    create(store, "t1")
    seq = append(store, "t1", [user_turn("t1", "a"), status_event("t1", S.WORKING)])
    assert seq == 3
    record = store.load("t1")
    assert record.seq == 3 and record.state is S.WORKING
    assert [m.message_id for m in record.task.history] == ["t1-m0", "msg-a"]
    assert append(store, "t1", [status_event("t1", S.COMPLETED, 2)]) == 4
    assert store.load("t1").state is S.COMPLETED


def test_append_keeps_what_the_record_knows_about_the_task(store):
    create(store, "t1", tenant="acme", owner="alice")
    append(store, "t1", [status_event("t1", S.WORKING)])
    record = store.load("t1")
    assert (record.tenant, record.owner, record.dialect, record.created_at) == (
        "acme", "alice", "1.0", stamp(0))


def test_append_with_a_stale_sequence_number_is_a_conflict(store):
    create(store, "t1")
    stale = store.load("t1")
    append(store, "t1", [status_event("t1", S.WORKING)])
    with pytest.raises(SequenceConflict):
        store.append("t1", stale.seq, [status_event("t1", S.FAILED)],
                     stale.after([status_event("t1", S.FAILED)]))
    with pytest.raises(SequenceConflict):  # ahead of the log is no better
        store.append("t1", 7, [status_event("t1", S.FAILED)],
                     dataclasses.replace(stale, seq=8))
    record = store.load("t1")
    assert record.seq == 2 and record.state is S.WORKING
    assert [e.seq for e in store.read("t1", 0)] == [1, 2]


def test_read_returns_entries_after_a_sequence_number(store):
    first = create(store, "t1")
    append(store, "t1", [user_turn("t1", "a")])
    append(store, "t1", [status_event("t1", S.WORKING), status_event("t1", S.COMPLETED, 2)])
    entries = store.read("t1", 0)
    assert [e.seq for e in entries] == [1, 2, 3, 4]
    assert entries[0].event == first.task
    assert isinstance(entries[1].event, Message) and entries[1].event.message_id == "msg-a"
    assert [e.event.status.state for e in entries[2:]] == [S.WORKING, S.COMPLETED]
    assert [e.seq for e in store.read("t1", 2)] == [3, 4]
    assert store.read("t1", 4) == []
    assert store.read("missing", 0) == []


def test_read_returns_a_long_log_in_slices(store):
    store.read_slice = 3
    create(store, "t1")
    for batch in range(3):  # four events an append: the slices cut across appends
        append(store, "t1", [user_turn("t1", f"{batch}-{i}") for i in range(4)])
    append(store, "t1", [status_event("t1", S.COMPLETED)])
    rounds_up = isinstance(store, ShelveStore)  # to the end of the record (an append) it read
    assert [e.seq for e in store.read("t1", 0)] == ([1, 2, 3, 4, 5] if rounds_up else [1, 2, 3])
    assert [e.seq for e in store.read("t1", 3)] == ([4, 5, 6, 7, 8, 9] if rounds_up else [4, 5, 6])
    assert [e.seq for e in store.read("t1", 11)] == [12, 13, 14]
    assert [e.seq for e in store.read("t1", 12)] == [13, 14]
    assert store.read("t1", 14) == []
    entries = list(store.entries("t1", 1))
    assert [e.seq for e in entries] == list(range(2, 15))
    assert [e.event.message_id for e in entries[:4]] == [f"msg-0-{i}" for i in range(4)]
    assert entries[-1].event.status.state is S.COMPLETED
    assert list(store.entries("missing", 0)) == []


@pytest.mark.parametrize("kind", ["shelve", "sqlite", "redis", *SQL_STORES])
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


def test_a_read_entry_carries_the_stream_response_it_was_stored_as(store):
    """Stores that keep each event as JSON text (all but the memory store) hand the
    text out with the entry (a 1.0 stream sends it as it is) and tell a chunk by
    its first bytes, before any decoding; the text is the event's StreamResponse,
    as a stream writes it."""
    from a2a_flask.protocol.jsontext import stream_response_text

    create(store, "t1")
    working = TaskStatus(state=S.WORKING, message=Message(
        message_id="m1", role=Role.AGENT, parts=[Part(text="é ✓ \u2028 \"quoted\"")]))
    events = [TaskStatusUpdateEvent("t1", "ctx", working), chunk_event("t1", 0),
              user_turn("t1", "more"), chunk_event("t1", 1), status_event("t1", S.COMPLETED)]
    append(store, "t1", events)
    entries = list(store.read("t1", 1))
    texts = [entry.stream_response for entry in entries]
    chunks = [entry.chunk for entry in entries]  # asked before the events are decoded
    assert [entry.event for entry in entries] == events
    assert chunks == [False, True, False, True, False]
    if isinstance(store, MemoryStore):  # objects
        assert texts == [None] * len(events)
    else:
        assert [json.loads(text) for text in texts] == [
            json.loads(stream_response_text(event)) for event in events]


def test_tasks_have_separate_logs(store):
    create(store, "t1")
    create(store, "t2")
    append(store, "t1", [status_event("t1", S.WORKING)])
    assert [e.seq for e in store.read("t1", 0)] == [1, 2]
    assert [e.seq for e in store.read("t2", 0)] == [1]
    assert store.load("t2").state is S.SUBMITTED


# ================================================================ wait


def test_wait_returns_when_another_thread_appends(store):
    create(store, "t1")
    timer = threading.Timer(0.1, lambda: append(store, "t1", [status_event("t1", S.WORKING)]))
    timer.start()
    started = time.monotonic()
    store.wait("t1", 1, 5.0)
    elapsed = time.monotonic() - started
    timer.join()
    assert elapsed < 2.0
    assert store.load("t1").seq == 2


def test_wait_times_out_when_nothing_is_appended(store):
    create(store, "t1")
    started = time.monotonic()
    store.wait("t1", 1, 0.2)
    assert 0.15 <= time.monotonic() - started < 2.0


def test_wait_returns_at_once_when_the_log_is_already_further(store):
    create(store, "t1")
    append(store, "t1", [status_event("t1", S.WORKING)])
    started = time.monotonic()
    store.wait("t1", 1, 5.0)
    store.wait("missing", 0, 5.0)
    assert time.monotonic() - started < 1.0


def test_wait_does_not_block_on_a_terminal_task(store):
    create(store, "t1")
    append(store, "t1", [status_event("t1", S.COMPLETED)])
    started = time.monotonic()
    store.wait("t1", 2, 5.0)
    assert time.monotonic() - started < 4.0  # well before its 5 s


def test_every_waiter_wakes_for_one_append(store):
    create(store, "t1")
    woke: List[float] = []

    def waiter():
        store.wait("t1", 1, 5.0)
        woke.append(time.monotonic())

    threads = [threading.Thread(target=waiter) for _ in range(3)]
    for thread in threads:
        thread.start()
    time.sleep(0.1)
    appended = time.monotonic()
    append(store, "t1", [status_event("t1", S.WORKING)])
    for thread in threads:
        thread.join(5)
    assert len(woke) == 3
    assert all(t - appended < 4.0 for t in woke)  # woken, not timed out after 5 s


# ================================================================ list_tasks


def fill(store) -> None:
    """Five tasks, t0 oldest ... t4 newest, over two contexts and states."""
    for i in range(5):
        create(store, f"t{i}", S.COMPLETED if i % 2 else S.WORKING,
               context_id="even" if i % 2 == 0 else "odd", second=i * 10)


def test_list_tasks_orders_by_status_timestamp_descending(store):
    fill(store)
    page = store.list_tasks(TaskQuery())
    assert ids(page) == ["t4", "t3", "t2", "t1", "t0"]
    assert page.total_size == 5 and page.next_page_token == ""
    # An update moves a task to the front.
    append(store, "t0", [status_event("t0", S.COMPLETED, second=59)])
    assert ids(store.list_tasks(TaskQuery()))[0] == "t0"


def test_list_tasks_pages_are_disjoint_and_cover_everything(store):
    fill(store)
    seen: List[str] = []
    token = ""
    sizes = []
    for _ in range(10):
        page = store.list_tasks(TaskQuery(page_size=2, page_token=token))
        assert page.total_size == 5
        sizes.append(len(page.records))
        seen.extend(ids(page))
        token = page.next_page_token
        if not token:
            break
    assert sizes == [2, 2, 1]
    assert seen == ["t4", "t3", "t2", "t1", "t0"]


def test_list_tasks_paging_breaks_timestamp_ties_by_id(store):
    for name in ("a", "b", "c", "d"):
        create(store, name, second=5)
    first = store.list_tasks(TaskQuery(page_size=3))
    rest = store.list_tasks(TaskQuery(page_size=3, page_token=first.next_page_token))
    assert ids(first) + ids(rest) == ["d", "c", "b", "a"]
    assert rest.next_page_token == ""


def test_list_tasks_filters(store):
    fill(store)
    assert ids(store.list_tasks(TaskQuery(context_id="odd"))) == ["t3", "t1"]
    assert ids(store.list_tasks(TaskQuery(state=S.WORKING))) == ["t4", "t2", "t0"]
    assert ids(store.list_tasks(TaskQuery(context_id="even", state=S.WORKING, page_size=2))) == [
        "t4", "t2"]
    after = store.list_tasks(TaskQuery(updated_after=stamp(20)))  # at or after
    assert ids(after) == ["t4", "t3", "t2"] and after.total_size == 3
    assert store.list_tasks(TaskQuery(context_id="none")).total_size == 0


def test_list_tasks_only_shows_the_callers_tenant_and_owner(store):
    create(store, "mine", tenant="acme", owner="alice", second=1)
    create(store, "theirs", tenant="acme", owner="bob", second=2)
    create(store, "other", tenant="globex", owner="alice", second=3)
    create(store, "default", second=4)
    assert ids(store.list_tasks(TaskQuery(tenant="acme", owner="alice"))) == ["mine"]
    assert ids(store.list_tasks(TaskQuery(tenant="acme", owner="bob"))) == ["theirs"]
    assert ids(store.list_tasks(TaskQuery())) == ["default"]


#: Callers whose tenant and owner, joined with ":", make one string: a store keying
#: its index that way would show each the others' tasks (issue 35).
NESTING_CALLERS = [
    [(":github", "alice"), ("", "github:alice")],
    [("a:b", "c"), ("a", "b:c")],
    [("x:", ""), ("x", ":")],
]


@pytest.mark.parametrize("callers", NESTING_CALLERS, ids=["github", "a-b-c", "x"])
def test_list_tasks_keeps_callers_apart_whose_tenant_and_owner_nest(store, callers):
    assert len({f"{tenant}:{owner}" for tenant, owner in callers}) == 1  # they do nest
    for n, (tenant, owner) in enumerate(callers):
        create(store, f"task-{n}", tenant=tenant, owner=owner, second=n)
    for n, (tenant, owner) in enumerate(callers):
        page = store.list_tasks(TaskQuery(tenant=tenant, owner=owner))
        assert (ids(page), page.total_size) == ([f"task-{n}"], 1), (tenant, owner)
        assert (page.records[0].tenant, page.records[0].owner) == (tenant, owner)


def test_list_tasks_keeps_callers_apart_that_differ_in_trailing_spaces(store):
    """MariaDB's binary collation ignores trailing spaces when it compares."""
    callers = [("acme", "alice"), ("acme ", "alice"), ("acme", "alice "), ("", " ")]
    for n, (tenant, owner) in enumerate(callers):
        create(store, f"task-{n}", tenant=tenant, owner=owner, second=n)
    create(store, "anonymous", second=9)
    for n, (tenant, owner) in enumerate(callers):
        page = store.list_tasks(TaskQuery(tenant=tenant, owner=owner))
        assert (ids(page), page.total_size) == ([f"task-{n}"], 1), (tenant, owner)


def test_an_id_used_again_by_another_caller_lists_for_the_new_owner_only(store):
    """A 0.1 client chooses its task ids: once a finished task is purged, another
    caller may create a task with its id."""
    create(store, "reused", tenant="acme", owner="alice", second=1)
    append(store, "reused", [status_event("reused", S.COMPLETED, second=2)])
    assert store.purge(stamp(30)) == 1
    create(store, "reused", tenant="acme", owner="bob", second=40)
    alices = store.list_tasks(TaskQuery(tenant="acme", owner="alice"))
    assert (ids(alices), alices.total_size) == ([], 0)
    bobs = store.list_tasks(TaskQuery(tenant="acme", owner="bob"))
    assert (ids(bobs), bobs.total_size) == (["reused"], 1)
    assert bobs.records[0].owner == "bob"


def test_list_tasks_rejects_a_token_it_did_not_issue(store):
    fill(store)
    for token in ("garbage!", "bm90IGpzb24", "WzFd"):  # not base64, "not json", "[1]"
        with pytest.raises(InvalidParamsError):
            store.list_tasks(TaskQuery(page_token=token))


def test_list_tasks_rejects_a_json_object_token(store):
    fill(store)
    token = base64.urlsafe_b64encode(json.dumps({"t4": "x", "t3": "y"}).encode()).decode()
    with pytest.raises(InvalidParamsError):
        store.list_tasks(TaskQuery(page_token=token.rstrip("=")))


# ================================================================ push configs


def config(config_id: str, url: str = "https://example.com/hook", **extra) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(url=url, id=config_id, task_id="t1", **extra)


def target(config_id: str, url: str = "https://example.com/hook", dialect: str = "1.0",
           **extra) -> PushTarget:
    return PushTarget(config(config_id, url, **extra), dialect=dialect, owner="alice")


def configs_of(store, task_id: str):
    return [t.config for t in store.push_targets(task_id)]


def test_push_target_crud(store):
    create(store, "t1")
    create(store, "t2")
    assert store.push_targets("t1") == []
    secret = target("a", token="tok", authentication=AuthenticationInfo("Bearer", "cred"))
    store.put_push_target("t1", secret)
    store.put_push_target("t1", target("b", dialect="0.1"))
    store.put_push_target("t2", target("c"))
    assert [c.id for c in configs_of(store, "t1")] == ["a", "b"]
    assert store.push_targets("t1")[0] == secret  # stored as given, secrets included
    assert [(t.dialect, t.owner) for t in store.push_targets("t1")] == [
        ("1.0", "alice"), ("0.1", "alice")]
    store.put_push_target("t1", target("a", url="https://example.com/new"))
    assert [(c.id, c.url) for c in configs_of(store, "t1")] == [
        ("a", "https://example.com/new"), ("b", "https://example.com/hook")]
    store.delete_push_config("t1", "a")
    store.delete_push_config("t1", "a")  # deleting twice is fine
    store.delete_push_config("t1", "never-there")
    store.delete_push_config("missing-task", "x")
    assert [c.id for c in configs_of(store, "t1")] == ["b"]
    assert [c.id for c in configs_of(store, "t2")] == ["c"]


def test_push_progress_and_backlog(store):
    create(store, "t1")  # seq 1
    create(store, "t2")
    assert store.push_backlog() == []
    store.put_push_target("t1", target("a"))  # delivered_seq 0 < 1: behind
    store.put_push_target("t2", dataclasses.replace(target("b"), delivered_seq=1))
    assert store.push_backlog() == ["t1"]
    store.record_push_progress("t1", "a", 1, 0, False)
    assert store.push_backlog() == []
    append(store, "t2", [status_event("t2", S.WORKING)])
    assert store.push_backlog() == ["t2"]
    store.record_push_progress("t2", "b", 1, 3, False)
    assert (store.push_targets("t2")[0].failures, store.push_targets("t2")[0].gave_up) == (3, False)
    store.record_push_progress("t2", "b", 1, 8, True)  # given up: no longer a backlog
    assert store.push_targets("t2")[0].gave_up and store.push_backlog() == []
    store.put_push_target("t2", target("b"))  # registering again starts afresh
    assert store.push_targets("t2")[0] == target("b") and store.push_backlog() == ["t2"]
    store.delete_push_config("t2", "b")
    store.record_push_progress("t2", "b", 2, 0, False)  # a deleted webhook stays deleted
    assert store.push_targets("t2") == [] and store.push_backlog() == []


def test_ids_holding_the_key_separator_stay_apart(store):
    """Task, webhook and claim ids may hold ":" (ids are only checked for length and
    control characters): a key made of a fixed word and one id still names one thing."""
    for task_id in ("a", "a:b", "log:a"):
        create(store, task_id)
    append(store, "a:b", [status_event("a:b", S.WORKING)])
    assert [store.load(t).seq for t in ("a", "a:b", "log:a")] == [1, 2, 1]
    assert [e.seq for e in store.read("a", 0)] == [1]
    for config_id in ("c", "c:c", "d:c"):
        store.put_push_target("a:b", target(config_id))
    store.put_push_target("a", target("b:c"))
    store.record_push_progress("a:b", "d:c", 2, 0, False)
    assert [t.config.id for t in store.push_targets("a:b")] == ["c", "c:c", "d:c"]
    assert [t.delivered_seq for t in store.push_targets("a:b")] == [0, 0, 2]
    assert [t.config.id for t in store.push_targets("a")] == ["b:c"]
    assert sorted(store.push_backlog()) == ["a", "a:b"]
    store.delete_push_config("a:b", "c")
    assert [t.config.id for t in store.push_targets("a:b")] == ["c:c", "d:c"]
    assert store.claim("push:a", "worker-a", 5.0)
    assert store.claim("push:a:b", "worker-b", 5.0)
    assert not store.claim("push:a", "worker-b", 5.0)


def test_redis_sweeps_only_tasks_that_may_still_owe_a_push(tmp_path):
    """A finished task whose webhooks had everything leaves the set the sweep reads:
    the sweep's cost follows the tasks in flight, not every task ever pushed."""
    store = open_store("redis", str(tmp_path / "tasks"))
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


def test_claims(store):
    assert store.claim("push:t1", "worker-a", 5.0)
    assert store.claim("push:t1", "worker-a", 5.0)  # renewing our own
    assert not store.claim("push:t1", "worker-b", 5.0)
    assert store.claim("push:t2", "worker-b", 5.0)  # other keys are free
    store.release_claim("push:t1", "worker-b")  # not the holder: nothing happens
    assert not store.claim("push:t1", "worker-b", 5.0)
    store.release_claim("push:t1", "worker-a")
    assert store.claim("push:t1", "worker-b", 0.1)
    time.sleep(0.3)
    assert store.claim("push:t1", "worker-a", 5.0)  # an expired claim is free


# ================================================================ leases and retention


def expires(store, task_ids: List[str]) -> None:
    """Wait until exactly ``task_ids`` have expired leases (their time is short)."""
    wait_until(lambda: store.expired_leases() == task_ids, 15,
               f"the leases of {task_ids} to expire")


def test_lease_lifecycle(store):
    create(store, "t1")
    create(store, "t2")
    store.acquire_lease("t1", "worker-a", 60.0)
    assert store.expired_leases() == []  # a fresh lease is live
    store.acquire_lease("t2", "worker-a", 0.1)
    expires(store, ["t2"])  # and expires when its time is up
    store.renew_leases("worker-a", ["t2"], 60.0)
    assert store.expired_leases() == []  # renewed, even once expired
    store.release_lease("t1", "worker-b")  # not the holder: nothing happens
    store.renew_leases("worker-a", ["t1"], 0.05)
    expires(store, ["t1"])  # still there, so it expires
    store.release_lease("t1", "worker-a")
    assert store.expired_leases() == []


def test_renewal_by_another_owner_does_not_extend_a_lease(store):
    create(store, "t1")
    store.acquire_lease("t1", "worker-a", 0.1)
    store.renew_leases("worker-b", ["t1"], 10.0)
    time.sleep(0.3)
    assert store.expired_leases() == ["t1"]
    store.release_lease("t1", None)  # the reaper drops it whoever held it
    assert store.expired_leases() == []


def test_purge_deletes_only_old_terminal_tasks(store):
    create(store, "old-done", second=1)
    append(store, "old-done", [status_event("old-done", S.COMPLETED, second=2)])
    store.put_push_target("old-done", target("c"))
    create(store, "old-running", second=1)
    append(store, "old-running", [status_event("old-running", S.WORKING, second=2)])
    create(store, "new-done", second=1)
    append(store, "new-done", [status_event("new-done", S.COMPLETED, second=40)])
    assert store.purge(stamp(30)) == 1
    assert store.load("old-done") is None
    assert store.read("old-done", 0) == []
    assert store.push_targets("old-done") == []
    assert store.load("old-running") is not None and store.load("new-done") is not None
    assert sorted(ids(store.list_tasks(TaskQuery()))) == ["new-done", "old-running"]


def test_task_ids_names_every_task_of_every_caller_once(store):
    assert store.task_ids() == []
    create(store, "a", tenant="t1", owner="alice")
    create(store, "b", tenant="", owner="bob")
    create(store, "c:with:colons")
    append(store, "c:with:colons", [status_event("c:with:colons", S.COMPLETED, second=2)])
    assert sorted(store.task_ids()) == ["a", "b", "c:with:colons"]
    store.purge(stamp(30))
    assert sorted(store.task_ids()) == ["a", "b"]


# ================================================================ long streams


def chunk_event(task_id: str, index: int) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(task_id, "ctx", Artifact("a1", [Part(text=f"c{index}")]),
                                   append=index > 0, last_chunk=False)


def stored_snapshot_seq(store, task_id: str) -> int:
    """The last event the stored snapshot of a lazy store includes."""
    if isinstance(store, SQLiteStore):
        return store._query("SELECT snap_seq FROM tasks WHERE id=?", (task_id,))[0][0]
    if isinstance(store, ShelveStore):
        return store._read(lambda: store._tasks[task_id].snap_seq)
    return int(store._redis.hget(store._key("task", task_id), "snap_seq"))


def test_a_long_stream_of_chunks_loads_whole_at_every_point(store):
    record = create(store, "t1")
    expected = record.task
    seq = 1
    events = [status_event("t1", S.WORKING)] + [chunk_event("t1", i) for i in range(150)]
    events.append(status_event("t1", S.COMPLETED, 2))
    for index, event in enumerate(events):
        expected = apply_event(expected, event)
        record = record.after([event])  # folds its chunks only if the store reads its task
        seq = store.append("t1", seq, [event], record)
        if index % 37 == 0 or index == len(events) - 1:
            loaded = store.load("t1")
            assert (loaded.task, loaded.seq) == (expected, seq)
            assert store.head("t1") == (seq, expected.status.state)
            assert store.list_tasks(TaskQuery()).records[0].task == expected
    assert [p.text for p in store.load("t1").task.artifacts[0].parts] == [
        f"c{i}" for i in range(150)]
    assert record.task == expected
    assert store.head("missing") is None


@pytest.mark.parametrize("kind", ["shelve", "sqlite", "redis"])
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


def test_a_task_stored_before_lazy_snapshots_still_loads_and_appends(tmp_path):
    store = open_store("redis", str(tmp_path / "tasks"))
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
        store = open_store("redis", str(tmp_path / "tasks"))
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


@pytest.mark.parametrize("kind", SHARED_STORES)
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


@pytest.mark.parametrize("kind", SHARED_STORES)
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
        assert time.monotonic() - started < 2.0
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


@pytest.mark.parametrize("kind", SHARED_STORES)
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


@pytest.mark.parametrize("kind", SHARED_STORES)
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
