"""The one exception tree of a2a_flask, shared by the server and the client.

Every protocol error is one class here: an executor or an authenticator raises
it, the bindings render it (each class knows its JSON-RPC code, its HTTP status
and gRPC status name, the 1.0.1 mapping, and its ``google.rpc.ErrorInfo``
reason), and the client raises the same class when an agent answers with it,
so one ``except TaskNotFoundError`` serves both sides.  Failures of the HTTP
exchange itself (no connection, a timeout, an answer that is not A2A) are the
client's own classes, beside :class:`A2AError` rather than under it: the
server never renders them.  They are defined here all the same, so that
:mod:`a2a_flask.errors`, the public face of this module that draws the whole
tree, names them without importing the client (nor ``requests``, which a server
imports only when it pushes).  So are the errors of a2a_flask's own parts, a
signature that does not verify (:mod:`a2a_flask.signing`) and a store that
cannot be used (:mod:`a2a_flask.stores`): every exception a user of a2a_flask
catches or raises has its one class here, under :class:`A2AException`.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Type

ERROR_DOMAIN = "a2a-protocol.org"
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"

FieldViolation = Tuple[str, str]


class A2AException(Exception):
    """The root of the tree: anything that went wrong in an A2A exchange, on either
    side, or in a2a_flask's own parts (a signature, the store).

    :ivar message: what went wrong, in words.
    :ivar response: the HTTP response (a :class:`requests.Response`) the client
        received, when there was one; ``None`` on the server.
    :ivar error: the error object the client received (the JSON-RPC ``error``
        member, the REST ``error`` member, or another JSON body), when there was one.
    """

    def __init__(self, message: str = "", *, response: Any = None,
                 error: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.response = response
        self.error: Optional[Dict[str, Any]] = dict(error) if error is not None else None

    @property
    def status_code(self) -> Optional[int]:
        """The HTTP status of the response the client received, if there was one."""
        return getattr(self.response, "status_code", None)


class A2AError(A2AException):
    """A protocol error: what an agent answers instead of a result.

    The class attributes are what the server sends; an error the client raises
    has the same class and carries what the agent sent: ``code`` and ``reason``
    as received (the class's own where the agent sent none), ``metadata`` and
    ``violations`` from its ErrorInfo and BadRequest details, plus ``response``,
    ``error`` and :attr:`data`.

    :param message: human-readable text (defaults to the class's standard one).
    :param metadata: ErrorInfo metadata; values are turned into strings.
    :param violations: ``(field, description)`` pairs for ``google.rpc.BadRequest``.
    :param code: the JSON-RPC code received (the client's; the server uses the class's).
    :param reason: the ErrorInfo reason received (likewise).
    :param response: see :class:`A2AException`.
    :param error: see :class:`A2AException`.
    """

    code: int = -32603
    reason: str = "INTERNAL_ERROR"
    http_status: int = 500
    grpc_status: str = "INTERNAL"
    default_message: str = "Internal error"
    #: The HTTP status of a JSON-RPC answer carrying this error: 200, except for
    #: failures of the HTTP exchange itself (credentials, size, rate).
    jsonrpc_http_status: int = 200
    #: Extra HTTP headers to send with the error (``WWW-Authenticate``, ``Retry-After``).
    headers: Dict[str, str] = {}

    def __init__(
        self,
        message: Optional[str] = None,
        *,
        metadata: Optional[Mapping[str, Any]] = None,
        violations: Sequence[FieldViolation] = (),
        code: Optional[int] = None,
        reason: Optional[str] = None,
        response: Any = None,
        error: Optional[Mapping[str, Any]] = None,
    ) -> None:
        super().__init__(message or self.default_message, response=response, error=error)
        self.metadata: Dict[str, str] = {k: str(v) for k, v in (metadata or {}).items()}
        self.violations: List[FieldViolation] = list(violations)
        if code is not None:
            self.code = code
        if reason is not None:
            self.reason = reason

    @property
    def field_violations(self) -> List[Dict[str, str]]:
        """The ``violations`` as ``google.rpc.BadRequest`` lists them: ``field``, ``description``."""
        return [{"field": f, "description": d} for f, d in self.violations]

    @property
    def data(self) -> Any:
        """The error's ``data`` (JSON-RPC) or ``details`` (REST) member as the client
        received it; ``None`` when it had none or the error was raised here."""
        if self.error is None:
            return None
        return self.error.get("data", self.error.get("details"))

    def details(self) -> List[Dict[str, Any]]:
        """The detail objects to send: an ErrorInfo, plus BadRequest when fields are at fault."""
        info: Dict[str, Any] = {
            "@type": ERROR_INFO_TYPE,
            "reason": self.reason,
            "domain": ERROR_DOMAIN,
        }
        if self.metadata:
            info["metadata"] = dict(self.metadata)
        out = [info]
        if self.violations:
            out.append(
                {
                    "@type": BAD_REQUEST_TYPE,
                    "fieldViolations": [
                        {"field": f, "description": d} for f, d in self.violations
                    ],
                }
            )
        return out


class JSONParseError(A2AError):
    """-32700: the request is not JSON."""

    code, reason, http_status, grpc_status = -32700, "PARSE_ERROR", 400, "INVALID_ARGUMENT"
    default_message = "Invalid JSON payload"


class InvalidRequestError(A2AError):
    """-32600: the request is not a valid JSON-RPC request (or REST body)."""

    code, reason, http_status, grpc_status = -32600, "INVALID_REQUEST", 400, "INVALID_ARGUMENT"
    default_message = "Request payload validation error"


class MethodNotFoundError(A2AError):
    """-32601: no such method (or REST route)."""

    code, reason, http_status, grpc_status = -32601, "METHOD_NOT_FOUND", 404, "NOT_FOUND"
    default_message = "Method not found"


class InvalidParamsError(A2AError):
    """-32602: bad parameters; :attr:`~A2AError.violations` name the fields."""

    code, reason, http_status, grpc_status = -32602, "INVALID_PARAMS", 400, "INVALID_ARGUMENT"
    default_message = "Invalid parameters"


class InternalError(A2AError):
    """An unexpected failure; the details stay in the server log."""


class TaskNotFoundError(A2AError):
    """-32001: no such task (or push config) visible to this caller."""

    code, reason, http_status, grpc_status = -32001, "TASK_NOT_FOUND", 404, "NOT_FOUND"
    default_message = "Task not found"


class TaskNotCancelableError(A2AError):
    """-32002: the task is already in a terminal state."""

    code, reason, http_status, grpc_status = -32002, "TASK_NOT_CANCELABLE", 400, "FAILED_PRECONDITION"
    default_message = "Task cannot be canceled"


class PushNotificationNotSupportedError(A2AError):
    """-32003: the agent does not do push notifications."""

    code, reason = -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED"
    http_status, grpc_status = 400, "FAILED_PRECONDITION"
    default_message = "Push Notification is not supported"


class UnsupportedOperationError(A2AError):
    """-32004: the agent (or this protocol version) does not support the operation.

    The client raises it itself, without asking, for operations the selected
    interface's protocol version lacks (ListTasks before 1.0, for instance).
    """

    code, reason = -32004, "UNSUPPORTED_OPERATION"
    http_status, grpc_status = 400, "FAILED_PRECONDITION"
    default_message = "This operation is not supported"


class ContentTypeNotSupportedError(A2AError):
    """-32005: a part's media type is not accepted."""

    code, reason = -32005, "CONTENT_TYPE_NOT_SUPPORTED"
    http_status, grpc_status = 400, "INVALID_ARGUMENT"
    default_message = "Incompatible content types"


class UnsupportedMediaTypeError(ContentTypeNotSupportedError):
    """The request body itself is not JSON by its ``Content-Type``: a problem of the
    HTTP exchange, so REST answers HTTP 415 (JSON-RPC: -32005 with HTTP 200, like
    its other errors).  A *part's* media type keeps the 1.0.1 mapping, 400."""

    http_status = 415


class InvalidAgentResponseError(A2AError):
    """-32006: an agent's answer is not valid A2A (see also :class:`A2AResponseError`)."""

    code, reason, http_status, grpc_status = -32006, "INVALID_AGENT_RESPONSE", 500, "INTERNAL"
    default_message = "Invalid agent response"


class ExtendedAgentCardNotConfiguredError(A2AError):
    """-32007: the agent declares an extended card but has none."""

    code, reason = -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    http_status, grpc_status = 400, "FAILED_PRECONDITION"
    default_message = "Extended agent card is not configured"


class ExtensionSupportRequiredError(A2AError):
    """-32008: the agent requires an extension the client did not activate."""

    code, reason = -32008, "EXTENSION_SUPPORT_REQUIRED"
    http_status, grpc_status = 400, "FAILED_PRECONDITION"
    default_message = "Extension support required"


class VersionNotSupportedError(A2AError):
    """-32009: the agent does not serve the protocol version the client spoke."""

    code, reason = -32009, "VERSION_NOT_SUPPORTED"
    http_status, grpc_status = 400, "FAILED_PRECONDITION"
    default_message = "Version not supported"


class TaskGenerationMismatchError(A2AError):
    """-32010 (A2A 1.1 draft): a message's ``configuration.ifGenerationMatch`` is not
    the task's generation; the task is unchanged.  ErrorInfo metadata: ``taskId``,
    ``expectedGeneration``, ``currentGeneration`` (docs/generations.rst)."""

    code, reason = -32010, "TASK_GENERATION_MISMATCH"
    http_status, grpc_status = 409, "ABORTED"
    default_message = "Task generation mismatch"


# ---------------------------------------------------------------- this server's own codes
#
# The spec names no JSON-RPC codes for these (it says to use HTTP 401/403 at
# the HTTP layer); the codes come from the implementation-defined part of the
# A2A range, far from the spec's sequence, and are documented in docs/protocol.rst.


class UnauthenticatedError(A2AError):
    """Missing or bad credentials: HTTP 401 with ``WWW-Authenticate``.

    The client raises it for a 401 (with or without an A2A body) and for -32007
    from a 0.1 agent; the challenge is in ``response.headers["WWW-Authenticate"]``.
    """

    code, reason, http_status, grpc_status = -32040, "UNAUTHENTICATED", 401, "UNAUTHENTICATED"
    default_message = "Authentication required"
    jsonrpc_http_status = 401

    def __init__(self, message: Optional[str] = None, *, challenge: str = "",
                 **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.headers = {"WWW-Authenticate": challenge} if challenge else {}


class PermissionDeniedError(A2AError):
    """Authenticated, but not allowed to use this agent: HTTP 403 (-32008 from a 0.1 agent)."""

    code, reason, http_status, grpc_status = -32041, "PERMISSION_DENIED", 403, "PERMISSION_DENIED"
    default_message = "Permission denied"
    jsonrpc_http_status = 403


class ResourceExhaustedError(A2AError):
    """A per-caller limit (such as open streams) is reached: HTTP 429 (-32010 from a 0.1 agent)."""

    code, reason, http_status, grpc_status = -32042, "RESOURCE_EXHAUSTED", 429, "RESOURCE_EXHAUSTED"
    default_message = "Too many requests"
    jsonrpc_http_status = 429


class PayloadTooLargeError(InvalidRequestError):
    """The body is larger than ``A2A_MAX_CONTENT_LENGTH``: HTTP 413, JSON-RPC -32600."""

    reason, http_status = "PAYLOAD_TOO_LARGE", 413
    default_message = "Request body too large"
    jsonrpc_http_status = 413


class TaskTooLargeError(InvalidParamsError):
    """A change would make a task hold more than ``A2A_MAX_TASK_BYTES``: JSON-RPC
    -32602 (with HTTP 200, like other parameter errors), REST 413.

    A caller's message gets it as its answer, and nothing is stored; an executor's
    emission raises it in the executor, which may catch it (and finish otherwise)
    or let it end the run, which fails the task with this error's text.  The
    client raises :class:`InvalidParamsError` (``reason`` ``TASK_TOO_LARGE``) for
    an agent's: this class is the engine's own signal, and an executor that lets
    a remote agent's error through must not be taken for one that hit its limit.
    """

    reason, http_status = "TASK_TOO_LARGE", 413
    default_message = "The task would exceed its size limit"


class IdempotencyKeyReusedError(InvalidParamsError):
    """A send carries an ``Idempotency-Key`` the caller already used for another
    request (a different message or configuration): JSON-RPC -32602, REST 422.
    Nothing is stored; the first request's task is left as it is (docs/safe-retries.rst)."""

    reason, http_status = "IDEMPOTENCY_KEY_REUSED", 422
    default_message = "This Idempotency-Key was used for another request"


class RequestTimeoutError(InvalidRequestError):
    """The request body did not arrive within ``A2A_BODY_TIMEOUT``: HTTP 408, JSON-RPC -32600."""

    reason, http_status = "REQUEST_TIMEOUT", 408
    default_message = "The request body did not arrive in time"
    jsonrpc_http_status = 408


class StoreUnavailable(A2AError):
    """The task store cannot be reached right now (down, hung, locked or full).

    Stores raise it for their own outages (a Redis connection error or timeout,
    an SQLite database locked past its timeout, a shelve lock not granted in
    time); the bindings answer REST 503 with ``Retry-After`` and JSON-RPC -32603
    with this message, and an open stream ends with it as one error event.  The
    cause stays in the server log, never on the wire.  The client raises
    :class:`InternalError` (``reason`` ``STORE_UNAVAILABLE``) for an agent's: this
    class is the engine's signal about its own store, which a remote agent's
    outage let through an executor must not be taken for.
    """

    code, reason, http_status, grpc_status = -32603, "STORE_UNAVAILABLE", 503, "UNAVAILABLE"
    default_message = "The task store is unavailable; try again shortly"
    #: Seconds a client should wait before it tries again.
    retry_after = 5
    headers = {"Retry-After": str(retry_after)}


class WorkerStoppingError(A2AError):
    """The worker that received a send is stopping (a deploy, a reload, a recycle):
    it starts no new work it might not finish.  Nothing was accepted; the client
    (or a proxy, on the 503) sends it again, to a worker that is not stopping.
    REST and JSON-RPC alike answer HTTP 503 with ``Retry-After``."""

    code, reason, http_status, grpc_status = -32603, "WORKER_STOPPING", 503, "UNAVAILABLE"
    default_message = "This server is stopping and accepts no new tasks; send it again"
    jsonrpc_http_status = 503
    #: Seconds a client should wait before it tries again (another worker takes it).
    retry_after = 1
    headers = {"Retry-After": str(retry_after)}


# ---------------------------------------------------------------- what only 0.1 agents send
#
# The 0.1 spec gives -32006..-32011 meanings of its own; a2a_flask's server uses the
# 1.0 meanings with every generation, so only the client meets these.  Where 1.0 has
# the same condition, the 0.1 error is a kind of the 1.0 one.


class StreamingNotSupportedError(UnsupportedOperationError):
    """-32006 from a 0.1 agent: it does not stream (1.0 says -32004)."""


class InvalidTaskStateError(UnsupportedOperationError):
    """-32009 from a 0.1 agent: the task's state does not allow the call (1.0 says -32004)."""


class ResourceUnavailableError(A2AError):
    """-32011 from a 0.1 agent: a resource it needs is unavailable."""


#: The errors the 1.0 specification defines, each with a code and a reason of its own.
SPEC_ERRORS: Tuple[Type[A2AError], ...] = (
    JSONParseError, InvalidRequestError, MethodNotFoundError, InvalidParamsError, InternalError,
    TaskNotFoundError, TaskNotCancelableError, PushNotificationNotSupportedError,
    UnsupportedOperationError, ContentTypeNotSupportedError, InvalidAgentResponseError,
    ExtendedAgentCardNotConfiguredError, ExtensionSupportRequiredError, VersionNotSupportedError,
)


# ---------------------------------------------------------------- failures of the exchange
#
# Only the client raises these: no A2A answer came back, so there is no code to
# render and they are not A2AError (a server never answers with one).


class A2ATransportError(A2AException):
    """The exchange failed before an A2A answer came: see the subclasses."""


class A2AConnectionError(A2ATransportError):
    """The agent could not be reached, or the connection broke."""


class A2ATimeoutError(A2AConnectionError):
    """Connecting took longer than the connect timeout, or the agent went silent
    for longer than the read timeout."""


class A2AHTTPError(A2ATransportError):
    """An HTTP failure without an A2A error body (a proxy's 502 page, a 404 from
    something that is no agent...); 401, 403 and 429 are the protocol errors
    :class:`UnauthenticatedError`, :class:`PermissionDeniedError` and
    :class:`ResourceExhaustedError` even without a body."""


class NoAgentError(A2AHTTPError):
    """No agent card describes the given URL (nothing there, or the host's card is
    another agent's)."""


class A2AResponseError(A2ATransportError, InvalidAgentResponseError):
    """The agent's answer could not be read as A2A (not JSON, the wrong shape, an
    unreadable stream event).  Also an :class:`InvalidAgentResponseError`, the 1.0
    name of that condition, so both ``except`` clauses catch it."""


class CardVerificationError(A2AException):
    """The agent card carries no signature that the keys you trust verify."""


# ---------------------------------------------------------------- beside the exchange
#
# Raised by a2a_flask's own parts, not by an agent's answer: a signature that does
# not verify and a store that cannot be opened or used.  Neither is rendered on the
# wire; each keeps the base it always had, so an ``except ValueError`` around a
# verification still catches a bad signature.


class SignatureError(A2AException, ValueError):
    """A signature that does not verify; ``str(err)`` says precisely why.

    Also a :class:`ValueError`, which is what it was before it joined the tree.
    """


class CardSignatureError(SignatureError):
    """A signed agent card that :func:`~a2a_flask.signing.cards.verify_card` refuses:
    no signature, or none that the keys given verify."""


class PushSignatureError(SignatureError):
    """A push notification's token that :func:`~a2a_flask.signing.pushes.verify_push`
    refuses: its signature, body hash, task or validity window."""


class StoreError(A2AException):
    """The store cannot be opened or used (bad URL, missing driver, unusable tables,
    a value past its ceiling).

    What stores raise for a problem that waiting will not fix; an outage that will
    pass is :class:`StoreUnavailable`.
    """


#: The error tree, every class a user catches or raises: what ``a2a_flask.errors``,
#: ``a2a_flask`` and ``a2a_flask.client`` export (the wire constants stay by name).
__all__ = [
    "A2AException",
    "A2AError",
    "JSONParseError",
    "InvalidRequestError",
    "PayloadTooLargeError",
    "RequestTimeoutError",
    "MethodNotFoundError",
    "InvalidParamsError",
    "TaskTooLargeError",
    "IdempotencyKeyReusedError",
    "InternalError",
    "TaskNotFoundError",
    "TaskNotCancelableError",
    "PushNotificationNotSupportedError",
    "UnsupportedOperationError",
    "StreamingNotSupportedError",
    "InvalidTaskStateError",
    "ContentTypeNotSupportedError",
    "UnsupportedMediaTypeError",
    "InvalidAgentResponseError",
    "ExtendedAgentCardNotConfiguredError",
    "ExtensionSupportRequiredError",
    "VersionNotSupportedError",
    "TaskGenerationMismatchError",
    "UnauthenticatedError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "ResourceUnavailableError",
    "StoreUnavailable",
    "WorkerStoppingError",
    "A2ATransportError",
    "A2AConnectionError",
    "A2ATimeoutError",
    "A2AHTTPError",
    "NoAgentError",
    "A2AResponseError",
    "CardVerificationError",
    "SignatureError",
    "CardSignatureError",
    "PushSignatureError",
    "StoreError",
]
