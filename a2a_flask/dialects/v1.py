"""A2A 1.0: PascalCase methods, ProtoJSON shapes, wrapped send results.

Answers and events are written straight to JSON text (:func:`encode_text`):
nothing translates them further, and a stream writes many.
"""
from __future__ import annotations

from typing import Any

from ..protocol import models as m
from ..protocol.events import LogEntry
from ..protocol.jsontext import JSONText, encode_text, stream_response_text
from ..protocol.operations import OPERATIONS
from .registry import Dialect, Method, params_of, register, register_push

VERSION = "1.0"


def render_send_result(result: Any) -> JSONText:
    """SendMessageResponse: exactly one of ``task`` or ``message``."""
    head = '{"message":' if isinstance(result, m.Message) else '{"task":'
    return JSONText(head + encode_text(result) + "}")


def render_event(item: LogEntry) -> JSONText:
    """A StreamResponse object for one stream item: the text a store read it as,
    when it has that (no decoding, no encoding), or the event written out."""
    stored = item.stream_response
    if stored is not None:
        return JSONText(stored)
    return stream_response_text(item.event)


#: How the results of 1.0 are written (every other result is its model's JSON).
RENDERERS = {"SendMessage": render_send_result}

#: Every operation of the table, under its own (1.0) name.
METHODS = {op.name: Method(params_of(op.request), op, RENDERERS.get(op.name, encode_text))
           for op in OPERATIONS}

DIALECT = Dialect(VERSION, METHODS, lambda stream: render_event)
register(DIALECT)
# A 1.0 push is one StreamResponse object, as a stream would carry it.
register_push(VERSION, lambda stream: lambda item, task: render_event(item))
