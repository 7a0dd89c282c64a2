"""Misbehaving executors, under real gunicorn -k gevent: the task ends in a clear
state, the worker keeps answering the probe."""
from __future__ import annotations

import time
from typing import Any, Dict, Iterator

import pytest


from tests.support.helpers import Probing, Server, probe, wait_until
from tests.support.tasks import get_task, message, wait_for_state

pytestmark = pytest.mark.declare(slow=[
    "test_only_a_blocked_stack_through_our_code_fails_a_test"])


def start(server: Server, text: str) -> str:
    body = server.rpc("SendMessage", {"message": message(text),
                                      "configuration": {"returnImmediately": True}})
    return body["result"]["task"]["id"]


def status_text(task: Dict[str, Any]) -> str:
    return task["status"]["message"]["parts"][0]["text"]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server("tests.support.fault_app:app", env={"FLASK_A2A_CANCEL_GRACE": "0.5"}) as running:
        yield running


def test_an_executor_that_raises(server):
    with Probing(server.url):
        answer = server.rpc("SendMessage", {"message": message("raise")})
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task) == "The agent failed: RuntimeError"  # the type, not the text
    assert "the agent broke" not in str(answer)
    assert "the agent broke" in server.log_text()  # the operator gets the traceback


def test_an_executor_that_ignores_cancel_forever(server):
    """It swallows the cooperative stop and the kill: the task is CANCELED at once
    all the same, and the executor can no longer change it."""
    task_id = start(server, "stubborn 8")  # alive past the cancel, however slow the start
    wait_for_state(server, task_id, {"TASK_STATE_WORKING"})
    with Probing(server.url, task_id) as probing:
        canceled = server.rpc("CancelTask", {"id": task_id})["result"]
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        wait_until(lambda: f"task {task_id} ignored cancel" in server.log_text(), 15,
                   "the kill once the cancel grace was over")
        assert get_task(server, task_id)["status"]["state"] == "TASK_STATE_CANCELED"
        probing.wait_for(5)


def test_an_executor_that_busy_loops_in_pure_python(server):
    """``while not ctx.cancelled: pass`` never blocks, yet the worker answers: looking
    at ``ctx.cancelled`` lets the loop poll sockets; cancel stops it."""
    task_id = start(server, "spin")
    wait_for_state(server, task_id, {"TASK_STATE_WORKING"})
    with Probing(server.url, task_id) as probing:
        probing.wait_for(5)  # while it spins
        server.rpc("CancelTask", {"id": task_id})
    assert get_task(server, task_id)["status"]["state"] == "TASK_STATE_CANCELED"


def test_an_executor_that_never_yields_is_reported_by_the_watchdog():
    """An executor that computes for 0.5 s without any library call cannot be
    preempted under gevent: the watchdog reports it, with the executor's stack,
    and the worker answers again once it returns."""
    with Server("tests.support.fault_app:app", allow_blocking=True) as server:
        answer = server.rpc("SendMessage", {"message": message("hog 0.5")})
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        probe(server.url)
        deadline = time.monotonic() + 15
        while not server.blocked():
            assert time.monotonic() < deadline, "the watchdog did not report the blocked hub"
            time.sleep(0.1)
        report = server.blocked()[0]
        assert "fault_app.py" in report and "in hog" in report, report
        # How the hub's thread spent the window, and the part wholly inside the block.
        assert "Scheduling: ran " in report and "Inside the block: ran " in report, report


def test_an_executor_that_returns_an_unknown_type(server):
    with Probing(server.url):
        answer = server.rpc("SendMessage", {"message": message("weird")})
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert status_text(task).startswith("The agent failed:")


def test_an_executor_that_emits_100000_events(server):
    """100,000 events from one executor, a stream following them: the worker answers
    the probe all along, the stream gets every event in order, the task completes."""
    import re

    from tests.server.test_faults_clients import raw_request

    with Probing(server.url, saturating=True) as probing:
        sock = raw_request(server.port, "SendStreamingMessage",
                           {"message": message("flood 100000")})
        chunks = []
        while True:  # read in C-sized gulps: the test must not compete for the CPU
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            if b"\r\n0\r\n\r\n" in b"".join(chunks[-2:]):
                break  # the last chunk of the response
        sock.close()
        probing.wait_for(5)
    data = b"".join(chunks)
    ids = [int(n) for n in re.findall(rb"\nid: (\d+)", data)]
    assert ids == list(range(ids[0], ids[0] + len(ids)))
    assert len(ids) >= 100000
    assert b"TASK_STATE_COMPLETED" in data[-2000:]


def test_only_a_blocked_stack_through_our_code_fails_a_test():
    """The watchdog's reports that fail :class:`Server`: ours, not the machine's."""
    from tests.support.helpers import blocked_in_our_code

    starved = ("Greenlet <...> appears to be blocked\nBlocked Stack (for thread id 0x1):\n"
               '  File "/venv/lib/python3.11/site-packages/gunicorn/util.py", line 348, in write\n'
               "    sock.sendall(data)\n")
    spinning = starved + ('  File "/src/a2a_flask/push/delivery.py", line 150, in _deliver\n'
                          "    self._deliver_entries(task_id, due)\n")
    loading = ("Greenlet <...> appears to be blocked\nBlocked Stack (for thread id 0x1):\n"
               '  File "/venv/lib/python3.11/site-packages/gunicorn/workers/base.py", '
               "line 150, in load_wsgi\n    self.wsgi = self.app.wsgi()\n"
               '  File "/src/a2a_flask/web/extension.py", line 202, in init_app\n'
               "    app.register_blueprint(self._blueprint(state))\n")
    # Seen at a worker's start on a CPU-starved machine, in the test servers' hook.
    hooked = ("Greenlet <...> appears to be blocked\nBlocked Stack (for thread id 0x1):\n"
              '  File "/venv/lib/python3.11/site-packages/gunicorn/workers/base.py", '
              "line 142, in init_process\n    self.cfg.post_worker_init(self)\n"
              '  File "/src/tests/support/gunicorn_watch.py", line 90, in post_worker_init\n'
              "    watch = _Watch(threading.get_native_id())\n")
    # Ours down to a gevent socket's call on its non-blocking OS socket, which returns
    # at once: the worker was not scheduled (CI saw one in a Redis pool's can_read).
    descheduled = ("Greenlet <...> appears to be blocked\nBlocked Stack (for thread id 0x1):\n"
                   '  File "/src/a2a_flask/push/delivery.py", line 127, in renew\n'
                   "    return self.store.claim(self.key, self.owner, self.ttl)\n"
                   '  File "/venv/lib/python3.11/site-packages/gevent/_socketcommon.py", '
                   "line 651, in recv\n    return self._sock.recv(*args)\n")
    assert not blocked_in_our_code(starved)
    assert blocked_in_our_code(spinning)
    assert not blocked_in_our_code(loading)  # before the worker's first connection
    assert not blocked_in_our_code(hooked)
    assert blocked_in_our_code(hooked.replace("post_worker_init", "handle_request"))
    assert not blocked_in_our_code(descheduled)
    assert blocked_in_our_code(descheduled.rsplit("  File", 1)[0])  # ours, innermost
