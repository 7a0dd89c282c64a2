"""Stored form of tasks, events and push targets for stores outside the process.

JSON in the 1.0 wire shape (an event is a StreamResponse object), so that a
store file or a Redis database can be read by any version of this library,
on any host, and by a human with ``sqlite3`` or ``redis-cli``; and so that a
1.0 stream sends a stored event's text as it is (:class:`StoredEntry`).
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterator, Optional, Sequence, Union, overload

from ..protocol.codec import decode, encode
from ..protocol.events import STREAM_EVENTS, STREAM_MEMBERS
from ..protocol.jsontext import STREAM_HEADS, stream_response_text
from ..protocol.models import Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig
from .base import Event, LogEntry, PushTarget


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def load_event(stored: Union[str, bytes, Dict[str, Any]]) -> Event:
    """An event as a store keeps it: the JSON text of its StreamResponse (or that
    JSON parsed, as shelve files of 0.2's development kept it), whose one member
    names its kind."""
    ((member, value),) = (stored if isinstance(stored, dict) else json.loads(stored)).items()
    event: Event = decode(STREAM_EVENTS[member], value)
    return event


#: How a stored chunk begins: a StreamResponse whose one member is an artifact update.
_CHUNK_MEMBER = STREAM_MEMBERS[TaskArtifactUpdateEvent]
_CHUNK_HEAD = STREAM_HEADS[TaskArtifactUpdateEvent]
_CHUNK_HEAD_BYTES = _CHUNK_HEAD.encode()


class StoredEntry(LogEntry):
    """A log entry as a store read it (a StreamResponse object as JSON text, bytes of
    it, or its parsed JSON), its event decoded when first looked at.

    A 1.0 stream sends the stored text as it is (:attr:`stream_response`), and
    whether the event is a chunk shows in its first bytes: a chunk of a stream
    in 1.0 is never decoded.
    """

    __slots__ = ("_stored",)

    def __init__(self, seq: int, stored: Any) -> None:
        super().__init__(seq, None)  # type: ignore[arg-type]  # decoded on demand
        self._stored = stored

    @property
    def event(self) -> Event:
        if self._event is None:
            self._event = load_event(self._stored)
        return self._event

    @property
    def chunk(self) -> bool:
        stored = self._stored
        if isinstance(stored, str):
            return stored.startswith(_CHUNK_HEAD)
        if isinstance(stored, bytes):
            return stored.startswith(_CHUNK_HEAD_BYTES)
        if isinstance(stored, dict):
            return _CHUNK_MEMBER in stored
        return super().chunk  # a stored form of another kind: from its decoded event

    @property
    def stored_bytes(self) -> int:
        """The length of the stored text (what keeping this entry costs, before its
        event is decoded); 0 for a stored form of another kind."""
        stored = self._stored
        return len(stored) if isinstance(stored, (str, bytes)) else 0

    @property
    def stream_response(self) -> Optional[str]:
        stored = self._stored
        if isinstance(stored, str):
            return stored
        if isinstance(stored, bytes):
            return stored.decode("utf-8")
        return None


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

    __slots__ = ("_seqs", "_stored")

    def __init__(self, seqs: Sequence[int], stored: Sequence[Any]) -> None:
        self._seqs = seqs
        self._stored = stored

    def __len__(self) -> int:
        return len(self._stored)

    @overload
    def __getitem__(self, index: int) -> LogEntry: ...

    @overload
    def __getitem__(self, index: slice) -> "EncodedEntries": ...

    def __getitem__(self, index: Union[int, slice]) -> Union[LogEntry, "EncodedEntries"]:
        if isinstance(index, slice):
            return EncodedEntries(self._seqs[index], self._stored[index])
        return StoredEntry(self._seqs[index], self._stored[index])

    def __iter__(self) -> Iterator[LogEntry]:
        for seq, stored in zip(self._seqs, self._stored):
            yield StoredEntry(seq, stored)

    def __repr__(self) -> str:
        return f"EncodedEntries({len(self)} entries from seq {self._seqs[0] if self else None})"


def encoded_entries(rows: Sequence[Sequence[Any]]) -> Sequence[LogEntry]:
    """:class:`EncodedEntries` of ``(seq, stored event)`` rows, or ``[]`` for none."""
    if not rows:
        return []
    return EncodedEntries([row[0] for row in rows], [row[1] for row in rows])


def dump_event(event: Event) -> str:
    """An event as the JSON text of its StreamResponse (what :func:`load_event` reads)."""
    return stream_response_text(event)


def task_json(task: Task) -> Dict[str, Any]:
    """A task snapshot as stores keep it: its 1.0 JSON, with its generation (the A2A
    1.1 draft's ``generation``, docs/generations.rst) where it is known.  A member
    of the JSON text, not a column: no store's tables change for it."""
    body: Dict[str, Any] = encode(task)
    if task.generation:
        body["generation"] = task.generation
    return body


def task_of(body: Dict[str, Any]) -> Task:
    """What :func:`task_json` made, read back (a snapshot stored before generations
    were kept has none: 0, counted again from its log where it is needed)."""
    task = decode(Task, body)
    generation = body.get("generation")
    if type(generation) is int and generation > 0:
        task.generation = generation
    return task


def dump_task(task: Task) -> str:
    return dumps(task_json(task))


def load_task(text: str) -> Task:
    return task_of(json.loads(text))


def dump_target(target: PushTarget) -> str:
    """A webhook without its delivery cursor (stores keep that where it can change alone)."""
    return dumps({"config": encode(target.config), "dialect": target.dialect,
                  "owner": target.owner})


def load_target(text: str, delivered_seq: int = 0, failures: int = 0,
                gave_up: bool = False) -> PushTarget:
    body = json.loads(text)
    return PushTarget(decode(TaskPushNotificationConfig, body["config"]), body["dialect"],
                      body["owner"], delivered_seq, failures, gave_up)
