#!/usr/bin/env python
"""How long a reader catching up on a long log holds the worker, per store.

A stream that resubscribes with an old ``Last-Event-ID``, or a webhook far
behind, reads the rest of a task's log.  ``TaskStore.read`` hands it over in
slices of at most ``read_slice`` entries, and the reader reads again after
the last one; nothing yields inside one ``read``, so the longest call is how
long the worker's other greenlets wait.  This script writes one task with
``--events`` chunk events per store, then reads its whole log from the start,
once in one ``read`` (``read_slice`` unbounded: what stores did before) and
once in slices (the default), and prints the longest call and the total,
medians of ``--repeat`` reads.

Run from the repository root::

    python bench/backlog.py                          # memory, shelve, SQLite
    python bench/backlog.py --stores memory,redis --events 200000
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from a2a_flask.protocol.models import (  # noqa: E402
    Artifact,
    Part,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
)
from a2a_flask.stores import TaskStore, open_store  # noqa: E402
from a2a_flask.stores.base import TaskRecord  # noqa: E402
from soak import delete_prefix  # noqa: E402

#: Events written per append (a run's burst of chunks).
BURST = 1_000
UNBOUNDED = 10 ** 9


def write_task(store: TaskStore, events: int) -> None:
    """One WORKING task whose log is a snapshot and ``events`` chunks."""
    task = Task(id="backlog", context_id="c", status=TaskStatus(state=TaskState.WORKING))
    record = TaskRecord(task, 1)
    store.create(record, task)
    for start in range(0, events, BURST):
        burst = [TaskArtifactUpdateEvent("backlog", "c", Artifact(
            artifact_id="a", parts=[Part(text=f"chunk {index} ")]), append=index > 0)
            for index in range(start, min(start + BURST, events))]
        after = record.after(burst)
        store.append("backlog", record.seq, burst, after)
        record = after


def read_all(store: TaskStore) -> Tuple[float, float, int]:
    """Read the whole log from the start: (longest read, total, entries), in seconds.

    A read is timed with the decoding of its entries (a store may hand a slice
    out as text and decode each entry as the reader gets to it).
    """
    seq, longest, count = 0, 0.0, 0
    began = time.perf_counter()
    while True:
        started = time.perf_counter()
        entries = list(store.read("backlog", seq))
        longest = max(longest, time.perf_counter() - started)
        if not entries:
            return longest, time.perf_counter() - began, count
        count += len(entries)
        seq = entries[-1].seq


def main(argv: List[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--stores", default="memory,shelve,sqlite",
                        help="comma-separated: memory, shelve, sqlite, redis")
    parser.add_argument("--events", type=int, default=100_000, help="chunk events in the log")
    parser.add_argument("--repeat", type=int, default=5, help="reads per mode (medians)")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/15",
                        help="Redis URL for the redis store")
    args = parser.parse_args(argv)
    print(f"{args.events:,} events; longest read call and the whole log, ms "
          f"(medians of {args.repeat})")
    print(f"{'store':8} | {'one read':>9} | {'sliced: longest':>15} | {'total':>7} | "
          f"{'one read total':>14}")
    prefix = f"a2a-backlog-{time.time_ns()}"
    with tempfile.TemporaryDirectory() as folder:
        for name in args.stores.split(","):
            url = {"memory": "memory://", "shelve": f"shelve://{folder}/tasks",
                   "sqlite": f"sqlite:///{folder}/tasks.db",
                   "redis": f"{args.redis}?prefix={prefix}"}[name]
            store = open_store(url)
            try:
                write_task(store, args.events)
                sliced = store.read_slice
                results = {}
                for mode, slice_size in (("whole", UNBOUNDED), ("sliced", sliced)):
                    store.read_slice = slice_size
                    runs = [read_all(store) for _ in range(args.repeat)]
                    assert all(count == args.events + 1 for _, _, count in runs)
                    results[mode] = (statistics.median(r[0] for r in runs) * 1e3,
                                     statistics.median(r[1] for r in runs) * 1e3)
                print(f"{name:8} | {results['whole'][0]:9.1f} | {results['sliced'][0]:15.2f} | "
                      f"{results['sliced'][1]:7.1f} | {results['whole'][1]:14.1f}")
            finally:
                store.close()
                if name == "redis":
                    delete_prefix(args.redis, prefix)


if __name__ == "__main__":
    main(sys.argv[1:])
