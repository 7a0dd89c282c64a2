"""The task engine: the state machine, detached executor runs, and waiting on tasks.

How a task lives
----------------
A client message starts a :class:`Run`: the agent's executor, called in a
greenlet (or a thread) detached from the HTTP request.  The task itself is
created lazily, on the run's first task-shaped emission, so an agent may
instead answer with a single Message and no task ever exists.

Every change is an event appended to the task's log in the store together with
the snapshot it yields (:func:`apply_event`); under gevent the streamed chunks
of a burst wait in their run until the executor yields, and are appended
together (:meth:`Run.add_artifact`).  Appends are compare-and-set on
the sequence number; :meth:`Runtime.commit` reloads and retries on conflict and
applies every change, each asking the state machine (:mod:`.states`, one table)
what it does to the task as it is at that moment:

* terminal states (COMPLETED, FAILED, CANCELED, REJECTED) never change;
* SUBMITTED exists only at creation, UNSPECIFIED never;
* a user message to an interrupted task (INPUT_REQUIRED, AUTH_REQUIRED) is
  appended to the history and moves the task back to WORKING in the same step.

Cancel writes CANCELED at once (so it always ends in CANCELED or -32002), then
stops the executor: cooperatively first (``ctx.cancelled`` turns true, and any
further emission raises :class:`TaskCancelled`), and by force once the grace
period is over (the greenlet is killed; a thread cannot be, but it can no
longer change the task).

Everything that waits (blocking sends, streams, resubscribes) reads the log
from a sequence number on, so they all see the same events in the same order.

A store outage shorter than ``store_grace`` (``A2A_STORE_GRACE``) loses no
work: a run's appends are retried in order while its executor waits at its
next emission (:meth:`Run._append`), followers wait for the store instead of
ending, and keepers judge leases only a lease's time after an outage (see
docs/workers-and-hosts.rst, "A store outage: the grace").
"""
from __future__ import annotations

import dataclasses
import logging
import os
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Dict, Iterator, List, Optional, Protocol, Tuple, Union

from ..concurrency import Worker, cooperate, gevent_active, let_io_run
from ..protocol.errors import StoreUnavailable, TaskNotFoundError, TaskTooLargeError
from ..protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    format_timestamp,
    new_id,
    utc_now,
)
from ..protocol.calls import Wait
from ..protocol.events import Event
from ..observe import tasks as observe
from ..protocol.codec import encode
from ..stores.base import LogEntry, SequenceConflict, TaskRecord, TaskStore, finishes
from ..stores.grace import Outage
from ..stores.shared import SharedLog, wait_without_spinning
from .budget import growth, message_size, needs_folded, task_size, too_large
from .states import Change, TaskClosedError, transition

log = logging.getLogger("a2a_flask")

#: An executor that never blocks still lets other greenlets run this often (seconds),
#: as long as it emits events or looks at ``ctx.cancelled``.
YIELD_EVERY = 0.005
#: Most streamed chunks a run holds before it appends them itself (see :meth:`Run.add_artifact`),
#: while its task is short: see :func:`unsent_cap`.
MAX_UNSENT = 128
#: On a long task a run holds up to this fraction of its log (see :func:`unsent_cap`).
UNSENT_SHARE = 32


def unsent_cap(log_length: int) -> int:
    """Most chunks a run holds before it appends them itself, for a task whose log is
    ``log_length`` long.

    Each append is a store write, and a burst of more than
    :data:`~a2a_flask.stores.base.MAX_UNFOLDED` chunks is folded into the
    task's snapshot at once, which copies the artifact's list of parts: bursts
    that grow with the task keep both costs' share of a chunk flat however
    long the task is.
    """
    return max(MAX_UNSENT, log_length // UNSENT_SHARE)


class TaskCancelled(BaseException):
    """Raised inside an executor whose task was canceled.

    It derives from BaseException so that an agent's ``except Exception`` does
    not swallow it by accident.
    """


class _Landed(BaseException):
    """An append whose answer the store lost was written after all: ``record`` is the
    task's record with it (a BaseException, so that :meth:`Runtime.commit` does not
    take it for a judgement on a stale record)."""

    def __init__(self, record: TaskRecord) -> None:
        super().__init__()
        self.record = record


def closes_stream(event: Event, *, close_on_auth_required: bool = True) -> bool:
    """Whether a stream ends after this event (terminal or interrupted state)."""
    if isinstance(event, TaskStatusUpdateEvent):
        state = event.status.state
    elif isinstance(event, Task):
        state = event.status.state
        if not state.terminal:
            return False  # a snapshot opens a stream; only its terminal form ends it
    elif isinstance(event, Message):
        return event.role is Role.AGENT
    else:
        return False
    if state is TaskState.AUTH_REQUIRED:
        return close_on_auth_required
    return state.settled


def agent_message(text: str, task_id: str = "", context_id: str = "") -> Message:
    """A one-part text message from the agent."""
    return Message(message_id=new_id(), role=Role.AGENT, parts=[Part(text=text)],
                   task_id=task_id, context_id=context_id)


# ------------------------------------------------------------------ a run


class Run:
    """One invocation of the executor for one incoming message.

    The HTTP side waits on :attr:`decided` to learn whether the agent made a
    task (then it follows the task's log) or replied with a Message.
    """

    def __init__(self, runtime: "Runtime", *, message: Message, task_id: str, context_id: str,
                 tenant: str, owner: str, dialect: str, record: Optional[TaskRecord]) -> None:
        self.runtime = runtime
        self.message = message
        self.task_id = task_id
        self.context_id = context_id
        self.tenant = tenant
        self.owner = owner
        self.dialect = dialect
        self.record = record  # last record this run saw; None until the task exists
        self.follow_up = record is not None  # started by a message on an existing task
        self.reply: Optional[Message] = None
        self.decided = threading.Event()
        #: Set once a blocking send can answer: a reply, an error, a terminal or
        #: interrupted state written by this run, or the run's end.
        self.settled = threading.Event()
        self.finished = threading.Event()
        self.cancel_requested = False
        #: Set (with :attr:`decided`) when the run ended before it could make a task or a
        #: reply, such as when the store went down, or (with :attr:`settled`) when it
        #: stopped because the store stayed down past the grace: the waiting caller gets
        #: this error.
        self.error: Optional[Exception] = None
        #: A stream waits for this run's first event: hand it over as soon as it exists.
        self.streamed = False
        self.worker: Optional[Worker] = None
        self._lock = threading.Lock()
        self._checked_store_at = 0.0
        self._yielded_at = time.monotonic()
        #: Streamed chunks emitted but not appended yet (under gevent), oldest first.
        self._unsent: List[Event] = []
        #: Held while this run appends, so that its appends keep the order of its emissions.
        self._appending = threading.Lock()
        #: What appending the unsent chunks in the background raised: the executor's next
        #: call raises it.
        self._unsent_error: Optional[BaseException] = None
        #: Set while an append of this run waits for the store to come back (within
        #: ``A2A_STORE_GRACE``): the executor's next emission waits for it.
        self.stalled = False

    def pace(self) -> None:
        """Let the worker's other greenlets run if this run has not yielded for a while.

        Called on every emission and ``ctx.cancelled``: an executor that computes
        without blocking (or floods events into a store that does no I/O) would
        otherwise hold a gevent worker until it returns.
        """
        now = time.monotonic()
        if now - self._yielded_at >= YIELD_EVERY:
            let_io_run()
            self._yielded_at = time.monotonic()

    # -- what the TaskContext calls

    @property
    def task(self) -> Optional[Task]:
        """The task as this run last wrote it (its streamed chunks included)."""
        if self._unsent:
            try:
                self.send_unsent()
            except TaskCancelled:
                pass  # reading is no emission: the executor's next one raises it
        return self.record.task if self.record else None

    def is_cancelled(self) -> bool:
        """Cancel requested here, or (checked at most twice a second) seen in the store."""
        self.pace()
        if self.cancel_requested:
            return True
        now = time.monotonic()
        if self.record is not None and now - self._checked_store_at > 0.5:
            self._checked_store_at = now
            try:
                head = self.runtime.store.head(self.task_id)
            except StoreUnavailable:
                return False  # asked again later; the run's next write rides the outage out
            if head is not None and head[1] is TaskState.CANCELED:
                self.cancel_requested = True
        return self.cancel_requested

    def ensure_task(self) -> Optional[TaskRecord]:
        """Create the task (SUBMITTED, holding the user's message) if it does not exist.

        Returns None when the agent already answered with a Message: then no
        task exists, and none ever will for this run.
        """
        record = self.record
        if record is not None:  # set once, never unset (a reply then completes the task)
            return record
        with self._lock:
            if self.reply is not None:
                return None
            if self.record is None:
                task = Task(
                    id=self.task_id,
                    context_id=self.context_id,
                    status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now()),
                    history=[self.message],
                )
                record = TaskRecord(task, 1, self.tenant, self.owner, self.dialect)
                record.held = message_size(self.message)
                self.runtime.store.create(record, task)
                observe.created(self.runtime.sender, self.task_id, self.context_id)
                self.record = record
                self.decided.set()
                created = True
            else:
                created = False
        if created and self.streamed:
            cooperate()  # an executor that never blocks would hold the first event back
        return self.record

    def set_status(self, state: TaskState, message: Optional[Message] = None,
                   metadata: Optional[Dict[str, Any]] = None) -> Task:
        if message is not None:
            message.task_id, message.context_id = self.task_id, self.context_id

        def events(current: TaskState) -> List[Event]:
            transition(current, Change.STATUS, to=state)
            # Stamped once the task exists, so no status predates SUBMITTED.
            status = TaskStatus(state=state, message=message, timestamp=utc_now())
            return [TaskStatusUpdateEvent(self.task_id, self.context_id, status, metadata)]

        return self._emit(events).task

    def add_artifact(self, artifact: Artifact, *, append: bool = False, last_chunk: bool = False,
                     metadata: Optional[Dict[str, Any]] = None) -> None:
        """Emit an artifact or a chunk of one.

        Under gevent the chunk waits in the run until the executor yields (blocks on
        I/O, sleeps, or is paced), emits anything else, or ends, and all chunks waiting
        are appended together: one append, one store write and one fold step for a
        burst of chunks instead of one each.  Readers see them once the executor
        yields, which is when they could first run anyway (a greenlet appends them
        at that turn); what appending them raises is raised by the executor's next
        call.  Under threads each chunk is appended at once.
        """
        event = TaskArtifactUpdateEvent(self.task_id, self.context_id, artifact, append,
                                        last_chunk, metadata)
        if not gevent_active():
            def events(current: TaskState) -> List[Event]:
                transition(current, Change.OUTPUT)
                return [event]

            self._emit(events)
            return
        self._check_can_emit()
        record = self.record
        assert record is not None  # made by _check_can_emit
        transition(record.state, Change.OUTPUT)  # what this run itself wrote (ended: refused)
        self._unsent.append(event)
        if self.stalled:
            self.send_unsent()  # waits, in order, for the append the store did not take yet
        elif len(self._unsent) == 1:
            Worker(self._send_unsent_later, name=f"a2a-chunks-{self.task_id}")
        elif len(self._unsent) >= unsent_cap(record.seq):
            self.send_unsent()

    def send_unsent(self) -> None:
        """Append the streamed chunks still waiting in this run, now."""
        self._emit(lambda current: [])

    def _send_unsent_later(self) -> None:
        """The background append of waiting chunks, once the executor has yielded."""
        if not self._unsent:
            return  # the executor appended them itself meanwhile
        try:
            self.send_unsent()
        except TaskCancelled:
            self.cancel_requested = True
        except BaseException as exc:  # for the executor's next call to raise
            self._unsent_error = exc

    def finish(self, artifact: Optional[Artifact] = None) -> None:
        """The executor returned: add the ``artifact`` it returned (if any) and complete
        the task unless it already ended or waits for input, in one append."""
        if artifact is None and self.ensure_task() is None:
            return  # the agent answered with a Message: there is no task to complete

        def events(current: TaskState) -> List[Event]:
            made: List[Event] = []
            if artifact is not None:
                transition(current, Change.OUTPUT)
                made.append(TaskArtifactUpdateEvent(self.task_id, self.context_id, artifact))
            state = transition(current, Change.FINISH)
            if state is not None:
                status = TaskStatus(state=state, timestamp=utc_now())
                made.append(TaskStatusUpdateEvent(self.task_id, self.context_id, status))
            return made

        self._emit(events)

    def set_reply(self, message: Message) -> None:
        """Answer with a Message; once a task exists that completes the task instead."""
        with self._lock:
            if self.record is None and self.reply is None:
                message.context_id = self.context_id
                message.task_id = ""
                self.reply = message
                self.decided.set()
                self.settled.set()
                return
        self.set_status(TaskState.COMPLETED, message)

    def fail_to_start(self, error: Exception) -> None:
        """The run ended before it made a task or a reply: the waiting caller gets ``error``."""
        self.error = error
        self.decided.set()
        self.settled.set()

    def _check_can_emit(self) -> None:
        """Pace the executor, and refuse its emission if its run is stopped, the task
        could not be made, or appending its earlier chunks failed."""
        self.pace()
        if self.cancel_requested:
            raise TaskCancelled()
        failed, self._unsent_error = self._unsent_error, None
        if failed is not None:
            raise failed
        if self.ensure_task() is None:
            raise TaskClosedError("the agent already answered with a message")

    def _emit(self, events: Callable[[TaskState], List[Event]]) -> TaskRecord:
        """Append the chunks still waiting, then the events made from the task's
        current state, in one append; the task's record after them (whose
        chunks fold only if someone reads its task).

        While the store is unavailable the append is retried, with backoff, for up
        to the runtime's ``store_grace`` (the executor waits here meanwhile), and
        an append whose answer was lost is not written twice (see :meth:`_append`).
        """
        self._check_can_emit()
        with self._appending:
            failed, self._unsent_error = self._unsent_error, None
            if failed is not None:
                raise failed  # the background append this one waited for gave up
            unsent, self._unsent = self._unsent, []
            try:
                self.record = record = self._append(unsent, events)
            except TaskTooLargeError:
                raise  # dropped: appended again, they would be refused again
            except BaseException:
                self._unsent[:0] = unsent  # not written: they wait for the next append
                raise
        if record.state.settled:
            self.settled.set()
        return record

    def _append(self, unsent: List[Event],
                events: Callable[[TaskState], List[Event]]) -> TaskRecord:
        """Commit ``unsent`` and the events made from the task's state, riding out
        a store outage of up to ``store_grace`` seconds.

        An append that raised :class:`~a2a_flask.StoreUnavailable` may have been
        written all the same (the connection dropped after the commit): until the
        store says whether it was, the same events are appended again at the same
        place (the sequence check refuses them there if they are in), and once the
        log moved past that place its entries are compared with them.
        """
        runtime = self.runtime
        # (seq, events) of the last append built, and of one whose outcome is unknown.
        built: Optional[Tuple[int, List[Event]]] = None
        unsure: Optional[Tuple[int, List[Event]]] = None

        def build(record: TaskRecord) -> List[Event]:
            nonlocal built, unsure
            if unsure is not None:
                seq, made = unsure
                if record.seq == seq:
                    return list(made)  # the same place: the very same events again
                if runtime.landed(self.task_id, seq, made):
                    raise _Landed(record)
                unsure = None  # someone else wrote there: build anew
            if record.state is TaskState.CANCELED:
                raise TaskCancelled()
            if unsent:
                transition(record.state, Change.OUTPUT)
            made = unsent + events(record.state)
            built = (record.seq, made)
            return made

        outage: Optional[Outage] = None  # made on the first failure: emitting costs nothing
        try:
            while True:
                try:
                    return runtime.commit(self.task_id, build, self.record)
                except _Landed as landed:
                    return landed.record
                except StoreUnavailable:
                    if unsure is None:
                        unsure = built
                    if outage is None:
                        outage = Outage(runtime.store_grace)
                    self.stalled = True
                    if runtime.store.closed or not outage.wait():
                        raise
        finally:
            self.stalled = False


# ------------------------------------------------------------------ runtime


class _LogWait(Wait):
    """A follower's wait for news in a task's log after ``seq`` (one small object per
    parked stream, so that thousands of them cost little)."""

    __slots__ = ("log", "task_id", "seq", "timeout", "idle_at")

    def __init__(self, log: SharedLog, task_id: str, seq: int, timeout: float,
                 idle_at: Optional[int]) -> None:
        super().__init__()
        self.log, self.task_id, self.seq = log, task_id, seq
        self.timeout, self.idle_at = timeout, idle_at

    def block(self) -> None:
        try:
            self.idle_at = wait_without_spinning(self.log.wait, self.task_id, self.seq,
                                                 self.timeout, self.idle_at)
        except StoreUnavailable:  # the follower's next read hears of it (or rides it out)
            time.sleep(min(self.timeout, 0.05))
            self.idle_at = None


class Runner(Protocol):
    """Sends runs to other processes (the contract: :mod:`a2a_flask.engine.runners`)."""

    def start(self, run: Run) -> None:
        """Queue ``run``; the web side then follows its task's log."""


class Runtime:
    """Starts runs, applies changes, cancels, and waits on tasks for one agent."""

    def __init__(self, store: TaskStore, invoke: Callable[[Run], None], *,
                 cancel_grace: float = 5.0, close_on_auth_required: bool = True,
                 lease_ttl: float = 30.0, task_ttl: float = 0.0, max_history: int = 0,
                 max_task_bytes: int = 0, store_grace: float = 0.0) -> None:
        self.store = store
        #: The reads of followers, shared per task in this process (streams, waits, pushes).
        self.log = SharedLog(store)
        self._invoke = invoke
        self.cancel_grace = cancel_grace
        self.close_on_auth_required = close_on_auth_required
        self.lease_ttl = lease_ttl
        self.task_ttl = task_ttl
        #: Messages a task's history keeps (0: all); the log keeps every event anyway.
        self.max_history = max_history
        #: Most bytes of content a task may hold (0: no limit); see :mod:`.budget`.
        self.max_task_bytes = max_task_bytes
        #: Seconds a run's writes, and its followers' reads, ride out a store outage
        #: (``A2A_STORE_GRACE``; 0: the first failure stops them).
        self.store_grace = store_grace
        #: Keeper rounds fail no expired lease before this (monotonic): after an outage,
        #: the live owners renew theirs first.
        self._orphans_after = 0.0
        self._outage_seen = False
        #: The sender of the task signals (the A2A extension object).
        self.sender: Any = None
        self._runs: Dict[str, Run] = {}
        self._keeper_pid = 0
        self._keeper_lock = threading.Lock()
        self._last_purge = 0.0
        self._closed = False
        self.owner = ""
        #: More work for each keeper round (such as resuming webhook deliveries).
        self.chores: List[Callable[[], None]] = []
        #: Called once in each process that starts a keeper (after a fork: in the worker).
        self.process_hooks: List[Callable[[], object]] = []
        #: Set when this process shuts down: streams of tasks running elsewhere end.
        self.stopping = False
        self._shutdown_deadline: Optional[float] = None
        #: Task id -> status text of failures the store was down to record (the keeper retries).
        self._unrecorded: Dict[str, str] = {}
        #: Task id -> how many streams of this process follow it (to wake them at shutdown).
        self._followed: Dict[str, int] = {}
        #: Where runs go instead of this process (see :mod:`.runners`); None: run here.
        self.runner: Optional[Runner] = None

    # -- writing

    def commit(self, task_id: str, build: Callable[[TaskRecord], List[Event]],
               known: Optional[TaskRecord] = None, *, caller: bool = False) -> TaskRecord:
        """Append the events ``build`` makes from the latest record; retry on conflicts.

        ``known`` is the record as the caller last saw it (a run's own
        record): tried first, so an executor's chunk costs no load; the
        store's sequence check sends a stale one back here for a reload.
        Raises :class:`~a2a_flask.errors.TaskTooLargeError` when the
        events would take the task past ``max_task_bytes`` (with a violation
        on ``message.parts`` when ``caller``: they carry a caller's message).
        """
        while True:
            fresh = known is None
            record, known = (self.store.load(task_id) if fresh else known), None
            if record is None:
                raise TaskNotFoundError(metadata={"taskId": task_id})
            try:
                events = build(record)
                if not events:
                    return record
                after = self._after(record, events, caller)
            except Exception:
                if fresh:
                    raise
                continue  # judged on a stale record: judge again on the stored one
            try:
                self.store.append(task_id, record.seq, events, after)
            except SequenceConflict:
                continue
            observe.committed(self.sender, record.state, after.outline, record.created_at)
            return after

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

    # -- runs

    def start_new(self, message: Message, *, task_id: str, context_id: str, tenant: str,
                  owner: str, dialect: str, create_task: bool = False,
                  streamed: bool = False) -> Run:
        """Run the executor for a message that starts a new task (or a Message reply).

        ``create_task`` creates the task before the executor starts, for
        clients that only understand tasks (a reply then completes the task).
        """
        run = Run(self, message=message, task_id=task_id, context_id=context_id, tenant=tenant,
                  owner=owner, dialect=dialect, record=None)
        run.streamed = streamed
        if create_task:
            run.ensure_task()
        self._launch(run)
        return run

    def check_message_size(self, message: Message) -> None:
        """Refuse a caller's message that alone holds more than a task may
        (``max_task_bytes``), before it starts or changes anything; what a message
        adds to an existing task is checked as it is appended (:meth:`commit`)."""
        limit = self.max_task_bytes
        if limit:
            size = message_size(message)
            if size > limit:
                raise too_large(size, limit, caller=True)

    def continue_task(self, record: TaskRecord, message: Message) -> TaskRecord:
        """Add a user message to an existing task; restart the executor if it was paused."""
        task_id = record.task.id
        message.task_id, message.context_id = task_id, record.task.context_id
        resumed = False

        def build(current: TaskRecord) -> List[Event]:
            nonlocal resumed
            state = transition(current.state, Change.MESSAGE, task_id=task_id)
            resumed = state is not None
            if state is None:
                return [message]  # the running executor sees it in ctx.history
            status = TaskStatus(state=state, timestamp=utc_now())
            return [message, TaskStatusUpdateEvent(task_id, current.task.context_id, status)]

        updated = self.commit(task_id, build, record, caller=True)
        if resumed:
            run = Run(self, message=message, task_id=task_id, context_id=record.task.context_id,
                      tenant=record.tenant, owner=record.owner, dialect=record.dialect,
                      record=updated)
            run.decided.set()
            self._launch(run)
        return updated

    def _launch(self, run: Run) -> None:
        if self.runner is not None:
            self.runner.start(run)  # queued: a worker process claims and runs it
            return
        self.start_here(run)

    def start_here(self, run: Run) -> None:
        """Claim ``run`` (its lease) and start its executor in a greenlet or thread of
        this process: the inline runner, and what a queued run's worker calls."""
        self.ensure_keeper()
        # The lease first: if the store is down the caller hears it and no run is left behind.
        self.store.acquire_lease(run.task_id, self.owner, self.lease_ttl)
        self._runs[run.task_id] = run

        def target() -> None:
            try:
                self._invoke(run)
            finally:
                run.settled.set()
                run.finished.set()
                if self._runs.get(run.task_id) is run:
                    del self._runs[run.task_id]
                    self._release(run.task_id)

        run.worker = Worker(observe.run_scope(target, run.task_id, run.context_id),
                            name=f"a2a-task-{run.task_id}")

    def _release(self, task_id: str) -> None:
        if self.store.closed:
            return
        try:
            self.store.release_lease(task_id, self.owner)
        except StoreUnavailable:
            pass  # logged by the store; the lease expires, the reaper finds a finished task
        except Exception:  # the lease then expires; the reaper finds a finished task
            if not self.store.closed:  # closed meanwhile (shutting down): nothing to say
                log.exception("could not release the lease of task %s", task_id)

    # -- the keeper: leases, remote cancels, orphans, retention

    def ensure_keeper(self) -> None:
        """Start this process's keeper if it has none (after a fork, a new one)."""
        pid = os.getpid()
        if self._keeper_pid == pid:
            return
        with self._keeper_lock:
            if self._keeper_pid == pid:
                return
            self._keeper_pid = pid
            self.owner = f"{socket.gethostname()}:{pid}:{new_id()[:8]}"
            self._runs = {}  # runs of a parent process do not run here
            Worker(self._keep, name="a2a-keeper")
        for hook in self.process_hooks:
            hook()

    def process_owner(self) -> str:
        """This process's name in leases and claims (starting the keeper if need be)."""
        self.ensure_keeper()
        return self.owner

    def _keep(self) -> None:
        tick = min(1.0, self.lease_ttl / 3)
        while True:
            time.sleep(tick)
            if self._closed or self.store.closed or self._keeper_pid != os.getpid():
                return
            try:
                self.tend()
            except StoreUnavailable:
                self._outage_seen = True  # the store logged it; the next round tries again
            except Exception:  # a store hiccup must not end the keeper
                log.exception("a2a keeper round failed")

    def tend(self) -> None:
        """One keeper round, run every second or so in each process.

        Renews the leases of the runs here; stops runs whose task was canceled
        by another process; fails tasks whose runner died (lease expired); and
        deletes terminal tasks older than the task TTL (every minute, or every
        half TTL when that is shorter); then does the :attr:`chores`.
        """
        for task_id, text in list(self._unrecorded.items()):
            self.fail(task_id, text)  # the store is back: record what it missed (logged then)
            del self._unrecorded[task_id]
            self.store.release_lease(task_id, self.owner)
        runs = list(self._runs.values())
        self.store.renew_leases(self.owner, [run.task_id for run in runs], self.lease_ttl)
        if self._outage_seen:
            # Renewals failed during an outage; the other processes' did too, and their
            # leases may have run out meanwhile though their runs go on.  Each keeper
            # renews in its first round after the outage: judge leases only once every
            # live owner has had a lease's time to do so.
            self._outage_seen = False
            if self.store_grace:
                self._orphans_after = time.monotonic() + self.lease_ttl
        for run in runs:
            if not run.cancel_requested and run.record is not None:
                # The head, not the record: loading a long stream's task folds its
                # recent chunks, and this runs every second for every running task.
                head = self.store.head(run.task_id)
                if head is not None and head[1] is TaskState.CANCELED:
                    run.cancel_requested = True
                    self._force_stop_later(run)
        if time.monotonic() >= self._orphans_after:
            for task_id in self.store.expired_leases():
                self._fail_orphan(task_id)
        now = time.monotonic()
        if self.task_ttl and now - self._last_purge >= min(60.0, max(1.0, self.task_ttl / 2)):
            self._last_purge = now
            cutoff = datetime.now(timezone.utc) - timedelta(seconds=self.task_ttl)
            purged = self.store.purge(format_timestamp(cutoff))
            if purged:
                log.info("purged %d finished tasks older than %ss", purged, self.task_ttl)
        for chore in self.chores:
            chore()

    def close(self) -> None:
        """Stop this process's keeper (the store is closed separately)."""
        self._closed = True

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

    def fail_when_store_returns(self, task_id: str, text: str) -> None:
        """A run stopped because the store was down: the keeper records its failure
        as soon as the store answers again (instead of leaving it to the lease)."""
        self._unrecorded[task_id] = text

    # -- shutdown

    def shutdown(self, grace: float) -> None:
        """Stop this process's work: streams of tasks running elsewhere end now; the
        runs here get ``grace`` seconds to finish; the rest are FAILED with a status
        message that says why, and their leases released.

        Safe to call more than once (a signal, then the exit): a later call keeps
        the first call's deadline.
        """
        if self._shutdown_deadline is None:
            self._shutdown_deadline = time.monotonic() + grace
        deadline = self._shutdown_deadline
        if not self.stopping:
            self.stopping = True
            for task_id in list(self._followed):
                self.store.wake(task_id)
        for run in list(self._runs.values()):
            run.finished.wait(max(0.0, deadline - time.monotonic()))
        unfinished = [run for run in list(self._runs.values()) if not run.finished.is_set()]
        pid = os.getpid()
        for run in unfinished:
            if self._runs.get(run.task_id) is not run:
                continue  # another call (a signal, then the exit) is on it: one line per task
            del self._runs[run.task_id]
            run.cancel_requested = True  # its next emission stops it
            try:
                record = self.fail(run.task_id, (
                    f"The server shut down (worker {pid} stopped) before this task finished; "
                    "it was not completed and can be sent again."))
                if record is not None and record.state is TaskState.FAILED:
                    log.warning("task %s failed: the worker shut down before it finished",
                                run.task_id)
                self.store.release_lease(run.task_id, self.owner)
            except StoreUnavailable:
                log.warning("task %s was running at shutdown and the store is down: its "
                            "lease expires and it fails then", run.task_id)
            if run.worker is not None:
                run.worker.kill(TaskCancelled)

    def _fail_orphan(self, task_id: str) -> None:
        """Fail a task whose runner stopped renewing its lease (killed worker, lost host)."""
        failed = False

        def build(current: TaskRecord) -> List[Event]:
            nonlocal failed
            state = transition(current.state, Change.ORPHAN)
            failed = False
            if state is None or task_id in self._runs:
                return []
            failed = True
            message = agent_message(
                "The worker running this task stopped (its lease expired); the task failed "
                "and can be sent again.", task_id, current.task.context_id)
            status = TaskStatus(state=state, message=message, timestamp=utc_now())
            return [TaskStatusUpdateEvent(task_id, current.task.context_id, status)]

        try:
            self.commit(task_id, build)
        except TaskNotFoundError:
            pass
        if failed:  # only by this round (a failure recorded before is logged already)
            log.warning("task %s failed: its runner's lease expired", task_id)
        self.store.release_lease(task_id, None)

    def local_run(self, task_id: str) -> Optional[Run]:
        return self._runs.get(task_id)

    # -- cancel

    def cancel(self, task_id: str) -> TaskRecord:
        """Move a task to CANCELED now, then stop its executor (see module docstring)."""

        def build(current: TaskRecord) -> List[Event]:
            state = transition(current.state, Change.CANCEL, task_id=task_id)
            assert state is not None  # (the table: a cancel always moves or is refused)
            status = TaskStatus(state=state, timestamp=utc_now())
            return [TaskStatusUpdateEvent(task_id, current.task.context_id, status)]

        record = self.commit(task_id, build)
        run = self._runs.get(task_id)
        if run is not None:
            run.cancel_requested = True
            self._force_stop_later(run)
        return record

    def _force_stop_later(self, run: Run) -> None:
        def stop() -> None:
            if not run.finished.wait(self.cancel_grace) and run.worker is not None:
                if run.worker.kill(TaskCancelled):
                    log.warning("task %s ignored cancel for %.1fs; its greenlet was killed",
                                run.task_id, self.cancel_grace)

        Worker(stop, name=f"a2a-cancel-{run.task_id}")

    # -- reading

    def ends_stream(self, event: Event) -> bool:
        """Whether a stream of this agent ends after ``event``."""
        return closes_stream(event, close_on_auth_required=self.close_on_auth_required)

    def wait_settled(self, task_id: str, timeout: float) -> TaskRecord:
        """The record once it is terminal or interrupted, or as it is after ``timeout``."""
        deadline = time.monotonic() + timeout
        idle_at: Optional[int] = None  # a wait returned early with nothing new at this seq
        outage = Outage(self.store_grace)  # the run's writes ride it out: so does the wait
        with self.log.following(task_id):
            while True:
                try:
                    # The head (seq, state) is enough to wait on; the record is loaded
                    # once, at the end.
                    head = self.log.head(task_id)
                    if head is None:
                        raise TaskNotFoundError(metadata={"taskId": task_id})
                    seq, state = head
                    remaining = deadline - time.monotonic()
                    if state.settled or remaining <= 0:
                        record = self.store.load(task_id)
                        if record is None:
                            raise TaskNotFoundError(metadata={"taskId": task_id})
                        return record
                    outage.over()
                    idle_at = wait_without_spinning(self.log.wait, task_id, seq, remaining,
                                                    idle_at)
                except StoreUnavailable:
                    if time.monotonic() >= deadline or not outage.wait():
                        raise

    def follow(self, task_id: str, after_seq: int, heartbeat: float, *,
               park_outside: bool = False) -> Iterator[Union[LogEntry, None, Wait]]:
        """Log entries after ``after_seq`` as they come, and ``None`` at each pause.

        A pause is "nothing more is available right now": after a run of
        entries (so a consumer can send them in one write) and every idle
        ``heartbeat``.  Ends after an event that closes a stream, or when the
        task is terminal and fully read, or at shutdown when the task does not
        run in this process (the client resubscribes to another worker).
        With ``park_outside`` the waits in between are yielded as :class:`Wait`
        items, for the consumer to make at the top of its stack.
        """
        # One generator, not a wrapper around another: a parked stream's greenlet keeps
        # the C stack of every generator it is suspended in (bench/README.rst, memory).
        self._followed[task_id] = self._followed.get(task_id, 0) + 1
        log = self.log
        log.join(task_id)
        try:
            idle_since = yielded_at = time.monotonic()
            pending = False
            idle_at: Optional[int] = None  # a wait returned early with nothing new at this seq
            # The head is read at the start and at each heartbeat, not after every event:
            # the log itself says when a stream ends (a crowd of followers would read
            # the head once per event each).
            check_head = True
            # While the store is out the stream stays open (keep-alives go on) for up to
            # the grace, as the run's writes wait for it: then it goes on where it was.
            # (Made on the first failure: a parked stream holds no more than before.)
            outage: Optional[Outage] = None
            head_outage: Optional[Outage] = None  # the head's own (the reads may work)
            while True:
                try:
                    entries = log.read(task_id, after_seq)
                except StoreUnavailable:
                    outage = outage or Outage(self.store_grace)
                    if not outage.wait():
                        raise
                    if time.monotonic() - idle_since >= heartbeat:
                        yield None
                        idle_since = time.monotonic()
                    continue
                outage = None
                for entry in entries:
                    yield entry
                    after_seq = entry.seq
                    if not entry.chunk and self.ends_stream(entry.event):
                        return
                    # A long backlog (a reader catching up) is sent in slices, so the
                    # other greenlets of the worker run in between.
                    if time.monotonic() - yielded_at >= YIELD_EVERY:
                        let_io_run()
                        yielded_at = time.monotonic()
                if entries:
                    idle_since = time.monotonic()
                    pending = True
                    idle_at = None
                    continue
                if pending:
                    yield None
                    pending = False
                if self.stopping and task_id not in self._runs:
                    return
                if check_head:
                    try:
                        head = log.recent_head(task_id)
                    except StoreUnavailable:
                        head_outage = head_outage or Outage(self.store_grace)
                        if not head_outage.wait():
                            raise
                        continue
                    head_outage = None
                    if head is None or (head[1].terminal and head[0] <= after_seq):
                        return
                    check_head = False
                # Wake-ups can be spurious (other tasks' writes), so time the
                # heartbeat from the last thing sent, not from the last wake-up.
                remaining = heartbeat - (time.monotonic() - idle_since)
                if remaining <= 0:
                    yield None
                    idle_since = time.monotonic()
                    check_head = True
                    continue
                parked = _LogWait(log, task_id, after_seq, remaining, idle_at)
                if park_outside:
                    yield parked
                parked.wait()  # unless the consumer did
                idle_at = parked.idle_at
        finally:
            log.leave(task_id)
            left = self._followed.get(task_id, 1) - 1
            if left > 0:
                self._followed[task_id] = left
            else:
                self._followed.pop(task_id, None)
