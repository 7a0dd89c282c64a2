"""What strict clients and conformance kits check, against the conformance agent under
a real ``gunicorn -k gevent``, set up as the kits run it:
``FLASK_A2A_PUSH_ALLOWED_HOSTS=example.com`` and ``FLASK_A2A_LEGACY_CARD=0``.

* a REST body that is not JSON by its Content-Type: 415 with the JSON error body;
* every verb but POST on the JSON-RPC URL: 405, ``Allow: POST``, a JSON-RPC error;
* JSON-RPC errors echo a readable id (also -32005); requests without an id are
  checked for method and params first;
* 0.3 ``tasks/resubscribe`` on an unknown or finished task: one SSE error event,
  then the stream ends; 1.0 ``SubscribeToTask`` answers a plain error;
* the card is the pure 1.0 card;
* the 0.3 kits' ``test-`` messageIds: INPUT_REQUIRED, continued or canceled;
* webhooks on a listed host that does not resolve here are registered on every
  binding and generation; unlisted ones that do not resolve are refused.
"""
from __future__ import annotations

import json
import uuid
from typing import Any, Dict, Iterator, List, Optional

import pytest
import requests

from tests.support.helpers import LEGACY_CARD_MEMBERS, V1, Server, parse_sse, rpc_body, validate

TIMEOUT = 10
#: Allowed by the server's configuration; it does not resolve on an offline machine,
#: and is not looked up at registration anyway.
ALLOWED = "example.com"
#: RFC 6761: resolves nowhere, and is not listed.
UNLISTED = "hooks.conformance.invalid"


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    env = {"FLASK_A2A_PUSH_ALLOWED_HOSTS": ALLOWED, "FLASK_A2A_LEGACY_CARD": "0"}
    with Server("examples.conformance_agent:app", env=env) as running:
        yield running


def post(server: Server, path: str, body: Any, *, headers: Optional[Dict[str, str]] = None,
         content_type: str = "application/json", **kwargs: Any) -> requests.Response:
    data = body if isinstance(body, bytes) else json.dumps(body)
    return requests.post(server.url + path, data=data, timeout=TIMEOUT,
                         headers={"Content-Type": content_type, **(headers or {})}, **kwargs)


def rpc03(server: Server, method: str, params: Any, request_id: Any = 1) -> Dict[str, Any]:
    """A 0.3 JSON-RPC call as a 0.3 kit sends it (no A2A-Version)."""
    response = post(server, "/a2a", rpc_body(method, params, request_id))
    assert response.status_code == 200 and response.headers["Content-Type"].startswith(
        "application/json"), response.text
    return response.json()


def message03(message_id: str, text: str = "hi", **extra: Any) -> Dict[str, Any]:
    return {"kind": "message", "messageId": message_id, "role": "user",
            "parts": [{"kind": "text", "text": text}], **extra}


def test_rest_bodies_that_are_not_json_are_415(server):
    body = b'{"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "x"}]}}'
    for path in ("/a2a/rest/message:send", "/a2a/rest/acme/message:send",
                 "/a2a/rest/v1/message:send", "/a2a/rest/tasks/t1:cancel"):
        response = post(server, path, body, content_type="text/plain")
        assert response.status_code == 415, (path, response.status_code, response.text)
        assert response.headers["Content-Type"].startswith("application/json")
        error = response.json()["error"]
        assert error["code"] == 415 and error["status"] == "INVALID_ARGUMENT"
        assert error["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"


@pytest.mark.parametrize("verb", ["GET", "PUT", "DELETE", "PATCH"])
def test_other_verbs_on_the_jsonrpc_url_are_405_in_json_rpc(server, verb):
    response = requests.request(verb, server.url + "/a2a", timeout=TIMEOUT)
    assert response.status_code == 405
    assert response.headers["Allow"] == "POST"
    assert response.headers["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None and "result" not in body
    assert body["error"]["code"] == -32600


def test_wrong_content_type_echoes_the_id_and_id_less_requests_are_checked_first(server):
    response = post(server, "/a2a", rpc_body("message/send", {}, "ct-1"),
                    content_type="text/plain")
    body = response.json()
    assert (response.status_code, body["id"], body["error"]["code"]) == (200, "ct-1", -32005)
    for sent, code in (
            ({"jsonrpc": "2.0", "method": "message/ssend", "params": {}}, -32601),
            ({"jsonrpc": "2.0", "method": "message/send", "params": {"": "not_a_dict"}}, -32602),
            ({"jsonrpc": "2.0", "method": "message/send",
              "params": {"message": message03("tck-complete-task-x")}}, -32600)):
        body = post(server, "/a2a", sent).json()
        assert body["id"] is None and body["error"]["code"] == code, (sent, body)


def read_stream(response: requests.Response) -> List[Dict[str, Any]]:
    """Every event of a stream, read until the server ends it (bounded by TIMEOUT)."""
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream"), response.text
    return parse_sse(response.text)


def test_0_3_resubscribe_to_an_unknown_or_finished_task_is_one_error_event(server):
    done = rpc03(server, "message/send", {"message": message03("tck-complete-task-1")})["result"]
    assert done["status"]["state"] == "completed"
    for task_id, code in ((done["id"], -32004), ("no-such-task", -32001)):
        response = post(server, "/a2a", rpc_body("tasks/resubscribe", {"id": task_id}, "rs-1"),
                        stream=True)
        with response:
            events = read_stream(response)
        assert len(events) == 1 and "event" not in events[0], events
        data = events[0]["data"]
        assert data["id"] == "rs-1" and data["error"]["code"] == code
        validate(data, "SendStreamingMessageResponse", "v0.3")
    # 1.0 keeps the plain error response.
    response = post(server, "/a2a", rpc_body("SubscribeToTask", {"id": done["id"]}), headers=V1)
    assert response.headers["Content-Type"].startswith("application/json")
    assert response.json()["error"]["code"] == -32004


def test_the_strict_card_is_the_pure_1_0_card(server):
    card = requests.get(server.url + "/.well-known/agent-card.json", timeout=TIMEOUT).json()
    validate(card, "Agent Card")
    assert not set(card) & set(LEGACY_CARD_MEMBERS)
    assert card["supportedInterfaces"][0]["protocolVersion"] == "1.0"


def test_0_3_kit_test_ids_wait_for_input_then_complete_or_cancel(server):
    first = rpc03(server, "message/send", {"message": message03("test-continue-1")})["result"]
    assert first["status"]["state"] == "input-required"
    follow_up = message03("test-continue-2", "more", taskId=first["id"],
                          contextId=first["contextId"])
    done = rpc03(server, "message/send", {"message": follow_up})["result"]
    assert done["id"] == first["id"] and done["status"]["state"] == "completed"
    # A follow-up with any id completes it too; an open one can be canceled.
    other = rpc03(server, "message/send", {"message": message03("test-cancel-1")})["result"]
    assert other["status"]["state"] == "input-required"
    canceled = rpc03(server, "tasks/cancel", {"id": other["id"]})["result"]
    assert canceled["status"]["state"] == "canceled"
    third = rpc03(server, "message/send", {"message": message03("test-uuid-less")})["result"]
    plain = message03(str(uuid.uuid4()), "answer", taskId=third["id"])
    assert rpc03(server, "message/send", {"message": plain})["result"]["status"]["state"] \
        == "completed"
    # The existing rule is unchanged: the resubscribe id still works for ~4.5 s.
    slow = rpc03(server, "message/send", {"message": message03("test-resubscribe-message-id"),
                                          "configuration": {"blocking": False}})["result"]
    assert slow["status"]["state"] in ("submitted", "working")
    rpc03(server, "tasks/cancel", {"id": slow["id"]})


def _accepted(response: requests.Response) -> bool:
    """True for a registration that succeeded; an assertion for anything but -32602/400."""
    body = response.json()
    if response.status_code == 200 and "error" not in body:
        return True
    if "jsonrpc" in body:
        assert body["error"]["code"] == -32602, body
    else:
        assert (response.status_code, body["error"]["details"][0]["reason"]) == (
            400, "INVALID_PARAMS"), body
    assert "could not be resolved" in str(body), body
    return False


def test_webhooks_on_a_listed_unresolvable_host_register_on_every_binding(server):
    task = rpc03(server, "message/send", {"message": message03("tck-complete-task-2")})["result"]
    t = task["id"]
    ways = {
        "1.0 JSON-RPC": lambda url: post(server, "/a2a", rpc_body(
            "CreateTaskPushNotificationConfig", {"taskId": t, "url": url}), headers=V1),
        "1.0 REST": lambda url: post(server, f"/a2a/rest/tasks/{t}/pushNotificationConfigs",
                                     {"url": url}),
        "0.3 JSON-RPC": lambda url: post(server, "/a2a", rpc_body(
            "tasks/pushNotificationConfig/set",
            {"taskId": t, "pushNotificationConfig": {"url": url}})),
        "0.3 REST": lambda url: post(server, f"/a2a/rest/v1/tasks/{t}/pushNotificationConfigs",
                                     {"config": {"pushNotificationConfig": {"url": url}}}),
        "0.1 JSON-RPC": lambda url: post(server, "/a2a", rpc_body(
            "tasks/pushNotification/set", {"id": t, "pushNotificationConfig": {"url": url}})),
    }
    for name, register in ways.items():
        assert _accepted(register(f"https://{ALLOWED}/hooks/{uuid.uuid4().hex}")), name
        assert not _accepted(register(f"https://{UNLISTED}/hook")), name
