"""Every error of a2a_flask, as one tree: what the server raises and the client raises alike.

A protocol error is one class on both sides.  An executor or an authenticator
raises :class:`TaskNotFoundError`; the server answers -32001 (HTTP 404 over
REST); a client calling that agent, :class:`~a2a_flask.client.A2AClient` or
:class:`~a2a_flask.testing.A2ATestClient`, raises :class:`TaskNotFoundError`
again, carrying what the wire said.  So one ``except`` serves both sides::

    A2AException                          anything that went wrong in an A2A exchange
    |-- A2AError                          a protocol error: an agent's answer instead of a result
    |   |-- JSONParseError                -32700
    |   |-- InvalidRequestError           -32600
    |   |   |-- PayloadTooLargeError      -32600, HTTP 413
    |   |   `-- RequestTimeoutError       -32600, HTTP 408
    |   |-- MethodNotFoundError           -32601
    |   |-- InvalidParamsError            -32602
    |   |   `-- TaskTooLargeError         -32602, REST 413
    |   |-- InternalError                 -32603
    |   |-- TaskNotFoundError             -32001
    |   |-- TaskNotCancelableError        -32002
    |   |-- PushNotificationNotSupportedError  -32003
    |   |-- UnsupportedOperationError     -32004
    |   |   |-- StreamingNotSupportedError     -32006 from a 0.1 agent
    |   |   `-- InvalidTaskStateError          -32009 from a 0.1 agent
    |   |-- ContentTypeNotSupportedError  -32005
    |   |   `-- UnsupportedMediaTypeError -32005, REST 415
    |   |-- InvalidAgentResponseError     -32006
    |   |-- ExtendedAgentCardNotConfiguredError  -32007
    |   |-- ExtensionSupportRequiredError -32008
    |   |-- VersionNotSupportedError      -32009
    |   |-- UnauthenticatedError          -32040, HTTP 401 (0.1: -32007)
    |   |-- PermissionDeniedError         -32041, HTTP 403 (0.1: -32008)
    |   |-- ResourceExhaustedError        -32042, HTTP 429 (0.1: -32010)
    |   |-- ResourceUnavailableError      -32011 from a 0.1 agent
    |   `-- StoreUnavailable              -32603, REST 503 (the server's own store)
    |-- A2ATransportError                 client only: no A2A answer came back
    |   |-- A2AConnectionError            the agent could not be reached, or the connection broke
    |   |   `-- A2ATimeoutError
    |   |-- A2AHTTPError                  an HTTP failure without an A2A error body
    |   |   `-- NoAgentError              no agent card describes the URL
    |   `-- A2AResponseError              an answer that is not A2A (an InvalidAgentResponse too)
    `-- CardVerificationError             client only: the card's signature is not one you trust

An error the client raises carries what the agent sent: ``message``, ``code``
and ``reason`` (the class's own where the agent sent none), ``metadata`` and
``violations`` (the ErrorInfo and BadRequest details), ``data`` (the error's
``data`` or ``details`` member as received), ``error`` (the whole error
object), ``response`` and ``status_code`` (the HTTP answer).  The class is chosen
by the ErrorInfo reason, else the JSON-RPC code as the call's protocol version
defines it, else the HTTP status (see :mod:`a2a_flask.client.errors`).

The transport failures are not :class:`A2AError`: the server never answers
with one, and one that an executor or an authenticator lets through is taken
for what it is there, an unexpected exception (logged; the task fails, or the
caller gets -32603).
"""
from typing import Any as _Any

from .deprecation import Moved as _Moved
from .protocol import errors as _protocol_errors
from .protocol.errors import (
    A2AConnectionError,
    A2AError,
    A2AException,
    A2AHTTPError,
    A2AResponseError,
    A2ATimeoutError,
    A2ATransportError,
    CardVerificationError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequiredError,
    InternalError,
    InvalidAgentResponseError,
    InvalidParamsError,
    InvalidRequestError,
    InvalidTaskStateError,
    JSONParseError,
    MethodNotFoundError,
    NoAgentError,
    PayloadTooLargeError,
    PermissionDeniedError,
    PushNotificationNotSupportedError,
    RequestTimeoutError,
    ResourceExhaustedError,
    ResourceUnavailableError,
    StoreUnavailable,
    StreamingNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskTooLargeError,
    UnauthenticatedError,
    UnsupportedMediaTypeError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)

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
    "UnauthenticatedError",
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "ResourceUnavailableError",
    "StoreUnavailable",
    "A2ATransportError",
    "A2AConnectionError",
    "A2ATimeoutError",
    "A2AHTTPError",
    "NoAgentError",
    "A2AResponseError",
    "CardVerificationError",
]

#: Names this module exported in 0.1 that are not errors: the wire constants.
_MOVED = _Moved.to(__name__, _protocol_errors,
                   ("ERROR_DOMAIN", "ERROR_INFO_TYPE", "BAD_REQUEST_TYPE", "FieldViolation"))


def __getattr__(name: str) -> _Any:
    """The 0.1 constants, with a :class:`DeprecationWarning`."""
    return _MOVED.get(name)
