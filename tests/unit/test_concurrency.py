"""The Notifier: no lost wake-up and no state left behind, under threads and under gevent.

The scenarios live in ``notifier_cases.py``; here Hypothesis draws them and
runs them with threads in this process, and again with greenlets in a
subprocess that monkey-patches first (as ``gunicorn -k gevent`` does).
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings, strategies as st

from tests.support import notifier_cases
from tests.support.helpers import ROOT

pytestmark = pytest.mark.declare(server=[
    "test_the_same_holds_for_greenlets_under_gevent",
    "test_detached_work_runs_on_pooled_greenlets_that_start_each_job_clean"])

PAUSES = st.sampled_from([0.0, 0.0, 0.0005, 0.002])
READERS = st.lists(st.tuples(st.integers(0, 2), st.integers(0, 4), PAUSES), min_size=1,
                   max_size=6)
WRITES = st.lists(st.tuples(st.integers(0, 2), PAUSES), min_size=1, max_size=5)


@settings(max_examples=60, deadline=None)
@given(readers=READERS, writes=WRITES, keys=st.integers(1, 3))
def test_concurrent_notify_and_wait_lose_no_wakeup_and_leave_nothing(readers, writes, keys):
    notifier_cases.run_scenario(readers, [(k % keys, p) for k, p in writes], keys)


def test_a_notify_between_ticket_and_wait_still_wakes_the_waiter():
    notifier_cases.a_notify_before_the_wait_is_not_lost()


def test_waiters_that_time_out_release_their_keys():
    notifier_cases.timed_out_waiters_leave_nothing(1000)


GEVENT_SCRIPT = textwrap.dedent("""
    from gevent import monkey
    monkey.patch_all()

    import threading
    from hypothesis import given, settings, strategies as st

    from a2a_flask.concurrency import Notifier, gevent_active
    from tests.support import notifier_cases
    from tests.unit.test_concurrency import READERS, WRITES

    assert gevent_active()
    import gevent.event
    probe = Notifier()
    with probe.ticket("k") as ticket:
        # The slot's event is gevent's, so a wait yields to the other greenlets.
        assert isinstance(ticket._slot.event, gevent.event.Event), type(ticket._slot.event)

    @settings(max_examples=60, deadline=None)
    @given(readers=READERS, writes=WRITES, keys=st.integers(1, 3))
    def scenarios(readers, writes, keys):
        notifier_cases.run_scenario(readers, [(k % keys, p) for k, p in writes], keys)

    scenarios()
    notifier_cases.a_notify_before_the_wait_is_not_lost()
    notifier_cases.timed_out_waiters_leave_nothing(1000)
    print("ok")
""")


def test_the_same_holds_for_greenlets_under_gevent():
    done = subprocess.run([sys.executable, "-c", GEVENT_SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr


def test_detached_work_runs_on_pooled_greenlets_that_start_each_job_clean():
    """Reuse, an empty context per job, kills that reach only their own job, failures
    reported, a bounded idle pool, a fresh pool after a fork (``worker_pool_cases.py``)."""
    done = subprocess.run([sys.executable, "-m", "tests.support.worker_pool_cases"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
