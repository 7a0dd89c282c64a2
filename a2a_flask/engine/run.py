"""A run: one invocation of an agent's executor for one incoming message.

The :class:`Run` is what the executor's ``TaskContext`` writes through (each
emission is checked by the state machine, :mod:`.states`, and appended by the
:class:`~.writer.TaskWriter`), and what the HTTP side waits on (:attr:`Run.decided`,
:attr:`Run.settled`, set as the run's phase moves: :mod:`.lifecycles`).  Under
gevent a burst of streamed chunks waits in the run until the executor yields and
is appended in one write (:meth:`Run.add_artifact`).
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..concurrency import Worker, cooperate, gevent_active, let_io_run
from ..protocol.errors import StoreUnavailable, TaskTooLargeError
from ..protocol.events import Event
from ..protocol.models import (
    Artifact,
    Message,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    utc_now,
)
from ..stores.base import OnceClaim, TaskRecord
from ..stores.grace import Outage
from .budget import message_size
from .lifecycles import RUN_TABLE, SIGNALS, RunEvent, RunPhase, Signal, run_move
from .states import Change, TaskClosedError, transition
from .writer import Lease, TaskWriter

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
    task's record with it (a BaseException, so that :meth:`TaskWriter.commit` does not
    take it for a judgement on a stale record)."""

    def __init__(self, record: TaskRecord) -> None:
        super().__init__()
        self.record = record


# ------------------------------------------------------------------ a run


class Run:
    """One invocation of the executor for one incoming message.

    The HTTP side waits on :attr:`decided` to learn whether the agent made a
    task (then it follows the task's log) or replied with a Message.  Its phase,
    and the events each phase sets: :data:`.lifecycles.RUN_TABLE`.
    """

    def __init__(self, writer: TaskWriter, *, message: Message, task_id: str, context_id: str,
                 tenant: str, owner: str, dialect: str, record: Optional[TaskRecord]) -> None:
        self.writer = writer
        self.message = message
        self.task_id = task_id
        self.context_id = context_id
        self.tenant = tenant
        self.owner = owner
        self.dialect = dialect
        self.record = record  # last record this run saw; None until the task exists
        self.follow_up = record is not None  # started by a message on an existing task
        self.reply: Optional[Message] = None
        #: Where this run is; moved only by :meth:`_move`, which sets the three events
        #: below (never cleared) as :data:`.lifecycles.SIGNALS` says: those of its
        #: phase are set.  A run on an existing task starts WORKING.
        self.phase = RunPhase.UNDECIDED if record is None else RunPhase.WORKING
        #: Set once the run made a task or a reply, or failed before either.
        self.decided = threading.Event()
        #: Set once a blocking send can answer: a reply, an error, a terminal or
        #: interrupted state written by this run, or the run's end.
        self.settled = threading.Event()
        #: Set once the executor returned (or the run went to a worker's queue).
        self.finished = threading.Event()
        if record is not None:
            self.decided.set()
        #: A latch: set once a cancel or the shutdown asks the run to stop, never cleared.
        self.cancel_requested = False
        #: Set when the run entered UNSTARTED (it could not make a task or a reply,
        #: such as when the store went down), or before it ends when it stopped
        #: because the store stayed down past the grace: the waiting caller gets
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
        #: This run's lease on its task, once the keeper holds the run (see :meth:`.Keeper.hold`).
        self.lease: Optional[Lease] = None

    def _move(self, event: RunEvent) -> None:
        """Move this run's phase on ``event`` and set the events of its new phase;
        the caller holds ``_lock``.

        :raises ~.lifecycles.LifecycleError: the table has no such move.
        """
        # (The table read here; run_move only for the refusal it raises.)
        self.phase = phase = RUN_TABLE[self.phase].get(event) or run_move(self.phase, event)
        signals = SIGNALS[phase]
        # In this order: a waiter woken by a later event finds the earlier ones set.
        if Signal.DECIDED in signals and not self.decided.is_set():
            self.decided.set()
        if Signal.SETTLED in signals and not self.settled.is_set():
            self.settled.set()
        if Signal.FINISHED in signals:
            self.finished.set()

    def end(self) -> None:
        """The executor returned, or the run went to a worker process's queue: a
        blocking send answers, and a stop no longer waits for the executor."""
        with self._lock:
            self._move(RunEvent.END)

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
                head = self.writer.store.head(self.task_id)
            except StoreUnavailable:
                return False  # asked again later; the run's next write rides the outage out
            if head is not None and head[1] is TaskState.CANCELED:
                self.cancel_requested = True
        return self.cancel_requested

    def request_stop(self, grace: float) -> None:
        """Stop the executor: cooperatively at once (``ctx.cancelled`` turns true and its
        next emission raises :class:`TaskCancelled`), by force ``grace`` seconds later
        (a greenlet is killed; a thread cannot be, but it can no longer change the task)."""
        self.cancel_requested = True

        def stop() -> None:
            if not self.finished.wait(grace) and self.worker is not None:
                if self.worker.kill(TaskCancelled):
                    log.warning("task %s ignored cancel for %.1fs; its greenlet was killed",
                                self.task_id, grace)

        Worker(stop, name=f"a2a-cancel-{self.task_id}")

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
            created = self.record is None
            if created:
                record = self._new_record()
                self.writer.create(record, record.task, [], self.lease)
                self.record = record
                self._move(RunEvent.TASK_MADE)
        if created and self.streamed:
            cooperate()  # an executor that never blocks would hold the first event back
        return self.record

    def claim_task(self, claim: OnceClaim) -> Optional[str]:
        """Make the task (SUBMITTED, holding the user's message) and bind an idempotent
        send's ``claim`` with it, taking the run's DEFERRED lease too, in one store
        write (:meth:`.TaskWriter.create_claimed`): before the executor starts.  None
        when this run made it; else the value another send bound the key to (no task
        was made)."""
        with self._lock:
            assert self.record is None and self.reply is None, "a claimed run starts undecided"
            record = self._new_record()
            held = self.writer.create_claimed(record, claim, self.lease)
            if held != claim.value:
                return held
            self.record = record
            self._move(RunEvent.TASK_MADE)
        if self.streamed:
            cooperate()  # an executor that never blocks would hold the first event back
        return None

    def _new_record(self) -> TaskRecord:
        """The task this run makes: SUBMITTED, holding the user's message."""
        task = Task(id=self.task_id, context_id=self.context_id,
                    status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now()),
                    history=[self.message], generation=1)
        record = TaskRecord(task, 1, self.tenant, self.owner, self.dialect)
        record.held = message_size(self.message)
        return record

    def _make_task(self, events: Callable[[TaskState], List[Event]]) -> Optional[TaskRecord]:
        """The run's first emission makes its task, with the emission's events, in one
        store call; None when another caller made the task meanwhile (a reader of
        :attr:`task`, or a ``returnImmediately`` send)."""
        with self._lock:
            if self.reply is not None:
                raise TaskClosedError("the agent already answered with a message")
            if self.record is not None:
                return None
            record = self._new_record()
            try:
                made = events(TaskState.SUBMITTED)
            except BaseException:
                # A refused emission (a transition the state machine refuses) still
                # finds its task made, as an executor's every emission does.
                self.writer.create(record, record.task, [], self.lease)
                self.record = record
                self._move(RunEvent.TASK_MADE)
                raise
            try:
                after = self.writer.create(record, record.task, made, self.lease)
            except TaskTooLargeError:
                self.record = record  # made without the events refused
                self._move(RunEvent.TASK_MADE)
                raise
            self.record = after
            self._move(RunEvent.TASK_MADE)
        if self.streamed:
            cooperate()  # an executor that never blocks would hold the first event back
        return after

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
        if record is None:
            if not self.streamed:  # the first emission makes the task, with this chunk
                self._emit(lambda current: [event])
                return
            # A stream announces its task alone first (see _emit); the chunk waits as
            # every other does, to go out with the rest of its burst.
            record = self.ensure_task()
            if record is None:
                raise TaskClosedError("the agent already answered with a message")
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
                self._move(RunEvent.REPLY)
                return
        self.set_status(TaskState.COMPLETED, message)

    def fail_to_start(self, error: Exception) -> None:
        """The run ended before it made a task or a reply: the waiting caller gets ``error``."""
        self.error = error
        with self._lock:
            self._move(RunEvent.START_FAILED)

    def _check_can_emit(self) -> None:
        """Pace the executor, and refuse its emission if its run is stopped, the task
        could not be made, or appending its earlier chunks failed."""
        self.pace()
        if self.cancel_requested:
            raise TaskCancelled()
        failed, self._unsent_error = self._unsent_error, None
        if failed is not None:
            raise failed
        if self.record is None and self.reply is not None:
            raise TaskClosedError("the agent already answered with a message")

    def _emit(self, events: Callable[[TaskState], List[Event]]) -> TaskRecord:
        """Append the chunks still waiting, then the events made from the task's
        current state, in one append; the task's record after them (whose
        chunks fold only if someone reads its task).

        While the store is unavailable the append is retried, with backoff, for up
        to the writer's ``store_grace`` (the executor waits here meanwhile), and
        an append whose answer was lost is not written twice (see :meth:`_append`).
        """
        self._check_can_emit()
        with self._appending:
            failed, self._unsent_error = self._unsent_error, None
            if failed is not None:
                raise failed  # the background append this one waited for gave up
            if self.record is None and self.streamed:
                # A stream's client learns the task from its first event: it goes out
                # alone, before the emission's events (a cut in between can resume).
                self.ensure_task()
            # The first emission makes the task (no chunk waits before it exists).
            made = self._make_task(events) if self.record is None else None
            record = made if made is not None else self._commit_unsent(events)
        if record.state.settled:
            with self._lock:
                self._move(RunEvent.SETTLE)
        return record

    def _commit_unsent(self, events: Callable[[TaskState], List[Event]]) -> TaskRecord:
        """Append the chunks waiting in this run, then ``events`` (under ``_appending``)."""
        unsent, self._unsent = self._unsent, []
        try:
            self.record = record = self._append(unsent, events)
        except TaskTooLargeError:
            raise  # dropped: appended again, they would be refused again
        except BaseException:
            self._unsent[:0] = unsent  # not written: they wait for the next append
            raise
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
        writer = self.writer
        # (seq, events) of the last append built, and of one whose outcome is unknown.
        built: Optional[Tuple[int, List[Event]]] = None
        unsure: Optional[Tuple[int, List[Event]]] = None

        def build(record: TaskRecord) -> List[Event]:
            nonlocal built, unsure
            if unsure is not None:
                seq, made = unsure
                if record.seq == seq:
                    return list(made)  # the same place: the very same events again
                if writer.landed(self.task_id, seq, made):
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
                    return writer.commit(self.task_id, build, self.record, lease=self.lease)
                except _Landed as landed:
                    return landed.record
                except StoreUnavailable:
                    if unsure is None:
                        unsure = built
                    if outage is None:
                        outage = Outage(writer.store_grace)
                    self.stalled = True
                    if writer.store.closed or not outage.wait():
                        raise
        finally:
            self.stalled = False
