"""The 0.3 flavour of HTTP+JSON, under ``<prefix>/rest/v1`` (shapes in
:mod:`a2a_flask.dialects.rest03`): the routes of the operation table, with the
0.3 request bodies where they differ from 1.0."""
from __future__ import annotations

from typing import Any, Dict

from ..dialects.registry import Method
from ..dialects.rest03 import (
    CALLS,
    RENDERERS,
    VERSION,
    push_config_request_in,
    send_request_in,
    stream_renderer,
    task_out,
)
from ..protocol import models as m
from ..protocol.operations import Operation
from ..protocol.operations import Route as OperationRoute
from .routes import Builder, json_body, request_builder, routes_of

#: Where the 0.3 routes live under the REST root.
PREFIX = "/v1"


def _send(_: Dict[str, str]) -> m.SendMessageRequest:
    return send_request_in(json_body())


def _cancel(path: Dict[str, str]) -> m.CancelTaskRequest:
    json_body()  # the 0.3 CancelTaskRequest has only the name: a body must still be JSON
    return m.CancelTaskRequest(id=path["id"])


def _create_push(path: Dict[str, str]) -> m.TaskPushNotificationConfig:
    return push_config_request_in(json_body(), path["taskId"])


#: The 0.3 requests that are not built as 1.0 builds them (by 1.0 method name).
BUILDERS: Dict[str, Builder] = {
    "SendMessage": _send,
    "SendStreamingMessage": _send,
    "CancelTask": _cancel,
    "CreateTaskPushNotificationConfig": _create_push,
    # 0.3 lists a task's webhooks without paging: the query string is not read.
    "ListTaskPushNotificationConfigs": request_builder(
        m.ListTaskPushNotificationConfigsRequest, ""),
}


def _method(op: Operation[Any], spec: OperationRoute) -> Method:
    build = BUILDERS.get(op.name) or request_builder(op.request, spec.source)
    return Method(build, op, RENDERERS.get(op.name, task_out), call=CALLS.get(op.name),
                  stream_renderer=stream_renderer)


#: The 0.3 routes: every operation's of the table.
ROUTES = routes_of(VERSION, lambda op: op.routes03, _method)
