#!/usr/bin/env python
"""Per-operation cost of the task stores as they grow: 10, 100, 1,000 and 10,000 tasks.

One store per backend (memory, shelve, SQLite, and Redis with ``--redis-url``)
grows to each size in turn, with tasks of ``--events`` events (a create, then
appends of one status update each), all of one caller over 50 contexts.  At
each size the script measures, on that store, in this process:

* ``create`` and ``append``: ``--probe`` new tasks (timed per call);
* ``load``, ``read`` (a whole log), ``list`` (the first page of ``--page``,
  newest first), ``list-ctx`` (the same, of one context) and ``page-5`` (the
  fifth page, through the page tokens): ``--samples`` calls.

ListTasks on Redis at 100,000 tasks of one caller (O(page): the ratio column
stays near 1)::

    python bench/store_scale.py --stores redis --sizes 1000,10000,100000 --events 1 --page 50

``redis-cluster`` and ``redis-sentinel`` start a topology of their own (3 masters and
3 replicas; a master, 2 replicas and 3 sentinels) and measure the same through it.

It prints the median microseconds per call and, per operation, the ratio of
the largest size to the smallest (1.0 = flat).  Next to each row, the
baseline of the disk at that moment: appending 600 bytes to a file and
``fdatasync``-ing it, which every shelve create and append includes.  The stores' files live in a
temporary directory removed at the end.

    python bench/store_scale.py [--sizes 10,100,1000,10000] [--stores memory,shelve,sqlite]
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2a_flask.protocol.events import apply_event  # noqa: E402
from a2a_flask.protocol.models import (  # noqa: E402
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from a2a_flask.stores import MemoryStore, ShelveStore, SQLiteStore, TaskStore  # noqa: E402
from a2a_flask.stores.base import TaskQuery, TaskRecord  # noqa: E402

OPERATIONS = ("create", "append", "load", "read", "list", "list-ctx", "page-5")
#: Events per task (``--events``) and tasks per page (``--page``).
EVENTS_PER_TASK = 10
PAGE = 10


def open_store(kind: str, directory: str, redis_url: str, topologies: List[object],
               query: str = "") -> TaskStore:
    if kind in ("redis-cluster", "redis-sentinel"):
        # A topology of this run's own (tests/support/redis_topologies.py), stopped at the end.
        from a2a_flask.stores import open_store as open_url
        from tests.support import redis_topologies

        started = (redis_topologies.RedisClusterTopology() if kind == "redis-cluster"
                   else redis_topologies.RedisSentinelTopology())
        topologies.append(started)
        return open_url(f"{started.url}?prefix=a2a-bench-{os.getpid()}"
                        + (f"&{query}" if query else ""))
    if kind == "memory":
        return MemoryStore()
    if kind == "shelve":
        return ShelveStore(f"{directory}/shelve/tasks")
    if kind == "redis":
        from a2a_flask.stores.redis import RedisStore
        return RedisStore(f"{redis_url}?prefix=a2a-bench-{os.getpid()}")
    return SQLiteStore(f"{directory}/sqlite/tasks.db")


def drop_redis_prefix(store: TaskStore) -> None:
    """Delete every key of the bench's Redis prefix."""
    client = store._redis  # type: ignore[attr-defined]
    for key in client.scan_iter(match=f"{store.prefix}:*", count=1000):  # type: ignore
        client.delete(key)


def fifth_page(store: TaskStore) -> None:
    token = ""
    for _ in range(5):
        token = store.list_tasks(TaskQuery(page_size=PAGE, page_token=token)).next_page_token


def stamp(n: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_700_000_000 + n)) + ".000Z"


def add_task(store: TaskStore, n: int, timings: Dict[str, List[float]]) -> None:
    """Create task ``n`` and append its nine status updates, timing each store call."""
    task_id = f"task-{n:06d}"
    message = Message(message_id=f"{task_id}-m", role=Role.USER,
                      parts=[Part(text="please do the thing " * 4)],
                      task_id=task_id, context_id=f"ctx-{n % 50}")
    task = Task(id=task_id, context_id=message.context_id, history=[message],
                status=TaskStatus(TaskState.SUBMITTED, timestamp=stamp(n)))
    started = time.perf_counter()
    store.create(TaskRecord(task, 1, created_at=stamp(n)), task)
    timings["create"].append(time.perf_counter() - started)
    for seq in range(2, EVENTS_PER_TASK + 1):
        state = TaskState.COMPLETED if seq == EVENTS_PER_TASK else TaskState.WORKING
        event = TaskStatusUpdateEvent(task_id, task.context_id,
                                      TaskStatus(state, timestamp=stamp(n)))
        task = apply_event(task, event)
        record = TaskRecord(task, seq, created_at=stamp(n))
        started = time.perf_counter()
        store.append(task_id, seq - 1, [event], record)
        timings["append"].append(time.perf_counter() - started)


def timed(call: Callable[[], object], samples: int) -> List[float]:
    results = []
    for _ in range(samples):
        started = time.perf_counter()
        call()
        results.append(time.perf_counter() - started)
    return results


def measure(store: TaskStore, size: int, probe: int, samples: int,
            rng: random.Random) -> Dict[str, float]:
    """Median seconds per call of each operation on a store of ``size`` tasks."""
    timings: Dict[str, List[float]] = {op: [] for op in OPERATIONS}
    ids = [f"task-{rng.randrange(size):06d}" for _ in range(samples)]
    picks = iter(ids * 3)
    timings["load"] = timed(lambda: store.load(next(picks)), samples)
    # list(): a store may hand out a slice undecoded; a reader decodes every entry.
    timings["read"] = timed(lambda: list(store.read(next(picks), 0)), samples)
    timings["list"] = timed(lambda: store.list_tasks(TaskQuery(page_size=PAGE)), samples)
    timings["list-ctx"] = timed(
        lambda: store.list_tasks(TaskQuery(page_size=PAGE, context_id="ctx-7")), samples)
    timings["page-5"] = timed(lambda: fifth_page(store), max(1, samples // 5))
    for n in range(10_000_000 + size, 10_000_000 + size + probe):  # probes: ids apart
        add_task(store, n, timings)
    # (no appends when tasks have one event)
    return {op: statistics.median(values) if values else float("nan")
            for op, values in timings.items()}


def flush_baseline(directory: str, samples: int) -> float:
    """Median seconds of appending 600 bytes to a file and ``fdatasync``-ing it: the
    disk's part of every shelve create and append, measured in the same run."""
    path = os.path.join(directory, "flush-baseline")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        return statistics.median(timed(lambda: (os.write(fd, b"x" * 600), os.fdatasync(fd)),
                                       samples))
    finally:
        os.close(fd)


def main() -> int:
    global EVENTS_PER_TASK, PAGE
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,100,1000,10000")
    parser.add_argument("--stores", default="memory,shelve,sqlite")
    parser.add_argument("--probe", type=int, default=20, help="tasks created per measurement")
    parser.add_argument("--samples", type=int, default=200, help="calls per read operation")
    parser.add_argument("--events", type=int, default=EVENTS_PER_TASK, help="events per task")
    parser.add_argument("--page", type=int, default=PAGE, help="tasks per ListTasks page")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15",
                        help="the Redis of the redis store (a key prefix of its own, dropped)")
    parser.add_argument("--query", default="",
                        help="options added to the redis-cluster and redis-sentinel URLs "
                             "(wait_replicas=1 measures what WAIT costs)")
    options = parser.parse_args()
    EVENTS_PER_TASK, PAGE = options.events, options.page
    sizes = sorted(int(s) for s in options.sizes.split(","))
    kinds = options.stores.split(",")
    rng = random.Random(7)
    results: Dict[str, Dict[int, Dict[str, float]]] = {kind: {} for kind in kinds}
    topologies: List[Any] = []
    try:
        with tempfile.TemporaryDirectory(prefix="a2a-store-scale-") as directory:
            for kind in kinds:
                store = open_store(kind, directory, options.redis_url, topologies,
                                   options.query)
                filled = 0
                fill: Dict[str, List[float]] = {op: [] for op in OPERATIONS}
                started = time.monotonic()
                for size in sizes:
                    while filled < size:
                        add_task(store, filled, fill)
                        filled += 1
                    results[kind][size] = measure(store, size, options.probe, options.samples,
                                                  rng)
                    results[kind][size]["flush"] = flush_baseline(directory,
                                                                  options.samples // 4)
                if kind == "redis":
                    drop_redis_prefix(store)
                store.close()
                while topologies:  # (its keys go with it)
                    topologies.pop().close()
                print(f"# {kind}: filled to {filled} tasks in "
                      f"{time.monotonic() - started:.1f} s", file=sys.stderr)
    finally:
        for topology in topologies:
            topology.close()
    width = 10
    print(f"median microseconds per call; tasks of {EVENTS_PER_TASK} events; "
          f"list = first page of {PAGE}; list-ctx: of one context; page-5: pages 1 to 5")
    print(f"{'store':14} {'tasks':>7} " + " ".join(f"{op:>{width}}" for op in OPERATIONS)
          + f" {'disk flush':>{width}}")
    for kind in kinds:
        for size in sizes:
            row = results[kind][size]
            print(f"{kind:14} {size:>7} " + " ".join(
                f"{row[op] * 1e6:>{width}.1f}" for op in OPERATIONS + ("flush",)))
        low, high = results[kind][sizes[0]], results[kind][sizes[-1]]
        print(f"{kind:14} {'ratio':>7} " + " ".join(
            f"{high[op] / low[op]:>{width}.2f}" for op in OPERATIONS)
            + f"   ({sizes[-1]} vs {sizes[0]})")
    print("disk flush: appending 600 bytes to a file and fdatasync-ing it, measured right "
          "after each row (shelve's create and append include one)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
