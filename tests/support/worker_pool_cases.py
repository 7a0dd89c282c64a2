"""Detached work on pooled greenlets, checked in a process patched as gunicorn's
gevent worker is (run by test_concurrency.py); prints "ok" when every check holds."""
from __future__ import annotations

from gevent import monkey
from gevent.monkey import get_original

monkey.patch_all()

import contextvars  # noqa: E402  (after the patching, as gunicorn's gevent worker does)
import gc  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
import weakref  # noqa: E402

import gevent  # noqa: E402

from a2a_flask import concurrency  # noqa: E402
from a2a_flask.concurrency import IDLE_GREENLETS, Worker, gevent_active  # noqa: E402

assert gevent_active()
VAR: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")


def run_and_wait(target):
    done = threading.Event()

    def job():
        try:
            target()
        finally:
            done.set()

    worker = Worker(job, name="check")
    assert done.wait(5), "the job did not run"
    gevent.sleep(0)  # the greenlet parks after the job
    return worker


def sequential_jobs_reuse_one_greenlet():
    seen = set()
    for _ in range(50):
        run_and_wait(lambda: seen.add(id(gevent.getcurrent())))
    assert len(seen) == 1, f"{len(seen)} greenlets for 50 jobs one after another"


def each_job_starts_with_an_empty_context():
    seen = []
    run_and_wait(lambda: (seen.append(VAR.get()), VAR.set("first job")))
    run_and_wait(lambda: seen.append(VAR.get()))
    assert seen == ["unset", "unset"], seen


def a_kill_stops_a_running_job_and_not_the_next():
    class Stop(Exception):
        pass

    outcome = []
    started, release = threading.Event(), threading.Event()

    def blocked():
        started.set()
        try:
            release.wait(5)
            outcome.append("not stopped")
        except Stop:
            outcome.append("stopped")

    worker = Worker(blocked, name="blocked")
    assert started.wait(5) and worker.alive
    assert worker.kill(Stop)
    gevent.sleep(0.01)
    assert outcome == ["stopped"] and not worker.alive, outcome
    assert not worker.kill(Stop), "a finished job was killed again"
    # The same greenlet now runs another job: a late kill of the first must miss it.
    late = Worker(lambda: gevent.sleep(0.02) or outcome.append("second finished"), name="next")
    worker.kill(Stop)
    gevent.sleep(0.05)
    assert outcome == ["stopped", "second finished"] and not late.alive, outcome


def a_failing_job_is_reported_and_the_greenlet_serves_on():
    reported = []
    hub = gevent.get_hub()
    original, hub.handle_error = hub.handle_error, lambda where, kind, value, tb: reported.append(kind)
    try:
        run_and_wait(lambda: 1 / 0)
    finally:
        hub.handle_error = original
    assert reported == [ZeroDivisionError], reported
    ran = []
    run_and_wait(lambda: ran.append(True))
    assert ran == [True]


def at_most_so_many_greenlets_stay_parked():
    release = threading.Event()
    workers = [Worker(lambda: release.wait(5), name="many") for _ in range(IDLE_GREENLETS + 40)]
    gevent.sleep(0.01)
    release.set()
    for _ in range(500):  # however slow a loaded machine runs the 104 jobs
        if not any(w.alive for w in workers):
            break
        gevent.sleep(0.01)
    assert not any(w.alive for w in workers)
    assert len(concurrency._greenlets().idle) == IDLE_GREENLETS


def a_finished_job_lets_go_of_its_target():
    """Freed by reference counting, while its Worker lives on (a run holds its own)."""
    class Target:
        def __call__(self):
            pass

    target = Target()
    alive = weakref.ref(target)
    gc.disable()
    try:
        worker = Worker(target, name="target")
        del target
        gevent.sleep(0.01)
        assert not worker.alive and alive() is None
    finally:
        gc.enable()


def a_forked_child_starts_its_own_pool():
    run_and_wait(lambda: None)
    assert concurrency._pool is not None
    # The unpatched calls: gevent's waitpid, which waits for SIGCHLD through the
    # hub, can miss a child that exits at once on a loaded machine and wait forever.
    # os.fork runs the at-fork hooks either way.
    fork, waitpid = get_original("os", "fork"), get_original("os", "waitpid")
    read, write = os.pipe()
    pid = fork()
    if pid == 0:
        os.write(write, b"fresh" if concurrency._pool is None else b"inherited")
        os._exit(0)
    waitpid(pid, 0)
    assert os.read(read, 16) == b"fresh"


sequential_jobs_reuse_one_greenlet()
each_job_starts_with_an_empty_context()
a_kill_stops_a_running_job_and_not_the_next()
a_failing_job_is_reported_and_the_greenlet_serves_on()
at_most_so_many_greenlets_stay_parked()
a_finished_job_lets_go_of_its_target()
a_forked_child_starts_its_own_pool()
print("ok")
