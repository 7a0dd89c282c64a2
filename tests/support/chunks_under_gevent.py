"""Scenarios of streamed chunks under gevent, run by test_chunks.py in a patched process.

Under gevent a run keeps the chunks an executor emits until it yields, and appends
them together (``Run.add_artifact``).  The test process itself is not patched, so
each scenario runs here, in a child process that is, and prints one JSON line.
"""
from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402  (after the patching, as gunicorn's gevent worker does)
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable, Dict, List  # noqa: E402

import gevent  # noqa: E402

from a2a_flask.engine import run as run_module  # noqa: E402
from a2a_flask.engine.executor import TaskContext, invoke  # noqa: E402
from a2a_flask.engine.runtime import Runtime  # noqa: E402
from a2a_flask.protocol.errors import StoreUnavailable  # noqa: E402
from a2a_flask.protocol.models import Message, Part, Role, TaskArtifactUpdateEvent  # noqa: E402
from a2a_flask.stores import MemoryStore  # noqa: E402


class CountingStore(MemoryStore):
    """A memory store that counts appends, and can fail the next one."""

    def __init__(self) -> None:
        super().__init__()
        self.appends = 0
        self.fail_next = False

    def append(self, task_id: str, expected_seq: int, events: List[Any], record: Any) -> int:
        if self.fail_next:
            self.fail_next = False
            raise StoreUnavailable()
        self.appends += 1
        return super().append(task_id, expected_seq, events, record)


def start(executor: Callable[[TaskContext], Any]) -> Any:
    """Run ``executor`` for a new task on a fresh store; returns (runtime, store, run)."""
    store = CountingStore()
    runtime = Runtime(store, lambda run: invoke(executor, run))
    message = Message(message_id="m-1", role=Role.USER, parts=[Part(text="hi")])
    run = runtime.start_new(message, task_id="t-1", context_id="c-1", tenant="", owner="",
                            dialect="1.0")
    return runtime, store, run


def chunk_texts(store: MemoryStore) -> List[str]:
    return [part.text or "" for entry in store.entries("t-1", 0)
            if isinstance(entry.event, TaskArtifactUpdateEvent)
            for part in entry.event.artifact.parts]


def burst() -> Dict[str, Any]:
    """300 chunks without a pause: few appends, every chunk in order, one artifact."""
    def executor(ctx: TaskContext) -> None:
        for index in range(300):
            ctx.artifact(f"{index} ", append=True)

    runtime, store, run = start(executor)
    assert run.finished.wait(10)
    record = store.load("t-1")
    return {"appends": store.appends, "texts": chunk_texts(store),
            "state": record.state.value, "artifacts": len(record.task.artifacts),
            "parts": len(record.task.artifacts[0].parts),
            "seqs": [entry.seq for entry in store.entries("t-1", 0)]}


def visible_once_yielded() -> Dict[str, Any]:
    """A chunk is in the log as soon as the executor blocks, before it goes on."""
    release = threading.Event()

    def executor(ctx: TaskContext) -> None:
        ctx.artifact("first", append=True)
        release.wait(5)
        ctx.artifact("second", append=True)

    runtime, store, run = start(executor)
    gevent.sleep(0.05)  # the executor is blocked on the event now
    seen = chunk_texts(store)
    release.set()
    assert run.finished.wait(10)
    return {"while_blocked": seen, "after": chunk_texts(store)}


def task_includes_unsent() -> Dict[str, Any]:
    """``ctx.task`` shows the chunks the executor emitted, appended or not."""
    seen: Dict[str, Any] = {}

    def executor(ctx: TaskContext) -> None:
        ctx.artifact("a", append=True)
        ctx.artifact("b", append=True)
        task = ctx.task
        assert task is not None
        seen["parts"] = [p.text for p in task.artifacts[0].parts]

    runtime, store, run = start(executor)
    assert run.finished.wait(10)
    return seen


def cancel_while_waiting() -> Dict[str, Any]:
    """A cancel between two chunks: the first is kept, the next emission stops the run."""
    def executor(ctx: TaskContext) -> None:
        ctx.artifact("kept", append=True)
        time.sleep(0.1)  # canceled meanwhile
        for _ in range(5):
            ctx.artifact("dropped", append=True)

    runtime, store, run = start(executor)
    gevent.sleep(0.03)
    runtime.cancel("t-1")
    assert run.finished.wait(10)
    return {"state": store.load("t-1").state.value, "texts": chunk_texts(store)}


def store_down_in_the_background() -> Dict[str, Any]:
    """The background append fails: the executor's next call raises it, nothing is lost
    silently (the keeper fails the task once the store answers)."""
    raised: Dict[str, str] = {}

    def executor(ctx: TaskContext) -> None:
        ctx.artifact("zero")  # the first emission makes the task, at once
        ctx.artifact("one", append=True)
        store.fail_next = True
        gevent.sleep(0.02)  # the background append runs, and fails
        try:
            ctx.artifact("two", append=True)
        except StoreUnavailable as exc:
            raised["error"] = type(exc).__name__
            raise

    runtime, store, run = start(executor)
    assert run.finished.wait(10)
    return {"raised": raised.get("error", ""), "unrecorded": sorted(runtime.writer._unrecorded)}


def capped() -> Dict[str, Any]:
    """A run holds at most MAX_UNSENT chunks: the executor appends them itself then."""
    most = {"unsent": 0}

    def executor(ctx: TaskContext) -> None:
        for index in range(3 * run_module.MAX_UNSENT):
            ctx.artifact(f"{index}", append=True)
            most["unsent"] = max(most["unsent"], len(run._unsent))

    runtime, store, run = start(executor)
    assert run.finished.wait(10)
    return {"most_unsent": most["unsent"], "cap": run_module.MAX_UNSENT,
            "count": len(chunk_texts(store))}


def cap_grows_with_the_task() -> Dict[str, Any]:
    """On a long task a run holds more chunks at once (``unsent_cap``), never more than
    the cap for its log's length.  The executor is not paced, so only the cap sends."""
    run_module.YIELD_EVERY = 60.0
    held: List[Any] = []

    def executor(ctx: TaskContext) -> None:
        for index in range(20_000):
            ctx.artifact(f"{index}", append=True)
            held.append((len(run._unsent), run.record.seq))

    runtime, store, run = start(executor)
    assert run.finished.wait(30)
    return {"most_unsent": max(unsent for unsent, _ in held),
            "over_cap": [pair for pair in held if pair[0] > run_module.unsent_cap(pair[1])],
            "count": len(chunk_texts(store)), "appends": store.appends}


SCENARIOS = {f.__name__: f for f in (burst, visible_once_yielded, task_includes_unsent,
                                     cancel_while_waiting, store_down_in_the_background, capped,
                                     cap_grows_with_the_task)}

if __name__ == "__main__":
    print(json.dumps(SCENARIOS[sys.argv[1]]()))
