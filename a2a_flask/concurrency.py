"""Cooperate with whatever concurrency the server runs under; never patch anything.

Under ``gunicorn -k gevent`` the worker has monkey-patched ``threading``, so the
``threading`` primitives used here are already gevent-aware; detached work is
spawned as a greenlet, which can also be killed.  Anywhere else (the Flask dev
server with ``threaded=True``, gunicorn ``gthread``) detached work is a daemon
thread.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, Hashable, Optional


def gevent_active() -> bool:
    """True when gevent has patched ``threading`` in this process."""
    try:
        from gevent import monkey
    except ImportError:  # gevent is a dependency, but stay importable without it
        return False
    return bool(monkey.is_module_patched("threading"))


def cooperate() -> None:
    """Let other greenlets run now (a no-op under threads, which the OS interleaves)."""
    if gevent_active():
        import gevent

        gevent.sleep(0)


class Worker:
    """A handle on detached work: a greenlet under gevent, a thread otherwise."""

    def __init__(self, target: Callable[[], Any], name: str) -> None:
        self._greenlet: Any = None
        self._thread: Optional[threading.Thread] = None
        if gevent_active():
            import gevent

            # A raw greenlet: gevent.spawn would also record the spawning stack
            # (frames per call), which costs SendMessage over 10 % of its speed.
            self._greenlet = gevent.spawn_raw(target)
        else:
            self._thread = threading.Thread(target=target, name=name, daemon=True)
            self._thread.start()

    def kill(self, exception: type) -> bool:
        """Raise ``exception`` inside the work if that is possible (greenlets only)."""
        if self._greenlet is not None and not self._greenlet.dead:
            import gevent

            gevent.kill(self._greenlet, exception)
            return True
        return False

    @property
    def alive(self) -> bool:
        if self._greenlet is not None:
            return not self._greenlet.dead
        return self._thread is not None and self._thread.is_alive()


class Notifier:
    """Wake-ups keyed by task id, without a lost-wakeup window.

    A reader takes :meth:`ticket` *before* it looks at the store, then waits on
    it; a writer calls :meth:`notify` after it wrote.  Notify fires and forgets
    the current event, so every ticket taken earlier fires exactly once and a
    later reader gets a fresh one; with nobody waiting, notify costs a dict lookup.
    """

    def __init__(self) -> None:
        self._events: Dict[Hashable, threading.Event] = {}
        self._lock = threading.Lock()

    def ticket(self, key: Hashable) -> threading.Event:
        event = self._events.get(key)
        if event is None:
            with self._lock:
                event = self._events.setdefault(key, threading.Event())
        return event

    def wait_polling(self, key: Hashable, passed: Callable[[], bool], version: Callable[[], Any],
                     timeout: float, interval: float) -> None:
        """Wait until ``passed()`` or ``timeout``, for stores shared between processes.

        Writes in this process wake the waiter at once; writes by other
        processes are noticed when ``version()`` (a cheap change counter of
        the store) moves, checked every ``interval`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            ticket = self.ticket(key)
            seen = version()
            if passed():
                return
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return
                if ticket.wait(min(interval, remaining)) or version() != seen:
                    break

    def notify(self, key: Hashable) -> None:
        """Wake everyone waiting on ``key``."""
        if key not in self._events:
            return
        with self._lock:
            event = self._events.pop(key, None)
        if event is not None:
            event.set()
