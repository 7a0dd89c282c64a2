"""Idempotent sends in-process: the ``Idempotency-Key`` header on every binding and dialect
(docs/safe-retries.rst).  The real-server cases (workers, shared stores) are in
tests/server/test_idempotency_servers.py."""
from __future__ import annotations

import threading
from typing import Any, Dict, List

import pytest
from flask import Flask

from a2a_flask import A2A

from a2a_flask.engine import once
from a2a_flask.protocol.models import SendMessageRequest, TaskState
from a2a_flask.protocol.codec import decode
from a2a_flask.stores.base import TaskQuery

from tests.conftest import make_card
from tests.support import wire
from tests.support.helpers import ALICE, BOB, bearer_auth
from tests.support.tasks import message, message03

RUNS: List[str] = []


def counted(ctx: Any) -> None:
    """An agent that counts its runs and answers with a Message (as echo does)."""
    RUNS.append(ctx.task_id)
    if ctx.text == "ask":
        ctx.ask("more?")
    else:
        ctx.complete("done")


def tasks_in(app: Any, owner: str = "") -> int:
    store = app.extensions["a2a"]["a2a"].store
    return len(store.list_tasks(TaskQuery(owner=owner)).records)


@pytest.fixture
def app(make_app):
    RUNS.clear()
    return make_app(counted)


def key(value: str) -> Dict[str, str]:
    return {"Idempotency-Key": value}


def test_the_same_send_twice_makes_one_task_and_one_run(app):
    sent = message("hi")
    first = wire.rpc(app, "SendMessage", {"message": sent}, headers=key("k-1"))["result"]
    again = wire.rpc(app, "SendMessage", {"message": sent}, headers=key("k-1"))["result"]
    assert first["task"]["id"] == again["task"]["id"]
    assert again["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert RUNS == [first["task"]["id"]] and tasks_in(app) == 1


def test_without_a_key_the_same_message_is_sent_again(app):
    sent = message("hi")
    for _ in range(2):
        wire.rpc(app, "SendMessage", {"message": sent})
    assert len(RUNS) == 2


def test_a_retry_may_ask_for_another_shape_of_answer(app):
    sent = message("hi")
    first = wire.rpc(app, "SendMessage", {"message": sent}, headers=key("k"))["result"]
    again = wire.rpc(app, "SendMessage", {"message": sent, "configuration": {
        "returnImmediately": True, "historyLength": 0}}, headers=key("k"))["result"]
    assert again["task"]["id"] == first["task"]["id"] and "history" not in again["task"]
    assert len(RUNS) == 1


def test_the_same_key_with_another_request_is_refused(app):
    wire.rpc(app, "SendMessage", {"message": message("one")}, headers=key("k"))
    error = wire.rpc(app, "SendMessage", {"message": message("two")}, headers=key("k"))["error"]
    assert error["code"] == -32602
    assert error["data"][0]["reason"] == "IDEMPOTENCY_KEY_REUSED"
    assert len(RUNS) == 1 and tasks_in(app) == 1


def test_rest_answers_the_same_task_and_422_for_another_request(app):
    client = app.test_client()
    sent = message("hi")
    first = client.post("/a2a/rest/message:send", json={"message": sent}, headers=key("r"))
    again = client.post("/a2a/rest/message:send", json={"message": sent}, headers=key("r"))
    assert first.status_code == again.status_code == 200
    assert first.get_json()["task"]["id"] == again.get_json()["task"]["id"]
    other = client.post("/a2a/rest/message:send", json={"message": message("x")},
                        headers=key("r"))
    assert other.status_code == 422
    assert other.get_json()["error"]["details"][0]["reason"] == "IDEMPOTENCY_KEY_REUSED"
    assert len(RUNS) == 1


@pytest.mark.parametrize("bad, problem", [
    ("", "must not be empty"), ("k" * 256, "longer than 255"),
    ("a b", "printable ASCII"), ("caf\u00e9", "printable ASCII")])
def test_a_bad_key_is_refused_before_anything_is_stored(app, bad, problem):
    response = wire.post(app, "SendMessage", {"message": message()},
                         headers={"Idempotency-Key": bad.encode("utf-8").decode("latin-1")})
    error = response.json()["error"]
    assert error["code"] == -32602 and problem in error["message"]
    assert RUNS == [] and tasks_in(app) == 0
    rest = app.test_client().post("/a2a/rest/message:send", json={"message": message()},
                                  headers={"Idempotency-Key": "a b"})
    assert rest.status_code == 400


def test_a_retried_stream_replays_the_first_run_from_its_start(app):
    sent = message("hi")
    first = wire.stream(app, "SendStreamingMessage", {"message": sent}, headers=key("s"))
    again = wire.stream(app, "SendStreamingMessage", {"message": sent}, headers=key("s"))
    assert [e["data"]["result"] for e in again] == [e["data"]["result"] for e in first]
    assert len(RUNS) == 1


def test_a_blocking_retry_of_a_stream_gets_its_task(app):
    sent = message("hi")
    first = wire.stream(app, "SendStreamingMessage", {"message": sent}, headers=key("s"))
    again = wire.rpc(app, "SendMessage", {"message": sent}, headers=key("s"))["result"]
    assert again["task"]["id"] == first[0]["data"]["result"]["task"]["id"]
    assert len(RUNS) == 1


def test_keys_are_per_caller():
    RUNS.clear()
    app = Flask("keys")
    A2A(app, card=make_card(), executor=counted, store="memory://", auth=bearer_auth())
    sent = message("hi")
    alice = wire.rpc(app, "SendMessage", {"message": sent},
                     headers={**ALICE, **key("shared")})["result"]
    bob = wire.rpc(app, "SendMessage", {"message": sent},
                   headers={**BOB, **key("shared")})["result"]
    assert alice["task"]["id"] != bob["task"]["id"] and len(RUNS) == 2
    missing = wire.rpc(app, "GetTask", {"id": alice["task"]["id"]}, headers=BOB)
    assert missing["error"]["code"] == -32001


def test_a_continued_task_gets_the_message_once(app):
    first = wire.rpc(app, "SendMessage", {"message": message("ask")})["result"]["task"]
    turn = message("more", taskId=first["id"])
    for _ in range(2):
        wire.rpc(app, "SendMessage", {"message": turn}, headers=key("turn"))
    task = wire.rpc(app, "GetTask", {"id": first["id"]})["result"]
    assert [m["messageId"] for m in task["history"]].count(turn["messageId"]) == 1
    assert len(RUNS) == 2 and task["status"]["state"] == "TASK_STATE_COMPLETED"


def test_0_3_json_rpc_sends_are_idempotent_too(app):
    sent = message03("hi")
    answers = [wire.rpc(app, "message/send", {"message": sent}, version=None,
                        headers=key("old"))["result"] for _ in range(2)]
    assert answers[0]["id"] == answers[1]["id"] and len(RUNS) == 1


def test_concurrent_duplicates_in_one_process_make_one_task(make_app):
    RUNS.clear()
    gate = threading.Event()

    def slow(ctx: Any) -> None:
        RUNS.append(ctx.task_id)
        gate.wait(5)
        ctx.complete("done")

    app = make_app(slow)
    sent = message("hi")
    answers: List[Dict[str, Any]] = []

    def send() -> None:
        answers.append(wire.rpc(app, "SendMessage", {"message": sent, "configuration": {
            "returnImmediately": True}}, headers=key("crowd"))["result"])

    threads = [threading.Thread(target=send) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    gate.set()
    assert len({a["task"]["id"] for a in answers}) == 1 and len(answers) == 8
    assert len(RUNS) == 1


def test_the_fingerprint_ignores_only_what_shapes_the_answer():
    def request(**config: Any) -> SendMessageRequest:
        return decode(SendMessageRequest, {"message": {"role": "ROLE_USER", "messageId": "m",
                                                       "parts": [{"text": "x"}]},
                                           "configuration": config})
    plain = once.fingerprint(request())
    assert once.fingerprint(request(historyLength=3, returnImmediately=True)) == plain
    assert once.fingerprint(request(acceptedOutputModes=["text/plain"])) != plain
    assert once.fingerprint(request(), "named") != plain


def test_a_key_whose_first_send_never_made_its_task_is_taken_over(app, monkeypatch):
    service = app.extensions["a2a"]["a2a"].service
    sent = message("hi")
    request = decode(SendMessageRequest, {"message": dict(sent)})
    held = once.once_for("orphan", request, "", "", "", 60.0)
    assert held is not None
    service.store.claim_once(held.key, held.value("lost-task"), 60.0)  # a worker died here
    monkeypatch.setattr(once, "ACCEPT_WAIT", 0.05)
    answer = wire.rpc(app, "SendMessage", {"message": sent}, headers=key("orphan"))["result"]
    assert answer["task"]["id"] == "lost-task" and RUNS == ["lost-task"]
    assert answer["task"]["status"]["state"] == TaskState.COMPLETED.value


def test_0_3_rest_sends_are_idempotent_too(app):
    client = app.test_client()
    sent = {"messageId": "m-1", "role": "ROLE_USER", "content": [{"text": "hi"}]}
    answers = [client.post("/a2a/rest/v1/message:send", json={"message": sent},
                           headers=key("old-rest")) for _ in range(2)]
    assert [a.status_code for a in answers] == [200, 200], answers[0].get_data()
    tasks = [a.get_json()["task"]["id"] for a in answers]
    assert tasks[0] == tasks[1] and len(RUNS) == 1


def test_0_1_sends_with_their_task_id_are_idempotent_too(app):
    params = {"id": "client-named", "message": {"role": "user",
                                                "parts": [{"type": "text", "text": "hi"}]}}
    answers = [wire.rpc(app, "tasks/send", params, version=None, headers=key("oldest"))
               for _ in range(2)]
    assert answers[0]["result"]["id"] == answers[1]["result"]["id"] == "client-named"
    assert RUNS == ["client-named"]
