#!/usr/bin/env python
"""Bytes of traced heap each task leaves behind in a worker, per path and per store.

The in-process measurement of ``tests/server/test_memory.py`` (same probe, same
filter: see ``tests/support/memory_probe.py``), with larger batches and a table
instead of a bound.  Each (store, path) gets a fresh agent in a Flask app,
``--warmup`` tasks, then ``--batches`` batches of ``--tasks`` more; each
figure is the growth of the traced heap over one batch divided by ``--tasks``
(a leak grows in every batch; a cache filling once, in the first only).  ``--top N`` also
prints the N tracebacks whose allocations grew most (slower: deep frames).

``--subscribers N`` measures another case instead, in a real ``gunicorn -k gevent``
worker: the worker's RSS as N idle ``SubscribeToTask`` streams of one task holding
a big message (``--message-bytes`` of empty JSON objects) open one after another
(``tests/support/subscriber_rss.py``, which ``tests/server/test_subscriber_memory.py``
bounds): the RSS before the first, after it and after the last, and the growth per
further subscriber.

Run from the repository root::

    python bench/memory.py                       # every store and path
    python bench/memory.py --stores sqlite --paths send,stream --tasks 1000 --batches 3
    python bench/memory.py --subscribers 16 --stores sqlite,redis,postgresql
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import List

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import memory_probe, subscriber_rss  # noqa: E402  (the root is on the path now)

#: The stores of the subscriber case (``--subscribers``).
SUBSCRIBER_STORES = "sqlite,redis,postgresql"


def subscribers(stores: List[str], count: int, message_bytes: int) -> int:
    """Print the worker's RSS as ``count`` idle subscribers of a big task open, per store."""
    print(f"# worker RSS (KiB), {count} idle SubscribeToTask streams of one task holding a "
          f"message of {message_bytes:,} bytes of empty JSON objects")
    print(f"{'store':11} {'before':>8} {'1 stream':>9} {f'{count} streams':>11} "
          f"{'first':>7} {'each next':>10} {'seconds':>8}")
    for name, url, cleanup in subscriber_rss.stores(stores):
        started = time.monotonic()
        try:
            found = subscriber_rss.measure(url, subscribers=count, message_bytes=message_bytes)
        finally:
            cleanup()
        print(f"{name:11} {found['rss_before_kib']:8d} {found['rss_first_kib']:9d} "
              f"{found['rss_last_kib']:11d} {found['first_kib']:+7d} "
              f"{found['each_next_kib']:+10.1f} {time.monotonic() - started:8.1f}", flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default=None,
                        help="comma-separated: " + ",".join(memory_probe.STORES) +
                        f" (with --subscribers: {SUBSCRIBER_STORES})")
    parser.add_argument("--paths", default=",".join(memory_probe.PATHS),
                        help="comma-separated: %(default)s")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--batches", type=int, default=2,
                        help="measured batches in a row (a leak grows in each)")
    parser.add_argument("--top", type=int, default=0, metavar="N",
                        help="also show the N tracebacks that grew most")
    parser.add_argument("--subscribers", type=int, default=0, metavar="N",
                        help="measure instead N idle subscribers of a big task (worker RSS)")
    parser.add_argument("--message-bytes", type=int, default=2_000_000,
                        help="with --subscribers: the task's message size (%(default)s)")
    args = parser.parse_args()
    if args.subscribers:
        return subscribers((args.stores or SUBSCRIBER_STORES).split(","), args.subscribers,
                           args.message_bytes)
    stores = (args.stores or ",".join(memory_probe.STORES)).split(",")
    paths = args.paths.split(",")
    unknown = [s for s in stores if s not in memory_probe.STORES] + \
        [p for p in paths if p not in memory_probe.PATHS]
    if unknown:
        parser.error(f"unknown store or path: {', '.join(unknown)}")
    print(f"# traced heap growth per task after {args.warmup} warm-up tasks, "
          f"over {args.tasks} tasks (Python {sys.version.split()[0]})")
    columns = " ".join(f"{f'batch {b + 1}':>10}" for b in range(args.batches))
    print(f"{'store':8} {'path':12} {columns} {'seconds':>8}")
    for store in stores:
        for path in paths:
            probe = memory_probe.Probe(store)
            started = time.monotonic()
            try:
                if args.top:
                    lines = list(memory_probe.top_growth(
                        probe, memory_probe.PATHS[path], warmup=args.warmup, tasks=args.tasks,
                        limit=args.top))
                with memory_probe.tracing():
                    grown = [memory_probe.bytes_per_task(probe, memory_probe.PATHS[path],
                                                         warmup=args.warmup if batch == 0 else 0,
                                                         tasks=args.tasks)
                             for batch in range(args.batches)]
            finally:
                probe.close()
            figures = " ".join(f"{g:10.1f}" for g in grown)
            print(f"{store:8} {path:12} {figures} {time.monotonic() - started:8.1f}", flush=True)
            if args.top:
                for line in lines:
                    print("    " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
