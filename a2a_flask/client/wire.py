"""Turning what agents send into 1.0 models, whatever generation they speak.

1.0 JSON goes through :mod:`a2a_flask.protocol.codec`.  0.3 (and 0.2) and 0.1 shapes
are first rewritten into 1.0 JSON here (lowercase states, ``kind``/``type``
parts, ``file`` objects, ``sessionId``...) so that one decoder builds every
model.  The other direction, 1.0 requests in 0.x shapes, lives here too.

Decoding is lenient in the one way a client must be: a member the proto calls
REQUIRED but the agent left out gets its default instead of failing the call
(0.1 messages have no ``messageId``, some agents omit ``contextId`` ...).
Wrong types still fail, as :class:`~a2a_flask.errors.A2AResponseError`.
"""
from __future__ import annotations

from typing import Any, Dict, Tuple, Type, TypeVar, Union

from ..protocol import codec
from ..protocol import models as m
from ..protocol.events import STREAM_EVENTS
from ..protocol.errors import A2AResponseError

T = TypeVar("T")
Event = Union[m.Task, m.Message, m.TaskStatusUpdateEvent, m.TaskArtifactUpdateEvent]

#: Violations that only say a REQUIRED member is missing or empty: tolerated.
_SOFT = ("is required", "must not be empty or unspecified")


def decode_model(cls: Type[T], value: Any, what: str = "", response: Any = None) -> T:
    """``cls`` from 1.0 JSON, tolerating missing required members (see the module doc)."""
    # codec.decode would raise on the first missing REQUIRED member; the lenient
    # form still builds the object and lists every violation, so we can tell a
    # merely incomplete answer (accepted) from a malformed one (refused).
    result, errors = codec.decode_lenient(cls, value)
    hard = [f"{where or 'body'}: {problem}" for where, problem in errors if problem not in _SOFT]
    if hard:
        raise A2AResponseError(
            f"The agent sent an invalid {what or cls.__name__}: " + "; ".join(hard[:5]),
            response=response)
    if isinstance(value, dict):
        _read_generations(result, value)
    return result


def _read_generations(model: Any, value: Dict[str, Any]) -> None:
    """The A2A 1.1 draft's ``generation`` of a Task or event (and of a task list's
    tasks), which the 1.0 codec leaves alone: a number or ProtoJSON's decimal string;
    anything else reads as 0 (not kept)."""
    if isinstance(model, m.ListTasksResponse):
        for task, raw in zip(model.tasks, value.get("tasks") or []):
            if isinstance(raw, dict):
                _read_generations(task, raw)
        return
    if not hasattr(model, "generation"):
        return
    raw = value.get("generation")
    if isinstance(raw, str) and raw.isdigit() and len(raw) < 20:
        raw = int(raw)
    if type(raw) is int and raw > 0:
        model.generation = raw


def draft_members(request: Any) -> Dict[str, Any]:
    """The A2A 1.1 draft's members of a request, as JSON (the codec leaves them out):
    ``currentGeneration`` of a GetTask, ``configuration.ifGenerationMatch`` of a send."""
    if isinstance(request, m.GetTaskRequest) and request.current_generation is not None:
        return {"currentGeneration": str(request.current_generation)}
    if isinstance(request, m.SendMessageRequest) and request.configuration is not None \
            and request.configuration.if_generation_match is not None:
        return {"configuration": {
            "ifGenerationMatch": str(request.configuration.if_generation_match)}}
    return {}


def with_draft_members(members: Dict[str, Any], request: Any) -> Dict[str, Any]:
    """``members`` (a request's 1.0 JSON) with its draft members merged in."""
    for name, value in draft_members(request).items():
        if isinstance(value, dict) and isinstance(members.get(name), dict):
            members[name] = {**members[name], **value}
        else:
            members[name] = value
    return members


# ------------------------------------------------------------------ 1.0

def event_from_v1(body: Any, response: Any = None) -> Event:
    """A 1.0 StreamResponse or SendMessageResponse (``{"task": ...}`` etc.) as a model."""
    if isinstance(body, dict):
        for key, cls in STREAM_EVENTS.items():
            if isinstance(body.get(key), dict):
                return decode_model(cls, body[key], key, response)
        # Tolerate agents that send the object bare.
        if "status" in body and "id" in body:
            return decode_model(m.Task, body, "task", response)
        if "parts" in body and "role" in body:
            return decode_model(m.Message, body, "message", response)
    raise A2AResponseError(f"Expected a task, message or update event, got {body!r:.200}",
                           response=response)


def is_final(event: Event) -> bool:
    """Whether a 1.0 stream is over after ``event``: a Message, a terminal state, or
    a status update to an interrupted state (INPUT_REQUIRED, AUTH_REQUIRED)."""
    if isinstance(event, m.Message):
        return True
    if isinstance(event, m.Task):
        return event.status.state.terminal
    if isinstance(event, m.TaskStatusUpdateEvent):
        return event.status.state.settled
    return False


# ------------------------------------------------------------------ 0.x -> 1.0 JSON

_STATES_IN = {
    "submitted": "TASK_STATE_SUBMITTED",
    "working": "TASK_STATE_WORKING",
    "input-required": "TASK_STATE_INPUT_REQUIRED",
    "auth-required": "TASK_STATE_AUTH_REQUIRED",
    "completed": "TASK_STATE_COMPLETED",
    "canceled": "TASK_STATE_CANCELED",
    "cancelled": "TASK_STATE_CANCELED",
    "failed": "TASK_STATE_FAILED",
    "rejected": "TASK_STATE_REJECTED",
    "unknown": "TASK_STATE_UNSPECIFIED",
}
_ROLES_IN = {"user": "ROLE_USER", "agent": "ROLE_AGENT"}


def _drop_none(obj: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in obj.items() if v is not None}


def state_in(state: Any) -> Any:
    if not isinstance(state, str):
        return state
    if state.startswith("TASK_STATE_"):
        return state.replace("CANCELLED", "CANCELED")  # the 0.3 proto's spelling
    return _STATES_IN.get(state.lower(), "TASK_STATE_UNSPECIFIED")


def part_in(part: Any) -> Any:
    """A 0.3 (``kind``) or 0.1 (``type``) part as 1.0 part JSON."""
    if not isinstance(part, dict):
        return part
    kind = part.get("kind", part.get("type"))
    common = _drop_none({"metadata": part.get("metadata")})
    if kind == "text":
        return {"text": part.get("text", ""), **common}
    if kind == "file":
        file: Any = part.get("file") if isinstance(part.get("file"), dict) else {}
        out = _drop_none({"mediaType": file.get("mimeType", file.get("mediaType")),
                          "filename": file.get("name"), **common})
        if file.get("bytes") is not None:
            out["raw"] = file["bytes"]
        elif file.get("uri") is not None:
            out["url"] = file["uri"]
        return out
    if kind == "data":
        return {"data": part.get("data"), **common}
    return part  # already 1.0-shaped (or unknown: the decoder judges)


def message_in(message: Any) -> Any:
    if not isinstance(message, dict):
        return message
    out = {k: v for k, v in message.items() if k != "kind"}
    role = message.get("role")
    if isinstance(role, str):
        out["role"] = _ROLES_IN.get(role.lower(), role)
    if isinstance(message.get("parts"), list):
        out["parts"] = [part_in(p) for p in message["parts"]]
    return out


def status_in(status: Any) -> Any:
    if not isinstance(status, dict):
        return status
    out = dict(status, state=state_in(status.get("state")))
    if status.get("message") is not None:
        out["message"] = message_in(status["message"])
    return out


def artifact_in(artifact: Any, position: int = 0) -> Any:
    """A 0.x artifact; 0.1 artifacts have no id, so their ``index`` becomes one."""
    if not isinstance(artifact, dict):
        return artifact
    out = {k: v for k, v in artifact.items()
           if k not in ("index", "append", "lastChunk", "kind")}
    if not out.get("artifactId"):
        index = artifact.get("index", position)
        out["artifactId"] = str(index)
    if isinstance(artifact.get("parts"), list):
        out["parts"] = [part_in(p) for p in artifact["parts"]]
    return out


def task_in(task: Any) -> Any:
    """A 0.3 or 0.1 Task as 1.0 JSON (0.1's ``sessionId`` is the context)."""
    if not isinstance(task, dict):
        return task
    out: Dict[str, Any] = _drop_none({"id": task.get("id"),
                                      "contextId": task.get("contextId", task.get("sessionId")),
                                      "status": status_in(task.get("status")),
                                      "metadata": task.get("metadata")})
    if isinstance(task.get("artifacts"), list):
        out["artifacts"] = [artifact_in(a, i) for i, a in enumerate(task["artifacts"])]
    if isinstance(task.get("history"), list):
        out["history"] = [message_in(msg) for msg in task["history"]]
    return out


def event_from_v03(result: Any, response: Any = None) -> Tuple[Event, bool]:
    """One 0.3 result (send or stream): the event and whether it is ``final``."""
    if not isinstance(result, dict):
        raise A2AResponseError(f"Expected a 0.3 result object, got {result!r:.200}",
                               response=response)
    kind = result.get("kind")
    if kind == "status-update" or (kind is None and "status" in result and "taskId" in result):
        body = _drop_none({"taskId": result.get("taskId"), "contextId": result.get("contextId"),
                           "status": status_in(result.get("status")),
                           "metadata": result.get("metadata")})
        event = decode_model(m.TaskStatusUpdateEvent, body, "status update", response)
        return event, bool(result.get("final")) or event.status.state.terminal
    if kind == "artifact-update" or (kind is None and "artifact" in result):
        body = _drop_none({"taskId": result.get("taskId"), "contextId": result.get("contextId"),
                           "artifact": artifact_in(result.get("artifact")),
                           "append": result.get("append"), "lastChunk": result.get("lastChunk"),
                           "metadata": result.get("metadata")})
        return decode_model(m.TaskArtifactUpdateEvent, body, "artifact update", response), False
    if kind == "message" or (kind is None and "parts" in result):
        return decode_model(m.Message, message_in(result), "message", response), True
    task = decode_model(m.Task, task_in(result), "task", response)
    return task, task.status.state.terminal


def event_from_v01(result: Any, context_id: str, response: Any = None) -> Tuple[Event, bool]:
    """One 0.1 stream result (``{"id", "status", "final"}`` or ``{"id", "artifact"}``)."""
    if not isinstance(result, dict):
        raise A2AResponseError(f"Expected a 0.1 result object, got {result!r:.200}",
                               response=response)
    task_id = result.get("id", "")
    if "artifact" in result:
        artifact = result["artifact"] if isinstance(result["artifact"], dict) else {}
        body = _drop_none({"taskId": task_id, "contextId": context_id,
                           "artifact": artifact_in(artifact),
                           "append": artifact.get("append"), "lastChunk": artifact.get("lastChunk"),
                           "metadata": result.get("metadata")})
        return decode_model(m.TaskArtifactUpdateEvent, body, "artifact update", response), False
    if "status" in result and "sessionId" not in result and "artifacts" not in result:
        body = _drop_none({"taskId": task_id, "contextId": context_id,
                           "status": status_in(result.get("status")),
                           "metadata": result.get("metadata")})
        event = decode_model(m.TaskStatusUpdateEvent, body, "status update", response)
        return event, bool(result.get("final")) or event.status.state.terminal
    task = decode_model(m.Task, task_in({"sessionId": context_id, **result}), "task", response)
    return task, task.status.state.terminal


def push_config_in(wrapper: Any, response: Any = None) -> m.TaskPushNotificationConfig:
    """A 0.3 ``{taskId, pushNotificationConfig}`` or 0.1 ``{id, pushNotificationConfig}``."""
    if not isinstance(wrapper, dict):
        raise A2AResponseError(f"Expected a push config, got {wrapper!r:.200}",
                               response=response)
    inner = wrapper.get("pushNotificationConfig")
    inner = inner if isinstance(inner, dict) else {}
    body = _drop_none({"taskId": wrapper.get("taskId", wrapper.get("id")), "id": inner.get("id"),
                       "url": inner.get("url"), "token": inner.get("token")})
    auth = inner.get("authentication")
    if isinstance(auth, dict):
        schemes = auth.get("schemes")
        scheme = schemes[0] if isinstance(schemes, list) and schemes else auth.get("scheme", "")
        body["authentication"] = _drop_none({"scheme": scheme, "credentials": auth.get("credentials")})
    return decode_model(m.TaskPushNotificationConfig, body, "push config", response)


# ------------------------------------------------------------------ 1.0 -> 0.x JSON

_STATES_OUT = {v: k for k, v in _STATES_IN.items() if k != "cancelled"}


def part_out(part: m.Part, tag: str = "kind") -> Dict[str, Any]:
    """A part in the 0.x shape; ``tag`` is the discriminator (0.1 says ``type``)."""
    common = _drop_none({"metadata": part.metadata})
    if part.text is not None:
        return {tag: "text", "text": part.text, **common}
    if part.is_file:
        file = _drop_none({"bytes": codec.encode(part.raw) if part.raw is not None else None,
                           "uri": part.url, "mimeType": part.media_type or None,
                           "name": part.filename or None})
        return {tag: "file", "file": file, **common}
    data = part.data
    # 0.x data parts hold objects only; other JSON values are wrapped.
    return {tag: "data", "data": data if isinstance(data, dict) else {"value": data}, **common}


def message_out_v03(message: m.Message) -> Dict[str, Any]:
    body: Dict[str, Any] = codec.encode(message)
    body["kind"] = "message"
    body["role"] = "agent" if message.role is m.Role.AGENT else "user"
    body["parts"] = [part_out(p) for p in message.parts]
    return body


def message_out_v01(message: m.Message) -> Dict[str, Any]:
    return _drop_none({"role": "agent" if message.role is m.Role.AGENT else "user",
                       "parts": [part_out(p, "type") for p in message.parts],
                       "metadata": message.metadata})


def push_inner_out(config: m.TaskPushNotificationConfig, with_id: bool = True) -> Dict[str, Any]:
    """The 0.x PushNotificationConfig (``authentication.schemes`` is a list)."""
    inner = _drop_none({"id": (config.id or None) if with_id else None, "url": config.url,
                        "token": config.token or None})
    if config.authentication is not None:
        inner["authentication"] = _drop_none({
            "schemes": [config.authentication.scheme],
            "credentials": config.authentication.credentials or None})
    return inner


__all__ = ["Event", "decode_model", "draft_members", "with_draft_members", "event_from_v1", "is_final", "event_from_v03",
           "event_from_v01", "task_in", "message_in", "part_in", "state_in", "push_config_in",
           "part_out", "message_out_v03", "message_out_v01", "push_inner_out"]
