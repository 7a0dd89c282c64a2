"""Nothing amplifies (docs/internals.rst, invariant 10), against real gunicorn -k gevent.

Every request family is sent with one large caller-chosen field; the answer's
bytes must stay within a small multiple of what was sent, and the worker's peak
memory within a small multiple of the largest request.  The JSON-RPC ``id`` once
went into every streamed event unbounded: a 2 MB id on a 200-event stream cost a
404 MB response and 376 MiB of worker memory.
"""
from __future__ import annotations

import json
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
import requests

from a2a_flask.protocol.models import new_id

from tests.support.helpers import V1, Server, proc_status_kib, rpc_body, worker_pids
from tests.support.tasks import message

#: The large field each request carries (characters).
BIG = 1 << 20
#: What an answer may cost beyond a small multiple of its request (bytes): headers,
#: error bodies, a task's own fields.
SLACK = 64 * 1024
#: An answer's bytes against its request's: an echo agent answers a message with the
#: message in the history and the same text as its artifact.
FACTOR = 4


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    store = tmp_path_factory.mktemp("amplify") / "tasks.db"
    env = {"FLASK_A2A_STORE": f"sqlite:///{store}", "FLASK_A2A_SSE_KEEPALIVE": "1",
           "FLASK_A2A_PUSH_ALLOW_PRIVATE": "true", "FLASK_A2A_MAX_CONTENT_LENGTH": str(8 << 20)}
    with Server("tests.support.fault_app:app", env=env) as running:
        yield running


def peak_kib(server: Server) -> int:
    (pid,) = worker_pids(server)
    return proc_status_kib(pid, "VmHWM")


def post(server: Server, body: bytes, *, path: str = "/a2a", headers: Optional[dict] = None,
         method: str = "POST") -> Tuple[int, bytes]:
    """Send raw bytes; the whole answer (streams read to their end)."""
    response = requests.request(method, server.url + path, data=body, timeout=60, headers={
        "Content-Type": "application/json", **V1, **(headers or {})})
    return response.status_code, response.content


def rpc_bytes(method: str, params: Any, request_id: Any = 1) -> bytes:
    return json.dumps(rpc_body(method, params, request_id)).encode()


def finished_task(server: Server, text: str = "flood 200", request_id: Any = 1) -> str:
    answer = server.rpc("SendMessage", {"message": message(text)})
    return str(answer["result"]["task"]["id"])


# ------------------------------------------------------------------ the request id


@pytest.mark.parametrize("request_id", ["x" * 2_000_000, "x" * 257, 10 ** 300, -(10 ** 256)],
                         ids=["2MB", "257", "301-digits", "257-digits"])
def test_a_request_id_longer_than_256_characters_is_refused_before_it_is_echoed(
        server, request_id):
    before = peak_kib(server)
    body = rpc_bytes("SendStreamingMessage", {"message": message("flood 200")}, request_id)
    status, answer = post(server, body)
    assert status == 200 and len(answer) < 2048, answer[:300]
    error = json.loads(answer)
    assert error["id"] is None and error["error"]["code"] == -32600
    assert "256" in error["error"]["message"]
    # The body is parsed once: a few copies of it at most, never one per event.
    assert peak_kib(server) - before < 8 * len(body) // 1024 + 16 * 1024


@pytest.mark.parametrize("request_id", ["x" * 256, 10 ** 255 - 1, -(10 ** 254)],
                         ids=["256", "255-digits", "256-chars-negative"])
def test_a_request_id_of_256_characters_is_echoed_in_every_event(server, request_id):
    body = rpc_bytes("SendStreamingMessage", {"message": message("flood 200")}, request_id)
    status, answer = post(server, body)
    assert status == 200
    events = [json.loads(line[5:]) for line in answer.decode().splitlines()
              if line.startswith("data:")]
    assert len(events) > 200 and all(event["id"] == request_id for event in events)


def test_resubscribing_from_event_zero_costs_the_log_not_the_log_times_the_id(server):
    """``SubscribeToTask`` with ``Last-Event-ID: 0`` replays a finished task at will:
    each replay costs what the log holds plus the id in each event, no more."""
    task_id = finished_task(server)
    replays = []
    for request_id in (1, "y" * 256):
        status, answer = post(server, rpc_bytes("SubscribeToTask", {"id": task_id}, request_id),
                              headers={"Last-Event-ID": "0"})
        assert status == 200 and answer.count(b"data:") > 200
        replays.append(len(answer))
    per_event = (replays[1] - replays[0]) / 200
    assert per_event < 2 * 256 + 64


# ------------------------------------------------------------------ every family


def families(task_id: str) -> List[Tuple[str, str, bytes, Dict[str, str], Optional[int]]]:
    """``(name, path, body, headers, expected)``: each request family with one large
    field, and what it must answer: None a result, else the JSON-RPC error code (or,
    on REST, the HTTP status)."""
    big = "b" * BIG
    v03 = {"A2A-Version": "0.3"}
    rest = {"Content-Type": "application/json"}
    hook = {"url": "http://127.0.0.1:9/hook", "token": big}
    credentials = {"url": "http://127.0.0.1:9/hook",
                   "authentication": {"scheme": "Bearer", "credentials": big}}

    def legacy(method: str, params: Any) -> bytes:
        return json.dumps({"jsonrpc": "2.0", "id": 1, "method": method,
                           "params": params}).encode()

    return [
        ("SendMessage text", "/a2a", rpc_bytes("SendMessage", {"message": message(big)}), {},
         None),
        ("SendMessage metadata", "/a2a", rpc_bytes("SendMessage", {
            "message": message("hi", metadata={"k": big})}), {}, None),
        ("SendMessage messageId", "/a2a", rpc_bytes("SendMessage", {
            "message": {**message(), "messageId": big}}), {}, -32602),
        ("SendMessage tenant", "/a2a", rpc_bytes("SendMessage", {
            "message": message(), "tenant": big}), {}, -32602),
        ("SendMessage webhook id", "/a2a", rpc_bytes("SendMessage", {
            "message": message(), "configuration": {"taskPushNotificationConfig": {
                "id": big, "url": "http://127.0.0.1:9/hook"}}}), {}, -32602),
        ("SendStreamingMessage text", "/a2a", rpc_bytes("SendStreamingMessage", {
            "message": message("flood 50 " + big)}), {}, None),
        ("GetTask id", "/a2a", rpc_bytes("GetTask", {"id": big}), {}, -32602),
        ("GetTask historyLength", "/a2a", rpc_bytes("GetTask", {
            "id": task_id, "historyLength": 10 ** 300}), {}, -32602),
        ("ListTasks contextId", "/a2a", rpc_bytes("ListTasks", {"contextId": big}), {}, -32602),
        ("ListTasks pageToken", "/a2a", rpc_bytes("ListTasks", {"pageToken": big}), {}, -32602),
        ("ListTasks tenant", "/a2a", rpc_bytes("ListTasks", {"tenant": big}), {}, -32602),
        ("CancelTask id", "/a2a", rpc_bytes("CancelTask", {"id": big}), {}, -32602),
        ("SubscribeToTask id", "/a2a", rpc_bytes("SubscribeToTask", {"id": big}), {}, -32602),
        ("CreateTaskPushNotificationConfig token", "/a2a", rpc_bytes(
            "CreateTaskPushNotificationConfig", {"taskId": task_id, **hook}), {}, -32602),
        ("CreateTaskPushNotificationConfig credentials", "/a2a", rpc_bytes(
            "CreateTaskPushNotificationConfig", {"taskId": task_id, **credentials}), {}, -32602),
        ("CreateTaskPushNotificationConfig url", "/a2a", rpc_bytes(
            "CreateTaskPushNotificationConfig", {"taskId": task_id,
                                                 "url": "http://127.0.0.1:9/" + big}), {},
         -32602),
        ("GetTaskPushNotificationConfig id", "/a2a", rpc_bytes(
            "GetTaskPushNotificationConfig", {"taskId": task_id, "id": big}), {}, -32602),
        ("ListTaskPushNotificationConfigs taskId", "/a2a", rpc_bytes(
            "ListTaskPushNotificationConfigs", {"taskId": big}), {}, -32602),
        ("DeleteTaskPushNotificationConfig id", "/a2a", rpc_bytes(
            "DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": big}), {}, -32602),
        ("GetExtendedAgentCard tenant", "/a2a", rpc_bytes("GetExtendedAgentCard",
                                                           {"tenant": big}), {}, -32602),
        ("unknown method", "/a2a", rpc_bytes(big, {}), {}, -32601),
        ("0.3 message/send", "/a2a", legacy("message/send", {"message": {
            "kind": "message", "role": "user", "messageId": new_id(),
            "parts": [{"kind": "text", "text": big}]}}), v03, None),
        ("0.3 tasks/get id", "/a2a", legacy("tasks/get", {"id": big}), v03, -32602),
        ("0.1 tasks/send id", "/a2a", legacy("tasks/send", {
            "id": big, "message": {"role": "user", "parts": [{"type": "text", "text": "hi"}]}}),
         {"A2A-Version": ""}, -32602),
        ("REST message:send", "/a2a/rest/message:send",
         json.dumps({"message": message(big)}).encode(), rest, None),
        ("REST message:stream", "/a2a/rest/message:stream",
         json.dumps({"message": message("flood 50 " + big)}).encode(), rest, None),
        ("REST push config", f"/a2a/rest/tasks/{task_id}/pushNotificationConfigs",
         json.dumps(hook).encode(), rest, 400),
        ("REST 0.3 message:send", "/a2a/rest/v1/message:send", json.dumps({"message": {
            "role": "ROLE_USER", "messageId": new_id(), "content": [{"text": big}]}}).encode(),
         {**rest, "A2A-Version": "0.3"}, None),
        ("REST cancel metadata", f"/a2a/rest/tasks/{task_id}:cancel",
         json.dumps({"metadata": {"k": big}}).encode(), rest, 400),  # finished: not cancelable
    ]


def outcome(path: str, status: int, answer: bytes) -> Optional[int]:
    """None for a result, else the JSON-RPC error code or the REST error status."""
    if answer.startswith(b"id:") or answer.startswith(b":"):
        return None  # a stream: its events are results
    body = json.loads(answer)
    if "/rest/" in path:
        return None if status == 200 else status
    return body["error"]["code"] if "error" in body else None


def test_no_request_family_answers_more_than_a_small_multiple_of_what_it_sent(server):
    task_id = finished_task(server, "echo")
    before = peak_kib(server)
    largest = 0
    costs = []
    for name, path, body, headers, expected in families(task_id):
        status, answer = post(server, body, path=path, headers=headers)
        assert b"Traceback" not in answer, name
        assert outcome(path, status, answer) == expected, (name, status, answer[:300])
        costs.append((name, len(body), len(answer)))
        assert len(answer) <= FACTOR * len(body) + SLACK, (name, len(body), len(answer))
        largest = max(largest, len(body))
    grown = (peak_kib(server) - before) * 1024
    # Each request is read, parsed and stored: a handful of copies of it at a time.
    assert grown <= 16 * largest + (32 << 20), (grown, costs)


@pytest.mark.parametrize("header", ["A2A-Extensions", "Last-Event-ID", "A2A-Version"])
def test_header_values_are_not_echoed_into_every_event(server, header):
    """Headers are bounded by gunicorn (8 KiB a field); none is repeated per event (an
    error may name a bad value in its message and its metadata)."""
    value = "h" * 8000
    body = rpc_bytes("SendStreamingMessage", {"message": message("flood 100")})
    status, answer = post(server, body, headers={header: value})
    assert answer.count(value.encode()) <= 2, header
    assert len(answer) < 100 * 1024 + SLACK
