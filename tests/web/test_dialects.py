"""The 0.3 (0.2) and 0.1 JSON-RPC dialects through the Flask test client, on every store.

Requests carry no ``A2A-Version`` (or ``0.3``/``0.2``), as 0.x clients send them.
Every response and stream event is validated against the official schema of
its generation (v0.3, plus v0.2 where the shape is the same; v0.1 for 0.1).
Also: the negotiation table of docs/protocol.rst row by row, the union agent card,
and tenant scoping through ``params.tenant``.
"""
from __future__ import annotations

import base64
import contextlib
import copy
import functools
import threading
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional

import pytest
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentInterface, Part
from a2a_flask.protocol.models import SecurityRequirement, StringList

from tests.conftest import make_card
from tests.support import wire
from tests.support.helpers import ALICE, Gate, bearer_auth, card_v1_view, parse_sse, validate
from tests.support.wire import mimetype

PUSH = AgentCapabilities(streaming=True, push_notifications=True)
ANY_INPUT = ["*/*"]
STATES_03 = {"submitted", "working", "input-required", "completed", "canceled", "failed",
             "rejected", "auth-required", "unknown"}
STATES_01 = {"submitted", "working", "input-required", "completed", "canceled", "failed",
             "unknown"}
FILE_BYTES = b"import os\n"
FILE_B64 = base64.b64encode(FILE_BYTES).decode()

# ------------------------------------------------------------------ the agent under test

#: Live tasks wait on these (``gate <key>``) until the test releases them.
GATES: Dict[str, Gate] = {}


def lab(ctx):
    """Behaviour chosen by the first word of the task's first user message."""
    first = ctx.history[0].text if ctx.history else ctx.text
    word, _, arg = first.partition(" ")
    if word == "reply":
        ctx.reply("pong")
    elif word == "ask":
        if ctx.follow_up:
            ctx.complete("thanks, " + ctx.text)
        else:
            ctx.ask("Which city?")
    elif word == "auth":
        ctx.require_auth("Send a token")
        if arg in GATES:
            with gated(arg) as release:
                release.wait(10)
                ctx.complete("authorised")
    elif word == "reject":
        ctx.reject("Will not do that")
    elif word == "stream":
        ctx.working("Working")
        ctx.artifact("chunk-1 ", artifact_id="story", append=True)
        ctx.artifact("chunk-2", artifact_id="story", append=True, last_chunk=True)
        ctx.complete()
    elif word == "two":
        ctx.working("Working")
        ctx.artifact("first", name="one")
        ctx.artifact("second", name="two")
    elif word == "parts":
        return list(ctx.parts)  # echo every incoming part as one artifact
    elif word == "values":
        for value in ([1, 2], 42, "text", None, {"k": "v"}):
            ctx.artifact(Part(data=value))
    elif word == "gate":
        with gated(arg) as release:
            ctx.working("waiting at the gate")
            while not release.wait(0.05):
                if ctx.cancelled:
                    return None
            ctx.artifact("gated result")
            ctx.complete("done")
    else:
        return ctx.text
    return None


@contextlib.contextmanager
def gated(key: str) -> Iterator[threading.Event]:
    """Executor side of a gate: marks it done however the executor leaves."""
    try:
        yield GATES[key].release
    finally:
        GATES[key].done.set()


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


def release(key: str) -> None:
    GATES[key].release.set()


@pytest.fixture
def client(make_app, store_url):
    return make_app(lab, store=store_url, card=make_card(default_input_modes=ANY_INPUT)).test_client()


@pytest.fixture
def push_client(make_app, store_url):
    card = make_card(capabilities=PUSH, default_input_modes=ANY_INPUT)
    return make_app(lab, store=store_url, card=card).test_client()


# ------------------------------------------------------------------ wire helpers


#: Requests as a 0.x client sends them: no A2A-Version header unless ``version=``.
post = functools.partial(wire.post, version=None)
call = functools.partial(wire.rpc, version=None)


def v03(body: Dict[str, Any], definition: str, *, v02: bool = True) -> Dict[str, Any]:
    """Validate a whole 0.3 response (and as 0.2 when the shape is shared)."""
    validate(body, definition, "v0.3")
    if v02:
        validate(body, definition, "v0.2")
    return body


def v01(body: Dict[str, Any], definition: str) -> Dict[str, Any]:
    """Validate a whole 0.1 response.

    The v0.1 JSON schema types ``JSONRPCError.data`` as an object, while the 0.1
    specification text says ``any | null``; this library sends the 1.0 array of
    typed details, so an error's ``data`` is checked on its own.
    """
    if "error" in body:
        stripped = copy.deepcopy(body)
        data = stripped["error"].pop("data", None)
        assert isinstance(data, list) and data[0]["@type"].endswith("google.rpc.ErrorInfo")
        validate(stripped, definition, "v0.1")
    else:
        validate(body, definition, "v0.1")
    return body


def result(body: Dict[str, Any]) -> Any:
    assert "error" not in body, body
    return body["result"]


def error(body: Dict[str, Any], code: int) -> Dict[str, Any]:
    assert "result" not in body, body
    assert body["error"]["code"] == code, body["error"]
    return body["error"]


def reason(err: Dict[str, Any]) -> str:
    return err["data"][0]["reason"]


def read_sse(response) -> List[Dict[str, Any]]:
    """Every event of an SSE response (each a JSON-RPC response with our request id)."""
    assert response.status_code == 200
    assert mimetype(response) == "text/event-stream", response.text[:500]
    events = parse_sse(response.text)
    for event in events:
        assert event["data"]["jsonrpc"] == "2.0" and event["data"]["id"] == 1, event
        assert "id" in event
    return events


def stream03(client, method: str, params: Any, **kwargs: Any) -> List[Dict[str, Any]]:
    events = read_sse(post(client, method, params, **kwargs))
    for event in events:
        v03(event["data"], "SendStreamingMessageResponse")
    return events


def stream01(client, method: str, params: Any, **kwargs: Any) -> List[Dict[str, Any]]:
    events = read_sse(post(client, method, params, **kwargs))
    for event in events:
        v01(event["data"], "SendTaskStreamingResponse")
    return events


def results(events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [result(e["data"]) for e in events]


def msg03(text: str, *, parts: Optional[list] = None, **extra: Any) -> Dict[str, Any]:
    message = {"kind": "message", "messageId": "m-" + uuid.uuid4().hex[:10], "role": "user",
               "parts": parts or [{"kind": "text", "text": text}]}
    message.update(extra)
    return message


def msg01(text: str, *, parts: Optional[list] = None) -> Dict[str, Any]:
    return {"role": "user", "parts": parts or [{"type": "text", "text": text}]}


def send03(client, text: str, configuration: Optional[dict] = None, **extra: Any) -> Dict[str, Any]:
    params: Dict[str, Any] = {"message": msg03(text, **extra)}
    if configuration is not None:
        params["configuration"] = configuration
    return v03(call(client, "message/send", params), "SendMessageResponse")


def task03(client, text: str, configuration: Optional[dict] = None, **extra: Any) -> Dict[str, Any]:
    task = result(send03(client, text, configuration, **extra))
    assert task["kind"] == "task", task
    return task


def send01(client, task_id: str, text: str, **params: Any) -> Dict[str, Any]:
    body = call(client, "tasks/send", {"id": task_id, "message": msg01(text), **params})
    return v01(body, "SendTaskResponse")


def new_id() -> str:
    return "t-" + uuid.uuid4().hex[:12]


def wait_state(client, task_id: str, states: set, timeout: float = 5.0) -> Dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task = result(call(client, "tasks/get", {"id": task_id}))
        if task["status"]["state"] in states or time.monotonic() > deadline:
            assert task["status"]["state"] in states, task
            return task
        time.sleep(0.02)


def text_of(message: Dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in message["parts"])


# ================================================================== 0.3: message/send


def test_v03_message_send_returns_bare_task_with_kind_and_lowercase_states(client):
    body = send03(client, "hello")
    task = result(body)
    assert task["kind"] == "task" and task["id"] and task["contextId"]
    assert task["status"]["state"] == "completed"
    assert "task" not in task  # bare, not the 1.0 {"task": ...} wrapper
    (artifact,) = task["artifacts"]
    assert artifact["parts"] == [{"kind": "text", "text": "hello"}]
    (sent,) = task["history"]
    assert sent["kind"] == "message" and sent["role"] == "user"
    assert sent["taskId"] == task["id"] and sent["contextId"] == task["contextId"]
    validate(task, "Task", "v0.3")


@pytest.mark.parametrize("version", [None, "0.3", "0.2", "0.3.0"])
def test_v03_served_without_header_and_with_0_3_or_0_2(client, version):
    task = result(v03(call(client, "message/send", {"message": msg03("hi")}, version=version),
                      "SendMessageResponse"))
    assert task["kind"] == "task" and task["status"]["state"] == "completed"


def test_v03_message_send_direct_reply_is_a_bare_message(client):
    message = result(send03(client, "reply"))
    assert message["kind"] == "message" and message["role"] == "agent"
    assert message["parts"] == [{"kind": "text", "text": "pong"}]
    assert message["messageId"] and message["contextId"] and "taskId" not in message
    validate(message, "Message", "v0.3")


def test_v03_blocking_false_returns_before_the_task_finishes(client):
    with gate() as key:
        task = task03(client, f"gate {key}", {"blocking": False})
        assert task["status"]["state"] in {"submitted", "working"}
        release(key)
        done = wait_state(client, task["id"], {"completed"})
    assert done["artifacts"][0]["parts"] == [{"kind": "text", "text": "gated result"}]


def test_v03_blocking_default_returns_at_input_required(client):
    task = task03(client, "ask")
    assert task["status"]["state"] == "input-required"
    assert text_of(task["status"]["message"]) == "Which city?"
    assert task["status"]["message"]["kind"] == "message"


def test_v03_history_length_on_send_and_get(client):
    asked = task03(client, "ask")
    done = task03(client, "Paris", {"historyLength": 1}, taskId=asked["id"],
                  contextId=asked["contextId"])
    assert [text_of(m) for m in done["history"]] == ["Paris"]
    none = task03(client, "plain", {"historyLength": 0})
    assert "history" not in none
    full = result(v03(call(client, "tasks/get", {"id": asked["id"]}), "GetTaskResponse"))
    assert [m["role"] for m in full["history"]] == ["user", "agent", "user"]
    two = result(v03(call(client, "tasks/get", {"id": asked["id"], "historyLength": 2}),
                     "GetTaskResponse"))
    assert [text_of(m) for m in two["history"]] == ["Which city?", "Paris"]
    error(v03(call(client, "tasks/get", {"id": asked["id"], "historyLength": -1}),
              "GetTaskResponse"), -32602)


def test_v03_multi_turn_input_required_continuation(client):
    asked = task03(client, "ask")
    done = task03(client, "Paris", taskId=asked["id"], contextId=asked["contextId"])
    assert done["id"] == asked["id"] and done["contextId"] == asked["contextId"]
    assert done["status"]["state"] == "completed"
    assert text_of(done["status"]["message"]) == "thanks, Paris"
    # The finished task takes no more messages (1.0 meaning: -32004).
    err = error(send03(client, "again", taskId=asked["id"]), -32004)
    assert reason(err) == "UNSUPPORTED_OPERATION"
    error(send03(client, "x", taskId="no-such-task"), -32001)


def test_v03_file_and_data_parts_in_both_directions(client):
    parts = [
        {"kind": "text", "text": "parts"},
        {"kind": "file", "file": {"bytes": FILE_B64, "mimeType": "text/x-python", "name": "a.py"}},
        {"kind": "file", "file": {"uri": "https://example.com/r.pdf", "mimeType": "application/pdf"}},
        {"kind": "data", "data": {"rows": [1, 2], "ok": True}, "metadata": {"schema": "s1"}},
    ]
    task = task03(client, "", parts=parts)
    assert task["artifacts"][0]["parts"] == parts
    assert task["history"][0]["parts"] == parts


def test_v03_non_object_data_values_come_out_wrapped_in_value(client):
    task = task03(client, "values")
    datas = [a["parts"][0]["data"] for a in task["artifacts"]]
    assert datas == [{"value": [1, 2]}, {"value": 42}, {"value": "text"}, {"value": None},
                     {"k": "v"}]
    assert all(a["parts"][0]["kind"] == "data" for a in task["artifacts"])


def test_v03_bad_part_kind_is_invalid_params(client):
    body = call(client, "message/send", {"message": msg03("x", parts=[{"kind": "video"}])})
    err = error(v03(body, "SendMessageResponse"), -32602)
    violations = err["data"][1]["fieldViolations"]
    assert violations[0]["field"] == "message.parts[0].kind"


# ================================================================== 0.3: message/stream


def test_v03_message_stream_kinds_states_and_final_only_on_the_last(client):
    items = results(stream03(client, "message/stream", {"message": msg03("stream")}))
    assert [i["kind"] for i in items] == ["task", "status-update", "artifact-update",
                                          "artifact-update", "status-update"]
    task_id = items[0]["id"]
    assert items[0]["status"]["state"] == "submitted"
    statuses = [i for i in items if i["kind"] == "status-update"]
    assert {s["status"]["state"] for s in statuses} <= STATES_03
    assert [s["status"]["state"] for s in statuses] == ["working", "completed"]
    assert [s["final"] for s in statuses] == [False, True]
    assert all(i.get("taskId", i.get("id")) == task_id for i in items)
    chunks = [i for i in items if i["kind"] == "artifact-update"]
    assert [(c["artifact"]["parts"][0]["text"], c.get("append"), c.get("lastChunk"))
            for c in chunks] == [("chunk-1 ", True, None), ("chunk-2", True, True)]
    assert chunks[0]["artifact"]["parts"][0]["kind"] == "text"


def test_v03_message_stream_closes_at_input_required(client):
    items = results(stream03(client, "message/stream", {"message": msg03("ask")}))
    assert [i["kind"] for i in items] == ["task", "status-update"]
    assert items[-1]["status"]["state"] == "input-required" and items[-1]["final"] is True
    follow = results(stream03(client, "message/stream", {
        "message": msg03("Rome", taskId=items[0]["id"], contextId=items[0]["contextId"])}))
    assert follow[0]["kind"] == "task" and follow[0]["id"] == items[0]["id"]
    finals = [i["final"] for i in follow if i["kind"] == "status-update"]
    assert follow[-1]["status"]["state"] == "completed"
    assert finals == [False] * (len(finals) - 1) + [True]


def test_v03_message_stream_direct_reply_is_one_message_event(client):
    items = results(stream03(client, "message/stream", {"message": msg03("reply")}))
    assert [i["kind"] for i in items] == ["message"]
    assert items[0]["parts"] == [{"kind": "text", "text": "pong"}]


def test_v03_stream_closes_at_auth_required_with_final(client):
    items = results(stream03(client, "message/stream", {"message": msg03("auth")}))
    assert items[-1]["status"]["state"] == "auth-required" and items[-1]["final"] is True


def test_v03_final_is_false_on_auth_required_when_the_stream_stays_open(make_app, store_url):
    client = make_app(lab, store=store_url, close_stream_on_auth_required=False).test_client()
    with gate() as key:
        threading.Timer(0.3, release, args=(key,)).start()
        items = results(stream03(client, "message/stream", {"message": msg03(f"auth {key}")}))
    statuses = [i for i in items if i["kind"] == "status-update"]
    assert [s["status"]["state"] for s in statuses] == ["auth-required", "completed"]
    assert [s["final"] for s in statuses] == [False, True]


# ================================================================== 0.3: tasks/*


def test_v03_tasks_get_returns_bare_task_and_unknown_is_task_not_found(client):
    task = task03(client, "hello")
    got = result(v03(call(client, "tasks/get", {"id": task["id"]}), "GetTaskResponse"))
    assert got == task
    err = error(v03(call(client, "tasks/get", {"id": "nope"}), "GetTaskResponse"), -32001)
    assert err["data"][0]["metadata"] == {"taskId": "nope"}


def test_v03_tasks_cancel_live_task_then_not_cancelable(client):
    with gate() as key:
        task = task03(client, f"gate {key}", {"blocking": False})
        wait_state(client, task["id"], {"working"})
        canceled = result(v03(call(client, "tasks/cancel", {"id": task["id"]}), "CancelTaskResponse"))
        assert canceled["kind"] == "task" and canceled["status"]["state"] == "canceled"
    again = v03(call(client, "tasks/cancel", {"id": task["id"]}), "CancelTaskResponse")
    assert reason(error(again, -32002)) == "TASK_NOT_CANCELABLE"
    error(v03(call(client, "tasks/cancel", {"id": "nope"}), "CancelTaskResponse"), -32001)
    assert wait_state(client, task["id"], {"canceled"})["status"]["state"] == "canceled"


def test_v03_tasks_resubscribe_live_task_snapshot_then_events(client):
    with gate() as key:
        task = task03(client, f"gate {key}", {"blocking": False})
        wait_state(client, task["id"], {"working"})
        response = post(client, "tasks/resubscribe", {"id": task["id"]}, stream=True)
        release(key)
        events = read_sse(response)
    for event in events:
        v03(event["data"], "SendStreamingMessageResponse")
    items = results(events)
    assert items[0]["kind"] == "task" and items[0]["id"] == task["id"]
    assert items[0]["status"]["state"] == "working"
    assert items[-1]["kind"] == "status-update" and items[-1]["status"]["state"] == "completed"
    assert [i["final"] for i in items if i["kind"] == "status-update"][-1] is True


def test_v03_tasks_resubscribe_with_last_event_id_replays_the_rest(client):
    full = stream03(client, "message/stream", {"message": msg03("stream")})
    task_id = full[0]["data"]["result"]["id"]
    cut = full[1]["id"]
    replay = stream03(client, "tasks/resubscribe", {"id": task_id},
                      headers={"Last-Event-ID": cut})
    assert [(e["id"], e["data"]) for e in replay] == [
        (e["id"], e["data"]) for e in full if int(e["id"]) > int(cut)]


def error_event(response) -> Dict[str, Any]:
    """The one event of a stream that failed before its first result: a JSON-RPC error."""
    assert response.status_code == 200
    assert mimetype(response) == "text/event-stream", response.text[:500]
    events = parse_sse(response.text)
    # A plain data event, as 0.3 servers send it (no "event: error" name).
    assert len(events) == 1 and "event" not in events[0], events
    body = events[0]["data"]
    assert body["jsonrpc"] == "2.0" and body["id"] == 1, body
    return body


def test_v03_tasks_resubscribe_terminal_or_unknown_task_is_one_error_event(client):
    """A 0.3 client opened a stream and reads events: the error arrives as one."""
    task = task03(client, "hello")
    body = v03(error_event(post(client, "tasks/resubscribe", {"id": task["id"]})),
               "SendStreamingMessageResponse")
    assert reason(error(body, -32004)) == "UNSUPPORTED_OPERATION"
    body = v03(error_event(post(client, "tasks/resubscribe", {"id": "nope"})),
               "SendStreamingMessageResponse")
    assert reason(error(body, -32001)) == "TASK_NOT_FOUND"
    # Malformed params are not the operation's error: a plain response.
    error(call(client, "tasks/resubscribe", {"id": 5}), -32602)


def test_v01_tasks_resubscribe_to_a_finished_0_1_task_is_one_error_event(client):
    task_id = new_id()
    send01(client, task_id, "hello")
    body = error_event(post(client, "tasks/resubscribe", {"id": task_id}))
    error(v01(body, "SendTaskStreamingResponse"), -32004)


def test_v1_subscribe_to_a_finished_or_unknown_task_stays_a_plain_error(client):
    task = task03(client, "hello")
    error(call(client, "SubscribeToTask", {"id": task["id"]}, version="1.0"), -32004)
    error(call(client, "SubscribeToTask", {"id": "nope"}, version="1.0"), -32001)


# ================================================================== 0.3: push configs


def test_v03_push_config_set_get_list_delete(push_client):
    client = push_client
    task = task03(client, "hello")
    config = {"id": "cfg-1", "url": "https://client.example.com/hook", "token": "tok-1",
              "authentication": {"schemes": ["Bearer"], "credentials": "secret"}}
    created = result(v03(call(client, "tasks/pushNotificationConfig/set",
                              {"taskId": task["id"], "pushNotificationConfig": config}),
                         "SetTaskPushNotificationConfigResponse"))
    assert created["taskId"] == task["id"]
    assert created["pushNotificationConfig"]["id"] == "cfg-1"
    assert created["pushNotificationConfig"]["authentication"]["schemes"] == ["Bearer"]
    second = result(call(client, "tasks/pushNotificationConfig/set", {
        "taskId": task["id"], "pushNotificationConfig": {"url": "https://client.example.com/2"}}))
    second_id = second["pushNotificationConfig"]["id"]
    assert second_id and second_id != "cfg-1"

    by_id = result(v03(call(client, "tasks/pushNotificationConfig/get",
                            {"id": task["id"], "pushNotificationConfigId": "cfg-1"}),
                       "GetTaskPushNotificationConfigResponse"))
    assert by_id["pushNotificationConfig"]["url"] == "https://client.example.com/hook"
    assert by_id["pushNotificationConfig"]["token"] != "tok-1"  # masked
    without_id = result(v03(call(client, "tasks/pushNotificationConfig/get", {"id": task["id"]}),
                            "GetTaskPushNotificationConfigResponse"))
    assert without_id["taskId"] == task["id"] and without_id["pushNotificationConfig"]["url"]

    listed = result(v03(call(client, "tasks/pushNotificationConfig/list", {"id": task["id"]}),
                        "ListTaskPushNotificationConfigResponse"))
    assert sorted(c["pushNotificationConfig"]["id"] for c in listed) == sorted(["cfg-1", second_id])

    deleted = v03(call(client, "tasks/pushNotificationConfig/delete",
                       {"id": task["id"], "pushNotificationConfigId": "cfg-1"}),
                  "DeleteTaskPushNotificationConfigResponse")
    assert deleted["result"] is None
    listed = result(call(client, "tasks/pushNotificationConfig/list", {"id": task["id"]}))
    assert [c["pushNotificationConfig"]["id"] for c in listed] == [second_id]
    error(call(client, "tasks/pushNotificationConfig/get",
               {"id": task["id"], "pushNotificationConfigId": "cfg-1"}), -32001)


def test_v03_push_config_in_message_send_configuration_is_registered(push_client):
    task = task03(push_client, "hello", {"pushNotificationConfig": {
        "url": "https://client.example.com/hook", "authentication": {"schemes": ["Bearer"]}}})
    listed = result(call(push_client, "tasks/pushNotificationConfig/list", {"id": task["id"]}))
    assert [c["pushNotificationConfig"]["url"] for c in listed] == ["https://client.example.com/hook"]


def test_v03_push_config_methods_without_push_capability_are_32003(client):
    task = task03(client, "hello")
    calls = [
        ("tasks/pushNotificationConfig/set",
         {"taskId": task["id"], "pushNotificationConfig": {"url": "https://c.example.com/h"}},
         "SetTaskPushNotificationConfigResponse"),
        ("tasks/pushNotificationConfig/get", {"id": task["id"], "pushNotificationConfigId": "x"},
         "GetTaskPushNotificationConfigResponse"),
        ("tasks/pushNotificationConfig/list", {"id": task["id"]},
         "ListTaskPushNotificationConfigResponse"),
        ("tasks/pushNotificationConfig/delete", {"id": task["id"], "pushNotificationConfigId": "x"},
         "DeleteTaskPushNotificationConfigResponse"),
    ]
    for method, params, definition in calls:
        err = error(v03(call(client, method, params), definition), -32003)
        assert reason(err) == "PUSH_NOTIFICATION_NOT_SUPPORTED", method
    body = send03(client, "hello", {"pushNotificationConfig": {"url": "https://c.example.com/h"}})
    error(body, -32003)


# ================================================================== 0.3: extended card


@contextlib.contextmanager
def extended_app(store_url: str, **kwargs: Any) -> Iterator[Any]:
    app = Flask("extended")
    A2A(app, card=make_card(**kwargs.pop("card", {})), executor=lab, store=store_url, **kwargs)
    try:
        yield app.test_client()
    finally:
        close_app(app)


def close_app(app: Flask) -> None:
    """Stop what the agent runs in the background and close its store."""
    state = app.extensions["a2a"]["a2a"]
    getattr(state, "close", state.store.close)()


def test_v03_get_authenticated_extended_card(store_url):
    extended = make_card(name="Extended agent", description="More skills for members")
    with extended_app(store_url, extended_card=extended, auth=bearer_auth(),
                      auth_required=False) as client:
        public = client.get("/.well-known/agent-card.json").get_json()
        assert public["supportsAuthenticatedExtendedCard"] is True
        assert public["security"] == [{"bearer": []}]
        assert public["securitySchemes"]["bearer"]["type"] == "http"
        denied = post(client, "agent/getAuthenticatedExtendedCard")
        assert denied.status_code == 401 and denied.json()["error"]["code"] == -32040
        body = v03(call(client, "agent/getAuthenticatedExtendedCard", headers=ALICE),
                   "GetAuthenticatedExtendedCardResponse", v02=False)
        card = result(body)
        assert card["name"] == "Extended agent"
        assert card["protocolVersion"] == "0.3.0" and card["url"].endswith("/a2a")
        validate(card_v1_view(card), "Agent Card")


def test_v03_extended_card_not_declared_or_not_configured(store_url):
    with extended_app(store_url) as client:
        err = error(v03(call(client, "agent/getAuthenticatedExtendedCard"),
                        "GetAuthenticatedExtendedCardResponse", v02=False), -32004)
        assert reason(err) == "UNSUPPORTED_OPERATION"
    declared = {"capabilities": AgentCapabilities(streaming=True, extended_agent_card=True)}
    with extended_app(store_url, card=declared) as client:
        err = error(call(client, "agent/getAuthenticatedExtendedCard"), -32007)
        assert reason(err) == "EXTENDED_AGENT_CARD_NOT_CONFIGURED"


# ================================================================== shared names


def test_shared_names_answer_in_the_dialect_the_task_was_created_in(client):
    old = result(send01(client, new_id(), "hello", sessionId="s-9"))
    new = task03(client, "hello")
    for version in (None, "0.3", "0.2"):
        got_old = result(v01(call(client, "tasks/get", {"id": old["id"]}, version=version),
                             "GetTaskResponse"))
        assert "kind" not in got_old and got_old["sessionId"] == "s-9"
        assert got_old["artifacts"][0]["parts"][0]["type"] == "text"
        got_new = result(v03(call(client, "tasks/get", {"id": new["id"]}, version=version),
                             "GetTaskResponse"))
        assert got_new["kind"] == "task" and "sessionId" not in got_new
        assert got_new["artifacts"][0]["parts"][0]["kind"] == "text"


def test_shared_cancel_answers_in_the_dialect_of_the_task(client):
    with gate() as key_old, gate() as key_new:
        old_id = new_id()
        response = post(client, "tasks/sendSubscribe",
                        {"id": old_id, "message": msg01(f"gate {key_old}")}, stream=True)
        new = task03(client, f"gate {key_new}", {"blocking": False})
        wait_state(client, old_id, {"working"})
        wait_state(client, new["id"], {"working"})
        old_canceled = result(v01(call(client, "tasks/cancel", {"id": old_id}), "CancelTaskResponse"))
        new_canceled = result(v03(call(client, "tasks/cancel", {"id": new["id"]}),
                                  "CancelTaskResponse"))
        read_sse(response)
    assert "kind" not in old_canceled and old_canceled["status"]["state"] == "canceled"
    assert new_canceled["kind"] == "task" and new_canceled["status"]["state"] == "canceled"


# ================================================================== negotiation (docs/protocol.rst table)


def send_1_0_params() -> Dict[str, Any]:
    return {"message": {"messageId": "m-" + uuid.uuid4().hex[:8], "role": "ROLE_USER",
                        "parts": [{"text": "hi"}]}}


def served_as(body: Dict[str, Any]) -> str:
    """Which generation shaped a send result: "1.0", "0.3" or "0.1"."""
    res = result(body)
    if "task" in res:
        validate(res, "Send Message Response")
        return "1.0"
    if res.get("kind") == "task":
        return "0.3"
    assert "sessionId" in res, res
    return "0.1"


def version_error(body: Dict[str, Any]) -> Dict[str, Any]:
    err = error(body, -32009)
    assert reason(err) == "VERSION_NOT_SUPPORTED"
    return err


ROWS = [
    # (A2A-Version, method, expected: a generation or an error code)
    ("1.0", "SendMessage", "1.0"),
    ("1.0.1", "SendMessage", "1.0"),
    ("1.0", "message/send", -32009),
    ("1.0", "tasks/send", -32009),
    (None, "message/send", "0.3"),
    ("0.3", "message/send", "0.3"),
    ("0.2", "message/send", "0.3"),
    ("", "message/send", "0.3"),
    (None, "tasks/send", "0.1"),
    ("0.3", "tasks/send", "0.1"),
    ("0.2", "tasks/send", "0.1"),
    (None, "SendMessage", -32009),
    ("0.3", "SendMessage", -32009),
    ("0.5", "message/send", -32009),
    ("2.0", "SendMessage", -32009),
    ("banana", "tasks/send", -32009),
    ("1.0", "NoSuchMethod", -32601),
    ("0.3", "tasks/nosuch", -32601),
    (None, "tasks/nosuch", -32601),
]


@pytest.mark.parametrize("version,method,expected", ROWS,
                         ids=[f"{v!r}-{m}" for v, m, _ in ROWS])
def test_negotiation_table_row(make_app, version, method, expected):
    client = make_app(lab).test_client()
    params = {"SendMessage": send_1_0_params(), "message/send": {"message": msg03("hi")},
              "tasks/send": {"id": new_id(), "message": msg01("hi")}}.get(method, {"id": "x"})
    body = call(client, method, params, version=version)
    if isinstance(expected, str):
        assert served_as(body) == expected
        return
    err = error(body, expected)
    if expected == -32009:
        version_error(body)
        metadata = err["data"][0]["metadata"]
        assert set(metadata["supportedVersions"].split(", ")) == {"1.0", "0.3"}
        if method in ("message/send", "tasks/send") and version == "1.0":
            assert "A2A-Version: 0.3" in err["message"]
        if method == "SendMessage" and version in (None, "0.3"):
            assert "A2A-Version: 1.0" in err["message"]


def test_negotiation_query_parameter_names_the_version(make_app):
    client = make_app(lab).test_client()
    body = call(client, "SendMessage", send_1_0_params(), query={"A2A-Version": "1.0"})
    assert served_as(body) == "1.0"
    body = call(client, "message/send", {"message": msg03("hi")}, query={"A2A-Version": "0.3"})
    assert served_as(body) == "0.3"


@pytest.mark.parametrize("version", [None, "0.3", "0.2"])
def test_negotiation_shared_names_follow_the_task(make_app, version):
    client = make_app(lab).test_client()
    old = result(send01(client, new_id(), "hello"))
    new = task03(client, "hello")
    assert "sessionId" in result(call(client, "tasks/get", {"id": old["id"]}, version=version))
    assert result(call(client, "tasks/get", {"id": new["id"]}, version=version))["kind"] == "task"
    # With 1.0, the 0.x names are refused whatever the task.
    version_error(call(client, "tasks/get", {"id": old["id"]}, version="1.0"))


def test_negotiation_lenient_version_serves_1_0_names_without_header(make_app):
    client = make_app(lab, lenient_version=True).test_client()
    assert served_as(call(client, "SendMessage", send_1_0_params())) == "1.0"
    assert served_as(call(client, "message/send", {"message": msg03("hi")})) == "0.3"
    assert served_as(call(client, "tasks/send", {"id": new_id(), "message": msg01("hi")})) == "0.1"
    # Only a missing header is lenient: an explicit 0.3 with a 1.0 name is still refused.
    version_error(call(client, "SendMessage", send_1_0_params(), version="0.3"))
    strict = make_app(lab).test_client()
    version_error(call(strict, "SendMessage", send_1_0_params()))


# ================================================================== the card


BEARER = {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT",
                                     "description": "A JWT from the IdP"}}
API_KEY = {"apiKeySecurityScheme": {"location": "header", "name": "X-API-Key"}}
V01_CARD_MEMBERS = ("name", "description", "url", "provider", "version", "documentationUrl",
                    "capabilities", "authentication", "defaultInputModes", "defaultOutputModes",
                    "skills")


def secured_card(**overrides: Any):
    return make_card(
        security_schemes={"bearer": BEARER, "key": API_KEY},
        security_requirements=[SecurityRequirement(schemes={"bearer": StringList(list=["read"])}),
                               SecurityRequirement(schemes={"key": StringList()})],
        **overrides)


def test_card_is_one_document_at_both_well_known_paths(make_app):
    client = make_app(lab, card=secured_card()).test_client()
    bodies = {path: client.get(path) for path in (
        "/.well-known/agent-card.json", "/.well-known/agent.json",
        "/a2a/.well-known/agent-card.json", "/a2a/.well-known/agent.json")}
    for path, response in bodies.items():
        assert response.status_code == 200 and response.mimetype == "application/json", path
    assert len({r.get_data() for r in bodies.values()}) == 1


def test_card_validates_against_the_1_0_0_3_and_0_1_schemas(make_app):
    client = make_app(lab, card=secured_card()).test_client()
    card = client.get("/.well-known/agent-card.json").get_json()
    validate(card_v1_view(card), "Agent Card")
    validate(card, "AgentCard", "v0.3")
    validate({k: card[k] for k in V01_CARD_MEMBERS if k in card}, "AgentCard", "v0.1")
    validate(card, "AgentCard", "v0.1")


def test_card_0_3_members_come_from_the_0_3_interfaces(make_app):
    client = make_app(lab).test_client()
    card = client.get("/.well-known/agent-card.json").get_json()
    legacy = [i for i in card["supportedInterfaces"] if i["protocolVersion"] == "0.3"]
    assert [i["protocolBinding"] for i in legacy] == ["JSONRPC", "HTTP+JSON"]
    assert card["protocolVersion"] == "0.3.0"
    assert card["url"] == legacy[0]["url"] == "http://localhost/a2a"
    assert card["preferredTransport"] == "JSONRPC"
    assert card["additionalInterfaces"] == [{"url": i["url"], "transport": i["protocolBinding"]}
                                            for i in legacy]
    assert card["supportsAuthenticatedExtendedCard"] is False
    # 1.0 is preferred (first) among the interfaces.
    assert card["supportedInterfaces"][0]["protocolVersion"] == "1.0"


def test_card_without_a_0_3_interface_has_no_0_3_members(make_app):
    interfaces = [AgentInterface(url="https://agent.example.com/a2a", protocol_binding="JSONRPC",
                                 protocol_version="1.0")]
    client = make_app(lab, card=make_card(supported_interfaces=interfaces)).test_client()
    card = client.get("/.well-known/agent-card.json").get_json()
    assert not {"protocolVersion", "url", "preferredTransport", "additionalInterfaces"} & set(card)
    validate(card, "Agent Card")


def test_card_security_schemes_carry_both_shapes_and_security_from_requirements(make_app):
    client = make_app(lab, card=secured_card()).test_client()
    card = client.get("/.well-known/agent-card.json").get_json()
    bearer, key = card["securitySchemes"]["bearer"], card["securitySchemes"]["key"]
    assert bearer["httpAuthSecurityScheme"] == BEARER["httpAuthSecurityScheme"]
    assert (bearer["type"], bearer["scheme"], bearer["bearerFormat"]) == ("http", "Bearer", "JWT")
    assert bearer["description"] == "A JWT from the IdP"
    assert key["apiKeySecurityScheme"] == API_KEY["apiKeySecurityScheme"]
    assert (key["type"], key["in"], key["name"]) == ("apiKey", "header", "X-API-Key")
    assert card["security"] == [{"bearer": ["read"]}, {"key": []}]
    assert card["securityRequirements"] == [{"schemes": {"bearer": {"list": ["read"]}}},
                                            {"schemes": {"key": {}}}]
    assert set(card["authentication"]["schemes"]) == {"Bearer", "apiKey"}
    validate(bearer, "HTTPAuthSecurityScheme", "v0.3")
    validate(key, "APIKeySecurityScheme", "v0.3")


# ================================================================== tenants


def v1_call(client, method: str, params: Dict[str, Any]) -> Dict[str, Any]:
    return call(client, method, params, version="1.0")


def test_params_tenant_scopes_tasks(client):
    sent = v1_call(client, "SendMessage", {"tenant": "acme", **send_1_0_params()})
    task = result(sent)["task"]
    own = result(v1_call(client, "GetTask", {"tenant": "acme", "id": task["id"]}))
    assert own["id"] == task["id"]
    for tenant in ("other", None):
        scope = {"tenant": tenant} if tenant else {}
        for method in ("GetTask", "CancelTask"):
            error(v1_call(client, method, {**scope, "id": task["id"]}), -32001)
        error(v1_call(client, "SubscribeToTask", {**scope, "id": task["id"]}), -32001)
        follow = send_1_0_params()
        follow["message"]["taskId"] = task["id"]
        error(v1_call(client, "SendMessage", {**scope, **follow}), -32001)
        listed = result(v1_call(client, "ListTasks", scope))
        assert task["id"] not in [t["id"] for t in listed["tasks"]]
    listed = result(v1_call(client, "ListTasks", {"tenant": "acme"}))
    assert [t["id"] for t in listed["tasks"]] == [task["id"]]
    # 0.3 has no tenants: a 0.3 client sees only the default tenant.
    error(call(client, "tasks/get", {"id": task["id"]}), -32001)
    error(call(client, "tasks/cancel", {"id": task["id"]}), -32001)


def test_params_tenant_scopes_a_live_task_for_cancel_and_subscribe(client):
    with gate() as key:
        params = {"tenant": "acme", **send_1_0_params(), "configuration": {"returnImmediately": True}}
        params["message"]["parts"] = [{"text": f"gate {key}"}]
        task = result(v1_call(client, "SendMessage", params))["task"]
        error(v1_call(client, "SubscribeToTask", {"tenant": "other", "id": task["id"]}), -32001)
        error(v1_call(client, "CancelTask", {"tenant": "other", "id": task["id"]}), -32001)
        canceled = result(v1_call(client, "CancelTask", {"tenant": "acme", "id": task["id"]}))
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
