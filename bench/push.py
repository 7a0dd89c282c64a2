#!/usr/bin/env python
"""Benchmark push delivery: webhook POSTs per second and lag, against plain POSTs.

One ``gunicorn -k gevent -w 1`` agent (``examples.conformance_agent``, memory or
sqlite store, pinned to ``--server-cpu``) gets ``--tasks`` tasks, each with a
webhook, each task making 5 events (``tck-stream-artifact-chunked``).  A
receiver (one gunicorn gevent worker, ``bench/push_receiver.py``, pinned to
``--client-cpu`` with this process) counts what arrives.  Measured:

* delivered pushes per second, from the first send to the last push received;
* lag: from a task's completion (its blocking SendMessage returned) to its last
  push arriving, median and p90;
* the ceiling, in the same process: the same number of POSTs of the same size
  sent by one ``requests.Session`` per concurrent task straight to the receiver.

Each figure is the median of ``--repeat`` runs; the ratio is pushes/s over the
ceiling's POSTs/s.  No target: the numbers say what a webhook costs.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Dict, List, Tuple

import requests

ROOT = Path(__file__).resolve().parent.parent
EVENTS_PER_TASK = 5


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(app: str, cpu: str, env: Dict[str, str]) -> Tuple[subprocess.Popen, str]:
    port = free_port()
    cmd = ["taskset", "-c", cpu, sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", "1",
           "-b", f"127.0.0.1:{port}", "--log-level", "warning", app]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, **env},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            requests.get(url + "/count", timeout=2)
            return proc, url
        except requests.RequestException:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{app} did not start")


def received(receiver: str) -> Dict[str, float]:
    return requests.get(receiver + "/count", timeout=10).json()


def run_pushes(agent: str, receiver: str, tasks: int, concurrency: int) -> Tuple[float, List[float]]:
    requests.post(receiver + "/reset", timeout=10)
    run = uuid.uuid4().hex[:8]

    def one(i: int) -> float:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"role": "ROLE_USER", "messageId": f"tck-stream-artifact-chunked-{run}-{i}",
                        "parts": [{"text": "go"}]},
            "configuration": {"taskPushNotificationConfig": {"url": f"{receiver}/hook/{run}-{i}"}}}}
        answer = requests.post(agent + "/a2a", json=body, headers={"A2A-Version": "1.0"},
                               timeout=60).json()
        assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", answer
        return time.time()

    started = time.time()
    with ThreadPoolExecutor(concurrency) as pool:
        done_at = list(pool.map(one, range(tasks)))
    expected = tasks * EVENTS_PER_TASK
    deadline = time.monotonic() + 120
    while True:
        counts = received(receiver)
        if counts["total"] >= expected or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    if counts["total"] < expected:
        raise RuntimeError(f"only {counts['total']} of {expected} pushes arrived")
    lags = [counts["last"][f"/hook/{run}-{i}"] - done_at[i] for i in range(tasks)]
    return expected / (counts["latest"] - started), lags


def run_ceiling(receiver: str, tasks: int, concurrency: int) -> float:
    requests.post(receiver + "/reset", timeout=10)
    payload = json.dumps({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {
        "state": "TASK_STATE_WORKING", "timestamp": "2026-01-01T00:00:00.000Z"}}}).encode()

    def one(i: int) -> None:
        with requests.Session() as session:
            for _ in range(EVENTS_PER_TASK):
                session.post(f"{receiver}/hook/c-{i}", data=payload,
                             headers={"Content-Type": "application/a2a+json"}, timeout=30)

    started = time.time()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, range(tasks)))
    return tasks * EVENTS_PER_TASK / (time.time() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", choices=("memory", "sqlite"), default="memory")
    parser.add_argument("--server-cpu", default="0")
    parser.add_argument("--client-cpu", default="1")
    opts = parser.parse_args()
    os.sched_setaffinity(0, {int(c) for c in opts.client_cpu.split(",")})
    with tempfile.TemporaryDirectory() as tmp:
        store = "memory://" if opts.store == "memory" else f"sqlite:///{tmp}/tasks.db"
        receiver_proc, receiver = start("bench.push_receiver:app", opts.client_cpu, {})
        agent_proc, agent = start("examples.conformance_agent:app", opts.server_cpu, {
            "FLASK_A2A_STORE": store, "FLASK_A2A_PUSH_ALLOW_PRIVATE": "1"})
        try:
            rates, lags, ceilings = [], [], []
            for _ in range(opts.repeat):
                rate, lag = run_pushes(agent, receiver, opts.tasks, opts.concurrency)
                rates.append(rate)
                lags.extend(lag)
                ceilings.append(run_ceiling(receiver, opts.tasks, opts.concurrency))
        finally:
            for proc in (agent_proc, receiver_proc):
                proc.terminate()
                proc.wait(10)
    lags.sort()
    rate, ceiling = statistics.median(rates), statistics.median(ceilings)
    print(f"store={opts.store} tasks={opts.tasks} events/task={EVENTS_PER_TASK} "
          f"concurrency={opts.concurrency} repeat={opts.repeat}")
    print(f"pushes delivered/s   {rate:8.0f}   (runs: {', '.join(f'{r:.0f}' for r in rates)})")
    print(f"plain POSTs/s        {ceiling:8.0f}   (runs: {', '.join(f'{c:.0f}' for c in ceilings)})")
    print(f"ratio                {rate / ceiling:8.2f}")
    print(f"lag after completion median {statistics.median(lags) * 1000:.1f} ms, "
          f"p90 {lags[int(len(lags) * 0.9)] * 1000:.1f} ms")


if __name__ == "__main__":
    main()
