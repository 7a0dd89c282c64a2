#!/usr/bin/env python
"""Bytes of traced heap each task leaves behind in a worker, per path and per store.

The in-process measurement of ``tests/server/test_memory.py`` (same probe, same
filter: see ``tests/support/memory_probe.py``), with larger batches and a table
instead of a bound.  Each (store, path) gets a fresh agent in a Flask app,
``--warmup`` tasks, then ``--batches`` batches of ``--tasks`` more; each
figure is the growth of the traced heap over one batch divided by ``--tasks``
(a leak grows in every batch; a cache filling once, in the first only).  ``--top N`` also
prints the N tracebacks whose allocations grew most (slower: deep frames).

Run from the repository root::

    python bench/memory.py                       # every store and path
    python bench/memory.py --stores sqlite --paths send,stream --tasks 1000 --batches 3
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import memory_probe  # noqa: E402  (the repository root is on the path now)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default=",".join(memory_probe.STORES),
                        help="comma-separated: %(default)s")
    parser.add_argument("--paths", default=",".join(memory_probe.PATHS),
                        help="comma-separated: %(default)s")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--batches", type=int, default=2,
                        help="measured batches in a row (a leak grows in each)")
    parser.add_argument("--top", type=int, default=0, metavar="N",
                        help="also show the N tracebacks that grew most")
    args = parser.parse_args()
    stores = args.stores.split(",")
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
