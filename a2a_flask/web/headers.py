"""HTTP-level request facts shared by both bindings: content type, version, extensions."""
from __future__ import annotations

import json
import re
from typing import Any, List, Optional, Tuple

from flask import request
from werkzeug.exceptions import ClientDisconnected

from ..concurrency import TimeLimitExceeded, time_limit
from ..protocol.errors import (
    RequestTimeoutError,
    ExtensionSupportRequiredError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    PayloadTooLargeError,
)
from ..protocol.models import AgentCard

JSON_TYPES = ("application/json", "application/a2a+json")
EXTENSIONS_HEADERS = ("A2A-Extensions", "X-A2A-Extensions")


def is_json_mimetype(mimetype: str) -> bool:
    return mimetype in JSON_TYPES or mimetype.endswith("+json")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: One decoder for every request: ``json.loads`` with an option builds a new
#: one per call (2 of 4 µs for a SendMessage body).
_STRICT_JSON = json.JSONDecoder(parse_constant=_refuse_constant)


#: Where an agent's blueprint puts its ``A2A_MAX_CONTENT_LENGTH`` for the request.
BODY_LIMIT_KEY = "a2a_flask.max_content_length"
DEFAULT_BODY_LIMIT = 16 * 1024 * 1024
BODY_TIMEOUT_KEY = "a2a_flask.body_timeout"
DEFAULT_BODY_TIMEOUT = 30.0


def read_body() -> bytes:
    """The request body, refused (413, a JSON error) past the agent's size limit.

    Checked before reading when ``Content-Length`` says so, and while reading
    a chunked body, so an oversized request never sits in memory whole.
    """
    limit = request.environ.get(BODY_LIMIT_KEY, DEFAULT_BODY_LIMIT)
    length = request.content_length
    if length is None or length <= limit:
        timeout = request.environ.get(BODY_TIMEOUT_KEY, DEFAULT_BODY_TIMEOUT)
        try:
            # A client that trickles its body holds a connection, not the worker;
            # the limit frees the connection too.
            with time_limit(timeout):
                data = request.stream.read(limit + 1)
        except (OSError, ClientDisconnected):  # gunicorn's NoMoreData is an OSError
            raise InvalidRequestError("The request body ended before it was complete") from None
        except TimeLimitExceeded:
            raise RequestTimeoutError(
                f"The request body did not arrive within {timeout:g} s (A2A_BODY_TIMEOUT)",
                metadata={"bodyTimeout": timeout}) from None
        if len(data) <= limit:
            return data
        length = None
    size = f"{length} bytes" if length is not None else "more than that"
    raise PayloadTooLargeError(
        f"The request body is {size}; this agent accepts at most {limit} bytes "
        "(A2A_MAX_CONTENT_LENGTH)", metadata={"maxContentLength": limit})


def parse_json(raw: bytes) -> Any:
    """Strict JSON in UTF-8 (no NaN or Infinity, no surrogates encoded as bytes) or
    JSONParseError (-32700)."""
    try:
        # Decoded here, strictly: json.loads(bytes) would let UTF-8-encoded
        # surrogates (ED A0 80) through, and they cannot be encoded back.
        return _STRICT_JSON.decode(raw.decode("utf-8"))
    except RecursionError:
        raise JSONParseError("Invalid JSON payload: nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise JSONParseError(f"Invalid JSON payload: {exc}") from None


#: ``\uD800``-``\uDFFF`` escapes: only a body with one can hold a lone surrogate.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate(value: Any, raw: bytes) -> Optional[str]:
    """The path of the first string in parsed JSON holding a lone surrogate (an
    escape such as ``\\ud800`` that is not half of a pair: not text), or None.

    Only bodies whose bytes have such an escape are walked, without recursion.
    """
    if not _SURROGATE_ESCAPE.search(raw):
        return None
    stack: List[Tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            if _SURROGATE.search(item):
                return path or "body"
        elif isinstance(item, dict):
            for key, member in item.items():
                if _SURROGATE.search(key):
                    return path or "body"
                stack.append((f"{path}.{key}" if path else key, member))
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", member) for index, member in enumerate(item))
    return None


def refuse_lone_surrogates(value: Any, raw: bytes) -> None:
    """InvalidParams (-32602) naming the member that is not valid Unicode text."""
    path = lone_surrogate(value, raw)
    if path is not None:
        raise InvalidParamsError(f"{path} is not valid Unicode text (a lone surrogate)",
                                 violations=[(path, "holds a lone surrogate")])


def requested_version() -> Optional[str]:
    """``A2A-Version`` from the header (any case) or the ``?A2A-Version=`` parameter."""
    return request.headers.get("A2A-Version") or request.args.get("A2A-Version")


def requested_extensions() -> List[str]:
    """Extension URIs the client activated (``A2A-Extensions`` or the 0.3 ``X-`` header)."""
    uris: List[str] = []
    for key in _EXTENSIONS_ENVIRON_KEYS:
        # WSGI servers join repeated header lines into one comma-separated value,
        # so one environ lookup sees them all (getlist would scan the environ).
        value = request.environ.get(key)
        if value:
            uris.extend(u.strip() for u in value.split(",") if u.strip())
    return uris


_EXTENSIONS_ENVIRON_KEYS = tuple("HTTP_" + h.upper().replace("-", "_") for h in EXTENSIONS_HEADERS)


def negotiate_extensions(card: AgentCard) -> Tuple[List[str], Optional[str]]:
    """Check required extensions (-32008); return the requested URIs and the header to echo."""
    requested = requested_extensions()
    declared = {e.uri: e for e in card.capabilities.extensions}
    missing = [uri for uri, ext in declared.items() if ext.required and uri not in requested]
    if missing:
        raise ExtensionSupportRequiredError(
            "This agent requires the extension(s) " + ", ".join(missing)
            + "; list them in the A2A-Extensions header",
            metadata={"extensions": ",".join(missing)},
        )
    active = [uri for uri in requested if uri in declared]
    return requested, ", ".join(active) if active else None
