"""The Notifier's promises, as one scenario that threads and greenlets both run.

Kept apart from the test module so that a subprocess can monkey-patch with
gevent *before* importing anything, then run the very same scenarios (see
``test_concurrency.py``).  Nothing here imports gevent.
"""
from __future__ import annotations

import threading
import time
from typing import List, Sequence, Tuple

from a2a_flask.concurrency import Notifier

#: A reader that misses a wake-up waits this long: far above any honest delay.
MISSED = 5.0


def run_scenario(readers: Sequence[Tuple[int, int, float]], writes: Sequence[Tuple[int, float]],
                 keys: int) -> None:
    """Readers wait for values that writers publish; fail on a lost wake-up or a leak.

    ``readers``: (key, how many writes to that key to wait for, pause before
    looking).  ``writes``: (key, pause before writing), made in order by one
    writer.  A reader takes a ticket, then looks at the value, then waits, as
    the stores do; every wait must end by a notify (never by MISSED), and
    once everyone is done the notifier must hold nothing.
    """
    notifier = Notifier()
    values = [0] * keys
    failures: List[str] = []

    def reader(key: int, target: int, pause: float) -> None:
        time.sleep(pause)
        while True:
            with notifier.ticket(key) as ticket:
                if values[key] >= target:
                    return
                if not ticket.wait(MISSED):
                    failures.append(f"reader of key {key} missed a wake-up "
                                    f"(value {values[key]}, waited for {target})")
                    return

    def writer() -> None:
        for key, pause in writes:
            time.sleep(pause)
            values[key] += 1  # the "store write", then the notify
            notifier.notify(key)

    per_key = [sum(1 for key, _ in writes if key == k) for k in range(keys)]
    threads = [threading.Thread(target=reader, args=(key % keys, min(target, per_key[key % keys]),
                                                     pause))
               for key, target, pause in readers]
    threads.append(threading.Thread(target=writer))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(MISSED * 2)
    assert not failures, failures
    assert not any(thread.is_alive() for thread in threads), "a reader never returned"
    assert notifier.waiting() == 0, f"{notifier.waiting()} keys still hold wake-up state"


def timed_out_waiters_leave_nothing(count: int) -> None:
    """Waiters that give up (no notify ever comes) release their keys' state."""
    notifier = Notifier()
    for index in range(count):
        with notifier.ticket(f"task-{index}") as ticket:
            assert not ticket.wait(0.0)
    assert notifier.waiting() == 0
    # A notify for a key nobody waits on creates nothing either.
    notifier.notify("task-0")
    assert notifier.waiting() == 0


def a_notify_before_the_wait_is_not_lost() -> None:
    """The window the ticket closes: notify lands between the look and the wait."""
    notifier = Notifier()
    with notifier.ticket("t") as ticket:
        notifier.notify("t")  # the writer wins the race
        started = time.monotonic()
        assert ticket.wait(MISSED)
        assert time.monotonic() - started < 1.0
    with notifier.ticket("t") as later:  # a later reader gets a fresh ticket
        assert not later.wait(0.0)
    assert notifier.waiting() == 0
