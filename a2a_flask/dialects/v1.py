"""A2A 1.0: PascalCase methods, ProtoJSON shapes, wrapped send results.

Answers and events are written straight to JSON text (:func:`encode_text`):
nothing translates them further, and a stream writes many.
"""
from __future__ import annotations

from typing import Any

from ..protocol import models as m
from ..protocol.events import LogEntry
from ..protocol.jsontext import JSONText, encode_text, stream_response_text
from .registry import Dialect, Method, operation, params_of, register, register_push

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


METHODS = {
    "SendMessage": Method(params_of(m.SendMessageRequest), operation("send_message"),
                          render_send_result),
    "SendStreamingMessage": Method(params_of(m.SendMessageRequest),
                                   operation("send_streaming_message"), streaming=True),
    "GetTask": Method(params_of(m.GetTaskRequest), operation("get_task"), encode_text),
    "ListTasks": Method(params_of(m.ListTasksRequest), operation("list_tasks"), encode_text),
    "CancelTask": Method(params_of(m.CancelTaskRequest), operation("cancel_task"), encode_text),
    "SubscribeToTask": Method(params_of(m.SubscribeToTaskRequest), operation("subscribe_to_task"),
                              streaming=True),
    "CreateTaskPushNotificationConfig": Method(params_of(m.TaskPushNotificationConfig),
                                               operation("create_push_config"), encode_text),
    "GetTaskPushNotificationConfig": Method(params_of(m.TaskPushConfigRequest),
                                            operation("get_push_config"), encode_text),
    "ListTaskPushNotificationConfigs": Method(params_of(m.ListTaskPushNotificationConfigsRequest),
                                              operation("list_push_configs"), encode_text),
    "DeleteTaskPushNotificationConfig": Method(params_of(m.TaskPushConfigRequest),
                                               operation("delete_push_config"), encode_text),
    "GetExtendedAgentCard": Method(params_of(m.GetExtendedAgentCardRequest),
                                   lambda service, request, ctx: service.get_extended_card(ctx),
                                   encode_text),
}

DIALECT = Dialect(VERSION, METHODS, lambda stream: render_event)
register(DIALECT)
# A 1.0 push is one StreamResponse object, as a stream would carry it.
register_push(VERSION, lambda stream: lambda item, task: render_event(item))
