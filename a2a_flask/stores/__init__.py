"""Task stores, chosen by URL (``A2A_STORE``)."""
from __future__ import annotations

import logging
import os
import re
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple, cast
from urllib.parse import urlsplit

from ..version import install_extra
from .base import (Coordination, LogEntry, SequenceConflict, StoreError, StoreLimits, Tables,
                   TaskLog, TaskQuery, TaskRecord, TaskStore, safe_url)
from .memory import MemoryStore

if TYPE_CHECKING:
    from .shelve import ShelveStore
    from .sqlite import SQLiteStore

__all__ = [
    "open_store",
    "register_store",
    "store_schemes",
    "StoreFactory",
    "TaskStore",
    "TaskLog",
    "Coordination",
    "TaskRecord",
    "TaskQuery",
    "LogEntry",
    "SequenceConflict",
    "StoreError",
    "StoreLimits",
    "Tables",
    "store_label",
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


#: What makes a store of a URL: called with the URL and the keyword arguments
#: ``task_ttl`` (seconds; 0: keep finished tasks) and ``limits`` (:class:`StoreLimits`).
StoreFactory = Callable[..., TaskStore]

#: The store factory of each registered URL scheme (:func:`register_store`).
_SCHEMES: Dict[str, StoreFactory] = {}

#: What a scheme may be named (RFC 3986's scheme characters, lower case).
_SCHEME_NAME = re.compile(r"[a-z][a-z0-9+.-]*\Z")


def register_store(scheme: str, factory: StoreFactory) -> None:
    """Make ``open_store`` (and so ``A2A_STORE``) open URLs of ``scheme`` with ``factory``.

    ``factory(url, *, task_ttl, limits)`` returns a :class:`TaskStore`; it may
    ignore the keyword arguments it has no use for, and raises
    :class:`StoreError` for a URL it cannot use.  A URL whose scheme is
    ``scheme+driver`` (``postgresql+psycopg://``) is opened by the factory of
    ``scheme`` unless that exact scheme is registered.  Registering a scheme
    twice raises :class:`StoreError` (two packages claiming one scheme is a
    mistake to hear about at import, not a silent replacement).
    """
    if not isinstance(scheme, str) or not _SCHEME_NAME.match(scheme):
        raise StoreError(f"a store scheme is a lower-case URL scheme (such as 'dict'), "
                         f"not {scheme!r}")
    if not callable(factory):
        raise StoreError(f"the factory of the {scheme!r} store scheme is not callable: "
                         f"{factory!r}")
    if scheme in _SCHEMES:
        raise StoreError(f"the store scheme {scheme!r} is registered already "
                         f"(by {_name_of(_SCHEMES[scheme])})")
    _SCHEMES[scheme] = factory


def store_schemes() -> List[str]:
    """The URL schemes :func:`open_store` knows, sorted."""
    return sorted(_SCHEMES)


def open_store(url: Any, *, task_ttl: float = 0.0,
               limits: Optional[StoreLimits] = None) -> TaskStore:
    """Open the store a URL names: ``memory://``, ``shelve:///path/to/file`` or
    ``sqlite:///path/to/file.db``, or a scheme added with :func:`register_store`.

    ``shelve://relative/file`` (and ``sqlite://relative.db``) are taken relative
    to the working directory.  ``redis://host:port/db`` (``rediss://`` for TLS,
    ``?prefix=name`` for the key prefix), ``redis+cluster://host:port,.../0`` (Redis
    Cluster) and ``redis+sentinel://host:port,.../service_name/db`` (the master a
    set of sentinels names) need the ``redis`` extra; ``task_ttl``
    lets Redis expire finished tasks by itself.  ``postgresql://``, ``mysql://``
    and ``mariadb://`` URLs, and a SQLAlchemy ``Engine`` in place of the URL,
    open the SQL store (the ``sql`` extra).
    Missing folders on a shelve or sqlite path are created (and logged); a path
    whose folder cannot be created or written, or whose files are folders or
    read-only, raises :class:`StoreError` naming the path.
    ``limits`` bound the networked stores' calls and pools (defaults:
    :class:`StoreLimits`).  A networked store opens without reaching its server
    (its first call does, and answers "task store unavailable" while it cannot).
    Raises :class:`StoreError` for an unknown scheme (naming the known ones), a
    path that cannot be used or a missing driver.
    """
    limits = limits or StoreLimits()
    if not isinstance(url, str):  # an app's SQLAlchemy Engine (A2A(store=db.engine))
        return cast(TaskStore, _sql().SQLStore(url, timeout=limits.timeout))
    scheme = urlsplit(url).scheme
    factory = _SCHEMES.get(scheme) or _SCHEMES.get(scheme.split("+", 1)[0])
    if factory is None:
        known = ", ".join(f"{name}://" for name in store_schemes())
        raise StoreError(f"unknown store URL {safe_url(url)!r}; the known schemes are {known} "
                         "(more with a2a_flask.stores.register_store)")
    return factory(url, task_ttl=task_ttl, limits=limits)


def store_label(store: TaskStore, url: str = "") -> str:
    """How messages name a store: by its URL's scheme (``"memory store"``), or by its
    class when it was given as an object (``url`` empty)."""
    scheme = urlsplit(url).scheme if url else ""
    return f"{scheme} store" if scheme else type(store).__name__


def _name_of(factory: StoreFactory) -> str:
    return f"{getattr(factory, '__module__', '?')}.{getattr(factory, '__qualname__', factory)}"


# ------------------------------------------------------------ the built-in schemes


def _open_memory(url: str, **_: Any) -> TaskStore:
    return MemoryStore()


def _file_path(scheme: str, url: str) -> str:
    """The path of a file store's URL (``scheme://relative`` or ``scheme:///absolute``),
    checked with :func:`check_path`."""
    parts = urlsplit(url)
    path = parts.netloc + parts.path
    if not path:
        raise StoreError(f"{parts.scheme} store URL needs a path: {safe_url(url)!r}")
    check_path(scheme, path, _FILES[scheme])
    return path


def _open_shelve(url: str, **_: Any) -> TaskStore:
    from .shelve import ShelveStore

    return ShelveStore(_file_path("shelve", url))


def _open_sqlite(url: str, **_: Any) -> TaskStore:
    from .sqlite import SQLiteStore

    return SQLiteStore(_file_path("sqlite", url))


def _open_redis(url: str, *, task_ttl: float = 0.0, limits: Optional[StoreLimits] = None,
                **_: Any) -> TaskStore:
    from .redis import RedisStore

    return RedisStore(url, task_ttl=task_ttl, limits=limits or StoreLimits())


def _open_redis_cluster(url: str, *, task_ttl: float = 0.0,
                        limits: Optional[StoreLimits] = None, **_: Any) -> TaskStore:
    from .redis_cluster import RedisClusterStore

    return RedisClusterStore(url, task_ttl=task_ttl, limits=limits or StoreLimits())


def _open_redis_sentinel(url: str, *, task_ttl: float = 0.0,
                         limits: Optional[StoreLimits] = None, **_: Any) -> TaskStore:
    from .redis_sentinel import RedisSentinelStore

    return RedisSentinelStore(url, task_ttl=task_ttl, limits=limits or StoreLimits())


def _open_sql(url: str, *, limits: Optional[StoreLimits] = None, **_: Any) -> TaskStore:
    return cast(TaskStore, _sql().open_sql_store(url, limits=limits or StoreLimits()))


for _scheme, _factory in [("memory", _open_memory), ("shelve", _open_shelve),
                          ("sqlite", _open_sqlite), ("redis", _open_redis),
                          ("rediss", _open_redis), ("unix", _open_redis),
                          ("redis+cluster", _open_redis_cluster),
                          ("rediss+cluster", _open_redis_cluster),
                          ("redis+sentinel", _open_redis_sentinel),
                          ("rediss+sentinel", _open_redis_sentinel),
                          ("postgresql", _open_sql), ("postgres", _open_sql),
                          ("mysql", _open_sql), ("mariadb", _open_sql)]:
    register_store(_scheme, _factory)
del _scheme, _factory


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
                         + install_extra("sql")) from None
    return sql
