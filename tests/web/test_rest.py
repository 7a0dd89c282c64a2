"""The HTTP+JSON (REST) bindings through the Flask test client.

1.0 under ``/a2a/rest`` and ``/a2a/rest/{tenant}`` (the 1.0 specification's
HTTP+JSON binding): every route, query parameters, the ``{"error": {...}}``
body with the 1.0.1 HTTP statuses, content types, 404/405, SSE of bare
StreamResponse objects (validated against the v1.0 schema), and ``A2A-Version``
handling.  Then the 0.3 flavour under ``/a2a/rest/v1`` (ProtoJSON of the 0.3
proto: ``content``, ``fileWithBytes``, ``TASK_STATE_CANCELLED``, ``final``,
push configs with ``name``), checked strictly against the 0.3 proto bindings
shipped with ``a2a-sdk`` when present.
"""
from __future__ import annotations

import base64
import contextlib
import json
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional

import pytest
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, Part

from tests.conftest import make_card
from tests.support.helpers import ALICE, Gate, bearer_auth, card_v1_view, parse_sse, rpc_body, validate
from tests.support.tasks import message

REST = "/a2a/rest"
V03 = "/a2a/rest/v1"
PUSH_AND_CARD = AgentCapabilities(streaming=True, push_notifications=True)
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
A2A_JSON = "application/a2a+json"

# ------------------------------------------------------------------ the agent under test

GATES: Dict[str, Gate] = {}


def agent(ctx):
    """Behaviour chosen by the first word of the task's first user message."""
    first = ctx.history[0].text if ctx.history else ctx.text
    word, _, arg = first.partition(" ")
    if word == "reply":
        ctx.reply("pong")
    elif word == "ask":
        if ctx.follow_up:
            ctx.complete("thanks")
        else:
            ctx.ask("Which city?")
    elif word == "stream":
        ctx.working("Working")
        ctx.artifact("chunk-1 ", artifact_id="story", append=True)
        ctx.artifact("chunk-2", artifact_id="story", append=True, last_chunk=True)
        ctx.complete()
    elif word == "parts":
        return list(ctx.parts)
    elif word == "values":
        ctx.artifact(Part(data=[1, 2]))
        ctx.artifact(Part(data={"k": "v"}))
    elif word == "gate":
        try:
            ctx.working("waiting")
            while not GATES[arg].release.wait(0.05):
                if ctx.cancelled:
                    return None
            ctx.artifact("gated result")
            ctx.complete()
        finally:
            GATES[arg].done.set()
    else:
        return ctx.text
    return None


@contextlib.contextmanager
def gate() -> Iterator[str]:
    """A gate key for the ``gate`` behaviour; when the block ends the gate opens and the
    executor is given time to return, so no task outlives its test (and its store)."""
    key = uuid.uuid4().hex[:10]
    GATES[key] = Gate()
    try:
        yield key
    finally:
        GATES[key].release.set()
        GATES[key].done.wait(5)
        del GATES[key]


def close_app(app: Flask) -> None:
    """Stop what the agent runs in the background and close its store."""
    state = app.extensions["a2a"]["a2a"]
    getattr(state, "close", state.store.close)()


@pytest.fixture
def client(make_app):
    return make_app(agent, card=make_card(default_input_modes=["*/*"])).test_client()


@pytest.fixture
def push_client(make_app):
    card = make_card(capabilities=PUSH_AND_CARD, default_input_modes=["*/*"])
    return make_app(agent, card=card).test_client()


@contextlib.contextmanager
def app_with(card_kwargs: Optional[dict] = None, **kwargs: Any) -> Iterator[Any]:
    """An app built by hand (for ``extended_card``); its store is closed afterwards."""
    app = Flask("rest_app")
    kwargs.setdefault("push_allowed_hosts", "*.example.com")  # no DNS for them here
    A2A(app, card=make_card(**(card_kwargs or {})), executor=agent, **kwargs)
    try:
        yield app.test_client()
    finally:
        close_app(app)


# ------------------------------------------------------------------ wire helpers


def ok(response, definition: Optional[str] = None) -> Any:
    assert response.status_code == 200, response.get_data(as_text=True)[:800]
    assert response.mimetype in ("application/json", A2A_JSON), response.mimetype
    body = response.get_json()
    if definition is not None:
        validate(body, definition)
    return body


def rest_error(response, http_status: int, grpc_status: str, reason: str) -> Dict[str, Any]:
    """An error response: ``{"error": {"code", "status", "message", "details": [ErrorInfo]}}``."""
    assert response.status_code == http_status, response.get_data(as_text=True)[:800]
    assert response.mimetype in ("application/json", A2A_JSON, "application/problem+json")
    body = response.get_json()
    assert set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"code", "status", "message", "details"}, err
    assert err["code"] == http_status and err["status"] == grpc_status, err
    assert isinstance(err["message"], str) and err["message"]
    info = err["details"][0]
    assert info["@type"] == ERROR_INFO and info["domain"] == "a2a-protocol.org", info
    assert info["reason"] == reason, info
    for detail in err["details"]:
        assert detail["@type"].startswith("type.googleapis.com/google.rpc."), detail
    return err


def send(client, text: str, base: str = REST, configuration: Optional[dict] = None,
         **extra: Any) -> Dict[str, Any]:
    body: Dict[str, Any] = {"message": message(text, **extra)}
    if configuration is not None:
        body["configuration"] = configuration
    return ok(client.post(base + "/message:send", json=body), "Send Message Response")


def send_task(client, text: str, base: str = REST, configuration: Optional[dict] = None,
              **extra: Any) -> Dict[str, Any]:
    result = send(client, text, base, configuration, **extra)
    assert list(result) == ["task"], result
    return result["task"]


def sse_events(response) -> List[Dict[str, Any]]:
    assert response.status_code == 200, response.get_data(as_text=True)[:800]
    assert response.mimetype == "text/event-stream"
    return parse_sse(response.get_data(as_text=True))


def stream_v1(response) -> List[Dict[str, Any]]:
    """The data of each event: bare StreamResponse objects, schema-validated."""
    items = [e["data"] for e in sse_events(response)]
    for item in items:
        assert "jsonrpc" not in item and len(item) == 1, item
        validate(item, "Stream Response")
    return items


def kind(item: Dict[str, Any]) -> str:
    (key,) = item
    return key


def wait_state(client, task_id: str, states: set, base: str = REST) -> Dict[str, Any]:
    deadline = time.monotonic() + 5
    while True:
        task = ok(client.get(f"{base}/tasks/{task_id}"))
        if task["status"]["state"] in states or time.monotonic() > deadline:
            assert task["status"]["state"] in states, task
            return task
        time.sleep(0.02)


# ================================================================== 1.0: every route


@pytest.mark.parametrize("base", [REST, REST + "/acme"], ids=["root", "tenant"])
def test_every_1_0_route_at_root_and_under_a_tenant(base):
    extended = make_card(name="Extended")
    with app_with({"capabilities": PUSH_AND_CARD, "default_input_modes": ["*/*"]},
                  extended_card=extended, auth=bearer_auth(), auth_required=False) as client:
        task = send_task(client, "hello", base)
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        assert ok(client.get(f"{base}/tasks/{task['id']}"), "Task")["id"] == task["id"]
        listed = ok(client.get(f"{base}/tasks"), "List Tasks Response")
        assert [t["id"] for t in listed["tasks"]] == [task["id"]]
        items = stream_v1(client.post(base + "/message:stream", json={"message": message("stream")}))
        assert kind(items[0]) == "task" and kind(items[-1]) == "statusUpdate"

        with gate() as key:
            live = send_task(client, f"gate {key}", base, {"returnImmediately": True})
            wait_state(client, live["id"], {"TASK_STATE_WORKING"}, base)
            sub = client.get(f"{base}/tasks/{live['id']}:subscribe", buffered=False)
            canceled = ok(client.post(f"{base}/tasks/{live['id']}:cancel", json={}), "Task")
            assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
            sub_items = stream_v1(sub)
        assert kind(sub_items[0]) == "task"
        assert sub_items[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"

        configs = f"{base}/tasks/{task['id']}/pushNotificationConfigs"
        created = ok(client.post(configs, json={"url": "https://client.example.com/hook",
                                                "authentication": {"scheme": "Bearer"}}),
                     "Task Push Notification Config")
        assert created["taskId"] == task["id"] and created["id"]
        listed = ok(client.get(configs), "List Task Push Notification Configs Response")
        assert [c["id"] for c in listed["configs"]] == [created["id"]]
        got = ok(client.get(f"{configs}/{created['id']}"), "Task Push Notification Config")
        assert got["url"] == "https://client.example.com/hook"
        assert ok(client.delete(f"{configs}/{created['id']}")) == {}
        rest_error(client.get(f"{configs}/{created['id']}"), 404, "NOT_FOUND", "TASK_NOT_FOUND")

        rest_error(client.get(base + "/extendedAgentCard"), 401, "UNAUTHENTICATED",
                   "UNAUTHENTICATED")
        card = ok(client.get(base + "/extendedAgentCard", headers=ALICE))
        assert card["name"] == "Extended"
        validate(card_v1_view(card), "Agent Card")


def test_send_message_returns_wrapped_task_with_history(client):
    task = send_task(client, "hello")
    assert task["id"] and task["contextId"]
    assert task["artifacts"][0]["parts"] == [{"text": "hello"}]
    assert task["history"][0]["role"] == "ROLE_USER"


def test_send_message_direct_reply_is_wrapped_message(client):
    result = send(client, "reply")
    assert list(result) == ["message"]
    assert result["message"]["role"] == "ROLE_AGENT"
    assert result["message"]["parts"] == [{"text": "pong"}]


def test_send_message_return_immediately_and_input_required(client):
    with gate() as key:
        task = send_task(client, f"gate {key}", configuration={"returnImmediately": True})
        assert task["status"]["state"] in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
    asked = send_task(client, "ask")
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    done = send_task(client, "Paris", taskId=asked["id"])
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


def test_send_message_accepts_application_a2a_json(client):
    body = json.dumps({"message": message("hello")})
    result = ok(client.post(REST + "/message:send", data=body, content_type=A2A_JSON),
                "Send Message Response")
    assert result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_rest_responses_are_application_json(client):
    """The issue asks for application/json (what the SDKs send); 1.0.1 §11.1 would
    prefer application/a2a+json, which we accept on input (docs/protocol.rst: a body
    is read by its Content-Type)."""
    response = client.post(REST + "/message:send", json={"message": message("hello")})
    assert response.mimetype == "application/json"
    assert client.get(REST + "/tasks/nope").mimetype == "application/json"


@pytest.mark.parametrize("base", [REST, REST + "/acme", V03], ids=["1.0", "tenant", "0.3"])
@pytest.mark.parametrize("route", ["/message:send", "/message:stream", "/tasks/t1:cancel",
                                   "/tasks/t1/pushNotificationConfigs"])
def test_a_body_that_is_not_json_by_content_type_is_415(push_client, base, route):
    body = json.dumps({"message": message("hello"), "url": "https://example.com/hook"})
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/xml",
                         None):
        headers = {} if content_type is None else {"Content-Type": content_type}
        response = push_client.post(base + route, data=body, headers=headers)
        err = rest_error(response, 415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED")
        assert err["details"][0]["metadata"] == {"contentType": content_type or ""}


@pytest.mark.parametrize("headers", [
    {"Content-Type": "text/plain"}, {"Content-Type": "application/x-www-form-urlencoded"},
    {"Content-Type": "multipart/form-data; boundary=x"},
    {"Origin": "https://evil.example"},  # fetch(url, {method: "POST", mode: "no-cors"})
    {"Sec-Fetch-Site": "cross-site"}, {"Sec-Fetch-Site": "same-site"},
], ids=["text", "form", "multipart", "origin", "cross-site", "same-site"])
def test_an_empty_post_from_a_web_page_needs_a_json_content_type(client, headers):
    """A browser posts a form's type, or no type, cross-site without a CORS
    preflight, cookies included: such a POST changes nothing, even with no body."""
    with gate() as key:
        task = send_task(client, f"gate {key}", REST, {"returnImmediately": True})
        for base in (REST, V03):
            response = client.post(f"{base}/tasks/{task['id']}:cancel", data=b"",
                                   headers=headers)
            rest_error(response, 415, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED")
        still = ok(client.get(f"{REST}/tasks/{task['id']}"), "Task")
        assert still["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
        empty_json = client.post(f"{REST}/tasks/{task['id']}:cancel", data=b"",
                                 headers={**headers, "Content-Type": "application/json"})
        assert ok(empty_json, "Task")["status"]["state"] == "TASK_STATE_CANCELED"


def test_an_empty_post_with_no_content_type_from_a_client_is_served(client):
    """SDKs post an empty cancel with no Content-Type (and no browser headers)."""
    with gate() as key:
        task = send_task(client, f"gate {key}", REST, {"returnImmediately": True})
        canceled = client.post(f"{REST}/tasks/{task['id']}:cancel", data=b"")
        assert ok(canceled, "Task")["status"]["state"] == "TASK_STATE_CANCELED"


@pytest.mark.parametrize("base, part", [
    (REST, {"text": "hi", "mediaType": "image/png"}),
    (V03, {"file": {"fileWithUri": "https://example.com/a.png", "mimeType": "image/png"}}),
], ids=["1.0", "0.3"])
def test_a_part_media_type_the_agent_does_not_take_stays_400(make_app, base, part):
    client = make_app(agent, card=make_card(default_input_modes=["text/plain"])).test_client()
    key = "parts" if base == REST else "content"
    body = {"message": {"messageId": "m-png", "role": "ROLE_USER", key: [part]}}
    response = client.post(base + "/message:send", json=body)
    rest_error(response, 400, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED")


@pytest.mark.parametrize("body", ["{bad json", '{"message": ', "\xff\xfe"])
def test_bad_json_is_rejected(client, body):
    response = client.post(REST + "/message:send", data=body, content_type="application/json")
    rest_error(response, 400, "INVALID_ARGUMENT", "PARSE_ERROR")


def test_json_that_is_not_an_object_is_invalid_params(client):
    response = client.post(REST + "/message:send", json=[{"message": message("x")}])
    rest_error(response, 400, "INVALID_ARGUMENT", "INVALID_PARAMS")


def test_send_message_errors_use_the_1_0_1_statuses(client):
    done = send_task(client, "hello")
    rest_error(client.post(REST + "/message:send", json={"message": message("x", taskId=done["id"])}),
               400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")
    rest_error(client.post(REST + "/message:send", json={"message": message("x", taskId="nope")}),
               404, "NOT_FOUND", "TASK_NOT_FOUND")
    err = rest_error(client.post(REST + "/message:send", json={
        "message": message("x"), "configuration": {"historyLength": -1}}),
        400, "INVALID_ARGUMENT", "INVALID_PARAMS")
    violations = err["details"][1]["fieldViolations"]
    assert violations[0]["field"] == "configuration.historyLength"
    rest_error(client.post(REST + "/message:send", json={"message": {"role": "ROLE_USER"}}),
               400, "INVALID_ARGUMENT", "INVALID_PARAMS")
    rest_error(client.post(REST + "/message:send", json={
        "message": message("x"), "configuration": {"taskPushNotificationConfig": {
            "url": "https://c.example.com/h"}}}),
        400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED")


# ================================================================== 1.0: streaming


def test_message_stream_sends_bare_stream_responses_in_order(client):
    response = client.post(REST + "/message:stream", json={"message": message("stream")})
    events = sse_events(response)
    assert all("id" in e for e in events)
    items = stream_v1(client.post(REST + "/message:stream", json={"message": message("stream")}))
    assert [kind(i) for i in items] == ["task", "statusUpdate", "artifactUpdate", "artifactUpdate",
                                        "statusUpdate"]
    assert items[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert all("final" not in i.get("statusUpdate", {}) and "kind" not in i[kind(i)] for i in items)
    chunks = [i["artifactUpdate"] for i in items if kind(i) == "artifactUpdate"]
    assert [(c.get("append"), c.get("lastChunk")) for c in chunks] == [(True, None), (True, True)]


def test_message_stream_direct_reply_is_one_message(client):
    items = stream_v1(client.post(REST + "/message:stream", json={"message": message("reply")}))
    assert [kind(i) for i in items] == ["message"]


def test_message_stream_errors_before_the_stream_are_plain_json(client):
    done = send_task(client, "hello")
    rest_error(client.post(REST + "/message:stream", json={"message": message("x", taskId=done["id"])}),
               400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")


@pytest.mark.parametrize("verb", ["GET", "POST"])
def test_subscribe_with_get_and_post(client, verb):
    with gate() as key:
        task = send_task(client, f"gate {key}", configuration={"returnImmediately": True})
        wait_state(client, task["id"], {"TASK_STATE_WORKING"})
        response = client.open(f"{REST}/tasks/{task['id']}:subscribe", method=verb, buffered=False)
        GATES[key].release.set()
        items = stream_v1(response)
    assert kind(items[0]) == "task" and items[0]["task"]["id"] == task["id"]
    assert items[0]["task"]["status"]["state"] == "TASK_STATE_WORKING"
    assert items[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_subscribe_terminal_task_is_400_and_unknown_is_404(client):
    task = send_task(client, "hello")
    for verb in ("GET", "POST"):
        rest_error(client.open(f"{REST}/tasks/{task['id']}:subscribe", method=verb),
                   400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")
        rest_error(client.open(f"{REST}/tasks/nope:subscribe", method=verb),
                   404, "NOT_FOUND", "TASK_NOT_FOUND")


def test_subscribe_last_event_id_replays_the_rest(client):
    full = sse_events(client.post(REST + "/message:stream", json={"message": message("stream")}))
    task_id = full[0]["data"]["task"]["id"]
    replay = sse_events(client.get(f"{REST}/tasks/{task_id}:subscribe",
                                   headers={"Last-Event-ID": full[1]["id"]}))
    assert [(e["id"], e["data"]) for e in replay] == [(e["id"], e["data"]) for e in full[2:]]


def test_streaming_not_declared_is_400(make_app):
    card = make_card(capabilities=AgentCapabilities(streaming=False))
    client = make_app(agent, card=card).test_client()
    rest_error(client.post(REST + "/message:stream", json={"message": message("x")}),
               400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")


# ================================================================== 1.0: tasks


def test_get_task_history_length_query_parameter(client):
    asked = send_task(client, "ask")
    send_task(client, "Oslo", taskId=asked["id"])
    full = ok(client.get(f"{REST}/tasks/{asked['id']}"), "Task")
    assert len(full["history"]) == 3
    assert "history" not in ok(client.get(f"{REST}/tasks/{asked['id']}?historyLength=0"), "Task")
    one = ok(client.get(f"{REST}/tasks/{asked['id']}?historyLength=1"), "Task")
    assert [m["parts"][0]["text"] for m in one["history"]] == ["Oslo"]
    rest_error(client.get(f"{REST}/tasks/{asked['id']}?historyLength=-2"),
               400, "INVALID_ARGUMENT", "INVALID_PARAMS")
    rest_error(client.get(f"{REST}/tasks/nope"), 404, "NOT_FOUND", "TASK_NOT_FOUND")


def test_list_tasks_camel_case_query_booleans_and_enums(client):
    context = "ctx-" + uuid.uuid4().hex[:8]
    done = [send_task(client, "hello", contextId=context) for _ in range(3)]
    asked = send_task(client, "ask", contextId=context)
    send_task(client, "elsewhere")

    def listed(query: str) -> Dict[str, Any]:
        return ok(client.get(f"{REST}/tasks?{query}"), "List Tasks Response")

    everything = listed(f"contextId={context}")
    assert everything["totalSize"] == 4 and everything["nextPageToken"] == ""
    assert all("artifacts" not in t for t in everything["tasks"])
    with_artifacts = listed(f"contextId={context}&includeArtifacts=true")
    assert sum("artifacts" in t for t in with_artifacts["tasks"]) == 3
    assert all("artifacts" not in t for t in listed(f"contextId={context}&includeArtifacts=false")["tasks"])
    waiting = listed(f"contextId={context}&status=TASK_STATE_INPUT_REQUIRED")
    assert [t["id"] for t in waiting["tasks"]] == [asked["id"]]
    completed = listed(f"contextId={context}&status=TASK_STATE_COMPLETED&historyLength=0")
    assert sorted(t["id"] for t in completed["tasks"]) == sorted(t["id"] for t in done)
    assert all("history" not in t for t in completed["tasks"])
    first = listed(f"contextId={context}&pageSize=2")
    assert first["pageSize"] == 2 and len(first["tasks"]) == 2 and first["nextPageToken"]
    second = listed(f"contextId={context}&pageSize=2&pageToken={first['nextPageToken']}")
    assert {t["id"] for t in first["tasks"]}.isdisjoint(t["id"] for t in second["tasks"])
    stamp = asked["status"]["timestamp"]
    after = listed(f"contextId={context}&statusTimestampAfter={stamp}")
    assert asked["id"] in [t["id"] for t in after["tasks"]]
    for bad in ("status=BOGUS", "pageSize=0", "pageSize=101", "historyLength=-1",
                "statusTimestampAfter=yesterday", "pageToken=not-a-token"):
        rest_error(client.get(f"{REST}/tasks?{bad}"), 400, "INVALID_ARGUMENT", "INVALID_PARAMS")


def test_cancel_live_task_then_not_cancelable_and_unknown(client):
    with gate() as key:
        task = send_task(client, f"gate {key}", configuration={"returnImmediately": True})
        wait_state(client, task["id"], {"TASK_STATE_WORKING"})
        canceled = ok(client.post(f"{REST}/tasks/{task['id']}:cancel", json={"metadata": {"why": "test"}}),
                      "Task")
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    rest_error(client.post(f"{REST}/tasks/{task['id']}:cancel", json={}), 400, "FAILED_PRECONDITION",
               "TASK_NOT_CANCELABLE")
    rest_error(client.post(f"{REST}/tasks/nope:cancel", json={}), 404, "NOT_FOUND", "TASK_NOT_FOUND")


# ================================================================== 1.0: push configs and card


def test_push_config_routes_without_push_capability_are_400(client):
    task = send_task(client, "hello")
    configs = f"{REST}/tasks/{task['id']}/pushNotificationConfigs"
    for response in (client.post(configs, json={"url": "https://c.example.com/h"}),
                     client.get(configs), client.get(configs + "/x"), client.delete(configs + "/x")):
        rest_error(response, 400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED")


def test_push_config_on_unknown_task_is_404_and_secrets_are_masked(push_client):
    rest_error(push_client.post(f"{REST}/tasks/nope/pushNotificationConfigs",
                                json={"url": "https://c.example.com/h"}),
               404, "NOT_FOUND", "TASK_NOT_FOUND")
    task = send_task(push_client, "hello")
    configs = f"{REST}/tasks/{task['id']}/pushNotificationConfigs"
    created = ok(push_client.post(configs, json={
        "id": "cfg-1", "url": "https://c.example.com/h", "token": "secret-token",
        "authentication": {"scheme": "Bearer", "credentials": "secret"}}))
    assert created["id"] == "cfg-1"
    got = ok(push_client.get(configs + "/cfg-1"), "Task Push Notification Config")
    assert got["token"] != "secret-token" and got["authentication"]["credentials"] != "secret"
    assert ok(push_client.delete(configs + "/cfg-1")) == {}
    assert ok(push_client.delete(configs + "/cfg-1")) == {}  # idempotent


def test_extended_agent_card_not_declared_or_not_configured(client):
    rest_error(client.get(REST + "/extendedAgentCard"), 400, "FAILED_PRECONDITION",
               "UNSUPPORTED_OPERATION")
    declared = {"capabilities": AgentCapabilities(streaming=True, extended_agent_card=True)}
    with app_with(declared) as other:
        rest_error(other.get(REST + "/extendedAgentCard"), 400, "FAILED_PRECONDITION",
                   "EXTENDED_AGENT_CARD_NOT_CONFIGURED")


# ================================================================== 1.0: paths, verbs, versions


@pytest.mark.parametrize("verb,path", [
    ("GET", "/nowhere"), ("POST", "/message:explode"), ("GET", "/tasks/a/b/c"),
    ("POST", "/tenants/acme/tasks"), ("PUT", "/x")])
def test_unknown_rest_path_is_404(client, verb, path):
    rest_error(client.open(REST + path, method=verb), 404, "NOT_FOUND", "METHOD_NOT_FOUND")


@pytest.mark.parametrize("verb,path,allowed", [
    ("GET", "/message:send", {"POST"}),
    ("PUT", "/message:stream", {"POST"}),
    ("DELETE", "/tasks/t1", {"GET"}),
    ("POST", "/tasks", {"GET"}),
    ("GET", "/tasks/t1:cancel", {"POST"}),
    ("DELETE", "/tasks/t1:subscribe", {"GET", "POST"}),
    ("PUT", "/tasks/t1/pushNotificationConfigs", {"GET", "POST"}),
    ("POST", "/tasks/t1/pushNotificationConfigs/c1", {"GET", "DELETE"}),
    ("POST", "/extendedAgentCard", {"GET"}),
    ("GET", "/acme/message:send", {"POST"}),
])
def test_wrong_verb_is_405_with_allow(client, verb, path, allowed):
    response = client.open(REST + path, method=verb)
    assert response.status_code == 405, response.get_data(as_text=True)
    assert {m.strip() for m in response.headers["Allow"].split(",")} == allowed
    body = response.get_json()
    assert body["error"]["code"] == 405 and body["error"]["details"][0]["@type"] == ERROR_INFO


@pytest.mark.parametrize("headers,query", [({}, ""), ({"A2A-Version": "1.0"}, ""),
                                           ({"A2A-Version": "1.0.1"}, ""), ({}, "?A2A-Version=1.0")])
def test_missing_or_1_0_version_is_served_as_1_0(client, headers, query):
    response = client.post(REST + "/message:send" + query, json={"message": message("hi")},
                           headers=headers)
    assert ok(response, "Send Message Response")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("headers,query", [({"A2A-Version": "0.3"}, ""), ({"A2A-Version": "2.0"}, ""),
                                           ({"A2A-Version": "junk"}, ""), ({}, "?A2A-Version=0.3")])
def test_another_version_on_1_0_routes_is_version_not_supported(client, headers, query):
    response = client.post(REST + "/message:send" + query, json={"message": message("hi")},
                           headers=headers)
    err = rest_error(response, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")
    assert "1.0" in err["details"][0]["metadata"]["supportedVersions"]


def test_1_0_version_on_the_0_3_routes_is_version_not_supported(client):
    response = client.get(V03 + "/tasks", headers={"A2A-Version": "1.0"})
    rest_error(response, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")


# ================================================================== 1.0: tenants


def test_tenant_isolation_between_path_tenants_and_the_root(client):
    task = send_task(client, "hello", REST + "/acme")
    for base in (REST + "/other", REST):
        rest_error(client.get(f"{base}/tasks/{task['id']}"), 404, "NOT_FOUND", "TASK_NOT_FOUND")
        rest_error(client.post(f"{base}/tasks/{task['id']}:cancel", json={}), 404, "NOT_FOUND", "TASK_NOT_FOUND")
        rest_error(client.get(f"{base}/tasks/{task['id']}:subscribe"), 404, "NOT_FOUND",
                   "TASK_NOT_FOUND")
        rest_error(client.post(base + "/message:send", json={"message": message("x", taskId=task["id"])}),
                   404, "NOT_FOUND", "TASK_NOT_FOUND")
        assert ok(client.get(base + "/tasks"))["tasks"] == []
    assert [t["id"] for t in ok(client.get(REST + "/acme/tasks"))["tasks"]] == [task["id"]]
    assert ok(client.get(f"{REST}/acme/tasks/{task['id']}"))["id"] == task["id"]
    # The path tenant is the same tenant as JSON-RPC's params.tenant.
    body = client.post("/a2a", json=rpc_body("GetTask", {"tenant": "acme", "id": task["id"]}),
                       headers={"A2A-Version": "1.0"}).get_json()
    assert body["result"]["id"] == task["id"]


# ================================================================== 0.3 REST under /v1


def proto03(body: Dict[str, Any], message_name: str) -> None:
    """Parse strictly (unknown members are errors) with the 0.3 proto of the official SDK."""
    try:
        from a2a.compat.v0_3 import a2a_v0_3_pb2
        from google.protobuf.json_format import ParseDict
    except ImportError:  # pragma: no cover - the SDK is a test dependency
        pytest.skip("a2a-sdk (0.3 proto bindings) is not installed")
    ParseDict(body, getattr(a2a_v0_3_pb2, message_name)())


def message03(text: str, **extra: Any) -> Dict[str, Any]:
    out = {"messageId": "m-" + uuid.uuid4().hex[:10], "role": "ROLE_USER", "content": [{"text": text}]}
    out.update(extra)
    return out


def send03(client, text: str, configuration: Optional[dict] = None, **extra: Any) -> Dict[str, Any]:
    body: Dict[str, Any] = {"message": message03(text, **extra)}
    if configuration is not None:
        body["configuration"] = configuration
    result = ok(client.post(V03 + "/message:send", json=body))
    proto03(result, "SendMessageResponse")
    return result


def test_v03_send_uses_content_and_returns_wrapped_task(client):
    result = send03(client, "hello")
    task = result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["history"][0]["content"] == [{"text": "hello"}]
    assert "parts" not in task["history"][0]
    assert task["artifacts"][0]["parts"] == [{"text": "hello"}]  # 0.3 Artifact keeps ``parts``


def test_v03_file_and_data_parts_in_both_directions(client):
    raw = base64.b64encode(b"%PDF-1.4").decode()
    content = [{"text": "parts"},
               {"file": {"fileWithBytes": raw, "mimeType": "application/pdf", "name": "r.pdf"}},
               {"file": {"fileWithUri": "https://example.com/r.pdf", "mimeType": "application/pdf"}},
               {"data": {"data": {"rows": [1, 2]}}}]
    task = send03(client, "", content=content)["task"]
    assert task["history"][0]["content"] == content
    assert task["artifacts"][0]["parts"] == content
    values = send03(client, "values")["task"]
    assert [a["parts"][0] for a in values["artifacts"]] == [
        {"data": {"data": {"value": [1, 2]}}}, {"data": {"data": {"k": "v"}}}]


def test_v03_direct_reply_is_wrapped_message_with_content(client):
    result = send03(client, "reply")
    assert list(result) == ["message"]
    assert result["message"]["content"] == [{"text": "pong"}]
    assert result["message"]["role"] == "ROLE_AGENT"


def test_v03_blocking_false_returns_early_and_cancel_is_cancelled_with_two_ls(client):
    with gate() as key:
        task = send03(client, f"gate {key}", {"blocking": False})["task"]
        assert task["status"]["state"] in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
        wait_state(client, task["id"], {"TASK_STATE_WORKING"}, V03)
        canceled = ok(client.post(f"{V03}/tasks/{task['id']}:cancel", json={}))
        proto03(canceled, "Task")
    assert canceled["status"]["state"] == "TASK_STATE_CANCELLED"
    got = ok(client.get(f"{V03}/tasks/{task['id']}"))
    assert got["status"]["state"] == "TASK_STATE_CANCELLED"
    rest_error(client.post(f"{V03}/tasks/{task['id']}:cancel", json={}), 400, "FAILED_PRECONDITION",
               "TASK_NOT_CANCELABLE")


def test_v03_stream_status_updates_carry_final(client):
    response = client.post(V03 + "/message:stream", json={"message": message03("stream")})
    items = [e["data"] for e in sse_events(response)]
    for item in items:
        proto03(item, "StreamResponse")
    assert [kind(i) for i in items] == ["task", "statusUpdate", "artifactUpdate", "artifactUpdate",
                                        "statusUpdate"]
    statuses = [i["statusUpdate"] for i in items if kind(i) == "statusUpdate"]
    assert [(s["status"]["state"], s["final"]) for s in statuses] == [
        ("TASK_STATE_WORKING", False), ("TASK_STATE_COMPLETED", True)]
    assert items[1]["statusUpdate"]["status"]["message"]["content"] == [{"text": "Working"}]


@pytest.mark.parametrize("verb", ["GET", "POST"])
def test_v03_subscribe(client, verb):
    with gate() as key:
        task = send03(client, f"gate {key}", {"blocking": False})["task"]
        wait_state(client, task["id"], {"TASK_STATE_WORKING"}, V03)
        response = client.open(f"{V03}/tasks/{task['id']}:subscribe", method=verb, buffered=False)
        GATES[key].release.set()
        items = [e["data"] for e in sse_events(response)]
    for item in items:
        proto03(item, "StreamResponse")
    assert kind(items[0]) == "task"
    assert items[-1]["statusUpdate"]["final"] is True
    rest_error(client.open(f"{V03}/tasks/nope:subscribe", method=verb), 404, "NOT_FOUND",
               "TASK_NOT_FOUND")


def test_v03_get_task_and_list_tasks(client):
    task = send03(client, "hello")["task"]
    got = ok(client.get(f"{V03}/tasks/{task['id']}?historyLength=0"))
    proto03(got, "Task")
    assert got["id"] == task["id"] and "history" not in got
    listed = ok(client.get(V03 + "/tasks"))
    assert task["id"] in [t["id"] for t in listed["tasks"]]
    assert listed["tasks"][0]["status"]["state"].startswith("TASK_STATE_")
    rest_error(client.get(f"{V03}/tasks/nope"), 404, "NOT_FOUND", "TASK_NOT_FOUND")


def test_v03_push_configs_carry_a_resource_name(push_client):
    task = send03(push_client, "hello")["task"]
    configs = f"{V03}/tasks/{task['id']}/pushNotificationConfigs"
    flat = ok(push_client.post(configs, json={"pushNotificationConfig": {
        "id": "c1", "url": "https://c.example.com/1", "authentication": {"schemes": ["Bearer"]}}}))
    proto03(flat, "TaskPushNotificationConfig")
    assert flat["name"] == f"tasks/{task['id']}/pushNotificationConfigs/c1"
    assert flat["pushNotificationConfig"]["authentication"] == {"schemes": ["Bearer"]}
    wrapped = ok(push_client.post(configs, json={
        "parent": f"tasks/{task['id']}", "config": {
            "name": f"tasks/{task['id']}/pushNotificationConfigs/c2",
            "pushNotificationConfig": {"id": "c2", "url": "https://c.example.com/2"}}}))
    assert wrapped["name"].endswith("/c2")
    got = ok(push_client.get(configs + "/c1"))
    proto03(got, "TaskPushNotificationConfig")
    assert got["pushNotificationConfig"]["url"] == "https://c.example.com/1"
    listed = ok(push_client.get(configs))
    proto03(listed, "ListTaskPushNotificationConfigResponse")
    assert sorted(c["name"].rsplit("/", 1)[1] for c in listed["configs"]) == ["c1", "c2"]
    assert ok(push_client.delete(configs + "/c1")) == {}
    assert [c["name"] for c in ok(push_client.get(configs))["configs"]] == [wrapped["name"]]


def test_v03_accepts_proto_field_names_as_the_sdk_sends_them(push_client):
    task = send03(push_client, "hello")["task"]
    # The body a2a-sdk's CompatRestTransport builds (MessageToDict(preserving_proto_field_name=True)).
    body = {"parent": f"tasks/{task['id']}", "config_id": "c9", "config": {
        "name": f"tasks/{task['id']}/pushNotificationConfigs/c9",
        "push_notification_config": {"id": "c9", "url": "https://c.example.com/9",
                                     "authentication": {"schemes": ["Bearer"]}}}}
    created = ok(push_client.post(f"{V03}/tasks/{task['id']}/pushNotificationConfigs", json=body))
    assert created["name"].endswith("/c9")
    asked = send03(push_client, "ask")["task"]
    sent = {"request": {"message_id": "m-snake", "role": "ROLE_USER", "task_id": asked["id"],
                        "content": [{"text": "Rome"}]},
            "configuration": {"history_length": 1, "blocking": True}}
    done = ok(push_client.post(V03 + "/message:send", json=sent))["task"]
    assert [m["content"][0]["text"] for m in done["history"]] == ["Rome"]


def test_v03_configuration_without_blocking_is_non_blocking(client):
    with gate() as key:
        # What a2a-sdk's CompatRestTransport sends for return_immediately=True: blocking=false
        # is the proto3 default, so MessageToDict leaves it out.
        body = {"request": {"message_id": "m-" + key, "role": "ROLE_USER",
                            "content": [{"text": f"gate {key}"}]},
                "configuration": {"accepted_output_modes": ["text/plain"]}}
        threading.Timer(0.5, GATES[key].release.set).start()  # a blocking answer waits for this
        task = ok(client.post(V03 + "/message:send", json=body))["task"]
    assert task["status"]["state"] in {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}


def test_v03_card_is_the_union_card(client):
    card = ok(client.get(V03 + "/card"))
    validate(card, "AgentCard", "v0.3")
    validate(card_v1_view(card), "Agent Card")
    assert card["protocolVersion"] == "0.3.0" and card["url"].endswith("/a2a")
    public = client.get("/.well-known/agent-card.json").get_json()
    assert card == public


def test_v03_card_serves_the_extended_card_when_there_is_one():
    with app_with(extended_card=make_card(name="Members only"), auth=bearer_auth(),
                  auth_required=False) as client:
        card = ok(client.get(V03 + "/card", headers=ALICE))
        public = ok(client.get(V03 + "/card"))  # strangers get the public card
    assert card["name"] == "Members only" and card["protocolVersion"] == "0.3.0"
    assert public["name"] == "Test agent"
    validate(card, "AgentCard", "v0.3")
