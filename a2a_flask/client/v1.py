"""The A2A 1.0 operations over either 1.0 binding, as the operation table says.

A 1.0 binding only says how one operation of :data:`a2a_flask.protocol.operations.OPERATIONS`
travels: :meth:`V1Transport.invoke` sends a request model and returns the JSON
result, :meth:`V1Transport.invoke_stream` opens a stream.  JSON-RPC sends the
entry's method name (:mod:`.jsonrpc`), HTTP+JSON its route (:mod:`.rest`); what
is sent is the request model itself, so neither lists the operations again.
Decoding the answers is the same for both and lives here.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterator, List, Optional, Union

from ..protocol import models as m
from ..protocol.operations import BY_METHOD as OP
from ..protocol.operations import Operation
from .stream import StreamItem
from .transport import Transport
from .wire import decode_model, event_from_v1

class V1Transport(Transport):
    """A 1.0 binding: subclasses send one operation's request (:meth:`invoke`)."""

    def invoke(self, operation: Operation[Any], request: Any) -> Any:
        """Send ``request`` as ``operation``; the answer's JSON (errors raised typed)."""
        raise NotImplementedError

    def invoke_stream(self, operation: Operation[Any], request: Any,
                      last_event_id: Optional[str] = None) -> Iterator[StreamItem]:
        """Open ``operation``'s stream; errors before it opens are raised now."""
        raise NotImplementedError

    # ------------------------------------------------------------ operations
    # Each sends the table's entry of its own name (a misspelt one is a KeyError on the
    # first call: tests/client/test_client_operations.py calls each).

    def send_message(self, request: m.SendMessageRequest) -> Union[m.Task, m.Message]:
        return event_from_v1(self.invoke(OP["send_message"], request))  # type: ignore[return-value]

    def send_streaming_message(self, request: m.SendMessageRequest) -> Iterator[StreamItem]:
        return self.invoke_stream(OP["send_streaming_message"], request)

    def get_task(self, request: m.GetTaskRequest) -> m.Task:
        return decode_model(m.Task, self.invoke(OP["get_task"], request), "task")

    def list_tasks(self, request: m.ListTasksRequest) -> m.ListTasksResponse:
        return decode_model(m.ListTasksResponse, self.invoke(OP["list_tasks"], request),
                            "task list")

    def cancel_task(self, request: m.CancelTaskRequest) -> m.Task:
        return decode_model(m.Task, self.invoke(OP["cancel_task"], request), "task")

    def subscribe_to_task(self, request: m.SubscribeToTaskRequest,
                          last_event_id: Optional[str] = None) -> Iterator[StreamItem]:
        return self.invoke_stream(OP["subscribe_to_task"], request, last_event_id)

    def create_push_config(self, config: m.TaskPushNotificationConfig
                           ) -> m.TaskPushNotificationConfig:
        result = self.invoke(OP["create_push_config"], config)
        return decode_model(m.TaskPushNotificationConfig, result, "push config")

    def get_push_config(self, request: m.TaskPushConfigRequest) -> m.TaskPushNotificationConfig:
        # 1.0 needs an id: the config named after the task is the one a send registers.
        request = dataclasses.replace(request, id=request.id or request.task_id)
        result = self.invoke(OP["get_push_config"], request)
        return decode_model(m.TaskPushNotificationConfig, result, "push config")

    def list_push_configs(self, request: m.ListTaskPushNotificationConfigsRequest
                          ) -> List[m.TaskPushNotificationConfig]:
        result = self.invoke(OP["list_push_configs"], request)
        return decode_model(m.ListTaskPushNotificationConfigsResponse, result or {},
                            "push config list").configs

    def delete_push_config(self, request: m.TaskPushConfigRequest) -> None:
        self.invoke(OP["delete_push_config"], request)

    def get_extended_card(self, request: m.GetExtendedAgentCardRequest) -> Any:
        return self.invoke(OP["get_extended_card"], request)
