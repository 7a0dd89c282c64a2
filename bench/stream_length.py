#!/usr/bin/env python
"""Per-event cost of a short and a long stream, on every task store.

For each store and each stream length (``--lengths``, 10 and 1,000 chunks),
this process (gevent, monkey-patched like a gunicorn gevent worker) runs
streams through the real engine: a ``Runtime`` whose executor emits the chunks
(``Run.add_artifact`` -> ``Runtime.commit`` -> ``store.append``) and then
completes the task, while the main greenlet follows the task's log
(``Runtime.follow``: ``read``, ``head``, ``wait``), as an SSE response does,
without the HTTP side (whose cost per event does not depend on the store).
Each length runs streams until about ``--events`` events were followed; the
figure is the process's CPU time per followed event, median of ``--repeat``
runs (lengths alternate, so drift hits both alike).  The ratio long/short is
what must stay within 1.2x: an event must cost the same however
long its task already is.

``--paced`` makes the executor yield after every chunk (``gevent.sleep(0)``), as
one streaming a model's tokens from the network does: each chunk is then an
append of its own, the case where a cost per append that grows with the task
shows most.

Shelve and SQLite files live in a temporary directory, Redis keys under a
unique prefix, and PostgreSQL and MariaDB tables in a schema or database of
their own (``--postgres-url``, ``--mariadb-url``), all removed at the end
(``stores.StoreSites``).  ``stores.py`` runs this script as its ``lengths``
phase; it also runs on its own::

    python bench/stream_length.py [--stores memory,shelve,sqlite,redis,postgresql,mariadb]
                                  [--paced]
"""
from __future__ import annotations

if __name__ == "__main__":
    from gevent import monkey

    monkey.patch_all()

import argparse
import json
import statistics
import sys
import time
import uuid
from typing import Any, Dict, List, Optional

import gevent

from a2a_flask.engine.run import Run
from a2a_flask.engine.runtime import Runtime
from a2a_flask.protocol.models import Artifact, Message, Part, Role, TaskState
from a2a_flask.stores import TaskStore, open_store
from bench import say
from stores import StoreSites


def chunk_executor(chunks: int, paced: bool = False) -> Any:
    """An executor that streams ``chunks`` parts of one artifact, then completes;
    ``paced``: it yields after each chunk."""
    def invoke(run: Run) -> None:
        run.set_status(TaskState.WORKING)
        for index in range(chunks):
            run.add_artifact(Artifact("out", [Part(text=f"chunk {index} " + "x" * 40)]),
                             append=index > 0, last_chunk=index == chunks - 1)
            if paced:
                gevent.sleep(0)
        run.set_status(TaskState.COMPLETED)

    return invoke


def one_stream(runtime: Runtime) -> int:
    """Start a stream and follow it to its end; the number of log entries followed."""
    task_id = uuid.uuid4().hex
    message = Message(message_id=uuid.uuid4().hex, role=Role.USER, parts=[Part(text="go")])
    run = runtime.start_new(message, task_id=task_id, context_id="bench", tenant="",
                            owner="", dialect="1.0", create_task=True, streamed=True)
    followed = sum(1 for entry in runtime.follow(task_id, 0, 30.0) if entry is not None)
    run.finished.wait(30.0)
    return followed


def measure(store: TaskStore, chunks: int, events: int, paced: bool = False) -> float:
    """CPU microseconds per followed event over streams of ``chunks`` chunks."""
    runtime = Runtime(store, chunk_executor(chunks, paced))
    try:
        one_stream(runtime)  # warm-up: caches, prepared statements, scripts
        total = 0
        started = time.process_time()
        while total < events:
            total += one_stream(runtime)
        return (time.process_time() - started) / total * 1e6
    finally:
        runtime.close()


def run(stores: List[str], lengths: List[int], events: int, repeat: int,
        sites: StoreSites, paced: bool = False) -> List[Dict[str, Any]]:
    rows = []
    for kind in stores:
        samples: Dict[int, List[float]] = {n: [] for n in lengths}
        for attempt in range(repeat):
            for chunks in lengths:
                store = open_store(sites.url(kind, f"{kind}-{chunks}-{attempt}"))
                try:
                    samples[chunks].append(measure(store, chunks, events, paced))
                finally:
                    store.close()
        medians = {n: statistics.median(s) for n, s in samples.items()}
        rows.append({"store": kind, "us_per_event": medians, "runs": samples,
                     "ratio": medians[lengths[-1]] / medians[lengths[0]]})
        say(f"{kind}: " + ", ".join(f"{n} chunks {m:.1f} us/event" for n, m in medians.items()))
    return rows


def table(rows: List[Dict[str, Any]], lengths: List[int], limit: float = 1.2) -> str:
    """The report: per-event cost at each length and the long/short ratio."""
    head = (["store"] + [f"{n} chunks (us/event)" for n in lengths]
            + [f"{lengths[-1]}/{lengths[0]}", "target", "result"])
    body = [[r["store"]] + [f"{r['us_per_event'][n]:,.1f}" for n in lengths]
            + [f"{r['ratio']:.2f}x", f"<= {limit}x", "PASS" if r["ratio"] <= limit else "MISS"]
            for r in rows]
    widths = [max(len(str(line[i])) for line in [head] + body) for i in range(len(head))]
    return "\n".join(" | ".join(str(c).rjust(w) for c, w in zip(line, widths))
                     for line in [head] + body)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stores", default="memory,shelve,sqlite,redis")
    p.add_argument("--lengths", default="10,1000", help="chunks per stream, short first")
    p.add_argument("--events", type=int, default=3000, help="events followed per run")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--paced", action="store_true",
                   help="the executor yields after every chunk: one append per chunk")
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    p.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    p.add_argument("--mariadb-url", default="mysql://root@127.0.0.1:3306")
    p.add_argument("--json", dest="json_path", default=None)
    return p


def main(argv: Optional[List[str]] = None) -> int:
    a = parser().parse_args(argv)
    stores = [s for s in a.stores.split(",") if s]
    lengths = [int(n) for n in a.lengths.split(",")]
    sites = StoreSites(a.redis_url, a.postgres_url, a.mariadb_url)
    try:
        for kind in ("postgresql", "mariadb"):
            if kind in stores and sites.sql_admin(kind) is None:
                say(f"{kind} skipped: {sites.sql_errors[kind]}")
                stores.remove(kind)
        rows = run(stores, lengths, a.events, a.repeat, sites, a.paced)
    finally:
        sites.close()
    print(table(rows, lengths))
    if a.json_path:
        with open(a.json_path, "w") as out:
            json.dump({"lengths": lengths, "events": a.events, "repeat": a.repeat,
                       "paced": a.paced, "rows": rows}, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
