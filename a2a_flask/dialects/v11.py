"""The A2A 1.1 draft: 1.0 plus task generations (docs/generations.rst).

The draft's only change over 1.0.1 is ``generation``: on every Task and on every
status and artifact event it sends, ``currentGeneration`` on GetTask (a long-poll)
and ``configuration.ifGenerationMatch`` on a send.  So this dialect is 1.0's methods,
parsed and written as 1.0 does, with those members added by hand: the 1.0 codec
never reads nor writes them (they are :data:`~a2a_flask.protocol.models.DRAFT`
members), and 1.0 answers stay byte for byte what they were.  Served only by agents
that serve drafts (``A2A_PROTOCOL_DRAFT``); tasks and webhooks it makes record 1.0,
whose stored form and pushes they keep.

``generation`` is an int64, written as ProtoJSON writes one (a decimal string);
either a string or a number is read.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Dict, Optional

from ..protocol import models as m
from ..protocol.calls import StreamContext
from ..protocol.errors import InvalidParamsError
from ..protocol.events import LogEntry
from ..protocol.jsontext import JSONText, encode_text
from ..protocol.operations import OPERATIONS
from . import v1
from .registry import Dialect, Method, params_of, register

VERSION = "1.1"

_INT64 = re.compile(r"^[0-9]{1,19}$")


def non_negative_int64(raw: Any, field: str) -> int:
    """A non-negative int64 from JSON: a number or a decimal string (ProtoJSON's form);
    InvalidParams (-32602) naming ``field`` for anything else."""
    value: Optional[int] = None
    if type(raw) is int:
        value = raw
    elif isinstance(raw, str) and _INT64.match(raw):
        value = int(raw)
    if value is None or not 0 <= value < 2 ** 63:
        raise InvalidParamsError(f"{field} must be a non-negative 64-bit integer",
                                 violations=[(field, "must be a non-negative 64-bit integer")])
    return value


def _member(raw: Any, *names: str) -> Any:
    """A member of a JSON object by its camelCase or snake_case name (None: absent)."""
    if not isinstance(raw, dict):
        return None
    for name in names:
        if raw.get(name) is not None:
            return raw[name]
    return None


def add_draft_members(parsed: Any, raw: Dict[str, Any]) -> None:
    """Read the draft's request members from ``raw`` (the params, body or query a
    1.0 parse made ``parsed`` from) into ``parsed``."""
    if isinstance(parsed, m.GetTaskRequest):
        value = _member(raw, "currentGeneration", "current_generation")
        if value is not None:
            parsed.current_generation = non_negative_int64(value, "currentGeneration")
    elif isinstance(parsed, m.SendMessageRequest) and parsed.configuration is not None:
        value = _member(_member(raw, "configuration"), "ifGenerationMatch", "if_generation_match")
        if value is not None:
            parsed.configuration.if_generation_match = non_negative_int64(
                value, "configuration.ifGenerationMatch")


def _generation_member(text: str, generation: int) -> str:
    """A JSON object's text with ``"generation"`` as its last member (0: left out)."""
    if not generation:
        return text
    return text[:-1] + ("," if len(text) > 2 else "") + f'"generation":"{generation}"}}'


def task_text(task: m.Task) -> JSONText:
    """A Task as 1.0 writes it, with its generation."""
    return JSONText(_generation_member(encode_text(task), task.generation))


def render_send_result(result: Any) -> JSONText:
    """SendMessageResponse: a Task with its generation, or a Message as 1.0 writes it."""
    if isinstance(result, m.Task):
        return JSONText('{"task":' + task_text(result) + "}")
    return v1.render_send_result(result)


def render_task_list(result: m.ListTasksResponse) -> JSONText:
    """ListTasksResponse: each Task with its generation (``tasks`` is its first member,
    always written)."""
    rest = encode_text(m.ListTasksResponse([], result.next_page_token, result.page_size,
                                           result.total_size))
    assert rest.startswith('{"tasks":[]')
    tasks = ",".join(task_text(task) for task in result.tasks)
    return JSONText('{"tasks":[' + tasks + "]" + rest[len('{"tasks":[]'):])


def _render_task(result: Any) -> JSONText:
    return task_text(result)


RENDERERS: Dict[str, Callable[[Any], Any]] = {
    "SendMessage": render_send_result, "GetTask": _render_task, "CancelTask": _render_task,
    "ListTasks": render_task_list,
}


def stream_renderer(context: StreamContext) -> Callable[[Any], Any]:
    """A stream's events with their generations: the first from its opening Task (or,
    resuming after ``Last-Event-ID``, counted from the log), then +1 per event (a
    stream carries every event but a caller's messages, which move no generation)."""
    generation = 0

    def render(item: LogEntry) -> Any:
        nonlocal generation
        text = v1.render_event(item)
        event = None if item.chunk else item.event  # (a chunk is not decoded for this)
        if isinstance(event, m.Message):
            return text  # a reply (a message-only stream): no generation
        if isinstance(event, m.Task) and event.generation:
            generation = event.generation  # an opening snapshot knows its own
        else:
            generation = _next(context, item, generation)
        if isinstance(event, m.Task):
            if event.generation != generation:
                event = dataclasses.replace(event, generation=generation)
            return JSONText('{"task":' + task_text(event) + "}")
        return JSONText(_generation_member(text[:-1], generation) + "}")

    return render


def _next(context: StreamContext, item: LogEntry, generation: int) -> int:
    """The generation of the event of ``item``, which follows one of ``generation``
    (0: it is the stream's first: counted from the log, 1 for a task's first event)."""
    if generation:
        return generation + 1
    if item.seq == 1 or context.generation_at is None:
        return 1
    event = item.event
    task_id = event.id if isinstance(event, m.Task) else getattr(event, "task_id", "")
    return context.generation_at(task_id, item.seq)


def _parse(op_request: Any) -> Callable[[Any], Any]:
    base = params_of(op_request)

    def parse(params: Any) -> Any:
        parsed = base(params)
        add_draft_members(parsed, params if isinstance(params, dict) else {})
        return parsed

    return parse


#: Every operation of the table under its 1.0 name; what it makes records 1.0.
METHODS = {op.name: Method(_parse(op.request), op, RENDERERS.get(op.name, v1.METHODS[op.name].render),
                           dialect=v1.VERSION)
           for op in OPERATIONS}

DIALECT = Dialect(VERSION, METHODS, stream_renderer)
register(DIALECT, draft=True)
