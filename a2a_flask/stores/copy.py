"""Copying tasks from one store to another (``flask a2a copy-store``).

A task is copied as its whole event log, entry by entry with the same
sequence numbers, so that a server on the target replays a stream from any
``Last-Event-ID`` as the source did; with its tenant, owner, dialect and
creation time, and its webhooks with their delivery cursors.  The target gets
the log through the contract's own ``create`` and ``append``, the last append
carrying the source's record, so that the target's snapshot is the source's
(its history trimmed as the source's runtime trimmed it).

Copying is idempotent and resumable: a task whose log the target already
holds to the same head is left as it is; one whose log the target holds only
a beginning of (an earlier copy was interrupted, or the source moved on since)
gets the rest; webhooks the target lacks are added, those it has are left
alone (a server on the target may have delivered further since).  A target
task of the same id whose log is not a beginning of the source's is another
task: it is reported, never overwritten.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

from ..protocol.models import Task
from .base import Event, SequenceConflict, StoreError, TaskRecord, TaskStore

#: Events per append: a task of 100,000 streamed chunks is copied in slices.
BATCH = 500


class Outcome(enum.Enum):
    """What copying one task did."""

    COPIED = "copied"
    RESUMED = "resumed"  # the target held the start of its log; the rest was appended
    PRESENT = "present"  # the target held all of it already
    CONFLICT = "conflict"  # the target holds another task under this id
    GONE = "gone"  # the source lost it meanwhile (purged)


@dataclass
class TaskCopy:
    """One task's copy: what happened, events appended and webhooks added."""

    outcome: Outcome
    events: int = 0
    webhooks: int = 0
    reason: str = ""


@dataclass
class CopyTally:
    """The counts of a whole copy."""

    outcomes: Dict[Outcome, int] = field(
        default_factory=lambda: {outcome: 0 for outcome in Outcome})
    events: int = 0
    webhooks: int = 0
    conflicts: List[str] = field(default_factory=list)

    def add(self, task_id: str, result: TaskCopy) -> None:
        self.outcomes[result.outcome] += 1
        self.events += result.events
        self.webhooks += result.webhooks
        if result.outcome is Outcome.CONFLICT:
            self.conflicts.append(f"{task_id} ({result.reason})")


def copy_task(source: TaskStore, target: TaskStore, task_id: str) -> TaskCopy:
    """Copy one task (see the module docstring); raises :class:`StoreError` for a
    source log the contract cannot rebuild (it does not start with the task)."""
    for _ in range(3):
        try:
            return _copy(source, target, task_id)
        except SequenceConflict:
            continue  # someone wrote the task on the target meanwhile: look again
    return TaskCopy(Outcome.CONFLICT, reason="the target's copy kept changing during the copy")


def _copy(source: TaskStore, target: TaskStore, task_id: str) -> TaskCopy:
    record = source.load(task_id)
    if record is None:
        return TaskCopy(Outcome.GONE)
    head = target.head(task_id)
    events = 0
    if head is None:
        current = _create(source, target, task_id, record)
        events, outcome = 1, Outcome.COPIED
    else:
        current_or_reason = _resumable(source, target, task_id, record, head[0])
        if isinstance(current_or_reason, str):
            return TaskCopy(Outcome.CONFLICT, reason=current_or_reason)
        current = current_or_reason
        outcome = Outcome.PRESENT if current.seq == record.seq else Outcome.RESUMED
    batch: List[Event] = []
    for entry in source.entries(task_id, current.seq, through=record.seq):
        batch.append(entry.event)
        if entry.seq == record.seq or len(batch) == BATCH:
            after = record if entry.seq == record.seq else current.after(batch)
            target.append(task_id, current.seq, batch, after)
            events += len(batch)
            current, batch = after, []
    if current.seq != record.seq:
        raise StoreError(f"task {task_id}: the source's log ends at {current.seq}, "
                         f"before its head {record.seq}")
    have = {t.config.id for t in target.push_targets(task_id)}
    added = [t for t in source.push_targets(task_id) if t.config.id not in have]
    for push_target in added:
        target.put_push_target(task_id, push_target)
    return TaskCopy(outcome, events, len(added))


def _create(source: TaskStore, target: TaskStore, task_id: str,
            record: TaskRecord) -> TaskRecord:
    """Create the task on the target from the first entry of the source's log."""
    first = next(iter(source.entries(task_id, 0, through=record.seq)), None)
    if first is None or not isinstance(first.event, Task) or first.event.id != task_id:
        raise StoreError(f"task {task_id}: its log does not start with the task, so it "
                         "cannot be copied entry by entry")
    start = TaskRecord(first.event, first.seq, record.tenant, record.owner, record.dialect,
                       record.created_at)
    target.create(start, first.event)
    return start


def _resumable(source: TaskStore, target: TaskStore, task_id: str, record: TaskRecord,
               target_seq: int) -> Union[TaskRecord, str]:
    """The target's record when its log is a beginning of the source's; else why not."""
    if target_seq > record.seq:
        return f"the target's log is longer ({target_seq} events, the source's {record.seq})"
    mine = target.load(task_id)
    if mine is None:
        raise SequenceConflict(task_id)  # purged meanwhile: start again
    if (mine.tenant, mine.owner) != (record.tenant, record.owner):
        return "the target's task belongs to another caller"
    if _entry(target, task_id, target_seq) != _entry(source, task_id, target_seq):
        return f"the logs differ at event {target_seq}"
    return mine


def _entry(store: TaskStore, task_id: str, seq: int) -> Optional[Event]:
    for entry in store.entries(task_id, seq - 1, through=seq):
        return entry.event
    return None
