"""A2A 1.0: PascalCase methods, ProtoJSON shapes, wrapped send results."""
from __future__ import annotations

from typing import Any, Optional, Tuple

from ..protocol import models as m
from ..protocol.codec import encode
from .registry import Dialect, Method, operation, params_of, register, register_push

VERSION = "1.0"


def render_send_result(result: Any) -> Any:
    """SendMessageResponse: exactly one of ``task`` or ``message``."""
    key = "message" if isinstance(result, m.Message) else "task"
    return {key: encode(result)}


_EVENT_KEYS = {
    m.Task: "task",
    m.Message: "message",
    m.TaskStatusUpdateEvent: "statusUpdate",
    m.TaskArtifactUpdateEvent: "artifactUpdate",
}


def render_event(item: Tuple[int, Any]) -> Optional[Any]:
    """A StreamResponse object for one stream item."""
    _, event = item
    return {_EVENT_KEYS[type(event)]: encode(event)}


METHODS = {
    "SendMessage": Method(params_of(m.SendMessageRequest), operation("send_message"),
                          render_send_result),
    "SendStreamingMessage": Method(params_of(m.SendMessageRequest),
                                   operation("send_streaming_message"), streaming=True),
    "GetTask": Method(params_of(m.GetTaskRequest), operation("get_task"), encode),
    "ListTasks": Method(params_of(m.ListTasksRequest), operation("list_tasks"), encode),
    "CancelTask": Method(params_of(m.CancelTaskRequest), operation("cancel_task"), encode),
    "SubscribeToTask": Method(params_of(m.SubscribeToTaskRequest), operation("subscribe_to_task"),
                              streaming=True),
    "CreateTaskPushNotificationConfig": Method(params_of(m.TaskPushNotificationConfig),
                                               operation("create_push_config"), encode),
    "GetTaskPushNotificationConfig": Method(params_of(m.TaskPushConfigRequest),
                                            operation("get_push_config"), encode),
    "ListTaskPushNotificationConfigs": Method(params_of(m.ListTaskPushNotificationConfigsRequest),
                                              operation("list_push_configs"), encode),
    "DeleteTaskPushNotificationConfig": Method(params_of(m.TaskPushConfigRequest),
                                               operation("delete_push_config"), encode),
    "GetExtendedAgentCard": Method(params_of(m.GetExtendedAgentCardRequest),
                                   lambda service, request, ctx: service.get_extended_card(ctx),
                                   encode),
}

DIALECT = Dialect(VERSION, METHODS, lambda stream: render_event)
register(DIALECT)
# A 1.0 push is one StreamResponse object, as a stream would carry it.
register_push(VERSION, lambda stream: lambda item, task: render_event(item))
