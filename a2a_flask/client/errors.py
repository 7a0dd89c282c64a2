"""What can go wrong when talking to an agent, as one exception tree.

Everything the client raises is an :class:`A2AClientError` carrying the HTTP
``response`` (when there was one) and the agent's error object (``error``: the
JSON-RPC ``error`` member or the REST ``{"error": ...}`` body).  Agent-reported
A2A errors become typed subclasses.  The class is chosen from the
``google.rpc.ErrorInfo`` ``reason`` when the agent sends one (it means the
same in every version), otherwise from the JSON-RPC code *as the protocol
version of the call defines it*: -32006 to -32009 mean different things in 0.1
and in 0.3/1.0.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Type

ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"


class A2AClientError(Exception):
    """The root of every client error.

    :ivar message: what went wrong, in words.
    :ivar response: the :class:`requests.Response`, when the agent answered.
    :ivar error: the agent's error object (JSON-RPC ``error`` or the REST ``error``
        member), when it sent one.
    :ivar code: the JSON-RPC code (REST: the one matching the ErrorInfo reason).
    :ivar reason: the ``google.rpc.ErrorInfo`` reason, e.g. ``TASK_NOT_FOUND``.
    :ivar metadata: the ErrorInfo metadata (``{"taskId": ...}``).
    """

    def __init__(self, message: str, *, response: Any = None,
                 error: Optional[Mapping[str, Any]] = None, code: Optional[int] = None,
                 reason: Optional[str] = None,
                 metadata: Optional[Mapping[str, Any]] = None) -> None:
        super().__init__(message)
        self.message = message
        self.response = response
        self.error: Optional[Dict[str, Any]] = dict(error) if error is not None else None
        self.code = code
        self.reason = reason
        self.metadata: Dict[str, Any] = dict(metadata or {})

    @property
    def status_code(self) -> Optional[int]:
        """The HTTP status of the response, if there was one."""
        return getattr(self.response, "status_code", None)

    @property
    def field_violations(self) -> List[Dict[str, str]]:
        """``google.rpc.BadRequest`` field violations the agent listed (``field``, ``description``)."""
        out: List[Dict[str, str]] = []
        for detail in _details(self.error):
            if detail.get("@type") == BAD_REQUEST_TYPE:
                out.extend(v for v in detail.get("fieldViolations", []) if isinstance(v, dict))
        return out


class A2AConnectionError(A2AClientError):
    """The agent could not be reached, or the connection broke."""


class A2ATimeoutError(A2AConnectionError):
    """Connecting took longer than the connect timeout, or the agent went silent
    for longer than the read timeout."""


class A2AHTTPError(A2AClientError):
    """An HTTP failure without an A2A error body (401, 403, a proxy's 502 page...)."""


class A2AProtocolError(A2AClientError):
    """The agent answered with an A2A error; subclasses name the known ones."""


class JSONParseError(A2AProtocolError):
    """-32700: the agent could not parse the request JSON."""


class InvalidRequestError(A2AProtocolError):
    """-32600: the request was not a valid JSON-RPC request."""


class MethodNotFoundError(A2AProtocolError):
    """-32601: the agent does not know the method (or REST route)."""


class InvalidParamsError(A2AProtocolError):
    """-32602: bad parameters; see :attr:`field_violations`."""


class InternalError(A2AProtocolError):
    """-32603: the agent failed unexpectedly."""


class TaskNotFoundError(A2AProtocolError):
    """-32001: no such task (or push config) visible to this caller."""


class TaskNotCancelableError(A2AProtocolError):
    """-32002: the task is already in a terminal state."""


class PushNotificationNotSupportedError(A2AProtocolError):
    """-32003: the agent does not do push notifications."""


class UnsupportedOperationError(A2AProtocolError):
    """-32004: the agent (or this protocol version) does not support the operation.

    The client raises it itself, without asking, for operations the selected
    interface's protocol version lacks (ListTasks before 1.0, for instance).
    """


class ContentTypeNotSupportedError(A2AProtocolError):
    """-32005: a part's media type (or the request Content-Type) is not accepted."""


class InvalidAgentResponseError(A2AProtocolError):
    """-32006 in 0.3/1.0, or the agent's answer could not be understood by this client."""


class ExtendedAgentCardNotConfiguredError(A2AProtocolError):
    """-32007 in 0.3/1.0: the agent declares an extended card but has none."""


class ExtensionSupportRequiredError(A2AProtocolError):
    """-32008 in 1.0: the agent requires an extension the client did not activate."""


class VersionNotSupportedError(A2AProtocolError):
    """-32009 in 1.0: the agent does not serve the protocol version the client spoke."""


class AuthenticationRequiredError(A2AProtocolError):
    """Credentials are missing or wrong: HTTP 401 (reason ``UNAUTHENTICATED``),
    or -32007 from a 0.1 agent.  The challenge is in ``response.headers["WWW-Authenticate"]``."""


class AuthorizationFailedError(A2AProtocolError):
    """The caller may not do this: HTTP 403 (reason ``PERMISSION_DENIED``), or -32008
    from a 0.1 agent."""


class RateLimitExceededError(A2AProtocolError):
    """Too many requests: HTTP 429 (reason ``RESOURCE_EXHAUSTED``), or -32010 from a 0.1 agent."""


# The 0.1 spec gives -32006..-32011 meanings of its own.
class StreamingNotSupportedError(A2AProtocolError):
    """-32006 from a 0.1 agent: it does not stream."""


class InvalidTaskStateError(A2AProtocolError):
    """-32009 from a 0.1 agent."""


class ResourceUnavailableError(A2AProtocolError):
    """-32011 from a 0.1 agent."""


_COMMON: Dict[int, Type[A2AProtocolError]] = {
    -32700: JSONParseError,
    -32600: InvalidRequestError,
    -32601: MethodNotFoundError,
    -32602: InvalidParamsError,
    -32603: InternalError,
    -32001: TaskNotFoundError,
    -32002: TaskNotCancelableError,
    -32003: PushNotificationNotSupportedError,
    -32004: UnsupportedOperationError,
    -32005: ContentTypeNotSupportedError,
}

#: JSON-RPC code -> class, per protocol generation (0.2 reads like 0.3).
CODES: Dict[str, Dict[int, Type[A2AProtocolError]]] = {
    "1.0": {**_COMMON, -32006: InvalidAgentResponseError,
            -32007: ExtendedAgentCardNotConfiguredError,
            -32008: ExtensionSupportRequiredError, -32009: VersionNotSupportedError},
    # 0.3 defines nothing past -32007; a 1.0-era agent serving 0.3 may still send
    # -32008/-32009 with their 1.0 meanings, which collide with nothing in 0.3.
    "0.3": {**_COMMON, -32006: InvalidAgentResponseError,
            -32007: ExtendedAgentCardNotConfiguredError,
            -32008: ExtensionSupportRequiredError, -32009: VersionNotSupportedError},
    "0.1": {**_COMMON, -32006: StreamingNotSupportedError,
            -32007: AuthenticationRequiredError, -32008: AuthorizationFailedError,
            -32009: InvalidTaskStateError, -32010: RateLimitExceededError,
            -32011: ResourceUnavailableError},
}

#: ErrorInfo reason -> class (reasons are the same in every version).
REASONS: Dict[str, Type[A2AProtocolError]] = {
    "PARSE_ERROR": JSONParseError,
    "INVALID_REQUEST": InvalidRequestError,
    "METHOD_NOT_FOUND": MethodNotFoundError,
    "INVALID_PARAMS": InvalidParamsError,
    "INTERNAL_ERROR": InternalError,
    "TASK_NOT_FOUND": TaskNotFoundError,
    "TASK_NOT_CANCELABLE": TaskNotCancelableError,
    "PUSH_NOTIFICATION_NOT_SUPPORTED": PushNotificationNotSupportedError,
    "UNSUPPORTED_OPERATION": UnsupportedOperationError,
    "CONTENT_TYPE_NOT_SUPPORTED": ContentTypeNotSupportedError,
    "INVALID_AGENT_RESPONSE": InvalidAgentResponseError,
    "EXTENDED_AGENT_CARD_NOT_CONFIGURED": ExtendedAgentCardNotConfiguredError,
    "AUTHENTICATED_EXTENDED_CARD_NOT_CONFIGURED": ExtendedAgentCardNotConfiguredError,
    "EXTENSION_SUPPORT_REQUIRED": ExtensionSupportRequiredError,
    "VERSION_NOT_SUPPORTED": VersionNotSupportedError,
    # Not A2A reasons, but the google.rpc names agents (a2a_flask among them) use at the
    # HTTP layer.
    "UNAUTHENTICATED": AuthenticationRequiredError,
    "PERMISSION_DENIED": AuthorizationFailedError,
    "RESOURCE_EXHAUSTED": RateLimitExceededError,
    "PAYLOAD_TOO_LARGE": InvalidRequestError,
}

#: HTTP statuses that say what went wrong even without an A2A error body.
STATUSES: Dict[int, Type[A2AProtocolError]] = {
    401: AuthenticationRequiredError,
    403: AuthorizationFailedError,
    429: RateLimitExceededError,
}

_CODE_OF = {cls: code for code, cls in CODES["1.0"].items()}


def _details(error: Optional[Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The typed detail objects of a JSON-RPC (``data``) or REST (``details``) error."""
    if not isinstance(error, Mapping):
        return []
    found = error.get("details", error.get("data"))
    if isinstance(found, dict):
        found = [found]
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def _error_info(error: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    for detail in _details(error):
        if detail.get("@type") == ERROR_INFO_TYPE or (
                "@type" not in detail and "reason" in detail):
            return detail
    return {}


def from_jsonrpc(error: Any, version: str, response: Any = None) -> A2AClientError:
    """The typed exception for a JSON-RPC ``error`` object received over ``version``."""
    if not isinstance(error, dict):
        return InvalidAgentResponseError(f"Malformed JSON-RPC error: {error!r}", response=response)
    code = error.get("code")
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    info = _error_info(error)
    reason = info.get("reason") if isinstance(info.get("reason"), str) else None
    cls = REASONS.get(reason or "") or CODES.get(_generation(version), {}).get(code or 0) \
        or STATUSES.get(getattr(response, "status_code", 0) or 0) or A2AProtocolError
    message = str(error.get("message") or cls.__name__)
    return cls(message, response=response, error=error, code=code, reason=reason,
               metadata=info.get("metadata") if isinstance(info.get("metadata"), dict) else None)


def from_rest(body: Any, response: Any) -> A2AClientError:
    """The typed exception for a failed REST call (``{"error": {...}}`` or anything else)."""
    status = getattr(response, "status_code", None)
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return from_http(response, body)
    info = _error_info(error)
    reason = info.get("reason") if isinstance(info.get("reason"), str) else None
    cls = REASONS.get(reason or "") or STATUSES.get(status or 0) or A2AProtocolError
    message = str(error.get("message") or error.get("status") or f"HTTP {status}")
    return cls(message, response=response, error=error, code=_CODE_OF.get(cls), reason=reason,
               metadata=info.get("metadata") if isinstance(info.get("metadata"), dict) else None)


def from_http(response: Any, body: Any = None) -> A2AClientError:
    """The exception for an HTTP failure without an A2A error object (a 401 from an
    auth proxy, a 502 page...): typed when the status says enough."""
    status = getattr(response, "status_code", None)
    text = (getattr(response, "text", "") or "").strip()
    message = f"HTTP {status} {getattr(response, 'reason', '') or ''}".rstrip()
    if text:
        message += f": {text[:200]}"
    cls = STATUSES.get(status or 0, A2AHTTPError)
    return cls(message, response=response, error=body if isinstance(body, dict) else None)


def _generation(version: str) -> str:
    return "0.1" if version.startswith("0.1") else "1.0" if version.startswith("1.") else "0.3"


__all__ = [
    "A2AClientError", "A2AConnectionError", "A2ATimeoutError", "A2AHTTPError",
    "A2AProtocolError", "JSONParseError", "InvalidRequestError", "MethodNotFoundError",
    "InvalidParamsError", "InternalError", "TaskNotFoundError", "TaskNotCancelableError",
    "PushNotificationNotSupportedError", "UnsupportedOperationError",
    "ContentTypeNotSupportedError", "InvalidAgentResponseError",
    "ExtendedAgentCardNotConfiguredError", "ExtensionSupportRequiredError",
    "VersionNotSupportedError", "StreamingNotSupportedError", "AuthenticationRequiredError",
    "AuthorizationFailedError", "InvalidTaskStateError", "RateLimitExceededError",
    "ResourceUnavailableError", "from_jsonrpc", "from_rest", "from_http",
]


class CardVerificationError(A2AClientError):
    """The agent card carries no signature that the keys you trust verify."""
