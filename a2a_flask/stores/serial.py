"""Stored form of tasks, events and push targets for stores outside the process.

JSON in the 1.0 wire shape (an event is a StreamResponse object), so that a
store file or a Redis database can be read by any version of this library,
on any host, and by a human with ``sqlite3`` or ``redis-cli``.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Type

from ..protocol.codec import decode, encode
from ..protocol.models import Message, Task, TaskArtifactUpdateEvent, TaskPushNotificationConfig, TaskStatusUpdateEvent
from .base import Event, PushTarget

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


def dump_event(event: Event) -> str:
    return dumps(event_body(event))


def load_event(text: str) -> Event:
    return event_from_body(json.loads(text))


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
