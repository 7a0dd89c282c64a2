"""The dialect registry: methods per protocol generation, and version negotiation.

A dialect maps its method names to the operations of
:mod:`a2a_flask.protocol.operations`, each with a parser (params JSON -> request
model) and a renderer (result model -> JSON): the operation says what is
called and whether it streams.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Set, Tuple, Type

from ..protocol.calls import CallContext
from ..protocol.codec import decode
from ..protocol.errors import InvalidParamsError, MethodNotFoundError, VersionNotSupportedError
from ..protocol.operations import Call, DialectService, Operation

#: What an empty or missing ``A2A-Version`` means (spec §3.6.2).
DEFAULT_VERSION = "0.3"

# Bounded digit runs: int() refuses strings of more than 4300 digits.
_VERSION = re.compile(r"^\s*(\d{1,9})\.(\d{1,9})(?:\.\d{1,9})?\s*$")


#: Makes the renderer of one stream: a log entry -> the JSON of its event, or
#: None to skip it.  A factory (given the stream's StreamContext), because some
#: renderers remember earlier events or ask about the task.
StreamRenderer = Callable[[Any], Callable[[Any], Optional[Any]]]


#: Makes the payload renderer of one webhook delivery run: ``(log entry, None)``
#: -> the JSON body of that event's push, or None to skip the event.  Dialects
#: that push whole tasks (0.3) are called ``(None, task)`` instead, with the task
#: as it is when sent: one push stands for every event since the last.
PushRenderer = Callable[[Any], Callable[[Any, Any], Optional[Any]]]


def params_of(cls: Type[Any]) -> Callable[[Any], Any]:
    """A parser for a request model; ``params`` may be omitted for all-optional requests."""

    def parse(params: Any) -> Any:
        if params is None:
            params = {}
        if not isinstance(params, dict):
            raise InvalidParamsError("params must be an object",
                                     violations=[("params", "must be an object")])
        return decode(cls, params)

    return parse


@dataclass
class Method:
    """One JSON-RPC method of a dialect (or one REST route): an operation, parsed
    and rendered the dialect's way."""

    parse: Callable[[Any], Any]
    operation: Operation[Any]
    render: Callable[[Any], Any] = lambda result: result
    #: Overrides the operation's call, for a dialect whose method differs a little
    #: (0.3 reads a webhook without naming it).
    call: Optional[Call] = None
    #: Overrides the dialect's stream renderer for this method.
    stream_renderer: Optional[StreamRenderer] = None
    #: For names shared by two dialects: ``(service, request, ctx)`` -> the Method
    #: whose ``render``/``stream_renderer`` answer this call.
    choose: Optional[Callable[[DialectService, Any, CallContext], "Method"]] = None
    #: The protocol version recorded on tasks this method creates (default: the dialect's).
    dialect: Optional[str] = None
    #: Streaming methods only: the operation's own errors (an unknown or finished task)
    #: are sent as one error event in a stream, not as a plain response (0.3
    #: ``tasks/resubscribe``, whose clients open a stream and read events).
    errors_in_stream: bool = False
    #: The operation's: answers with a stream.
    streaming: bool = field(init=False)
    #: ``(service, request, ctx)`` -> the result or stream: ``call``, else the operation's.
    perform: Call = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.streaming = self.operation.streaming
        self.perform = self.call or self.operation.call


@dataclass
class Dialect:
    version: str
    methods: Dict[str, Method]
    stream_renderer: StreamRenderer


_DIALECTS: Dict[str, Dialect] = {}


def register(dialect: Dialect, aliases: Tuple[str, ...] = (), *, draft: bool = False) -> None:
    """Serve ``dialect`` for its version (and for ``aliases``, e.g. 0.2 for 0.3); a
    ``draft`` only to agents that serve drafts (``A2A_PROTOCOL_DRAFT``)."""
    _DIALECTS[dialect.version] = dialect
    for alias in aliases:
        _ALIASES[alias] = dialect.version
    if draft:
        _DRAFTS.add(dialect.version)


_ALIASES: Dict[str, str] = {}
#: Versions of unreleased specifications (served only where an agent asks for them).
_DRAFTS: Set[str] = set()
_PUSH: Dict[str, PushRenderer] = {}


def register_push(version: str, renderer: PushRenderer) -> None:
    """How webhooks registered in ``version`` get their payloads."""
    _PUSH[version] = renderer


def push_renderer(version: str) -> PushRenderer:
    """The push payload renderer factory of a dialect (1.0 for anything unknown)."""
    return _PUSH.get(version) or _PUSH["1.0"]


def supported_versions(drafts: bool = False) -> List[str]:
    """The versions served (with ``drafts``, the drafts' too), newest first."""
    return sorted((v for v in _DIALECTS if drafts or v not in _DRAFTS), reverse=True)


def normalise_version(raw: Optional[str]) -> str:
    """``Major.Minor`` from a header value; empty means 0.3; patch numbers are dropped."""
    if raw is None or not raw.strip():
        return DEFAULT_VERSION
    match = _VERSION.match(raw)
    if not match:
        raise _unsupported(raw)
    return f"{int(match.group(1))}.{int(match.group(2))}"


def negotiate(raw: Optional[str], drafts: bool = False) -> Dialect:
    """The dialect for an ``A2A-Version`` value, or VersionNotSupportedError (-32009)
    (a draft's version too, unless ``drafts``)."""
    version = normalise_version(raw)
    dialect = _DIALECTS.get(_ALIASES.get(version, version))
    if dialect is None or (dialect.version in _DRAFTS and not drafts):
        raise _unsupported(raw or "", drafts)
    return dialect


def resolve(raw_version: Optional[str], method_name: str, *, lenient: bool = False,
            drafts: bool = False) -> Tuple[Dialect, Method]:
    """The dialect and method for a JSON-RPC call (see the negotiation table in the docs).

    The version (header or query parameter; missing means 0.3) picks the
    dialect first: an unserved version is -32009.  Then the method name: a
    name that only another served version knows is -32009 too, naming the
    version to send (with ``lenient``, a missing header and a name only 1.0
    knows is served as 1.0); a name no version knows is -32601.
    """
    dialect = negotiate(raw_version, drafts)
    method = dialect.methods.get(method_name)
    if method is not None:
        return dialect, method
    owners = [d for d in _DIALECTS.values()
              if method_name in d.methods and d.version not in _DRAFTS]
    if owners:
        owner = owners[0]
        if lenient and not (raw_version or "").strip():
            return owner, owner.methods[method_name]
        raise VersionNotSupportedError(
            f"Method {method_name!r} belongs to A2A {owner.version}, but the request speaks "
            f"{dialect.version}; send the header A2A-Version: {owner.version}",
            metadata={"method": method_name, "requestedVersion": dialect.version,
                      "methodVersion": owner.version,
                      "supportedVersions": ", ".join(supported_versions(drafts))},
        )
    raise MethodNotFoundError(
        f"Method {method_name!r} not found in A2A {dialect.version}",
        metadata={"method": method_name, "version": dialect.version},
    )


def _unsupported(raw: str, drafts: bool = False) -> VersionNotSupportedError:
    supported = ", ".join(supported_versions(drafts))
    shown = raw.strip() or f"(none, which means {DEFAULT_VERSION})"
    return VersionNotSupportedError(
        f"A2A-Version {shown} is not supported; this server speaks {supported}. "
        "Send the header A2A-Version: 1.0",
        metadata={"requestedVersion": raw.strip(), "supportedVersions": supported},
    )
