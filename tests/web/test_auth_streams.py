"""The auth matrix on live streams, on 0.1's client-chosen task ids, and over real
HTTP with gunicorn (the auth matrix: test_auth.py)."""
from __future__ import annotations

from typing import Any, Dict

import pytest
import requests

from a2a_flask.protocol.models import new_id
from a2a_flask.stores.base import TaskQuery

# apps and fresh_app are fixtures (pytest finds them where they are imported).
from tests.support.auth_matrix import (
    Binding, NOBODY, Outcome, REST_V03, REST_V1, REST_V1_ACME, RPC_V01, RPC_V03, RPC_V1, Req,
    RpcV01, SECRET, apps, expect_task_not_found, fresh_app, make_task, perform, state_of,
    v1_message,
)
from tests.support.helpers import ALICE, BOB, Gate, Server, V1, rpc_body, validate_card

pytestmark = pytest.mark.declare(server=["test_401_403_and_404_over_real_http_with_gunicorn"])


# ------------------------------------------------------------------ live streams


class LiveStream:
    """An SSE response read piece by piece while the task runs."""

    def __init__(self, response) -> None:
        assert response.status_code == 200 and response.mimetype == "text/event-stream", \
            response.get_data(as_text=True)
        self.response = response
        self.chunks = iter(response.response)
        self.text = ""

    def read_until(self, needle: str) -> None:
        while needle not in self.text.lower():
            self.text += next(self.chunks).decode()

    def read_to_end(self) -> str:
        for chunk in self.chunks:
            self.text += chunk.decode()
        self.response.close()
        return self.text


def open_stream(client, req: Req, headers: Dict[str, str]) -> LiveStream:
    return LiveStream(client.open(req.path, method=req.method, json=req.body,
                                  headers={**req.headers, **headers}, buffered=False))


@pytest.mark.parametrize("binding", [RPC_V1, REST_V1, REST_V1_ACME, RPC_V03, REST_V03, RPC_V01],
                         ids=repr)
def test_a_subscribe_to_anothers_live_task_fails_before_any_stream(fresh_app, binding: Binding):
    gate = Gate()

    def live(ctx):
        ctx.working("started")
        gate.release.wait(10)
        ctx.artifact("alice-live-result")
        ctx.complete()

    app = fresh_app(live)
    client = app.test_client()
    try:
        stream = open_stream(client, binding.create("go", stream=True), ALICE)
        stream.read_until("working")
        [record] = state_of(app).store.list_tasks(
            TaskQuery(tenant=binding.tenant, owner="alice")).records
        task_id = record.task.id
        resubscribed = open_stream(client, binding.build("subscribe", task_id), ALICE)
        resubscribed.read_until("working")

        ops = [o for o in binding.ops if o.startswith("subscribe")]
        for op in ops + ["continue-stream", "continue", "cancel"]:
            denied = perform(client, binding.build(op, task_id), BOB)
            expect_task_not_found(binding, denied, op)
            assert "alice-live-result" not in denied.text
            unauthenticated = perform(client, binding.build(op, task_id), NOBODY)
            assert unauthenticated.status == 401
            assert unauthenticated.mimetype == "application/json"
        assert state_of(app).service.open_streams("bob") == 0
        assert state_of(app).service.open_streams("alice") == 2

        gate.release.set()
        for live_stream in (stream, resubscribed):
            text = live_stream.read_to_end()
            assert "alice-live-result" in text and "completed" in text.lower()
            assert '"error"' not in text
        assert state_of(app).store.load(task_id).state.value == "TASK_STATE_COMPLETED"
        assert state_of(app).service.open_streams("alice") == 0
    finally:
        gate.release.set()


# ------------------------------------------------------------------ 0.1's client-chosen ids


@pytest.mark.parametrize("method", ["tasks/send", "tasks/sendSubscribe"])
def test_v01_send_with_another_principals_task_id_never_touches_their_task(apps, method):
    """0.1 clients choose task ids, and ids are global: an id another caller's task
    already uses is answered TaskNotFound (a free one creates a task). That tells a
    prober the id is taken (a documented 0.1 limitation, docs/security.rst: such
    ids must be unguessable, as the 0.1 spec's UUIDs are); it never reaches the task."""
    app = apps["strict"]
    client = app.test_client()
    alices = make_task(client, RPC_V01, ALICE)
    before = app.extensions["a2a"]["a2a"].store.load(alices)
    message = RpcV01.message("bob here")
    streaming = method == "tasks/sendSubscribe"

    def send(task_id: str) -> Outcome:
        return perform(client, RpcV01._rpc(method, {"id": task_id, "message": message},
                                           streaming), BOB)

    taken, free = send(alices), send(new_id())
    assert '"code":-32001' in taken.text.replace(" ", "") and "bob here" not in taken.text
    assert "error" not in free.text, free.text
    after = app.extensions["a2a"]["a2a"].store.load(alices)
    assert (after.seq, after.task, after.owner) == (before.seq, before.task, before.owner)


# ------------------------------------------------------------------ over real HTTP


def test_401_403_and_404_over_real_http_with_gunicorn():
    env = {"A2A_TEST_TOKENS": "t-alice=alice,t-bob=bob", "A2A_TEST_FORBIDDEN": "t-mallory"}
    alice, bob = {"Authorization": "Bearer t-alice"}, {"Authorization": "Bearer t-bob"}
    mallory = {"Authorization": "Bearer t-mallory"}
    with Server("tests.support.auth_app:app", env=env) as server:
        def rpc(method: str, params: Any, headers: Dict[str, str]) -> requests.Response:
            return requests.post(server.url + "/a2a", json=rpc_body(method, params),
                                 headers={**V1, **headers}, timeout=30)

        def rest(method: str, path: str, headers: Dict[str, str], **kw: Any) -> requests.Response:
            return requests.request(method, server.url + "/a2a/rest" + path, headers=headers,
                                    timeout=30, **kw)

        card = requests.get(server.url + "/.well-known/agent-card.json", timeout=30)
        assert card.status_code == 200
        validate_card(card.json())
        assert card.json()["securitySchemes"]["bearer"]["httpAuthSecurityScheme"] == {
            "scheme": "Bearer"}

        created = rest("POST", "/message:send", alice, json={"message": v1_message(SECRET)})
        assert created.status_code == 200, created.text
        task_id = created.json()["task"]["id"]
        missing_id = new_id()

        for headers, status, challenge in ((NOBODY, 401, 'Bearer realm="a2a"'),
                                           ({"Authorization": "Bearer nope"}, 401,
                                            'error="invalid_token"'),
                                           (mallory, 403, None)):
            answers = [rpc("GetTask", {"id": task_id}, headers),
                       rest("GET", f"/tasks/{task_id}", headers)]
            twins = [rpc("GetTask", {"id": missing_id}, headers),
                     rest("GET", f"/tasks/{missing_id}", headers)]
            for answer, twin in zip(answers, twins):
                assert answer.status_code == status, answer.text
                assert answer.headers["Content-Type"].startswith("application/json")
                assert answer.content == twin.content
                if challenge:
                    assert challenge in answer.headers["WWW-Authenticate"]

        denied_rpc = rpc("GetTask", {"id": task_id}, bob)
        assert denied_rpc.status_code == 200 and denied_rpc.json()["error"]["code"] == -32001
        denied_rest = rest("GET", f"/tasks/{task_id}", bob)
        assert denied_rest.status_code == 404
        assert denied_rest.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
        subscribe = rest("POST", f"/tasks/{task_id}:subscribe", bob, stream=True)
        assert subscribe.status_code == 404
        assert subscribe.headers["Content-Type"].startswith("application/json")
        subscribe.close()
        canceled = rest("POST", f"/tasks/{task_id}:cancel", bob)
        assert canceled.status_code == 404 and SECRET not in canceled.text

        own = rest("GET", f"/tasks/{task_id}", alice)
        assert own.status_code == 200
        assert own.json()["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert SECRET in own.text
