"""How much of the traced heap a worker keeps per task, per path and per store.

Shared by ``tests/server/test_memory.py`` (which asserts a bound) and
``bench/memory.py`` (which prints the numbers).  One :class:`Probe` is one
agent in a Flask app on one store, driven through the Flask test client; its
executors and webhook deliveries run in background threads, as they do under
a threaded server.  :func:`bytes_per_task` runs a path ``warmup`` times, then
``tasks`` more times, and returns how much the traced heap grew over the
second batch, per task.

What is counted (the filter)
----------------------------
``tracemalloc`` starts before the warm-up and records up to :data:`FRAMES`
frames per allocation.  The growth is the difference between a snapshot after
the warm-up and one after the measured batch, both taken once every
background thread of the probe has ended and after ``gc.collect()``.  Every
allocation counts, whoever made it (the package, or Flask, Werkzeug, the
standard library, sqlite3 or redis-py on its behalf), except those the harness
made itself: allocations whose newest frame is in this folder, pytest, pluggy,
tracemalloc, the import machinery or linecache (bookkeeping no worker has,
which would drift by a few KiB per run), and the Redis listener's receive
buffer (see ``_HARNESS``).
"""
from __future__ import annotations

import contextlib
import fnmatch
import gc
import os
import shutil
import sys
import tempfile
import threading
import time
import tracemalloc
import uuid
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill

#: Frames recorded per allocation: deep enough that an allocation made by a
#: library (redis-py, werkzeug) for the package still shows the package's frame.
FRAMES = 1
#: Frames per allocation when looking for where the heap grew (slower).
TOP_FRAMES = 10
#: Names of the background threads that belong to one task (the probe waits for them).
TASK_THREADS = ("a2a-task-", "a2a-cancel-", "a2a-push-", "process_request_thread")

REDIS_URL = os.environ.get("A2A_TEST_REDIS", "redis://127.0.0.1:6379/15")


# ------------------------------------------------------------------ stores


def _drop_redis_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()


def _file_store(scheme: str) -> Callable[[Path], "StoreHandle"]:
    def open_store(folder: Path) -> StoreHandle:
        # The shelve store indexes every task in each process (by design, as the
        # memory store keeps them): what must not grow is what is left once the
        # finished tasks are purged.
        return StoreHandle(f"{scheme}://{folder}/tasks", lambda: None,
                           keeps_tasks=scheme == "shelve")

    return open_store


def _redis_store(folder: Path) -> "StoreHandle":
    prefix = f"a2amem-{uuid.uuid4().hex[:12]}"
    return StoreHandle(f"{REDIS_URL}?prefix={prefix}", lambda: _drop_redis_prefix(prefix))


class StoreHandle:
    """A store URL for one probe, and how to remove what it leaves behind."""

    def __init__(self, url: str, cleanup: Callable[[], None], *, keeps_tasks: bool = False) -> None:
        self.url = url
        self.cleanup = cleanup
        #: The store holds its tasks in this process: purge them before measuring.
        self.keeps_tasks = keeps_tasks


#: The stores measured: name -> a function of a scratch folder giving a store URL.
#: The memory store is left out on purpose: it keeps every task until its TTL.
#: Add a backend here (one line) and both the test and the bench measure it.
STORES: Dict[str, Callable[[Path], StoreHandle]] = {
    "shelve": _file_store("shelve"),
    "sqlite": _file_store("sqlite"),
    "redis": _redis_store,
}


# ------------------------------------------------------------------ the agent


class _Receiver:
    """A webhook receiver on loopback that counts what it gets and keeps nothing."""

    def __init__(self) -> None:
        from werkzeug.serving import WSGIRequestHandler, make_server

        class Quiet(WSGIRequestHandler):
            def log_request(self, *args: Any) -> None:
                pass  # one line per push would drown the output

        self.finished = 0
        self._lock = threading.Condition()
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True,
                                   request_handler=Quiet)
        self.url = f"http://127.0.0.1:{self._server.server_port}/hook"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        kwargs={"poll_interval": 0.05})  # a quick close
        self._thread.start()

    def _app(self, environ: Dict[str, Any], start_response: Callable[..., Any]) -> List[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length)
        if b"TASK_STATE_COMPLETED" in body:
            with self._lock:
                self.finished += 1
                self._lock.notify_all()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", "2")])
        return [b"{}"]

    def wait_finished(self, count: int, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        with self._lock:
            while self.finished < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"{count - self.finished} webhooks never got COMPLETED")
                self._lock.wait(remaining)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class Probe:
    """One agent on one store, and the calls the paths make."""

    def __init__(self, store: str, folder: Optional[Path] = None) -> None:
        self._folder = Path(folder or tempfile.mkdtemp(prefix="a2amem-"))
        self._own_folder = folder is None
        self._store = STORES[store](self._folder)
        #: Released once per task by the paths whose executor must wait for them.
        self.gate = threading.Semaphore(0)
        self.receiver = _Receiver()
        self.pushed = 0
        card = AgentCard(name="Memory probe", description="Measures what a task leaves behind",
                         version="1.0.0",
                         capabilities=AgentCapabilities(streaming=True, push_notifications=True),
                         skills=[AgentSkill(id="echo", name="Echo", description="Echoes",
                                            tags=["echo"])])
        self.app = Flask("memory_probe")
        self.app.config.update(A2A_PUSH_ALLOW_PRIVATE=True, A2A_PUSH_TIMEOUT=5.0)
        self.a2a = A2A(self.app, card=card, executor=self._execute, store=self._store.url)
        self.state = self.app.extensions["a2a"]["a2a"]
        self.client = self.app.test_client()

    def _execute(self, ctx: Any) -> None:
        if ctx.text == "hold":
            if not self.gate.acquire(timeout=10):
                raise RuntimeError("the probe never released a held task")
        elif ctx.text == "wait for cancel":
            deadline = time.monotonic() + 10
            while not ctx.cancelled:  # a cooperative agent, as the docs recommend
                if time.monotonic() > deadline:
                    raise RuntimeError("the probe never canceled a held task")
                time.sleep(0.002)
            return
        ctx.working("on it")
        ctx.artifact("first ", artifact_id="answer")
        ctx.artifact("second", append=True, last_chunk=True, artifact_id="answer")
        ctx.complete("done")

    def close(self) -> None:
        self.settle()
        self.state.close()
        self.receiver.close()
        self._store.cleanup()
        if self._own_folder:
            shutil.rmtree(self._folder, ignore_errors=True)

    # -- waiting until a batch has really ended

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until no executor, cancel or delivery thread of the probe is alive."""
        deadline = time.monotonic() + timeout
        runtime = self.state.service.runtime
        push = self.state.service.push
        while True:
            busy = [t.name for t in threading.enumerate() if t.name.startswith(TASK_THREADS)
                    or TASK_THREADS[-1] in t.name]
            if not busy and not runtime.keeper.runs_here() and (push is None or not push._draining):
                # A thread leaves enumerate() a moment before its last frame (which
                # holds its target, and so a run) is gone: give it that moment.
                time.sleep(0.05)
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"the probe did not settle: {busy}")
            time.sleep(0.005)

    # -- wire calls (each checks its answer; none keeps it)

    def rpc(self, method: str, params: Dict[str, Any], version: Optional[str] = "1.0") -> Any:
        headers = {"A2A-Version": version} if version else {}
        response = self.client.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                  "params": params}, headers=headers)
        body = response.get_json()
        if response.status_code != 200 or "error" in body:
            raise AssertionError(f"{method}: {response.status_code} {body}")
        return body["result"]

    def stream(self, method: str, params: Dict[str, Any], version: Optional[str] = "1.0",
               headers: Optional[Dict[str, str]] = None) -> bytes:
        sent = dict(headers or {})
        if version:
            sent["A2A-Version"] = version
        response = self.client.post("/a2a", json={"jsonrpc": "2.0", "id": 1, "method": method,
                                                  "params": params}, headers=sent, buffered=False)
        data = response.get_data()
        response.close()
        if response.status_code != 200 or b'"error"' in data or b"COMPLETED" not in data.upper():
            raise AssertionError(f"{method}: {response.status_code} {data[-300:]!r}")
        return data


def _message(text: str) -> Dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}


def _message03(text: str) -> Dict[str, Any]:
    return {"kind": "message", "role": "user", "messageId": uuid.uuid4().hex,
            "parts": [{"kind": "text", "text": text}]}


def _completed(task: Dict[str, Any]) -> str:
    state = task["status"]["state"]
    if state.upper() not in ("TASK_STATE_COMPLETED", "COMPLETED"):
        raise AssertionError(f"task {task['id']} is {state}")
    return str(task["id"])


# ------------------------------------------------------------------ paths


def path_send(probe: Probe) -> None:
    _completed(probe.rpc("SendMessage", {"message": _message("hi")})["task"])


def path_stream(probe: Probe) -> None:
    probe.stream("SendStreamingMessage", {"message": _message("hi")})


def _held(probe: Probe, text: str = "hold") -> str:
    """A task whose executor waits (created before the answer): for the probe's
    gate, or until it is canceled."""
    task = probe.rpc("SendMessage", {"message": _message(text),
                                     "configuration": {"returnImmediately": True}})["task"]
    return str(task["id"])


def path_resubscribe(probe: Probe) -> None:
    task_id = _held(probe)
    response = probe.client.post("/a2a", json={"jsonrpc": "2.0", "id": 1,
                                               "method": "SubscribeToTask",
                                               "params": {"id": task_id}},
                                 headers={"A2A-Version": "1.0"}, buffered=False)
    stream = iter(response.response)
    first = next(stream)  # the snapshot: the subscription is live before the task moves
    probe.gate.release()
    rest = b"".join(stream)
    response.close()
    if b"TASK_STATE_COMPLETED" not in first + rest:
        raise AssertionError(f"SubscribeToTask ended early: {(first + rest)[-300:]!r}")


def path_cancel(probe: Probe) -> None:
    task = probe.rpc("CancelTask", {"id": _held(probe, "wait for cancel")})
    if task["status"]["state"] != "TASK_STATE_CANCELED":
        raise AssertionError(f"CancelTask left {task['status']['state']}")


def path_get(probe: Probe) -> None:
    task_id = _completed(probe.rpc("SendMessage", {"message": _message("hi")})["task"])
    _completed(probe.rpc("GetTask", {"id": task_id}))


def path_list(probe: Probe) -> None:
    path_send(probe)
    page = probe.rpc("ListTasks", {"pageSize": 5})
    if not page["tasks"]:
        raise AssertionError("ListTasks found nothing")


def path_push(probe: Probe) -> None:
    config = {"taskPushNotificationConfig": {"url": probe.receiver.url, "token": "t"}}
    sent = probe.rpc("SendMessage", {"message": _message("hi"), "configuration": config})
    _completed(sent["task"])
    probe.pushed += 1
    probe.receiver.wait_finished(probe.pushed)


def path_v03(probe: Probe) -> None:
    task = probe.rpc("message/send", {"message": _message03("hi")}, version="0.3")
    task_id = _completed(task)
    _completed(probe.rpc("tasks/get", {"id": task_id}, version="0.3"))
    probe.stream("message/stream", {"message": _message03("hi")}, version="0.3")


def path_v01(probe: Probe) -> None:
    task_id = "t-" + uuid.uuid4().hex
    message = {"role": "user", "parts": [{"type": "text", "text": "hi"}]}
    _completed(probe.rpc("tasks/send", {"id": task_id, "message": message}, version=None))
    _completed(probe.rpc("tasks/get", {"id": task_id}, version=None))
    probe.stream("tasks/sendSubscribe", {"id": "t-" + uuid.uuid4().hex, "message": message},
                 version=None)


#: Every path measured: name -> one task's worth of calls.
PATHS: Dict[str, Callable[[Probe], None]] = {
    "send": path_send,
    "stream": path_stream,
    "resubscribe": path_resubscribe,
    "cancel": path_cancel,
    "get": path_get,
    "list": path_list,
    "push": path_push,
    "v03": path_v03,
    "v01": path_v01,
}


# ------------------------------------------------------------------ measuring

#: Allocations left out, by the file that made them: the harness's own (this
#: folder, pytest, tracemalloc, imports) and the receive buffer of the Redis
#: store's pub/sub listener, which is blocked in ``recv()`` with a fresh
#: buffer of up to 64 KiB, or not, depending on when the snapshot falls.
_HARNESS = [tracemalloc.Filter(False, pattern) for pattern in (
    tracemalloc.__file__, "<frozen importlib._bootstrap*>", "*/linecache.py",
    os.path.join("*", "_pytest", "*"), os.path.join("*", "pluggy", "*"),
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "*"),
    os.path.join("*", "redis", "_parsers", "socket.py"))]


# Filtering compiles each pattern on first use (fnmatch's cache): do it now, untraced.
for _filter in _HARNESS:
    fnmatch.fnmatch("", _filter.filename_pattern)


def filtered_snapshot() -> tracemalloc.Snapshot:
    """A snapshot of the traced heap without the harness's allocations."""
    return tracemalloc.take_snapshot().filter_traces(_HARNESS)


def _is_harness(filename: str) -> bool:
    return any(fnmatch.fnmatch(filename, f.filename_pattern) for f in _HARNESS)


def heap_bytes() -> int:
    """Bytes of the traced heap, the harness's own allocations left out.

    The same count as ``filtered_snapshot()``, grouped by file first: the
    filter then runs once per file, not once per allocation (seconds per case).
    """
    return sum(stat.size for stat in tracemalloc.take_snapshot().statistics("filename")
               if not _is_harness(stat.traceback[0].filename))


#: Later than any task's update time: a purge with it removes every finished task.
_END_OF_TIME = "9999-12-31T23:59:59.999Z"


def _settle(probe: Probe) -> None:
    probe.settle()
    if probe._store.keeps_tasks:
        probe.state.store.purge(_END_OF_TIME)
    gc.collect()
    # CPython's method cache keeps the last name looked up in each of its 4096
    # slots; names parsed from requests land there and would read as growth.
    sys._clear_type_cache()


#: Looks at the settled heap; the smallest counts (see _settled_heap).
LOOKS = 3


def _settled_heap(probe: Probe) -> int:
    """The heap at rest: the smallest of a few looks 20 ms apart.  The keeper
    (every second) and the Redis listener may be midway through a call when
    one look is taken, holding a few KiB that are gone by the next; a leak
    is there in every look."""
    _settle(probe)
    looks = []
    for _ in range(LOOKS):
        looks.append(heap_bytes())
        time.sleep(0.02)
    return min(looks)


@contextlib.contextmanager
def tracing() -> Iterator[None]:
    """Trace the heap across every batch measured inside the block.

    Started afresh for each batch, tracing would read a long-lived container
    that is reallocated during the batch (a dict that resizes, a cache that
    turns over) as growth: its new storage is traced, its old storage was
    never seen, so its release is not counted.
    """
    started_here = not tracemalloc.is_tracing()
    if started_here:
        tracemalloc.start(FRAMES)
    try:
        yield
    finally:
        if started_here:
            tracemalloc.stop()


def bytes_per_task(probe: Probe, path: Callable[[Probe], None], *, warmup: int,
                   tasks: int) -> float:
    """How many bytes of the traced heap each of ``tasks`` runs of ``path`` leaves behind
    (measure consecutive batches inside one :func:`tracing` block)."""
    with tracing():
        for _ in range(warmup):
            path(probe)
        before = _settled_heap(probe)
        for _ in range(tasks):
            path(probe)
        after = _settled_heap(probe)
    return (after - before) / tasks


def top_growth(probe: Probe, path: Callable[[Probe], None], *, warmup: int, tasks: int,
               limit: int = 10) -> Iterator[str]:
    """Where the heap grew, by traceback (newest frame first), largest first."""
    tracemalloc.start(TOP_FRAMES)
    try:
        for _ in range(warmup):
            path(probe)
        _settle(probe)
        before = filtered_snapshot()
        for _ in range(tasks):
            path(probe)
        _settle(probe)
        after = filtered_snapshot()
    finally:
        tracemalloc.stop()
    for stat in after.compare_to(before, "traceback")[:limit]:
        newest_first = list(stat.traceback)[::-1][:8]
        frames = [f"{f.filename.rsplit('/', 1)[-1]}:{f.lineno}" for f in newest_first]
        yield f"{stat.size_diff:+8d} B {stat.count_diff:+5d} blocks  " + " < ".join(frames)


def measure(store: str, path: str, folder: Path, *, warmup: int, tasks: int, limit: float,
            batches: int) -> Dict[str, Any]:
    """Bytes per task over up to ``batches`` batches (stopping at the first under
    ``limit``), and, when none was, where one more batch grew."""
    probe = Probe(store, folder)
    try:
        run = PATHS[path]
        with tracing():
            grown = [bytes_per_task(probe, run, warmup=warmup, tasks=tasks)]
            while min(grown) >= limit and len(grown) < batches:
                grown.append(bytes_per_task(probe, run, warmup=0, tasks=tasks))
        where = [] if min(grown) < limit else list(
            top_growth(probe, run, warmup=0, tasks=tasks, limit=5))
    finally:
        probe.close()
    return {"grown": grown, "where": where}


def main() -> None:
    """``python -m tests.support.memory_probe STORE PATH FOLDER``: one case, measured in a
    process of its own, printed as one line of JSON (what tests/server/test_memory.py runs)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("store", choices=sorted(STORES))
    parser.add_argument("path", choices=sorted(PATHS))
    parser.add_argument("folder", type=Path)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--limit", type=float, default=64)
    parser.add_argument("--batches", type=int, default=5)
    args = parser.parse_args()
    print(json.dumps(measure(args.store, args.path, args.folder, warmup=args.warmup,
                             tasks=args.tasks, limit=args.limit, batches=args.batches)))


if __name__ == "__main__":
    main()
