#!/usr/bin/env python
"""Fan-out: many watchers of one running task.

An agent (``tests/support/fanout_app.py``) goes WORKING and waits; N clients subscribe
to the task (``SubscribeToTask``), spread over the workers and hosts (a host is
a gunicorn of its own on the same store); then the agent streams ``--chunks``
chunks over ``--seconds`` and completes.  Each watcher records when its first
event came (attach), which chunks it saw (those in the snapshot, then each
update) and when each came (lag: from the agent's emit to the watcher's read,
one clock), and the final state.  Per phase it prints the attach p50/p99, the
chunk lag p50/p99, how many watchers saw every chunk once and in order and the
final state, the store calls per event (reads, waits, heads, loads, counted in
the workers), Redis commands per event where the store is Redis, and the
workers' RSS per watcher.

The load generator is one process, one thread: non-blocking sockets and a
selector (HTTP/1.0, so the body is the event stream as it is).

    python bench/fanout.py --store redis://127.0.0.1:6379/0 --watchers 1,100,1000,10000 \\
        --workers 4 --hosts 1
    python bench/fanout.py --store postgresql://postgres@127.0.0.1:5432/postgres --hosts 2

Pin it apart from the server on two cores: ``taskset -c 1 python bench/fanout.py
--server-cpus 0``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

import requests

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # tests.support, run as a script
    sys.path.insert(0, str(ROOT))

from tests.support.helpers import gunicorn_options  # noqa: E402
from tests.support.ports import check_listener, reserve_port  # noqa: E402

V1 = {"A2A-Version": "1.0"}


# ------------------------------------------------------------ servers


class Host:
    """One gunicorn (gevent workers) serving the fan-out agent on a reserved loopback
    port (tests/support/ports.py: no other server can take it until :meth:`stop`).
    A host that fails to start stops what it started before raising."""

    def __init__(self, store: str, workers: int, folder: str, *, cpus: str = "",
                 connections: int = 12000) -> None:
        self._reservation = reserve_port()
        self.port = self._reservation.port
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "FLASK_A2A_STORE": store, "FANOUT_DIR": folder,
               "FLASK_A2A_MAX_ANONYMOUS_STREAMS": "0", "FLASK_A2A_SSE_KEEPALIVE": "5",
               "PYTHONPATH": str(ROOT)}
        cmd = [sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", str(workers),
               "-b", f"127.0.0.1:{self.port}", "--worker-connections", str(connections),
               "--backlog", "4096", "--graceful-timeout", "2", "--log-level", "warning",
               *gunicorn_options(), "tests.support.fanout_app:app"]
        if cpus:
            cmd = ["taskset", "-c", cpus] + cmd
        self.log = open(Path(folder) / f"gunicorn-{self.port}.log", "wb")
        self.proc: Optional[subprocess.Popen] = None
        try:
            self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self.log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
            self._wait_ready()
            # Every worker boots its counters on its first request: touch each a few times.
            for _ in range(8 * workers):
                requests.get(self.url + "/a2a/rest/tasks/warm-up", timeout=5)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        """Until this gunicorn (its master: taskset execs it) listens on the port and the
        card answers; at once, with the log, if it exits."""
        assert self.proc is not None
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"gunicorn exited: {Path(self.log.name).read_text()}")
            if check_listener(self.port, [self.proc.pid], "gunicorn"):
                try:
                    requests.get(self.url + "/.well-known/agent-card.json", timeout=5)
                    return
                except requests.RequestException:
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError("gunicorn did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop gunicorn and its workers (idempotent) and let the port go."""
        try:
            if self.proc is not None and self.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGQUIT)  # gunicorn's quick shutdown
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.proc.wait(5)
        finally:
            self.log.close()
            self._reservation.release()


@contextlib.contextmanager
def hosts_running(count: int, store: str, workers: int, folder: str,
                  cpus: str = "") -> Iterator[List[Host]]:
    """``count`` hosts, started one after another; every one started is stopped on
    leaving, when a later one fails to start too."""
    with contextlib.ExitStack() as stack:
        hosts: List[Host] = []
        for _ in range(count):
            host = Host(store, workers, folder, cpus=cpus)
            stack.callback(host.stop)
            hosts.append(host)
        yield hosts


def store_calls(folder: str) -> Tuple[Dict[str, int], int, int]:
    """The store calls counted by every worker so far, their RSS sum (KiB), and how many
    workers reported."""
    calls: Dict[str, int] = {}
    rss = reports = 0
    for path in Path(folder).glob("ops-*.json"):
        try:
            report = json.loads(path.read_text())
        except ValueError:  # a worker replacing it right now
            continue
        reports += 1
        rss += report["rss_kib"]
        for name, count in report["calls"].items():
            calls[name] = calls.get(name, 0) + count
    return calls, rss, reports


def redis_commands(url: str) -> Optional[int]:
    """Commands the Redis server has processed so far, summed over a cluster's masters
    (``redis+cluster://``), or those of the master the sentinels name
    (``redis+sentinel://``); None for other stores."""
    scheme = url.split("://", 1)[0]
    if scheme.split("+", 1)[0] not in ("redis", "rediss"):
        return None
    from a2a_flask.stores import open_store

    store = open_store(url)
    try:
        client = store._redis  # type: ignore[attr-defined]
        if scheme.endswith("+cluster"):
            answers = client.info("stats", target_nodes=client.PRIMARIES)
            return sum(int(answer["total_commands_processed"]) for answer in answers.values())
        return int(client.info("stats")["total_commands_processed"])
    finally:
        store.close()


# ------------------------------------------------------------ watchers


@dataclass
class Watcher:
    """One subscriber: its socket and what it saw."""

    sock: socket.socket
    sent_at: float
    buffer: bytearray = field(default_factory=bytearray)
    head_done: bool = False
    first_at: Optional[float] = None
    chunks: List[int] = field(default_factory=list)
    lags: List[float] = field(default_factory=list)
    final: str = ""
    ended: bool = False
    error: str = ""

    def feed(self, data: bytes, now: float) -> None:
        self.buffer += data
        if not self.head_done:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            status = bytes(self.buffer[:self.buffer.find(b"\r\n")])
            if b" 200 " not in status:
                self.error = status.decode(errors="replace")
            del self.buffer[:end + 4]
            self.head_done = True
        while True:
            end = self.buffer.find(b"\n\n")
            if end < 0:
                return
            block = bytes(self.buffer[:end])
            del self.buffer[:end + 2]
            for line in block.split(b"\n"):
                if line.startswith(b"data:"):
                    self.event(json.loads(line[5:]), now)

    def event(self, body: Dict[str, Any], now: float) -> None:
        if self.first_at is None:
            self.first_at = now
        if "error" in body:
            self.error = json.dumps(body["error"])[:200]
            return
        result = body["result"]
        if "task" in result:  # the snapshot: the chunks so far
            for artifact in result["task"].get("artifacts", []):
                self.chunks += [int(p["text"].split()[0]) for p in artifact["parts"]]
            self.final = result["task"]["status"]["state"]
        elif "artifactUpdate" in result:
            for part in result["artifactUpdate"]["artifact"]["parts"]:
                number, emitted = part["text"].split()
                self.chunks.append(int(number))
                self.lags.append(time.time() - float(emitted))
        elif "statusUpdate" in result:
            self.final = result["statusUpdate"]["status"]["state"]


class Fleet:
    """Watchers of one task, spread over ``ports``, read with one selector."""

    def __init__(self, ports: Sequence[int], task_id: str, count: int) -> None:
        self.selector = selectors.DefaultSelector()
        self.watchers: List[Watcher] = []
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                           "params": {"id": task_id}}).encode()
        for index in range(count):
            port = ports[index % len(ports)]
            sock = socket.create_connection(("127.0.0.1", port), timeout=30)
            sock.sendall(b"POST /a2a HTTP/1.0\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"A2A-Version: 1.0\r\nContent-Length: " + str(len(body)).encode()
                         + b"\r\n\r\n" + body)
            sock.setblocking(False)
            watcher = Watcher(sock, time.monotonic())
            self.watchers.append(watcher)
            self.selector.register(sock, selectors.EVENT_READ, watcher)
            if index % 100 == 99:
                self.pump(lambda: False, time.monotonic())  # read while opening

    def pump(self, done: Any, deadline: float) -> bool:
        """Read until ``done()`` or ``deadline``; whether ``done()`` came true."""
        while not done():
            timeout = deadline - time.monotonic()
            if timeout <= 0:
                return bool(done())
            for key, _ in self.selector.select(min(timeout, 0.5)):
                watcher: Watcher = key.data
                try:
                    data = watcher.sock.recv(262144)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    data, watcher.error = b"", str(exc)
                if not data:
                    watcher.ended = True
                    self.selector.unregister(watcher.sock)
                    watcher.sock.close()
                    continue
                watcher.feed(data, time.monotonic())
        return True

    def attached(self) -> bool:
        return all(w.first_at is not None or w.ended for w in self.watchers)

    def ended(self) -> bool:
        return all(w.ended for w in self.watchers)

    def close(self) -> None:
        for watcher in self.watchers:
            if not watcher.ended:
                self.selector.unregister(watcher.sock)
                watcher.sock.close()
        self.selector.close()


# ------------------------------------------------------------ one phase


@dataclass
class Phase:
    """What one phase measured."""

    watchers: int
    chunks: int
    attach: List[float]
    lags: List[float]
    complete: int
    errors: List[str]
    calls: Dict[str, int]
    commands: Optional[int]
    rss_kib_before: int
    rss_kib_held: int

    def per_event(self, name: str) -> float:
        return self.calls.get(name, 0) / (self.chunks + 1)

    @property
    def reads_per_event(self) -> float:
        """Store reads, waits, heads and loads per event (writes left out)."""
        return sum(self.per_event(n) for n in ("read", "wait", "head", "load"))


def percentile(values: Sequence[float], share: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def run_phase(hosts: Sequence[Host], store: str, folder: str, watchers: int, chunks: int,
              seconds: float, limit: float = 120.0) -> Phase:
    """One task, ``watchers`` subscribers, ``chunks`` chunks over ``seconds``."""
    gate = Path(folder) / f"gate-{uuid.uuid4().hex[:8]}"
    text = f"chunks {chunks} {seconds} {gate}"
    sent = requests.post(hosts[0].url + "/a2a", json={
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
            "message": {"role": "ROLE_USER", "messageId": uuid.uuid4().hex,
                        "parts": [{"text": text}]},
            "configuration": {"returnImmediately": True}}}, headers=V1, timeout=30).json()
    task_id = sent["result"]["task"]["id"]
    deadline = time.monotonic() + limit
    _, rss_before, _ = store_calls(folder)
    fleet = Fleet([h.port for h in hosts], task_id, watchers)
    try:
        fleet.pump(fleet.attached, deadline)
        # The last watchers reach their wait, and the workers' counters their files.
        fleet.pump(lambda: False, time.monotonic() + 0.3)
        calls_before, rss_held, _ = store_calls(folder)
        commands_before = redis_commands(store)
        gate.touch()
        fleet.pump(fleet.ended, deadline)
        time.sleep(0.3)  # the workers' counters reach their files
        calls_after, _, _ = store_calls(folder)
        commands_after = redis_commands(store)
    finally:
        fleet.close()
    expected = list(range(chunks))
    complete = sum(1 for w in fleet.watchers
                   if w.chunks == expected and w.final == "TASK_STATE_COMPLETED" and not w.error)
    return Phase(
        watchers=watchers, chunks=chunks,
        attach=[w.first_at - w.sent_at for w in fleet.watchers if w.first_at is not None],
        lags=[lag for w in fleet.watchers for lag in w.lags],
        complete=complete, errors=[w.error for w in fleet.watchers if w.error][:5],
        calls={name: calls_after.get(name, 0) - calls_before.get(name, 0)
               for name in calls_after},
        commands=(None if commands_before is None or commands_after is None
                  else commands_after - commands_before),
        rss_kib_before=rss_before, rss_kib_held=rss_held)


def report(phases: Sequence[Phase]) -> None:
    print(f"{'watchers':>8} {'attach p50/p99 s':>17} {'lag p50/p99 ms':>15} {'complete':>9} "
          f"{'store calls/event':>18} {'redis cmds/event':>17} {'RSS/watcher KiB':>16}")
    for phase in phases:
        commands = ("" if phase.commands is None
                    else f"{phase.commands / (phase.chunks + 1):.1f}")
        per_watcher = (phase.rss_kib_held - phase.rss_kib_before) / phase.watchers
        print(f"{phase.watchers:>8} "
              f"{percentile(phase.attach, .5):>8.2f}/{percentile(phase.attach, .99):<8.2f} "
              f"{1000 * percentile(phase.lags, .5):>7.0f}/{1000 * percentile(phase.lags, .99):<7.0f} "
              f"{100 * phase.complete / phase.watchers:>8.1f}% {phase.reads_per_event:>18.1f} "
              f"{commands:>17} {per_watcher:>16.1f}")
        for error in phase.errors:
            print(f"         error: {error}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", default="sqlite:///{tmp}/fanout.db",
                        help="the store URL ({tmp}: a temporary folder)")
    parser.add_argument("--watchers", default="1,100,1000")
    parser.add_argument("--workers", type=int, default=2, help="gevent workers per host")
    parser.add_argument("--hosts", type=int, default=1)
    parser.add_argument("--chunks", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--server-cpus", default="", help="taskset CPUs for the servers")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        store = args.store.replace("{tmp}", folder)
        with hosts_running(args.hosts, store, args.workers, folder, args.server_cpus) as hosts:
            deadline = time.monotonic() + 30
            while store_calls(folder)[2] < args.hosts * args.workers:  # every worker reports
                for host in hosts:
                    requests.get(host.url + "/a2a/rest/tasks/warm-up", timeout=5)
                if time.monotonic() > deadline:
                    raise RuntimeError("not every worker reported its store calls")
                time.sleep(0.1)
            print(f"store {store.split('?')[0]}, {args.hosts} host(s) x {args.workers} gevent "
                  f"worker(s), {args.chunks} chunks over {args.seconds:g} s")
            phases = [run_phase(hosts, store, folder, int(count), args.chunks, args.seconds)
                      for count in args.watchers.split(",")]
            report(phases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
