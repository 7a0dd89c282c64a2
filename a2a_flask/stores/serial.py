"""Stored form of tasks, events and push targets for stores outside the process.

JSON in the 1.0 wire shape (an event is a StreamResponse object), so that a
store file or a Redis database can be read by any version of this library,
on any host, and by a human with ``sqlite3`` or ``redis-cli``.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, Iterator, Sequence, Type, Union, overload

from ..protocol.codec import decode, encode
from ..protocol.models import Message, Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskStatusUpdateEvent
from .base import Event, LogEntry, PushTarget

#: The kinds of event a log holds, by the StreamResponse member that names each.
EVENT_KINDS: Dict[type, str] = {
    Task: "task",
    Message: "message",
    TaskStatusUpdateEvent: "statusUpdate",
    TaskArtifactUpdateEvent: "artifactUpdate",
}
EVENT_TYPES: Dict[str, Type[Any]] = {kind: cls for cls, kind in EVENT_KINDS.items()}


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def event_body(event: Event) -> Dict[str, Any]:
    """An event as a JSON object (a StreamResponse: its kind names its one member)."""
    return {EVENT_KINDS[type(event)]: encode(event)}


def event_from_body(body: Dict[str, Any]) -> Event:
    """The inverse of :func:`event_body`."""
    ((kind, value),) = body.items()
    event: Event = decode(EVENT_TYPES[kind], value)
    return event


def load_event(text: Union[str, bytes]) -> Event:
    return event_from_body(json.loads(text))


class EncodedEntries(Sequence[LogEntry]):
    """A slice of a log as the store keeps it (sequence numbers and each
    event's JSON text, or its parsed JSON), each entry decoded when it is
    looked at.

    A reader takes a slice and sends its events one at a time.  Decoded all at
    once, the slice's objects (an entry, an event, its artifact, a list, a
    part: a thousand and more) are alive together, and Python's collector
    moves what it finds alive to its older generations; the more it moves,
    the more often it runs a full collection, which walks every object of the
    process, every part of a long task among them.  Text is not something the
    collector follows.  Reads that find nothing return a plain empty list.
    """

    __slots__ = ("_seqs", "_stored", "_decode")

    def __init__(self, seqs: Sequence[int], stored: Sequence[Any],
                 decode: Callable[[Any], Event] = load_event) -> None:
        self._seqs = seqs
        self._stored = stored
        self._decode = decode

    def __len__(self) -> int:
        return len(self._stored)

    @overload
    def __getitem__(self, index: int) -> LogEntry: ...

    @overload
    def __getitem__(self, index: slice) -> "EncodedEntries": ...

    def __getitem__(self, index: Union[int, slice]) -> Union[LogEntry, "EncodedEntries"]:
        if isinstance(index, slice):
            return EncodedEntries(self._seqs[index], self._stored[index], self._decode)
        return LogEntry(self._seqs[index], self._decode(self._stored[index]))

    def __iter__(self) -> Iterator[LogEntry]:
        decode = self._decode
        for seq, stored in zip(self._seqs, self._stored):
            yield LogEntry(seq, decode(stored))

    def __repr__(self) -> str:
        return f"EncodedEntries({len(self)} entries from seq {self._seqs[0] if self else None})"


def encoded_entries(rows: Sequence[Sequence[Any]],
                    decode: Callable[[Any], Event] = load_event) -> Sequence[LogEntry]:
    """:class:`EncodedEntries` of ``(seq, stored event)`` rows, or ``[]`` for none."""
    if not rows:
        return []
    return EncodedEntries([row[0] for row in rows], [row[1] for row in rows], decode)


def dump_event(event: Event) -> str:
    return dumps(event_body(event))


def dump_task(task: Task) -> str:
    return dumps(encode(task))


def load_task(text: str) -> Task:
    return decode(Task, json.loads(text))


def dump_target(target: PushTarget) -> str:
    """A webhook without its delivery cursor (stores keep that where it can change alone)."""
    return dumps({"config": encode(target.config), "dialect": target.dialect,
                  "owner": target.owner})


def load_target(text: str, delivered_seq: int = 0, failures: int = 0,
                gave_up: bool = False) -> PushTarget:
    body = json.loads(text)
    return PushTarget(decode(TaskPushNotificationConfig, body["config"]), body["dialect"],
                      body["owner"], delivered_seq, failures, gave_up)
