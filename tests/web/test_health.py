"""The health endpoints (``A2A_HEALTH_PATH``) and a stopping worker's refusal of new
sends, through the Flask test client (tests/server/test_deploys.py: on real servers)."""
from __future__ import annotations

from typing import Any, List

import pytest
from flask import Flask

from a2a_flask import A2A
from a2a_flask.protocol.errors import StoreUnavailable
from a2a_flask.stores import MemoryStore
from a2a_flask.web import health

from tests.conftest import echo, make_card
from tests.support.helpers import V1, rpc_body, user_message


class FlakyStore(MemoryStore):
    """A memory store whose reads can be made to fail as an outage does; counts them."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.heads: List[str] = []

    def head(self, task_id: str) -> Any:
        self.heads.append(task_id)
        if self.down:
            raise StoreUnavailable()
        return super().head(task_id)


def test_not_served_unless_asked(make_app):
    client = make_app().test_client()
    assert client.get("/healthz").status_code == 404
    assert client.get("/healthz/ready").status_code == 404


def test_liveness_and_readiness(make_app):
    client = make_app(health_path="/healthz").test_client()
    live = client.get("/healthz")
    assert (live.status_code, live.json) == (200, {"status": "ok"})
    assert live.headers["Cache-Control"] == "no-store"
    ready = client.get("/healthz/ready")
    assert ready.status_code == 200
    assert ready.json == {"status": "ready", "agents": {"a2a": {"store": "ok", "stopping": False}}}


def test_readiness_follows_the_store_and_says_nothing_of_why(make_app, monkeypatch):
    monkeypatch.setattr(health, "PROBE_EVERY", 0.0)  # probe on every request
    store = FlakyStore()
    client = make_app(store=store, health_path="/healthz").test_client()
    assert client.get("/healthz/ready").status_code == 200
    store.down = True
    down = client.get("/healthz/ready")
    assert down.status_code == 503
    assert down.headers["Retry-After"] == "1"
    assert down.json == {"status": "unavailable",
                         "agents": {"a2a": {"store": "unavailable", "stopping": False}}}
    assert client.get("/healthz").status_code == 200  # liveness asks no store
    store.down = False
    assert client.get("/healthz/ready").status_code == 200


def test_a_crowd_of_probes_reads_the_store_once_a_window(make_app, monkeypatch):
    monkeypatch.setattr(health, "PROBE_EVERY", 3600.0)
    store = FlakyStore()
    client = make_app(store=store, health_path="/healthz").test_client()
    for _ in range(50):
        assert client.get("/healthz/ready").status_code == 200
    assert len(store.heads) == 1


def test_one_pair_of_endpoints_for_every_agent_of_the_app():
    app = Flask("two")
    app.config["A2A_HEALTH_PATH"] = "/health/"
    stores = [FlakyStore(), FlakyStore()]
    agents = [A2A(app, card=make_card(), executor=echo, store=stores[0], name="x",
                  url_prefix="/x"),
              A2A(app, card=make_card(), executor=echo, store=stores[1], name="y",
                  url_prefix="/y")]
    try:
        stores[1].down = True
        answer = app.test_client().get("/health/ready")
        assert answer.status_code == 503
        assert answer.json["agents"] == {"x": {"store": "ok", "stopping": False},
                                         "y": {"store": "unavailable", "stopping": False}}
    finally:
        for agent in agents:
            agent.state(app).close()


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_a_stopping_worker_refuses_new_sends_with_a_retryable_503(make_app, binding):
    app = make_app(health_path="/healthz")
    client = app.test_client()
    app.extensions["a2a"]["a2a"].service.runtime.shutdown(0.0)
    if binding == "jsonrpc":
        answer = client.post("/a2a", headers=V1, json=rpc_body(
            "SendMessage", {"message": user_message("hi")}))
        error = answer.json["error"]
        assert (error["code"], error["data"][0]["reason"]) == (-32603, "WORKER_STOPPING")
        assert answer.json["id"] == 1
    else:
        answer = client.post("/a2a/rest/message:send", headers=V1,
                             json={"message": user_message("hi")})
        assert answer.json["error"]["status"] == "UNAVAILABLE"
        assert answer.json["error"]["details"][0]["reason"] == "WORKER_STOPPING"
    assert answer.status_code == 503
    assert answer.headers["Retry-After"] == "1"
    assert client.get("/healthz/ready").json["agents"]["a2a"]["stopping"] is True
    # Reads go on: the tasks of the runs finishing are still there to be read.
    listed = client.post("/a2a", headers=V1, json=rpc_body("ListTasks", {}))
    assert "result" in listed.json


def test_a_stream_whose_run_is_stopped_before_its_first_event_ends_with_an_error(make_app):
    """A run stopped at shutdown before it made anything never decides: its stream
    ends (a retryable WORKER_STOPPING error event) instead of keeping alive forever."""
    import threading
    import time as _time

    started = threading.Event()

    def slow_to_start(ctx):
        started.set()
        ends = _time.monotonic() + 30
        while not ctx.cancelled and _time.monotonic() < ends:  # stopped before emitting
            _time.sleep(0.02)
        return "late"

    app = make_app(slow_to_start, sse_keepalive=0.2)
    runtime = app.extensions["a2a"]["a2a"].service.runtime
    client = app.test_client()
    threading.Thread(target=lambda: (started.wait(10), runtime.shutdown(0.0)),
                     daemon=True).start()
    answer = client.post("/a2a", headers=V1, buffered=True, json=rpc_body(
        "SendStreamingMessage", {"message": user_message("hi")}))
    text = answer.get_data(as_text=True)
    assert "WORKER_STOPPING" in text, text
