#!/usr/bin/env python
"""Very long streams over HTTP: what an event costs when its task is long.

``stream_length.py`` measures the engine and the store in process; this
script asks a real server.  For each store (``--stores``: sqlite and redis)
and each length (``--chunks``: 20,000 and 200,000), a gunicorn gevent worker
pinned to ``--server-cpu`` serves the bench app with ``BENCH_CHUNKS`` set to
the length.  One ``SendStreamingMessage`` to its chunk agent is read to its
end, every event counted; then ``GetTask`` must answer COMPLETED with every
chunk a part of the artifact.  Printed per store and length (medians of
``--repeat`` streams): the worker's CPU and the wall time per event, the
first event's delay, and the CPU per event against the shortest length's:
an event should cost the same however long its task already is.

``--paced`` sets ``BENCH_CHUNK_YIELD=1``: the chunk agent yields to gevent
after each chunk, as an agent relaying a model's tokens does, so that each
chunk is an append of its own.

Every stream is bounded by ``--timeout``.  Store files live in a temporary
directory and Redis keys under a unique prefix, both removed at the end::

    python bench/long_stream.py [--stores sqlite,redis] [--chunks 20000,200000] [--paced]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import gevent

import bench
from bench import BenchServer, HttpConnection, ProtocolError, format_table, say
from stores import StoreSites, start_server

_TASK_ID = re.compile(rb'"taskId":"([^"]+)"')


@dataclass
class Stream:
    """One stream read to its end, and the task it left."""

    events: int
    first_ms: float
    seconds: float
    worker_cpu: float
    parts: int


def one_stream(server: BenchServer, timeout: float) -> Stream:
    """Stream the chunk agent to its end, then check the task with GetTask."""
    scenario = bench.scenarios(0)["stream"]
    cpu = server.cpu_seconds()
    conn = HttpConnection(server.port)
    try:
        with gevent.Timeout(timeout, ProtocolError(f"the stream took over {timeout:g} s")):
            start = time.perf_counter()
            conn.send(scenario.request(next(bench._NUMBERS)))
            head = conn.read_head()
            if head.status != 200:
                raise ProtocolError(f"HTTP {head.status}")
            events, first, last = conn.read_events(start)
            seconds = time.perf_counter() - start
    finally:
        conn.close()
    worker_cpu = server.cpu_seconds() - cpu
    found = _TASK_ID.search(last)
    if b"TASK_STATE_COMPLETED" not in last or found is None:
        raise ProtocolError(f"the stream ended with {last[-200:]!r}")
    answer = bench.rpc_call(server.port, "/chunks", bench.rpc_body(
        "GetTask", {"id": found.group(1).decode()}))
    task = answer.get("result") or {}
    if task.get("status", {}).get("state") != "TASK_STATE_COMPLETED":
        raise ProtocolError(f"GetTask answered {str(answer)[:200]}")
    parts = sum(len(artifact["parts"]) for artifact in task.get("artifacts", []))
    return Stream(events, first * 1000, seconds, worker_cpu, parts)


@dataclass
class Result:
    store: str
    chunks: int
    streams: List[Stream]

    def median(self, name: str) -> float:
        return statistics.median(getattr(s, name) for s in self.streams)

    @property
    def cpu_us_per_event(self) -> float:
        return statistics.median(s.worker_cpu / s.events * 1e6 for s in self.streams)

    @property
    def wall_us_per_event(self) -> float:
        return statistics.median(s.seconds / s.events * 1e6 for s in self.streams)


def measure(sites: StoreSites, store: str, chunks: int, args: argparse.Namespace) -> Result:
    """A fresh server on a fresh store for one length; ``--repeat`` streams on it."""
    server = start_server(sites, store, f"long-{store}-{chunks}", str(args.server_cpu), 1, chunks)
    try:
        streams = []
        for index in range(args.repeat):
            stream = one_stream(server, args.timeout)
            if stream.parts != chunks or stream.events < chunks:
                raise ProtocolError(f"{store}, {chunks} chunks: {stream.events} events, "
                                    f"{stream.parts} parts in the task")
            say(f"  {store} {chunks} chunks, stream {index + 1}: {stream.events} events in "
                f"{stream.seconds:.2f} s, worker CPU {stream.worker_cpu / stream.events * 1e6:.1f}"
                f" us/event, first event after {stream.first_ms:.1f} ms")
            streams.append(stream)
        return Result(store, chunks, streams)
    finally:
        server.stop()


def table(results: List[Result]) -> str:
    shortest: Dict[str, float] = {}
    rows: List[Tuple[str, ...]] = [("store", "chunks", "worker CPU (us/event)", "wall (us/event)",
                                    "first event (ms)", "CPU vs shortest")]
    for r in results:
        base = shortest.setdefault(r.store, r.cpu_us_per_event)
        rows.append((r.store, f"{r.chunks:,}", f"{r.cpu_us_per_event:.1f}",
                     f"{r.wall_us_per_event:.1f}", f"{r.median('first_ms'):.1f}",
                     f"{r.cpu_us_per_event / base:.2f}x"))
    return format_table(rows)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stores", default="sqlite,redis", help="memory, shelve, sqlite, redis")
    p.add_argument("--chunks", default="20000,200000", help="stream lengths, shortest first")
    p.add_argument("--repeat", type=int, default=2, help="streams per store and length")
    p.add_argument("--timeout", type=float, default=300.0, help="upper bound for one stream (s)")
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/0")
    p.add_argument("--paced", action="store_true",
                   help="the agent yields after each chunk: one append per chunk")
    args = p.parse_args(argv)
    if args.paced:
        os.environ["BENCH_CHUNK_YIELD"] = "1"  # the servers' environment
    stores = [s for s in args.stores.split(",") if s]
    lengths = sorted(int(n) for n in args.chunks.split(",") if n)
    unknown = set(stores) - {"memory", "shelve", "sqlite", "redis"}
    if unknown or not lengths or min(lengths) < 1 or args.repeat < 1:
        p.error("stores: memory, shelve, sqlite, redis; lengths and --repeat must be positive")
    sites = StoreSites(args.redis_url)
    if "redis" in stores and sites.redis() is None:
        say(f"redis skipped: {sites.redis_error}")
        stores.remove("redis")
    try:
        results = [measure(sites, store, chunks, args) for store in stores for chunks in lengths]
    finally:
        sites.close()
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
