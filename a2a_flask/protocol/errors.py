"""One exception root for everything that goes back to a client as an A2A error.

Each error class knows its JSON-RPC code, its HTTP status and gRPC status name
(the 1.0.1 mapping), and the ``google.rpc.ErrorInfo`` reason.  Bindings turn an
:class:`A2AError` into their envelope; nothing else formats errors.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

ERROR_DOMAIN = "a2a-protocol.org"
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"

FieldViolation = Tuple[str, str]


class A2AError(Exception):
    """Base of every protocol error; carries what the wire needs.

    :param message: human-readable text (defaults to the class's standard one).
    :param metadata: ErrorInfo metadata; values are turned into strings.
    :param violations: ``(field, description)`` pairs for ``google.rpc.BadRequest``.
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
    ) -> None:
        self.message = message or self.default_message
        self.metadata: Dict[str, str] = {k: str(v) for k, v in (metadata or {}).items()}
        self.violations: List[FieldViolation] = list(violations)
        super().__init__(self.message)

    def details(self) -> List[Dict[str, Any]]:
        """The typed detail objects: an ErrorInfo, plus BadRequest when fields are at fault."""
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
    code, reason, http_status, grpc_status = -32700, "PARSE_ERROR", 400, "INVALID_ARGUMENT"
    default_message = "Invalid JSON payload"


class InvalidRequestError(A2AError):
    code, reason, http_status, grpc_status = -32600, "INVALID_REQUEST", 400, "INVALID_ARGUMENT"
    default_message = "Request payload validation error"


class MethodNotFoundError(A2AError):
    code, reason, http_status, grpc_status = -32601, "METHOD_NOT_FOUND", 404, "NOT_FOUND"
    default_message = "Method not found"


class InvalidParamsError(A2AError):
    code, reason, http_status, grpc_status = -32602, "INVALID_PARAMS", 400, "INVALID_ARGUMENT"
    default_message = "Invalid parameters"


class InternalError(A2AError):
    """An unexpected failure; the details stay in the server log."""


class TaskNotFoundError(A2AError):
    code, reason, http_status, grpc_status = -32001, "TASK_NOT_FOUND", 404, "NOT_FOUND"
    default_message = "Task not found"


class TaskNotCancelableError(A2AError):
    code, reason, http_status, grpc_status = -32002, "TASK_NOT_CANCELABLE", 400, "FAILED_PRECONDITION"
    default_message = "Task cannot be canceled"


class PushNotificationNotSupportedError(A2AError):
    code, reason = -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED"
    http_status, grpc_status = 400, "FAILED_PRECONDITION"
    default_message = "Push Notification is not supported"


class UnsupportedOperationError(A2AError):
    code, reason = -32004, "UNSUPPORTED_OPERATION"
    http_status, grpc_status = 400, "FAILED_PRECONDITION"
    default_message = "This operation is not supported"


class ContentTypeNotSupportedError(A2AError):
    code, reason = -32005, "CONTENT_TYPE_NOT_SUPPORTED"
    http_status, grpc_status = 400, "INVALID_ARGUMENT"
    default_message = "Incompatible content types"


class UnsupportedMediaTypeError(ContentTypeNotSupportedError):
    """The request body itself is not JSON by its ``Content-Type``: a problem of the
    HTTP exchange, so REST answers HTTP 415 (JSON-RPC: -32005 with HTTP 200, like
    its other errors).  A *part's* media type keeps the 1.0.1 mapping, 400."""

    http_status = 415


class InvalidAgentResponseError(A2AError):
    code, reason, http_status, grpc_status = -32006, "INVALID_AGENT_RESPONSE", 500, "INTERNAL"
    default_message = "Invalid agent response"


class ExtendedAgentCardNotConfiguredError(A2AError):
    code, reason = -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    http_status, grpc_status = 400, "FAILED_PRECONDITION"
    default_message = "Extended agent card is not configured"


class ExtensionSupportRequiredError(A2AError):
    code, reason = -32008, "EXTENSION_SUPPORT_REQUIRED"
    http_status, grpc_status = 400, "FAILED_PRECONDITION"
    default_message = "Extension support required"


class VersionNotSupportedError(A2AError):
    code, reason = -32009, "VERSION_NOT_SUPPORTED"
    http_status, grpc_status = 400, "FAILED_PRECONDITION"
    default_message = "Version not supported"


# ---------------------------------------------------------------- this server's own codes
#
# The spec names no JSON-RPC codes for these (it says to use HTTP 401/403 at
# the HTTP layer); the codes come from the implementation-defined part of the
# A2A range, far from the spec's sequence, and are documented in the README.


class UnauthenticatedError(A2AError):
    """Missing or bad credentials: HTTP 401 with ``WWW-Authenticate``."""

    code, reason, http_status, grpc_status = -32040, "UNAUTHENTICATED", 401, "UNAUTHENTICATED"
    default_message = "Authentication required"
    jsonrpc_http_status = 401

    def __init__(self, message: Optional[str] = None, *, challenge: str = "",
                 **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.headers = {"WWW-Authenticate": challenge} if challenge else {}


class PermissionDeniedError(A2AError):
    """Authenticated, but not allowed to use this agent: HTTP 403."""

    code, reason, http_status, grpc_status = -32041, "PERMISSION_DENIED", 403, "PERMISSION_DENIED"
    default_message = "Permission denied"
    jsonrpc_http_status = 403


class ResourceExhaustedError(A2AError):
    """A per-caller limit (such as open streams) is reached: HTTP 429."""

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
    or let it end the run, which fails the task with this error's text.
    """

    reason, http_status = "TASK_TOO_LARGE", 413
    default_message = "The task would exceed its size limit"


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
    cause stays in the server log, never on the wire.
    """

    code, reason, http_status, grpc_status = -32603, "STORE_UNAVAILABLE", 503, "UNAVAILABLE"
    default_message = "The task store is unavailable; try again shortly"
    #: Seconds a client should wait before it tries again.
    retry_after = 5
    headers = {"Retry-After": str(retry_after)}
