"""The 0.3 flavour of HTTP+JSON, under ``<prefix>/rest/v1``: ProtoJSON of the 0.3 proto.

Differences from 1.0 that matter on the wire: a message's parts are called
``content``; parts are ``{text}``, ``{file: {fileWithUri|fileWithBytes,
mimeType, name}}`` or ``{data: {data: {...}}}``; the canceled state is spelled
``TASK_STATE_CANCELLED``; status events carry ``final``; push configs are
``{name: "tasks/{id}/pushNotificationConfigs/{cid}", pushNotificationConfig}``
with ``authentication.schemes``; ``configuration.blocking`` instead of
``returnImmediately``; ``GET /v1/card`` serves the (extended) card.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Optional

from ..protocol import models as m
from ..protocol.cards import union_card
from ..protocol.codec import decode, encode
from ..protocol.calls import StreamContext
from ..protocol.errors import InvalidParamsError
from ..protocol.events import LogEntry
from ..protocol.operations import Call
from .v03 import _drop_none, push_config_in, push_inner_out

VERSION = "0.3"

_STATE_SPELLING = {"TASK_STATE_CANCELED": "TASK_STATE_CANCELLED"}


# --------------------------------------------------------------- 0.3 REST -> 1.0 JSON


def member(obj: Dict[str, Any], camel: str, snake: str) -> Optional[Any]:
    """A member by its JSON name or its proto field name (ProtoJSON accepts both)."""
    value = obj.get(camel)
    return obj.get(snake) if value is None else value


def part_in(part: Any) -> Any:
    if not isinstance(part, dict):
        return part
    common = _drop_none({"metadata": part.get("metadata")})
    file = part.get("file")
    if isinstance(file, dict):
        return _drop_none({"raw": member(file, "fileWithBytes", "file_with_bytes"),
                           "url": member(file, "fileWithUri", "file_with_uri"),
                           "mediaType": member(file, "mimeType", "mime_type"),
                           "filename": file.get("name"), **common})
    data = part.get("data")
    if isinstance(data, dict) and "text" not in part:
        return {"data": data.get("data", {}), **common}
    return part


def message_in(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    out = {k: v for k, v in message.items() if k != "content"}
    content = message.get("content", message.get("parts"))
    if isinstance(content, list):
        out["parts"] = [part_in(p) for p in content]
    return out


# --------------------------------------------------------------- 1.0 JSON -> 0.3 REST


def part_out(part: Dict[str, Any]) -> Dict[str, Any]:
    common = _drop_none({"metadata": part.get("metadata")})
    if "text" in part:
        return {"text": part["text"], **common}
    if "raw" in part or "url" in part:
        file = _drop_none({"fileWithBytes": part.get("raw"), "fileWithUri": part.get("url"),
                           "mimeType": part.get("mediaType"), "name": part.get("filename")})
        return {"file": file, **common}
    data = part.get("data")
    return {"data": {"data": data if isinstance(data, dict) else {"value": data}}, **common}


def message_out(message: Dict[str, Any]) -> Dict[str, Any]:
    out = {k: v for k, v in message.items() if k not in ("parts", "referenceTaskIds")}
    out["content"] = [part_out(p) for p in message.get("parts", [])]
    return out


def status_out(status: Dict[str, Any]) -> Dict[str, Any]:
    out = dict(status)
    out["state"] = _STATE_SPELLING.get(status["state"], status["state"])
    if "message" in status:
        out["message"] = message_out(status["message"])
    return out


def artifact_out(artifact: Dict[str, Any]) -> Dict[str, Any]:
    return {**artifact, "parts": [part_out(p) for p in artifact.get("parts", [])]}


def task_out(task: m.Task) -> Dict[str, Any]:
    body = encode(task)
    out = dict(body)
    out["status"] = status_out(body["status"])
    if "artifacts" in body:
        out["artifacts"] = [artifact_out(a) for a in body["artifacts"]]
    if "history" in body:
        out["history"] = [message_out(msg) for msg in body["history"]]
    return out


def event_out(item: LogEntry, final: Callable[[Any], bool]) -> Dict[str, Any]:
    """A 0.3 StreamResponse object."""
    event = item.event
    if isinstance(event, m.Task):
        return {"task": task_out(event)}
    body = encode(event)
    if isinstance(event, m.Message):
        return {"message": message_out(body)}
    if isinstance(event, m.TaskStatusUpdateEvent):
        return {"statusUpdate": {**body, "status": status_out(body["status"]),
                                 "final": final(event)}}
    return {"artifactUpdate": {**body, "artifact": artifact_out(body["artifact"])}}


def send_result_out(result: Any) -> Dict[str, Any]:
    if isinstance(result, m.Message):
        return {"message": message_out(encode(result))}
    return {"task": task_out(result)}


def push_config_out(config: m.TaskPushNotificationConfig) -> Dict[str, Any]:
    return {"name": f"tasks/{config.task_id}/pushNotificationConfigs/{config.id}",
            "pushNotificationConfig": push_inner_out(config)}


def push_list_out(response: m.ListTaskPushNotificationConfigsResponse) -> Dict[str, Any]:
    return {"configs": [push_config_out(c) for c in response.configs],
            "nextPageToken": response.next_page_token}


def tasks_out(response: m.ListTasksResponse) -> Dict[str, Any]:
    return {"tasks": [task_out(t) for t in response.tasks],
            "nextPageToken": response.next_page_token, "totalSize": response.total_size}


def card_out(card: m.AgentCard) -> Dict[str, Any]:
    """``GET /v1/card``: the union card (1.0 members and the 0.3 ones clients read)."""
    return union_card(encode(card))


#: How each operation's result is written (by 1.0 name; the others answer a task).
RENDERERS: Dict[str, Callable[[Any], Any]] = {
    "SendMessage": send_result_out,
    "ListTasks": tasks_out,
    "CreateTaskPushNotificationConfig": push_config_out,
    "GetTaskPushNotificationConfig": push_config_out,
    "ListTaskPushNotificationConfigs": push_list_out,
    "DeleteTaskPushNotificationConfig": lambda _: {},
    "GetExtendedAgentCard": card_out,
}

#: Where 0.3 calls differ: ``GET /v1/card`` is the card the caller should use,
#: the public one for anonymous callers.
CALLS: Dict[str, Call] = {
    "GetExtendedAgentCard": lambda service, request, ctx: service.card_for(request, ctx),
}


def stream_renderer(stream: StreamContext) -> Callable[[LogEntry], Dict[str, Any]]:
    return lambda item: event_out(item, stream.final)


# --------------------------------------------------------------- request bodies


def send_request_in(body: Dict[str, Any]) -> m.SendMessageRequest:
    """A 0.3 SendMessageRequest body as the 1.0 request."""
    v1: Dict[str, Any] = {"message": message_in(body.get("message", body.get("request"))),
                          "metadata": body.get("metadata")}
    config = body.get("configuration")
    if isinstance(config, dict):
        v1_config: Dict[str, Any] = {
            "acceptedOutputModes": member(config, "acceptedOutputModes", "accepted_output_modes"),
            "historyLength": member(config, "historyLength", "history_length"),
            # proto3 ``bool blocking`` has no presence: a configuration without it
            # asks not to block (the SDK sends return_immediately that way).
            "returnImmediately": not config.get("blocking", False),
        }
        push = member(config, "pushNotification", "push_notification")
        if push is not None:
            v1_config["taskPushNotificationConfig"] = push_config_in(
                push, "", "configuration.pushNotification")
        v1["configuration"] = _drop_none(v1_config)
    return decode(m.SendMessageRequest, _drop_none(v1))


def push_config_request_in(body: Dict[str, Any], task_id: str) -> m.TaskPushNotificationConfig:
    """A CreateTaskPushNotificationConfigRequest body (or the bare config) as the 1.0 config."""
    config = body.get("config", body)
    if isinstance(config, dict):
        inner = member(config, "pushNotificationConfig", "push_notification_config")
        if inner is not None:
            config = inner  # TaskPushNotificationConfig {name, pushNotificationConfig}
    if not isinstance(config, dict):
        raise InvalidParamsError("pushNotificationConfig must be an object",
                                 violations=[("pushNotificationConfig", "must be an object")])
    shaped = push_config_in(config, task_id, "pushNotificationConfig")
    config_id = member(body, "configId", "config_id")
    if "id" not in shaped and isinstance(config_id, str) and config_id:
        shaped["id"] = config_id
    return decode(m.TaskPushNotificationConfig, shaped)
