"""The SQL store under real servers: ``gunicorn -k gevent -w 4`` on one database, and two
gunicorn instances ("hosts") on one database, on PostgreSQL (LISTEN/NOTIFY) and on
MariaDB (polling).

The scenarios are those of tests/server/test_scale.py (the SQLite workers and the Redis
hosts), run here on the SQL store: any worker answers for any task, streams on
other workers and hosts see each event once in order, a cancel on host B stops
the run on host A, SIGKILL of the runner fails its tasks through the lease and a
resumed stream gets the rest exactly once; webhooks are delivered in order after
a kill.  Plus the gevent check: a slow query through the store's engine holds its
greenlet, not the worker.
"""
from __future__ import annotations

import random
import threading
import uuid
from typing import Any, Dict

import pytest
import requests
from flask import Flask, jsonify, request

from tests.server import test_scale as scale
from tests.conftest import SQL_STORES, drop_sql_database, sql_admin, sql_test_url
from tests.support.helpers import Server, WebhookReceiver, wait_until
from tests.server.test_push_server import (CHUNKED_KINDS, chunk_texts, env_for, kinds,

                                           send_then_kill_while_retrying, wait_until_all_delivered)
pytestmark = [pytest.mark.slow, pytest.mark.declare(server=[
    "hosts",
    "workers4",
    "test_deliveries_resume_in_order_on_another_host_after_a_kill"])]


pytest.importorskip("sqlalchemy")

def lock_sql(postgres: bool, key: int, *, wait: bool) -> str:
    """The SQL that takes the database lock numbered ``key`` (an int: it is written
    into the statement, where the test can find it in the server's process list):
    for the session (the test), or till the transaction ends (``wait``, the app)."""
    if postgres:
        return f"SELECT pg_advisory{'_xact' if wait else ''}_lock({key})"
    return f"SELECT GET_LOCK('a2a-test-{key}', 60)"


def sql_app() -> Flask:
    """The scale-test app plus ``/blocked-query?key=N``: a query that waits in the
    database for a lock the test holds, run through the store's own engine (its pool
    and driver)."""
    import sqlalchemy as sa

    app = scale.scale_app()

    @app.get("/blocked-query")
    def blocked_query() -> Any:
        store = app.extensions["a2a"]["a2a"].store
        key = int(request.args["key"])
        with store.engine.connect() as conn:  # the transaction's end frees a PostgreSQL lock
            conn.execute(sa.text(lock_sql(store.postgres, key, wait=True)))
            if not store.postgres:
                conn.execute(sa.text(f"SELECT RELEASE_LOCK('a2a-test-{key}')"))
        return jsonify(done=True)

    return app


APP = "tests.stores.test_sql_store_server:sql_app()"


@pytest.fixture(scope="module")
def scale_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("sqlscale")


def database(kind: str):
    name = f"a2atest_{uuid.uuid4().hex[:12]}"
    return name, sql_test_url(kind, name)


@pytest.fixture(scope="module", params=["postgresql"])
def workers4(request):
    """Four gevent workers on one database, 1 s cancel grace: ``(server, url, None)``.

    PostgreSQL only, for the suite's time: on MariaDB the two-host tests below
    already put every read, stream and cancel in another process than the runner."""
    name, url = database(request.param)
    server = scale.start_server(4, {"FLASK_A2A_STORE": url, "FLASK_A2A_CANCEL_GRACE": "1"}, APP)
    yield server, url, None
    server.stop()
    drop_sql_database(request.param, name)


@pytest.fixture(scope="module", params=SQL_STORES)
def hosts(request):
    """Two gunicorn instances (two hosts) of one worker on one database, 2 s lease:
    ``(host A, host B, url)``."""
    name, url = database(request.param)
    env = {"FLASK_A2A_STORE": url, "FLASK_A2A_LEASE_TTL": str(scale.LEASE_TTL)}
    host_a = scale.start_server(1, env, APP)
    try:
        host_b = scale.start_server(1, env, APP)
    except BaseException:
        host_a.stop()
        raise
    yield host_a, host_b, url
    host_a.stop()
    host_b.stop()
    drop_sql_database(request.param, name)


# ------------------------------------------------------------------ gevent


def test_a_query_waiting_in_the_database_does_not_hold_up_the_worker(hosts):
    """One gevent worker: while a request's query waits in the database for a lock
    the test holds, the card answers; the query can only end once the test lets the
    lock go (a blocking driver would hold the card until then, and time out here)."""
    host_a, _, url = hosts
    postgres = url.startswith("postgresql")
    import sqlalchemy as sa

    key = random.randrange(1, 2 ** 62)  # tests of other checkouts may share the server
    if postgres:
        waiting = (f"SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                   f"AND wait_event_type = 'Lock' AND query LIKE '%({key})%'")
    else:
        waiting = ("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID <> "
                   f"CONNECTION_ID() AND STATE = 'User lock' AND INFO LIKE '%-{key}''%'")
    admin = sql_admin("postgresql" if postgres else "mariadb")
    blocked: Dict[str, Any] = {}

    def run_blocked() -> None:
        response = requests.get(f"{host_a.url}/blocked-query?key={key}", timeout=60)
        blocked["status"] = response.status_code

    def waiting_now() -> int:  # a connection each time: a transaction sees one snapshot
        with admin.connect() as conn:
            return int(conn.execute(sa.text(waiting)).scalar())

    with admin.connect() as holder:
        holder.execute(sa.text(lock_sql(postgres, key, wait=False)))
        thread = threading.Thread(target=run_blocked)
        thread.start()
        try:
            wait_until(waiting_now, 30, "the app's query to wait in the database")
            card = requests.get(host_a.url + "/.well-known/agent-card.json", timeout=10)
            assert card.status_code == 200
            # Still waiting: the card was answered while the query was in the database.
            assert waiting_now() == 1
        finally:
            holder.close()  # the lock goes with the session
            thread.join(30)
    assert blocked == {"status": 200}


# ------------------------------------------------------------------ four workers


def test_workers_see_one_task_by_get_list_and_last_event_id_replay(workers4):
    scale.test_sqlite_workers_see_one_task_by_get_list_and_last_event_id_replay(workers4)


def test_streams_on_every_other_worker_get_each_event_once_in_order(workers4, scale_dir):
    scale.test_sqlite_streams_on_every_other_worker_get_each_event_of_the_runner_once_in_order(
        workers4, scale_dir)


def test_input_required_continues_on_another_worker_while_others_stream(workers4):
    scale.test_sqlite_input_required_continues_on_another_worker_while_others_stream(workers4)


# ------------------------------------------------------------------ two hosts


def test_task_sent_to_host_a_is_read_listed_and_streamed_once_in_order_on_host_b(
        hosts, scale_dir):
    scale.test_redis_task_sent_to_host_a_is_read_listed_and_streamed_once_in_order_on_host_b(
        hosts, scale_dir)


def test_cancel_on_host_b_stops_the_run_on_host_a(hosts, scale_dir):
    scale.test_redis_cancel_on_host_b_stops_the_run_on_host_a(hosts, scale_dir)


def test_task_paused_on_host_a_continues_on_host_b(hosts):
    scale.test_redis_task_paused_on_host_a_continues_on_host_b(hosts)


def test_sigkill_of_host_a_worker_loses_no_task_and_host_b_resumes_exactly_once(hosts):
    scale.test_redis_sigkill_of_host_a_worker_loses_no_task_and_host_b_resumes_exactly_once(
        hosts)


# ------------------------------------------------------------------ push after a kill


@pytest.mark.parametrize("kind", SQL_STORES)
def test_deliveries_resume_in_order_on_another_host_after_a_kill(kind):
    name, url = database(kind)
    try:
        with WebhookReceiver(default=503) as receiver:
            task_id = send_then_kill_while_retrying(url, receiver)
            with Server("examples.conformance_agent:app", env=env_for(url)):
                pushes = receiver.wait_for(lambda got: len(got) >= len(CHUNKED_KINDS),
                                           timeout=30)
                wait_until_all_delivered(url, [task_id])  # and nothing more comes
                assert len(receiver.received) == len(CHUNKED_KINDS)
        assert kinds(pushes, task_id) == CHUNKED_KINDS
        assert chunk_texts(pushes) == ["chunk-1 ", "chunk-2"]
    finally:
        drop_sql_database(kind, name)
