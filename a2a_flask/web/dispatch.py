"""One request pipeline for both bindings: identify, resolve, parse, call, answer.

JSON-RPC (:mod:`.jsonrpc`) and HTTP+JSON (:mod:`.rest`) differ only in how
they find the operation in a request and how they write answers and errors;
each says so in a :class:`Binding`, and :func:`dispatch` runs the rest, in
the same order for both: the caller is identified, the operation resolved,
extensions negotiated, the request parsed, the operation called, and its
result or stream written the dialect's way.  A2A errors become the binding's
error answer; anything else is logged with its traceback and answered as an
internal error.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from flask import Response, request

from ..dialects.registry import Method, StreamRenderer
from ..engine.service import AgentService
from ..observe.calls import CallNote
from ..protocol.calls import CallContext, ServedItem
from ..protocol.errors import A2AError, InternalError
from .auth import Authentication
from .headers import negotiate_extensions
from .sse import parse_last_event_id

log = logging.getLogger("a2a_flask")

#: A stream's renderer: a stream item -> the data of its event (None: skip it).
EventRenderer = Callable[[Any], Optional[Any]]


class Binding:
    """What one binding does its own way, for one request."""

    #: Logged with the traceback of an unexpected failure.
    failure = "request failed"
    #: The tenant the URL names ("" when the request's own ``tenant`` member decides).
    tenant = ""

    def resolve(self, service: AgentService, note: CallNote) -> Tuple[str, Method, StreamRenderer]:
        """The dialect version, the Method and the default stream renderer of the call
        (or an A2AError: a bad request, an unserved version, an unknown method)."""
        raise NotImplementedError

    def parse(self, method: Method) -> Any:
        """The request model (the binding knows where the members are)."""
        raise NotImplementedError

    def accept(self) -> None:
        """Last checks once the request parsed (JSON-RPC refuses notifications here)."""

    def answer(self, body: Any, headers: Dict[str, str]) -> Response:
        """The response to a rendered result."""
        raise NotImplementedError

    def stream(self, items: Iterable[ServedItem], render_event: EventRenderer,
               headers: Dict[str, str]) -> Response:
        """The event stream of a streaming operation."""
        raise NotImplementedError

    def error(self, exc: A2AError, headers: Dict[str, str]) -> Response:
        """The response to an error."""
        raise NotImplementedError

    def error_stream(self, exc: A2AError, headers: Dict[str, str]) -> Response:
        """A stream of one error event (for ``Method.errors_in_stream``)."""
        return self.error(exc, headers)


def dispatch(service: AgentService, auth: Authentication, note: CallNote,
             binding: Binding) -> Response:
    """Serve one request through ``binding``."""
    headers: Dict[str, str] = {}
    try:
        principal = auth.identify()
        version, method, stream_renderer = binding.resolve(service, note)
        extensions, echo = negotiate_extensions(service.card)
        if echo:
            headers["A2A-Extensions"] = echo
        parsed = binding.parse(method)
        note.about(parsed)
        binding.accept()
        ctx = CallContext(
            tenant=binding.tenant or getattr(parsed, "tenant", "") or "",
            dialect=method.dialect or version,
            extensions=extensions,
            last_event_id=parse_last_event_id(request.headers.get("Last-Event-ID")),
            principal=principal,
            idempotency_key=request.headers.get("Idempotency-Key"),
        )
        try:
            answering = method.choose(service, parsed, ctx) if method.choose else method
            result = method.perform(service, parsed, ctx)
        except A2AError as exc:
            # Failures of the HTTP exchange (401, 429) stay plain responses.
            if not (method.errors_in_stream and exc.jsonrpc_http_status == 200):
                raise
            note.code = exc.code
            return binding.error_stream(exc, headers)
        if answering.streaming:
            render_event = (answering.stream_renderer or stream_renderer)(
                service.stream_context())
            return binding.stream(result, render_event, headers)
        note.result(result)
        return binding.answer(answering.render(result), headers)
    except A2AError as exc:
        note.code = exc.code
        return binding.error(exc, headers)
    except Exception:
        log.exception(binding.failure)
        note.code = InternalError.code
        return binding.error(InternalError(), headers)
