"""Caller-chosen strings are checked before they become keys, headers or log lines
(docs/internals.rst, invariant 10): tenants, webhook ids given with a message, caller ids.

A webhook id with CR/LF sent inside ``SendMessage``'s configuration was stored and
later logged verbatim (forged log lines); one over 256 characters, or a tenant over
255, was a 500 on the SQL stores once the task had started.
"""
from __future__ import annotations

import uuid
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import requests
from flask import Flask

from a2a_flask import A2A
from a2a_flask.stores import open_store

from tests.conftest import drop_sql_database, echo, make_card, sql_test_url
from tests.support import wire
from tests.support.helpers import V1, Server, rpc_body
from tests.support.tasks import message, message03
from tests.support.wire import rpc

pytestmark = pytest.mark.declare(server=["postgres_server"], slow=["postgres_server"])

V03 = {"A2A-Version": "0.3"}
HOSTILE = {"long": "t" * 300, "CR/LF": "evil\r\nINFO forged line", "NUL": "a\x00b",
           "C1": "a\x85b"}


def stored_tasks(app: Flask) -> List[str]:
    """The id of every task the app's store holds, of every tenant and owner (a
    ListTasks query would see only one tenant's and one owner's)."""
    return app.extensions["a2a"]["a2a"].store.task_ids()


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
    assert stored_tasks(push_app) == []


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
    assert stored_tasks(app) == []


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
    assert stored_tasks(app) == []
    app.extensions["a2a"]["a2a"].close()


# ------------------------------------------------------------------ on a real server


@pytest.fixture(scope="module")
def postgres_server() -> Iterator[Tuple[Server, str]]:
    """A real server on a PostgreSQL database of its own, and that database's URL."""
    name = f"a2atest_{uuid.uuid4().hex[:12]}"
    url = sql_test_url("postgresql", name)
    env = {"FLASK_A2A_STORE": url, "FLASK_A2A_PUSH_ALLOW_PRIVATE": "true"}
    try:
        with Server("tests.support.fault_app:app", env=env) as running:
            yield running, url
    finally:
        drop_sql_database("postgresql", name)


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_on_postgresql_hostile_tenants_and_webhook_ids_are_invalid_params_not_500(
        postgres_server, kind):
    server, store_url = postgres_server
    value = HOSTILE[kind]
    url = server.url + "/a2a"
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
    store = open_store(store_url)  # the server's tables, every tenant's and owner's tasks
    try:
        assert store.task_ids() == []  # nothing was stored
    finally:
        store.close()
    log = server.log_text()
    assert "Traceback" not in log and "forged line" not in log
