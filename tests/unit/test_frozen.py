"""Frozen finished tasks: exact round trips, nothing for the collector, and the
memory store's freezing (when, what it skips, reads and writes of frozen tasks).

The whole store contract also runs on frozen tasks: ``memory-frozen`` in
``tests/stores/test_stores.py`` freezes each task as soon as it finishes.
"""
from __future__ import annotations

import gc
from typing import List, Optional

import pytest
from hypothesis import given
from hypothesis import strategies as st

from a2a_flask.protocol.events import Event, apply_event
from a2a_flask.protocol.models import (
    UNSET,
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_flask.stores import MemoryStore, memory
from a2a_flask.stores.base import TaskQuery, TaskRecord
from a2a_flask.stores import frozen
from a2a_flask.stores.frozen import FrozenRecord, freeze_log, freeze_task, thaw_log, thaw_task

from tests.support.fuzzkit import fuzz
from tests.support.model_strategies import models

#: What a task's log holds.
event = st.one_of(*[models(cls) for cls in (Task, Message, TaskStatusUpdateEvent,
                                             TaskArtifactUpdateEvent)])


# ------------------------------------------------------------ round trips


@fuzz(2)
@given(models(Task))
def test_a_task_thaws_equal_to_what_was_frozen(original: Task) -> None:
    assert thaw_task(freeze_task(original)) == original


@fuzz(2)
@given(st.lists(event, max_size=5), st.integers(min_value=0, max_value=6))
def test_a_log_thaws_equal_from_any_index(events: List[Event], start: int) -> None:
    assert thaw_log(freeze_log(events), start) == events[start:]


def test_a_part_without_data_thaws_without_data_and_a_null_one_with_null() -> None:
    parts = thaw_task(freeze_task(Task(id="t", artifacts=[Artifact(
        "a", [Part(text="x"), Part(data=None)])]))).artifacts[0].parts
    assert parts[0].data is UNSET and parts[1].data is None and parts[1].kind == "data"


def test_thawed_models_share_nothing_with_the_frozen_ones() -> None:
    original = Task(id="t", metadata={"tags": ["a"]})
    frozen = freeze_task(original)
    thawed = thaw_task(frozen)
    thawed.metadata["tags"].append("b")
    assert thaw_task(frozen).metadata == {"tags": ["a"]}


def test_what_marshal_cannot_copy_exactly_is_refused() -> None:
    class Label(str):
        pass

    for odd in (object(), Label("x"), TaskState.WORKING):
        with pytest.raises(ValueError):
            freeze_task(Task(id="t", metadata={"odd": odd}))
        with pytest.raises(ValueError):
            freeze_log([Message(message_id="m", role=Role.USER, parts=[Part(text="x")],
                                metadata={"odd": odd})])


# ------------------------------------------------------------ the collector


def streamed_task(task_id: str, chunks: int) -> tuple:
    """A finished task streamed in ``chunks`` chunks: its record and its log."""
    first = Task(id=task_id, context_id="ctx",
                 status=TaskStatus(TaskState.SUBMITTED, timestamp="2025-01-01T00:00:00.000Z"),
                 history=[Message("m", Role.USER, [Part(text="go")], "ctx", task_id)])
    log: List[Event] = [first, TaskStatusUpdateEvent(task_id, "ctx", TaskStatus(
        TaskState.WORKING, timestamp="2025-01-01T00:00:01.000Z"))]
    log += [TaskArtifactUpdateEvent(task_id, "ctx", Artifact("a", [Part(text=f"chunk {i}")]),
                                    append=i > 0) for i in range(chunks)]
    log.append(TaskStatusUpdateEvent(task_id, "ctx", TaskStatus(
        TaskState.COMPLETED, timestamp="2025-01-01T00:00:02.000Z")))
    snapshot = first
    for item in log[1:]:
        snapshot = apply_event(snapshot, item)
    return TaskRecord(snapshot, len(log)), log


_LONG_LOG = streamed_task("long", 3 * frozen.SEGMENT)[1]
_FROZEN_LONG_LOG = freeze_log(_LONG_LOG)


@fuzz(2)
@given(st.integers(min_value=0, max_value=len(_LONG_LOG) + 2),
       st.one_of(st.none(), st.integers(min_value=0, max_value=len(_LONG_LOG) + 2)))
def test_any_window_of_a_long_log_thaws_equal(start: int, stop: Optional[int]) -> None:
    """A long log is frozen in segments; a window thaws the segments it covers."""
    assert len(_FROZEN_LONG_LOG) == 4  # 753 events: three segments full, one not
    assert thaw_log(_FROZEN_LONG_LOG, start, stop) == _LONG_LOG[start:stop]


def fill_store(store: MemoryStore, tasks: int, chunks: int, prefix: str = "t") -> None:
    """Store ``tasks`` finished tasks of ``chunks`` chunks each, named prefix0, prefix1..."""
    for index in range(tasks):
        record, log = streamed_task(f"{prefix}{index}", chunks)
        store.create(TaskRecord(log[0], 1), log[0])
        store.append(record.task_id, 1, log[1:], record)


def test_a_frozen_task_leaves_the_collector_one_object() -> None:
    """A 100-chunk task as objects is some 500 tracked objects; frozen, its record."""
    as_objects, freezing = MemoryStore(), MemoryStore()
    as_objects.freezes, freezing.freeze_lag = False, 0
    for store in (as_objects, freezing):
        fill_store(store, 1, 100, "warm")  # first uses (compiled freezers) out of the count
    grown = []
    for store in (as_objects, freezing):
        gc.collect()
        before = len(gc.get_objects())
        fill_store(store, 100, 100)
        gc.collect()
        grown.append(len(gc.get_objects()) - before)
    # One object per frozen task, give or take what the process's other threads (an
    # earlier test's deliveries, say) keep or drop meanwhile.
    assert grown[0] >= 100 * 500 and grown[1] <= 100 + 50, grown
    assert all(isinstance(r, FrozenRecord) for r in freezing._records.values())


# ------------------------------------------------------------ the memory store


def frozen(store: MemoryStore, task_id: str) -> bool:
    return isinstance(store._records[task_id], FrozenRecord)


def test_a_finished_task_is_frozen_once_more_have_ended() -> None:
    store = MemoryStore()
    store.freeze_lag = 2
    fill_store(store, 2, 2)
    assert not frozen(store, "t0") and not frozen(store, "t1")
    fill_store(store, 1, 2, "later")
    assert [frozen(store, name) for name in ("t0", "t1", "later0")] == [True, False, False]


def test_a_finished_task_is_frozen_once_a_read_reaches_the_end_of_its_log() -> None:
    store = MemoryStore()
    fill_store(store, 1, 2)
    assert not frozen(store, "t0")
    log = [entry.event for entry in store.read("t0", 0)]
    assert frozen(store, "t0")  # the reader holds the last events as they were
    assert store._records["t0"].thawed().task.artifacts[0].parts[1].text == "chunk 1"
    assert [entry.event for entry in store.read("t0", 0)] == log  # thawed now


def test_a_task_purged_before_its_turn_is_skipped() -> None:
    store = MemoryStore()
    store.freeze_lag = 1
    fill_store(store, 1, 2, "purged")
    assert store.purge("9999") == 1
    fill_store(store, 2, 2)  # the purged task's turn comes, then t0's
    assert "purged0" not in store._records
    assert frozen(store, "t0") and not frozen(store, "t1")


def test_running_and_interrupted_tasks_are_never_frozen() -> None:
    store = MemoryStore()
    for index, state in enumerate((TaskState.WORKING, TaskState.INPUT_REQUIRED)):
        task = Task(id=f"t{index}", status=TaskStatus(state))
        store.create(TaskRecord(task, 1), task)
        store.read(f"t{index}", 0)
        assert not frozen(store, f"t{index}")


def test_a_frozen_task_reads_as_it_was_written() -> None:
    store = MemoryStore()
    store.freeze_lag = 0
    record, log = streamed_task("t", 20)
    store.create(TaskRecord(log[0], 1, "tenant", "owner", "0.3", "2025-01-01T00:00:00.000Z"),
                 log[0])
    store.append("t", 1, log[1:], TaskRecord(record.task, len(log), "tenant", "owner", "0.3",
                                             "2025-01-01T00:00:00.000Z"))
    kept = store._records["t"]
    assert isinstance(kept, FrozenRecord) and isinstance(store._logs["t"], tuple)
    loaded = store.load("t")
    assert type(loaded) is TaskRecord  # thawed once: readers read .task as often as they like
    assert (loaded.task, loaded.seq, loaded.tenant, loaded.owner, loaded.dialect,
            loaded.created_at) == (record.task, len(log), "tenant", "owner", "0.3",
                                   "2025-01-01T00:00:00.000Z")
    assert kept.outline == kept.task == record.task and kept.thawed() == loaded
    assert store.head("t") == (len(log), TaskState.COMPLETED)
    assert [entry.event for entry in store.read("t", 0)] == log
    assert [entry.seq for entry in store.read("t", 20)] == list(range(21, len(log) + 1))
    assert store.read("t", len(log)) == []
    page = store.list_tasks(TaskQuery(tenant="tenant", owner="owner", context_id="ctx",
                                      state=TaskState.COMPLETED))
    assert [type(r) for r in page.records] == [TaskRecord] and page.records[0] == loaded


def test_appending_to_a_frozen_task_thaws_its_log() -> None:
    """The runtime never changes a finished task; a store still keeps what it is given."""
    store = MemoryStore()
    store.freeze_lag = 0
    record, log = streamed_task("t", 3)
    store.create(TaskRecord(log[0], 1), log[0])
    store.append("t", 1, log[1:], record)
    late = Message("late", Role.USER, [Part(text="more")], "ctx", "t")
    after = store.load("t").after([late])
    assert store.append("t", record.seq, [late], after) == record.seq + 1
    assert [entry.event for entry in store.read("t", 0)] == log + [late]
    assert store.load("t").task == after.task


def test_a_task_marshal_cannot_copy_stays_objects_and_reads_as_ever() -> None:
    store = MemoryStore()
    store.freeze_lag = 0
    marker = object()
    task = Task(id="t", status=TaskStatus(TaskState.COMPLETED), metadata={"marker": marker})
    store.create(TaskRecord(task, 1), task)
    assert store.load("t").task.metadata["marker"] is marker
    assert not frozen(store, "t") and "t" in store._unfrozen
    assert store.read("t", 0)[0].event.metadata["marker"] is marker  # no second attempt


def test_a_very_long_log_stays_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "FREEZE_MAX_EVENTS", 10)
    store = MemoryStore()
    store.freeze_lag = 0
    fill_store(store, 1, 20, "long")  # 23 events
    fill_store(store, 1, 5, "short")  # 8 events
    assert not frozen(store, "long0") and frozen(store, "short0")
    assert len(store.read("long0", 0)) == 23
