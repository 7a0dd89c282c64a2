"""The A2A 1.0 CancelTask and SubscribeToTask operations through the JSON-RPC endpoint
(Flask test client), on every store backend; the helpers are tests/web/test_methods.py's."""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

import pytest

from a2a_flask import TaskCancelled

from tests.support import wire
from tests.support.helpers import user_message
from tests.support.tasks import CANCELED, COMPLETED, WORKING, get_task, wait_for_state
from tests.support.wire import rpc
from tests.web.test_methods import (
    Gate,
    echo,
    error,
    failer,
    kind,
    make_asker,
    ok,
    plain_json_error,
    progress,
    read_events,
    rejecter,
    results,
    send,
    send_task,
    sse,
    sse_response,
    start_gated,
)


# ================================================================ CancelTask


class CooperativeLoop:
    """Works until ctx.cancelled turns true; ``exited`` is set when it returns."""

    def __init__(self) -> None:
        self.exited = threading.Event()

    def __call__(self, ctx):
        try:
            ctx.working("looping")
            deadline = time.monotonic() + 5
            while not ctx.cancelled and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            self.exited.set()


def run_over(app, task_id: str) -> bool:
    """Whether the run of a task is over here (its executor returned, its last
    writes made): the marker for "nothing more happens to this task"."""
    run = app.extensions["a2a"]["a2a"].service.runtime.local_run(task_id)
    return run is None or run.finished.wait(15)


def test_cancel_running_task_stops_the_executor(make_app, store_url):
    executor = CooperativeLoop()
    app = make_app(executor, store=store_url)
    client = app.test_client()
    task = send_task(client, user_message("loop"), {"returnImmediately": True})
    wait_for_state(client, task["id"], {WORKING})
    canceled = ok(rpc(client, "CancelTask", {"id": task["id"]}), "Task")
    assert canceled["id"] == task["id"]
    assert canceled["status"]["state"] == CANCELED
    assert executor.exited.wait(3), "the executor did not stop"
    assert run_over(app, task["id"])
    assert get_task(client, task["id"])["status"]["state"] == CANCELED


def test_canceled_executor_gets_task_cancelled_and_cannot_change_the_task(make_app, store_url):
    go, exited = threading.Event(), threading.Event()
    raised: List[str] = []

    def stubborn(ctx):
        ctx.working("busy")
        go.wait(5)
        for attempt in (lambda: ctx.artifact("late"), lambda: ctx.working("still here"),
                        lambda: ctx.complete("done anyway")):
            try:
                attempt()
            except TaskCancelled:
                raised.append("TaskCancelled")
        exited.set()

    client = make_app(stubborn, store=store_url).test_client()
    task = send_task(client, user_message("go"), {"returnImmediately": True})
    wait_for_state(client, task["id"], {WORKING})
    ok(rpc(client, "CancelTask", {"id": task["id"]}), "Task")
    go.set()
    assert exited.wait(3)
    assert raised == ["TaskCancelled"] * 3
    after = get_task(client, task["id"])
    assert after["status"]["state"] == CANCELED
    assert "artifacts" not in after
    assert "message" not in after["status"]


def test_executor_ignoring_cancel_keeps_running_but_cannot_change_the_task(make_app, store_url):
    release, finished = threading.Event(), threading.Event()
    ticks: List[int] = []
    outcome: List[str] = []

    def deaf(ctx):
        ctx.working("not listening")
        try:
            while not release.is_set():
                ticks.append(1)
                time.sleep(0.01)
            ctx.complete("finished anyway")
            outcome.append("changed")
        except TaskCancelled:
            outcome.append("TaskCancelled")
            raise
        finally:
            finished.set()

    client = make_app(deaf, store=store_url, cancel_grace=0.1).test_client()
    try:
        task = send_task(client, user_message("go"), {"returnImmediately": True})
        wait_for_state(client, task["id"], {WORKING})
        canceled = ok(rpc(client, "CancelTask", {"id": task["id"]}), "Task")
        assert canceled["status"]["state"] == CANCELED
        time.sleep(0.3)  # past the grace period
        before = len(ticks)
        deadline = time.monotonic() + 15
        while len(ticks) == before:  # the thread is still running
            assert time.monotonic() < deadline, "the thread stopped ticking"
            time.sleep(0.01)
        assert not finished.is_set()
    finally:
        release.set()
    assert finished.wait(3)
    assert outcome == ["TaskCancelled"]
    after = get_task(client, task["id"])
    assert after["status"]["state"] == CANCELED
    assert "message" not in after["status"]


def test_cancel_terminal_task_is_not_cancelable(make_app, store_url):
    executor = CooperativeLoop()
    client = make_app(executor, store=store_url).test_client()
    task = send_task(client, user_message("loop"), {"returnImmediately": True})
    wait_for_state(client, task["id"], {WORKING})
    ok(rpc(client, "CancelTask", {"id": task["id"]}), "Task")
    err = error(rpc(client, "CancelTask", {"id": task["id"]}), -32002)
    assert err["data"][0]["reason"] == "TASK_NOT_CANCELABLE"


@pytest.mark.parametrize("executor", [echo, failer, rejecter])
def test_cancel_finished_task_is_not_cancelable(make_app, store_url, executor):
    client = make_app(executor, store=store_url).test_client()
    task = send_task(client, user_message("hi"))
    error(rpc(client, "CancelTask", {"id": task["id"]}), -32002)
    assert get_task(client, task["id"])["status"] == task["status"]


def test_cancel_unknown_task_is_task_not_found(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    error(rpc(client, "CancelTask", {"id": "nope"}), -32001)


def test_cancel_interrupted_task(make_app, store_url):
    client = make_app(make_asker(1), store=store_url).test_client()
    task = send_task(client, user_message("hi"))
    canceled = ok(rpc(client, "CancelTask", {"id": task["id"]}), "Task")
    assert canceled["status"]["state"] == CANCELED
    error(send(client, user_message("answer", "m-2", taskId=task["id"])), -32004)


# ================================================================ SubscribeToTask


def test_subscribe_live_task_starts_with_snapshot_and_follows_to_the_end(make_app, store_url):
    gate = Gate()
    client = make_app(gate, store=store_url, sse_keepalive=0.5).test_client()
    try:
        task = start_gated(client)
        response = sse_response(client, "SubscribeToTask", {"id": task["id"]})
    finally:
        gate.release.set()
    events = read_events(response)
    items = results(events)
    assert kind(items[0]) == "task"
    snapshot = items[0]["task"]
    assert snapshot["id"] == task["id"]
    assert snapshot["status"]["state"] == WORKING
    assert [kind(i) for i in items[1:]] == ["artifactUpdate", "statusUpdate", "statusUpdate"]
    assert items[-1]["statusUpdate"]["status"]["state"] == COMPLETED
    ids = [int(e["id"]) for e in events]
    assert ids == sorted(set(ids))


def test_subscribe_terminal_task_is_a_plain_json_unsupported_operation(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    task = send_task(client, user_message("hi"))
    plain_json_error(client, "SubscribeToTask", {"id": task["id"]}, -32004)


def test_subscribe_unknown_task_is_task_not_found(make_app, store_url):
    client = make_app(echo, store=store_url).test_client()
    plain_json_error(client, "SubscribeToTask", {"id": "nope"}, -32001)


def test_last_event_id_replays_the_events_after_it_for_a_finished_task(make_app, store_url):
    client = make_app(progress, store=store_url).test_client()
    full = sse(client, "SendStreamingMessage", {"message": user_message("go")})
    task_id = full[0]["data"]["result"]["task"]["id"]
    assert get_task(client, task_id)["status"]["state"] == COMPLETED
    for cut in (full[0], full[2]):
        replay = sse(client, "SubscribeToTask", {"id": task_id}, {"Last-Event-ID": cut["id"]})
        expected = [e for e in full if int(e["id"]) > int(cut["id"])]
        assert [(e["id"], e["data"]) for e in replay] == [(e["id"], e["data"]) for e in expected]
    # Nothing after the last event: like any terminal task, no stream.
    plain_json_error(client, "SubscribeToTask", {"id": task_id}, -32004)
    response = wire.post(client, "SubscribeToTask", {"id": task_id},
                         headers={"Last-Event-ID": full[-1]["id"]})
    assert response.json()["error"]["code"] == -32004


def test_last_event_id_replays_then_follows_a_live_task(make_app, store_url):
    gate = Gate()
    client = make_app(gate, store=store_url, sse_keepalive=0.5).test_client()
    try:
        task = start_gated(client)
        first = sse_response(client, "SubscribeToTask", {"id": task["id"]}, {"Last-Event-ID": "1"})
    finally:
        gate.release.set()
    live = read_events(first)
    wait_for_state(client, task["id"], {COMPLETED})
    everything = sse(client, "SubscribeToTask", {"id": task["id"]}, {"Last-Event-ID": "0"})
    assert kind(everything[0]["data"]["result"]) == "task"
    assert [(e["id"], e["data"]) for e in live] == [
        (e["id"], e["data"]) for e in everything if int(e["id"]) > 1]
    assert live[0]["data"]["result"]["statusUpdate"]["status"]["state"] == WORKING
    assert live[-1]["data"]["result"]["statusUpdate"]["status"]["state"] == COMPLETED


def test_two_subscribers_receive_identical_sequences(make_app, store_url):
    gate = Gate()
    client = make_app(gate, store=store_url, sse_keepalive=0.5).test_client()
    collected: Dict[int, List[Dict[str, Any]]] = {}
    readers: List[threading.Thread] = []
    try:
        task = start_gated(client)
        responses = [sse_response(client, "SubscribeToTask", {"id": task["id"]}) for _ in range(3)]
        responses.pop().close()  # a third subscriber leaves early: nobody else is affected

        def consume(index: int) -> None:
            collected[index] = read_events(responses[index])

        readers.extend(threading.Thread(target=consume, args=(i,)) for i in range(2))
        for reader in readers:
            reader.start()
        time.sleep(0.05)
    finally:
        gate.release.set()
    for reader in readers:
        reader.join(10)
    assert sorted(collected) == [0, 1]
    first, second = collected[0], collected[1]
    assert [(e["id"], e["data"]) for e in first] == [(e["id"], e["data"]) for e in second]
    assert kind(first[0]["data"]["result"]) == "task"
    assert first[-1]["data"]["result"]["statusUpdate"]["status"]["state"] == COMPLETED
    assert get_task(client, task["id"])["status"]["state"] == COMPLETED
