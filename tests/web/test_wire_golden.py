"""The wire output, byte for byte: a fixed corpus of requests in every generation and
binding, answered by a deterministic agent, against the recording in
``tests/data/wire/golden.json``.

A refactoring must not change what goes on the wire.  Random ids, timestamps and
ETags are replaced by placeholders numbered in order of appearance, so the same
exchange always reads the same.  After a change that is meant to alter the wire,
record again and read the diff::

    A2A_RECORD_WIRE=1 python -m pytest tests/web/test_wire_golden.py
    git diff tests/data/wire/golden.json
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import pytest
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, Part, TaskContext

from tests.conftest import make_card
from tests.support.helpers import DATA

GOLDEN = DATA / "wire" / "golden.json"
#: What a response keeps of its headers (the rest is the server's own business).
HEADERS = ("Content-Type", "Cache-Control", "Allow", "WWW-Authenticate", "Retry-After",
           "A2A-Extensions", "Vary", "Access-Control-Allow-Origin", "X-Accel-Buffering")

V1, V03 = {"A2A-Version": "1.0"}, {"A2A-Version": "0.3"}
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
_ETAG = re.compile(r'"[0-9a-f]{16,64}"')
#: SSE comments (the opening one, keep-alives): when they come depends on timing.
_COMMENT = re.compile(r"(?m)^:[^\n]*\n\n")


def agent(ctx: TaskContext) -> Any:
    """Deterministic: the first word of the message says what to do."""
    word = (ctx.text.split() or [""])[0]
    if word == "stream":
        ctx.working("streaming")
        for text in ("one ", "two ", "three"):
            ctx.artifact(text, artifact_id="story", append=text != "one ",
                         last_chunk=text == "three")
        ctx.complete("done")
        return None
    if word == "ask":
        return ctx.ask("which city?") if len(ctx.history) < 2 else "Paris it is"
    if word == "reply":
        return ctx.reply("just a message")
    if word == "data":
        return [Part(data={"k": [1, 2]}), Part(text="and text")]
    if word == "fail":
        raise RuntimeError("the agent broke")
    return ctx.text


class Normaliser:
    """Ids and ETags replaced by placeholders numbered in order of appearance (the
    same id reads the same wherever it recurs); timestamps by one placeholder (two
    events of one millisecond would otherwise number differently run to run)."""

    def __init__(self) -> None:
        self.seen: Dict[str, str] = {}

    def _name(self, kind: str, value: str) -> str:
        if value not in self.seen:
            self.seen[value] = f"<{kind}{sum(v.startswith('<' + kind) for v in self.seen.values())}>"
        return self.seen[value]

    def text(self, value: str) -> str:
        value = _UUID.sub(lambda m: self._name("id", m.group()), value)
        value = _STAMP.sub("<time>", value)
        return _ETAG.sub(lambda m: self._name("etag", m.group()), value)


def exchanges() -> List[Tuple[str, str, str, Optional[Any], Dict[str, str]]]:
    """``(name, verb, path, body, headers)``; ``{task}`` in a path or body is the last
    task an answer named, ``{input}`` the task left waiting for input."""
    def rpc(method: str, params: Any, request_id: Any = 1) -> Dict[str, Any]:
        return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}

    def msg(text: str, **extra: Any) -> Dict[str, Any]:
        return {"role": "ROLE_USER", "messageId": f"m-{text}", "parts": [{"text": text}],
                **extra}

    def msg03(text: str, **extra: Any) -> Dict[str, Any]:
        return {"kind": "message", "role": "user", "messageId": f"m3-{text}",
                "parts": [{"kind": "text", "text": text}], **extra}

    def msg01(text: str) -> Dict[str, Any]:
        return {"role": "user", "parts": [{"type": "text", "text": text}]}

    hook = {"url": "https://hooks.example.com/a2a", "token": "t0k"}
    return [
        ("card", "GET", "/.well-known/agent-card.json", None, {}),
        ("card legacy path", "GET", "/.well-known/agent.json", None, {}),
        ("1.0 send", "POST", "/a2a", rpc("SendMessage", {"message": msg("hello")}), V1),
        ("1.0 send data", "POST", "/a2a", rpc("SendMessage", {"message": msg("data")}), V1),
        ("1.0 send reply", "POST", "/a2a", rpc("SendMessage", {"message": msg("reply")}), V1),
        ("1.0 send fails", "POST", "/a2a", rpc("SendMessage", {"message": msg("fail")}), V1),
        ("1.0 stream", "POST", "/a2a", rpc("SendStreamingMessage", {"message": msg("stream")}),
         V1),
        ("1.0 get", "POST", "/a2a", rpc("GetTask", {"id": "{task}", "historyLength": 1}), V1),
        ("1.0 resubscribe replay", "POST", "/a2a", rpc("SubscribeToTask", {"id": "{task}"}),
         {**V1, "Last-Event-ID": "1"}),
        ("1.0 ask", "POST", "/a2a", rpc("SendMessage", {"message": msg("ask")}), V1),
        ("1.0 push create", "POST", "/a2a", rpc("CreateTaskPushNotificationConfig",
                                                {"taskId": "{input}", "id": "h1", **hook}), V1),
        ("1.0 push get", "POST", "/a2a", rpc("GetTaskPushNotificationConfig",
                                             {"taskId": "{input}", "id": "h1"}), V1),
        ("1.0 push list", "POST", "/a2a", rpc("ListTaskPushNotificationConfigs",
                                              {"taskId": "{input}"}), V1),
        ("1.0 push delete", "POST", "/a2a", rpc("DeleteTaskPushNotificationConfig",
                                                {"taskId": "{input}", "id": "h1"}), V1),
        ("1.0 continue", "POST", "/a2a", rpc("SendMessage", {
            "message": msg("ask again", taskId="{input}")}), V1),
        ("1.0 ask to cancel", "POST", "/a2a", rpc("SendMessage", {"message": msg("ask")}), V1),
        ("1.0 cancel", "POST", "/a2a", rpc("CancelTask", {"id": "{input}"}), V1),
        ("1.0 cancel again", "POST", "/a2a", rpc("CancelTask", {"id": "{input}"}), V1),
        # One task in each list: tasks that end in the same millisecond come in id order.
        ("1.0 list", "POST", "/a2a", rpc("ListTasks", {
            "pageSize": 2, "historyLength": 0, "status": "TASK_STATE_CANCELED"}), V1),
        ("1.0 extended card", "POST", "/a2a", rpc("GetExtendedAgentCard", {}), V1),
        ("1.0 not found", "POST", "/a2a", rpc("GetTask", {"id": "nope"}), V1),
        ("1.0 bad params", "POST", "/a2a", rpc("GetTask", {"id": 5}), V1),
        ("1.0 unknown method", "POST", "/a2a", rpc("Nope", {}), V1),
        ("1.0 version mismatch", "POST", "/a2a", rpc("message/send", {"message": msg03("x")}),
         V1),
        ("bad json", "POST", "/a2a", b"{nope", V1),
        ("batch", "POST", "/a2a", [rpc("GetTask", {"id": "x"})], V1),
        ("no id", "POST", "/a2a", {"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "x"}},
         V1),
        ("long id", "POST", "/a2a", rpc("GetTask", {"id": "x"}, "i" * 300), V1),
        ("wrong verb", "GET", "/a2a", None, V1),
        ("wrong content type", "POST", "/a2a", b"{}", {**V1, "Content-Type": "text/plain"}),
        ("0.3 send", "POST", "/a2a", rpc("message/send", {"message": msg03("hello")}), V03),
        ("0.3 stream", "POST", "/a2a", rpc("message/stream", {"message": msg03("stream")}), V03),
        ("0.3 get", "POST", "/a2a", rpc("tasks/get", {"id": "{task}"}), V03),
        ("0.3 card", "POST", "/a2a", rpc("agent/getAuthenticatedExtendedCard", {}), V03),
        ("0.3 not found", "POST", "/a2a", rpc("tasks/cancel", {"id": "nope"}), V03),
        ("0.1 send", "POST", "/a2a", rpc("tasks/send", {"id": "t01-a", "message": msg01("hello")}),
         {}),
        ("0.1 sendSubscribe", "POST", "/a2a", rpc("tasks/sendSubscribe", {
            "id": "t01-b", "message": msg01("stream")}), {}),
        ("0.1 get", "POST", "/a2a", rpc("tasks/get", {"id": "t01-a"}), {}),
        ("REST send", "POST", "/a2a/rest/message:send", {"message": msg("hello")}, {}),
        ("REST stream", "POST", "/a2a/rest/message:stream", {"message": msg("stream")}, {}),
        ("REST get", "GET", "/a2a/rest/tasks/{task}?historyLength=0", None, {}),
        ("REST list", "GET", "/a2a/rest/tasks?pageSize=1&status=TASK_STATE_CANCELED", None, {}),
        ("REST tenant list", "GET", "/a2a/rest/acme/tasks", None, {}),
        ("REST not found", "GET", "/a2a/rest/tasks/nope", None, {}),
        ("REST wrong verb", "DELETE", "/a2a/rest/message:send", None, {}),
        ("REST unknown path", "GET", "/a2a/rest/nothing/here", None, {}),
        ("REST bad json", "POST", "/a2a/rest/message:send", b"{nope",
         {"Content-Type": "application/json"}),
        ("REST extended card", "GET", "/a2a/rest/extendedAgentCard", None, {}),
        ("REST 0.3 send", "POST", "/a2a/rest/v1/message:send", {"message": {
            "role": "ROLE_USER", "messageId": "m-r3", "content": [{"text": "hello"}]}}, V03),
        ("REST 0.3 get", "GET", "/a2a/rest/v1/tasks/{task}", None, V03),
        ("REST 0.3 card", "GET", "/a2a/rest/v1/card", None, V03),
    ]


def run_corpus() -> List[Dict[str, Any]]:
    app = Flask("wire")
    A2A(app, card=make_card(capabilities=AgentCapabilities(
        streaming=True, push_notifications=True, extended_agent_card=True)),
        executor=agent, store="memory://", extended_card=make_card(name="Extended"),
        push_allowed_hosts="hooks.example.com")
    client = app.test_client()
    norm = Normaliser()
    names = {"task": "", "input": ""}
    recorded = []
    try:
        for name, verb, path, body, headers in exchanges():
            def fill(value: Any) -> Any:
                text = json.dumps(value) if not isinstance(value, (bytes, str)) else value
                if isinstance(text, str):
                    for key, found in names.items():
                        text = text.replace("{" + key + "}", found)
                return text

            data = None if body is None else fill(body)
            if isinstance(data, str):
                data = data.encode()
            sent = {"Content-Type": "application/json", **headers} if data is not None \
                else dict(headers)
            response = client.open(fill(path), method=verb, data=data, headers=sent)
            text = response.get_data(as_text=True)
            for found in _UUID.findall(text)[:1]:
                if "task" in text:
                    names["task"] = found
            if "TASK_STATE_INPUT_REQUIRED" in text or '"input-required"' in text:
                names["input"] = _UUID.findall(text)[0]
            recorded.append({
                "name": name,
                "status": response.status_code,
                "headers": {k: norm.text(response.headers[k]) for k in HEADERS
                            if k in response.headers},
                "body": norm.text(_COMMENT.sub("", text)),
            })
    finally:
        app.extensions["a2a"]["a2a"].close()
    return recorded


def test_the_wire_output_is_what_was_recorded():
    recorded = run_corpus()
    if os.environ.get("A2A_RECORD_WIRE") == "1" or not GOLDEN.exists():
        GOLDEN.parent.mkdir(exist_ok=True)
        GOLDEN.write_text(json.dumps(recorded, indent=1, ensure_ascii=False) + "\n")
        if os.environ.get("A2A_RECORD_WIRE") != "1":
            pytest.fail(f"no recording yet: wrote {GOLDEN}; run again")
        return
    golden = json.loads(GOLDEN.read_text())
    assert [r["name"] for r in recorded] == [g["name"] for g in golden]
    for now, then in zip(recorded, golden):
        assert now == then, f"{now['name']}: the wire changed"
