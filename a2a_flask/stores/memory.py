"""The default store: everything in this process's memory.

Fast and dependency-free, but every gunicorn worker has its own copy: use it
with one worker, or pick a shared store (``shelve://`` on one host).

Finished tasks are kept frozen (:mod:`.frozen`): as bytes that Python's
garbage collector never walks, thawed when read.  A finished task is frozen
once a read reaches the end of its log (a stream of it has its last events
in hand, and they are still in the processor's caches), or at the latest
once :attr:`MemoryStore.freeze_lag` more tasks have ended (a blocking send's
task, whose log nobody reads).  Until then its readers read objects.
"""
from __future__ import annotations

import collections
import threading
from typing import Callable, Deque, Dict, List, Optional, Set, Tuple, TypeVar, Union

from ..protocol.models import TaskState
from .base import (
    Event,
    LogEntry,
    OnceClaim,
    SequenceConflict,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    in_scope,
    select_page,
)
from .coordination import Decision, DictCoordination
from .frozen import FrozenLog, FrozenRecord, freeze_log, thaw_log

T = TypeVar("T")

#: Tasks with longer logs stay objects: freezing is one step that does not yield
#: (about 10 ms for this many events).
FREEZE_MAX_EVENTS = 10_000


class MemoryStore(DictCoordination, TaskStore):
    """Tasks and logs in dicts, guarded by one lock, with in-process wake-ups; webhooks,
    claims and leases as :class:`~.coordination.DictCoordination` keeps them."""

    #: Finished tasks whose logs nobody has read to the end that stay objects
    #: (the latest to end): a stream that lags a little still reads objects.
    freeze_lag = 32
    #: False keeps every finished task as objects (to measure what freezing saves).
    freezes = True
    #: Each process has its own (see :attr:`TaskStore.process_local`).
    process_local = True

    def __init__(self) -> None:
        #: Each task's latest record: a :class:`FrozenRecord` once the task is frozen.
        self._records: Dict[str, TaskRecord] = {}
        #: Each task's events in order: the event of sequence number ``n`` is at ``n - 1``;
        #: segments of bytes (:func:`freeze_log`) once the task is frozen.  Entries are
        #: made on read, so that the store keeps no object per entry.
        self._logs: Dict[str, Union[List[Event], FrozenLog]] = {}
        #: The latest tasks to end, oldest first (some frozen since).
        self._finished: Deque[str] = collections.deque()
        #: Finished tasks that stay objects: too long, or holding what marshal cannot copy.
        self._unfrozen: Set[str] = set()
        self._reset_coordination()
        self._lock = threading.Lock()

    def create(self, record: TaskRecord, first_event: Event) -> None:
        with self._lock:
            if record.task.id in self._records:
                raise SequenceConflict(record.task.id)
            self._records[record.task.id] = record
            self._logs[record.task.id] = [first_event]
            if record.state.terminal:
                self._ended(record.task.id)
        self.notifier.notify(record.task.id)

    def create_claimed(self, record: TaskRecord, first_event: Event, claim: OnceClaim,
                       lease_owner: Optional[str] = None, lease_ttl: float = 0.0) -> str:
        task_id = record.task.id
        with self._lock:  # one step: the binding, the task and its lease
            changes, held = self._claimed_creation(claim, task_id, lease_owner, lease_ttl)
            if held != claim.value:
                return held
            for change in changes:
                self._apply_change(change)
            self._records[task_id] = record
            self._logs[task_id] = [first_event]
            if record.state.terminal:
                self._ended(task_id)
        self.notifier.notify(task_id)
        return held

    def load(self, task_id: str) -> Optional[TaskRecord]:
        record = self._records.get(task_id)
        return record.thawed() if isinstance(record, FrozenRecord) else record

    def head(self, task_id: str) -> Optional[Tuple[int, TaskState]]:
        record = self._records.get(task_id)
        return (record.seq, record.state) if record is not None else None

    def append(self, task_id: str, expected_seq: int, events: List[Event],
               record: TaskRecord) -> int:
        with self._lock:
            if self._records[task_id].seq != expected_seq:
                raise SequenceConflict(task_id)
            log = self._logs[task_id]
            if isinstance(log, tuple):  # a finished task changes no more; whoever did this gets it
                log = self._logs[task_id] = thaw_log(log)
            log.extend(events)
            # Records are replaced, never mutated: readers may hold the old one.
            # The new one folds its streamed chunks when first read.
            self._records[task_id] = record
            if record.state.terminal:
                self._ended(task_id)
        self.notifier.notify(task_id)
        return record.seq

    def _ended(self, task_id: str) -> None:
        """A task is terminal now: freeze the one that ended :attr:`freeze_lag` tasks
        ago, unless a read froze it already (under the lock)."""
        self._finished.append(task_id)
        while len(self._finished) > self.freeze_lag:
            self._freeze(self._finished.popleft())

    def _freeze(self, task_id: str) -> None:
        record, log = self._records.get(task_id), self._logs.get(task_id)
        if (not self.freezes or record is None or log is None or isinstance(log, tuple)
                or task_id in self._unfrozen):
            return  # purged, frozen already, or staying objects
        try:
            if len(log) > FREEZE_MAX_EVENTS:
                raise ValueError("too long to freeze in one step")
            frozen, frozen_log = FrozenRecord(record), freeze_log(log)
        except ValueError:  # too long, or something marshal cannot copy exactly
            self._unfrozen.add(task_id)
            return
        self._records[task_id], self._logs[task_id] = frozen, frozen_log

    def read(self, task_id: str, after_seq: int) -> List[LogEntry]:
        log = self._logs.get(task_id, [])
        start = max(after_seq, 0)
        stop = start + self.read_slice
        record = self._records.get(task_id)
        if isinstance(log, tuple):
            events = (thaw_log(log, start, stop) if record is not None and record.seq > start
                      else [])
        else:
            events = log[start:stop]
            if events and stop >= len(log) and record is not None and record.state.terminal:
                # The reader has the last events in hand: freeze while they are warm.
                with self._lock:
                    self._freeze(task_id)
        return [LogEntry(seq, event) for seq, event in enumerate(events, start + 1)]

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        with self.notifier.ticket(task_id) as ticket:
            record = self._records.get(task_id)
            if record is None or record.seq > after_seq or record.state.terminal:
                return
            ticket.wait(timeout)

    def list_tasks(self, query: TaskQuery) -> TaskPage:
        # Filtered and sorted on what frozen records keep at hand; the page is thawed.
        page = select_page(list(self._records.values()), query)
        page.records = [record.thawed() if isinstance(record, FrozenRecord) else record
                        for record in page.records]
        return page

    def task_ids(self) -> List[str]:
        return list(self._records)

    # -- coordination: DictCoordination's, over these dicts under the store's lock

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

    def purge(self, updated_before: str, scope: Optional[str] = None) -> int:
        with self._lock:
            gone = [task_id for task_id, record in self._records.items()
                    if record.state.terminal and record.updated_at < updated_before
                    and in_scope(record.tenant, scope)]
            for task_id in gone:
                del self._records[task_id]
                self._logs.pop(task_id, None)
                self._unfrozen.discard(task_id)
                self._forget_coordination(task_id)
            for key in self._expired_claims():  # idempotency keys, mostly
                del self._claims[key]
        return len(gone)
