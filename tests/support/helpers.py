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
from typing import Any, Callable, Dict, Iterator, List, Optional

import requests

ROOT = Path(__file__).resolve().parents[2]
#: The files the suite reads: schemas, seeds, recorded wire and store output.
DATA = ROOT / "tests" / "data"
#: The official JSON schemas, copied into the repository (see tests/data/schemas/README.rst).
SPEC = DATA / "schemas"

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


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``predicate`` until it returns something true (returned); fail after
    ``timeout`` seconds saying ``what`` never happened."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.05)


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


#: What gevent's monitor thread writes when a greenlet kept the hub from running.
BLOCKED_MARK = "appears to be blocked"
#: The longest a greenlet may hold the hub before the watchdog reports it (seconds).
MAX_BLOCKING_TIME = 0.1


#: Paths in a blocked stack that make the report ours: the package, the test and
#: example apps.  See :func:`blocked_in_our_code`.
OUR_CODE = ("/a2a_flask/", "/tests/", "/examples/", "/bench/")
#: Where gevent's sockets call their non-blocking OS socket (the innermost frame of
#: a report taken while the worker was not scheduled).  See :func:`blocked_in_our_code`.
NON_BLOCKING_SOCKET_CALLS = ("gevent/_socketcommon.py", "gevent/_socket3.py")


def blocked_reports(log_text: str) -> List[str]:
    """The hub-blocked reports in a worker log: each one's headline and blocked stack
    (gevent's list of every greenlet that follows it is left out)."""
    reports = []
    for chunk in log_text.split("=" * 80)[1:]:
        if BLOCKED_MARK in chunk:
            reports.append(chunk.split("\nInfo:", 1)[0].strip())
    return reports


def blocked_in_our_code(report: str) -> bool:
    """Whether a report's blocked stack runs through our code.

    The monitor measures wall time: on a loaded 2-core machine the worker can
    simply not be scheduled for 0.1 s, and the report then catches whatever ran
    last, typically a socket ``send`` inside gunicorn with none of our frames.
    A greenlet of ours that really keeps the hub (a spin, a blocking call) is
    caught with our frames on its stack, so only those reports fail a test.
    Loading the app (imports, ``init_app``) happens before the worker takes its
    first connection, so it keeps no caller waiting: a stack in gunicorn's
    ``load_wsgi`` does not count.

    The same holds when the innermost frame is a call on a gevent socket's own
    non-blocking OS socket (``self._sock.recv``): that call returns at once, so a
    report stopped there caught a worker that was not scheduled, not one that
    kept the hub.
    """
    stack = report.split("Blocked Stack", 1)[-1]
    if "in load_wsgi" in stack:
        return False
    files = [line for line in stack.splitlines() if line.strip().startswith("File")]
    if files and any(name in files[-1] for name in NON_BLOCKING_SOCKET_CALLS):
        return False
    return any(part in line for line in files for part in OUR_CODE)


class Server:
    """A real gunicorn (gevent workers by default) serving ``app_spec`` on loopback.

    gevent workers run with gevent's monitor thread (the hub watchdog): a
    greenlet that keeps the hub for more than :data:`MAX_BLOCKING_TIME` is
    reported in the worker log, and :meth:`stop` fails the test with the
    reported stack when it runs through our code (:func:`blocked_in_our_code`),
    unless ``allow_blocking`` (a test that blocks on purpose
    reads :meth:`blocked` itself).
    """

    def __init__(self, app_spec: str, *, workers: int = 1, worker_class: str = "gevent",
                 env: Optional[Dict[str, str]] = None, extra_args: Optional[List[str]] = None,
                 allow_blocking: bool = False, graceful_timeout: float = 2,
                 port: Optional[int] = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.allow_blocking = allow_blocking
        cmd = [sys.executable, "-m", "gunicorn", "-k", worker_class, "-w", str(workers),
               "-b", f"127.0.0.1:{self.port}", "--graceful-timeout", f"{graceful_timeout:g}",
               "--log-level", "warning", *(extra_args or []), app_spec]
        watchdog = {}
        if worker_class == "gevent":
            watchdog = {"GEVENT_MONITOR_THREAD_ENABLE": "1",
                        "GEVENT_MAX_BLOCKING_TIME": str(MAX_BLOCKING_TIME)}
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"a2a-gunicorn-{self.port}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **watchdog, **(env or {})},
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._stopped = False
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
            self.allow_blocking = True  # the start-up error is the news
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

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def blocked(self) -> List[str]:
        """The watchdog's hub-blocked reports so far (see :func:`blocked_reports`)."""
        return blocked_reports(self.log_text())

    def stop(self) -> None:
        """Stop gunicorn; fail if the watchdog reported a blocked hub (see the class)."""
        if self._stopped:
            return
        self._stopped = True
        stop_process_group(self.proc)
        self._log.close()
        if not self.allow_blocking:
            reports = [report for report in self.blocked() if blocked_in_our_code(report)]
            if reports:
                raise AssertionError(
                    f"the gevent hub was blocked for more than {MAX_BLOCKING_TIME}s "
                    f"({len(reports)} report(s) in {self.log_path}); first:\n{reports[0]}")

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def worker_pids(server: Server) -> List[int]:
    """The pids of a real server's gunicorn workers."""
    with open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children") as handle:
        return [int(pid) for pid in handle.read().split()]


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_status_kib(pid: int, field: str) -> int:
    """A size from ``/proc/<pid>/status`` in KiB: ``VmRSS`` now, ``VmHWM`` its peak."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def rss_kib(pid: int) -> int:
    return proc_status_kib(pid, "VmRSS")


#: The longest the probe allows for each of its requests (seconds).
PROBE_LIMIT = 0.2
#: An answer slower than this fails the probe at once, however rare: a worker that
#: stalls this long is not merely losing the CPU to the machine's other work.
STALL_LIMIT = 1.0
#: Slow answers (over the limit, under STALL_LIMIT) a Probing tolerates: one in
#: ``SLOW_SHARE`` probes (at least one), or one in ``SATURATED_SHARE`` while a fault
#: keeps the worker's own CPU busy.  A frozen worker answers no probe at all.
SLOW_SHARE = 10
SATURATED_SHARE = 4
#: The tries :func:`probe` gives a worker whose answer was merely slow.
PROBE_TRIES = 3


def measure(url: str, task_id: str = "", *, headers: Optional[dict] = None) -> Dict[str, float]:
    """One round of the liveness probe: the agent card and a GetTask, each within 5 s
    and right (fails the test otherwise); the seconds each took.

    ``task_id`` defaults to an id no task has (a -32001 answer still goes to the
    store).  The time is the server's: from sending the request to its answer's
    headers (requests' ``elapsed``), so a slow test process does not count.
    """
    with requests.Session() as session:
        card = session.get(url + "/.well-known/agent-card.json", timeout=5)
        get = session.post(url + "/a2a", json=rpc_body(
            "GetTask", {"id": task_id or "no-such-task-probe"}), headers={**V1, **(headers or {})},
            timeout=5)
    assert card.status_code == 200, f"card: HTTP {card.status_code}"
    assert get.status_code == 200 and ("result" in get.json() or "error" in get.json()), get.text
    return {"card": card.elapsed.total_seconds(), "GetTask": get.elapsed.total_seconds()}


def probe(url: str, task_id: str = "", *, limit: float = PROBE_LIMIT,
          headers: Optional[dict] = None) -> Dict[str, float]:
    """The worker is live: a round of :func:`measure` answers within ``limit`` seconds.

    On a loaded machine the odd answer is late for want of a CPU, not of the worker:
    a slow round is tried again, up to PROBE_TRIES rounds.  No answer, a wrong
    one or one slower than STALL_LIMIT fails at once.  Returns the good round's times.
    """
    slow: List[Dict[str, float]] = []
    while True:
        times = measure(url, task_id, headers=headers)
        worst = max(times.values())
        assert worst <= STALL_LIMIT, f"the worker stalled: {times} (stall limit {STALL_LIMIT}s)"
        if worst <= limit:
            return times
        slow.append(times)
        assert len(slow) < PROBE_TRIES, \
            f"the worker answered the probe too slowly: {slow} (limit {limit}s)"


class Probing:
    """Probe a server every ``interval`` seconds while a fault is on:
    ``with Probing(server.url, task_id) as probing: ...``; leaving the block fails the
    test if a probe failed (no answer, a wrong one, or one slower than STALL_LIMIT),
    if more than the odd answer was slower than ``limit``, or if none ran.
    :meth:`wait_for` waits until some number of probes answered (a fault that lasts
    until a condition, not for a time): a failed probe fails it at once.

    The probes run in a process of their own: in a thread of the test process they
    would wait for the GIL whenever the test itself computes (reading a fast stream,
    say), and measure the test's slowness, not the worker's.

    On a 2-core machine with other work the OS alone delays the odd answer past
    ``limit`` (a CI run saw answers of 0.21-0.27 s): one probe in SLOW_SHARE may
    be slow, and with ``saturating=True`` (a fault that keeps the worker's CPU busy
    on purpose: an executor flooding events, fifty drains retrying at once) one in
    SATURATED_SHARE.  A frozen worker misses every probe; one that stalls (the
    watchdog of :class:`Server` reports stalls of our code) fails at once.
    """

    def __init__(self, url: str, task_id: str = "", *, interval: float = 0.1,
                 limit: float = PROBE_LIMIT, headers: Optional[dict] = None,
                 saturating: bool = False) -> None:
        self.limit = limit
        self.share = SATURATED_SHARE if saturating else SLOW_SHARE
        self.args = json.dumps({"url": url, "task_id": task_id, "interval": interval,
                                "headers": headers or {}})
        self.slow: List[str] = []
        self.worst = 0.0
        self.failures: List[str] = []
        self._records: List[Dict[str, Any]] = []
        self._arrived = threading.Condition()
        self._proc: Optional[subprocess.Popen] = None
        self._reader: Optional[threading.Thread] = None

    @property
    def count(self) -> int:
        """How many probes have answered (or failed) so far."""
        with self._arrived:
            return len(self._records)

    def __enter__(self) -> "Probing":
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _PROBE_LOOP, self.args], cwd=ROOT, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        assert self._proc.stdout.readline().strip() == "ready"
        self._reader = threading.Thread(target=self._read, args=(self._proc.stdout,),
                                        daemon=True)
        self._reader.start()
        return self

    def _read(self, out: Any) -> None:
        for line in out:
            record = json.loads(line)
            with self._arrived:
                self._records.append(record)
                self._arrived.notify_all()

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        """Wait until ``count`` probes have answered; fail at once if one failed."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                faults = [f for f in map(_fault, self._records) if f]
                assert not faults, f"a probe failed: {faults[0]}"
                if len(self._records) >= count:
                    return
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"only {len(self._records)} of {count} probes in {timeout}s"
                self._arrived.wait(min(remaining, 0.5))

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        proc, reader = self._proc, self._reader
        assert proc is not None and proc.stdin is not None and reader is not None
        proc.stdin.close()  # the loop's signal to stop
        timer = threading.Timer(15, proc.kill)
        timer.start()
        try:
            reader.join()
            proc.wait()
        finally:
            timer.cancel()
        for record in self._records:
            fault = _fault(record)
            if fault:
                self.failures.append(fault)
                continue
            worst = max(record["times"].values())
            self.worst = max(self.worst, worst)
            if worst > self.limit:
                self.slow.append(f"{record['at']} {record['times']}")
        if len(self.slow) > max(1, len(self._records) // self.share):
            self.failures.append(f"{len(self.slow)} of {len(self._records)} answered after "
                                 f"{self.limit}s: {self.slow[:3]}")
        if exc_type is None:
            assert self._records, "no probe ran"
            assert not self.failures, (f"{len(self.failures)} of {len(self._records)} probes "
                                       f"failed; first: {self.failures[0]}")


def _fault(record: Dict[str, Any]) -> str:
    """What makes one of Probing's records a failure at once ('' if nothing)."""
    if "error" in record:
        return f"{record['at']} {record['error']}"
    if max(record["times"].values()) > STALL_LIMIT:
        return f"{record['at']} stalled: {record['times']} (stall limit {STALL_LIMIT}s)"
    return ""


# The probe loop of Probing: one JSON line per probe until stdin closes.
_PROBE_LOOP = """
import json, select, sys, time
import requests
from tests.support.helpers import measure
args = json.loads(sys.argv[1])
print("ready", flush=True)
while True:
    try:
        record = {"times": measure(args["url"], args["task_id"], headers=args["headers"])}
    except (AssertionError, requests.RequestException, ValueError) as exc:
        record = {"error": str(exc)}
    record["at"] = time.strftime("%H:%M:%S")
    print(json.dumps(record), flush=True)
    if select.select([sys.stdin], [], [], args["interval"])[0]:
        break  # stdin closed (EOF is readable)
"""


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
    timeouts), ``("redirect", url)`` answers 302, ``(status, headers)`` answers
    with those headers (``(429, {"Retry-After": "1"})``); once it is used up
    every push gets ``default`` (200).
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
                  "body": body, "json": json.loads(body) if body else None,
                  "at": time.monotonic()}
        with self._lock:
            action = self.script.pop(0) if self.script else self.default
            self.attempts.append(record)
        if isinstance(action, float):
            time.sleep(action)
            action = 200
        if isinstance(action, tuple) and action[0] == "redirect":
            response = Response("", status=302, headers={"Location": action[1]})
        elif isinstance(action, tuple):
            response = Response("{}", status=action[0], headers=action[1],
                                mimetype="application/json")
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


def wait_until_delivered(store: Any, task_id: str, timeout: float = 30.0) -> None:
    """Wait until nothing more can be pushed for a finished task: every webhook of it
    has had its last event (or was given up on) and no drain holds its deliveries.

    The positive marker a "nothing more came" check waits for: a drain sends only
    while it holds the task's claim, and a new one starts only for a webhook whose
    cursor is behind; so once the claim is free with every cursor at the head, a
    push still to come could only be a bug.  ``store`` is the agent's store, or one
    opened on its URL in the test process.
    """
    key = f"push:{task_id}"

    def done() -> bool:
        head = store.head(task_id)
        if head is None or not head[1].terminal or any(
                t.delivered_seq < head[0] and not t.gave_up for t in store.push_targets(task_id)):
            return False
        if not store.claim(key, "test-observer", 1.0):
            return False  # a drain is still on it
        store.release_claim(key, "test-observer")
        return True

    wait_until(done, timeout, f"the deliveries of task {task_id} to end")


# ------------------------------------------------------------- callers

#: Bearer tokens the test agents accept, and whom they name.
TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}


def bearer_auth():
    """The authenticator of the test agents: ``Bearer alice-token`` is alice."""
    from a2a_flask.web.auth import BearerAuth

    return BearerAuth(TOKENS.get)
