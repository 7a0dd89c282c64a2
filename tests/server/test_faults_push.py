"""Faults in webhooks, under real gunicorn -k gevent: the worker keeps answering.

Every case runs with the hub watchdog (see :class:`helpers.Server`) and the
probe on while the fault is on: the card and a GetTask answer within 200 ms
each, all the time (but for the odd answer a loaded machine delays: see
:class:`helpers.Probing`); every task the agent acknowledged ends COMPLETED.
"""
from __future__ import annotations

import socket
import struct
import threading
from collections import Counter
from typing import Any, Iterator, List

import pytest
import requests

from a2a_flask.protocol.models import new_id

from tests.support.helpers import Probing, Server, WebhookReceiver, probe, rpc_body, wait_until
from tests.support.tasks import COMPLETED, get_task

FAST_RETRIES = {"FLASK_A2A_PUSH_ALLOW_PRIVATE": "1", "FLASK_A2A_PUSH_RETRY_DELAY": "0.1",
                "FLASK_A2A_PUSH_RETRY_MAX_DELAY": "0.3", "FLASK_A2A_PUSH_MAX_ATTEMPTS": "1000",
                "FLASK_A2A_PUSH_TIMEOUT": "2", "FLASK_A2A_PUSH_ALLOWED_HOSTS": "hook.faults.invalid"}


def send_with_webhook(server: Server, url: str, text: str = "hello") -> str:
    """A blocking SendMessage with a webhook; the task id (the task must be COMPLETED)."""
    body = server.rpc("SendMessage", {
        "message": {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": text}]},
        "configuration": {"taskPushNotificationConfig": {"url": url, "token": "tok"}}})
    task = body["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
    return task["id"]


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    with Server("tests.support.fault_app:app", env=FAST_RETRIES) as running:
        yield running


# ------------------------------------------------------------ the reported freeze


def test_a_failing_webhook_never_freezes_the_worker(tmp_path):
    """The issue's scenario: the conformance agent, a 0.1 ``tasks/send`` whose webhook
    names an allowed host that does not resolve, another whose receiver answers 500;
    the worker is probed while both fail and are retried (twenty probes, two retries
    of the receiver's), and the probes answer within 200 ms."""
    env = {"FLASK_A2A_PUSH_ALLOWED_HOSTS": "hook.faults.invalid",
           "FLASK_A2A_PUSH_ALLOW_PRIVATE": "1"}
    with WebhookReceiver(default=500) as receiver, \
            Server("examples.conformance_agent:app", env=env) as server:
        ids = []
        for url in ("https://hook.faults.invalid/hook", receiver.hook()):
            task_id = new_id()
            answer = requests.post(server.url + "/a2a", json=rpc_body("tasks/send", {
                "id": task_id, "message": {"role": "user", "parts": [
                    {"type": "text", "text": "hi"}], "messageId": "tck-complete-task-1"},
                "pushNotification": {"url": url, "token": "tok"}}), timeout=10).json()
            assert answer["result"]["status"]["state"] == "completed", answer
            ids.append(task_id)
        wait_until(lambda: len(receiver.attempts) >= 1, 10, "the first failed push")
        with Probing(server.url, ids[0]) as probing:
            wait_until(lambda: len(receiver.attempts) >= 3, 30, "two retries, in the background")
            probing.wait_for(20)
        assert "hook.faults.invalid" in server.log_text()  # the failure is logged


# ------------------------------------------------------------ receivers that fail


class Blackhole:
    """Accepts TCP connections (the kernel does, from the listen backlog) and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"

    def close(self) -> None:
        self.sock.close()


class Resetter:
    """Accepts each connection and resets it at once (RST, not FIN)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/hook"
        self.resets = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()
            self.resets += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()


def failed_attempts_logged(server: Server, text: str) -> int:
    return sum("attempt" in line and text in line for line in server.log_text().splitlines())


@pytest.mark.parametrize("fault", ["500", "redirect", "blackhole", "reset", "unresolvable",
                                   "tls"])
def test_webhook_failure_is_retried_while_the_worker_answers(server, fault):
    """Each failure is logged with its cause and retried; the task is COMPLETED
    for its caller; the worker answers the probe all along."""
    closers: List[Any] = []
    try:
        if fault in ("500", "redirect", "tls"):
            receiver = WebhookReceiver(default=500)
            closers.append(receiver)
            if fault == "redirect":
                receiver.default = 302  # plus a Location below
                receiver.script = [("redirect", receiver.hook("/elsewhere"))] * 50
            url = receiver.hook()
            if fault == "tls":  # https to a plain-HTTP port: the handshake fails
                url = url.replace("http://", "https://")
            expected = {"500": "HTTP 500", "redirect": "redirects are not followed",
                        "tls": "TLS error"}[fault]
        elif fault == "blackhole":
            hole = Blackhole()
            closers.append(hole)
            url, expected = hole.url, "no response within 2 s"
        elif fault == "reset":
            resetter = Resetter()
            closers.append(resetter)
            url, expected = resetter.url, "failed"
        else:
            url, expected = f"https://hook.faults.invalid/{fault}", "hook.faults.invalid"
        with Probing(server.url) as probing:
            task_id = send_with_webhook(server, url, f"hello {fault}")
            wait_until(lambda: failed_attempts_logged(server, task_id) >= 2, 15,
                       "a failed attempt and its retry")
            probe(server.url, task_id)
            probing.wait_for(3)
        assert get_task(server, task_id)["status"]["state"] == COMPLETED
        lines = [line for line in server.log_text().splitlines()
                 if task_id in line and "attempt" in line]
        assert any(expected in line for line in lines), lines[:3]
    finally:
        for closer in closers:
            closer.close()


def test_slow_receiver_is_bounded_by_the_push_timeout(server):
    """A receiver 20 s slow: the attempt ends at the push timeout (2 s here), is
    retried, and the push arrives while the slow answer is still being held back."""
    stall = 20.0
    with WebhookReceiver() as receiver:
        receiver.script = [stall]
        with Probing(server.url) as probing:
            task_id = send_with_webhook(server, receiver.hook(), "slow")
            pushes = receiver.wait_for(lambda got: any(task_id in str(p["json"]) for p in got),
                                       timeout=stall - 5)
            probing.wait_for(10)
        assert failed_attempts_logged(server, task_id)
        assert "no response within 2 s" in server.log_text()
        first = receiver.attempts[0]
        assert task_id in str(first["json"]) and first is not pushes[0]
        assert pushes[0]["at"] - first["at"] < stall  # the retry did not wait for the slow answer


def test_retry_after_is_honoured(server):
    """429 with ``Retry-After: 2``: the next attempt comes no sooner than 2 s later
    (the configured backoff alone would retry within 0.3 s)."""
    with WebhookReceiver() as receiver:
        receiver.script = [(429, {"Retry-After": "2"})]
        with Probing(server.url):
            task_id = send_with_webhook(server, receiver.hook(), "busy receiver")
            receiver.wait_for(lambda got: any(task_id in str(p["json"]) for p in got),
                              timeout=15)
        mine = [a for a in receiver.attempts if task_id in str(a["json"])]
        gap = mine[1]["at"] - mine[0]["at"]
        assert 1.9 <= gap < 10, gap  # not sooner; and not the backoff's or the cap's time


def test_fifty_tasks_with_failing_webhooks_at_once(server):
    """Fifty tasks whose webhooks all fail: every task completes, the worker answers,
    and once the receiver recovers every task's pushes arrive."""
    with WebhookReceiver(default=500) as receiver:
        with Probing(server.url, saturating=True) as probing:  # fifty drains: a busy CPU
            ids: List[str] = []
            errors: List[BaseException] = []

            def send() -> None:
                try:
                    ids.append(send_with_webhook(server, receiver.hook(), "one of fifty"))
                except BaseException as exc:  # reported below
                    errors.append(exc)

            threads = [threading.Thread(target=send) for _ in range(50)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(30)
            assert not errors, errors[:3]
            def retried() -> bool:  # every task's first event was tried twice at least
                tries = Counter(a["json"]["task"]["id"] for a in receiver.attempts
                                if a["json"] and "task" in a["json"])
                return len(tries) >= 50 and min(tries.values()) >= 2

            wait_until(retried, 30, "everybody retrying")
            receiver.default = 200
            receiver.wait_for(lambda got: {p["json"]["task"]["id"] for p in got
                                           if "task" in p["json"]} >= set(ids), timeout=30)
            probing.wait_for(5)
        assert len(ids) == 50


def test_one_bad_target_does_not_stop_the_others(tmp_path):
    """A webhook whose token the HTTP library refuses (CR/LF in a header), written
    straight into the store beside a good one: the good one gets every event; the
    bad one fails on its own, with its type in the log and not its token."""
    from a2a_flask.stores import open_store
    from a2a_flask.stores.base import PushTarget
    from a2a_flask.protocol.models import TaskPushNotificationConfig

    store_url = f"sqlite:///{tmp_path}/tasks.db"
    env = {**FAST_RETRIES, "FLASK_A2A_STORE": store_url}
    with WebhookReceiver() as receiver, Server("tests.support.fault_app:app", env=env) as server:
        body = server.rpc("SendMessage", {
            "message": {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": "sleep 1"}]},
            "configuration": {"returnImmediately": True}})
        task_id = body["result"]["task"]["id"]
        store = open_store(store_url)
        try:
            for config_id, token in (("bad", "secret\r\nX-Evil: 1"), ("good", "fine")):
                config = TaskPushNotificationConfig(id=config_id, task_id=task_id,
                                                    url=receiver.hook(f"/{config_id}"),
                                                    token=token)
                store.put_push_target(task_id, PushTarget(config, dialect="1.0"))
        finally:
            store.close()
        with Probing(server.url, task_id):
            pushes = receiver.wait_for(lambda got: any(
                p["path"] == "/good" and "TASK_STATE_COMPLETED" in str(p["json"]) for p in got),
                timeout=20)
        assert all(p["path"] == "/good" for p in pushes)
        log = server.log_text()
        assert "InvalidHeader while sending" in log
        assert "secret" not in log
