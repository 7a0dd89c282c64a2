"""A store in PostgreSQL or MySQL/MariaDB, on SQLAlchemy Core (``pip install a2a-flask[sql]``).

Many workers on many hosts, on the database the app already has:
``A2A_STORE=postgresql://user@host/db`` (``?schema=name`` for a PostgreSQL
schema), ``mysql://user@host/db`` (``mariadb://`` alike), or
``A2A(store=engine)`` with an existing :class:`sqlalchemy.engine.Engine`
(``A2A(store=db.engine)`` under Flask-SQLAlchemy).  The tables
(:mod:`a2a_flask.stores.sql_schema`) are created on first use.

Writing is appending: an event is a row of ``a2a_events``; the task row holds
the log's head (the compare-and-set of every append) and a snapshot that is
rewritten only when the log reaches a power of two and when the task ends
(:func:`~.base.snapshot_due`, for a store that counts nothing).
:meth:`SQLStore.load` folds the events after the snapshot into it
(:func:`~a2a_flask.protocol.events.apply_event`), so an event costs the same
whatever the size of its task.  On the engines the store makes itself, the hot
statements (create, append, leases) run compiled once on the driver's cursor
(:mod:`.sql_raw`); a task's terminal append also drops its lease.

Wake-ups: on PostgreSQL an append sends ``NOTIFY`` in its own transaction and
each process listens on one connection (:mod:`.sql_listen`); on MySQL, which
has no such thing, waiters poll the task row with a back-off.  Writes made in
this process wake local waiters at once on both.

Time is the database's (leases and claims expire by its clock), so the hosts'
clocks need not agree.  The URL's drivers wait cooperatively under ``gunicorn
-k gevent`` (a slow query holds its greenlet, not the worker): psycopg 3 (its
wait goes through the patched ``select``; pg8000 when psycopg is missing) and
PyMySQL (pure Python on gevent's sockets).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import threading
import time
from contextlib import contextmanager, nullcontext
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine, Row

from ..concurrency import Worker
from ..protocol.events import Event
from ..protocol.models import TERMINAL_STATES, TaskState
from ..version import install_extra
from .base import (
    LogEntry,
    OnceClaim,
    PushTarget,
    SequenceConflict,
    StoreError,
    StoreLimits,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    Tables,
    belongs,
    decode_page_token,
    encode_page_token,
    fold,
    in_scope,
    outages_as_unavailable,
    safe_url,
    snapshot_due,
)
from .serial import (dump_event, dump_target, dump_task, encoded_entries, load_event,
                     load_target, load_task)
from .sql_deadline import CUT, Hung, Watchdog, cutter, driver_socket, shut_down
from .sql_hosts import WHERE, Hosts, hosts_of, read_only, split_url
from .sql_listen import Listener, load_driver
from .sql_raw import Compiled, Session, session
from .sql_schema import create_all, make_metadata, metadata
from .sql_tls import (pg8000_tls_options, share_one_tls_context_pg8000,
                      share_one_tls_context_pymysql)

log = logging.getLogger("a2a_flask.stores.sql")

#: How many more connections than ``A2A_STORE_POOL_SIZE`` a process may open under a
#: burst (readers; the writers' pool has no overflow).
MAX_OVERFLOW = 10
#: How much longer than the server's own statement timeout the client waits for an
#: answer before it cuts the connection (:mod:`.sql_deadline`): a slow statement
#: ends with the server's error, and the connection lives on; a hung one is cut.
CUT_MARGIN = 1.0
#: A pooled connection idle longer than this is pinged before use (seconds).
PING_AFTER = 1.0
#: Task heads remembered for waiters (the cache is dropped whole past this size).
HEADS_KEPT = 10000
#: A waiter re-reads this often even when a LISTEN wake-up was lost (seconds).
SAFETY_POLL = 1.0
#: MySQL waiters poll from POLL_MIN, doubling to POLL_MAX while nothing changes.
POLL_MIN = 0.005
POLL_MAX = 0.1

_TERMINAL = frozenset(state.value for state in TERMINAL_STATES)
_SCHEMES = {"postgresql": "postgresql+psycopg", "postgres": "postgresql+psycopg",
            "mysql": "mysql+pymysql", "mariadb": "mysql+pymysql"}

__all__ = ["SQLStore", "open_sql_store", "metadata", "create_all", "is_sql_url"]


def is_sql_url(scheme: str) -> bool:
    """Whether a store URL's scheme names a SQL database (``postgresql+psycopg2`` too)."""
    return scheme.split("+", 1)[0] in _SCHEMES


def open_sql_store(url: str, *, limits: Optional[StoreLimits] = None) -> "SQLStore":
    """A store on the database a URL names, with engines of its own: one for readers
    (``limits.pool_size`` connections, plus :data:`MAX_OVERFLOW`) and one for running
    tasks' own writes and lease renewals (``limits.writer_pool_size``).

    ``postgresql://`` picks psycopg 3 (pg8000 if psycopg is not installed),
    ``mysql://`` and ``mariadb://`` PyMySQL; a
    URL naming its driver (``postgresql+psycopg2://``) keeps it.  A PostgreSQL
    URL may name several hosts, as libpq reads them (:mod:`.sql_hosts`): every
    connection goes to the first with a writable session (a failover).  Our query
    parameters: ``schema`` (PostgreSQL), ``pool_size``, ``max_overflow``,
    ``pool_timeout`` (they win over ``limits``); the rest go to the driver.
    Nothing is sent to the database here: the first store call connects (and
    creates the tables), so the app starts while the database is down.
    """
    limits = limits or StoreLimits()
    hosts: Optional[Hosts] = None
    if urlsplit(url).scheme.split("+", 1)[0] in ("postgresql", "postgres"):
        try:  # several hosts (libpq's spellings), each port, the session kept
            url, hosts = split_url(url)
        except ValueError as exc:
            raise StoreError(f"cannot use the SQL store URL {safe_url(url)}: {exc}") from None
    elif "," in urlsplit(url).netloc.rpartition("@")[2]:
        raise StoreError(f"cannot use the SQL store URL {safe_url(url)}: a MySQL or MariaDB "
                         "URL names one host (put a proxy in front of a cluster)")
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    try:
        schema = query.pop("schema", None)
        pool_size = int(query.pop("pool_size", limits.pool_size))
        max_overflow = int(query.pop("max_overflow", MAX_OVERFLOW))
        pool_timeout = float(query.pop("pool_timeout", limits.timeout))
    except ValueError as exc:
        raise StoreError(f"bad pool setting in store URL {safe_url(url)}: {exc}") from None
    scheme = _SCHEMES.get(parts.scheme, parts.scheme)
    if scheme == "postgresql+psycopg" and parts.scheme != scheme and not _has("psycopg"):
        scheme = "postgresql+pg8000"  # pure Python, slower (three round trips a query)
    tls: Tuple[str, Optional[str]] = ("prefer", None)
    if scheme.endswith("+pg8000"):
        try:
            tls = pg8000_tls_options(query)
        except ValueError as exc:
            raise StoreError(f"bad TLS setting in store URL {safe_url(url)}: {exc}") from None
    clean = urlunsplit((scheme, parts.netloc, parts.path, urlencode(query), ""))
    driver = scheme.split("+", 1)[-1]
    # A timeout the URL gives its driver (``?connect_timeout=10``) wins over ours.
    connect_args = {key: value for key, value in _connect_args(driver, limits.timeout).items()
                    if key not in query}

    def engine(size: int, overflow: int) -> Engine:
        try:
            # Autocommit sessions: a read is one round trip (no BEGIN, no ROLLBACK on
            # return); writes open their transaction explicitly (SQLStore._connect).
            made = sa.create_engine(clean, pool_size=size, max_overflow=overflow,
                                    pool_timeout=pool_timeout, pool_recycle=3600,
                                    isolation_level="AUTOCOMMIT",
                                    skip_autocommit_rollback=True, connect_args=connect_args)
        except (ImportError, sa.exc.NoSuchModuleError) as exc:
            raise StoreError(f"cannot use the SQL store URL {safe_url(url)}: {exc}; "
                             + install_extra("sql")) from None
        except (sa.exc.ArgumentError, ValueError) as exc:  # a bad port, say
            raise StoreError(f"cannot use the SQL store URL {safe_url(url)}: {exc}") from None
        if driver == "pymysql":
            share_one_tls_context_pymysql(made)
        elif driver == "pg8000":
            share_one_tls_context_pg8000(made, *tls, hosts=hosts)
        return made

    readers = engine(pool_size, max_overflow)
    writers = engine(limits.writer_pool_size, 0)
    return SQLStore(readers, schema=schema, owns_engine=True, explicit_transactions=True,
                    writer_engine=writers, timeout=limits.timeout)


def _connect_args(driver: str, timeout: float) -> Dict[str, Any]:
    """The driver's own bounds: connecting and, where it has one, reading (seconds)."""
    if driver == "pg8000":  # a socket timeout: connecting and every read
        return {"timeout": timeout + CUT_MARGIN}
    if driver in ("psycopg", "psycopg2"):  # libpq counts whole seconds, 2 at least
        return {"connect_timeout": max(2, math.ceil(timeout))}
    if driver == "pymysql":
        # UTC sessions: UNIX_TIMESTAMP(NOW(6)) never meets a daylight-saving fold.
        # Row lock waits end with the server's error before the client's read timeout.
        return {"connect_timeout": timeout, "read_timeout": timeout + CUT_MARGIN,
                "write_timeout": timeout + CUT_MARGIN, "charset": "utf8mb4",
                "init_command": "SET time_zone='+00:00', "
                                f"innodb_lock_wait_timeout={max(1, math.ceil(timeout))}"}
    return {}


def bound_every_call(engine: Engine, timeout: float, watchdog: Watchdog) -> None:
    """Bound each statement on ``engine`` by ``timeout`` seconds, twice over: the
    server ends a slow one (PostgreSQL's ``statement_timeout`` and ``lock_timeout``,
    set on each new connection), and the :class:`~.sql_deadline.Watchdog` cuts the
    connection of one the server never answers (``timeout`` + :data:`CUT_MARGIN`),
    which the pool then drops."""
    from sqlalchemy import event

    if engine.dialect.name == "postgresql":
        millis = max(1, int(timeout * 1000))

        def set_timeouts(dbapi_connection: Any, record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(f"SET statement_timeout = {millis}")
            cursor.execute(f"SET lock_timeout = {millis}")
            cursor.close()
            if not getattr(dbapi_connection, "autocommit", True):
                dbapi_connection.commit()  # a SET inside the driver's implicit transaction

        event.listen(engine, "connect", set_timeouts)

    def arm(conn: Connection, *_: Any) -> None:
        fairy = conn.connection
        fairy.info["a2a_deadline"] = watchdog.arm(cutter(fairy.info, fairy.dbapi_connection))

    def disarm(conn: Connection, *_: Any) -> None:
        token = conn.connection.info.pop("a2a_deadline", None)
        if token is not None:
            watchdog.disarm(token)

    def failed(context: Any) -> None:
        conn = context.connection
        if conn is None or conn.invalidated:
            return
        disarm(conn)
        if conn.connection.info.get(CUT):
            context.is_disconnect = True  # cut by the watchdog: never used again

    event.listen(engine, "before_cursor_execute", arm)
    event.listen(engine, "after_cursor_execute", disarm)
    event.listen(engine, "handle_error", failed)


def _drop_read_only(context: Any) -> None:
    """A read-only session behind a pooled connection (a standby, a primary fenced
    for a switchover: a failover) counts as a disconnect: the pool drops its
    connections, and new ones look for the primary again.  So does a socket's
    own error, which pg8000 lets out as it came (a connection reset by a server
    that stopped)."""
    if read_only(context.original_exception) or isinstance(context.original_exception,
                                                           OSError):
        context.is_disconnect = True


def drop_read_only_sessions(engine: Engine) -> None:
    """Make ``engine`` drop connections whose session turned out read-only, or whose
    socket broke under the driver (see :func:`_drop_read_only`; once per engine: an
    app's engine may back several stores)."""
    from sqlalchemy import event

    if not event.contains(engine, "handle_error", _drop_read_only):
        event.listen(engine, "handle_error", _drop_read_only)


def ping_when_idle(engine: Engine, idle: float, watchdog: Optional[Watchdog] = None) -> None:
    """Ping a pooled connection before use when it sat idle ``idle`` seconds or more.

    ``pool_pre_ping`` pings before *every* use, which costs a round trip per
    store call under load, when connections never sit long enough to go stale.
    A connection that fails its ping is replaced (the pool retries); one that
    breaks while busy invalidates the pool, so the store call fails once with
    "task store unavailable" and the next ones reconnect.  With a ``watchdog``
    the ping is bounded like a statement (a connection it had to cut is replaced),
    and a connection the watchdog cut earlier is never lent again.
    """
    from sqlalchemy import event

    def mark(dbapi_connection: Any, record: Any, *_: Any) -> None:
        record.info["a2a_idle_since"] = time.monotonic()

    def ping(dbapi_connection: Any) -> None:
        cursor = dbapi_connection.cursor()
        cursor.execute("SELECT 1")
        cursor.fetchall()
        cursor.close()

    def check(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if record.info.get(CUT):
            raise sa.exc.DisconnectionError("cut off after a statement hung")
        if time.monotonic() - record.info.get("a2a_idle_since", 0.0) < idle:
            return
        fd = driver_socket(dbapi_connection)
        hung: List[bool] = []

        def cut() -> None:
            hung.append(True)
            if fd is not None:
                shut_down(fd)

        try:
            with watchdog.guard(cut) if watchdog is not None else nullcontext():
                ping(dbapi_connection)
        except Exception as exc:
            if hung:
                # No answer at all: the database hangs, and a new connection would
                # only hang in its turn.  Not a DisconnectionError, which the pool
                # answers by connecting again: the call ends now (the pool drops
                # this connection on the way out).
                raise Hung("no answer to a ping in time") from exc
            raise sa.exc.DisconnectionError(str(exc)) from exc

    event.listen(engine, "connect", mark)
    event.listen(engine, "checkin", mark)
    event.listen(engine, "checkout", check)


def _listening_hosts(engine: Engine) -> Optional[Hosts]:
    """The hosts a PostgreSQL engine's URL names when it names them in its query
    (:mod:`.sql_hosts`), for the ``LISTEN`` connection to follow the primary; None
    for a URL with one host in the usual place."""
    url = engine.url
    if not set(url.query).intersection(WHERE):
        return None
    try:
        return hosts_of(url.host, url.port, url.query).for_listening()
    except ValueError as exc:
        raise StoreError(f"bad host list in the SQL store's URL "
                         f"{safe_url(url.render_as_string(hide_password=True))}: {exc}") from None


def _head_suffix(seq: int, terminal: bool) -> str:
    """What follows the task id in a NOTIFY payload: `` <seq> <1 if terminal>``."""
    return f" {seq} {int(terminal)}"


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


class _Outage(Exception):
    """The database cannot be reached or lent no connection in time."""


@outages_as_unavailable((_Outage,))
class SQLStore(TaskStore):
    """See the module docstring.

    :param engine: a SQLAlchemy engine on PostgreSQL or MySQL/MariaDB.
    :param schema: the PostgreSQL schema (created if missing) or MySQL database
        of the tables; None for the connection's default.
    :param owns_engine: dispose of the engine on :meth:`close` (not an app's engine);
        the store then also bounds every statement on it (:func:`bound_every_call`),
        and pings connections that sat idle (:func:`ping_when_idle`).
    :param create_tables: create missing tables on first use (off when migrations do it).
    :param explicit_transactions: the engine's sessions autocommit and writes
        say ``BEGIN``/``COMMIT`` themselves (the engines :func:`open_sql_store` makes).
    :param writer_engine: an engine on the same database for running tasks' own
        writes and lease renewals (a pool readers cannot exhaust); None: ``engine``.
    :param timeout: seconds any one statement may take (see :func:`bound_every_call`).

    Nothing is sent to the database until the first call (:meth:`prepare`).
    """

    def __init__(self, engine: Engine, *, schema: Optional[str] = None,
                 owns_engine: bool = False, create_tables: bool = True,
                 explicit_transactions: bool = False, writer_engine: Optional[Engine] = None,
                 timeout: float = StoreLimits.timeout) -> None:
        if not isinstance(engine, Engine):
            raise StoreError(f"a SQL store needs a SQLAlchemy Engine, not {engine!r}")
        self.engine = engine
        self.dialect = engine.dialect.name
        if self.dialect not in ("postgresql", "mysql", "mariadb"):
            raise StoreError(f"the SQL store runs on PostgreSQL or MySQL/MariaDB, "
                             f"not {self.dialect}")
        self.postgres = self.dialect == "postgresql"
        if self.postgres:
            load_driver()  # the LISTEN connection's driver, imported before any greenlet waits
            drop_read_only_sessions(engine)
        self.schema = schema
        self._owns_engine = owns_engine
        self._explicit = explicit_transactions
        meta = metadata if schema is None else make_metadata(schema)
        prefix = f"{schema}." if schema else ""
        self.tasks, self.events, self.leases, self.targets, self.claims = (
            meta.tables[prefix + name] for name in
            ("a2a_tasks", "a2a_events", "a2a_leases", "a2a_push_targets", "a2a_claims"))
        self._now: Any = sa.literal_column("extract(epoch from clock_timestamp())" if self.postgres
                                      else "UNIX_TIMESTAMP(NOW(6))")
        self._channel = f"a2a_{schema or 'tasks'}"[:63]
        #: Statements built once and executed with parameters (see :meth:`_statement`).
        self._statements: Dict[Any, Any] = {}
        #: The hot statements compiled for the driver (see :mod:`.sql_raw`).
        self._compiled: Dict[Any, Compiled] = {}
        #: Our own autocommit engines: the hot statements skip SQLAlchemy's execution.
        self._raw = explicit_transactions and owns_engine
        #: Tasks whose terminal append here dropped their lease (see :meth:`release_lease`).
        self._unleased: set[str] = set()
        #: The highest log head seen per task (local appends and notifications).
        self._heads: Dict[str, Tuple[int, bool]] = {}
        self._pid = os.getpid()
        self._listen_at = _listening_hosts(engine) if self.postgres else None
        self._listener: Optional[Listener] = None
        self._listener_lock = threading.Lock()
        self._warn_if_blocking()
        self.writer_engine = writer_engine or engine
        self.timeout = timeout
        self._watchdog = Watchdog(timeout + CUT_MARGIN)
        if owns_engine:
            for own in {id(e): e for e in (engine, self.writer_engine)}.values():
                if self.postgres:
                    drop_read_only_sessions(own)
                ping_when_idle(own, PING_AFTER, self._watchdog)
                bound_every_call(own, timeout, self._watchdog)
        self.prepared = not create_tables

    def prepare(self) -> None:
        """Create the missing tables, once, at the first call (a database that is down
        at start-up only makes calls answer "task store unavailable" until it is up)."""
        try:
            create_all(self.engine, self.schema)
        except (sa.exc.OperationalError, sa.exc.InterfaceError, sa.exc.TimeoutError) as exc:
            raise _Outage(_reason(exc)) from None
        except OSError as exc:  # pg8000 lets a socket's error out as it came
            raise _Outage(f"{type(exc).__name__}: {exc}") from None
        except sa.exc.DBAPIError as exc:
            if exc.orig is not None and read_only(exc.orig):  # a standby, mid-failover
                raise _Outage(_reason(exc)) from None
            raise self._cannot_create(exc) from None
        except sa.exc.SQLAlchemyError as exc:
            raise self._cannot_create(exc) from None

    def create_tables(self) -> Tables:
        """Create the missing tables (and the PostgreSQL schema) now, whatever
        ``create_tables`` said: ``flask a2a create-tables``."""
        names = tuple(table.name for table in
                      (self.tasks, self.events, self.leases, self.targets, self.claims))
        try:
            before = set(sa.inspect(self.engine).get_table_names(schema=self.schema))
            create_all(self.engine, self.schema)
        except sa.exc.SQLAlchemyError as exc:
            raise self._cannot_create(exc) from None
        where = safe_url(self.engine.url.render_as_string(hide_password=True))
        return Tables(names, tuple(name for name in names if name not in before),
                      where + (f" (schema {self.schema})" if self.schema else ""))

    def _cannot_create(self, exc: BaseException) -> StoreError:
        return StoreError(f"cannot create the tables of the SQL store at "
                          f"{safe_url(self.engine.url.render_as_string(hide_password=True))}: "
                          f"{_reason(exc)}")

    # ------------------------------------------------------------ plumbing

    def _warn_if_blocking(self) -> None:
        from ..concurrency import gevent_active

        if self.engine.dialect.driver == "psycopg2" and gevent_active():
            import importlib

            extensions = importlib.import_module("psycopg2.extensions")
            if extensions.get_wait_callback() is None:
                log.warning("a2a sql store: psycopg2 without a wait callback blocks the whole "
                            "gevent worker during every query; use postgresql+pg8000:// or "
                            "install psycogreen's patch_psycopg()")

    @contextmanager
    def _connect(self, write: bool = False, one_statement: bool = False,
                 writer: bool = False) -> Iterator[Connection]:
        """A pooled connection (in a transaction committed at the end when ``write``);
        connection failures, a statement cut off and an exhausted pool become an
        outage (the store's methods raise :class:`~a2a_flask.StoreUnavailable`).

        ``one_statement``: the write is a single statement, atomic by itself, so
        an autocommit session needs no BEGIN and COMMIT around it (two round trips).
        ``writer``: a running task's own write or lease, on the writers' engine.
        """
        engine = self._engine(writer)
        with self._errors(engine):
            if not self._explicit:
                with (engine.begin() if write else engine.connect()) as conn:
                    yield conn
            else:
                with engine.connect() as conn:
                    if not write or one_statement:
                        yield conn
                        return
                    conn.exec_driver_sql("BEGIN")
                    try:
                        yield conn
                    except BaseException:
                        _roll_back(conn)
                        raise
                    conn.exec_driver_sql("COMMIT")

    @contextmanager
    def _session(self, transaction: bool = False, writer: bool = False) -> Iterator[Session]:
        """Like :meth:`_connect`, for the hot statements on the driver's cursor
        (:mod:`.sql_raw`; our own engines only): a transaction when ``transaction``."""
        engine = self._engine(writer)
        with self._errors(engine), session(engine, self._watchdog, transaction) as lent:
            yield lent

    def _engine(self, writer: bool) -> Engine:
        """The writers' or the readers' engine, disposed of first in a forked child."""
        if self._pid != os.getpid():  # forked (gunicorn --preload): sockets are the parent's
            self.engine.dispose(close=False)
            self.writer_engine.dispose(close=False)
            self._pid = os.getpid()
        return self.writer_engine if writer else self.engine

    @contextmanager
    def _errors(self, engine: Engine) -> Iterator[None]:
        """Connection failures, a statement cut off and an exhausted pool as an
        outage; missing tables or rights as a :class:`StoreError`."""
        try:
            yield
        except sa.exc.TimeoutError:
            raise _Outage("no database connection came free "
                             f"within {engine.pool.timeout()}s (pool "  # type: ignore[attr-defined]
                             f"{engine.pool.size()})") from None  # type: ignore[attr-defined]
        except (sa.exc.OperationalError, sa.exc.InterfaceError, Hung) as exc:
            raise _Outage(_reason(exc)) from None
        except OSError as exc:  # pg8000 lets a socket's error out as it came
            raise _Outage(f"{type(exc).__name__}: {exc}") from None
        except sa.exc.DBAPIError as exc:
            if exc.orig is not None and read_only(exc.orig):  # mid-failover: a standby
                raise _Outage(_reason(exc)) from None
            if isinstance(exc, sa.exc.ProgrammingError):  # missing tables, missing rights
                raise StoreError(f"task store unusable: {_reason(exc)} (tables: "
                                 "a2a_flask.stores.sql.create_all)") from None
            raise

    def _fold(self, row: Row[Any], events: Sequence[str],
              snapshot: Optional[str] = None) -> TaskRecord:
        """The record of a task row plus the events logged after its snapshot."""
        task = fold(load_task(row.snapshot if snapshot is None else snapshot),
                    (load_event(text) for text in events))
        keep = row.history_len
        if len(task.history) > keep:  # the runtime trimmed the front of the history
            task = dataclasses.replace(task, history=task.history[len(task.history) - keep:])
        return TaskRecord(task, row.seq, row.tenant, row.owner, row.dialect, row.created_at)

    def _record_columns(self) -> List[Any]:
        t = self.tasks.c
        return [t.id, t.tenant, t.owner, t.dialect, t.created_at, t.seq, t.snap_seq,
                t.history_len, t.snapshot]

    def _tails(self, conn: Connection, rows: Sequence[Row[Any]]) -> Dict[str, List[str]]:
        """The events after each row's snapshot, up to the row's head, in one query."""
        behind = [row for row in rows if row.seq > row.snap_seq]
        tails: Dict[str, List[str]] = {row.id: [] for row in rows}
        if not behind:
            return tails
        e = self.events.c
        bounds = sa.or_(*(sa.and_(e.task_id == row.id, e.seq > row.snap_seq, e.seq <= row.seq)
                          for row in behind))
        for task_id, text in conn.execute(
                sa.select(e.task_id, e.event).where(bounds).order_by(e.task_id, e.seq)):
            tails[task_id].append(text)
        return tails

    def _statement(self, key: Any, build: Callable[[], Any]) -> Any:
        """The statement ``build`` makes, built once per ``key``.

        The hot paths (create, append, leases) run statements built once, with
        bind parameters, instead of building one per call: building a statement,
        and the cache key SQLAlchemy derives from it to find its compiled form,
        cost more of a worker's CPU than the round trip to the database.
        """
        statement = self._statements.get(key)
        if statement is None:
            statement = self._statements[key] = build()
        return statement

    def _prebuilt(self, key: Any, build: Callable[[], Any]) -> Compiled:
        """:meth:`_statement` compiled for the driver, once (:mod:`.sql_raw`)."""
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = Compiled(self._statement(key, build), self.engine)
        return compiled

    # ------------------------------------------------------------ tasks and logs

    def create(self, record: TaskRecord, first_event: Event) -> None:
        self._create(record, [first_event], record)

    def create_with(self, record: TaskRecord, first_event: Event, events: List[Event],
                    after: TaskRecord, release_owner: Optional[str] = None) -> int:
        if not self._raw:  # an app's own engine: the calls this stands for
            return super().create_with(record, first_event, events, after, release_owner)
        # One statement (PostgreSQL) or transaction (MySQL); a task that ends here drops
        # its lease with it, as a terminal append does.
        self._create(record, [first_event, *events], after)
        return after.seq

    def create_claimed(self, record: TaskRecord, first_event: Event, claim: OnceClaim,
                       lease_owner: Optional[str] = None, lease_ttl: float = 0.0) -> str:
        if self._raw:
            # The usual case, a new key: one statement (PostgreSQL) or transaction
            # (MariaDB), the binding's primary key deciding between racing sends.
            # A key bound already (a retry), or anything else in the way, rolls it all
            # back, and the calls it stands for sort it out.
            try:
                if self._create_claimed(record, first_event, claim, lease_owner, lease_ttl):
                    return claim.value
            except sa.exc.IntegrityError:
                pass
        return super().create_claimed(record, first_event, claim, lease_owner, lease_ttl)

    def _create_claimed(self, record: TaskRecord, first_event: Event, claim: OnceClaim,
                        lease_owner: Optional[str], lease_ttl: float) -> bool:
        """The binding, the task and its lease in one statement or transaction: False
        when PostgreSQL found another owner's live lease (the binding is undone);
        :class:`sqlalchemy.exc.IntegrityError` when a row is there (nothing written)."""
        task = record.task
        row = self._task_row(record, record)
        values: Dict[str, Any] = {"v_" + name: value for name, value in row.items()}
        values.update(c_key=claim.key, c_value=claim.value, c_ttl=claim.ttl,
                      l_owner=lease_owner, l_ttl=lease_ttl)
        texts = [dump_event(first_event)]
        leased = lease_owner is not None
        if self.postgres:
            statement = self._prebuilt(("create_claimed", leased),
                                       lambda: self._build_create_claimed(row, leased))
            with self._session() as lent:
                rows, _ = lent.execute(statement, {**values, **self._log_parameters(
                    record.seq, texts, False)})
            if not rows:  # the lease was another owner's: nothing but the binding written
                self.release_claim(claim.key, claim.value)
                return False
        else:
            with self._session(transaction=True) as lent:
                lent.execute(self._prebuilt("claim_insert", self._claim_insert_c), values)
                lent.execute(self._prebuilt(("insert_task", *row),
                                            lambda: self._insert_task(row)), values)
                lent.many(self._prebuilt("insert_event", self._insert_event),
                          self._event_rows(task.id, record.seq, texts))
                if leased:
                    lent.execute(self._prebuilt("lease_insert", self._lease_insert), values)
        self._woken(task.id, record.seq, False)
        return True

    def _build_create_claimed(self, row: Dict[str, Any], leased: bool) -> Any:
        """PostgreSQL: the statement that binds a key, creates a task and (``leased``)
        takes its lease, where no other owner's lease is live (no row then)."""
        claimed = self._claim_insert_c().cte("claimed")
        if not leased:
            made = self._insert_task(row).returning(self.tasks.c.id).cte("made")
        else:
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            lease = self.leases.c
            upsert = pg_insert(self.leases).values(
                task_id=sa.bindparam("v_id"), owner=sa.bindparam("l_owner"),
                expires=self._now + sa.bindparam("l_ttl", type_=sa.Float))
            taken = upsert.on_conflict_do_update(
                index_elements=["task_id"],
                set_={"owner": upsert.excluded.owner, "expires": upsert.excluded.expires},
                where=sa.or_(lease.owner == upsert.excluded.owner, lease.expires < self._now),
            ).returning(lease.task_id).cte("taken")
            columns = list(row)
            made = (sa.insert(self.tasks).from_select(columns, sa.select(*[
                sa.bindparam("v_" + name, type_=self.tasks.c[name].type) for name in columns])
                .where(sa.exists(sa.select(taken.c.task_id))))
                .returning(self.tasks.c.id).cte("made"))
        return self._log_and_notify(made).add_cte(claimed)

    def _claim_insert_c(self) -> Any:
        """The binding's INSERT for :meth:`create_claimed` (``c_key``, ``c_value``, ``c_ttl``)."""
        return sa.insert(self.claims).values(
            key=sa.bindparam("c_key"), owner=sa.bindparam("c_value"),
            expires=self._now + sa.bindparam("c_ttl", type_=sa.Float))

    def _lease_insert(self) -> Any:
        """MariaDB: a new task's lease (``v_id``, ``l_owner``, ``l_ttl``)."""
        return self.leases.insert().values(
            task_id=sa.bindparam("v_id"), owner=sa.bindparam("l_owner"),
            expires=self._now + sa.bindparam("l_ttl", type_=sa.Float))

    @staticmethod
    def _task_row(record: TaskRecord, after: TaskRecord) -> Dict[str, Any]:
        """The task row of a task made as ``after`` (``record`` at creation)."""
        task = after.task
        return dict(id=task.id, tenant=record.tenant, owner=record.owner, dialect=record.dialect,
                    context_id=task.context_id, state=after.state.value,
                    created_at=record.created_at, updated_at=after.updated_at, seq=after.seq,
                    snap_seq=after.seq, history_len=len(task.history), snapshot=dump_task(task))

    def _create(self, record: TaskRecord, events: List[Event], after: TaskRecord) -> None:
        """Create the task as ``after`` (``record`` at creation, then the rest of
        ``events``), its log ``events`` from ``record.seq`` on."""
        task = after.task
        row = self._task_row(record, after)
        texts = [dump_event(event) for event in events]
        terminal = after.state.terminal
        values: Dict[str, Any] = {"v_" + name: value for name, value in row.items()}
        try:
            if self._raw and self.postgres:  # one statement: one round trip
                statement = self._prebuilt(("create", terminal), lambda: self._build_create(
                    row, terminal))
                with self._session() as lent:
                    lent.execute(statement, {**values, **self._log_parameters(
                        record.seq, texts, terminal)})
            elif self._raw:
                with self._session(transaction=True) as lent:
                    lent.execute(self._prebuilt(("insert_task", *row),
                                                lambda: self._insert_task(row)), values)
                    lent.many(self._prebuilt("insert_event", self._insert_event),
                              self._event_rows(task.id, record.seq, texts))
                    if terminal:
                        lent.execute(self._prebuilt(*self._release(False)),
                                     {"w_task_id": task.id})
            else:
                with self._connect(write=True) as conn:
                    conn.execute(self._statement("insert_task", self.tasks.insert), row)
                    conn.execute(self._statement("insert_events", self.events.insert), [
                        {"task_id": task.id, "seq": record.seq + i, "event": text}
                        for i, text in enumerate(texts)])
                    self._send_notify(conn, task.id, after.seq, terminal)
        except sa.exc.IntegrityError:
            raise SequenceConflict(task.id) from None
        if terminal:
            self._lease_dropped(task.id)
        self._woken(task.id, after.seq, terminal)

    def _build_create(self, row: Dict[str, Any], terminal: bool) -> Any:
        """PostgreSQL: the statement that creates a task (and drops its lease when
        it is created finished)."""
        made = self._insert_task(row).returning(self.tasks.c.id).cte("made")
        return self._dropping_lease(self._log_and_notify(made), made, terminal)

    def _dropping_lease(self, statement: Any, written: Any, terminal: bool) -> Any:
        """PostgreSQL: ``statement`` that, when the task it wrote (``written``) ends,
        also drops its lease: nothing runs a finished task, and its runner's release
        then costs nothing (:meth:`release_lease`)."""
        if not terminal:
            return statement
        dropped = sa.delete(self.leases).where(
            self.leases.c.task_id.in_(sa.select(written.c.id))).cte("dropped")
        return statement.add_cte(dropped)

    def _lease_dropped(self, task_id: str) -> None:
        """Remember that a write here dropped ``task_id``'s lease (ours only)."""
        if not self._raw:
            return
        if len(self._unleased) >= HEADS_KEPT:
            self._unleased.clear()  # forgetting costs a release its round trip
        self._unleased.add(task_id)

    def _insert_task(self, row: Dict[str, Any]) -> Any:
        """An INSERT of a task row with the columns of ``row`` bound as ``v_<name>``."""
        return sa.insert(self.tasks).values({name: sa.bindparam("v_" + name) for name in row})

    def _insert_event(self) -> Any:
        """An INSERT of one event row, bound as ``v_task_id``, ``v_seq``, ``v_event``."""
        return sa.insert(self.events).values(
            {name: sa.bindparam("v_" + name) for name in ("task_id", "seq", "event")})

    @staticmethod
    def _event_rows(task_id: str, first_seq: int, texts: List[str]) -> List[Dict[str, Any]]:
        """The parameters of :meth:`_insert_event` for events ``texts``, the first
        at ``first_seq``."""
        return [{"v_task_id": task_id, "v_seq": first_seq + i, "v_event": text}
                for i, text in enumerate(texts)]

    def _log_and_notify(self, written: Any) -> Any:
        """PostgreSQL: one statement that logs events for the task a data-modifying
        CTE ``written`` returns (none if it returns no row) and notifies listeners;
        it yields a row when the task was written.  The events travel as one JSON
        array of their texts (:meth:`_log_parameters`), numbered from the first
        one's sequence number, so the statement's text is the same for any
        number of them (and a JSON array is cheaper to send than a text array,
        whose quoting the driver does in Python)."""
        logged = (sa.func.json_array_elements_text(
            sa.cast(sa.bindparam("a2a_events", type_=sa.Text), sa.JSON))
            .table_valued("value", with_ordinality="n").render_derived(name="logged"))
        first: Any = sa.bindparam("a2a_first", type_=sa.Integer)
        added = (sa.insert(self.events)
                 .from_select(["task_id", "seq", "event"],
                              sa.select(written.c.id,
                                        sa.cast(first + logged.c.n - 1, sa.Integer),
                                        logged.c.value)
                              .select_from(written).join(logged, sa.true()))
                 .cte("added"))
        head: Any = sa.bindparam("a2a_head", type_=sa.Text)
        return (sa.select(sa.func.pg_notify(self._channel, written.c.id + head))
                .select_from(written).add_cte(added))

    @staticmethod
    def _log_parameters(first_seq: int, texts: List[str], terminal: bool) -> Dict[str, Any]:
        """The parameters of :meth:`_log_and_notify`'s statement for events ``texts``,
        the first at ``first_seq``."""
        return {"a2a_first": first_seq, "a2a_events": json.dumps(texts, ensure_ascii=False),
                "a2a_head": _head_suffix(first_seq + len(texts) - 1, terminal)}

    def load(self, task_id: str) -> Optional[TaskRecord]:
        with self._connect() as conn:
            rows = conn.execute(self._statement("load", self._build_load),
                                {"w_id": task_id}).all()
        if not rows:
            return None
        first = rows[0]  # the snapshot's "at" is snap_seq, below every later event's
        return self._fold(first, [row.body for row in rows[1:]], first.body)

    def _build_load(self) -> Any:
        # One statement (one snapshot of the data, one round trip): the task row
        # with its snapshot as "body", then the events after it, each as a row
        # carrying the task's columns again (short) and the event as "body".
        t, e = self.tasks.c, self.events.c
        head = [t.id, t.tenant, t.owner, t.dialect, t.created_at, t.seq, t.snap_seq,
                t.history_len]
        snapshot = sa.select(*head, t.snapshot.label("body"), t.snap_seq.label("at"))
        tail = (sa.select(*head, e.event.label("body"), e.seq.label("at"))
                .join_from(self.tasks, self.events, e.task_id == t.id)
                .where(e.seq > t.snap_seq, e.seq <= t.seq))
        task_id: Any = sa.bindparam("w_id")
        return sa.union_all(snapshot.where(t.id == task_id),
                            tail.where(t.id == task_id)).order_by(sa.literal_column("at"))

    def append(self, task_id: str, expected_seq: int, events: List[Event],
               record: TaskRecord) -> int:
        t = self.tasks.c
        seq = record.seq
        outline = record.outline
        state = outline.status.state
        changes: Dict[str, Any] = {"seq": seq, "state": state.value,
                                   "history_len": len(outline.history)}
        if outline.status.timestamp:
            changes["updated_at"] = outline.status.timestamp
        # The append reads nothing first, so the rule that counts nothing: when the
        # log passes a power of two, the task ends or an event replaces it.
        # Otherwise the snapshot is not even serialised, nor its streamed chunks folded.
        if snapshot_due(None, seq, events):
            changes["snap_seq"] = seq
            changes["snapshot"] = dump_task(record.task)
        texts = [dump_event(event) for event in events]

        def build_move() -> Any:
            return (sa.update(self.tasks)
                    .where(t.id == sa.bindparam("w_id"), t.seq == sa.bindparam("w_seq"))
                    .values({name: sa.bindparam("v_" + name) for name in changes}))

        parameters = {"w_id": task_id, "w_seq": expected_seq,
                      **{"v_" + name: value for name, value in changes.items()}}
        if self._raw and self.postgres:
            # Compare-and-set, log and NOTIFY in one statement: atomic without a
            # transaction around it, one round trip instead of five.
            statement = self._prebuilt(("append", state.terminal, *changes),
                                       lambda: self._build_append(build_move(), state.terminal))
            with self._session(writer=True) as lent:
                done, _ = lent.execute(statement, {
                    **parameters, **self._log_parameters(expected_seq + 1, texts,
                                                         state.terminal)})
            if not done:
                raise SequenceConflict(task_id)
        elif self._raw:
            with self._session(transaction=True, writer=True) as lent:
                _, moved = lent.execute(self._prebuilt(("move", *changes), build_move),
                                        parameters)
                if moved != 1:
                    raise SequenceConflict(task_id)
                lent.many(self._prebuilt("insert_event", self._insert_event),
                          self._event_rows(task_id, expected_seq + 1, texts))
                if state.terminal:
                    lent.execute(self._prebuilt(*self._release(False)),
                                 {"w_task_id": task_id})
        else:
            with self._connect(write=True, writer=True) as conn:
                if conn.execute(self._statement(("move", *changes), build_move),
                                parameters).rowcount != 1:
                    raise SequenceConflict(task_id)
                conn.execute(self._statement("insert_events", self.events.insert), [
                    {"task_id": task_id, "seq": expected_seq + i, "event": text}
                    for i, text in enumerate(texts, 1)])
                self._send_notify(conn, task_id, seq, state.terminal)
        if state.terminal:
            self._lease_dropped(task_id)
        self._woken(task_id, seq, state.terminal)
        return seq

    def _build_append(self, move: Any, terminal: bool) -> Any:
        """PostgreSQL: compare-and-set ``move`` (an UPDATE of the task row), log and
        NOTIFY, and when the task ends drop its lease (:meth:`_dropping_lease`)."""
        moved = move.returning(self.tasks.c.id).cte("moved")
        return self._dropping_lease(self._log_and_notify(moved), moved, terminal)

    def head(self, task_id: str) -> Optional[Tuple[int, TaskState]]:
        t = self.tasks.c
        statement = self._statement("head", lambda: sa.select(t.seq, t.state).where(
            t.id == sa.bindparam("w_id")))
        with self._connect() as conn:
            row = conn.execute(statement, {"w_id": task_id}).first()
        return None if row is None else (row.seq, TaskState(row.state))

    def read(self, task_id: str, after_seq: int) -> Sequence[LogEntry]:
        e = self.events.c
        statement = self._statement("read", lambda: (
            sa.select(e.seq, e.event)
            .where(e.task_id == sa.bindparam("w_id"), e.seq > sa.bindparam("w_after"))
            .order_by(e.seq).limit(sa.bindparam("w_limit", type_=sa.Integer))))
        with self._connect() as conn:
            rows = conn.execute(statement, {"w_id": task_id, "w_after": after_seq,
                                            "w_limit": self.read_slice}).all()
        return encoded_entries(rows)

    # ------------------------------------------------------------ wake-ups

    def _send_notify(self, conn: Connection, task_id: str, seq: int, terminal: bool) -> None:
        if self.postgres:  # delivered at commit, together with the rows
            conn.execute(sa.select(sa.func.pg_notify(
                self._channel, task_id + _head_suffix(seq, terminal))))

    def _woken(self, task_id: str, seq: int, terminal: bool) -> None:
        """A task's log reached ``seq`` (here, or on another host: a notification):
        remember it, so waiters need not ask the database, and wake them."""
        heads = self._heads
        known = heads.get(task_id)
        if known is None or known[0] < seq:
            if len(heads) >= HEADS_KEPT:
                heads.clear()  # a cache, not a record: forgetting only costs a query
            heads[task_id] = (seq, terminal)
        self.notifier.notify(task_id)

    def _notified(self, payload: str) -> None:
        """A NOTIFY payload: "task id, seq, terminal flag" (older form: the id alone)."""
        parts = payload.rsplit(" ", 2)
        if len(parts) == 3 and parts[1].isdigit():
            self._woken(parts[0], int(parts[1]), parts[2] == "1")
        else:
            self.notifier.notify(payload)

    def _ensure_listener(self) -> Optional[Listener]:
        """One LISTEN connection per process (PostgreSQL), started by the first waiter."""
        listener = self._listener
        if listener is not None and listener._pid == os.getpid():
            return listener
        with self._listener_lock:
            listener = self._listener
            if listener is None or listener._pid != os.getpid():
                listener = Listener(self.engine, self._channel, self._notified,
                                    lambda: self.closed, self.timeout + CUT_MARGIN,
                                    hosts=self._listen_at)
                self._listener = listener
                Worker(listener.run, name="a2a-sql-listener")
        return listener

    def _passed(self, task_id: str, after_seq: int) -> bool:
        known = self._heads.get(task_id)
        if known is not None and (known[0] > after_seq or known[1]):
            return True  # logs only grow: no need to ask
        t = self.tasks.c
        with self._connect() as conn:
            row = conn.execute(sa.select(t.seq, t.state).where(t.id == task_id)).first()
        return row is None or row.seq > after_seq or row.state in _TERMINAL

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        listener = self._ensure_listener() if self.postgres else None
        if listener is not None and listener.ready.is_set():
            # The clock as "version": re-read every SAFETY_POLL in case a wake-up was lost.
            self.notifier.wait_polling(task_id, lambda: self._passed(task_id, after_seq),
                                        time.monotonic, timeout, SAFETY_POLL)
            return
        # MySQL, or LISTEN not (yet, or no longer) in force: poll with a back-off.
        deadline = time.monotonic() + timeout
        pause = POLL_MIN
        while True:
            # The ticket lives only for this round: the notifier drops the task's
            # entry when its last waiter leaves.
            with self.notifier.ticket(task_id) as ticket:
                if self._passed(task_id, after_seq):
                    return
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                woken = ticket.wait(min(pause, remaining))
                if woken and ticket.woken:
                    return  # TaskLog.wake: nothing written, the waiter is to return
            # A local write means the task is active again: look soon.
            pause = POLL_MIN if woken else min(pause * 2, POLL_MAX)

    # ------------------------------------------------------------ listing

    def list_tasks(self, query: TaskQuery) -> TaskPage:
        t = self.tasks.c
        where = [*self._exactly(t.tenant, query.tenant), *self._exactly(t.owner, query.owner)]
        if query.context_id:
            where.append(t.context_id == query.context_id)
        if query.state is not None:
            where.append(t.state == query.state.value)
        if query.updated_after:
            where.append(t.updated_at >= query.updated_after)
        page_where = list(where)
        if query.page_token:
            stamp, last_id = decode_page_token(query.page_token)
            page_where.append(sa.or_(t.updated_at < stamp,
                                     sa.and_(t.updated_at == stamp, t.id < last_id)))
        with self._connect() as conn:
            total = conn.execute(sa.select(sa.func.count()).select_from(self.tasks)
                                 .where(*where)).scalar_one()
            rows = conn.execute(sa.select(*self._record_columns()).where(*page_where)
                                .order_by(t.updated_at.desc(), t.id.desc())
                                .limit(query.page_size + 1)).all()
            page = rows[:query.page_size]
            tails = self._tails(conn, page)
        records = [r for r in (self._fold(row, tails[row.id]) for row in page)
                   if belongs(r, query)]
        more = len(rows) > query.page_size
        return TaskPage(records, total, encode_page_token(records[-1]) if more and records else "")

    def _exactly(self, column: Any, value: str) -> List[Any]:
        """``column = value``, byte for byte.  MySQL's and MariaDB's ``utf8mb4_bin``
        pads with spaces before it compares (``'alice' = 'alice '``): there the
        lengths must match too.  The index on the column still serves the search."""
        if self.postgres:  # COLLATE "C": exact already
            return [column == value]
        return [column == value, sa.func.length(column) == len(value.encode())]

    # ------------------------------------------------------------ push targets

    def task_ids(self) -> List[str]:
        with self._connect() as conn:
            return [task_id for (task_id,) in conn.execute(sa.select(self.tasks.c.id))]

    def put_push_target(self, task_id: str, target: PushTarget) -> None:
        p = self.targets.c
        values = {"target": dump_target(target), "delivered_seq": target.delivered_seq,
                  "failures": target.failures, "gave_up": target.gave_up}
        with self._connect(write=True) as conn:
            last = conn.execute(sa.select(sa.func.max(p.position))
                                .where(p.task_id == task_id)).scalar()
            conn.execute(self._upsert(self.targets,
                                      {"task_id": task_id, "id": target.config.id,
                                       "position": (last or 0) + 1, **values}, list(values)))

    def push_targets(self, task_id: str) -> List[PushTarget]:
        p = self.targets.c
        with self._connect() as conn:
            rows = conn.execute(sa.select(p.target, p.delivered_seq, p.failures, p.gave_up)
                                .where(p.task_id == task_id)
                                .order_by(p.position, p.id)).all()
        return [load_target(text, delivered, failures, bool(gave_up))
                for text, delivered, failures, gave_up in rows]

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        p = self.targets.c
        with self._connect(write=True, one_statement=True) as conn:
            conn.execute(sa.delete(self.targets).where(p.task_id == task_id, p.id == config_id))

    def record_push_progress(self, task_id: str, config_id: str, delivered_seq: int,
                             failures: int, gave_up: bool) -> None:
        p = self.targets.c
        with self._connect(write=True, one_statement=True) as conn:
            conn.execute(sa.update(self.targets).where(p.task_id == task_id, p.id == config_id)
                         .values(delivered_seq=delivered_seq, failures=failures,
                                 gave_up=gave_up))

    def push_backlog(self) -> List[str]:
        p, t = self.targets.c, self.tasks.c
        with self._connect() as conn:
            rows = conn.execute(sa.select(p.task_id).distinct()
                                .join_from(self.targets, self.tasks, t.id == p.task_id)
                                .where(p.gave_up == sa.false(), p.delivered_seq < t.seq)).all()
        return [task_id for (task_id,) in rows]

    # ------------------------------------------------------------ claims and leases

    def _upsert(self, table: sa.Table, values: Dict[str, Any], update: List[str]) -> Any:
        """A statement that inserts a row, or updates ``update`` columns of the one with
        the same key."""
        if self.postgres:
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            pg = pg_insert(table).values(values)
            keys = [column.name for column in table.primary_key.columns]
            return pg.on_conflict_do_update(
                index_elements=keys, set_={name: pg.excluded[name] for name in update})
        from sqlalchemy.dialects.mysql import insert as my_insert

        my = my_insert(table).values(values)
        return my.on_duplicate_key_update({name: my.inserted[name] for name in update})

    def claim(self, key: str, owner: str, ttl: float) -> bool:
        c = self.claims.c
        expires = self._now + ttl
        with self._connect(write=True, one_statement=True) as conn:
            taken = conn.execute(sa.update(self.claims)
                                 .where(c.key == key, sa.or_(c.owner == owner,
                                                             c.expires < self._now))
                                 .values(owner=owner, expires=expires)).rowcount
        if taken:
            return True
        try:
            with self._connect(write=True, one_statement=True) as conn:
                conn.execute(self.claims.insert().values(key=key, owner=owner, expires=expires))
        except sa.exc.IntegrityError:
            return False  # someone holds it (or took it just now)
        return True

    def claim_once(self, key: str, value: str, ttl: float) -> str:
        values = {"v_key": key, "v_owner": value, "v_ttl": ttl}
        for _ in range(3):  # a binding that expires or goes between two steps: look again
            try:  # the primary key decides: one insert of N at once succeeds
                self._claim_step("claim_once_insert", self._claim_insert, values)
                return value
            except sa.exc.IntegrityError:
                pass
            # An expired binding is taken over by one compare-and-set on its expiry.
            if self._claim_step("claim_once_take", self._claim_take, values)[1]:
                return value
            held = self._claim_step("claim_once_held", self._claim_held, values)[0]
            if held:
                return str(held[0][0])
        raise StoreError(f"claim {key} kept changing")

    def _claim_step(self, name: str, build: Callable[[], Any],
                    values: Dict[str, Any]) -> Tuple[List[Any], int]:
        """One statement of :meth:`claim_once`, built once: (its rows, its row count).
        On the driver's cursor where the store can: a send with a key pays for it."""
        if self._raw:
            with self._session() as lent:
                rows, count = lent.execute(self._prebuilt(name, build), values)
                return list(rows), count
        with self._connect(write=True, one_statement=True) as conn:
            result = conn.execute(self._statement(name, build), values)
            return (list(result.all()) if result.returns_rows else []), result.rowcount

    def _claim_insert(self) -> Any:
        return sa.insert(self.claims).values(
            key=sa.bindparam("v_key"), owner=sa.bindparam("v_owner"),
            expires=self._now + sa.bindparam("v_ttl", type_=sa.Float))

    def _claim_take(self) -> Any:
        c = self.claims.c
        return (sa.update(self.claims).where(c.key == sa.bindparam("v_key"), c.expires < self._now)
                .values(owner=sa.bindparam("v_owner"),
                        expires=self._now + sa.bindparam("v_ttl", type_=sa.Float)))

    def _claim_held(self) -> Any:
        return sa.select(self.claims.c.owner).where(self.claims.c.key == sa.bindparam("v_key"))

    def release_claim(self, key: str, owner: str) -> None:
        c = self.claims.c
        with self._connect(write=True, one_statement=True) as conn:
            conn.execute(sa.delete(self.claims).where(c.key == key, c.owner == owner))

    def acquire_lease(self, task_id: str, owner: str, ttl: float) -> bool:
        values = {"v_task_id": task_id, "v_owner": owner, "v_ttl": ttl}
        if self.postgres:  # one statement: the upsert's WHERE leaves a live lease alone
            return self._write_one(self._acquire(), values) > 0
        # MariaDB has no conditional upsert that says whether it wrote: insert (a new
        # lease, the usual case: one round trip), else take over an expired lease or
        # renew our own.  A lease released between the two is inserted on the next try.
        for _ in range(2):
            try:
                self._write_one(("insert_lease", lambda: self.leases.insert().values(
                    task_id=sa.bindparam("v_task_id"), owner=sa.bindparam("v_owner"),
                    expires=self._now + sa.bindparam("v_ttl", type_=sa.Float))), values)
                return True
            except sa.exc.IntegrityError:
                pass  # a lease exists
            if self._write_one(("take_lease", self._take_over), values):
                return True  # (MariaDB counts matched rows: the engines say FOUND_ROWS)
        return False

    def _acquire(self) -> Tuple[Any, Callable[[], Any]]:
        """The key and builder of PostgreSQL's lease upsert (``v_task_id``, ``v_owner``,
        ``v_ttl``): it writes nothing where another owner's lease is live."""
        def build() -> Any:
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            lease = self.leases.c
            pg = pg_insert(self.leases).values(
                task_id=sa.bindparam("v_task_id"), owner=sa.bindparam("v_owner"),
                expires=self._now + sa.bindparam("v_ttl", type_=sa.Float))
            return pg.on_conflict_do_update(
                index_elements=["task_id"],
                set_={"owner": pg.excluded.owner, "expires": pg.excluded.expires},
                where=sa.or_(lease.owner == pg.excluded.owner, lease.expires < self._now))

        return "acquire_lease", build

    def _take_over(self) -> Any:
        """MariaDB: the update that takes an expired lease or renews our own."""
        lease = self.leases.c
        return (sa.update(self.leases)
                .where(lease.task_id == sa.bindparam("v_task_id"),
                       sa.or_(lease.owner == sa.bindparam("v_owner"), lease.expires < self._now))
                .values(owner=sa.bindparam("v_owner"),
                        expires=self._now + sa.bindparam("v_ttl", type_=sa.Float)))

    def renew_leases(self, owner: str, task_ids: List[str], ttl: float) -> None:
        if not task_ids:
            return
        lease = self.leases.c
        with self._connect(write=True, one_statement=True, writer=True) as conn:
            conn.execute(sa.update(self.leases)
                         .where(lease.owner == owner, lease.task_id.in_(task_ids))
                         .values(expires=self._now + ttl))

    def release_lease(self, task_id: str, owner: Optional[str]) -> None:
        if task_id in self._unleased:
            # Its terminal append here dropped the lease, and a finished task never
            # runs again: nobody took one since.
            self._unleased.discard(task_id)
            return
        self._write_one(self._release(owner is not None),
                        {"w_task_id": task_id, "w_owner": owner})

    def _release(self, by_owner: bool) -> Tuple[Any, Callable[[], Any]]:
        """The key and builder of the lease delete (``w_task_id``; ``w_owner`` when
        ``by_owner``)."""
        lease = self.leases.c

        def build() -> Any:
            condition = [lease.task_id == sa.bindparam("w_task_id")]
            if by_owner:
                condition.append(lease.owner == sa.bindparam("w_owner"))
            return sa.delete(self.leases).where(*condition)

        return ("release_lease", not by_owner), build

    def _write_one(self, statement: Tuple[Any, Callable[[], Any]],
                   values: Dict[str, Any]) -> int:
        """A running task's own single-statement write (a lease), on the writers'
        engine: ``statement`` is a key and how to build it (:meth:`_statement`).
        Returns its row count."""
        if self._raw:
            with self._session(writer=True) as lent:
                return lent.execute(self._prebuilt(*statement), values)[1]
        with self._connect(write=True, one_statement=True, writer=True) as conn:
            count: int = conn.execute(self._statement(*statement), values).rowcount
            return count

    def expired_leases(self) -> List[str]:
        lease = self.leases.c
        with self._connect() as conn:
            rows = conn.execute(sa.select(lease.task_id).where(lease.expires < self._now)).all()
        return [task_id for (task_id,) in rows]

    # ------------------------------------------------------------ retention

    def purge(self, updated_before: str, scope: Optional[str] = None) -> int:
        t = self.tasks.c
        with self._connect(write=True) as conn:
            gone = [task_id for (task_id, tenant) in conn.execute(
                sa.select(t.id, t.tenant).where(t.updated_at < updated_before,
                                                t.state.in_(sorted(_TERMINAL))))
                    if in_scope(tenant, scope)]
            for start in range(0, len(gone), 500):
                chunk = gone[start:start + 500]
                for table, column in ((self.events, "task_id"), (self.targets, "task_id"),
                                      (self.leases, "task_id"), (self.tasks, "id")):
                    conn.execute(sa.delete(table).where(table.c[column].in_(chunk)))
            conn.execute(sa.delete(self.claims).where(self.claims.c.expires < self._now))
        for task_id in gone:
            self._heads.pop(task_id, None)
        return len(gone)

    def close(self) -> None:
        super().close()
        self._watchdog.stop()
        if self._owns_engine:
            self.engine.dispose()
            if self.writer_engine is not self.engine:
                self.writer_engine.dispose()


def _roll_back(conn: Connection) -> None:
    """End a failed explicit transaction; a connection that cannot is dropped."""
    if conn.invalidated:  # broken mid-call (or its greenlet killed): the pool replaces it
        return
    try:
        conn.exec_driver_sql("ROLLBACK")
    except Exception:
        conn.invalidate()


def _reason(exc: BaseException) -> str:
    """The driver's message without SQLAlchemy's statement dump."""
    orig = getattr(exc, "orig", None)
    return str(orig if orig is not None else exc).splitlines()[0]
