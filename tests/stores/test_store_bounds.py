"""A hung or absent task store is a clear error within seconds, on every networked store
(issue 36, items 1 and 5; DESIGN invariant 8), under real ``gunicorn -k gevent``:

* **frozen**: every process of the database SIGSTOPped for ~12 s (a partition, a stuck
  failover): a ``SendMessage`` answers -32603 "task store unavailable" (REST 503)
  within ``A2A_STORE_TIMEOUT`` plus a margin, the card keeps answering meanwhile, and
  after the thaw the next call works;
* **black-holed**: the store's port accepts and never answers: the same;
* **down at start**: the workers boot without the store, calls answer 503 until it is
  up, then work, with no restart.

Each database is the test's own (tests/support/dbservers.py), never the shared service.  The
bounds on time are generous: they tell a clear error from a hang, not fast from slow.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

import pytest
import requests

from a2a_flask.protocol.models import new_id

from tests.support.dbservers import SERVERS, BlackHole, DBServer
from tests.support.helpers import ROOT, V1, Server, free_port, rpc_body

UNAVAILABLE = "The task store is unavailable; try again shortly"
#: The store timeout these servers run with (seconds; the default is 5).
STORE_TIMEOUT = 3
#: How long an answer may take while the store hangs: the timeout, once more for a
#: reconnect the call may make (a pooled connection found dead), and a wide margin
#: for a loaded machine.  A hang is far past it (the client gives up at HANG).
BOUND = 2 * STORE_TIMEOUT + 10
HANG = 60
#: How long the store stays frozen (seconds).
FROZEN_FOR = 12
KINDS = ["postgresql", "mariadb", "redis"]

pytest.importorskip("sqlalchemy")
pytest.importorskip("redis")


def message(text: str) -> Dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": text}]}


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


@pytest.mark.parametrize("kind", KINDS)
def test_a_frozen_store_is_a_clear_error_within_the_bound_and_recovers(kind):
    with SERVERS[kind]() as database, \
            Server("tests.support.fault_app:app", workers=2, env=env_for(database.url)) as server:
        assert completed(send(server, "before")), "the store works before the freeze"
        with CardWatch(server.url):
            database.freeze()
            frozen_at = time.monotonic()
            try:
                assert_unavailable_within_the_bound(server)
                # Again: the connections cut off were dropped, and the next call is
                # bounded the same way (it does not wait on a connection that hung).
                assert_unavailable_within_the_bound(server)
                time.sleep(max(0.0, FROZEN_FOR - (time.monotonic() - frozen_at)))
            finally:
                database.thaw()
        # The first call after the thaw works: nothing that hung is used again.
        answer = send(server, "after the thaw")
        assert completed(answer), answer
        for _ in range(4):  # and on both workers
            assert completed(send(server, "after the thaw, again"))
        assert_log_is_clean(server)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("accept", [True, False], ids=["accepts", "never-accepts"])
def test_a_black_holed_store_is_a_clear_error_within_the_bound(kind, accept):
    with BlackHole(accept=accept) as hole:
        url = {"postgresql": hole.postgres_url, "mariadb": hole.mariadb_url,
               "redis": hole.redis_url}[kind]()
        with Server("tests.support.fault_app:app", workers=2, env=env_for(url)) as server, \
                CardWatch(server.url):
            assert_unavailable_within_the_bound(server)
            assert_unavailable_within_the_bound(server)
            assert_log_is_clean(server)


@pytest.mark.parametrize("kind", KINDS)
def test_workers_boot_without_the_store_and_serve_once_it_is_up(kind):
    database: Optional[DBServer] = SERVERS[kind]()
    assert database is not None
    try:
        # The store's server is not running: gunicorn's workers boot all the same.
        with Server("tests.support.fault_app:app", workers=2, env=env_for(database.url)) as server:
            assert_unavailable_within_the_bound(server)
            database.start()
            # The first call after the store is up works (tables created on the way,
            # for SQL), and so do the next ones, on every worker: no restart.
            answer = send(server, "now it is up")
            assert completed(answer), answer
            for _ in range(4):
                assert completed(send(server, "and again"))
            rest = send_rest(server, "over REST")
            assert rest.status_code == 200, rest.text
            assert_log_is_clean(server)
    finally:
        database.close()


def test_a_bad_store_url_still_stops_the_app_at_once():
    """A URL the driver cannot read is a setting to fix, not an outage to wait out."""
    from a2a_flask.stores import StoreError, open_store

    with pytest.raises(StoreError, match="cannot use the redis store URL"):
        open_store("redis://127.0.0.1:notaport/0")
    with pytest.raises(StoreError, match="cannot use the SQL store URL"):
        open_store("postgresql+nosuchdriver://u@127.0.0.1/db")


@pytest.mark.parametrize("kind", KINDS)
def test_the_host_apps_flask_commands_run_while_the_store_is_down(kind):
    """``flask db upgrade``, ``flask shell``...: the host app's commands have nothing to
    do with A2A, and importing the app no longer reaches for the store."""
    port = free_port()  # nothing listens there
    url = {"postgresql": f"postgresql://postgres@127.0.0.1:{port}/postgres",
           "mariadb": f"mysql://root@127.0.0.1:{port}/a2a",
           "redis": f"redis://127.0.0.1:{port}/0"}[kind]
    done = subprocess.run([sys.executable, "-m", "flask", "--app", "tests.support.fault_app", "routes"],
                          cwd=ROOT, env={**os.environ, "FLASK_A2A_STORE": url},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "/a2a" in done.stdout
