"""Task stores, chosen by URL (``A2A_STORE``)."""
from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Optional, Tuple, cast
from urllib.parse import urlsplit

from .base import (LogEntry, SequenceConflict, StoreError, StoreLimits, TaskQuery, TaskRecord,
                   TaskStore, safe_url)
from .memory import MemoryStore

if TYPE_CHECKING:
    from .shelve import ShelveStore
    from .sqlite import SQLiteStore

__all__ = [
    "open_store",
    "TaskStore",
    "TaskRecord",
    "TaskQuery",
    "LogEntry",
    "SequenceConflict",
    "StoreError",
    "StoreLimits",
    "MemoryStore",
    "ShelveStore",
    "SQLiteStore",
]

log = logging.getLogger("a2a_flask")


def __getattr__(name: str) -> Any:
    """The file stores, imported when first named (not every app uses them: cold start)."""
    if name == "ShelveStore":
        from .shelve import ShelveStore

        return ShelveStore
    if name == "SQLiteStore":
        from .sqlite import SQLiteStore

        return SQLiteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

#: The files each file-backed store writes, as suffixes of the path in its URL.
_FILES = {"sqlite": ("", "-wal", "-shm"), "shelve": (".log", ".lock", ".dat", ".dir", ".bak")}


def open_store(url: Any, *, task_ttl: float = 0.0,
               limits: Optional[StoreLimits] = None) -> TaskStore:
    """Open the store a URL names: ``memory://``, ``shelve:///path/to/file`` or
    ``sqlite:///path/to/file.db``.

    ``shelve://relative/file`` (and ``sqlite://relative.db``) are taken relative
    to the working directory.  ``redis://host:port/db`` (``rediss://`` for TLS,
    ``?prefix=name`` for the key prefix) needs the ``redis`` extra; ``task_ttl``
    lets Redis expire finished tasks by itself.  ``postgresql://``, ``mysql://``
    and ``mariadb://`` URLs, and a SQLAlchemy ``Engine`` in place of the URL,
    open the SQL store (the ``sql`` extra).
    Missing folders on a shelve or sqlite path are created (and logged); a path
    whose folder cannot be created or written, or whose files are folders or
    read-only, raises :class:`StoreError` naming the path.
    ``limits`` bound the networked stores' calls and pools (defaults:
    :class:`StoreLimits`).  A networked store opens without reaching its server
    (its first call does, and answers "task store unavailable" while it cannot).
    Raises :class:`StoreError` for an unknown scheme, a path that cannot be used
    or a missing driver.
    """
    limits = limits or StoreLimits()
    if not isinstance(url, str):  # an app's SQLAlchemy Engine (A2A(store=db.engine))
        return cast(TaskStore, _sql().SQLStore(url, timeout=limits.timeout))
    parts = urlsplit(url)
    if parts.scheme == "memory":
        return MemoryStore()
    if parts.scheme in ("shelve", "sqlite"):
        path = parts.netloc + parts.path
        if not path:
            raise StoreError(f"{parts.scheme} store URL needs a path: {url!r}")
        check_path(parts.scheme, path, _FILES[parts.scheme])
        if parts.scheme == "shelve":
            from .shelve import ShelveStore

            return ShelveStore(path)
        from .sqlite import SQLiteStore

        return SQLiteStore(path)
    if parts.scheme in ("redis", "rediss", "unix"):
        from .redis import RedisStore

        return RedisStore(url, task_ttl=task_ttl, limits=limits)
    if parts.scheme.split("+", 1)[0] in ("postgresql", "postgres", "mysql", "mariadb"):
        return cast(TaskStore, _sql().open_sql_store(url, limits=limits))
    raise StoreError(f"unknown store URL {safe_url(url)!r}; use memory://, shelve:///path, "
                     "sqlite:///path, redis://host:port/db, postgresql://... or mysql://...")


def check_path(scheme: str, path: str, suffixes: Tuple[str, ...]) -> None:
    """Make sure a file store can live at ``path``: create missing folders, and
    refuse a folder or file this process cannot write, naming the path."""
    full = os.path.abspath(path)
    folder = os.path.dirname(full)
    where = f"cannot open {scheme} store at {full}"
    if not os.path.isdir(folder):
        try:
            os.makedirs(folder)
        except FileExistsError as exc:
            # Another worker booting beside this one made it first (gunicorn -w 4 on
            # a fresh path), unless a file has the folder's name.
            if not os.path.isdir(folder):
                raise StoreError(f"{where}: {folder} is not a folder") from exc
        except OSError as exc:
            raise StoreError(f"{where}: cannot create the folder {folder} "
                             f"({exc.strerror or exc})") from exc
        else:
            # Said out loud: a typo in the path would otherwise start an empty store quietly.
            log.warning("created the folder %s for the %s store at %s", folder, scheme, full)
    # WAL and lock files are created next to the store: the folder must be writable.
    if not os.access(folder, os.W_OK | os.X_OK):
        raise StoreError(f"{where}: cannot write in the folder {folder}")
    for name in (full + suffix for suffix in suffixes):
        if os.path.isdir(name):
            raise StoreError(f"{where}: {name} is a folder")
        if os.path.exists(name) and not os.access(name, os.R_OK | os.W_OK):
            raise StoreError(f"{where}: {name} is not readable and writable")


def _sql() -> Any:
    """The SQL store's module, imported only when a SQL URL or engine is used."""
    try:
        from . import sql
    except ImportError as exc:
        raise StoreError(f"the SQL store needs SQLAlchemy and a driver ({exc}): "
                         "pip install 'a2a-flask[sql]'") from None
    return sql
