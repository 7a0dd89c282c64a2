"""The A2A 1.0 operations through the JSON-RPC endpoint (Flask test client), on every store backend."""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Dict, List, Optional

import pytest

from a2a_flask import AgentCapabilities
from a2a_flask.protocol.models import Role, Task, TaskState, TaskStatus, utc_now
from a2a_flask.stores.base import TaskRecord

from tests.conftest import make_card
from tests.support import wire
from tests.support.helpers import rpc_body, user_message, validate
from tests.support.tasks import (
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    REJECTED,
    SUBMITTED,
    TERMINAL,
    WORKING,
    get_task,
    wait_for_state,
)
from tests.support.wire import rpc

PUSH_CARD = dict(capabilities=AgentCapabilities(streaming=True, push_notifications=True))


# ----------------------------------------------------------------- helpers


def ok(body: Dict[str, Any], definition: Optional[str] = None) -> Any:
    """The result of a successful response, validated against the schema definition."""
    assert "error" not in body, body
    assert body["jsonrpc"] == "2.0"
    result = body["result"]
    if definition is not None:
        validate(result, definition)
    return result


def error(body: Dict[str, Any], code: int) -> Dict[str, Any]:
    assert "result" not in body, body
    assert body["error"]["code"] == code, body["error"]
    return body["error"]


def send_params(message: Dict[str, Any], configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    params: Dict[str, Any] = {"message": message}
    if configuration is not None:
        params["configuration"] = configuration
    return params


def send(client, message: Dict[str, Any], configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    return rpc(client, "SendMessage", send_params(message, configuration))


def send_task(client, message: Dict[str, Any], configuration: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """SendMessage that must answer with a Task; the Task, schema-validated."""
    result = ok(send(client, message, configuration), "Send Message Response")
    assert list(result) == ["task"], result
    validate(result["task"], "Task")
    return result["task"]


def list_tasks(client, **params: Any) -> Dict[str, Any]:
    return ok(rpc(client, "ListTasks", params), "List Tasks Response")


def sse_response(client, method: str, params: Any, headers: Optional[dict] = None):
    """Post a streaming request; the body is not read yet (the view has run)."""
    return wire.post(client, method, params, headers=headers, stream=True)


def read_events(response) -> List[Dict[str, Any]]:
    """Every SSE event of a stream response, each checked and schema-validated."""
    events = wire.sse(response)
    for event in events:
        assert "id" in event, event
        assert event.get("event") != "error", event
        data = event["data"]
        assert data["jsonrpc"] == "2.0" and data["id"] == 1
        validate(ok(data), "Stream Response")
    return events


def sse(client, method: str, params: Any, headers: Optional[dict] = None) -> List[Dict[str, Any]]:
    return read_events(sse_response(client, method, params, headers))


def results(events: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    return [e["data"]["result"] for e in events]


def kind(result: Dict[str, Any]) -> str:
    (key,) = result.keys()
    return key


def plain_json_error(client, method: str, params: Any, code: int) -> Dict[str, Any]:
    """A streaming method that must fail before the stream: a plain JSON-RPC error."""
    return error(rpc(client, method, params), code)


# ----------------------------------------------------------------- executors


def echo(ctx):
    return ctx.text


def slow(ctx):
    time.sleep(0.3)
    return "slow result"


def slow_ask(ctx):
    time.sleep(0.3)
    ctx.ask("and then?")


def replier(ctx):
    ctx.reply("pong: " + ctx.text)


def failer(ctx):
    ctx.fail("cannot do that")


def rejecter(ctx):
    ctx.reject("will not do that")


def make_asker(questions: int, seen: Optional[list] = None) -> Callable:
    """Asks ``questions`` times (one per user message), then completes with the last text."""

    def asker(ctx):
        if seen is not None:
            seen.append((ctx.follow_up, ctx.task.status.state if ctx.task else None, ctx.text))
        turn = sum(1 for m in ctx.history if m.role is Role.USER)
        if turn <= questions:
            ctx.ask(f"question {turn}")
            return None
        return "answered: " + ctx.text

    return asker


class Gate:
    """An executor that reports WORKING, waits for the test, then finishes."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.exited = threading.Event()

    def __call__(self, ctx):
        try:
            ctx.working("started")
            assert self.release.wait(5), "the test never released the gate"
            ctx.artifact("gated result", name="out")
            ctx.working("almost")
            return None
        finally:
            self.exited.set()


def start_gated(client) -> Dict[str, Any]:
    task = send_task(client, user_message("go"), {"returnImmediately": True})
    return wait_for_state(client, task["id"], {WORKING})


# ================================================================ SendMessage


def test_send_message_returns_wrapped_task_with_server_generated_ids(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    first = send_task(client, user_message("one", "m-1"))
    second = send_task(client, user_message("two", "m-2"))
    for task in (first, second):
        assert task["id"] and task["id"] not in ("m-1", "m-2")
        assert task["contextId"]
        assert task["status"]["state"] == COMPLETED
        assert task["status"]["timestamp"].endswith("Z")
        assert [m["role"] for m in task["history"]] == ["ROLE_USER"]
    assert first["id"] != second["id"]
    assert first["contextId"] != second["contextId"]
    assert first["history"][0]["contextId"] == first["contextId"]
    assert first["history"][0]["taskId"] == first["id"]


def test_send_message_keeps_client_context_id(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    task = send_task(client, user_message("hi", contextId="ctx-from-client"))
    assert task["contextId"] == "ctx-from-client"
    assert get_task(client, task["id"])["contextId"] == "ctx-from-client"


def test_send_message_unknown_task_id_is_task_not_found(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    error(send(client, user_message("hi", taskId="no-such-task")), -32001)
    assert list_tasks(client)["totalSize"] == 0


def test_send_message_task_id_with_other_context_id_is_invalid_params(make_app, store_url):
    client = make_app(make_asker(1), store=store_url).test_client()
    task = send_task(client, user_message("start"))
    assert task["status"]["state"] == INPUT_REQUIRED
    err = error(send(client, user_message("more", "m-2", taskId=task["id"], contextId="other")), -32602)
    assert err["data"][0]["reason"] == "INVALID_PARAMS"
    after = get_task(client, task["id"])
    assert after["status"]["state"] == INPUT_REQUIRED
    assert len(after["history"]) == len(task["history"])


def test_send_message_with_only_task_id_infers_context_id(make_app, store_url):
    client = make_app(make_asker(1), store=store_url).test_client()
    task = send_task(client, user_message("start"))
    follow = send_task(client, user_message("answer", "m-2", taskId=task["id"]))
    assert follow["id"] == task["id"]
    assert follow["contextId"] == task["contextId"]
    assert follow["status"]["state"] == COMPLETED
    answer = [m for m in follow["history"] if m["messageId"] == "m-2"]
    assert answer and answer[0]["contextId"] == task["contextId"]
    assert answer[0]["taskId"] == task["id"]


@pytest.mark.parametrize("executor, state", [(echo, COMPLETED), (failer, FAILED),
                                             (rejecter, REJECTED)])
def test_send_message_to_terminal_task_is_unsupported_operation(make_app, store_url, executor, state):
    client = make_app(executor, store=store_url).test_client()
    task = send_task(client, user_message("first"))
    assert task["status"]["state"] == state
    err = error(send(client, user_message("again", "m-2", taskId=task["id"])), -32004)
    assert err["data"][0]["reason"] == "UNSUPPORTED_OPERATION"
    after = get_task(client, task["id"])
    assert after["status"] == task["status"]
    assert len(after["history"]) == len(task["history"])


def test_send_message_to_canceled_task_is_unsupported_operation(make_app, store_url):
    gate = Gate()
    client = make_app(gate, store=store_url).test_client()
    try:
        task = start_gated(client)
        ok(rpc(client, "CancelTask", {"id": task["id"]}), "Task")
        error(send(client, user_message("again", "m-2", taskId=task["id"])), -32004)
    finally:
        gate.release.set()


def test_blocking_send_waits_for_a_terminal_state(make_app, store_url):
    client = make_app(slow, store=store_url).test_client()
    started = time.monotonic()
    task = send_task(client, user_message("work"))
    assert time.monotonic() - started >= 0.25
    assert task["status"]["state"] == COMPLETED
    assert task["artifacts"][0]["parts"] == [{"text": "slow result"}]


def test_blocking_send_returns_at_an_interrupted_state(make_app, store_url):
    client = make_app(slow_ask, store=store_url).test_client()
    started = time.monotonic()
    task = send_task(client, user_message("work"))
    assert time.monotonic() - started >= 0.25
    assert task["status"]["state"] == INPUT_REQUIRED
    assert task["status"]["message"]["parts"] == [{"text": "and then?"}]


def test_return_immediately_answers_before_the_task_finishes(make_app, store_url):
    gate = Gate()  # the executor cannot finish before the answer: it waits for the test
    client = make_app(gate, store=store_url).test_client()
    try:
        task = send_task(client, user_message("work"), {"returnImmediately": True})
        assert not gate.exited.is_set()
        assert task["status"]["state"] in {SUBMITTED, WORKING}
    finally:
        gate.release.set()
    done = wait_for_state(client, task["id"], TERMINAL)
    assert done["status"]["state"] == COMPLETED
    assert done["artifacts"][0]["parts"] == [{"text": "gated result"}]


def test_blocking_send_gives_up_after_the_blocking_timeout(make_app, store_url):
    gate = Gate()  # the work ends only once the test has its answer, however slow
    client = make_app(gate, store=store_url, blocking_timeout=0.1).test_client()
    try:
        task = send_task(client, user_message("work"))
        assert not gate.exited.is_set()
        assert task["status"]["state"] in {SUBMITTED, WORKING}
    finally:
        gate.release.set()
    assert wait_for_state(client, task["id"], TERMINAL)["status"]["state"] == COMPLETED


def test_input_required_continuation_resumes_working_and_completes(make_app, store_url):
    seen: list = []
    client = make_app(make_asker(2, seen), store=store_url).test_client()
    # The client reuses one messageId for every turn: each one still counts.
    task = send_task(client, user_message("one", "same"))
    assert task["status"]["state"] == INPUT_REQUIRED
    task = send_task(client, user_message("two", "same", taskId=task["id"]))
    assert task["status"]["state"] == INPUT_REQUIRED
    task = send_task(client, user_message("three", "same", taskId=task["id"]))
    assert task["status"]["state"] == COMPLETED
    assert task["artifacts"][-1]["parts"] == [{"text": "answered: three"}]
    # Every continuation ran with the task back in WORKING.
    assert [s[0] for s in seen] == [False, True, True]
    assert [s[1] for s in seen[1:]] == [TaskState.WORKING, TaskState.WORKING]
    history = get_task(client, task["id"])["history"]
    user = [m for m in history if m["role"] == "ROLE_USER"]
    assert [m["parts"][0]["text"] for m in user] == ["one", "two", "three"]
    assert {m["messageId"] for m in user} == {"same"}
    agent = [m["parts"][0]["text"] for m in history if m["role"] == "ROLE_AGENT"]
    assert agent == ["question 1", "question 2"]


def test_history_is_chronological_across_input_required_turns(make_app, store_url):
    client = make_app(make_asker(2), store=store_url).test_client()
    task = send_task(client, user_message("one", "m-1"))
    send_task(client, user_message("two", "m-2", taskId=task["id"]))
    send_task(client, user_message("three", "m-3", taskId=task["id"]))
    history = get_task(client, task["id"])["history"]
    assert [m["parts"][0]["text"] for m in history] == [
        "one", "question 1", "two", "question 2", "three"]


def test_send_history_length_zero_omits_history(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    task = send_task(client, user_message("hi"), {"historyLength": 0})
    assert "history" not in task
    assert "history" in get_task(client, task["id"])


def test_send_history_length_keeps_the_newest_messages(make_app, store_url):
    client = make_app(make_asker(2), store=store_url).test_client()
    task = send_task(client, user_message("one", "m-1"))
    send_task(client, user_message("two", "m-2", taskId=task["id"]))
    last = send_task(client, user_message("three", "m-3", taskId=task["id"]), {"historyLength": 2})
    full = get_task(client, task["id"])["history"]
    assert len(full) > 2
    assert last["history"] == full[-2:]
    one = send_task(client, user_message("x", "m-4"), {"historyLength": 1})
    assert len(one["history"]) == 1


def test_send_negative_history_length_is_invalid_params(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    error(send(client, user_message("hi"), {"historyLength": -1}), -32602)
    assert list_tasks(client)["totalSize"] == 0


def test_agent_reply_is_a_message_and_creates_no_task(make_app, store_url):
    client = make_app(replier, store=store_url).test_client()
    result = ok(send(client, user_message("ping")), "Send Message Response")
    assert list(result) == ["message"]
    message = result["message"]
    validate(message, "Message")
    assert message["role"] == "ROLE_AGENT"
    assert message["parts"] == [{"text": "pong: ping"}]
    assert message["contextId"]
    assert "taskId" not in message
    kept = ok(send(client, user_message("ping", "m-2", contextId="my-context")),
              "Send Message Response")["message"]
    assert kept["contextId"] == "my-context"
    assert list_tasks(client) == {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}


def test_return_immediately_with_a_replying_agent_never_leaves_a_stuck_task(
        make_app, store_url, monkeypatch):
    from a2a_flask.engine.runtime import Runtime

    original = Runtime.start_new

    def start_new(self, *args, **kwargs):
        run = original(self, *args, **kwargs)
        run.finished.wait(2)  # the executor wins the race and replies first
        return run

    monkeypatch.setattr(Runtime, "start_new", start_new)
    client = make_app(replier, store=store_url).test_client()
    result = ok(send(client, user_message("ping"), {"returnImmediately": True}),
                "Send Message Response")
    if "task" in result:  # then the task must carry the reply and finish
        task = wait_for_state(client, result["task"]["id"], TERMINAL)
        assert task["status"]["message"]["parts"] == [{"text": "pong: ping"}]


def test_agent_role_message_from_client_is_invalid_params(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    error(send(client, user_message("hi", role="ROLE_AGENT")), -32602)
    assert list_tasks(client)["totalSize"] == 0


def test_unsupported_part_media_type_is_content_type_not_supported(make_app, store_url):
    card = make_card(default_input_modes=["text/plain"])
    client = make_app(echo, card=card, store=store_url).test_client()
    message = user_message("look")
    message["parts"].append({"url": "https://example.com/cat.png", "mediaType": "image/png"})
    err = error(send(client, message), -32005)
    assert err["data"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    assert list_tasks(client)["totalSize"] == 0
    # An accepted media type goes through.
    fine = user_message("plain")
    fine["parts"][0]["mediaType"] = "text/plain"
    assert send_task(client, fine)["status"]["state"] == COMPLETED


def test_push_config_in_send_without_push_capability_is_rejected(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    config = {"taskPushNotificationConfig": {"url": "https://example.com/hook"}}
    error(send(client, user_message("hi"), config), -32003)
    assert list_tasks(client)["totalSize"] == 0


def test_push_config_in_send_is_registered_when_push_is_supported(make_app, store_url):
    client = make_app(echo, card=make_card(**PUSH_CARD), store=store_url).test_client()
    config = {"taskPushNotificationConfig": {"url": "https://example.com/hook", "id": "cfg-1"}}
    task = send_task(client, user_message("hi"), config)
    listed = ok(rpc(client, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
                "List Task Push Notification Configs Response")
    assert [(c["id"], c["taskId"], c["url"]) for c in listed["configs"]] == [
        ("cfg-1", task["id"], "https://example.com/hook")]


def test_tasks_are_only_visible_in_their_tenant(make_app, store_url):
    client = make_app(make_asker(1), store=store_url).test_client()
    task = send_task(client, user_message("hi"))
    scoped = ok(rpc(client, "SendMessage", {"message": user_message("hi"), "tenant": "acme"}),
                "Send Message Response")["task"]
    assert ok(rpc(client, "GetTask", {"id": scoped["id"], "tenant": "acme"}), "Task")["id"] == scoped["id"]
    error(rpc(client, "GetTask", {"id": scoped["id"]}), -32001)
    error(rpc(client, "GetTask", {"id": task["id"], "tenant": "acme"}), -32001)
    error(rpc(client, "CancelTask", {"id": scoped["id"]}), -32001)
    error(send(client, user_message("more", "m-2", taskId=scoped["id"])), -32001)
    assert [t["id"] for t in list_tasks(client)["tasks"]] == [task["id"]]
    assert [t["id"] for t in list_tasks(client, tenant="acme")["tasks"]] == [scoped["id"]]


# ================================================================ SendStreamingMessage


def progress(ctx):
    ctx.working("thinking")
    ctx.artifact("piece one", artifact_id="art-1")
    ctx.artifact(" piece two", artifact_id="art-1", append=True, last_chunk=True)
    return None


def test_stream_starts_with_the_task_and_closes_at_completed(make_app, store_url):
    client = make_app(progress, store=store_url).test_client()
    events = sse(client, "SendStreamingMessage", {"message": user_message("go")})
    items = results(events)
    assert kind(items[0]) == "task"
    task = items[0]["task"]
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(set(ids))
    assert [kind(i) for i in items[1:]] == ["statusUpdate", "artifactUpdate", "artifactUpdate",
                                            "statusUpdate"]
    for item in items[1:]:
        update = next(iter(item.values()))
        assert update["taskId"] == task["id"] and update["contextId"] == task["contextId"]
        assert "final" not in update and "kind" not in update
    assert items[-1]["statusUpdate"]["status"]["state"] == COMPLETED
    assert items[2]["artifactUpdate"].get("append", False) is False
    assert items[3]["artifactUpdate"]["append"] is True
    assert items[3]["artifactUpdate"]["lastChunk"] is True
    assert get_task(client, task["id"])["status"]["state"] == COMPLETED


def test_stream_closes_at_input_required(make_app, store_url):
    client = make_app(make_asker(1), store=store_url).test_client()
    items = results(sse(client, "SendStreamingMessage", {"message": user_message("go")}))
    assert kind(items[0]) == "task"
    assert items[-1]["statusUpdate"]["status"]["state"] == INPUT_REQUIRED
    task_id = items[0]["task"]["id"]
    assert get_task(client, task_id)["status"]["state"] == INPUT_REQUIRED
    # The continuation streams too: the Task first, then to the end.
    more = results(sse(client, "SendStreamingMessage",
                       {"message": user_message("answer", "m-2", taskId=task_id)}))
    assert kind(more[0]) == "task" and more[0]["task"]["id"] == task_id
    assert more[0]["task"]["status"]["state"] == WORKING
    assert more[-1]["statusUpdate"]["status"]["state"] == COMPLETED


def chunk_streamer(ctx):
    ctx.working("streaming")
    for index in range(20):
        ctx.artifact(f"chunk {index} ", artifact_id="out", append=index > 0,
                     last_chunk=index == 19)
    return None


@pytest.mark.parametrize("store_url", ["shelve", "sqlite", "redis"], indirect=True)
def test_a_stream_in_1_0_sends_stored_chunks_without_decoding_them(make_app, store_url,
                                                                    monkeypatch):
    """A store that keeps each event as a StreamResponse's JSON text hands it out
    with the entry: a 1.0 stream sends a chunk's text as it is, never decoding
    it into objects and writing them back, and the text is a valid event."""
    from a2a_flask.stores.serial import StoredEntry

    decoded: List[bool] = []
    decode_event = StoredEntry.event.fget

    def counted(entry):
        decoded.append(entry.chunk)
        return decode_event(entry)

    monkeypatch.setattr(StoredEntry, "event", property(counted))
    client = make_app(chunk_streamer, store=store_url).test_client()
    items = results(sse(client, "SendStreamingMessage", {"message": user_message("go")}))
    chunks = [item["artifactUpdate"] for item in items if kind(item) == "artifactUpdate"]
    assert "".join(c["artifact"]["parts"][0]["text"] for c in chunks) == "".join(
        f"chunk {i} " for i in range(20))
    assert items[-1]["statusUpdate"]["status"]["state"] == COMPLETED
    assert decoded and True not in decoded  # statuses are looked at; no chunk was
    decoded.clear()
    # A 0.3 stream has to reshape each chunk, so it decodes them.
    body = rpc_body("message/stream", {"message": {
        "kind": "message", "messageId": "m-03", "role": "user",
        "parts": [{"kind": "text", "text": "go"}]}})
    response = client.post("/a2a", json=body, headers={"A2A-Version": "0.3"})
    assert response.status_code == 200 and response.get_data(as_text=True).count("chunk ") == 20
    assert decoded.count(True) >= 20


def test_message_only_stream_has_exactly_one_message_event(make_app, store_url):
    client = make_app(replier, store=store_url).test_client()
    events = sse(client, "SendStreamingMessage", {"message": user_message("ping")})
    assert len(events) == 1
    message = events[0]["data"]["result"]["message"]
    validate(message, "Message")
    assert message["parts"] == [{"text": "pong: ping"}]
    assert list_tasks(client)["totalSize"] == 0


def test_streaming_not_declared_is_a_plain_json_unsupported_operation(make_app, store_url):
    card = make_card(capabilities=AgentCapabilities(streaming=False))
    client = make_app(echo, card=card, store=store_url).test_client()
    plain_json_error(client, "SendStreamingMessage", {"message": user_message("go")}, -32004)
    assert list_tasks(client)["totalSize"] == 0
    task = send_task(client, user_message("go"))
    plain_json_error(client, "SubscribeToTask", {"id": task["id"]}, -32004)


# ================================================================ GetTask


def test_get_task_returns_the_bare_task(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    sent = send_task(client, user_message("hi"))
    task = get_task(client, sent["id"])
    assert "task" not in task
    assert task == sent


def test_get_unknown_task_is_task_not_found(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    err = error(rpc(client, "GetTask", {"id": "nope"}), -32001)
    assert err["data"][0]["reason"] == "TASK_NOT_FOUND"


def test_get_task_history_length(make_app, store_url):
    client = make_app(make_asker(1), store=store_url).test_client()
    task = send_task(client, user_message("one", "m-1"))
    send_task(client, user_message("two", "m-2", taskId=task["id"]))
    full = get_task(client, task["id"])["history"]
    assert len(full) == 3
    assert "history" not in get_task(client, task["id"], historyLength=0)
    assert get_task(client, task["id"], historyLength=1)["history"] == full[-1:]
    assert get_task(client, task["id"], historyLength=10)["history"] == full
    error(rpc(client, "GetTask", {"id": task["id"], "historyLength": -1}), -32602)


# ================================================================ ListTasks


def make_tasks(client, count: int, **message: Any) -> List[Dict[str, Any]]:
    return [send_task(client, user_message(f"task {i}", f"m-{i}", **message)) for i in range(count)]


def test_list_tasks_without_tasks_has_all_four_members(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    assert list_tasks(client) == {"tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}


def test_list_tasks_filters_by_context_id(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    mine = make_tasks(client, 2, contextId="ctx-a")
    make_tasks(client, 3, contextId="ctx-b")
    page = list_tasks(client, contextId="ctx-a")
    assert {t["id"] for t in page["tasks"]} == {t["id"] for t in mine}
    assert page["totalSize"] == 2
    assert list_tasks(client, contextId="ctx-none")["totalSize"] == 0


def test_list_tasks_filters_by_status(make_app, store_url):
    client = make_app(make_asker(1), store=store_url).test_client()
    waiting = send_task(client, user_message("one"))
    done = send_task(client, user_message("two"))
    send_task(client, user_message("answer", "m-2", taskId=done["id"]))
    page = list_tasks(client, status=INPUT_REQUIRED)
    assert [t["id"] for t in page["tasks"]] == [waiting["id"]]
    assert [t["id"] for t in list_tasks(client, status=COMPLETED)["tasks"]] == [done["id"]]
    assert list_tasks(client, status=FAILED)["totalSize"] == 0


def test_list_tasks_filters_by_status_timestamp_after(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    old = send_task(client, user_message("old"))
    time.sleep(0.02)
    cutoff = utc_now()
    time.sleep(0.02)
    new = send_task(client, user_message("new"))
    page = list_tasks(client, statusTimestampAfter=cutoff)
    assert [t["id"] for t in page["tasks"]] == [new["id"]]
    assert page["totalSize"] == 1
    everything = list_tasks(client, statusTimestampAfter=old["status"]["timestamp"])
    assert {t["id"] for t in everything["tasks"]} == {old["id"], new["id"]}
    error(rpc(client, "ListTasks", {"statusTimestampAfter": "yesterday"}), -32602)


def test_list_tasks_orders_by_status_timestamp_descending(make_app, store_url):
    client = make_app(make_asker(1), store=store_url).test_client()
    first = send_task(client, user_message("first"))
    time.sleep(0.01)
    second = send_task(client, user_message("second"))
    time.sleep(0.01)
    # Answering the first task updates its status last: it moves to the front.
    send_task(client, user_message("answer", "m-2", taskId=first["id"]))
    tasks = list_tasks(client)["tasks"]
    assert [t["id"] for t in tasks] == [first["id"], second["id"]]
    stamps = [t["status"]["timestamp"] for t in tasks]
    assert stamps == sorted(stamps, reverse=True)


def test_list_tasks_pages_are_disjoint_and_cover_every_task(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    created = {t["id"] for t in make_tasks(client, 5)}
    seen: List[str] = []
    token = ""
    sizes = []
    for _ in range(10):
        params: Dict[str, Any] = {"pageSize": 2}
        if token:
            params["pageToken"] = token
        page = list_tasks(client, **params)
        assert page["pageSize"] == 2 and page["totalSize"] == 5
        sizes.append(len(page["tasks"]))
        seen.extend(t["id"] for t in page["tasks"])
        token = page["nextPageToken"]
        if not token:
            break
    assert sizes == [2, 2, 1]
    assert len(seen) == len(set(seen)) == 5
    assert set(seen) == created
    whole = list_tasks(client)
    assert [t["id"] for t in whole["tasks"]] == seen


def test_list_tasks_default_page_size_is_50(make_app, store_url):
    app = make_app(echo, store=store_url)
    store = app.extensions["a2a"]["a2a"].store
    for i in range(55):
        task = Task(id=f"task-{i:02d}", context_id="ctx",
                    status=TaskStatus(state=TaskState.COMPLETED, timestamp=utc_now()))
        store.create(TaskRecord(task, 1), task)
    client = app.test_client()
    page = list_tasks(client)
    assert page["pageSize"] == 50 and page["totalSize"] == 55
    assert len(page["tasks"]) == 50 and page["nextPageToken"]
    rest = list_tasks(client, pageToken=page["nextPageToken"])
    assert len(rest["tasks"]) == 5 and rest["nextPageToken"] == ""
    assert len(list_tasks(client, pageSize=100)["tasks"]) == 55


@pytest.mark.parametrize("page_size", [0, 101, -1])
def test_list_tasks_page_size_out_of_range_is_invalid_params(make_app, store_url, page_size):
    client = make_app(echo, store=store_url).test_client()
    error(rpc(client, "ListTasks", {"pageSize": page_size}), -32602)


def test_list_tasks_bad_status_and_bad_page_token_are_invalid_params(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    make_tasks(client, 1)
    error(rpc(client, "ListTasks", {"status": "TASK_STATE_BOGUS"}), -32602)
    error(rpc(client, "ListTasks", {"pageToken": "not a token!"}), -32602)
    error(rpc(client, "ListTasks", {"pageToken": "bm90IGpzb24"}), -32602)  # base64 of "not json"
    error(rpc(client, "ListTasks", {"historyLength": -1}), -32602)


def test_list_tasks_include_artifacts(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    make_tasks(client, 2)
    for params in ({}, {"includeArtifacts": False}):
        tasks = list_tasks(client, **params)["tasks"]
        assert len(tasks) == 2 and all("artifacts" not in t for t in tasks)
    tasks = list_tasks(client, includeArtifacts=True)["tasks"]
    assert len(tasks) == 2 and all(t["artifacts"][0]["parts"][0]["text"].startswith("task ")
                                   for t in tasks)


def test_list_tasks_history_length_applies_to_each_task(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    make_tasks(client, 2)
    without = list_tasks(client, historyLength=0)["tasks"]
    assert len(without) == 2 and all("history" not in t for t in without)
    whole = list_tasks(client)["tasks"]
    assert len(whole) == 2 and all(len(t["history"]) == 1 for t in whole)


# ================================================================ push notification configs


PUSH_METHODS = [
    ("CreateTaskPushNotificationConfig", {"taskId": "t", "url": "https://example.com/hook"}),
    ("GetTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
    ("ListTaskPushNotificationConfigs", {"taskId": "t"}),
    ("DeleteTaskPushNotificationConfig", {"taskId": "t", "id": "c"}),
]


@pytest.mark.parametrize("method, params", PUSH_METHODS, ids=[m for m, _ in PUSH_METHODS])
def test_push_config_methods_need_the_push_capability(make_app, store_url, method, params):
    card = make_card(capabilities=AgentCapabilities(streaming=True, push_notifications=False))
    client = make_app(echo, card=card, store=store_url).test_client()
    task = send_task(client, user_message("hi"))
    err = error(rpc(client, method, {**params, "taskId": task["id"]}), -32003)
    assert err["data"][0]["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"


def test_push_config_create_get_list_delete(make_app, store_url):
    client = make_app(echo, card=make_card(**PUSH_CARD), store=store_url).test_client()
    task = send_task(client, user_message("hi"))
    created = ok(rpc(client, "CreateTaskPushNotificationConfig",
                     {"taskId": task["id"], "url": "https://example.com/hook"}),
                 "Task Push Notification Config")
    assert created["id"] and created["taskId"] == task["id"]
    assert created["url"] == "https://example.com/hook"
    second = ok(rpc(client, "CreateTaskPushNotificationConfig",
                    {"taskId": task["id"], "url": "https://example.com/other", "id": "mine"}),
                "Task Push Notification Config")
    assert second["id"] == "mine"
    got = ok(rpc(client, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": created["id"]}),
             "Task Push Notification Config")
    assert got == created
    listed = ok(rpc(client, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
                "List Task Push Notification Configs Response")
    assert [c["id"] for c in listed["configs"]] == [created["id"], "mine"]
    assert listed["nextPageToken"] == ""
    for config in listed["configs"]:
        validate(config, "Task Push Notification Config")
    for _ in range(2):  # idempotent
        assert ok(rpc(client, "DeleteTaskPushNotificationConfig",
                      {"taskId": task["id"], "id": created["id"]})) in ({}, None)
    error(rpc(client, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": created["id"]}),
          -32001)
    listed = ok(rpc(client, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
                "List Task Push Notification Configs Response")
    assert [c["id"] for c in listed["configs"]] == ["mine"]


def test_push_config_get_missing_config_is_task_not_found(make_app, store_url):
    client = make_app(echo, card=make_card(**PUSH_CARD), store=store_url).test_client()
    task = send_task(client, user_message("hi"))
    error(rpc(client, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": "missing"}), -32001)
    assert ok(rpc(client, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
              "List Task Push Notification Configs Response")["configs"] == []


def test_push_config_on_unknown_task_is_task_not_found(make_app, store_url):
    client = make_app(echo, card=make_card(**PUSH_CARD), store=store_url).test_client()
    error(rpc(client, "CreateTaskPushNotificationConfig",
              {"taskId": "nope", "url": "https://example.com/hook"}), -32001)
    error(rpc(client, "ListTaskPushNotificationConfigs", {"taskId": "nope"}), -32001)
    error(rpc(client, "GetTaskPushNotificationConfig", {"taskId": "nope", "id": "x"}), -32001)
    error(rpc(client, "DeleteTaskPushNotificationConfig", {"taskId": "nope", "id": "x"}), -32001)


def test_push_config_secrets_are_masked_on_get_and_list(make_app, store_url):
    client = make_app(echo, card=make_card(**PUSH_CARD), store=store_url).test_client()
    task = send_task(client, user_message("hi"))
    created = ok(rpc(client, "CreateTaskPushNotificationConfig", {
        "taskId": task["id"], "url": "https://example.com/hook", "token": "tok-secret",
        "authentication": {"scheme": "Bearer", "credentials": "cred-secret"}}),
        "Task Push Notification Config")
    got = ok(rpc(client, "GetTaskPushNotificationConfig", {"taskId": task["id"], "id": created["id"]}),
             "Task Push Notification Config")
    listed = ok(rpc(client, "ListTaskPushNotificationConfigs", {"taskId": task["id"]}),
                "List Task Push Notification Configs Response")
    for config in (got, listed["configs"][0]):
        text = repr(config)
        assert "tok-secret" not in text and "cred-secret" not in text
        assert config["authentication"]["scheme"] == "Bearer"
        assert config["token"] and config["authentication"]["credentials"]
        assert config["url"] == "https://example.com/hook"
