"""The JSON-RPC router: one test (or case) per error stage, version and extension negotiation.

The stages (see :mod:`a2a_flask.web.jsonrpc`) are checked in order: content type
(-32005), JSON parsing (-32700), the request envelope (-32600), ``A2A-Version``
(-32009), method lookup (-32601), required extensions (-32008), params
(-32602) and unexpected failures (-32603).  Every error response is checked for
the same envelope: HTTP 200, ``application/json``, ``result`` xor ``error``,
and ``data`` entries that each carry ``@type`` with one ``google.rpc.ErrorInfo``.
"""
from __future__ import annotations

import json
import logging
from typing import Any, Dict, List, Optional, Union

import pytest
from flask import Flask
from flask.testing import FlaskClient

from a2a_flask import AgentCapabilities, AgentExtension

from tests.conftest import make_card
from tests.support import wire
from tests.support.helpers import V1, rpc_body, user_message, validate
from tests.support.wire import mimetype, rpc

ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
DOMAIN = "a2a-protocol.org"

#: The ErrorInfo reason each JSON-RPC code must carry.
REASONS = {
    -32700: "PARSE_ERROR",
    -32600: "INVALID_REQUEST",
    -32601: "METHOD_NOT_FOUND",
    -32602: "INVALID_PARAMS",
    -32603: "INTERNAL_ERROR",
    -32001: "TASK_NOT_FOUND",
    -32004: "UNSUPPORTED_OPERATION",
    -32005: "CONTENT_TYPE_NOT_SUPPORTED",
    -32008: "EXTENSION_SUPPORT_REQUIRED",
    -32009: "VERSION_NOT_SUPPORTED",
}

REQUIRED_EXT = "https://example.com/ext/required/v1"
OPTIONAL_EXT = "https://example.com/ext/optional/v1"

_UNSET = object()


# ------------------------------------------------------------------ helpers


def post_raw(client: FlaskClient, body: Union[bytes, str], *,
             content_type: Optional[str] = "application/json",
             headers: Optional[Dict[str, str]] = None, path: str = "/a2a"):
    """POST a raw body; ``content_type=None`` sends no Content-Type at all."""
    return wire.send(client, body, version="1.0" if headers is None else None,
                     content_type=content_type, headers=headers, path=path)


def post_json(client: FlaskClient, body: Any, *, headers: Optional[Dict[str, str]] = None,
              path: str = "/a2a"):
    """POST any JSON value (not necessarily a valid request)."""
    return post_raw(client, json.dumps(body), headers=headers, path=path)


def assert_error(response, code: int, request_id: Any = _UNSET) -> Dict[str, Any]:
    """Check the common JSON-RPC error envelope; return the ``error`` member."""
    assert response.status_code == 200, response.content
    assert mimetype(response) == "application/json"
    body = response.json()
    assert body["jsonrpc"] == "2.0"
    assert "result" not in body
    assert "id" in body
    if request_id is not _UNSET:
        assert body["id"] == request_id and type(body["id"]) is type(request_id)
    error = body["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    data = error["data"]
    assert isinstance(data, list) and data
    for entry in data:
        assert isinstance(entry, dict) and isinstance(entry.get("@type"), str), entry
    infos = [entry for entry in data if entry["@type"] == ERROR_INFO]
    assert len(infos) == 1, data
    info = infos[0]
    assert info["domain"] == DOMAIN
    assert info["reason"] == REASONS[code]
    for key, value in info.get("metadata", {}).items():
        assert isinstance(key, str) and isinstance(value, str), (key, value)
    return error


def error_info(error: Dict[str, Any]) -> Dict[str, Any]:
    return next(e for e in error["data"] if e["@type"] == ERROR_INFO)


def field_violations(error: Dict[str, Any]) -> List[Dict[str, str]]:
    """Every ``fieldViolations`` entry of the error's ``google.rpc.BadRequest`` details."""
    out: List[Dict[str, str]] = []
    for entry in error["data"]:
        if entry["@type"] == BAD_REQUEST:
            for violation in entry["fieldViolations"]:
                assert isinstance(violation["field"], str)
                assert isinstance(violation["description"], str) and violation["description"]
                out.append(violation)
    return out


def send_params(text: str = "hello", **extra: Any) -> Dict[str, Any]:
    return {"message": user_message(text), **extra}


# ------------------------------------------------------------------ fixtures


@pytest.fixture
def client(make_app) -> FlaskClient:
    """One memory-backed echo agent at ``/a2a`` (the store is irrelevant to routing)."""
    return make_app(store="memory://").test_client()


@pytest.fixture
def ext_app(make_app) -> Flask:
    card = make_card(capabilities=AgentCapabilities(streaming=True, extensions=[
        AgentExtension(uri=REQUIRED_EXT, description="must be on", required=True),
        AgentExtension(uri=OPTIONAL_EXT, description="may be on"),
    ]))
    return make_app(card=card, store="memory://")


@pytest.fixture
def optional_ext_client(make_app) -> FlaskClient:
    card = make_card(capabilities=AgentCapabilities(streaming=True, extensions=[
        AgentExtension(uri=OPTIONAL_EXT, description="may be on"),
    ]))
    return make_app(card=card, store="memory://").test_client()


# ------------------------------------------------------------------ success path


def test_send_message_with_v1_header_returns_valid_send_message_response(client):
    body = rpc(client, "SendMessage", send_params("ping"))
    assert body["jsonrpc"] == "2.0" and body["id"] == 1 and "error" not in body
    validate(body["result"], "Send Message Response")
    assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("content_type", [
    "application/json",
    "application/json; charset=utf-8",
    "application/a2a+json",
    "application/vnd.example+json",
])
def test_json_content_types_are_accepted(client, content_type):
    response = post_raw(client, json.dumps(rpc_body("SendMessage", send_params())),
                        content_type=content_type)
    assert response.status_code == 200
    body = response.json()
    assert "error" not in body, body
    validate(body["result"], "Send Message Response")


@pytest.mark.parametrize("request_id", ["req-42", "", 7, 0, -3, 2**40])
def test_result_echoes_request_id(client, request_id):
    body = rpc(client, "ListTasks", {}, request_id=request_id)
    assert body["id"] == request_id and type(body["id"]) is type(request_id)
    assert "error" not in body
    validate(body["result"], "List Tasks Response")


@pytest.mark.parametrize("request_id", ["req-42", 7])
def test_error_echoes_request_id(client, request_id):
    response = post_json(client, rpc_body("NoSuchMethod", {}, request_id))
    assert_error(response, -32601, request_id)


def test_unknown_members_in_params_are_ignored(client):
    params = {
        "message": {**user_message("extra"), "futureMember": {"x": 1},
                    "parts": [{"text": "extra", "futurePartMember": True}]},
        "configuration": {"historyLength": 5, "futureConfig": "yes"},
        "somethingNew": [1, 2, 3],
    }
    body = rpc(client, "SendMessage", params)
    assert "error" not in body, body
    validate(body["result"], "Send Message Response")
    assert body["result"]["task"]["artifacts"][0]["parts"] == [{"text": "extra"}]


def test_unknown_top_level_envelope_members_are_ignored(client):
    response = post_json(client, {**rpc_body("ListTasks", {}), "extra": "ignored"})
    body = response.json()
    assert "error" not in body, body
    validate(body["result"], "List Tasks Response")


# ------------------------------------------------------------------ stage 1: content type


@pytest.mark.parametrize("content_type", [
    "text/plain",
    None,
    "application/x-www-form-urlencoded",
])
def test_non_json_content_type_is_32005_echoing_the_id_of_a_json_body(client, content_type):
    response = post_raw(client, json.dumps(rpc_body("SendMessage", send_params(), "ct-1")),
                        content_type=content_type)
    error = assert_error(response, -32005, "ct-1")
    assert "contentType" in error_info(error)["metadata"]


@pytest.mark.parametrize("raw", [
    b"{not json",
    b'[{"jsonrpc": "2.0", "id": 1, "method": "ListTasks"}]',
    b'{"jsonrpc": "2.0", "id": true, "method": "ListTasks"}',
    b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ListTasks"}',
    b'{"jsonrpc": "2.0", "method": "ListTasks"}',
], ids=["not-json", "batch", "bool-id", "object-id", "no-id"])
def test_content_type_comes_first_and_an_unreadable_id_is_null(client, raw):
    assert_error(post_raw(client, raw, content_type="text/plain"), -32005, None)


def test_wrong_content_type_with_an_oversized_body_is_still_32005(make_app):
    client = make_app(store="memory://", max_content_length=64).test_client()
    body = json.dumps(rpc_body("SendMessage", send_params("x" * 200), "big"))
    assert_error(post_raw(client, body, content_type="text/plain"), -32005, None)


# ------------------------------------------------------------------ stage 2: JSON


@pytest.mark.parametrize("raw", [
    b"{",
    b"not json at all",
    b"",
    b'{"jsonrpc": "2.0", "id": 1, "method": "ListTasks",}',
    b"{'jsonrpc': '2.0'}",
], ids=["truncated", "text", "empty", "trailing-comma", "single-quotes"])
def test_invalid_json_is_32700_with_null_id(client, raw):
    assert_error(post_raw(client, raw), -32700, None)


def test_invalid_utf8_is_32700_with_null_id(client):
    raw = b'{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"contextId": "\xff\xfe"}}'
    assert_error(post_raw(client, raw), -32700, None)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_standard_json_constants_are_32700(client, literal):
    raw = '{"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {"pageSize": %s}}' % literal
    assert_error(post_raw(client, raw), -32700, None)


# ------------------------------------------------------------------ stage 3: envelope


@pytest.mark.parametrize("body, request_id", [
    ([], None),
    ([rpc_body("ListTasks", {})], None),
    (42, None),
    ("ListTasks", None),
    (None, None),
    ({"id": 1, "method": "ListTasks"}, 1),
    ({"jsonrpc": "1.0", "id": 1, "method": "ListTasks"}, 1),
    ({"jsonrpc": 2.0, "id": "x", "method": "ListTasks"}, "x"),
    ({"jsonrpc": "2.0", "method": "ListTasks"}, None),
    ({"jsonrpc": "2.0", "id": None, "method": "ListTasks"}, None),
    ({"jsonrpc": "2.0", "id": True, "method": "ListTasks"}, None),
    ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ListTasks"}, None),
    ({"jsonrpc": "2.0", "id": [1], "method": "ListTasks"}, None),
    ({"jsonrpc": "2.0", "id": 1}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": 5}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": ""}, 1),
    ({"jsonrpc": "2.0", "id": 1, "method": ["ListTasks"]}, 1),
], ids=["empty-batch", "batch", "number", "string", "null", "no-jsonrpc", "jsonrpc-1.0",
        "jsonrpc-number", "notification", "null-id", "bool-id", "object-id", "array-id",
        "no-method", "int-method", "empty-method", "array-method"])
def test_invalid_request_is_32600(client, body, request_id):
    assert_error(post_json(client, body), -32600, request_id)


@pytest.mark.parametrize("body, field", [
    ({"jsonrpc": "2.0", "method": "ListTasks"}, "id"),
    ({"jsonrpc": "2.0", "id": False, "method": "ListTasks"}, "id"),
    ({"jsonrpc": "1.0", "id": 1, "method": "ListTasks"}, "jsonrpc"),
    ({"jsonrpc": "2.0", "id": 1, "method": 3}, "method"),
])
def test_invalid_request_names_the_faulty_member(client, body, field):
    error = assert_error(post_json(client, body), -32600)
    assert [v["field"] for v in field_violations(error)] == [field]


# ------------------------------------------------------------------ other verbs


@pytest.mark.parametrize("verb", ["GET", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("path", ["/a2a", "/a2a/"])
def test_other_verbs_on_the_endpoint_are_405_with_a_json_rpc_error(client, verb, path):
    response = client.open(path, method=verb)
    assert response.status_code == 405, response.data
    assert response.headers["Allow"] == "POST"
    assert response.mimetype == "application/json"
    body = response.get_json()
    assert set(body) == {"jsonrpc", "id", "error"} and body["id"] is None
    assert body["error"]["code"] == -32600
    assert error_info(body["error"])["reason"] == "INVALID_REQUEST"


def test_with_an_empty_prefix_the_apps_own_root_routes_keep_their_verbs(make_app):
    app = make_app(store="memory://", url_prefix="")
    app.add_url_rule("/", "index", lambda: "home")
    client = app.test_client()
    assert client.get("/").data == b"home"
    assert_error(post_json(client, rpc_body("NoSuchMethod", {}, "r"), path="/"), -32601, "r")


def test_other_verbs_under_the_endpoint_keep_the_rest_error_shape(client):
    response = client.open("/a2a/nowhere", method="GET")
    assert response.status_code == 404 and "error" in response.get_json()
    assert "jsonrpc" not in response.get_json()


# ------------------------------------------------------------------ requests without an id


@pytest.mark.parametrize("body, headers, code", [
    ({"jsonrpc": "2.0", "method": "message/ssend", "params": {}}, {}, -32601),
    ({"jsonrpc": "2.0", "method": "message/send", "params": {"": "not_a_dict"}}, {}, -32602),
    ({"jsonrpc": "2.0", "method": "tasks/get", "params": {"id": 5}}, {}, -32602),
    ({"jsonrpc": "2.0", "method": "NoSuchMethod", "params": {}}, V1, -32601),
    ({"jsonrpc": "2.0", "method": "GetTask", "params": {"historyLength": "x"}}, V1, -32602),
    ({"jsonrpc": "2.0", "method": "GetTask", "params": {"id": "t"}}, {"A2A-Version": "9.9"},
     -32009),
    ({"jsonrpc": "2.0", "id": None, "method": "message/ssend"}, {}, -32601),
], ids=["0.3-unknown-method", "0.3-bad-params", "0.3-bad-id-type", "1.0-unknown-method",
        "1.0-bad-params", "bad-version", "null-id-unknown-method"])
def test_without_id_the_method_and_params_are_checked_first(client, body, headers, code):
    assert_error(post_json(client, body, headers=headers), code, None)


@pytest.mark.parametrize("method, params, headers", [
    ("message/send", {"message": {"kind": "message", "messageId": "n-1", "role": "user",
                                  "parts": [{"kind": "text", "text": "hi"}]}}, {}),
    ("SendMessage", send_params("hi"), V1),
    ("tasks/send", {"id": "notified-01", "message": {"role": "user",
                                                     "parts": [{"type": "text", "text": "hi"}]}},
     {}),
])
def test_a_valid_request_without_id_is_refused_and_starts_nothing(make_app, method, params,
                                                                  headers):
    calls: List[str] = []
    client = make_app(lambda ctx: calls.append(ctx.text), store="memory://").test_client()
    body = {"jsonrpc": "2.0", "method": method, "params": params}
    error = assert_error(post_json(client, body, headers=headers), -32600, None)
    assert [v["field"] for v in field_violations(error)] == ["id"]
    listed = rpc(client, "ListTasks", {})["result"]
    assert listed["tasks"] == [] and calls == []


def test_a_batch_of_requests_without_ids_is_still_32600(client):
    batch = [{"jsonrpc": "2.0", "method": "message/ssend", "params": {}}]
    assert_error(post_json(client, batch, headers={}), -32600, None)


def test_envelope_is_checked_before_version(client):
    """A batch without any A2A-Version is still -32600, not -32009."""
    assert_error(post_json(client, [rpc_body("ListTasks")], headers={}), -32600, None)


# ------------------------------------------------------------------ stage 4: version


@pytest.mark.parametrize("headers, path", [
    ({"A2A-Version": "1.0"}, "/a2a"),
    ({"A2A-Version": "1.0.1"}, "/a2a"),
    ({"A2A-Version": " 1.0 "}, "/a2a"),
    ({"a2a-version": "1.0"}, "/a2a"),
    ({"A2A-VERSION": "1.0.7"}, "/a2a"),
    ({}, "/a2a?A2A-Version=1.0"),
    ({}, "/a2a?A2A-Version=1.0.1"),
], ids=["1.0", "patch", "spaces", "lowercase-header", "uppercase-header", "query", "query-patch"])
def test_served_versions_get_1_0_semantics(client, headers, path):
    response = post_json(client, rpc_body("SendMessage", send_params("v")), headers=headers,
                         path=path)
    body = response.json()
    assert "error" not in body, body
    validate(body["result"], "Send Message Response")


def test_missing_version_means_0_3_and_is_32009_naming_supported_versions(client):
    response = post_json(client, rpc_body("SendMessage", send_params()), headers={})
    error = assert_error(response, -32009, 1)
    metadata = error_info(error)["metadata"]
    assert "1.0" in metadata["supportedVersions"].split(", ")
    assert "0.3" in error["message"]


def test_empty_version_header_is_read_as_0_3(client):
    response = post_json(client, rpc_body("ListTasks", {}), headers={"A2A-Version": ""})
    assert_error(response, -32009, 1)


@pytest.mark.parametrize("version", ["0.5", "9.9", "garbage", "0.3", "1.1", "2.0", "1", "v1.0"])
def test_unsupported_versions_are_32009(client, version):
    response = post_json(client, rpc_body("ListTasks", {}), headers={"A2A-Version": version})
    error = assert_error(response, -32009, 1)
    metadata = error_info(error)["metadata"]
    assert metadata["requestedVersion"] == version
    assert "1.0" in metadata["supportedVersions"]


def test_unsupported_query_version_is_32009(client):
    response = post_json(client, rpc_body("ListTasks", {}), headers={},
                         path="/a2a?A2A-Version=9.9")
    assert_error(response, -32009, 1)


@pytest.mark.parametrize("method", ["NoSuchMethod", "message/send", "SendMessage"])
def test_version_is_checked_before_method_lookup(client, method):
    response = post_json(client, rpc_body(method, send_params()), headers={"A2A-Version": "9.9"})
    assert_error(response, -32009, 1)


@pytest.mark.parametrize("method", ["message/send", "tasks/get", "tasks/send"])
def test_a_0x_method_under_version_1_0_is_32009_naming_the_version_to_send(client, method):
    error = assert_error(post_json(client, rpc_body(method, send_params())), -32009, 1)
    assert error_info(error)["metadata"]["methodVersion"] == "0.3"
    assert "A2A-Version: 0.3" in error["message"]


def test_a_1_0_method_without_a_version_header_is_32009(client):
    error = assert_error(post_json(client, rpc_body("SendMessage", send_params()), headers={}),
                         -32009, 1)
    assert error_info(error)["metadata"]["methodVersion"] == "1.0"
    assert "A2A-Version: 1.0" in error["message"]


def test_lenient_version_serves_a_1_0_method_without_a_header(make_app):
    client = make_app(lenient_version=True).test_client()
    body = post_json(client, rpc_body("SendMessage", send_params()), headers={}).json()
    assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_unknown_method_without_a_header_is_32601(client):
    assert_error(post_json(client, rpc_body("NoSuchMethod", send_params()), headers={}), -32601, 1)


# ------------------------------------------------------------------ stage 5: method


@pytest.mark.parametrize("method", [
    "NoSuchMethod", "sendMessage", "sendmessage", "SENDMESSAGE", "message/Send",
    "SendMessage ", "__init__", "get",
])
def test_unknown_or_miscased_method_is_32601(client, method):
    error = assert_error(post_json(client, rpc_body(method, send_params())), -32601, 1)
    assert error_info(error)["metadata"]["method"] == method


# ------------------------------------------------------------------ stage 6: extensions


def test_missing_required_extension_is_32008(ext_app):
    response = post_json(ext_app.test_client(), rpc_body("SendMessage", send_params()))
    error = assert_error(response, -32008, 1)
    assert error_info(error)["metadata"]["extensions"] == REQUIRED_EXT
    assert "A2A-Extensions" not in response.headers


@pytest.mark.parametrize("header", ["A2A-Extensions", "a2a-extensions", "X-A2A-Extensions"])
def test_required_extension_sent_is_accepted_and_echoed(ext_app, header):
    response = post_json(ext_app.test_client(), rpc_body("SendMessage", send_params()),
                         headers={**V1, header: REQUIRED_EXT})
    body = response.json()
    assert "error" not in body, body
    validate(body["result"], "Send Message Response")
    assert response.headers["A2A-Extensions"] == REQUIRED_EXT


def test_echo_lists_every_activated_extension_and_drops_unknown_ones(ext_app):
    response = post_json(ext_app.test_client(), rpc_body("ListTasks", {}), headers={
        **V1, "A2A-Extensions": f"https://unknown.example/ext, {REQUIRED_EXT},{OPTIONAL_EXT}"})
    body = response.json()
    assert "error" not in body, body
    validate(body["result"], "List Tasks Response")
    echoed = [uri.strip() for uri in response.headers["A2A-Extensions"].split(",")]
    assert sorted(echoed) == sorted([REQUIRED_EXT, OPTIONAL_EXT])


def test_unknown_requested_extension_is_ignored(optional_ext_client):
    response = post_json(optional_ext_client, rpc_body("SendMessage", send_params()),
                         headers={**V1, "A2A-Extensions": "https://unknown.example/ext"})
    body = response.json()
    assert "error" not in body, body
    validate(body["result"], "Send Message Response")
    assert "A2A-Extensions" not in response.headers


def test_optional_extension_requested_is_echoed(optional_ext_client):
    response = post_json(optional_ext_client, rpc_body("ListTasks", {}),
                         headers={**V1, "A2A-Extensions": OPTIONAL_EXT})
    body = response.json()
    assert "error" not in body, body
    validate(body["result"], "List Tasks Response")
    assert response.headers["A2A-Extensions"] == OPTIONAL_EXT


def test_method_lookup_comes_before_extension_check(ext_app):
    response = post_json(ext_app.test_client(), rpc_body("sendMessage", send_params()))
    assert_error(response, -32601, 1)


def test_extension_check_comes_before_params(ext_app):
    response = post_json(ext_app.test_client(), rpc_body("SendMessage", {"message": {}}))
    assert_error(response, -32008, 1)


# ------------------------------------------------------------------ stage 7: params


def _message(**changes: Any) -> Dict[str, Any]:
    message = user_message("hi")
    for key, value in changes.items():
        if value is _UNSET:
            message.pop(key)
        else:
            message[key] = value
    return message


@pytest.mark.parametrize("method, params, field", [
    ("SendMessage", {}, "message"),
    ("SendMessage", None, "message"),
    ("SendMessage", {"message": None}, "message"),
    ("SendMessage", {"message": "hi"}, "message"),
    ("SendMessage", {"message": _message(parts=[])}, "message.parts"),
    ("SendMessage", {"message": _message(parts=_UNSET)}, "message.parts"),
    ("SendMessage", {"message": _message(messageId=_UNSET)}, "message.messageId"),
    ("SendMessage", {"message": _message(messageId="")}, "message.messageId"),
    ("SendMessage", {"message": _message(messageId=5)}, "message.messageId"),
    ("SendMessage", {"message": _message(role="ROLE_UNSPECIFIED")}, "message.role"),
    ("SendMessage", {"message": _message(role=0)}, "message.role"),
    ("SendMessage", {"message": _message(role="user")}, "message.role"),
    ("SendMessage", {"message": _message(role="ROLE_AGENT")}, "message.role"),
    ("SendMessage", {"message": _message(parts="hi")}, "message.parts"),
    ("SendMessage", {"message": _message(parts=[{"text": 5}])}, "message.parts[0].text"),
    ("SendMessage", {"message": _message(parts=[{}])}, "message.parts[0]"),
    ("SendMessage", {"message": _message(parts=[{"text": "a", "url": "b"}])},
     "message.parts[0]"),
    ("SendMessage", {"message": _message(parts=[{"raw": "%%%"}])}, "message.parts[0].raw"),
    ("SendMessage", {"message": _message(contextId=7)}, "message.contextId"),
    ("SendMessage", {"message": _message(), "configuration": "x"}, "configuration"),
    ("SendMessage", {"message": _message(), "configuration": {"historyLength": "ten"}},
     "configuration.historyLength"),
    ("SendMessage", {"message": _message(), "configuration": {"historyLength": 1.5}},
     "configuration.historyLength"),
    ("SendMessage", {"message": _message(), "configuration": {"historyLength": -1}},
     "configuration.historyLength"),
    ("SendMessage", {"message": _message(), "configuration": {"returnImmediately": "yes"}},
     "configuration.returnImmediately"),
    ("SendMessage", {"message": _message(), "metadata": [1]}, "metadata"),
    ("SendMessage", [user_message()], "params"),
    ("SendMessage", "hello", "params"),
    ("GetTask", {}, "id"),
    ("GetTask", {"id": 3}, "id"),
    ("ListTasks", {"pageSize": True}, "pageSize"),
    ("ListTasks", {"status": "done"}, "status"),
    ("CancelTask", [], "params"),
])
def test_bad_params_are_32602_with_field_violation(client, method, params, field):
    response = post_json(client, rpc_body(method, params, "p-1"))
    error = assert_error(response, -32602, "p-1")
    violations = field_violations(error)
    assert field in [v["field"] for v in violations], violations


def test_every_bad_field_is_reported_at_once(client):
    params = {"message": {"role": "ROLE_UNSPECIFIED", "parts": []}}
    error = assert_error(post_json(client, rpc_body("SendMessage", params)), -32602, 1)
    fields = {v["field"] for v in field_violations(error)}
    assert {"message.messageId", "message.role", "message.parts"} <= fields


def test_number_too_large_for_a_float_is_32602_not_internal_error(client):
    raw = '{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"t","historyLength":1e400}}'
    error = assert_error(post_raw(client, raw), -32602, 1)
    assert "historyLength" in [v["field"] for v in field_violations(error)]


# ------------------------------------------------------------------ stage 8: operations


def test_unknown_task_is_32001_with_task_id_metadata(client):
    error = assert_error(post_json(client, rpc_body("GetTask", {"id": "nope"})), -32001, 1)
    assert error_info(error)["metadata"]["taskId"] == "nope"


def test_unexpected_exception_is_32603_without_traceback_and_logged(make_app, monkeypatch,
                                                                     caplog):
    app = make_app(store="memory://")
    service = app.extensions["a2a"]["a2a"].service

    def explode(request, ctx):
        raise RuntimeError("secret-detail-1234 in /srv/app/internal.py")

    monkeypatch.setattr(service, "get_task", explode)
    with caplog.at_level(logging.ERROR, logger="a2a_flask"):
        response = post_json(app.test_client(), rpc_body("GetTask", {"id": "t"}, "boom"))
    error = assert_error(response, -32603, "boom")
    wire = response.text
    assert "secret-detail-1234" not in wire
    assert "Traceback" not in wire and "RuntimeError" not in wire and ".py" not in wire
    assert error["message"] == "Internal error"
    logged = [r for r in caplog.records if r.exc_info and r.levelno >= logging.ERROR]
    assert logged, "the failure was not logged with its traceback"
    assert "secret-detail-1234" in caplog.text and "Traceback" in caplog.text


def test_unexpected_exception_does_not_break_the_next_request(make_app, monkeypatch):
    app = make_app(store="memory://")
    service = app.extensions["a2a"]["a2a"].service
    monkeypatch.setattr(service, "list_tasks", lambda request, ctx: 1 / 0)
    client = app.test_client()
    assert_error(post_json(client, rpc_body("ListTasks", {})), -32603, 1)
    body = rpc(client, "SendMessage", send_params("still alive"))
    validate(body["result"], "Send Message Response")
