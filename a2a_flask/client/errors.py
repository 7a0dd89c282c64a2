"""What the wire said, as the exception of the one tree (:mod:`a2a_flask.errors`).

An agent's error becomes the class the server would raise for it, carrying what
the agent sent (``code``, ``reason``, ``metadata``, ``violations``, ``message``,
the ``error`` object, the ``response``).  The class is chosen from the
``google.rpc.ErrorInfo`` ``reason`` when the agent sends one (it means the
same in every version), otherwise from the JSON-RPC code *as the protocol
version of the call defines it* (-32006 to -32011 mean other things in 0.1),
otherwise from the HTTP status (401, 403, 429).  An error of no known kind is
an :class:`~a2a_flask.errors.A2AError` itself; an HTTP failure without an A2A
body is an :class:`~a2a_flask.errors.A2AHTTPError`.

The client's names of 0.1.0 that the tree replaced are deprecated aliases:
``A2AClientError`` (now :class:`~a2a_flask.errors.A2AException`),
``A2AProtocolError`` (:class:`~a2a_flask.errors.A2AError`),
``AuthenticationRequiredError`` (:class:`~a2a_flask.errors.UnauthenticatedError`),
``AuthorizationFailedError`` (:class:`~a2a_flask.errors.PermissionDeniedError`) and
``RateLimitExceededError`` (:class:`~a2a_flask.errors.ResourceExhaustedError`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple, Type

from ..deprecation import Moved
from ..protocol.errors import (
    BAD_REQUEST_TYPE,
    ERROR_INFO_TYPE,
    SPEC_ERRORS,
    A2AError,
    A2AException,
    A2AHTTPError,
    A2AResponseError,
    ExtendedAgentCardNotConfiguredError,
    FieldViolation,
    IdempotencyKeyReusedError,
    InternalError,
    InvalidParamsError,
    InvalidTaskStateError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RequestTimeoutError,
    ResourceExhaustedError,
    ResourceUnavailableError,
    StreamingNotSupportedError,
    TaskGenerationMismatchError,
    UnauthenticatedError,
    WorkerStoppingError,
)

ErrorClass = Type[A2AError]

#: JSON-RPC code -> class in 0.3 and 1.0 (0.2 reads like 0.3).  0.3 defines nothing
#: past -32007; a 1.0-era agent serving 0.3 may still send -32008/-32009 with their
#: 1.0 meanings, which collide with nothing in 0.3.
_SPEC_CODES: Dict[int, ErrorClass] = {cls.code: cls for cls in SPEC_ERRORS}

#: JSON-RPC code -> class, per protocol generation.
CODES: Dict[str, Dict[int, ErrorClass]] = {
    "1.0": _SPEC_CODES,
    "0.3": _SPEC_CODES,
    # The 1.1 draft adds -32010 (which 0.1 used for rate limits).
    "1.1": {**_SPEC_CODES, TaskGenerationMismatchError.code: TaskGenerationMismatchError},
    "0.1": {**{code: cls for code, cls in _SPEC_CODES.items() if not -32011 <= code <= -32006},
            -32006: StreamingNotSupportedError, -32007: UnauthenticatedError,
            -32008: PermissionDeniedError, -32009: InvalidTaskStateError,
            -32010: ResourceExhaustedError, -32011: ResourceUnavailableError},
}

#: ErrorInfo reason -> class (reasons are the same in every version).
REASONS: Dict[str, ErrorClass] = {
    **{cls.reason: cls for cls in SPEC_ERRORS},
    TaskGenerationMismatchError.reason: TaskGenerationMismatchError,
    # Not A2A reasons: the google.rpc names agents (a2a_flask among them) use at the
    # HTTP layer, and a2a_flask's own.
    **{cls.reason: cls for cls in (UnauthenticatedError, PermissionDeniedError,
                                   ResourceExhaustedError, PayloadTooLargeError,
                                   RequestTimeoutError, WorkerStoppingError)},
    "AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED": ExtendedAgentCardNotConfiguredError,  # 0.3's
    # The engine acts on TaskTooLargeError and StoreUnavailable as its own conditions;
    # a remote agent's arrive as their general kind (see those classes).
    "TASK_TOO_LARGE": InvalidParamsError,
    "IDEMPOTENCY_KEY_REUSED": IdempotencyKeyReusedError,
    "STORE_UNAVAILABLE": InternalError,
}

#: HTTP statuses that say what went wrong even without an A2A error body.
STATUSES: Dict[int, ErrorClass] = {
    401: UnauthenticatedError,
    403: PermissionDeniedError,
    429: ResourceExhaustedError,
}


def _details(error: Optional[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The typed detail objects of a JSON-RPC (``data``) or REST (``details``) error."""
    if not isinstance(error, Mapping):
        return []
    found = error.get("details", error.get("data"))
    if isinstance(found, dict):
        found = [found]
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def _error_info(details: List[Dict[str, Any]]) -> Dict[str, Any]:
    for detail in details:
        if detail.get("@type") == ERROR_INFO_TYPE or (
                "@type" not in detail and "reason" in detail):
            return detail
    return {}


def _violations(details: List[Dict[str, Any]]) -> List[FieldViolation]:
    out: List[FieldViolation] = []
    for detail in details:
        if detail.get("@type") == BAD_REQUEST_TYPE:
            listed = detail.get("fieldViolations")
            out.extend((str(v.get("field", "")), str(v.get("description", "")))
                       for v in (listed if isinstance(listed, list) else [])
                       if isinstance(v, dict))
    return out


def _received(cls: ErrorClass, message: str, error: Dict[str, Any], response: Any,
              code: Optional[int] = None) -> A2AError:
    """An instance of ``cls`` carrying what the agent sent in ``error``."""
    details = _details(error)
    info = _error_info(details)
    reason = info.get("reason")
    metadata = info.get("metadata")
    return cls(message, response=response, error=error, code=code,
               reason=reason if isinstance(reason, str) else None,
               metadata=metadata if isinstance(metadata, dict) else None,
               violations=_violations(details))


def _reason(error: Mapping[str, Any]) -> str:
    reason = _error_info(_details(error)).get("reason")
    return reason if isinstance(reason, str) else ""


def from_jsonrpc(error: Any, version: str, response: Any = None) -> A2AException:
    """The typed exception for a JSON-RPC ``error`` object received over ``version``."""
    if not isinstance(error, dict):
        return A2AResponseError(f"Malformed JSON-RPC error: {error!r}", response=response)
    code = error.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    cls = REASONS.get(_reason(error)) or CODES[_generation(version)].get(code or 0) \
        or STATUSES.get(getattr(response, "status_code", 0) or 0) or A2AError
    return _received(cls, str(error.get("message") or cls.__name__), error, response, code)


def from_rest(body: Any, response: Any) -> A2AException:
    """The typed exception for a failed REST call (``{"error": {...}}`` or anything else)."""
    status = getattr(response, "status_code", None)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return from_http(response, body)
    cls = REASONS.get(_reason(error)) or STATUSES.get(status or 0) or A2AError
    message = str(error.get("message") or error.get("status") or f"HTTP {status}")
    return _received(cls, message, error, response)


def from_http(response: Any, body: Any = None) -> A2AException:
    """The exception for an HTTP failure without an A2A error object (a 401 from an
    auth proxy, a 502 page...): a protocol error when the status says enough."""
    status = getattr(response, "status_code", None)
    text = (getattr(response, "text", "") or "").strip()
    message = f"HTTP {status} {getattr(response, 'reason', '') or ''}".rstrip()
    if text:
        message += f": {text[:200]}"
    error = body if isinstance(body, dict) else None
    cls = STATUSES.get(status or 0)
    if cls is not None:
        return cls(message, response=response, error=error)
    return A2AHTTPError(message, response=response, error=error)


def _generation(version: str) -> str:
    if version.startswith("0.1"):
        return "0.1"
    if version.startswith("1."):
        return "1.1" if version.startswith("1.1") else "1.0"
    return "0.3"


#: The client's names of 0.1.0 that the tree replaced: what each stands for, and its name now.
RENAMED: Dict[str, Tuple[Type[A2AException], str]] = {
    "A2AClientError": (A2AException, "a2a_flask.errors.A2AException"),
    "A2AProtocolError": (A2AError, "a2a_flask.errors.A2AError"),
    "AuthenticationRequiredError": (UnauthenticatedError, "a2a_flask.errors.UnauthenticatedError"),
    "AuthorizationFailedError": (PermissionDeniedError, "a2a_flask.errors.PermissionDeniedError"),
    "RateLimitExceededError": (ResourceExhaustedError, "a2a_flask.errors.ResourceExhaustedError"),
}
_MOVED = Moved(__name__, RENAMED)


def __getattr__(name: str) -> Any:
    """The deprecated names (:data:`RENAMED`), with a :class:`DeprecationWarning`."""
    return _MOVED.get(name)


__all__ = ["from_jsonrpc", "from_rest", "from_http", "CODES", "REASONS", "STATUSES"]
