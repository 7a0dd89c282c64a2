"""Stores opened to be read, and nothing else: the source of ``flask a2a copy-store``.

A source may be a backup, or files someone handed over: copying from it must
not change it.  :func:`open_read_only` opens each built-in kind so that
nothing is created, renamed, migrated or written where it lies:

* ``shelve``: the log is read without its lock file; a store of the earlier
  format is read into a scratch log in a temporary folder
  (:class:`~.shelve.ShelveStore` with ``read_only=True``);
* ``sqlite``: :class:`ReadOnlySQLiteStore`, SQLite's ``mode=ro``; a file no
  connection has open (no ``-wal`` file beside it) is read as ``immutable``,
  so that SQLite does not create its ``-wal`` and ``-shm`` files either; a file
  of an earlier release's schema is moved to the current one in memory;
* Redis and SQL servers: the store's first-use work (creating tables, moving
  an older key layout) is skipped, and copying only reads.

A scheme added with :func:`~a2a_flask.stores.register_store` is opened by its
own factory, as it opens it for a server.
"""
from __future__ import annotations

import os
import sqlite3
import threading
from typing import Optional
from urllib.parse import quote, urlsplit

from . import open_store
from .base import StoreError, StoreLimits, TaskStore
from .shelve import ShelveStore
from .sqlite import SCHEMA, SQLiteStore

#: Built-in schemes of stores on a server: read-only means "never write" there.
SERVER_SCHEMES = frozenset({"redis", "rediss", "unix", "postgresql", "postgres", "mysql",
                            "mariadb"})


def open_read_only(url: str, *, limits: Optional[StoreLimits] = None) -> TaskStore:
    """The store a URL names, opened to be read alone (see the module docstring).

    :raises StoreError: for a file store that is not there, or cannot be read.
    """
    parts = urlsplit(url)
    path = parts.netloc + parts.path
    if parts.scheme == "shelve":
        return ShelveStore(path, read_only=True)
    if parts.scheme == "sqlite":
        if not os.path.isfile(path):
            raise StoreError(f"there is no sqlite store at {os.path.abspath(path)}")
        return ReadOnlySQLiteStore(path)
    store = open_store(url, limits=limits)
    if parts.scheme.split("+", 1)[0] in SERVER_SCHEMES:
        store.prepared = True  # its prepare() creates tables or moves keys: writes
    return store


class ReadOnlySQLiteStore(SQLiteStore):
    """An SQLite store that is only read: ``mode=ro``, no schema created, no
    pragma that writes, and an earlier release's file migrated in memory (which
    a forked process does not inherit: use it in one process)."""

    def _open(self) -> None:
        self._connect()
        columns = self._task_columns()
        if not columns:
            raise StoreError(f"{self.path} holds no a2a_flask tasks (it has no tasks table)")
        if "snapshot" in columns or "log_bytes" not in columns:
            # An earlier release's schema: read the file into memory, move it there.
            memory = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            self._db.backup(memory)
            self._db.close()
            self._db, self._cursor = memory, memory.cursor()
            self._db.executescript(SCHEMA)
            self._migrate()

    def _connect(self) -> None:
        self._pid = os.getpid()
        self._lock = threading.Lock()
        self._db = sqlite3.connect(read_only_uri(self.path), uri=True, timeout=0,
                                   isolation_level=None, check_same_thread=False)
        self._cursor = self._db.cursor()


def read_only_uri(path: str) -> str:
    """SQLite's URI that opens ``path`` read-only.  Without a ``-wal`` file beside it
    no connection has the file open (the last one to close removes it), so it is
    read as ``immutable``: a WAL-mode file opened ``mode=ro`` alone would get
    ``-wal`` and ``-shm`` files created beside it.  With one, some process has it
    open (or died with it open): SQLite's read-only locking then reads what that
    log holds, using the ``-shm`` file as every reader does."""
    immutable = not os.path.exists(path + "-wal")
    # (One leading slash: after "file:", "//" would start a host name.)
    where = quote("/" + os.path.abspath(path).lstrip("/"))
    return f"file:{where}?mode=ro" + ("&immutable=1" if immutable else "")
