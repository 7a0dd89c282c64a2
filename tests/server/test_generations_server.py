"""The A2A 1.1 draft on real servers (docs/generations.rst): a ``gunicorn -k gevent``
of two workers on each shared store (SQLite, Redis, PostgreSQL, MariaDB), one per
store for the module, spoken to over both bindings.

* generations go up by exactly one per event, never repeated, while both workers
  write one task (each follow-up runs the agent in the worker that received it);
* of two sends racing with the same ``ifGenerationMatch`` (one on each worker, one
  per binding), exactly one wins;
* long-polls held by either worker are woken by an event the other wrote, and a
  crowd of them costs the store about what one does (each worker counts its
  store's calls: ``tests/support/generations_app.py``).
"""
from __future__ import annotations

import contextlib
import json
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import requests

from tests.conftest import REDIS_URL, drop_redis_prefix, drop_sql_database, redis_up, sql_test_url
from tests.server.test_server import gunicorn_workers, workers_paused
from tests.support.helpers import Server, parse_sse, rpc_body, user_message, wait_until
from tests.support.ports import accepted_connections

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

V11 = {"A2A-Version": "1.1"}
STORES = ["sqlite", "redis", "postgresql", "mariadb"]


@contextlib.contextmanager
def _store(kind: str, folder: str) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite:///{folder}/tasks.db"
    elif kind == "redis":
        redis_up()
        prefix = f"a2atest-{uuid.uuid4().hex[:12]}"
        try:
            yield f"{REDIS_URL}?prefix={prefix}"
        finally:
            drop_redis_prefix(prefix)
    else:
        name = f"a2atest_{uuid.uuid4().hex[:12]}"
        url = sql_test_url(kind, name)
        try:
            yield url
        finally:
            drop_sql_database(kind, name)


@pytest.fixture(scope="module", params=STORES)
def served(request) -> Iterator[Tuple[Server, Path]]:
    """One two-worker server per store, and the folder of its counts and gates."""
    with tempfile.TemporaryDirectory() as folder, _store(request.param, folder) as url, \
            Server("tests.support.generations_app:app", workers=2, env={
                "FLASK_A2A_STORE": url, "FLASK_A2A_LONG_POLL_TIMEOUT": "20",
                "COUNTS_DIR": folder}) as server:
        yield server, Path(folder)


def worker_sessions(server: Server, task_id: str) -> List[requests.Session]:
    """A kept-alive connection to each of the two workers (a connection stays with the
    worker that took it), so that requests sent on them are served there: each is
    opened, asking for ``task_id``, while the other workers are paused."""
    workers = gunicorn_workers(server.proc.pid)
    assert len(workers) == 2, workers
    sessions = []
    for worker in workers:
        session = requests.Session()
        with workers_paused(server.proc.pid, set(workers) - {worker}):
            answer = session.post(server.url + "/a2a", headers=V11, timeout=30,
                                  json=rpc_body("GetTask", {"id": task_id}))
        assert int(answer.headers["X-Worker-Pid"]) == worker
        sessions.append(session)
    return sessions


def rpc(server: Server, method: str, params: Any,
        session: Any = requests) -> Tuple[Dict[str, Any], int]:
    """A 1.1 JSON-RPC call (on a connection of its own, or ``session``'s): its body and
    the worker's pid."""
    answer = session.post(server.url + "/a2a", json=rpc_body(method, params), headers=V11,
                          timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json(), int(answer.headers["X-Worker-Pid"])


def send(server: Server, text: str, task_id: str = "", rest: bool = False,
         session: Any = requests, **configuration: Any) -> Tuple[int, Dict[str, Any]]:
    """A SendMessage over either binding: (HTTP status or JSON-RPC error code, task or error)."""
    message = {**user_message(text, f"m-{uuid.uuid4().hex}")}
    if task_id:
        message["taskId"] = task_id
    params = {"message": message, "configuration": configuration}
    if rest:
        answer = session.post(server.url + "/a2a/rest/message:send", json=params,
                              headers=V11, timeout=60)
        body = answer.json()
        return answer.status_code, body.get("task", body.get("error"))
    body, _ = rpc(server, "SendMessage", params, session)
    if "error" in body:
        return body["error"]["code"], body["error"]
    return 200, body["result"]["task"]


def get(server: Server, task_id: str, rest: bool = False,
        **params: Any) -> Tuple[Dict[str, Any], int]:
    """GetTask over either binding: the task and the pid of the worker that answered."""
    if rest:
        answer = requests.get(f"{server.url}/a2a/rest/tasks/{task_id}", params=params,
                              headers=V11, timeout=60)
        assert answer.status_code == 200, answer.text
        return answer.json(), int(answer.headers["X-Worker-Pid"])
    body, pid = rpc(server, "GetTask", {"id": task_id, **params})
    return body["result"], pid


def stream(server: Server, text: str, task_id: str = "", rest: bool = False,
           session: Any = requests, **configuration: Any) -> List[Dict[str, Any]]:
    """A SendStreamingMessage over either binding (on ``session``): its events (the
    StreamResponse members' values)."""
    message = {**user_message(text, f"m-{uuid.uuid4().hex}")}
    if task_id:
        message["taskId"] = task_id
    params = {"message": message, "configuration": configuration}
    if rest:
        answer = session.post(server.url + "/a2a/rest/message:stream", json=params,
                              headers=V11, timeout=60)
        results = [event["data"] for event in parse_sse(answer.text)]
    else:
        answer = session.post(server.url + "/a2a", headers=V11, timeout=60,
                              json=rpc_body("SendStreamingMessage", params))
        results = [event["data"]["result"] for event in parse_sse(answer.text)]
    assert answer.status_code == 200, answer.text
    return [next(iter(result.values())) for result in results]


def test_generations_go_up_by_one_per_event_while_both_workers_write_one_task(served):
    server, _ = served
    events = stream(server, "ask")
    task_id = events[0]["id"]
    seen = [int(event["generation"]) for event in events]
    writers = {events[-1]["status"]["message"]["parts"][0]["text"].split()[-1]}
    sessions = worker_sessions(server, task_id)
    turn = 0
    while len(writers) < 2 or turn < 4:  # each turn runs the agent where it landed
        assert turn < 12, f"every follow-up landed on one worker: {writers}"
        events = stream(server, f"turn {turn}", task_id, rest=turn % 2 == 1,
                        session=sessions[turn % 2], ifGenerationMatch=seen[-1])
        assert events[-1]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", events
        seen += [int(event["generation"]) for event in events]
        writers.add(events[-1]["status"]["message"]["parts"][0]["text"].split()[-1])
        turn += 1
    events = stream(server, "done", task_id)
    assert events[-1]["status"]["state"] == "TASK_STATE_COMPLETED"
    seen += [int(event["generation"]) for event in events]
    # Every event of the task, over every turn: 1, 2, 3... with no gap and no repeat.
    assert seen == list(range(1, len(seen) + 1)), seen
    assert get(server, task_id)[0]["generation"] == str(seen[-1])
    assert get(server, task_id, rest=True)[0]["generation"] == str(seen[-1])


def test_of_sends_racing_on_one_generation_exactly_one_wins(served):
    server, _ = served
    status, task = send(server, "ask")
    sessions = worker_sessions(server, task["id"])  # one racer on each worker
    for round_ in range(4):
        generation = int(task["generation"])
        barrier = threading.Barrier(2)
        outcomes: List[Tuple[int, Dict[str, Any]]] = []

        def racer(rest: bool) -> None:
            barrier.wait(10)
            outcomes.append(send(server, f"racer {round_} {rest}", task["id"], rest=rest,
                                 session=sessions[rest], ifGenerationMatch=generation))

        racers = [threading.Thread(target=racer, args=(rest,)) for rest in (False, True)]
        for thread in racers:
            thread.start()
        for thread in racers:
            thread.join(60)
        statuses = sorted(status for status, _ in outcomes)
        assert statuses in ([200, 409], [-32010, 200]), outcomes
        task = next(body for status, body in outcomes if status == 200)
        assert int(task["generation"]) == generation + 2
        lost = next(body for status, body in outcomes if status != 200)
        info = (lost.get("data") or lost.get("details"))[0]
        assert info["reason"] == "TASK_GENERATION_MISMATCH"
        assert info["metadata"]["currentGeneration"] in (str(generation), str(generation + 1),
                                                         str(generation + 2))


def _counts(folder: Path) -> Dict[str, int]:
    total: Dict[str, int] = {}
    for path in folder.glob("ops-*.json"):
        for name, count in json.loads(path.read_text()).items():
            total[name] = total.get(name, 0) + count
    return total


def _settled_counts(folder: Path) -> Dict[str, int]:
    """The counts once five reports in a row (0.1 s apart) said the same."""
    last, same = _counts(folder), 1
    deadline = time.monotonic() + 10
    while same < 5:
        assert time.monotonic() < deadline, f"the counts never settled: {last}"
        threading.Event().wait(0.1)
        now = _counts(folder)
        last, same = now, same + 1 if now == last else 1
    return last


def test_long_polls_on_both_workers_wake_on_an_event_either_wrote_cheaply(served):
    server, folder = served
    crowd = 24
    for attempt in range(3):
        gate = folder / f"gate-{uuid.uuid4().hex}"
        answer, runner = rpc(server, "SendMessage", {
            "message": user_message(f"gate {gate}", f"m-{uuid.uuid4().hex}"),
            "configuration": {"returnImmediately": True}})
        task_id = answer["result"]["task"]["id"]
        wait_until(lambda: get(server, task_id)[0]["generation"] == "2", 10, "working")
        answers: List[Tuple[Dict[str, Any], int]] = []
        polls = [threading.Thread(target=lambda rest=index % 2 == 1: answers.append(
            get(server, task_id, rest=rest, currentGeneration=2))) for index in range(crowd)]
        for poll in polls:
            poll.start()
        # Parked: they hold the answers (the timeout is 20 s).  On a loaded machine the
        # last ones are accepted, and park, a while after they were sent.
        wait_until(lambda: accepted_connections(server.port) >= crowd, 20,
                   "every long-poll accepted")
        before = _settled_counts(folder)  # a worker's first request starts its reports
        assert not answers
        gate.touch()
        for poll in polls:
            poll.join(30)
        assert [task["generation"] for task, _ in answers] == ["3"] * crowd
        assert {task["status"]["state"] for task, _ in answers} == {"TASK_STATE_COMPLETED"}
        threading.Event().wait(0.5)  # the next reports
        after = _counts(folder)
        # Heads are left out: the runner's keeper reads the running task's head once a
        # second (a cancel check), however many poll it, and the gate may take seconds.
        woken = {name: after.get(name, 0) - before.get(name, 0) for name in ("read", "load")}
        # One event: each worker's feed reads it and loads the task once for its share
        # of the crowd, about 5 operations a worker; a long-poll alone costs 1 load and
        # 2 reads (tests/web), so waking each poll on its own would cost 72 here.
        assert sum(woken.values()) <= crowd // 2, woken
        if {pid for _, pid in answers} - {runner}:
            return  # some were held by the worker that did not run the task
    pytest.fail("every long-poll landed on the worker that ran the task, three times")


def test_the_client_long_polls_a_1_1_agent_and_reads_generations(served):
    from a2a_flask.client import A2AClient

    server, folder = served
    gate = folder / f"gate-{uuid.uuid4().hex}"
    for prefer in ("jsonrpc", "rest"):
        with A2AClient.connect(server.url, prefer=prefer) as client:
            assert client.generations  # the card declares 1.1 beside 1.0
            task = client.send_message(f"gate {gate}", return_immediately=True)
            assert task.generation == 1 or task.generation == 2
            done: List[Any] = []
            # Polling every 600 s would still be waiting when the gate opens: only a
            # long-poll answers at the change (a wrong answer fails, not a slow one).
            waiter = threading.Thread(target=lambda: done.append(
                client.wait_for_task(task.id, timeout=60, interval=600)))
            waiter.start()
            wait_until(lambda: client.get_task(task.id).generation == 2, 10, "working")
            gate.touch()
            waiter.join(60)
            assert done and done[0].status.state.value == "TASK_STATE_COMPLETED"
            assert done[0].generation == 3
            asked = client.send_message("ask")
            again = client.send_message("more", task_id=asked.id,
                                        if_generation_match=asked.generation)
            assert again.generation == asked.generation + 2
            from a2a_flask.errors import TaskGenerationMismatchError
            with pytest.raises(TaskGenerationMismatchError) as refused:
                client.send_message("stale", task_id=asked.id,
                                    if_generation_match=asked.generation)
            assert refused.value.metadata["currentGeneration"] == str(again.generation)
            events = list(client.send_streaming_message("done", task_id=asked.id))
            assert [e.generation for e in events] == list(
                range(again.generation + 1, again.generation + 1 + len(events)))
        gate = folder / f"gate-{uuid.uuid4().hex}"
