"""A2A 0.1 JSON-RPC (the seeds' ``tasks/send`` generation).

0.1 clients choose the task id, call the context a ``sessionId``, tag parts
with ``type``, have no message ids, no direct Message answers, a single push
config per task, and stream bare status/artifact events (``final`` marks the
last).  Its state list lacks ``rejected`` and ``auth-required``: they are sent
as ``failed`` and ``input-required``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, Optional

from ..protocol import models as m
from ..protocol.codec import decode, encode
from ..protocol.errors import InvalidParamsError
from ..protocol.events import LogEntry
from ..protocol.calls import CallContext, StreamContext
from . import v03
from ..protocol.operations import BY_NAME, DialectService
from .registry import Method, params_of, register_push
from .v03 import _drop_none, _object, _params, message_in, push_config_in

VERSION = "0.1"

# 0.3's names, less the two states 0.1 does not have.
_STATES_OUT = {**v03._STATES_OUT,
               "TASK_STATE_REJECTED": "failed",
               "TASK_STATE_AUTH_REQUIRED": "input-required"}


# --------------------------------------------------------------- 1.0 JSON -> 0.1


def part_out(part: Dict[str, Any]) -> Dict[str, Any]:
    return v03.part_out(part, tag="type")


def message_out(message: Dict[str, Any]) -> Dict[str, Any]:
    role = "user" if message.get("role") == "ROLE_USER" else "agent"
    return {"role": role, "parts": [part_out(p) for p in message.get("parts", [])],
            **_drop_none({"metadata": message.get("metadata")})}


def status_out(status: Dict[str, Any]) -> Dict[str, Any]:
    return v03.status_out(status, _STATES_OUT, message_out)


def artifact_out(artifact: Dict[str, Any], index: int, append: bool = False,
                 last_chunk: bool = False) -> Dict[str, Any]:
    out: Dict[str, Any] = _drop_none({"name": artifact.get("name"),
                                      "description": artifact.get("description")})
    out["parts"] = [part_out(p) for p in artifact.get("parts", [])]
    out["index"] = index
    if append:
        out["append"] = True
    if last_chunk:
        out["lastChunk"] = True
    if "metadata" in artifact:
        out["metadata"] = artifact["metadata"]
    return out


def task_out(task: m.Task) -> Dict[str, Any]:
    body = encode(task)
    out: Dict[str, Any] = {"id": body["id"], "sessionId": body.get("contextId", ""),
                           "status": status_out(body["status"])}
    if "artifacts" in body:
        out["artifacts"] = [artifact_out(a, i) for i, a in enumerate(body["artifacts"])]
    if "history" in body:
        out["history"] = [message_out(msg) for msg in body["history"]]
    if "metadata" in body:
        out["metadata"] = body["metadata"]
    return out


def stream_renderer(stream: StreamContext) -> Callable[[LogEntry], Optional[Dict[str, Any]]]:
    """A renderer for one 0.1 stream: it numbers artifacts (0.1 ``index``) by their
    position in the task, seeded from the task itself when a stream resumes midway."""
    indexes: Dict[str, int] = {}

    def index_of(task_id: str, artifact_id: str) -> int:
        if artifact_id not in indexes and not indexes:
            for known in stream.artifact_ids(task_id):
                indexes.setdefault(known, len(indexes))
        return indexes.setdefault(artifact_id, len(indexes))

    def render(item: LogEntry) -> Optional[Dict[str, Any]]:
        event = item.event
        if isinstance(event, m.Task):
            for artifact in event.artifacts:
                indexes.setdefault(artifact.artifact_id, len(indexes))
            return {"id": event.id, "status": status_out(encode(event.status)),
                    "final": stream.final(event)}
        if isinstance(event, m.TaskStatusUpdateEvent):
            return {"id": event.task_id, "status": status_out(encode(event.status)),
                    "final": stream.final(event), **_drop_none({"metadata": event.metadata})}
        if isinstance(event, m.TaskArtifactUpdateEvent):
            shaped = artifact_out(encode(event.artifact),
                                  index_of(event.task_id, event.artifact.artifact_id),
                                  event.append, event.last_chunk)
            return {"id": event.task_id, "artifact": shaped,
                    **_drop_none({"metadata": event.metadata})}
        return None  # 0.1 streams have no Message events

    return render


def push_renderer(stream: StreamContext) -> Callable[[LogEntry, Any], Optional[Dict[str, Any]]]:
    """A 0.1 push is the 0.1 stream event (status with ``final``, or artifact)."""
    render = stream_renderer(stream)
    return lambda item, task: render(item)


def push_config_out(config: m.TaskPushNotificationConfig) -> Dict[str, Any]:
    return {"id": config.task_id, "pushNotificationConfig": v03.push_inner_out(config, False)}


# --------------------------------------------------------------- requests


@dataclass
class SendTaskParams:
    """``tasks/send``: the 1.0 request plus the task id the 0.1 client chose."""

    request: m.SendMessageRequest
    task_id: str


def _task_id(params: Dict[str, Any]) -> str:
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParamsError("id (the task id the client chose) is required",
                                 violations=[("id", "is required")])
    return task_id


def parse_send(params: Any) -> SendTaskParams:
    params = _params(params)
    task_id = _task_id(params)
    message = message_in(_object(params.get("message"), "message"))
    message.setdefault("messageId", m.new_id())  # 0.1 messages have no id
    if params.get("sessionId") is not None:
        message["contextId"] = params["sessionId"]
    config: Dict[str, Any] = _drop_none({"historyLength": params.get("historyLength"),
                                         "acceptedOutputModes": params.get("acceptedOutputModes")})
    if params.get("pushNotification") is not None:
        push = push_config_in(params["pushNotification"], "", "pushNotification")
        push["id"] = task_id  # 0.1 has one config per task, read back by the task id
        config["taskPushNotificationConfig"] = push
    body = _drop_none({"message": message, "metadata": params.get("metadata"),
                       "configuration": config or None})
    return SendTaskParams(decode(m.SendMessageRequest, body), task_id)


def parse_set_push(params: Any) -> m.TaskPushNotificationConfig:
    params = _params(params)
    task_id = _task_id(params)
    body = push_config_in(params.get("pushNotificationConfig"), task_id, "pushNotificationConfig")
    body["id"] = task_id  # 0.1 has one config per task
    return decode(m.TaskPushNotificationConfig, body)


def parse_get_push(params: Any) -> m.TaskPushConfigRequest:
    task_id = _task_id(_params(params))
    return m.TaskPushConfigRequest(task_id=task_id, id=task_id)


def _send(service: DialectService, params: SendTaskParams, ctx: CallContext) -> Any:
    return service.send_message(params.request, ctx, client_task_id=params.task_id)


def _send_streaming(service: DialectService, params: SendTaskParams, ctx: CallContext) -> Any:
    return service.send_streaming_message(params.request, ctx, client_task_id=params.task_id)


#: The table's operations by 1.0 name: each method below serves one.
_OP = BY_NAME

#: The 0.1 method names of the operations, parsed and rendered the 0.1 way.
METHODS: Dict[str, Method] = {
    "tasks/send": Method(parse_send, _OP["SendMessage"], task_out, call=_send, dialect=VERSION),
    "tasks/sendSubscribe": Method(parse_send, _OP["SendStreamingMessage"], call=_send_streaming,
                                  stream_renderer=stream_renderer, dialect=VERSION),
    "tasks/get": Method(params_of(m.GetTaskRequest), _OP["GetTask"], task_out),
    "tasks/cancel": Method(params_of(m.CancelTaskRequest), _OP["CancelTask"], task_out),
    "tasks/resubscribe": Method(params_of(m.SubscribeToTaskRequest), _OP["SubscribeToTask"],
                                stream_renderer=stream_renderer),
    "tasks/pushNotification/set": Method(parse_set_push, _OP["CreateTaskPushNotificationConfig"],
                                         push_config_out, dialect=VERSION),
    "tasks/pushNotification/get": Method(parse_get_push, _OP["GetTaskPushNotificationConfig"],
                                         push_config_out, dialect=VERSION),
}

register_push(VERSION, push_renderer)


def _join_the_03_endpoint() -> None:
    """0.1 sends no version header, so its methods are served by the 0.3 dialect;
    the names both share answer in the dialect the task was created in."""
    methods = v03.DIALECT.methods
    for name, method in METHODS.items():
        shared = methods.get(name)
        methods[name] = method if shared is None else dataclasses.replace(
            shared, choose=v03.by_task_dialect(shared, method))


_join_the_03_endpoint()
