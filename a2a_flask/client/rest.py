"""A2A 1.0 over HTTP+JSON (REST): the operation table's routes under the interface URL.

A tenant becomes a path prefix (``{url}/{tenant}/tasks/...``); errors are
``{"error": {"code", "status", "message", "details"}}`` with the HTTP status;
streams carry one bare StreamResponse per SSE ``data:``.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Mapping, Optional, Tuple
from urllib.parse import quote

import requests

from ..protocol import codec
from ..protocol.operations import Operation
from .errors import from_rest
from .stream import StreamItem, iter_json_events
from .v1 import V1Transport
from .wire import event_from_v1, is_final, with_draft_members


class RestTransport(V1Transport):
    """A2A 1.0 HTTP+JSON."""

    binding = "HTTP+JSON"

    def root(self) -> str:
        """The root of the interface's routes: ``{url}[/{tenant}]``."""
        root = self.url.rstrip("/")
        return f"{root}/{quote(self.tenant, safe='')}" if self.tenant else root

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

    # ------------------------------------------------------------ operations

    def _exchange(self, operation: Operation[Any], request: Any) -> Tuple[str, str, Dict[str, Any]]:
        """The verb, URL and the members left for the body or query of ``request``
        sent on ``operation``'s 1.0 route: the path takes its variables' members, and
        the tenant travels in the path prefix."""
        route = operation.rest[0]
        members: Dict[str, Any] = codec.encode(request)
        if self.draft:
            with_draft_members(members, request)
        members.pop("tenant", None)
        url = self.root() + route.path(members)
        for name in route.variables:
            members.pop(name, None)
        # A route that serves several verbs (subscribe: GET and POST) is sent POST, as
        # this client always did.
        verb = "POST" if "POST" in route.verbs else route.verbs[0]
        return verb, url, members

    def invoke(self, operation: Operation[Any], request: Any) -> Any:
        verb, url, members = self._exchange(operation, request)
        source = operation.rest[0].source
        if source == "query":
            return self._call(verb, url, params={k: (str(v).lower() if isinstance(v, bool) else v)
                                                 for k, v in members.items()})
        return self._call(verb, url, members if source == "body" else None)

    def invoke_stream(self, operation: Operation[Any], request: Any,
                      last_event_id: Optional[str] = None) -> Iterator[StreamItem]:
        verb, url, members = self._exchange(operation, request)
        body = members if operation.rest[0].source == "body" else None
        return self._stream(verb, url, body, last_event_id)
