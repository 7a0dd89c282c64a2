"""Faults in the task store, under real gunicorn -k gevent: callers hear "task store
unavailable" (REST 503 + Retry-After, JSON-RPC -32603), open streams end with one
error event, the worker keeps answering, and everything recovers without a restart."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List

import pytest
import requests

from a2a_flask.protocol.models import new_id

from tests.support.dbservers import RedisServer
from tests.support.helpers import V1, Probing, Server, parse_sse, probe, rpc_body, wait_until
from tests.support.tasks import message

pytestmark = pytest.mark.declare(slow=[
    "test_redis_killed_mid_stream_and_restarted",
    "test_redis_down_is_unavailable_and_back_is_fine"])

UNAVAILABLE = "The task store is unavailable; try again shortly"


def get_task(server: Server, task_id: str) -> Dict[str, Any]:
    return requests.post(server.url + "/a2a", json=rpc_body("GetTask", {"id": task_id}),
                         headers=V1, timeout=10).json()


def ready(server: Server) -> tuple:
    """The readiness endpoint's status and what it says of the store."""
    answer = requests.get(server.url + "/healthz/ready", timeout=10)
    return answer.status_code, answer.json()["agents"]["a2a"]["store"]


def test_redis_killed_mid_stream_and_restarted(tmp_path):
    pytest.importorskip("redis")
    # An outage past A2A_STORE_GRACE (1 s here): what a blip within it does is in
    # tests/stores/test_blips.py and tests/server/test_blips_restart.py.
    with RedisServer(tmp_path) as redis_server, Server("tests.support.fault_app:app", env={
            "FLASK_A2A_STORE": f"{redis_server.url}?prefix=faults-{new_id()[:8]}",
            "FLASK_A2A_LEASE_TTL": "3", "FLASK_A2A_STORE_GRACE": "1",
            "FLASK_A2A_HEALTH_PATH": "/healthz"}) as server:
        assert ready(server) == (200, "ok")
        done = server.rpc("SendMessage", {"message": message("before the outage")})
        done_id = done["result"]["task"]["id"]
        events: List[Dict[str, Any]] = []
        stream = requests.post(server.url + "/a2a", json=rpc_body(
            "SendStreamingMessage", {"message": message("sleep 2")}), headers=V1,
            stream=True, timeout=20)
        lines = stream.iter_lines(decode_unicode=True)
        buffer: List[str] = []

        def read_stream() -> None:
            for line in lines:
                buffer.append(line)
            events.extend(parse_sse("\n".join(buffer) + "\n\n"))

        reader = threading.Thread(target=read_stream, daemon=True)
        reader.start()
        wait_until(lambda: any("TASK_STATE_WORKING" in line for line in buffer), 10,
                   "the stream's first events")
        running_id = parse_sse("\n".join(buffer) + "\n\n")[0]["data"]["result"]["task"]["id"]

        redis_server.kill()
        # Readiness says so (a probe's result is reused for a second), liveness not.
        wait_until(lambda: ready(server) == (503, "unavailable"), 15, "readiness to turn 503")
        assert requests.get(server.url + "/healthz", timeout=10).status_code == 200
        with Probing(server.url, done_id) as probing:
            # JSON-RPC: -32603 with a message that says what happened, nothing internal.
            answer = get_task(server, done_id)
            assert answer["error"]["code"] == -32603, answer
            assert answer["error"]["message"] == UNAVAILABLE
            assert "redis" not in json.dumps(answer).lower()
            # REST: 503 with Retry-After.
            rest = requests.get(f"{server.url}/a2a/rest/tasks/{done_id}", headers=V1,
                                timeout=10)
            assert rest.status_code == 503, rest.text
            assert rest.headers["Retry-After"].isdigit()
            assert rest.json()["error"]["status"] == "UNAVAILABLE"
            # A new task is refused the same way (nothing is acknowledged and then lost).
            refused = requests.post(server.url + "/a2a", json=rpc_body(
                "SendMessage", {"message": message("during the outage")}),
                headers=V1, timeout=10).json()
            assert refused["error"]["message"] == UNAVAILABLE, refused
            # The open stream ends with one error event.
            reader.join(10)
            assert not reader.is_alive(), "the stream did not end"
            errors = [e for e in events if e.get("event") == "error"]
            assert len(errors) == 1, events
            assert errors[0]["data"]["error"]["message"] == UNAVAILABLE
            # The running task's executor ends while the store is down.
            wait_until(lambda: f"task {running_id} stopped: the task store is unavailable"
                       in server.log_text(), 30, "the running task to stop")
            probing.wait_for(5)
        log = server.log_text()
        assert "task store unavailable" in log
        assert "Traceback" not in log, log[log.find("Traceback") - 300:][:2500]

        redis_server.start()  # the same data (append-only file), the same port
        recovered = wait_until(lambda: "result" in get_task(server, done_id), 15,
                               "GetTask to answer again")
        assert recovered
        wait_until(lambda: ready(server) == (200, "ok"), 15, "readiness to turn 200 again")
        # The task that was running is FAILED with a clear message, not left WORKING.
        failed = wait_until(
            lambda: (lambda t: t if t["status"]["state"] == "TASK_STATE_FAILED" else None)(
                get_task(server, running_id)["result"]), 15, "the interrupted task to fail")
        assert "task store was unavailable" in failed["status"]["message"]["parts"][0]["text"]
        again = server.rpc("SendMessage", {"message": message("after the outage")})
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        probe(server.url, done_id)


LOCKER = """
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
db.execute("COMMIT")
"""


def test_sqlite_write_locked_by_another_process(tmp_path):
    """Another process holds the database's write lock for 2 s: reads go on, writes
    wait cooperatively (a lock past the store's busy timeout answers "unavailable":
    test_sqlite_locked_past_its_timeout_is_unavailable), the worker answers the probe
    all along, and writes work again after."""
    db = tmp_path / "tasks.db"
    env = {"FLASK_A2A_STORE": f"sqlite:///{db}"}
    with Server("tests.support.fault_app:app", env=env, workers=2) as server:
        done_id = server.rpc("SendMessage", {"message": message("before")})["result"]["task"]["id"]
        locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(db), "2"],
                                  stdout=subprocess.PIPE, text=True)
        try:
            assert locker.stdout.readline().strip() == "locked"
            outcomes: List[Dict[str, Any]] = []

            def send() -> None:
                outcomes.append(requests.post(server.url + "/a2a", json=rpc_body(
                    "SendMessage", {"message": message("during the lock")}), headers=V1,
                    timeout=20).json())

            senders = [threading.Thread(target=send) for _ in range(4)]
            with Probing(server.url, done_id) as probing:
                for sender in senders:
                    sender.start()
                for sender in senders:
                    sender.join(20)
                locker.wait(10)
                probing.wait_for(10)
        finally:
            locker.kill()
        assert len(outcomes) == 4
        for outcome in outcomes:  # each acknowledged task finished; others were told why
            if "error" in outcome:
                assert outcome["error"]["message"] == UNAVAILABLE, outcome
            else:
                assert outcome["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        after = server.rpc("SendMessage", {"message": message("after")})
        assert after["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_shelve_under_two_workers_with_concurrent_writers(tmp_path):
    """Two workers write one shelf at once: every task completes and is visible from
    either worker; the file lock never stalls a worker (the watchdog is on)."""
    env = {"FLASK_A2A_STORE": f"shelve:///{tmp_path}/tasks"}
    with Server("tests.support.fault_app:app", env=env, workers=2) as server:
        ids: List[str] = []
        errors: List[Any] = []

        def send(n: int) -> None:
            try:
                body = server.rpc("SendMessage", {"message": message(f"writer {n}")})
                task = body["result"]["task"]
                assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
                ids.append(task["id"])
            except BaseException as exc:  # reported below
                errors.append(exc)

        with Probing(server.url) as probing:
            threads = [threading.Thread(target=send, args=(n,)) for n in range(24)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
        assert not errors, errors[:3]
        assert probing.count >= 1
        for task_id in ids:
            assert get_task(server, task_id)["result"]["status"]["state"] == \
                "TASK_STATE_COMPLETED"


# ------------------------------------------------------------ each store's own outage


HOLD_FLOCK = """
import fcntl, sys, time
with open(sys.argv[1], "a+b") as f:
    fcntl.flock(f, fcntl.LOCK_EX)
    print("locked", flush=True)
    time.sleep(float(sys.argv[2]))
"""


def test_sqlite_locked_past_its_timeout_is_unavailable(tmp_path, monkeypatch):
    from a2a_flask import StoreUnavailable
    from a2a_flask.stores import sqlite as sqlite_store

    store = sqlite_store.SQLiteStore(str(tmp_path / "t.db"))
    monkeypatch.setattr(sqlite_store, "BUSY_TIMEOUT", 0.3)
    locker = subprocess.Popen([sys.executable, "-c", LOCKER, str(tmp_path / "t.db"), "3"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert locker.stdout.readline().strip() == "locked"
        started = time.monotonic()
        with pytest.raises(StoreUnavailable) as caught:
            store.put_push_target("t", _target())
        assert time.monotonic() - started < 2
        assert "locked" in str(caught.value.__cause__)
        assert store.load("t") is None  # reads go on (WAL)
    finally:
        locker.kill()
        locker.wait()
    store.put_push_target("t", _target())  # and writes again once the lock is gone
    store.close()


def test_shelve_write_lock_held_past_its_timeout_is_unavailable(tmp_path, monkeypatch):
    from a2a_flask import StoreUnavailable
    from a2a_flask.stores import recordlog
    from a2a_flask.stores import shelve as shelve_store

    store = shelve_store.ShelveStore(str(tmp_path / "tasks"))
    monkeypatch.setattr(recordlog, "LOCK_TIMEOUT", 0.3)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_FLOCK, store.path + ".lock", "3"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        with pytest.raises(StoreUnavailable):
            store.claim("push:t", "me", 5.0)  # a write: it needs the lock
        assert time.monotonic() - started < 2
        assert store.load("t") is None  # reads take no lock
    finally:
        holder.kill()
        holder.wait()
    assert store.claim("push:t", "me", 5.0)
    store.close()


def test_redis_down_is_unavailable_and_back_is_fine(tmp_path):
    pytest.importorskip("redis")
    from a2a_flask import StoreUnavailable
    from a2a_flask.stores import open_store

    with RedisServer(tmp_path) as redis_server:
        store = open_store(f"{redis_server.url}?prefix=u-{new_id()[:8]}")
        assert store.load("t") is None
        redis_server.kill()
        for call in (lambda: store.load("t"), lambda: store.wait("t", 0, 0.5),
                     lambda: store.claim("k", "me", 1.0)):
            with pytest.raises(StoreUnavailable):
                call()
        redis_server.start()
        assert store.load("t") is None
        store.close()


def _target():
    from a2a_flask.protocol.models import TaskPushNotificationConfig
    from a2a_flask.stores.base import PushTarget

    return PushTarget(TaskPushNotificationConfig(url="https://example.com/h", id="c", task_id="t"))
