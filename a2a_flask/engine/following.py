"""Following a task: everything that waits on one (blocking sends, streams,
resubscribes, pushes) reads its log from a sequence number on, so they all see
the same events in the same order.

Reads of one task are shared by its followers in this process (:class:`SharedLog`);
a follower rides out a store outage of up to ``store_grace`` seconds, as the run's
writes do, and at this process's shutdown the streams of tasks that do not run
here end (their clients resubscribe to another worker).
"""
from __future__ import annotations

import time
import functools
from typing import Dict, Iterator, List, Optional, Union

from ..concurrency import let_io_run
from ..protocol.calls import StreamContext, Wait
from ..protocol.errors import StoreUnavailable, TaskNotFoundError
from ..protocol.events import Event, moves_generation
from ..protocol.models import Message, Role, Task, TaskState, TaskStatusUpdateEvent
from ..stores.base import LogEntry, TaskRecord, TaskStore
from ..stores.grace import Outage
from ..stores.shared import SharedLog, wait_without_spinning
from .keeper import Keeper
from .run import YIELD_EVERY
from .writer import generation_at, know_generation


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


def artifact_ids(store: TaskStore, task_id: str) -> List[str]:
    """The artifact ids of a task in order (0.1 numbers artifacts by position)."""
    record = store.load(task_id)
    return [a.artifact_id for a in record.task.artifacts] if record else []


def stream_context(store: TaskStore, *, close_on_auth_required: bool = True) -> StreamContext:
    """What the stream and push renderers of an agent on ``store`` may ask."""
    return StreamContext(functools.partial(closes_stream,
                                           close_on_auth_required=close_on_auth_required),
                         functools.partial(artifact_ids, store),
                         functools.partial(generation_at, store))


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



class Following:
    """Waits on and follows the tasks of one agent from this process."""

    def __init__(self, log: SharedLog, keeper: Keeper, *, store_grace: float = 0.0,
                 close_on_auth_required: bool = True) -> None:
        self.log = log
        self.store = log.store
        self.keeper = keeper
        self.store_grace = store_grace
        self.close_on_auth_required = close_on_auth_required
        #: Set when this process shuts down: streams of tasks running elsewhere end.
        self.stopping = False
        #: Task id -> how many streams of this process follow it (to wake them at shutdown).
        self._followed: Dict[str, int] = {}

    def stop(self) -> None:
        """This process stops: wake every follower, so that those of tasks running
        elsewhere end now."""
        if self.stopping:
            return
        self.stopping = True
        for task_id in list(self._followed):
            self.store.wake(task_id)

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

    def long_poll(self, record: TaskRecord, current: int, timeout: float) -> TaskRecord:
        """The task once its generation is past ``current`` (the 1.1 draft's long-poll
        GetTask, docs/generations.rst), or as it is after ``timeout`` seconds (or once
        it is finished: it never changes again).

        ``record`` is the task as the caller loaded it through :attr:`log`, following
        the task (:meth:`SharedLog.following`) from before that load to the answer:
        so a crowd of long-polls of one task in this process costs the store what
        one does (one wait, one read per event, one load, shared).  The record may be
        a little old: the log after it is read before anything is decided.
        """
        task_id = record.task_id
        log = self.log
        deadline = time.monotonic() + timeout
        know_generation(self.store, record)
        seq, generation, state = record.seq, record.generation, record.state
        idle_at: Optional[int] = None
        outage = Outage(self.store_grace)
        while True:
            try:
                entries = log.read(task_id, seq)
                for entry in entries:
                    if entry.chunk:
                        generation += 1
                    elif moves_generation(entry.event):
                        generation += 1
                        event = entry.event
                        if isinstance(event, (Task, TaskStatusUpdateEvent)):
                            state = event.status.state
                    seq = entry.seq
                if entries:
                    idle_at = None
                    continue  # (a long log comes in slices)
                remaining = deadline - time.monotonic()
                if generation > current or state.terminal or remaining <= 0 or self.stopping:
                    break
                outage.over()
                idle_at = wait_without_spinning(log.wait, task_id, seq, remaining, idle_at)
            except StoreUnavailable:
                if time.monotonic() >= deadline or not outage.wait():
                    raise
        if seq == record.seq:
            return record
        found = log.load(task_id, at_least=seq)
        if found is None:
            raise TaskNotFoundError(metadata={"taskId": task_id})
        return know_generation(self.store, found)

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
                if self.stopping and self.keeper.run_here(task_id) is None:
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
