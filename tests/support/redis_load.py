"""The workload the Redis Cluster and Sentinel fault tests run a fault under: a real
gunicorn (2 gevent workers, the hub watchdog on) on the store URL, six tasks streaming
18 chunks each over 4.5 s with a webhook each, and four blocking sends, while the
fault happens (tests/server/test_blips_restart.py checks the same after a restart).

What is asserted: every stream sees every event once, in order, and no error event;
every webhook gets every event once, in order; every acknowledged task is readable and
COMPLETED; a blocking send answers its task COMPLETED or, at most, "task store
unavailable" (never Internal error); no lease expires wrongly; no traceback.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, List

import requests

from a2a_flask.stores import open_store

from tests.server.test_blips_restart import (TASKS, TICKS, Streamed, check_pushes, check_stream,
                                             completed_pushes)
from tests.support.helpers import (V1, Server, WebhookReceiver, rpc_body, wait_until,
                                   wait_until_delivered)
from tests.support.tasks import message

UNAVAILABLE = "The task store is unavailable; try again shortly"
#: Blocking sends made while the fault happens (each a 2 s task).
SENDS = 4


def under_load(url: str, fault: Callable[[Any, List[str]], None]) -> str:
    """Run the workload on ``url`` and ``fault(store, task_ids)`` mid-way (``store``: one
    opened on the URL here; ``task_ids``: the streamed tasks' ids); the server's log."""
    with WebhookReceiver() as receiver, Server("tests.support.fault_app:app", workers=2, env={
            "FLASK_A2A_STORE": url, "FLASK_A2A_STORE_GRACE": "20",
            "FLASK_A2A_STORE_TIMEOUT": "1", "FLASK_A2A_LEASE_TTL": "5",
            "FLASK_A2A_PUSH_ALLOW_PRIVATE": "1", "FLASK_A2A_PUSH_RETRY_DELAY": "0.1",
            "FLASK_A2A_PUSH_RETRY_MAX_DELAY": "0.5"}) as server:
        streams = [Streamed(server, receiver.hook()) for _ in range(TASKS)]
        for stream in streams:
            stream.start()
        wait_until(lambda: all(stream.working() and stream.chunks() >= 2 for stream in streams),
                   20, "every task to write its first chunks")
        answers: List[Dict[str, Any]] = []

        def send() -> None:
            answers.append(requests.post(server.url + "/a2a", json=rpc_body(
                "SendMessage", {"message": message("ticks 8")}), headers=V1,
                timeout=60).json())

        senders = [threading.Thread(target=send, daemon=True) for _ in range(SENDS)]
        for sender in senders:
            sender.start()
        store = open_store(url)
        try:
            started = [stream.events[0]["data"]["result"]["task"]["id"] for stream in streams]
            fault(store, started)
            for thread in [*streams, *senders]:
                thread.join(60)
                assert not thread.is_alive(), "a stream or a send did not end"
            task_ids = [check_stream(stream) for stream in streams]
            assert len(answers) == SENDS
            for answer in answers:
                if "error" in answer:  # told, never an internal error
                    assert answer["error"]["message"] == UNAVAILABLE, answer
                    continue
                task_ids.append(answer["result"]["task"]["id"])
                assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            for task_id in task_ids:
                task = server.rpc("GetTask", {"id": task_id})["result"]
                assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
            receiver.wait_for(lambda got: completed_pushes(got) >= TASKS, 30)
            for task_id in task_ids[:TASKS]:
                wait_until_delivered(store, task_id)
                check_pushes(list(receiver.received), task_id)
                assert len(must_chunks(store, task_id)) == TICKS
        finally:
            store.close()
        log = server.log_text()
        assert "Traceback" not in log, log[log.find("Traceback") - 300:][:3000]
        assert "stopped: the task store" not in log, log
        assert "lease expired" not in log, log
        assert "Internal error" not in log, log
        again = server.rpc("SendMessage", {"message": message("after the fault")})
        assert again["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", again
        return log


def must_chunks(store: Any, task_id: str) -> List[str]:
    """The task's artifact chunks, as the store folds them."""
    record = store.load(task_id)
    assert record is not None, task_id
    return [part.text for part in record.task.artifacts[0].parts]
