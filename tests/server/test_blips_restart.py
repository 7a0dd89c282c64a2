"""A database restarted under running tasks and open streams (docs/internals.rst, invariant 8).

Real gunicorn -k gevent on a database server of the test's own (tests/support/dbservers.py,
never the shared service): six tasks stream 18 chunks each over 4.5 s; the database
is restarted in the middle (PostgreSQL ``pg_ctl restart -m fast``, MariaDB stopped
and started, Redis stopped and started on its append-only file), or PostgreSQL is
frozen (SIGSTOP) for 4 s, a few times ``A2A_STORE_TIMEOUT`` (1 s here).  Within
``A2A_STORE_GRACE`` every task completes and every stream sees every event once, in
order (its SSE ids are the log's sequence numbers: 1, 2, 3... with no gap and no
repeat), and so does every task's webhook (the push dispatcher's cursor writes ride
the outage out too).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

import pytest


from a2a_flask.stores import open_store

from tests.support.dbseeds import seeded
from tests.support.helpers import Server, WebhookReceiver, wait_until, wait_until_delivered
from tests.support.tasks import message

pytestmark = pytest.mark.slow

TASKS = 6
TICKS = 18  # a quarter second apart: 4.5 s
#: The store timeout the servers run with (seconds; the default is 5): a frozen
#: database's statements are cut after it (and the watchdog's second), then retried.
STORE_TIMEOUT = 1


class Streamed(threading.Thread):
    """One SendStreamingMessage, its events collected until the stream ends."""

    def __init__(self, server: Server, webhook: str) -> None:
        super().__init__(daemon=True)
        self.server = server
        self.webhook = webhook
        self.events: List[Dict[str, Any]] = []
        self.error: Any = None

    def run(self) -> None:
        try:
            params = {"message": message(f"ticks {TICKS}"), "configuration": {
                "taskPushNotificationConfig": {"url": self.webhook, "token": "t"}}}
            for event in self.server.stream("SendStreamingMessage", params, timeout=60):
                self.events.append(event)
        except Exception as exc:  # reported by the test
            self.error = exc

    def working(self) -> bool:
        return any("TASK_STATE_WORKING" in str(event.get("data")) for event in self.events)

    def chunks(self) -> int:
        return sum("artifactUpdate" in str(event.get("data")) for event in self.events)


def check_stream(stream: Streamed) -> str:
    """The stream's task id, once its events are checked: every one once, in order."""
    assert stream.error is None, stream.error
    assert all("error" not in event["data"] for event in stream.events), stream.events
    results = [event["data"]["result"] for event in stream.events]
    ids = [int(event["id"]) for event in stream.events]
    assert ids == list(range(1, len(ids) + 1)), ids  # each event once, in order
    chunks = [part["text"] for result in results if "artifactUpdate" in result
              for part in result["artifactUpdate"]["artifact"]["parts"]]
    assert chunks == [f"tick {n};" for n in range(TICKS)], chunks
    last = results[-1]["statusUpdate"]["status"]["state"]
    assert last == "TASK_STATE_COMPLETED", results[-1]
    task_id: str = results[0]["task"]["id"]
    return task_id


def check_pushes(pushes: List[Dict[str, Any]], task_id: str) -> None:
    """A task's webhook got every event once, in order (the stream's events, less
    the opening task)."""
    mine = [push["json"] for push in pushes if task_id in str(push["json"])]
    chunks = [part["text"] for body in mine if "artifactUpdate" in body
              for part in body["artifactUpdate"]["artifact"]["parts"]]
    assert chunks == [f"tick {n};" for n in range(TICKS)], chunks
    states = [body["statusUpdate"]["status"]["state"] for body in mine if "statusUpdate" in body]
    assert states == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"], states


def completed_pushes(pushes: List[Dict[str, Any]]) -> int:
    return sum("TASK_STATE_COMPLETED" in str(push["json"]) for push in pushes)


def restarted_under_load(db: Any, env: Dict[str, str], down_for: float = 0.0,
                         frozen_for: float = 0.0) -> None:
    with WebhookReceiver() as receiver, Server("tests.support.fault_app:app", workers=2, env={
            "FLASK_A2A_STORE": db.url, "FLASK_A2A_STORE_GRACE": "20",
            "FLASK_A2A_STORE_TIMEOUT": str(STORE_TIMEOUT),
            "FLASK_A2A_LEASE_TTL": "5", "FLASK_A2A_PUSH_ALLOW_PRIVATE": "1",
            "FLASK_A2A_PUSH_RETRY_DELAY": "0.1", "FLASK_A2A_PUSH_RETRY_MAX_DELAY": "0.5",
            **env}) as server:
        streams = [Streamed(server, receiver.hook()) for _ in range(TASKS)]
        for stream in streams:
            stream.start()
        # Mid-task: every run has written chunks and has more to write (the streams
        # are checked for every chunk once, in order, at the end).
        wait_until(lambda: all(stream.working() and stream.chunks() >= 2 for stream in streams),
                   20, "every task to write its first chunks")
        if frozen_for:
            with db.frozen():  # every statement hangs: the store's bound ends each one
                time.sleep(frozen_for)
        else:
            db.stop()
            time.sleep(down_for)
            db.start()
        for stream in streams:
            stream.join(60)
            assert not stream.is_alive(), "a stream did not end"
        task_ids = [check_stream(stream) for stream in streams]
        for task_id in task_ids:
            task = server.rpc("GetTask", {"id": task_id})["result"]
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            assert [p["text"] for p in task["artifacts"][0]["parts"]] == [
                f"tick {n};" for n in range(TICKS)]
        receiver.wait_for(lambda got: completed_pushes(got) >= TASKS, 30)
        # Keeper rounds and sweeps after the outage: once every webhook's cursor is at
        # its task's last event and no drain holds it, nothing late or repeated can come.
        store = open_store(db.url)
        try:
            for task_id in task_ids:
                wait_until_delivered(store, task_id)
        finally:
            store.close()
        for task_id in task_ids:
            check_pushes(list(receiver.received), task_id)
        log = server.log_text()
        assert "task store unavailable" in log, log  # the restart was felt...
        assert "Traceback" not in log, log[log.find("Traceback") - 300:][:3000]
        assert "stopped: the task store" not in log, log  # ...and ridden out
        assert "lease expired" not in log, log
        again = server.rpc("SendMessage", {"message": message("after the restart")})
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", again


def test_postgresql_restarted_under_running_tasks_and_streams():
    pytest.importorskip("psycopg")
    with seeded("postgresql") as db:
        restarted_under_load(db, {})


def test_postgresql_frozen_under_running_tasks_and_streams():
    """SIGSTOPped for 4 s (a partition, a stuck failover): each write hangs until
    A2A_STORE_TIMEOUT cuts it, then is retried; the grace covers the whole freeze."""
    pytest.importorskip("psycopg")
    with seeded("postgresql") as db:
        restarted_under_load(db, {}, frozen_for=4 * STORE_TIMEOUT)


def test_mariadb_restarted_under_running_tasks_and_streams():
    pytest.importorskip("pymysql")
    with seeded("mariadb") as db:
        restarted_under_load(db, {})


def test_redis_restarted_under_running_tasks_and_streams():
    pytest.importorskip("redis")
    with seeded("redis") as db:
        # Down for a second: a Redis restarts in milliseconds, which its client's own
        # reconnection covers; the grace is for longer ones.
        restarted_under_load(db, {}, down_for=1.0)
