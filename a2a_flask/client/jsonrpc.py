"""The JSON-RPC 2.0 envelope, and the A2A 1.0 methods over it.

:class:`JsonRpcTransport` posts ``{"jsonrpc": "2.0", "id", "method", "params"}``
(1.0: the operation table's method name, and the request model as ``params``)
with a fresh string id and reads either a ``result`` or an ``error`` (mapped
to the typed errors of the call's protocol version).  Streams are the same
envelope, one per SSE ``data:``; a reply that is not ``text/event-stream`` is
read as one JSON-RPC (error) response.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Dict, Iterator, Optional

import requests

from ..protocol import codec
from ..protocol.errors import A2AResponseError
from ..protocol.operations import Operation
from .errors import from_http, from_jsonrpc
from .stream import StreamItem, iter_json_events
from .v1 import V1Transport
from .wire import event_from_v1, is_final, with_draft_members

#: Turns one stream ``result`` into an item (the id is filled in by the caller).
ResultReader = Callable[[Any, requests.Response], StreamItem]


class JsonRpcTransport(V1Transport):
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

    # ------------------------------------------------------------ 1.0 operations

    def params_of(self, request: Any) -> Dict[str, Any]:
        """A request model as 1.0 ``params``, with the interface's tenant unless it names one."""
        params: Dict[str, Any] = codec.encode(request)
        if self.draft:
            with_draft_members(params, request)
        if self.tenant and not params.get("tenant"):
            params["tenant"] = self.tenant
        return params

    @staticmethod
    def _read_v1(result: Any, response: requests.Response) -> StreamItem:
        event = event_from_v1(result, response)
        return StreamItem(event, final=is_final(event))

    def invoke(self, operation: Operation[Any], request: Any) -> Any:
        return self.call(operation.name, self.params_of(request))

    def invoke_stream(self, operation: Operation[Any], request: Any,
                      last_event_id: Optional[str] = None) -> Iterator[StreamItem]:
        return self.call_stream(operation.name, self.params_of(request), self._read_v1,
                                last_event_id)


def _looks_json(response: requests.Response) -> bool:
    kind = response.headers.get("Content-Type", "").split(";")[0].strip()
    return kind.endswith("json")
