"""A2A 1.0: PascalCase methods, ProtoJSON shapes, wrapped send results."""
from __future__ import annotations

from typing import Any, Callable, Optional, Tuple, Type

from .. import models as m
from ..codec import decode, encode
from ..errors import InvalidParamsError
from ..service import AgentService, CallContext
from . import Dialect, Method, register, register_push

VERSION = "1.0"


def params_of(cls: Type[Any]) -> Callable[[Any], Any]:
    """A parser for a request model; ``params`` may be omitted for all-optional requests."""

    def parse(params: Any) -> Any:
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise InvalidParamsError("params must be an object", violations=[("params", "must be an object")])
        return decode(cls, params)

    return parse


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


def _call(name: str) -> Callable[[AgentService, Any, CallContext], Any]:
    return lambda service, request, ctx: getattr(service, name)(request, ctx)


METHODS = {
    "SendMessage": Method(params_of(m.SendMessageRequest), _call("send_message"),
                          render_send_result),
    "SendStreamingMessage": Method(params_of(m.SendMessageRequest),
                                   _call("send_streaming_message"), streaming=True),
    "GetTask": Method(params_of(m.GetTaskRequest), _call("get_task"), encode),
    "ListTasks": Method(params_of(m.ListTasksRequest), _call("list_tasks"), encode),
    "CancelTask": Method(params_of(m.CancelTaskRequest), _call("cancel_task"), encode),
    "SubscribeToTask": Method(params_of(m.SubscribeToTaskRequest), _call("subscribe_to_task"),
                              streaming=True),
    "CreateTaskPushNotificationConfig": Method(params_of(m.TaskPushNotificationConfig),
                                               _call("create_push_config"), encode),
    "GetTaskPushNotificationConfig": Method(params_of(m.TaskPushConfigRequest),
                                            _call("get_push_config"), encode),
    "ListTaskPushNotificationConfigs": Method(params_of(m.ListTaskPushNotificationConfigsRequest),
                                              _call("list_push_configs"), encode),
    "DeleteTaskPushNotificationConfig": Method(params_of(m.TaskPushConfigRequest),
                                               _call("delete_push_config"), encode),
    "GetExtendedAgentCard": Method(params_of(m.GetExtendedAgentCardRequest),
                                   lambda service, request, ctx: service.get_extended_card(ctx),
                                   encode),
}

DIALECT = Dialect(VERSION, METHODS, lambda stream: render_event)
register(DIALECT)
# A 1.0 push is one StreamResponse object, as a stream would carry it.
register_push(VERSION, lambda stream: lambda item, task: render_event(item))
