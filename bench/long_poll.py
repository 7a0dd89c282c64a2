#!/usr/bin/env python
"""Long-polls: many clients waiting on one task with the A2A 1.1 draft's
``GetTask(currentGeneration=...)`` (docs/generations.rst).

A gunicorn of ``--workers`` gevent workers serves ``tests/support/generations_app.py``
(the 1.1 draft on) over ``--store``.  A task goes WORKING and waits; for each crowd
size of ``--polls`` (default 1 and 1000), every poller long-polls the task's current
generation, and once they are all held the agent emits one event (a WORKING status),
``--events`` times.  Per crowd it prints the store calls per event (reads, loads,
heads, waits: counted in the workers), how long the answers took from the event
(p50, p99) and whether every poller got the event's generation.  The store calls per
event should not grow with the crowd.

    python bench/long_poll.py --store redis://127.0.0.1:6379/0
    taskset -c 1 python bench/long_poll.py --server-cpus 0 --store sqlite:///tmp/lp.db

The pollers are greenlets of this process (gevent patches it: this is a script).
"""
from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any, Dict, List, Optional  # noqa: E402

import gevent  # noqa: E402
import requests  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests.support, run as a script
    sys.path.insert(0, str(ROOT))

from tests.support.helpers import gunicorn_options  # noqa: E402
from tests.support.ports import check_listener, reserve_port  # noqa: E402

V11 = {"A2A-Version": "1.1"}
COUNTED = ("read", "load", "head", "wait")


class Host:
    """One gunicorn serving the generations agent on a reserved loopback port."""

    def __init__(self, store: str, workers: int, folder: str, cpus: str = "") -> None:
        self._reservation = reserve_port()
        self.url = f"http://127.0.0.1:{self._reservation.port}"
        env = {**os.environ, "FLASK_A2A_STORE": store, "COUNTS_DIR": folder,
               "FLASK_A2A_LONG_POLL_TIMEOUT": "120", "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", str(workers),
               "-b", f"127.0.0.1:{self._reservation.port}", "--worker-connections", "4000",
               "--backlog", "4096", "--graceful-timeout", "2", "--log-level", "warning",
               *gunicorn_options(), "tests.support.generations_app:app"]
        if cpus:
            cmd = ["taskset", "-c", cpus] + cmd
        self.log = open(Path(folder) / "gunicorn.log", "wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.proc.poll() is None:
            try:
                if check_listener(self._reservation.port, [self.proc.pid], "gunicorn"):
                    requests.get(self.url + "/.well-known/agent-card.json", timeout=5)
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"gunicorn did not start; see {self.log.name}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()
        self._reservation.release()


def counts(folder: Path) -> Dict[str, int]:
    """The store calls of every worker so far (their reports, every 0.1 s)."""
    total: Dict[str, int] = {}
    for path in folder.glob("ops-*.json"):
        try:
            for name, count in json.loads(path.read_text()).items():
                total[name] = total.get(name, 0) + count
        except (OSError, ValueError):
            pass  # being replaced: the next look reads it
    return total


def settle(folder: Path, quiet: float = 1.0, limit: float = 120.0) -> None:
    """Wait until the workers' store calls have not moved for ``quiet`` seconds: the
    pollers have all arrived (each arrival reads the store) and wait."""
    deadline = time.monotonic() + limit
    last, since = counts(folder), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = counts(folder)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
    raise RuntimeError("the pollers did not settle")


def rpc(session: requests.Session, url: str, method: str, params: Any) -> Any:
    answer = session.post(url + "/a2a", headers=V11, timeout=180, json={
        "jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    body = answer.json()
    if "error" in body:
        raise RuntimeError(body["error"])
    return body["result"]


def crowd_phase(host: Host, folder: Path, polls: int, events: int) -> Dict[str, Any]:
    """One task, ``polls`` pollers, ``events`` events: store calls and answer times."""
    session = requests.Session()
    gate = folder / f"gate-{uuid.uuid4().hex}"
    task = rpc(session, host.url, "SendMessage", {
        "message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                    "parts": [{"text": f"ticks {events} {gate}"}]},
        "configuration": {"returnImmediately": True}})["task"]
    while rpc(session, host.url, "GetTask", {"id": task["id"]})["generation"] != "2":
        time.sleep(0.05)
    generation, per_event, latencies, wrong = 2, [], [], 0
    for event in range(events):
        answers: List[Optional[float]] = []

        def poll(index: int, current: int = generation) -> None:
            # A connection of its own per poll: an idle kept-alive one may be closed
            # by the server just as it is reused.
            with requests.Session() as own:
                task_now = rpc(own, host.url, "GetTask",
                               {"id": task["id"], "currentGeneration": str(current)})
            answers.append(time.monotonic() if task_now["generation"] == str(current + 1)
                           else None)

        pollers = [gevent.spawn(poll, index) for index in range(polls)]
        settle(folder)  # every poller sent and held (the answers wait)
        if answers:
            raise RuntimeError("a long-poll answered before the event")
        before = counts(folder)
        emitted = time.monotonic()
        (gate if event == 0 else Path(f"{gate}.{event - 1}")).touch()
        gevent.joinall(pollers, timeout=120)
        time.sleep(0.4)  # the workers' next reports
        after = counts(folder)
        per_event.append({name: after.get(name, 0) - before.get(name, 0) for name in COUNTED})
        latencies += [at - emitted for at in answers if at is not None]
        wrong += polls - len([at for at in answers if at is not None])
        generation += 1
    Path(f"{gate}.{events - 1}").touch()  # the task completes
    latencies.sort()
    return {
        "polls": polls,
        "calls_per_event": {name: statistics.median(e[name] for e in per_event)
                            for name in COUNTED},
        "p50_ms": 1000 * latencies[len(latencies) // 2] if latencies else None,
        "p99_ms": 1000 * latencies[int(len(latencies) * 0.99)] if latencies else None,
        "missed": wrong,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="redis://127.0.0.1:6379/14")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--polls", default="1,1000", help="crowd sizes, comma-separated")
    parser.add_argument("--events", type=int, default=5)
    parser.add_argument("--server-cpus", default="", help="taskset -c for the server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        host = Host(args.store, args.workers, folder, args.server_cpus)
        try:
            print(f"store {args.store}, {args.workers} workers, {args.events} events per crowd")
            print(f"{'polls':>6} {'read':>6} {'load':>6} {'head':>6} {'wait':>6} "
                  f"{'p50 ms':>8} {'p99 ms':>8} {'missed':>7}")
            for polls in (int(n) for n in args.polls.split(",")):
                row = crowd_phase(host, Path(folder), polls, args.events)
                calls = row["calls_per_event"]
                print(f"{polls:>6} {calls['read']:>6} {calls['load']:>6} {calls['head']:>6} "
                      f"{calls['wait']:>6} {row['p50_ms'] or 0:>8.1f} {row['p99_ms'] or 0:>8.1f} "
                      f"{row['missed']:>7}", flush=True)
        finally:
            host.stop()


if __name__ == "__main__":
    main()
