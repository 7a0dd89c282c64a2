"""Client-side deadlines for the SQL store's statements: a hung database is an error.

The server's own ``statement_timeout`` (PostgreSQL) ends a slow statement, but a
database that does not answer at all (its processes stopped, a network
partition, a failover in progress) never sends that error, and the kernel still
acknowledges what the driver writes, so TCP's own timeouts do not fire either.
psycopg has no read timeout; pg8000's and PyMySQL's socket timeouts do not cover
every driver a URL may name.  So each statement on an engine of the store is
*armed* before it runs and disarmed when it returns; a :class:`Watchdog` (one
greenlet or thread per store and process, asleep while nothing is armed) shuts
down the socket of a statement past its deadline.  The driver's wait then ends
at once with a connection error, SQLAlchemy drops the connection (it is never
used again: :func:`cut_off` marks it for the pool too), and the store call
answers "task store unavailable".
"""
from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections import OrderedDict
from typing import Any, Callable, Dict, Iterator, Optional

from ..concurrency import Worker

log = logging.getLogger("a2a_flask.stores.sql")

#: How long an idle watchdog sleeps before it looks whether its store was closed.
IDLE_WAIT = 30.0
#: Set in a pool record's ``info`` once its connection was cut: the pool drops it.
CUT = "a2a_cut"


class Hung(Exception):
    """A database call got no answer in time and its connection was cut off."""


def driver_socket(dbapi_connection: Any) -> Optional[int]:
    """The file descriptor of a DBAPI connection's socket (psycopg 3, pg8000,
    PyMySQL, psycopg2), or None for a driver we do not know or a closed connection."""
    try:
        pgconn = getattr(dbapi_connection, "pgconn", None)  # psycopg 3
        if pgconn is not None:
            fd = pgconn.socket
        elif getattr(dbapi_connection, "_usock", None) is not None:  # pg8000
            fd = dbapi_connection._usock.fileno()
        elif getattr(dbapi_connection, "_sock", None) is not None:  # PyMySQL
            fd = dbapi_connection._sock.fileno()
        else:
            fd = dbapi_connection.fileno()  # psycopg2
    except Exception:  # closed, broken, or no socket we know of: nothing to cut
        return None
    return fd if isinstance(fd, int) and fd >= 0 else None


def shut_down(fd: int) -> None:
    """End both directions of the socket ``fd`` (every copy of the descriptor sees
    it): a driver waiting on it reads end-of-file at once."""
    with contextlib.suppress(OSError):
        sock = socket.socket(fileno=os.dup(fd))
        try:
            sock.shutdown(socket.SHUT_RDWR)
        finally:
            sock.close()


def cutter(info: Dict[str, Any], dbapi_connection: Any) -> Callable[[], None]:
    """What the watchdog calls to cut off a pooled connection: mark its pool record
    (``info``) so that the pool drops it, and shut its socket down."""
    fd = driver_socket(dbapi_connection)

    def cut() -> None:
        info[CUT] = True
        if fd is not None:
            shut_down(fd)

    return cut


class Watchdog:
    """Cut off calls that outlive ``timeout`` seconds (see the module docstring).

    Every call armed here has the same timeout, so deadlines come in the order
    calls were armed: the watchdog sleeps until the oldest one, and arming or
    disarming is a dictionary insert or delete.
    """

    def __init__(self, timeout: float, name: str = "a2a-sql-watchdog") -> None:
        self.timeout = timeout
        self._name = name
        self._armed: "OrderedDict[int, tuple[float, Callable[[], None]]]" = OrderedDict()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._next = 0
        self._pid = 0
        self.stopped = False
        #: How many calls were cut off (for tests and logs).
        self.cuts = 0

    def arm(self, cut: Callable[[], None]) -> int:
        """Call ``cut()`` if :meth:`disarm` with the returned token does not come first."""
        if self._pid != os.getpid():  # first use in this process (or a forked child)
            with self._lock:
                if self._pid != os.getpid():
                    self._pid = os.getpid()
                    self._armed.clear()
                    self._wake = threading.Event()
                    Worker(self._run, name=self._name)
        with self._lock:
            self._next += 1
            token = self._next
            was_idle = not self._armed
            self._armed[token] = (time.monotonic() + self.timeout, cut)
        if was_idle:
            self._wake.set()
        return token

    def disarm(self, token: int) -> bool:
        """Forget an armed call; False if it was cut off already."""
        with self._lock:
            return self._armed.pop(token, None) is not None

    @contextlib.contextmanager
    def guard(self, cut: Callable[[], None]) -> Iterator[None]:
        token = self.arm(cut)
        try:
            yield
        finally:
            self.disarm(token)

    def stop(self) -> None:
        self.stopped = True
        self._wake.set()

    def _run(self) -> None:
        pid = os.getpid()
        while not self.stopped and self._pid == pid:
            with self._lock:
                # Cleared under the lock: an arm after it (into an empty watchdog)
                # sets it again; arms into a busy one have later deadlines anyway.
                self._wake.clear()
                pause = IDLE_WAIT
                if self._armed:
                    token, (deadline, cut) = next(iter(self._armed.items()))
                    pause = deadline - time.monotonic()
                    if pause <= 0:
                        # Cut under the lock: a call disarming now learns it was cut.
                        del self._armed[token]
                        self.cuts += 1
                        try:
                            cut()
                        except Exception:  # one failed cut must not stop the watchdog
                            log.exception("a2a sql store: cutting off a hung call failed")
                        continue
            self._wake.wait(max(pause, 0.01))
