"""Request limits: body size, parts, inline files, history, streams per caller."""
from __future__ import annotations

import base64
import json
import socket
import threading
import time

import pytest
from flask import Flask

from a2a_flask import A2A, AgentCapabilities
from a2a_flask.config import field_default
from a2a_flask.engine.service import ANONYMOUS
from a2a_flask.stores import MemoryStore
from a2a_flask.stores.base import TaskQuery

from tests.conftest import make_card
from tests.support import wire
from tests.support.helpers import ALICE, BOB, V1, Gate, Server, bearer_auth, rpc_body
from tests.support.tasks import message
from tests.support.wire import rpc

pytestmark = pytest.mark.declare(server=[
    "test_a_chunked_oversized_body_is_refused_over_real_http"])


def tasks_in(app) -> int:
    return len(app.extensions["a2a"]["a2a"].store.list_tasks(TaskQuery()).records)


def test_an_oversized_json_rpc_body_is_413_with_a_json_error(make_app):
    app = make_app(max_content_length=1000)
    response = wire.post(app, "SendMessage", {"message": message("x" * 2000)})
    assert response.status_code == 413
    assert wire.mimetype(response) == "application/json"
    body = response.json()
    assert body["error"]["code"] == -32600
    assert body["error"]["data"][0]["reason"] == "PAYLOAD_TOO_LARGE"
    assert "A2A_MAX_CONTENT_LENGTH" in body["error"]["message"]
    assert tasks_in(app) == 0


def test_an_oversized_rest_body_is_413_with_a_json_error(make_app):
    app = make_app(max_content_length=1000)
    response = app.test_client().post("/a2a/rest/message:send",
                                      json={"message": message("x" * 2000)})
    assert response.status_code == 413 and response.mimetype == "application/json"
    error = response.get_json()["error"]
    assert (error["code"], error["status"]) == (413, "INVALID_ARGUMENT")
    assert error["details"][0]["reason"] == "PAYLOAD_TOO_LARGE"


def test_a_body_at_the_limit_is_served(make_app):
    body = rpc_body("SendMessage", {"message": message("ok")})
    size = len(json.dumps(body).encode())
    client = make_app(max_content_length=size).test_client()
    response = wire.post(client, "SendMessage", body=body)
    assert response.status_code == 200 and "result" in response.json()


def test_a_chunked_oversized_body_is_refused_over_real_http(tmp_path):
    """No Content-Length to check first: the limit holds while reading."""
    with Server("examples.echo_agent:app", env={"FLASK_A2A_MAX_CONTENT_LENGTH": "2048"}) as server:
        payload = ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":'
                   '{"role":"ROLE_USER","messageId":"m","parts":[{"text":"'
                   + "x" * 10000 + '"}]}}}').encode()
        chunks = b"".join(b"%x\r\n%s\r\n" % (len(payload[i:i + 1000]), payload[i:i + 1000])
                          for i in range(0, len(payload), 1000)) + b"0\r\n\r\n"
        head = (f"POST /a2a HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n"
                "Content-Type: application/json\r\nA2A-Version: 1.0\r\n"
                "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            # Past the limit, but not all of it: the server answers without reading the
            # rest (sending more would race its close and reset the connection).
            sock.sendall(head + chunks[:3100])
            answer = b""
            while True:
                data = sock.recv(65536)
                if not data:
                    break
                answer += data
        status_line, _, rest = answer.partition(b"\r\n")
        assert b" 413 " in status_line, answer[:300]
        assert b'"PAYLOAD_TOO_LARGE"' in rest and b"Traceback" not in rest


def test_too_many_parts_is_invalid_params_and_starts_nothing(make_app):
    calls = []
    app = make_app(lambda ctx: calls.append(1) or "hi", max_parts=3)
    client = app.test_client()
    parts = [{"text": str(i)} for i in range(4)]
    body = rpc(client, "SendMessage", {"message": {**message(), "parts": parts}})
    assert body["error"]["code"] == -32602
    fields = body["error"]["data"][1]["fieldViolations"]
    assert fields[0]["field"] == "message.parts" and "at most 3" in fields[0]["description"]
    assert calls == [] and tasks_in(app) == 0
    ok = rpc(client, "SendMessage", {"message": {**message(), "parts": parts[:3]}})
    assert "result" in ok


def test_an_inline_file_over_the_limit_is_invalid_params(make_app):
    client = make_app(max_file_size=10).test_client()
    raw = base64.b64encode(b"x" * 11).decode()
    parts = [{"text": "see file"}, {"raw": raw, "mediaType": "text/plain", "filename": "f.txt"}]
    body = rpc(client, "SendMessage", {"message": {**message(), "parts": parts}})
    assert body["error"]["code"] == -32602
    violation = body["error"]["data"][1]["fieldViolations"][0]
    assert violation["field"] == "message.parts[1].raw" and "11 bytes" in violation["description"]
    assert "url part" in body["error"]["message"]
    small = [{"raw": base64.b64encode(b"x" * 10).decode(), "mediaType": "text/plain"}]
    assert "result" in rpc(client, "SendMessage", {"message": {**message(), "parts": small}})


def test_the_history_keeps_the_newest_messages(make_app, store_url):
    def asker(ctx):
        ctx.ask(f"and then? ({len(ctx.history)})")

    client = make_app(asker, store=store_url, max_history=4).test_client()
    task = rpc(client, "SendMessage", {"message": message("turn 0")})["result"]["task"]
    for turn in range(1, 6):
        body = rpc(client, "SendMessage", {"message": message(f"turn {turn}", taskId=task["id"])})
        task = body["result"]["task"]
    got = rpc(client, "GetTask", {"id": task["id"]})["result"]
    texts = [m["parts"][0]["text"] for m in got["history"]]
    assert len(texts) == 4
    assert texts[-1] == "turn 5" and "turn 0" not in texts


def test_a_max_history_of_zero_keeps_every_message(make_app):
    """A2A_MAX_HISTORY=0: a task's history keeps every message, more than the
    default limit would (the cut is the runtime's, the same on every store)."""
    default = field_default("max_history")
    steps = default + 50

    def chatty(ctx):
        for step in range(steps):
            ctx.working(f"step {step}")
        return "done"

    client = make_app(chatty, max_history=0).test_client()
    task = rpc(client, "SendMessage", {"message": message("turn 0")})["result"]["task"]
    got = rpc(client, "GetTask", {"id": task["id"]})["result"]
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"
    texts = [m["parts"][0]["text"] for m in got["history"]]
    assert texts == ["turn 0"] + [f"step {step}" for step in range(steps)]


def test_streams_per_caller_are_capped_and_freed():
    gate = Gate()

    def slow(ctx):
        ctx.working("waiting")
        gate.release.wait(10)
        ctx.complete("done")

    app = Flask("streams")  # make_app takes no authenticator
    A2A(app, card=make_card(), executor=slow, store="memory://", auth=bearer_auth(),
        max_streams_per_caller=1)
    try:
        client = app.test_client()
        first = wire.post(client, "SendStreamingMessage", {"message": message()},
                          headers=ALICE, stream=True)
        assert first.status_code == 200
        next(first.iter_content(chunk_size=None))  # the stream is open
        second = wire.post(client, "SendStreamingMessage", {"message": message()},
                           headers=ALICE)
        assert second.status_code == 429
        error = second.json()["error"]
        assert error["code"] == -32042 and "A2A_MAX_STREAMS_PER_CALLER" in error["message"]
        # Another caller has a quota of their own.
        other = wire.post(client, "SendStreamingMessage", {"message": message()}, headers=BOB,
                          stream=True)
        assert other.status_code == 200
        gate.release.set()
        first.content  # noqa: B018  (read to the end)
        first.close()
        other.content  # noqa: B018
        other.close()
        again = wire.post(client, "SendStreamingMessage", {"message": message()}, headers=ALICE,
                          stream=True)
        assert again.status_code == 200 and wire.mimetype(again) == "text/event-stream"
    finally:
        gate.release.set()
        app.extensions["a2a"]["a2a"].close()


@pytest.mark.parametrize("key,value", [
    ("max_content_length", 0), ("max_parts", 0), ("max_file_size", -1),
    ("max_history", -1), ("max_streams_per_caller", -5)])
def test_bad_limits_are_refused_at_start_up(make_app, key, value):
    with pytest.raises(ValueError, match=f"A2A_{key.upper()}"):
        make_app(**{key: value})


def test_limits_can_come_from_the_environment_as_strings(make_app):
    app = make_app(max_parts="2", max_history="0", auth_required="false")
    settings = app.extensions["a2a"]["a2a"].settings
    assert (settings.max_parts, settings.max_history, settings.auth_required) == (2, 0, False)


def test_anonymous_callers_share_one_stream_budget(make_app):
    gate = Gate()

    def slow(ctx):
        gate.release.wait(10)
        ctx.complete("done")

    client = make_app(slow, max_anonymous_streams=2).test_client()

    def open_stream():
        return wire.post(client, "SendStreamingMessage", {"message": message()}, stream=True)

    responses = [open_stream() for _ in range(2)]
    try:
        assert [r.status_code for r in responses] == [200, 200]
        refused = open_stream()
        assert refused.status_code == 429
        error = refused.json()["error"]
        assert error["code"] == -32042 and "A2A_MAX_ANONYMOUS_STREAMS" in error["message"]
        assert service_of(client.application).open_streams(ANONYMOUS) == 2
        responses.pop().close()  # one leaves: its slot comes back
        responses.append(open_stream())
        assert responses[-1].status_code == 200
    finally:
        gate.release.set()
        for response in responses:
            response.close()


def test_no_anonymous_limit_when_the_budget_is_zero(make_app):
    gate = Gate()

    def slow(ctx):
        gate.release.wait(10)
        ctx.complete("done")

    client = make_app(slow, max_anonymous_streams=0).test_client()
    responses = [wire.post(client, "SendStreamingMessage", {"message": message()}, stream=True)
                 for _ in range(5)]
    try:
        assert [r.status_code for r in responses] == [200] * 5
    finally:
        gate.release.set()
        for response in responses:
            response.close()


def test_no_per_caller_limit_when_it_is_zero():
    """A2A_MAX_STREAMS_PER_CALLER=0: one caller holds more streams than the default
    limit allows, and every one of them is answered."""
    gate = Gate()

    def slow(ctx):
        ctx.working("waiting")
        gate.release.wait(30)
        ctx.complete("done")

    app = Flask("unlimited")  # make_app takes no authenticator
    A2A(app, card=make_card(), executor=slow, store="memory://", auth=bearer_auth(),
        max_streams_per_caller=0)
    many = field_default("max_streams_per_caller") + 1
    responses = []
    try:
        client = app.test_client()
        task = wire.rpc(client, "SendMessage", {
            "message": message(), "configuration": {"returnImmediately": True}},
            headers=ALICE)["result"]["task"]
        for _ in range(many):
            responses.append(wire.post(client, "SubscribeToTask", {"id": task["id"]},
                                       headers=ALICE, stream=True))
        assert [(r.status_code, wire.mimetype(r)) for r in responses] == \
            [(200, "text/event-stream")] * many  # every one open at once
    finally:
        gate.release.set()
        for response in responses:
            response.close()
        app.extensions["a2a"]["a2a"].close()


class SlowStore(MemoryStore):
    """A store whose reads and creates take a while (and let other threads run meanwhile),
    as a networked store's do."""

    def load(self, task_id):
        time.sleep(0.2)
        return super().load(task_id)

    def create(self, record, first_event):
        time.sleep(0.2)
        super().create(record, first_event)


@pytest.mark.parametrize("method", ["SendStreamingMessage", "SubscribeToTask"])
def test_parallel_opens_cannot_all_pass_the_stream_limit_during_store_io(method):
    """The slot is taken before the store is read: five opens at once with a limit of
    two let exactly two through, however long the store takes."""
    gate = Gate()

    def slow(ctx):
        ctx.working("waiting")
        gate.release.wait(10)
        ctx.complete("done")

    app = Flask("parallel")
    A2A(app, card=make_card(), executor=slow, store=SlowStore(), auth=bearer_auth(),
        max_streams_per_caller=2)
    try:
        client = app.test_client()
        task = client.post("/a2a", json=rpc_body("SendMessage", {
            "message": message(), "configuration": {"returnImmediately": True}}),
            headers={**V1, **ALICE}).get_json()["result"]["task"]
        params = {"message": message()} if method == "SendStreamingMessage" else {"id": task["id"]}
        start = threading.Barrier(5)
        answers = []

        def open_one():
            start.wait(5)
            answers.append(app.test_client().post(
                "/a2a", json=rpc_body(method, params), headers={**V1, **ALICE}, buffered=False))

        threads = [threading.Thread(target=open_one) for _ in range(5)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert sorted(a.status_code for a in answers) == [200, 200, 429, 429, 429]
        assert service_of(app).open_streams("alice") == 2
        for answer in answers:
            answer.close()
        assert service_of(app).open_streams("alice") == 0
    finally:
        gate.release.set()
        app.extensions["a2a"]["a2a"].close()


def service_of(app):
    return app.extensions["a2a"]["a2a"].service


def test_a_01_task_id_no_task_could_have_is_invalid_params(make_app):
    client = make_app().test_client()
    body = rpc(client, "tasks/send", {"id": "x" * 300, "message": {
        "role": "user", "parts": [{"type": "text", "text": "hi"}]}}, headers={"A2A-Version": "0.3"})
    assert body["error"]["code"] == -32602


def test_a_task_takes_at_most_max_push_configs_webhooks(make_app):
    """Each event is pushed to every webhook of its task: registrations past
    ``A2A_MAX_PUSH_CONFIGS`` are refused, so a caller cannot multiply what each
    event costs; registering one again under its id replaces it."""
    gate = Gate()

    def slow(ctx):
        ctx.working("waiting")
        gate.release.wait(10)
        ctx.complete("done")

    app = make_app(slow, card=make_card(capabilities=AgentCapabilities(
        streaming=True, push_notifications=True)), max_push_configs=2)
    client = app.test_client()
    try:
        task = rpc(client, "SendMessage", {"message": message("hi"), "configuration": {
            "returnImmediately": True}})["result"]["task"]

        def register(config_id):
            return rpc(client, "CreateTaskPushNotificationConfig", {
                "taskId": task["id"], "id": config_id, "url": "https://hooks.example.com/a"})

        assert "result" in register("one") and "result" in register("two")
        assert "result" in register("two")  # the same id again: replaced, not added
        refused = register("three")["error"]
        assert refused["code"] == -32602 and "A2A_MAX_PUSH_CONFIGS" in refused["message"]
        # With a message to the task too: refused before the message is added.
        answer = rpc(client, "SendMessage", {
            "message": message("more", taskId=task["id"]), "configuration": {
                "taskPushNotificationConfig": {"id": "four",
                                               "url": "https://hooks.example.com/b"}}})
        assert answer["error"]["code"] == -32602
        got = rpc(client, "GetTask", {"id": task["id"]})["result"]
        assert [m["parts"][0]["text"] for m in got["history"]] == ["hi"]
        listed = rpc(client, "ListTaskPushNotificationConfigs", {"taskId": task["id"]})
        assert sorted(c["id"] for c in listed["result"]["configs"]) == ["one", "two"]
    finally:
        gate.release.set()
