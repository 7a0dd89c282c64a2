"""a2a_flask: the Agent2Agent (A2A) protocol for Flask.

Register one :class:`A2A` extension in an existing Flask app and a Python
function becomes an A2A agent that any A2A client can discover, message,
stream from, poll and cancel.  Everything an agent author needs is importable
from here; the subpackages are the layers (see docs/internals.rst).
"""
from typing import TYPE_CHECKING, Any

from . import errors as _errors
from .errors import *  # noqa: F401,F403  (the whole tree)
from .engine.executor import TaskContext
from .web.extension import A2A
from .protocol.models import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    Artifact,
    AuthenticationInfo,
    Message,
    Part,
    PartList,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from .engine.run import TaskCancelled
from .web.auth import APIKeyAuth, BearerAuth, Principal
from .stores import MemoryStore, TaskStore, open_store

from .version import __version__

if TYPE_CHECKING:
    from .stores.shelve import ShelveStore


def __getattr__(name: str) -> Any:
    """``ShelveStore``, imported when first named (cold start)."""
    if name == "ShelveStore":
        from .stores.shelve import ShelveStore

        return ShelveStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "A2A",
    "TaskContext",
    "APIKeyAuth",
    "BearerAuth",
    "Principal",
    "TaskCancelled",
    "AgentCapabilities",
    "AgentCard",
    "AgentExtension",
    "AgentInterface",
    "AgentProvider",
    "AgentSkill",
    "Artifact",
    "AuthenticationInfo",
    "Message",
    "Part",
    "PartList",
    "Role",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskPushNotificationConfig",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
    "TaskStore",
    "MemoryStore",
    "ShelveStore",
    "open_store",
]
# The error tree (a2a_flask.errors), every one.
__all__ += _errors.__all__
