"""HTTP-level request facts shared by both bindings: content type, version, extensions."""
from __future__ import annotations

import json
from typing import Any, List, Optional, Tuple

from flask import request

from .errors import ExtensionSupportRequiredError, JSONParseError, PayloadTooLargeError
from .models import AgentCard

JSON_TYPES = ("application/json", "application/a2a+json")
EXTENSIONS_HEADERS = ("A2A-Extensions", "X-A2A-Extensions")


def is_json_mimetype(mimetype: str) -> bool:
    return mimetype in JSON_TYPES or mimetype.endswith("+json")


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


#: Where an agent's blueprint puts its ``A2A_MAX_CONTENT_LENGTH`` for the request.
BODY_LIMIT_KEY = "a2a_flask.max_content_length"
DEFAULT_BODY_LIMIT = 16 * 1024 * 1024


def read_body() -> bytes:
    """The request body, refused (413, a JSON error) past the agent's size limit.

    Checked before reading when ``Content-Length`` says so, and while reading
    a chunked body, so an oversized request never sits in memory whole.
    """
    limit = request.environ.get(BODY_LIMIT_KEY, DEFAULT_BODY_LIMIT)
    length = request.content_length
    if length is None or length <= limit:
        data = request.stream.read(limit + 1)
        if len(data) <= limit:
            return data
        length = None
    size = f"{length} bytes" if length is not None else "more than that"
    raise PayloadTooLargeError(
        f"The request body is {size}; this agent accepts at most {limit} bytes "
        "(A2A_MAX_CONTENT_LENGTH)", metadata={"maxContentLength": limit})


def parse_json(raw: bytes) -> Any:
    """Strict JSON (no NaN or Infinity) or JSONParseError (-32700)."""
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except (ValueError, UnicodeDecodeError) as exc:
        raise JSONParseError(f"Invalid JSON payload: {exc}") from None


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
