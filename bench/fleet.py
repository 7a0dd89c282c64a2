"""Fleet: several hosts and Celery workers on one PostgreSQL with a standby, through
failovers and killed workers.  Not a test and not in CI.

It starts a primary and a synchronous standby of its own
(``tests/support/pg_standby.py``), ``--hosts`` gunicorn masters (2 gevent workers
each, ``--no-control-socket``: separate "hosts" on loopback) and ``--celery`` Celery
workers (prefork, 2 processes each; the broker is the local Redis, a queue of the
run's own), all serving ``bench/fleet_app.py`` on the URL naming both databases.
Then, for ``--minutes``, an open loop of ``--rate`` operations a second, spread
over the hosts:

* stream   SendStreamingMessage ``ticks 10`` (web tier), read to its end: its event
           ids must run 1, 2, 3... with no gap or repeat, the last COMPLETED
* send     a blocking SendMessage ``ticks 5`` (web tier): COMPLETED
* push     the same with a webhook to a local receiver: each must get a push
* celery   SendMessage ``ticks 10`` to the Celery agent, returnImmediately: read
           back at the end

Every ``--failover-every`` minutes the primary is stopped and the standby promoted,
and the old primary re-joins as the new one's standby (a fresh ``pg_basebackup``):
the roles swap.  Every ``--kill-every`` minutes a Celery worker is killed with
SIGKILL (its whole process group) and a new one started.

Each minute: operations, tasks acknowledged, completed, failed, refused ("task
store unavailable" before any task existed: nothing acknowledged), p50/p99 (from
the moment an operation was due), RSS of the web workers and of the Celery
workers.  At the end every acknowledged task is read back: completed, failed (each
failure's reason), lost (not found: must be 0), and the runs beyond one per task
(from the agent's own record of each run; after a kill a ``rerun_safe`` task may
run again)::

    python bench/fleet.py --minutes 30                        # failover every 5, kill every 7
    python bench/fleet.py --minutes 3 --failover-every 1 --kill-every 1.5
    python bench/fleet.py --minutes 10 --driver pg8000
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Set, Tuple

import requests

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests.support.pg_standby (bench/soak.py: this folder)
    sys.path.insert(0, str(ROOT))

from soak import (UNAVAILABLE, free_port, message, percentile, rss_mib,  # noqa: E402
                  start_gunicorn, stop, workers_of)

V1 = {"A2A-Version": "1.0"}
MIX = ("stream", "send", "push", "celery")
BROKER = "redis://127.0.0.1:6379/12"


class Failure(Exception):
    """An operation did not do what it must; ``task_id`` once a task was acknowledged."""

    def __init__(self, text: str, task_id: Optional[str] = None) -> None:
        super().__init__(text)
        self.task_id = task_id


# ------------------------------------------------------------ processes

def start_host(env: Dict[str, str], log: Path) -> Tuple["subprocess.Popen[bytes]", str]:
    """A gunicorn master of 2 gevent workers serving the fleet app: (process, URL)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", "2", "-b", f"127.0.0.1:{port}",
         "--no-control-socket", "--log-level", "warning", "--graceful-timeout", "5",
         "bench.fleet_app:app"],
        cwd=ROOT, env={**os.environ, **env}, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
        start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            requests.get(url + "/.well-known/agent-card.json", timeout=2)
            return proc, url
        except requests.RequestException:
            time.sleep(0.2)
    stop(proc)
    raise RuntimeError(f"a host did not start; see {log}")


def start_celery(env: Dict[str, str], log: Path) -> "subprocess.Popen[bytes]":
    """A Celery worker of 2 prefork processes on the run's queue, once it is ready."""
    start = log.stat().st_size if log.exists() else 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "bench.fleet_app:celery", "worker", "-P",
         "prefork", "-c", "2", "-Q", env["CELERY_QUEUE"], "--without-mingle",
         "--without-gossip", "--loglevel=INFO"],
        cwd=ROOT, env={**os.environ, **env}, stdout=open(log, "ab"), stderr=subprocess.STDOUT,
        start_new_session=True)
    deadline = time.monotonic() + 60
    while "ready." not in log.read_text(errors="replace")[start:]:
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise RuntimeError(f"a Celery worker did not start; see {log}")
        time.sleep(0.2)
    return proc


def tree(pid: int) -> List[int]:
    out, todo = [], [pid]
    while todo:
        current = todo.pop()
        out.append(current)
        todo.extend(workers_of(current))
    return out


# ------------------------------------------------------------ operations

@dataclass
class Client:
    hosts: List[str]
    receiver: str
    local: threading.local = field(default_factory=threading.local)
    hooks: List[str] = field(default_factory=list)

    @property
    def session(self) -> requests.Session:
        session = getattr(self.local, "session", None)
        if session is None:
            session = self.local.session = requests.Session()
        return session

    def rpc(self, host: str, method: str, params: Dict[str, Any], path: str = "/a2a",
            task_id: Optional[str] = None) -> Dict[str, Any]:
        response = self.session.post(host + path, json={
            "jsonrpc": "2.0", "id": 1, "method": method, "params": params},
            headers=V1, timeout=90)
        if response.status_code != 200:
            raise Failure(f"{method}: HTTP {response.status_code}", task_id)
        body = response.json()
        if "error" in body:
            raise Failure(f"{method}: {body['error'].get('message')}", task_id)
        result: Dict[str, Any] = body["result"]
        return result


def op_stream(client: Client, host: str) -> Tuple[str, str]:
    task_id: Optional[str] = None
    ids: List[int] = []
    last = ""
    with client.session.post(host + "/a2a", json={
            "jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
            "params": {"message": message("ticks 10")}}, headers=V1, timeout=90,
            stream=True) as response:
        if response.status_code != 200:
            raise Failure(f"stream: HTTP {response.status_code}")
        for line in response.iter_lines(decode_unicode=True):
            if line.startswith("id:"):
                ids.append(int(line[3:].strip()))
            elif line.startswith("data:"):
                last = line[5:]
                if task_id is None:
                    task = json.loads(last).get("result", {}).get("task")
                    task_id = task["id"] if task else None
    if task_id is None:
        raise Failure("stream: " + (UNAVAILABLE if UNAVAILABLE in last else "no task"))
    if ids != list(range(1, len(ids) + 1)):
        raise Failure(f"stream: event ids with a gap or a repeat: {ids}", task_id)
    if "TASK_STATE_COMPLETED" not in last:
        raise Failure("stream: ended without COMPLETED: " + last[:200], task_id)
    return task_id, "/a2a"


def op_send(client: Client, host: str, push: bool = False) -> Tuple[str, str]:
    params: Dict[str, Any] = {"message": message("ticks 5")}
    hook = f"/hook/{uuid.uuid4().hex}"
    if push:
        params["configuration"] = {"taskPushNotificationConfig": {
            "url": client.receiver + hook, "token": "fleet"}}
    task = client.rpc(host, "SendMessage", params)["task"]
    if push:
        client.hooks.append(hook)  # acknowledged: its push must arrive
    if task["status"]["state"] != "TASK_STATE_COMPLETED":
        raise Failure(f"send: {task['status']['state']}", task["id"])
    return str(task["id"]), "/a2a"


def op_celery(client: Client, host: str) -> Tuple[str, str]:
    task = client.rpc(host, "SendMessage", {"message": message("ticks 10"), "configuration": {
        "returnImmediately": True}}, path="/celery")["task"]
    return str(task["id"]), "/celery"


# ------------------------------------------------------------ recording

@dataclass
class Minute:
    latencies: List[float] = field(default_factory=list)
    acknowledged: int = 0
    completed: int = 0
    failed: int = 0
    refused: int = 0


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current = Minute()
        #: Every task acknowledged: (id, the path of its agent).
        self.tasks: List[Tuple[str, str]] = []
        self.reasons: Dict[str, int] = {}

    def record(self, latency: float, error: Optional[str],
               task: Optional[Tuple[str, str]]) -> None:
        with self.lock:
            minute = self.current
            minute.latencies.append(latency)
            if task is not None:
                self.tasks.append(task)
                minute.acknowledged += 1
                if error is None:
                    minute.completed += 1
            if error is not None:
                if task is None and UNAVAILABLE in error:
                    minute.refused += 1
                else:
                    minute.failed += 1
                self.reasons[error] = self.reasons.get(error, 0) + 1

    def cut(self) -> Minute:
        with self.lock:
            minute, self.current = self.current, Minute()
        return minute


def run_one(client: Client, name: str, host: str, due: float, recorder: Recorder) -> None:
    error: Optional[str] = None
    task: Optional[Tuple[str, str]] = None
    try:
        if name == "stream":
            task = op_stream(client, host)
        elif name == "celery":
            task = op_celery(client, host)
        else:
            task = op_send(client, host, push=name == "push")
    except Failure as exc:
        error = str(exc)
        task = (exc.task_id, "/a2a") if exc.task_id else None
    except (requests.RequestException, ValueError) as exc:
        error = f"{name}: {type(exc).__name__}"
    recorder.record(time.monotonic() - due, error, task)


# ------------------------------------------------------------ chaos

class Chaos(threading.Thread):
    """Every ``every`` seconds, ``act()``; what it said, kept in ``log``."""

    def __init__(self, every: float, act: Any) -> None:
        super().__init__(daemon=True)
        self.every, self.act = every, act
        self.done = threading.Event()
        self.count = 0
        self.log: List[str] = []

    def run(self) -> None:
        while self.every > 0 and not self.done.wait(self.every):
            try:
                said = self.act()
            except Exception as exc:  # reported, and the run goes on
                said = f"FAILED: {exc!r}"
            self.count += 1
            self.log.append(said)
            print("   " + said, flush=True)


# ------------------------------------------------------------ the run

def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--failover-every", type=float, default=5.0, help="minutes (0: never)")
    parser.add_argument("--kill-every", type=float, default=7.0, help="minutes (0: never)")
    parser.add_argument("--hosts", type=int, default=4)
    parser.add_argument("--celery", type=int, default=2)
    parser.add_argument("--rate", type=float, default=6.0, help="operations a second")
    parser.add_argument("--broker", default=BROKER)
    parser.add_argument("--driver", choices=["psycopg", "pg8000"], default="psycopg",
                        help="the store's PostgreSQL driver (the LISTEN connection is pg8000's)")
    args = parser.parse_args(argv)
    if not 0 < args.minutes <= 24 * 60:
        parser.error("--minutes must be in (0, 1440]")
    from tests.support.pg_standby import StandbyPair

    work = Path(tempfile.mkdtemp(prefix="a2a-fleet-"))
    runs = work / "runs"
    runs.mkdir()
    queue = f"a2a-fleet-{uuid.uuid4().hex[:8]}"
    print(f"fleet: logs in {work}", flush=True)
    hosts: List[Tuple["subprocess.Popen[bytes]", str]] = []
    workers: List["subprocess.Popen[bytes]"] = []
    receiver_proc = None
    with StandbyPair() as pair:
        url = pair.url.replace("postgresql://", f"postgresql+{args.driver}://", 1)
        env = {"FLASK_A2A_STORE": url, "FLASK_A2A_PUSH_ALLOW_PRIVATE": "1",
               "CELERY_BROKER_URL": args.broker, "CELERY_QUEUE": queue,
               "FLEET_RUNS_DIR": str(runs)}
        try:
            receiver_proc, receiver = start_gunicorn("bench.push_receiver:app", 1, {})
            for n in range(args.hosts):
                hosts.append(start_host(env, work / f"host{n + 1}.log"))
            for n in range(args.celery):
                workers.append(start_celery(env, work / f"celery{n + 1}.log"))
            killed: Set[int] = set()
            kills = [0]

            def failover() -> str:
                began = time.monotonic()
                pair.failover()
                promoted = time.monotonic() - began
                pair.rejoin()
                return (f"failover {pair.failovers}: primary now :{pair.primary.port} "
                        f"(stopped and promoted in {promoted:.1f} s, old primary re-joined "
                        f"as standby in {time.monotonic() - began - promoted:.1f} s)")

            def kill() -> str:
                index = kills[0] % len(workers)
                kills[0] += 1
                victim = workers[index]
                pids = tree(victim.pid)
                os.killpg(victim.pid, signal.SIGKILL)
                victim.wait(10)
                killed.update(pids)
                workers[index] = start_celery(env, work / f"celery{index + 1}.log")
                return f"killed Celery worker {index + 1} (pids {pids}) with SIGKILL; restarted"

            client = Client([url for _, url in hosts], receiver)
            recorder = Recorder()
            print(f"store {url}", flush=True)
            print(f"{args.hosts} hosts x 2 workers, {args.celery} Celery workers x 2, "
                  f"{args.rate:g} ops/s for {args.minutes:g} min; failover every "
                  f"{args.failover_every:g} min, kill every {args.kill_every:g} min", flush=True)
            print(HEADER, flush=True)
            chaos = [Chaos(args.failover_every * 60, failover), Chaos(args.kill_every * 60, kill)]
            for thread in chaos:
                thread.start()
            pool = ThreadPoolExecutor(max_workers=128)
            started = time.monotonic()
            end = started + args.minutes * 60
            next_cut = started + 60
            n = 0
            rows: List[str] = []
            while True:
                now = time.monotonic()
                if now >= next_cut or now >= end:
                    minute = recorder.cut()
                    web_rss = sum(rss_mib(pid) for proc, _ in hosts
                                  for pid in workers_of(proc.pid))
                    celery_rss = sum(rss_mib(pid) for proc in workers for pid in tree(proc.pid))
                    rows.append(
                        f"{len(rows) + 1:>3} {len(minute.latencies):>5} {minute.acknowledged:>5} "
                        f"{minute.completed:>5} {minute.failed:>4} {minute.refused:>5} "
                        f"{percentile(minute.latencies, 50) * 1000:>7.0f} "
                        f"{percentile(minute.latencies, 99) * 1000:>7.0f} {web_rss:>8.0f} "
                        f"{celery_rss:>7.0f} {chaos[0].count:>3} {chaos[1].count:>4}")
                    print(rows[-1], flush=True)
                    next_cut += 60
                    if now >= end:
                        break
                due = started + n / args.rate
                if due > now:
                    time.sleep(min(due - now, max(0.0, next_cut - now)))
                    continue
                pool.submit(run_one, client, MIX[n % len(MIX)],
                            client.hosts[(n // len(MIX)) % len(client.hosts)], due, recorder)
                n += 1
            for thread in chaos:
                thread.done.set()
            for thread in chaos:
                thread.join(300)
            pool.shutdown(wait=True)
            report(client, recorder, runs, killed)
        finally:
            for proc in workers:
                stop(proc)
            for proc, _ in hosts:
                stop(proc)
            if receiver_proc is not None:
                stop(receiver_proc)
            delete_queue(args.broker, queue)
    return 0


HEADER = (f"{'min':>3} {'ops':>5} {'ackd':>5} {'done':>5} {'fail':>4} {'refus':>5} "
          f"{'p50 ms':>7} {'p99 ms':>7} {'web MiB':>8} {'cel MiB':>7} {'fo':>3} {'kill':>4}")


def report(client: Client, recorder: Recorder, runs: Path, killed: Set[int]) -> None:
    """Every acknowledged task read back (waiting up to two minutes for the last ones
    to end), the failures' reasons, lost pushes and repeated runs."""
    terminal = ("TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
                "TASK_STATE_REJECTED")
    host = client.hosts[0]
    pending = dict(recorder.tasks)
    states: Dict[str, Tuple[str, str]] = {}
    deadline = time.monotonic() + 120
    while pending:
        for task_id, path in list(pending.items()):
            try:
                task = client.rpc(host, "GetTask", {"id": task_id, "historyLength": 0}, path)
                state = task["status"]["state"]
                why = "".join(part.get("text", "") for part in
                              (task["status"].get("message") or {}).get("parts", []))
            except Failure as exc:
                state, why = ("LOST" if "not found" in str(exc).lower() else "UNREADABLE",
                              str(exc))
            if state in terminal or state in ("LOST",) or time.monotonic() > deadline:
                states[task_id] = (state, why)
                del pending[task_id]
        if pending:
            time.sleep(1)
    counts: Dict[str, int] = {}
    for state, _ in states.values():
        counts[state] = counts.get(state, 0) + 1
    print(f"\nacknowledged {len(recorder.tasks)}: " + ", ".join(
        f"{count} {state}" for state, count in sorted(counts.items())), flush=True)
    print(f"lost (acknowledged, not found): {counts.get('LOST', 0)}")
    failed: Dict[str, int] = {}
    for task_id, (state, why) in states.items():
        if state != "TASK_STATE_COMPLETED":
            key = f"{state}: {why[:160]}"
            failed[key] = failed.get(key, 0) + 1
    for text, count in sorted({**failed, **recorder.reasons}.items(), key=lambda kv: -kv[1]):
        print(f"  {count} x {text}")
    hooks_missing = 0
    try:
        seen = requests.get(client.receiver + "/count", timeout=10).json()["last"]
        hooks_missing = sum(hook not in seen for hook in client.hooks)
    except requests.RequestException:
        hooks_missing = -1
    print(f"webhooks without a push: {hooks_missing} of {len(client.hooks)}")
    repeated = after_kill = 0
    for record in runs.iterdir():
        pids = [int(line) for line in record.read_text().split()]
        repeated += max(0, len(pids) - 1)
        after_kill += sum(1 for pid in pids[:-1] if pid in killed)
    print(f"runs beyond one per task: {repeated} ({after_kill} after their worker was "
          "killed)", flush=True)


def delete_queue(broker: str, queue: str) -> None:
    try:
        import kombu

        with kombu.Connection(broker, connect_timeout=3) as connection:
            connection.default_channel.queue_delete(queue)
    except Exception as exc:  # the broker is shared: say so, do not fail the report
        print(f"could not delete the queue {queue}: {exc}")


if __name__ == "__main__":
    sys.exit(main())
