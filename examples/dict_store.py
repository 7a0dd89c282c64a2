"""A complete small task store: everything in dicts, guarded by one lock.

What a third-party store looks like: a :class:`~a2a_flask.stores.TaskStore`
subclass registered under its own URL scheme, so that ``A2A_STORE=dict://``
opens it.  It keeps what the memory store keeps, without its optimisations
(frozen tasks, cheap heads): read it as the shortest store that passes
:mod:`a2a_flask.testing.store_contract` (``tests/test_example_store.py`` runs
that suite on it)::

    import examples.dict_store        # registers dict://
    app.config["A2A_STORE"] = "dict://"

Like the memory store it lives in one process: one gunicorn worker, or tests.
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from a2a_flask.concurrency import Notifier
from a2a_flask.protocol.events import Event, LogEntry
from a2a_flask.stores import TaskStore, register_store
from a2a_flask.stores.base import (PushTarget, SequenceConflict, TaskPage, TaskQuery,
                                   TaskRecord, is_behind, select_page)


class DictStore(TaskStore):
    """Tasks, logs, webhooks, claims and leases in dicts; safe across threads and greenlets."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: Wakes this process's waiters on a task (gevent-friendly, no lost wake-ups).
        self._notifier = Notifier()
        self._records: Dict[str, TaskRecord] = {}
        #: Each task's events in order: the event of sequence number ``n`` is at ``n - 1``.
        self._logs: Dict[str, List[Event]] = {}
        self._push: Dict[str, Dict[str, PushTarget]] = {}
        self._claims: Dict[str, Tuple[str, float]] = {}
        self._leases: Dict[str, Tuple[str, float]] = {}

    # ------------------------------------------------------------ the task log

    def create(self, record: TaskRecord, first_event: Event) -> None:
        with self._lock:
            if record.task_id in self._records:
                raise SequenceConflict(record.task_id)
            self._records[record.task_id] = record
            self._logs[record.task_id] = [first_event]
        self._notifier.notify(record.task_id)

    def load(self, task_id: str) -> Optional[TaskRecord]:
        return self._records.get(task_id)

    def append(self, task_id: str, expected_seq: int, events: List[Event],
               record: TaskRecord) -> int:
        with self._lock:
            current = self._records.get(task_id)
            if current is None or current.seq != expected_seq:
                raise SequenceConflict(task_id)  # someone else appended first
            self._logs[task_id].extend(events)
            self._records[task_id] = record  # replaced, never changed: readers may hold the old
        self._notifier.notify(task_id)
        return record.seq

    def read(self, task_id: str, after_seq: int) -> List[LogEntry]:
        start = max(after_seq, 0)
        events = self._logs.get(task_id, [])[start:start + self.read_slice]
        return [LogEntry(seq, event) for seq, event in enumerate(events, start + 1)]

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        # The ticket is taken before looking, so an append in between still wakes us.
        with self._notifier.ticket(task_id) as ticket:
            record = self._records.get(task_id)
            if record is None or record.seq > after_seq or record.state.terminal:
                return
            ticket.wait(timeout)

    def list_tasks(self, query: TaskQuery) -> TaskPage:
        return select_page(list(self._records.values()), query)

    def task_ids(self) -> List[str]:
        return list(self._records)

    def purge(self, updated_before: str) -> int:
        with self._lock:
            gone = [task_id for task_id, record in self._records.items()
                    if record.state.terminal and record.updated_at < updated_before]
            for task_id in gone:
                del self._records[task_id], self._logs[task_id]
                self._push.pop(task_id, None)
                self._leases.pop(task_id, None)
        return len(gone)

    # ------------------------------------------------------------ push targets

    def put_push_target(self, task_id: str, target: PushTarget) -> None:
        with self._lock:
            self._push.setdefault(task_id, {})[target.config.id] = dataclasses.replace(target)

    def push_targets(self, task_id: str) -> List[PushTarget]:
        with self._lock:  # copies: the caller may move a cursor on what it holds
            return [dataclasses.replace(t) for t in self._push.get(task_id, {}).values()]

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        with self._lock:
            self._push.get(task_id, {}).pop(config_id, None)

    def record_push_progress(self, task_id: str, config_id: str, delivered_seq: int,
                             failures: int, gave_up: bool) -> None:
        with self._lock:
            target = self._push.get(task_id, {}).get(config_id)
            if target is not None:  # deleted meanwhile: stays deleted
                target.delivered_seq, target.failures, target.gave_up = (
                    delivered_seq, failures, gave_up)

    def push_backlog(self) -> List[str]:
        with self._lock:
            return [task_id for task_id, targets in self._push.items()
                    if task_id in self._records
                    and any(is_behind(t, self._records[task_id].seq) for t in targets.values())]

    # ------------------------------------------------------------ claims and leases

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
            if self._claims.get(key, ("",))[0] == owner:
                del self._claims[key]

    def acquire_lease(self, task_id: str, owner: str, ttl: float) -> None:
        with self._lock:
            self._leases[task_id] = (owner, time.time() + ttl)

    def renew_leases(self, owner: str, task_ids: List[str], ttl: float) -> None:
        expires = time.time() + ttl
        with self._lock:
            for task_id in task_ids:
                if self._leases.get(task_id, ("",))[0] == owner:
                    self._leases[task_id] = (owner, expires)

    def release_lease(self, task_id: str, owner: Optional[str]) -> None:
        with self._lock:
            if owner is None or self._leases.get(task_id, ("",))[0] == owner:
                self._leases.pop(task_id, None)

    def expired_leases(self) -> List[str]:
        now = time.time()
        with self._lock:
            return [task_id for task_id, (_, expires) in self._leases.items() if expires < now]


def open_dict_store(url: str, **options: Any) -> DictStore:
    """The factory ``open_store`` calls for a ``dict://`` URL (it has no options)."""
    return DictStore()


register_store("dict", open_dict_store)
