"""The store contract: tasks, their event logs, push targets and claims.

The store is the only state shared between requests, workers and (with a
networked backend) hosts.  Every change to a task is an event appended to the
task's log with the next sequence number, *together with* the task snapshot it
produces, in one atomic step guarded by the expected sequence number (a
compare-and-set).  Readers therefore see a snapshot and a log that agree.

The state machine is not here: the runtime decides what a change means; a
store only keeps what it is given, in order.
"""
from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, List, Optional, Sequence, Tuple, Type, TypeVar

from .. import signals
from ..concurrency import Notifier
from ..protocol.errors import InvalidParamsError, StoreUnavailable
from ..protocol.errors import StoreError as StoreError  # re-exported: what stores raise
from ..protocol.events import Event as Event  # re-exported: the stores import it from here
from ..protocol.events import LogEntry as LogEntry  # re-exported likewise
from ..protocol.events import apply_events
from .urls import safe_text, safe_url as safe_url  # re-exported: callers import it from here
from ..protocol.models import (
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskStatusUpdateEvent,
    TaskState,
    utc_now,
)

log = logging.getLogger("a2a_flask.store")


class SequenceConflict(Exception):
    """Someone else appended to the task first; reload and try again."""


@dataclass(frozen=True)
class StoreLimits:
    """How long a networked store's calls may take and how many connections it holds
    (``A2A_STORE_TIMEOUT``, ``A2A_STORE_POOL_SIZE``, ``A2A_STORE_WRITER_POOL_SIZE``)."""

    #: Seconds for any one call: connecting, a command or statement, a pool checkout.
    timeout: float = 5.0
    #: Connections for reads and all but running tasks' own writes.
    pool_size: int = 20
    #: Connections kept apart for running tasks' own writes and lease renewals.
    writer_pool_size: int = 5


@dataclass
class TaskRecord:
    """A task snapshot with what the server keeps about it."""

    task: Task
    seq: int = 0
    #: The tenant as stored: the agent's store scope and the caller's tenant
    #: (:func:`scoped`; the caller's tenant alone for an agent without a scope).
    tenant: str = ""
    owner: str = ""
    dialect: str = "1.0"
    created_at: str = field(default_factory=utc_now)
    #: Bytes of content the task holds, as the engine counts them
    #: (:mod:`a2a_flask.engine.budget`); None until it does.  Not stored: a record
    #: loaded from a store is measured again when a change needs it.
    held: Optional[int] = field(default=None, init=False, repr=False, compare=False)

    @property
    def outline(self) -> Task:
        """The task, except that its artifacts may lack the latest streamed chunks:
        its id, context, status and history are current.  What a store reads on
        every append; :attr:`task` may have to fold chunks first."""
        return self.task

    @property
    def task_id(self) -> str:
        """The task's id (from :attr:`outline`: nothing is folded to read it)."""
        return self.outline.id

    @property
    def scope(self) -> str:
        """The store scope of the agent the task belongs to (:func:`unscoped`)."""
        return unscoped(self.tenant)[0]

    @property
    def context_id(self) -> str:
        """The task's context id (from :attr:`outline`)."""
        return self.outline.context_id

    @property
    def state(self) -> TaskState:
        return self.outline.status.state

    @property
    def updated_at(self) -> str:
        return self.outline.status.timestamp or self.created_at

    @property
    def generation(self) -> int:
        """The task's generation (the A2A 1.1 draft, docs/generations.rst): the number
        of its log's entries up to :attr:`seq` that are not a caller's message; 0 for
        a task stored before generations were kept (counted from its log where
        needed).  Read without folding the chunks :attr:`outline` lacks."""
        known = self.outline.generation
        return known + self.unfolded if known else 0

    def after(self, events: List[Event]) -> "TaskRecord":
        """The record after appending ``events``.

        Artifact chunks are not folded in yet: a streamed artifact's parts are
        joined when someone reads :attr:`task` (a store storing its snapshot,
        an executor, a reader of the memory store) or :data:`MAX_UNFOLDED`
        chunks wait, once for all chunks since, so that a chunk costs about the
        same however long its artifact already is.  Chunks change no status and
        no history, so :attr:`outline` stays current.  Any other event folds
        everything at once.
        """
        seq = self.seq + len(events)
        if only_chunks(events) and self._unfolded_count() + len(events) <= MAX_UNFOLDED:
            return _WithChunks(self, events, seq)
        outline, chunks = self._pending()
        return TaskRecord(apply_events(outline, chunks + events), seq,
                          self.tenant, self.owner, self.dialect, self.created_at)

    @property
    def unfolded(self) -> int:
        """How many streamed chunks :attr:`outline` lacks (0: it is the whole task)."""
        return self._unfolded_count()

    def _pending(self) -> Tuple[Task, List[Event]]:
        """:attr:`outline` and the chunks it lacks (oldest first), read together."""
        return self.task, []

    def _unfolded_count(self) -> int:
        return 0


def only_chunks(events: List[Event]) -> bool:
    """Whether ``events`` are all artifact chunks: events that change neither a
    task's status nor its history."""
    return all(isinstance(event, TaskArtifactUpdateEvent) for event in events)


#: Most chunks a record holds unfolded.  A fold is one step that does not
#: yield: of this many chunks it takes milliseconds (each chunk that replaces
#: an artifact copies the task), where a fold of a whole 100,000-chunk stream
#: would hold a gevent worker for a fraction of a second.  What a chunk still
#: costs for the artifact's length is a copy of its list of parts per this
#: many chunks.
MAX_UNFOLDED = 4096

#: Chunks appended after a record's outline: (earlier chunks or None, this
#: append's, how many in all).  Linked, never copied or changed: each record
#: after a chunk costs O(1), and records that share a past (a memory store's,
#: a run's) share its chunks.
_Chunks = Tuple[Optional["_Chunks"], List[Event], int]


class _WithChunks(TaskRecord):
    """A record whose latest artifact chunks are not folded into its task yet."""

    def __init__(self, before: TaskRecord, chunks: List[Event], seq: int) -> None:
        # Outline and chunks are read, and kept, as one value: a reader on another
        # thread that folds ``before`` meanwhile cannot pair a folded task with
        # chunks already in it.
        outline, earlier = (before._folding if isinstance(before, _WithChunks)
                            else (before.task, None))
        super().__init__(outline, seq, before.tenant, before.owner, before.dialect,
                         before.created_at)
        count = len(chunks) + (earlier[2] if earlier is not None else 0)
        self._folding: Tuple[Task, Optional[_Chunks]] = (outline, (earlier, chunks, count))

    @property
    def task(self) -> Task:
        outline, chunks = self._pending()
        if not chunks:
            return outline
        task = apply_events(outline, chunks)
        self._folding = (task, None)
        return task

    @task.setter
    def task(self, value: Task) -> None:
        self._folding = (value, None)

    @property
    def outline(self) -> Task:
        return self._folding[0]

    def _pending(self) -> Tuple[Task, List[Event]]:
        outline, chunks = self._folding
        batches: List[List[Event]] = []
        while chunks is not None:
            chunks, batch, _ = chunks
            batches.append(batch)
        return outline, [event for batch in reversed(batches) for event in batch]

    def _unfolded_count(self) -> int:
        chunks = self._folding[1]
        return 0 if chunks is None else chunks[2]


@dataclass(frozen=True)
class OnceClaim:
    """A key to bind with a task's creation (:meth:`TaskStore.create_claimed`), as
    :meth:`Coordination.claim_once` binds it: ``key`` to ``value`` for ``ttl`` seconds."""

    key: str
    value: str
    ttl: float


@dataclass
class PushTarget:
    """A webhook of a task: its config, who registered it in which dialect, and
    how far delivery got (the task's event log is the outbox; this is its cursor)."""

    config: TaskPushNotificationConfig
    dialect: str = "1.0"
    owner: str = ""
    #: The last log entry delivered (or deliberately skipped) to this webhook.
    delivered_seq: int = 0
    #: Failed attempts in a row at the next entry.
    failures: int = 0
    #: Set when delivery gave up after too many failures; registering again resets it.
    gave_up: bool = False


def is_behind(target: PushTarget, seq: int) -> bool:
    """Whether a webhook still has entries up to ``seq`` to deliver."""
    return not target.gave_up and target.delivered_seq < seq


@dataclass
class TaskQuery:
    """ListTasks filters, already validated."""

    #: The tenant as stored (:func:`scoped`): the agent's store scope and the caller's.
    tenant: str = ""
    owner: str = ""
    context_id: str = ""
    state: Optional[TaskState] = None
    updated_after: Optional[str] = None
    page_size: int = 50
    page_token: str = ""


@dataclass
class TaskPage:
    records: List[TaskRecord]
    total_size: int
    next_page_token: str


_Method = TypeVar("_Method", bound=Callable[..., Any])


def backend_call(method: _Method) -> _Method:
    """Mark a method of the store contract as one that reaches the store's data: the
    outage guard (:func:`outages_as_unavailable`) wraps each such method of the
    stores it decorates (:data:`CONTRACT` lists them)."""
    setattr(method, "__backend_call__", True)
    return method


class TaskLog(ABC):
    """The task log: each task's snapshot and its event log, appended to under a
    compare-and-set (see the module docstring).  What readers and writers of
    tasks need; :class:`Coordination` is what lets workers share the work."""

    #: Set by :meth:`close`; background work on a closed store stops.
    closed: bool = False
    #: False until :meth:`prepare` has run without an outage (a networked store
    #: opens without touching its server: the app starts while it is down).
    #: Only the outage guard (:func:`outages_as_unavailable`) runs :meth:`prepare`:
    #: a store that sets this False is decorated with it.
    prepared: bool = True
    #: About how many entries one :meth:`read` returns at most: a reader catching
    #: up on a long log takes it in slices, so that no one step (decoding them
    #: all) holds the worker for long.
    read_slice: int = 250
    #: This process's wake-ups of each task's waiters, which every store gets from
    #: this class (made before the store's own ``__init__`` runs).  A store's writes
    #: call ``notifier.notify(task_id)`` once written; its :meth:`wait` waits on a
    #: ``notifier.ticket(task_id)`` taken before it looks (or, for a store that
    #: other processes write too, on ``notifier.wait_polling``); :meth:`wake` uses it.
    notifier: Notifier

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # Wired here rather than in an __init__, so that a store's own __init__
        # need not call this class's.
        store = super().__new__(cls)
        store.notifier = Notifier()
        return store

    @backend_call
    @abstractmethod
    def create(self, record: TaskRecord, first_event: Event) -> None:
        """Store a new task whose log starts with ``first_event`` at ``record.seq``."""

    @backend_call
    @abstractmethod
    def load(self, task_id: str) -> Optional[TaskRecord]:
        """The latest record of a task, or None."""

    @backend_call
    @abstractmethod
    def append(self, task_id: str, expected_seq: int, events: List[Event],
               record: TaskRecord) -> int:
        """Append ``events`` after ``expected_seq``; ``record`` is the task's record
        after them (``record.seq`` is the new last sequence number, returned).

        Read ``record.outline`` (or ``state``, ``updated_at``) on every append,
        and ``record.task`` only to store the snapshot: reading it folds the
        streamed chunks that came since it was last read.  Raises
        :class:`SequenceConflict` if the log moved on since ``expected_seq``.
        """

    @backend_call
    def head(self, task_id: str) -> Optional[Tuple[int, TaskState]]:
        """The task's last sequence number and state, or None: what a waiter
        checks without decoding the snapshot (stores that can, answer cheaper)."""
        record = self.load(task_id)
        return (record.seq, record.state) if record is not None else None

    @backend_call
    @abstractmethod
    def read(self, task_id: str, after_seq: int) -> Sequence[LogEntry]:
        """The log entries with a sequence number greater than ``after_seq``, in
        order: all of them, or the first :attr:`read_slice` (or a few more, to
        the end of a record the store keeps whole); the caller reads again
        after the last one.  Empty only when there are none.  A store may
        decode an entry each time it is looked at: iterate the slice once."""

    def entries(self, task_id: str, after_seq: int,
                through: Optional[int] = None) -> Iterator[LogEntry]:
        """Every log entry after ``after_seq`` (up to sequence number ``through``,
        if given), read a slice at a time."""
        while through is None or after_seq < through:
            entries = self.read(task_id, after_seq)
            if not entries:
                return
            for entry in entries:
                if through is not None and entry.seq > through:
                    return
                yield entry
                after_seq = entry.seq

    @backend_call
    @abstractmethod
    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        """Block until the log passes ``after_seq`` (a write here or in another
        process), :meth:`wake` is called for the task, or ``timeout`` seconds pass.

        May return early; callers re-read the log.  :attr:`notifier` does the
        waiting for the built-in stores.
        """

    @backend_call
    @abstractmethod
    def list_tasks(self, query: TaskQuery) -> TaskPage:
        """One page of tasks, most recently updated first."""

    @backend_call
    def task_ids(self) -> List[str]:
        """Every stored task's id, of every tenant and owner, in no particular order:
        for tools that walk a whole store (``flask a2a copy-store``, ``purge``).  A
        store that cannot enumerate its tasks raises :class:`NotImplementedError`."""
        raise NotImplementedError(f"{type(self).__name__} cannot list every task it holds")

    # -- retention

    @backend_call
    @abstractmethod
    def purge(self, updated_before: str, scope: Optional[str] = None) -> int:
        """Delete terminal tasks last updated before the timestamp (with logs,
        push targets and leases); return how many went.  With ``scope``, only the
        tasks of the agent with that store scope (:func:`in_scope`): agents that share
        a store keep their own retention."""

    def wake(self, task_id: str) -> None:
        """Make this process's waits on a task (:meth:`wait`) return now, although
        nothing was written: at shutdown, so that streams can end.

        Fires the task's :attr:`notifier` tickets with ``notifier.wake``.  A store
        whose waits block on something else overrides this.
        """
        self.notifier.wake(task_id)

    def prepare(self) -> None:
        """The store's first-use work (reaching the server, creating tables, moving
        old keys), run once before its first call by :func:`outages_as_unavailable`
        when :attr:`prepared` is False; an outage here is the call's outage, and the
        next call tries again."""

    def close(self) -> None:
        """Release files and connections."""
        self.closed = True


class Coordination(ABC):
    """What lets several workers (and hosts) share the work: each task's webhooks
    with their delivery cursors, claims (one process at a time does a job) and
    leases (a task whose runner died is noticed).  Stores that keep it in dicts
    share one implementation (:class:`~.coordination.DictCoordination`)."""

    # -- push targets: webhooks and their delivery cursors

    @backend_call
    @abstractmethod
    def put_push_target(self, task_id: str, target: PushTarget) -> None:
        """Insert or replace a webhook (keyed by ``target.config.id``, keeping its place)."""

    @backend_call
    @abstractmethod
    def push_targets(self, task_id: str) -> List[PushTarget]:
        """Every webhook of a task, in creation order."""

    @backend_call
    @abstractmethod
    def delete_push_config(self, task_id: str, config_id: str) -> None:
        """Remove a webhook; removing a missing one is not an error."""

    @backend_call
    @abstractmethod
    def record_push_progress(self, task_id: str, config_id: str, delivered_seq: int,
                             failures: int, gave_up: bool) -> None:
        """Move a webhook's cursor; a webhook deleted meanwhile stays deleted."""

    @backend_call
    @abstractmethod
    def push_backlog(self) -> List[str]:
        """Tasks with a webhook that has not given up and is behind the task's log."""

    # -- claims: one process at a time does a job (such as a task's deliveries)

    @backend_call
    @abstractmethod
    def claim(self, key: str, owner: str, ttl: float) -> bool:
        """Take or renew the claim on ``key`` for ``ttl`` seconds; False if another
        owner holds an unexpired claim."""

    @backend_call
    @abstractmethod
    def release_claim(self, key: str, owner: str) -> None:
        """Drop the claim if ``owner`` still holds it."""

    @backend_call
    @abstractmethod
    def claim_once(self, key: str, value: str, ttl: float) -> str:
        """Bind ``key`` to ``value`` for ``ttl`` seconds unless an unexpired binding
        holds it, in one atomic write (never a read, then a write): the value bound,
        ``value`` itself when this call bound it.  Kept with the claims (same keys,
        :meth:`release_claim` with ``value`` as the owner drops it); an idempotent
        send's key (docs/safe-retries.rst).  ``value`` is at most 255 characters."""

    # -- leases: the process running a task's executor holds one and renews it

    @backend_call
    @abstractmethod
    def acquire_lease(self, task_id: str, owner: str, ttl: float) -> bool:
        """Record that ``owner`` runs the task, until ``ttl`` seconds from now, if no
        other owner holds a live lease on it: True when ``owner`` holds it now (taken
        free, taken over once expired, or its own renewed), False when another owner's
        lease is live (nothing changes).  One atomic set-if-absent or compare-and-set:
        of two processes taking one task's lease at once exactly one gets True, so a
        task never has two runs (docs/stores.rst, "Leases")."""

    @backend_call
    @abstractmethod
    def renew_leases(self, owner: str, task_ids: List[str], ttl: float) -> None:
        """Push the expiry of ``owner``'s leases on these tasks ``ttl`` seconds ahead."""

    @backend_call
    @abstractmethod
    def release_lease(self, task_id: str, owner: Optional[str]) -> None:
        """The run ended: drop the lease if ``owner`` still holds it (None: whoever does)."""

    @backend_call
    @abstractmethod
    def expired_leases(self) -> List[str]:
        """Tasks whose lease ran out: their runner stopped without releasing it."""



class TaskStore(TaskLog, Coordination):
    """A store: the task log and coordination, together (what the engine is given).

    Subclass it (or :class:`TaskLog` and a :class:`Coordination` such as
    :class:`~.coordination.DictCoordination`, then this) for a new store, and
    register its URL scheme with :func:`a2a_flask.stores.register_store`.

    Three more methods let a run's first and last writes, and an idempotent send's
    acceptance, go in one round trip each where the store can; by default they are
    the calls they stand for.
    """

    #: True for a store whose tasks live in this process only (the memory store):
    #: other processes cannot see them.  Such a store is refused under a runner in
    #: other processes (``A2A_RUNNER=celery``), warned about under several gunicorn
    #: workers and by ``flask a2a doctor``, each agent of an app gets its own, and
    #: the ``flask a2a`` commands, in a process of their own, say it is not theirs
    #: to read or copy.  It cannot be down: :meth:`answering` says True.
    process_local: bool = False
    #: When the store last answered a call (:func:`time.monotonic`), and ``-inf``
    #: until it has or after an outage; :meth:`answering` reads it.  The outage
    #: guard (:func:`outages_as_unavailable`) keeps it for the calls it guards.
    answered_at: float = -math.inf

    @backend_call
    def create_with(self, record: TaskRecord, first_event: Event, events: List[Event],
                    after: TaskRecord, release_owner: Optional[str] = None) -> int:
        """:meth:`create` the task and :meth:`append` ``events`` to it (``after`` is the
        record they make) at once: a run's first emission makes its task.  With
        ``release_owner`` the events finish the task, and that owner's lease is
        released too (:meth:`release_lease`).  Returns the new sequence number."""
        self.create(record, first_event)
        seq = self.append(record.task.id, record.seq, events, after)
        if release_owner is not None:
            self.release_lease(record.task.id, release_owner)
        return seq

    @backend_call
    def create_claimed(self, record: TaskRecord, first_event: Event, claim: OnceClaim,
                       lease_owner: Optional[str] = None, lease_ttl: float = 0.0) -> str:
        """Bind ``claim`` (:meth:`claim_once`), :meth:`create` the task and, with
        ``lease_owner``, take its lease for ``lease_ttl`` seconds (:meth:`acquire_lease`),
        all or nothing: an idempotent send's acceptance (docs/safe-retries.rst).
        Returns the value bound: ``claim.value`` when this call bound it and made the
        task, else the unexpired binding's, and then nothing was written.  Raises
        :class:`SequenceConflict` (nothing written) when the task exists or another
        owner's live lease holds its id.

        This default makes the calls it stands for, one after another, and undoes the
        binding when a later one fails (a crash between them leaves a binding without
        its task: docs/safe-retries.rst says what a retry does then).  Stores that can
        make it one atomic write override it (docs/stores.rst lists which)."""
        held = self.claim_once(claim.key, claim.value, claim.ttl)
        if held != claim.value:
            return held
        try:
            if lease_owner is not None and not self.acquire_lease(
                    record.task.id, lease_owner, lease_ttl):
                raise SequenceConflict(record.task.id)
            self.create(record, first_event)
        except BaseException:
            try:
                if lease_owner is not None:
                    self.release_lease(record.task.id, lease_owner)
                self.release_claim(claim.key, claim.value)
            except Exception:  # the first error is the caller's; the rest expire
                pass
            raise
        return held

    @backend_call
    def append_released(self, task_id: str, expected_seq: int, events: List[Event],
                        record: TaskRecord, owner: str) -> int:
        """:meth:`append` events that finish the task, and release ``owner``'s lease on
        it (:meth:`release_lease`): a run's last write lets its lease go with it.  (A
        store may drop any lease of a finished task: nothing runs it again.)"""
        seq = self.append(task_id, expected_seq, events, record)
        self.release_lease(task_id, owner)
        return seq

    def answering(self, within: float) -> bool:
        """Whether this store answered a call in the last ``within`` seconds and no call
        met an outage since (:attr:`answered_at`): then a new run may defer its lease
        to its first write (:meth:`~a2a_flask.engine.keeper.Keeper.hold`).  Always
        True for a :attr:`process_local` store.  A store that neither lives in this
        process nor is guarded by :func:`outages_as_unavailable` (nor keeps
        :attr:`answered_at` itself) says False: its runs take their lease before the
        agent's code runs, one store call more."""
        if self.process_local:
            return True  # in this process: never down
        return time.monotonic() - self.answered_at < within

    def create_tables(self) -> Optional["Tables"]:
        """Create the store's tables and indexes where they are missing, now: what
        ``flask a2a create-tables`` runs (a step of its own in a deploy, before the
        servers start).  Safe to run again, and from several processes at once.
        None (the default): the store keeps no tables to create ahead of use.
        Raises :class:`StoreError` saying why it cannot."""
        return None


@dataclass(frozen=True)
class Tables:
    """What :meth:`TaskStore.create_tables` did."""

    #: Every table of the store, in the order it names them.
    names: Tuple[str, ...]
    #: Those this call created (the others were there already).
    created: Tuple[str, ...]
    #: Where they are, for people: a URL with its password hidden, a schema.
    where: str


# ----------------------------------------------------------- outages

#: The methods of the contract that reach a store's data (those marked with
#: :func:`backend_call`): what :func:`outages_as_unavailable` guards.
CONTRACT = tuple(sorted(name for name in dir(TaskStore)
                        if getattr(getattr(TaskStore, name), "__backend_call__", False)))

_Store = TypeVar("_Store", bound=Type[TaskStore])


def outages_as_unavailable(errors: Tuple[Type[BaseException], ...],
                           is_outage: Callable[[BaseException], bool] = lambda exc: True,
                           ) -> Callable[[_Store], _Store]:
    """Class decorator, the outage guard: the contract methods of a store
    (:data:`CONTRACT`) raise :class:`StoreUnavailable` when the backend raises one of
    ``errors`` that ``is_outage`` accepts.

    The cause is logged (a warning at most every few seconds per store, with no
    traceback: an outage is news for the operator, not a bug), sent as the
    ``store_error`` signal and chained to the new error; callers above the stores
    see one error type for every backend.  The guard also keeps
    :attr:`TaskStore.answered_at` (so :meth:`TaskStore.answering` is true while the
    store answers) and runs :meth:`TaskLog.prepare` once before the first call while
    :attr:`TaskLog.prepared` is False.
    """
    def decorate(cls: _Store) -> _Store:
        for name in CONTRACT:
            method = getattr(cls, name)
            if getattr(method, "__isabstractmethod__", False):
                continue
            setattr(cls, name, _guarded(method, errors, is_outage))
        return cls

    return decorate


def _guarded(method: Callable[..., Any], errors: Tuple[Type[BaseException], ...],
             is_outage: Callable[[BaseException], bool]) -> Callable[..., Any]:
    @functools.wraps(method)
    def guarded(self: TaskStore, *args: Any, **kwargs: Any) -> Any:
        try:
            if not self.prepared:
                prepare_once(self)
            answer = method(self, *args, **kwargs)
        except errors as exc:
            if not is_outage(exc):
                raise
            self.answered_at = -math.inf  # (see TaskStore.answering)
            report_outage(self, exc)
            signals.send(signals.store_error, None, operation=method.__name__, exception=exc)
            raise StoreUnavailable() from exc
        self.answered_at = time.monotonic()
        return answer

    return guarded


#: The longest a caller waits for another's :meth:`TaskStore.prepare` (seconds); the
#: store's own timeouts bound that call long before.
PREPARE_WAIT = 60.0


def prepare_once(store: TaskStore) -> None:
    """Run ``store.prepare()`` unless it has succeeded.  Callers arriving meanwhile
    wait for that one attempt (bounded) and share its outcome: they go on if it
    succeeded, and answer "task store unavailable" at once if it failed (rather than
    each trying in turn, which would make the last of N callers wait N timeouts)."""
    state = store.__dict__
    lock = state.setdefault("_prepare_lock", threading.Lock())
    finished = state.get("_prepare_attempts", 0)  # attempts ended before this caller came
    if not lock.acquire(timeout=PREPARE_WAIT):
        raise StoreUnavailable()
    try:
        if store.prepared:
            return
        if state.get("_prepare_attempts", 0) != finished:
            raise StoreUnavailable()  # the attempt this caller waited for failed just now
        try:
            store.prepare()
            store.prepared = True
        finally:
            state["_prepare_attempts"] = finished + 1
    finally:
        lock.release()


_last_report: "dict[int, float]" = {}


def report_outage(store: TaskStore, exc: BaseException) -> None:
    """Log a store outage, once every 5 seconds per store (they come in bursts), as one
    sentence: ``task store unavailable (SQLStore): <cause>; callers are told so until
    it answers again``."""
    now = time.monotonic()
    if now - _last_report.get(id(store), -10.0) >= 5.0:
        _last_report[id(store)] = now
        log.warning("task store unavailable (%s): %s; callers are told so until it answers "
                    "again", type(store).__name__, outage_cause(exc))


def outage_cause(exc: BaseException) -> str:
    """What made a store unavailable, for people, on one line: the message of one of
    our errors (written for them), a driver's with its class's name first
    (``ConnectionError: Error 111 connecting to ...``); never a private class's name,
    and never a secret of a URL the message quotes."""
    text = safe_text(" ".join(str(exc).split()).rstrip("."))  # it ends mid-sentence
    name = type(exc).__name__
    if name.startswith("_") or type(exc).__module__.startswith("a2a_flask"):
        return text or "no reason given"
    return f"{name}: {text}" if text else name


# ------------------------------------------------------ lazy snapshots

#: Fewest events a store that counts bytes (:func:`snapshot_due`) lets pile up
#: after a snapshot before it stores a new one for their number.
COMPACT_MIN = 32


#: Fewest bytes a store that counts them (:func:`snapshot_due` with ``logged``)
#: logs after a snapshot before it stores a new one for their size alone.
SNAPSHOT_MIN_BYTES = 64 * 1024
#: How many times its own size a stored snapshot lets the bytes logged after it
#: reach, and what fraction of it they must reach, before a store that counts
#: bytes stores a new one (see :func:`snapshot_due`).
SNAPSHOT_RATIO = 8


def finishes(events: List[Event]) -> bool:
    """Whether ``events`` move a task to a terminal state."""
    return any(isinstance(event, (TaskStatusUpdateEvent, Task)) and event.status.state.terminal
               for event in events)


def snapshot_due(snapshot_seq: Optional[int], seq: int, events: List[Event], *,
                 logged: Optional[int] = None, snapshot_size: int = 0) -> bool:
    """Whether an append of ``events`` that ends at ``seq`` should also store the snapshot:
    the rule of every store that logs events after a stored snapshot.

    Rewriting the snapshot on every event costs O(n^2) bytes for a task of n
    events (a streamed artifact grows by a part per chunk, a conversation by a
    message per turn).  Either way the snapshot is stored when the events finish
    the task (a finished task reads in one lookup, and never changes again).

    A store that counts bytes passes ``snapshot_seq`` (the sequence number of the
    stored snapshot), ``logged`` (the bytes of the events logged since it, these
    included) and ``snapshot_size`` (its bytes).  The snapshot is then also
    stored when the events since the last one are as many as those before it
    (and at least :data:`COMPACT_MIN`) and their bytes at least
    1/:data:`SNAPSHOT_RATIO` of its size; or, however few they are, when their
    bytes reach :data:`SNAPSHOT_RATIO` times its size (and
    :data:`SNAPSHOT_MIN_BYTES`).  Each snapshot is thus paid for by bytes logged
    since the one before, so the bytes written stay within a small multiple of
    the bytes logged whatever the events' sizes (N messages of S bytes to an
    open task: O(N*S), not O(N^2*S); a streamed chunk's event, several times
    what it adds to the snapshot, leaves the count to decide), and a load folds
    at most half the log or a few snapshots' worth of bytes.  Such a store
    keeps the history's length with the task (:func:`kept_history`), since the
    runtime's trimming of the history (``A2A_MAX_HISTORY``) reaches the stored
    snapshot only with the next one.

    A store that counts nothing (``logged`` None; ``snapshot_seq`` may be None
    too: the SQL store, whose append is one compare-and-set that reads nothing
    first) stores the snapshot when the log passes a power of two, and when an
    event replaces the whole task: the last snapshot is then at least half way
    along the log, so a load folds at most half of it, and the snapshots of a
    task of n events sum to O(n) bytes.
    """
    if logged is None:  # asked on every append: the cheapest test first, one pass after
        if (seq - len(events)).bit_length() != seq.bit_length():
            return True
        for event in events:  # one replaces the task (and may finish it), or finishes it
            if isinstance(event, Task) or (isinstance(event, TaskStatusUpdateEvent)
                                           and event.status.state.terminal):
                return True
        return False
    assert snapshot_seq is not None, "a store that counts bytes knows its snapshot's seq"
    if finishes(events) or logged >= max(SNAPSHOT_MIN_BYTES, SNAPSHOT_RATIO * snapshot_size):
        return True
    return (seq - snapshot_seq >= max(COMPACT_MIN, snapshot_seq)
            and SNAPSHOT_RATIO * logged >= snapshot_size)


def kept_history(task: Task, history_len: Optional[int]) -> Task:
    """``task`` with only the newest ``history_len`` messages of its history (None: all):
    a snapshot with the events since folded in, as the runtime had trimmed it."""
    if history_len is None or len(task.history) <= history_len:
        return task
    return dataclasses.replace(task, history=task.history[len(task.history) - history_len:])


def fold(task: Task, events: Iterable[Event]) -> Task:
    """The snapshot after ``events`` (the log entries past a stored snapshot)."""
    return apply_events(task, list(events))


# ----------------------------------------------------------- compound keys


def join_key(*parts: str) -> str:
    """One key made of ``parts`` that no other list of parts makes: each part
    follows its length, so a part may hold any character, the separator included
    (``("", "github:alice")`` gives ``"0::12:github:alice"``, ``(":github",
    "alice")`` gives ``"7::github:5:alice"``).  For stores whose keys name a
    tenant and an owner, or any other caller-chosen strings together."""
    return ":".join(f"{len(part)}:{part}" for part in parts)


#: What parts an agent's store scope from its callers' tenant in the tenant a task is
#: stored under (:func:`scoped`): a control character, which no tenant may hold
#: (``protocol.calls.check_tenant``) and no scope either (``A2A_STORE_SCOPE``).
SCOPE_SEPARATOR = "\x1f"


def scoped(scope: str, tenant: str) -> str:
    """The tenant a task of an agent is stored, listed and checked under: the caller's
    ``tenant`` itself for the agent whose store scope is empty (the default agent:
    what every task was stored under before scopes existed), else the agent's
    ``scope``, :data:`SCOPE_SEPARATOR` and ``tenant``.

    Neither part may hold the separator, so no caller's tenant makes another
    agent's key (docs/internals.rst, invariant 10): every store keeps agents apart in
    the tenant part of its keys and rows, as it keeps tenants apart."""
    return scope + SCOPE_SEPARATOR + tenant if scope else tenant


def unscoped(stored: str) -> Tuple[str, str]:
    """The store scope and the caller's tenant of a tenant as stored (:func:`scoped`)."""
    scope, separator, tenant = stored.partition(SCOPE_SEPARATOR)
    return (scope, tenant) if separator else ("", stored)


def in_scope(stored: str, scope: Optional[str]) -> bool:
    """Whether a task stored under the tenant ``stored`` belongs to the agents with
    store ``scope`` (every task does when ``scope`` is None)."""
    return scope is None or unscoped(stored)[0] == scope


def split_key(key: str) -> List[str]:
    """The parts :func:`join_key` made ``key`` of; ValueError if it made no such key."""
    return split_parts(key)[0]


def split_parts(text: str, count: Optional[int] = None) -> Tuple[List[str], str]:
    """The first ``count`` parts :func:`join_key` made at the start of ``text`` (all of
    them, to its end, when None), and what follows them; ValueError if ``text`` does
    not start so."""
    parts: List[str] = []
    rest = text
    while True:
        length, sep, rest = rest.partition(":")
        if not sep or not length.isdigit() or len(rest) < int(length):
            raise ValueError(f"not a joined key: {text!r}")
        parts.append(rest[:int(length)])
        rest = rest[int(length):]
        if len(parts) == count or (count is None and not rest):
            return parts, rest
        if not rest.startswith(":"):
            raise ValueError(f"not a joined key: {text!r}")
        rest = rest[1:]


# ----------------------------------------------------------- shared paging


def _sort_key(record: TaskRecord) -> Tuple[str, str]:
    return (record.updated_at, record.task_id)


def encode_page_token(record: TaskRecord) -> str:
    raw = json.dumps(list(_sort_key(record))).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_page_token(token: str) -> Tuple[str, str]:
    """The (timestamp, id) cursor inside a page token; InvalidParams if it is not ours."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        cursor = json.loads(raw)
        if not (isinstance(cursor, list) and len(cursor) == 2
                and all(isinstance(part, str) for part in cursor)):
            raise ValueError
        stamp, task_id = cursor
        return stamp, task_id
    except (ValueError, TypeError, binascii.Error, RecursionError):
        raise InvalidParamsError(
            "Invalid pageToken", violations=[("pageToken", "is not a token this server issued")]
        ) from None


def belongs(record: TaskRecord, query: TaskQuery) -> bool:
    """Whether a record is the querying caller's: its tenant (with the agent's store
    scope, :func:`scoped`) and owner, read on the record itself.  Every store checks the records ListTasks returns with
    this, whatever its index says (an index can be wrong: keyed ambiguously, or
    naming an id that another caller took again after its task expired)."""
    return record.tenant == query.tenant and record.owner == query.owner


def matches(record: TaskRecord, query: TaskQuery) -> bool:
    """Whether a record passes the query's filters (not its page bounds)."""
    if not belongs(record, query):
        return False
    if query.context_id and record.context_id != query.context_id:
        return False
    if query.state is not None and record.state is not query.state:
        return False
    if query.updated_after and record.updated_at < query.updated_after:
        return False
    return True


def select_page(records: Iterable[TaskRecord], query: TaskQuery) -> TaskPage:
    """Filter, order (newest status first) and cut one page, for in-process stores."""
    selected = sorted((r for r in records if matches(r, query)), key=_sort_key, reverse=True)
    start = 0
    if query.page_token:
        cursor = decode_page_token(query.page_token)
        start = next((i for i, r in enumerate(selected) if _sort_key(r) < cursor), len(selected))
    page = selected[start:start + query.page_size]
    more = start + query.page_size < len(selected)
    return TaskPage(page, len(selected), encode_page_token(page[-1]) if more and page else "")
