"""Riding out a short store outage: retry what failed with ``StoreUnavailable``.

A database restart or a managed failover makes every store call fail for a
second or a minute, though the work in flight is fine.  The writes that must
not be lost then (a run's events, a webhook's delivery cursor) and the reads
of those who wait on a task (streams, blocking waits) are retried with a
backoff (:data:`FIRST_DELAY` doubling to :data:`LONGEST_DELAY`) for up to a
grace period (``A2A_STORE_GRACE``) counted from the first failure; past it,
the last :class:`~a2a_flask.StoreUnavailable` is raised.  A caller's own
request is never retried here: it hears the outage at once (503), so nothing
it is not told about is left half-done.

The sleeps are ``time.sleep``: cooperative under gevent's patching, a thread's
sleep otherwise.
"""
from __future__ import annotations

import time
from typing import Callable, Optional, TypeVar

from ..protocol.errors import StoreUnavailable

#: The first wait before a retry (seconds); each next one is twice as long...
FIRST_DELAY = 0.1
#: ...up to this.
LONGEST_DELAY = 2.0

_T = TypeVar("_T")


class Outage:
    """One caller's view of an outage: when its first failure came and the next
    wait.  :meth:`wait` after each failure, :meth:`over` after a success."""

    __slots__ = ("grace", "since", "delay")

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.since: Optional[float] = None
        self.delay = FIRST_DELAY

    @property
    def ongoing(self) -> bool:
        """Whether the last call failed (and no call has succeeded since)."""
        return self.since is not None

    def wait(self) -> bool:
        """After a failure: sleep the next backoff and return True while the grace
        lasts; False (at once) once it is over."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
        left = self.since + self.grace - now
        if left <= 0:
            return False
        time.sleep(min(self.delay, left))
        self.delay = min(self.delay * 2, LONGEST_DELAY)
        return True

    def over(self) -> None:
        """A call succeeded: the next failure starts a new outage."""
        self.since = None
        self.delay = FIRST_DELAY


def ride_out(call: Callable[[], _T], grace: float,
             landed: Optional[Callable[[], bool]] = None) -> _T:
    """``call()``, retried while it raises :class:`~a2a_flask.StoreUnavailable`, for
    up to ``grace`` seconds (0: not retried).

    ``landed``, asked before each retry, says whether the failed attempt was in
    fact written (its answer lost on the way back): then the call is not made
    again (and None is returned: only for calls whose result is not used).
    """
    outage = Outage(grace)
    while True:
        try:
            return call()
        except StoreUnavailable:
            if not outage.wait():
                raise
        if landed is not None:
            try:
                if landed():
                    return None  # type: ignore[return-value]  # documented above
            except StoreUnavailable:
                pass  # still down: the next attempt says so
