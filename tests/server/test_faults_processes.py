"""Stopping and reloading gunicorn mid-task (SIGKILL mid-task is in test_scale.py and
test_push_server.py): running tasks get the graceful timeout, open streams end
cleanly, and a task that cannot finish is FAILED with a clear status message at
shutdown, not left to its lease."""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import List

import pytest
import requests

from a2a_flask.stores import open_store

from tests.support.helpers import V1, Server, parse_sse, probe, rpc_body
from tests.support.tasks import message


def start(server: Server, text: str) -> str:
    body = server.rpc("SendMessage", {"message": message(text),
                                      "configuration": {"returnImmediately": True}})
    return body["result"]["task"]["id"]


class StreamReader(threading.Thread):
    """Follows a task's stream in the background; records its events and how it ended."""

    def __init__(self, server: Server, task_id: str) -> None:
        super().__init__(daemon=True)
        self.server, self.task_id = server, task_id
        self.text = ""
        self.ended_cleanly = False
        self.error = ""
        self.opened = threading.Event()

    def run(self) -> None:
        try:
            with requests.post(self.server.url + "/a2a", json=rpc_body(
                    "SubscribeToTask", {"id": self.task_id}), headers=V1, stream=True,
                    timeout=20) as response:
                self.opened.set()
                for chunk in response.iter_content(chunk_size=None, decode_unicode=True):
                    self.text += chunk
            self.ended_cleanly = True  # the chunked body ended with its last chunk
        except requests.RequestException as exc:
            self.error = repr(exc)

    def states(self) -> List[str]:
        out = []
        for event in parse_sse(self.text):
            result = event["data"].get("result", {})
            status = (result.get("task") or result.get("statusUpdate") or {}).get("status")
            if status:
                out.append(status["state"])
        return out


def record_of(store_url: str, task_id: str):
    store = open_store(store_url)
    try:
        return store.load(task_id)
    finally:
        store.close()


@pytest.mark.parametrize("how", ["SIGTERM", "HUP"])
def test_stop_or_reload_mid_task(tmp_path, how):
    store_url = f"sqlite:///{tmp_path}/tasks.db"
    server = Server("tests.support.fault_app:app", env={"FLASK_A2A_STORE": store_url},
                    graceful_timeout=3)
    try:
        quick = start(server, "sleep 1")  # finishes within the graceful timeout
        stuck = start(server, "sleep 60")  # cannot
        reader = StreamReader(server, stuck)
        reader.start()
        assert reader.opened.wait(10)
        time.sleep(0.3)
        sent_at = time.monotonic()
        os.kill(server.proc.pid, signal.SIGTERM if how == "SIGTERM" else signal.SIGHUP)
        reader.join(15)
        assert not reader.is_alive()
        assert reader.ended_cleanly, reader.error
        assert reader.states()[-1] == "TASK_STATE_FAILED", reader.states()
        if how == "SIGTERM":
            server.proc.wait(15)
            assert time.monotonic() - sent_at < 15  # the 3 s grace, not a hang
        else:  # the new worker serves; the old one finished its work and left
            probe(server.url, quick)
        assert record_of(store_url, quick).task.status.state.value == "TASK_STATE_COMPLETED"
        failed = record_of(store_url, stuck).task
        assert failed.status.state.value == "TASK_STATE_FAILED"
        text = failed.status.message.parts[0].text
        assert text.startswith("The server shut down"), text
        assert "lease" not in text  # failed at shutdown, not found later by the reaper
        # Said once, though the shutdown runs more than once (the signal, then the exit).
        assert server.log_text().count(f"task {stuck} failed") == 1, server.log_text()
    finally:
        server.stop()
