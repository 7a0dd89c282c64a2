"""A task's log: its events, the entries a store reads and a stream sends, and
folding events into task snapshots (what a task looks like after each event).

Pure functions of the models, shared by the engine (which stores the snapshot
with every append) and any store that rebuilds a snapshot from its log.
"""
from __future__ import annotations

from typing import Any, Dict, List, MutableSequence, Optional, Sequence, TypeVar, Union

from .models import (
    Artifact,
    Message,
    Part,
    PartList,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
)

#: What a task's event log holds.  A user ``Message`` records a turn appended to
#: the history; streams do not show it.
Event = Union[Task, Message, TaskStatusUpdateEvent, TaskArtifactUpdateEvent]

#: The member of a 1.0 StreamResponse object that holds each kind of event, and the
#: kind of event each member holds.
STREAM_MEMBERS: Dict[type, str] = {
    Task: "task",
    Message: "message",
    TaskStatusUpdateEvent: "statusUpdate",
    TaskArtifactUpdateEvent: "artifactUpdate",
}
STREAM_EVENTS: Dict[str, type] = {member: cls for cls, member in STREAM_MEMBERS.items()}

M = TypeVar("M")

#: An artifact with more parts than this keeps them in a :class:`~.models.PartList`
#: once chunks are appended to it.  Below it, a list costs less: compacting a part and
#: making it again when read cost more than the collector's walks over a short
#: task's parts, which it holds for a few of them at most.
COMPACT_PARTS = 1024


class LogEntry:
    """One event of a task's log with its sequence number: what a store reads, and
    what a stream sends (the sequence number is the SSE event id)."""

    __slots__ = ("seq", "_event")

    def __init__(self, seq: int, event: Event) -> None:
        self.seq = seq
        self._event = event

    @property
    def event(self) -> Event:
        return self._event

    @property
    def chunk(self) -> bool:
        """Whether the event is an artifact chunk: it changes no status, so it ends no
        stream (a store's entry may tell without decoding its event)."""
        return type(self.event) is TaskArtifactUpdateEvent

    @property
    def stream_response(self) -> Optional[str]:
        """The event as the JSON text of a 1.0 StreamResponse, where a store read it
        in that form (a 1.0 stream then sends it as it is); otherwise None."""
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogEntry):
            return NotImplemented
        return self.seq == other.seq and self.event == other.event

    __hash__ = None  # type: ignore[assignment]  # equal by value, and not immutable

    def __repr__(self) -> str:
        return f"LogEntry(seq={self.seq}, event={self.event!r})"


def _replaced(model: M, **changes: Any) -> M:
    """A shallow copy of a model with some members changed.

    What ``dataclasses.replace`` does for these plain dataclasses (no
    ``__post_init__``, no init-only fields), at half its cost: it runs once or
    twice per event, and a streamed artifact is many events.
    """
    copy = object.__new__(type(model))
    members = copy.__dict__
    members.update(model.__dict__)
    members.update(changes)
    return copy


def moves_generation(event: Event) -> bool:
    """Whether ``event`` is a mutation of the A2A 1.1 draft's task generation
    (docs/generations.rst): every event of a task's log but a caller's message, which
    changes neither the task's state nor its artifacts (and no stream shows it)."""
    return not isinstance(event, Message)


def entry_moves_generation(entry: LogEntry) -> bool:
    """:func:`moves_generation` for a log entry: a chunk does (and is not decoded to tell)."""
    return entry.chunk or moves_generation(entry.event)


def _after(task: Task, count: int = 1) -> int:
    """The generation after ``count`` mutations of ``task`` (0 stays 0: not known)."""
    return task.generation + count if task.generation else 0


def apply_event(task: Task, event: Event) -> Task:
    """The snapshot that results from ``event``; ``task`` itself is left untouched.

    The snapshot's :attr:`~.models.Task.generation` moves with it: +1 for every event
    but a caller's message (:func:`moves_generation`), a whole task replacing the
    task (a restart) included."""
    if isinstance(event, Task):
        return _replaced(event, generation=_after(task)) if task.generation else event
    if isinstance(event, Message):
        # The agent's last word (say, its question) comes before the user's answer.
        return _replaced(task, history=_with_status_message(task) + [event],
                          status=_replaced(task.status, message=None))
    if isinstance(event, TaskStatusUpdateEvent):
        # The previous status message becomes part of the conversation.
        return _replaced(task, status=event.status, history=_with_status_message(task),
                         generation=_after(task))
    if isinstance(event, TaskArtifactUpdateEvent):
        return _replaced(task, artifacts=_merge_artifact(task.artifacts, event),
                         generation=_after(task))
    raise TypeError(f"not a task event: {event!r}")


def apply_events(task: Task, events: Sequence[Event]) -> Task:
    """The snapshot after ``events`` in order: what :func:`apply_event` makes one at a
    time, except that a run of chunks appended to one artifact joins it as one chunk
    (one copy of the task and of the artifact for the run, not one per chunk)."""
    index, count = 0, len(events)
    while index < count:
        event = events[index]
        task = apply_event(task, event)
        index += 1
        if not isinstance(event, TaskArtifactUpdateEvent):
            continue
        artifact_id = event.artifact.artifact_id
        parts: List[Part] = []
        joined = 0
        while index < count:
            later = events[index]
            if not (isinstance(later, TaskArtifactUpdateEvent) and later.append
                    and later.artifact.artifact_id == artifact_id):
                break
            parts += later.artifact.parts
            index += 1
            joined += 1
        if parts:  # the artifact exists now: the run's parts join it as one chunk
            task = apply_event(task, TaskArtifactUpdateEvent(
                event.task_id, event.context_id, Artifact(artifact_id=artifact_id, parts=parts),
                append=True))
            joined -= 1  # (that one apply counted one)
        if joined and task.generation:  # each chunk is one event: one generation each
            task = _replaced(task, generation=task.generation + joined)
    return task


def _with_status_message(task: Task) -> List[Message]:
    message = task.status.message
    return task.history if message is None else task.history + [message]


def _merge_artifact(artifacts: List[Artifact], event: TaskArtifactUpdateEvent) -> List[Artifact]:
    incoming = event.artifact
    for index, existing in enumerate(artifacts):
        if existing.artifact_id == incoming.artifact_id:
            if event.append:
                parts = existing.parts
                joined: MutableSequence[Part]
                if isinstance(parts, PartList) or len(parts) + len(incoming.parts) > COMPACT_PARTS:
                    joined = PartList(parts)  # a long stream's parts, kept while its task runs
                    joined.extend(incoming.parts)
                else:
                    joined = [*parts, *incoming.parts]
                merged = _replaced(existing, parts=joined)
            else:
                merged = incoming
            return artifacts[:index] + [merged] + artifacts[index + 1:]
    return artifacts + [incoming]
