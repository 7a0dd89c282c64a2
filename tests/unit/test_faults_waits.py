"""A store whose wait returns at once (a broken or third-party store) must not make
anything spin: blocking sends, streams and webhook deliveries poll it instead."""
from __future__ import annotations

import time
from typing import Optional

from a2a_flask.engine.runtime import Runtime
from a2a_flask.protocol.models import Task, TaskState, TaskStatus, new_id
from a2a_flask.stores.base import TaskRecord
from a2a_flask.stores.memory import MemoryStore


class EarlyWait(MemoryStore):
    """Its wait never blocks; it counts the loads that callers make."""

    def __init__(self) -> None:
        super().__init__()
        self.loads = 0

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        return None

    def load(self, task_id: str) -> Optional[TaskRecord]:
        self.loads += 1
        return super().load(task_id)


def working_task(store: MemoryStore) -> str:
    task = Task(id=new_id(), context_id="c", status=TaskStatus(state=TaskState.WORKING))
    store.create(TaskRecord(task, 1), task)
    return task.id


def test_a_blocking_send_polls_a_wait_that_returns_at_once():
    store = EarlyWait()
    runtime = Runtime(store, lambda run: None)
    task_id = working_task(store)
    started = time.monotonic()
    record = runtime.wait_settled(task_id, 1.0)
    assert record.state is TaskState.WORKING
    assert 0.9 < time.monotonic() - started < 5  # the wait's own 1 s, not a hang
    assert store.loads < 60, store.loads  # ~20 at one poll per 50 ms; a spin makes 100,000s


def test_a_stream_polls_a_wait_that_returns_at_once():
    store = EarlyWait()
    runtime = Runtime(store, lambda run: None)
    task_id = working_task(store)
    started = time.monotonic()
    items = runtime.follow(task_id, 1, heartbeat=1.0)
    assert next(items) is None  # the first heartbeat, a second later
    assert 0.9 < time.monotonic() - started < 5  # the wait's own 1 s, not a hang
    assert store.loads < 60, store.loads
    items.close()
