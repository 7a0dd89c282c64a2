"""The default store: everything in this process's memory.

Fast and dependency-free, but every gunicorn worker has its own copy: use it
with one worker, or pick a shared store (``shelve://`` on one host).
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Dict, List, Optional, Tuple

from ..concurrency import Notifier
from .base import (
    Event,
    LogEntry,
    PushTarget,
    SequenceConflict,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    is_behind,
    select_page,
)


class MemoryStore(TaskStore):
    """Tasks and logs in dicts, guarded by one lock, with in-process wake-ups."""

    def __init__(self) -> None:
        self._records: Dict[str, TaskRecord] = {}
        #: Each task's events in order: the event of sequence number ``n`` is at ``n - 1``.
        #: Entries are made on read: a stored event is then one object fewer for the
        #: garbage collector to walk on every full collection (a stream stores many).
        self._logs: Dict[str, List[Event]] = {}
        self._push: Dict[str, Dict[str, PushTarget]] = {}
        self._leases: Dict[str, Tuple[str, float]] = {}
        self._claims: Dict[str, Tuple[str, float]] = {}
        self._lock = threading.Lock()
        self._notifier = Notifier()

    def create(self, record: TaskRecord, first_event: Event) -> None:
        with self._lock:
            if record.task.id in self._records:
                raise SequenceConflict(record.task.id)
            self._records[record.task.id] = record
            self._logs[record.task.id] = [first_event]
        self._notifier.notify(record.task.id)

    def load(self, task_id: str) -> Optional[TaskRecord]:
        return self._records.get(task_id)

    def append(self, task_id: str, expected_seq: int, events: List[Event],
               record: TaskRecord) -> int:
        with self._lock:
            if self._records[task_id].seq != expected_seq:
                raise SequenceConflict(task_id)
            self._logs[task_id].extend(events)
            # Records are replaced, never mutated: readers may hold the old one.
            # The new one folds its streamed chunks when first read.
            self._records[task_id] = record
        self._notifier.notify(task_id)
        return record.seq

    def read(self, task_id: str, after_seq: int) -> List[LogEntry]:
        log = self._logs.get(task_id, [])
        start = max(after_seq, 0)
        return [LogEntry(seq, event) for seq, event in enumerate(log[start:], start + 1)]

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        with self._notifier.ticket(task_id) as ticket:
            record = self._records.get(task_id)
            if record is None or record.seq > after_seq or record.state.terminal:
                return
            ticket.wait(timeout)

    def list_tasks(self, query: TaskQuery) -> TaskPage:
        return select_page(list(self._records.values()), query)

    def put_push_target(self, task_id: str, target: PushTarget) -> None:
        with self._lock:
            self._push.setdefault(task_id, {})[target.config.id] = target

    def push_targets(self, task_id: str) -> List[PushTarget]:
        return list(self._push.get(task_id, {}).values())

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        with self._lock:
            self._push.get(task_id, {}).pop(config_id, None)

    def record_push_progress(self, task_id: str, config_id: str, delivered_seq: int,
                             failures: int, gave_up: bool) -> None:
        with self._lock:
            targets = self._push.get(task_id, {})
            if config_id in targets:
                targets[config_id] = dataclasses.replace(
                    targets[config_id], delivered_seq=delivered_seq, failures=failures,
                    gave_up=gave_up)

    def push_backlog(self) -> List[str]:
        return [task_id for task_id, targets in list(self._push.items())
                if task_id in self._records and any(
                    is_behind(t, self._records[task_id].seq) for t in list(targets.values()))]

    def claim(self, key: str, owner: str, ttl: float) -> bool:
        now = time.time()
        with self._lock:
            holder, expires = self._claims.get(key, (owner, 0.0))
            if holder != owner and expires >= now:
                return False
            self._claims[key] = (owner, now + ttl)
            return True

    def release_claim(self, key: str, owner: str) -> None:
        with self._lock:
            if self._claims.get(key, (None,))[0] == owner:
                del self._claims[key]

    def acquire_lease(self, task_id: str, owner: str, ttl: float) -> None:
        self._leases[task_id] = (owner, time.time() + ttl)

    def renew_leases(self, owner: str, task_ids: List[str], ttl: float) -> None:
        expires = time.time() + ttl
        for task_id in task_ids:
            if self._leases.get(task_id, (None,))[0] == owner:
                self._leases[task_id] = (owner, expires)

    def release_lease(self, task_id: str, owner: Optional[str]) -> None:
        if owner is None or self._leases.get(task_id, (None,))[0] == owner:
            self._leases.pop(task_id, None)

    def expired_leases(self) -> List[str]:
        now = time.time()
        return [task_id for task_id, (_, expires) in list(self._leases.items()) if expires < now]

    def purge(self, updated_before: str) -> int:
        with self._lock:
            gone = [task_id for task_id, record in self._records.items()
                    if record.state.terminal and record.updated_at < updated_before]
            for task_id in gone:
                del self._records[task_id]
                self._logs.pop(task_id, None)
                self._push.pop(task_id, None)
                self._leases.pop(task_id, None)
        return len(gone)
