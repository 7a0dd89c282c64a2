#!/usr/bin/env python
"""CPU per blocking SendMessage in one process, per store, against the memory store.

The echo agent in a Flask app under gevent (as a ``gunicorn -k gevent`` worker
runs it), driven through the Flask test client, so the figure is the worker's
CPU alone: parsing, the engine, the store's client side, rendering (no HTTP
server, no load generator).  Stores are measured in rounds, each round every
store in turn, so drift on a shared machine hits them all alike; the table
shows medians, each store's ratio to memory, the SQL statements or Redis
commands one send costs, and the CPU the database server's own processes on this
machine spent per send (PostgreSQL's backends and background workers, mariadbd,
redis-server).  ``--profile STORE`` prints where that store's CPU
goes (cProfile, by own time).

    python bench/send_cost.py [--stores memory,sqlite,redis,postgresql,mariadb]
        [--sends 300] [--rounds 5] [--profile postgresql]

PostgreSQL and MariaDB get a database of their own (``--postgres-url``,
``--mariadb-url`` name the servers), Redis a key prefix in ``--redis-url``'s
database; all are dropped at the end.
"""
from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import cProfile  # noqa: E402
import io  # noqa: E402
import os  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Callable, Dict, List, Tuple  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flask import Flask  # noqa: E402

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill  # noqa: E402

from bench import cpu_seconds  # noqa: E402

STORES = ("memory", "sqlite", "redis", "postgresql", "mariadb")
#: The process name of each networked store's server (as /proc/<pid>/comm gives it).
SERVER_PROCESS = {"redis": "redis-server", "postgresql": "postgres", "mariadb": "mariadbd"}


def server_cpu_seconds(store: str) -> float:
    """CPU time of ``store``'s server processes on this machine (0 for an in-process store)."""
    name = SERVER_PROCESS.get(store)
    if name is None:
        return 0.0
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if Path(f"/proc/{entry}/comm").read_text().strip() == name:
                total += cpu_seconds(int(entry))
        except (OSError, ValueError):
            continue  # ended meanwhile
    return total


class Agent:
    """One echo agent on one store, with a counter of the store's round trips."""

    def __init__(self, store: str, url: str) -> None:
        self.store, self.url, self.calls = store, url, 0
        app = Flask(f"send-cost-{store}")
        app.config["A2A_STORE"] = url
        a2a = A2A(card=AgentCard(
            name="Echo", description="echo", version="1.0.0",
            capabilities=AgentCapabilities(streaming=True),
            skills=[AgentSkill(id="echo", name="Echo", description="echo", tags=["echo"])]))

        @a2a.executor
        def echo(ctx: Any) -> str:
            return str(ctx.text)

        a2a.init_app(app)
        self.a2a, self.client = a2a, app.test_client()
        self.task_store = a2a.store(app)
        self._count_round_trips()

    def _count_round_trips(self) -> None:
        store = self.task_store
        engines = {id(e): e for e in (getattr(store, "engine", None),
                                      getattr(store, "writer_engine", None)) if e is not None}
        if engines:
            import sqlalchemy as sa

            from a2a_flask.stores import sql_raw

            def count(*_: Any) -> None:
                self.calls += 1

            for engine in engines.values():
                sa.event.listen(engine, "before_cursor_execute", count)
            # The hot statements run on the driver's cursor (sql_raw), past those events.
            for name in ("text", "many"):
                _count_calls(sql_raw.Session, name, self)
        for name in ("_redis", "_writer"):  # the readers' and the writers' pools
            redis_client = getattr(store, name, None)
            if redis_client is not None:
                self._count_sends(redis_client.connection_pool)

    def _count_sends(self, pool: Any) -> None:
        original = pool.get_connection

        def counted(*args: Any, **kwargs: Any) -> Any:
            connection = original(*args, **kwargs)
            if not getattr(connection, "_a2a_counted", False):
                send = connection.send_packed_command

                def sent(command: Any, *a: Any, **k: Any) -> Any:
                    self.calls += 1
                    return send(command, *a, **k)

                connection.send_packed_command = sent
                connection._a2a_counted = True
            return connection

        pool.get_connection = counted

    def send(self) -> None:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "hello"}]}}}
        answer = self.client.post("/a2a", json=body, headers={"A2A-Version": "1.0"})
        if answer.status_code != 200 or b"TASK_STATE_COMPLETED" not in answer.data:
            raise RuntimeError(f"{self.store}: {answer.status_code} {answer.data[:300]!r}")

    def measure(self, sends: int) -> Tuple[float, float, float]:
        """(CPU ms per send, round trips per send, the database server's CPU ms per
        send) over ``sends`` sends."""
        calls, server = self.calls, server_cpu_seconds(self.store)
        started = time.process_time()
        for _ in range(sends):
            self.send()
        return ((time.process_time() - started) / sends * 1e3,
                (self.calls - calls) / sends,
                (server_cpu_seconds(self.store) - server) / sends * 1e3)

    def close(self) -> None:
        self.task_store.close()


_COUNTING: Dict[Tuple[type, str], List["Agent"]] = {}


def _count_calls(cls: type, name: str, agent: "Agent") -> None:
    """Count calls of ``cls.name`` for ``agent`` (one wrapper per method, whichever
    agent's store made the call: agents are measured one at a time)."""
    agents = _COUNTING.setdefault((cls, name), [])
    if not agents:
        original = getattr(cls, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            for each in agents:
                each.calls += 1
            return original(*args, **kwargs)

        setattr(cls, name, counted)
    agents.append(agent)


class Databases:
    """A database per SQL server and a Redis prefix for this run, dropped at the end."""

    def __init__(self, args: argparse.Namespace, folder: str) -> None:
        self.args, self.folder = args, folder
        self.name = f"a2a_send_cost_{uuid.uuid4().hex[:8]}"
        self.made: List[Tuple[str, Callable[[], None]]] = []

    def url(self, store: str) -> str:
        if store == "memory":
            return "memory://"
        if store == "sqlite":
            return f"sqlite:///{self.folder}/tasks.db"
        if store == "redis":
            return f"{self.args.redis_url}?prefix={self.name}"
        import sqlalchemy as sa

        server = self.args.postgres_url if store == "postgresql" else self.args.mariadb_url
        admin_url = server.replace("postgresql://", "postgresql+psycopg://", 1).replace(
            "mysql://", "mysql+pymysql://", 1)
        quote = '"' if store == "postgresql" else "`"
        admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {quote}{self.name}{quote}")

        def drop() -> None:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"DROP DATABASE IF EXISTS {quote}{self.name}{quote}")
            admin.dispose()

        self.made.append((store, drop))
        base = server.rsplit("/", 1)[0] if store == "postgresql" else server.rstrip("/")
        return f"{base}/{self.name}"

    def drop(self, agents: Dict[str, Agent]) -> None:
        redis_store = agents.get("redis")
        if redis_store is not None:
            client = redis_store.task_store._redis  # type: ignore[attr-defined]
            for key in client.scan_iter(match=f"{self.name}:*", count=1000):
                client.delete(key)
        for agent in agents.values():
            agent.close()
        for _, drop in self.made:
            drop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--sends", type=int, default=300, help="sends per store per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured sends per store")
    parser.add_argument("--profile", default="", help="a store to profile after the rounds")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--mariadb-url", default="mysql://root@127.0.0.1:3306")
    args = parser.parse_args()
    stores = args.stores.split(",")
    if stores[0] != "memory":
        parser.error("--stores must start with memory (the baseline)")
    with tempfile.TemporaryDirectory(prefix="a2a-send-cost-") as folder:
        databases = Databases(args, folder)
        agents: Dict[str, Agent] = {}
        try:
            for store in stores:
                agents[store] = Agent(store, databases.url(store))
                for _ in range(args.warmup):
                    agents[store].send()
            cpu: Dict[str, List[float]] = {store: [] for store in stores}
            trips: Dict[str, List[float]] = {store: [] for store in stores}
            server: Dict[str, List[float]] = {store: [] for store in stores}
            for index in range(args.rounds):
                for store in stores:
                    ms, calls, server_ms = agents[store].measure(args.sends)
                    cpu[store].append(ms)
                    trips[store].append(calls)
                    server[store].append(server_ms)
                print(f"round {index + 1}/{args.rounds}: " + ", ".join(
                    f"{store} {cpu[store][-1]:.2f} ms" for store in stores), file=sys.stderr)
            print(f"CPU per blocking SendMessage in one process (echo agent, gevent), "
                  f"medians of {args.rounds} rounds of {args.sends}")
            print(f"{'store':12} {'CPU ms':>8} {'vs memory':>10} {'round trips':>12} "
                  f"{'database CPU ms':>16}")
            base = statistics.median(cpu["memory"])
            for store in stores:
                median = statistics.median(cpu[store])
                database = (f"{statistics.median(server[store]):16.2f}"
                            if store in SERVER_PROCESS else f"{'-':>16}")
                print(f"{store:12} {median:8.2f} {median / base:9.2f}x "
                      f"{statistics.median(trips[store]):12.1f} {database}")
            if args.profile:
                profile(agents[args.profile], args.sends)
        finally:
            databases.drop(agents)
    return 0


def profile(agent: Agent, sends: int) -> None:
    """Where one store's sends spend their CPU (cProfile, by own time)."""
    profiler = cProfile.Profile(time.process_time)  # CPU, not the waits for the store
    profiler.enable()
    for _ in range(sends):
        agent.send()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(25)
    print(f"\nprofile of {sends} sends on {agent.store} (cProfile inflates every figure):")
    print(out.getvalue())


if __name__ == "__main__":
    sys.exit(main())
