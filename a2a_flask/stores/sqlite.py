"""A store in an SQLite database (WAL mode): many workers of one host, no service needed.

Each process keeps one connection, used under a lock: SQLite calls do not
yield to gevent anyway, and one connection per greenlet would cost thousands
of file handles.  Appends run in ``BEGIN IMMEDIATE`` transactions that check
the expected sequence number, so writers in different processes never lose an
update.  An append inserts its events, moves the task's row on, and stores the
task snapshot (in a table of its own) only now and then
(:func:`~.base.snapshot_due`, counting the bytes logged since the last one);
:meth:`SQLiteStore.load` folds the events logged after the stored snapshot and
keeps the history as long as the runtime left it, so an event (a chunk, a
message to an open task) costs the same at any task length.
A file of a2a_flask 0.1 (the snapshot in the task's row) or 0.2 (no byte
counts) is moved to this schema when first opened.
Waiters wake at once for writes made in this process and notice other
processes' commits through ``PRAGMA data_version`` within the poll interval.
"""
from __future__ import annotations

import os
import sqlite3
import threading
import time
from typing import Any, Iterator, List, Optional, Sequence, Set, Tuple

from ..concurrency import off_the_hub
from ..protocol.errors import StoreUnavailable
from ..protocol.models import TERMINAL_STATES, TaskState
from .base import (
    Event,
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
    report_outage,
    snapshot_due,
)
from .schema import (SHARED_TABLES, SQLITE_SIZES, SQLITE_SNAPSHOTS, SQLITE_TASKS, TASKS_BY_UPDATE,
                     sqlite_column, sqlite_index, sqlite_table)
from .serial import (dump_event, dump_target, dump_task, encoded_entries, load_event,
                     load_target, load_task)

#: How often a waiter looks for commits made by other processes (seconds).
POLL_INTERVAL = 0.02

#: The task columns added to files of 0.2 (:data:`~.schema.SQLITE_SIZES`), as
#: ``ALTER TABLE ... ADD COLUMN`` takes them.
SIZE_COLUMNS = tuple(sqlite_column(column) for column in SQLITE_SIZES)

#: The tasks table (``{name}``: the migration builds it under another name first).
#: The tables are described in :mod:`.schema`, shared with the SQL store.
TASKS_TABLE = "\n" + sqlite_table(SQLITE_TASKS, "{name}")

TASKS_INDEX = "\n" + sqlite_index(TASKS_BY_UPDATE)

SCHEMA = (TASKS_TABLE.format(name="tasks") + TASKS_INDEX + "\n"
          + "".join(sqlite_table(table) for table in (SQLITE_SNAPSHOTS, *SHARED_TABLES)))


# Every OperationalError is the environment's doing (locked past the timeout, disk
# I/O, a file removed or made read-only); our SQL is fixed, so none is a caller's.
@outages_as_unavailable((sqlite3.OperationalError,))
class SQLiteStore(TaskStore):
    """See the module docstring.  ``path`` is the database file."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._open()
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open sqlite store at {self.path}: {exc}") from exc

    def _open(self) -> None:
        """Connect and create the schema, waiting out another process's write lock
        (a worker that boots while another one writes must not fail to boot)."""
        for pause in _backoff():
            try:
                self._connect()
                self._db.executescript(SCHEMA)
                self._migrate()
                return
            except sqlite3.OperationalError as exc:
                if hasattr(self, "_db"):
                    self._db.close()
                if not _is_busy(exc):
                    raise
            time.sleep(pause)
        raise StoreError(f"sqlite store at {self.path} stayed locked for {BUSY_TIMEOUT}s")

    def _migrate(self) -> None:
        """Bring a file of an earlier release to the current schema, once, in one
        transaction: from 0.1 (the snapshot in the task's row, maybe no
        ``snap_seq``), and from 0.2 (no :data:`SIZE_COLUMNS`)."""
        columns = self._task_columns()
        if "snapshot" not in columns and "log_bytes" in columns:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            columns = self._task_columns()  # unless another process migrated it meanwhile
            if "snapshot" in columns:
                snap_seq = "COALESCE(snap_seq, seq)" if "snap_seq" in columns else "seq"
                self._db.execute("INSERT OR REPLACE INTO snapshots SELECT id, snapshot FROM tasks")
                self._db.execute(TASKS_TABLE.format(name="tasks_migrated"))
                self._db.execute(
                    "INSERT INTO tasks_migrated (id, tenant, owner, dialect, context_id, state, "
                    "created_at, updated_at, seq, snap_seq) SELECT id, tenant, owner, dialect, "
                    f"context_id, state, created_at, updated_at, seq, {snap_seq} FROM tasks")
                self._db.execute("DROP TABLE tasks")
                self._db.execute("ALTER TABLE tasks_migrated RENAME TO tasks")
                self._db.execute(TASKS_INDEX)
            elif "log_bytes" not in columns:
                for column in SIZE_COLUMNS:
                    self._db.execute(f"ALTER TABLE tasks ADD COLUMN {column}")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _task_columns(self) -> Set[str]:
        return {row[1] for row in self._db.execute("PRAGMA table_info(tasks)")}

    def _connect(self) -> None:
        # A connection must not cross a fork (gunicorn --preload): each process opens its own.
        self._pid = os.getpid()
        self._lock = threading.Lock()
        # timeout=0: SQLite's own busy wait sleeps in C and would stall every
        # greenlet of a gevent worker; _Transaction retries with a cooperative sleep.
        self._db = sqlite3.connect(self.path, timeout=0, isolation_level=None,
                                   check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        # One cursor for every statement (all run under the lock): a new cursor
        # per call would also leave a weak reference per call in the connection,
        # pruned only every 200 cursors.
        self._cursor = self._db.cursor()

    # ------------------------------------------------------------ plumbing

    def _query(self, sql: str, args: Tuple[Any, ...] = ()) -> List[Any]:
        if self._pid != os.getpid():
            self._connect()
        for pause in _backoff():
            with self._lock:
                try:
                    return self._cursor.execute(sql, args).fetchall()
                except sqlite3.OperationalError as exc:
                    if not _is_busy(exc):
                        raise
            time.sleep(pause)  # readers rarely wait in WAL mode (recovery, checkpoints)
        raise self._unavailable("busy")

    def _unavailable(self, how: str) -> StoreUnavailable:
        cause = StoreError(f"sqlite store at {self.path} stayed {how} for {BUSY_TIMEOUT}s")
        report_outage(self, cause)
        error = StoreUnavailable()
        error.__cause__ = cause
        return error

    def _transaction(self) -> "_Transaction":
        return _Transaction(self)

    def _data_version(self) -> int:
        version: int = self._query("PRAGMA data_version")[0][0]
        return version

    def _record(self, row: Any) -> TaskRecord:
        """A record from a ``_COLUMNS`` row: its snapshot plus the events logged after it."""
        task_id, tenant, owner, dialect, created_at, seq, snapshot, snap_seq, history_len = row
        task = load_task(snapshot)
        if snap_seq < seq:
            rows = self._query("SELECT event FROM events WHERE task_id=? AND seq>? AND seq<=? "
                               "ORDER BY seq", (task_id, snap_seq, seq))
            task = kept_history(fold(task, (load_event(text) for (text,) in rows)), history_len)
        return TaskRecord(task, seq, tenant, owner, dialect, created_at)

    # ------------------------------------------------------------ contract

    def create(self, record: TaskRecord, first_event: Event) -> None:
        with self._transaction() as db:
            self._insert(db, record, first_event)
        self.notifier.notify(record.task.id)

    def create_with(self, record: TaskRecord, first_event: Event, events: List[Event],
                    after: TaskRecord, release_owner: Optional[str] = None) -> int:
        task_id = record.task.id
        with self._transaction() as db:  # one commit: the task, its first events, the lease
            self._insert(db, record, first_event)
            seq = self._append(db, task_id, record.seq, events, after)
            if release_owner is not None:
                self._release(db, task_id, release_owner)
        self.notifier.notify(task_id)
        return seq

    def create_claimed(self, record: TaskRecord, first_event: Event, claim: OnceClaim,
                       lease_owner: Optional[str] = None, lease_ttl: float = 0.0) -> str:
        task_id = record.task.id
        with self._transaction() as db:  # one commit: the binding, the task, its lease
            held = self._bind(db, claim.key, claim.value, claim.ttl)
            if held != claim.value:
                return held  # (nothing changed)
            self._insert(db, record, first_event)  # a conflict rolls the binding back
            if lease_owner is not None and not self._acquire(db, task_id, lease_owner,
                                                             lease_ttl):
                raise SequenceConflict(task_id)
        self.notifier.notify(task_id)
        return held

    @staticmethod
    def _insert(db: sqlite3.Cursor, record: TaskRecord, first_event: Event) -> None:
        task = record.task
        snapshot = dump_task(task)
        try:
            db.execute(
                "INSERT INTO tasks (id, tenant, owner, dialect, context_id, state, "
                "created_at, updated_at, seq, snap_seq, snap_bytes, log_bytes, history_len) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,0,?)",
                (task.id, record.tenant, record.owner, record.dialect, task.context_id,
                 task.status.state.value, record.created_at, record.updated_at, record.seq,
                 record.seq, len(snapshot), len(task.history)),
            )
        except sqlite3.IntegrityError:
            raise SequenceConflict(task.id) from None
        db.execute("INSERT INTO snapshots VALUES (?,?)", (task.id, snapshot))
        db.execute("INSERT INTO events VALUES (?,?,?)",
                   (task.id, record.seq, dump_event(first_event)))

    def load(self, task_id: str) -> Optional[TaskRecord]:
        rows = self._query(f"SELECT {_COLUMNS} FROM {_TASKS} WHERE id=?", (task_id,))
        return self._record(rows[0]) if rows else None

    def head(self, task_id: str) -> Optional[Tuple[int, TaskState]]:
        rows = self._query("SELECT seq, state FROM tasks WHERE id=?", (task_id,))
        return (rows[0][0], TaskState(rows[0][1])) if rows else None

    def append(self, task_id: str, expected_seq: int, events: List[Event],
               record: TaskRecord) -> int:
        with self._transaction() as db:
            seq = self._append(db, task_id, expected_seq, events, record)
        self.notifier.notify(task_id)
        return seq

    def append_released(self, task_id: str, expected_seq: int, events: List[Event],
                        record: TaskRecord, owner: str) -> int:
        with self._transaction() as db:  # one commit: the last events and the lease
            seq = self._append(db, task_id, expected_seq, events, record)
            self._release(db, task_id, owner)
        self.notifier.notify(task_id)
        return seq

    @staticmethod
    def _append(db: sqlite3.Cursor, task_id: str, expected_seq: int, events: List[Event],
                record: TaskRecord) -> int:
        logged = [dump_event(event) for event in events]
        outline = record.outline
        row = db.execute("SELECT seq, snap_seq, snap_bytes, log_bytes FROM tasks WHERE id=?",
                         (task_id,)).fetchone()
        if row is None or row[0] != expected_seq:
            raise SequenceConflict(task_id)
        _, snap_seq, snap_bytes, log_bytes = row
        seq = expected_seq + len(events)
        db.executemany("INSERT INTO events VALUES (?,?,?)",
                       [(task_id, expected_seq + i, text) for i, text in enumerate(logged, 1)])
        log_bytes += sum(len(text) for text in logged)
        if snapshot_due(snap_seq, seq, events, logged=log_bytes, snapshot_size=snap_bytes):
            snapshot = dump_task(record.task)
            snap_seq, snap_bytes, log_bytes = seq, len(snapshot), 0
            db.execute("UPDATE snapshots SET snapshot=? WHERE task_id=?", (snapshot, task_id))
        db.execute("UPDATE tasks SET state=?, updated_at=?, seq=?, snap_seq=?, snap_bytes=?, "
                   "log_bytes=?, history_len=? WHERE id=?",
                   (outline.status.state.value, outline.status.timestamp or "", seq,
                    snap_seq, snap_bytes, log_bytes, len(outline.history), task_id))
        return seq

    def read(self, task_id: str, after_seq: int) -> Sequence[LogEntry]:
        rows = self._query("SELECT seq, event FROM events WHERE task_id=? AND seq>? ORDER BY seq"
                           " LIMIT ?", (task_id, after_seq, self.read_slice))
        return encoded_entries(rows)

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        def passed() -> bool:
            rows = self._query("SELECT seq, state FROM tasks WHERE id=?", (task_id,))
            return not rows or rows[0][0] > after_seq or rows[0][1] in _TERMINAL

        self.notifier.wait_polling(task_id, passed, self._data_version, timeout, POLL_INTERVAL)

    def list_tasks(self, query: TaskQuery) -> TaskPage:
        where = ["tenant=?", "owner=?"]
        args: List[Any] = [query.tenant, query.owner]
        if query.context_id:
            where.append("context_id=?")
            args.append(query.context_id)
        if query.state is not None:
            where.append("state=?")
            args.append(query.state.value)
        if query.updated_after:
            where.append("updated_at>=?")
            args.append(query.updated_after)
        condition = " AND ".join(where)
        total = self._query(f"SELECT COUNT(*) FROM tasks WHERE {condition}", tuple(args))[0][0]
        page_args = list(args)
        if query.page_token:
            stamp, task_id = decode_page_token(query.page_token)
            condition += " AND (updated_at<? OR (updated_at=? AND id<?))"
            page_args += [stamp, stamp, task_id]
        rows = self._query(
            f"SELECT {_COLUMNS} FROM {_TASKS} WHERE {condition} ORDER BY updated_at DESC, id DESC LIMIT ?",
            tuple(page_args) + (query.page_size + 1,),
        )
        records = [r for r in map(self._record, rows[:query.page_size]) if belongs(r, query)]
        more = len(rows) > query.page_size
        return TaskPage(records, total, encode_page_token(records[-1]) if more and records else "")

    def task_ids(self) -> List[str]:
        return [task_id for (task_id,) in self._query("SELECT id FROM tasks")]

    def put_push_target(self, task_id: str, target: PushTarget) -> None:
        with self._transaction() as db:
            db.execute(
                "INSERT INTO push_targets VALUES (?,?,(SELECT COALESCE(MAX(position),0)+1 "
                "FROM push_targets WHERE task_id=?),?,?,?,?) ON CONFLICT(task_id, id) "
                "DO UPDATE SET target=excluded.target, delivered_seq=excluded.delivered_seq, "
                "failures=excluded.failures, gave_up=excluded.gave_up",
                (task_id, target.config.id, task_id, dump_target(target), target.delivered_seq,
                 target.failures, int(target.gave_up)),
            )

    def push_targets(self, task_id: str) -> List[PushTarget]:
        rows = self._query("SELECT target, delivered_seq, failures, gave_up FROM push_targets "
                           "WHERE task_id=? ORDER BY position", (task_id,))
        return [load_target(text, delivered, failures, bool(gave_up))
                for text, delivered, failures, gave_up in rows]

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM push_targets WHERE task_id=? AND id=?", (task_id, config_id))

    def record_push_progress(self, task_id: str, config_id: str, delivered_seq: int,
                             failures: int, gave_up: bool) -> None:
        with self._transaction() as db:
            db.execute("UPDATE push_targets SET delivered_seq=?, failures=?, gave_up=? "
                       "WHERE task_id=? AND id=?",
                       (delivered_seq, failures, int(gave_up), task_id, config_id))

    def push_backlog(self) -> List[str]:
        rows = self._query("SELECT DISTINCT p.task_id FROM push_targets p JOIN tasks t "
                           "ON t.id = p.task_id WHERE p.gave_up = 0 AND p.delivered_seq < t.seq")
        return [task_id for (task_id,) in rows]

    def claim(self, key: str, owner: str, ttl: float) -> bool:
        now = time.time()
        with self._transaction() as db:
            db.execute("INSERT INTO claims VALUES (?,?,?) ON CONFLICT(key) DO UPDATE SET "
                       "owner=excluded.owner, expires=excluded.expires "
                       "WHERE claims.owner=excluded.owner OR claims.expires<?",
                       (key, owner, now + ttl, now))
            changed: int = db.execute("SELECT changes()").fetchone()[0]
            return changed > 0

    def claim_once(self, key: str, value: str, ttl: float) -> str:
        with self._transaction() as db:  # BEGIN IMMEDIATE: the insert and the read are one
            return self._bind(db, key, value, ttl)

    @staticmethod
    def _bind(db: sqlite3.Cursor, key: str, value: str, ttl: float) -> str:
        """:meth:`claim_once` in the transaction ``db``: the value bound."""
        now = time.time()
        db.execute("INSERT INTO claims VALUES (?,?,?) ON CONFLICT(key) DO UPDATE SET "
                   "owner=excluded.owner, expires=excluded.expires "
                   "WHERE claims.expires<?", (key, value, now + ttl, now))
        held: str = db.execute("SELECT owner FROM claims WHERE key=?", (key,)).fetchone()[0]
        return held

    def release_claim(self, key: str, owner: str) -> None:
        with self._transaction() as db:
            db.execute("DELETE FROM claims WHERE key=? AND owner=?", (key, owner))

    def acquire_lease(self, task_id: str, owner: str, ttl: float) -> bool:
        with self._transaction() as db:
            return self._acquire(db, task_id, owner, ttl)

    @staticmethod
    def _acquire(db: sqlite3.Cursor, task_id: str, owner: str, ttl: float) -> bool:
        """:meth:`acquire_lease` in the transaction ``db``."""
        now = time.time()
        # Set-if-absent: another owner's live lease is left alone (no row changes).
        db.execute("INSERT INTO leases VALUES (?,?,?) ON CONFLICT(task_id) DO UPDATE SET "
                   "owner=excluded.owner, expires=excluded.expires "
                   "WHERE leases.owner=excluded.owner OR leases.expires<?",
                   (task_id, owner, now + ttl, now))
        changed: int = db.execute("SELECT changes()").fetchone()[0]
        return changed > 0

    def renew_leases(self, owner: str, task_ids: List[str], ttl: float) -> None:
        if not task_ids:
            return
        expires = time.time() + ttl
        with self._transaction() as db:
            db.executemany("UPDATE leases SET expires=? WHERE task_id=? AND owner=?",
                           [(expires, task_id, owner) for task_id in task_ids])

    def release_lease(self, task_id: str, owner: Optional[str]) -> None:
        with self._transaction() as db:
            self._release(db, task_id, owner)

    @staticmethod
    def _release(db: sqlite3.Cursor, task_id: str, owner: Optional[str]) -> None:
        db.execute("DELETE FROM leases WHERE task_id=? AND (owner=? OR ? IS NULL)",
                   (task_id, owner, owner))

    def expired_leases(self) -> List[str]:
        rows = self._query("SELECT task_id FROM leases WHERE expires<?", (time.time(),))
        return [task_id for (task_id,) in rows]

    def purge(self, updated_before: str, scope: Optional[str] = None) -> int:
        terminal = tuple(_TERMINAL)
        marks = ",".join("?" * len(terminal))
        with self._transaction() as db:
            gone = [task_id for (task_id, tenant) in db.execute(
                f"SELECT id, tenant FROM tasks WHERE updated_at<? AND state IN ({marks})",
                (updated_before, *terminal)) if in_scope(tenant, scope)]
            for table, column in (("events", "task_id"), ("push_targets", "task_id"),
                                  ("leases", "task_id"), ("snapshots", "task_id"),
                                  ("tasks", "id")):
                db.executemany(f"DELETE FROM {table} WHERE {column}=?", [(t,) for t in gone])
            db.execute("DELETE FROM claims WHERE expires<?", (time.time(),))
        return len(gone)

    def close(self) -> None:
        super().close()
        with self._lock:
            self._db.close()


_TERMINAL = frozenset(state.value for state in TERMINAL_STATES)

#: What :meth:`SQLiteStore._record` reads, and from where.
_COLUMNS = "id, tenant, owner, dialect, created_at, seq, snapshot, snap_seq, history_len"
_TASKS = "tasks JOIN snapshots ON snapshots.task_id = tasks.id"


#: How long a call waits for another process's lock before the store counts as
#: unavailable (seconds): long enough for any normal write, short enough that a
#: caller hears "task store unavailable" within seconds.
BUSY_TIMEOUT = 5.0


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc)
    return "locked" in text or "busy" in text


def _backoff() -> Iterator[float]:
    """Pauses between retries: 0.5 ms doubling to 20 ms, for BUSY_TIMEOUT in all."""
    deadline = time.monotonic() + BUSY_TIMEOUT
    pause = 0.0005
    while time.monotonic() < deadline:
        yield pause
        pause = min(pause * 2, 0.02)


class _Transaction:
    """``with store._transaction() as db:`` an IMMEDIATE transaction under the lock."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def __enter__(self) -> sqlite3.Cursor:
        store = self._store
        if store._pid != os.getpid():
            store._connect()
        for pause in _backoff():
            store._lock.acquire()
            try:
                store._cursor.execute("BEGIN IMMEDIATE")
                return store._cursor
            except sqlite3.OperationalError as exc:
                store._lock.release()
                if not _is_busy(exc):
                    raise
            except BaseException:
                store._lock.release()
                raise
            # Another process writes: wait without holding the lock or the CPU.
            time.sleep(pause)
        raise store._unavailable("locked")

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        db = self._store._db
        try:
            # Off the hub: a commit may checkpoint the write-ahead log (an fsync and
            # megabytes copied), which would hold every greenlet of the worker.
            off_the_hub(self._store._cursor.execute, "ROLLBACK" if exc_type else "COMMIT")
        except sqlite3.Error:
            # A failed COMMIT leaves the transaction open: end it, or every
            # later BEGIN would fail on this connection.
            if db.in_transaction:
                self._store._cursor.execute("ROLLBACK")
            raise
        finally:
            self._store._lock.release()

