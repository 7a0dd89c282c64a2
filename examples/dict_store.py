"""A complete small task store: everything in dicts, guarded by one lock.

What a third-party store looks like: a :class:`~a2a_flask.stores.TaskStore`
subclass registered under its own URL scheme, so that ``A2A_STORE=dict://``
opens it.  It keeps what the memory store keeps, without its optimisations
(frozen tasks, cheap heads): read it as the shortest store that passes
:mod:`a2a_flask.testing.store_contract` (``tests/stores/test_example_store.py`` runs
that suite on it)::

    import examples.dict_store        # registers dict://
    app.config["A2A_STORE"] = "dict://"

Like the memory store it lives in one process (it says so: ``process_local``), so
it is for one gunicorn worker, or tests; ``A2A_RUNNER=celery`` refuses it.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List, Optional, TypeVar

from a2a_flask.protocol.events import Event, LogEntry
from a2a_flask.stores import TaskStore, register_store
from a2a_flask.stores.base import (SequenceConflict, TaskPage, TaskQuery, TaskRecord, in_scope,
                                   select_page)
from a2a_flask.stores.coordination import Decision, DictCoordination

T = TypeVar("T")


class DictStore(DictCoordination, TaskStore):
    """Tasks and their logs in dicts, safe across threads and greenlets; webhooks,
    claims and leases as :class:`~a2a_flask.stores.coordination.DictCoordination`
    keeps them (the memory and shelve stores use it too)."""

    #: The tasks live in this process's dicts: no other process sees them.
    process_local = True

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: Dict[str, TaskRecord] = {}
        #: Each task's events in order: the event of sequence number ``n`` is at ``n - 1``.
        self._logs: Dict[str, List[Event]] = {}
        self._reset_coordination()  # DictCoordination's dicts of webhooks, claims, leases

    # ------------------------------------------------------------ the task log (TaskLog)

    def create(self, record: TaskRecord, first_event: Event) -> None:
        with self._lock:
            if record.task_id in self._records:
                raise SequenceConflict(record.task_id)
            self._records[record.task_id] = record
            self._logs[record.task_id] = [first_event]
        self.notifier.notify(record.task_id)

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
        self.notifier.notify(task_id)
        return record.seq

    def read(self, task_id: str, after_seq: int) -> List[LogEntry]:
        start = max(after_seq, 0)
        events = self._logs.get(task_id, [])[start:start + self.read_slice]
        return [LogEntry(seq, event) for seq, event in enumerate(events, start + 1)]

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        # The ticket is taken before looking, so an append in between still wakes us
        # (and so does wake(): the base class's, through the same notifier).
        with self.notifier.ticket(task_id) as ticket:
            record = self._records.get(task_id)
            if record is None or record.seq > after_seq or record.state.terminal:
                return
            ticket.wait(timeout)

    def list_tasks(self, query: TaskQuery) -> TaskPage:
        return select_page(list(self._records.values()), query)

    def task_ids(self) -> List[str]:
        return list(self._records)

    def purge(self, updated_before: str, scope: Optional[str] = None) -> int:
        with self._lock:
            gone = [task_id for task_id, record in self._records.items()
                    if record.state.terminal and record.updated_at < updated_before
                    and in_scope(record.tenant, scope)]
            for task_id in gone:
                del self._records[task_id], self._logs[task_id]
                self._forget_coordination(task_id)  # its webhooks and lease go too
            for key in self._expired_claims():  # and claims that ran out (idempotency keys)
                del self._claims[key]
        return len(gone)

    # ------------------------------------------------------------ coordination
    # Webhooks, claims and leases: DictCoordination decides; the store only runs its
    # decisions under the lock and says where a task's log ends.

    def _coordinate(self, decide: Callable[[], Decision[T]], durable: bool) -> T:
        with self._lock:
            changes, result = decide()
            for change in changes:
                self._apply_change(change)
        return result

    def _observe(self, look: Callable[[], T]) -> T:
        with self._lock:
            return look()

    def _log_seq(self, task_id: str) -> Optional[int]:
        record = self._records.get(task_id)
        return None if record is None else record.seq


def open_dict_store(url: str, **options: Any) -> DictStore:
    """The factory ``open_store`` calls for a ``dict://`` URL (it has no options)."""
    return DictStore()


register_store("dict", open_dict_store)
