"""Kill-9 trials for the file stores, shared by tests/server/test_kill9.py and bench/kill9.py.

A trial forks a child that writes to a fresh store as fast as it can (tasks of
ten events, webhooks, cursor moves, leases) and reports every write on a pipe
*after* the store call returned, that is once the write was acknowledged.  The
parent SIGKILLs the child at a random moment, reopens the store, lists every
task and reads every log, and checks that every acknowledged write is there.
"""
from __future__ import annotations

import os
import random
import select
import signal
import time
from dataclasses import dataclass, field
from typing import Dict, List

from a2a_flask.protocol.events import apply_event
from a2a_flask.protocol.models import (
    Message,
    Part,
    Role,
    Task,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_flask.stores import ShelveStore, SQLiteStore, TaskStore
from a2a_flask.stores import shelve as shelve_store
from a2a_flask.stores.base import PushTarget, TaskQuery, TaskRecord

KINDS = ("shelve", "sqlite")
#: Events per task, as in the issue's figures.
EVENTS_PER_TASK = 10
#: A small compaction threshold in the child, so that kills also land mid-compaction.
CHILD_COMPACT_BYTES = 32 << 10


@dataclass
class Outcome:
    """What one trial found after the kill."""

    acknowledged: int = 0
    #: The store could not be opened, listed or read.
    unreadable: str = ""
    #: Acknowledged writes (task, sequence number) missing after the kill.
    lost: List[str] = field(default_factory=list)


def open_kind(kind: str, path: str) -> TaskStore:
    return ShelveStore(path) if kind == "shelve" else SQLiteStore(path)


def _stamp(n: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_700_000_000 + n)) + ".000Z"


def _child(kind: str, path: str, ack: int) -> None:
    """Write until killed; one line per acknowledged write: ``task seq``."""
    shelve_store.COMPACT_MIN_BYTES = CHILD_COMPACT_BYTES
    store = open_kind(kind, path)
    n = 0
    while True:
        task_id = f"task-{n}"
        message = Message(message_id=f"{task_id}-m", role=Role.USER, parts=[Part(text="hi")],
                          task_id=task_id, context_id="ctx")
        task = Task(id=task_id, context_id="ctx", history=[message],
                    status=TaskStatus(TaskState.SUBMITTED, timestamp=_stamp(n)))
        store.create(TaskRecord(task, 1, created_at=_stamp(n)), task)
        os.write(ack, f"{task_id} 1\n".encode())
        if n % 3 == 0:
            store.put_push_target(task_id, PushTarget(TaskPushNotificationConfig(
                url="https://example.com/hook", id="hook", task_id=task_id, token="t")))
            store.acquire_lease(task_id, "child", 30.0)
        for seq in range(2, EVENTS_PER_TASK + 1):
            state = TaskState.COMPLETED if seq == EVENTS_PER_TASK else TaskState.WORKING
            event = TaskStatusUpdateEvent(task_id, "ctx", TaskStatus(state, timestamp=_stamp(n)))
            task = apply_event(task, event)
            store.append(task_id, seq - 1, [event], TaskRecord(task, seq, created_at=_stamp(n)))
            os.write(ack, f"{task_id} {seq}\n".encode())
            if n % 3 == 0:
                store.record_push_progress(task_id, "hook", seq - 1, 0, False)
        if n % 3 == 0:
            store.release_lease(task_id, "child")
        n += 1


def _read_acks(fd: int, acks: Dict[str, int], until: float) -> None:
    buffer = b""
    while True:
        wait = max(0.0, until - time.monotonic())
        ready, _, _ = select.select([fd], [], [], wait)
        if not ready:
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            task_id, seq = line.decode().split()
            acks[task_id] = max(acks.get(task_id, 0), int(seq))


def trial(kind: str, path: str, rng: random.Random, max_delay: float = 0.3) -> Outcome:
    """One child killed after a random delay (up to ``max_delay`` s of writing)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into the caller's code
        os.close(read_end)
        try:
            _child(kind, path, write_end)
        finally:
            os._exit(1)
    os.close(write_end)
    acks: Dict[str, int] = {}
    try:
        # Wait for the first acknowledgement (the store is open), then a random while.
        deadline = time.monotonic() + 10.0
        while not acks and time.monotonic() < deadline:
            _read_acks(read_end, acks, time.monotonic() + 0.05)
        _read_acks(read_end, acks, time.monotonic() + rng.uniform(0.0, max_delay))
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    _read_acks(read_end, acks, time.monotonic())  # what it acknowledged before dying
    os.close(read_end)
    return check(kind, path, acks)


def check(kind: str, path: str, acks: Dict[str, int]) -> Outcome:
    """Reopen the store; every acknowledged (task, seq) must be readable."""
    outcome = Outcome(acknowledged=sum(acks.values()))
    try:
        store = open_kind(kind, path)
        try:
            listed = set()
            token = ""
            for _ in range(10_000):
                page = store.list_tasks(TaskQuery(page_size=100, page_token=token))
                listed.update(r.task.id for r in page.records)
                token = page.next_page_token
                if not token:
                    break
            for task_id in listed:
                record = store.load(task_id)
                entries = list(store.entries(task_id, 0))
                store.push_targets(task_id)
                if record is None or [e.seq for e in entries] != list(range(1, record.seq + 1)):
                    outcome.unreadable = f"{task_id}: log and snapshot disagree"
            store.expired_leases()
            for task_id, seq in sorted(acks.items()):
                if task_id not in listed:
                    outcome.lost.append(f"{task_id} (not listed)")
                    continue
                record = store.load(task_id)
                if record is None or record.seq < seq:
                    outcome.lost.append(f"{task_id} seq {seq}")
        finally:
            store.close()
    except Exception as exc:  # what a user would see: the store cannot be used
        outcome.unreadable = f"{type(exc).__name__}: {exc}"
    return outcome
