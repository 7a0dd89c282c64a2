"""What the store-bound tests share (tests/stores/test_store_bounds*.py): the
settings of the servers they start, their calls and what every case asserts.

The bounds on time are generous: they tell a clear error from a hang, not fast
from slow.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, List

import requests


from tests.support.helpers import V1, Server, rpc_body
from tests.support.tasks import message

UNAVAILABLE = "The task store is unavailable; try again shortly"
#: The store timeout these servers run with (seconds; the default is 5).  Short, as
#: every call during an outage waits it out; the calls that must work (before and
#: after one) are single small statements.
STORE_TIMEOUT = 1
#: How long an answer may take while the store hangs: the timeout and the watchdog's
#: margin (a statement the server never answers), once more for a reconnect the call
#: may make (a pooled connection found dead; libpq waits 2 s at least), and a wide
#: margin for a loaded machine.  A hang is far past it (the client gives up at HANG).
BOUND = 2 * (STORE_TIMEOUT + 1) + 10
HANG = 60
#: How long the store stays frozen at least (seconds): several store timeouts.
FROZEN_FOR = 4
KINDS = ["postgresql", "mariadb", "redis"]

def env_for(url: str) -> Dict[str, str]:
    return {"FLASK_A2A_STORE": url, "FLASK_A2A_STORE_TIMEOUT": str(STORE_TIMEOUT)}


def send(server: Server, text: str = "hello") -> Dict[str, Any]:
    """A JSON-RPC SendMessage; its answer (a hang fails the test at HANG seconds)."""
    answer = requests.post(server.url + "/a2a", json=rpc_body(
        "SendMessage", {"message": message(text)}), headers=V1, timeout=HANG)
    assert answer.status_code == 200, answer.text
    return answer.json()


def send_rest(server: Server, text: str = "hello") -> requests.Response:
    return requests.post(server.url + "/a2a/rest/message:send",
                         json={"message": message(text)}, headers=V1, timeout=HANG)


def completed(answer: Dict[str, Any]) -> bool:
    task = answer.get("result", {}).get("task", {})
    return task.get("status", {}).get("state") == "TASK_STATE_COMPLETED"


def assert_unavailable_within_the_bound(server: Server) -> None:
    """JSON-RPC and REST both answer "task store unavailable", each within BOUND."""
    started = time.monotonic()
    answer = send(server, "during the outage")
    took = time.monotonic() - started
    assert answer.get("error", {}).get("code") == -32603, answer
    assert answer["error"]["message"] == UNAVAILABLE, answer
    assert took < BOUND, f"SendMessage answered after {took:.1f}s (bound {BOUND}s)"
    started = time.monotonic()
    rest = send_rest(server, "during the outage")
    took = time.monotonic() - started
    assert rest.status_code == 503, rest.text
    assert rest.headers["Retry-After"].isdigit()
    assert rest.json()["error"]["status"] == "UNAVAILABLE"
    assert took < BOUND, f"REST message:send answered after {took:.1f}s (bound {BOUND}s)"


class CardWatch:
    """Fetch the card every half second from a thread while the store hangs: each
    answer must come (within 5 s; gevent workers serve it without the store)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: List[float] = []
        self.failures: List[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                card = requests.get(self.url + "/.well-known/agent-card.json", timeout=5)
                if card.status_code != 200:
                    self.failures.append(f"HTTP {card.status_code}")
                else:
                    self.answers.append(time.monotonic() - started)
            except requests.RequestException as exc:
                self.failures.append(repr(exc))
            self._stop.wait(0.5)

    def __enter__(self) -> "CardWatch":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join(10)
        if exc[0] is None:
            assert not self.failures, f"the card did not answer: {self.failures}"
            assert len(self.answers) >= 3, self.answers


def assert_log_is_clean(server: Server) -> None:
    log = server.log_text()
    assert "task store unavailable" in log
    assert "Traceback" not in log, log[log.find("Traceback") - 300:][:3000]
