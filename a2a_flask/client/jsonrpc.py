"""The JSON-RPC 2.0 envelope, and the A2A 1.0 methods over it.

:class:`JsonRpcTransport` posts ``{"jsonrpc": "2.0", "id", "method", "params"}``
with a fresh string id and reads either a ``result`` or an ``error`` (mapped
to the typed errors of the call's protocol version).  Streams are the same
envelope, one per SSE ``data:``; a reply that is not ``text/event-stream`` is
read as one JSON-RPC (error) response.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

import requests

from ..protocol import codec
from ..protocol import models as m
from ..protocol.errors import A2AResponseError
from .errors import from_http, from_jsonrpc
from .stream import StreamItem, iter_json_events
from .transport import Transport
from .wire import decode_model, event_from_v1, is_final

#: Turns one stream ``result`` into an item (the id is filled in by the caller).
ResultReader = Callable[[Any, requests.Response], StreamItem]


class JsonRpcTransport(Transport):
    """A2A 1.0 over JSON-RPC; the envelope handling is shared with the 0.x dialects."""

    binding = "JSONRPC"

    # ------------------------------------------------------------ envelope

    def envelope(self, method: str, params: Any) -> Dict[str, Any]:
        body: Dict[str, Any] = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method}
        if params is not None:
            body["params"] = params
        return body

    def _answer(self, response: requests.Response) -> Any:
        """The ``result`` of a JSON-RPC response, or its error raised."""
        if response.status_code != 200 and not _looks_json(response):
            raise from_http(response)
        body = self.read_json(response)
        if not isinstance(body, dict):
            raise A2AResponseError(f"Not a JSON-RPC response: {body!r:.200}",
                                   response=response)
        if "error" in body and body["error"] is not None:
            raise from_jsonrpc(body["error"], self.version, response)
        if response.status_code != 200:
            raise from_http(response, body)
        if "result" not in body:
            raise A2AResponseError("JSON-RPC response has neither result nor error",
                                   response=response)
        return body["result"]

    def call(self, method: str, params: Any = None) -> Any:
        """One JSON-RPC call; returns ``result`` (raises the typed error otherwise)."""
        response = self.http("POST", self.url, body=self.envelope(method, params))
        try:
            return self._answer(response)
        finally:
            response.close()

    def call_stream(self, method: str, params: Any, read: ResultReader,
                    last_event_id: Optional[str] = None) -> Iterator[StreamItem]:
        """Start a streaming call; errors before the stream opens are raised now."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        response = self.http("POST", self.url, body=self.envelope(method, params), stream=True,
                             headers=headers)
        if not self.is_event_stream(response):
            try:
                result = self._answer(response)
            finally:
                response.close()
            # Not a stream but a result: some agents answer a stream with one object.
            return iter([read(result, response)])
        return self._items(response, read)

    def _items(self, response: requests.Response, read: ResultReader) -> Iterator[StreamItem]:
        try:
            for sse, body in iter_json_events(response):
                if not isinstance(body, dict):
                    raise A2AResponseError(f"Stream event is not a JSON-RPC response: "
                                           f"{body!r:.200}", response=response)
                if body.get("error") is not None:
                    raise from_jsonrpc(body["error"], self.version, response)
                item = read(body.get("result"), response)
                item.id = sse.id
                yield item
        finally:
            response.close()

    # ------------------------------------------------------------ 1.0 methods

    def params(self, **values: Any) -> Dict[str, Any]:
        """Method params with the interface's tenant (1.0 puts it in ``params.tenant``)."""
        out = {k: v for k, v in values.items() if v is not None}
        if self.tenant:
            out["tenant"] = self.tenant
        return out

    @staticmethod
    def _read_v1(result: Any, response: requests.Response) -> StreamItem:
        event = event_from_v1(result, response)
        return StreamItem(event, final=is_final(event))

    def send(self, request: m.SendMessageRequest) -> Union[m.Task, m.Message]:
        request.tenant = request.tenant or self.tenant
        return event_from_v1(self.call("SendMessage", codec.encode(request)))  # type: ignore

    def open_stream(self, request: m.SendMessageRequest) -> Iterator[StreamItem]:
        request.tenant = request.tenant or self.tenant
        return self.call_stream("SendStreamingMessage", codec.encode(request), self._read_v1)

    def open_subscribe(self, task_id: str, last_event_id: Optional[str] = None
                       ) -> Iterator[StreamItem]:
        return self.call_stream("SubscribeToTask", self.params(id=task_id), self._read_v1,
                                last_event_id)

    def get_task(self, task_id: str, history_length: Optional[int] = None) -> m.Task:
        result = self.call("GetTask", self.params(id=task_id, historyLength=history_length))
        return decode_model(m.Task, result, "task")

    def list_tasks(self, request: m.ListTasksRequest) -> m.ListTasksResponse:
        request.tenant = request.tenant or self.tenant
        result = self.call("ListTasks", codec.encode(request))
        return decode_model(m.ListTasksResponse, result, "task list")

    def cancel(self, task_id: str, metadata: Optional[Dict[str, Any]] = None) -> m.Task:
        result = self.call("CancelTask", self.params(id=task_id, metadata=metadata))
        return decode_model(m.Task, result, "task")

    def set_push(self, config: m.TaskPushNotificationConfig) -> m.TaskPushNotificationConfig:
        config.tenant = config.tenant or self.tenant
        result = self.call("CreateTaskPushNotificationConfig", codec.encode(config))
        return decode_model(m.TaskPushNotificationConfig, result, "push config")

    def get_push(self, task_id: str, config_id: str = "") -> m.TaskPushNotificationConfig:
        result = self.call("GetTaskPushNotificationConfig",
                           self.params(taskId=task_id, id=config_id or task_id))
        return decode_model(m.TaskPushNotificationConfig, result, "push config")

    def list_push(self, task_id: str) -> List[m.TaskPushNotificationConfig]:
        result = self.call("ListTaskPushNotificationConfigs", self.params(taskId=task_id))
        return decode_model(m.ListTaskPushNotificationConfigsResponse, result or {},
                            "push config list").configs

    def delete_push(self, task_id: str, config_id: str) -> None:
        self.call("DeleteTaskPushNotificationConfig", self.params(taskId=task_id, id=config_id))

    def extended_card(self) -> Any:
        return self.call("GetExtendedAgentCard", self.params())


def _looks_json(response: requests.Response) -> bool:
    kind = response.headers.get("Content-Type", "").split(";")[0].strip()
    return kind.endswith("json")
