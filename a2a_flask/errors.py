"""Every error of a2a_flask, as one tree: what the server raises and the client raises alike.

Every exception a user of a2a_flask catches or raises is importable from here,
and the same names from :mod:`a2a_flask` and :mod:`a2a_flask.client`.

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
    |   |   |-- TaskTooLargeError         -32602, REST 413
    |   |   `-- IdempotencyKeyReusedError -32602, REST 422
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
    |   |-- TaskGenerationMismatchError   -32010, HTTP 409 (the A2A 1.1 draft)
    |   |-- UnauthenticatedError          -32040, HTTP 401 (0.1: -32007)
    |   |-- PermissionDeniedError         -32041, HTTP 403 (0.1: -32008)
    |   |-- ResourceExhaustedError        -32042, HTTP 429 (0.1: -32010)
    |   |-- ResourceUnavailableError      -32011 from a 0.1 agent
    |   |-- StoreUnavailable              -32603, REST 503 (the server's own store)
    |   `-- WorkerStoppingError           -32603, HTTP 503 (a stopping worker refused a send)
    |-- A2ATransportError                 client only: no A2A answer came back
    |   |-- A2AConnectionError            the agent could not be reached, or the connection broke
    |   |   `-- A2ATimeoutError
    |   |-- A2AHTTPError                  an HTTP failure without an A2A error body
    |   |   `-- NoAgentError              no agent card describes the URL
    |   `-- A2AResponseError              an answer that is not A2A (an InvalidAgentResponse too)
    |-- CardVerificationError             client only: the card's signature is not one you trust
    |-- SignatureError                    a signature that does not verify (also a ValueError)
    |   |-- CardSignatureError            from verify_card (a2a_flask.signing)
    |   `-- PushSignatureError            from verify_push, for webhook receivers
    `-- StoreError                        a store that cannot be opened or used (bad URL, driver)

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
caller gets -32603).  Nor are the errors of a2a_flask's own parts: a
:class:`SignatureError` (a :class:`ValueError` too) and a :class:`StoreError`,
which the stores raise for what waiting will not fix (an outage that will pass
is :class:`StoreUnavailable`, a protocol error).

:class:`~a2a_flask.TaskCancelled`, raised inside an executor whose task was
canceled, is not an error and not in the tree: it derives from
:class:`BaseException` so that an ``except Exception`` does not swallow it.
"""
from typing import Any as _Any

from .deprecation import Moved as _Moved
from .protocol import errors as _protocol_errors
from .protocol.errors import *  # noqa: F401,F403  (the tree: protocol.errors.__all__)

__all__ = list(_protocol_errors.__all__)

#: Names this module exported in 0.1 that are not errors: the wire constants.
_MOVED = _Moved.to(__name__, _protocol_errors,
                   ("ERROR_DOMAIN", "ERROR_INFO_TYPE", "BAD_REQUEST_TYPE", "FieldViolation"))


def __getattr__(name: str) -> _Any:
    """The 0.1 constants, with a :class:`DeprecationWarning`."""
    return _MOVED.get(name)
