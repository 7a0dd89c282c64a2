#!/usr/bin/env python
"""Benchmark a2a_flask's task stores, and how gunicorn gevent workers scale on shared stores.

Four phases; the first two reuse ``bench.py`` (its server, load generator, noise checks):

* ``stores``: SendMessage req/s (echo agent, blocking) and SSE events/s (the
  100-chunk agent) at concurrency 32 for each store (memory, shelve, sqlite,
  redis, postgresql, mariadb), one gevent worker per store pinned to ``--server-cpu``, the load
  generator pinned to ``--client-cpu``.  The stores' servers run side by side
  and their runs alternate, so drift hits every store alike; each store's
  median is shown with its ratio to the memory store's.
* ``scale``: the same two scenarios with ``-w 1``, ``-w 2`` and ``-w 4``
  (``--workers``) on each shared store (``--scale-stores``: sqlite, redis),
  and the same on the memory store as a control (its workers share nothing),
  all runs alternating, per ``--placements`` (``pinned``, the default: the
  load generator alone on ``--client-cpu``, the workers on the other CPUs;
  ``shared``: workers and generator all on every CPU; ``spread``: worker k
  pinned to CPU k, generator on every CPU).  The load generator's CPU and
  every process's scheduler split (running, waiting for a CPU, blocked) are
  measured; the tables show each count's ratio to ``-w 1`` (target: ``-w 2``
  >= 1.7x) and the ratio the CPUs would allow, and say when the CPUs left to
  the workers cannot show the target.
* ``lengths``: the per-event cost of a 10-chunk and a 1,000-chunk stream on
  each store, and their ratio (``stream_length.py``, run as a child process).
* ``peer``: on each SQL store of ``--stores``, blocking SendMessage against the
  official a2a-sdk server (``sdk_peer.py``, one uvicorn process on the same
  CPU) on its ``DatabaseTaskStore`` in the same database server (asyncpg for
  PostgreSQL, aiomysql for MariaDB: ``pip install asyncpg aiomysql``), runs
  alternating; the table shows both rates, their ratio and each server's CPU
  per request.  Not in the default phases.

Shelve and SQLite files live in a temporary directory removed at the end;
Redis keys use a unique prefix in ``--redis-url``'s database and are deleted
at the end; PostgreSQL gets a schema and MariaDB a database per server
(``--postgres-url``, ``--mariadb-url``), dropped at the end.  Everything listens on 127.0.0.1.  See README.rst.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import gevent

import bench
from bench import BenchServer, RunResult, Scenario, format_table, say

STORES = ("memory", "shelve", "sqlite", "redis", "postgresql", "mariadb")
#: Stores only run when named in --stores: each is a topology of Redis servers, started
#: here (tests/support/redis_topologies.py) unless --redis-cluster-url or
#: --redis-sentinel-url names one, and stopped at the end.
TOPOLOGIES = ("redis-cluster", "redis-sentinel")
SQL_STORES = ("postgresql", "mariadb")
PLACEMENTS = ("pinned", "shared", "spread")
PHASES = ("stores", "scale", "lengths", "peer")
DEFAULT_PHASES = ("stores", "scale", "lengths")
#: The official SDK's async driver per SQL store (``peer`` phase).
SDK_DRIVERS = {"postgresql": ("postgresql://", "postgresql+asyncpg://", "asyncpg"),
               "mariadb": ("mysql://", "mysql+aiomysql://", "aiomysql")}
#: The scenarios of the stores and scale phases: ``bench.scenarios`` key -> (label, unit).
SCENARIOS = {"send": ("SendMessage", "req/s"), "stream": ("SSE", "events/s")}
#: ``-w 2`` over ``-w 1``, for the stores under test (the control has no target).
TARGET_SCALE = 1.7
#: /bench/forget on a big shelve store rewrites the shelf's index once per key it deletes.
FORGET_TIMEOUT = 110.0
WORKER_CONNECTIONS = 1024
#: Rounds of /bench/forget calls before giving up on reaching every worker.
FORGET_ATTEMPTS = 10
#: How long a forget call stalls its worker so that the next call reaches another one (s).
STALL_STEP = 0.3


# ====================================================================== CLI


@dataclass
class Options:
    """Command-line settings of this script (bench.py's own come from :func:`bench_config`)."""

    stores: List[str]
    phases: List[str]
    duration: float
    repeat: int
    warmup: float
    concurrency: int
    sse_concurrency: int
    chunks: int
    redis_url: str
    redis_cluster_url: str
    redis_sentinel_url: str
    postgres_url: str
    mariadb_url: str
    scale_stores: List[str]
    scale_control: str
    workers: List[int]
    placements: List[str]
    phase_timeout: float
    grace: float
    settle_timeout: float
    server_cpu: int
    client_cpu: int
    max_other_cpu: float
    noise_retries: int
    quiet_wait: float
    json_path: Optional[str]
    quiet: bool


def parser() -> argparse.ArgumentParser:
    """The command line's options, with their defaults."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--stores", default=",".join(STORES), help="stores to compare (memory first)")
    p.add_argument("--phases", default=",".join(DEFAULT_PHASES),
                   help=f"subset of {','.join(PHASES)}")
    p.add_argument("--duration", type=float, default=3.0, help="seconds per measured run")
    p.add_argument("--repeat", type=int, default=5, help="runs per figure (medians reported)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per server and scenario")
    p.add_argument("--concurrency", type=int, default=32, help="SendMessage clients")
    p.add_argument("--sse-concurrency", type=int, default=32, help="streaming clients")
    p.add_argument("--chunks", type=int, default=100, help="chunks per stream")
    p.add_argument("--redis-url", default="redis://127.0.0.1:6379/15",
                   help="Redis database for the redis store (a unique key prefix is added)")
    p.add_argument("--redis-cluster-url", default="",
                   help="redis+cluster:// URL of the redis-cluster store (default: a cluster of "
                        "3 masters and 3 replicas started here)")
    p.add_argument("--redis-sentinel-url", default="",
                   help="redis+sentinel:// URL of the redis-sentinel store, query options "
                        "allowed (default: a master, 2 replicas and 3 sentinels started here)")
    p.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres",
                   help="PostgreSQL database for the postgresql store (a schema per server)")
    p.add_argument("--mariadb-url", default="mysql://root@127.0.0.1:3306",
                   help="MariaDB server for the mariadb store (a database per server)")
    p.add_argument("--scale-stores", default="sqlite,redis",
                   help="shared stores of the scale phase (comma list; memory is the control)")
    # Same destination: old command lines with one --scale-store NAME keep working
    # (the first action's default applies, the last option given wins).
    p.add_argument("--scale-store", dest="scale_stores", choices=STORES[1:],
                   default=argparse.SUPPRESS, help="one store: same as --scale-stores NAME")
    p.add_argument("--scale-control", choices=("memory", "none"), default="memory",
                   help="also scale the workers on this store as a control: memory shares no "
                        "state between workers, so it shows what the machine allows")
    p.add_argument("--workers", default="1,2,4",
                   help="gunicorn worker counts of the scale phase (comma list with 1: every "
                        "ratio is against -w 1)")
    p.add_argument("--placements", default="pinned",
                   help="CPU placements of the scale phase: pinned, shared, spread (comma list)")
    p.add_argument("--phase-timeout", type=float, default=900.0,
                   help="upper bound per phase (s); the scale phase gets it per placement "
                        "and scenario")
    p.add_argument("--grace", type=float, default=5.0,
                   help="after a run's deadline, seconds its clients may take to finish the "
                        "exchange in progress; unfinished ones are cut and not counted")
    p.add_argument("--settle-timeout", type=float, default=10.0,
                   help="after a run, seconds to wait for the workers to go idle; a server "
                        "still busy is restarted on a fresh store (its leftover work dropped)")
    p.add_argument("--server-cpu", type=int, default=0, help="CPU of each store's worker")
    p.add_argument("--client-cpu", type=int, default=1,
                   help="CPU of the load generator (stores phase; scale phase: pinned)")
    p.add_argument("--max-other-cpu", type=float, default=0.15,
                   help="a run during which other processes (plus steal) used more than this "
                        "fraction of a CPU is noisy and repeated")
    p.add_argument("--noise-retries", type=int, default=2, help="extra attempts for a noisy run")
    p.add_argument("--quiet-wait", type=float, default=20.0,
                   help="before each run, wait at most this long for other processes to go quiet")
    p.add_argument("--json", dest="json_path", metavar="PATH", help="write the results as JSON")
    p.add_argument("--quiet", action="store_true", help="print only the final tables")
    return p


def parse_args(argv: Optional[List[str]] = None) -> Options:
    """Read the command line into :class:`Options`."""
    p = parser()
    a = p.parse_args(argv)
    opts = Options(
        stores=_names(a.stores), phases=_names(a.phases), duration=a.duration, repeat=a.repeat,
        warmup=a.warmup, concurrency=a.concurrency, sse_concurrency=a.sse_concurrency,
        chunks=a.chunks, redis_url=a.redis_url, redis_cluster_url=a.redis_cluster_url,
        redis_sentinel_url=a.redis_sentinel_url, postgres_url=a.postgres_url,
        mariadb_url=a.mariadb_url, scale_stores=list(dict.fromkeys(_names(a.scale_stores))),
        scale_control=a.scale_control, workers=_counts(p, a.workers),
        placements=_names(a.placements), phase_timeout=a.phase_timeout, grace=a.grace,
        settle_timeout=a.settle_timeout, server_cpu=a.server_cpu,
        client_cpu=a.client_cpu, max_other_cpu=a.max_other_cpu, noise_retries=a.noise_retries,
        quiet_wait=a.quiet_wait, json_path=a.json_path, quiet=a.quiet)
    check_options(p, opts)
    return opts


def _names(text: str) -> List[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def _counts(p: argparse.ArgumentParser, text: str) -> List[int]:
    """Worker counts, ascending, each once (so -w 1 comes first)."""
    try:
        return sorted(set(int(x) for x in _names(text)))
    except ValueError:
        p.error(f"--workers must be a comma list of integers, not {text!r}")


def check_options(p: argparse.ArgumentParser, opts: Options) -> None:
    """Reject unknown names and non-positive sizes."""
    for kind, given, known in (("store", opts.stores, STORES + TOPOLOGIES),
                               ("phase", opts.phases, PHASES),
                               ("placement", opts.placements, PLACEMENTS),
                               ("scale store", opts.scale_stores, STORES[1:] + TOPOLOGIES)):
        unknown = set(given) - set(known)
        if unknown:
            p.error(f"unknown {kind}(s): {', '.join(sorted(unknown))} "
                    f"(known: {', '.join(known)})")
    if "stores" in opts.phases and (not opts.stores or opts.stores[0] != "memory"):
        p.error("--stores must start with memory (the reference of the ratios)")
    if "scale" in opts.phases and not opts.scale_stores:
        p.error("--scale-stores needs at least one store")
    if 1 not in opts.workers or min(opts.workers) <= 0:
        p.error("--workers must be positive and include 1 (every ratio is against -w 1)")
    if min(opts.duration, opts.repeat, opts.concurrency, opts.sse_concurrency, opts.chunks) <= 0:
        p.error("--duration, --repeat, --concurrency, --sse-concurrency and --chunks must be positive")


def bench_config(opts: Options) -> bench.Config:
    """bench.py's settings, as its helpers (``measure``, ``wait_for_quiet``) read them."""
    return bench.parse_args([
        "--duration", str(opts.duration), "--repeat", str(opts.repeat),
        "--warmup", str(opts.warmup), "--concurrency", str(opts.concurrency),
        "--sse-concurrency", str(opts.sse_concurrency), "--chunks", str(opts.chunks),
        "--phases", "json,sse", "--max-other-cpu", str(opts.max_other_cpu),
        "--noise-retries", str(opts.noise_retries), "--quiet-wait", str(opts.quiet_wait),
        "--server-cpu", str(opts.server_cpu), "--client-cpu", str(opts.client_cpu),
    ] + (["--quiet"] if opts.quiet else []))


# ====================================================================== where the stores live


class StoreSites:
    """Store URLs for this run: files in one temporary directory, one Redis key prefix,
    a PostgreSQL schema and a MariaDB database per server.

    :meth:`close` removes the directory, deletes every key under the prefix and
    drops the schemas and databases.
    """

    def __init__(self, redis_url: str, postgres_url: str = "", mariadb_url: str = "") -> None:
        self.dir = tempfile.mkdtemp(prefix="a2a-bench-stores-")
        self.redis_url = redis_url.split("?", 1)[0]
        self.prefix = f"a2a-bench-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self._redis: Any = None
        self.redis_error = ""
        self.redis_keys_deleted = 0
        self.sql_servers = {"postgresql": postgres_url.rstrip("/"),
                            "mariadb": mariadb_url.rstrip("/")}
        self._sql_prefix = f"a2abench_{uuid.uuid4().hex[:8]}"
        self._sql_names: Dict[Tuple[str, str], str] = {}  # (store, tag) -> schema / database
        self._sql_admins: Dict[str, Any] = {}
        self.sql_errors: Dict[str, str] = {}
        #: The URL of each Redis topology store (redis-cluster, redis-sentinel), and those
        #: started here (stopped by close()).
        self.topology_urls: Dict[str, str] = {}
        self._topologies: Dict[str, Any] = {}

    def topology(self, store: str, url: str) -> None:
        """Use ``url`` for the topology ``store``, or start one here when it is empty."""
        if not url:
            sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
            from tests.support import redis_topologies

            started = (redis_topologies.RedisClusterTopology() if store == "redis-cluster"
                       else redis_topologies.RedisSentinelTopology())
            self._topologies[store] = started
            url = started.url
            say(f"started {store} at {url}")
        self.topology_urls[store] = url

    def topology_pids(self, store: str) -> List[int]:
        """The pids of a topology started here (their CPU is measured)."""
        started = self._topologies.get(store)
        return [node.proc.pid for node in started.nodes
                if node.proc is not None] if started is not None else []

    def url(self, store: str, tag: str) -> str:
        """The URL of a fresh ``store`` named ``tag`` (each server gets its own)."""
        if store == "memory":
            return "memory://"
        if store in ("shelve", "sqlite"):
            suffix = ".db" if store == "sqlite" else ""
            return f"{store}://{os.path.join(self.dir, tag)}{suffix}"
        if store in SQL_STORES:
            return self.sql_url(store, tag)
        if store in TOPOLOGIES:
            url = self.topology_urls[store]
            return f"{url}{'&' if '?' in url else '?'}prefix={self.prefix}-{tag}"
        return f"{self.redis_url}?prefix={self.prefix}-{tag}"

    def sql_admin(self, store: str) -> Any:
        """An engine on the PostgreSQL or MariaDB server, or None (and :attr:`sql_errors`)."""
        if store not in self._sql_admins and store not in self.sql_errors:
            try:
                import sqlalchemy as sa

                url = self.sql_servers[store].replace("postgresql://", "postgresql+pg8000://", 1)
                url = url.replace("mysql://", "mysql+pymysql://", 1)
                engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
                with engine.connect() as conn:
                    conn.execute(sa.text("SELECT 1"))
                self._sql_admins[store] = engine
            except Exception as exc:  # ImportError, no server: report and skip
                self.sql_errors[store] = f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
        return self._sql_admins.get(store)

    def sql_url(self, store: str, tag: str) -> str:
        """A fresh schema (PostgreSQL) or database (MariaDB) per server tag, made once."""
        import sqlalchemy as sa

        key = (store, tag)
        if key not in self._sql_names:
            name = f"{self._sql_prefix}_{len(self._sql_names)}"
            if store == "mariadb":
                with self.sql_admin(store).begin() as conn:
                    conn.execute(sa.text(f"CREATE DATABASE `{name}`"))
            self._sql_names[key] = name
        name = self._sql_names[key]
        base = self.sql_servers[store]
        return f"{base}?schema={name}" if store == "postgresql" else f"{base}/{name}"

    def drop_tables(self, store: str, names: List[str]) -> None:
        """Drop tables made on the server's default database (the SDK peer's)."""
        import sqlalchemy as sa

        with self.sql_admin(store).begin() as conn:
            for name in names:
                conn.execute(sa.text(f'DROP TABLE IF EXISTS "{name}"'))

    def drop_sql(self) -> None:
        import sqlalchemy as sa

        for (store, _), name in self._sql_names.items():
            with self._sql_admins[store].begin() as conn:
                conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'
                                     if store == "postgresql" else
                                     f"DROP DATABASE IF EXISTS `{name}`"))
        if self._sql_names:
            say(f"dropped {len(self._sql_names)} SQL schemas/databases {self._sql_prefix}_*")
        for engine in self._sql_admins.values():
            engine.dispose()

    def redis(self) -> Any:
        """A client of the Redis database, or None (and :attr:`redis_error`) when unusable."""
        if self._redis is None and not self.redis_error:
            try:
                import redis

                client = redis.Redis.from_url(self.redis_url, socket_timeout=10,
                                              socket_connect_timeout=5)
                client.ping()
                self._redis = client
            except Exception as exc:  # ImportError or any RedisError: report and skip
                self.redis_error = f"{type(exc).__name__}: {exc}"
        return self._redis

    def redis_pids(self) -> List[int]:
        """The Redis server's pid when it runs on this machine (its CPU is then measured)."""
        client = self.redis()
        try:
            pid = int(client.info("server")["process_id"]) if client is not None else 0
        except Exception:
            return []
        return [pid] if pid and Path(f"/proc/{pid}/stat").exists() else []

    def redis_info(self) -> Dict[str, Any]:
        client = self.redis()
        if client is None:
            return {"error": self.redis_error}
        info = client.info("server")
        return {"version": info.get("redis_version"), "pid": info.get("process_id"),
                "url": self.redis_url, "prefix": self.prefix}

    def close(self) -> None:
        """Delete the prefix's Redis keys, the SQL schemas and the temporary directory."""
        self.drop_sql()
        for started in self._topologies.values():  # their keys go with them
            started.close()
        if self._redis is not None:
            try:
                self.redis_keys_deleted = delete_keys(self._redis, self.prefix + "-*")
                say(f"deleted {self.redis_keys_deleted} redis keys under {self.prefix}-")
            finally:
                self._redis.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def delete_keys(client: Any, pattern: str) -> int:
    """Delete every key matching ``pattern`` (SCAN, then DEL in batches); how many went."""
    deleted, batch = 0, []
    for key in client.scan_iter(match=pattern, count=1000):
        batch.append(key)
        if len(batch) >= 500:
            deleted += client.delete(*batch)
            batch = []
    if batch:
        deleted += client.delete(*batch)
    return deleted


# ====================================================================== servers and runs


def start_server(sites: StoreSites, store: str, tag: str, cpus: str, workers: int,
                 chunks: int, attempts: int = 3) -> BenchServer:
    """A gunicorn on a fresh ``store``, ready.

    A gunicorn that exits while starting (say, its free port was taken
    meanwhile) is tried again on a new port, ``attempts`` times in all.
    """
    for attempt in range(1, attempts + 1):
        server = BenchServer(cpus, WORKER_CONNECTIONS, chunks, workers=workers,
                             store=sites.url(store, tag))
        try:
            server.wait_ready()
            break
        except RuntimeError as exc:
            server.keep_log = attempt == attempts
            server.stop()
            if attempt == attempts:
                raise
            say(f"  warning: gunicorn {tag} did not start ({str(exc).splitlines()[-1]}); again")
        except BaseException:
            server.keep_log = True
            server.stop()
            raise
    if store == "redis":
        server.helper_pids = sites.redis_pids()
    elif store in TOPOLOGIES:
        server.helper_pids = sites.topology_pids(store)
    return server


class Slot:
    """One server of a phase; restarted on a fresh store when a run leaves work behind."""

    def __init__(self, sites: StoreSites, store: str, tag: str, cpus: str, workers: int,
                 chunks: int, placement: str = "") -> None:
        self.sites, self.store, self.tag, self.cpus = sites, store, tag, cpus
        self.workers, self.chunks, self.placement = workers, chunks, placement
        self.generation = 0
        self.server: Optional[BenchServer] = None

    @property
    def url(self) -> str:
        return self.sites.url(self.store, f"{self.tag}-{self.generation}")

    def start(self) -> BenchServer:
        """Start the gunicorn (and place its workers for the scale phase)."""
        self.server = start_server(self.sites, self.store, f"{self.tag}-{self.generation}",
                                   self.cpus, self.workers, self.chunks)
        place(self.server, self.placement)
        return self.server

    def restart(self) -> None:
        """Drop the server and its store (and the work it still had), start afresh."""
        self.stop()
        self.generation += 1
        self.start()

    def stop(self) -> None:
        if self.server is not None:
            try:
                self.server.stop()
            except Exception as exc:
                say(f"warning: stopping gunicorn {self.server.proc.pid} failed: {exc}")
            self.server = None

    def check_alive(self) -> None:
        """Fail loudly if the gunicorn died or lost a worker."""
        server = self.server
        if server is None:
            return
        if server.proc.poll() is not None or len(bench.children_of(server.proc.pid)) != self.workers:
            server.keep_log = True
            raise RuntimeError(f"gunicorn {self.tag} died or lost a worker:\n" + server.log_tail())


def place(server: BenchServer, placement: str) -> None:
    """For ``spread``, pin worker k to CPU k (the others keep every CPU they were given)."""
    if placement == "spread":
        cpus = sorted(os.sched_getaffinity(server.worker_pid))
        for index, pid in enumerate(server.worker_pids):
            os.sched_setaffinity(pid, {cpus[index % len(cpus)]})


def stop_all(slots: Dict[str, Slot]) -> None:
    for slot in slots.values():
        slot.stop()


def forget_once(server: BenchServer, stall: float = 0.0) -> Tuple[int, float, int]:
    """POST /bench/forget on a new connection: (tasks dropped, seconds, pid of the worker).

    With ``stall`` the worker then blocks that long, so the next connection goes elsewhere.
    """
    conn = bench.HttpConnection(server.port, timeout=FORGET_TIMEOUT)
    try:
        started = time.perf_counter()
        conn.send(bench.post("/bench/forget", json.dumps({"stall": stall}).encode()))
        answer = json.loads(conn.read_body(conn.read_head()))
        return (int(answer.get("forgotten", 0)), time.perf_counter() - started - stall,
                int(answer.get("pid", 0)))
    finally:
        conn.close()


def forget(server: BenchServer) -> Tuple[int, float]:
    """Drop finished tasks and collect garbage in every worker: (tasks, seconds in all).

    Which worker accepts a connection is up to the kernel: with several workers,
    each call but the last stalls the worker that took it while the next one
    goes out, and rounds repeat (a bounded number of times) until all answered.
    """
    left, dropped, seconds = set(server.worker_pids), 0, 0.0
    for _ in range(FORGET_ATTEMPTS):
        for count, took, pid in forget_round(server, len(left)):
            dropped, seconds = dropped + count, seconds + took
            left.discard(pid)
        if not left:
            return dropped, seconds
    say(f"      [warning: /bench/forget never reached worker(s) {sorted(left)}]")
    return dropped, seconds


def forget_round(server: BenchServer, calls: int) -> List[Tuple[int, float, int]]:
    """``calls`` forget calls, 0.1 s apart; all but the last stall their worker meanwhile."""
    if calls <= 1:
        return [forget_once(server)]
    greenlets = []
    for index in range(calls):
        stall = STALL_STEP * (calls - index) if index < calls - 1 else 0.0
        greenlets.append(gevent.spawn(forget_once, server, stall))
        gevent.sleep(STALL_STEP / 3)
    gevent.joinall(greenlets, raise_error=True)
    return [g.value for g in greenlets]


def settle(server: BenchServer, timeout: float, idle: float = 0.10) -> bool:
    """Wait until the workers use < ``idle`` of a CPU (over 0.5 s); False after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        before = server.cpu_seconds()
        gevent.sleep(0.5)
        if (server.cpu_seconds() - before) / 0.5 < idle:
            return True
        if time.monotonic() > deadline:
            return False


def sched_clock(pid: int) -> Tuple[float, float]:
    """(seconds on a CPU, seconds runnable but waiting for one), summed over the threads."""
    run = wait = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        fields = Path(f"/proc/{pid}/task/{task}/schedstat").read_text().split()
        run, wait = run + int(fields[0]), wait + int(fields[1])
    return run / 1e9, wait / 1e9


def sched_split(before: Dict[str, Tuple[float, float]], after: Dict[str, Tuple[float, float]],
                elapsed: float) -> Dict[str, Dict[str, float]]:
    """Per process, fractions of the wall time: on a CPU, waiting for a CPU, blocked (the rest)."""
    split = {}
    for name, (run1, wait1) in after.items():
        run, wait = (run1 - before[name][0]) / elapsed, (wait1 - before[name][1]) / elapsed
        split[name] = {"cpu": run, "waiting": wait, "blocked": max(0.0, 1.0 - run - wait)}
    return split


def sched_clocks(server: BenchServer) -> Dict[str, Tuple[float, float]]:
    """Scheduler clocks of each worker and of this process (the load generator)."""
    clocks = {f"worker {i + 1}": sched_clock(pid) for i, pid in enumerate(server.worker_pids)}
    clocks["generator"] = sched_clock(os.getpid())
    return clocks


@dataclass
class Sample:
    """One measured run: its result, scheduler split, noise retries, and what followed it."""

    run: RunResult
    sched: Dict[str, Dict[str, float]]
    attempts: int
    purged: int
    purge_s: float
    restarted: bool


def measured_run(slot: Slot, scenario: Scenario, concurrency: int, opts: Options,
                 cfg: bench.Config) -> Sample:
    """Run on an emptied store after the machine went quiet; repeat while it was noisy."""
    for attempt in range(1, cfg.noise_retries + 2):
        server = slot.server
        assert server is not None
        forget(server)
        bench.wait_for_quiet(server, cfg)
        clocks, started = sched_clocks(server), time.perf_counter()
        run = bench.measure(server, scenario, concurrency, cfg.duration, opts.grace)
        sched = sched_split(clocks, sched_clocks(server), time.perf_counter() - started)
        purged, purge_s, restarted = clean_up(slot, opts, run.cut > 0)
        if run.other_cpu + run.steal <= cfg.max_other_cpu:
            break
        if attempt <= cfg.noise_retries:
            say(f"      [noisy: other {run.other_cpu:.0%} steal {run.steal:.0%}; repeated]")
    return Sample(run, sched, attempt, purged, purge_s, restarted)


def clean_up(slot: Slot, opts: Options, cut: bool) -> Tuple[int, float, bool]:
    """After a run: empty the store (tasks purged, seconds, False), or restart the server
    (0, 0.0, True) if the run was cut or the workers stay busy (work left behind)."""
    server = slot.server
    assert server is not None
    if not cut and settle(server, opts.settle_timeout):
        return forget(server) + (False,)
    say(f"      [{slot.tag}: " + ("exchanges cut" if cut else f"still busy {opts.settle_timeout:g}s")
        + " after the run; restarted on a fresh store]")
    slot.restart()
    return 0, 0.0, True


def brief(label: str, s: Sample, unit: str) -> str:
    """One progress line."""
    r = s.run
    workers = "/".join(f"{v['cpu']:.0%}" for k, v in s.sched.items() if k.startswith("worker"))
    return (f"    {label:<6} {r.rate:10,.1f} {unit}  cpu client {r.client_cpu:4.0%} "
            f"server {r.server_cpu:4.0%} ({workers}) helper {r.helper_cpu:4.0%} "
            f"other {r.other_cpu:4.0%} steal {r.steal:3.0%}  errors {r.errors} cut {r.cut}  "
            + ("restarted" if s.restarted else f"purged {s.purged} in {s.purge_s:.2f}s")
            + (f"  first error: {r.first_error}" if r.first_error else ""))


def warm_up(slots: Dict[str, Slot], scenario: Scenario, concurrency: int, opts: Options,
            cfg: bench.Config) -> None:
    """An unmeasured run per server, then empty its store (or restart it)."""
    if cfg.warmup <= 0:
        return
    for slot in slots.values():
        assert slot.server is not None
        run = bench.measure(slot.server, scenario, concurrency, cfg.warmup, opts.grace)
        clean_up(slot, opts, run.cut > 0)


def alternate(slots: Dict[str, Slot], scenario: Scenario, concurrency: int, unit: str,
              opts: Options, cfg: bench.Config) -> Dict[str, List[Sample]]:
    """``repeat`` rounds; in each, one measured run per server, in turn."""
    warm_up(slots, scenario, concurrency, opts, cfg)
    samples: Dict[str, List[Sample]] = {name: [] for name in slots}
    for index in range(cfg.repeat):
        say(f"  round {index + 1}/{cfg.repeat}")
        for name, slot in slots.items():
            samples[name].append(measured_run(slot, scenario, concurrency, opts, cfg))
            say(brief(name, samples[name][-1], unit))
    for slot in slots.values():
        slot.check_alive()
    return samples


# ====================================================================== summaries


@dataclass
class Figure:
    """Medians over the samples of one server and scenario."""

    rate: float
    client_cpu: float
    server_cpu: float
    helper_cpu: float
    other_cpu: float
    steal: float
    p50_ms: float
    p99_ms: float
    errors: int
    cut: int
    restarts: int
    purge_s: float
    server_us_per_unit: float
    client_us_per_unit: float
    sched: Dict[str, Dict[str, float]]
    helper_us_per_unit: float = 0.0
    runs: List[Dict[str, Any]] = field(default_factory=list)


def figure(samples: List[Sample]) -> Figure:
    """Medians (errors, cut exchanges and restarts summed) of a list of samples."""
    runs = [s.run for s in samples]

    def med(name: str) -> float:
        return statistics.median(getattr(r, name) for r in runs)

    def per_unit(name: str) -> float:
        return statistics.median(getattr(r, name) / r.rate * 1e6 if r.rate else 0.0 for r in runs)

    sched = {who: {k: statistics.median(s.sched[who][k] for s in samples) for k in split}
             for who, split in samples[0].sched.items()}
    return Figure(med("rate"), med("client_cpu"), med("server_cpu"), med("helper_cpu"),
                  med("other_cpu"), med("steal"), med("p50_ms"), med("p99_ms"),
                  sum(r.errors for r in runs), sum(r.cut for r in runs),
                  sum(s.restarted for s in samples), statistics.median(s.purge_s for s in samples),
                  per_unit("server_cpu"), per_unit("client_cpu"), sched, per_unit("helper_cpu"),
                  [dict(asdict(s.run), sched=s.sched, attempts=s.attempts, purged=s.purged,
                        purge_s=s.purge_s, restarted=s.restarted) for s in samples])


def workers_sched(f: Figure, key: str) -> str:
    """One scheduler figure of every worker, e.g. ``64%/63%``."""
    return "/".join(f"{v[key]:.0%}" for k, v in f.sched.items() if k.startswith("worker"))


# ====================================================================== phase: stores


@dataclass
class StoreResult:
    """SendMessage and SSE figures of one store (None when the store was skipped)."""

    store: str
    url: str
    send: Optional[Figure] = None
    sse: Optional[Figure] = None
    skipped: str = ""


def usable_stores(stores: List[str], sites: StoreSites) -> Tuple[List[str], Dict[str, str]]:
    """Those of ``stores`` that can run here, and why the others cannot."""
    skipped = {}
    if "redis" in stores and sites.redis() is None:
        skipped["redis"] = f"Redis unusable at {sites.redis_url}: {sites.redis_error}"
        say(f"warning: {skipped['redis']}; the redis store is skipped")
    for store in SQL_STORES:
        if store in stores and sites.sql_admin(store) is None:
            skipped[store] = f"{store} unusable at {sites.sql_servers[store]}: " \
                             f"{sites.sql_errors[store]}"
            say(f"warning: {skipped[store]}; the {store} store is skipped")
    return [s for s in stores if s not in skipped], skipped


def start_slots(slots: Dict[str, Slot]) -> None:
    """Start every slot's server and say where it runs."""
    for name, slot in slots.items():
        server = slot.start()
        say(f"  {name}: workers {server.worker_pids} on CPUs {worker_cpus(server)}, "
            f"port {server.port}, store {slot.url}")


def worker_cpus(server: BenchServer) -> List[List[int]]:
    """Each worker's allowed CPUs."""
    return [sorted(os.sched_getaffinity(pid)) for pid in server.worker_pids]


def concurrency_of(key: str, opts: Options) -> int:
    """Clients of a scenario: ``--concurrency`` for SendMessage, ``--sse-concurrency`` for SSE."""
    return opts.concurrency if key == "send" else opts.sse_concurrency


def measure_scenarios(slots: Dict[str, Slot], opts: Options, cfg: bench.Config,
                      phase: str) -> Dict[str, Dict[str, List[Sample]]]:
    """SendMessage, then SSE streams, each with runs alternating across the slots:
    samples by scenario key (``send``, ``stream``), then by slot name."""
    sc = bench.scenarios(opts.chunks)
    samples = {}
    for key, (label, unit) in SCENARIOS.items():
        streams = f" ({opts.chunks}-chunk streams)" if sc[key].streaming else ""
        say(f"phase {phase}: {label}{streams} c={concurrency_of(key, opts)}")
        samples[key] = alternate(slots, sc[key], concurrency_of(key, opts), unit, opts, cfg)
    return samples


def stores_phase(opts: Options, cfg: bench.Config, sites: StoreSites) -> List[StoreResult]:
    """Every store on its own pinned worker, runs alternating across stores."""
    bench.pin_self(opts.client_cpu)
    names, skipped = usable_stores(opts.stores, sites)
    slots = {n: Slot(sites, n, f"stores-{n}", str(opts.server_cpu), 1, opts.chunks) for n in names}
    say("phase stores: one gevent worker per store on CPU "
        f"{opts.server_cpu}, load generator on CPU {opts.client_cpu}")
    try:
        start_slots(slots)
        samples = measure_scenarios(slots, opts, cfg, "stores")
    finally:
        stop_all(slots)
    results = [StoreResult(n, sites.url(n, f"stores-{n}-0"), figure(samples["send"][n]),
                           figure(samples["stream"][n])) for n in names]
    return results + [StoreResult(n, "", skipped=why) for n, why in skipped.items()]


def stores_table(results: List[StoreResult], opts: Options) -> str:
    """Store, SendMessage req/s, SSE events/s, each with its ratio to memory."""
    memory = next(r for r in results if r.store == "memory")
    rows = [("store", f"SendMessage c={opts.concurrency} (req/s)", "vs memory",
             f"SSE c={opts.sse_concurrency} (events/s)", "vs memory", "errors", "cut")]
    for r in results:
        if r.send is None or r.sse is None or memory.send is None or memory.sse is None:
            rows.append((r.store, "skipped", "-", "skipped", "-", "-", "-"))
            continue
        rows.append((r.store, f"{r.send.rate:,.0f}", f"{r.send.rate / memory.send.rate:.1%}",
                     f"{r.sse.rate:,.0f}", f"{r.sse.rate / memory.sse.rate:.1%}",
                     str(r.send.errors + r.sse.errors), str(r.send.cut + r.sse.cut)))
    return format_table(rows)


def stores_cpu_table(results: List[StoreResult]) -> str:
    """Where the time went, per store and scenario (medians; CPU as fractions of one CPU)."""
    rows = [("store / scenario", "worker cpu", "worker blocked", "worker us/unit", "redis cpu",
             "generator cpu", "other", "steal", "p50 ms", "p99 ms", "purge s", "restarts")]
    for r in results:
        for label, f in (("SendMessage", r.send), ("SSE", r.sse)):
            if f is None:
                continue
            rows.append((f"{r.store} {label}", f"{f.server_cpu:.0%}", workers_sched(f, "blocked"),
                         f"{f.server_us_per_unit:,.1f}",
                         f"{f.helper_cpu:.0%}" if r.store.startswith("redis") else "-",
                         f"{f.client_cpu:.0%}", f"{f.other_cpu:.0%}", f"{f.steal:.0%}",
                         f"{f.p50_ms:,.1f}", f"{f.p99_ms:,.1f}", f"{f.purge_s:.2f}",
                         str(f.restarts)))
    return format_table(rows)


# ====================================================================== phase: scale


@dataclass
class ScaleResult:
    """One placement, store and scenario: a figure per worker count, runs alternating."""

    placement: str
    store: str
    scenario: str               # a SCENARIOS key
    figures: Dict[int, Figure]  # by worker count, ascending; -w 1 always there
    cpus: int                   # CPUs of the machine
    worker_cpus: List[int]      # CPUs gunicorn's workers may run on
    client_cpus: List[int]      # CPUs the load generator may run on
    control: bool               # the memory control: no target

    def ratio(self, workers: int) -> float:
        """Rate with ``-w workers`` over the rate with ``-w 1``."""
        one = self.figures[1].rate
        return self.figures[workers].rate / one if one else 0.0

    def bound(self, workers: int, costs: Figure) -> float:
        """The best ``-w workers``/``-w 1`` ratio the CPUs allow at the CPU per unit in ``costs``.

        The tightest of: the CPUs not used by others or stolen during the
        ``-w workers`` runs over worker + generator + helper (redis-server) CPU
        per unit; the workers' CPUs, one per worker at most, over worker CPU per
        unit; one CPU each for the generator and the helper (one thread each).
        """
        one, run = self.figures[1].rate, self.figures[workers]
        worker, client, helper = (costs.server_us_per_unit / 1e6, costs.client_us_per_unit / 1e6,
                                  costs.helper_us_per_unit / 1e6)
        if not (one and worker):
            return 0.0
        spare = self.cpus - run.other_cpu - run.steal
        limits = [spare / (worker + client + helper),
                  min(workers, len(self.worker_cpus)) / worker]
        limits += [1 / cost for cost in (client, helper) if cost]
        return min(limits) / one

    def limit(self) -> str:
        """Why the CPUs cannot show the target with ``-w 2`` ("" when they can)."""
        if 2 not in self.figures:
            return ""
        if len(self.worker_cpus) < 2:
            return "1 CPU for workers"
        allowed = self.bound(2, self.figures[1])
        return f"CPUs allow {allowed:.2f}x" if allowed < TARGET_SCALE else ""

    def result(self) -> str:
        """``-w 2`` against the target: PASS, MISS, or "n/a: why" when the CPUs cannot show
        it; "" for the control or without ``-w 2``."""
        if self.control or 2 not in self.figures:
            return ""
        if self.figures[1].errors + self.figures[2].errors:
            return "MISS (errors)"
        if self.ratio(2) >= TARGET_SCALE:
            return "PASS"
        limit = self.limit()
        return f"n/a: {limit}" if limit else "MISS"


PLACEMENT_TEXT = {
    "pinned": "load generator alone on --client-cpu; gunicorn master and workers on the other "
              "CPUs (placed by the kernel)",
    "shared": "gunicorn master and workers, and the load generator, all allowed on every CPU",
    "spread": "worker k pinned to CPU k (-w 1: its worker on CPU 0); load generator on every CPU",
}


def placement_cpus(placement: str, opts: Options) -> Tuple[List[int], List[int]]:
    """(CPUs of the workers, CPUs of the load generator) in ``placement``."""
    every = list(range(os.cpu_count() or 1))
    if placement != "pinned":
        return every, every
    rest = [cpu for cpu in every if cpu != opts.client_cpu]
    if opts.client_cpu not in every or not rest:
        say(f"warning: pinned needs CPU {opts.client_cpu} and one more; all share every CPU")
        return every, every
    return rest, [opts.client_cpu]


def scale_slot(store: str, workers: int) -> str:
    return f"{store} -w {workers}"


def scale_phase(opts: Options, cfg: bench.Config, sites: StoreSites, placement: str,
                stores: List[str]) -> List[ScaleResult]:
    """Every ``--workers`` count per store (each server its own store), SendMessage then
    SSE, runs alternating across all the servers."""
    worker_cpus, client_cpus = placement_cpus(placement, opts)
    os.sched_setaffinity(0, set(client_cpus))
    say(f"phase scale ({placement}): {PLACEMENT_TEXT[placement]}: workers on "
        f"{cpus_text(worker_cpus)}, load generator on {cpus_text(client_cpus)}")
    slots = {scale_slot(store, w): Slot(sites, store, f"scale-{placement}-{store}-w{w}",
                                        cpu_list(worker_cpus), w, opts.chunks, placement)
             for store in stores for w in opts.workers}
    try:
        start_slots(slots)
        samples = measure_scenarios(slots, opts, cfg, f"scale ({placement})")
    finally:
        stop_all(slots)
    return [ScaleResult(placement, store, key,
                        {w: figure(samples[key][scale_slot(store, w)]) for w in opts.workers},
                        os.cpu_count() or 1, worker_cpus, client_cpus,
                        store == opts.scale_control)
            for key in SCENARIOS for store in stores]


def cpu_list(cpus: List[int]) -> str:
    """``0,1``: a taskset CPU list."""
    return ",".join(map(str, cpus))


def cpus_text(cpus: List[int]) -> str:
    """``CPU 0`` or ``CPUs 0,1``, for the reader."""
    return ("CPU " if len(cpus) == 1 else "CPUs ") + cpu_list(cpus)


def scale_label(r: ScaleResult) -> str:
    return f"{r.placement}: {r.store}" + (" (control)" if r.control else "")


def scale_table(results: List[ScaleResult], opts: Options, key: str) -> str:
    """One scenario: per placement, store and worker count, the rate, its ratio to -w 1,
    the best ratio the CPUs allow, and the -w 2 target's result."""
    label, unit = SCENARIOS[key]
    rows = [(f"placement: store ({label} c={concurrency_of(key, opts)})", "workers", unit,
             "vs -w 1", "CPUs allow at -w 1 costs", "at own costs", "target", "result")]
    for r in (r for r in results if r.scenario == key):
        for n, f in r.figures.items():
            target = (("(info)" if r.control else f">= {TARGET_SCALE}x") if n == 2 else "")
            rows.append((scale_label(r), f"-w {n}", f"{f.rate:,.0f}", f"{r.ratio(n):.2f}x",
                         f"<= {r.bound(n, r.figures[1]):.2f}x" if n > 1 else "-",
                         f"<= {r.bound(n, f):.2f}x" if n > 1 else "-", target,
                         r.result() if n == 2 else ""))
    return format_table(rows)


def scale_cpu_table(results: List[ScaleResult]) -> str:
    """Time of each worker and of the load generator in the scale phase (medians).

    cpu: on a CPU; wait: runnable but waiting for a CPU; blocked: neither
    (waiting for requests, or sleeping, e.g. in SQLite's busy handler).
    """
    rows = [("placement: store scenario / workers", "worker cpu", "worker wait", "worker blocked",
             "worker us/unit", "redis cpu", "generator cpu", "generator wait",
             "generator us/unit", "other", "steal", "idle CPUs", "p50 ms", "errors", "cut")]
    for r in results:
        for n, f in r.figures.items():
            idle = max(0.0, r.cpus - f.server_cpu - f.client_cpu - f.helper_cpu - f.other_cpu
                       - f.steal)
            gen = f.sched.get("generator", {})
            rows.append((f"{scale_label(r)} {SCENARIOS[r.scenario][0]} -w {n}",
                         workers_sched(f, "cpu"), workers_sched(f, "waiting"),
                         workers_sched(f, "blocked"), f"{f.server_us_per_unit:,.1f}",
                         f"{f.helper_cpu:.0%}" if r.store.startswith("redis") else "-",
                         f"{f.client_cpu:.0%}", f"{gen.get('waiting', 0.0):.0%}",
                         f"{f.client_us_per_unit:,.1f}", f"{f.other_cpu:.0%}", f"{f.steal:.0%}",
                         f"{idle:.0%}", f"{f.p50_ms:,.1f}", str(f.errors), str(f.cut)))
    return format_table(rows)


def limit_line(results: List[ScaleResult]) -> str:
    """One line on what keeps one placement's ``-w 2`` from showing the target ("" if nothing)."""
    capped = [r for r in results if r.result().startswith("n/a")]
    if not capped:
        return ""
    r = capped[0]
    where = (f"the workers and the load generator share {cpus_text(r.worker_cpus)}"
             if set(r.client_cpus) & set(r.worker_cpus) else
             f"the load generator has {cpus_text(r.client_cpus)} to itself and the workers "
             f"share {cpus_text(r.worker_cpus)}")
    if len(r.worker_cpus) < 2:
        best = max(x.bound(2, x.figures[1]) for x in capped)
        return (f"{r.placement}: limited by the CPUs, not by the stores: {where}, so -w 2 can do "
                f"about what -w 1 does (the CPUs allow <= {best:.2f}x); {TARGET_SCALE}x needs 2 "
                f"CPUs for the workers and 1 for the generator, and this machine has {r.cpus}")
    which = ", ".join(f"{x.store} {SCENARIOS[x.scenario][0]} <= {x.bound(2, x.figures[1]):.2f}x"
                      for x in capped)
    return (f"{r.placement}: limited by the CPUs: {where}, which allow less than "
            f"{TARGET_SCALE}x even at -w 1's CPU per unit ({which})")


# ====================================================================== report and main


@dataclass
class Report:
    env: Dict[str, Any] = field(default_factory=dict)
    stores: List[StoreResult] = field(default_factory=list)
    scale: List[ScaleResult] = field(default_factory=list)
    scale_skipped: Dict[str, str] = field(default_factory=dict)
    lengths: str = ""
    peer: List[Tuple[str, bench.Comparison]] = field(default_factory=list)
    peer_skipped: Dict[str, str] = field(default_factory=dict)


def print_report(report: Report, opts: Options) -> None:
    """The tables, on stdout."""
    env = report.env
    print(f"\na2a_flask {env.get('a2a_flask')} at {env.get('git')}; Python {env.get('python')}, "
          f"gunicorn {env.get('gunicorn')}, gevent {env.get('gevent')}; {env.get('cpu_model')}, "
          f"{env.get('cpus')} CPUs; redis {env.get('redis', {}).get('version', '-')}; "
          f"medians of {opts.repeat} runs of {opts.duration:g} s\n")
    if report.stores:
        print(stores_table(report.stores, opts))
        print()
        print(stores_cpu_table(report.stores))
        for r in report.stores:
            if r.skipped:
                print(f"{r.store}: skipped ({r.skipped})")
    if report.scale or report.scale_skipped:
        print_scale(report, opts)
    if report.lengths:
        print(f"\nper-event cost by stream length (CPU time of engine + store, "
              f"medians of {opts.repeat} runs):\n{report.lengths}")
    if report.peer:
        print()
        print(peer_table(report.peer, env))
    for store, why in report.peer_skipped.items():
        print(f"{store}: skipped in the peer phase ({why})")


def print_scale(report: Report, opts: Options) -> None:
    """The scale phase's tables, then where each placement ran and what limits it."""
    for key in SCENARIOS:
        if any(r.scenario == key for r in report.scale):
            print()
            print(scale_table(report.scale, opts, key))
    if report.scale:
        print()
        print(scale_cpu_table(report.scale))
    for store, why in report.scale_skipped.items():
        print(f"{store}: skipped in the scale phase ({why})")
    for placement in dict.fromkeys(r.placement for r in report.scale):
        results = [r for r in report.scale if r.placement == placement]
        print(f"{placement}: {PLACEMENT_TEXT[placement]}: workers on "
              f"{cpus_text(results[0].worker_cpus)}, load generator on "
              f"{cpus_text(results[0].client_cpus)}")
        limit = limit_line(results)
        if limit:
            print(limit)


def scale_json(r: ScaleResult) -> Dict[str, Any]:
    """One scale result with its ratios, bounds and verdict (keys of dicts: worker counts)."""
    return dict(asdict(r), ratios={n: r.ratio(n) for n in r.figures},
                bounds={n: {"at_one_costs": r.bound(n, r.figures[1]),
                            "at_own_costs": r.bound(n, f)} for n, f in r.figures.items()},
                result=r.result(), limit=r.limit(), placement_text=PLACEMENT_TEXT[r.placement],
                target=None if r.control else TARGET_SCALE)


def to_json(report: Report, opts: Options) -> Dict[str, Any]:
    """Everything measured, for ``--json``."""
    return {
        "config": asdict(opts), "environment": report.env,
        "stores": [asdict(r) for r in report.stores],
        "lengths": report.lengths,
        "scale": [scale_json(r) for r in report.scale],
        "scale_skipped": report.scale_skipped,
        "peer": [dict(store=store, measure=c.measure, concurrency=c.concurrency,
                      a2a_flask=c.a2a_median, a2a_sdk=c.ceiling_median, ratio=c.ratio,
                      a2a_flask_cpu_us=c.a2a_cost_us, a2a_sdk_cpu_us=c.ceiling_cost_us,
                      a2a_flask_runs=[asdict(r) for r in c.a2a_runs],
                      a2a_sdk_runs=[asdict(r) for r in c.ceiling_runs])
                 for store, c in report.peer],
        "peer_skipped": report.peer_skipped,
    }


def lengths_phase(opts: Options) -> str:
    """``stream_length.py``'s table for the chosen stores (bounded by ``--phase-timeout``)."""
    say("phase lengths: per-event cost of 10- and 1,000-chunk streams")
    script = Path(__file__).with_name("stream_length.py")
    done = subprocess.run(
        [sys.executable, str(script), "--stores", ",".join(opts.stores),
         "--repeat", str(opts.repeat), "--redis-url", opts.redis_url,
         "--postgres-url", opts.postgres_url, "--mariadb-url", opts.mariadb_url],
        stdout=subprocess.PIPE, text=True, timeout=opts.phase_timeout, check=True)
    return done.stdout.strip("\n")  # the table right-justifies its first column


# ====================================================================== phase: peer


def peer_phase(opts: Options, cfg: bench.Config, sites: StoreSites, report: Report) -> None:
    """Blocking SendMessage on each SQL store of ``--stores``: a2a_flask (one gevent
    worker) against the official SDK's server on its ``DatabaseTaskStore``, in the
    same database server, on the same CPU, runs alternating."""
    import importlib.util
    from dataclasses import replace

    bench.pin_self(opts.client_cpu)
    wanted = [s for s in opts.stores if s in SQL_STORES]
    names, report.peer_skipped = usable_stores(wanted, sites)
    if not bench.peer_installed():
        report.peer_skipped.update({n: "pip install 'a2a-sdk[http-server]' uvicorn" for n in names})
        return
    send = bench.scenarios(opts.chunks)["send"]
    for store in names:
        old, new, driver = SDK_DRIVERS[store]
        if importlib.util.find_spec(driver) is None:
            report.peer_skipped[store] = f"the SDK's store needs {driver}: pip install {driver}"
            continue
        ours = start_server(sites, store, f"peer-{store}", str(opts.server_cpu), 1, opts.chunks)
        # MariaDB: a database of its own; PostgreSQL: tables of their own in the public schema.
        base = sites.sql_url(store, f"peer-sdk-{store}") if store == "mariadb" \
            else sites.sql_servers[store]
        table = f"{sites.prefix.replace('-', '_')}_sdk"
        peer = bench.PeerServer(opts.server_cpu, opts.chunks, env={
            "BENCH_SDK_STORE": base.replace(old, new, 1), "BENCH_SDK_TABLE": table})
        say(f"phase peer: {store}: a2a_flask (gunicorn, one gevent worker) and a2a-sdk "
            f"(uvicorn, DatabaseTaskStore) on CPU {opts.server_cpu}")
        try:
            peer.wait_ready()
            report.peer.append((store, bench.compare(
                ours, cfg, "SendMessage", "req/s", send,
                replace(send, label="a2a-sdk " + send.label), opts.concurrency,
                ceiling_server=peer, ceiling_name="a2a-sdk")))
        except BaseException:
            peer.keep_log = ours.keep_log = True
            raise
        finally:
            peer.stop()
            ours.stop()
            if store == "postgresql":
                sites.drop_tables(store, [f"{table}_a2a", f"{table}_chunks"])


def peer_table(rows: List[Tuple[str, bench.Comparison]], env: Dict[str, Any]) -> str:
    """a2a_flask against the official SDK's server on the same database."""
    table = [(f"store: SendMessage (req/s), a2a-sdk {env.get('a2a_sdk')} DatabaseTaskStore",
              "a2a_flask", "a2a-sdk", "a2a_flask / sdk", "CPU a2a_flask", "CPU a2a-sdk")]
    for store, c in rows:
        table.append((f"{store} c={c.concurrency}", f"{c.a2a_median:,.0f}",
                      f"{c.ceiling_median:,.0f}", f"{c.ratio:.2f}x",
                      f"{c.a2a_cost_us:,.0f} us/request", f"{c.ceiling_cost_us:,.0f} us/request"))
    return format_table(table)


def run(opts: Options, report: Report) -> None:
    """Both phases, each bounded by ``--phase-timeout``; store files and keys always removed."""
    cfg = bench_config(opts)
    bench.raise_nofile(8192)
    sites = StoreSites(opts.redis_url, opts.postgres_url, opts.mariadb_url)
    started = time.monotonic()
    try:
        for store, url in (("redis-cluster", opts.redis_cluster_url),
                           ("redis-sentinel", opts.redis_sentinel_url)):
            if store in opts.stores + opts.scale_stores:
                sites.topology(store, url)
        needs_redis = "redis" in opts.stores + opts.scale_stores
        report.env = dict(bench.environment(None, cfg, sorted(os.sched_getaffinity(0))),
                          redis=sites.redis_info() if needs_redis else {},
                          started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), store_dir=sites.dir)
        if "stores" in opts.phases:
            with gevent.Timeout(opts.phase_timeout, RuntimeError("stores phase timed out")):
                report.stores = stores_phase(opts, cfg, sites)
        if "scale" in opts.phases:
            run_scale(opts, cfg, sites, report)
        if "lengths" in opts.phases:
            report.lengths = lengths_phase(opts)
        if "peer" in opts.phases:
            with gevent.Timeout(opts.phase_timeout, RuntimeError("peer phase timed out")):
                peer_phase(opts, cfg, sites, report)
    finally:
        sites.close()
        report.env["elapsed_s"] = round(time.monotonic() - started, 1)


def run_scale(opts: Options, cfg: bench.Config, sites: StoreSites, report: Report) -> None:
    """The scale phase per placement, on the stores that can run here (the others noted)."""
    usable, report.scale_skipped = usable_stores(opts.scale_stores, sites)
    # The control last: memory's workers share no state, so it shows what the machine allows.
    stores = usable + ([opts.scale_control] if opts.scale_control != "none" else [])
    if not stores:
        return
    for placement in opts.placements:
        # --phase-timeout per scenario: each one runs every worker count on every store.
        with gevent.Timeout(opts.phase_timeout * len(SCENARIOS),
                            RuntimeError(f"scale phase ({placement}) timed out")):
            report.scale += scale_phase(opts, cfg, sites, placement, stores)


def on_sigterm(main_greenlet: Any) -> Any:
    """SIGTERM ends the run through the usual clean-up (servers, files, keys).

    Keep the returned watcher referenced: once it is garbage-collected, SIGTERM
    kills the process again without any clean-up.
    """
    return gevent.signal_handler(signal.SIGTERM,
                                 lambda: gevent.kill(main_greenlet, SystemExit(143)))


def main(argv: Optional[List[str]] = None) -> int:
    opts = parse_args(argv)
    bench._QUIET = opts.quiet
    watcher = on_sigterm(gevent.getcurrent())
    report = Report()
    failed: Optional[BaseException] = None
    try:
        run(opts, report)
    except Exception as exc:  # a later phase failed: still show what the earlier ones measured
        failed = exc
    finally:
        watcher.cancel()
    print_report(report, opts)
    if opts.json_path:
        Path(opts.json_path).write_text(json.dumps(to_json(report, opts), indent=2) + "\n")
        say(f"results written to {opts.json_path}")
    if failed is not None:
        raise failed
    return 0


if __name__ == "__main__":
    sys.exit(main())
