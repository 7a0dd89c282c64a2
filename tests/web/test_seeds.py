"""Every example of the user's seed documents (tests/data/seeds) against the conformance agent.

Each seed example is one test.  A request a client would send goes to the
conformance agent as its generation sends it (no ``A2A-Version`` for 0.1 and
0.3, ``A2A-Version: 1.0`` for 1.0 names) and the answer is checked against the
official schema; where the seed is wrong for its version (its own schema disagrees) the
documented answer is asserted instead.  An example that is a response or an
object is compared with the shape the server produces for the same thing.
Seed 000 lost its code blocks in extraction: its scenarios are rebuilt from
the prose around them and say so in their titles.

The agent is ``examples.conformance_agent`` (its card and executor), mounted
in a fresh Flask app per test so that the seeds' fixed task ids
(``task-abc-123``) never meet an earlier test's task.  The conformance agent
picks behaviours by ``messageId``, which 0.1 messages lack; 0.1 requests that
need a behaviour add a ``messageId`` member, which 0.1 schemas allow.

``test_every_example_block_of_the_seeds_is_catalogued`` fails when a seed
gains a brace-delimited block no entry covers, so nothing is skipped silently.
"""
from __future__ import annotations

import ast
import base64
import copy
import dataclasses
import functools
import json
import re
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import pytest
from flask import Flask

from a2a_flask import A2A

from tests.support import wire
from tests.support.helpers import DATA, card_v1_view, parse_sse, rpc_body, validate
from tests.support.wire import mimetype
from tests.web.test_dialects import error as failed
from tests.web.test_dialects import result as ok
from tests.web.test_dialects import v01

SEEDS = DATA / "seeds"
V1 = {"A2A-Version": "1.0"}


def seed_text(seed: str) -> str:
    (path,) = SEEDS.glob(f"{seed}_*.txt")
    return path.read_text(encoding="utf-8")


def brace_blocks(text: str) -> List[Tuple[int, str]]:
    """Top-level ``{...}`` blocks (JSON, TypeScript, Python or URL templates) with their line."""
    blocks, depth, start, in_string, escaped = [], 0, 0, False, False
    for index, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"' and depth:
            in_string = True
        elif char == "{":
            if not depth:
                start = index
            depth += 1
        elif char == "}" and depth:
            depth -= 1
            if not depth:
                blocks.append((text.count("\n", 0, start) + 1, text[start:index + 1]))
    return blocks


# ------------------------------------------------------------------ the app and the wire


@pytest.fixture
def client():
    from examples import conformance_agent

    app = Flask("seeds")
    # The seeds' webhooks live on example.com names, which have no DNS here.
    app.config["A2A_PUSH_ALLOWED_HOSTS"] = "*.example.com"
    A2A(app, card=conformance_agent.a2a.card, executor=conformance_agent.conformance)
    yield app.test_client()
    close_app(app)


def close_app(app: Flask) -> None:
    """Stop what the agent runs in the background and close its store."""
    state = app.extensions["a2a"]["a2a"]
    getattr(state, "close", state.store.close)()


#: Requests as the seeds' clients send them: no A2A-Version header unless in ``headers``;
#: a raw answer is left to be read as it comes (a stream may stay open).
post = functools.partial(wire.post, version=None, stream=True)
call = functools.partial(wire.rpc, version=None)


def events(client, method: str, params: Any, **options: Any) -> List[Dict[str, Any]]:
    return [e["data"] for e in wire.sse(post(client, method, params, **options))]


def msg01(text: str = "hi", message_id: Optional[str] = None, **extra: Any) -> Dict[str, Any]:
    message: Dict[str, Any] = {"role": "user", "parts": [{"type": "text", "text": text}]}
    if message_id:
        message["messageId"] = message_id  # selects a conformance behaviour (see module doc)
    message.update(extra)
    return message


def send01(client, task_id: str, message: Dict[str, Any], **params: Any) -> Dict[str, Any]:
    return v01(call(client, "tasks/send", {"id": task_id, "message": message, **params}),
               "SendTaskResponse")


def new_id() -> str:
    return "seed-" + uuid.uuid4().hex[:10]


def msg03(text: str = "hi", message_id: Optional[str] = None) -> Dict[str, Any]:
    return {"kind": "message", "messageId": message_id or new_id(), "role": "user",
            "parts": [{"kind": "text", "text": text}]}


def msg1(text: str = "hi", message_id: Optional[str] = None, **extra: Any) -> Dict[str, Any]:
    return {"messageId": message_id or new_id(), "role": "ROLE_USER", "parts": [{"text": text}],
            **extra}


def send1(client, message: Dict[str, Any], **params: Any) -> Dict[str, Any]:
    result = ok(call(client, "SendMessage", {"message": message, **params}, headers=V1))
    validate(result, "Send Message Response")
    return result


def live_01_task(client) -> str:
    """A 0.1 task that keeps working for seconds (its stream is left unread)."""
    task_id = new_id()
    response = post(client, "tasks/sendSubscribe",
                    {"id": task_id, "message": msg01("slow", "test-resubscribe-message-id")})
    response.close()
    return task_id


def python_literal(block: str) -> Any:
    """A Python dict literal from a seed, comments dropped."""
    return ast.literal_eval(re.sub(r"\s+#[^\n]*", "", block))


# ================================================================== checks: seed 000 (0.1.0)


def check_000_card_path(client, example: str) -> None:
    assert example == "{server_domain}"  # https://{server_domain}/.well-known/agent.json
    legacy = client.get("/.well-known/agent.json")
    assert legacy.status_code == 200
    card = legacy.get_json()
    validate(card, "AgentCard", "v0.1")
    assert card["url"].startswith("http://") and card["url"].endswith("/a2a")
    assert legacy.get_data() == client.get("/.well-known/agent-card.json").get_data()


def check_000_tasks_get_params(client, example: str) -> None:
    params = json.loads(example)
    send01(client, params["id"], msg01("What is the capital of France?"))
    request = rpc_body("tasks/get", params)
    validate(request, "GetTaskRequest", "v0.1")
    task = ok(v01(call(client, "tasks/get", body=request), "GetTaskResponse"))
    assert task["id"] == "task-abc-123" and task["status"]["state"] == "completed"


def check_000_simple_question(client, example: str) -> None:
    task = ok(send01(client, "task-abc-123", msg01("What is the capital of France?"),
                     sessionId="session-1"))
    assert task["status"]["state"] == "completed" and task["sessionId"] == "session-1"
    assert task["artifacts"][0]["parts"][0] == {"type": "text",
                                                "text": "What is the capital of France?"}


def check_000_streaming_story(client, example: str) -> None:
    params = {"id": new_id(), "message": msg01("Write a short story", "tck-stream-artifact-chunked")}
    validate(rpc_body("tasks/sendSubscribe", params), "SendTaskStreamingRequest", "v0.1")
    items = [ok(v01(e, "SendTaskStreamingResponse")) for e in
             events(client, "tasks/sendSubscribe", params)]
    chunks = [i["artifact"] for i in items if "artifact" in i]
    assert [(c.get("append"), c.get("lastChunk")) for c in chunks] == [(True, None), (True, True)]
    assert {c["index"] for c in chunks} == {0}
    assert items[-1]["status"]["state"] == "completed" and items[-1]["final"] is True
    assert all(i.get("final") is not True for i in items[:-1])


def check_000_multi_turn(client, example: str) -> None:
    task_id = new_id()
    first = ok(send01(client, task_id, msg01("Book a flight", "tck-input-required")))
    assert first["status"]["state"] == "input-required"
    assert first["status"]["message"]["role"] == "agent"
    second = ok(send01(client, task_id, msg01("From London to Paris on Friday")))
    assert second["id"] == task_id and second["status"]["state"] == "completed"
    assert [m["role"] for m in second["history"]] == ["user", "agent", "user"]


def check_000_push_notification(client, example: str) -> None:
    push = {"url": "https://client.example.com/webhook/a2a-notifications",
            "token": "secure-client-token-for-task-aaa",
            "authentication": {"schemes": ["Bearer"]}}
    task_id = new_id()
    task = ok(send01(client, task_id, msg01("Generate the Q1 report"), pushNotification=push))
    assert task["id"] == task_id
    got = ok(v01(call(client, "tasks/pushNotification/get", {"id": task_id}),
                 "GetTaskPushNotificationResponse"))
    config = got["pushNotificationConfig"]
    assert config["url"] == push["url"] and config["authentication"]["schemes"] == ["Bearer"]
    assert config["token"] != push["token"]  # secrets are masked when read back


def check_000_file_upload(client, example: str) -> None:
    image = base64.b64encode(b"\x89PNG\r\n\x1a\n").decode()
    parts = [{"type": "text", "text": "Analyse this image"},
             {"type": "file", "file": {"name": "input.png", "mimeType": "image/png", "bytes": image}}]
    task = ok(send01(client, new_id(), msg01(parts=parts)))
    assert task["history"][0]["parts"] == parts
    uri = ok(send01(client, new_id(), msg01("file", "tck-artifact-file-url")))
    (part,) = uri["artifacts"][0]["parts"]
    assert part == {"type": "file", "file": {"uri": "https://example.com/output.txt",
                                             "mimeType": "text/plain", "name": "output.txt"}}


def check_000_structured_data(client, example: str) -> None:
    hint = {"type": "text", "text": "List open support tickets",
            "metadata": {"mimeType": "application/json", "schema": {"type": "array"}}}
    task = ok(send01(client, new_id(), msg01("x", "tck-artifact-data", parts=[hint])))
    assert task["history"][0]["parts"] == [hint]
    (part,) = task["artifacts"][0]["parts"]
    assert part == {"type": "data", "data": {"key": "value", "count": 42}}
    validate(part, "DataPart", "v0.1")


def check_000_error_codes_use_1_0_meanings(client, example: str) -> None:
    task_id = new_id()
    send01(client, task_id, msg01("done"))
    # 0.1's -32009 InvalidTaskStateError is VersionNotSupported in 1.0:
    # a message to a completed task is -32004.
    err = failed(send01(client, task_id, msg01("more")), -32004)
    assert err["data"][0]["reason"] == "UNSUPPORTED_OPERATION"


def check_000_cancel(client, example: str) -> None:
    task_id = live_01_task(client)
    task = ok(v01(call(client, "tasks/cancel", {"id": task_id}), "CancelTaskResponse"))
    assert task["status"]["state"] == "canceled"
    failed(v01(call(client, "tasks/cancel", {"id": task_id}), "CancelTaskResponse"), -32002)


def check_000_resubscribe(client, example: str) -> None:
    task_id = live_01_task(client)
    try:
        response = post(client, "tasks/resubscribe", {"id": task_id})
        assert mimetype(response) == "text/event-stream", response.text
    finally:
        call(client, "tasks/cancel", {"id": task_id})
    items = [ok(v01(e, "SendTaskStreamingResponse")) for e in
             (ev["data"] for ev in parse_sse(response.text))]
    assert items[0]["id"] == task_id and items[-1]["final"] is True


def check_000_push_set_get(client, example: str) -> None:
    task_id = new_id()
    send01(client, task_id, msg01("hi"))
    set_params = {"id": task_id, "pushNotificationConfig": {"url": "https://c.example.com/h"}}
    validate(rpc_body("tasks/pushNotification/set", set_params), "SetTaskPushNotificationRequest",
             "v0.1")
    stored = ok(v01(call(client, "tasks/pushNotification/set", set_params),
                    "SetTaskPushNotificationResponse"))
    assert stored == {"id": task_id, "pushNotificationConfig": {"url": "https://c.example.com/h"}}
    got = ok(v01(call(client, "tasks/pushNotification/get", {"id": task_id}),
                 "GetTaskPushNotificationResponse"))
    assert got == stored


# ================================================================== checks: seed 001 (0.2/0.3 objects)


def sent_task_03(client, message_id: str = "tck-complete-task") -> Dict[str, Any]:
    body = call(client, "message/send", {"message": msg03("hello", message_id + "-" + new_id())})
    validate(body, "SendMessageResponse", "v0.3")
    return ok(body)


def check_001_message(client, example: str) -> None:
    members = set(re.findall(r"^(\w+)\??:", example, re.M)) - {"key"}
    assert members == {"role", "parts", "metadata", "extensions", "referenceTaskIds", "messageId",
                       "taskId", "contextId", "kind"}
    task = sent_task_03(client)
    for message in task["history"] + [task["status"]["message"]]:
        validate(message, "Message", "v0.3")
        assert set(message) <= members
        assert message["kind"] == "message" and message["role"] in ("user", "agent")
        assert message["taskId"] == task["id"] and message["contextId"] == task["contextId"]


def check_001_text_part(client, example: str) -> None:
    task = sent_task_03(client, "tck-artifact-text")
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "Generated text content"}]


def check_001_task(client, example: str) -> None:
    members = set(re.findall(r"^(\w+)\??:", example, re.M)) - {"key"}
    assert members == {"id", "contextId", "status", "history", "artifacts", "metadata", "kind"}
    task = sent_task_03(client, "tck-artifact-text")
    assert set(task) <= members and task["kind"] == "task"
    validate(task, "Task", "v0.3")
    validate(task, "Task", "v0.2")


def check_001_task_status(client, example: str) -> None:
    task = sent_task_03(client, "tck-input-required")
    status = task["status"]
    assert set(status) == {"state", "message", "timestamp"}
    assert status["state"] == "input-required"
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$", status["timestamp"])
    validate(status, "TaskStatus", "v0.3")


def check_001_task_state(client, example: str) -> None:
    states = set(re.findall(r'= "([a-z-]+)"', example))
    assert len(states) == 9
    seen = {sent_task_03(client, prefix)["status"]["state"]
            for prefix in ("tck-complete-task", "tck-input-required", "tck-reject-task")}
    items = [ok(e) for e in events(client, "message/stream",
                                   {"message": msg03("x", "tck-stream-001-" + new_id())})]
    seen |= {i["status"]["state"] for i in items if "status" in i}
    assert seen == {"submitted", "working", "input-required", "completed", "rejected"}
    assert seen <= states


def check_001_jsonrpc_request(client, example: str) -> None:
    # The seed says params is "usually a Message object"; it is MessageSendParams {message, ...}.
    bare = msg03("hello")
    err = failed(call(client, "message/send", bare), -32602)
    assert err["data"][1]["fieldViolations"][0]["field"] == "message"
    request = rpc_body("message/send", {"message": bare})
    validate(request, "SendMessageRequest", "v0.3")
    assert ok(call(client, "message/send", body=request))["kind"] == "task"


def check_001_jsonrpc_response(client, example: str) -> None:
    for body in (call(client, "message/send", {"message": msg03()}, body=None),
                 call(client, "tasks/get", {"id": "nope"})):
        assert body["jsonrpc"] == "2.0" and body["id"] == 1
        assert ("result" in body) != ("error" in body)
        validate(body, "JSONRPCResponse", "v0.3")
    reply = ok(call(client, "message/send", {"message": msg03("x", "tck-message-response")}))
    assert reply["kind"] == "message"  # result: Task | Message


def check_001_jsonrpc_error(client, example: str) -> None:
    err = failed(call(client, "tasks/get", {"id": "nope"}), -32001)
    assert isinstance(err["code"], int) and isinstance(err["message"], str) and "data" in err
    validate(err, "JSONRPCError", "v0.3")


# ================================================================== checks: seed 002 (1.0 overview)


def check_002_discovery(client, example: str) -> None:
    # The seed fetches /.well-known/agent.json; 1.0 names agent-card.json. Both serve one card.
    legacy = client.get("/.well-known/agent.json")
    current = client.get("/.well-known/agent-card.json")
    assert legacy.status_code == current.status_code == 200
    assert legacy.get_data() == current.get_data()
    validate(card_v1_view(current.get_json()), "Agent Card")


def check_002_send_message(client, example: str) -> None:
    task = send1(client, msg1("Summarize this document", "tck-complete-task"))["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    # "blocks until the task is complete" is not quite 1.0: it returns at INPUT_REQUIRED too.
    asked = send1(client, msg1("x", "tck-input-required"))["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


def check_002_get_task(client, example: str) -> None:
    task = send1(client, msg1("x", "tck-artifact-text"))["task"]
    got = ok(call(client, "GetTask", {"id": task["id"]}, headers=V1))
    validate(got, "Task")
    assert got["id"] == task["id"] and got["artifacts"] == task["artifacts"]


def check_002_streaming(client, example: str) -> None:
    data = events(client, "SendStreamingMessage",
                  {"message": msg1("x", "tck-stream-artifact-chunked")}, headers=V1)
    items = [ok(e) for e in data]
    for item in items:
        validate(item, "Stream Response")
    # 1.0 starts a task stream with the Task; then the seed's four events, in order.
    assert list(items[0]) == ["task"]
    shapes = [(k, v.get("status", {}).get("state")) for i in items[1:] for k, v in i.items()]
    assert shapes == [("statusUpdate", "TASK_STATE_WORKING"), ("artifactUpdate", None),
                      ("artifactUpdate", None), ("statusUpdate", "TASK_STATE_COMPLETED")]


def check_002_data_part(client, example: str) -> None:
    # The seed's {"table": [...], "columns": [...]} with the elisions left empty.
    part = {"data": {"table": [], "columns": []}, "mediaType": "application/json"}
    task = send1(client, msg1("x", parts=[part]))["task"]
    assert task["history"][0]["parts"] == [part]


def check_002_contexts(client, example: str) -> None:
    first = send1(client, msg1("one"))["task"]
    second = send1(client, msg1("two", contextId=first["contextId"]))["task"]
    assert second["contextId"] == first["contextId"] and second["id"] != first["id"]
    listed = ok(call(client, "ListTasks", {"contextId": first["contextId"]}, headers=V1))
    validate(listed, "List Tasks Response")
    assert sorted(t["id"] for t in listed["tasks"]) == sorted([first["id"], second["id"]])
    # JSON says contextId; the seed's snake_case context_id is accepted as ProtoJSON allows.
    third = send1(client, msg1("three", context_id=first["contextId"]))["task"]
    assert third["contextId"] == first["contextId"]


def check_002_tenants(client, example: str) -> None:
    task = send1(client, msg1("x"), tenant="acme")["task"]
    assert ok(call(client, "GetTask", {"id": task["id"], "tenant": "acme"}, headers=V1))["id"] == task["id"]
    failed(call(client, "GetTask", {"id": task["id"], "tenant": "other"}, headers=V1), -32001)


def check_002_rest_tenant_path(client, example: str) -> None:
    # The seed's /tenants/{tenant-id}/tasks/... is not 1.0; the proto binding is /{tenant}/tasks/...
    sent = client.post("/a2a/rest/acme/message:send", json={"message": msg1("x")})
    task = sent.get_json()["task"]
    assert client.get(f"/a2a/rest/acme/tasks/{task['id']}").status_code == 200
    wrong = client.get(f"/a2a/rest/tenants/acme/tasks/{task['id']}")
    assert wrong.status_code == 404
    assert wrong.get_json()["error"]["status"] == "NOT_FOUND"


def check_002_terminal_states(client, example: str) -> None:
    rejected = send1(client, msg1("x", "tck-reject-task"))["task"]
    assert rejected["status"]["state"] == "TASK_STATE_REJECTED"
    err = failed(call(client, "SendMessage",
                      {"message": msg1("again", taskId=rejected["id"])}, headers=V1), -32004)
    assert err["data"][0]["reason"] == "UNSUPPORTED_OPERATION"


# ================================================================== checks: seed 004 (0.1 tutorial)


def check_004_tasks_send(client, example: str) -> None:
    request = json.loads(example)
    validate(request, "SendTaskRequest", "v0.1")
    body = v01(call(client, "tasks/send", body=request), "SendTaskResponse")
    assert body["id"] == "req-001"
    task = ok(body)
    assert task["id"] == "task-abc-123" and task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"] == [
        {"type": "text", "text": "Summarize the latest AI safety research"}]


def check_004_agent_card(client, example: str) -> None:
    seed_card = json.loads(example)
    validate(seed_card, "AgentCard", "v0.1")
    card = client.get("/.well-known/agent.json").get_json()
    validate(card, "AgentCard", "v0.1")
    for member in ("name", "description", "url", "version", "capabilities", "skills",
                   "defaultInputModes", "defaultOutputModes"):
        assert member in card, member
    assert set(card["capabilities"]) >= {"streaming", "pushNotifications"}
    # The seed's modes ("text", "file") are not media types; ours are, as the spec defines the modes.
    assert all("/" in mode for mode in card["defaultInputModes"] + card["defaultOutputModes"])
    assert all({"id", "name", "description", "tags"} <= set(s) for s in card["skills"])


def check_004_message(client, example: str) -> None:
    seed_message = json.loads(example)
    validate(seed_message, "Message", "v0.1")
    # Verbatim, the elided bytes ("...") are not base64.
    failed(send01(client, new_id(), seed_message), -32602)
    message = copy.deepcopy(seed_message)
    message["parts"][1]["file"]["bytes"] = message["parts"][1]["file"]["bytes"].rstrip(".")
    task = ok(send01(client, new_id(), message))
    assert task["history"] == [message]


def check_004_text_part(client, example: str) -> None:
    part = python_literal(example)
    validate(part, "TextPart", "v0.1")
    task = ok(send01(client, new_id(), msg01(parts=[part])))
    assert task["history"][0]["parts"] == [part]


def check_004_file_part(client, example: str) -> None:
    part = python_literal(example)
    validate(part, "FilePart", "v0.1")
    failed(send01(client, new_id(), msg01(parts=[part])), -32602)  # "<base64-encoded>"
    with_bytes = copy.deepcopy(part)
    with_bytes["file"]["bytes"] = base64.b64encode(b"%PDF-1.4").decode()
    with_uri = copy.deepcopy(part)  # the seed's comment: 'or use "uri" for remote files'
    del with_uri["file"]["bytes"]
    with_uri["file"]["uri"] = "https://example.com/report.pdf"
    task = ok(send01(client, new_id(), msg01(parts=[with_bytes, with_uri])))
    assert task["history"][0]["parts"] == [with_bytes, with_uri]


def check_004_data_part(client, example: str) -> None:
    part = python_literal(example)
    validate(part, "DataPart", "v0.1")
    task = ok(send01(client, new_id(), msg01(parts=[part])))
    assert task["history"][0]["parts"] == [part]


def check_004_task(client, example: str) -> None:
    seed_task = json.loads(example)
    validate(seed_task, "Task", "v0.1")
    send01(client, "task-abc-123", msg01("Review this code"), sessionId="session-xyz")
    task = ok(v01(call(client, "tasks/get", {"id": "task-abc-123"}), "GetTaskResponse"))
    assert task["id"] == "task-abc-123" and task["sessionId"] == "session-xyz"
    assert set(task) <= set(seed_task)
    assert set(task["status"]) <= set(seed_task["status"]) | {"message"}
    assert task["history"] == seed_task["history"]


def check_004_artifact(client, example: str) -> None:
    seed_artifact = json.loads(example)
    validate(seed_artifact, "Artifact", "v0.1")
    task = ok(send01(client, new_id(), msg01("x", "tck-artifact-data")))
    (artifact,) = task["artifacts"]
    validate(artifact, "Artifact", "v0.1")
    # 0.1 artifacts have no "id" (the seed's is not 0.1); they are numbered by "index".
    assert "id" not in artifact and artifact["index"] == 0
    assert set(artifact) <= {"name", "description", "parts", "index", "append", "lastChunk",
                             "metadata"}
    assert artifact["parts"][0]["type"] == "data"


def check_004_method_send(client, example: str) -> None:
    params = {"id": new_id(), "sessionId": "s-1", "message": msg01("hi"),
              "metadata": {"source": "seed-004"}}
    validate(rpc_body("tasks/send", params), "SendTaskRequest", "v0.1")
    task = ok(v01(call(client, "tasks/send", params), "SendTaskResponse"))
    assert task["id"] == params["id"] and task["sessionId"] == "s-1"


def check_004_method_send_subscribe(client, example: str) -> None:
    params = {"id": new_id(), "message": msg01("hi", "tck-stream-001")}
    validate(rpc_body("tasks/sendSubscribe", params), "SendTaskStreamingRequest", "v0.1")
    items = [ok(v01(e, "SendTaskStreamingResponse")) for e in events(client, "tasks/sendSubscribe", params)]
    assert items[-1]["final"] is True and items[-1]["status"]["state"] == "completed"


def check_004_method_get(client, example: str) -> None:
    task_id = new_id()
    send01(client, task_id, msg01("x", "tck-input-required"))
    send01(client, task_id, msg01("more"))
    params = {"id": task_id, "historyLength": 1}
    validate(rpc_body("tasks/get", params), "GetTaskRequest", "v0.1")
    task = ok(v01(call(client, "tasks/get", params), "GetTaskResponse"))
    assert [m["parts"][0]["text"] for m in task["history"]] == ["more"]


def check_004_method_cancel(client, example: str) -> None:
    task_id = live_01_task(client)
    params = {"id": task_id}
    validate(rpc_body("tasks/cancel", params), "CancelTaskRequest", "v0.1")
    task = ok(v01(call(client, "tasks/cancel", params), "CancelTaskResponse"))
    assert task["status"]["state"] == "canceled"


def check_004_method_push_set(client, example: str) -> None:
    task_id = new_id()
    send01(client, task_id, msg01("hi"))
    params = {"id": task_id, "pushNotificationConfig": {"url": "https://c.example.com/h",
                                                        "token": "t"}}
    validate(rpc_body("tasks/pushNotification/set", params), "SetTaskPushNotificationRequest", "v0.1")
    stored = ok(v01(call(client, "tasks/pushNotification/set", params),
                    "SetTaskPushNotificationResponse"))
    assert stored["id"] == task_id
    assert stored["pushNotificationConfig"]["token"] == "t"  # echoed to its sender


def check_004_method_push_get(client, example: str) -> None:
    task_id = new_id()
    send01(client, task_id, msg01("hi"))
    validate(rpc_body("tasks/pushNotification/get", {"id": task_id}),
             "GetTaskPushNotificationRequest", "v0.1")
    failed(v01(call(client, "tasks/pushNotification/get", {"id": task_id}),
               "GetTaskPushNotificationResponse"), -32001)  # no webhook set for this task
    call(client, "tasks/pushNotification/set",
         {"id": task_id, "pushNotificationConfig": {"url": "https://c.example.com/h"}})
    got = ok(v01(call(client, "tasks/pushNotification/get", {"id": task_id}),
                 "GetTaskPushNotificationResponse"))
    assert got["pushNotificationConfig"] == {"url": "https://c.example.com/h"}


def stream_01(client, message_id: str) -> List[Dict[str, Any]]:
    params = {"id": new_id(), "message": msg01("Review this code", message_id)}
    return [ok(v01(e, "SendTaskStreamingResponse")) for e in events(client, "tasks/sendSubscribe", params)]


def check_004_sse_working(client, example: str) -> None:
    seed_event = json.loads(example)
    v01(seed_event, "SendTaskStreamingResponse")
    working = [i for i in stream_01(client, "tck-stream-001")
               if i.get("status", {}).get("state") == "working"]
    assert working and set(working[0]) == set(seed_event["result"]) | {"final"}
    assert working[0]["status"]["message"]["role"] == "agent"
    assert working[0]["status"]["message"]["parts"][0]["type"] == "text"


def check_004_sse_completed_with_artifacts(client, example: str) -> None:
    seed_event = json.loads(example)
    # The seed puts a Task-like object with "artifacts" in a 0.1 status event, whose schema has no such member:
    # ours sends the artifact in its own artifact event and a plain final status event.
    assert "artifacts" in seed_event["result"]
    items = stream_01(client, "tck-stream-001")
    assert all("artifacts" not in i for i in items)
    assert [i["artifact"]["parts"][0]["text"] for i in items if "artifact" in i] == [
        "Streamed text content"]
    assert set(items[-1]) == {"id", "status", "final"} and items[-1]["final"] is True
    assert items[-1]["status"]["state"] == "completed"


def check_004_sse_event_object(client, example: str) -> None:
    seed_event = json.loads(example)
    v01(seed_event, "SendTaskStreamingResponse")
    working = next(i for i in stream_01(client, "tck-stream-001")
                   if i.get("status", {}).get("state") == "working")
    assert set(working) == {"id", "status", "final"} and working["final"] is False
    assert set(working["status"]) == {"state", "message", "timestamp"}


def check_004_sequence(client, example: str) -> None:
    assert json.dumps(example)  # a sketch ({"method": ..., ...}); the flow is what it shows
    task_id = new_id()
    items = [ok(e) for e in events(client, "tasks/sendSubscribe",
                                   {"id": task_id, "message": msg01("x", "tck-stream-001")})]
    assert items[-1]["final"] is True
    task = ok(v01(call(client, "tasks/get", {"id": task_id}), "GetTaskResponse"))
    assert task["history"] and task["artifacts"]
    assert task["artifacts"][0]["parts"] == [{"type": "text", "text": "Streamed text content"}]


def check_004_error(client, example: str) -> None:
    seed_error = json.loads(example)
    validate(seed_error, "GetTaskResponse", "v0.1")
    body = v01(call(client, "tasks/get", {"id": "task-unknown"}), "GetTaskResponse")
    err = failed(body, seed_error["error"]["code"])
    # The seed's data is {"taskId": ...}; ours carries it in an ErrorInfo's metadata.
    assert err["data"][0]["metadata"] == seed_error["error"]["data"]


def check_004_error_table(client, example: str) -> None:
    text = seed_text("004")
    table = text[text.index(example):]
    codes = [int(c) for c in re.findall(r"^(-32\d{3}) ", table, re.M)]
    assert codes == [-32700, -32600, -32601, -32602, -32603, -32001, -32002, -32003]
    raw = wire.send(client, "{oops", version=None).json()
    failed(raw, -32700)
    failed(call(client, "", body={"id": 1, "method": "tasks/get"}), -32600)
    failed(call(client, "tasks/explode", {}), -32601)
    failed(call(client, "tasks/get", {"historyLength": 1}), -32602)
    from a2a_flask.protocol.errors import InternalError  # not provokable on purpose: check the code

    assert InternalError.code == -32603
    failed(call(client, "tasks/get", {"id": "nope"}), -32001)
    task_id = new_id()
    send01(client, task_id, msg01("x"))
    failed(call(client, "tasks/cancel", {"id": task_id}), -32002)
    from examples import conformance_agent

    card = conformance_agent.a2a.card
    app = Flask("no-push")  # the conformance agent declares push: take it away
    A2A(app, executor=conformance_agent.conformance, card=dataclasses.replace(
        card, capabilities=dataclasses.replace(card.capabilities, push_notifications=False)))
    try:
        no_push = app.test_client()
        send01(no_push, task_id, msg01("x"))
        failed(call(no_push, "tasks/pushNotification/get", {"id": task_id}), -32003)
    finally:
        close_app(app)


# ================================================================== the catalogue


@dataclass
class Example:
    seed: str
    anchor: str  # text that locates the example in the seed
    title: str
    check: Callable[[Any, str], None]
    block: bool = True  # the anchor sits in a brace-delimited block (else: prose)
    bug: Optional[str] = None

    def locate(self) -> Tuple[int, str]:
        text = seed_text(self.seed)
        assert self.anchor in text, f"seed {self.seed} no longer contains {self.anchor!r}"
        if self.block:
            found = [(line, block) for line, block in brace_blocks(text) if self.anchor in block]
            assert len(found) == 1, found
            return found[0]
        offset = text.index(self.anchor)
        return text.count("\n", 0, offset) + 1, self.anchor

    @property
    def id(self) -> str:
        try:
            line = self.locate()[0]
        except (AssertionError, OSError, ValueError):
            line = 0
        return f"{self.seed}-L{line}-{self.title}"



EXAMPLES = [
    # seed 000: the 0.1.0 specification (its example code blocks are empty)
    Example("000", "{server_domain}", "well-known card path", check_000_card_path),
    Example("000", '{"id": "task-abc-123"}', "tasks/get params", check_000_tasks_get_params),
    Example("000", "Scenario: Client asks a simple question", "rebuilt: simple tasks/send",
            check_000_simple_question, block=False),
    Example("000", "Scenario: Client asks the agent to write a short story",
            "rebuilt: streamed story", check_000_streaming_story, block=False),
    Example("000", "Scenario: Client wants to book a flight", "rebuilt: multi-turn",
            check_000_multi_turn, block=False),
    Example("000", "Scenario: Client requests a long-running report",
            "rebuilt: push notification", check_000_push_notification,
            block=False),
    Example("000", "Scenario: Client sends an image for analysis", "rebuilt: file parts",
            check_000_file_upload, block=False),
    Example("000", "Scenario: Client asks for a list of open support tickets",
            "rebuilt: structured data", check_000_structured_data, block=False),
    Example("000", "Invalid task state for operation", "error table (-32009 is not 0.1's)",
            check_000_error_codes_use_1_0_meanings, block=False),
    Example("000", "Requests the cancellation of an ongoing task", "rebuilt: tasks/cancel",
            check_000_cancel, block=False),
    Example("000", "Allows a client to reconnect to an SSE stream", "rebuilt: tasks/resubscribe",
            check_000_resubscribe, block=False),
    Example("000", "Sets or updates the push notification configuration",
            "rebuilt: tasks/pushNotification/set|get", check_000_push_set_get,
            block=False),
    # seed 001: 0.2/0.3 data objects (TypeScript)
    Example("001", 'role: "user" | "agent";', "Message object", check_001_message),
    Example("001", 'kind: "text";', "TextPart object", check_001_text_part),
    Example("001", 'kind: "task";', "Task object", check_001_task),
    Example("001", "state: TaskState;", "TaskStatus object", check_001_task_status),
    Example("001", 'Submitted = "submitted"', "TaskState enum", check_001_task_state),
    Example("001", "params: Message;", "JSONRPCRequest (params is not a Message)",
            check_001_jsonrpc_request),
    Example("001", "result?: Task | Message | null;", "JSONRPCResponse", check_001_jsonrpc_response),
    Example("001", "data?: any;", "JSONRPCError", check_001_jsonrpc_error),
    # seed 002: 1.0 overview (no JSON; its flows are sent as 1.0)
    Example("002", "1. Discovery", "GET agent.json (1.0: agent-card.json)", check_002_discovery,
            block=False),
    Example("002", "2. SendMessage", "SendMessage", check_002_send_message, block=False),
    Example("002", "3. GetTask", "GetTask", check_002_get_task, block=False),
    Example("002", "Streaming (SendStreamingMessage)", "SendStreamingMessage events",
            check_002_streaming, block=False),
    Example("002", '{"table": [...], "columns": [...]}', "data part", check_002_data_part),
    Example("002", "When a client sends a message with a context_id", "contexts",
            check_002_contexts, block=False),
    Example("002", "optional tenant field on all requests", "tenant field", check_002_tenants,
            block=False),
    Example("002", "{tenant-id}", "REST /tenants/{id} path (1.0: /{tenant})",
            check_002_rest_tenant_path),
    Example("002", "Terminal states (Completed, Failed, Canceled, Rejected) are final",
            "terminal states", check_002_terminal_states, block=False),
    # seed 004: tutorial (0.1)
    Example("004", '"id": "req-001"', "tasks/send request", check_004_tasks_send),
    Example("004", '"name": "Code Review Agent"', "agent card", check_004_agent_card),
    Example("004", '"name": "handler.py"', "message with text and file parts", check_004_message),
    Example("004", '"text": "Analyze this data"', "text part (Python)", check_004_text_part),
    Example("004", '"name": "report.pdf"', "file part (Python)", check_004_file_part),
    Example("004", '"complexity": 42', "data part (Python)", check_004_data_part),
    Example("004", '"sessionId": "session-xyz"', "task object", check_004_task),
    Example("004", '"id": "artifact-001"', "artifact object", check_004_artifact),
    Example("004", 'method: "tasks/send";', "TaskSendRequest", check_004_method_send),
    Example("004", 'method: "tasks/sendSubscribe";', "TaskSendSubscribeRequest",
            check_004_method_send_subscribe),
    Example("004", 'method: "tasks/get";', "TaskGetRequest", check_004_method_get),
    Example("004", 'method: "tasks/cancel";', "TaskCancelRequest", check_004_method_cancel),
    Example("004", 'method: "tasks/pushNotification/set";', "SetPushNotificationRequest",
            check_004_method_push_set),
    Example("004", 'method: "tasks/pushNotification/get";', "GetPushNotificationRequest",
            check_004_method_push_get),
    Example("004", '"text":"Starting analysis..."', "SSE event 1 (working)", check_004_sse_working),
    Example("004", '"text":"Found 3 issues..."', "SSE event 2 (working)", check_004_sse_working),
    Example("004", '"text":"## Final Report..."', "SSE event 3 (task-like, not 0.1)",
            check_004_sse_completed_with_artifacts),
    Example("004", '"text": "Processing step 2 of 5..."', "SSE event object",
            check_004_sse_event_object),
    Example("004", '{"method": "tasks/sendSubscribe", ...}', "sequence: sendSubscribe",
            check_004_sequence),
    Example("004", '{"method": "tasks/get", ...}', "sequence: tasks/get", check_004_sequence),
    Example("004", '"code": -32001', "error response", check_004_error),
    Example("004", "-32700 Parse error\n-32600 Invalid request", "error code table",
            check_004_error_table, block=False),
]


def _params() -> list:
    out = []
    for example in EXAMPLES:
        marks = [pytest.mark.xfail(strict=True, reason=example.bug)] if example.bug else []
        out.append(pytest.param(example, id=example.id, marks=marks))
    return out


@pytest.mark.parametrize("example", _params())
def test_seed_example(client, example: Example):
    _, snippet = example.locate()
    example.check(client, snippet)


@pytest.mark.parametrize("seed", ["000", "001", "002", "004"])
def test_every_example_block_of_the_seeds_is_catalogued(seed):
    entries = [e for e in EXAMPLES if e.seed == seed and e.block]
    for line, block in brace_blocks(seed_text(seed)):
        owners = [e.title for e in entries if e.anchor in block]
        assert len(owners) == 1, f"seed {seed} line {line}: {block[:80]!r} is covered by {owners}"


def test_seed_files_are_the_catalogued_ones():
    assert sorted(p.name[:3] for p in SEEDS.glob("*.txt")) == ["000", "001", "002", "004"]


def test_fresh_instance_is_the_conformance_agent_app():
    from examples import conformance_agent

    app = Flask("seeds")
    A2A(app, card=conformance_agent.a2a.card, executor=conformance_agent.conformance)
    try:
        ours = app.test_client().get("/.well-known/agent-card.json").get_json()
        theirs = conformance_agent.app.test_client().get("/.well-known/agent-card.json").get_json()
    finally:
        close_app(app)
    assert ours == theirs
