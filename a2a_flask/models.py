"""Compatibility path from 0.1, deprecated: the 1.0 models live in
:mod:`a2a_flask.protocol.models` (the ones an agent author needs are exported by
:mod:`a2a_flask` too).  Each name of 0.1 still imports from here, with a
:class:`DeprecationWarning`."""
import typing as _typing

from .deprecation import Moved as _Moved
from .protocol import models as _models

__all__ = [
    "REQUIRED", "ALWAYS", "UNSET", "new_id", "utc_now", "format_timestamp", "parse_timestamp",
    "TaskState", "TERMINAL_STATES", "INTERRUPTED_STATES", "SETTLED_STATES", "Role", "Part",
    "PartList", "Message", "TaskStatus", "Artifact", "Task", "TaskStatusUpdateEvent",
    "TaskArtifactUpdateEvent", "AuthenticationInfo", "TaskPushNotificationConfig",
    "AgentProvider", "AgentExtension", "AgentCapabilities", "AgentInterface", "StringList",
    "SecurityRequirement", "AgentSkill", "AgentCardSignature", "AgentCard",
    "SendMessageConfiguration", "SendMessageRequest", "GetTaskRequest", "ListTasksRequest",
    "ListTasksResponse", "CancelTaskRequest", "SubscribeToTaskRequest", "TaskPushConfigRequest",
    "ListTaskPushNotificationConfigsRequest", "ListTaskPushNotificationConfigsResponse",
    "GetExtendedAgentCardRequest", "Empty",
]

_MOVED = _Moved.to(__name__, _models, __all__)


def __getattr__(name: str) -> _typing.Any:
    return _MOVED.get(name)


def __dir__() -> _typing.List[str]:
    return list(__all__)
