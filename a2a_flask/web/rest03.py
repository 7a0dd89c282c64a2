"""The 0.3 flavour of HTTP+JSON, under ``<prefix>/rest/v1`` (shapes in
:mod:`a2a_flask.dialects.rest03`)."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from ..dialects.registry import operation as op
from ..dialects.rest03 import (
    VERSION,
    card_out,
    push_config_out,
    push_config_request_in,
    push_list_out,
    send_request_in,
    send_result_out,
    stream_renderer,
    task_out,
    tasks_out,
)
from ..protocol import models as m
from ..protocol.codec import decode
from .routes import Route, json_body, query_params

#: Where the 0.3 routes live under the REST root.
PREFIX = "/v1"


def _send(_: Dict[str, str]) -> m.SendMessageRequest:
    return send_request_in(json_body())


def _get_task(path: Dict[str, str]) -> m.GetTaskRequest:
    return decode(m.GetTaskRequest, {**query_params(m.GetTaskRequest), "id": path["id"]})


def _by_id(cls: type) -> Any:
    return lambda path: cls(id=path["id"])


def _cancel(path: Dict[str, str]) -> m.CancelTaskRequest:
    json_body()  # the 0.3 CancelTaskRequest has only the name: a body must still be JSON
    return m.CancelTaskRequest(id=path["id"])


def _create_push(path: Dict[str, str]) -> m.TaskPushNotificationConfig:
    return push_config_request_in(json_body(), path["task_id"])


def _push_ref(path: Dict[str, str]) -> m.TaskPushConfigRequest:
    return m.TaskPushConfigRequest(task_id=path["task_id"], id=path["config_id"])


def _list_push(path: Dict[str, str]) -> m.ListTaskPushNotificationConfigsRequest:
    return m.ListTaskPushNotificationConfigsRequest(task_id=path["task_id"])


def _list_query(_: Dict[str, str]) -> m.ListTasksRequest:
    return decode(m.ListTasksRequest, query_params(m.ListTasksRequest))


def _route(rule: str, methods: Tuple[str, ...], build: Any, operation: Any, render: Any = None,
           streaming: bool = False) -> Route:
    return Route(rule, methods, build, operation, render or task_out, streaming,
                 stream_renderer=stream_renderer, version=VERSION)


ROUTES: List[Route] = [
    _route("/message:send", ("POST",), _send, op("send_message"), send_result_out),
    _route("/message:stream", ("POST",), _send, op("send_streaming_message"), streaming=True),
    _route("/tasks", ("GET",), _list_query, op("list_tasks"), tasks_out),
    _route("/tasks/<a2aid:id>", ("GET",), _get_task, op("get_task")),
    _route("/tasks/<a2aid:id>:cancel", ("POST",), _cancel, op("cancel_task")),
    _route("/tasks/<a2aid:id>:subscribe", ("GET", "POST"), _by_id(m.SubscribeToTaskRequest),
           op("subscribe_to_task"), streaming=True),
    _route("/tasks/<a2aid:task_id>/pushNotificationConfigs", ("POST",), _create_push,
           op("create_push_config"), push_config_out),
    _route("/tasks/<a2aid:task_id>/pushNotificationConfigs", ("GET",), _list_push,
           op("list_push_configs"), push_list_out),
    _route("/tasks/<a2aid:task_id>/pushNotificationConfigs/<a2aid:config_id>", ("GET",),
           _push_ref, op("get_push_config"), push_config_out),
    _route("/tasks/<a2aid:task_id>/pushNotificationConfigs/<a2aid:config_id>", ("DELETE",),
           _push_ref, op("delete_push_config"), lambda _: {}),
    _route("/card", ("GET",), lambda _: m.GetExtendedAgentCardRequest(), op("card_for"),
           card_out),
]
