"""A deploy loses no acknowledged task: a stopping worker refuses new sends (HTTP 503,
``Retry-After``, reason ``WORKER_STOPPING``) instead of accepting work it would fail
at its deadline, and gives every run it accepted the whole grace; the health
endpoints tell a proxy which workers take work."""
from __future__ import annotations

import os
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Dict, List, Tuple

import pytest
import requests

from a2a_flask.protocol.models import new_id
from a2a_flask.stores import open_store

from tests.support.helpers import V1, Server, parse_sse, rpc_body, wait_until, worker_pids

TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
            "TASK_STATE_REJECTED"}


def send(server: Server, text: str, timeout: float = 5.0,
         via: Any = requests) -> requests.Response:
    """A non-blocking SendMessage, as a raw HTTP answer (``via`` a warm session)."""
    message = {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": text}]}
    return via.post(server.url + "/a2a", headers=V1, timeout=timeout, json=rpc_body(
        "SendMessage", {"message": message, "configuration": {"returnImmediately": True}}))


def warm_sessions(server: Server, count: int = 12) -> List[requests.Session]:
    """Sessions each holding a kept-alive connection to the server's worker.

    After SIGTERM gunicorn's gevent worker accepts new connections only until its
    accept loop next wakes (0 to 1 s), so a send on a new connection may never reach
    it; one on a connection it already holds does (it closes it after answering).
    Sent right after the signal, these make the stopping worker's answers certain.
    """
    sessions = []
    for _ in range(count):
        session = requests.Session()
        assert session.get(server.url + "/.well-known/agent-card.json", timeout=10).ok
        sessions.append(session)
    return sessions


def next_via(warm: List[requests.Session]) -> Any:
    """A warm session (each used once: the stopping worker closes it), then new
    connections."""
    return warm.pop(0) if warm else requests


def stream(server: Server, text: str) -> Tuple[int, List[Dict[str, Any]]]:
    """A SendStreamingMessage read to its end: the HTTP status and the results (or the
    error, for a refusal)."""
    message = {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": text}]}
    answer = requests.post(server.url + "/a2a", headers=V1, timeout=30,
                           json=rpc_body("SendStreamingMessage", {"message": message}))
    if answer.status_code != 200:
        return answer.status_code, [answer.json()["error"]]
    return 200, [event["data"].get("result", event["data"]) for event in parse_sse(answer.text)]


def state_in_store(store_url: str, task_id: str) -> str:
    store = open_store(store_url)
    try:
        record = store.load(task_id)
        return record.task.status.state.value if record is not None else "missing"
    finally:
        store.close()


@pytest.mark.parametrize("store_url", ["sqlite", "redis", "postgresql", "mariadb"], indirect=True)
def test_sends_landing_on_a_stopping_worker_are_refused_or_finished(store_url):
    """Sends keep arriving while the worker stops (gunicorn's gevent worker accepts for
    up to a second after SIGTERM): each is refused with a retryable 503 or, once a new
    worker serves, acknowledged; every acknowledged task completes, none is failed."""
    server = Server("tests.support.fault_app:app", env={"FLASK_A2A_STORE": store_url},
                    graceful_timeout=10)
    try:
        acknowledged = [send(server, "sleep 2").json()["result"]["task"]["id"] for _ in range(3)]
        (old_worker,) = worker_pids(server)
        streams: List["Future[Tuple[int, List[Dict[str, Any]]]]"] = []
        pool = ThreadPoolExecutor(8)
        warm = warm_sessions(server)
        os.kill(old_worker, signal.SIGTERM)
        refused: List[Dict[str, Any]] = []
        unreachable = 0
        ends = time.monotonic() + 1.5
        while time.monotonic() < ends or warm:
            if len(streams) < 8:  # streamed sends too, each followed to its end
                streams.append(pool.submit(stream, server, "sleep 1"))
            try:
                answer = send(server, "sleep 1", timeout=20, via=next_via(warm))
            except requests.ConnectionError:
                unreachable += 1  # nothing was accepted: the client sends it again
                continue
            if answer.status_code == 503:
                refused.append(answer.json()["error"])
                assert answer.headers["Retry-After"] == "1"
            else:
                assert answer.status_code == 200, answer.text
                acknowledged.append(answer.json()["result"]["task"]["id"])
            time.sleep(0.05)
        # A streamed send is refused the same way, or streams its task to the end (here
        # they are refused: the window ends before the worker is replaced).
        answered = 0
        for future in streams:
            try:
                status, results = future.result(timeout=40)
            except requests.ConnectionError:
                continue  # nothing was accepted
            answered += 1
            if status == 503:
                refused.append(results[0])
            else:
                assert status == 200, results
                final = results[-1]
                assert final["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", results
        assert answered, "no streamed send was answered"
        pool.shutdown()
        # The first sends after the signal reach the stopping worker, which refuses them.
        assert refused, (len(acknowledged), unreachable)
        for error in refused:
            assert error["code"] == -32603
            assert error["data"][0]["reason"] == "WORKER_STOPPING", error
        wait_until(lambda: all(state_in_store(store_url, task_id) in TERMINAL
                               for task_id in acknowledged), 30, "every task to end")
        states = {task_id: state_in_store(store_url, task_id) for task_id in acknowledged}
        assert set(states.values()) == {"TASK_STATE_COMPLETED"}, states
        assert f"worker {old_worker} stopped" not in server.log_text()
    finally:
        server.stop()


def test_health_endpoints_on_a_real_server_say_when_a_worker_stops(tmp_path):
    """Readiness turns 503 while the worker stops (its runs finishing), so that a
    proxy sends new work elsewhere; liveness needs no store."""
    server = Server("tests.support.fault_app:app", graceful_timeout=10,
                    env={"FLASK_A2A_STORE": f"sqlite:///{tmp_path}/tasks.db",
                         "FLASK_A2A_HEALTH_PATH": "/healthz"})
    try:
        assert requests.get(server.url + "/healthz", timeout=5).json() == {"status": "ok"}
        ready = requests.get(server.url + "/healthz/ready", timeout=5)
        assert ready.status_code == 200, ready.text
        assert ready.json()["agents"]["a2a"] == {"store": "ok", "stopping": False}
        task_id = send(server, "sleep 3").json()["result"]["task"]["id"]
        (worker,) = worker_pids(server)
        warm = warm_sessions(server)
        os.kill(worker, signal.SIGTERM)
        answers = []
        ends = time.monotonic() + 1.0
        while time.monotonic() < ends or warm:
            try:
                answers.append(next_via(warm).get(server.url + "/healthz/ready", timeout=20))
            except requests.ConnectionError:
                pass
            time.sleep(0.05)
        stopping = [a for a in answers if a.status_code == 503]
        assert stopping, [a.status_code for a in answers]
        assert stopping[0].json()["agents"]["a2a"] == {"store": "ok", "stopping": True}
        assert stopping[0].headers["Retry-After"] == "1"
        wait_until(lambda: state_in_store(f"sqlite:///{tmp_path}/tasks.db", task_id)
                   in TERMINAL, 20, "the running task to end")
        assert state_in_store(f"sqlite:///{tmp_path}/tasks.db", task_id) == "TASK_STATE_COMPLETED"
    finally:
        server.stop()


@pytest.mark.parametrize("store_url", ["sqlite", "redis", "postgresql", "mariadb"], indirect=True)
def test_with_the_celery_runner_a_stopping_web_worker_refuses_and_the_runs_go_on(
        store_url, tmp_path):
    """The Celery runner: the runs live in the Celery worker, so a web worker's stop
    fails none; sends that reach the stopping web worker are refused (retryable), the
    others are queued and completed by the Celery worker; on every shared store."""
    from tests.conftest import redis_up
    from tests.web.test_celery import REDIS_BROKER, Worker, drop_queue

    redis_up()
    queue = f"a2a-test-{new_id()}"
    env = {"FLASK_A2A_STORE": store_url, "CELERY_BROKER_URL": REDIS_BROKER,
           "CELERY_QUEUE": queue}
    worker = web = None
    try:
        worker = Worker("examples.celery_agent:celery", env, concurrency=4, log_dir=tmp_path)
        web = Server("examples.celery_agent:app", env=env, graceful_timeout=10)
        acknowledged = [send(web, "slow:2").json()["result"]["task"]["id"] for _ in range(2)]
        (old_worker,) = worker_pids(web)
        warm = warm_sessions(web)
        os.kill(old_worker, signal.SIGTERM)
        refused = 0
        ends = time.monotonic() + 1.5
        while time.monotonic() < ends or warm:
            try:
                answer = send(web, "hello", timeout=20, via=next_via(warm))
            except requests.ConnectionError:
                continue
            if answer.status_code == 503:
                assert answer.json()["error"]["data"][0]["reason"] == "WORKER_STOPPING"
                refused += 1
            else:
                assert answer.status_code == 200, answer.text
                acknowledged.append(answer.json()["result"]["task"]["id"])
            time.sleep(0.05)
        assert refused
        wait_until(lambda: all(state_in_store(store_url, task_id) in TERMINAL
                               for task_id in acknowledged), 40, "every task to end")
        states = {task_id: state_in_store(store_url, task_id) for task_id in acknowledged}
        assert set(states.values()) == {"TASK_STATE_COMPLETED"}, states
    finally:
        for made in (web, worker):
            if made is not None:
                made.stop()
        drop_queue(REDIS_BROKER, queue)
