"""Writing to a task: every change is a commit of events to its log.

:class:`TaskWriter` appends the events a change makes from the task as it is
stored (compare-and-set on the sequence number: a stale view is judged again on
the fresh record), trims the history to ``max_history``, refuses growth past
``max_task_bytes`` (:mod:`.budget`), and records failures, including those the
store was down to take (the keeper retries them).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Dict, Iterator, List, Optional

from ..observe import tasks as observe
from ..protocol.codec import encode
from ..protocol.errors import TaskNotFoundError, TaskTooLargeError
from ..protocol.events import Event, entry_moves_generation
from ..protocol.models import Message, Part, Role, TaskStatus, TaskStatusUpdateEvent, new_id, utc_now
from ..stores.base import OnceClaim, SequenceConflict, TaskRecord, TaskStore, finishes
from .budget import growth, message_size, needs_folded, task_size, too_large
from .lifecycles import LEASE_TABLE, LeaseAction, LeaseEvent, LeaseState, LeaseStep
from .states import Change, transition


def generation_at(store: TaskStore, task_id: str, seq: int) -> int:
    """A task's generation after its log entry ``seq`` (the A2A 1.1 draft,
    docs/generations.rst), counted from its log: the entries up to ``seq`` that are
    not a caller's message (a chunk is one, and is not decoded to tell)."""
    return sum(1 for entry in store.entries(task_id, 0, through=seq)
               if entry_moves_generation(entry))


def know_generation(store: TaskStore, record: TaskRecord) -> TaskRecord:
    """``record`` with its generation known: a task stored before generations were
    kept has none in its snapshot, and gets it counted from its log (once per load;
    its next stored snapshot keeps it)."""
    if not record.generation and record.seq:
        record.outline.generation = generation_at(store, record.task_id, record.seq) \
            - record.unfolded
    return record


def agent_message(text: str, task_id: str = "", context_id: str = "") -> Message:
    """A one-part text message from the agent."""
    return Message(message_id=new_id(), role=Role.AGENT, parts=[Part(text=text)],
                   task_id=task_id, context_id=context_id)


class LeaseHeld(RuntimeError):
    """Another process holds a live lease on the task: a run must not start on it
    (the store refused the lease, :meth:`~a2a_flask.stores.TaskStore.acquire_lease`)."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} is being run by another process (its lease "
                         "is live); it is not run twice")
        self.task_id = task_id


@dataclass
class Lease:
    """A run's lease on its task (see :mod:`.keeper`): taken before the run starts,
    or, for a new task, with the run's first write (:meth:`.Keeper.hold`).  Its
    states and what moves it: :data:`.lifecycles.LEASE_TABLE`."""

    owner: str
    #: How long the lease lasts between renewals (seconds).
    ttl: float = 0.0
    #: Where it is; moved only by the writer and the keeper, as the table says.
    state: LeaseState = LeaseState.HELD

    @property
    def held(self) -> bool:
        """Whether the store holds this lease now (the keeper renews it)."""
        return self.state is LeaseState.HELD

    def step(self, event: LeaseEvent) -> LeaseStep:
        """What ``event`` asks of the store for this lease, and its state after (the
        lease does not move: see :meth:`TaskWriter.commit`)."""
        return LEASE_TABLE[self.state][event]  # (as lease_step: read on every write)


class TaskWriter:
    """Commits changes to the tasks of one agent's store."""

    def __init__(self, store: TaskStore, *, sender: Any = None, max_history: int = 0,
                 max_task_bytes: int = 0, store_grace: float = 0.0) -> None:
        self.store = store
        #: The sender of the task signals (the A2A extension object).
        self.sender = sender
        #: Messages a task's history keeps (0: all); the log keeps every event anyway.
        self.max_history = max_history
        #: Most bytes of content a task may hold (0: no limit); see :mod:`.budget`.
        self.max_task_bytes = max_task_bytes
        #: Seconds a run's writes, and its followers' reads, ride out a store outage
        #: (``A2A_STORE_GRACE``; 0: the first failure stops them).
        self.store_grace = store_grace
        #: Task id -> status text of failures the store was down to record.
        self._unrecorded: Dict[str, str] = {}

    def commit(self, task_id: str, build: Callable[[TaskRecord], List[Event]],
               known: Optional[TaskRecord] = None, *, caller: bool = False,
               lease: Optional[Lease] = None) -> TaskRecord:
        """Append the events ``build`` makes from the latest record; retry on conflicts.

        ``known`` is the record as the caller last saw it (a run's own
        record): tried first, so an executor's chunk costs no load; the
        store's sequence check sends a stale one back here for a reload.
        Raises :class:`~a2a_flask.errors.TaskTooLargeError` when the
        events would take the task past ``max_task_bytes`` (with a violation
        on ``message.parts`` when ``caller``: they carry a caller's message).
        ``lease`` is the committing run's own, moved with the write as
        :data:`.lifecycles.LEASE_TABLE` says (taken first by a deferred run whose
        task goes on, released with the events that finish the task in the same
        round trip where the store can).
        """
        while True:
            fresh = known is None
            record, known = (self.store.load(task_id) if fresh else known), None
            if record is None:
                raise TaskNotFoundError(metadata={"taskId": task_id})
            know_generation(self.store, record)  # (a task stored before they were kept)
            try:
                events = build(record)
                if not events:
                    return record
                after = self._after(record, events, caller)
            except Exception:
                if fresh:
                    raise
                continue  # judged on a stale record: judge again on the stored one
            seq = record.seq
            try:
                self._write(task_id, after, lease,
                            lambda releasing: self._append(task_id, seq, events, after, releasing))
            except SequenceConflict:
                continue
            observe.committed(self.sender, record.state, after.outline, record.created_at)
            return after

    def create(self, record: TaskRecord, first_event: Event, events: List[Event],
               lease: Optional[Lease] = None) -> TaskRecord:
        """Create the task of ``record`` with ``events`` after ``first_event``, in one
        store call: a run's first emission makes its task.  ``lease`` as in
        :meth:`commit`.  Events past ``max_task_bytes`` are refused as :meth:`commit`
        refuses them, once the task exists without them."""
        if not events:
            self._create_alone(record, first_event, lease)
            return record
        try:
            after = self._after(record, events, caller=False)
        except TaskTooLargeError:
            self._create_alone(record, first_event, lease)
            raise
        self._write(record.task.id, after, lease,
                    lambda releasing: self.store.create_with(record, first_event, events, after,
                                                             release_owner=releasing))
        observe.created(self.sender, record.task.id, record.task.context_id)
        observe.committed(self.sender, record.state, after.outline, record.created_at)
        return after

    def create_claimed(self, record: TaskRecord, claim: OnceClaim,
                       lease: Optional[Lease] = None) -> str:
        """Create the task of ``record`` (its log the task alone) and bind ``claim`` with
        it, in one store write where the store can (an idempotent send's acceptance,
        :meth:`~a2a_flask.stores.base.TaskStore.create_claimed`): the value bound,
        ``claim.value`` when this call bound it and made the task, else the first
        send's (nothing was written, the lease stays as it was).  A DEFERRED ``lease``
        is taken in the same write (its TAKE_FIRST, :data:`.lifecycles.LEASE_TABLE`)."""
        owner: Optional[str] = None
        step = None
        if lease is not None:
            step = lease.step(LeaseEvent.WRITE)  # (a new task is SUBMITTED: it goes on)
            if step.action is LeaseAction.TAKE_FIRST:
                owner = lease.owner
        held = self.store.create_claimed(record, record.task, claim, owner,
                                         lease.ttl if lease is not None else 0.0)
        if held != claim.value:
            return held
        if lease is not None and step is not None:
            lease.state = step.then
        observe.created(self.sender, record.task.id, record.task.context_id)
        return held

    def _create_alone(self, record: TaskRecord, first_event: Event,
                      lease: Optional[Lease]) -> None:
        """The task as ``record``, its log ``first_event`` alone (it goes on running)."""
        self._write(record.task.id, record, lease,
                    lambda releasing: self.store.create(record, first_event))
        observe.created(self.sender, record.task.id, record.task.context_id)

    def _write(self, task_id: str, after: TaskRecord, lease: Optional[Lease],
               write: Callable[[Optional[str]], object]) -> None:
        """Make a write that leaves the task as ``after``, doing what it asks of the
        writing run's ``lease`` (:data:`.lifecycles.LEASE_TABLE`): ``write`` gets the
        owner whose lease it lets go with it (None: it lets none go).  The lease
        moves once the store did what the move asks: taken first, it is HELD
        whatever the write does; a write that raises leaves it as it was."""
        if lease is None:
            write(None)
            return
        step = lease.step(LeaseEvent.FINISHING_WRITE if after.state.terminal
                          else LeaseEvent.WRITE)
        if step.action is LeaseAction.TAKE_FIRST:
            if not self.store.acquire_lease(task_id, lease.owner, lease.ttl):
                raise LeaseHeld(task_id)  # the lease stays DEFERRED, the write undone
            lease.state = step.then
        write(lease.owner if step.action is LeaseAction.RELEASE_WITH_WRITE else None)
        lease.state = step.then

    def _append(self, task_id: str, seq: int, events: List[Event], after: TaskRecord,
                releasing: Optional[str]) -> None:
        """Append ``events`` after ``seq``, letting ``releasing``'s lease go with them."""
        if releasing is None:
            self.store.append(task_id, seq, events, after)
        else:
            self.store.append_released(task_id, seq, events, after, releasing)

    def landed(self, task_id: str, seq: int, events: List[Event]) -> bool:
        """Whether the log holds exactly ``events`` right after ``seq``: an append
        whose answer was lost (the connection dropped after the commit) was written."""
        stored = list(self.store.entries(task_id, seq, through=seq + len(events)))
        return len(stored) == len(events) and all(
            encode(entry.event) == encode(event) for entry, event in zip(stored, events))

    def _after(self, record: TaskRecord, events: List[Event], caller: bool) -> TaskRecord:
        """The record after ``events``: its history trimmed to ``max_history``, and
        refused if it would hold more than ``max_task_bytes`` (unless the events
        finish the task, which happens once, or leave it no larger)."""
        limit = self.max_task_bytes
        before = 0
        added: Optional[int] = None
        if limit:
            if record.held is None:
                record.held = task_size(record.task)
            before = record.held
            # The whole task when there is nothing to fold (or an artifact is replaced).
            whole = needs_folded(events) or not record.unfolded
            added = growth(record.task if whole else record.outline, events, whole=whole)
        after = record.after(events)
        dropped: List[Message] = []
        if self.max_history and len(after.outline.history) > self.max_history:
            history = after.task.history
            dropped = history[:-self.max_history]
            after.task = dataclasses.replace(after.task, history=history[-self.max_history:])
        if limit:
            held = (task_size(after.task) if added is None
                    else before + added - sum(message_size(message) for message in dropped))
            if held > limit and held > before and not finishes(events):
                raise too_large(held, limit, caller=caller)
            after.held = held
        return after

    def check_message_size(self, message: Message) -> None:
        """Refuse a caller's message that alone holds more than a task may
        (``max_task_bytes``), before it starts or changes anything; what a message
        adds to an existing task is checked as it is appended (:meth:`commit`)."""
        limit = self.max_task_bytes
        if limit:
            size = message_size(message)
            if size > limit:
                raise too_large(size, limit, caller=True)

    def fail(self, task_id: str, text: str) -> Optional[TaskRecord]:
        """Move a task that is not finished to FAILED with ``text`` as the status message
        (interrupted tasks too); a finished or missing task stays as it is."""
        def build(current: TaskRecord) -> List[Event]:
            state = transition(current.state, Change.FAIL)
            if state is None:
                return []
            message = agent_message(text, task_id, current.task.context_id)
            status = TaskStatus(state=state, message=message, timestamp=utc_now())
            return [TaskStatusUpdateEvent(task_id, current.task.context_id, status)]

        try:
            return self.commit(task_id, build)
        except TaskNotFoundError:
            return None

    def fail_later(self, task_id: str, text: str) -> None:
        """A run stopped because the store was down: its failure is recorded as soon as
        the store answers again (:meth:`record_missed_failures`, each keeper round)
        instead of being left to its lease."""
        self._unrecorded[task_id] = text

    def record_missed_failures(self) -> Iterator[str]:
        """Record the failures :meth:`fail_later` kept, yielding each task id once
        recorded; a store still down raises and keeps the rest for the next call."""
        for task_id, text in list(self._unrecorded.items()):
            self.fail(task_id, text)
            del self._unrecorded[task_id]
            yield task_id
