"""A blocking A2A client on :mod:`requests`: any agent, any protocol generation.

.. code-block:: python

    from a2a_flask.client import A2AClient

    with A2AClient.connect("http://127.0.0.1:8000") as agent:
        task = agent.send("hello")                  # waits for the answer
        for event in agent.stream("tell me a story"):
            print(event)                            # Task, status and artifact updates

The client reads 1.0, 0.3 and 0.1 agent cards, speaks A2A 1.0 (JSON-RPC or
HTTP+JSON) and falls back to 0.3 or 0.1 JSON-RPC, always returning the 1.0
models of :mod:`a2a_flask.protocol.models`.  Errors are :class:`A2AClientError` subclasses.
"""
from .card import NoAgentError, fetch_card, read_card
from .client import A2AClient, parse_state
from .errors import (
    A2AClientError,
    A2AConnectionError,
    A2AHTTPError,
    A2AProtocolError,
    A2ATimeoutError,
    AuthenticationRequiredError,
    AuthorizationFailedError,
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
    PushNotificationNotSupportedError,
    RateLimitExceededError,
    ResourceUnavailableError,
    StreamingNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from .messages import artifact_text, data_part, file_part, make_message, text_part
from .stream import EventStream

__all__ = [
    "A2AClient",
    "EventStream",
    "fetch_card",
    "read_card",
    "parse_state",
    "make_message",
    "text_part",
    "file_part",
    "data_part",
    "artifact_text",
    "A2AClientError",
    "NoAgentError",
    "A2AConnectionError",
    "A2ATimeoutError",
    "A2AHTTPError",
    "A2AProtocolError",
    "CardVerificationError",
    "JSONParseError",
    "InvalidRequestError",
    "MethodNotFoundError",
    "InvalidParamsError",
    "InternalError",
    "TaskNotFoundError",
    "TaskNotCancelableError",
    "PushNotificationNotSupportedError",
    "UnsupportedOperationError",
    "ContentTypeNotSupportedError",
    "InvalidAgentResponseError",
    "ExtendedAgentCardNotConfiguredError",
    "ExtensionSupportRequiredError",
    "VersionNotSupportedError",
    "StreamingNotSupportedError",
    "AuthenticationRequiredError",
    "AuthorizationFailedError",
    "InvalidTaskStateError",
    "RateLimitExceededError",
    "ResourceUnavailableError",
]
