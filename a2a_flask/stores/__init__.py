"""Task stores, chosen by URL (``A2A_STORE``)."""
from __future__ import annotations

from urllib.parse import urlsplit

from .base import LogEntry, SequenceConflict, StoreError, TaskQuery, TaskRecord, TaskStore
from .memory import MemoryStore
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
    "MemoryStore",
    "ShelveStore",
    "SQLiteStore",
]


def open_store(url: str, *, task_ttl: float = 0.0) -> TaskStore:
    """Open the store a URL names: ``memory://``, ``shelve:///path/to/file`` or
    ``sqlite:///path/to/file.db``.

    ``shelve://relative/file`` (and ``sqlite://relative.db``) are taken relative
    to the working directory.  ``redis://host:port/db`` (``rediss://`` for TLS,
    ``?prefix=name`` for the key prefix) needs the ``redis`` extra; ``task_ttl``
    lets Redis expire finished tasks by itself.
    Raises :class:`StoreError` for an unknown scheme or a path that cannot be used.
    """
    parts = urlsplit(url)
    if parts.scheme == "memory":
        return MemoryStore()
    if parts.scheme in ("shelve", "sqlite"):
        path = parts.netloc + parts.path
        if not path:
            raise StoreError(f"{parts.scheme} store URL needs a path: {url!r}")
        return ShelveStore(path) if parts.scheme == "shelve" else SQLiteStore(path)
    if parts.scheme in ("redis", "rediss", "unix"):
        from .redis import RedisStore

        return RedisStore(url, task_ttl=task_ttl)
    raise StoreError(f"unknown store URL {url!r}; use memory://, shelve:///path, "
                     "sqlite:///path or redis://host:port/db")
