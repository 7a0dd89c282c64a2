"""Test helpers: JSON-RPC calls, SSE parsing, schema validation, real servers."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional

import requests

ROOT = Path(__file__).resolve().parent.parent
#: The official JSON schemas, copied into the repository (see tests/schemas/README.rst).
SPEC = ROOT / "tests" / "schemas"

V1 = {"A2A-Version": "1.0"}


def rpc_body(method: str, params: Any = None, request_id: Any = 1) -> Dict[str, Any]:
    body: Dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def user_message(text: str = "hello", message_id: str = "m-1", **extra: Any) -> Dict[str, Any]:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    message.update(extra)
    return message


def rpc(client, method: str, params: Any = None, *, headers: Optional[dict] = None,
        path: str = "/a2a", request_id: Any = 1) -> Dict[str, Any]:
    """Call a JSON-RPC method through the Flask test client and return the decoded body."""
    response = client.post(path, json=rpc_body(method, params, request_id),
                           headers={**V1, **(headers or {})})
    assert response.status_code == 200, response.data
    assert response.mimetype == "application/json", response.mimetype
    return response.get_json()


def parse_sse(text: str) -> List[Dict[str, Any]]:
    """SSE events as dicts: ``{"id", "event", "data" (decoded JSON)}``; comments dropped."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: Dict[str, Any] = {}
        data_lines = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data_lines.append(value)
            else:
                fields[name] = value
        if data_lines:
            fields["data"] = json.loads("\n".join(data_lines))
            events.append(fields)
    return events


def stream(client, method: str, params: Any, *, headers: Optional[dict] = None,
           path: str = "/a2a") -> List[Dict[str, Any]]:
    """Run a streaming method through the test client; every SSE event, in order."""
    response = client.post(path, json=rpc_body(method, params), headers={**V1, **(headers or {})})
    assert response.status_code == 200
    if response.mimetype == "application/json":
        return [{"data": response.get_json()}]
    assert response.mimetype == "text/event-stream"
    return parse_sse(response.get_data(as_text=True))


class Gate:
    """A live task's gate: ``release`` lets it finish, ``done`` says the executor returned."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.done = threading.Event()


# ------------------------------------------------------------- schemas


def _load_schema_registry(version: str):
    from referencing import Registry, Resource

    doc = json.loads((SPEC / version / "a2a.schema.json").read_text())
    definitions = doc.get("definitions") or doc.get("$defs")
    registry = Registry()
    if version == "v1.0":
        # The 1.0 schema refers to its parts by protobuf file names.
        for title, schema in definitions.items():
            compact = title.replace(" ", "")
            for name in (f"lf.a2a.v1.{compact}.jsonschema.json",
                         f"google.protobuf.{compact}.jsonschema.json"):
                registry = registry.with_resource(name, Resource.from_contents(
                    schema, default_specification=_draft()))
    return doc, definitions, registry


def _draft():
    from referencing.jsonschema import DRAFT202012

    return DRAFT202012


_CACHE: Dict[str, Any] = {}


def validate(instance: Any, definition: str, version: str = "v1.0") -> None:
    """Validate against a definition of an official schema (``"Task"``, ``"Stream Response"``)."""
    import jsonschema

    if version not in _CACHE:
        _CACHE[version] = _load_schema_registry(version)
    doc, definitions, registry = _CACHE[version]
    if version == "v1.0":
        schema = definitions[definition]
    else:
        schema = {"$ref": f"#/definitions/{definition}", "definitions": definitions}
        if "$defs" in doc:
            schema = {"$ref": f"#/$defs/{definition}", "$defs": definitions}
    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator_cls(schema, registry=registry).validate(instance)


def validate_stream_response(result: Dict[str, Any]) -> None:
    validate(result, "Stream Response")


# ------------------------------------------------------------- real servers


def stop_process_group(proc: subprocess.Popen) -> None:
    """SIGTERM a server started with ``start_new_session`` (and its workers); SIGKILL
    what is still there after 10 s."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A real gunicorn (gevent workers by default) serving ``app_spec`` on loopback."""

    def __init__(self, app_spec: str, *, workers: int = 1, worker_class: str = "gevent",
                 env: Optional[Dict[str, str]] = None, extra_args: Optional[List[str]] = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        cmd = [sys.executable, "-m", "gunicorn", "-k", worker_class, "-w", str(workers),
               "-b", f"127.0.0.1:{self.port}", "--graceful-timeout", "2",
               "--log-level", "warning", *(extra_args or []), app_spec]
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"a2a-gunicorn-{self.port}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **(env or {})},
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        """Wait for the card to answer; a slow first answer (workers booting on a busy
        machine) is waited out, and gunicorn is stopped whenever start-up fails."""
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"gunicorn exited: {self.log_path.read_text()}")
                try:
                    requests.get(self.url + "/.well-known/agent-card.json", timeout=5)
                    return
                except (requests.ConnectionError, requests.Timeout):
                    time.sleep(0.1)
            raise RuntimeError("gunicorn did not start in time")
        except BaseException:
            self.stop()  # the constructor fails: nobody else could stop it
            raise

    def rpc(self, method: str, params: Any = None, *, headers: Optional[dict] = None,
            timeout: float = 30, path: str = "/a2a") -> Dict[str, Any]:
        response = requests.post(self.url + path, json=rpc_body(method, params),
                                 headers={**V1, **(headers or {})}, timeout=timeout)
        assert response.status_code == 200, response.text
        return response.json()

    def stream(self, method: str, params: Any, *, headers: Optional[dict] = None,
               timeout: float = 30, path: str = "/a2a") -> Iterator[Dict[str, Any]]:
        """SSE events as they arrive."""
        with requests.post(self.url + path, json=rpc_body(method, params),
                           headers={**V1, **(headers or {})}, stream=True,
                           timeout=timeout) as response:
            assert response.status_code == 200, response.text
            buffer = ""
            for chunk in response.iter_content(chunk_size=None, decode_unicode=True):
                buffer += chunk
                while "\n\n" in buffer:
                    block, buffer = buffer.split("\n\n", 1)
                    yield from parse_sse(block + "\n\n")

    def stop(self) -> None:
        stop_process_group(self.proc)
        self._log.close()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


#: Top-level members the union card adds for 0.3 and 0.1 clients (see a2a_flask.protocol.cards).
LEGACY_CARD_MEMBERS = ("protocolVersion", "url", "preferredTransport", "additionalInterfaces",
                       "supportsAuthenticatedExtendedCard", "security", "authentication")
_SCHEME_V03_MEMBERS = ("type", "in", "name", "scheme", "bearerFormat", "flows",
                       "oauth2MetadataUrl", "openIdConnectUrl", "description")


def card_v1_view(card: Dict[str, Any]) -> Dict[str, Any]:
    """The 1.0 members of a served (union) card."""
    view = {k: v for k, v in card.items() if k not in LEGACY_CARD_MEMBERS}
    if "securitySchemes" in card:
        view["securitySchemes"] = {
            name: {k: v for k, v in scheme.items() if k not in _SCHEME_V03_MEMBERS}
            for name, scheme in card["securitySchemes"].items()}
    return view


def validate_card(card: Dict[str, Any]) -> None:
    """A served card: its 1.0 members against the 1.0 schema and, when it carries the
    0.3 members, the whole document against the 0.3 schema."""
    validate(card_v1_view(card), "Agent Card")
    if "protocolVersion" in card:
        validate(card, "AgentCard", "v0.3")


# ------------------------------------------------------------- webhooks


class WebhookReceiver:
    """A real HTTP server on loopback that records the pushes it gets.

    ``script`` lists what to answer to the next requests, in order: an int is
    a status code, a float is seconds to stall before answering 200 (for
    timeouts), ``("redirect", url)`` answers 302; once it is used up every
    push gets ``default`` (200).
    """

    def __init__(self, default: int = 200) -> None:
        from werkzeug.serving import make_server

        self.default = default
        self.script: List[Any] = []
        self.received: List[Dict[str, Any]] = []  # answered 2xx
        self.attempts: List[Dict[str, Any]] = []  # every request
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _app(self, environ, start_response):
        from werkzeug.wrappers import Request, Response

        request = Request(environ)
        body = request.get_data()
        record = {"path": request.path, "headers": dict(request.headers),
                  "body": body, "json": json.loads(body) if body else None}
        with self._lock:
            action = self.script.pop(0) if self.script else self.default
            self.attempts.append(record)
        if isinstance(action, float):
            time.sleep(action)
            action = 200
        if isinstance(action, tuple):
            response = Response("", status=302, headers={"Location": action[1]})
        else:
            response = Response("{}", status=action, mimetype="application/json")
        if 200 <= response.status_code < 300:
            with self._lock:
                self.received.append(record)
                self._arrived.notify_all()
        return response(environ, start_response)

    def hook(self, path: str = "/hook") -> str:
        return self.url + path

    def wait_for(self, predicate, timeout: float = 15.0) -> List[Dict[str, Any]]:
        """Wait until ``predicate(received)`` holds; the pushes received so far."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate(self.received):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"pushes never arrived; got {len(self.received)}: "
                                         f"{[r['json'] for r in self.received]}")
                self._arrived.wait(min(remaining, 0.1))
            return list(self.received)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> "WebhookReceiver":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ------------------------------------------------------------- callers

#: Bearer tokens the test agents accept, and whom they name.
TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}


def bearer_auth():
    """The authenticator of the test agents: ``Bearer alice-token`` is alice."""
    from a2a_flask.web.auth import BearerAuth

    return BearerAuth(TOKENS.get)
