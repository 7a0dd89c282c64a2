"""Idempotent sends on real servers: a 2-worker gunicorn on each shared store (SQLite,
Redis, PostgreSQL, MariaDB), one server per store for the module (docs/safe-retries.rst).

The agent (tests/support/idempotency_app.py) appends each run's task id to a file all
workers share: the runs of every worker are counted."""
from __future__ import annotations

import hashlib
import threading
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import requests

from a2a_flask.client import A2AClient
from a2a_flask.protocol import models as m

from tests.conftest import (REDIS_URL, drop_redis_prefix, drop_sql_database, redis_up,
                            sql_test_url)
from tests.support.helpers import ALICE, BOB, V1, Server, parse_sse, rpc_body
from tests.support.tasks import message

STORES = ["sqlite", "redis", "postgresql", "mariadb"]
#: Identical sends at once, with one key, spread over both workers.
CROWD = 20


@pytest.fixture(scope="module", params=STORES)
def served(request, tmp_path_factory) -> Iterator[Tuple[Server, Path]]:
    """(the server, the file its agent counts runs in), per store."""
    kind = request.param
    folder = tmp_path_factory.mktemp(f"idem-{kind}")
    name = "a2aidem_" + hashlib.sha1(str(folder).encode()).hexdigest()[:12]
    cleanup: Any = None
    if kind == "sqlite":
        url = f"sqlite:///{folder / 'tasks.db'}"
    elif kind == "redis":
        redis_up()
        url = f"{REDIS_URL}?prefix={name}"
        cleanup = lambda: drop_redis_prefix(name)  # noqa: E731
    else:
        url = sql_test_url(kind, name)
        cleanup = lambda: drop_sql_database(kind, name)  # noqa: E731
    runs = folder / "runs.txt"
    runs.touch()
    env = {"FLASK_A2A_STORE": url, "A2A_TEST_RUNS": str(runs)}
    try:
        with Server("tests.support.idempotency_app:app", workers=2, env=env) as server:
            yield server, runs
    finally:
        if cleanup is not None:
            cleanup()


def runs_of(runs: Path) -> List[str]:
    return runs.read_text().split()


def send(server: Server, params: Dict[str, Any], key: str, caller: Dict[str, str] = ALICE,
         method: str = "SendMessage") -> Dict[str, Any]:
    answer = requests.post(server.url + "/a2a", json=rpc_body(method, params), timeout=30,
                           headers={**V1, **caller, "Idempotency-Key": key})
    assert answer.status_code == 200, answer.text
    body: Dict[str, Any] = answer.json()
    return body


def test_concurrent_duplicates_make_one_task_and_one_run(served):
    server, runs = served
    before = runs_of(runs)
    sent, key = message("slow 0.5"), str(uuid.uuid4())
    answers: List[Dict[str, Any]] = []
    barrier = threading.Barrier(CROWD)

    def one() -> None:
        barrier.wait(10)
        answers.append(send(server, {"message": sent}, key))

    threads = [threading.Thread(target=one) for _ in range(CROWD)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(answers) == CROWD, answers
    tasks = {a["result"]["task"]["id"] for a in answers}
    assert len(tasks) == 1, answers[:3]
    assert {a["result"]["task"]["status"]["state"] for a in answers} == {"TASK_STATE_COMPLETED"}
    assert runs_of(runs)[len(before):] == list(tasks)


def test_the_same_key_with_another_request_is_refused(served):
    server, runs = served
    key = str(uuid.uuid4())
    first = send(server, {"message": message("one")}, key)["result"]["task"]
    other = send(server, {"message": message("two")}, key)["error"]
    assert other["code"] == -32602 and other["data"][0]["reason"] == "IDEMPOTENCY_KEY_REUSED"
    rest = requests.post(server.url + "/a2a/rest/message:send", json={"message": message("x")},
                         headers={**ALICE, "A2A-Version": "1.0", "Idempotency-Key": key},
                         timeout=30)
    assert rest.status_code == 422, rest.text
    assert runs_of(runs).count(first["id"]) == 1


def test_keys_are_per_caller(served):
    server, runs = served
    sent, key = message("hi"), str(uuid.uuid4())
    alice = send(server, {"message": sent}, key, ALICE)["result"]["task"]
    bob = send(server, {"message": sent}, key, BOB)["result"]["task"]
    assert alice["id"] != bob["id"]
    assert send(server, {"message": sent}, key, BOB)["result"]["task"]["id"] == bob["id"]
    hidden = send(server, {"id": alice["id"]}, key, BOB, method="GetTask")
    assert hidden["error"]["code"] == -32001
    assert set(runs_of(runs)) >= {alice["id"], bob["id"]}


def test_a_retried_stream_replays_the_first_run_then_goes_on(served):
    server, runs = served
    sent, key = message("steps"), str(uuid.uuid4())

    def stream() -> List[Dict[str, Any]]:
        with requests.post(server.url + "/a2a", json=rpc_body("SendStreamingMessage",
                                                              {"message": sent}),
                           headers={**V1, **ALICE, "Idempotency-Key": key}, timeout=30) as answer:
            return [event["data"]["result"] for event in parse_sse(answer.text)]

    first, again = stream(), stream()
    assert again == first and "task" in first[0] and len(first) >= 5
    assert runs_of(runs).count(first[0]["task"]["id"]) == 1


def test_a_client_that_times_out_on_a_blocking_agent_gets_one_task(served):
    """The client's read timeout (1 s) is shorter than the agent (2 s): it gives up on
    the answer of a send the server accepted, and tries again with the same key."""
    server, runs = served
    before = runs_of(runs)
    with A2AClient(server.url + "/a2a", headers=ALICE, timeout=(5, 1.0), retries=4,
                   retry_backoff=0.2) as client:
        task = client.send_message("slow 2")
    assert isinstance(task, m.Task) and task.status.state is m.TaskState.COMPLETED
    assert runs_of(runs)[len(before):] == [task.id]
