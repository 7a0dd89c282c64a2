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

A source is not trusted (a backup handed over, files of unknown origin):
``flask a2a copy-store`` opens it read-only (:mod:`.readonly`) and passes an
:class:`Admission` that applies the API's checks.  Every task is checked
whole, its record, every event of its log and every webhook, before anything
of it is written: a task that fails is skipped, reported with why
(:attr:`Outcome.REFUSED`), and the copy goes on with the next.
"""
from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Union

from ..protocol.models import Task
from .base import Event, PushTarget, SequenceConflict, StoreError, TaskRecord, TaskStore

#: Events per append: a task of 100,000 streamed chunks is copied in slices.
BATCH = 500


class Outcome(enum.Enum):
    """What copying one task did."""

    COPIED = "copied"
    RESUMED = "resumed"  # the target held the start of its log; the rest was appended
    PRESENT = "present"  # the target held all of it already
    CONFLICT = "conflict"  # the target holds another task under this id
    GONE = "gone"  # the source lost it meanwhile (purged)
    REFUSED = "refused"  # the admission refused something of it: nothing was written


class Admission:
    """What a copy lets into the target.  Each method returns why it refuses
    what it is given, or None to let it in; this one lets everything in (a
    copy between stores the caller trusts)."""

    def task(self, task_id: str, record: TaskRecord) -> Optional[str]:
        """The task listed under ``task_id``, as the source's record holds it."""
        return None

    def event(self, task_id: str, seq: int, event: Event) -> Optional[str]:
        """Entry ``seq`` of the task's log."""
        return None

    def webhook(self, task_id: str, target: PushTarget) -> Optional[str]:
        """One of the task's webhooks."""
        return None


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
    #: Tasks the admission refused, each ``id (why)``.
    refused: List[str] = field(default_factory=list)

    def add(self, task_id: str, result: TaskCopy) -> None:
        self.outcomes[result.outcome] += 1
        self.events += result.events
        self.webhooks += result.webhooks
        if result.outcome is Outcome.CONFLICT:
            self.conflicts.append(f"{task_id} ({result.reason})")
        elif result.outcome is Outcome.REFUSED:
            self.refused.append(f"{task_id} ({result.reason})")


def copy_task(source: TaskStore, target: TaskStore, task_id: str,
              admission: Optional[Admission] = None) -> TaskCopy:
    """Copy one task (see the module docstring), if ``admission`` lets all of it in;
    raises :class:`StoreError` for a source log the contract cannot rebuild (it
    does not start with the task)."""
    for _ in range(3):
        try:
            return _copy(source, target, task_id, admission or Admission())
        except SequenceConflict:
            continue  # someone wrote the task on the target meanwhile: look again
    return TaskCopy(Outcome.CONFLICT, reason="the target's copy kept changing during the copy")


def _refusal(source: TaskStore, task_id: str, record: TaskRecord,
             admission: Admission) -> Optional[str]:
    """Why ``admission`` refuses the task, reading its whole log (before anything of
    it is written: a task is copied whole or not at all), or None."""
    if record.task.id != task_id:
        return f"its record holds the task {record.task.id!r}"
    why = admission.task(task_id, record)
    if why:
        return why
    for entry in source.entries(task_id, 0, through=record.seq):
        named = entry.event.id if isinstance(entry.event, Task) else entry.event.task_id
        if named not in ("", task_id):
            return f"event {entry.seq} belongs to the task {named!r}"
        why = admission.event(task_id, entry.seq, entry.event)
        if why:
            return f"event {entry.seq}: {why}"
    for push_target in source.push_targets(task_id):
        why = admission.webhook(task_id, push_target)
        if why:
            return f"webhook: {why}"
    return None


def _copy(source: TaskStore, target: TaskStore, task_id: str,
          admission: Admission) -> TaskCopy:
    record = source.load(task_id)
    if record is None:
        return TaskCopy(Outcome.GONE)
    why = _refusal(source, task_id, record, admission)
    if why:
        return TaskCopy(Outcome.REFUSED, reason=why)
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
    task = first.event
    if not task.generation and first.seq == 1 and record.generation:
        # The log's first entry is the task at generation 1 (its stored form does not
        # say it): the copy's snapshots count on from there, as the source's do (a
        # source that keeps none is copied as it is; docs/generations.rst).
        task = dataclasses.replace(task, generation=1)
    start = TaskRecord(task, first.seq, record.tenant, record.owner, record.dialect,
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
