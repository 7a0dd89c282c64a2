"""The HTTP+JSON (REST) binding against raw bytes on a real gunicorn, and the regression
tests of the bugs the REST fuzzing found (test_fuzz_rest.py).
"""
from __future__ import annotations

import json
import random
import socket
import time
from typing import Dict, List, Optional, Tuple
from urllib.parse import urlencode

import pytest
import requests

from tests.support.fuzz_rpc import RpcWorld
from tests.support.fuzzkit import ALICE, ROOT, SEED_WORKING, V03, overflowing_timestamps
from tests.support.helpers import Server

pytestmark = pytest.mark.declare(server=["fuzz_server"])



# ================================================================== a real server, raw bytes


def raw_exchange(port: int, payload: bytes, *, half_close: bool = True,
                 timeout: float = 5.0) -> bytes:
    """Send raw bytes to the server; everything it answers until it closes (or goes quiet)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server answered (413) and closed before the body was sent
            pass
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def http_request(method: str, path: str, body: bytes, *, length: Optional[int] = None,
                 content_type: str = "application/json", extra: str = "",
                 chunked: bool = False) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
            f"Content-Type: {content_type}", "Authorization: Bearer alice-token"]
    if path == "/a2a":
        head.append("A2A-Version: 1.0")
    if chunked:
        head.append("Transfer-Encoding: chunked")
    else:
        head.append(f"Content-Length: {len(body) if length is None else length}")
    if extra:
        head.append(extra)
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def hostile_payloads(rng: random.Random) -> List[Tuple[str, bytes]]:
    """A few hundred hostile HTTP requests with well-formed heads (bodies lie)."""
    valid = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "raw"}]}}}).encode()
    get = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "GetTask",
                      "params": {"id": "no-such-task"}}).encode()
    rest_send = json.dumps({"message": {"messageId": "m", "role": "ROLE_USER",
                                        "parts": [{"text": "raw"}]}}).encode()
    targets = [("/a2a", valid), ("/a2a", get), ("/a2a/rest/message:send", rest_send),
               ("/a2a/rest/tasks/x:cancel", b"{}"),
               ("/a2a/rest/v1/message:send", rest_send.replace(b"parts", b"content"))]
    payloads: List[Tuple[str, bytes]] = []
    for _ in range(70):  # bodies cut short of what Content-Length promises
        path, body = rng.choice(targets)
        cut = rng.randrange(0, len(body))
        payloads.append(("truncated", http_request("POST", path, body[:cut], length=len(body))))
    for _ in range(40):  # Content-Length shorter than the body (the rest is junk)
        path, body = rng.choice(targets)
        payloads.append(("short length", http_request(
            "POST", path, body, length=rng.randrange(0, len(body)))))
    for _ in range(40):  # random bytes as bodies, honest lengths
        path, _ = rng.choice(targets)
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        payloads.append(("junk body", http_request("POST", path, junk)))
    for _ in range(30):  # invalid UTF-8 and NUL inside otherwise valid JSON (UTF-8 encoded
        # surrogates, which json.loads lets through: test_utf8_encoded_surrogates_are_a_parse_error)
        path, body = rng.choice(targets)
        pos = rng.randrange(len(body))
        bad = body[:pos] + rng.choice([b"\xff", b"\xc3", b"\x00", b"\xc0\xaf"]) + body[pos:]
        payloads.append(("bad utf-8", http_request("POST", path, bad)))
    for size in (MAX_BODY_SERVER + 1, 2 * MAX_BODY_SERVER, 3_000_000):
        for path, _ in targets[:3]:  # oversized, announced honestly
            payloads.append(("oversized", http_request("POST", path, b"x" * size)))
    for path, _ in targets[:3]:  # oversized by announcement only (the body never comes)
        payloads.append(("announced huge", http_request("POST", path, b"{", length=10**12)))
        payloads.append(("negative length", http_request("POST", path, b"{}", length=-1)))
    for _ in range(30):  # chunked bodies holding cut JSON; every one properly terminated
        # (a chunked body cut short: test_a_truncated_chunked_body_is_an_invalid_request)
        path, body = rng.choice(targets)
        chunk = body[:rng.randrange(0, len(body) + 1)]
        framed = (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" if chunk else b"")
        payloads.append(("chunked", http_request("POST", path, framed + b"0\r\n\r\n",
                                                 chunked=True)))
    for path, _ in targets[:3]:  # chunked and oversized
        big = b"x" * (MAX_BODY_SERVER + 10)
        framed = f"{len(big):x}\r\n".encode() + big + b"\r\n0\r\n\r\n"
        payloads.append(("chunked oversized", http_request("POST", path, framed, chunked=True)))
    for _ in range(20):  # wrong content types and hostile headers, valid JSON-RPC body
        path, body = rng.choice(targets)
        payloads.append(("headers", http_request(
            "POST", path, body, content_type=rng.choice(["text/html", "", "a/b+json;x=\"", "*"]),
            extra=rng.choice(["A2A-Extensions: " + "x," * 500, "X-Forwarded-For: ../../",
                              "Last-Event-ID: -1", "Expect: 100-continue"]))))
    for verb in ("GET", "PUT", "DELETE", "PATCH"):  # every verb on REST routes
        for path, body in targets[2:]:
            payloads.append(("verb", http_request(verb, path, body)))
    return payloads


MAX_BODY_SERVER = 64 * 1024


def _split_response(raw: bytes) -> Tuple[int, Dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    while head.split(b" ", 2)[1:2] == [b"100"]:  # an interim 100 Continue
        head, _, body = body.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        decoded, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            decoded, rest = decoded + rest[:size], rest[size + 2:]
        body = decoded
    return status, headers, body


@pytest.fixture(scope="module")
def fuzz_server():
    """gunicorn -k gevent running tests/support/fuzz_server_app.py (bearer auth, small body limit)."""
    with Server("tests.support.fuzz_server_app:app", env={"FUZZ_MAX_BODY": str(MAX_BODY_SERVER)}) as server:
        yield server


#: gunicorn's own answer to a request it cannot frame (a bad Content-Length): the app
#: never sees it, so it is not the app's JSON.
GUNICORN_REFUSAL = b"<title>Bad Request</title>"


def test_raw_hostile_bytes_against_gunicorn(fuzz_server):
    """A real ``gunicorn -k gevent``: a few hundred requests whose bodies are truncated,
    shorter or longer than their Content-Length says, oversized, chunked and cut, or
    junk.  Whatever the app answers is a non-5xx JSON error without a traceback (a
    request gunicorn itself refuses gets its own 400, and a body that never comes
    gets no answer), and the server still serves afterwards."""
    rng = random.Random(6)  # fixed seed: the same payloads on every run
    payloads = hostile_payloads(rng)
    assert len(payloads) >= 250
    problems: List[str] = []
    answered = 0
    server = fuzz_server
    log_start = server.log_path.stat().st_size
    for kind, payload in payloads:
        answer = raw_exchange(server.port, payload, half_close=kind != "announced huge",
                              timeout=3.0 if kind == "announced huge" else 5.0)
        if not answer:
            continue  # the connection closed without an answer (the body never came)
        answered += 1
        status, headers, body = _split_response(answer)
        app_answer = headers.get("content-type", "").startswith("application/json")
        if status >= 500:
            problems.append(f"{kind}: HTTP {status} {body[:200]!r} for {payload[:200]!r}")
        if b"Traceback" in body or b'.py", line' in body:
            problems.append(f"{kind}: traceback {body[:300]!r}")
        if app_answer:
            json.loads(body)
        elif not (status == 400 and GUNICORN_REFUSAL in body):
            problems.append(f"{kind}: HTTP {status} {headers.get('content-type')} "
                            f"{body[:200]!r} for {payload[:200]!r}")
    # Still serving: a JSON-RPC call, a REST call and the card.
    response = requests.post(server.url + "/a2a", json={
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m", "role": "ROLE_USER",
                               "parts": [{"text": "still there?"}]}}},
        headers={**ALICE, "A2A-Version": "1.0"}, timeout=10)
    assert response.status_code == 200 and "result" in response.json(), response.text
    assert requests.get(server.url + "/a2a/rest/tasks", headers=ALICE,
                        timeout=10).status_code == 200
    assert requests.get(server.url + "/.well-known/agent-card.json",
                        timeout=10).status_code == 200
    with open(server.log_path, "rb") as handle:
        handle.seek(log_start)
        log = handle.read().decode("utf-8", "replace")
    assert answered >= 200, answered
    assert not problems, "\n".join(problems[:20])
    internal = [line for line in log.splitlines() if "request failed" in line]
    assert not internal, "internal errors logged:\n" + "\n".join(internal[:10])


# ================================================================== bugs found, now regression tests


def raw(world: RpcWorld, verb: str, path: str, body: bytes = b"",
        headers: Optional[Dict[str, str]] = None):
    return world.client.open(path, method=verb, data=body,
                             headers=headers or world.required_headers,
                             content_type="application/json" if body else None)


def test_v03_rest_cancel_refuses_a_malformed_body(world):
    before = world.snapshot()
    path = V03 + "/tasks/" + world.ids[SEED_WORKING] + ":cancel"
    response = raw(world, "POST", path, b"{garbage")
    assert response.status_code == 400, response.get_data()[:200]
    assert response.get_json()["error"]["details"][0]["reason"] == "PARSE_ERROR"
    world.assert_unchanged(before, "regression")


def test_rest_lone_surrogate_in_an_echoed_id_stays_json(world):
    response = raw(world, "POST", ROOT + "/message:send", rb'{"message":{"messageId":"m","role":'
                   rb'"ROLE_USER","taskId":"\udfff","parts":[{"text":"x"}]}}')
    assert response.status_code in (400, 404) and response.mimetype == "application/json", (
        response.status_code, response.mimetype)


def test_rest_lone_surrogate_in_message_text_is_400_and_starts_nothing(world):
    before = world.snapshot()
    response = raw(world, "POST", ROOT + "/message:send", rb'{"message":{"messageId":"m","role":'
                   rb'"ROLE_USER","parts":[{"text":"\ud800"}]}}')
    assert response.status_code == 400, (response.status_code, response.get_data()[:200])
    world.assert_unchanged(before, "regression")


def test_rest_body_nested_too_deeply_is_400(world):
    response = raw(world, "POST", ROOT + "/message:send", b"[" * 100_000 + b"]" * 100_000)
    assert response.status_code == 400, response.status_code


@pytest.mark.parametrize("stamp", overflowing_timestamps)
def test_rest_timestamp_out_of_range_in_utc_is_400(world, stamp):
    response = raw(world, "GET", ROOT + "/tasks?" + urlencode({"statusTimestampAfter": stamp}))
    assert response.status_code == 400, response.status_code


def test_rest_deeply_nested_page_token_is_400(world):
    import base64

    token = base64.urlsafe_b64encode(b"[" * 100_000).decode()
    response = raw(world, "GET", ROOT + "/tasks?" + urlencode({"pageToken": token}))
    assert response.status_code == 400, response.status_code


def test_rest_huge_version_number_is_400(world):
    response = world.client.get(ROOT + "/tasks", headers={**ALICE,
                                                          "A2A-Version": "1." + "0" * 5000})
    assert response.status_code == 400, response.status_code


@pytest.mark.parametrize("verb,path", [("GET", "/a2a"), ("DELETE", "/a2a"), ("GET", ROOT),
                                       ("POST", ROOT + "/"), ("TRACE", ROOT + "/tasks"),
                                       ("GET", ROOT + "//tasks"),
                                       ("GET", V03 + "/tasks/%0A:cancel"),
                                       ("GET", ROOT + "/x%0Ay")])
def test_no_html_error_pages_on_the_agents_paths(world, verb, path):
    response = raw(world, verb, path)
    assert response.status_code < 500
    assert response.mimetype == "application/json", (response.status_code, response.mimetype,
                                                     response.get_data()[:80])


INCOMPLETE = "The request body ended before it was complete"


def test_a_truncated_chunked_body_is_an_invalid_request(fuzz_server):
    """A chunked body cut short (no last chunk): REST 400 and JSON-RPC -32600, both
    saying so, never a parse of what came (nor -32603)."""
    answers = {path: _split_response(raw_exchange(fuzz_server.port, http_request(
        "POST", path, b"2\r\n{}\r\n", chunked=True)))
        for path in ("/a2a/rest/message:send", "/a2a")}
    status, headers, body = answers["/a2a/rest/message:send"]
    assert status == 400 and headers["content-type"] == "application/json", (status, body[:200])
    error = json.loads(body)["error"]
    assert (error["status"], error["message"]) == ("INVALID_ARGUMENT", INCOMPLETE)
    assert error["details"][0]["reason"] == "INVALID_REQUEST"
    status, headers, body = answers["/a2a"]
    assert status == 200 and headers["content-type"] == "application/json", (status, body[:200])
    answer = json.loads(body)
    assert answer["id"] is None and (answer["error"]["code"], answer["error"]["message"]) == (
        -32600, INCOMPLETE)


def test_utf8_encoded_surrogates_are_a_parse_error(world):
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetTa\xed\xa0\x80sk"}'  # ED A0 80: U+D800
    response = raw(world, "POST", "/a2a", body,
                   headers={**world.required_headers, "A2A-Version": "1.0"})
    assert response.status_code == 200 and response.mimetype == "application/json", (
        response.status_code, response.mimetype)
    answer = response.get_json()
    assert answer["id"] is None and answer["error"]["code"] == -32700, answer
    assert answer["error"]["data"][0]["reason"] == "PARSE_ERROR"


@pytest.mark.parametrize("value", ["\u00b2", "1" * 5000])
def test_rest_last_event_id_of_odd_digits_is_ignored(world, value):
    """ListTasks answers exactly as it does without the header."""
    plain = world.client.get(ROOT + "/tasks", headers=ALICE)
    response = world.client.get(ROOT + "/tasks", headers={**ALICE, "Last-Event-ID": value})
    assert plain.status_code == 200
    assert (response.status_code, response.get_json()) == (200, plain.get_json())
