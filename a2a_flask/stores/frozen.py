"""Finished tasks in a form the garbage collector leaves alone.

The memory store keeps every finished task for ``A2A_TASK_TTL`` (an hour by
default).  As objects, a task streamed in 100 chunks is some 500 of them
(events, artifacts, parts, lists) and an echo task about 20.  CPython's
collector walks every one of them again on each full collection, which it
runs whenever the objects that lived long enough grew by a quarter: on a
busy worker that was a third of what a streamed event cost, and over 20,000
finished streamed tasks one full collection took 2.4 s (``bench/frozen.py``).

Frozen, a task is one ``bytes`` value for its snapshot and a tuple of them
for its log (:data:`SEGMENT` events each, so that a reader's slice thaws
only what it covers), which the collector never looks at (in a fifth of the
memory for a streamed task, half for an echo task).  Each model is first
copied member by member into a tuple of plain values, by a function written
out per model like the codec's encoders (no JSON, no base64), then
:mod:`marshal` makes the bytes.  Marshal's format is private to one Python
version, which is all a store in this process needs; it refuses what it
cannot copy exactly (an object in an agent's metadata, say), and then the
task simply stays as objects.
"""
from __future__ import annotations

import dataclasses
import enum
import marshal
import typing
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..protocol.codec import ARRAYS
from ..protocol.events import STREAM_EVENTS, STREAM_MEMBERS, Event
from ..protocol.models import UNSET, Task, TaskState
from .base import TaskRecord

#: A model as plain values: its members in field order, models among them in turn.
Plain = Tuple[Any, ...]
#: A frozen log: :data:`SEGMENT` events to a ``bytes`` value.  A tuple holding
#: only bytes, which the collector stops tracking at its first look.
FrozenLog = Tuple[bytes, ...]
#: Events per segment of a frozen log: a read thaws the segments its slice
#: covers, not the whole log (a multiple of a store's ``read_slice``).
SEGMENT = 250

#: What a data part holds when it holds nothing (``UNSET`` is an object marshal
#: cannot copy; ``...`` is no JSON value, so no part holds it otherwise).
_NO_DATA = ...

#: The states by their string, as a frozen record keeps them.
_STATES = {state.value: state for state in TaskState}

_FREEZERS: Dict[type, Callable[[Any], Plain]] = {}
_THAWERS: Dict[type, Callable[[Plain], Any]] = {}


def freeze_task(task: Task) -> bytes:
    """A task as bytes (ValueError if something in it cannot be copied exactly)."""
    return marshal.dumps(_freezer(Task)(task))


def thaw_task(frozen: bytes) -> Task:
    """The task :func:`freeze_task` froze (equal to it, not the same object)."""
    task: Task = _thawer(Task)(marshal.loads(frozen))
    return task


def freeze_log(events: Sequence[Event]) -> FrozenLog:
    """A task's log as segments of bytes (ValueError if something in it cannot be
    copied exactly)."""
    plain = []
    for event in events:
        cls = type(event)
        freezer = _FREEZERS.get(cls) or _freezer(cls)
        plain.append((STREAM_MEMBERS[cls], freezer(event)))
    return tuple(marshal.dumps(plain[at:at + SEGMENT]) for at in range(0, len(plain), SEGMENT))


def thaw_log(frozen: FrozenLog, start: int = 0, stop: Optional[int] = None) -> List[Event]:
    """The events of a frozen log from index ``start`` on (up to ``stop``)."""
    last = len(frozen) if stop is None else min(len(frozen), -(-stop // SEGMENT))
    events: List[Event] = []
    for index in range(start // SEGMENT, last):
        at = index * SEGMENT
        members = marshal.loads(frozen[index])[max(start - at, 0):
                                               None if stop is None else stop - at]
        events.extend(_thawer(STREAM_EVENTS[kind])(plain) for kind, plain in members)
    return events


class FrozenRecord(TaskRecord):
    """The record of a finished task whose snapshot is frozen.

    What ListTasks filters and sorts on (ids, state, update time) stays at
    hand; the task itself is thawed on each read of :attr:`task`, so a
    reader that reads it more than once takes :meth:`thawed` first.
    """

    def __init__(self, record: TaskRecord) -> None:
        """Freeze ``record`` (ValueError if its task cannot be copied exactly)."""
        self.task = record.task
        self.seq, self.tenant, self.owner = record.seq, record.tenant, record.owner
        self.dialect, self.created_at = record.dialect, record.created_at
        # Members, not a tuple, and the state by its string: a tuple (or, before
        # Python 3.11, the instance's own __dict__) holding an object is tracked.
        self._task_id, self._context_id = record.task_id, record.context_id
        self._state, self._updated_at = record.state.value, record.updated_at

    @property
    def task(self) -> Task:
        return thaw_task(self._frozen)

    @task.setter
    def task(self, value: Task) -> None:
        self._frozen = freeze_task(value)

    @property
    def outline(self) -> Task:
        return self.task

    @property
    def task_id(self) -> str:
        return self._task_id

    @property
    def context_id(self) -> str:
        return self._context_id

    @property
    def state(self) -> TaskState:
        return _STATES[self._state]

    @property
    def updated_at(self) -> str:
        return self._updated_at

    def thawed(self) -> TaskRecord:
        """The record with its task as objects again."""
        return TaskRecord(self.task, self.seq, self.tenant, self.owner, self.dialect,
                          self.created_at)


# ------------------------------------------------------------ generated code


def _freezer(cls: type) -> Callable[[Any], Plain]:
    found = _FREEZERS.get(cls)
    if found is None:
        found = _FREEZERS[cls] = _compile(cls, freezing=True)
    return found


def _thawer(cls: type) -> Callable[[Plain], Any]:
    found = _THAWERS.get(cls)
    if found is None:
        found = _THAWERS[cls] = _compile(cls, freezing=False)
    return found


def _compile(cls: type, *, freezing: bool) -> Callable[[Any], Any]:
    """One function for one model, written member by member: ``freeze_model(value)``
    makes the tuple, ``thaw_model(plain)`` calls the model's constructor with it."""
    scope: Dict[str, Any] = {"UNSET": UNSET, "NO_DATA": _NO_DATA, "cls": cls}
    hints = typing.get_type_hints(cls)
    members = [_member(hints[field.name],
                       f"value.{field.name}" if freezing else f"plain[{index}]",
                       index, scope, freezing)
               for index, field in enumerate(dataclasses.fields(cls))]
    if freezing:
        body = f"def freeze_model(value):\n    return ({', '.join(members)},)"
    else:
        body = f"def thaw_model(plain):\n    return cls({', '.join(members)})"
    # The code comes from the model classes, never from input.
    exec(body, scope)
    made: Callable[[Any], Any] = scope["freeze_model" if freezing else "thaw_model"]
    return made


def _member(tp: Any, source: str, index: int, scope: Dict[str, Any], freezing: bool) -> str:
    """The expression that freezes (or thaws) member ``index`` of type ``tp``, read
    from ``source``; what it calls goes into ``scope`` as ``convert<index>``."""
    convert, item = f"convert{index}", f"item{index}"
    origin = typing.get_origin(tp)
    if origin is typing.Union:  # Optional[X]: None stays None
        inner = [arg for arg in typing.get_args(tp) if arg is not type(None)][0]
        converted = _member(inner, item, index, scope, freezing)
        if converted == item:
            return source
        return f"(None if ({item} := {source}) is None else {converted})"
    if origin in ARRAYS and _is_model(typing.get_args(tp)[0]):
        element = typing.get_args(tp)[0]
        scope[convert] = _freezer(element) if freezing else _thawer(element)
        return f"[*map({convert}, {source})]"
    if _is_model(tp):
        scope[convert] = _freezer(tp) if freezing else _thawer(tp)
        return f"{convert}({source})"
    if isinstance(tp, type) and issubclass(tp, enum.Enum):
        if freezing:  # the member's value as a plain str (``.value`` costs two calls)
            return f"{source}._value_"
        scope[convert] = {member.value: member for member in tp}
        return f"{convert}[{source}]"
    if tp is Any:  # a data part's value, UNSET when the part holds none
        if freezing:
            return f"(NO_DATA if ({item} := {source}) is UNSET else {item})"
        return f"(UNSET if ({item} := {source}) is NO_DATA else {item})"
    # Strings, numbers, bytes, lists of strings and metadata dicts: marshal copies them.
    return source


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


__all__ = ["FrozenRecord", "freeze_task", "thaw_task", "freeze_log", "thaw_log"]
