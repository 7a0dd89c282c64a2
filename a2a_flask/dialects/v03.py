"""A2A 0.3 (and 0.2) JSON-RPC: slash method names, ``kind`` discriminators, bare results.

Requests are rewritten into the 1.0 JSON shape and decoded by the codec, so
validation (and its field violations) is the same as for 1.0; results are
encoded in 1.0 JSON and rewritten into 0.3 shapes.  :mod:`.v01` adds the 0.1
methods to this dialect's table (their names exist only in 0.1), and the
names 0.1 and 0.3 share answer in the dialect the task was created in.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

from ..protocol import models as m
from ..protocol.cards import union_card
from ..protocol.codec import decode, encode
from ..protocol.errors import InvalidParamsError, TaskNotFoundError
from ..protocol.events import LogEntry
from ..protocol.calls import CallContext, StreamContext
from ..protocol.operations import BY_NAME, DialectService
from .registry import Dialect, Method, params_of, register, register_push

VERSION = "0.3"

# --------------------------------------------------------------- states, roles

_STATES_OUT = {
    "TASK_STATE_UNSPECIFIED": "unknown",
    "TASK_STATE_SUBMITTED": "submitted",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
}
_ROLES_IN = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}
_ROLES_OUT = {v: k for k, v in _ROLES_IN.items()}


def _drop_none(obj: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None}


# --------------------------------------------------------------- 0.3 -> 1.0 JSON


def _object(value: Any, where: str) -> Dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidParamsError(f"{where} must be an object", violations=[(where, "must be an object")])
    return value


def part_in(part: Any, where: str) -> Any:
    """A 0.3 (``kind``) or 0.1 (``type``) part as 1.0 JSON; unknown shapes pass to the codec."""
    if not isinstance(part, dict):
        return part
    kind = part.get("kind", part.get("type"))
    common = _drop_none({"metadata": part.get("metadata")})
    if kind == "text":
        return {"text": part.get("text"), **common}
    if kind == "file":
        file = _object(part.get("file"), f"{where}.file")
        out = {"mediaType": file.get("mimeType"), "filename": file.get("name"), **common}
        if file.get("bytes") is not None:
            out["raw"] = file["bytes"]
        elif file.get("uri") is not None:
            out["url"] = file["uri"]
        else:
            raise InvalidParamsError(f"{where}.file needs bytes or uri",
                                     violations=[(f"{where}.file", "needs bytes or uri")])
        return _drop_none(out)
    if kind == "data":
        return {"data": part.get("data"), **common}
    if kind is None:
        return part  # already 1.0-shaped
    raise InvalidParamsError(f"{where}.kind {kind!r} is not text, file or data",
                             violations=[(f"{where}.kind", "must be text, file or data")])


def message_in(message: Any, where: str = "message") -> Any:
    if not isinstance(message, dict):
        return message
    out = dict(message)
    out.pop("kind", None)
    role = message.get("role")
    out["role"] = _ROLES_IN.get(role, role) if isinstance(role, str) else role
    parts = message.get("parts")
    if isinstance(parts, list):
        out["parts"] = [part_in(p, f"{where}.parts[{i}]") for i, p in enumerate(parts)]
    return out


def push_config_in(config: Any, task_id: str, where: str) -> Dict[str, Any]:
    """A 0.x PushNotificationConfig (``schemes`` list) as 1.0 TaskPushNotificationConfig JSON."""
    config = _object(config, where)
    out = {k: config.get(k) for k in ("id", "url", "token")}
    auth = config.get("authentication")
    if isinstance(auth, dict):
        schemes = auth.get("schemes") or []
        scheme = schemes[0] if isinstance(schemes, list) and schemes else auth.get("scheme")
        out["authentication"] = _drop_none({"scheme": scheme,
                                            "credentials": auth.get("credentials")})
    out["taskId"] = task_id
    return _drop_none(out)


# --------------------------------------------------------------- 1.0 JSON -> 0.3


def part_out(part: Dict[str, Any], tag: str = "kind") -> Dict[str, Any]:
    """A 1.0 part in the 0.x shape; ``tag`` is the discriminator (0.1 calls it ``type``)."""
    common = _drop_none({"metadata": part.get("metadata")})
    if "text" in part:
        return {tag: "text", "text": part["text"], **common}
    if "raw" in part or "url" in part:
        file = _drop_none({"bytes": part.get("raw"), "uri": part.get("url"),
                           "mimeType": part.get("mediaType"), "name": part.get("filename")})
        return {tag: "file", "file": file, **common}
    data = part.get("data")
    # 0.x data parts hold objects only; other JSON values are wrapped.
    return {tag: "data", "data": data if isinstance(data, dict) else {"value": data}, **common}


def message_out(message: Dict[str, Any]) -> Dict[str, Any]:
    out = {"kind": "message", **message}
    out["role"] = _ROLES_OUT.get(message.get("role", ""), "agent")
    out["parts"] = [part_out(p) for p in message.get("parts", [])]
    return out


def status_out(status: Dict[str, Any], states: Dict[str, str] = _STATES_OUT,
               message: Callable[[Dict[str, Any]], Dict[str, Any]] = message_out
               ) -> Dict[str, Any]:
    """A 1.0 TaskStatus in the 0.x shape (0.1 passes its own states and messages)."""
    out: Dict[str, Any] = {"state": states.get(status.get("state", ""), "unknown")}
    if "message" in status:
        out["message"] = message(status["message"])
    if "timestamp" in status:
        out["timestamp"] = status["timestamp"]
    return out


def artifact_out(artifact: Dict[str, Any]) -> Dict[str, Any]:
    return {**artifact, "parts": [part_out(p) for p in artifact.get("parts", [])]}


def task_out(task: m.Task) -> Dict[str, Any]:
    body = encode(task)
    out: Dict[str, Any] = {"kind": "task", "id": body["id"], "contextId": body.get("contextId", ""),
                           "status": status_out(body["status"])}
    if "artifacts" in body:
        out["artifacts"] = [artifact_out(a) for a in body["artifacts"]]
    if "history" in body:
        out["history"] = [message_out(msg) for msg in body["history"]]
    if "metadata" in body:
        out["metadata"] = body["metadata"]
    return out


def event_out(item: LogEntry, final: Callable[[Any], bool]) -> Dict[str, Any]:
    """One 0.3 stream result: Task, Message, status-update (with ``final``) or artifact-update."""
    event = item.event
    if isinstance(event, m.Task):
        return task_out(event)
    if isinstance(event, m.Message):
        return message_out(encode(event))
    body = encode(event)
    if isinstance(event, m.TaskStatusUpdateEvent):
        return {"kind": "status-update", "taskId": body["taskId"], "contextId": body["contextId"],
                "status": status_out(body["status"]), "final": final(event),
                **_drop_none({"metadata": body.get("metadata")})}
    out = {"kind": "artifact-update", **body, "artifact": artifact_out(body["artifact"])}
    return out


def send_result_out(result: Any) -> Dict[str, Any]:
    if isinstance(result, m.Message):
        return message_out(encode(result))
    return task_out(result)


def push_inner_out(config: m.TaskPushNotificationConfig, with_id: bool = True) -> Dict[str, Any]:
    """The 0.x PushNotificationConfig (``authentication.schemes`` as a list)."""
    body = encode(config)
    inner = _drop_none({"id": body.get("id") if with_id else None, "url": body.get("url"),
                        "token": body.get("token")})
    auth = body.get("authentication")
    if auth:
        inner["authentication"] = _drop_none({"schemes": [auth.get("scheme", "")],
                                              "credentials": auth.get("credentials")})
    return inner


def push_config_out(config: m.TaskPushNotificationConfig) -> Dict[str, Any]:
    return {"taskId": config.task_id, "pushNotificationConfig": push_inner_out(config)}


# --------------------------------------------------------------- requests


def _params(params: Any) -> Dict[str, Any]:
    if params is None:
        return {}
    return _object(params, "params")


def parse_send(params: Any) -> m.SendMessageRequest:
    params = _params(params)
    body: Dict[str, Any] = {"message": message_in(params.get("message")),
                            "metadata": params.get("metadata")}
    config = params.get("configuration")
    if config is not None:
        config = _object(config, "configuration")
        v1_config = {k: config.get(k) for k in ("acceptedOutputModes", "historyLength")}
        if config.get("blocking") is False:
            v1_config["returnImmediately"] = True
        if config.get("pushNotificationConfig") is not None:
            v1_config["taskPushNotificationConfig"] = push_config_in(
                config["pushNotificationConfig"], "", "configuration.pushNotificationConfig")
        body["configuration"] = _drop_none(v1_config)
    return decode(m.SendMessageRequest, _drop_none(body))


def parse_set_push(params: Any) -> m.TaskPushNotificationConfig:
    params = _params(params)
    task_id = params.get("taskId")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParamsError("taskId is required", violations=[("taskId", "is required")])
    return decode(m.TaskPushNotificationConfig,
                  push_config_in(params.get("pushNotificationConfig"), task_id,
                                 "pushNotificationConfig"))


def parse_push_ref(params: Any) -> m.TaskPushConfigRequest:
    """``{id, pushNotificationConfigId?}``; a missing config id means 'the task's config'."""
    params = _params(params)
    task_id = params.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise InvalidParamsError("id is required", violations=[("id", "is required")])
    config_id = params.get("pushNotificationConfigId")
    if config_id is not None and not isinstance(config_id, str):
        raise InvalidParamsError("pushNotificationConfigId must be a string",
                                 violations=[("pushNotificationConfigId", "must be a string")])
    return m.TaskPushConfigRequest(task_id=task_id, id=config_id or "")


def get_push(service: DialectService, request: m.TaskPushConfigRequest,
             ctx: CallContext) -> m.TaskPushNotificationConfig:
    if request.id:
        config: m.TaskPushNotificationConfig = service.get_push_config(request, ctx)
        return config
    configs: List[m.TaskPushNotificationConfig] = service.list_push_configs(
        m.ListTaskPushNotificationConfigsRequest(task_id=request.task_id), ctx).configs
    if not configs:
        raise TaskNotFoundError(f"Task {request.task_id} has no push notification config",
                                metadata={"taskId": request.task_id})
    return configs[0]


def list_push(service: DialectService, request: m.TaskPushConfigRequest,
              ctx: CallContext) -> List[m.TaskPushNotificationConfig]:
    configs: List[m.TaskPushNotificationConfig] = service.list_push_configs(
        m.ListTaskPushNotificationConfigsRequest(task_id=request.task_id), ctx).configs
    return configs


def delete_push(service: DialectService, request: m.TaskPushConfigRequest,
                ctx: CallContext) -> None:
    if not request.id:
        raise InvalidParamsError("pushNotificationConfigId is required",
                                 violations=[("pushNotificationConfigId", "is required")])
    service.delete_push_config(request, ctx)


def by_task_dialect(v03: Method, v01: Method
                    ) -> Callable[[DialectService, Any, CallContext], Method]:
    """For names 0.1 and 0.3 share: answer in the dialect the task was created in."""

    def choose(service: DialectService, request: Any, ctx: CallContext) -> Method:
        return v01 if service.task_dialect(request.id, ctx) == "0.1" else v03

    return choose


def card_out(card: m.AgentCard) -> Dict[str, Any]:
    """The extended card in the 0.3 shape (the union card of :mod:`a2a_flask.protocol.cards`)."""
    return union_card(encode(card))


#: The table's operations by 1.0 name: each method below serves one.
_OP = BY_NAME

#: The 0.3 method names of the operations (0.3 has no ListTasks), parsed and
#: rendered the 0.3 way.
METHODS: Dict[str, Method] = {
    "message/send": Method(parse_send, _OP["SendMessage"], send_result_out),
    "message/stream": Method(parse_send, _OP["SendStreamingMessage"]),
    "tasks/get": Method(params_of(m.GetTaskRequest), _OP["GetTask"], task_out),
    "tasks/cancel": Method(params_of(m.CancelTaskRequest), _OP["CancelTask"], task_out),
    "tasks/resubscribe": Method(params_of(m.SubscribeToTaskRequest), _OP["SubscribeToTask"],
                                errors_in_stream=True),
    "tasks/pushNotificationConfig/set": Method(
        parse_set_push, _OP["CreateTaskPushNotificationConfig"], push_config_out),
    "tasks/pushNotificationConfig/get": Method(
        parse_push_ref, _OP["GetTaskPushNotificationConfig"], push_config_out, call=get_push),
    "tasks/pushNotificationConfig/list": Method(
        parse_push_ref, _OP["ListTaskPushNotificationConfigs"],
        lambda configs: [push_config_out(c) for c in configs], call=list_push),
    "tasks/pushNotificationConfig/delete": Method(
        parse_push_ref, _OP["DeleteTaskPushNotificationConfig"], lambda _: None, call=delete_push),
    "agent/getAuthenticatedExtendedCard": Method(
        params_of(m.GetExtendedAgentCardRequest), _OP["GetExtendedAgentCard"], card_out),
}


def stream_renderer(stream: StreamContext) -> Callable[[LogEntry], Dict[str, Any]]:
    return lambda item: event_out(item, stream.final)



DIALECT = Dialect(VERSION, METHODS, stream_renderer)
# The 0.1 methods join this table (see v01); 0.2 is served as 0.3.
register(DIALECT, aliases=("0.2",))
# A 0.3 push is the whole task (the 0.3 spec's example), as it is when sent: one
# push stands for every event since the webhook's last (push/delivery.py).
register_push(VERSION, lambda stream: lambda item, task: task and task_out(task))
