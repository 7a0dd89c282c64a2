"""The shelve store shared by two gunicorn -k gevent workers: every worker sees every
task, a subscriber on one follows a run on the other, and a cancel on one stops it;
the helpers are tests/server/test_server.py's."""
from __future__ import annotations

import time
from typing import List, Tuple

import pytest

from tests.server.test_server import (
    RESUBSCRIBE,
    RawConnection,
    connect_elsewhere,
    gunicorn_workers,
    kind,
    msg,
    serving_worker,
    unique,
    wait_for_run_end,
    wait_for_task,
)
from tests.support.helpers import Server, parse_sse
from tests.support.tasks import CANCELED, COMPLETED, WORKING, get_task


@pytest.fixture(scope="module")
def shelve_server(tmp_path_factory):
    """The SSE test app (the conformance agent) under two gevent workers sharing a
    shelve store."""
    path = tmp_path_factory.mktemp("shelve") / "tasks"
    with Server("tests.server.test_server:sse_app()", workers=2,
                env={"FLASK_A2A_STORE": f"shelve://{path}"}) as server:
        deadline = time.monotonic() + 10
        while len(gunicorn_workers(server.proc.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        yield server


def test_shelve_tasks_visible_to_every_worker(shelve_server):
    port = shelve_server.port
    pids = gunicorn_workers(shelve_server.proc.pid)
    assert len(pids) == 2
    created: List[Tuple[str, int]] = []
    for _ in range(20):
        with RawConnection(port) as conn:
            task = conn.call("SendMessage", {"message": msg("tck-artifact-text")})["result"]["task"]
            created.append((task["id"], serving_worker(pids, port, conn.local_port)))
        assert task["status"]["state"] == COMPLETED
    served = {pid for _, pid in created}
    crossings = 0
    for _round in range(3):  # more rounds only if no read happened to cross workers
        for task_id, creator in created:
            with RawConnection(port) as conn:
                got = conn.call("GetTask", {"id": task_id})
                reader = serving_worker(pids, port, conn.local_port)
            assert "result" in got, f"worker {reader} cannot see task {task_id} made by {creator}"
            assert got["result"]["status"]["state"] == COMPLETED
            assert got["result"]["artifacts"][0]["parts"] == [{"text": "Generated text content"}]
            crossings += reader != creator
            served.add(reader)
        if crossings:
            break
    assert crossings, "no GetTask was answered by a worker other than the task's creator"
    ids = {task_id for task_id, _ in created}
    for _ in range(4):
        with RawConnection(port) as conn:
            listed = conn.call("ListTasks", {"pageSize": 100})["result"]
            served.add(serving_worker(pids, port, conn.local_port))
        assert ids <= {t["id"] for t in listed["tasks"]}
    assert served == set(pids), "only one worker ever answered"


def test_shelve_subscription_sees_events_from_the_worker_running_the_task(shelve_server):
    port = shelve_server.port
    pids = gunicorn_workers(shelve_server.proc.pid)
    context_id = unique("ctx")
    with RawConnection(port) as sender:
        sender.send("SendMessage", {"message": msg(RESUBSCRIBE, contextId=context_id)})
        runner = serving_worker(pids, port, sender.local_port)
        task = wait_for_task(shelve_server, context_id, WORKING)
        subscribers: List[Tuple[RawConnection, int]] = []
        try:
            subscribers.append(connect_elsewhere(shelve_server.proc.pid, port, {runner}))
            subscribers[0][0].send("SubscribeToTask", {"id": task["id"]}, close=True)
            resumer = RawConnection(port)  # and one resuming after the first event, on either worker
            resumer.send("SubscribeToTask", {"id": task["id"]}, close=True, headers={"Last-Event-ID": "1"})
            subscribers.append((resumer, serving_worker(pids, port, resumer.local_port)))
            for conn, pid in subscribers:
                status, headers, body = conn.read_to_end()
                assert status == 200 and headers["content-type"].startswith("text/event-stream")
                events = parse_sse(body.decode("utf-8"))
                results = [e["data"]["result"] for e in events]
                if conn is resumer:
                    assert [kind(r) for r in results] == ["WORKING", "COMPLETED"], (pid, runner, results)
                else:
                    assert [kind(r) for r in results] == ["task", "COMPLETED"], (pid, runner, results)
                    assert results[0]["task"]["status"]["state"] == WORKING
                assert [e["id"] for e in events] == ["2", "3"]
        finally:
            for conn, _ in subscribers:
                conn.close()
        blocking = sender.read_json()["result"]["task"]
    assert blocking["status"]["state"] == COMPLETED


def test_shelve_cancel_from_the_other_worker_stops_the_task(shelve_server):
    port = shelve_server.port
    pids = gunicorn_workers(shelve_server.proc.pid)
    context_id = unique("ctx")
    with RawConnection(port) as sender:
        sender.send("SendMessage", {"message": msg(RESUBSCRIBE, contextId=context_id)})
        runner = serving_worker(pids, port, sender.local_port)
        task = wait_for_task(shelve_server, context_id, WORKING)
        other, _ = connect_elsewhere(shelve_server.proc.pid, port, {runner})
        with other:
            canceled = other.call("CancelTask", {"id": task["id"]})["result"]
        assert canceled["status"]["state"] == CANCELED
        blocking = sender.read_json()["result"]["task"]  # the runner's blocking wait sees it
    assert blocking["status"]["state"] == CANCELED
    wait_for_run_end(shelve_server, task["id"])  # the runner's keeper saw the cancel...
    assert get_task(shelve_server, task["id"])["status"]["state"] == CANCELED  # ...no overwrite
