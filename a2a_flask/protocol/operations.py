"""The operations of A2A 1.0, listed once: everything else is derived from this table.

Each :class:`Operation` names the 1.0 JSON-RPC method, its request model, the
:class:`Service` method that performs it, whether it answers with a stream,
and its HTTP+JSON routes (1.0 under ``/rest``, 0.3 under ``/rest/v1``).  From
it come the 1.0 JSON-RPC method map (:mod:`a2a_flask.dialects.v1`), the REST
routes of both flavours (:mod:`a2a_flask.web.rest`), the method names of
metrics and spans, and the client's: :class:`a2a_flask.client.A2AClient` has one
method per operation, named as its :class:`Service` method, and its 1.0
transports send the method and REST route of the entry.  The older dialects map their own method names onto these
operations and add only how they parse and render.

To add an operation: add its entry to :data:`OPERATIONS` and its method to
:class:`Service` (and to the engine's ``AgentService``, which must conform: the
type check says where it does not).  The 1.0 JSON-RPC method, the 1.0 REST
routes, the metric names and the client's calls follow from the entry (the client
method itself is written by hand: its arguments are the caller's, not a model); the 0.3 and 0.1 dialects
never gain it (they are history).  ``tests/unit/test_operations.py`` checks that
everything derived covers the table and nothing else lists operations;
``tests/client/test_client_operations.py`` that the client has each, and the fuzz
suites (``tests/fuzz``) and the auth matrix (``tests/web/test_auth*.py``) fail until
the new operation is fuzzed and auth-tested.

The table only names things: it imports nothing but the 1.0 models, and rules
are strings in the routing syntax of the web layer (``<a2aid:name>`` is one
path segment; a variable is named as the request member it fills).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import (Any, Callable, Dict, Generic, Iterator, Mapping, Optional, Protocol, Tuple,
                    Type, TypeVar, Union)
from urllib.parse import quote

from . import models as m
from .calls import CallContext, ServedItem

Request = TypeVar("Request")


class Service(Protocol):
    """The engine's service as the bindings and dialects call it: one method per
    operation, each ``(request, ctx)`` -> result, or an iterator of stream items
    for the streaming ones.  Every method here is an operation of the table."""

    def send_message(self, request: m.SendMessageRequest, ctx: CallContext,
                     client_task_id: str = "") -> Union[m.Task, m.Message]: ...

    def send_streaming_message(self, request: m.SendMessageRequest, ctx: CallContext,
                               client_task_id: str = "") -> Iterator[ServedItem]: ...

    def get_task(self, request: m.GetTaskRequest, ctx: CallContext) -> m.Task: ...

    def list_tasks(self, request: m.ListTasksRequest, ctx: CallContext) -> m.ListTasksResponse: ...

    def cancel_task(self, request: m.CancelTaskRequest, ctx: CallContext) -> m.Task: ...

    def subscribe_to_task(self, request: m.SubscribeToTaskRequest,
                          ctx: CallContext) -> Iterator[ServedItem]: ...

    def create_push_config(self, config: m.TaskPushNotificationConfig,
                           ctx: CallContext) -> m.TaskPushNotificationConfig: ...

    def get_push_config(self, request: m.TaskPushConfigRequest,
                        ctx: CallContext) -> m.TaskPushNotificationConfig: ...

    def list_push_configs(self, request: m.ListTaskPushNotificationConfigsRequest,
                          ctx: CallContext) -> m.ListTaskPushNotificationConfigsResponse: ...

    def delete_push_config(self, request: m.TaskPushConfigRequest, ctx: CallContext) -> m.Empty: ...

    def get_extended_card(self, ctx: CallContext) -> m.AgentCard: ...


class DialectService(Service, Protocol):
    """What the older dialects ask besides the operations."""

    def task_dialect(self, task_id: str, ctx: CallContext) -> str:
        """The version a task was created in (0.1 and 0.3 share method names and
        answer in the task's own)."""

    def card_for(self, request: m.GetExtendedAgentCardRequest, ctx: CallContext) -> m.AgentCard:
        """The card a caller should use (0.3 REST ``GET /v1/card``)."""


#: ``(service, request, ctx)`` -> the operation's result (or stream).
Call = Callable[[DialectService, Any, CallContext], Any]


@dataclass(frozen=True)
class Route:
    """One HTTP+JSON route of an operation.

    ``source`` says where the request members the path does not hold come from:
    ``"body"`` (a JSON object), ``"query"`` (the query string) or ``""`` (nowhere).
    """

    verbs: Tuple[str, ...]
    rule: str
    source: str = ""

    @property
    def variables(self) -> Tuple[str, ...]:
        """The request members the path holds, in order."""
        return tuple(_VARIABLE.findall(self.rule))

    def path(self, members: Mapping[str, Any]) -> str:
        """The rule with each variable replaced by its member's value (JSON names),
        percent-encoded as one path segment (``/`` too); a missing member is empty."""
        return _VARIABLE.sub(lambda found: quote(str(members.get(found.group(1), "")), safe=""),
                             self.rule)


#: A variable of a rule: ``<a2aid:name>``.
_VARIABLE = re.compile(r"<a2aid:(\w+)>")


@dataclass(frozen=True)
class Operation(Generic[Request]):
    """One A2A operation (see the module's docstring)."""

    #: The 1.0 JSON-RPC method name; metrics and spans name the operation so.
    name: str
    #: The 1.0 request model (``params`` of JSON-RPC; built from path, query, body in REST).
    request: Type[Request]
    #: The :class:`Service` method ``call`` calls (checked by the tests).
    service_method: str
    #: Calls it: a typed call, so a misspelt method fails the type check.
    call: Callable[[Service, Request, CallContext], Any]
    #: Answers with a stream of events (SSE) rather than one result.
    streaming: bool = False
    #: Its routes under the 1.0 REST root.
    rest: Tuple[Route, ...] = ()
    #: Its routes under the 0.3 REST root: :data:`SAME_AS_1_0` for the operations 0.3
    #: had at the same paths; none (the default) for operations 0.3 did not have.
    rest03: Optional[Tuple[Route, ...]] = ()

    @property
    def routes03(self) -> Tuple[Route, ...]:
        """The 0.3 REST routes."""
        return self.rest if self.rest03 is SAME_AS_1_0 else self.rest03 or ()


#: ``Operation.rest03``: the same routes as 1.0.
SAME_AS_1_0 = None


_TASK = "/tasks/<a2aid:id>"
_PUSH = "/tasks/<a2aid:taskId>/pushNotificationConfigs"

#: Every operation, in the order of the 1.0 specification.
OPERATIONS: Tuple[Operation[Any], ...] = (
    Operation("SendMessage", m.SendMessageRequest, "send_message",
              lambda service, request, ctx: service.send_message(request, ctx),
              rest=(Route(("POST",), "/message:send", "body"),),
              rest03=SAME_AS_1_0),
    Operation("SendStreamingMessage", m.SendMessageRequest, "send_streaming_message",
              lambda service, request, ctx: service.send_streaming_message(request, ctx),
              streaming=True, rest=(Route(("POST",), "/message:stream", "body"),),
              rest03=SAME_AS_1_0),
    Operation("GetTask", m.GetTaskRequest, "get_task",
              lambda service, request, ctx: service.get_task(request, ctx),
              rest=(Route(("GET",), _TASK, "query"),),
              rest03=SAME_AS_1_0),
    Operation("ListTasks", m.ListTasksRequest, "list_tasks",
              lambda service, request, ctx: service.list_tasks(request, ctx),
              rest=(Route(("GET",), "/tasks", "query"),),
              rest03=SAME_AS_1_0),
    Operation("CancelTask", m.CancelTaskRequest, "cancel_task",
              lambda service, request, ctx: service.cancel_task(request, ctx),
              rest=(Route(("POST",), _TASK + ":cancel", "body"),),
              rest03=SAME_AS_1_0),
    Operation("SubscribeToTask", m.SubscribeToTaskRequest, "subscribe_to_task",
              lambda service, request, ctx: service.subscribe_to_task(request, ctx),
              streaming=True, rest=(Route(("GET", "POST"), _TASK + ":subscribe"),),
              rest03=SAME_AS_1_0),
    Operation("CreateTaskPushNotificationConfig", m.TaskPushNotificationConfig,
              "create_push_config",
              lambda service, request, ctx: service.create_push_config(request, ctx),
              rest=(Route(("POST",), _PUSH, "body"),),
              rest03=SAME_AS_1_0),
    Operation("GetTaskPushNotificationConfig", m.TaskPushConfigRequest, "get_push_config",
              lambda service, request, ctx: service.get_push_config(request, ctx),
              rest=(Route(("GET",), _PUSH + "/<a2aid:id>"),),
              rest03=SAME_AS_1_0),
    Operation("ListTaskPushNotificationConfigs", m.ListTaskPushNotificationConfigsRequest,
              "list_push_configs",
              lambda service, request, ctx: service.list_push_configs(request, ctx),
              rest=(Route(("GET",), _PUSH, "query"),),
              rest03=SAME_AS_1_0),
    Operation("DeleteTaskPushNotificationConfig", m.TaskPushConfigRequest, "delete_push_config",
              lambda service, request, ctx: service.delete_push_config(request, ctx),
              rest=(Route(("DELETE",), _PUSH + "/<a2aid:id>"),),
              rest03=SAME_AS_1_0),
    Operation("GetExtendedAgentCard", m.GetExtendedAgentCardRequest, "get_extended_card",
              lambda service, request, ctx: service.get_extended_card(ctx),
              rest=(Route(("GET",), "/extendedAgentCard"),),
              rest03=(Route(("GET",), "/card"),)),
)

#: The operations by 1.0 method name.
BY_NAME: Dict[str, Operation[Any]] = {op.name: op for op in OPERATIONS}
#: The operations by :class:`Service` method name (the client's method names too).
BY_METHOD: Dict[str, Operation[Any]] = {op.service_method: op for op in OPERATIONS}
