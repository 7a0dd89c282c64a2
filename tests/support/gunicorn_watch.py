"""The gunicorn settings every test server runs with (``-c python:tests.support.gunicorn_watch``):
a gevent worker's hub-blocked reports say how the hub's thread spent the block.

gevent's monitor thread reports a greenlet that kept the hub past
``GEVENT_MAX_BLOCKING_TIME`` of wall time.  On a loaded two-core machine the worker
may simply not have been given a CPU for that long; the report cannot tell.  The
kernel can: ``/proc/self/task/<tid>/schedstat`` counts the time a thread ran and the
time it waited, runnable, for a CPU.  Sampled at every check of the monitor, the
difference from before the block began (two checks before the first report: the
hub last switched within the period before that report's check) to the report is
added to it as a line ``Scheduling: ran R s, waited for a CPU Q s, of W s``; W - Q
is the thread's own time (running, or asleep in a blocking call), which
:func:`tests.support.helpers.blocked_in_our_code` reads.  That window may begin
while the hub still slept, idle, in its poll; so a second line, ``Inside the block:
ran r s, waited for a CPU q s, of w s``, measures from the check right before the
report, after which the hub never switched: all of it is the block's.
"""
from __future__ import annotations

import collections
import threading
import time
from typing import Any, Deque, List, Optional, Tuple

#: The lines added to a report; see tests/support/helpers.py.
SCHEDULING = "Scheduling: ran {ran:.3f} s, waited for a CPU {waited:.3f} s, of {wall:.3f} s"
INSIDE = "Inside the block: ran {ran:.3f} s, waited for a CPU {waited:.3f} s, of {wall:.3f} s"

Sample = Tuple[float, float, float]


def _schedstat(tid: int) -> Optional[Sample]:
    """(now, seconds on a CPU, seconds runnable waiting for one) of thread ``tid``."""
    try:
        with open(f"/proc/self/task/{tid}/schedstat") as handle:
            ran, waited = handle.read().split()[:2]
    except (OSError, ValueError):
        return None
    return time.perf_counter(), int(ran) / 1e9, int(waited) / 1e9


def _spent(line: str, start: Sample, now: Sample) -> str:
    return line.format(wall=now[0] - start[0], ran=now[1] - start[1], waited=now[2] - start[2])


class _Watch:
    """Samples the hub thread after each monitor check; annotates blocked reports."""

    def __init__(self, tid: int) -> None:
        self.tid = tid
        self.history: Deque[Optional[Sample]] = collections.deque([_schedstat(tid)] * 2, 2)
        #: The sample the current block is measured from (None: the hub is switching).
        self.start: Optional[Sample] = None
        self.reported = False

    def sample(self, hub: Any) -> None:
        """After monitor_blocking: a check without a report ends any block."""
        if not self.reported:
            self.start = None
        self.reported = False
        self.history.append(_schedstat(self.tid))

    def annotate(self, event: Any) -> None:
        from gevent.events import EventLoopBlocked

        if not isinstance(event, EventLoopBlocked):
            return
        self.reported = True
        if self.start is None:
            self.start = self.history[0]
        now = _schedstat(self.tid)
        if now is None or self.start is None:
            return
        lines = [_spent(SCHEDULING, self.start, now)]
        inside = self.history[1]  # the check before this report: the block had begun
        if inside is not None:
            lines.append(_spent(INSIDE, inside, now))
        report: List[str] = event.info
        where = next((i for i, text in enumerate(report) if text.startswith("Blocked Stack")),
                     len(report))
        report[where:where] = lines

    def attach(self, monitor: Any) -> None:
        from gevent import config

        # Added after monitor_blocking, with its period: it runs right after each check.
        monitor.add_monitoring_function(self.sample, config.max_blocking_time)


def post_worker_init(worker: Any) -> None:
    """In a gevent worker with the monitor thread on: annotate its blocked reports."""
    try:
        from gevent import config, get_hub
        from gevent.events import PeriodicMonitorThreadStartedEvent
        from zope import event
    except ImportError:
        return
    if not config.monitor_thread or "gevent" not in type(worker).__module__:
        return
    watch = _Watch(threading.get_native_id())  # the hub's thread: this one
    event.subscribers.append(watch.annotate)

    def started(happened: Any) -> None:
        if isinstance(happened, PeriodicMonitorThreadStartedEvent):
            watch.attach(happened.monitor)

    monitor = get_hub().periodic_monitoring_thread
    if monitor is not None:
        watch.attach(monitor)
    else:
        event.subscribers.append(started)
