"""The SQL store's hot statements, run on the DBAPI cursor of a pooled connection.

A task's create, appends and lease calls are a few statements per send, and
going through SQLAlchemy's execution (a ``Connection`` per call, the compiled
cache, events, a result object) cost a worker more CPU than the statement's
round trip.  So these statements are compiled once into the driver's own SQL
text and run on the pooled connection's DBAPI cursor: the pool, its checkout
ping (:func:`~.sql.ping_when_idle`) and each statement's deadline
(:class:`~.sql_deadline.Watchdog`) stay as they are, and a driver's error is
raised as SQLAlchemy's exception for it, so the store maps errors one way.

Only for engines in autocommit (those :func:`~.sql.open_sql_store` makes): a
statement outside ``BEGIN`` commits when it returns, as through SQLAlchemy.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from .sql_deadline import CUT, Watchdog, cutter
from .sql_hosts import read_only

Rows = List[Tuple[Any, ...]]


class Compiled:
    """A statement compiled for one engine's driver: its text, and how to order
    a call's parameters (by name, or in the driver's positional order)."""

    __slots__ = ("text", "defaults", "order", "processors")

    def __init__(self, statement: Any, engine: Engine) -> None:
        compiled = statement.compile(dialect=engine.dialect)
        #: The driver's conversions of some values, by bind name (pg8000's dialect
        #: makes a lease's float TTL a float), applied as SQLAlchemy would.
        self.processors: Dict[str, Any] = dict(getattr(compiled, "_bind_processors", None)
                                               or {})
        self.text: str = compiled.string
        #: Values fixed in the statement (a literal SQLAlchemy made a bind parameter).
        self.defaults: Dict[str, Any] = dict(compiled.params)
        self.order: Optional[Sequence[str]] = (
            tuple(compiled.positiontup or ()) if compiled.positional else None)

    def parameters(self, values: Dict[str, Any]) -> Any:
        """The driver's parameters for ``values`` (by bind name)."""
        merged = {**self.defaults, **values} if self.defaults else values
        if self.processors:
            merged = {name: self.processors[name](value) if name in self.processors else value
                      for name, value in merged.items()}
        if self.order is None:
            return merged
        return tuple(merged[name] for name in self.order)


class Session:
    """One pooled connection lent to a block of statements (see :func:`session`)."""

    __slots__ = ("_connection", "_watchdog", "_cut")

    def __init__(self, connection: Any, watchdog: Watchdog, info: Dict[str, Any]) -> None:
        self._connection, self._watchdog = connection, watchdog
        self._cut = cutter(info, connection)

    def execute(self, compiled: Compiled, values: Dict[str, Any]) -> Tuple[Rows, int]:
        """Run one statement: (the rows it returned, its row count)."""
        return self.text(compiled.text, compiled.parameters(values))

    def many(self, compiled: Compiled, rows: List[Dict[str, Any]]) -> None:
        """Run one statement for each of ``rows`` (the driver may batch them)."""
        token = self._watchdog.arm(self._cut)
        try:
            cursor = self._connection.cursor()
            try:
                cursor.executemany(compiled.text, [compiled.parameters(row) for row in rows])
            finally:
                cursor.close()
        finally:
            self._watchdog.disarm(token)

    def text(self, text: str, parameters: Any = None) -> Tuple[Rows, int]:
        """Run SQL text, bounded by the watchdog: (rows, row count)."""
        token = self._watchdog.arm(self._cut)
        try:
            cursor = self._connection.cursor()
            try:
                cursor.execute(text, parameters)
                rows = cursor.fetchall() if cursor.description is not None else []
                return rows, cursor.rowcount
            finally:
                cursor.close()
        finally:
            self._watchdog.disarm(token)


@contextmanager
def session(engine: Engine, watchdog: Watchdog, transaction: bool = False) -> Iterator[Session]:
    """A pooled connection of ``engine`` for a block of statements, in a
    transaction committed at the end when ``transaction`` (rolled back when the
    block raises).

    A driver error is raised as the matching :class:`sqlalchemy.exc.DBAPIError`;
    a connection that broke, was cut off or whose state is unknown (a greenlet
    killed mid-call) is dropped from the pool.
    """
    dbapi_error = engine.dialect.loaded_dbapi.Error
    try:
        proxied = engine.raw_connection()
    except dbapi_error as exc:  # connecting failed: the pool lets the driver's error out
        raise sa.exc.DBAPIError.instance(
            None, None, exc, dbapi_error, connection_invalidated=True,
            dialect=engine.dialect) from None
    connection = proxied.dbapi_connection
    info = proxied.info
    lent = Session(connection, watchdog, info)
    try:
        try:
            if transaction:
                lent.text("BEGIN")
            yield lent
            if transaction:
                lent.text("COMMIT")
        except dbapi_error as exc:
            # A read-only session is a standby's (a failover): a new connection finds
            # the new primary.
            disconnect = bool(info.get(CUT)) or engine.dialect.is_disconnect(
                exc, connection, None) or read_only(exc)
            if disconnect:
                proxied.invalidate(exc)
            elif transaction:
                _roll_back(proxied, lent)
            raise sa.exc.DBAPIError.instance(
                None, None, exc, dbapi_error, connection_invalidated=disconnect,
                dialect=engine.dialect) from None
        except OSError:  # pg8000 lets a socket's error out as it came: the connection is gone
            proxied.invalidate()
            raise
        except Exception:  # ours (a conflict seen in the block): the transaction ends here
            if transaction:
                _roll_back(proxied, lent)
            raise
        except BaseException:  # killed mid-call: the connection's state is unknown
            proxied.invalidate()
            raise
    finally:
        proxied.close()


def _roll_back(proxied: Any, lent: Session) -> None:
    try:
        lent.text("ROLLBACK")
    except Exception:
        proxied.invalidate()
