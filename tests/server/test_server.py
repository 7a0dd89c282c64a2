"""Integration tests against real servers: ``gunicorn -k gevent`` and the threaded Flask dev server.

What is covered here: SSE framing (content type, ``X-Accel-Buffering``, headers
before the first event, keep-alive comments, an ``id:`` on every event, full JSON-RPC
responses), client disconnects, ``Last-Event-ID`` resumption, concurrent subscribers,
cancel and 300 open streams on one gevent worker.  Every messageId behaviour of
``examples/conformance_agent.py`` (send and stream variants) is in
test_server_table.py, the shelve store shared by two gunicorn workers in
test_server_shelve.py; both use the helpers of this module.

The SSE server runs :func:`sse_app` from this module (``tests.server.test_server:sse_app()``):
the conformance agent plus two behaviours: ``slow-start`` (the first task
event only after two seconds) and ``gate`` (WORKING, then it waits until the
file named by the message text exists, then completes); it writes ``run ended:
<task id>`` to its log once a run is over (see :func:`wait_for_run_end`).
"""
from __future__ import annotations

import glob
import contextlib
import json
import os
import resource
import selectors
import signal
import socket
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple

import pytest
import requests
from flask import Flask
from werkzeug.serving import make_server

from a2a_flask import A2A

from tests.support.helpers import (V1, Server, parse_sse, rpc_body, user_message,
                                   validate_stream_response, wait_until)
from tests.support.tasks import (
    CANCELED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    WORKING,
    get_task,
    wait_for_state,
)

RESUBSCRIBE = "test-resubscribe-message-id"
SLOW_START_SECONDS = 2.0
KEEPALIVE = 0.5

# ------------------------------------------------------------------ the app under test


def _sse_executor(ctx):
    """The conformance agent, plus ``slow-start`` and ``gate`` (see the module docstring)."""
    from examples import conformance_agent

    if ctx.message.message_id.startswith("gate"):
        ctx.working("waiting for the gate")
        deadline = time.monotonic() + 15
        while not os.path.exists(ctx.text) and time.monotonic() < deadline:
            time.sleep(0.1)
        ctx.artifact("through the gate")
        ctx.complete()
        return None
    if ctx.message.message_id.startswith("slow-start"):
        time.sleep(SLOW_START_SECONDS)  # gevent-patched under gunicorn
        ctx.artifact("late but here")
        ctx.complete()
        return None
    return conformance_agent.conformance(ctx)


def sse_app(**settings: Any) -> Flask:
    """App factory (also used by gunicorn): config from ``FLASK_A2A_*``, overrides from ``settings``."""
    from examples import conformance_agent

    app = Flask("a2a_sse_test_app")
    app.config.from_prefixed_env()
    A2A(app, card=conformance_agent.a2a.card, executor=_sse_executor, **settings)
    _mark_runs_ended(app)
    return app


def _mark_runs_ended(app: Flask) -> None:
    """Print ``run ended: <task id>`` (to the server's log) when a run lets its lease
    go: its executor has returned and whatever it wrote after is written."""
    store = app.extensions["a2a"]["a2a"].store
    release = store.release_lease

    def released(task_id: str, owner: Optional[str]) -> None:
        release(task_id, owner)
        print(f"run ended: {task_id}", file=sys.stderr, flush=True)

    store.release_lease = released  # type: ignore[method-assign]


def wait_for_run_end(server: Server, task_id: str) -> None:
    """The positive marker for "nothing more happens to this task": its run is over."""
    wait_until(lambda: f"run ended: {task_id}" in server.log_text(), 30,
               f"the run of task {task_id} to end")


# ------------------------------------------------------------------ small helpers


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def msg(prefix: str, text: str = "hi", **extra: Any) -> Dict[str, Any]:
    """A user message whose messageId starts with ``prefix`` (a unique suffix is added)."""
    return user_message(text, unique(prefix), **extra)


def kind(result: Dict[str, Any]) -> str:
    """``task``, ``message``, ``artifact`` or the state name of a status update."""
    if "task" in result:
        return "task"
    if "message" in result:
        return "message"
    if "artifactUpdate" in result:
        return "artifact"
    return result["statusUpdate"]["status"]["state"].replace("TASK_STATE_", "")


def aggregate_artifacts(results: List[Dict[str, Any]]) -> List[List[Dict[str, Any]]]:
    """The parts of each artifact as a client assembles them from artifact updates."""
    parts: Dict[str, List[Dict[str, Any]]] = {}
    for result in results:
        update = result.get("artifactUpdate")
        if update is None:
            continue
        artifact = update["artifact"]
        if update.get("append") and artifact["artifactId"] in parts:
            parts[artifact["artifactId"]] += artifact["parts"]
        else:
            parts[artifact["artifactId"]] = list(artifact["parts"])
    return list(parts.values())


def wait_for_task(server, context_id: str, state: Optional[str] = None,
                  timeout: float = 10.0) -> Dict[str, Any]:
    """The task of ``context_id`` once it exists (and is in ``state``), found via ListTasks."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        tasks = server.rpc("ListTasks", {"contextId": context_id})["result"]["tasks"]
        if tasks and (state is None or tasks[0]["status"]["state"] == state):
            return tasks[0]
        time.sleep(0.05)
    raise AssertionError(f"no task in context {context_id} reached {state} in {timeout}s")


class SSEStream:
    """A streaming JSON-RPC call read as it arrives: events, comments, and when each came."""

    def __init__(self, base_url: str, method: str, params: Any, *, request_id: Any = "sse-1",
                 headers: Optional[dict] = None, timeout: float = 30.0) -> None:
        self.request_id = request_id
        self.sent_at = time.monotonic()
        self.response = requests.post(base_url + "/a2a", json=rpc_body(method, params, request_id),
                                      headers={**V1, "Accept": "text/event-stream", **(headers or {})},
                                      stream=True, timeout=timeout)
        self.headers_at = time.monotonic()
        self.events: List[Dict[str, Any]] = []
        self.comments: List[Tuple[float, str]] = []
        self.ended = False
        self._chunks = self.response.iter_content(chunk_size=None)
        self._buffer = b""

    @property
    def content_type(self) -> str:
        return self.response.headers.get("Content-Type", "").split(";")[0].strip()

    @property
    def results(self) -> List[Dict[str, Any]]:
        return [e["data"]["result"] for e in self.events]

    def _parse(self, block: str) -> Optional[Dict[str, Any]]:
        now = time.monotonic()
        fields: Dict[str, Any] = {"id": None, "event": None, "at": now}
        data = []
        for line in block.split("\n"):
            if line.startswith(":"):
                self.comments.append((now, line[1:].strip()))
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name:
                fields[name] = value
        if not data:
            return None
        fields["data"] = json.loads("\n".join(data))
        return fields

    def next_event(self) -> Optional[Dict[str, Any]]:
        """The next event (comments are recorded on the way); None once the server closed."""
        while True:
            while b"\n\n" in self._buffer:
                block, self._buffer = self._buffer.split(b"\n\n", 1)
                event = self._parse(block.decode("utf-8"))
                if event is not None:
                    self.events.append(event)
                    return event
            try:
                chunk = next(self._chunks)
            except StopIteration:
                self.ended = True
                return None
            self._buffer += chunk.replace(b"\r\n", b"\n")

    def read_all(self) -> List[Dict[str, Any]]:
        while self.next_event() is not None:
            pass
        return self.events

    def close(self) -> None:
        self.response.close()

    def __enter__(self) -> "SSEStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def check_sse_framing(stream: SSEStream) -> None:
    """text/event-stream, no proxy buffering, ``id:`` on every event, full JSON-RPC responses."""
    assert stream.response.status_code == 200
    assert stream.content_type == "text/event-stream"
    assert stream.response.headers.get("X-Accel-Buffering") == "no"
    assert stream.events, "no event arrived"
    ids = []
    for event in stream.events:
        assert event["id"] is not None and event["id"].isdigit(), event
        assert event["event"] is None, event  # no error events on a good stream
        data = event["data"]
        assert data["jsonrpc"] == "2.0"
        assert data["id"] == stream.request_id
        assert "error" not in data and set(data["result"]) & {"task", "message", "statusUpdate",
                                                             "artifactUpdate"}
        validate_stream_response(data["result"])
        ids.append(int(event["id"]))
    assert ids == sorted(set(ids)), f"event ids not increasing: {ids}"


# ------------------------------------------------------------------ raw HTTP


def dechunk(body: bytes) -> bytes:
    """The payload of a complete chunked transfer-encoded body."""
    out = bytearray()
    pos = 0
    while True:
        eol = body.find(b"\r\n", pos)
        assert eol >= 0, "incomplete chunked body (stream did not end properly)"
        size = int(body[pos:eol].split(b";")[0], 16)
        if size == 0:
            return bytes(out)
        out += body[eol + 2:eol + 2 + size]
        pos = eol + 2 + size + 2


def split_http(raw: bytes) -> Tuple[int, Dict[str, str], bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    assert sep, f"no complete response head in {raw[:200]!r}"
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = dechunk(body)
    return int(lines[0].split()[1]), headers, body


def raw_request(port: int, method: str, params: Any, request_id: Any = 1, *,
                close: bool = True, headers: Optional[dict] = None) -> bytes:
    body = json.dumps(rpc_body(method, params, request_id)).encode()
    lines = ["POST /a2a HTTP/1.1", f"Host: 127.0.0.1:{port}", "Content-Type: application/json",
             "A2A-Version: 1.0", "Accept: application/json, text/event-stream",
             f"Connection: {'close' if close else 'keep-alive'}", f"Content-Length: {len(body)}"]
    lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class RawConnection:
    """One HTTP/1.1 connection on a plain socket, so that the serving worker can be found."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.file = self.sock.makefile("rb")

    @property
    def local_port(self) -> int:
        return self.sock.getsockname()[1]

    def send(self, method: str, params: Any, *, close: bool = False, **kw: Any) -> None:
        self.sock.sendall(raw_request(self.port, method, params, close=close, **kw))

    def read_json(self) -> Dict[str, Any]:
        status = self.file.readline()
        assert status.startswith(b"HTTP/1.1 200"), status
        length = None
        while True:
            line = self.file.readline().strip()
            if not line:
                break
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        assert length is not None
        return json.loads(self.file.read(length))

    def call(self, method: str, params: Any) -> Dict[str, Any]:
        self.send(method, params)
        return self.read_json()

    def read_to_end(self) -> Tuple[int, Dict[str, str], bytes]:
        return split_http(self.file.read())

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> "RawConnection":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def gunicorn_workers(master_pid: int) -> List[int]:
    """Process ids of the gunicorn master's children (its workers)."""
    workers = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == master_pid:
            workers.append(int(stat.split("/")[2]))
    return sorted(workers)


def serving_worker(pids: List[int], server_port: int, client_port: int, timeout: float = 5.0) -> int:
    """The worker holding the server side of the loopback connection from ``client_port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        inode = None
        with open("/proc/net/tcp") as f:
            for line in f.read().splitlines()[1:]:
                cols = line.split()
                local, remote = cols[1], cols[2]
                if (int(local.split(":")[1], 16) == server_port
                        and int(remote.split(":")[1], 16) == client_port):
                    inode = cols[9]
        if inode and inode != "0":
            target = f"socket:[{inode}]"
            for pid in pids:
                for fd in glob.glob(f"/proc/{pid}/fd/*"):
                    try:
                        if os.readlink(fd) == target:
                            return pid
                    except OSError:
                        continue
        time.sleep(0.02)  # not accepted yet
    raise AssertionError(f"no worker holds the connection from port {client_port}")


def _process_state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def connect_elsewhere(master_pid: int, port: int, avoid: Iterable[int],
                      timeout: float = 10.0) -> Tuple[RawConnection, int]:
    """A connection served by a worker not in ``avoid``, and that worker's pid.

    The kernel lets whichever worker wakes first accept, and it may keep picking the
    same one; so the avoided workers are stopped (SIGSTOP) while we connect and the
    others must take the connection, then they go on (SIGCONT) where they were."""
    with workers_paused(master_pid, avoid, timeout):
        conn = RawConnection(port)
        try:
            server = serving_worker(gunicorn_workers(master_pid), port, conn.local_port, timeout)
        except BaseException:
            conn.close()
            raise
    return conn, server


@contextlib.contextmanager
def workers_paused(master_pid: int, avoid: Iterable[int], timeout: float = 10.0) -> Iterator[None]:
    """The master's workers in ``avoid`` stopped (SIGSTOP, seen in /proc) for the
    block, then resumed where they were: only the others accept connections meanwhile."""
    avoid = set(avoid)
    paused = [pid for pid in gunicorn_workers(master_pid) if pid in avoid]
    try:
        for stopped in paused:
            os.kill(stopped, signal.SIGSTOP)
        deadline = time.monotonic() + timeout
        while not all(_process_state(stopped) == "T" for stopped in paused):
            assert time.monotonic() < deadline, "the workers to avoid did not stop"
            time.sleep(0.005)
        yield
    finally:
        for stopped in paused:
            os.kill(stopped, signal.SIGCONT)


class StreamFleet:
    """Many SSE requests on non-blocking sockets, read with one selector; bounded by deadlines."""

    def __init__(self, port: int, method: str, params: Any, count: int) -> None:
        self.selector = selectors.DefaultSelector()
        self.buffers = [bytearray() for _ in range(count)]
        self.ended = [False] * count
        self._socks: List[socket.socket] = []
        try:
            for index in range(count):
                sock = socket.create_connection(("127.0.0.1", port), timeout=10)
                self._socks.append(sock)
                sock.sendall(raw_request(port, method, params, request_id=f"fleet-{index}"))
                sock.setblocking(False)
                self.selector.register(sock, selectors.EVENT_READ, index)
        except BaseException:
            self.close()
            raise

    def pump(self, done: Callable[[], bool], deadline: float) -> bool:
        """Read whatever arrives until ``done()`` or the deadline; return ``done()``."""
        while not done() and time.monotonic() < deadline:
            for key, _ in self.selector.select(timeout=0.2):
                try:
                    data = key.fileobj.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except ConnectionError:
                    data = b""
                if data:
                    self.buffers[key.data] += data
                else:
                    self.ended[key.data] = True
                    self.selector.unregister(key.fileobj)
        return done()

    def all_have_an_event(self) -> bool:
        return all(b"data: " in buffer for buffer in self.buffers)

    def all_ended(self) -> bool:
        return all(self.ended)

    def close(self) -> None:
        for sock in self._socks:
            sock.close()
        self.selector.close()


def run_fleet(server, method: str, params: Any, count: int, release: Callable[[], None],
              expected: List[str], limit: float) -> List[List[Tuple[str, Dict[str, Any]]]]:
    """Open ``count`` streams, check all are open with a first event, ``release()``, read all.

    Returns each stream's ``(id, result)`` sequence after checking its framing and kinds.
    """
    started = time.monotonic()
    deadline = started + limit
    fleet = StreamFleet(server.port, method, params, count)
    try:
        assert fleet.pump(fleet.all_have_an_event, deadline), (
            f"{sum(b'data: ' in b for b in fleet.buffers)}/{count} streams got their first event")
        assert not any(fleet.ended), "a stream ended before it was released"
        release()
        assert fleet.pump(fleet.all_ended, deadline), f"{sum(fleet.ended)}/{count} streams ended"
    finally:
        fleet.close()
    assert time.monotonic() - started < limit
    sequences = []
    for index, raw in enumerate(fleet.buffers):
        status, headers, body = split_http(bytes(raw))
        assert status == 200
        assert headers["content-type"].startswith("text/event-stream")
        assert headers["x-accel-buffering"] == "no"
        events = parse_sse(body.decode("utf-8"))
        assert all(e.get("id", "").isdigit() for e in events)
        assert all(e["data"]["id"] == f"fleet-{index}" for e in events)
        results = [e["data"]["result"] for e in events]
        assert [kind(r) for r in results] == expected, results
        sequences.append([(e["id"], e["data"]["result"]) for e in events])
    return sequences


def subscribe_fleet_and_complete(server, count: int, limit: float) -> None:
    """``count`` subscribers on one INPUT_REQUIRED task; a follow-up completes it for all."""
    task = server.rpc("SendMessage", {"message": msg("tck-input-required")})["result"]["task"]
    assert task["status"]["state"] == INPUT_REQUIRED

    def follow_up() -> None:
        message = msg("tck-input-required", "more", taskId=task["id"], contextId=task["contextId"])
        done = server.rpc("SendMessage", {"message": message})["result"]["task"]
        assert done["status"]["state"] == COMPLETED

    sequences = run_fleet(server, "SubscribeToTask", {"id": task["id"]}, count, follow_up,
                          ["task", "WORKING", "COMPLETED"], limit)
    assert sequences[0][0][1]["task"]["status"]["state"] == INPUT_REQUIRED
    assert all(seq == sequences[0] for seq in sequences), "subscribers saw different sequences"


def gated_streams(server, count: int, limit: float, tmp_path) -> None:
    """``count`` SendStreamingMessage calls, each its own task, all held open until a file exists."""
    gate = tmp_path / "gate-open"
    message = user_message(str(gate), unique("gate"))  # one messageId for all: never de-duplicated
    sequences = run_fleet(server, "SendStreamingMessage", {"message": message}, count, gate.touch,
                          ["task", "WORKING", "artifact", "COMPLETED"], limit)
    assert len({seq[0][1]["task"]["id"] for seq in sequences}) == count


# ------------------------------------------------------------------ servers


class ThreadedDevServer:
    """The werkzeug dev server (``threaded=True``) serving ``app`` on loopback, in a thread."""

    rpc = Server.rpc
    stream = Server.stream

    def __init__(self, app: Flask) -> None:
        self.server = make_server("127.0.0.1", 0, app, threaded=True)
        self.port = self.server.server_port
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="werkzeug-dev-server",
                                       daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _raise_nofile(minimum: int = 4096) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < minimum:
        wanted = minimum if hard == resource.RLIM_INFINITY else min(minimum, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))


@pytest.fixture(scope="module")
def dev_server():
    """The SSE test app under the werkzeug threaded dev server (keep-alive 0.5 s)."""
    server = ThreadedDevServer(sse_app(sse_keepalive=KEEPALIVE))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sse_server():
    """The SSE test app under one gevent worker with room for 2000 connections."""
    _raise_nofile()
    with Server("tests.server.test_server:sse_app()", env={"FLASK_A2A_SSE_KEEPALIVE": str(KEEPALIVE)},
                extra_args=["--worker-connections", "2000"]) as server:
        yield server


SERVERS = ["gunicorn-gevent", "werkzeug-threaded"]


@pytest.fixture(params=SERVERS)
def sse_any(request):
    """The SSE test app (keep-alive 0.5 s) under gunicorn gevent or werkzeug threaded."""
    if request.param == "gunicorn-gevent":
        return request.getfixturevalue("sse_server")
    return request.getfixturevalue("dev_server")


# ------------------------------------------------------------------ SSE behaviour


def test_sse_headers_first_keepalives_ids_and_jsonrpc_envelopes(sse_any):
    """A 4.5 s task: headers at once, keep-alives every 0.5 s while idle, then COMPLETED."""
    with SSEStream(sse_any.url, "SendStreamingMessage", {"message": msg(RESUBSCRIBE)},
                   request_id="abc-123") as stream:
        stream.read_all()
    check_sse_framing(stream)
    assert [kind(r) for r in stream.results] == ["task", "WORKING", "COMPLETED"]
    completed_at = stream.events[-1]["at"]
    assert completed_at - stream.headers_at > 2.0, "headers were held back until the agent finished"
    working_at = stream.events[1]["at"]
    idle = completed_at - working_at
    keepalives = [t for t, text in stream.comments if working_at <= t <= completed_at
                  and text == "keep-alive"]
    assert len(keepalives) >= 3, f"{len(keepalives)} keep-alives in {idle:.1f}s idle"
    assert len(keepalives) <= idle / KEEPALIVE + 2, "keep-alives sent more often than configured"
    marks = [working_at] + keepalives + [completed_at]
    assert max(b - a for a, b in zip(marks, marks[1:])) < 2.0


def test_sse_headers_arrive_before_a_late_first_event(sse_any):
    with SSEStream(sse_any.url, "SendStreamingMessage", {"message": msg("slow-start")},
                   request_id=99) as stream:
        assert stream.response.status_code == 200
        assert stream.content_type == "text/event-stream"
        first = stream.next_event()
        assert first is not None and kind(first["data"]["result"]) == "task"
        # Headers (and keep-alives) came while the agent had not produced anything yet.
        assert first["at"] - stream.headers_at > KEEPALIVE
        assert any(t < first["at"] and text == "keep-alive" for t, text in stream.comments)
        stream.read_all()
    check_sse_framing(stream)
    assert [kind(r) for r in stream.results] == ["task", "artifact", "COMPLETED"]


def _first_chunk(port: int, message: Dict[str, Any]) -> bytes:
    """The payload of the first body chunk of a SendStreamingMessage answer, as sent."""
    with RawConnection(port) as conn:
        conn.send("SendStreamingMessage", {"message": message}, close=True)
        raw = conn.file.read()
    body = raw.partition(b"\r\n\r\n")[2]
    size_line, _, rest = body.partition(b"\r\n")
    return rest[:int(size_line.split(b";")[0], 16)]


def test_a_prompt_first_event_leaves_with_the_headers_a_late_one_after_an_opening(sse_server):
    """Under gevent the executor gets its turn before anything is written: an agent
    that makes its task at once has that event as the first write (no comment before
    it); one that thinks first has the opening comment sent at once instead."""
    prompt = _first_chunk(sse_server.port, msg("tck-complete-task"))
    assert prompt.startswith(b"id: 1\ndata: "), prompt[:80]
    late = _first_chunk(sse_server.port, msg("slow-start"))
    assert late == b": stream open\n\n"


def test_stream_errors_before_the_first_event_are_plain_json(sse_any):
    unknown = requests.post(sse_any.url + "/a2a", json=rpc_body("SubscribeToTask", {"id": "nope"}, "e1"),
                            headers=V1, timeout=10)
    assert unknown.headers["Content-Type"].startswith("application/json")
    assert unknown.json()["error"]["code"] == -32001 and unknown.json()["id"] == "e1"
    done = sse_any.rpc("SendMessage", {"message": msg("tck-complete-task")})["result"]["task"]
    terminal = requests.post(sse_any.url + "/a2a", json=rpc_body("SubscribeToTask", {"id": done["id"]}),
                             headers=V1, timeout=10)
    assert terminal.headers["Content-Type"].startswith("application/json")
    assert terminal.json()["error"]["code"] == -32004


def test_client_disconnect_mid_stream_leaves_task_to_complete(sse_any):
    stream = SSEStream(sse_any.url, "SendStreamingMessage", {"message": msg(RESUBSCRIBE)})
    try:
        first, second = stream.next_event(), stream.next_event()
    finally:
        stream.close()  # the client goes away mid-task
    task_id = first["data"]["result"]["task"]["id"]
    assert kind(second["data"]["result"]) == "WORKING"
    assert get_task(sse_any, task_id)["status"]["state"] == WORKING
    final = wait_for_state(sse_any, task_id, (COMPLETED, CANCELED, FAILED))
    assert final["status"]["state"] == COMPLETED


def test_last_event_id_replays_missing_events_then_continues_live(sse_server):
    stream = SSEStream(sse_server.url, "SendStreamingMessage", {"message": msg(RESUBSCRIBE)})
    try:
        first, second = stream.next_event(), stream.next_event()
    finally:
        stream.close()
    task_id = first["data"]["result"]["task"]["id"]
    with SSEStream(sse_server.url, "SubscribeToTask", {"id": task_id}, request_id="resume",
                   headers={"Last-Event-ID": first["id"]}) as resumed:
        replayed = resumed.next_event()
        assert replayed["id"] == second["id"]
        assert replayed["data"]["result"] == second["data"]["result"]
        assert get_task(sse_server, task_id)["status"]["state"] == WORKING  # the rest is live
        resumed.read_all()
    check_sse_framing(resumed)
    assert resumed.ended
    assert [e["id"] for e in resumed.events] == [second["id"], str(int(second["id"]) + 1)]
    assert kind(resumed.results[-1]) == "COMPLETED"
    assert resumed.events[-1]["at"] - replayed["at"] > 1.0


def test_last_event_id_after_completion_replays_only_the_rest(sse_server):
    stream = SSEStream(sse_server.url, "SendStreamingMessage", {"message": msg("tck-stream-001")})
    try:
        first = stream.next_event()
    finally:
        stream.close()
    task_id = first["data"]["result"]["task"]["id"]
    wait_for_state(sse_server, task_id, (COMPLETED,))
    with SSEStream(sse_server.url, "SubscribeToTask", {"id": task_id},
                   headers={"Last-Event-ID": first["id"]}) as resumed:
        resumed.read_all()
    check_sse_framing(resumed)
    assert [kind(r) for r in resumed.results] == ["WORKING", "artifact", "COMPLETED"]
    assert [int(e["id"]) for e in resumed.events] == [2, 3, 4]
    # Nothing is missing once the client has the last event: a terminal task has no stream.
    body = sse_server.rpc("SubscribeToTask", {"id": task_id},
                          headers={"Last-Event-ID": resumed.events[-1]["id"]})
    assert body["error"]["code"] == -32004


def test_concurrent_subscribers_see_identical_sequences(sse_server):
    context_id = unique("ctx")
    with ThreadPoolExecutor(1) as pool:
        sender = pool.submit(sse_server.rpc, "SendMessage",
                             {"message": msg(RESUBSCRIBE, contextId=context_id)})
        task = wait_for_task(sse_server, context_id, WORKING)
        streams = [SSEStream(sse_server.url, "SubscribeToTask", {"id": task["id"]}, request_id=f"s{i}")
                   for i in range(3)]
        try:
            for stream in streams:
                stream.next_event()
            streams[2].close()  # one subscriber leaves early; the others and the task go on
            for stream in streams[:2]:
                stream.read_all()
        finally:
            for stream in streams:
                stream.close()
        blocking = sender.result(timeout=20)["result"]["task"]
    for stream in streams[:2]:
        check_sse_framing(stream)
        assert stream.ended
    a, b = ([(e["id"], e["data"]["result"]) for e in s.events] for s in streams[:2])
    assert a == b
    assert [kind(r) for _, r in a] == ["task", "COMPLETED"]
    assert a[0][1]["task"]["status"]["state"] == WORKING
    assert blocking["id"] == task["id"] and blocking["status"]["state"] == COMPLETED
    assert blocking["status"] == a[-1][1]["statusUpdate"]["status"]


def test_cancel_running_task_ends_subscriber_stream_with_canceled(sse_server):
    context_id = unique("ctx")
    with ThreadPoolExecutor(1) as pool:
        sender = pool.submit(sse_server.rpc, "SendMessage",
                             {"message": msg(RESUBSCRIBE, contextId=context_id)})
        task = wait_for_task(sse_server, context_id, WORKING)
        with SSEStream(sse_server.url, "SubscribeToTask", {"id": task["id"]}) as subscriber:
            assert kind(subscriber.next_event()["data"]["result"]) == "task"
            canceled = sse_server.rpc("CancelTask", {"id": task["id"]})["result"]
            assert canceled["id"] == task["id"] and canceled["status"]["state"] == CANCELED
            subscriber.read_all()
        blocking = sender.result(timeout=20)["result"]["task"]
    check_sse_framing(subscriber)
    assert subscriber.ended
    assert [kind(r) for r in subscriber.results] == ["task", "CANCELED"]
    assert blocking["status"]["state"] == CANCELED
    wait_for_run_end(sse_server, task["id"])  # the executor noticed and stopped...
    assert get_task(sse_server, task["id"])["status"]["state"] == CANCELED  # ...and wrote nothing
    assert sse_server.rpc("CancelTask", {"id": task["id"]})["error"]["code"] == -32002
    assert sse_server.rpc("SubscribeToTask", {"id": task["id"]})["error"]["code"] == -32004


# ------------------------------------------------------------------ concurrency


def test_300_concurrent_streams_on_one_gevent_worker(sse_server):
    assert len(gunicorn_workers(sse_server.proc.pid)) == 1
    subscribe_fleet_and_complete(sse_server, 300, limit=20.0)


def test_300_concurrent_streaming_sends_with_300_live_executors_on_one_gevent_worker(
        sse_server, tmp_path):
    gated_streams(sse_server, 300, limit=20.0, tmp_path=tmp_path)


def test_threaded_dev_server_serves_concurrent_streams(dev_server, tmp_path):
    subscribe_fleet_and_complete(dev_server, 20, limit=20.0)
    gated_streams(dev_server, 20, limit=20.0, tmp_path=tmp_path)
