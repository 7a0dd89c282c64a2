"""The app ``bench.py`` serves: three A2A agents plus bare Flask routes as ceilings.

Routes (all on one Flask app, one gunicorn gevent worker):

* ``POST /a2a``        echo agent: the task completes with the text as an artifact.
* ``POST /chunks``     chunk agent: a generator yielding ``BENCH_CHUNKS`` (100) chunks, no sleep
  (``BENCH_CHUNK_YIELD=1``: it yields to gevent after each, one append per chunk).
* ``POST /hold``       hold agent: goes WORKING, then idles until canceled or released.
* ``POST /bare/json``  parses a small JSON body, returns a small JSON (the SendMessage ceiling).
* ``POST /bare/sse``   parses the body, streams ``BENCH_CHUNKS`` ``data:`` events (the SSE ceiling).
* ``POST /bare/idle``  one ``data:`` event, then idles like a held stream (the held-stream ceiling).
* ``POST /bench/release``  ends every hold executor (bench control, not part of A2A).
* ``POST /bench/forget``   drops finished tasks from the agents' stores, then runs
  ``gc.collect()`` (bench control: runs start from an empty store); answers with
  the worker's pid (with several workers, each has its own heap and memory store;
  ``{"stall": 0.3}`` keeps this worker from accepting while the next call goes out).

The store comes from the environment (``app.config.from_prefixed_env()``), for
example ``FLASK_A2A_STORE=sqlite:///tmp/bench.db``; all three agents share it
(one store object: ``init_app`` gives agents of one app that name the same
store the same object).
Serve it by hand with::

    gunicorn -k gevent -w 1 -b 127.0.0.1:8000 --pythonpath bench bench_app:app
"""
from __future__ import annotations

import gc
import json
import os
import threading
import time
from typing import Any, Dict, Iterator

from flask import Flask, Response, jsonify, request

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, TaskContext, TaskStore

CHUNKS = int(os.environ.get("BENCH_CHUNKS", "100"))
#: The chunk agent yields to the other greenlets after each chunk, as one relaying
#: a model's tokens from the network does (each chunk is then an append of its own).
CHUNK_YIELD = os.environ.get("BENCH_CHUNK_YIELD") == "1"
#: Upper bound on how long a hold executor idles, so nothing outlives a run.
HOLD_SECONDS = float(os.environ.get("BENCH_HOLD_SECONDS", "900"))
#: Set by POST /bench/release; gevent-aware because gunicorn patched threading first.
RELEASE = threading.Event()


def bench_card(name: str, description: str) -> AgentCard:
    """A minimal streaming-capable card."""
    return AgentCard(
        name=name,
        description=description,
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id=name.lower(), name=name, description=description, tags=["bench"])],
    )


echo_agent = A2A(card=bench_card("Echo", "Echoes the text"), name="echo", url_prefix="/a2a")
chunk_agent = A2A(card=bench_card("Chunks", f"Streams {CHUNKS} chunks"), name="chunks",
                  url_prefix="/chunks", root_card=False)
hold_agent = A2A(card=bench_card("Hold", "Stays WORKING until released"), name="hold",
                 url_prefix="/hold", root_card=False)


@echo_agent.executor
def echo(ctx: TaskContext) -> str:
    """Complete the task with the input text as an artifact."""
    return ctx.text


@chunk_agent.executor
def chunks(ctx: TaskContext) -> Iterator[str]:
    """Yield CHUNKS artifact chunks as fast as possible (or yielding to gevent after each)."""
    for index in range(CHUNKS):
        yield f"chunk {index} "
        if CHUNK_YIELD:
            time.sleep(0)  # gevent's sleep: gunicorn's gevent worker patched time


@hold_agent.executor
def hold(ctx: TaskContext) -> None:
    """Go WORKING, then idle (checking ``ctx.cancelled``) until canceled, released or timed out."""
    ctx.working("holding")
    deadline = time.monotonic() + HOLD_SECONDS
    while not ctx.cancelled and time.monotonic() < deadline:
        if RELEASE.wait(1.0):
            return


#: ``BENCH_OTEL=sdk``: an OpenTelemetry SDK tracer provider that exports nothing (spans
#: are made and dropped); ``noop``: the API's no-op provider.  Unset: no provider.
if os.environ.get("BENCH_OTEL") == "sdk":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
elif os.environ.get("BENCH_OTEL") == "noop":
    from opentelemetry import trace

    trace.set_tracer_provider(trace.NoOpTracerProvider())

app = Flask(__name__)
# FLASK_A2A_STORE=sqlite:///... (and any other FLASK_A2A_*) picks the store; default memory://.
# The bench holds tens of thousands of anonymous streams on purpose.
app.config["A2A_MAX_ANONYMOUS_STREAMS"] = 0
app.config.from_prefixed_env()
echo_agent.init_app(app)
chunk_agent.init_app(app)
hold_agent.init_app(app)


@app.post("/bare/json")
def bare_json() -> Response:
    """The SendMessage ceiling: parse the JSON body, answer a small JSON."""
    body: Dict[str, Any] = request.get_json()
    return jsonify(jsonrpc="2.0", id=body.get("id"), result={"ok": True})


@app.post("/bare/sse")
def bare_sse() -> Response:
    """The SSE ceiling: parse the JSON body, stream CHUNKS small ``data:`` events."""
    body: Dict[str, Any] = request.get_json()
    request_id = body.get("id")

    def events() -> Iterator[bytes]:
        for index in range(CHUNKS):
            data = {"jsonrpc": "2.0", "id": request_id, "result": {"text": f"chunk {index} "}}
            yield ("data: " + json.dumps(data, separators=(",", ":")) + "\n\n").encode()

    return Response(events(), mimetype="text/event-stream", headers={"Cache-Control": "no-cache"})


@app.post("/bare/idle")
def bare_idle() -> Response:
    """The held-stream ceiling: one ``data:`` event, then a keep-alive comment every 15 s."""
    request.get_json()

    def events() -> Iterator[bytes]:
        yield b'data: {"state":"WORKING"}\n\n'
        deadline = time.monotonic() + HOLD_SECONDS
        while time.monotonic() < deadline and not RELEASE.wait(15.0):
            yield b": keep-alive\n\n"

    return Response(events(), mimetype="text/event-stream", headers={"Cache-Control": "no-cache"})


@app.post("/bench/release")
def release() -> Response:
    """End every hold executor (their tasks complete, so their streams close)."""
    RELEASE.set()
    return jsonify(released=True)


@app.post("/bench/forget")
def forget() -> Response:
    """Drop every finished task from the agents' stores, then collect garbage (in this worker).

    ``{"stall": s}`` then blocks the whole worker for ``s`` seconds (at most 2), so
    that a connection opened meanwhile goes to another worker.
    """
    dropped = sum(forget_finished(agent.store(app)) for agent in (echo_agent, chunk_agent, hold_agent))
    collected = gc.collect()
    stall(min(2.0, float((request.get_json(silent=True) or {}).get("stall", 0))))
    return jsonify(forgotten=dropped, collected=collected, pid=os.getpid())


def stall(seconds: float) -> None:
    """Block the worker process itself (not only this greenlet): it accepts nothing meanwhile."""
    if seconds <= 0:
        return
    try:
        from gevent.monkey import get_original

        get_original("time", "sleep")(seconds)
    except ImportError:
        time.sleep(seconds)


def forget_finished(store: TaskStore) -> int:
    """Bench-only: remove every finished task from a store (whatever its age)."""
    return store.purge("9999-12-31T23:59:59.999Z")
