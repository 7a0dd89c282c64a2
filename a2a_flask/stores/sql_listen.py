"""PostgreSQL ``LISTEN``: one connection per process, fanned out to waiting greenlets.

Every append of the SQL store sends ``NOTIFY channel, 'task id'`` inside its
own transaction, so the notification leaves the database exactly when the
events become visible.  Each process that has waiters keeps one dedicated
connection listening on the channel and wakes the local waiters of that task
through the :class:`~a2a_flask.concurrency.Notifier`.

The connection is pg8000's: it waits for the socket with ``select`` (gevent
patches it, so the listener is a greenlet that costs nothing while idle), then
runs ``SELECT 1`` to make pg8000 read the pending notifications.  An engine on
another driver (say psycopg2) gets a pg8000 listener on the same URL.
"""
from __future__ import annotations

import importlib
import logging
import os
import select
import threading
import time
from typing import Any, Callable, Optional

import sqlalchemy as sa

from .sql_hosts import Hosts
from .sql_tls import pg8000_tls_options, share_one_tls_context_pg8000

log = logging.getLogger("a2a_flask.stores.sql")

#: How long the listener sleeps in ``select`` before it checks whether it should stop.
IDLE_CHECK = 1.0


def load_driver() -> None:
    """Import pg8000 now, while the store is built at start-up.

    Imported later by the first waiter's listener, it would hold the gevent hub
    for as long as the import reads the disk (over 0.1 s in a fresh install
    without bytecode caches).
    """
    try:
        importlib.import_module("pg8000")
    except ImportError:
        pass  # the listener says so when it first connects


def _has_buffered_input(connection: Any) -> bool:
    """Whether pg8000 already read bytes the socket no longer shows (a notification
    that arrived in the same packet as the answer to ``SELECT 1``)."""
    stream, sock = getattr(connection, "_sock", None), getattr(connection, "_usock", None)
    if stream is None or sock is None:
        return False
    previous = sock.gettimeout()
    try:
        sock.settimeout(0)
        return bool(stream.peek(1))
    except (OSError, ValueError):
        return False
    finally:
        sock.settimeout(previous)


class Listener:
    """Listen on ``channel`` and call ``wake(payload)`` for each notification, until
    ``stopped()``; reconnects after a failure (waiters re-read meanwhile).
    ``timeout``: the socket timeout of a connection of its own (connecting, and
    each ``SELECT 1`` that reads the notifications).  ``hosts``: the hosts a URL
    names in its query (:mod:`.sql_hosts`), tried in turn for the primary (a
    failover: the connection breaks, and the next one finds the new primary);
    a pg8000 engine's own pool follows them already."""

    def __init__(self, engine: sa.engine.Engine, channel: str, wake: Callable[[str], None],
                 stopped: Callable[[], bool], timeout: float = 10.0,
                 hosts: Optional[Hosts] = None) -> None:
        self._url = engine.url
        self._hosts = hosts
        self._timeout = timeout
        self._engine = engine if engine.dialect.driver == "pg8000" else None
        self.channel = channel
        self._wake = wake
        self._stopped = stopped
        self._pid = os.getpid()
        #: Set while LISTEN is in force; until then waiters poll.
        self.ready = threading.Event()

    def _open(self) -> Any:
        engine = self._engine
        if engine is None:  # another driver: a pg8000 connection of our own on its URL
            engine = sa.create_engine(self._url.set(drivername="postgresql+pg8000", query={}),
                                      poolclass=sa.pool.NullPool,
                                      connect_args={"timeout": self._timeout})
            # The store's own TLS demands hold for this connection too (libpq's names;
            # those pg8000 cannot honour, such as a client certificate, it goes without).
            query = {key: value if isinstance(value, str) else value[-1]
                     for key, value in self._url.query.items()}
            share_one_tls_context_pg8000(engine, *pg8000_tls_options(query, strict=False),
                                         hosts=self._hosts)
        raw = engine.raw_connection()
        connection = raw.driver_connection
        assert connection is not None  # a fresh checkout always has one
        raw.detach()  # ours for good: the pool must never hand it to a query
        # The pool's pre-ping may have opened a transaction, and LISTEN inside one
        # would only start at its commit.
        connection.rollback()
        connection.autocommit = True
        cursor = connection.cursor()
        cursor.execute(f'LISTEN "{self.channel}"')
        return connection

    def run(self) -> None:
        """The listener's loop (a greenlet under gevent, a daemon thread otherwise)."""
        connection: Optional[Any] = None
        while not self._stopped() and self._pid == os.getpid():
            try:
                if connection is None:
                    connection = self._open()
                    self.ready.set()
                self._serve(connection)
            except Exception as exc:  # the database went away: reconnect after a pause
                self.ready.clear()
                log.warning("a2a sql store: LISTEN connection lost (%s); reconnecting", exc)
                self._close(connection)
                connection = None
                time.sleep(0.5)
        self._close(connection)

    def _serve(self, connection: Any) -> None:
        sock = connection._usock
        cursor = connection.cursor()
        while not self._stopped():
            if not _has_buffered_input(connection):
                readable, _, _ = select.select([sock], [], [], IDLE_CHECK)
                if not readable:
                    continue
            cursor.execute("SELECT 1")  # pg8000 reads the notifications with the answer
            cursor.fetchall()
            while connection.notifications:
                _, _, payload = connection.notifications.popleft()
                self._wake(payload)

    @staticmethod
    def _close(connection: Optional[Any]) -> None:
        if connection is not None:
            try:
                connection.close()
            except Exception:
                pass
