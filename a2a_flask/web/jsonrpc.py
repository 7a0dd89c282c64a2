"""The hand-written JSON-RPC 2.0 binding: one POST endpoint, staged errors.

Stages, in order, each with its own error:

1. ``Content-Type`` not JSON (``application/json``, ``application/a2a+json`` or
   any ``+json``)                                                 -> -32005
2. body not valid UTF-8 JSON                                      -> -32700
3. not one request object: batches (arrays) are refused; a bad ``jsonrpc``,
   ``id`` (a string or an integer, at most 256 characters: a stream repeats
   it in every event) or ``method`` member                        -> -32600
4. ``A2A-Version`` (header or ``?A2A-Version=``) not served       -> -32009
5. method unknown in that version                                 -> -32601
6. a card-declared required extension not requested               -> -32008
7. params malformed (with ``google.rpc.BadRequest`` field violations) -> -32602
8. no ``id`` (a notification): every A2A method has an answer, so it is
   refused, but only now, after the method and params were checked -> -32600
9. the operation's own A2A errors; anything unexpected is logged with its
   traceback and answered -32603 with no detail.

Every error echoes the request's ``id`` when the body is a JSON object with a
valid one, even a -32005 (the body is parsed to find it); otherwise ``id`` is
null.  Before all of them the caller is identified (when the agent asks for
credentials): missing or bad ones are HTTP 401 with ``WWW-Authenticate``, a
caller the agent refuses is 403 (JSON-RPC -32040 / -32041, id null: the body
of a stranger is not read).  An oversized body is HTTP 413 (-32600).  Other
errors are HTTP 200 with ``application/json``, like results.  Any other verb
than POST on the endpoint is HTTP 405 with ``Allow: POST`` and a JSON-RPC
error (-32600, id null).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from flask import Response, request

from .. import dialects
from ..dialects.registry import Method, StreamRenderer
from ..protocol.errors import (
    A2AError,
    InvalidParamsError,
    InvalidRequestError,
    UnsupportedMediaTypeError,
)
from .headers import (
    is_json_mimetype,
    lone_surrogate,
    parse_json,
    read_body,
    refuse_lone_surrogates,
    requested_version,
)
from ..engine.service import AgentService
from ..observe.calls import CallNote, open_call
from ..protocol.calls import ServedItem
from ..protocol.jsontext import JSONText, json_text
from .auth import Authentication
from .dispatch import Binding, EventRenderer, dispatch
from .sse import HEADERS as SSE_HEADERS
from .sse import OPENING, dumps, event_stream, frame


def error_body(exc: A2AError, request_id: Any = None) -> Dict[str, Any]:
    """A JSON-RPC error response object for an A2A error."""
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "error": {"code": exc.code, "message": exc.message, "data": exc.details()},
    }


def result_body(request_id: Any, result: Any) -> Any:
    """A JSON-RPC success response object; written as text when the result is."""
    if type(result) is JSONText:
        return JSONText(_result_head(request_id) + result + "}")
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _result_head(request_id: Any) -> str:
    return '{"jsonrpc":"2.0","id":' + json_text(request_id) + ',"result":'


class _Call:
    """What stages 1-3 extracted from the HTTP request (``request_id`` None: no id)."""

    def __init__(self, request_id: Any, method: str, params: Any) -> None:
        self.request_id, self.method, self.params = request_id, method, params


#: The longest request id echoed back, as JSON text.  A stream repeats the id in
#: every event, so an unbounded one would cost the server its length times the
#: number of events; no real client sends more than a UUID or a counter.
MAX_REQUEST_ID_LENGTH = 256
#: Integers from here on have more than MAX_REQUEST_ID_LENGTH digits.
_ID_NUMBER_BOUND = 10 ** (MAX_REQUEST_ID_LENGTH - 1)


def _valid_id(value: Any) -> bool:
    """A string or an integer (not a bool) of at most MAX_REQUEST_ID_LENGTH characters."""
    if isinstance(value, str):
        return len(value) <= MAX_REQUEST_ID_LENGTH
    return (isinstance(value, int) and not isinstance(value, bool)
            and -_ID_NUMBER_BOUND < value < _ID_NUMBER_BOUND)


def _readable_id(raw: bytes) -> Any:
    """The id of a body that is a JSON request object with a valid one, else None."""
    try:
        body = parse_json(raw)
    except A2AError:
        return None
    request_id = body.get("id") if isinstance(body, dict) else None
    if not _valid_id(request_id) or (isinstance(request_id, str)
                                     and lone_surrogate(request_id, raw)):
        return None
    return request_id


def _read_call() -> _Call:
    if not is_json_mimetype(request.mimetype):
        exc = UnsupportedMediaTypeError(
            f"Content-Type must be application/json, not {request.mimetype or 'missing'}",
            metadata={"contentType": request.mimetype},
        )
        try:
            raw = read_body()
        except A2AError:  # too large or cut short: the content type is the answer
            raise exc from None
        raise _with_id(exc, _readable_id(raw))
    raw = read_body()
    body = parse_json(raw)
    if isinstance(body, list):
        raise InvalidRequestError("Batch requests are not supported; send one request object")
    if not isinstance(body, dict):
        raise InvalidRequestError("The body must be a JSON-RPC request object")
    request_id = body.get("id")
    if request_id is not None and not _valid_id(request_id):
        raise InvalidRequestError(
            f"Request id must be a string or an integer of at most {MAX_REQUEST_ID_LENGTH} "
            "characters", violations=[("id", "must be a string or an integer of at most "
                                             f"{MAX_REQUEST_ID_LENGTH} characters")])
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


def _refuse_notification(call: _Call) -> None:
    """Stage 8: a request without an id, otherwise valid, still gets no result."""
    if call.request_id is None:
        raise InvalidRequestError(
            "Request id is required (notifications are not supported: every A2A method "
            "has an answer)", violations=[("id", "is required (notifications are not supported)")])


def _with_id(exc: A2AError, request_id: Any) -> A2AError:
    exc.request_id = request_id  # type: ignore[attr-defined]
    return exc


def _json(body: Any, headers: Optional[Dict[str, str]] = None,
          status: int = 200) -> Response:
    return Response(dumps(body), status=status, mimetype="application/json", headers=headers)


#: Every verb but POST: the endpoint answers them 405 (HEAD comes with GET, OPTIONS is Flask's).
WRONG_VERBS = ("GET", "PUT", "PATCH", "DELETE", "TRACE", "CONNECT")


def wrong_verb() -> Response:
    """405 with ``Allow: POST`` and a JSON-RPC error for a non-POST request: whatever
    arrives at the JSON-RPC URL is answered in JSON-RPC."""
    exc = InvalidRequestError(
        f"JSON-RPC requests are sent with POST, not {request.method}",
        metadata={"method": request.method})
    return _json(error_body(exc), {"Allow": "POST"}, 405)


def handle(service: AgentService, auth: Authentication) -> Response:
    """The Flask view body of the JSON-RPC endpoint for one agent."""
    note = open_call(service.runtime.sender, "jsonrpc", request.headers)
    try:
        return dispatch(service, auth, note, _JsonRpc())
    finally:
        note.finish()


class _JsonRpc(Binding):
    """The JSON-RPC binding of one request (stages 1-5 and 8 of the module's list)."""

    failure = "JSON-RPC request failed"

    def __init__(self) -> None:
        self.request_id: Any = None
        self.call: Optional[_Call] = None

    def resolve(self, service: AgentService, note: CallNote) -> Tuple[str, Method, StreamRenderer]:
        self.call = call = _read_call()
        self.request_id = call.request_id
        dialect, method = dialects.resolve(requested_version(), call.method,
                                           lenient=service.lenient_version,
                                           drafts=service.protocol_draft)
        note.version, note.method = dialect.version, call.method
        return dialect.version, method, dialect.stream_renderer

    def parse(self, method: Method) -> Any:
        assert self.call is not None
        return method.parse(self.call.params)

    def accept(self) -> None:
        assert self.call is not None
        _refuse_notification(self.call)

    def answer(self, body: Any, headers: Dict[str, str]) -> Response:
        return _json(result_body(self.request_id, body), headers)

    def stream(self, items: Iterable[ServedItem], render_event: EventRenderer,
               headers: Dict[str, str]) -> Response:
        enveloped = _Enveloped(self.request_id, render_event)
        return event_stream(items, enveloped.event, enveloped.error, headers)

    def error(self, exc: A2AError, headers: Dict[str, str]) -> Response:
        return _json(error_body(exc, getattr(exc, "request_id", self.request_id)),
                     {**headers, **exc.headers}, exc.jsonrpc_http_status)

    def error_stream(self, exc: A2AError, headers: Dict[str, str]) -> Response:
        return _error_stream(error_body(exc, self.request_id), headers)


def _error_stream(body: Dict[str, Any], headers: Dict[str, str]) -> Response:
    """A stream of one event, a JSON-RPC error, then its end: how 0.3 servers answer a
    resubscribe that fails.  A plain ``data:`` event, as theirs: 0.3 clients read it
    like any other and raise the error it holds (an ``event: error`` name makes some
    drop the code)."""
    return Response([OPENING + frame(body)], mimetype="text/event-stream",
                    headers={**SSE_HEADERS, **headers})


class _Enveloped:
    """A stream's events (and its error) in the call's JSON-RPC envelope.

    One small object rather than two closures: a parked stream holds it, and
    thousands of parked streams hold thousands of them.  The envelope's head
    is written once, for events rendered as text.
    """

    __slots__ = ("request_id", "render_event", "head")

    def __init__(self, request_id: Any, render_event: Callable[[Any], Optional[Any]]) -> None:
        self.request_id, self.render_event = request_id, render_event
        self.head = _result_head(request_id)

    def event(self, item: Any) -> Any:
        result = self.render_event(item)
        if type(result) is JSONText:
            return JSONText(self.head + result + "}")
        return None if result is None else result_body(self.request_id, result)

    def error(self, exc: A2AError) -> Dict[str, Any]:
        return error_body(exc, self.request_id)
