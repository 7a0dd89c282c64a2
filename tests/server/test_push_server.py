"""Push delivery under gunicorn with gevent workers: restarts and several workers."""
from __future__ import annotations

import os
import signal
import time
from typing import Any, Dict, List

import pytest

from a2a_flask.protocol.models import new_id
from a2a_flask.stores import open_store

from tests.support.helpers import Server, WebhookReceiver, wait_until_delivered

CHUNKED_KINDS = ["task", "statusUpdate", "artifactUpdate", "artifactUpdate", "statusUpdate"]


def env_for(store: str, **extra: str) -> Dict[str, str]:
    return {"FLASK_A2A_STORE": store, "FLASK_A2A_PUSH_ALLOW_PRIVATE": "1",
            "FLASK_A2A_LEASE_TTL": "2", "FLASK_A2A_PUSH_RETRY_DELAY": "0.1",
            "FLASK_A2A_PUSH_RETRY_MAX_DELAY": "0.3", "FLASK_A2A_PUSH_MAX_ATTEMPTS": "1000",
            **extra}


def send_chunked(server: Server, webhook: str) -> str:
    body = server.rpc("SendMessage", {
        "message": {"role": "ROLE_USER", "messageId": f"tck-stream-artifact-chunked-{new_id()}",
                    "parts": [{"text": "go"}]},
        "configuration": {"taskPushNotificationConfig": {"url": webhook, "token": "t"}}})
    task = body["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return task["id"]


def send_then_kill_while_retrying(store: str, receiver: WebhookReceiver) -> str:
    """Send a chunked task with a webhook that answers 503 to a worker on ``store``,
    SIGKILL that worker once it is retrying (its claim stays behind), then let the
    webhook accept: the task's id, nothing delivered yet."""
    first = Server("examples.conformance_agent:app", env=env_for(store))
    try:
        task_id = send_chunked(first, receiver.hook())
        deadline = time.monotonic() + 15
        while len(receiver.attempts) < 2:  # it tried, and is retrying
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(first.proc.pid, signal.SIGKILL)  # no goodbye
        first.proc.wait(10)
        first.stop()
    assert receiver.received == []
    receiver.default = 200
    return task_id


def chunk_texts(pushes: List[Dict[str, Any]]) -> List[str]:
    return [p["json"]["artifactUpdate"]["artifact"]["parts"][0]["text"]
            for p in pushes if "artifactUpdate" in p["json"]]


def kinds(pushes: List[Dict[str, Any]], task_id: str) -> List[str]:
    mine = [p["json"] for p in pushes if task_id in str(p["json"])]
    return [next(iter(payload)) for payload in mine]


def wait_until_all_delivered(store_url: str, task_ids: List[str]) -> None:
    """:func:`wait_until_delivered` for tasks an agent in another process runs."""
    store = open_store(store_url)
    try:
        for task_id in task_ids:
            wait_until_delivered(store, task_id)
    finally:
        store.close()


def test_deliveries_resume_after_the_worker_is_killed(tmp_path):
    store = f"sqlite:///{tmp_path}/tasks.db"
    with WebhookReceiver(default=503) as receiver:
        task_id = send_then_kill_while_retrying(store, receiver)
        with Server("examples.conformance_agent:app", env=env_for(store)):
            # The new worker's keeper finds the backlog once the dead one's claim expires.
            pushes = receiver.wait_for(lambda got: len(got) >= len(CHUNKED_KINDS), timeout=30)
        assert kinds(pushes, task_id) == CHUNKED_KINDS
        assert chunk_texts(pushes) == ["chunk-1 ", "chunk-2"]


@pytest.mark.parametrize("workers", [2])
def test_two_workers_deliver_each_task_in_order(tmp_path, workers):
    store = f"sqlite:///{tmp_path}/tasks.db"
    with WebhookReceiver() as receiver, Server("examples.conformance_agent:app", workers=workers,
                                               env=env_for(store)) as server:
        task_ids = [send_chunked(server, receiver.hook(f"/{i}")) for i in range(8)]
        pushes = receiver.wait_for(lambda got: len(got) >= 8 * len(CHUNKED_KINDS), timeout=30)
        for i, task_id in enumerate(task_ids):
            mine = [p for p in pushes if p["path"] == f"/{i}"]
            assert kinds(mine, task_id) == CHUNKED_KINDS, i
            assert all(p["headers"]["X-A2A-Notification-Token"] == "t" for p in mine)
        wait_until_all_delivered(store, task_ids)
        assert len(receiver.attempts) == 8 * len(CHUNKED_KINDS)  # no duplicates either
