#!/usr/bin/env python
"""What a memory store full of finished tasks costs Python's garbage collector.

The memory store keeps finished tasks (``A2A_TASK_TTL``, an hour by default)
frozen: as bytes the collector never walks (``a2a_flask/stores/frozen.py``).
This script fills one store per mode with the same finished tasks, through the
store's own ``create``/``append`` as the runtime calls them, and prints per mode:

* tracked objects per task (what every full collection walks);
* traced heap bytes per task (``tracemalloc``);
* the time of one full ``gc.collect()`` with the store filled: the pause a
  gevent worker takes whenever the collector decides on a full pass;
* the time to make and store a task (freezing included; the collector's own
  passes during the fill too) and to read one back (``load`` + ``read``,
  thawing included).

Modes: ``objects`` (never frozen: what the store did before), ``frozen`` (the
default: frozen when it ends, as nobody here waits on these tasks' logs).  Tasks: ``echo`` (a
SendMessage answered with one artifact: 4 log entries) and ``stream`` (100
chunks: 103 entries).  Medians of ``--repeat`` runs, each in a fresh store.

Run from the repository root::

    python bench/frozen.py                       # 20,000 tasks of each kind
    python bench/frozen.py --tasks 100000 --kinds echo --repeat 3
"""
from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2a_flask.protocol.events import Event  # noqa: E402
from a2a_flask.protocol.models import (  # noqa: E402
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    new_id,
    utc_now,
)
from a2a_flask.stores import MemoryStore  # noqa: E402
from a2a_flask.stores.base import TaskRecord  # noqa: E402


def finished_task(chunks: int) -> Tuple[TaskRecord, List[Event]]:
    """A task as the runtime leaves it: its first record and its log."""
    task_id, context_id = new_id(), new_id()
    message = Message(new_id(), Role.USER, [Part(text="hello")], context_id, task_id)
    first = Task(task_id, context_id, TaskStatus(TaskState.SUBMITTED, timestamp=utc_now()),
                 history=[message])
    artifact_id = new_id()
    log: List[Event] = [first]
    if chunks:
        log.append(TaskStatusUpdateEvent(task_id, context_id, TaskStatus(
            TaskState.WORKING, timestamp=utc_now())))
        log += [TaskArtifactUpdateEvent(task_id, context_id, Artifact(
            artifact_id, [Part(text=f"chunk {i} ")]), append=i > 0) for i in range(chunks)]
    else:
        log.append(TaskArtifactUpdateEvent(task_id, context_id, Artifact(
            artifact_id, [Part(text="hello")])))
    log.append(TaskStatusUpdateEvent(task_id, context_id, TaskStatus(
        TaskState.COMPLETED, timestamp=utc_now())))
    return TaskRecord(first, 1), log


def store_task(store: MemoryStore, chunks: int) -> str:
    """Create and finish one task through the store, as a run does (one append)."""
    record, log = finished_task(chunks)
    store.create(record, log[0])
    store.append(record.task_id, 1, log[1:], record.after(log[1:]))
    return record.task_id


def fill(mode: str, chunks: int, tasks: int) -> Dict[str, float]:
    """One fresh store filled with ``tasks`` tasks, timed; then another, traced."""
    figures = _timed(_store(mode), chunks, tasks)
    store = _store(mode)
    tracemalloc.start()  # slows every allocation: a fill of its own
    before = tracemalloc.get_traced_memory()[0]
    for _ in range(tasks):
        store_task(store, chunks)
    figures["bytes"] = (tracemalloc.get_traced_memory()[0] - before) / tasks
    tracemalloc.stop()
    return figures


def _store(mode: str) -> MemoryStore:
    store = MemoryStore()
    store.freezes = mode == "frozen"
    return store


def _timed(store: MemoryStore, chunks: int, tasks: int) -> Dict[str, float]:
    gc.collect()
    tracked = len(gc.get_objects())
    started = time.perf_counter()
    ids = [store_task(store, chunks) for _ in range(tasks)]
    stored = time.perf_counter() - started
    gc.collect()  # twice: the first also untracks what can be
    tracked = len(gc.get_objects()) - tracked
    started = time.perf_counter()
    gc.collect()
    pause = time.perf_counter() - started
    sample = ids[: min(1000, len(ids) // 2)]  # the oldest: frozen in the frozen mode
    started = time.perf_counter()
    for task_id in sample:
        store.load(task_id)
        store.read(task_id, 0)
    read = time.perf_counter() - started
    return {"tracked": tracked / tasks, "pause_ms": pause * 1e3,
            "store_us": stored / tasks * 1e6, "read_us": read / len(sample) * 1e6}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000, help="tasks per store")
    parser.add_argument("--kinds", default="echo,stream", help="comma-separated: echo,stream")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    kinds: Dict[str, int] = {"echo": 0, "stream": 100}
    print(f"# {args.tasks:,} finished tasks per store, medians of {args.repeat} "
          f"(Python {sys.version.split()[0]})")
    header = (f"{'task':7} {'mode':8} {'tracked/task':>13} {'bytes/task':>11} "
              f"{'full gc (ms)':>13} {'store (us)':>11} {'read (us)':>10}")
    print(header)
    for kind in args.kinds.split(","):
        rows: Dict[str, Dict[str, float]] = {}
        for mode in ("objects", "frozen"):
            runs = [fill(mode, kinds[kind], args.tasks) for _ in range(args.repeat)]
            row = rows[mode] = {key: statistics.median(run[key] for run in runs)
                                for key in runs[0]}
            print(f"{kind:7} {mode:8} {row['tracked']:13.1f} {row['bytes']:11,.0f} "
                  f"{row['pause_ms']:13.1f} {row['store_us']:11.1f} {row['read_us']:10.1f}")
        ratio: Callable[[str], float] = lambda key: rows["frozen"][key] / rows["objects"][key]
        print(f"{kind:7} {'ratio':8} {ratio('tracked'):13.3f} {ratio('bytes'):11.2f} "
              f"{ratio('pause_ms'):13.3f} {ratio('store_us'):11.2f} {ratio('read_us'):10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
