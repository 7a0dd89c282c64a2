"""The store contract as a pytest suite: run it on a store to know it does what
the engine needs of one (:class:`~a2a_flask.stores.TaskStore`).

A store's tests subclass :class:`StoreContract` and give it one fixture,
``store_factory``: a callable that opens a fresh, empty store (each test calls
it once and closes what it returns)::

    import pytest
    from a2a_flask.testing.store_contract import StoreContract

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store_factory(self, tmp_path):
            return lambda: MyStore(tmp_path / "tasks")

Every ``test_`` method of the class then runs on that store.  The tests take a
few seconds between them: several wait for a lease or a claim to expire, or
for a waiter to time out.  This module needs pytest; nothing else in
``a2a_flask`` imports it (the package does not need pytest to run).
"""
from __future__ import annotations

import base64
import dataclasses
import json
import os
import threading
import time
from typing import Any, Callable, Iterator, List, Optional

import pytest

from ..protocol.errors import InvalidParamsError
from ..protocol.events import Event, apply_event
from ..protocol.jsontext import stream_response_text
from ..protocol.models import (
    Artifact,
    AuthenticationInfo,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from ..stores.base import (OnceClaim, PushTarget, SequenceConflict, TaskPage, TaskQuery,
                           TaskRecord, TaskStore, scoped, unscoped)

__all__ = ["StoreContract", "StoreFactory"]

S = TaskState

#: What the ``store_factory`` fixture gives: a callable that opens a fresh, empty store.
StoreFactory = Callable[[], TaskStore]


# ----------------------------------------------------------------- helpers


def stamp(second: int) -> str:
    return f"2025-01-01T00:00:{second:02d}.000Z"


def make_task(task_id: str, state: TaskState = S.SUBMITTED, *, context_id: str = "ctx",
              second: int = 0) -> Task:
    first = Message(message_id=f"{task_id}-m0", role=Role.USER, parts=[Part(text="hi")],
                    task_id=task_id, context_id=context_id)
    return Task(id=task_id, context_id=context_id,
                status=TaskStatus(state=state, timestamp=stamp(second)), history=[first])


def create(store: TaskStore, task_id: str, state: TaskState = S.SUBMITTED, *, context_id: str = "ctx",
           second: int = 0, tenant: str = "", owner: str = "") -> TaskRecord:
    task = make_task(task_id, state, context_id=context_id, second=second)
    record = TaskRecord(task, 1, tenant, owner, "1.0", stamp(second))
    store.create(record, task)
    return record


def claimed(store: TaskStore, task_id: str, key: str, lease_owner: Optional[str],
            ttl: float = 30.0) -> str:
    """:meth:`~TaskStore.create_claimed` of a new SUBMITTED task, bound as ``fp 0 <id>``."""
    task = make_task(task_id)
    return store.create_claimed(TaskRecord(task, 1, "", "", "1.0", stamp(0)), task,
                                OnceClaim(key, f"fp 0 {task_id}", ttl), lease_owner, 60.0)


def must_load(store: TaskStore, task_id: str) -> TaskRecord:
    """The task's record, which must be there."""
    record = store.load(task_id)
    assert record is not None, f"task {task_id!r} is missing"
    return record


def user_turn(task_id: str, text: str) -> Message:
    return Message(message_id=f"msg-{text}", role=Role.USER, parts=[Part(text=text)],
                   task_id=task_id, context_id="ctx")


def status_event(task_id: str, state: TaskState, second: int = 1) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id, "ctx", TaskStatus(state=state, timestamp=stamp(second)))


def append(store: TaskStore, task_id: str, events: List[Event]) -> int:
    """Append after the current sequence number, with the record the events produce."""
    record = store.load(task_id)
    assert record is not None, f"no task {task_id!r} to append to"
    return store.append(task_id, record.seq, events, record.after(events))


def ids(page: TaskPage) -> List[str]:
    return [r.task.id for r in page.records]


def fill(store: TaskStore) -> None:
    """Five tasks, t0 oldest ... t4 newest, over two contexts and states."""
    for i in range(5):
        create(store, f"t{i}", S.COMPLETED if i % 2 else S.WORKING,
               context_id="even" if i % 2 == 0 else "odd", second=i * 10)


def config(config_id: str, url: str = "https://example.com/hook",
           **extra: Any) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(url=url, id=config_id, task_id="t1", **extra)


def target(config_id: str, url: str = "https://example.com/hook", dialect: str = "1.0",
           **extra: Any) -> PushTarget:
    return PushTarget(config(config_id, url, **extra), dialect=dialect, owner="alice")


def configs_of(store: TaskStore, task_id: str) -> List[TaskPushNotificationConfig]:
    return [t.config for t in store.push_targets(task_id)]


def chunk_event(task_id: str, index: int) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(task_id, "ctx", Artifact("a1", [Part(text=f"c{index}")]),
                                   append=index > 0, last_chunk=False)


def expires(store: TaskStore, task_ids: List[str]) -> None:
    """Wait until exactly ``task_ids`` have expired leases (their time is short)."""
    wait_until(lambda: store.expired_leases() == task_ids, 15,
               f"the leases of {task_ids} to expire")


#: Callers whose tenant and owner, joined with ":", make one string: a store keying
#: its index that way would show each the others' tasks.
NESTING_CALLERS = [
    [(":github", "alice"), ("", "github:alice")],
    [("a:b", "c"), ("a", "b:c")],
    [("x:", ""), ("x", ":")],
]


def wait_until(check: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``check`` until it is true; fail naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


class StoreContract:
    """The tests every store passes (see the module docstring): subclass it with a
    ``store_factory`` fixture."""

    @pytest.fixture
    def store(self, store_factory: StoreFactory) -> Iterator[TaskStore]:
        """A fresh store from ``store_factory``, closed after the test."""
        made = store_factory()
        yield made
        made.close()

    # ============================================================ tasks and logs

    def test_create_then_load_returns_the_record(self, store: TaskStore) -> None:
        record = create(store, "t1", tenant="acme", owner="alice")
        loaded = must_load(store, "t1")
        assert loaded.task == record.task
        assert (loaded.seq, loaded.tenant, loaded.owner, loaded.dialect) == (1, "acme", "alice", "1.0")
        assert loaded.created_at == stamp(0)
        assert loaded.state is S.SUBMITTED
        assert store.load("missing") is None

    def test_create_refuses_an_existing_task(self, store: TaskStore) -> None:
        create(store, "t1")
        with pytest.raises(SequenceConflict):
            store.create(TaskRecord(make_task("t1", S.WORKING), 1), make_task("t1", S.WORKING))
        assert must_load(store, "t1").state is S.SUBMITTED
        assert len(store.read("t1", 0)) == 1

    def test_append_stores_events_and_snapshot_together(self, store: TaskStore) -> None:
        create(store, "t1")
        seq = append(store, "t1", [user_turn("t1", "a"), status_event("t1", S.WORKING)])
        assert seq == 3
        record = must_load(store, "t1")
        assert record.seq == 3 and record.state is S.WORKING
        assert [m.message_id for m in record.task.history] == ["t1-m0", "msg-a"]
        assert append(store, "t1", [status_event("t1", S.COMPLETED, 2)]) == 4
        assert must_load(store, "t1").state is S.COMPLETED

    def test_append_keeps_what_the_record_knows_about_the_task(self, store: TaskStore) -> None:
        create(store, "t1", tenant="acme", owner="alice")
        append(store, "t1", [status_event("t1", S.WORKING)])
        record = must_load(store, "t1")
        assert (record.tenant, record.owner, record.dialect, record.created_at) == (
            "acme", "alice", "1.0", stamp(0))

    def test_append_with_a_stale_sequence_number_is_a_conflict(self, store: TaskStore) -> None:
        create(store, "t1")
        stale = must_load(store, "t1")
        append(store, "t1", [status_event("t1", S.WORKING)])
        with pytest.raises(SequenceConflict):
            store.append("t1", stale.seq, [status_event("t1", S.FAILED)],
                         stale.after([status_event("t1", S.FAILED)]))
        with pytest.raises(SequenceConflict):  # ahead of the log is no better
            store.append("t1", 7, [status_event("t1", S.FAILED)],
                         dataclasses.replace(stale, seq=8))
        record = must_load(store, "t1")
        assert record.seq == 2 and record.state is S.WORKING
        assert [e.seq for e in store.read("t1", 0)] == [1, 2]

    def test_create_with_events_is_create_then_append(self, store: TaskStore) -> None:
        task = make_task("t1", context_id="ctx")
        record = TaskRecord(task, 1, "acme", "alice", "1.0", stamp(0))
        events: List[Event] = [status_event("t1", S.WORKING), user_turn("t1", "a")]
        after = record.after(events)
        assert store.create_with(record, task, events, after) == 3
        loaded = must_load(store, "t1")
        assert (loaded.seq, loaded.state, loaded.tenant, loaded.owner) == (
            3, S.WORKING, "acme", "alice")
        assert loaded.task == after.task
        assert [entry.seq for entry in store.read("t1", 0)] == [1, 2, 3]
        assert append(store, "t1", [status_event("t1", S.COMPLETED, 2)]) == 4
        assert [r.task.id for r in store.list_tasks(
            TaskQuery(tenant="acme", owner="alice", state=S.COMPLETED)).records] == ["t1"]
        with pytest.raises(SequenceConflict):
            store.create_with(record, task, events, after)

    def test_a_finishing_create_or_append_releases_its_runners_lease(
            self, store: TaskStore) -> None:
        task = make_task("t1")
        record = TaskRecord(task, 1)
        done: List[Event] = [status_event("t1", S.COMPLETED)]
        store.acquire_lease("t1", "worker-a", 0.1)
        store.create_with(record, task, done, record.after(done), release_owner="worker-a")
        create(store, "t2")
        store.acquire_lease("t2", "worker-a", 0.1)
        finished: List[Event] = [status_event("t2", S.COMPLETED)]
        record2 = must_load(store, "t2")
        assert store.append_released("t2", 1, finished, record2.after(finished),
                                     "worker-a") == 2
        assert must_load(store, "t2").state is S.COMPLETED
        time.sleep(0.2)
        assert store.expired_leases() == []  # released, not expired
        store.release_lease("t2", "worker-a")  # the runner's own release after: harmless
        assert store.expired_leases() == []

    def test_read_returns_entries_after_a_sequence_number(self, store: TaskStore) -> None:
        first = create(store, "t1")
        append(store, "t1", [user_turn("t1", "a")])
        append(store, "t1", [status_event("t1", S.WORKING), status_event("t1", S.COMPLETED, 2)])
        entries = store.read("t1", 0)
        assert [e.seq for e in entries] == [1, 2, 3, 4]
        assert entries[0].event == first.task
        assert isinstance(entries[1].event, Message) and entries[1].event.message_id == "msg-a"
        assert [e.event for e in entries[2:]] == [status_event("t1", S.WORKING),
                                                 status_event("t1", S.COMPLETED, 2)]
        assert [e.seq for e in store.read("t1", 2)] == [3, 4]
        assert store.read("t1", 4) == []
        assert store.read("missing", 0) == []

    def test_read_returns_a_long_log_in_slices(self, store: TaskStore) -> None:
        store.read_slice = 3
        create(store, "t1")
        for batch in range(3):  # four events an append: the slices cut across appends
            append(store, "t1", [user_turn("t1", f"{batch}-{i}") for i in range(4)])
        append(store, "t1", [status_event("t1", S.COMPLETED)])
        # The first read_slice entries, or a few more to the end of a record the store
        # keeps whole (here, an append of four): never fewer, never a gap.
        for after, whole in ((0, [1, 2, 3, 4, 5]), (3, [4, 5, 6, 7, 8, 9])):
            got = [e.seq for e in store.read("t1", after)]
            assert got == whole[:len(got)] and len(got) >= 3, (after, got)
        assert [e.seq for e in store.read("t1", 11)] == [12, 13, 14]
        assert [e.seq for e in store.read("t1", 12)] == [13, 14]
        assert store.read("t1", 14) == []
        entries = list(store.entries("t1", 1))
        assert [e.seq for e in entries] == list(range(2, 15))
        assert [e.event for e in entries[:4]] == [user_turn("t1", f"0-{i}") for i in range(4)]
        assert entries[-1].event == status_event("t1", S.COMPLETED)
        assert list(store.entries("missing", 0)) == []

    def test_a_read_entry_carries_the_stream_response_it_was_stored_as(self, store: TaskStore) -> None:
        """Stores that keep each event as JSON text (all but the memory store) hand the
        text out with the entry (a 1.0 stream sends it as it is) and tell a chunk by
        its first bytes, before any decoding; the text is the event's StreamResponse,
        as a stream writes it."""
        create(store, "t1")
        working = TaskStatus(state=S.WORKING, message=Message(
            message_id="m1", role=Role.AGENT, parts=[Part(text="é ✓ \u2028 \"quoted\"")]))
        events: List[Event] = [TaskStatusUpdateEvent("t1", "ctx", working), chunk_event("t1", 0),
                               user_turn("t1", "more"), chunk_event("t1", 1),
                               status_event("t1", S.COMPLETED)]
        append(store, "t1", events)
        entries = list(store.read("t1", 1))
        texts = [entry.stream_response for entry in entries]
        chunks = [entry.chunk for entry in entries]  # asked before the events are decoded
        assert [entry.event for entry in entries] == events
        assert chunks == [False, True, False, True, False]
        # A store that keeps objects has no text to hand out (None), and one that keeps
        # text has it for every entry.
        assert texts == [None] * len(events) or [json.loads(text or "") for text in texts] == [
            json.loads(stream_response_text(event)) for event in events]

    def test_tasks_have_separate_logs(self, store: TaskStore) -> None:
        create(store, "t1")
        create(store, "t2")
        append(store, "t1", [status_event("t1", S.WORKING)])
        assert [e.seq for e in store.read("t1", 0)] == [1, 2]
        assert [e.seq for e in store.read("t2", 0)] == [1]
        assert must_load(store, "t2").state is S.SUBMITTED

    # ============================================================ wait

    def test_wait_returns_when_another_thread_appends(self, store: TaskStore) -> None:
        create(store, "t1")
        timer = threading.Timer(0.1, lambda: append(store, "t1", [status_event("t1", S.WORKING)]))
        timer.start()
        started = time.monotonic()
        store.wait("t1", 1, 5.0)
        elapsed = time.monotonic() - started
        timer.join()
        assert elapsed < 2.0
        assert must_load(store, "t1").seq == 2

    def test_wait_times_out_when_nothing_is_appended(self, store: TaskStore) -> None:
        create(store, "t1")
        started = time.monotonic()
        store.wait("t1", 1, 0.2)
        assert 0.15 <= time.monotonic() - started < 2.0

    def test_wait_returns_at_once_when_the_log_is_already_further(self, store: TaskStore) -> None:
        create(store, "t1")
        append(store, "t1", [status_event("t1", S.WORKING)])
        started = time.monotonic()
        store.wait("t1", 1, 5.0)
        store.wait("missing", 0, 5.0)
        assert time.monotonic() - started < 1.0

    def test_wait_does_not_block_on_a_terminal_task(self, store: TaskStore) -> None:
        create(store, "t1")
        append(store, "t1", [status_event("t1", S.COMPLETED)])
        started = time.monotonic()
        store.wait("t1", 2, 5.0)
        assert time.monotonic() - started < 4.0  # well before its 5 s

    def test_every_waiter_wakes_for_one_append(self, store: TaskStore) -> None:
        create(store, "t1")
        woke: List[float] = []

        def waiter() -> None:
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

    # ============================================================ list_tasks

    def test_list_tasks_orders_by_status_timestamp_descending(self, store: TaskStore) -> None:
        fill(store)
        page = store.list_tasks(TaskQuery())
        assert ids(page) == ["t4", "t3", "t2", "t1", "t0"]
        assert page.total_size == 5 and page.next_page_token == ""
        # An update moves a task to the front.
        append(store, "t0", [status_event("t0", S.COMPLETED, second=59)])
        assert ids(store.list_tasks(TaskQuery()))[0] == "t0"

    def test_list_tasks_pages_are_disjoint_and_cover_everything(self, store: TaskStore) -> None:
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

    def test_list_tasks_paging_breaks_timestamp_ties_by_id(self, store: TaskStore) -> None:
        for name in ("a", "b", "c", "d"):
            create(store, name, second=5)
        first = store.list_tasks(TaskQuery(page_size=3))
        rest = store.list_tasks(TaskQuery(page_size=3, page_token=first.next_page_token))
        assert ids(first) + ids(rest) == ["d", "c", "b", "a"]
        assert rest.next_page_token == ""

    def test_list_tasks_filters(self, store: TaskStore) -> None:
        fill(store)
        assert ids(store.list_tasks(TaskQuery(context_id="odd"))) == ["t3", "t1"]
        assert ids(store.list_tasks(TaskQuery(state=S.WORKING))) == ["t4", "t2", "t0"]
        assert ids(store.list_tasks(TaskQuery(context_id="even", state=S.WORKING, page_size=2))) == [
            "t4", "t2"]
        after = store.list_tasks(TaskQuery(updated_after=stamp(20)))  # at or after
        assert ids(after) == ["t4", "t3", "t2"] and after.total_size == 3
        assert store.list_tasks(TaskQuery(context_id="none")).total_size == 0

    def test_list_tasks_only_shows_the_callers_tenant_and_owner(self, store: TaskStore) -> None:
        create(store, "mine", tenant="acme", owner="alice", second=1)
        create(store, "theirs", tenant="acme", owner="bob", second=2)
        create(store, "other", tenant="globex", owner="alice", second=3)
        create(store, "default", second=4)
        assert ids(store.list_tasks(TaskQuery(tenant="acme", owner="alice"))) == ["mine"]
        assert ids(store.list_tasks(TaskQuery(tenant="acme", owner="bob"))) == ["theirs"]
        assert ids(store.list_tasks(TaskQuery())) == ["default"]

    @pytest.mark.parametrize("callers", NESTING_CALLERS, ids=["github", "a-b-c", "x"])
    def test_list_tasks_keeps_callers_apart_whose_tenant_and_owner_nest(self, store: TaskStore, callers: Any) -> None:
        assert len({f"{tenant}:{owner}" for tenant, owner in callers}) == 1  # they do nest
        for n, (tenant, owner) in enumerate(callers):
            create(store, f"task-{n}", tenant=tenant, owner=owner, second=n)
        for n, (tenant, owner) in enumerate(callers):
            page = store.list_tasks(TaskQuery(tenant=tenant, owner=owner))
            assert (ids(page), page.total_size) == ([f"task-{n}"], 1), (tenant, owner)
            assert (page.records[0].tenant, page.records[0].owner) == (tenant, owner)

    def test_list_tasks_keeps_agents_apart_by_their_store_scope(self, store: TaskStore) -> None:
        """Agents sharing a store store their tasks under their scope and the caller's
        tenant (:func:`~a2a_flask.stores.base.scoped`): each lists its own, and a task
        stored before scopes existed (the default agent's, no scope) stays where it was."""
        callers = [("", "", "alice"), ("x", "", "alice"), ("y", "", "alice"),
                   ("x", "acme", "alice"), ("", "acme", "alice"), ("x", "acme", "")]
        for n, (scope, tenant, owner) in enumerate(callers):
            create(store, f"task-{n}", tenant=scoped(scope, tenant), owner=owner, second=n)
        for n, (scope, tenant, owner) in enumerate(callers):
            page = store.list_tasks(TaskQuery(tenant=scoped(scope, tenant), owner=owner))
            assert (ids(page), page.total_size) == ([f"task-{n}"], 1), (scope, tenant, owner)
            loaded = store.load(f"task-{n}")
            assert loaded is not None and unscoped(loaded.tenant) == (scope, tenant)
        assert store.list_tasks(TaskQuery(tenant=scoped("z", ""), owner="alice")).total_size == 0

    def test_list_tasks_keeps_callers_apart_that_differ_in_trailing_spaces(self, store: TaskStore) -> None:
        """MariaDB's binary collation ignores trailing spaces when it compares."""
        callers = [("acme", "alice"), ("acme ", "alice"), ("acme", "alice "), ("", " ")]
        for n, (tenant, owner) in enumerate(callers):
            create(store, f"task-{n}", tenant=tenant, owner=owner, second=n)
        create(store, "anonymous", second=9)
        for n, (tenant, owner) in enumerate(callers):
            page = store.list_tasks(TaskQuery(tenant=tenant, owner=owner))
            assert (ids(page), page.total_size) == ([f"task-{n}"], 1), (tenant, owner)

    def test_an_id_used_again_by_another_caller_lists_for_the_new_owner_only(self, store: TaskStore) -> None:
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

    def test_list_tasks_rejects_a_token_it_did_not_issue(self, store: TaskStore) -> None:
        fill(store)
        for token in ("garbage!", "bm90IGpzb24", "WzFd"):  # not base64, "not json", "[1]"
            with pytest.raises(InvalidParamsError):
                store.list_tasks(TaskQuery(page_token=token))

    def test_list_tasks_rejects_a_json_object_token(self, store: TaskStore) -> None:
        fill(store)
        token = base64.urlsafe_b64encode(json.dumps({"t4": "x", "t3": "y"}).encode()).decode()
        with pytest.raises(InvalidParamsError):
            store.list_tasks(TaskQuery(page_token=token.rstrip("=")))

    # ============================================================ push targets

    def test_push_target_crud(self, store: TaskStore) -> None:
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

    def test_push_progress_and_backlog(self, store: TaskStore) -> None:
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

    def test_ids_holding_the_key_separator_stay_apart(self, store: TaskStore) -> None:
        """Task, webhook and claim ids may hold ":" (ids are only checked for length and
        control characters): a key made of a fixed word and one id still names one thing."""
        for task_id in ("a", "a:b", "log:a"):
            create(store, task_id)
        append(store, "a:b", [status_event("a:b", S.WORKING)])
        assert [must_load(store, t).seq for t in ("a", "a:b", "log:a")] == [1, 2, 1]
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

    # ============================================================ claims

    def test_claims(self, store: TaskStore) -> None:
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

    def test_claim_once_binds_a_key_to_its_first_value(self, store: TaskStore) -> None:
        assert store.claim_once("idem:k1", "fp task-a", 5.0) == "fp task-a"
        assert store.claim_once("idem:k1", "fp task-b", 5.0) == "fp task-a"  # the first's
        assert store.claim_once("idem:k1", "fp task-a", 5.0) == "fp task-a"
        assert store.claim_once("idem:k2", "fp task-b", 5.0) == "fp task-b"  # other keys free
        store.release_claim("idem:k1", "fp task-b")  # not its value: nothing happens
        assert store.claim_once("idem:k1", "fp task-c", 5.0) == "fp task-a"
        store.release_claim("idem:k1", "fp task-a")  # a send that failed lets it go
        assert store.claim_once("idem:k1", "fp task-c", 0.1) == "fp task-c"
        time.sleep(0.3)
        assert store.claim_once("idem:k1", "fp task-d", 5.0) == "fp task-d"  # expired: free

    def test_claim_once_from_many_threads_binds_one_value(self, store: TaskStore) -> None:
        bound: List[str] = []

        def bind(index: int) -> None:
            bound.append(store.claim_once("idem:crowd", f"fp task-{index}", 30.0))

        threads = [threading.Thread(target=bind, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(bound) == 8 and len(set(bound)) == 1, bound

    def test_purge_keeps_keys_that_have_not_expired(self, store: TaskStore) -> None:
        store.claim_once("idem:live", "fp task-a", 60.0)
        store.claim_once("idem:gone", "fp task-b", 0.05)
        time.sleep(0.2)
        store.purge(stamp(30))
        assert store.claim_once("idem:live", "fp task-c", 60.0) == "fp task-a"
        assert store.claim_once("idem:gone", "fp task-c", 60.0) == "fp task-c"

    def test_create_claimed_binds_the_key_with_the_task_and_its_lease(
            self, store: TaskStore) -> None:
        """An idempotent send's acceptance: the binding, the task and its lease, all or
        nothing; a key bound already makes nothing and answers its value."""
        first = claimed(store, "t1", "idem:k1", "worker-a")
        assert first == "fp 0 t1" and must_load(store, "t1").state is S.SUBMITTED
        assert store.acquire_lease("t1", "worker-b", 60.0) is False  # worker-a's
        assert store.claim_once("idem:k1", "fp 0 other", 5.0) == first
        assert claimed(store, "t2", "idem:k1", "worker-b") == first  # a retry
        assert store.head("t2") is None
        with pytest.raises(SequenceConflict):  # the task exists: the binding goes too
            claimed(store, "t1", "idem:k2", "worker-a")
        assert store.claim_once("idem:k2", "fp 0 free", 5.0) == "fp 0 free"
        assert claimed(store, "t3", "idem:k3", None) == "fp 0 t3"  # no lease asked
        assert store.acquire_lease("t3", "worker-b", 60.0) is True
        assert claimed(store, "t4", "idem:k4", "worker-a", ttl=0.1) == "fp 0 t4"
        time.sleep(0.3)
        assert claimed(store, "t5", "idem:k4", "worker-a") == "fp 0 t5"  # expired: free
        assert must_load(store, "t5").state is S.SUBMITTED

    def test_create_claimed_leaves_another_owners_live_lease_alone(
            self, store: TaskStore) -> None:
        assert store.acquire_lease("t1", "worker-b", 60.0) is True  # (a run about to make it)
        with pytest.raises(SequenceConflict):
            claimed(store, "t1", "idem:k1", "worker-a")
        assert store.head("t1") is None
        assert store.claim_once("idem:k1", "fp 0 free", 5.0) == "fp 0 free"

    def test_of_creators_racing_with_one_key_one_makes_its_task(self, store: TaskStore) -> None:
        """Each racer has a task of its own: one binds the key and makes its task (with
        its lease); the others make nothing and get the winner's value."""
        racers = [f"t{n}" for n in range(6)]
        start = threading.Barrier(len(racers))
        answers: List[str] = []

        def race(task_id: str) -> None:
            start.wait(10)
            answers.append(claimed(store, task_id, "idem:crowd", f"worker-{task_id}"))

        threads = [threading.Thread(target=race, args=(task_id,)) for task_id in racers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(answers) == len(racers) and len(set(answers)) == 1, answers
        made = [task_id for task_id in racers if store.head(task_id) is not None]
        assert made == [answers[0].split()[-1]], (made, answers)  # no orphan task
        assert store.acquire_lease(made[0], "worker-x", 60.0) is False

    # ============================================================ leases and retention

    def test_lease_lifecycle(self, store: TaskStore) -> None:
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

    def test_a_live_lease_is_not_taken_by_another_owner(self, store: TaskStore) -> None:
        """Taking a lease is set-if-absent: another owner's live lease stays its own;
        the owner re-taking it renews it; an expired or released one is free."""
        create(store, "t1")
        assert store.acquire_lease("t1", "worker-a", 60.0) is True
        assert store.acquire_lease("t1", "worker-b", 60.0) is False
        assert store.acquire_lease("t1", "worker-a", 0.1) is True  # its own: renewed
        assert store.acquire_lease("t1", "worker-b", 60.0) is False
        expires(store, ["t1"])
        assert store.acquire_lease("t1", "worker-b", 60.0) is True  # expired: free
        assert store.expired_leases() == []
        assert store.acquire_lease("t1", "worker-a", 60.0) is False
        store.renew_leases("worker-a", ["t1"], 60.0)  # the old owner's renewal: nothing
        store.release_lease("t1", "worker-a")  # nor its release
        assert store.acquire_lease("t1", "worker-a", 60.0) is False
        store.release_lease("t1", "worker-b")
        assert store.acquire_lease("t1", "worker-a", 60.0) is True  # released: free

    def test_of_acquirers_racing_for_a_lease_exactly_one_wins(self, store: TaskStore) -> None:
        create(store, "t1")
        owners = [f"worker-{n}" for n in range(6)]
        start = threading.Barrier(len(owners))
        won: List[str] = []

        def race(owner: str) -> None:
            start.wait(10)
            if store.acquire_lease("t1", owner, 60.0):
                won.append(owner)

        threads = [threading.Thread(target=race, args=(owner,)) for owner in owners]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len(won) == 1, won
        assert not any(store.acquire_lease("t1", owner, 60.0)
                       for owner in owners if owner != won[0])

    def test_renewal_by_another_owner_does_not_extend_a_lease(self, store: TaskStore) -> None:
        create(store, "t1")
        store.acquire_lease("t1", "worker-a", 0.1)
        store.renew_leases("worker-b", ["t1"], 10.0)
        time.sleep(0.3)
        assert store.expired_leases() == ["t1"]
        store.release_lease("t1", None)  # the reaper drops it whoever held it
        assert store.expired_leases() == []

    def test_purge_deletes_only_old_terminal_tasks(self, store: TaskStore) -> None:
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

    def test_purge_with_a_scope_deletes_only_that_agents_tasks(self, store: TaskStore) -> None:
        """Agents sharing a store keep their own retention: a scoped purge leaves the
        finished tasks of other scopes (the default agent's, with no scope, included)."""
        for task_id, tenant in (("x-done", scoped("x", "")), ("x-tenant", scoped("x", "t1")),
                                ("y-done", scoped("y", "")), ("plain", "t1")):
            create(store, task_id, second=1, tenant=tenant)
            append(store, task_id, [status_event(task_id, S.COMPLETED, second=2)])
        assert store.purge(stamp(30), scope="x") == 2
        assert store.load("x-done") is None and store.load("x-tenant") is None
        assert store.load("y-done") is not None and store.load("plain") is not None
        assert store.purge(stamp(30), scope="") == 1
        assert store.load("plain") is None and store.load("y-done") is not None
        assert store.purge(stamp(30)) == 1  # no scope: every agent's
        assert store.load("y-done") is None

    def test_task_ids_names_every_task_of_every_caller_once(self, store: TaskStore) -> None:
        try:
            assert store.task_ids() == []
        except NotImplementedError:
            pytest.skip("the store cannot list every task it holds (an optional method)")
        create(store, "a", tenant="t1", owner="alice")
        create(store, "b", tenant="", owner="bob")
        create(store, "c:with:colons")
        append(store, "c:with:colons", [status_event("c:with:colons", S.COMPLETED, second=2)])
        assert sorted(store.task_ids()) == ["a", "b", "c:with:colons"]
        store.purge(stamp(30))
        assert sorted(store.task_ids()) == ["a", "b"]

    # ============================================================ long streams

    def test_a_long_stream_of_chunks_loads_whole_at_every_point(self, store: TaskStore) -> None:
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
                loaded = must_load(store, "t1")
                assert (loaded.task, loaded.seq) == (expected, seq)
                assert store.head("t1") == (seq, expected.status.state)
                assert store.list_tasks(TaskQuery()).records[0].task == expected
        assert [p.text for p in must_load(store, "t1").task.artifacts[0].parts] == [
            f"c{i}" for i in range(150)]
        assert record.task == expected
        assert store.head("missing") is None


    # ============================================================ capabilities

    def test_wake_ends_this_process_s_waits_on_a_task(self, store: TaskStore) -> None:
        """``wake`` (at shutdown, so that streams can end) makes a wait return although
        nothing was written: the base class's does it through ``store.notifier``."""
        create(store, "t1")
        returned = threading.Event()

        def waiter() -> None:
            store.wait("t1", 1, 60.0)
            returned.set()

        thread = threading.Thread(target=waiter, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10.0  # far below the wait's 60 s
        while not returned.is_set():  # the waiter may not be waiting yet: wake again
            if time.monotonic() > deadline:
                pytest.fail("wake() did not end a wait on the task (see TaskLog.wake)")
            store.wake("t1")
            returned.wait(0.05)
        thread.join(5)
        assert must_load(store, "t1").seq == 1  # woken, with nothing written
        store.wake("missing")  # no waiter, no task: nothing to do

    @pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
    def test_process_local_says_whether_other_processes_see_the_tasks(
            self, store: TaskStore) -> None:
        """``process_local`` is True exactly when a task that a forked process (a
        worker of ``gunicorn --preload``) writes through the store is not seen here."""
        create(store, "parent")  # in use before the fork, as a preloaded app's store
        pid = os.fork()
        if pid == 0:  # the child: write, and leave without any of the parent's cleanup
            code = 1
            try:
                create(store, "child")
                code = 0
            finally:
                os._exit(code)
        deadline = time.monotonic() + 30.0
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                pytest.fail("the forked process did not finish writing its task")
            time.sleep(0.02)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, \
            "the forked process could not write its task"
        seen = store.load("child") is not None
        assert store.process_local is not seen, (
            f"process_local is {store.process_local}, but a task another process wrote "
            f"{'is' if seen else 'is not'} seen here")

    def test_a_store_that_answered_says_it_is_answering(self, store: TaskStore) -> None:
        """``answering`` (what lets a new run defer its lease to its first write) is
        True right after calls that answered: a ``process_local`` store always says so,
        and the outage guard (``outages_as_unavailable``) keeps ``answered_at`` for the
        calls it guards."""
        create(store, "t1")
        must_load(store, "t1")
        assert store.answering(60.0), (
            "a store that just answered says it is not answering: decorate the class "
            "with outages_as_unavailable, or say process_local = True if it lives in "
            "this process")

    def test_create_tables_is_safe_to_run_again(self, store: TaskStore) -> None:
        """``create_tables`` (``flask a2a create-tables``) creates what is missing and
        nothing else: the second run finds every table in place."""
        first = store.create_tables()
        second = store.create_tables()
        if first is None:
            assert second is None  # a store that keeps no tables to create ahead of use
        else:
            assert second is not None and second.names == first.names
            assert set(first.created) <= set(first.names) and second.created == ()
        create(store, "t1")
        assert must_load(store, "t1").seq == 1
