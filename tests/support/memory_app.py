"""The agent test_memory.py measures under ``gunicorn -k gevent`` (tests only).

An echo agent that streams an artifact in two chunks, on the store named by
``FLASK_A2A_STORE``, plus ``GET /probe/heap``: the worker waits until none of its
tasks runs, collects garbage and answers the size of its traced heap, with
the same filter as the in-process probe (``memory_probe.heap_bytes``), and its
garbage collector's thresholds.  The
first call starts tracing (a heap traced since start-up would take the worker
too long to snapshot), so measure from the second call on.
"""
from __future__ import annotations

import gc
import os
import sys
import time
import tracemalloc
from typing import Any, Dict

from flask import Flask

from a2a_flask import A2A, AgentCapabilities

from tests.conftest import make_card
from tests.support import memory_probe


def answer(ctx: Any) -> None:
    ctx.working("on it")
    time.sleep(0.002)  # real agents wait on something: the request then waits on the task
    ctx.artifact("first ", artifact_id="answer")
    ctx.artifact("second", append=True, last_chunk=True, artifact_id="answer")
    ctx.complete("done")


app = Flask(__name__)
app.config.from_prefixed_env()  # FLASK_A2A_STORE names the store
a2a = A2A(app, card=make_card(capabilities=AgentCapabilities(streaming=True)), executor=answer)


@app.get("/probe/heap")
def heap() -> Dict[str, Any]:
    if not tracemalloc.is_tracing():
        tracemalloc.start(int(os.environ.get("PROBE_FRAMES", memory_probe.FRAMES)))
    runtime = a2a.state(app).service.runtime
    deadline = time.monotonic() + 10
    while runtime.keeper.runs_here() and time.monotonic() < deadline:
        time.sleep(0.01)  # gevent's sleep in the worker: the runs finish meanwhile
    time.sleep(0.05)
    gc.collect()
    sys._clear_type_cache()
    global _last
    snapshot = memory_probe.filtered_snapshot()
    top = [] if _last is None else [
        f"{stat.size_diff:+d} B {stat.count_diff:+d} " + " < ".join(
            f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in list(stat.traceback)[::-1][:8])
        for stat in snapshot.compare_to(_last, "traceback")[:8]]
    _last = snapshot
    return {"heap": sum(t.size for t in snapshot.traces), "running": len(runtime.keeper.runs_here()),
            "top": top, "gc_threshold": gc.get_threshold()}


_last: Any = None
