"""What every binding shares: the HTTP session, headers, timeouts, JSON reading.

A transport speaks one interface of an agent (one URL, one binding, one
protocol version) and offers the operations of the table
(:mod:`a2a_flask.protocol.operations`) in 1.0 models, one method each, named as the
table's service method.  Subclasses do the wire: :mod:`.v1` with :mod:`.jsonrpc`
(1.0 JSON-RPC) and :mod:`.rest` (1.0 HTTP+JSON), and :mod:`.legacy` (0.3 and 0.1
JSON-RPC).
"""
from __future__ import annotations

import contextlib
import json
import random
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

import requests

from ..observe.otel import inject as inject_trace
from ..protocol import models as m
from ..protocol.errors import A2AConnectionError, A2AResponseError, UnsupportedOperationError
from .stream import StreamItem, transport_error

Timeout = Union[float, Tuple[float, float], None]

JSON_TYPES = ("application/json", "application/a2a+json", "application/problem+json")

#: HTTP statuses a send is tried again on: a proxy or a stopping worker that did not
#: hand it to the agent (with its key, a send that was accepted is answered again).
RETRY_STATUSES = frozenset({502, 503, 504})
#: Longest pause between two tries of a send (seconds).
MAX_RETRY_PAUSE = 10.0


class Transport:
    """One agent interface; subclasses implement the operations for their wire."""

    #: ``JSONRPC`` or ``HTTP+JSON``.
    binding = ""
    #: Speak the A2A 1.1 draft (its ``A2A-Version``, task generations): set by the
    #: client for a 1.0 interface whose card declares 1.1 too (docs/generations.rst).
    draft = False

    def __init__(self, url: str, version: str, *, session: requests.Session,
                 headers: Optional[Mapping[str, str]] = None, timeout: Timeout = (5, 60),
                 tenant: str = "", extensions: Sequence[str] = (), retries: int = 3,
                 retry_backoff: float = 0.5) -> None:
        self.url = url
        self.version = version
        self.session = session
        self.base_headers: Dict[str, str] = dict(headers or {})
        self.timeout = timeout
        self.tenant = tenant
        self.extensions: List[str] = list(extensions)
        #: Tries after the first for a send with a key (:meth:`once`): on a broken
        #: connection, a timeout, or HTTP 502/503/504.
        self.retries = retries
        #: The first pause between tries (seconds); each next one doubles, with jitter.
        self.retry_backoff = retry_backoff
        self._sending = threading.local()

    @contextlib.contextmanager
    def once(self, key: Optional[str] = None) -> Iterator[str]:
        """One logical send: the HTTP requests made inside carry ``Idempotency-Key``
        (``key``, or a fresh UUID4) and are tried again (:attr:`retries`) when no
        answer came, since the agent answers a repeated key with the first task."""
        key = key or str(uuid.uuid4())
        self._sending.key = key
        try:
            yield key
        finally:
            self._sending.key = None

    # ------------------------------------------------------------ HTTP

    def protocol_headers(self) -> Dict[str, str]:
        """``A2A-Version`` and the extensions header, as this version spells them."""
        out = {"A2A-Version": "1.1" if self.draft else "1.0"}
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
        key: Optional[str] = getattr(self._sending, "key", None)
        if key is not None:
            sent["Idempotency-Key"] = key
        for attempt in range(self.retries + 1 if key is not None else 1):
            if attempt:
                pause = min(self.retry_backoff * 2 ** (attempt - 1), MAX_RETRY_PAUSE)
                time.sleep(pause * random.uniform(0.5, 1.0))  # jitter: retries spread out
            last = attempt == (self.retries if key is not None else 0)
            try:
                response = self.session.request(method, url, data=data, params=params,
                                                headers=sent, stream=stream, timeout=self.timeout)
            except requests.RequestException as exc:
                if last:
                    raise transport_error(exc, url) from exc
                continue
            if last or response.status_code not in RETRY_STATUSES:
                return response
            response.close()
        raise AssertionError("unreachable: the last try returns or raises")

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
    # One method per operation of the table (a2a_flask.protocol.operations), named as
    # its Service method and taking its 1.0 request model, as the service does.

    def send_message(self, request: m.SendMessageRequest) -> Union[m.Task, m.Message]:
        raise NotImplementedError

    def send_streaming_message(self, request: m.SendMessageRequest) -> Iterator[StreamItem]:
        """Start a streaming send; errors before the first event are raised here."""
        raise NotImplementedError

    def get_task(self, request: m.GetTaskRequest) -> m.Task:
        raise NotImplementedError

    def list_tasks(self, request: m.ListTasksRequest) -> m.ListTasksResponse:
        raise self.unsupported("ListTasks")

    def cancel_task(self, request: m.CancelTaskRequest) -> m.Task:
        raise NotImplementedError

    def subscribe_to_task(self, request: m.SubscribeToTaskRequest,
                          last_event_id: Optional[str] = None) -> Iterator[StreamItem]:
        """Attach to a task's stream (after ``last_event_id``, when given)."""
        raise NotImplementedError

    def create_push_config(self, config: m.TaskPushNotificationConfig
                           ) -> m.TaskPushNotificationConfig:
        raise NotImplementedError

    def get_push_config(self, request: m.TaskPushConfigRequest) -> m.TaskPushNotificationConfig:
        """The config ``request.id`` of a task; without an id, the one named after the task."""
        raise NotImplementedError

    def list_push_configs(self, request: m.ListTaskPushNotificationConfigsRequest
                          ) -> List[m.TaskPushNotificationConfig]:
        raise NotImplementedError

    def delete_push_config(self, request: m.TaskPushConfigRequest) -> None:
        raise NotImplementedError

    def get_extended_card(self, request: m.GetExtendedAgentCardRequest) -> Any:
        """The extended card JSON (normalised to a model by the client)."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.binding} {self.version} {self.url}>"
