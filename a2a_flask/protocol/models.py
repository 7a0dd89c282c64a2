"""The A2A 1.0 data model as plain dataclasses.

Attributes are snake_case; the wire form (camelCase ProtoJSON) lives in
:mod:`a2a_flask.protocol.codec` and the dialects.  Nothing here knows about HTTP.

Field metadata used by the codec:

``required``  the proto marks the field REQUIRED (a list must hold >= 1 item);
``always``    emit the member even when it holds its default value.

A field whose default is ``None`` has *presence*: it is emitted whenever it is
set, even to ``0`` or ``False`` (proto ``optional``).  Other fields are left
out of the wire form while they hold their default (``""``, ``False``, ``[]``).
"""
from __future__ import annotations

import enum
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import (
    Any,
    Dict,
    Iterable,
    Iterator,
    List,
    MutableSequence,
    Optional,
    Tuple,
    Union,
    overload,
)

REQUIRED: Dict[str, Any] = {"required": True}
ALWAYS: Dict[str, Any] = {"always": True}
#: A member of the A2A 1.1 draft (docs/generations.rst): the 1.0 codec neither writes
#: nor reads it (1.0 answers stay as they were); the 1.1 dialect does, by hand.
DRAFT: Dict[str, Any] = {"draft": "1.1"}


def new_id() -> str:
    """A fresh random identifier (UUID4 text)."""
    # uuid.uuid4() builds a UUID object only to print it; this is the same text
    # (version nibble 4, variant 10xx) from the same 16 random bytes, in half the time.
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:]}"


_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}

#: The formatted second of the last timestamp: ``strftime`` runs once a second.
_second: Tuple[int, str] = (-1, "")


def utc_now() -> str:
    """The current time as an RFC 3339 UTC timestamp with milliseconds and ``Z``."""
    global _second
    now = time.time()  # cheaper than datetime on the hot path (three calls per task)
    second, text = _second  # one read: another thread may replace it meanwhile
    if int(now) != second:
        second = int(now)
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        _second = (second, text)
    return text + ".%03dZ" % (int(now * 1000) % 1000)


def format_timestamp(moment: datetime) -> str:
    """Render ``moment`` the way A2A wants it: UTC, millisecond precision, ``Z``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    moment = moment.astimezone(timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + "%03dZ" % (moment.microsecond // 1000)


#: A timestamp's fraction of a second: before Python 3.11, ``fromisoformat`` reads
#: only 3 or 6 digits of it, and RFC 3339 allows any number.
_FRACTION = re.compile(r"^(.{10}.\d\d:\d\d:\d\d)\.(\d+)")


def parse_timestamp(text: str) -> str:
    """Normalise any RFC 3339 timestamp to our canonical form (raises ValueError)."""
    cleaned = text.strip()
    if cleaned.endswith(("Z", "z")):
        cleaned = cleaned[:-1] + "+00:00"
    cleaned = _FRACTION.sub(lambda m: f"{m.group(1)}.{m.group(2)[:6].ljust(6, '0')}", cleaned)
    moment = datetime.fromisoformat(cleaned)
    if moment.tzinfo is None:
        raise ValueError("timestamp needs a time zone (use Z for UTC)")
    try:
        return format_timestamp(moment)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before the first UTC moment
        raise ValueError("timestamp is out of range in UTC") from None


class TaskState(str, enum.Enum):
    """Where a task is in its life; the values are the 1.0 wire names."""

    UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
    SUBMITTED = "TASK_STATE_SUBMITTED"
    WORKING = "TASK_STATE_WORKING"
    COMPLETED = "TASK_STATE_COMPLETED"
    FAILED = "TASK_STATE_FAILED"
    CANCELED = "TASK_STATE_CANCELED"
    INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    REJECTED = "TASK_STATE_REJECTED"
    AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

    @property
    def terminal(self) -> bool:
        """Terminal states never change again."""
        return self in TERMINAL_STATES

    @property
    def interrupted(self) -> bool:
        """Paused until the client (or an out-of-band credential) answers."""
        return self in INTERRUPTED_STATES

    @property
    def settled(self) -> bool:
        """Terminal or interrupted: the agent has said what it will say for this turn
        (a blocking send answers, a stream of this turn ends)."""
        return self in SETTLED_STATES


TERMINAL_STATES = frozenset(
    {TaskState.COMPLETED, TaskState.FAILED, TaskState.CANCELED, TaskState.REJECTED}
)
INTERRUPTED_STATES = frozenset({TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})
SETTLED_STATES = TERMINAL_STATES | INTERRUPTED_STATES


class Role(str, enum.Enum):
    """Who wrote a message."""

    UNSPECIFIED = "ROLE_UNSPECIFIED"
    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


class _Unset:
    """Marks a data part without data (``None`` is a legal JSON value)."""

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass
class Part:
    """One piece of content: exactly one of ``text``, ``raw``, ``url`` or ``data``."""

    text: Optional[str] = None
    raw: Optional[bytes] = None
    url: Optional[str] = None
    data: Any = UNSET
    media_type: str = ""
    filename: str = ""
    metadata: Optional[Dict[str, Any]] = None

    @property
    def kind(self) -> str:
        """Which content member is set: ``text``, ``raw``, ``url`` or ``data``."""
        if self.text is not None:
            return "text"
        if self.raw is not None:
            return "raw"
        if self.url is not None:
            return "url"
        return "data"

    @property
    def is_file(self) -> bool:
        return self.raw is not None or self.url is not None


def _compact(part: Part) -> Union[str, Part]:
    """A plain text part (its text and nothing else) as its text; any other part as it is."""
    if (type(part) is Part and part.text is not None and part.raw is None and part.url is None
            and part.data is UNSET and not part.media_type and not part.filename
            and part.metadata is None):
        return part.text
    return part


def _expand(item: Union[str, Part]) -> Part:
    return Part(text=item) if isinstance(item, str) else item


class PartList(MutableSequence[Part]):
    """A list of parts that keeps each plain text part (text and nothing else) as its
    string, and makes the part again when it is read.

    A task's snapshot holds a streamed artifact as one part per chunk.  As
    objects, the parts of a long stream are most of what Python's collector
    walks on each of its full collections while the task runs, and a full
    collection comes more often as they grow; a string is nothing the collector
    follows, in a fraction of the memory.  Folding appended chunks into a
    snapshot (:mod:`.events`) makes these.  It behaves as a list of parts, but
    a part read from it is equal to the one added, not the same object: change
    a part by assigning it.
    """

    __slots__ = ("_items",)

    def __init__(self, parts: Iterable[Part] = ()) -> None:
        self._items: List[Union[str, Part]] = (
            list(parts._items) if isinstance(parts, PartList) else [_compact(p) for p in parts])

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Part: ...

    @overload
    def __getitem__(self, index: slice) -> "PartList": ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Part, "PartList"]:
        if isinstance(index, slice):
            sliced = PartList()
            sliced._items = self._items[index]
            return sliced
        return _expand(self._items[index])

    def __iter__(self) -> Iterator[Part]:
        return map(_expand, self._items)

    @overload
    def __setitem__(self, index: int, value: Part) -> None: ...

    @overload
    def __setitem__(self, index: slice, value: Iterable[Part]) -> None: ...

    def __setitem__(self, index: Union[int, slice], value: Any) -> None:
        if isinstance(index, slice):
            self._items[index] = [_compact(p) for p in value]
        else:
            self._items[index] = _compact(value)

    def __delitem__(self, index: Union[int, slice]) -> None:
        del self._items[index]

    def insert(self, index: int, value: Part) -> None:
        self._items.insert(index, _compact(value))

    def extend(self, values: Iterable[Part]) -> None:
        self._items.extend(values._items if isinstance(values, PartList)
                           else [_compact(p) for p in values])

    def __add__(self, other: Iterable[Part]) -> "PartList":
        joined = PartList(self)
        joined.extend(other)
        return joined

    def __radd__(self, other: Iterable[Part]) -> "PartList":
        joined = PartList(other)
        joined.extend(self)
        return joined

    def copy(self) -> "PartList":
        return PartList(self)

    def compacted(self) -> List[Union[str, Part]]:
        """The parts as this list keeps them: each plain text part as its text, any
        other part as itself (for encoders, which need not make the parts again).
        Do not change it."""
        return self._items

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PartList):
            return self._items == other._items
        if isinstance(other, (list, tuple)):
            return self._items == [_compact(p) for p in other]
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable, like a list

    def __repr__(self) -> str:
        return f"PartList({list(self)!r})"

    def __reduce__(self) -> Tuple[Any, ...]:
        return (PartList, (list(self),))


@dataclass
class Message:
    """One turn of communication between a client and an agent."""

    message_id: str = field(default="", metadata=REQUIRED)
    role: Role = field(default=Role.UNSPECIFIED, metadata=REQUIRED)
    parts: List[Part] = field(default_factory=list, metadata=REQUIRED)
    context_id: str = ""
    task_id: str = ""
    metadata: Optional[Dict[str, Any]] = None
    extensions: List[str] = field(default_factory=list)
    reference_task_ids: List[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        """All text parts joined with newlines."""
        return "\n".join(p.text for p in self.parts if p.text is not None)


@dataclass
class TaskStatus:
    state: TaskState = field(default=TaskState.UNSPECIFIED, metadata=REQUIRED)
    message: Optional[Message] = None
    timestamp: Optional[str] = None


@dataclass
class Artifact:
    """An output of a task, possibly delivered in chunks."""

    artifact_id: str = field(default="", metadata=REQUIRED)
    #: A list, or a :class:`PartList` in a snapshot that chunks were appended to.
    parts: MutableSequence[Part] = field(default_factory=list, metadata=REQUIRED)
    name: str = ""
    description: str = ""
    metadata: Optional[Dict[str, Any]] = None
    extensions: List[str] = field(default_factory=list)


@dataclass
class Task:
    id: str = field(default="", metadata=REQUIRED)
    context_id: str = ""
    status: TaskStatus = field(default_factory=TaskStatus, metadata=REQUIRED)
    artifacts: List[Artifact] = field(default_factory=list)
    history: List[Message] = field(default_factory=list)
    metadata: Optional[Dict[str, Any]] = None
    #: 1.1 draft: 1 at creation, +1 per status or artifact event (0: not known).
    generation: int = field(default=0, metadata=DRAFT)


@dataclass
class TaskStatusUpdateEvent:
    task_id: str = field(default="", metadata=REQUIRED)
    context_id: str = field(default="", metadata=REQUIRED)
    status: TaskStatus = field(default_factory=TaskStatus, metadata=REQUIRED)
    metadata: Optional[Dict[str, Any]] = None
    #: 1.1 draft: the task's generation after this event (read by the client; the
    #: server's log does not keep it, its streams count it).
    generation: int = field(default=0, metadata=DRAFT)


@dataclass
class TaskArtifactUpdateEvent:
    task_id: str = field(default="", metadata=REQUIRED)
    context_id: str = field(default="", metadata=REQUIRED)
    artifact: Artifact = field(default_factory=Artifact, metadata=REQUIRED)
    append: bool = False
    last_chunk: bool = False
    metadata: Optional[Dict[str, Any]] = None
    #: 1.1 draft: as :attr:`TaskStatusUpdateEvent.generation`.
    generation: int = field(default=0, metadata=DRAFT)


@dataclass
class AuthenticationInfo:
    scheme: str = field(default="", metadata=REQUIRED)
    credentials: str = ""


@dataclass
class TaskPushNotificationConfig:
    url: str = field(default="", metadata=REQUIRED)
    id: str = ""
    task_id: str = ""
    tenant: str = ""
    token: str = ""
    authentication: Optional[AuthenticationInfo] = None


# --------------------------------------------------------------------------- card


@dataclass
class AgentProvider:
    url: str = field(default="", metadata=REQUIRED)
    organization: str = field(default="", metadata=REQUIRED)


@dataclass
class AgentExtension:
    uri: str = ""
    description: str = ""
    required: bool = False
    params: Optional[Dict[str, Any]] = None


@dataclass
class AgentCapabilities:
    streaming: Optional[bool] = None
    push_notifications: Optional[bool] = None
    extensions: List[AgentExtension] = field(default_factory=list)
    extended_agent_card: Optional[bool] = None


@dataclass
class AgentInterface:
    url: str = field(default="", metadata=REQUIRED)
    protocol_binding: str = field(default="", metadata=REQUIRED)
    protocol_version: str = field(default="", metadata=REQUIRED)
    tenant: str = ""


@dataclass
class StringList:
    list: List[str] = field(default_factory=list)


@dataclass
class SecurityRequirement:
    schemes: Dict[str, StringList] = field(default_factory=dict)


@dataclass
class AgentSkill:
    id: str = field(default="", metadata=REQUIRED)
    name: str = field(default="", metadata=REQUIRED)
    description: str = field(default="", metadata=REQUIRED)
    tags: List[str] = field(default_factory=list, metadata=REQUIRED)
    examples: List[str] = field(default_factory=list)
    input_modes: List[str] = field(default_factory=list)
    output_modes: List[str] = field(default_factory=list)
    security_requirements: List[SecurityRequirement] = field(default_factory=list)


@dataclass
class AgentCardSignature:
    protected: str = field(default="", metadata=REQUIRED)
    signature: str = field(default="", metadata=REQUIRED)
    header: Optional[Dict[str, Any]] = None


@dataclass
class AgentCard:
    """What an agent publishes about itself at ``/.well-known/agent-card.json``.

    Leave ``supported_interfaces`` empty to have the extension fill it with the
    endpoints it really serves, built from ``A2A_PUBLIC_URL`` or the request.
    ``security_schemes`` holds 1.0 SecurityScheme objects as plain dicts.
    """

    name: str = field(default="", metadata=REQUIRED)
    description: str = field(default="", metadata=REQUIRED)
    version: str = field(default="", metadata=REQUIRED)
    supported_interfaces: List[AgentInterface] = field(default_factory=list, metadata=REQUIRED)
    capabilities: AgentCapabilities = field(default_factory=AgentCapabilities, metadata=REQUIRED)
    default_input_modes: List[str] = field(default_factory=lambda: ["text/plain"], metadata=REQUIRED)
    default_output_modes: List[str] = field(default_factory=lambda: ["text/plain"], metadata=REQUIRED)
    skills: List[AgentSkill] = field(default_factory=list, metadata=REQUIRED)
    provider: Optional[AgentProvider] = None
    documentation_url: Optional[str] = None
    icon_url: Optional[str] = None
    security_schemes: Dict[str, Dict[str, Any]] = field(default_factory=dict)
    security_requirements: List[SecurityRequirement] = field(default_factory=list)
    signatures: List[AgentCardSignature] = field(default_factory=list)


# ----------------------------------------------------------------- requests


@dataclass
class SendMessageConfiguration:
    accepted_output_modes: List[str] = field(default_factory=list)
    task_push_notification_config: Optional[TaskPushNotificationConfig] = None
    history_length: Optional[int] = None
    return_immediately: bool = False
    #: 1.1 draft: refuse the message unless the task's generation is this one.
    if_generation_match: Optional[int] = field(default=None, metadata=DRAFT)


@dataclass
class SendMessageRequest:
    message: Message = field(default_factory=Message, metadata=REQUIRED)
    configuration: Optional[SendMessageConfiguration] = None
    metadata: Optional[Dict[str, Any]] = None
    tenant: str = ""


@dataclass
class GetTaskRequest:
    id: str = field(default="", metadata=REQUIRED)
    history_length: Optional[int] = None
    tenant: str = ""
    #: 1.1 draft: long-poll until the task's generation is past this one.
    current_generation: Optional[int] = field(default=None, metadata=DRAFT)


@dataclass
class ListTasksRequest:
    context_id: str = ""
    status: TaskState = TaskState.UNSPECIFIED
    page_size: Optional[int] = None
    page_token: str = ""
    history_length: Optional[int] = None
    status_timestamp_after: Optional[str] = None
    include_artifacts: Optional[bool] = None
    tenant: str = ""


@dataclass
class ListTasksResponse:
    tasks: List[Task] = field(default_factory=list, metadata=ALWAYS)
    next_page_token: str = field(default="", metadata=ALWAYS)
    page_size: int = field(default=0, metadata=ALWAYS)
    total_size: int = field(default=0, metadata=ALWAYS)


@dataclass
class CancelTaskRequest:
    id: str = field(default="", metadata=REQUIRED)
    metadata: Optional[Dict[str, Any]] = None
    tenant: str = ""


@dataclass
class SubscribeToTaskRequest:
    id: str = field(default="", metadata=REQUIRED)
    tenant: str = ""


@dataclass
class TaskPushConfigRequest:
    """Get or Delete of one push config."""

    task_id: str = field(default="", metadata=REQUIRED)
    id: str = field(default="", metadata=REQUIRED)
    tenant: str = ""


@dataclass
class ListTaskPushNotificationConfigsRequest:
    task_id: str = field(default="", metadata=REQUIRED)
    page_size: Optional[int] = None
    page_token: str = ""
    tenant: str = ""


@dataclass
class ListTaskPushNotificationConfigsResponse:
    configs: List[TaskPushNotificationConfig] = field(default_factory=list, metadata=ALWAYS)
    next_page_token: str = field(default="", metadata=ALWAYS)


@dataclass
class GetExtendedAgentCardRequest:
    tenant: str = ""


@dataclass
class Empty:
    """``google.protobuf.Empty``: renders as ``{}``."""
