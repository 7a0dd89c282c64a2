"""The agent of the A2A 1.1 draft's server test and bench
(``tests/server/test_generations_server.py``, ``bench/long_poll.py``).

``ask``        asks "more? <pid>" (INPUT_REQUIRED) until a follow-up says ``done``;
``gate PATH``  goes WORKING, waits until the file PATH exists, then completes;
``ticks N PATH``  goes WORKING, waits for PATH, then sets WORKING again N times,
               each after the last was seen (``PATH.<k>`` appears), then completes.

Every answer says which worker gave it (``X-Worker-Pid``).  With ``COUNTS_DIR`` set,
each worker counts its store's calls (``read``, ``wait``, ``head``, ``load``,
``append``) and writes them to ``$COUNTS_DIR/ops-<pid>.json`` every 0.1 s.  Serves
the 1.1 draft; ``FLASK_A2A_*`` configures the rest.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from typing import Any, Dict

from flask import Flask, Response

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, TaskContext
from a2a_flask.concurrency import Worker


a2a = A2A(card=AgentCard(
    name="Generations agent", description="Tasks for the 1.1 draft", version="1.0.0",
    capabilities=AgentCapabilities(streaming=True),
    skills=[AgentSkill(id="ask", name="Ask", description="Asks", tags=["test"])]))


def _wait_for(path: str) -> None:
    deadline = time.monotonic() + 60
    while not os.path.exists(path) and time.monotonic() < deadline:
        time.sleep(0.01)  # cooperative under gevent (gunicorn patched)


@a2a.executor
def agent(ctx: TaskContext) -> object:
    word, _, arg = (ctx.history[0].text if ctx.history else ctx.text).partition(" ")
    if word == "ask":
        return "bye" if ctx.text == "done" else ctx.ask(f"more? {os.getpid()}")
    if word == "gate":
        ctx.working("waiting")
        _wait_for(arg)
        return None
    if word == "ticks":
        count, path = arg.split(" ", 1)
        ctx.working("waiting")
        _wait_for(path)
        for tick in range(int(count)):
            ctx.working(f"tick {tick}")
            _wait_for(f"{path}.{tick}")
        return None
    return ctx.text


app = Flask(__name__)
app.config.from_prefixed_env()
app.config.setdefault("A2A_PROTOCOL_DRAFT", True)
a2a.init_app(app)


@app.after_request
def _say_which_worker(response: Response) -> Response:
    response.headers["X-Worker-Pid"] = str(os.getpid())
    return response


COUNTED = ("read", "wait", "head", "load", "append")


def _count_calls(store: Any, calls: Counter) -> None:
    """Wrap the store's reads and writes with counters (this worker's only)."""
    for name in COUNTED:
        method = getattr(store, name)

        def counted(*args: Any, _method: Any = method, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return _method(*args, **kwargs)

        setattr(store, name, counted)


def _report(folder: str, calls: Counter) -> None:
    path = os.path.join(folder, f"ops-{os.getpid()}.json")

    def write(counts: Dict[str, int]) -> None:
        with open(path + ".tmp", "w") as out:
            json.dump(counts, out)
        os.replace(path + ".tmp", path)

    import gevent

    while True:
        time.sleep(0.1)
        # In a thread of gevent's pool: a busy disk must not hold the hub.
        gevent.get_hub().threadpool.apply(write, (dict(calls),))


FOLDER = os.environ.get("COUNTS_DIR")
if FOLDER:
    _calls: Counter = Counter()
    _count_calls(a2a.store(app), _calls)
    _started = [0]

    @app.before_request
    def _start_reporting() -> None:
        if _started[0] != os.getpid():  # in the worker (after the fork), once
            _started[0] = os.getpid()
            _calls.clear()
            Worker(lambda: _report(FOLDER, _calls), name="counts-report")
