"""The wire edge: one dialect per protocol generation, and version negotiation.

A dialect maps method names to a parser (params JSON -> request model), an
operation of :class:`~a2a_flask.service.AgentService`, and a renderer (result
model -> JSON).  Below the dialects nothing knows which version a client speaks.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional

from ..errors import VersionNotSupportedError

#: What an empty or missing ``A2A-Version`` means (spec §3.6.2).
DEFAULT_VERSION = "0.3"

_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.\d+)?\s*$")


@dataclass
class Method:
    """One JSON-RPC method of a dialect."""

    parse: Callable[[Any], Any]
    call: Callable[..., Any]  # (service, request, ctx) -> result or stream
    render: Callable[[Any], Any] = lambda result: result
    streaming: bool = False


@dataclass
class Dialect:
    version: str
    methods: Dict[str, Method]
    #: ``(seq, event)`` of a stream -> the JSON of one event, or None to skip it.
    render_event: Callable[[Any], Optional[Any]] = lambda event: event
    extra: Dict[str, Any] = field(default_factory=dict)


_DIALECTS: Dict[str, Dialect] = {}


def register(dialect: Dialect) -> None:
    _DIALECTS[dialect.version] = dialect


def supported_versions() -> list:
    return sorted(_DIALECTS, reverse=True)


def normalise_version(raw: Optional[str]) -> str:
    """``Major.Minor`` from a header value; empty means 0.3; patch numbers are dropped."""
    if raw is None or not raw.strip():
        return DEFAULT_VERSION
    match = _VERSION.match(raw)
    if not match:
        raise _unsupported(raw)
    return f"{int(match.group(1))}.{int(match.group(2))}"


def negotiate(raw: Optional[str]) -> Dialect:
    """The dialect for an ``A2A-Version`` value, or VersionNotSupportedError (-32009)."""
    version = normalise_version(raw)
    dialect = _DIALECTS.get(version)
    if dialect is None:
        raise _unsupported(raw or "")
    return dialect


def _unsupported(raw: str) -> VersionNotSupportedError:
    supported = ", ".join(supported_versions())
    shown = raw.strip() or f"(none, which means {DEFAULT_VERSION})"
    return VersionNotSupportedError(
        f"A2A-Version {shown} is not supported; this server speaks {supported}. "
        "Send the header A2A-Version: 1.0",
        metadata={"requestedVersion": raw.strip(), "supportedVersions": supported},
    )


from . import v1  # noqa: E402  (registers itself)

__all__ = ["Dialect", "Method", "negotiate", "normalise_version", "register",
           "supported_versions", "v1"]
