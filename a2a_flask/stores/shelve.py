"""A store in a local file: survives restarts and SIGKILL, shared by the workers of one host.

The file is an append-only log of checksummed JSON records
(:mod:`~a2a_flask.stores.recordlog`; their kinds are :class:`Kind`): a task's creation or append is one
record holding its new events (each the JSON text of its StreamResponse, a
string inside the record, which a 1.0 stream sends as it is), and its new snapshot when
:func:`~.base.snapshot_due` says so (counting the bytes logged since the last
one: a streamed chunk or a message to an open task is logged alone, so an
event costs the same at any task length; a load folds the events logged
since the last snapshot, and keeps the history as long as the runtime left
it).  A record is all there or not at all.  Each process keeps an index in memory (where each task's
records lie, plus what ListTasks filters and sorts on, webhooks, leases and
claims) and catches up before every call by reading only the records other
processes appended since its last look: a call costs the same with ten tasks
or ten thousand.  Writes take an exclusive ``flock`` (waiting with a
cooperative sleep), check the compare-and-set against the caught-up index,
append, release the lock, and ``fdatasync`` tasks and webhooks before the call
returns (in gevent's thread pool under gevent); reads take no file lock.  When the file has doubled since it was last compacted, the writer
rewrites the live records (dropping superseded snapshots, purged tasks,
expired claims) to a new file and renames it over the old one.  There a
task is a head record (what the index keeps on it), a record of its snapshot
alone, and records of its events; records that need no change are copied as
bytes, runs of small ones merged into records of up to :data:`COMPACT_BATCH`
events and :data:`COMPACT_BATCH_BYTES` bytes, and the writer updates its index
from what it wrote, so a compaction decodes only what it merges (and a
snapshot the first time it moves).

The name is historical: stores written by the ``shelve``/``dbm.dumb`` format
of earlier releases are migrated into the log the first time they are
opened, and their files renamed with a ``.migrated`` suffix.  Their pickles
are read through :mod:`.oldpickle`, which admits a2a_flask's record classes
and nothing else.
"""
from __future__ import annotations

import bisect
import dbm.dumb
import itertools
import json
import os
import shutil
import tempfile
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, TypeVar

from ..concurrency import cooperate
from ..protocol.codec import decode, encode
from ..protocol.models import (TERMINAL_STATES, Message, Task, TaskArtifactUpdateEvent,
                               TaskPushNotificationConfig, TaskState, TaskStatusUpdateEvent)
from ..protocol.events import Event
from .base import (
    LogEntry,
    OnceClaim,
    PushTarget,
    SequenceConflict,
    StoreError,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    belongs,
    decode_page_token,
    encode_page_token,
    fold,
    in_scope,
    kept_history,
    outages_as_unavailable,
    snapshot_due,
)
from .coordination import (Change, Decision, DictCoordination, DropClaim, DropLease,
                           DropTarget, HoldLeases, MoveCursor, PutTarget, TakeClaim)
from .oldpickle import load_record
from .recordlog import Flusher, LockTimeout, RecordLog, Rewrite
from .serial import dump_event, dumps, encoded_entries, load_event, task_json, task_of

#: How often a waiter looks for writes made by other processes (seconds).
POLL_INTERVAL = 0.05
#: The log is compacted when it reaches this size and twice its size after the last compaction.
COMPACT_MIN_BYTES = 4 << 20
#: Records replayed (or tasks compacted) between two yields to other greenlets.
YIELD_EVERY = 1000
#: Most events one record of a compacted log holds.  A record is decoded in one
#: step that does not yield (by a catch-up or a read), so a task of 100,000
#: chunks is many records, not one of megabytes.  A compaction copies a record
#: of at least half this many events as it is (and a lone smaller one too).
COMPACT_BATCH = 1000
#: Most bytes of events one merged record of a compacted log holds (a record of
#: one event may hold more: it is copied, never split), so that a compaction
#: never writes a record too long to read back (:data:`.recordlog.MAX_RECORD`),
#: nor one that takes long to decode.  A record of half this or more is copied as it is.
COMPACT_BATCH_BYTES = 4 << 20
#: Suffixes of the files of the earlier ``dbm.dumb`` format.
OLD_SUFFIXES = (".dir", ".dat", ".bak")
#: What the earlier format's event keys hold.
_EVENT_TYPES = (Task, Message, TaskStatusUpdateEvent, TaskArtifactUpdateEvent)


class Kind:
    """The kinds of record in the log: each record is a JSON object whose ``"k"``
    names its kind (the codes are what the files hold; they never change).

    ====  ================  =====================================================
    code  constant          what the record says
    ====  ================  =====================================================
    t     TASK              A task's new events ``ev`` ([seq, StreamResponse
                            JSON text] pairs) up to ``seq``, with what the index
                            keeps (``cx`` context, ``st`` state, ``up`` updated
                            at, ``hl`` history length); with ``meta`` (tenant,
                            owner, dialect, created at) it creates the task (or,
                            written by a compaction, heads it); with ``task`` it
                            also holds the snapshot after them.
    s     SNAPSHOT          A task's snapshot ``task`` at sequence number
                            ``ss``, alone (written by compactions).
    p     PUSH              A webhook of task ``id`` put (inserted or replaced by
                            its config's id): config ``cfg``, dialect ``d``, owner
                            ``o``, delivery cursor ``ds``, failures ``f``, gave up
                            ``g``.
    pd    PUSH_DELETED      Webhook ``c`` of task ``id`` deleted.
    pp    PUSH_PROGRESS     Webhook ``c`` of task ``id`` moved its cursor to
                            ``ds`` (``f`` failures in a row, ``g`` gave up).
    c     CLAIM             Claim ``key`` taken or renewed by owner ``o`` until
                            ``x`` (a Unix time).
    cu    CLAIM_RELEASED    Claim ``key`` dropped.
    l     LEASE             Owner ``o`` holds the leases of tasks ``ids`` until
                            ``x`` (taken or renewed).
    lu    LEASE_RELEASED    The lease of task ``id`` dropped.
    x     PURGED            Tasks ``ids`` deleted, with their webhooks and leases.
    ====  ================  =====================================================

    A reader ignores a kind it does not know.
    """

    TASK = "t"
    SNAPSHOT = "s"
    PUSH = "p"
    PUSH_DELETED = "pd"
    PUSH_PROGRESS = "pp"
    CLAIM = "c"
    CLAIM_RELEASED = "cu"
    LEASE = "l"
    LEASE_RELEASED = "lu"
    PURGED = "x"

_TERMINAL = frozenset(state.value for state in TERMINAL_STATES)
T = TypeVar("T")
Ref = Tuple[int, int]  # (offset, length) of a record's payload in the log
#: A task as read under the index lock: (tenant, owner, dialect, created_at, seq,
#: snapshot's seq, history length), the snapshot's record, the records of the events
#: logged since.
_Found = Tuple[Tuple[str, str, str, str, int, int, Optional[int]], bytes, List[bytes]]
#: Where a compaction wrote a task: its snapshot, and its ``lasts`` and ``refs`` (all
#: of them bare: a compaction writes events in records of their own).
_Placed = Tuple[Ref, List[int], List[Ref]]


class _Task:
    """What the index knows about a task without reading the log."""

    __slots__ = ("tenant", "owner", "dialect", "created_at", "context_id", "state",
                 "updated_at", "seq", "snapshot", "snap_seq", "snap_alone", "lasts", "refs",
                 "bare", "log_bytes", "history_len")

    def __init__(self, meta: List[str]) -> None:
        self.tenant, self.owner, self.dialect, self.created_at = meta
        self.context_id = self.state = self.updated_at = ""
        self.seq = 0
        #: The record holding the latest stored snapshot, and the last event it includes.
        self.snapshot: Ref = (0, 0)
        self.snap_seq = 0
        #: Whether that record holds the snapshot alone (a compaction may copy it as it is).
        self.snap_alone = False
        #: Bytes of the records of events logged after the snapshot (for
        #: :func:`~.base.snapshot_due`; the snapshot's own are ``snapshot[1]``).
        self.log_bytes = 0
        #: The history's length as the runtime left it (None: as the snapshot has it).
        self.history_len: Optional[int] = None
        #: For each record holding this task's events: its last sequence number, where
        #: it is, and whether it holds nothing else (no snapshot, no meta), so that a
        #: compaction may copy it as it is.
        self.lasts: List[int] = []
        self.refs: List[Ref] = []
        self.bare: List[bool] = []


def _named(path: str, exc: OSError) -> OSError:
    """``exc`` with the store's path in its message; still an OSError, which the
    class decorator below turns into StoreUnavailable (an outage, not a bug)."""
    if isinstance(exc, LockTimeout):
        return LockTimeout(str(exc))  # its message names the store already
    return OSError(exc.errno, f"shelve store at {path}: {exc.strerror or exc}")


# OSError: the write lock timed out (recordlog.LockTimeout), or the files are gone or
# unwritable (disk full).
@outages_as_unavailable((OSError,))
class ShelveStore(DictCoordination, TaskStore):
    """See the module docstring.  ``path`` names the store: its log is ``path + ".log"``.

    ``read_only``: only read the store (``flask a2a copy-store``'s source), and
    create, change or rename nothing where it lies: its log is read without its
    lock file, and a store of the earlier format is read into a scratch log in
    a temporary folder instead of being migrated.  Writes raise :class:`StoreError`.
    """

    def __init__(self, path: str, *, read_only: bool = False) -> None:
        self.path = os.path.abspath(path)
        self.read_only = False  # (until the scratch log of an earlier-format store is filled)
        self._scratch: Optional[str] = None
        self._lock = threading.Lock()
        self._reset()
        self._base_size = 0
        try:
            if read_only:
                self._open_read_only()
                self.read_only = True
                return
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._log = RecordLog(self.path + ".log", self.path + ".lock")
            with self._lock:
                self._catch_up()
            self._base_size = self._log.size()
            if not self._tasks and os.path.exists(self.path + ".dir"):
                self._migrate()
        except (OSError, StoreError) as exc:
            if hasattr(self, "_log"):
                self._log.close()
            self._drop_scratch()
            if isinstance(exc, StoreError):
                raise
            raise StoreError(f"cannot open shelve store at {self.path}: {exc}") from exc

    def _open_read_only(self) -> None:
        """Open the log to read it alone; or, for a store of the earlier format (no
        tasks in the log, and a ``.dir`` file), fill a scratch log from its files."""
        earlier = os.path.exists(self.path + ".dir")
        if os.path.exists(self.path + ".log"):
            self._log = RecordLog(self.path + ".log", self.path + ".lock", read_only=True)
            with self._lock:
                self._catch_up()
            if self._tasks or not earlier:
                return
            self._log.close()
            self._reset()
        elif not earlier:
            raise StoreError(f"there is no shelve store at {self.path}")
        self._scratch = tempfile.mkdtemp(prefix="a2a-shelve-")
        self._log = RecordLog(os.path.join(self._scratch, "tasks.log"),
                              os.path.join(self._scratch, "tasks.lock"))
        records = self._earlier_records()
        self._write(lambda: (records, None))

    def _drop_scratch(self) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)
            self._scratch = None

    # ------------------------------------------------------------ the index

    def _reset(self) -> None:
        self._tasks: Dict[str, _Task] = {}
        #: Per (tenant, owner): (updated_at, task id) ascending, for ListTasks.
        self._order: Dict[Tuple[str, str], List[Tuple[str, str]]] = {}
        self._reset_coordination()

    def _catch_up(self) -> None:
        """Apply the records other processes appended (call under ``self._lock``)."""
        restarted, records = self._log.changes()
        if restarted:
            self._reset()
        for count, (offset, payload) in enumerate(records, 1):
            self._apply(json.loads(payload), (offset, len(payload)))
            if count % YIELD_EVERY == 0:
                cooperate()  # a big catch-up (first open, after a compaction) must not freeze the hub
        if restarted:
            self._base_size = self._log.end  # compacted (here or elsewhere): grow from here

    def _apply(self, rec: Dict[str, Any], ref: Ref) -> None:
        kind = rec["k"]
        if kind == Kind.TASK:
            self._apply_task(rec, ref)
        elif kind == Kind.SNAPSHOT:
            entry = self._tasks.get(rec["id"])
            if entry is not None:  # (else a snapshot of a task purged meanwhile)
                entry.snapshot, entry.snap_seq, entry.snap_alone = ref, rec["ss"], True
                entry.log_bytes = 0
        elif kind in _CHANGES:
            self._apply_change(_change_of(rec))
        elif kind == Kind.PURGED:
            for task_id in rec["ids"]:
                self._forget(task_id)

    def _apply_task(self, rec: Dict[str, Any], ref: Ref) -> None:
        task_id = rec["id"]
        entry = self._tasks.get(task_id)
        if "meta" in rec:
            if entry is not None:
                self._unorder(task_id, entry)
            entry = self._tasks[task_id] = _Task(rec["meta"])
        elif entry is None:
            return  # appended to a task purged meanwhile
        if rec["seq"] >= entry.seq:  # a record a compaction copied may be older than its head
            self._unorder(task_id, entry)
            entry.context_id, entry.state, entry.updated_at = rec["cx"], rec["st"], rec["up"]
            entry.seq = rec["seq"]
            entry.history_len = rec.get("hl")
            bisect.insort(self._order.setdefault((entry.tenant, entry.owner), []),
                          (entry.updated_at, task_id))
        if "task" in rec:  # ("ss": written by compactions of 0.2 development versions)
            entry.snapshot, entry.snap_seq = ref, rec.get("ss", rec["seq"])
            entry.snap_alone = False
            entry.log_bytes = 0
        elif rec["ev"] and rec["ev"][-1][0] > entry.snap_seq:
            entry.log_bytes += ref[1]
        if rec["ev"]:
            entry.lasts.append(rec["ev"][-1][0])
            entry.refs.append(ref)
            entry.bare.append("meta" not in rec and "task" not in rec)

    def _unorder(self, task_id: str, entry: _Task) -> None:
        keys = self._order.get((entry.tenant, entry.owner), [])
        at = bisect.bisect_left(keys, (entry.updated_at, task_id))
        if at < len(keys) and keys[at] == (entry.updated_at, task_id):
            del keys[at]

    def _forget(self, task_id: str) -> None:
        entry = self._tasks.pop(task_id, None)
        if entry is not None:
            self._unorder(task_id, entry)
        self._forget_coordination(task_id)

    # ------------------------------------------------------------ plumbing

    def _read(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the caught-up index (no file lock: records never change)."""
        try:
            with self._lock:
                self._catch_up()
                return fn()
        except OSError as exc:
            raise _named(self.path, exc) from exc

    def _write(self, build: Callable[[], Tuple[List[Dict[str, Any]], Any]],
               sync: bool = True) -> Any:
        """Under the file lock: catch up, let ``build`` check and make records, append them.

        ``sync``: flush to disk before returning (tasks and webhooks; leases and
        claims expire by themselves, so losing the last ones to a power cut is harmless).
        """
        if self.read_only:
            raise StoreError(f"the shelve store at {self.path} is open read-only")
        flush: Optional[Flusher] = None
        try:
            with self._lock, self._log.locked():
                self._catch_up()
                records, result = build()
                if records:
                    payloads = [dumps(rec).encode() for rec in records]
                    offsets = self._log.append(payloads)
                    for rec, offset, payload in zip(records, offsets, payloads):
                        self._apply(rec, (offset, len(payload)))
                    if self._log.size() >= max(COMPACT_MIN_BYTES, 2 * self._base_size):
                        self._compact()  # (the new file is on disk before it replaces the old)
                    elif sync:
                        flush = self._log.flusher()
            # Flushed outside the locks: other writers go on meanwhile, and one flush
            # covers every record appended before it.
            if flush is not None:
                flush()
            return result
        except OSError as exc:  # a full disk, a removed directory: say which store
            raise _named(self.path, exc) from exc

    def _payload(self, ref: Ref) -> bytes:
        return self._log.read(*ref)

    @staticmethod
    def _record(found: "_Found") -> TaskRecord:
        """The record of a task: its snapshot with the events logged since folded in."""
        (tenant, owner, dialect, created_at, seq, snap_seq, history_len), snapshot, tail = found
        task = task_of(json.loads(snapshot)["task"])
        if tail:
            later = (load_event(stored) for payload in tail
                     for event_seq, stored in json.loads(payload)["ev"] if event_seq > snap_seq)
            task = kept_history(fold(task, later), history_len)
        return TaskRecord(task, seq, tenant, owner, dialect, created_at)

    def _snapshot_of(self, task_id: str) -> Optional["_Found"]:
        """What :meth:`_record` needs, read under the index lock (records never change)."""
        entry = self._tasks.get(task_id)
        if entry is None:
            return None
        meta = (entry.tenant, entry.owner, entry.dialect, entry.created_at, entry.seq,
                entry.snap_seq, entry.history_len)
        since = bisect.bisect_right(entry.lasts, entry.snap_seq)
        return meta, self._payload(entry.snapshot), [self._payload(r) for r in entry.refs[since:]]

    # ------------------------------------------------------------ tasks and logs

    def create(self, record: TaskRecord, first_event: Event) -> None:
        task = record.task

        def build() -> Tuple[List[Dict[str, Any]], None]:
            if task.id in self._tasks:
                raise SequenceConflict(task.id)
            return [_created(record, first_event)], None

        self._write(build)
        self.notifier.notify(task.id)

    def create_claimed(self, record: TaskRecord, first_event: Event, claim: OnceClaim,
                       lease_owner: Optional[str] = None, lease_ttl: float = 0.0) -> str:
        task = record.task

        def build() -> Tuple[List[Dict[str, Any]], str]:
            # One append under the file lock: the task, the binding and the lease.
            changes, held = self._claimed_creation(claim, task.id, lease_owner, lease_ttl)
            if held != claim.value:
                return [], held
            return [_created(record, first_event),
                    *(_record_of(change) for change in changes)], held

        held: str = self._write(build)  # flushed: the binding is durable with its task
        if held == claim.value:
            self.notifier.notify(task.id)
        return held

    def load(self, task_id: str) -> Optional[TaskRecord]:
        found = self._read(lambda: self._snapshot_of(task_id))
        return None if found is None else self._record(found)

    def append(self, task_id: str, expected_seq: int, events: List[Event],
               record: TaskRecord) -> int:
        def build() -> Tuple[List[Dict[str, Any]], int]:
            entry = self._tasks.get(task_id)
            if entry is None or entry.seq != expected_seq:
                raise SequenceConflict(task_id)
            numbered = [(expected_seq + i, dump_event(e)) for i, e in enumerate(events, 1)]
            seq = expected_seq + len(events)
            due = snapshot_due(entry.snap_seq, seq, events,
                               logged=entry.log_bytes + sum(len(text) for _, text in numbered),
                               snapshot_size=entry.snapshot[1])
            return [_task_record(record, numbered, entry.created_at, snapshot=due)], seq

        seq: int = self._write(build)
        self.notifier.notify(task_id)
        return seq

    def head(self, task_id: str) -> Optional[Tuple[int, TaskState]]:
        def look() -> Optional[Tuple[int, TaskState]]:
            entry = self._tasks.get(task_id)
            return None if entry is None else (entry.seq, TaskState(entry.state))

        return self._read(look)

    def read(self, task_id: str, after_seq: int) -> Sequence[LogEntry]:
        def payloads() -> List[bytes]:
            entry = self._tasks.get(task_id)
            if entry is None:
                return []
            # The records holding the next read_slice entries, each whole: a
            # record cut short would be decoded again by the next read.
            first = bisect.bisect_right(entry.lasts, after_seq)
            stop = bisect.bisect_left(entry.lasts, max(after_seq, 0) + self.read_slice) + 1
            return [self._payload(ref) for ref in entry.refs[first:stop]]

        # Each event is its StreamResponse's text inside the record: parsing a
        # record makes one string per event, and the reader decodes (or a 1.0
        # stream sends) them one at a time (see EncodedEntries).
        return encoded_entries([pair for payload in self._read(payloads)
                                for pair in json.loads(payload)["ev"] if pair[0] > after_seq])

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        def passed() -> bool:
            entry = self._tasks.get(task_id)
            return entry is None or entry.seq > after_seq or entry.state in _TERMINAL

        self.notifier.wait_polling(task_id, lambda: bool(self._read(passed)),
                                    self._log.version, timeout, POLL_INTERVAL)

    def list_tasks(self, query: TaskQuery) -> TaskPage:
        cursor = decode_page_token(query.page_token) if query.page_token else None
        found = self._read(lambda: self._page(query, cursor))
        # The total is the index's: it is keyed by the tenant and owner of the
        # entries it lists, kept under one lock with them.
        records = [r for r in map(self._record, found[0]) if belongs(r, query)]
        more = found[2]
        return TaskPage(records, found[1],
                        encode_page_token(records[-1]) if more and records else "")

    def task_ids(self) -> List[str]:
        return self._read(lambda: list(self._tasks))

    def _page(self, query: TaskQuery, cursor: Optional[Tuple[str, str]]) -> Tuple[Any, int, bool]:
        keys = self._order.get((query.tenant, query.owner), [])
        filtered = bool(query.context_id or query.state is not None or query.updated_after)

        def wanted(key: Tuple[str, str]) -> bool:
            entry = self._tasks[key[1]]
            return ((not query.context_id or entry.context_id == query.context_id)
                    and (query.state is None or entry.state == query.state.value)
                    and (not query.updated_after or entry.updated_at >= query.updated_after))

        total = sum(1 for key in keys if wanted(key)) if filtered else len(keys)
        start = bisect.bisect_left(keys, cursor) if cursor is not None else len(keys)
        page: List[str] = []
        more = False
        for at in range(start - 1, -1, -1):
            if filtered and not wanted(keys[at]):
                continue
            if len(page) == query.page_size:
                more = True
                break
            page.append(keys[at][1])
        found = [self._snapshot_of(task_id) for task_id in page]
        return [f for f in found if f is not None], total, more

    # ------------------------------------------------------------ coordination

    # DictCoordination's, over the index's dicts: each change is written to the log as
    # a record (every process applies it as it catches up), then applied here.

    def _coordinate(self, decide: Callable[[], Decision[T]], durable: bool) -> T:
        def build() -> Tuple[List[Dict[str, Any]], T]:
            changes, result = decide()
            return [_record_of(change) for change in changes], result

        # Not durable (leases, claims, cursors): they expire by themselves or cost
        # one push sent again, so losing the last ones to a power cut is harmless.
        found: T = self._write(build, sync=durable)
        return found

    def _observe(self, look: Callable[[], T]) -> T:
        return self._read(look)

    def _log_seq(self, task_id: str) -> Optional[int]:
        entry = self._tasks.get(task_id)
        return None if entry is None else entry.seq

    # ------------------------------------------------------------ retention

    def purge(self, updated_before: str, scope: Optional[str] = None) -> int:
        def build() -> Tuple[List[Dict[str, Any]], int]:
            gone = [task_id for task_id, entry in self._tasks.items()
                    if entry.state in _TERMINAL and entry.updated_at < updated_before
                    and in_scope(entry.tenant, scope)]
            return ([{"k": Kind.PURGED, "ids": gone}] if gone else []), len(gone)

        count: int = self._write(build)
        return count

    def _compact(self) -> None:
        """Rewrite the live records to a new file (under both locks); see the module docstring."""
        now = time.time()
        claims = {key: held for key, held in self._claims.items() if held[1] >= now}
        placed: List[Tuple[_Task, _Placed]] = []
        with self._log.rewrite() as new:
            for count, (task_id, entry) in enumerate(list(self._tasks.items()), 1):
                placed.append((entry, self._rewrite_task(new, task_id, entry)))
                if count % YIELD_EVERY == 0:
                    cooperate()
            live: List[Change] = [PutTarget(task_id, t) for task_id, targets in self._targets.items()
                                  for t in targets.values()]
            live += [TakeClaim(key, owner, expires) for key, (owner, expires) in claims.items()]
            live += [HoldLeases((task_id,), owner, expires)
                     for task_id, (owner, expires) in self._leases.items()]
            for change in live:
                new.add(dumps(_record_of(change)).encode())
        # The new file is in place: point the index at it (what a process reading it
        # from the start would build, without reading it).
        for entry, (snapshot, lasts, refs) in placed:
            entry.snapshot, entry.snap_alone = snapshot, True
            entry.lasts, entry.refs, entry.bare = lasts, refs, [True] * len(refs)
            entry.log_bytes = sum(length for last, (_, length) in zip(lasts, refs)
                                  if last > entry.snap_seq)
        self._claims = claims
        self._base_size = self._log.end

    def _rewrite_task(self, new: Rewrite, task_id: str, entry: "_Task") -> "_Placed":
        """Write one task's live records to ``new``: a head (what the index keeps on
        it), its snapshot, then its events in order, copying as they are the records
        that need no merging.  Where they went, for the index."""
        fields: Dict[str, Any] = {"k": Kind.TASK, "id": task_id, "seq": entry.seq,
                                  "cx": entry.context_id, "st": entry.state,
                                  "up": entry.updated_at}
        if entry.history_len is not None:
            fields["hl"] = entry.history_len
        new.add(dumps({**fields, "ev": [],
                       "meta": [entry.tenant, entry.owner, entry.dialect,
                                entry.created_at]}).encode())
        snapshot = self._payload(entry.snapshot)
        # A snapshot that shares its record with events is decoded once, for both.
        shared = None if entry.snap_alone else json.loads(snapshot)
        if shared is not None:
            snapshot = dumps({"k": Kind.SNAPSHOT, "id": task_id, "ss": entry.snap_seq,
                              "task": shared["task"]}).encode()
        snapshot_ref = new.add(snapshot)
        lasts: List[int] = []
        refs: List[Ref] = []
        unyielded = 0  # events written since the last yield to other greenlets

        def write(payload: bytes, last: int) -> None:
            nonlocal unyielded
            unyielded += last - (lasts[-1] if lasts else 0)  # (sequence numbers have no gaps)
            lasts.append(last)
            refs.append(new.add(payload))
            if unyielded >= COMPACT_BATCH:
                cooperate()
                unyielded = 0

        for copy, run in self._event_runs(entry):
            if copy:
                ((last, ref),) = run
                write(self._payload(ref), last)
                continue
            merging: List[Any] = []
            merged_bytes = 0
            for _, ref in run:
                rec = (shared if shared is not None and ref == entry.snapshot
                       else json.loads(self._payload(ref)))
                for pair in rec["ev"]:
                    if merging and merged_bytes + _stored_length(pair[1]) > COMPACT_BATCH_BYTES:
                        write(dumps({**fields, "ev": merging}).encode(), merging[-1][0])
                        merging, merged_bytes = [], 0
                    merging.append(pair)
                    merged_bytes += _stored_length(pair[1])
                    if len(merging) == COMPACT_BATCH:
                        write(dumps({**fields, "ev": merging}).encode(), merging[-1][0])
                        merging, merged_bytes = [], 0
            if merging:
                write(dumps({**fields, "ev": merging}).encode(), merging[-1][0])
        return snapshot_ref, lasts, refs

    @staticmethod
    def _event_runs(entry: "_Task") -> List[Tuple[bool, List[Tuple[int, Ref]]]]:
        """A task's event records, oldest first, as ``(copy, [(last seq, ref), ...])``:
        a record to copy as it is, alone, or a run of records to merge.  A bare record
        is copied when it holds half a batch or more (of events or of bytes), or has no
        small neighbour to merge with (a finished task's one record is then never
        decoded again)."""
        sized = []
        previous = 0
        for last, ref, is_bare in zip(entry.lasts, entry.refs, entry.bare):
            big = last - previous >= COMPACT_BATCH // 2 or ref[1] >= COMPACT_BATCH_BYTES // 2
            sized.append((is_bare and big, is_bare, last, ref))
            previous = last
        runs: List[Tuple[bool, List[Tuple[int, Ref]]]] = []
        for big, group in itertools.groupby(sized, key=lambda each: each[0]):
            records = list(group)
            if big or (len(records) == 1 and records[0][1]):
                runs += [(True, [(last, ref)]) for _, _, last, ref in records]
            else:
                runs.append((False, [(last, ref) for _, _, last, ref in records]))
        return runs

    def compact(self) -> None:
        """Compact now (it also happens by itself as the file grows)."""
        with self._lock, self._log.locked():
            self._catch_up()
            self._compact()

    # ------------------------------------------------------------ the earlier format

    def _migrate(self) -> None:
        """Copy a store of the earlier ``dbm.dumb`` format into the log, then set it aside."""
        def build() -> Tuple[List[Dict[str, Any]], bool]:
            if self._tasks or not os.path.exists(self.path + ".dir"):
                return [], False  # another worker was first
            return self._earlier_records("; move those files away to start with an empty "
                                         "store"), True

        if self._write(build):
            for suffix in OLD_SUFFIXES:
                try:
                    os.replace(self.path + suffix, self.path + suffix + ".migrated")
                except FileNotFoundError:
                    pass  # .bak is optional; another worker may have moved it

    def _earlier_records(self, advice: str = "") -> List[Dict[str, Any]]:
        """The records of the store of the earlier format at ``path`` (see
        :func:`_read_old_shelf`), or a :class:`StoreError` naming its files."""
        try:
            return _read_old_shelf(self.path)
        except Exception as exc:  # a torn index, a missing .dat, a refused pickle
            raise StoreError(
                f"{self.path}.dir/.dat hold a shelve store of an earlier a2a_flask release "
                f"that cannot be read ({type(exc).__name__}: {exc}){advice}") from exc

    def close(self) -> None:
        super().close()
        with self._lock:
            self._log.close()
        self._drop_scratch()


def _stored_length(stored: Any) -> int:
    """About how many bytes an event takes in a record: its JSON text (or, as
    shelve files of 0.2's development kept it, its parsed JSON)."""
    return len(stored) if isinstance(stored, str) else len(dumps(stored))


def _created(record: TaskRecord, first_event: Event) -> Dict[str, Any]:
    """The log record of a new task, its log ``first_event`` alone."""
    rec = _task_record(record, [(record.seq, dump_event(first_event))], record.created_at)
    rec["meta"] = [record.tenant, record.owner, record.dialect, record.created_at]
    return rec


def _task_record(record: TaskRecord, events: List[Tuple[int, Any]],
                 created_at: str, *, snapshot: bool = True) -> Dict[str, Any]:
    """A task's events (numbered), what the index keeps on it and, with ``snapshot``,
    the task itself, as ``record`` leaves them: one record, so all there or not at all."""
    outline = record.outline
    rec = {"k": Kind.TASK, "id": outline.id, "seq": record.seq, "ev": events,
           "cx": outline.context_id, "st": outline.status.state.value,
           "up": outline.status.timestamp or created_at, "hl": len(outline.history)}
    if snapshot:
        rec["task"] = task_json(record.task)
    return rec


def _read_old_shelf(path: str) -> List[Dict[str, Any]]:
    """The records that rebuild a store of the earlier format (tasks, webhooks, leases).

    Its pickles are read by :func:`~.oldpickle.load_record`, which admits only
    a2a_flask's record classes, and each value must be of the kind its key says:
    else :class:`StoreError` naming the file and the key.  Only reads: the files
    are opened read-only and nothing is written to them.
    """
    records: List[Dict[str, Any]] = []
    db: Any = dbm.dumb.open(path, "r")
    try:
        keys = sorted(key.decode("utf-8") for key in db.keys())
        present = set(keys)

        def value(key: str, kind: Any) -> Any:
            where = f"{path}.dat (key {key!r})"
            found = load_record(db[key.encode("utf-8")], where)
            if not isinstance(found, kind):
                raise StoreError(f"{where} holds a {type(found).__name__} where the "
                                 f"earlier format kept a {getattr(kind, '__name__', kind)}")
            return found

        for key in keys:
            if key.startswith("t:"):
                old: TaskRecord = value(key, TaskRecord)
                task_id = old.task.id
                events = [(seq, dump_event(value(f"e:{task_id}:{seq}", _EVENT_TYPES)))
                          for seq in range(1, old.seq + 1) if f"e:{task_id}:{seq}" in present]
                rec = _task_record(old, events, old.created_at)
                rec["meta"] = [old.tenant, old.owner, old.dialect, old.created_at]
                records.append(rec)
            elif key.startswith("l:"):
                owner, expires = value(key, tuple)  # type: Tuple[str, float]
                records.append(_record_of(HoldLeases((key[2:],), owner, expires)))
        for key in keys:
            if key.startswith("p:"):
                targets: Dict[str, PushTarget] = value(key, dict)
                for t in targets.values():
                    if not isinstance(t, PushTarget):
                        raise StoreError(f"{path}.dat (key {key!r}) holds a "
                                         f"{type(t).__name__} where a webhook belongs")
                    records.append(_record_of(PutTarget(key[2:], t)))
    finally:
        db.close()
    return records


#: The record kinds that hold a coordination change.
_CHANGES = frozenset({Kind.PUSH, Kind.PUSH_DELETED, Kind.PUSH_PROGRESS, Kind.CLAIM,
                      Kind.CLAIM_RELEASED, Kind.LEASE, Kind.LEASE_RELEASED})


def _record_of(change: Change) -> Dict[str, Any]:
    """The log record of a coordination change (see :class:`Kind` for the fields)."""
    if isinstance(change, PutTarget):
        t = change.target
        return {"k": Kind.PUSH, "id": change.task_id, "cfg": encode(t.config), "d": t.dialect,
                "o": t.owner, "ds": t.delivered_seq, "f": t.failures, "g": t.gave_up}
    if isinstance(change, DropTarget):
        return {"k": Kind.PUSH_DELETED, "id": change.task_id, "c": change.config_id}
    if isinstance(change, MoveCursor):
        return {"k": Kind.PUSH_PROGRESS, "id": change.task_id, "c": change.config_id,
                "ds": change.delivered_seq, "f": change.failures, "g": change.gave_up}
    if isinstance(change, TakeClaim):
        return {"k": Kind.CLAIM, "key": change.key, "o": change.owner, "x": change.expires}
    if isinstance(change, DropClaim):
        return {"k": Kind.CLAIM_RELEASED, "key": change.key}
    if isinstance(change, HoldLeases):
        return {"k": Kind.LEASE, "ids": list(change.task_ids), "o": change.owner,
                "x": change.expires}
    return {"k": Kind.LEASE_RELEASED, "id": change.task_id}


def _change_of(rec: Dict[str, Any]) -> Change:
    """The coordination change a log record holds (its kind is in :data:`_CHANGES`)."""
    kind = rec["k"]
    if kind == Kind.PUSH:
        return PutTarget(rec["id"], PushTarget(decode(TaskPushNotificationConfig, rec["cfg"]),
                                               rec["d"], rec["o"], rec["ds"], rec["f"], rec["g"]))
    if kind == Kind.PUSH_DELETED:
        return DropTarget(rec["id"], rec["c"])
    if kind == Kind.PUSH_PROGRESS:
        return MoveCursor(rec["id"], rec["c"], rec["ds"], rec["f"], rec["g"])
    if kind == Kind.CLAIM:
        return TakeClaim(rec["key"], rec["o"], rec["x"])
    if kind == Kind.CLAIM_RELEASED:
        return DropClaim(rec["key"])
    if kind == Kind.LEASE:
        return HoldLeases(tuple(rec["ids"]), rec["o"], rec["x"])
    return DropLease(rec["id"])
