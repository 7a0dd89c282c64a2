"""The agent of the fan-out test and bench (``tests/server/test_fanout*.py``, ``bench/fanout.py``).

``chunks N T GATE``  goes WORKING, waits until the file GATE exists (so that the
                     watchers attach first), then emits N text chunks evenly over T
                     seconds, each ``<k> <unix time>``, then completes.

Each worker counts the calls its store gets (``read``, ``wait``, ``head``,
``load``, ``append``) and writes them, with its RSS, to
``$FANOUT_DIR/ops-<pid>.json`` every 0.1 s (``FANOUT_DIR`` unset: nothing is
counted).  ``FLASK_A2A_*`` configures the agent as in the examples.
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter
from typing import Any

from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, TaskContext
from a2a_flask.concurrency import Worker

a2a = A2A(card=AgentCard(
    name="Fan-out agent", description="Streams chunks to a crowd", version="1.0.0",
    capabilities=AgentCapabilities(streaming=True),
    skills=[AgentSkill(id="chunks", name="Chunks", description="Streams", tags=["test"])]))

COUNTED = ("read", "wait", "head", "load", "append")


@a2a.executor
def chunks(ctx: TaskContext) -> None:
    words = ctx.text.split()
    count, seconds, gate = int(words[1]), float(words[2]), words[3]
    ctx.working("waiting for the watchers")
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
    start = time.monotonic()
    for number in range(count):
        pause = start + number * seconds / count - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        ctx.artifact(f"{number} {time.time():.6f}", artifact_id="chunks", append=number > 0,
                     last_chunk=number == count - 1)
    ctx.complete("done")


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
    while True:
        time.sleep(0.1)
        with open("/proc/self/status") as status:
            rss = next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))
        with open(path + ".tmp", "w") as out:
            json.dump({"calls": calls, "rss_kib": rss}, out)
        os.replace(path + ".tmp", path)


app = Flask(__name__)
app.config.from_prefixed_env()
a2a.init_app(app)

FOLDER = os.environ.get("FANOUT_DIR")
if FOLDER:
    _calls: Counter = Counter()
    _count_calls(a2a.store(app), _calls)
    _started = [0]

    @app.before_request
    def _start_reporting() -> None:
        # In the worker (after the fork), once: the report is this process's.
        if _started[0] != os.getpid():
            _started[0] = os.getpid()
            _calls.clear()
            Worker(lambda: _report(FOLDER, _calls), name="fanout-report")
