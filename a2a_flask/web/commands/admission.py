"""The API's checks on what ``flask a2a copy-store`` reads from its source.

A source store is data nobody checked: its ids, tenants, owners, sizes and
webhooks must pass what the API checks before the same values would be
stored from a request (docs/internals.rst, invariant 10), so that a server
on the target never holds what it could not have been sent.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from ...config import scope_problem
from ...engine.budget import artifact_size, message_size, task_size, too_large
from ...engine.service import check_id
from ...protocol.calls import Principal, check_tenant
from ...protocol.errors import A2AError, InvalidParamsError
from ...protocol.events import Event
from ...protocol.models import Message, Task, TaskArtifactUpdateEvent, TaskStatusUpdateEvent
from ...stores.base import PushTarget, TaskRecord, scoped, unscoped
from ...stores.copy import Admission


def _why(check: Callable[[], Any]) -> Optional[str]:
    """What ``check`` refuses (the API's own words), or None."""
    try:
        check()
    except (A2AError, ValueError) as exc:
        return str(exc)
    return None


def _check_owner(owner: str) -> None:
    if owner:  # "" is the anonymous caller's
        Principal(owner)  # refuses what no authenticated caller's id could be


def _check_message(message: Optional[Message], field: str) -> None:
    if message is not None:
        check_id(message.message_id, field + ".messageId")
        check_id(message.context_id, field + ".contextId")


class ApiAdmission(Admission):
    """Lets in what the API of ``agent`` (an :class:`~..agent_state.AgentState`)
    would: ids and context ids (:func:`~a2a_flask.engine.service.check_id`),
    tenants (:func:`~a2a_flask.protocol.calls.check_tenant`), owners (as
    :class:`~a2a_flask.protocol.calls.Principal` ids), tasks and events within
    ``A2A_MAX_TASK_BYTES`` (:mod:`a2a_flask.engine.budget`), and webhooks its
    service would register (id, token and credentials, URL policy)."""

    def __init__(self, agent: Any) -> None:
        self.max_task_bytes: int = agent.settings.max_task_bytes
        self.service = agent.service

    def _size(self, held: int) -> None:
        if self.max_task_bytes and held > self.max_task_bytes:
            raise too_large(held, self.max_task_bytes, caller=False)

    def task(self, task_id: str, record: TaskRecord) -> Optional[str]:
        def check() -> None:
            check_id(task_id, "id")
            check_id(record.context_id, "contextId")
            # A named agent's task is stored under its scope and the caller's tenant
            # (stores.base.scoped), parted by a control character: each part is checked.
            scope, tenant = unscoped(record.tenant)
            problem = scope_problem(scope)
            if problem or scoped(scope, tenant) != record.tenant:
                raise InvalidParamsError(f"the store scope {problem or 'is empty'}")
            check_tenant(tenant)
            _check_owner(record.owner)
            self._size(task_size(record.task))
        return _why(check)

    def event(self, task_id: str, seq: int, event: Event) -> Optional[str]:
        def check() -> None:
            if isinstance(event, Task):
                check_id(event.context_id, "contextId")
                for message in event.history:
                    _check_message(message, "history")
                _check_message(event.status.message, "status.message")
                self._size(task_size(event))
            elif isinstance(event, Message):
                _check_message(event, "message")
                self._size(message_size(event))
            elif isinstance(event, TaskStatusUpdateEvent):
                _check_message(event.status.message, "status.message")
                self._size(message_size(event.status.message))
            elif isinstance(event, TaskArtifactUpdateEvent):
                self._size(artifact_size(event.artifact))
        return _why(check)

    def webhook(self, task_id: str, target: PushTarget) -> Optional[str]:
        def check() -> None:
            _check_owner(target.owner)
            # The check SetTaskPushNotificationConfig makes (the same service).
            self.service.check_webhook(target.config)
        return _why(check)
