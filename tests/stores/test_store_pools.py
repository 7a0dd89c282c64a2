"""Readers never fail writers, on Redis, PostgreSQL and MariaDB: with
every reader connection of the store taken, a running task's own writes and lease
renewals still go through (they have a pool of their own), and a reader waits for a
connection (up to ``A2A_STORE_TIMEOUT``) instead of failing at once; past the wait it
gets "task store unavailable", never a driver error.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Iterator, List

import pytest

from a2a_flask import StoreUnavailable
from a2a_flask.protocol.models import TaskState as S
from a2a_flask.stores import StoreLimits, open_store

from tests.stores.test_stores import create, status_event

pytestmark = pytest.mark.declare(server=[
    "test_a_crowd_of_readers_on_a_one_connection_pool_cannot_fail_the_task_they_watch"], slow=[
    "test_callers_arriving_during_a_failing_first_call_share_its_outage",
    "test_a_crowd_of_readers_on_a_one_connection_pool_cannot_fail_the_task_they_watch"])

STORES = ["redis", "postgresql", "mariadb"]
#: Small pools, so that a test can take every reader connection.
LIMITS = StoreLimits(timeout=5.0, pool_size=2, writer_pool_size=1)


@contextlib.contextmanager
def readers_taken(store: Any) -> Iterator[List[Any]]:
    """Hold every connection of the store's readers' pool (none left to lend)."""
    held: List[Any] = []
    if hasattr(store, "engine"):  # SQL: the readers' engine, overflow included
        pool = store.engine.pool
        for _ in range(pool.size() + pool._max_overflow):
            held.append(store.engine.connect())
        release = [conn.close for conn in held]
    else:  # Redis: the blocking pool's connections
        pool = store._redis.connection_pool
        for _ in range(pool.max_connections):
            held.append(pool.get_connection())
        release = [lambda c=conn: pool.release(c) for conn in held]
    try:
        yield release
    finally:
        for give_back in release:
            with contextlib.suppress(Exception):
                give_back()


def sized_url(store_url: str) -> str:
    """The SQL store's URL without overflow (the readers' pool is exactly pool_size)."""
    if store_url.startswith("redis"):
        return store_url
    return store_url + ("&" if "?" in store_url else "?") + "max_overflow=0"


@pytest.mark.parametrize("store_url", STORES, indirect=True)
def test_a_running_tasks_writes_and_leases_go_through_when_readers_take_every_connection(
        store_url):
    store = open_store(sized_url(store_url), limits=LIMITS)
    try:
        create(store, "t1", S.WORKING)
        record = store.load("t1")
        with readers_taken(store):
            events = [status_event("t1", S.WORKING, second=2)]
            assert store.append("t1", record.seq, events, record.after(events)) == 2
            store.acquire_lease("t1", "runner-a", 30)
            store.renew_leases("runner-a", ["t1"], 30)
            store.release_lease("t1", "runner-a")
        assert store.load("t1").seq == 2
    finally:
        store.close()


@pytest.mark.parametrize("store_url", STORES, indirect=True)
def test_a_reader_waits_for_a_busy_pool_instead_of_failing(store_url):
    store = open_store(sized_url(store_url), limits=LIMITS)
    try:
        create(store, "t1", S.WORKING)
        with readers_taken(store) as release:
            # One reader connection comes back a moment later: the waiting read gets it.
            threading.Timer(0.3, release.pop()).start()
            assert store.load("t1").seq == 1
    finally:
        store.close()


@pytest.mark.parametrize("store_url", STORES, indirect=True)
def test_past_the_wait_a_reader_gets_task_store_unavailable(store_url):
    store = open_store(sized_url(store_url), limits=StoreLimits(timeout=0.5, pool_size=2,
                                                                writer_pool_size=1))
    try:
        create(store, "t1", S.WORKING)
        with readers_taken(store):
            with pytest.raises(StoreUnavailable):
                store.load("t1")
        assert store.load("t1").seq == 1  # and it serves again once connections are back
    finally:
        store.close()


def test_the_watchdog_cuts_a_call_past_its_deadline_and_leaves_the_others():
    """tests the SQL store's client-side deadline on a socket pair: a read that
    gets no answer ends (end-of-file) once the deadline passes; a call disarmed
    in time is never cut."""
    import socket

    from a2a_flask.stores.sql_deadline import Watchdog, shut_down

    watchdog = Watchdog(0.3)
    waiting, silent = socket.socketpair()
    answered, peer = socket.socketpair()
    try:
        waiting.settimeout(30)  # a hang would fail the test long after the deadline
        token = watchdog.arm(lambda: shut_down(answered.fileno()))
        assert watchdog.disarm(token)  # in time: never cut
        with watchdog.guard(lambda: shut_down(waiting.fileno())):
            assert waiting.recv(1) == b""  # cut: the read ends instead of waiting on
        assert watchdog.cuts == 1
        peer.sendall(b"x")
        assert answered.recv(1) == b"x"  # the disarmed socket still works
    finally:
        watchdog.stop()
        for sock in (waiting, silent, answered, peer):
            sock.close()


@pytest.mark.parametrize("kind", STORES)
def test_callers_arriving_during_a_failing_first_call_share_its_outage(kind):
    """The store is unreachable (a port that never answers) from the start: twenty
    callers at once each answer "task store unavailable" within about one timeout
    (they share the attempt in flight), not one timeout after another in turn."""
    from tests.support.dbservers import BlackHole

    with BlackHole() as hole:
        url = {"postgresql": hole.postgres_url, "mariadb": hole.mariadb_url,
               "redis": hole.redis_url}[kind]()
        store = open_store(url, limits=StoreLimits(timeout=1.0))
        answers: List[Any] = []

        def call() -> None:
            started = time.monotonic()
            try:
                store.load("t1")
                answers.append("answered")
            except StoreUnavailable:
                answers.append(time.monotonic() - started)

        callers = [threading.Thread(target=call) for _ in range(20)]
        try:
            for caller in callers:
                caller.start()
            for caller in callers:
                caller.join(60)
        finally:
            store.close()
    assert len(answers) == 20 and "answered" not in answers, answers
    # One after another they would take 20 timeouts (20 s and more) for the last.
    assert max(answers) < 10, sorted(answers)


@pytest.mark.parametrize("kind", ["redis", "postgresql"])
def test_a_crowd_of_readers_on_a_one_connection_pool_cannot_fail_the_task_they_watch(kind):
    """Under gunicorn -k gevent: a task runs (its writes, lease renewals) while sixty
    callers read it in a loop through a readers' pool of ONE connection.  The pool
    being busy is backpressure: readers queue for it (slower answers, or "task store
    unavailable" past the wait, never a pool error), and the task completes.  (That
    its writes cannot be starved even by readers that hold every connection is
    shown above, where the test holds them.)"""
    import requests

    from a2a_flask.protocol.models import new_id

    from tests.support.dbservers import SERVERS
    from tests.support.helpers import V1, Server, rpc_body, wait_until

    with SERVERS[kind]() as database, Server("tests.support.fault_app:app", env={
            "FLASK_A2A_STORE": database.url, "FLASK_A2A_STORE_POOL_SIZE": "1",
            "FLASK_A2A_STORE_TIMEOUT": "3", "FLASK_A2A_LEASE_TTL": "3"}) as server:
        started = server.rpc("SendMessage", {"message": {
            "role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": "sleep 6"}]},
            "configuration": {"returnImmediately": True}})
        task_id = started["result"]["task"]["id"]
        stop = threading.Event()
        seen: List[str] = []
        # A failed assertion in a reader thread fails nothing by itself: each reader
        # hands what stopped it to the test, which asserts on it below.
        failures: List[BaseException] = []

        def read() -> None:
            try:
                with requests.Session() as session:
                    while not stop.is_set():
                        answer = session.post(server.url + "/a2a", json=rpc_body(
                            "GetTask", {"id": task_id}), headers=V1, timeout=30).json()
                        if "result" in answer:
                            seen.append(answer["result"]["status"]["state"])
                        else:
                            assert answer["error"]["code"] == -32603, answer  # waited too long
                            seen.append("unavailable")
            except BaseException as failure:  # noqa: B902 - reported in the test's thread
                failures.append(failure)

        readers = [threading.Thread(target=read, daemon=True) for _ in range(60)]
        for reader in readers:
            reader.start()
        try:
            # The crowd reads through the whole run (6 s, two lease renewals a second).
            wait_until(lambda: failures or "TASK_STATE_COMPLETED" in seen
                       or "TASK_STATE_FAILED" in seen, 60, "the task to end")
        finally:
            stop.set()
            for reader in readers:
                reader.join(40)
        assert not [reader for reader in readers if reader.is_alive()], \
            "a reader was still reading 40 s after being told to stop"
        assert not failures, failures[:3]
        final = server.rpc("GetTask", {"id": task_id})["result"]
        assert final["status"]["state"] == "TASK_STATE_COMPLETED", final
        assert "lease expired" not in server.log_text()
