"""What a task holds, in bytes, and the limit on it (``A2A_MAX_TASK_BYTES``).

A task holds its messages (the history and the status message) and its
artifacts.  Their size is counted as content: text, URLs, names and ids in
UTF-8 bytes, an inline file as its base64 length, a data part and any
metadata as their JSON; about what the task takes in a store, without the
few dozen bytes of framing per message and part.  The runtime keeps the
count on each record it writes (:attr:`~a2a_flask.stores.base.TaskRecord.held`)
and adds what each change brings, so that checking a streamed chunk costs
the chunk, not the task.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterable, List, Optional

from ..protocol.errors import TaskTooLargeError
from ..protocol.events import Event
from ..protocol.models import (
    Artifact,
    Message,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatusUpdateEvent,
    UNSET,
)


def _text(value: str) -> int:
    """UTF-8 bytes of a string (its length when it is ASCII, which Python knows)."""
    return len(value) if value.isascii() else len(value.encode("utf-8", "surrogatepass"))


def _json(value: Any) -> int:
    """Bytes of a JSON value (metadata, a data part) as it would be stored."""
    if value is None or value is UNSET:
        return 0
    return _text(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str))


def _strings(values: Iterable[str]) -> int:
    return sum(_text(value) for value in values)


def part_size(part: Part) -> int:
    """The bytes one part holds."""
    if part.text is not None:
        size = _text(part.text)
    elif part.raw is not None:
        size = (len(part.raw) + 2) // 3 * 4  # stored as base64
    elif part.url is not None:
        size = _text(part.url)
    else:
        size = _json(part.data)
    return size + _text(part.media_type) + _text(part.filename) + _json(part.metadata)


def message_size(message: Optional[Message]) -> int:
    """The bytes a message holds (0 for None)."""
    if message is None:
        return 0
    return (sum(part_size(part) for part in message.parts) + _text(message.message_id)
            + _json(message.metadata) + _strings(message.extensions)
            + _strings(message.reference_task_ids))


def _artifact_members(artifact: Artifact) -> int:
    """The bytes of an artifact's members besides its id and parts."""
    return (_text(artifact.name) + _text(artifact.description) + _json(artifact.metadata)
            + _strings(artifact.extensions))


def _parts_size(parts: Iterable[Part]) -> int:
    return sum(part_size(part) for part in parts)


def artifact_size(artifact: Artifact) -> int:
    """The bytes an artifact holds."""
    return (_parts_size(artifact.parts) + _text(artifact.artifact_id)
            + _artifact_members(artifact))


def task_size(task: Task) -> int:
    """The bytes a task holds: its history, status message, artifacts and metadata."""
    return (sum(message_size(message) for message in task.history)
            + message_size(task.status.message)
            + sum(artifact_size(artifact) for artifact in task.artifacts)
            + _json(task.metadata))


def growth(task: Task, events: List[Event], *, whole: bool = True) -> Optional[int]:
    """How many bytes ``events`` add to ``task`` (negative when they replace more),
    or None when one of them is a whole task (then measure the result instead).

    A chunk appended to an artifact adds its parts; a new artifact, a message,
    or a status's message adds its size (the status message before it moves to
    the history, where it was counted already).  An artifact that replaces
    another takes the other's size off, so ``task`` must then have its chunks
    folded in (see :func:`needs_folded`).  With ``whole`` false, ``task`` is an
    outline that may lack artifacts its latest chunks made: a chunk appended to
    an artifact it does not have then counts its parts and members but not its
    id (it is more likely an artifact the outline lacks than a new one).
    """
    added = 0
    bases = {artifact.artifact_id: artifact for artifact in task.artifacts}
    placed: Dict[str, int] = {}  # the size of each artifact these events put in place
    appended: Dict[str, int] = {}  # bytes these events appended to an artifact of bases
    for event in events:
        if isinstance(event, TaskArtifactUpdateEvent):
            incoming = event.artifact
            key = incoming.artifact_id
            known = key in placed or key in bases
            if event.append and known:
                size = _parts_size(incoming.parts)
                if key in placed:
                    placed[key] += size
                else:
                    appended[key] = appended.get(key, 0) + size
                added += size
                continue
            if event.append and not whole:
                size = _parts_size(incoming.parts) + _artifact_members(incoming)
            else:
                size = artifact_size(incoming)
            if key in placed:
                added -= placed[key]
            elif key in bases:
                added -= artifact_size(bases[key]) + appended.pop(key, 0)
            added += size
            placed[key] = size
        elif isinstance(event, TaskStatusUpdateEvent):
            added += message_size(event.status.message)
        elif isinstance(event, Message):
            added += message_size(event)
        else:
            return None
    return added


def needs_folded(events: List[Event]) -> bool:
    """Whether :func:`growth` of ``events`` needs the task's artifacts whole (an
    artifact may be replaced), rather than only its outline."""
    return any(isinstance(event, TaskArtifactUpdateEvent) and not event.append
               for event in events)


def too_large(held: int, limit: int, *, caller: bool) -> TaskTooLargeError:
    """The error for a change that would make a task hold ``held`` bytes."""
    text = (f"The task would hold {held} bytes, more than the {limit} a task may hold "
            "(A2A_MAX_TASK_BYTES)")
    violations = [("message.parts", f"would make the task hold {held} bytes; at most {limit}")]
    return TaskTooLargeError(text, metadata={"limit": limit, "size": held},
                             violations=violations if caller else ())
