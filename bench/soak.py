"""Soak: hours of production in minutes, on loopback, to find what leaks or drifts.

Not a test and not in CI.  For each store (SQLite with two gevent workers, then
Redis with two), it starts ``gunicorn -k gevent`` serving ``bench/soak_app.py``
and a local webhook receiver, measures the highest rate this machine sustains
for the mix below (closed loop, 20 s), then runs ``--minutes`` at 80 % of it:

* send      a blocking SendMessage
* stream    SendStreamingMessage of 5 chunks, read to its end
* subscribe a 0.3 s task started with returnImmediately, then SubscribeToTask to its end
* cancel    a task that waits for cancel, then CancelTask (must answer CANCELED)
* push      a blocking SendMessage with a webhook to the local receiver (each
            webhook must have had a push by the end)

Each minute it prints the operations, errors, p50/p99 latency (from the moment
an operation was due, so a backlog shows) and, per worker, RSS, open fds and
greenlets (the greenlets come from ``bench/soak_gunicorn.py``).  At the end:
RSS growth from minute 2 to the last minute, per worker (goal: under 10 %),
and fds and greenlets first to last (goal: flat).

With ``--store postgresql`` or ``--store mariadb`` the store is a database server of
the soak's own (``tests/support/dbservers.py``: its own port and directory, never the shared
service), restarted every ``--restart-every`` seconds (default 300; 0: never) while
the load runs: what a managed database's maintenance or failover does.  Within
``A2A_STORE_GRACE`` nothing acknowledged may be lost: the table also says, per minute,
the tasks the agent acknowledged (sent), those whose operation ended as it must
(completed), those that did not (failed), the sends refused with "task store
unavailable" while it was down (refused: nothing acknowledged, nothing lost) and the
tasks WORKING at the minute's end; at the end every acknowledged task is read back
(COMPLETED or CANCELED, none FAILED, none left WORKING).

Run::

    python bench/soak.py --minutes 10            # SQLite, then Redis
    python bench/soak.py --minutes 3 --store redis --redis redis://127.0.0.1:6379/0
    python bench/soak.py --minutes 30 --store postgresql --restart-every 300
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

import requests

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests.support.dbservers, for --store postgresql|mariadb
    sys.path.insert(0, str(ROOT))
V1 = {"A2A-Version": "1.0"}
MIX = ("send", "stream", "subscribe", "cancel", "push")
LOOPBACK = ("127.0.0.1", "::1", "localhost")


# ------------------------------------------------------------ processes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_gunicorn(app: str, workers: int, env: Dict[str, str],
                   config: Optional[str] = None) -> Tuple["subprocess.Popen[bytes]", str]:
    port = free_port()
    cmd = [sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", str(workers),
           "-b", f"127.0.0.1:{port}", "--log-level", "warning", "--graceful-timeout", "5"]
    if config:
        cmd += ["-c", config]
    proc = subprocess.Popen(cmd + [app], cwd=ROOT, env={**os.environ, **env},
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            requests.get(url + "/.well-known/agent-card.json" if "soak_app" in app
                         else url + "/count", timeout=2)
            return proc, url
        except requests.RequestException:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"{app} did not start")


def stop(proc: "subprocess.Popen[bytes]") -> None:
    import signal

    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def workers_of(master: int) -> List[int]:
    try:
        with open(f"/proc/{master}/task/{master}/children") as handle:
            return sorted(int(pid) for pid in handle.read().split())
    except OSError:
        return []


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def greenlets(stats_dir: str, pid: int) -> Optional[int]:
    try:
        return int(Path(stats_dir, f"{pid}.greenlets").read_text())
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------ operations


#: What a send refused because the store is down says (nothing was acknowledged).
UNAVAILABLE = "task store is unavailable"


class Failure(Exception):
    """An operation did not do what it must; ``task_id`` once a task was acknowledged."""

    def __init__(self, text: str, task_id: Optional[str] = None) -> None:
        super().__init__(text)
        self.task_id = task_id


@dataclass
class Agent:
    url: str
    receiver: str
    session_local: threading.local = field(default_factory=threading.local)
    hooks: List[str] = field(default_factory=list)

    @property
    def session(self) -> requests.Session:
        session = getattr(self.session_local, "session", None)
        if session is None:
            session = self.session_local.session = requests.Session()
        return session

    def rpc(self, method: str, params: Dict[str, Any],
            task_id: Optional[str] = None) -> Dict[str, Any]:
        response = self.session.post(self.url + "/a2a", json={
            "jsonrpc": "2.0", "id": 1, "method": method, "params": params},
            headers=V1, timeout=60)
        if response.status_code != 200:
            raise Failure(f"{method}: HTTP {response.status_code}", task_id)
        body = response.json()
        if "error" in body:
            raise Failure(f"{method}: {body['error'].get('message')}", task_id)
        result: Dict[str, Any] = body["result"]
        return result

    def stream(self, method: str, params: Dict[str, Any],
               task_id: Optional[str] = None) -> str:
        """The stream's task id, once it ended with COMPLETED."""
        with self.session.post(self.url + "/a2a", json={
                "jsonrpc": "2.0", "id": 1, "method": method, "params": params},
                headers=V1, timeout=60, stream=True) as response:
            if response.status_code != 200:
                raise Failure(f"{method}: HTTP {response.status_code}", task_id)
            text = "".join(response.iter_content(chunk_size=None, decode_unicode=True))
        task_id = task_id or first_task_id(text)
        if "TASK_STATE_COMPLETED" not in text[-1000:]:
            error = UNAVAILABLE if UNAVAILABLE in text[-1000:] else "no COMPLETED"
            raise Failure(f"{method}: the stream ended: {error}", task_id)
        return task_id or ""


def first_task_id(text: str) -> Optional[str]:
    """The task id of a stream's first event (its task), if it had one."""
    for line in text.splitlines():
        if line.startswith("data:"):
            result = json.loads(line[5:]).get("result", {})
            task = result.get("task")
            return task["id"] if task else None
    return None


def message(text: str) -> Dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": text}]}


def op_send(agent: Agent) -> str:
    task = agent.rpc("SendMessage", {"message": message("quick")})["task"]
    if task["status"]["state"] != "TASK_STATE_COMPLETED":
        raise Failure(f"send: {task['status']['state']}", task["id"])
    return str(task["id"])


def op_stream(agent: Agent) -> str:
    return agent.stream("SendStreamingMessage", {"message": message("chunks 5")})


def op_subscribe(agent: Agent) -> str:
    task = agent.rpc("SendMessage", {"message": message("slow 0.3"),
                                     "configuration": {"returnImmediately": True}})["task"]
    return agent.stream("SubscribeToTask", {"id": task["id"]}, task["id"])


def op_cancel(agent: Agent) -> str:
    task = agent.rpc("SendMessage", {"message": message("wait"),
                                     "configuration": {"returnImmediately": True}})["task"]
    deadline = time.monotonic() + 60
    while True:  # as a client would: a cancel refused while the store is down is sent again
        try:
            canceled = agent.rpc("CancelTask", {"id": task["id"]}, task["id"])
            break
        except Failure as exc:
            if UNAVAILABLE not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(1)
    if canceled["status"]["state"] != "TASK_STATE_CANCELED":
        raise Failure(f"cancel: {canceled['status']['state']}", task["id"])
    return str(task["id"])


def op_push(agent: Agent) -> str:
    hook = f"/hook/{uuid.uuid4().hex}"
    task = agent.rpc("SendMessage", {"message": message("quick"), "configuration": {
        "taskPushNotificationConfig": {"url": agent.receiver + hook, "token": "soak"}}})["task"]
    agent.hooks.append(hook)  # acknowledged: its push must arrive
    if task["status"]["state"] != "TASK_STATE_COMPLETED":
        raise Failure(f"push: {task['status']['state']}", task["id"])
    return str(task["id"])


OPERATIONS: Dict[str, Callable[[Agent], str]] = {
    "send": op_send, "stream": op_stream, "subscribe": op_subscribe, "cancel": op_cancel,
    "push": op_push}


# ------------------------------------------------------------ recording


@dataclass
class Minute:
    latencies: List[float] = field(default_factory=list)
    errors: int = 0
    #: Tasks acknowledged; their operation ended as it must, or did not.
    sent: int = 0
    completed: int = 0
    failed: int = 0
    #: Operations refused with "task store unavailable" before any task existed.
    refused: int = 0


class Recorder:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current = Minute()
        self.messages: Dict[str, int] = {}
        #: Every task acknowledged, to read back at the end.
        self.tasks: List[str] = []
        #: Operations that took over 5 s: (seconds, name, task id, error).
        self.slow: List[Tuple[float, str, Optional[str], Optional[str]]] = []

    def record(self, latency: float, error: Optional[str], task_id: Optional[str] = None
               ) -> None:
        with self.lock:
            minute = self.current
            minute.latencies.append(latency)
            if task_id:
                self.tasks.append(task_id)
                minute.sent += 1
                if error is None:
                    minute.completed += 1
                else:
                    minute.failed += 1
            elif error is not None and UNAVAILABLE in error:
                minute.refused += 1
            if error is not None:
                minute.errors += 1
                self.messages[error] = self.messages.get(error, 0) + 1

    def cut(self) -> Minute:
        with self.lock:
            minute, self.current = self.current, Minute()
        return minute


def run_one(agent: Agent, name: str, due: float, recorder: Recorder) -> None:
    error = None
    task_id: Optional[str] = None
    began = time.monotonic()
    try:
        task_id = OPERATIONS[name](agent)
    except Failure as exc:
        error, task_id = str(exc), exc.task_id
    except requests.RequestException as exc:
        error = f"{name}: {type(exc).__name__}"
    took = time.monotonic() - began
    if took > 5:
        with recorder.lock:
            recorder.slow.append((took, name, task_id, error))
    recorder.record(time.monotonic() - due, error, task_id)


def max_rate(agent: Agent, seconds: float, concurrency: int) -> float:
    """Operations per second of the mix, closed loop."""
    done = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds
    recorder = Recorder()

    def loop(n: int) -> None:
        while time.monotonic() < deadline:
            run_one(agent, MIX[n % len(MIX)], time.monotonic(), recorder)
            n += 1
            with lock:
                done[0] += 1

    threads = [threading.Thread(target=loop, args=(n,)) for n in range(concurrency)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done[0] / (time.monotonic() - started)


def percentile(values: List[float], pct: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(pct / 100 * (len(ordered) - 1))))]


@dataclass
class Row:
    minute: int
    ops: int
    errors: int
    p50: float
    p99: float
    workers: List[Tuple[int, float, int, Optional[int]]]  # pid, RSS MiB, fds, greenlets
    sent: int = 0
    completed: int = 0
    failed: int = 0
    refused: int = 0
    working: int = -1  # tasks WORKING at the minute's end (-1: could not ask)
    restarts: int = 0


def working_now(agent: Agent) -> int:
    """How many tasks are WORKING right now (ListTasks' totalSize), -1 if unknown."""
    try:
        page = agent.rpc("ListTasks", {"status": "TASK_STATE_WORKING", "pageSize": 1})
        return int(page.get("totalSize", -1))
    except (Failure, requests.RequestException, ValueError):
        return -1


class Restarter(threading.Thread):
    """Restarts a database server (tests/support/dbservers.py) every ``every`` seconds."""

    def __init__(self, db: Any, every: float) -> None:
        super().__init__(daemon=True)
        self.db, self.every = db, every
        self.done = threading.Event()
        self.count = 0
        self.log: List[str] = []

    def run(self) -> None:
        started = time.monotonic()
        while not self.done.wait(self.every):
            began = time.monotonic()
            self.db.restart()
            self.count += 1
            self.log.append(f"restart {self.count} at {(began - started) / 60:.1f} min: "
                            f"{time.monotonic() - began:.1f} s down")
            print("   " + self.log[-1], flush=True)


def read_back(agent: Agent, task_ids: List[str]) -> Dict[str, int]:
    """The state of every acknowledged task now, counted."""
    counts: Dict[str, int] = {}

    def state(task_id: str) -> str:
        try:
            return str(agent.rpc("GetTask", {"id": task_id, "historyLength": 0})
                       ["status"]["state"])
        except (Failure, requests.RequestException) as exc:
            return f"unreadable ({exc})"

    with ThreadPoolExecutor(max_workers=8) as pool:
        for found in pool.map(state, task_ids):
            counts[found] = counts.get(found, 0) + 1
    return counts


def soak(store_label: str, env: Dict[str, str], workers: int, minutes: float,
         concurrency: int, db: Any = None, restart_every: float = 0.0) -> List[Row]:
    stats_dir = tempfile.mkdtemp(prefix="a2a-soak-")
    receiver_proc, receiver = start_gunicorn("bench.push_receiver:app", 1, {})
    agent_proc, url = start_gunicorn(
        "bench.soak_app:app", workers,
        {**env, "FLASK_A2A_PUSH_ALLOW_PRIVATE": "1", "SOAK_STATS_DIR": stats_dir},
        config=str(ROOT / "bench" / "soak_gunicorn.py"))
    rows: List[Row] = []
    recorder = Recorder()
    try:
        agent = Agent(url, receiver)
        rate = max_rate(agent, 20, concurrency)
        target = 0.8 * rate
        print(f"\n== {store_label}, {workers} workers: max {rate:.1f} ops/s; soaking "
              f"{minutes:g} min at {target:.1f} ops/s", flush=True)
        print(HEADER, flush=True)
        agent.hooks.clear()
        recorder.cut()
        restarter = None
        if db is not None and restart_every > 0:
            restarter = Restarter(db, restart_every)
            restarter.start()
        pool = ThreadPoolExecutor(max_workers=concurrency * 2)
        started = time.monotonic()
        end = started + minutes * 60
        next_cut = started + 60
        n = 0
        while True:
            now = time.monotonic()
            if now >= next_cut or now >= end:
                minute = recorder.cut()
                pids = workers_of(agent_proc.pid)
                row = Row(len(rows) + 1, len(minute.latencies), minute.errors,
                          percentile(minute.latencies, 50) * 1000,
                          percentile(minute.latencies, 99) * 1000,
                          [(pid, rss_mib(pid), open_fds(pid), greenlets(stats_dir, pid))
                           for pid in pids],
                          minute.sent, minute.completed, minute.failed, minute.refused,
                          working_now(agent), restarter.count if restarter else 0)
                rows.append(row)
                print(format_row(row), flush=True)
                next_cut += 60
                if now >= end:
                    break
            due = started + n / target
            if due > now:
                time.sleep(min(due - now, next_cut - now))
                continue
            pool.submit(run_one, agent, MIX[n % len(MIX)], due, recorder)
            n += 1
        if restarter is not None:
            restarter.done.set()
            restarter.join(120)
        pool.shutdown(wait=True)
        lost = lost_pushes(receiver, agent.hooks)
        print(format_summary(rows, lost, recorder.messages), flush=True)
        time.sleep(5)  # the last tasks end (a stream's, a subscribe's)
        states = read_back(agent, recorder.tasks)
        print(f"acknowledged tasks read back: {len(recorder.tasks)}: " + ", ".join(
            f"{count} {state}" for state, count in sorted(states.items())), flush=True)
        print(f"tasks WORKING now: {working_now(agent)}", flush=True)
        slow = sorted(recorder.slow, reverse=True)
        print(f"operations over 5 s: {len(slow)}" + "".join(
            f"\n  {took:.1f} s {name} {task_id} {error or ''}"
            for took, name, task_id, error in slow[:10]), flush=True)
    finally:
        stop(agent_proc)
        stop(receiver_proc)
    return rows


def lost_pushes(receiver: str, hooks: List[str], wait: float = 20.0) -> int:
    """Webhooks that never got a push (after up to ``wait`` seconds)."""
    deadline = time.monotonic() + wait
    while True:
        seen = requests.get(receiver + "/count", timeout=10).json()["last"]
        missing = [hook for hook in hooks if hook not in seen]
        if not missing or time.monotonic() > deadline:
            return len(missing)
        time.sleep(1)


HEADER = (f"{'min':>3} {'ops':>6} {'err':>4} {'p50 ms':>7} {'p99 ms':>7} {'sent':>6} "
          f"{'done':>6} {'fail':>4} {'refus':>5} {'WORK':>4} {'rst':>3}   "
          "per worker: RSS MiB / fds / greenlets")


def format_row(row: Row) -> str:
    cells = "  ".join(f"{rss:6.1f}/{fds:4d}/{g if g is not None else '?':>5}"
                      for _, rss, fds, g in row.workers)
    return (f"{row.minute:>3} {row.ops:>6} {row.errors:>4} {row.p50:>7.1f} {row.p99:>7.1f} "
            f"{row.sent:>6} {row.completed:>6} {row.failed:>4} {row.refused:>5} "
            f"{row.working:>4} {row.restarts:>3}   {cells}")


def format_summary(rows: List[Row], lost: int, messages: Dict[str, int]) -> str:
    lines = [f"errors: {sum(r.errors for r in rows)}; webhooks without a push: {lost}"]
    for text, count in sorted(messages.items(), key=lambda kv: -kv[1])[:5]:
        lines.append(f"  {count} x {text}")
    if len(rows) >= 3:
        base, last = rows[1], rows[-1]
        for index, (pid, rss, fds, green) in enumerate(base.workers):
            end = next((w for w in last.workers if w[0] == pid), None)
            if end is None:
                lines.append(f"worker {pid}: gone by the end (restarted?)")
                continue
            growth = (end[1] - rss) / rss * 100 if rss else 0.0
            lines.append(f"worker {index + 1} (pid {pid}): RSS growth minute 2 -> "
                         f"{last.minute}: {growth:+.1f} % ({rss:.1f} -> {end[1]:.1f} MiB); "
                         f"fds {rows[0].workers[index][2]} -> {end[2]}; "
                         f"greenlets {rows[0].workers[index][3]} -> {end[3]}")
    else:
        lines.append("RSS growth needs at least 3 minutes")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0,
                        help="soak time per store, after the rate measurement (default 10)")
    parser.add_argument("--store", choices=["sqlite", "redis", "both", "postgresql", "mariadb"],
                        default="both", help="both: SQLite, then Redis; postgresql and "
                        "mariadb: a server of the soak's own (tests/support/dbservers.py)")
    parser.add_argument("--restart-every", type=float, default=300.0,
                        help="with postgresql or mariadb: restart the database every this "
                        "many seconds (default 300; 0: never)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0",
                        help="the Redis to use (keys under a fresh prefix, deleted after)")
    parser.add_argument("--concurrency", type=int, default=16,
                        help="client threads for the rate measurement (twice that to soak)")
    args = parser.parse_args(argv)
    if not 0 < args.minutes <= 24 * 60:
        parser.error("--minutes must be in (0, 1440]")
    if args.store in ("redis", "both") and urlsplit(args.redis).hostname not in LOOPBACK:
        parser.error("loopback only: --redis must name 127.0.0.1, ::1 or localhost")
    if args.store in ("postgresql", "mariadb"):
        from tests.support import dbservers

        server = (dbservers.PostgresServer() if args.store == "postgresql"
                  else dbservers.MariaDBServer())
        with server as db:
            soak(f"{args.store}, restarted every {args.restart_every:g} s",
                 {"FLASK_A2A_STORE": db.url}, args.workers, args.minutes, args.concurrency,
                 db=db, restart_every=args.restart_every)
        return 0
    if args.store in ("sqlite", "both"):
        with tempfile.TemporaryDirectory(prefix="a2a-soak-") as directory:
            soak("SQLite", {"FLASK_A2A_STORE": f"sqlite:///{directory}/tasks.db"},
                 args.workers, args.minutes, args.concurrency)
    if args.store in ("redis", "both"):
        prefix = f"a2a-soak-{uuid.uuid4().hex[:8]}"
        try:
            soak("Redis", {"FLASK_A2A_STORE": f"{args.redis}?prefix={prefix}"},
                 args.workers, args.minutes, args.concurrency)
        finally:
            delete_prefix(args.redis, prefix)
    return 0


def delete_prefix(url: str, prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(f"{prefix}:*", count=1000))
    for start in range(0, len(keys), 500):
        client.delete(*keys[start:start + 500])


if __name__ == "__main__":
    sys.exit(main())
