"""The older JSON-RPC generations: 0.3 (also 0.2) and 0.1.

Requests are built from the same 1.0 models and rewritten into the old shapes
(:mod:`.wire`); answers are rewritten back into 1.0 models.  Neither version
sends ``A2A-Version`` (a missing header means 0.3), and operations a version
lacks (ListTasks; in 0.1 also deleting push configs and the extended card)
raise :class:`~a2a_flask.errors.UnsupportedOperationError` without a request.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Union

import requests

from ..protocol import models as m
from ..protocol.errors import TaskNotFoundError
from .jsonrpc import JsonRpcTransport
from .stream import StreamItem
from .wire import (
    _drop_none,
    decode_model,
    event_from_v01,
    event_from_v03,
    message_out_v01,
    message_out_v03,
    push_config_in,
    push_inner_out,
    task_in,
)


class V03Transport(JsonRpcTransport):
    """A2A 0.3 (and 0.2) JSON-RPC: ``message/send``, ``kind`` shapes, bare results."""

    def protocol_headers(self) -> Dict[str, str]:
        # 0.3 used the X- form; servers that speak both accept it.
        return {"X-A2A-Extensions": ", ".join(self.extensions)} if self.extensions else {}

    @staticmethod
    def _read(result: Any, response: requests.Response) -> StreamItem:
        event, final = event_from_v03(result, response)
        return StreamItem(event, final=final)

    def _send_params(self, request: m.SendMessageRequest) -> Dict[str, Any]:
        config = request.configuration or m.SendMessageConfiguration()
        configuration = _drop_none({
            "acceptedOutputModes": config.accepted_output_modes or None,
            "historyLength": config.history_length,
            "blocking": not config.return_immediately,
            "pushNotificationConfig": (push_inner_out(config.task_push_notification_config)
                                       if config.task_push_notification_config else None),
        })
        return _drop_none({"message": message_out_v03(request.message),
                           "configuration": configuration, "metadata": request.metadata})

    def send_message(self, request: m.SendMessageRequest) -> Union[m.Task, m.Message]:
        event, _ = event_from_v03(self.call("message/send", self._send_params(request)))
        return event  # type: ignore[return-value]

    def send_streaming_message(self, request: m.SendMessageRequest) -> Iterator[StreamItem]:
        return self.call_stream("message/stream", self._send_params(request), self._read)

    def subscribe_to_task(self, request: m.SubscribeToTaskRequest,
                          last_event_id: Optional[str] = None) -> Iterator[StreamItem]:
        return self.call_stream("tasks/resubscribe", {"id": request.id}, self._read,
                                last_event_id)

    def list_tasks(self, request: m.ListTasksRequest) -> m.ListTasksResponse:
        raise self.unsupported("ListTasks")

    def get_task(self, request: m.GetTaskRequest) -> m.Task:
        result = self.call("tasks/get", _drop_none({"id": request.id,
                                                    "historyLength": request.history_length}))
        return decode_model(m.Task, task_in(result), "task")

    def cancel_task(self, request: m.CancelTaskRequest) -> m.Task:
        result = self.call("tasks/cancel", _drop_none({"id": request.id,
                                                       "metadata": request.metadata}))
        return decode_model(m.Task, task_in(result), "task")

    def create_push_config(self, config: m.TaskPushNotificationConfig
                           ) -> m.TaskPushNotificationConfig:
        result = self.call("tasks/pushNotificationConfig/set",
                           {"taskId": config.task_id,
                            "pushNotificationConfig": push_inner_out(config)})
        return push_config_in(result)

    def get_push_config(self, request: m.TaskPushConfigRequest) -> m.TaskPushNotificationConfig:
        result = self.call("tasks/pushNotificationConfig/get",
                           _drop_none({"id": request.task_id,
                                       "pushNotificationConfigId": request.id or None}))
        return push_config_in(result)

    def list_push_configs(self, request: m.ListTaskPushNotificationConfigsRequest
                          ) -> List[m.TaskPushNotificationConfig]:
        result = self.call("tasks/pushNotificationConfig/list", {"id": request.task_id})
        return [push_config_in(item) for item in (result or [])]

    def delete_push_config(self, request: m.TaskPushConfigRequest) -> None:
        self.call("tasks/pushNotificationConfig/delete",
                  {"id": request.task_id, "pushNotificationConfigId": request.id})

    def get_extended_card(self, request: m.GetExtendedAgentCardRequest) -> Any:
        return self.call("agent/getAuthenticatedExtendedCard")


class V01Transport(V03Transport):
    """A2A 0.1 JSON-RPC: ``tasks/send``; the client names the task and the session.

    A new task gets a fresh id and, unless the caller gave a context, a fresh
    ``sessionId``; 0.1 stream events carry no session, so the transport
    remembers each task's session to fill in ``context_id``.
    """

    _MAX_REMEMBERED = 1000

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sessions: Dict[str, str] = {}

    def _remember(self, task_id: str, session_id: str) -> None:
        if task_id and session_id:
            if len(self._sessions) >= self._MAX_REMEMBERED:
                self._sessions.clear()
            self._sessions[task_id] = session_id

    def _send_params(self, request: m.SendMessageRequest) -> Dict[str, Any]:
        message = request.message
        task_id = message.task_id or m.new_id()
        session = message.context_id or self._sessions.get(task_id, "")
        if not session and not message.task_id:
            session = m.new_id()
        self._remember(task_id, session)
        config = request.configuration or m.SendMessageConfiguration()
        push = config.task_push_notification_config
        return _drop_none({
            "id": task_id,
            "sessionId": session or None,
            "message": message_out_v01(message),
            "historyLength": config.history_length,
            "acceptedOutputModes": config.accepted_output_modes or None,
            "pushNotification": push_inner_out(push, with_id=False) if push else None,
            "metadata": request.metadata,
        })

    def _reader(self, task_id: str):  # type: ignore[no-untyped-def]
        def read(result: Any, response: requests.Response) -> StreamItem:
            event, final = event_from_v01(result, self._sessions.get(task_id, ""), response)
            return StreamItem(event, final=final)

        return read

    def send_message(self, request: m.SendMessageRequest) -> Union[m.Task, m.Message]:
        params = self._send_params(request)
        task = decode_model(m.Task, task_in(self.call("tasks/send", params)), "task")
        self._remember(task.id, task.context_id)
        return task

    def send_streaming_message(self, request: m.SendMessageRequest) -> Iterator[StreamItem]:
        params = self._send_params(request)
        return self.call_stream("tasks/sendSubscribe", params, self._reader(params["id"]))

    def subscribe_to_task(self, request: m.SubscribeToTaskRequest,
                          last_event_id: Optional[str] = None) -> Iterator[StreamItem]:
        return self.call_stream("tasks/resubscribe", {"id": request.id},
                                self._reader(request.id), last_event_id)

    def get_task(self, request: m.GetTaskRequest) -> m.Task:
        task = super().get_task(request)
        self._remember(task.id, task.context_id)
        return task

    def create_push_config(self, config: m.TaskPushNotificationConfig
                           ) -> m.TaskPushNotificationConfig:
        result = self.call("tasks/pushNotification/set",
                           {"id": config.task_id,
                            "pushNotificationConfig": push_inner_out(config, with_id=False)})
        return push_config_in(result)

    def get_push_config(self, request: m.TaskPushConfigRequest) -> m.TaskPushNotificationConfig:
        return push_config_in(self.call("tasks/pushNotification/get", {"id": request.task_id}))

    def list_push_configs(self, request: m.ListTaskPushNotificationConfigsRequest
                          ) -> List[m.TaskPushNotificationConfig]:
        # 0.1 keeps one config per task.
        try:
            return [self.get_push_config(m.TaskPushConfigRequest(task_id=request.task_id))]
        except TaskNotFoundError:
            return []

    def delete_push_config(self, request: m.TaskPushConfigRequest) -> None:
        raise self.unsupported("Deleting a push notification config", "0.3 or 1.0")

    def get_extended_card(self, request: m.GetExtendedAgentCardRequest) -> Any:
        raise self.unsupported("The extended agent card", "0.3 or 1.0")
