"""Push notifications end to end: real webhooks on loopback receive every task event.

The agent runs in the Flask test client here (its executors and deliveries run
in background threads, deliveries over real HTTP); test_push_server.py covers
gunicorn and restarts.  The guard and the transport have their own tests.
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from typing import Any, Dict, List

import pytest

from a2a_flask import AgentCapabilities, signals
from a2a_flask.dialects import push_renderer
from a2a_flask.protocol.models import (
    Artifact,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    new_id,
)
from a2a_flask.push import delivery
from a2a_flask.push.delivery import PushDispatcher, RetryPolicy
from a2a_flask.push.transport import WebhookResponse
from a2a_flask.engine.service import StreamContext
from a2a_flask.stores import MemoryStore, SQLiteStore
from a2a_flask.stores.base import PushTarget, TaskRecord, scoped

from tests.conftest import make_card
from tests.support.helpers import Gate, WebhookReceiver, validate, wait_until, wait_until_delivered
from tests.support.tasks import TERMINAL, message, message03
from tests.support.wire import rpc

pytestmark = pytest.mark.declare(server=[
    "test_an_agent_that_pushes_imports_requests_at_start_up_not_on_its_first_push"])

PUSH = dict(card=make_card(capabilities=AgentCapabilities(streaming=True, push_notifications=True)))
FAST = dict(push_allow_private=True, push_retry_delay=0.05, push_retry_max_delay=0.2,
            push_timeout=1.0, lease_ttl=3.0)

V03 = {"A2A-Version": "0.3"}


def chunky(ctx):
    ctx.working("thinking")
    for word in ("alpha ", "beta ", "gamma"):
        ctx.artifact(word, append=True, artifact_id="answer")
    ctx.complete("done")


def asker(ctx):
    if len([m for m in ctx.history if m.role.name == "USER"]) < 2:
        ctx.ask("which city?")
    else:
        ctx.complete(f"going to {ctx.text}")


@pytest.fixture
def receiver():
    with WebhookReceiver() as hooks:
        yield hooks


def result(body: Dict[str, Any]) -> Any:
    assert "error" not in body, body
    return body["result"]


def state_of(payload: Dict[str, Any]) -> str:
    """The task state a 1.0 StreamResponse push carries (or '' for artifacts)."""
    if "task" in payload:
        return payload["task"]["status"]["state"]
    if "statusUpdate" in payload:
        return payload["statusUpdate"]["status"]["state"]
    return ""


def finished(pushes: List[Dict[str, Any]]) -> bool:
    return any(state_of(p["json"]) in TERMINAL for p in pushes)


def send_with_webhook(client, url: str, executor_text: str = "hello", **config: Any) -> Dict[str, Any]:
    webhook = {"url": url, **config}
    body = rpc(client, "SendMessage", {"message": message(executor_text), "configuration": {
        "taskPushNotificationConfig": webhook, "returnImmediately": True}})
    return result(body)["task"]


# ---------------------------------------------------------------- 1.0


def store_of(client):
    return client.application.extensions["a2a"]["a2a"].store


def test_every_event_of_a_task_reaches_the_webhook_in_order(make_app, store_url, receiver):
    client = make_app(chunky, store=store_url, **PUSH, **FAST).test_client()
    task = send_with_webhook(client, receiver.hook(), token="tok-1",
                             authentication={"scheme": "Bearer", "credentials": "secret-cred"})
    pushes = receiver.wait_for(finished)
    payloads = [p["json"] for p in pushes]
    for payload in payloads:
        validate(payload, "Stream Response")
    assert [next(iter(p)) for p in payloads] == [
        "task", "statusUpdate", "artifactUpdate", "artifactUpdate", "artifactUpdate",
        "statusUpdate"]
    assert [state_of(p) for p in payloads if state_of(p)] == [
        "TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    text = "".join(p["artifactUpdate"]["artifact"]["parts"][0]["text"]
                   for p in payloads if "artifactUpdate" in p)
    assert text == "alpha beta gamma"
    assert all(p["task"]["id"] == task["id"] for p in payloads if "task" in p)
    headers = pushes[0]["headers"]
    assert headers["Authorization"] == "Bearer secret-cred"
    assert headers["X-A2A-Notification-Token"] == "tok-1"
    assert headers["Content-Type"] == "application/a2a+json"
    assert headers["A2A-Version"] == "1.0"
    assert "a2a-flask" in headers["User-Agent"]
    wait_until_delivered(store_of(client), task["id"])
    assert len(receiver.attempts) == len(pushes)  # nothing sent twice


def test_no_authorization_header_without_credentials(make_app, receiver):
    client = make_app(chunky, **PUSH, **FAST).test_client()
    send_with_webhook(client, receiver.hook())
    headers = receiver.wait_for(finished)[0]["headers"]
    assert "Authorization" not in headers and "X-A2A-Notification-Token" not in headers


def test_several_webhooks_each_get_everything(make_app, receiver):
    client = make_app(asker, **PUSH, **FAST).test_client()
    task = send_with_webhook(client, receiver.hook("/one"))
    receiver.wait_for(lambda got: any(state_of(p["json"]) == "TASK_STATE_INPUT_REQUIRED"
                                      for p in got))
    created = result(rpc(client, "CreateTaskPushNotificationConfig", {
        "taskId": task["id"], "url": receiver.hook("/two"), "id": "second"}))
    assert created["id"] == "second"
    result(rpc(client, "SendMessage", {"message": message("Paris", taskId=task["id"])}))
    pushes = receiver.wait_for(lambda got: sum(finished([p]) for p in got) == 2)
    one = [state_of(p["json"]) for p in pushes if p["path"] == "/one"]
    two = [state_of(p["json"]) for p in pushes if p["path"] == "/two"]
    assert one == ["TASK_STATE_SUBMITTED", "TASK_STATE_INPUT_REQUIRED",
                   "TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    # Registered while the task waited for input: it gets what happened from then on.
    assert two == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]


def test_a_deleted_webhook_gets_nothing_more(make_app, receiver):
    """Deleted while the task waits for input: the task's next turn reaches the
    webhook registered after it (the marker that its pushes went out), not this one."""
    client = make_app(asker, **PUSH, **FAST).test_client()
    task = send_with_webhook(client, receiver.hook(), id="cfg")
    receiver.wait_for(lambda got: any(state_of(p["json"]) == "TASK_STATE_INPUT_REQUIRED"
                                      for p in got))
    result(rpc(client, "DeleteTaskPushNotificationConfig", {"taskId": task["id"], "id": "cfg"}))
    result(rpc(client, "CreateTaskPushNotificationConfig", {
        "taskId": task["id"], "url": receiver.hook("/after"), "id": "after"}))
    seen = len(receiver.attempts)
    result(rpc(client, "SendMessage", {"message": message("Paris", taskId=task["id"])}))
    receiver.wait_for(lambda got: any(p["path"] == "/after" and finished([p]) for p in got))
    wait_until_delivered(store_of(client), task["id"])
    assert {p["path"] for p in receiver.attempts[seen:]} == {"/after"}


def test_rest_registration_delivers_stream_responses(make_app, receiver):
    client = make_app(asker, **PUSH, **FAST).test_client()
    task = result(rpc(client, "SendMessage", {"message": message()}))["task"]
    response = client.post(f"/a2a/rest/tasks/{task['id']}/pushNotificationConfigs",
                           json={"url": receiver.hook()})
    assert response.status_code == 200, response.get_data(as_text=True)
    result(rpc(client, "SendMessage", {"message": message("Oslo", taskId=task["id"])}))
    payloads = [p["json"] for p in receiver.wait_for(finished)]
    for payload in payloads:
        validate(payload, "Stream Response")
    assert [state_of(p) for p in payloads] == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]


# ---------------------------------------------------------------- 0.3 and 0.1


def test_a_03_webhook_gets_the_whole_task_as_it_grows(make_app, receiver):
    """Each push is the whole task as it is when sent, standing for the events
    since the last (how many pushes depends on how far behind the webhook fell;
    test_push_tasks.py counts them); the last is the finished task."""
    client = make_app(chunky, **PUSH, **FAST).test_client()
    body = rpc(client, "message/send", {
        "message": {"kind": "message", "role": "user", "messageId": new_id(),
                    "parts": [{"kind": "text", "text": "hi"}]},
        "configuration": {"blocking": False, "pushNotificationConfig": {
            "url": receiver.hook(), "token": "t03",
            "authentication": {"schemes": ["Bearer"], "credentials": "c03"}}}}, headers=V03)
    task_id = result(body)["id"]
    pushes = receiver.wait_for(lambda got: any(
        p["json"]["status"]["state"] == "completed" for p in got))
    for push in pushes:
        validate(push["json"], "Task", "v0.3")
        assert push["json"]["kind"] == "task" and push["json"]["id"] == task_id
    order = ["submitted", "working", "completed"]
    states = [p["json"]["status"]["state"] for p in pushes]
    assert states == sorted(states, key=order.index) and states[-1] == "completed"
    texts = ["".join(part["text"] for a in p["json"].get("artifacts", []) for part in a["parts"])
             for p in pushes]
    assert all(later.startswith(earlier) for earlier, later in zip(texts, texts[1:]))
    assert texts[-1] == "alpha beta gamma"
    assert len(pushes) <= 6  # never more than one per event
    assert pushes[0]["headers"]["Authorization"] == "Bearer c03"
    assert pushes[0]["headers"]["X-A2A-Notification-Token"] == "t03"
    assert pushes[0]["headers"]["Content-Type"] == "application/json"


def test_a_01_webhook_gets_01_events(make_app, receiver):
    client = make_app(chunky, **PUSH, **FAST).test_client()
    task_id = new_id()
    body = rpc(client, "tasks/send", {
        "id": task_id, "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
        "pushNotification": {"url": receiver.hook(), "token": "t01"}}, headers=V03)
    assert result(body)["id"] == task_id
    pushes = receiver.wait_for(lambda got: any(p["json"].get("final") for p in got))
    payloads = [p["json"] for p in pushes]
    for payload in payloads:
        assert payload["id"] == task_id
        validate(payload, "TaskArtifactUpdateEvent" if "artifact" in payload
                 else "TaskStatusUpdateEvent", "v0.1")
    assert [p["status"]["state"] for p in payloads if "status" in p] == [
        "submitted", "working", "completed"]
    assert [p["final"] for p in payloads if "status" in p] == [False, False, True]
    assert [p["artifact"]["index"] for p in payloads if "artifact" in p] == [0, 0, 0]
    assert pushes[0]["headers"]["X-A2A-Notification-Token"] == "t01"
    # 0.1 reads the config back by task id, masked.
    got = result(rpc(client, "tasks/pushNotification/get", {"id": task_id}, headers=V03))
    assert got["pushNotificationConfig"]["url"] == receiver.hook()
    assert got["pushNotificationConfig"]["token"] != "t01"


# ---------------------------------------------------------------- failures


@pytest.fixture
def outcomes():
    """push_sent / push_failed signals, as they fire."""
    seen: Dict[str, List[Dict[str, Any]]] = {"sent": [], "failed": []}

    def on_sent(sender, **info):
        seen["sent"].append(info)

    def on_failed(sender, **info):
        seen["failed"].append(info)

    signals.push_sent.connect(on_sent)
    signals.push_failed.connect(on_failed)
    yield seen
    signals.push_sent.disconnect(on_sent)
    signals.push_failed.disconnect(on_failed)


def of_task(outcomes: Dict[str, List[Dict[str, Any]]], kind: str,
            task_id: str) -> List[Dict[str, Any]]:
    """The outcomes of one task: the signals are global, and a delivery thread of an
    earlier test (its app closed while a send was in flight) may still report one."""
    return [info for info in outcomes[kind] if info["task_id"] == task_id]


# Two stores (one in-process, one shared): the store contract tests cover the rest.
TWO_STORES = pytest.mark.parametrize("store_url", ["memory", "sqlite"], indirect=True)


@TWO_STORES
def test_failed_pushes_are_retried_in_order_until_they_arrive(make_app, store_url, receiver,
                                                             outcomes):
    receiver.script = [500, 503, 0.0, 500]  # two failures, a success, one more failure
    client = make_app(chunky, store=store_url, **PUSH, **FAST).test_client()
    task = send_with_webhook(client, receiver.hook())
    pushes = receiver.wait_for(finished)
    assert [next(iter(p["json"])) for p in pushes] == [
        "task", "statusUpdate", "artifactUpdate", "artifactUpdate", "artifactUpdate",
        "statusUpdate"]
    assert len(receiver.attempts) == len(pushes) + 3
    failed = of_task(outcomes, "failed", task["id"])
    assert [(f["status"], f["attempt"], f["gave_up"]) for f in failed] == [
        (500, 1, False), (503, 2, False), (500, 1, False)]
    assert "HTTP 500" in failed[0]["error"]
    assert [s["attempt"] for s in of_task(outcomes, "sent", task["id"])][:2] == [3, 2]


def test_a_webhook_that_times_out_is_retried(make_app, receiver, outcomes):
    receiver.script = [2.5]  # longer than the 1 s push timeout
    client = make_app(chunky, **PUSH, **FAST).test_client()
    task = send_with_webhook(client, receiver.hook())
    pushes = receiver.wait_for(finished, timeout=20)
    states = [state_of(p["json"]) for p in pushes if state_of(p["json"])]
    # The stalled first push may also have been received (at-least-once); the order holds.
    assert states[-2:] == ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"]
    failed = of_task(outcomes, "failed", task["id"])
    assert failed[0]["status"] is None
    assert "no response within" in failed[0]["error"]


@TWO_STORES
def test_a_webhook_that_keeps_failing_is_given_up_and_reported(make_app, store_url, outcomes,
                                                              caplog):
    gate = Gate()

    def gated(ctx):
        gate.release.wait(10)
        chunky(ctx)

    with WebhookReceiver(default=500) as failing, WebhookReceiver() as healthy:
        app = make_app(gated, store=store_url, **PUSH, **dict(FAST, push_max_attempts=3))
        client = app.test_client()
        with caplog.at_level(logging.WARNING, logger="a2a_flask.push"):
            task = send_with_webhook(client, failing.hook())
            result(rpc(client, "CreateTaskPushNotificationConfig", {
                "taskId": task["id"], "url": healthy.hook(), "id": "healthy"}))
            gate.release.set()
            deadline = time.monotonic() + 15
            while not any(f["gave_up"] for f in of_task(outcomes, "failed", task["id"])):
                assert time.monotonic() < deadline, outcomes
                time.sleep(0.05)
            healthy.wait_for(finished)  # the healthy webhook is not held up
        assert len(failing.attempts) == 3
        assert [f["attempt"] for f in of_task(outcomes, "failed", task["id"])] == [1, 2, 3]
        store = app.extensions["a2a"]["a2a"].store
        given_up = [t for t in store.push_targets(task["id"]) if t.gave_up]
        assert [t.config.url for t in given_up] == [failing.hook()]
        assert any("giving up on webhook" in r.getMessage() and "register the config again"
                   in r.getMessage() for r in caplog.records)
        assert any("retrying in" in r.getMessage() for r in caplog.records)


def test_a_redirect_is_not_followed(make_app, outcomes):
    with WebhookReceiver() as elsewhere, WebhookReceiver() as redirecting:
        redirecting.default = 302
        redirecting.script = [("redirect", elsewhere.hook())] * 3
        client = make_app(chunky, **PUSH, **dict(FAST, push_max_attempts=3)).test_client()
        task = send_with_webhook(client, redirecting.hook())
        deadline = time.monotonic() + 10
        while not any(f["gave_up"] for f in of_task(outcomes, "failed", task["id"])):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert elsewhere.attempts == []
        assert "redirects are not followed" in of_task(outcomes, "failed", task["id"])[0]["error"]


# ---------------------------------------------------------------- retry timing


def test_retry_delays_double_up_to_the_max_with_half_of_each_random(monkeypatch):
    policy = RetryPolicy(base_delay=1.0, max_delay=10.0)
    ceilings = [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    monkeypatch.setattr(delivery.random, "uniform", lambda low, high: low)
    assert [policy.delay(n) for n in range(1, 7)] == [c / 2 for c in ceilings]
    monkeypatch.setattr(delivery.random, "uniform", lambda low, high: high)
    assert [policy.delay(n) for n in range(1, 7)] == ceilings
    monkeypatch.undo()
    delays = [policy.delay(3) for _ in range(200)]
    assert all(2.0 <= d <= 4.0 for d in delays)
    assert len(set(delays)) > 150  # jitter: failures at one moment do not retry together
    assert max(delays) - min(delays) > 1.5  # spread over the random half


def retry_delays(records: List[logging.LogRecord], task_id: str) -> List[float]:
    """The delays the dispatcher chose after each failed attempt (its log's last argument)."""
    return [r.args[-1] for r in records
            if "retrying in" in r.getMessage() and task_id in r.getMessage()]


def test_the_retry_settings_set_the_backoff_the_webhook_sees(make_app, receiver, monkeypatch,
                                                            caplog):
    """A2A_PUSH_RETRY_DELAY is the first delay, doubled after each failure up to
    A2A_PUSH_RETRY_MAX_DELAY (the jitter pinned to its top here); the attempts come
    no sooner than that."""
    monkeypatch.setattr(delivery.random, "uniform", lambda low, high: high)
    receiver.script = [503] * 5
    client = make_app(chunky, **PUSH, **dict(FAST, push_retry_delay=0.1,
                                              push_retry_max_delay=0.4)).test_client()
    with caplog.at_level(logging.WARNING, logger="a2a_flask.push"):
        task = send_with_webhook(client, receiver.hook())
        receiver.wait_for(finished)
    delays = retry_delays(caplog.records, task["id"])
    assert delays == [0.1, 0.2, 0.4, 0.4, 0.4]  # doubled, then held at the max
    first = [a["at"] for a in receiver.attempts[:6]]  # the first event: five failures, then 200
    assert receiver.received[0] is receiver.attempts[5]
    gaps = [later - earlier for earlier, later in zip(first, first[1:])]
    assert all(gap >= delay for gap, delay in zip(gaps, delays)), (gaps, delays)


def test_retry_after_is_honoured_up_to_an_hour(make_app, receiver, caplog):
    """The receiver's Retry-After wins over a shorter backoff, but at most
    MAX_RETRY_AFTER (an hour) is waited, whatever it asks."""
    receiver.script = [(429, {"Retry-After": "2"}), (429, {"Retry-After": "86400"})]
    client = make_app(chunky, **PUSH, **dict(FAST, push_retry_delay=0.05)).test_client()
    with caplog.at_level(logging.WARNING, logger="a2a_flask.push"):
        task = send_with_webhook(client, receiver.hook())
        wait_until(lambda: len(retry_delays(caplog.records, task["id"])) == 2, 15,
                   "two failed attempts")
    assert delivery.MAX_RETRY_AFTER == 3600.0
    assert retry_delays(caplog.records, task["id"]) == [2.0, 3600.0]
    assert receiver.attempts[1]["at"] - receiver.attempts[0]["at"] >= 2.0


# ---------------------------------------------------------------- SSRF at the API


def test_private_webhooks_are_refused_by_default(make_app):
    calls = []
    app = make_app(lambda ctx: calls.append(ctx) or "hi", **PUSH)
    client = app.test_client()
    task = result(rpc(client, "SendMessage", {"message": message()}))["task"]
    for url in ("http://127.0.0.1:9/hook", "http://localhost/hook", "http://10.0.0.1/",
                "http://169.254.169.254/latest/meta-data/", "file:///etc/passwd"):
        body = rpc(client, "CreateTaskPushNotificationConfig", {"taskId": task["id"], "url": url})
        assert body["error"]["code"] == -32602, (url, body)
        assert "A2A_PUSH" in body["error"]["message"] or "http:// or https://" in body["error"]["message"]
        assert app.extensions["a2a"]["a2a"].store.push_targets(task["id"]) == []
    before = len(calls)
    body = rpc(client, "SendMessage", {"message": message(), "configuration": {
        "taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}}})
    assert body["error"]["code"] == -32602
    assert len(calls) == before  # refused before anything started
    assert result(rpc(client, "ListTasks", {}))["totalSize"] == 1


def test_allowed_hosts_let_one_private_receiver_through(make_app, receiver):
    client = make_app(chunky, **PUSH, **dict(FAST, push_allow_private=False,
                                             push_allowed_hosts="127.0.0.1")).test_client()
    send_with_webhook(client, receiver.hook())
    assert receiver.wait_for(finished)
    body = rpc(client, "CreateTaskPushNotificationConfig", {
        "taskId": new_id(), "url": "http://10.1.2.3/hook"})
    assert body["error"]["code"] in (-32001, -32602)


#: RFC 6761 reserves ``.invalid``: these names resolve nowhere, so accepting one proves
#: that no lookup was needed.
LISTED_HOST = "hooks.conformance.invalid"
UNLISTED_HOST = "elsewhere.conformance.invalid"


def _rpc_outcome(body: Dict[str, Any]) -> str:
    return "accepted" if "result" in body else f"rpc {body['error']['code']}"


def _rest_outcome(response: Any) -> str:
    if response.status_code == 200:
        return "accepted"
    return f"rest {response.status_code} {response.get_json()['error']['details'][0]['reason']}"


#: Every way to register a webhook: (client, id of an existing task, url) -> outcome.
REGISTRATIONS = {
    "1.0-jsonrpc-create": lambda c, t, url: _rpc_outcome(rpc(
        c, "CreateTaskPushNotificationConfig", {"taskId": t, "url": url})),
    "1.0-jsonrpc-send": lambda c, t, url: _rpc_outcome(rpc(c, "SendMessage", {
        "message": message(), "configuration": {"taskPushNotificationConfig": {"url": url}}})),
    "1.0-rest-create": lambda c, t, url: _rest_outcome(c.post(
        f"/a2a/rest/tasks/{t}/pushNotificationConfigs", json={"url": url})),
    "1.0-rest-send": lambda c, t, url: _rest_outcome(c.post("/a2a/rest/message:send", json={
        "message": message(), "configuration": {"taskPushNotificationConfig": {"url": url}}})),
    "0.3-jsonrpc-set": lambda c, t, url: _rpc_outcome(rpc(
        c, "tasks/pushNotificationConfig/set",
        {"taskId": t, "pushNotificationConfig": {"url": url}}, headers=V03)),
    "0.3-jsonrpc-send": lambda c, t, url: _rpc_outcome(rpc(c, "message/send", {
        "message": message03(), "configuration": {"pushNotificationConfig": {"url": url}}},
        headers=V03)),
    "0.3-rest-create": lambda c, t, url: _rest_outcome(c.post(
        f"/a2a/rest/v1/tasks/{t}/pushNotificationConfigs",
        json={"parent": f"tasks/{t}", "configId": "c1",
              "config": {"pushNotificationConfig": {"url": url}}})),
    "0.3-rest-send": lambda c, t, url: _rest_outcome(c.post("/a2a/rest/v1/message:send", json={
        "message": {"messageId": new_id(), "role": "ROLE_USER", "content": [{"text": "hi"}]},
        "configuration": {"blocking": True, "pushNotification": {"url": url}}})),
    "0.1-set": lambda c, t, url: _rpc_outcome(rpc(
        c, "tasks/pushNotification/set", {"id": t, "pushNotificationConfig": {"url": url}},
        headers=V03)),
    "0.1-send": lambda c, t, url: _rpc_outcome(rpc(c, "tasks/send", {
        "id": new_id(), "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
        "pushNotification": {"url": url}}, headers=V03)),
}


@pytest.mark.parametrize("way", sorted(REGISTRATIONS))
def test_a_listed_host_is_registered_without_a_lookup_on_every_binding(make_app, way):
    """A2A_PUSH_ALLOWED_HOSTS names are trusted at registration (each send still checks);
    an unlisted name that does not resolve is refused (-32602 / REST 400)."""
    app = make_app(chunky, **PUSH, push_allowed_hosts=LISTED_HOST, push_max_attempts=1,
                   push_timeout=1.0)
    client = app.test_client()
    task = result(rpc(client, "SendMessage", {"message": message()}))["task"]
    register = REGISTRATIONS[way]
    assert register(client, task["id"], f"https://{LISTED_HOST}/hook") == "accepted"
    refused = register(client, task["id"], f"https://{UNLISTED_HOST}:8443/hook")
    assert refused in ("rpc -32602", "rest 400 INVALID_PARAMS"), refused


def test_push_disabled_means_no_deliveries_and_32003(make_app, receiver):
    client = make_app(chunky, **FAST).test_client()
    body = rpc(client, "SendMessage", {"message": message(), "configuration": {
        "taskPushNotificationConfig": {"url": receiver.hook()}}})
    assert body["error"]["code"] == -32003
    card = client.get("/.well-known/agent-card.json").get_json()
    assert card["capabilities"]["pushNotifications"] is False


def test_the_card_declares_push(make_app):
    card = make_app(**PUSH).test_client().get("/.well-known/agent-card.json").get_json()
    assert card["capabilities"]["pushNotifications"] is True


# ---------------------------------------------------------------- signing


def test_signed_pushes_verify_against_the_published_keys(make_app, receiver):
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives.asymmetric import ec

    from a2a_flask.signing.pushes import PushSignatureError, verify_push

    key = ec.generate_private_key(ec.SECP256R1())
    client = make_app(chunky, **PUSH, **FAST, push_signing_key=key,
                      public_url="https://agent.example.com").test_client()
    jwks = client.get("/a2a/.well-known/jwks.json").get_json()
    assert [k["kty"] for k in jwks["keys"]] == ["EC"]
    task = send_with_webhook(client, receiver.hook())
    pushes = receiver.wait_for(finished)
    for push in pushes:
        claims = verify_push(push["body"], push["headers"]["X-A2A-Notification-Signature"], jwks,
                             task_id=task["id"])
        assert claims["taskId"] == task["id"]
    with pytest.raises(PushSignatureError):
        verify_push(pushes[0]["body"] + b" ", pushes[0]["headers"]["X-A2A-Notification-Signature"],
                    jwks)


# ---------------------------------------------------------------- concurrency


@pytest.mark.no_memory_store("the memory store is not shared between agents")
def test_deliveries_of_one_task_are_claimed_by_one_process_at_a_time(make_app, store_url, receiver):
    """Two agents on one store (two workers): each push still arrives once, in order."""
    gate = Gate()

    def gated(ctx):
        ctx.working("waiting")
        gate.release.wait(10)
        for word in ("one ", "two ", "three"):
            ctx.artifact(word, append=True, artifact_id="a")
        ctx.complete("done")

    first = make_app(gated, store=store_url, **PUSH, **FAST).test_client()
    second = make_app(gated, store=store_url, **PUSH, **FAST).test_client()
    task = send_with_webhook(first, receiver.hook())
    result(rpc(second, "CreateTaskPushNotificationConfig", {
        "taskId": task["id"], "url": receiver.hook("/b"), "id": "b"}))
    gate.release.set()
    pushes = receiver.wait_for(lambda got: sum(finished([p]) for p in got) == 2)
    wait_until_delivered(store_of(first), task["id"])
    for path in ("/hook", "/b"):
        kinds = [next(iter(p["json"])) for p in receiver.attempts if p["path"] == path]
        assert kinds[-4:] == ["artifactUpdate", "artifactUpdate", "artifactUpdate",
                              "statusUpdate"], (path, kinds)
        texts = [p["json"]["artifactUpdate"]["artifact"]["parts"][0]["text"]
                 for p in pushes if p["path"] == path and "artifactUpdate" in p["json"]]
        assert texts == ["one ", "two ", "three"]


# ---------------------------------------------------------------- the dispatcher alone


class _RecordingTransport:
    """Answers every push 200 after ``delay`` seconds, and remembers the bodies."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.bodies: List[bytes] = []

    def post(self, url, body, headers):
        time.sleep(self.delay)
        self.bodies.append(body)
        return WebhookResponse(200, "OK", b"", self.delay)

    def close(self) -> None:
        pass


def _task_with_log(store, task_id: str, events: int, append: bool = False, tenant: str = ""):
    task = Task(id=task_id, context_id="c", status=TaskStatus(state=TaskState.WORKING))
    store.create(TaskRecord(task, 1, tenant), task)
    # The snapshot says COMPLETED so that the drain ends once it caught up.
    done = Task(id=task_id, context_id="c", status=TaskStatus(state=TaskState.COMPLETED))
    for i in range(events):
        event = TaskArtifactUpdateEvent(task_id, "c", Artifact(artifact_id="a",
                                                               parts=[Part(text=str(i))]),
                                         append=append and i > 0)
        store.append(task_id, i + 1, [event], TaskRecord(done, i + 2))
    store.put_push_target(task_id, PushTarget(TaskPushNotificationConfig(
        url="http://hooks.test/h", id="cfg", task_id=task_id)))


def _dispatcher(store, transport, claim_ttl: float, scope=None):
    stream = StreamContext(lambda event: False, lambda task_id: [])
    return PushDispatcher(store, transport, renderer_for=lambda v: lambda: push_renderer(v)(stream),
                          owner=lambda: "me", claim_ttl=claim_ttl, scope=scope)


def test_a_sweep_delivers_its_own_agents_webhooks_only(tmp_path):
    """Two agents on one store: each one's sweeps deliver (and sign) its own tasks'
    webhooks, never the other's, and remember whose a task is."""
    store = SQLiteStore(str(tmp_path / "tasks.db"))
    _task_with_log(store, "billing-task", 2, tenant=scoped("billing", "acme"))
    _task_with_log(store, "default-task", 2, tenant="acme")
    real_load = store.load
    loads: List[str] = []
    store.load = lambda task_id: (loads.append(task_id), real_load(task_id))[1]
    for scope, ours in (("billing", "billing-task"), ("", "default-task")):
        dispatcher = _dispatcher(store, _RecordingTransport(), claim_ttl=1.0, scope=scope)
        kicked: List[str] = []
        dispatcher.kick = kicked.append  # type: ignore[method-assign]
        dispatcher.sweep()
        dispatcher._last_sweep = 0.0
        dispatcher.sweep()  # whose each task is, is remembered
        assert kicked == [ours, ours], (scope, kicked)
    assert sorted(loads) == ["billing-task", "billing-task", "default-task", "default-task"]
    del store.load
    store.close()


def test_a_long_delivery_pass_renews_its_claim():
    store = MemoryStore()
    _task_with_log(store, "t1", 12)
    transport = _RecordingTransport(delay=0.05)
    _dispatcher(store, transport, claim_ttl=0.2)._drain("t1")
    assert len(transport.bodies) == 13  # the snapshot and twelve events, one pass, in order
    assert store.push_targets("t1")[0].delivered_seq == 13
    assert store.claim("push:t1", "someone-else", 1.0)  # released at the end


def test_a_log_longer_than_a_read_slice_is_delivered_whole():
    """The store hands the log over in slices (test_push_tasks.py reads a 0.3
    webhook's burst across them)."""
    store = MemoryStore()
    store.read_slice = 4
    _task_with_log(store, "t1", 12, append=True)
    transport = _RecordingTransport(delay=0)
    _dispatcher(store, transport, claim_ttl=1.0)._drain("t1")
    assert len(transport.bodies) == 13
    assert store.push_targets("t1")[0].delivered_seq == 13
    texts = [json.loads(body)["artifactUpdate"]["artifact"]["parts"][0]["text"]
             for body in transport.bodies[1:]]
    assert texts == [str(i) for i in range(12)]


def test_a_delivery_drain_reads_the_head_not_the_record(tmp_path):
    """A load from an append-only store folds a long stream's recent chunks: a drain,
    one round per burst of events, must not pay it (the head says how far the log
    goes and whether it ended)."""
    class HeadOnly(SQLiteStore):
        def load(self, task_id):
            raise AssertionError("a delivery round loaded the task's record")

    store = HeadOnly(str(tmp_path / "tasks.db"))
    _task_with_log(store, "t1", 5)
    transport = _RecordingTransport(delay=0)
    dispatcher = _dispatcher(store, transport, claim_ttl=1.0)
    assert dispatcher._behind("t1")
    dispatcher._drain("t1")
    assert len(transport.bodies) == 6 and not dispatcher._behind("t1")
    store.close()


def test_a_pass_that_lost_its_claim_stops_sending():
    class Stolen(MemoryStore):
        calls = 0

        def claim(self, key, owner, ttl):
            Stolen.calls += 1
            return Stolen.calls <= 2 and super().claim(key, owner, ttl)

    store = Stolen()
    _task_with_log(store, "t1", 12)
    transport = _RecordingTransport(delay=0.05)
    _dispatcher(store, transport, claim_ttl=0.2)._drain("t1")
    # Claimed, renewed once in the loop, then refused on the next renewal mid-pass.
    assert 0 < len(transport.bodies) < 13
    assert store.push_targets("t1")[0].delivered_seq == len(transport.bodies)


_START_UP = """
import sys
from flask import Flask
from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill
card = AgentCard(name="p", description="p", version="1", skills=[
    AgentSkill(id="s", name="s", description="s", tags=["s"])],
    capabilities=AgentCapabilities(push_notifications=PUSH))
before = "requests" in sys.modules
A2A(Flask("p"), card=card, executor=lambda ctx: "ok")
print(before, "requests" in sys.modules)
"""


@pytest.mark.parametrize("push, imported", [(True, "True"), (False, "False")])
def test_an_agent_that_pushes_imports_requests_at_start_up_not_on_its_first_push(push, imported):
    """Imported on the first push, requests would hold a serving gevent worker's hub
    for the whole import; an agent that never pushes does not pay for it at all."""
    code = _START_UP.replace("PUSH", str(push))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["False", imported]
