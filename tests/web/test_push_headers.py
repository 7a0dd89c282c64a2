"""A webhook token or credential that cannot be an HTTP header value is refused at registration.

Such a value (``"ok\\r\\nX-Injected: 1"``) used to be stored, and every
delivery to it then raised inside the drain.  It is now -32602 (REST 400) on
every dialect and binding, and nothing is stored; a valid webhook of the same
task is unaffected.
"""
from __future__ import annotations

import uuid
from typing import Any, Callable, Dict, Optional, Tuple

import pytest

from a2a_flask import AgentCapabilities
from a2a_flask.push.guard import header_value_problem

from tests.conftest import make_card
from tests.support import wire
from tests.support.helpers import V1, WebhookReceiver
from tests.support.wire import rpc

V03 = {"A2A-Version": "0.3"}
HOOK = "https://hooks.example.com/h"
PUSH = dict(card=make_card(capabilities=AgentCapabilities(streaming=True, push_notifications=True)),
            push_allowed_hosts="*.example.com")  # trusted by name: no DNS in these tests

#: (what, value): values no header can carry, and why.
BAD_VALUES = [
    ("crlf", "ok\r\nX-Injected: 1"),
    ("lf", "ok\nX-Injected: 1"),
    ("nul", "ok\x00"),
    ("tab", "ok\tok"),
    ("del", "ok\x7f"),
    ("c1", "ok\x85"),
    ("leading space", " ok"),
    ("beyond latin-1", "tok\u20acn"),
]


def fields(token: str = "tok", scheme: str = "Bearer", credentials: str = "cred") -> Dict[str, str]:
    return {"token": token, "scheme": scheme, "credentials": credentials}


def config10(f: Dict[str, str], **extra: Any) -> Dict[str, Any]:
    return {"url": HOOK, "token": f["token"],
            "authentication": {"scheme": f["scheme"], "credentials": f["credentials"]}, **extra}


def config03(f: Dict[str, str], **extra: Any) -> Dict[str, Any]:
    return {"url": HOOK, "token": f["token"],
            "authentication": {"schemes": [f["scheme"]], "credentials": f["credentials"]}, **extra}


def msg10() -> Dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]}


def msg03() -> Dict[str, Any]:
    return {"kind": "message", "messageId": uuid.uuid4().hex, "role": "user",
            "parts": [{"kind": "text", "text": "hi"}]}


def jsonrpc(client, method: str, params: Dict[str, Any], headers: Dict[str, str]) -> Tuple[bool, Any]:
    body = wire.post(client, method, params, version=None, headers=headers).json()
    if "error" in body:
        assert body["error"]["code"] == -32602, body
        return False, body["error"]["message"]
    return True, body["result"]


def rest(client, path: str, body: Dict[str, Any]) -> Tuple[bool, Any]:
    response = client.post(path, json=body)
    if response.status_code == 400:
        return False, response.get_json()["error"]["message"]
    assert response.status_code == 200, response.get_data(as_text=True)
    return True, response.get_json()


Binding = Callable[[Any, str, Dict[str, str]], Tuple[bool, Any]]
#: Every place a client can hand over a webhook: (client, existing task id, fields) -> (ok, answer).
BINDINGS: Dict[str, Binding] = {
    "1.0 jsonrpc SendMessage": lambda c, t, f: jsonrpc(c, "SendMessage", {
        "message": msg10(), "configuration": {"taskPushNotificationConfig": config10(f),
                                              "returnImmediately": True}}, V1),
    "1.0 jsonrpc CreateTaskPushNotificationConfig": lambda c, t, f: jsonrpc(
        c, "CreateTaskPushNotificationConfig", config10(f, taskId=t), V1),
    "1.0 rest message:send": lambda c, t, f: rest(c, "/a2a/rest/message:send", {
        "message": msg10(), "configuration": {"taskPushNotificationConfig": config10(f),
                                              "returnImmediately": True}}),
    "1.0 rest pushNotificationConfigs": lambda c, t, f: rest(
        c, f"/a2a/rest/tasks/{t}/pushNotificationConfigs", config10(f)),
    "0.3 jsonrpc message/send": lambda c, t, f: jsonrpc(c, "message/send", {
        "message": msg03(), "configuration": {"blocking": False,
                                              "pushNotificationConfig": config03(f)}}, V03),
    "0.3 jsonrpc tasks/pushNotificationConfig/set": lambda c, t, f: jsonrpc(
        c, "tasks/pushNotificationConfig/set",
        {"taskId": t, "pushNotificationConfig": config03(f)}, V03),
    "0.3 rest message:send": lambda c, t, f: rest(c, "/a2a/rest/v1/message:send", {
        "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                    "content": [{"text": "hi"}]},
        "configuration": {"blocking": False, "pushNotification": config03(f)}}),
    "0.3 rest pushNotificationConfigs": lambda c, t, f: rest(
        c, f"/a2a/rest/v1/tasks/{t}/pushNotificationConfigs",
        {"pushNotificationConfig": config03(f)}),
    "0.1 tasks/send": lambda c, t, f: jsonrpc(c, "tasks/send", {
        "id": uuid.uuid4().hex, "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
        "pushNotification": config03(f)}, V03),
    "0.1 tasks/pushNotification/set": lambda c, t, f: jsonrpc(
        c, "tasks/pushNotification/set", {"id": t, "pushNotificationConfig": config03(f)}, V03),
}


@pytest.fixture
def agent(make_app):
    app = make_app(lambda ctx: "done", **PUSH)
    client = app.test_client()
    task_id = rpc(client, "SendMessage", {"message": msg10()})["result"]["task"]["id"]
    return client, app.extensions["a2a"]["a2a"].store, task_id


@pytest.mark.parametrize("binding", list(BINDINGS))
def test_a_clean_webhook_is_accepted_on_every_binding(agent, binding):
    client, store, task_id = agent
    accepted, answer = BINDINGS[binding](client, task_id, fields())
    assert accepted, answer


@pytest.mark.parametrize("field", ["token", "scheme", "credentials"])
@pytest.mark.parametrize("binding", list(BINDINGS))
def test_a_header_breaking_value_is_refused_on_every_binding(agent, binding, field):
    client, store, task_id = agent
    for what, value in BAD_VALUES:
        accepted, message = BINDINGS[binding](client, task_id, fields(**{field: value}))
        assert not accepted, (what, message)
        assert field in message and value not in message, message  # names the field, not the secret
    assert store.push_targets(task_id) == []


@pytest.mark.parametrize("value, problem", [
    ("", ""), ("Bearer", ""), ("a b/c=+", ""), ("caf\u00e9", ""),
    ("a\r\nb", "control character (U+000D)"), ("\u2028", "U+2028"), (" x", "starts with a space"),
])
def test_header_value_problem(value: str, problem: Optional[str]):
    found = header_value_problem(value)
    assert (problem in found) if problem else found == ""


def test_a_valid_webhook_beside_a_refused_one_gets_every_event(make_app):
    with WebhookReceiver() as good:
        app = make_app(lambda ctx: "done", **dict(PUSH, push_allow_private=True,
                                                  push_retry_delay=0.05, push_timeout=1.0))
        client = app.test_client()
        bad = {"url": good.hook(), "token": "ok\r\nX-Injected: 1"}
        refused = rpc(client, "SendMessage", {"message": msg10(), "configuration": {
            "taskPushNotificationConfig": bad, "returnImmediately": True}})
        assert refused["error"]["code"] == -32602
        task = rpc(client, "SendMessage", {"message": msg10(), "configuration": {
            "taskPushNotificationConfig": {"url": good.hook(), "token": "fine", "id": "good"},
            "returnImmediately": True}})["result"]["task"]
        refused = rpc(client, "CreateTaskPushNotificationConfig",
                      {"taskId": task["id"], **bad, "id": "bad"})
        assert refused["error"]["code"] == -32602
        pushes = good.wait_for(lambda got: any(
            p["json"].get("statusUpdate", {}).get("status", {}).get("state")
            == "TASK_STATE_COMPLETED" or p["json"].get("task", {}).get("status", {}).get("state")
            == "TASK_STATE_COMPLETED" for p in got))
        assert all(p["headers"]["X-A2A-Notification-Token"] == "fine" for p in pushes)
        assert "X-Injected" not in pushes[0]["headers"]
