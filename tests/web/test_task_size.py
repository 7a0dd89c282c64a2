"""What one task may hold (A2A_MAX_TASK_BYTES), and what a message to it costs the store.

Once, every message to an open task rewrote its whole snapshot
(message k cost O(k) bytes on disk), nothing bounded a task's bytes, a shelve
record over 1 GiB was read as a torn write (and the next writer cut off every
record after it), and Redis refused values over 512 MB.  (The record log's part
is in tests/stores/test_shelve_log.py.)
"""
from __future__ import annotations

import dataclasses
import os
import random
from typing import Optional

import pytest
import requests

from a2a_flask import TaskTooLargeError
from a2a_flask.engine import budget
from a2a_flask.engine.runtime import Runtime
from a2a_flask.protocol.events import apply_events
from a2a_flask.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_flask.stores import MemoryStore, SQLiteStore, StoreError
from a2a_flask.stores import redis as redis_store
from a2a_flask.stores.base import TaskRecord

from tests.support.helpers import Server, user_message
from tests.support.wire import rpc
from tests.stores.test_stores import append, create, open_store, stored_snapshot_seq, user_turn
from tests.support.tasks import get_task

pytestmark = pytest.mark.declare(server=[
    "test_a_real_server_refuses_the_message_that_would_overfill_a_task"], slow=[
    "test_a_large_snapshot_is_not_rewritten_for_each_doubling_of_small_events",
    "test_messages_to_an_open_task_send_redis_bytes_linear_in_what_was_sent",
    "test_redis_keeps_the_trimmed_history_between_snapshots",
    "test_redis_refuses_a_value_over_its_string_limit_before_writing"])

S = TaskState


# ----------------------------------------------------------------- helpers


def asker(ctx):
    """Waits for input after every message (an open conversation)."""
    ctx.ask("more?")


def send(client, text: str, task_id: str = "", number: int = 0) -> dict:
    extra = {"taskId": task_id} if task_id else {}
    return rpc(client, "SendMessage", {"message": user_message(text, f"m-{number}", **extra),
                                       "configuration": {"historyLength": 0}})


def model_message(text: str, role: Role = Role.AGENT, number: int = 0) -> Message:
    return Message(message_id=f"m{number}", role=role, parts=[Part(text=text)],
                   task_id="t1", context_id="c1")


def chunk(artifact_id: str, text: str, append: bool) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent("t1", "c1", Artifact(artifact_id, [Part(text=text)]), append)


def status(state: TaskState, text: Optional[str] = None, number: int = 0) -> TaskStatusUpdateEvent:
    words = model_message(text, number=number) if text is not None else None
    return TaskStatusUpdateEvent("t1", "c1", TaskStatus(state=state, message=words))


def random_events(rng: random.Random, count: int) -> list:
    """Chunks (appended or replacing), statuses with and without messages, user turns."""
    events: list = []
    for number in range(count):
        kind = rng.random()
        if kind < 0.6:
            events.append(chunk(rng.choice("abc"), "é" * rng.randint(0, 40) + f"p{number}",
                                append=rng.random() < 0.8))
        elif kind < 0.8:
            text = f"s{number}" * rng.randint(0, 5) if rng.random() < 0.7 else None
            events.append(status(S.WORKING, text, number))
        else:
            events.append(model_message(f"u{number}" * rng.randint(1, 9), Role.USER, number))
    return events


# ================================================================ measuring


def test_a_part_counts_its_content_as_stored():
    assert budget.part_size(Part(text="héllo")) == 6  # UTF-8 bytes
    assert budget.part_size(Part(raw=b"12345")) == 8  # base64
    assert budget.part_size(Part(url="https://e.x/f", media_type="text/plain",
                                 filename="f.txt")) == 13 + 10 + 5
    assert budget.part_size(Part(data={"a": [1, 2]})) == len('{"a":[1,2]}')
    assert budget.part_size(Part(text="x", metadata={"k": "v"})) == 1 + len('{"k":"v"}')


def test_a_task_counts_its_history_status_message_and_artifacts():
    first, second = model_message("hello", Role.USER, 1), model_message("what?", number=2)
    artifact = Artifact("a1", [Part(text="abc"), Part(text="de")], name="n")
    task = Task(id="t1", context_id="c1", history=[first], artifacts=[artifact],
                status=TaskStatus(state=S.INPUT_REQUIRED, message=second))
    assert budget.message_size(first) == len("hello") + len("m1")
    assert budget.artifact_size(artifact) == 5 + len("a1") + len("n")
    assert budget.task_size(task) == (budget.message_size(first) + budget.message_size(second)
                                      + budget.artifact_size(artifact))


@pytest.mark.parametrize("seed", range(30))
def test_growth_is_what_the_events_add_to_the_task(seed):
    """Whatever the mix (appended and replacing chunks, statuses, user turns), the task
    before plus the growth is the size of the task the events make (fixed seeds)."""
    rng = random.Random(seed)
    start = apply_events(Task(id="t1", context_id="c1", status=TaskStatus(state=S.WORKING)),
                         random_events(rng, rng.randint(0, 10)))
    events = random_events(rng, rng.randint(1, 30))
    assert budget.task_size(start) + budget.growth(start, events) == budget.task_size(
        apply_events(start, events))


@pytest.mark.parametrize("seed", range(10))
def test_the_runtime_keeps_the_count_of_each_record_it_writes(seed):
    """Commit by commit (chunks left unfolded, the history trimmed to A2A_MAX_HISTORY),
    the count on the record is the size of its task, measured whole.  (The artifacts
    exist from the start: a chunk appended to an artifact the record's outline lacks
    is counted without its id, see the next test.)"""
    rng = random.Random(seed)
    store = MemoryStore()
    runtime = Runtime(store, lambda run: None, max_history=4, max_task_bytes=1 << 30)
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=S.WORKING),
                history=[model_message("hello", Role.USER)],
                artifacts=[Artifact(key, [Part(text="start")]) for key in "abc"])
    store.create(TaskRecord(task, 1), task)
    record = None
    for _ in range(25):
        events = random_events(rng, rng.randint(1, 6))
        record = runtime.commit("t1", lambda current: events, record)
        assert record.held == budget.task_size(record.task)


def test_a_stream_appended_chunk_by_chunk_is_counted_by_its_parts():
    """Under threads each chunk is its own append, and the record's outline lacks the
    artifact its first chunk made until the chunks are folded: the next chunks still
    count their parts, not the artifact's id again."""
    store = MemoryStore()
    runtime = Runtime(store, lambda run: None, max_task_bytes=1 << 30)
    task = Task(id="t1", context_id="c1", status=TaskStatus(state=S.WORKING))
    store.create(TaskRecord(task, 1), task)
    record = runtime.commit("t1", lambda current: [chunk("a" * 36, "w0 ", append=False)])
    for number in range(1, 200):
        record = runtime.commit("t1", lambda current: [chunk("a" * 36, f"w{number % 10} ", True)],
                                record)
    assert record.unfolded  # the case at hand: counted without folding
    assert record.held == budget.task_size(record.task) == 36 + 200 * 3


# ================================================================ refusing a caller


def fill_until_refused(client, size: int, limit: int = 40) -> tuple:
    """Messages of ``size`` bytes to one waiting task until one is refused: (task id,
    how many were taken, the refusal)."""
    result = send(client, "x" * size)["result"]["task"]
    task_id = result["id"]
    for number in range(1, limit):
        reply = send(client, "x" * size, task_id, number)
        if "error" in reply:
            return task_id, number, reply["error"]
        assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    raise AssertionError(f"no message was refused in {limit}")


@pytest.mark.parametrize("store_url", ["memory", "sqlite", "shelve"], indirect=True)
def test_a_message_that_would_take_a_task_past_its_limit_is_32602_and_stores_nothing(
        make_app, store_url):
    app = make_app(asker, store=store_url, max_task_bytes=10_000)
    client = app.test_client()
    task_id, taken, error = fill_until_refused(client, 3000)
    assert taken == 3  # three 3,000-byte messages (and the agent's questions) fit in 10,000
    assert error["code"] == -32602
    assert "A2A_MAX_TASK_BYTES" in error["message"]
    info, bad_request = error["data"]
    assert info["reason"] == "TASK_TOO_LARGE" and info["metadata"]["limit"] == "10000"
    assert bad_request["fieldViolations"][0]["field"] == "message.parts"
    stored = get_task(client, task_id)
    assert stored["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert [m["messageId"] for m in stored["history"] if m["role"] == "ROLE_USER"] == [
        "m-0", "m-1", "m-2"]
    assert send(client, "fits", task_id, 9)["result"]["task"]["status"]["state"] == (
        "TASK_STATE_INPUT_REQUIRED")  # a smaller one still fits


def test_over_rest_it_is_413_with_the_reason_and_the_field(make_app):
    app = make_app(asker, max_task_bytes=10_000)
    client = app.test_client()
    task_id, _, _ = fill_until_refused(client, 3000)
    response = client.post("/a2a/rest/message:send", json={
        "message": user_message("x" * 3000, "m-rest", taskId=task_id)})
    assert response.status_code == 413 and response.mimetype == "application/json"
    error = response.get_json()["error"]
    assert (error["code"], error["status"]) == (413, "INVALID_ARGUMENT")
    assert error["details"][0]["reason"] == "TASK_TOO_LARGE"
    assert error["details"][1]["fieldViolations"][0]["field"] == "message.parts"


def test_a_first_message_larger_than_a_task_may_hold_makes_no_task(make_app):
    started = []
    app = make_app(lambda ctx: started.append(1), max_task_bytes=1000)
    reply = send(app.test_client(), "x" * 1001)
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"][0]["reason"] == "TASK_TOO_LARGE"
    assert started == []
    assert rpc(app.test_client(), "ListTasks", {})["result"]["tasks"] == []


def test_no_limit_with_zero(make_app):
    app = make_app(asker, max_task_bytes=0)
    reply = send(app.test_client(), "x" * 100_000)
    assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


# ================================================================ an executor past the limit


def test_an_executor_that_emits_past_the_limit_fails_its_task_saying_why(make_app):
    app = make_app(lambda ctx: ctx.artifact("x" * 5000), max_task_bytes=4000)
    task = send(app.test_client(), "hi")["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = task["status"]["message"]["parts"][0]["text"]
    assert text.startswith("The agent failed: The task would hold") and "A2A_MAX_TASK_BYTES" in text
    assert "artifacts" not in get_task(app.test_client(), task["id"])


def test_an_executor_may_catch_the_refusal_and_finish_otherwise(make_app):
    def careful(ctx):
        try:
            ctx.artifact("x" * 5000)
        except TaskTooLargeError:
            return "too large to keep; see https://example.com/result"

    app = make_app(careful, max_task_bytes=4000)
    task = send(app.test_client(), "hi")["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    stored = get_task(app.test_client(), task["id"])
    assert [a["parts"][0]["text"] for a in stored["artifacts"]] == [
        "too large to keep; see https://example.com/result"]


def test_a_stream_of_chunks_stops_at_the_limit(make_app):
    def endless(ctx):
        for _ in range(10_000):
            yield "y" * 100

    app = make_app(endless, max_task_bytes=4000)
    task = send(app.test_client(), "hi")["result"]["task"]
    stored = get_task(app.test_client(), task["id"])
    assert stored["status"]["state"] == "TASK_STATE_FAILED"
    kept = sum(len(part["text"]) for part in stored["artifacts"][0]["parts"])
    assert 4000 - 100 - 36 - len("hi") - len("m-0") < kept <= 4000  # (artifact id, message)


# ================================================================ bytes written per message


def written() -> int:
    """Bytes this process handed to write calls so far (``/proc/self/io``)."""
    with open("/proc/self/io") as counters:
        return next(int(line.split()[1]) for line in counters if line.startswith("wchar:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/io"), reason="needs Linux's /proc/self/io")
@pytest.mark.parametrize("kind", ["sqlite", "shelve"])
def test_messages_to_an_open_task_write_bytes_linear_in_what_was_sent(make_app, tmp_path, kind):
    """40 messages of 256 KiB to one task waiting for input: the store writes a small
    multiple of the 10 MiB sent (the log once, snapshots that double, SQLite's WAL,
    shelve's compactions), where rewriting the snapshot with each one wrote ~20x."""
    count, size = 40, 256 << 10
    app = make_app(asker, store=f"{kind}://{tmp_path}/tasks", max_task_bytes=0,
                   max_content_length=2 * size)
    client = app.test_client()
    task_id = send(client, "x" * size)["result"]["task"]["id"]
    before = written()
    for number in range(1, count):
        assert "result" in send(client, "x" * size, task_id, number)
    ratio = (written() - before) / ((count - 1) * size)
    assert ratio < 8, ratio


@pytest.mark.parametrize("kind", ["sqlite", "shelve", "redis"])
def test_a_large_snapshot_is_not_rewritten_for_each_doubling_of_small_events(tmp_path, kind):
    """A 1 MiB message, then 2,000 small chunks: counting events alone stored the 1 MiB
    snapshot again 6 times (at 34, 68, ... 1,088 chunks: O(log n) copies of what the
    caller sent); now only once the chunks logged since weigh an eighth of it."""
    store = open_store(kind, str(tmp_path / "tasks"))
    try:
        create(store, "t1")
        append(store, "t1", [user_turn("t1", "x" * (1 << 20))])
        record = store.load("t1")
        snapshots = set()
        for number in range(2000):
            event = TaskArtifactUpdateEvent("t1", "ctx", Artifact("a", [Part(text="w ")]),
                                            append=number > 0)
            record = record.after([event])
            store.append("t1", record.seq - 1, [event], record)
            snapshots.add(stored_snapshot_seq(store, "t1"))
        assert len(snapshots) <= 3, sorted(snapshots)  # the message's, then at most 2
        assert len(store.load("t1").task.artifacts[0].parts) == 2000
    finally:
        store.close()


def test_messages_to_an_open_task_send_redis_bytes_linear_in_what_was_sent(tmp_path):
    """The same on Redis, counting what the store sends it: 40 messages of 256 KiB
    to one task waiting for input cost a small multiple of the 10 MiB sent, where
    rewriting the snapshot with each one sent ~20x (and a snapshot past 512 MB
    made the task unwritable)."""
    count, size = 40, 256 << 10
    store = open_store("redis", str(tmp_path / "tasks"))
    sent = []
    append_script = store._append

    def counted(keys, args, **options):
        sent.append(sum(len(str(arg)) for arg in args))
        return append_script(keys=keys, args=args, **options)

    store._append = counted
    try:
        create(store, "t1")
        for number in range(count):
            append(store, "t1", [turn(number, "x" * size)])
        ratio = sum(sent) / (count * size)
        assert ratio < 8, ratio
        history = store.load("t1").task.history
        assert len(history) == count + 1 and history[-1].message_id == f"u{count - 1}"
    finally:
        store.close()


def turn(number: int, text: str) -> Message:
    return Message(message_id=f"u{number}", role=Role.USER, parts=[Part(text=text)],
                   task_id="t1", context_id="ctx")


def test_redis_keeps_the_trimmed_history_between_snapshots(tmp_path):
    """The runtime trims the history (A2A_MAX_HISTORY); a snapshot stored later
    holds the cut, and a load in between cuts the events folded in as well."""
    store = open_store("redis", str(tmp_path / "tasks"))
    try:
        record = create(store, "t1")
        for number in range(6):
            event = turn(number, f"turn {number}")
            after = record.after([event])
            after.task = dataclasses.replace(after.task, history=after.task.history[-3:])
            store.append("t1", record.seq, [event], after)
            record = store.load("t1")
            assert len(record.task.history) == min(number + 2, 3)  # the first message too
        assert [m.parts[0].text for m in record.task.history] == ["turn 3", "turn 4", "turn 5"]
    finally:
        store.close()


def test_an_sqlite_file_of_0_2_gets_the_byte_counts_when_first_opened(tmp_path):
    """A file written before the byte counts (tasks table without them) is altered
    once; its rows read as untrimmed (their snapshot was stored with every turn)."""
    import sqlite3

    path = str(tmp_path / "tasks.db")
    store = SQLiteStore(path)
    create(store, "t1")
    append(store, "t1", [user_turn("t1", "a")])
    store.close()
    old = sqlite3.connect(path)
    for column in ("snap_bytes", "log_bytes", "history_len"):
        old.execute(f"ALTER TABLE tasks DROP COLUMN {column}")
    old.commit()
    old.close()
    store, again = SQLiteStore(path), SQLiteStore(path)
    try:
        columns = {row[1] for row in store._query("PRAGMA table_info(tasks)")}
        assert {"snap_bytes", "log_bytes", "history_len"} <= columns
        assert [m.parts[0].text for m in again.load("t1").task.history] == ["hi", "a"]
        append(store, "t1", [user_turn("t1", "b")])
        assert [m.parts[0].text for m in again.load("t1").task.history] == ["hi", "a", "b"]
    finally:
        again.close()
        store.close()


@pytest.mark.parametrize("kind", ["sqlite", "shelve"])
def test_the_history_stays_trimmed_between_snapshots(make_app, tmp_path, kind):
    """A user turn no longer stores the snapshot, so the store keeps the history's
    length: a load (here by another store object, as another worker) folds the
    later turns in and keeps only the newest A2A_MAX_HISTORY messages."""
    url = f"{kind}://{tmp_path}/tasks"
    app = make_app(asker, store=url, max_history=3)
    client = app.test_client()
    task_id = send(client, "first")["result"]["task"]["id"]
    for number in range(1, 6):
        send(client, f"turn {number}", task_id, number)
    other = open_store(kind, f"{tmp_path}/tasks")
    try:
        for history in (get_task(client, task_id)["history"],
                        [m.parts[0].text for m in other.load(task_id).task.history]):
            texts = [m if isinstance(m, str) else m["parts"][0]["text"] for m in history]
            assert texts == ["turn 4", "more?", "turn 5"]  # ("more?" again: the status)
    finally:
        other.close()


# ================================================================ Redis


def test_redis_refuses_a_value_over_its_string_limit_before_writing(tmp_path, monkeypatch):
    store = open_store("redis", str(tmp_path / "tasks"))
    try:
        create(store, "t1")
        monkeypatch.setattr(redis_store, "MAX_VALUE", 1000)
        with pytest.raises(StoreError, match="cannot be stored in Redis"):
            append(store, "t1", [user_turn("t1", "x" * 1001)])  # the event, then its snapshot
        assert store.head("t1") == (1, S.SUBMITTED)
        assert [e.seq for e in store.read("t1", 0)] == [1]
        with pytest.raises(StoreError, match="cannot be stored in Redis"):
            record = store.load("t1")
            big = Task(id="t2", context_id="ctx", status=TaskStatus(state=S.SUBMITTED),
                       history=[user_turn("t2", "y" * 1001)])
            store.create(TaskRecord(big, 1, created_at=record.created_at), big)
        assert store.load("t2") is None
    finally:
        store.close()


# ================================================================ a real server


def test_a_real_server_refuses_the_message_that_would_overfill_a_task(tmp_path):
    env = {"FLASK_A2A_STORE": f"sqlite:///{tmp_path}/tasks.db",
           "FLASK_A2A_MAX_TASK_BYTES": "20000"}
    with Server("tests.support.fault_app:app", env=env) as server:
        def send_over_http(task_id: str, number: int) -> dict:
            extra = {"taskId": task_id} if task_id else {}
            return server.rpc("SendMessage", {
                "message": user_message("ask " + "x" * 4000, f"m-{number}", **extra),
                "configuration": {"historyLength": 0}})

        task_id = send_over_http("", 0)["result"]["task"]["id"]
        for number in range(1, 10):
            reply = send_over_http(task_id, number)
            if "error" in reply:
                break
            assert reply["result"]["task"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        else:
            raise AssertionError("no message was refused")
        assert number == 4  # four messages of 4,004 bytes fit in 20,000; the fifth does not
        assert reply["error"]["code"] == -32602
        assert reply["error"]["data"][0]["reason"] == "TASK_TOO_LARGE"
        rest = requests.post(f"{server.url}/a2a/rest/message:send", timeout=30, json={
            "message": user_message("ask " + "x" * 4000, "m-rest", taskId=task_id)})
        assert rest.status_code == 413
        stored = server.rpc("GetTask", {"id": task_id})["result"]
        assert stored["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert sum(m["role"] == "ROLE_USER" for m in stored["history"]) == 4
