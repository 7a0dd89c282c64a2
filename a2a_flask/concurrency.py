"""Cooperate with whatever concurrency the server runs under; never patch anything.

Under ``gunicorn -k gevent`` the worker has monkey-patched ``threading``, so the
``threading`` primitives used here are already gevent-aware; detached work is
spawned as a greenlet, which can also be killed.  Anywhere else (the Flask dev
server with ``threaded=True``, gunicorn ``gthread``) detached work is a daemon
thread.
"""
from __future__ import annotations

import contextlib
import contextvars
import importlib
import os
import sys
import threading
import time
from typing import Any, Callable, Dict, Hashable, Iterator, List, Optional


def off_the_hub(call: Callable[..., Any], *args: Any) -> Any:
    """``call(*args)`` in gevent's thread pool under a gevent worker, directly otherwise.

    For blocking calls into C that release the GIL (a flush to disk, an SQLite
    commit that checkpoints its write-ahead log): run on the hub they would hold
    every greenlet for milliseconds, or far longer on a loaded machine.
    """
    if gevent_active():
        hub = importlib.import_module("gevent.hub").get_hub()
        return hub.threadpool.apply(call, args)
    return call(*args)


def gevent_active() -> bool:
    """True when gevent has patched ``threading`` in this process."""
    global _patched
    if _patched:  # patching is never undone: once seen, ask no more (hot path)
        return True
    try:
        from gevent import monkey
    except ImportError:  # gevent is a dependency, but stay importable without it
        return False
    _patched = bool(monkey.is_module_patched("threading"))
    return _patched


_patched = False


def cooperate() -> None:
    """Let other greenlets run now (a no-op under threads, which the OS interleaves)."""
    if gevent_active():
        import gevent

        gevent.sleep(0)


def let_io_run() -> None:
    """Pause long enough for the event loop to poll sockets (a no-op under threads).

    ``sleep(0)`` only runs greenlets that are ready already; one that waits for
    a socket (a new request, a client's next bytes) gets its turn only once the
    loop polls, which a short timer guarantees.
    """
    if gevent_active():
        import gevent

        gevent.sleep(0.0005)


class TimeLimitExceeded(Exception):
    """A block under :func:`time_limit` ran out of time."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`TimeLimitExceeded` in the block once ``seconds`` pass (at its
    next cooperative wait), under gevent; elsewhere the server's own socket
    timeouts bound reads, and this does nothing."""
    if not gevent_active():
        yield
        return
    import gevent

    with gevent.Timeout(seconds, TimeLimitExceeded):
        yield


class Worker:
    """A handle on detached work: a greenlet under gevent, a thread otherwise."""

    def __init__(self, target: Callable[[], Any], name: str) -> None:
        self._job: Optional[_Job] = None
        self._thread: Optional[threading.Thread] = None
        if gevent_active():
            self._job = _Job(target)
            _greenlets().start(self._job)
        else:
            self._thread = threading.Thread(target=target, name=name, daemon=True)
            self._thread.start()

    def kill(self, exception: type) -> bool:
        """Raise ``exception`` inside the work if that is possible (greenlets only)."""
        return self._job is not None and self._job.kill(exception)

    @property
    def alive(self) -> bool:
        if self._job is not None:
            return not self._job.done
        return self._thread is not None and self._thread.is_alive()


#: Finished greenlets kept for the next detached job, per process (and hub).
IDLE_GREENLETS = 64


class _Job:
    """One piece of detached work on a pooled greenlet."""

    __slots__ = ("target", "greenlet", "done")

    def __init__(self, target: Callable[[], Any]) -> None:
        self.target: Optional[Callable[[], Any]] = target  # until it has run
        self.greenlet: Any = None  # the greenlet running it, while it runs
        self.done = False

    def run(self, greenlet: Any, hub: Any) -> None:
        target, self.greenlet = self.target, greenlet
        assert target is not None  # a job runs once
        try:
            # In a context of its own, as in a new greenlet: nothing an earlier job
            # set in a context variable (an app context, a span) is seen here.
            contextvars.Context().run(target)
        except BaseException:
            hub.handle_error(target, *sys.exc_info())  # what gevent does for a greenlet
        finally:
            # Let go of the target: whoever holds the Worker (a run holds its own)
            # would otherwise keep a cycle through it alive until the collector runs.
            self.done, self.greenlet, self.target = True, None, None

    def kill(self, exception: type) -> bool:
        if self.done:
            return False
        import gevent

        gevent.get_hub().loop.run_callback(self._throw, exception)
        return True

    def _throw(self, exception: type) -> None:
        # Run by the hub: the greenlet may have finished this job and taken another meanwhile.
        if not self.done and self.greenlet is not None:
            self.greenlet.throw(exception)


class _GreenletPool:
    """Greenlets that run detached jobs one after another.

    Starting a greenlet that runs Python code costs more than a short job
    (an executor answering at once, a burst of chunks to append): CPython
    gives each one a stack for its frames, mapped from the OS and unmapped
    when it ends.  A finished greenlet parks here instead (up to
    :data:`IDLE_GREENLETS`) and the next job switches into it.  Each job runs
    in an empty :mod:`contextvars` context, as a new greenlet would; what it
    keeps in greenlet-local storage (``threading.local`` under gevent) a later
    job on the same greenlet may see, as with the threads of a thread pool.
    """

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self.idle: List[Any] = []

    def start(self, job: _Job) -> None:
        if self.idle:
            self.hub.loop.run_callback(self.idle.pop().switch, job)
        else:
            import gevent

            # A raw greenlet: gevent.spawn would also record the spawning stack
            # (frames per call), which costs SendMessage over 10 % of its speed.
            gevent.spawn_raw(self._serve, job)

    def _serve(self, job: _Job) -> None:
        import gevent

        current = gevent.getcurrent()
        while True:
            job.run(current, self.hub)
            if len(self.idle) >= IDLE_GREENLETS or _pool is not self:
                return
            self.idle.append(current)
            try:
                job = self.hub.switch()  # parked until start() hands it the next job
            except BaseException:  # thrown in while parked (collected at exit): no more jobs
                if current in self.idle:
                    self.idle.remove(current)
                return


_pool: Optional[_GreenletPool] = None


def _greenlets() -> _GreenletPool:
    """The pool for the current hub (a thread with a hub of its own starts its own)."""
    global _pool
    import gevent

    hub = gevent.get_hub()
    pool = _pool
    if pool is None or pool.hub is not hub:
        pool = _pool = _GreenletPool(hub)
    return pool


def _forget_pool() -> None:
    """In a forked child: the parent's parked greenlets are not this process's to run."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork either
    os.register_at_fork(after_in_child=_forget_pool)


class _Slot:
    """The wake-up of one key, shared by everyone waiting on it right now."""

    __slots__ = ("event", "waiters", "woken")

    def __init__(self) -> None:
        # Looked up at call time: under gevent the patched module gives gevent's Event.
        self.event = threading.Event()
        self.waiters = 0
        #: Fired by :meth:`Notifier.wake`: nothing was written, the waiters are to return.
        self.woken = False


class Ticket:
    """A place in the queue of one key's waiters: wait on it, then leave (``with``)."""

    __slots__ = ("_notifier", "_key", "_slot")

    def __init__(self, notifier: "Notifier", key: Hashable, slot: _Slot) -> None:
        self._notifier, self._key, self._slot = notifier, key, slot

    def wait(self, timeout: float) -> bool:
        """Block until a :meth:`Notifier.notify` after this ticket, or ``timeout``."""
        return self._slot.event.wait(timeout)

    @property
    def woken(self) -> bool:
        """Whether :meth:`Notifier.wake` fired this ticket (rather than a write's notify)."""
        return self._slot.woken

    def __enter__(self) -> "Ticket":
        return self

    def __exit__(self, *exc: object) -> None:
        self._notifier._leave(self._key, self._slot)


class Notifier:
    """Wake-ups keyed by task id, without a lost-wakeup window and without a leak.

    A reader takes a :meth:`ticket` *before* it looks at the store, then waits
    on it; a writer calls :meth:`notify` after it wrote.  Notify fires and
    forgets the key's current slot, so every ticket taken earlier fires exactly
    once and a later reader gets a fresh one.  Tickets are counted and leave
    their slot when their ``with`` block ends: a key has state here only while
    somebody waits on it, however the wait ends (notified, timed out, raised).
    With nobody waiting, notify costs a dict lookup.
    """

    def __init__(self) -> None:
        self._slots: Dict[Hashable, _Slot] = {}
        self._lock = threading.Lock()

    def ticket(self, key: Hashable) -> Ticket:
        """A ticket for the next notify of ``key``; use it as a context manager."""
        with self._lock:
            slot = self._slots.get(key)
            if slot is None:
                slot = self._slots[key] = _Slot()
            slot.waiters += 1
        return Ticket(self, key, slot)

    def _leave(self, key: Hashable, slot: _Slot) -> None:
        with self._lock:
            slot.waiters -= 1
            # A notified slot is no longer in the map (a newer one may be): leave that alone.
            if slot.waiters == 0 and self._slots.get(key) is slot:
                del self._slots[key]

    def waiting(self) -> int:
        """How many keys have a waiter now (what this notifier holds)."""
        return len(self._slots)

    def wait_polling(self, key: Hashable, passed: Callable[[], bool], version: Callable[[], Any],
                     timeout: float, interval: float) -> None:
        """Wait until ``passed()`` or ``timeout``, for stores shared between processes.

        Writes in this process wake the waiter at once; writes by other
        processes are noticed when ``version()`` (a cheap change counter of
        the store) moves, checked every ``interval`` seconds.
        """
        deadline = time.monotonic() + timeout
        while True:
            with self.ticket(key) as ticket:
                seen = version()
                if passed():
                    return
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    if ticket.wait(min(interval, remaining)) or version() != seen:
                        if ticket.woken:
                            return  # woken (Notifier.wake): return without news
                        break

    def wake(self, key: Hashable) -> None:
        """Wake everyone waiting on ``key`` although nothing was written: their waits
        return (a :meth:`wait_polling` too, which goes on after a :meth:`notify` until
        its check passes), so that they can notice why (a process shutting down)."""
        with self._lock:
            slot = self._slots.pop(key, None)
        if slot is not None:
            slot.woken = True
            slot.event.set()

    def notify(self, key: Hashable) -> None:
        """Wake everyone waiting on ``key``."""
        # Unlocked on purpose: a reader registers its ticket before it reads the
        # store, and the writer wrote before this check, so a ticket missing here
        # belongs to a reader that will see the write.
        if key not in self._slots:
            return
        with self._lock:
            slot = self._slots.pop(key, None)
        if slot is not None:
            slot.event.set()
