"""A2A 1.0 over HTTP+JSON (REST): the proto's routes under the interface URL.

A tenant becomes a path prefix (``{url}/{tenant}/tasks/...``); errors are
``{"error": {"code", "status", "message", "details"}}`` with the HTTP status;
streams carry one bare StreamResponse per SSE ``data:``.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional, Union
from urllib.parse import quote

import requests

from ..protocol import codec
from ..protocol import models as m
from .errors import from_rest
from .stream import StreamItem, iter_json_events
from .transport import Transport
from .wire import decode_model, event_from_v1, is_final


class RestTransport(Transport):
    """A2A 1.0 HTTP+JSON."""

    binding = "HTTP+JSON"

    def path(self, *segments: str, verb: str = "") -> str:
        """``{url}[/{tenant}]/seg/seg[:verb]`` with each segment URL-quoted."""
        parts = [self.url.rstrip("/")]
        if self.tenant:
            parts.append(quote(self.tenant, safe=""))
        parts.extend(quote(s, safe="") for s in segments)
        return "/".join(parts) + (":" + verb if verb else "")

    def _json(self, response: requests.Response) -> Any:
        try:
            if response.status_code >= 400:
                body = None
                try:
                    body = response.json()
                except ValueError:
                    pass
                raise from_rest(body, response)
            if not response.content.strip():
                return {}
            return self.read_json(response)
        finally:
            response.close()

    def _call(self, method: str, url: str, body: Any = None,
              params: Optional[Mapping[str, Any]] = None) -> Any:
        return self._json(self.http(method, url, body=body, params=params))

    def _stream(self, method: str, url: str, body: Any = None,
                last_event_id: Optional[str] = None) -> Iterator[StreamItem]:
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        response = self.http(method, url, body=body, stream=True, headers=headers)
        if response.status_code >= 400 or not self.is_event_stream(response):
            if response.status_code < 400:
                # Not a stream and no error: read it strictly (an empty body means a
                # broken connection, not an empty answer).
                with response:
                    event = event_from_v1(self.read_json(response), response)
                return iter([StreamItem(event, final=is_final(event))])
            event = event_from_v1(self._json(response), response)
            return iter([StreamItem(event, final=is_final(event))])
        return self._items(response)

    @staticmethod
    def _items(response: requests.Response) -> Iterator[StreamItem]:
        try:
            for sse, body in iter_json_events(response):
                if isinstance(body, dict) and "error" in body:
                    raise from_rest(body, response)
                event = event_from_v1(body, response)
                yield StreamItem(event, sse.id, is_final(event))
        finally:
            response.close()

    @staticmethod
    def _body(model: Any) -> Dict[str, Any]:
        body: Dict[str, Any] = codec.encode(model)
        body.pop("tenant", None)  # the tenant travels in the path
        return body

    # ------------------------------------------------------------ operations

    def send(self, request: m.SendMessageRequest) -> Union[m.Task, m.Message]:
        return event_from_v1(self._call("POST", self.path("message", verb="send"),
                                        self._body(request)))  # type: ignore[return-value]

    def open_stream(self, request: m.SendMessageRequest) -> Iterator[StreamItem]:
        return self._stream("POST", self.path("message", verb="stream"), self._body(request))

    def open_subscribe(self, task_id: str, last_event_id: Optional[str] = None
                       ) -> Iterator[StreamItem]:
        return self._stream("POST", self.path("tasks", task_id, verb="subscribe"),
                            last_event_id=last_event_id)

    def get_task(self, task_id: str, history_length: Optional[int] = None) -> m.Task:
        params = {} if history_length is None else {"historyLength": history_length}
        return decode_model(m.Task, self._call("GET", self.path("tasks", task_id), params=params),
                            "task")

    def list_tasks(self, request: m.ListTasksRequest) -> m.ListTasksResponse:
        params = {k: (str(v).lower() if isinstance(v, bool) else v)
                  for k, v in self._body(request).items()}
        return decode_model(m.ListTasksResponse, self._call("GET", self.path("tasks"),
                                                            params=params), "task list")

    def cancel(self, task_id: str, metadata: Optional[Dict[str, Any]] = None) -> m.Task:
        body = {"metadata": metadata} if metadata else {}
        return decode_model(m.Task, self._call("POST", self.path("tasks", task_id, verb="cancel"),
                                               body), "task")

    def set_push(self, config: m.TaskPushNotificationConfig) -> m.TaskPushNotificationConfig:
        body = self._body(config)
        result = self._call("POST", self.path("tasks", config.task_id, "pushNotificationConfigs"),
                            body)
        return decode_model(m.TaskPushNotificationConfig, result, "push config")

    def get_push(self, task_id: str, config_id: str = "") -> m.TaskPushNotificationConfig:
        url = self.path("tasks", task_id, "pushNotificationConfigs", config_id or task_id)
        return decode_model(m.TaskPushNotificationConfig, self._call("GET", url), "push config")

    def list_push(self, task_id: str) -> List[m.TaskPushNotificationConfig]:
        result = self._call("GET", self.path("tasks", task_id, "pushNotificationConfigs"))
        return decode_model(m.ListTaskPushNotificationConfigsResponse, result,
                            "push config list").configs

    def delete_push(self, task_id: str, config_id: str) -> None:
        self._call("DELETE", self.path("tasks", task_id, "pushNotificationConfigs", config_id))

    def extended_card(self) -> Any:
        return self._call("GET", self.path("extendedAgentCard"))
