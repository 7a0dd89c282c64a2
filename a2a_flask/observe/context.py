"""Which task a log record is about: a context variable set around executor runs
and request handling, and a logging filter that copies it onto records.

Context variables are per greenlet under gevent (>= 20.12) and per thread
otherwise, so concurrent requests and runs never see each other's task.
"""
from __future__ import annotations

import logging
from contextvars import ContextVar, Token
from typing import Callable, Iterable, Tuple
from urllib.parse import urlsplit

_NONE: Tuple[str, str] = ("", "")
_current: ContextVar[Tuple[str, str]] = ContextVar("a2a_task", default=_NONE)

#: The package's loggers: each gets the filter (a logger's filters do not reach its children).
LOGGERS = ("a2a_flask", "a2a_flask.push", "a2a_flask.signals", "a2a_flask.store",
           "a2a_flask.client")


def shown_url(url: str) -> str:
    """A webhook URL for log lines and spans: no user info, query string or fragment
    (each may hold a secret)."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return f"{parts.scheme}://{host}{parts.path}"


def current() -> Tuple[str, str]:
    """``(task_id, context_id)`` of the task being handled here, ``("", "")`` if none."""
    return _current.get()


def bind(task_id: str, context_id: str) -> "Token[Tuple[str, str]]":
    """Say which task this greenlet or thread now works on; reset with the token."""
    return _current.set((task_id or "", context_id or ""))


def reset(token: "Token[Tuple[str, str]]") -> None:
    """Undo a :func:`bind`."""
    _current.reset(token)


class TaskContextFilter(logging.Filter):
    """Adds ``task_id`` and ``context_id`` to every record (``""`` where there is none).

    On the package's loggers already; add it to a handler to have the agent's
    own loggers carry the fields too.  Values a caller passed in ``extra`` win.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        task_id, context_id = _current.get()
        if not hasattr(record, "task_id"):
            record.task_id = task_id
        if not hasattr(record, "context_id"):
            record.context_id = context_id
        return True


_FILTER = TaskContextFilter()


def install(names: Iterable[str] = LOGGERS) -> None:
    """Put the filter on the package's loggers (idempotent): the ``names``, and every
    ``a2a_flask.*`` logger made so far (modules make theirs on import)."""
    made = [name for name in list(logging.Logger.manager.loggerDict)
            if name == "a2a_flask" or name.startswith("a2a_flask.")]
    for name in {*names, *made}:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


install()


def scoped(fn: Callable[[], None], task_id: str, context_id: str = "") -> Callable[[], None]:
    """``fn`` run with its log records naming the task (for greenlets and threads
    that work on one task, which start with an empty context)."""
    def run() -> None:
        token = bind(task_id, context_id)
        try:
            fn()
        finally:
            reset(token)

    return run
