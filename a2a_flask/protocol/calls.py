"""Who calls and what a stream may ask: the context every operation receives.

Bindings fill a :class:`CallContext` from the HTTP request; the engine decides
with it (tenant, owner) and dialects render with a :class:`StreamContext`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Callable, List, Mapping, Optional, Union

from .errors import InvalidParamsError
from .events import Event, LogEntry

#: C0 and C1 control characters and DEL: no id, tenant or caller may hold them
#: (they would forge log lines and break headers).
CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f]")
#: The longest tenant and caller id: each is a column of the SQL stores.
MAX_TENANT_LENGTH = MAX_OWNER_LENGTH = 255

#: One item of a stream: a log entry (its sequence number and event), or ``None`` for a
#: pause (nothing more right now: send what you have, or a keep-alive if that is nothing).
StreamItem = Optional[LogEntry]


class Wait:
    """A stream item served after a pause: call :meth:`wait` to block until the
    stream may have more, then ask for the next item.

    Streams yield this rather than block inside their generators so that the
    consumer blocks at the top of its own stack: a parked greenlet keeps a copy
    of the C stack it was suspended in, and each generator resumed in between
    adds to it (about 600 bytes per held stream each).  A consumer that does not
    wait leaves the stream to block by itself when resumed.  Subclasses say how
    to block in :meth:`block`.
    """

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = False

    def wait(self) -> None:
        """Block until the stream may have more; only once."""
        if not self.done:
            self.done = True
            # A method of a Python class: calling it adds no C stack (CPython 3.11+).
            self.block()

    def block(self) -> None:
        raise NotImplementedError


#: What the server's streams yield: stream items, and waits for the consumer to make.
ServedItem = Union[StreamItem, Wait]


@dataclass(frozen=True)
class Principal:
    """An authenticated caller.

    :param id: stable and unique: it owns tasks (store it, do not put secrets in it).
    :param claims: whatever else the app knows (scopes, roles, a user object's fields).
    """

    id: str
    claims: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise ValueError("a Principal needs a non-empty string id")
        # The id owns tasks: it becomes a store key and a log field.
        if len(self.id) > MAX_OWNER_LENGTH or CONTROL_CHARACTER.search(self.id):
            raise ValueError(f"a Principal id must be at most {MAX_OWNER_LENGTH} characters "
                             f"without control characters, not {self.id[:80]!r}")


@dataclass
class StreamContext:
    """What a dialect's stream renderer may ask about the stream it renders."""

    #: Whether an event is the last one of its stream (0.x ``final``).
    final: Callable[[Event], bool]
    #: The artifact ids of a task in order (0.1 numbers artifacts by position).
    artifact_ids: Callable[[str], List[str]]
    #: ``(task id, seq)`` -> the task's generation after its log entry ``seq`` (the
    #: 1.1 draft: a stream resumed after ``Last-Event-ID`` counts it from the log).
    generation_at: Optional[Callable[[str, int], int]] = None


@dataclass
class CallContext:
    """Who is calling and how: filled by the binding from the HTTP request."""

    tenant: str = ""
    owner: str = ""
    dialect: str = "1.0"
    extensions: List[str] = field(default_factory=list)
    last_event_id: Optional[int] = None
    #: The authenticated caller (None: anonymous); ``owner`` is its id.
    principal: Optional[Principal] = None
    #: The ``Idempotency-Key`` header as sent (None: none), checked where a send uses it.
    idempotency_key: Optional[str] = None

    def __post_init__(self) -> None:
        if self.principal is not None:
            self.owner = self.principal.id
        check_tenant(self.tenant)


def check_tenant(tenant: str) -> None:
    """Refuse a tenant no store could hold: too long, or with control characters."""
    if len(tenant) > MAX_TENANT_LENGTH:
        raise InvalidParamsError(f"tenant is longer than {MAX_TENANT_LENGTH} characters",
                                 violations=[("tenant", f"at most {MAX_TENANT_LENGTH} characters")])
    if CONTROL_CHARACTER.search(tenant):
        raise InvalidParamsError("tenant contains control characters",
                                 violations=[("tenant", "must not contain control characters")])
