"""A PostgreSQL failover under running tasks, streams, webhooks and blocking sends
(docs/workers-and-hosts.rst, "PostgreSQL failover").

A primary and a synchronous standby of the test's own (tests/support/pg_standby.py),
one pair for the module; a real 2-worker gunicorn -k gevent on the URL naming both
(``target_session_attrs=read-write``).  Mid-task the primary is stopped and the
standby promoted: within ``A2A_STORE_GRACE`` every stream sees every event once, in
order, every webhook gets every event once, every blocking send answers with its
completed task, and every task acknowledged is on the new primary, complete; no
lease expires, no call fails with an internal error.  The second case fails back
(the old primary re-joined as the standby) on pg8000, whose pool and ``LISTEN``
connection follow the hosts by the store's own loop rather than libpq's.

Before those, on both drivers: a read-only session (the standby alone, a primary
fenced read-only) is an outage, never an internal error; each worker's ``LISTEN``
connection is on the primary, and on the new one after a failover.
"""
from __future__ import annotations

import threading
from contextlib import closing
from typing import Any, Dict, Iterator, List

import pytest

from a2a_flask.protocol.errors import StoreUnavailable
from a2a_flask.stores import open_store

from tests.server.test_blips_restart import (TICKS, Streamed, check_pushes, check_stream,
                                             completed_pushes)
from tests.support.dbservers import PostgresServer
from tests.support.helpers import Server, WebhookReceiver, wait_until, wait_until_delivered
from tests.support.pg_standby import StandbyPair
from tests.support.tasks import message

pytestmark = pytest.mark.slow

STREAMS = 4
BLOCKING = 2
#: The store timeout the servers run with (seconds): a call on a dead connection or a
#: standby ends soon, and is retried within the grace.
STORE_TIMEOUT = 1


@pytest.fixture(scope="module")
def started_pair() -> Iterator[StandbyPair]:
    pytest.importorskip("psycopg")
    with StandbyPair() as started:
        yield started


@pytest.fixture
def pair(started_pair: StandbyPair) -> StandbyPair:
    """The module's pair, whole again (a test may end failed over, or fail midway)."""
    started_pair.heal()
    return started_pair


class Blocking(threading.Thread):
    """One blocking SendMessage of a ticking task: its answer."""

    def __init__(self, server: Server) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.answer: Dict[str, Any] = {}
        self.error: Any = None

    def run(self) -> None:
        try:
            self.answer = self.server.rpc("SendMessage", {"message": message(f"ticks {TICKS}")},
                                          timeout=60)
        except Exception as exc:  # reported by the test
            self.error = exc

    def task_id(self) -> str:
        assert self.error is None, self.error
        task = self.answer.get("result", {}).get("task")
        assert task is not None, self.answer
        assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        assert [p["text"] for p in task["artifacts"][0]["parts"]] == [
            f"tick {n};" for n in range(TICKS)]
        task_id: str = task["id"]
        return task_id


def failed_over_under_load(pair: StandbyPair, url: str) -> None:
    with WebhookReceiver() as receiver, Server("tests.support.fault_app:app", workers=2, env={
            "FLASK_A2A_STORE": url, "FLASK_A2A_STORE_GRACE": "20",
            "FLASK_A2A_STORE_TIMEOUT": str(STORE_TIMEOUT),
            "FLASK_A2A_LEASE_TTL": "5", "FLASK_A2A_PUSH_ALLOW_PRIVATE": "1",
            "FLASK_A2A_PUSH_RETRY_DELAY": "0.1",
            "FLASK_A2A_PUSH_RETRY_MAX_DELAY": "0.5"}) as server:
        streams = [Streamed(server, receiver.hook()) for _ in range(STREAMS)]
        blocking = [Blocking(server) for _ in range(BLOCKING)]
        for thread in [*streams, *blocking]:
            thread.start()
        # Mid-task: every run has written chunks and has more to write.
        wait_until(lambda: all(stream.working() and stream.chunks() >= 2 for stream in streams),
                   20, "every task to write its first chunks")
        old = pair.primary
        pair.failover()
        assert pair.primary is not old
        for thread in [*streams, *blocking]:
            thread.join(60)
            assert not thread.is_alive(), "a stream or a blocking send did not end"
        task_ids = [check_stream(stream) for stream in streams]
        task_ids += [send.task_id() for send in blocking]
        receiver.wait_for(lambda got: completed_pushes(got) >= STREAMS, 30)
        store = open_store(url)  # the URL finds the new primary
        try:
            for task_id in task_ids:
                record = store.load(task_id)
                assert record is not None, f"task {task_id} is not on the new primary"
                assert record.state.value == "TASK_STATE_COMPLETED", record.state
            for task_id in task_ids[:STREAMS]:
                wait_until_delivered(store, task_id)
        finally:
            store.close()
        for task_id in task_ids[:STREAMS]:
            check_pushes(list(receiver.received), task_id)
        log = server.log_text()
        assert "task store unavailable" in log, log  # the failover was felt...
        assert "Traceback" not in log, log[log.find("Traceback") - 300:][:3000]
        assert "Internal error" not in log, log
        assert "stopped: the task store" not in log, log  # ...and ridden out
        assert "lease expired" not in log, log
        again = server.rpc("SendMessage", {"message": message("after the failover")})
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", again


@pytest.mark.parametrize("driver", ["postgresql", "postgresql+pg8000"])
def test_a_read_only_session_is_an_outage_not_an_error(pair, driver):
    """A store on the standby alone (or on a primary fenced read-only): reads answer,
    writes are "task store unavailable", never an internal error."""
    with closing(open_store(pair.url)) as store:
        store.task_ids()  # the tables, on the primary...
    # ...and on the standby once replayed (a synchronous commit waits for the flush).
    wait_until(lambda: pair.sql(pair.standby, "SELECT to_regclass('a2a_claims')"), 20,
               "the standby to replay the tables")
    port = pair.standby.port
    with closing(open_store(f"{driver}://postgres@127.0.0.1:{port}/postgres")) as standby:
        assert isinstance(standby.task_ids(), list)
        with pytest.raises(StoreUnavailable) as caught:
            standby.claim("fenced", "me", 5)
        assert "read-only" in str(caught.value.__cause__)
    pair.sql(pair.primary, "ALTER SYSTEM SET default_transaction_read_only = on")
    pair.sql(pair.primary, "SELECT pg_reload_conf()")
    try:
        with closing(open_store(pair.url.replace("postgresql", driver, 1))) as fenced:
            with pytest.raises(StoreUnavailable):
                fenced.claim("fenced", "me", 5)
    finally:
        pair.sql(pair.primary, "ALTER SYSTEM RESET default_transaction_read_only")
        pair.sql(pair.primary, "SELECT pg_reload_conf()")


def listening(pair: StandbyPair, server: PostgresServer) -> int:
    """Sessions of ``server`` whose last statement was the store's LISTEN (an idle
    listener's: nothing is written meanwhile)."""
    found = pair.sql(server, "SELECT count(*) FROM pg_stat_activity WHERE query = "
                     "'LISTEN \"a2a_tasks\"' AND pid <> pg_backend_pid()")
    return int(found or 0)


@pytest.mark.parametrize("driver", ["postgresql", "postgresql+pg8000"])
def test_the_listen_connection_follows_the_primary(pair, driver):
    """psycopg's store opens a pg8000 LISTEN connection of its own on the URL's hosts
    (it went to localhost:5432), pg8000's uses its pool: both land on the primary,
    and on the new one after a failover."""
    with closing(open_store(pair.url.replace("postgresql", driver, 1))) as store:
        store.wait("no such task", 0, 0.01)  # the first waiter starts the listener
        wait_until(lambda: listening(pair, pair.primary) == 1, 20, "LISTEN on the primary")
        assert listening(pair, pair.standby) == 0
        pair.failover()
        wait_until(lambda: listening(pair, pair.primary) == 1, 20,
                   "LISTEN on the new primary")
        wait_until(store._listener.ready.is_set, 20, "the listener to be ready again")


def test_failover_under_running_tasks_streams_webhooks_and_blocking_sends(pair):
    failed_over_under_load(pair, pair.url)


def test_fail_back_on_pg8000(pair):
    """The same on pg8000 (after the tests before, the primary is the second host, or
    the first): its pool and LISTEN connection follow the hosts by the store's own
    loop rather than libpq's."""
    pytest.importorskip("pg8000")
    failed_over_under_load(pair, pair.url.replace("postgresql://", "postgresql+pg8000://", 1))
