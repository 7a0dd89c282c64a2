"""Caller-chosen strings are checked before they become keys, headers or log lines
(DESIGN invariant 10): tenants, webhook ids given with a message, caller ids.

A webhook id with CR/LF sent inside ``SendMessage``'s configuration was stored and
later logged verbatim (forged log lines); one over 256 characters, or a tenant over
255, was a 500 on the SQL stores once the task had started.
"""
from __future__ import annotations

import uuid
from typing import Any, Dict, Iterator

import pytest
import requests
from flask import Flask

from a2a_flask import A2A
from a2a_flask.protocol.models import new_id
from a2a_flask.stores.base import TaskQuery

from tests.conftest import drop_sql_database, echo, make_card, sql_test_url
from tests.support import wire
from tests.support.helpers import V1, Server, rpc_body
from tests.support.wire import rpc

V03 = {"A2A-Version": "0.3"}
HOSTILE = {"long": "t" * 300, "CR/LF": "evil\r\nINFO forged line", "NUL": "a\x00b",
           "C1": "a\x85b"}


def message(text: str = "hi") -> Dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": text}]}


def message03(text: str = "hi") -> Dict[str, Any]:
    return {"kind": "message", "role": "user", "messageId": new_id(),
            "parts": [{"kind": "text", "text": text}]}


def task_count(app: Flask) -> int:
    return app.extensions["a2a"]["a2a"].store.list_tasks(TaskQuery()).total_size


@pytest.fixture
def push_app(make_app, store_url) -> Flask:
    from a2a_flask import AgentCapabilities

    return make_app(store=store_url, card=make_card(
        capabilities=AgentCapabilities(streaming=True, push_notifications=True)))


def assert_invalid(body: Dict[str, Any], field: str) -> None:
    error = body["error"]
    assert error["code"] == -32602, error
    fields = [v["field"] for d in error["data"] for v in d.get("fieldViolations", [])]
    assert fields == [field], error


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_webhook_id_given_with_a_message_is_checked_before_anything_starts(push_app, kind):
    client = push_app.test_client()
    hook = {"id": HOSTILE[kind], "url": "https://hooks.example.com/a2a"}
    answer = rpc(client, "SendMessage", {
        "message": message(), "configuration": {"taskPushNotificationConfig": hook}})
    assert_invalid(answer, "configuration.taskPushNotificationConfig.id")
    answer03 = wire.post(client, "message/send", {
        "message": message03(), "configuration": {"pushNotificationConfig": hook}},
        version=None, headers=V03).json()
    assert answer03["error"]["code"] == -32602, answer03
    assert task_count(push_app) == 0


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_tenant_is_checked_on_every_binding(client, app, kind):
    tenant = HOSTILE[kind]
    assert_invalid(rpc(client, "SendMessage", {"message": message(), "tenant": tenant}), "tenant")
    assert_invalid(rpc(client, "ListTasks", {"tenant": tenant}), "tenant")
    if "\x00" not in tenant and "\r" not in tenant:  # no such path can be requested
        response = client.get(f"/a2a/rest/{requests.utils.quote(tenant, safe='')}/tasks")
        assert response.status_code == 400, response.get_data(as_text=True)
        assert response.get_json()["error"]["details"][1]["fieldViolations"][0]["field"] == \
            "tenant"
    assert task_count(app) == 0


def test_a_tenant_of_255_characters_is_served(client):
    tenant = "t" * 255
    sent = rpc(client, "SendMessage", {"message": message(), "tenant": tenant})
    task_id = sent["result"]["task"]["id"]
    assert rpc(client, "GetTask", {"id": task_id, "tenant": tenant})["result"]["id"] == task_id
    assert rpc(client, "GetTask", {"id": task_id})["error"]["code"] == -32001


@pytest.mark.parametrize("caller", ["c" * 256, "alice\r\nforged"])
def test_a_caller_id_no_store_could_hold_is_a_server_error_not_a_task(caller, caplog):
    """An authenticator that names a caller no store could key is the app's bug:
    -32603 with the reason in the log, and nothing stored."""
    app = Flask("callers")
    A2A(app, card=make_card(), executor=echo, store="memory://", auth=lambda: caller)
    client = app.test_client()
    response = wire.post(client, "SendMessage", {"message": message()})
    assert response.status_code == 200 and wire.mimetype(response) == "application/json"
    answer = response.json()  # (its id is null, not the request's: not checked here)
    assert answer["error"]["code"] == -32603
    assert "Principal id must be at most 255 characters" in caplog.text
    assert task_count(app) == 0
    app.extensions["a2a"]["a2a"].close()


# ------------------------------------------------------------------ on a real server


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[Server]:
    name = f"a2atest_{uuid.uuid4().hex[:12]}"
    env = {"FLASK_A2A_STORE": sql_test_url("postgresql", name),
           "FLASK_A2A_PUSH_ALLOW_PRIVATE": "true"}
    try:
        with Server("tests.support.fault_app:app", env=env) as running:
            yield running
    finally:
        drop_sql_database("postgresql", name)


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_on_postgresql_hostile_tenants_and_webhook_ids_are_invalid_params_not_500(
        postgres_server, kind):
    value = HOSTILE[kind]
    url = postgres_server.url + "/a2a"
    hook = {"id": value, "url": "http://127.0.0.1:9/hook"}
    answers = [
        requests.post(url, json=rpc_body("SendMessage", {"message": message(), "tenant": value}),
                      headers=V1, timeout=30),
        requests.post(url, json=rpc_body("SendMessage", {
            "message": message(), "configuration": {"taskPushNotificationConfig": hook}}),
            headers=V1, timeout=30),
        requests.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {
            "message": message03(), "configuration": {"pushNotificationConfig": hook}}},
            headers=V03, timeout=30),
    ]
    for answer in answers:
        assert answer.status_code == 200 and answer.json()["error"]["code"] == -32602, answer.text
    listed = requests.post(url, json=rpc_body("ListTasks", {}), headers=V1, timeout=30).json()
    assert listed["result"]["tasks"] == []  # nothing was stored
    log = postgres_server.log_text()
    assert "Traceback" not in log and "forged line" not in log
