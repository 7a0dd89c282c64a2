"""Scale-out against real servers: task stores shared by gunicorn workers and hosts.

Covered: one task touched from several workers of ``gunicorn -k gevent -w 4``
on SQLite (read, list, streams, ``Last-Event-ID``, cancel, continuation); two
gunicorn instances ("hosts") sharing Redis; SIGKILL of the worker running a
task (no acknowledged task lost, a resumed stream exactly once, the orphan
FAILED through its lease); retention (SQLite purge, Redis expiry); start-up
guard rails (memory store warning, unusable store URLs).

The servers run :func:`scale_app` (``tests.server.test_scale:scale_app()``): the
conformance agent (push configs accepted, never delivered) plus ``tick``, which
emits numbered chunks of one artifact and, when it stops for any reason, writes
a marker file with its pid, how many chunks it emitted and how it ended.  Which
worker serves a connection is read from ``/proc`` (see ``tests.server.test_server``).
"""
from __future__ import annotations

import dataclasses
import json
import os
import signal
import sqlite3
import time
import uuid
from contextlib import closing
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Tuple

import pytest
import redis as redis_py
from flask import Flask

from a2a_flask import A2A
from a2a_flask.protocol.models import Message, Role
from a2a_flask.stores import StoreError, open_store

from tests.conftest import REDIS_URL, drop_redis_prefix, redis_up
from tests.support.helpers import Server, parse_sse, user_message
from tests.support.tasks import (
    CANCELED,
    COMPLETED,
    FAILED,
    INPUT_REQUIRED,
    SUBMITTED,
    TERMINAL,
    WORKING,
    get_task,
    wait_for_state,
)

from tests.server.test_server import (RawConnection, connect_elsewhere, gunicorn_workers, kind,
                                      raw_request, unique)

pytestmark = pytest.mark.declare(slow=[
    "redis_hosts",
    "test_memory_store_under_two_workers_logs_the_warning_at_start",
    "test_a_bad_redis_url_fails_the_boot_with_a_clear_message",
    "test_open_store_refuses_unknown_schemes_bad_paths_and_bad_redis_urls"])

#: Lease TTL of the servers whose workers get killed: orphans fail within about this.
LEASE_TTL = 2
#: Slack on top of the lease TTL before an orphan must be FAILED (catches hangs only).
ORPHAN_SLACK = 10.0
MEMORY_WARNING = "uses the memory store under 2 gunicorn workers"


# ------------------------------------------------------------------ the app under test


def _tick(ctx) -> None:
    """WORKING, then ``n`` chunks of artifact ``ticks`` every ``every`` s, then COMPLETED.

    ``stubborn``: emit nothing and never look at ``ctx`` until done (only a kill stops it).
    """
    spec = json.loads(ctx.text)
    count, every, mark = spec["n"], spec.get("every", 0.1), spec.get("mark", "")
    done, how = 0, "interrupted"
    try:
        ctx.working("ticking")
        if spec.get("stubborn"):
            deadline = time.monotonic() + count * every
            while time.monotonic() < deadline:
                time.sleep(0.05)
            how = "finished"
            ctx.complete()
            return
        for index in range(count):
            if ctx.cancelled:
                how = "cancelled"
                return
            ctx.artifact(f"tick {index}", artifact_id="ticks", append=index > 0)
            done += 1
            time.sleep(every)  # gevent-patched under gunicorn
        how = "finished"
        ctx.complete(f"{count} ticks")
    finally:
        if mark:
            Path(mark).write_text(f"{os.getpid()} {done} {how}")


def _scale_executor(ctx):
    from examples import conformance_agent

    if ctx.message.message_id.startswith("tick"):
        return _tick(ctx)
    return conformance_agent.conformance(ctx)


def scale_app() -> Flask:
    """App factory for gunicorn: config from ``FLASK_A2A_*`` (store, lease and task TTLs)."""
    from examples import conformance_agent

    card = conformance_agent.a2a.card
    card = dataclasses.replace(card, capabilities=dataclasses.replace(card.capabilities,
                                                                      push_notifications=True))
    app = Flask("a2a_scale_test_app")
    app.config["A2A_PUSH_ALLOWED_HOSTS"] = "example.com"  # no DNS for it: pushes just retry
    app.config.from_prefixed_env()
    A2A(app, card=card, executor=_scale_executor)
    return app


APP = "tests.server.test_scale:scale_app()"


# ------------------------------------------------------------------ messages and reads


def tick(n: int, every: float = 0.1, mark: Any = "", stubborn: bool = False,
         **extra: Any) -> Dict[str, Any]:
    spec = {"n": n, "every": every, "mark": str(mark), "stubborn": stubborn}
    return user_message(json.dumps(spec), unique("tick"), **extra)


def msg(prefix: str, text: str = "hi", **extra: Any) -> Dict[str, Any]:
    return user_message(text, unique(prefix), **extra)


RETURN_IMMEDIATELY = {"returnImmediately": True}


def result(body: Dict[str, Any]) -> Dict[str, Any]:
    assert "result" in body, body
    return body["result"]


def status_text(status: Dict[str, Any]) -> str:
    return " ".join(p.get("text", "") for p in status.get("message", {}).get("parts", []))


def shown_seqs(store_url: str, task_id: str) -> List[int]:
    """A fresh full read of the task's log from the store: the sequence numbers a stream
    shows (user messages are in the log but never streamed)."""
    store = open_store(store_url)
    try:
        entries = list(store.entries(task_id, 0))
    finally:
        store.close()
    return [e.seq for e in entries
            if not (isinstance(e.event, Message) and e.event.role is Role.USER)]


def ids_of(events: Iterable[Dict[str, Any]]) -> List[int]:
    return [int(e["id"]) for e in events]


def check_exactly_once(ids: List[int], log: List[int], start: int) -> None:
    """``ids`` are every shown log entry from ``start`` on, each once, in order."""
    assert len(ids) == len(set(ids)), f"duplicate events: {ids}"
    assert ids == sorted(ids), f"events out of order: {ids}"
    assert ids == [seq for seq in log if seq >= start], f"stream {ids} vs log {log}"


def db_rows(db: Path, sql: str, args: tuple = ()) -> List[tuple]:
    """Rows of a query on a server's SQLite file, read directly."""
    with closing(sqlite3.connect(db)) as check:
        return check.execute(sql, args).fetchall()


def tick_texts(results: List[Dict[str, Any]]) -> List[str]:
    return [r["artifactUpdate"]["artifact"]["parts"][0]["text"]
            for r in results if "artifactUpdate" in r]


def wait_until(predicate, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what}: not within {timeout}s")


def read_mark(path: Path) -> Optional[Tuple[int, int, str]]:
    """``(pid, chunks emitted, how it ended)`` once the tick executor stopped."""
    try:
        pid, done, how = path.read_text().split()
    except (OSError, ValueError):
        return None
    return int(pid), int(done), how


# ------------------------------------------------------------------ routing to workers


def connection(server: Server, avoid: Iterable[int] = (), prefer_not: Iterable[int] = ()
               ) -> Tuple[RawConnection, int]:
    """A keep-alive connection and the worker serving it, never one in ``avoid`` and,
    while another worker is left, none in ``prefer_not``."""
    avoid = set(avoid)
    shunned = avoid | set(prefer_not)
    if not set(gunicorn_workers(server.proc.pid)) - shunned:
        shunned = avoid
    return connect_elsewhere(server.proc.pid, server.port, shunned)


def call_on(server: Server, method: str, params: Any, avoid: Iterable[int] = (),
            prefer_not: Iterable[int] = ()) -> Tuple[Dict[str, Any], int]:
    """One JSON-RPC call on a worker not in ``avoid``; the body and the worker's pid."""
    conn, pid = connection(server, avoid, prefer_not)
    with conn:
        return conn.call(method, params), pid


class RawStream:
    """A streaming call on a socket of its own, read as it arrives.

    ``ended``: the server finished the body; ``broken``: the connection dropped first.
    """

    def __init__(self, conn: RawConnection, pid: int, method: str, params: Any, *,
                 headers: Optional[dict] = None, request_id: str = "s") -> None:
        self.conn, self.pid = conn, pid
        self.events: List[Dict[str, Any]] = []
        self.ended = self.broken = False
        self._raw = b""
        self._payload = b""
        conn.sock.settimeout(20)
        conn.sock.sendall(raw_request(conn.port, method, params, request_id, headers=headers))
        self._read_head()

    def _recv(self) -> bytes:
        try:
            return self.conn.sock.recv(65536)
        except ConnectionResetError:
            return b""

    def _read_head(self) -> None:
        while b"\r\n\r\n" not in self._raw:
            data = self._recv()
            assert data, "connection closed before the response head"
            self._raw += data
        head, self._raw = self._raw.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split()[1])
        self.headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        assert self.status == 200, head
        assert self.headers.get("content-type", "").startswith("text/event-stream"), (
            head, self._raw[:300])
        self._chunked = self.headers.get("transfer-encoding", "").lower() == "chunked"
        self._decode()

    def _decode(self) -> None:
        """Move complete chunks to the payload; the zero-size chunk ends the body."""
        if not self._chunked:
            self._payload += self._raw
            self._raw = b""
            return
        while True:
            eol = self._raw.find(b"\r\n")
            if eol < 0:
                return
            size = int(self._raw[:eol].split(b";")[0], 16)
            if size == 0:
                self.ended = True
                return
            if len(self._raw) < eol + 2 + size + 2:
                return
            self._payload += self._raw[eol + 2:eol + 2 + size]
            self._raw = self._raw[eol + 2 + size + 2:]

    def next_event(self) -> Optional[Dict[str, Any]]:
        while True:
            while b"\n\n" in self._payload:
                block, self._payload = self._payload.split(b"\n\n", 1)
                parsed = parse_sse(block.decode("utf-8") + "\n\n")
                if parsed:
                    self.events.append(parsed[0])
                    return parsed[0]
            if self.ended or self.broken:
                return None
            data = self._recv()
            if not data:
                if self._chunked:
                    self.broken = True
                else:
                    self.ended = True
                return None
            self._raw += data
            self._decode()

    def read_all(self) -> List[Dict[str, Any]]:
        while self.next_event() is not None:
            pass
        return self.events

    def read_until(self, predicate, what: str) -> None:
        while not predicate(self.results):
            assert self.next_event() is not None, f"stream ended before {what}: {self.results}"

    @property
    def results(self) -> List[Dict[str, Any]]:
        return [e["data"]["result"] for e in self.events]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "RawStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def open_stream(server: Server, method: str, params: Any, *, avoid: Iterable[int] = (),
                prefer_not: Iterable[int] = (), headers: Optional[dict] = None) -> RawStream:
    conn, pid = connection(server, avoid, prefer_not)
    try:
        return RawStream(conn, pid, method, params, headers=headers)
    except BaseException:
        conn.close()
        raise


def check_events_are_well_formed(stream: RawStream, task_id: str) -> None:
    for event in stream.events:
        assert event.get("event") is None, event  # no error event
        data = event["data"]
        assert "error" not in data, data
        res = data["result"]
        got = res.get("task", {}).get("id") or (res.get("statusUpdate") or res.get(
            "artifactUpdate"))["taskId"]
        assert got == task_id, res


# ------------------------------------------------------------------ servers


def start_server(workers: int, env: Dict[str, str], app: str = APP) -> Server:
    server = Server(app, workers=workers, env=env)
    try:
        wait_until(lambda: len(gunicorn_workers(server.proc.pid)) == workers, 15,
                   f"{workers} workers")
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="module")
def scale_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("scale")


@pytest.fixture(scope="module")
def sqlite4(scale_dir):
    """Four gevent workers sharing one SQLite file, 1 s cancel grace:
    ``(server, store URL, db path)``."""
    db = scale_dir / "w4" / "tasks.db"
    url = f"sqlite:///{db}"
    server = start_server(4, {"FLASK_A2A_STORE": url, "FLASK_A2A_CANCEL_GRACE": "1"})
    yield server, url, db
    server.stop()


@pytest.fixture(scope="module")
def sqlite2(scale_dir):
    """Two gevent workers on SQLite with a 2 s lease, for killing a worker."""
    db = scale_dir / "w2" / "tasks.db"
    url = f"sqlite:///{db}"
    server = start_server(2, {"FLASK_A2A_STORE": url, "FLASK_A2A_LEASE_TTL": str(LEASE_TTL)})
    yield server, url, db
    server.stop()


@pytest.fixture(scope="module")
def redis_prefix():
    redis_up()
    prefix = f"a2ascale-{uuid.uuid4().hex[:12]}"
    yield prefix
    drop_redis_prefix(prefix)


@pytest.fixture(scope="module")
def redis_hosts(redis_prefix):
    """Two gunicorn instances (two ports: two hosts) sharing Redis db 15, 2 s lease:
    ``(host A, host B, store URL)``."""
    url = f"{REDIS_URL}?prefix={redis_prefix}"
    env = {"FLASK_A2A_STORE": url, "FLASK_A2A_LEASE_TTL": str(LEASE_TTL)}
    host_a = start_server(1, env)
    try:
        host_b = start_server(1, env)
    except BaseException:
        host_a.stop()
        raise
    yield host_a, host_b, url
    host_a.stop()
    host_b.stop()


@pytest.fixture
def redis_client(redis_prefix):
    client = redis_py.Redis.from_url(REDIS_URL)
    yield client
    client.close()


def worker_of(host: Server) -> int:
    (pid,) = gunicorn_workers(host.proc.pid)
    return pid


# ------------------------------------------------------------------ 1. SQLite, four workers


def test_sqlite_workers_see_one_task_by_get_list_and_last_event_id_replay(sqlite4):
    server, url, _ = sqlite4
    context_id = unique("ctx")
    body, runner = call_on(server, "SendMessage", {
        "message": tick(12, 0.1, contextId=context_id), "configuration": RETURN_IMMEDIATELY})
    task = result(body)["task"]
    assert task["status"]["state"] in (SUBMITTED, WORKING)

    got, reader = call_on(server, "GetTask", {"id": task["id"]}, avoid={runner})
    assert result(got)["id"] == task["id"] and result(got)["contextId"] == context_id
    listed, lister = call_on(server, "ListTasks", {"contextId": context_id}, avoid={runner},
                             prefer_not={reader})
    assert [t["id"] for t in result(listed)["tasks"]] == [task["id"]]

    # Resume from the first event while the task still runs on the runner.
    with open_stream(server, "SubscribeToTask", {"id": task["id"]}, avoid={runner},
                     prefer_not={reader, lister}, headers={"Last-Event-ID": "1"}) as live:
        live.read_all()
    assert live.ended and live.pid != runner
    check_events_are_well_formed(live, task["id"])
    log = shown_seqs(url, task["id"])
    check_exactly_once(ids_of(live.events), log, start=2)
    assert [kind(r) for r in live.results] == ["WORKING"] + ["artifact"] * 12 + ["COMPLETED"]
    assert tick_texts(live.results) == [f"tick {i}" for i in range(12)]

    # After the end: a mid-log Last-Event-ID replays exactly the rest, on yet another worker.
    middle = log[len(log) // 2]
    with open_stream(server, "SubscribeToTask", {"id": task["id"]}, avoid={runner},
                     prefer_not={live.pid}, headers={"Last-Event-ID": str(middle)}) as replay:
        replay.read_all()
    assert replay.ended
    check_exactly_once(ids_of(replay.events), log, start=middle + 1)
    assert [e["data"]["result"] for e in replay.events] == [
        e["data"]["result"] for e in live.events if int(e["id"]) > middle]
    nothing_missing, _ = call_on(server, "SubscribeToTask", {"id": task["id"]})
    assert nothing_missing["error"]["code"] == -32004  # terminal and no Last-Event-ID


def test_sqlite_streams_on_every_other_worker_get_each_event_of_the_runner_once_in_order(
        sqlite4, scale_dir):
    server, url, _ = sqlite4
    mark = scale_dir / unique("mark")
    watchers: List[RawStream] = []
    # 4 s of ticks: the three subscribers open while it runs, however loaded the machine.
    with open_stream(server, "SendStreamingMessage", {"message": tick(40, 0.1, mark)}) as sender:
        try:
            first = sender.next_event()
            task_id = first["data"]["result"]["task"]["id"]
            for _ in range(3):  # one subscriber per other worker, while it can be had
                watchers.append(open_stream(server, "SubscribeToTask", {"id": task_id},
                                            avoid={sender.pid},
                                            prefer_not={w.pid for w in watchers}))
            for watcher in watchers:
                watcher.read_all()
            sender.read_all()
        finally:
            for watcher in watchers:
                watcher.close()
    assert read_mark(mark)[0] == sender.pid, "the task did not run where it was sent"
    assert sender.pid not in {w.pid for w in watchers}
    log = shown_seqs(url, task_id)
    check_exactly_once(ids_of(sender.events), log, start=1)
    assert tick_texts(sender.results) == [f"tick {i}" for i in range(40)]
    by_id = {e["id"]: e["data"]["result"] for e in sender.events}
    for stream in [sender] + watchers:
        assert stream.ended and kind(stream.results[-1]) == "COMPLETED"
        check_events_are_well_formed(stream, task_id)
    for watcher in watchers:
        assert "task" in watcher.results[0]
        check_exactly_once(ids_of(watcher.events), log, start=int(watcher.events[0]["id"]))
        assert all(by_id[e["id"]] == e["data"]["result"] for e in watcher.events[1:])


def test_sqlite_cancel_on_another_worker_stops_the_executor_where_it_runs(sqlite4, scale_dir):
    server, url, db = sqlite4
    mark = scale_dir / unique("mark")
    body, runner = call_on(server, "SendMessage", {
        "message": tick(100, 0.1, mark), "configuration": RETURN_IMMEDIATELY})
    task_id = result(body)["task"]["id"]
    with open_stream(server, "SubscribeToTask", {"id": task_id}, avoid={runner}) as watcher:
        watcher.read_until(lambda rs: len(tick_texts(rs)) >= 2, "two ticks")
        canceled, canceler = call_on(server, "CancelTask", {"id": task_id}, avoid={runner},
                                     prefer_not={watcher.pid})
        assert result(canceled)["status"]["state"] == CANCELED
        watcher.read_all()
    assert watcher.ended and kind(watcher.results[-1]) == "CANCELED"
    check_events_are_well_formed(watcher, task_id)
    stopped = wait_until(lambda: read_mark(mark), 10, "the runner's executor stopping")
    pid, emitted, how = stopped
    assert pid == runner and runner not in (canceler, watcher.pid)
    assert how in ("cancelled", "interrupted") and emitted < 100
    log = shown_seqs(url, task_id)
    check_exactly_once(ids_of(watcher.events), log, start=int(watcher.events[0]["id"]))
    # The run ended where it ran: its lease is released and nothing follows CANCELED.
    wait_until(lambda: not db_rows(db, "SELECT 1 FROM leases WHERE task_id=?", (task_id,)),
               10, "lease released")
    assert shown_seqs(url, task_id) == log
    assert get_task(server, task_id)["status"]["state"] == CANCELED


def test_sqlite_cancel_on_another_worker_kills_an_executor_that_ignores_it(sqlite4, scale_dir):
    server, url, db = sqlite4
    mark = scale_dir / unique("mark")
    body, runner = call_on(server, "SendMessage", {
        "message": tick(300, 0.1, mark, stubborn=True), "configuration": RETURN_IMMEDIATELY})
    task_id = result(body)["task"]["id"]
    wait_until(lambda: get_task(server, task_id)["status"]["state"] == WORKING, 10, "WORKING")
    canceled, canceler = call_on(server, "CancelTask", {"id": task_id}, avoid={runner})
    assert result(canceled)["status"]["state"] == CANCELED
    # The runner's keeper sees the cancel, waits the 1 s grace, then kills the greenlet.
    pid, _, how = wait_until(lambda: read_mark(mark), 15, "the stubborn executor killed")
    assert pid == runner != canceler and how == "interrupted"
    wait_until(lambda: not db_rows(db, "SELECT 1 FROM leases WHERE task_id=?", (task_id,)),
               10, "lease released")
    log = shown_seqs(url, task_id)
    assert len(log) == 3  # the task, WORKING, CANCELED: nothing after the cancel
    assert get_task(server, task_id)["status"]["state"] == CANCELED


def test_sqlite_input_required_continues_on_another_worker_while_others_stream(sqlite4):
    server, url, _ = sqlite4
    with open_stream(server, "SendStreamingMessage",
                     {"message": msg("tck-input-required", "q")}) as asking:
        asking.read_all()
    asker = asking.pid
    assert asking.ended and [kind(r) for r in asking.results] == ["task", "INPUT_REQUIRED"]
    task = asking.results[0]["task"]
    with open_stream(server, "SubscribeToTask", {"id": task["id"]}, avoid={asker}) as watcher, \
            open_stream(server, "SubscribeToTask", {"id": task["id"]}, avoid={asker},
                        prefer_not={watcher.pid},
                        headers={"Last-Event-ID": asking.events[-1]["id"]}) as resumer:
        assert kind(watcher.next_event()["data"]["result"]) == "task"
        follow_up = msg("tck-input-required", "a", taskId=task["id"], contextId=task["contextId"])
        done, answerer = call_on(server, "SendMessage", {"message": follow_up}, avoid={asker},
                                 prefer_not={watcher.pid, resumer.pid})
        watcher.read_all()
        resumer.read_all()
    assert result(done)["task"]["status"]["state"] == COMPLETED
    assert status_text(result(done)["task"]["status"]) == "Thanks, got it"
    assert answerer != asker
    assert [kind(r) for r in watcher.results] == ["task", "WORKING", "COMPLETED"]
    assert watcher.results[0]["task"]["status"]["state"] == INPUT_REQUIRED
    assert [kind(r) for r in resumer.results] == ["WORKING", "COMPLETED"]
    log = shown_seqs(url, task["id"])
    check_exactly_once(ids_of(asking.events) + ids_of(resumer.events), log, start=1)
    check_exactly_once(ids_of(watcher.events), log, start=int(watcher.events[0]["id"]))
    conn, _ = connection(server, prefer_not={answerer})
    with conn:
        final = result(conn.call("GetTask", {"id": task["id"]}))
    assert final["status"]["state"] == COMPLETED
    assert [(m["role"], m["parts"][0]["text"]) for m in final["history"]] == [
        ("ROLE_USER", "q"), ("ROLE_AGENT", "Please provide more input"), ("ROLE_USER", "a")]


def test_sqlite_memory_warning_is_not_logged_for_a_shared_store(sqlite4):
    server, _, _ = sqlite4
    assert "uses the memory store" not in server.log_path.read_text()


# ------------------------------------------------------------------ 2. two hosts on Redis


def test_redis_task_sent_to_host_a_is_read_listed_and_streamed_once_in_order_on_host_b(
        redis_hosts, scale_dir):
    host_a, host_b, url = redis_hosts
    mark = scale_dir / unique("mark")
    context_id = unique("ctx")
    with open_stream(host_a, "SendStreamingMessage",
                     {"message": tick(20, 0.05, mark, contextId=context_id)}) as sender:
        first = sender.next_event()
        task_id = first["data"]["result"]["task"]["id"]
        assert get_task(host_b, task_id)["contextId"] == context_id
        listed = result(host_b.rpc("ListTasks", {"contextId": context_id}))["tasks"]
        assert [t["id"] for t in listed] == [task_id]
        with open_stream(host_b, "SubscribeToTask", {"id": task_id}) as watcher, \
                open_stream(host_b, "SubscribeToTask", {"id": task_id},
                            headers={"Last-Event-ID": first["id"]}) as resumer:
            snapshot = watcher.next_event()
            watcher.read_all()
            resumer.read_all()
        sender.read_all()
    assert read_mark(mark)[0] == worker_of(host_a)
    log = shown_seqs(url, task_id)
    check_exactly_once(ids_of(sender.events), log, start=1)
    check_exactly_once(ids_of(watcher.events), log, start=int(snapshot["id"]))
    check_exactly_once(ids_of(resumer.events), log, start=int(first["id"]) + 1)
    by_id = {e["id"]: e["data"]["result"] for e in sender.events}
    assert all(by_id[e["id"]] == e["data"]["result"] for e in watcher.events[1:] + resumer.events)
    for stream in (sender, watcher, resumer):
        assert stream.ended and kind(stream.results[-1]) == "COMPLETED"
        check_events_are_well_formed(stream, task_id)
    assert tick_texts(resumer.results) == [f"tick {i}" for i in range(20)]
    assert get_task(host_b, task_id)["status"]["state"] == COMPLETED


def test_redis_cancel_on_host_b_stops_the_run_on_host_a(redis_hosts, scale_dir):
    host_a, host_b, url = redis_hosts
    mark = scale_dir / unique("mark")
    task = result(host_a.rpc("SendMessage", {"message": tick(100, 0.1, mark),
                                             "configuration": RETURN_IMMEDIATELY}))["task"]
    with open_stream(host_a, "SubscribeToTask", {"id": task["id"]}) as on_a, \
            open_stream(host_b, "SubscribeToTask", {"id": task["id"]}) as on_b:
        on_b.read_until(lambda rs: len(tick_texts(rs)) >= 2, "two ticks")
        assert result(host_b.rpc("CancelTask", {"id": task["id"]}))["status"]["state"] == CANCELED
        on_a.read_all()
        on_b.read_all()
    log = shown_seqs(url, task["id"])
    for stream in (on_a, on_b):
        assert stream.ended and kind(stream.results[-1]) == "CANCELED"
        check_exactly_once(ids_of(stream.events), log, start=int(stream.events[0]["id"]))
    pid, emitted, how = wait_until(lambda: read_mark(mark), 10, "host A's executor stopping")
    assert pid == worker_of(host_a) and how in ("cancelled", "interrupted") and emitted < 100
    assert shown_seqs(url, task["id"]) == log, "the run wrote after CANCELED"
    assert get_task(host_a, task["id"])["status"]["state"] == CANCELED


def test_redis_task_paused_on_host_a_continues_on_host_b(redis_hosts):
    host_a, host_b, url = redis_hosts
    task = result(host_a.rpc("SendMessage", {"message": msg("tck-input-required", "q")}))["task"]
    assert task["status"]["state"] == INPUT_REQUIRED
    with open_stream(host_a, "SubscribeToTask", {"id": task["id"]}) as on_a:
        assert kind(on_a.next_event()["data"]["result"]) == "task"
        follow_up = msg("tck-input-required", "a", taskId=task["id"])
        done = result(host_b.rpc("SendMessage", {"message": follow_up}))["task"]
        on_a.read_all()
    assert done["status"]["state"] == COMPLETED and status_text(done["status"]) == "Thanks, got it"
    assert [kind(r) for r in on_a.results] == ["task", "WORKING", "COMPLETED"]
    check_exactly_once(ids_of(on_a.events), shown_seqs(url, task["id"]),
                       start=int(on_a.events[0]["id"]))
    assert get_task(host_a, task["id"]) == get_task(host_b, task["id"])


def test_redis_finished_tasks_get_a_ttl_and_running_ones_do_not(redis_hosts, redis_prefix,
                                                                redis_client):
    host_a, host_b, _ = redis_hosts
    done = result(host_a.rpc("SendMessage", {"message": msg("tck-artifact-text")}))["task"]
    paused = result(host_b.rpc("SendMessage", {"message": msg("tck-input-required")}))["task"]
    assert done["status"]["state"] == COMPLETED and paused["status"]["state"] == INPUT_REQUIRED
    for key in (f"{redis_prefix}:task:{done['id']}", f"{redis_prefix}:log:{done['id']}"):
        ttl = redis_client.ttl(key)
        assert 0 < ttl <= 3600, (key, ttl)  # A2A_TASK_TTL defaults to an hour
    assert redis_client.ttl(f"{redis_prefix}:task:{paused['id']}") == -1
    assert redis_client.ttl(f"{redis_prefix}:log:{paused['id']}") == -1


def test_redis_finished_task_with_a_push_config_gets_a_ttl_on_every_key(
        redis_hosts, redis_prefix, redis_client):
    host_a, host_b, _ = redis_hosts
    task = result(host_a.rpc("SendMessage", {"message": msg("tck-input-required")}))["task"]
    hook = result(host_b.rpc("CreateTaskPushNotificationConfig",
                             {"taskId": task["id"], "url": "https://example.com/hook"}))
    assert hook["taskId"] == task["id"]
    follow_up = msg("tck-input-required", "a", taskId=task["id"])
    assert result(host_a.rpc("SendMessage", {"message": follow_up}))["task"]["status"][
        "state"] == COMPLETED
    keys = {key.decode(): redis_client.ttl(key)
            for key in redis_client.scan_iter(f"{redis_prefix}:*:{task['id']}")}
    kinds = {key.split(":")[-2] for key in keys}
    assert {"task", "log", "push", "pushorder"} <= kinds, keys
    assert all(0 < ttl <= 3600 for ttl in keys.values()), keys


# ------------------------------------------------------------------ 3. a worker killed mid-stream


def start_acknowledged(server: Server, count: int) -> Dict[str, int]:
    """``count`` running tick tasks (returnImmediately) and as many finished ones, spread
    over the workers: task id -> pid of the worker that ran it."""
    runs: Dict[str, int] = {}
    several = len(gunicorn_workers(server.proc.pid)) > 1
    last: Optional[int] = None
    for _ in range(count):
        conn, pid = connection(server, avoid={last} if several and last else ())
        with conn:
            running = result(conn.call("SendMessage", {"message": tick(40, 0.1),
                                                       "configuration": RETURN_IMMEDIATELY}))
            finished = result(conn.call("SendMessage", {"message": msg("tck-complete-task")}))
        assert finished["task"]["status"]["state"] == COMPLETED
        runs[running["task"]["id"]] = pid
        runs[finished["task"]["id"]] = pid
        last = pid
    return runs


def check_orphan_failed(status: Dict[str, Any]) -> None:
    assert status["state"] == FAILED, status
    assert "lease" in status_text(status), status


def kill_mid_stream(sender: RawStream) -> Tuple[List[Dict[str, Any]], float]:
    """Kill the worker serving ``sender`` (it runs the streamed task) once five ticks came.

    Returns the events the client had *processed*, up to the first tick only (the
    rest is dropped with the connection, as by a client that crashed with it), and
    the kill time.
    """
    sender.read_until(lambda rs: len(tick_texts(rs)) >= 5, "five ticks")
    os.kill(sender.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    sender.read_all()  # whatever was already on its way
    assert sender.broken and not sender.ended, "the stream of a killed worker cannot end cleanly"
    assert not any(kind(r) in ("COMPLETED", "FAILED") for r in sender.results)
    first_tick = next(i for i, r in enumerate(sender.results) if "artifactUpdate" in r)
    return sender.events[:first_tick + 1], killed_at


def resume_after_kill(server: Server, url: str, task_id: str, processed: List[Dict[str, Any]],
                      received: List[Dict[str, Any]], killed_at: float, dead: int) -> None:
    """Resume on a live worker from the last processed event: the rest exactly once,
    ending FAILED by the lease, within the lease TTL plus slack."""
    with open_stream(server, "SubscribeToTask", {"id": task_id}, avoid={dead},
                     headers={"Last-Event-ID": processed[-1]["id"]}) as resumed:
        resumed.read_all()
    failed_within = time.monotonic() - killed_at
    assert resumed.ended and resumed.pid != dead
    check_events_are_well_formed(resumed, task_id)
    assert kind(resumed.results[-1]) == "FAILED"
    check_orphan_failed(resumed.results[-1]["statusUpdate"]["status"])
    assert failed_within < LEASE_TTL + ORPHAN_SLACK, f"orphan FAILED after {failed_within:.1f}s"
    log = shown_seqs(url, task_id)
    ids = ids_of(processed) + ids_of(resumed.events)
    check_exactly_once(ids, log, start=1)
    # The replay repeats what the dropped connection carried, identically.
    replayed = {e["id"]: e["data"] for e in resumed.events}
    assert all(replayed[e["id"]] == e["data"] for e in received[len(processed):])
    texts = tick_texts([e["data"]["result"] for e in processed + resumed.events])
    assert len(texts) >= 5 and texts == [f"tick {i}" for i in range(len(texts))]


def states_now(server: Server, task_ids: Iterable[str]) -> Dict[str, Dict[str, Any]]:
    """Every task's status, read at once: none may be missing."""
    return {task_id: get_task(server, task_id)["status"] for task_id in task_ids}


def check_outcomes(server: Server, runs: Dict[str, int], after_kill: Dict[str, Dict[str, Any]],
                   dead: int) -> None:
    """Tasks the dead worker was still running are FAILED (lease); the rest COMPLETED."""
    orphans = 0
    for task_id, pid in runs.items():
        final = wait_for_state(server, task_id, TERMINAL, LEASE_TTL + ORPHAN_SLACK)["status"]
        if pid == dead and after_kill[task_id]["state"] != COMPLETED:
            check_orphan_failed(final)
            orphans += 1
        else:
            assert final["state"] == COMPLETED, (pid, dead, final)
    assert orphans >= 2, "the killed worker had no running task besides the streamed one"


def test_sqlite_sigkill_of_the_runner_loses_no_task_resumes_exactly_once_and_fails_the_orphan(
        sqlite2):
    server, url, _ = sqlite2
    with open_stream(server, "SendStreamingMessage", {"message": tick(100, 0.1)}) as sender:
        runner = sender.pid
        streamed_id = sender.next_event()["data"]["result"]["task"]["id"]
        runs = start_acknowledged(server, 4)
        runs[streamed_id] = runner
        (survivor,) = set(gunicorn_workers(server.proc.pid)) - {runner}
        paused, asker = call_on(server, "SendMessage", {"message": msg("tck-input-required")},
                                avoid={survivor})
        paused = result(paused)["task"]
        processed, killed_at = kill_mid_stream(sender)
    after_kill = states_now(server, list(runs) + [paused["id"]])  # no acknowledged task is lost
    assert runner not in gunicorn_workers(server.proc.pid)
    resume_after_kill(server, url, streamed_id, processed, sender.events, killed_at, runner)
    check_outcomes(server, runs, after_kill, runner)
    # A task waiting for input holds no lease: never reaped, and it goes on elsewhere.
    assert asker == runner and after_kill[paused["id"]]["state"] == INPUT_REQUIRED
    assert get_task(server, paused["id"])["status"]["state"] == INPUT_REQUIRED
    follow_up = msg("tck-input-required", "a", taskId=paused["id"])
    assert result(server.rpc("SendMessage", {"message": follow_up}))["task"]["status"][
        "state"] == COMPLETED
    # gunicorn respawned the killed worker: the new one serves every task too.
    wait_until(lambda: set(gunicorn_workers(server.proc.pid)) - {runner, survivor}, 15,
               "the killed worker respawned")
    conn, fresh = connection(server, avoid={survivor})
    with conn:
        for task_id in list(runs) + [paused["id"]]:
            assert result(conn.call("GetTask", {"id": task_id}))["status"]["state"] in TERMINAL
    assert fresh not in (runner, survivor)


def test_redis_sigkill_of_host_a_worker_loses_no_task_and_host_b_resumes_exactly_once(
        redis_hosts):
    host_a, host_b, url = redis_hosts
    runner = worker_of(host_a)
    with open_stream(host_a, "SendStreamingMessage", {"message": tick(100, 0.1)}) as sender:
        assert sender.pid == runner
        streamed_id = sender.next_event()["data"]["result"]["task"]["id"]
        runs = {**start_acknowledged(host_a, 2), **start_acknowledged(host_b, 2)}
        runs[streamed_id] = runner
        processed, killed_at = kill_mid_stream(sender)
    after_kill = states_now(host_b, runs)
    resume_after_kill(host_b, url, streamed_id, processed, sender.events, killed_at, runner)
    check_outcomes(host_b, runs, after_kill, runner)
    # gunicorn respawns the killed worker: host A serves every task again.
    respawned = wait_until(lambda: [p for p in gunicorn_workers(host_a.proc.pid) if p != runner],
                           15, "host A's worker respawned")
    assert len(respawned) == 1
    for task_id in runs:
        assert get_task(host_a, task_id) == get_task(host_b, task_id)


# ------------------------------------------------------------------ 4. retention


@pytest.fixture(scope="module")
def sqlite_ttl(scale_dir):
    """One worker on SQLite keeping finished tasks for one second."""
    db = scale_dir / "ttl" / "tasks.db"
    url = f"sqlite:///{db}"
    server = start_server(1, {"FLASK_A2A_STORE": url, "FLASK_A2A_TASK_TTL": "1"})
    yield server, url, db
    server.stop()


def test_sqlite_finished_tasks_are_purged_after_the_task_ttl_and_paused_ones_kept(sqlite_ttl):
    server, _, db = sqlite_ttl
    done = result(server.rpc("SendMessage", {"message": msg("tck-artifact-text")}))["task"]
    rejected = result(server.rpc("SendMessage", {"message": msg("tck-reject-task")}))["task"]
    paused = result(server.rpc("SendMessage", {"message": msg("tck-input-required")}))["task"]
    assert paused["status"]["state"] == INPUT_REQUIRED
    result(server.rpc("CreateTaskPushNotificationConfig",
                      {"taskId": paused["id"], "url": "https://example.com/hook"}))

    def gone(task_id: str) -> bool:
        return server.rpc("GetTask", {"id": task_id}).get("error", {}).get("code") == -32001

    wait_until(lambda: gone(done["id"]) and gone(rejected["id"]), 15, "finished tasks purged",
               interval=0.2)
    for table, column in (("events", "task_id"), ("tasks", "id"), ("leases", "task_id")):
        assert not db_rows(db, f"SELECT 1 FROM {table} WHERE {column} IN (?, ?)",
                           (done["id"], rejected["id"])), table
    listed = {t["id"] for t in result(server.rpc("ListTasks", {"pageSize": 100}))["tasks"]}
    assert done["id"] not in listed and rejected["id"] not in listed
    # Older than the TTL by now, but not finished: kept; finished later, it goes too.
    assert get_task(server, paused["id"])["status"]["state"] == INPUT_REQUIRED
    assert paused["id"] in listed
    follow_up = msg("tck-input-required", "a", taskId=paused["id"])
    assert result(server.rpc("SendMessage", {"message": follow_up}))["task"]["status"][
        "state"] == COMPLETED
    wait_until(lambda: gone(paused["id"]), 15, "continued task purged", interval=0.2)
    for table in ("events", "push_targets"):
        assert not db_rows(db, f"SELECT 1 FROM {table} WHERE task_id=?", (paused["id"],)), table


# ------------------------------------------------------------------ 5. guard rails


class _Probe(Server):
    """A Server that remembers itself before waiting, so a failed boot leaves its log path."""

    last: Optional["_Probe"] = None

    def _wait_ready(self, timeout: float = 60.0) -> None:
        _Probe.last = self
        super()._wait_ready(timeout)


def boot_log(store_url: str) -> str:
    """Start the conformance agent on ``store_url``; it must fail to boot: its log."""
    _Probe.last = None
    with pytest.raises(RuntimeError, match="gunicorn exited"):
        _Probe("examples.conformance_agent:app", env={"FLASK_A2A_STORE": store_url})
    probe = _Probe.last
    assert probe is not None
    probe.stop()
    assert probe.proc.returncode != 0
    return probe.log_path.read_text()


def test_memory_store_under_two_workers_logs_the_warning_at_start():
    with Server("examples.conformance_agent:app", workers=2,
                     env={"FLASK_A2A_STORE": "memory://"}) as server:
        wait_until(lambda: MEMORY_WARNING in server.log_path.read_text(), 10,
                   "the memory store warning")
        text = server.log_path.read_text()
    assert "sqlite:///" in text and "redis://" in text  # it says what to use instead


def test_a_bad_redis_url_fails_the_boot_with_a_clear_message():
    # A URL redis-py cannot read is a setting to fix; a Redis that is down is an
    # outage the workers start through (tests/stores/test_store_bounds.py).
    text = boot_log("redis://127.0.0.1:notaport/0")
    assert "StoreError: cannot use the redis store URL redis://127.0.0.1:notaport/0" in text
    assert "Worker failed to boot" in text


def test_unknown_store_scheme_fails_the_boot_with_a_clear_message():
    text = boot_log("bogus://x")
    assert "StoreError: unknown store URL 'bogus://x'" in text
    assert "Worker failed to boot" in text


def test_open_store_refuses_unknown_schemes_bad_paths_and_bad_redis_urls():
    with pytest.raises(StoreError, match="unknown store URL"):
        open_store("bogus://x")
    with pytest.raises(StoreError, match="needs a path"):
        open_store("sqlite://")
    with pytest.raises(StoreError, match="cannot use the redis store URL"):
        open_store("redis://127.0.0.1:notaport/0")
    with pytest.raises(StoreError, match="cannot open sqlite store"):
        open_store("sqlite:///proc/a2a-no-such-dir/tasks.db")
