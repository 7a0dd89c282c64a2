"""A store outage shorter than ``A2A_STORE_GRACE`` loses no work (docs/internals.rst, invariant 8).

The store here is a real one (SQLite, shelve) behind :class:`Blip`, which makes
every store call raise ``StoreUnavailable`` for a while, as a database restart
does, or writes and then raises (the connection dropped after the commit: the
answer is lost, the write is in).  Runs use threads (no gevent here); the same
code waits cooperatively under gevent (tests/server/test_blips_restart.py).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, List

import pytest

from a2a_flask.engine.executor import invoke
from a2a_flask.engine.runtime import Runtime
from a2a_flask.protocol.codec import encode
from a2a_flask.protocol.errors import StoreUnavailable
from a2a_flask.protocol.models import (
    Message,
    Part,
    Role,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from a2a_flask.stores import open_store
from a2a_flask.stores.base import CONTRACT, TaskStore
from a2a_flask.stores.grace import Outage, ride_out

from tests.support.helpers import wait_until

STORES = pytest.mark.parametrize("store_url", ["sqlite", "shelve"], indirect=True)


class Blip:
    """Every contract call of the stores it wraps raises ``StoreUnavailable`` while
    the outage lasts; with ``lose_answers`` the next appends are written first."""

    def __init__(self, *stores: TaskStore) -> None:
        self.until = 0.0
        self.lose_answers = 0
        self.failed = 0
        for store in stores:
            for name in CONTRACT + ("entries",):
                setattr(store, name, self._wrap(name, getattr(store, name)))

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if time.monotonic() < self.until:
                self.failed += 1
                raise StoreUnavailable()
            if name == "append" and self.lose_answers:
                self.lose_answers -= 1
                method(*args, **kwargs)
                self.failed += 1
                raise StoreUnavailable()  # written; the answer never came back
            return method(*args, **kwargs)

        return call

    def out_for(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds


def user_message(text: str = "go") -> Message:
    return Message(message_id=f"m-{text}", role=Role.USER, parts=[Part(text=text)])


def start(runtime: Runtime, task_id: str = "t-1") -> Any:
    return runtime.start_new(user_message(), task_id=task_id, context_id="c-1", tenant="",
                             owner="", dialect="1.0", create_task=True)


def steps(count: int, pause: float, during: Callable[[int], None] = lambda step: None
          ) -> Callable[[Any], Any]:
    """An executor that says WORKING, then streams ``count`` chunks ``pause`` apart."""
    def executor(ctx: Any) -> str:
        ctx.working("started")
        for step in range(count):
            during(step)
            ctx.artifact(f"{step};", artifact_id="out", append=step > 0)
            time.sleep(pause)
        return "done"

    return executor


def log_of(store: TaskStore, task_id: str = "t-1") -> List[Any]:
    return list(store.entries(task_id, 0))


def chunk_texts(entries: List[Any]) -> List[str]:
    return [part.text for entry in entries if isinstance(entry.event, TaskArtifactUpdateEvent)
            and entry.event.artifact.artifact_id == "out" for part in entry.event.artifact.parts]


def states(entries: List[Any]) -> List[str]:
    return [entry.event.status.state.name for entry in entries
            if isinstance(entry.event, TaskStatusUpdateEvent)]


@pytest.fixture
def opened(store_url):
    stores: List[TaskStore] = []

    def open_one() -> TaskStore:
        stores.append(open_store(store_url))
        return stores[-1]

    yield open_one
    for store in stores:
        store.close()


@STORES
def test_a_run_rides_out_an_outage_shorter_than_the_grace(opened):
    store = opened()
    blip = Blip(store)
    runtime = Runtime(store, lambda run: invoke(executor, run), store_grace=5.0)
    executor = steps(8, 0.1, lambda step: blip.out_for(0.8) if step == 3 else None)
    followed: List[Any] = []
    run = start(runtime)
    reader = threading.Thread(target=lambda: followed.extend(
        entry for entry in runtime.follow("t-1", 0, 0.2) if entry is not None))
    reader.start()
    assert run.finished.wait(20)
    reader.join(20)
    assert blip.failed > 0
    entries = log_of(store)
    assert [entry.seq for entry in entries] == list(range(1, len(entries) + 1))
    assert chunk_texts(entries) == [f"{step};" for step in range(8)]
    assert states(entries) == ["WORKING", "COMPLETED"]
    assert store.load("t-1").state is TaskState.COMPLETED
    # The stream that was open during the outage saw every event once, in order.
    assert [entry.seq for entry in followed] == [entry.seq for entry in entries]


@STORES
def test_an_append_whose_answer_was_lost_is_not_written_twice(opened):
    store = opened()
    blip = Blip(store)

    def executor(ctx: Any) -> str:
        ctx.working("one")
        blip.lose_answers = 1
        ctx.working("two")  # written, then "unavailable": retried, and found in the log
        blip.lose_answers = 1
        blip.out_for(0.3)  # ...and the store is down for the first retries too
        ctx.artifact("three", artifact_id="out")
        return "done"

    runtime = Runtime(store, lambda run: invoke(executor, run), store_grace=5.0)
    run = start(runtime)
    assert run.finished.wait(20)
    entries = log_of(store)
    texts = [entry.event.status.message.parts[0].text for entry in entries
             if isinstance(entry.event, TaskStatusUpdateEvent) and entry.event.status.message]
    assert texts == ["one", "two"]
    assert chunk_texts(entries) == ["three"]
    assert states(entries) == ["WORKING", "WORKING", "COMPLETED"]
    assert [entry.seq for entry in entries] == list(range(1, len(entries) + 1))


@STORES
def test_past_the_grace_the_task_fails_once_with_one_log_line(opened, caplog):
    store = opened()
    blip = Blip(store)
    executor = steps(3, 0.05, lambda step: blip.out_for(1.5) if step == 1 else None)
    runtime = Runtime(store, lambda run: invoke(executor, run), store_grace=0.5,
                      lease_ttl=1.0)
    caplog.set_level(logging.WARNING, logger="a2a_flask")
    run = start(runtime)
    assert run.finished.wait(20)
    wait_until(lambda: time.monotonic() > blip.until, 5, "the outage to end")
    runtime.ensure_keeper()
    wait_until(lambda: store.load("t-1").state is TaskState.FAILED, 10, "the task to fail")
    time.sleep(1.5)  # the keeper's later rounds (orphans included) add nothing
    runtime.close()
    entries = log_of(store)
    assert states(entries).count("FAILED") == 1
    assert "task store was unavailable" in store.load("t-1").task.status.message.parts[0].text
    lines = [r.getMessage() for r in caplog.records
             if r.name == "a2a_flask" and "t-1" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "A2A_STORE_GRACE" in lines[0]
    assert store.expired_leases() == []
    assert isinstance(run.error, StoreUnavailable)  # what a blocking send waiting on it gets


@STORES
def test_a_blocking_send_gets_a_clear_error_past_the_grace(opened, make_app):
    """SendMessage (blocking) on a task whose store stays down past the grace: the
    caller hears "task store unavailable" when the grace ends, not when the store is
    back (nor a grace later)."""
    store = opened()
    blip = Blip(store)

    def executor(ctx: Any) -> str:
        ctx.working("started")
        blip.out_for(20.0)
        ctx.artifact("lost", artifact_id="out")
        return "done"

    client = make_app(executor, store=store, store_grace=0.5).test_client()
    started = time.monotonic()
    answer = client.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                                       "params": {"message": {
                                           "role": "ROLE_USER", "messageId": "m-1",
                                           "parts": [{"text": "go"}]}}},
                         headers={"A2A-Version": "1.0"}).get_json()
    took = time.monotonic() - started
    assert answer["error"]["code"] == -32603, answer
    assert "unavailable" in answer["error"]["message"]
    assert took < 15, took  # the grace (0.5 s), not the outage (20 s)


@STORES
def test_the_grace_0_stops_the_run_at_the_first_failure(opened):
    store = opened()
    blip = Blip(store)
    executor = steps(3, 0.05, lambda step: blip.out_for(0.3) if step == 1 else None)
    runtime = Runtime(store, lambda run: invoke(executor, run))  # store_grace=0
    run = start(runtime)
    assert run.finished.wait(20)
    assert runtime.writer._unrecorded == {"t-1": runtime.writer._unrecorded["t-1"]}


@STORES
def test_leases_that_ran_out_during_an_outage_are_renewed_not_failed(opened):
    """Two processes (two runtimes, each with its store) during an outage longer than
    the lease; the runner's connection comes back half a second after the other's.
    The other's keeper fails no task whose owner is alive: after an outage it judges
    leases only once a lease's time has passed, and the runner renews first."""
    first, second = opened(), opened()
    runner_blip, other_blip = Blip(first), Blip(second)
    release = threading.Event()

    def executor(ctx: Any) -> str:
        ctx.working("waiting")
        release.wait(20)
        return "done"

    running = Runtime(first, lambda run: invoke(executor, run), store_grace=10.0,
                      lease_ttl=3.0)
    other = Runtime(second, lambda run: None, store_grace=10.0, lease_ttl=3.0)
    try:
        run = start(running)
        other.ensure_keeper()
        wait_until(lambda: run.record is not None and run.record.seq >= 2, 10, "WORKING")
        runner_blip.out_for(5.0)  # past the lease: no renewal lands meanwhile
        other_blip.out_for(4.5)
        # The other's keeper judges leases from 4.5 + 3 s on; the runner renewed by
        # about 5 + 1 s (a keeper round is a third of the lease).
        time.sleep(8.5)
        assert first.load("t-1").state is TaskState.WORKING
        release.set()
        assert run.finished.wait(10)
        assert first.load("t-1").state is TaskState.COMPLETED
        assert states(log_of(first)) == ["WORKING", "COMPLETED"]
    finally:
        release.set()
        running.close()
        other.close()


@STORES
def test_a_blocking_wait_rides_out_the_outage(opened):
    store = opened()
    blip = Blip(store)
    executor = steps(6, 0.1, lambda step: blip.out_for(0.6) if step == 2 else None)
    runtime = Runtime(store, lambda run: invoke(executor, run), store_grace=5.0)
    start(runtime)
    record = runtime.wait_settled("t-1", 20)
    assert record.state is TaskState.COMPLETED


def always_down() -> None:
    raise StoreUnavailable()


class Clock:
    """Stands in for :mod:`time` in ``stores/grace.py``: its sleeps advance a clock of
    its own at once, so what is checked is the time the backoff asked for, exactly,
    whatever else the machine is doing."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: List[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert len(self.sleeps) < 1000, "still retrying after a thousand waits"
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    from a2a_flask.stores import grace

    replaced = Clock()
    monkeypatch.setattr(grace, "time", replaced)
    return replaced


def test_ride_out_retries_within_the_grace_and_raises_past_it(clock):
    calls: List[float] = []

    def flaky() -> str:
        calls.append(clock.monotonic())
        if len(calls) < 4:
            raise StoreUnavailable()
        return "ok"

    assert ride_out(flaky, 5.0) == "ok"
    gaps = [later - earlier for earlier, later in zip(calls, calls[1:])]
    assert gaps[1] > gaps[0] * 1.5  # the backoff doubles
    assert gaps == pytest.approx([0.1, 0.2, 0.4])
    started = clock.monotonic()
    with pytest.raises(StoreUnavailable):
        ride_out(always_down, 0.5)
    # Retried until the grace was over, and no longer (the last wait is what was left).
    assert clock.monotonic() - started == pytest.approx(0.5)
    assert clock.sleeps[-3:] == pytest.approx([0.1, 0.2, 0.2])
    waits = len(clock.sleeps)
    with pytest.raises(StoreUnavailable):  # grace 0: not retried
        ride_out(always_down, 0.0)
    assert len(clock.sleeps) == waits


def test_an_outage_waits_no_longer_than_its_grace(clock):
    outage = Outage(0.3)
    started = clock.monotonic()
    while outage.wait():
        pass
    assert clock.monotonic() - started == pytest.approx(0.3)
    assert outage.ongoing
    outage.over()
    assert not outage.ongoing


def test_a_lost_webhook_cursor_write_is_retried():
    """The push dispatcher's cursor writes ride out the outage (a cursor
    write that fails within the grace is retried, not lost)."""
    from a2a_flask.push.delivery import PushDispatcher
    from a2a_flask.stores import MemoryStore
    from a2a_flask.stores.base import PushTarget
    from a2a_flask.protocol.models import TaskPushNotificationConfig

    store = MemoryStore()
    blip = Blip(store)
    dispatcher = PushDispatcher(store, transport=None,  # type: ignore[arg-type]
                                renderer_for=lambda version: lambda: None,
                                owner=lambda: "me", store_grace=5.0)
    config = TaskPushNotificationConfig(id="hook", task_id="t-1", url="https://example.com/")
    target = PushTarget(config)
    store.put_push_target("t-1", target)
    blip.out_for(0.4)
    dispatcher._advance("t-1", target, 3)
    assert blip.failed > 0
    assert [t.delivered_seq for t in store.push_targets("t-1")] == [3]
    assert encode(store.push_targets("t-1")[0].config) == encode(config)


def test_a_guarded_store_is_answering_from_its_last_answer_to_its_next_outage(monkeypatch):
    """What lets a new run defer its lease (Keeper.hold): the guard of
    ``outages_as_unavailable`` keeps when the store last answered, and an outage
    forgets it at once."""
    from a2a_flask.stores import base
    from a2a_flask.stores.base import outages_as_unavailable
    from a2a_flask.stores.memory import MemoryStore

    @outages_as_unavailable((OSError,))
    class Flaky(MemoryStore):
        process_local = False  # a process-local store is always answering
        down = False

        def load(self, task_id):  # type: ignore[override]
            if self.down:
                raise OSError("the disk went away")
            return super().load(task_id)

    store = Flaky()
    assert not store.answering(1.0)  # never heard from
    store.load("x")
    assert store.answering(1.0)
    now = time.monotonic()
    monkeypatch.setattr(base.time, "monotonic", lambda: now + 1.5)
    assert not store.answering(1.0)  # too long ago
    monkeypatch.undo()
    store.load("x")
    store.down = True
    with pytest.raises(StoreUnavailable):
        store.load("x")
    assert not store.answering(1.0)
    assert MemoryStore().answering(0.0)  # in this process: never down
