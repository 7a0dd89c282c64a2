#!/usr/bin/env python
"""What running executors on Celery costs against running them inline.

``examples/celery_agent.py`` behind one ``gunicorn -k gevent`` worker, its
executor (an echo) run inline, then by 1, 2 and 4 Celery worker processes
(prefork).  For each: the latency of a blocking SendMessage sent alone (median),
then a burst of N non-blocking sends from 16 client threads, timed until every
task completed; with the web worker's CPU per send and the Celery processes' CPU
per task (from ``/proc``); completion is read with one ListTasks call every 50 ms.

    python bench/celery_bench.py [--tasks 1000] [--latency 50]
        [--broker redis://127.0.0.1:6379/12] [--store sqlite:////tmp/x.db]

The store defaults to a fresh SQLite file (one host); each run uses a queue of
its own on the broker.
"""
from __future__ import annotations

import argparse
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional

import requests

ROOT = Path(__file__).resolve().parent.parent
HEADERS = {"A2A-Version": "1.0"}
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and its reaped children, in seconds."""
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return sum(int(v) for v in fields[11:15]) / TICK


def children(pid: int) -> List[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as handle:
        return [int(p) for p in handle.read().split()]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(cmd: List[str], env: Dict[str, str], log: Path) -> subprocess.Popen:  # type: ignore[type-arg]
    return subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env}, stdout=open(log, "wb"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def stop(proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def send(session: requests.Session, url: str, text: str, immediately: bool) -> Dict[str, Any]:
    params: Dict[str, Any] = {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                                          "parts": [{"text": text}]}}
    if immediately:
        params["configuration"] = {"returnImmediately": True}
    answer = session.post(url + "/a2a", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                                               "params": params}, headers=HEADERS, timeout=60)
    return dict(answer.json()["result"]["task"])


def completed(session: requests.Session, url: str) -> int:
    """How many tasks are COMPLETED (one ListTasks call)."""
    answer = session.post(url + "/a2a", json={
        "jsonrpc": "2.0", "id": 1, "method": "ListTasks",
        "params": {"status": "TASK_STATE_COMPLETED", "pageSize": 1, "historyLength": 0}},
        headers=HEADERS, timeout=60)
    return int(answer.json()["result"]["totalSize"])


def measure(runner: str, processes: int, args: argparse.Namespace, tmp: Path) -> Dict[str, float]:
    queue = f"a2a-bench-{uuid.uuid4().hex[:8]}"
    store = args.store or f"sqlite:///{tmp}/{queue}.db"
    env = {"FLASK_A2A_STORE": store, "FLASK_A2A_RUNNER": runner,
           "CELERY_BROKER_URL": args.broker, "CELERY_QUEUE": queue}
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    web = start([sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", "1", "-b",
                 f"127.0.0.1:{port}", "--log-level", "warning", "examples.celery_agent:app"],
                env, tmp / f"web-{queue}.log")
    worker: Optional[subprocess.Popen] = None  # type: ignore[type-arg]
    try:
        if runner == "celery":
            log = tmp / f"worker-{queue}.log"
            worker = start([sys.executable, "-m", "celery", "-A", "examples.celery_agent:celery",
                            "worker", "-c", str(processes), "-Q", queue, "--without-mingle",
                            "--without-gossip", "--loglevel=WARNING"], env, log)
        deadline = time.monotonic() + 60
        while True:
            try:
                requests.get(url + "/.well-known/agent-card.json", timeout=5)
                break
            except requests.ConnectionError:
                assert time.monotonic() < deadline, "the web tier did not start"
                time.sleep(0.1)
        session = requests.Session()
        for _ in range(20):  # warm-up (and the worker is ready when these complete)
            send(session, url, "warm", False)
        latencies = []
        for _ in range(args.latency):
            began = time.perf_counter()
            task = send(session, url, "hello", False)
            latencies.append(time.perf_counter() - began)
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        before = completed(session, url)
        web_pid, = children(web.pid)
        pids = [worker.pid] + children(worker.pid) if worker is not None else []
        web_cpu, work_cpu = cpu_seconds(web_pid), sum(cpu_seconds(p) for p in pids)
        began = time.perf_counter()
        sessions = [requests.Session() for _ in range(16)]
        with ThreadPoolExecutor(16) as pool:
            ids = list(pool.map(lambda n: send(sessions[n % 16], url, f"burst {n}", True)["id"],
                                range(args.tasks)))
        sent = time.perf_counter() - began
        web_send_cpu = cpu_seconds(web_pid) - web_cpu
        assert len(ids) == args.tasks
        while completed(session, url) < before + args.tasks:
            assert time.perf_counter() - began < 600, "the burst did not complete"
            time.sleep(0.05)
        total = time.perf_counter() - began
        return {"latency_ms": statistics.median(latencies) * 1000,
                "send_cpu_ms": web_send_cpu / args.tasks * 1000,
                "worker_cpu_ms": (sum(cpu_seconds(p) for p in pids) - work_cpu) / args.tasks * 1000
                if pids else 0.0,
                "sent_s": sent, "done_s": total, "rate": args.tasks / total}
    finally:
        if worker is not None:
            stop(worker)
        stop(web)
        import kombu

        with kombu.Connection(args.broker, connect_timeout=3) as connection:
            connection.default_channel.queue_delete(queue)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--latency", type=int, default=50)
    parser.add_argument("--broker", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--store", default="")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for runner, processes in (("inline", 0), ("celery", 1), ("celery", 2), ("celery", 4)):
            result = measure(runner, processes, args, Path(tmp))
            name = "inline" if runner == "inline" else f"celery x{processes}"
            rows.append((name, result))
            print(f"{name}: {result}", file=sys.stderr)
    print(f"{args.tasks} tasks, store {args.store or 'sqlite (fresh file)'}, "
          f"broker {args.broker}")
    print(f"{'runner':<11} {'alone ms':>9} {'web CPU/send ms':>16} {'worker CPU/task ms':>19} "
          f"{'burst sent s':>13} {'all done s':>11} {'tasks/s':>8}")
    for name, r in rows:
        print(f"{name:<11} {r['latency_ms']:>9.1f} {r['send_cpu_ms']:>16.2f} "
              f"{r['worker_cpu_ms']:>19.2f} {r['sent_s']:>13.1f} {r['done_s']:>11.1f} "
              f"{r['rate']:>8.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
