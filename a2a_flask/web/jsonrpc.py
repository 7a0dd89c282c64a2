"""The hand-written JSON-RPC 2.0 binding: one POST endpoint, staged errors.

Stages, in order, each with its own error:

1. ``Content-Type`` not JSON (``application/json``, ``application/a2a+json`` or
   any ``+json``)                                                 -> -32005
2. body not valid UTF-8 JSON                                      -> -32700
3. not one request object: batches (arrays) are refused, as are
   notifications (no ``id``), since every A2A method has an answer -> -32600
4. ``A2A-Version`` (header or ``?A2A-Version=``) not served       -> -32009
5. method unknown in that version                                 -> -32601
6. a card-declared required extension not requested               -> -32008
7. params malformed (with ``google.rpc.BadRequest`` field violations) -> -32602
8. the operation's own A2A errors; anything unexpected is logged with its
   traceback and answered -32603 with no detail.

Before all of them the caller is identified (when the agent asks for
credentials): missing or bad ones are HTTP 401 with ``WWW-Authenticate``, a
caller the agent refuses is 403 (JSON-RPC -32040 / -32041, id null: the body
of a stranger is not read).  An oversized body is HTTP 413 (-32600).  Other
errors are HTTP 200 with ``application/json``, like results.
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional

from flask import Response, request

from .. import dialects
from ..protocol.errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    InvalidRequestError,
)
from .headers import (
    is_json_mimetype,
    lone_surrogate,
    negotiate_extensions,
    parse_json,
    read_body,
    refuse_lone_surrogates,
    requested_version,
)
from ..engine.service import AgentService
from ..protocol.calls import CallContext
from .auth import Authentication
from .sse import dumps, event_stream, parse_last_event_id

log = logging.getLogger("a2a_flask")


def error_body(exc: A2AError, request_id: Any = None) -> Dict[str, Any]:
    """A JSON-RPC error response object for an A2A error."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": exc.code, "message": exc.message, "data": exc.details()},
    }


class _Call:
    """What stages 1-3 extracted from the HTTP request."""

    def __init__(self, request_id: Any, method: str, params: Any) -> None:
        self.request_id, self.method, self.params = request_id, method, params


def _read_call() -> _Call:
    if not is_json_mimetype(request.mimetype):
        raise ContentTypeNotSupportedError(
            f"Content-Type must be application/json, not {request.mimetype or 'missing'}",
            metadata={"contentType": request.mimetype},
        )
    raw = read_body()
    body = parse_json(raw)
    if isinstance(body, list):
        raise InvalidRequestError("Batch requests are not supported; send one request object")
    if not isinstance(body, dict):
        raise InvalidRequestError("The body must be a JSON-RPC request object")
    request_id = body.get("id")
    if not (isinstance(request_id, (str, int)) and not isinstance(request_id, bool)):
        problem = "is required (notifications are not supported)" if request_id is None \
            else "must be a string or a number"
        raise InvalidRequestError(f"Request id {problem}", violations=[("id", problem)])
    if isinstance(request_id, str) and lone_surrogate(request_id, raw):
        raise InvalidRequestError("Request id is not valid Unicode text (a lone surrogate)",
                                  violations=[("id", "holds a lone surrogate")])
    if body.get("jsonrpc") != "2.0":
        raise _with_id(InvalidRequestError('jsonrpc must be exactly "2.0"',
                                           violations=[("jsonrpc", 'must be "2.0"')]), request_id)
    method = body.get("method")
    if not isinstance(method, str) or not method:
        raise _with_id(InvalidRequestError("method must be a non-empty string",
                                           violations=[("method", "must be a string")]), request_id)
    params = body.get("params")
    if params is not None and not isinstance(params, dict):
        raise _with_id(InvalidParamsError("params must be an object",
                                          violations=[("params", "must be an object")]), request_id)
    try:
        refuse_lone_surrogates(params, raw)
    except InvalidParamsError as exc:
        raise _with_id(exc, request_id)
    return _Call(request_id, method, params)


def _with_id(exc: A2AError, request_id: Any) -> A2AError:
    exc.request_id = request_id  # type: ignore[attr-defined]
    return exc


def _json(body: Dict[str, Any], headers: Optional[Dict[str, str]] = None,
          status: int = 200) -> Response:
    return Response(dumps(body), status=status, mimetype="application/json", headers=headers)


def handle(service: AgentService, auth: Authentication) -> Response:
    """The Flask view body of the JSON-RPC endpoint for one agent."""
    request_id: Any = None
    headers: Dict[str, str] = {}
    try:
        principal = auth.identify()
        call = _read_call()
        request_id = call.request_id
        dialect, method = dialects.resolve(requested_version(), call.method,
                                           lenient=service.lenient_version)
        extensions, echo = negotiate_extensions(service.card)
        if echo:
            headers["A2A-Extensions"] = echo
        parsed = method.parse(call.params)
        ctx = CallContext(
            tenant=getattr(parsed, "tenant", "") or "",
            dialect=method.dialect or dialect.version,
            extensions=extensions,
            last_event_id=parse_last_event_id(request.headers.get("Last-Event-ID")),
            principal=principal,
        )
        answering = method.choose(service, parsed, ctx) if method.choose else method
        result = method.call(service, parsed, ctx)
        if answering.streaming:
            rid = request_id
            render_event = (answering.stream_renderer or dialect.stream_renderer)(
                service.stream_context())
            return event_stream(
                result,
                lambda item: _envelope(rid, render_event(item)),
                lambda exc: error_body(exc, rid),
                headers,
            )
        return _json({"jsonrpc": "2.0", "id": request_id, "result": answering.render(result)},
                     headers)
    except A2AError as exc:
        return _json(error_body(exc, getattr(exc, "request_id", request_id)),
                     {**headers, **exc.headers}, exc.jsonrpc_http_status)
    except Exception:
        log.exception("JSON-RPC request failed")
        return _json(error_body(InternalError(), request_id), headers)


def _envelope(request_id: Any, result: Any) -> Optional[Dict[str, Any]]:
    if result is None:
        return None
    return {"jsonrpc": "2.0", "id": request_id, "result": result}
