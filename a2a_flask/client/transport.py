"""What every binding shares: the HTTP session, headers, timeouts, JSON reading.

A transport speaks one interface of an agent (one URL, one binding, one
protocol version) and offers the operations in 1.0 models.  Subclasses do the
wire: :mod:`.jsonrpc` (1.0 JSON-RPC), :mod:`.rest` (1.0 HTTP+JSON) and
:mod:`.legacy` (0.3 and 0.1 JSON-RPC).
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import requests

from ..observe.otel import inject as inject_trace
from ..protocol import models as m
from ..protocol.errors import A2AConnectionError, A2AResponseError, UnsupportedOperationError
from .stream import StreamItem, transport_error

Timeout = Union[float, Tuple[float, float], None]

JSON_TYPES = ("application/json", "application/a2a+json", "application/problem+json")


class Transport:
    """One agent interface; subclasses implement the operations for their wire."""

    #: ``JSONRPC`` or ``HTTP+JSON``.
    binding = ""

    def __init__(self, url: str, version: str, *, session: requests.Session,
                 headers: Optional[Mapping[str, str]] = None, timeout: Timeout = (5, 60),
                 tenant: str = "", extensions: Sequence[str] = ()) -> None:
        self.url = url
        self.version = version
        self.session = session
        self.base_headers: Dict[str, str] = dict(headers or {})
        self.timeout = timeout
        self.tenant = tenant
        self.extensions: List[str] = list(extensions)

    # ------------------------------------------------------------ HTTP

    def protocol_headers(self) -> Dict[str, str]:
        """``A2A-Version`` and the extensions header, as this version spells them."""
        out = {"A2A-Version": "1.0"}
        if self.extensions:
            out["A2A-Extensions"] = ", ".join(self.extensions)
        return out

    def http(self, method: str, url: str, *, body: Any = None, params: Any = None,
             stream: bool = False, headers: Optional[Mapping[str, str]] = None
             ) -> requests.Response:
        """One HTTP exchange; network failures become A2AConnectionError / A2ATimeoutError."""
        sent = {**self.protocol_headers(), **self.base_headers, **(headers or {})}
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
            sent.setdefault("Content-Type", "application/json")
        inject_trace(sent)  # W3C traceparent when OpenTelemetry is installed
        try:
            return self.session.request(method, url, data=data, params=params, headers=sent,
                                        stream=stream, timeout=self.timeout)
        except requests.RequestException as exc:
            raise transport_error(exc, url) from exc

    @staticmethod
    def read_json(response: requests.Response) -> Any:
        """The body as JSON; A2AResponseError if it is not JSON, and
        A2AConnectionError if there is no body at all (the connection broke early)."""
        try:
            if not response.content:
                raise A2AConnectionError(f"The agent at {response.url} sent no answer (HTTP "
                                         f"{response.status_code}, empty body): the connection "
                                         "was closed early")
            return response.json()
        except ValueError:
            raise A2AResponseError(
                f"The agent answered HTTP {response.status_code} with "
                f"{response.headers.get('Content-Type') or 'no content type'}, not JSON: "
                f"{response.text[:200]!r}", response=response) from None
        except requests.RequestException as exc:
            raise transport_error(exc, response.url) from exc

    @staticmethod
    def is_event_stream(response: requests.Response) -> bool:
        return response.headers.get("Content-Type", "").split(";")[0].strip() == "text/event-stream"

    def unsupported(self, operation: str, needs: str = "1.0") -> UnsupportedOperationError:
        return UnsupportedOperationError(
            f"{operation} needs A2A {needs}; the selected interface ({self.binding} {self.url}) "
            f"speaks A2A {self.version}")

    # ------------------------------------------------------------ operations

    def send(self, request: m.SendMessageRequest) -> Union[m.Task, m.Message]:
        raise NotImplementedError

    def open_stream(self, request: m.SendMessageRequest) -> Iterator[StreamItem]:
        """Start a streaming send; errors before the first event are raised here."""
        raise NotImplementedError

    def open_subscribe(self, task_id: str, last_event_id: Optional[str] = None
                       ) -> Iterator[StreamItem]:
        raise NotImplementedError

    def get_task(self, task_id: str, history_length: Optional[int] = None) -> m.Task:
        raise NotImplementedError

    def list_tasks(self, request: m.ListTasksRequest) -> m.ListTasksResponse:
        raise self.unsupported("ListTasks")

    def cancel(self, task_id: str, metadata: Optional[Dict[str, Any]] = None) -> m.Task:
        raise NotImplementedError

    def set_push(self, config: m.TaskPushNotificationConfig) -> m.TaskPushNotificationConfig:
        raise NotImplementedError

    def get_push(self, task_id: str, config_id: str = "") -> m.TaskPushNotificationConfig:
        raise NotImplementedError

    def list_push(self, task_id: str) -> List[m.TaskPushNotificationConfig]:
        raise NotImplementedError

    def delete_push(self, task_id: str, config_id: str) -> None:
        raise NotImplementedError

    def extended_card(self) -> Any:
        """The extended card JSON (normalised to a model by the client)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.binding} {self.version} {self.url}>"
