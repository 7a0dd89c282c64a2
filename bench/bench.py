#!/usr/bin/env python
"""Benchmark a2a_flask under one ``gunicorn -k gevent -w 1`` worker against bare Flask ceilings.

One run starts one gunicorn (pinned to ``--server-cpu``, default CPU 0) serving
``bench_app.py`` on 127.0.0.1, pins this process (the load generator) to
``--client-cpu`` (CPU 1), and measures:

* held idle SSE streams and the worker's RSS growth per stream;
* blocking SendMessage requests/s vs a bare Flask JSON route, per concurrency;
* SSE events/s of a 100-chunk SendStreamingMessage vs a bare Flask SSE route;
* time to first SSE event of SendStreamingMessage vs the bare SSE route;
* SendMessage and the 100-chunk stream against the official a2a-sdk server
  (``sdk_peer.py``: one uvicorn process pinned to the same CPU), where it is
  installed (the test extra);
* optionally (``--held-ceiling``) bare idle Flask streams on a separate fresh
  worker, and (``--wrk``) each route measured by ``wrk`` right before this
  generator, as a check that the Python load generator is not the bottleneck.

The load generator speaks HTTP/1.1 keep-alive over raw gevent sockets.  Every
phase is bounded in time and count; the server and every client socket are
closed at the end, even on error.  See README.rst for how to read the output.
"""
from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import math
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import (Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple,
                    Union)

import gevent
import gevent.pool
from gevent import socket as gsocket

HOST = "127.0.0.1"
BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
RECV_SIZE = 65536
MAX_HEAD = 65536
MAX_CHUNK = 16 * 1024 * 1024
IO_TIMEOUT = 30.0
MAX_ERRORS_PER_WORKER = 20
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Targets (see README.rst).
TARGET_SEND_RATIO = 0.85
TARGET_SSE_RATIO = 0.70
TARGET_HELD_STREAMS = 10_000
#: Worker RSS per held stream, as a multiple of bare Flask's idle stream (--held-ceiling).
TARGET_HELD_RATIO = 1.0
TARGET_FIRST_EVENT_MS = 0.8

PHASES = ("held", "json", "sse", "ttfe", "peer", "wrk")
DEFAULT_PHASES = "held,json,sse,ttfe,peer"
#: The servers' garbage-collector setting (``--gc-full-every``), reported with the results.
GC_SETTING = "FLASK_A2A_GC_FULL_EVERY"


class ProtocolError(Exception):
    """The server's answer was not what the scenario expects."""


# ====================================================================== CLI


@dataclass
class Config:
    """Command-line settings of one run."""

    duration: float
    repeat: int
    warmup: float
    concurrency: List[int]
    sse_concurrency: List[int]
    chunks: int
    ttfe_samples: int
    streams: int
    held_mode: str
    hold_seconds: float
    connect_concurrency: int
    phase_timeout: float
    phases: List[str]
    server_cpu: int
    client_cpu: int
    held_ceiling: bool
    keep_tasks: bool
    max_other_cpu: float
    noise_retries: int
    quiet_wait: float
    json_path: Optional[str]
    quiet: bool


def parse_args(argv: Optional[List[str]] = None) -> Config:
    """Read the command line into a :class:`Config`."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--duration", type=float, default=3.0, help="seconds per throughput run")
    p.add_argument("--repeat", type=int, default=5, help="runs per measurement (medians reported)")
    p.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before each measurement")
    p.add_argument("--concurrency", default="1,32", help="SendMessage concurrencies")
    p.add_argument("--sse-concurrency", default="1,32", help="streaming concurrencies")
    p.add_argument("--chunks", type=int, default=100, help="events per stream")
    p.add_argument("--ttfe-samples", type=int, default=200, help="first-event samples per scenario per repeat")
    p.add_argument("--streams", type=int, default=TARGET_HELD_STREAMS, help="idle streams to hold")
    p.add_argument("--held-mode", choices=("subscribe", "send"), default="subscribe",
                   help="SubscribeToTask on one WORKING task, or SendStreamingMessage per stream")
    p.add_argument("--held-ceiling", action="store_true",
                   help="also measure bare idle Flask streams, on a separate fresh worker")
    p.add_argument("--keep-tasks", action="store_true",
                   help="let finished tasks pile up in the in-memory store across runs "
                        "(default: drop them and collect garbage before each run)")
    p.add_argument("--hold-seconds", type=float, default=3.0, help="how long streams stay held")
    p.add_argument("--connect-concurrency", type=int, default=200, help="streams opened at once")
    p.add_argument("--phase-timeout", type=float, default=300.0, help="upper bound for the held phase")
    p.add_argument("--phases", help=f"subset of {','.join(PHASES)} (default: {DEFAULT_PHASES}; "
                                    "peer only where a2a-sdk[http-server] and uvicorn are installed)")
    p.add_argument("--wrk", action="store_true", help="also cross-check request rates with wrk")
    p.add_argument("--server-cpu", type=int, default=0)
    p.add_argument("--client-cpu", type=int, default=1)
    p.add_argument("--max-other-cpu", type=float, default=0.15,
                   help="a run pair during which other processes (plus hypervisor steal) used "
                        "more than this fraction of a CPU counts as noisy and is repeated")
    p.add_argument("--noise-retries", type=int, default=2, help="extra attempts for a noisy run pair")
    p.add_argument("--quiet-wait", type=float, default=20.0,
                   help="before each run, wait at most this long for other processes to go quiet")
    p.add_argument("--gc-full-every", type=int, default=None, metavar="N",
                   help="serve with A2A_GC_FULL_EVERY=N (full garbage collections after N "
                        "middle ones; default: as the environment says, else Python's own)")
    p.add_argument("--json", dest="json_path", metavar="PATH", help="write the results as JSON")
    p.add_argument("--quiet", action="store_true", help="print only the final table")
    a = p.parse_args(argv)
    phases = [x.strip() for x in (a.phases or DEFAULT_PHASES).split(",") if x.strip()]
    if a.wrk and "wrk" not in phases:
        phases.append("wrk")
    unknown = set(phases) - set(PHASES)
    if unknown:
        p.error(f"unknown phase(s): {', '.join(sorted(unknown))}")
    if "peer" in phases and not peer_installed():
        if a.phases:
            p.error("the peer phase needs the official SDK's server: "
                    "pip install 'a2a-sdk[http-server]' uvicorn (or this package's test extra)")
        phases.remove("peer")
        say("a2a-sdk[http-server] or uvicorn is not installed: the peer phase is skipped")
    if a.duration <= 0 or a.repeat < 1 or a.streams < 1 or a.chunks < 1:
        p.error("--duration, --repeat, --streams and --chunks must be positive")
    if a.gc_full_every is not None:
        if a.gc_full_every < 0:
            p.error("--gc-full-every must be >= 0")
        os.environ[GC_SETTING] = str(a.gc_full_every)  # the servers inherit it
    return Config(
        duration=a.duration, repeat=a.repeat, warmup=a.warmup, concurrency=_ints(a.concurrency),
        sse_concurrency=_ints(a.sse_concurrency), chunks=a.chunks, ttfe_samples=a.ttfe_samples,
        streams=a.streams, held_mode=a.held_mode, hold_seconds=a.hold_seconds,
        connect_concurrency=a.connect_concurrency, phase_timeout=a.phase_timeout, phases=phases,
        server_cpu=a.server_cpu, client_cpu=a.client_cpu, held_ceiling=a.held_ceiling,
        keep_tasks=a.keep_tasks, max_other_cpu=a.max_other_cpu, noise_retries=a.noise_retries,
        quiet_wait=a.quiet_wait, json_path=a.json_path,
        quiet=a.quiet)


def _ints(text: str) -> List[int]:
    return [int(x) for x in text.split(",") if x.strip()]


_QUIET = False


def say(message: str) -> None:
    """Progress output (stderr), silenced by ``--quiet``."""
    if not _QUIET:
        print(message, file=sys.stderr, flush=True)


# ====================================================================== /proc and limits


def rss_kib(pid: int) -> int:
    """VmRSS of a process, in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def machine_cpu_seconds() -> Tuple[float, float]:
    """Machine-wide (user + nice + system, steal) CPU seconds from /proc/stat."""
    values = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, steal = values[0], values[1], values[2], values[7]
    return (user + nice + system) / CLK_TCK, steal / CLK_TCK


def own_cpu_seconds() -> float:
    """User + system CPU time of this process (the load generator)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def children_of(pid: int) -> List[int]:
    """Direct child pids of ``pid``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2:].split()[1]) == pid:
            found.append(int(entry))
    return found


def raise_nofile(needed: int) -> Tuple[int, int]:
    """Raise RLIMIT_NOFILE (inherited by gunicorn) to at least ``needed`` if allowed."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard < needed:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (needed, needed))
            return needed, needed
        except (ValueError, OSError):
            needed = hard
    if soft < needed:
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def pin_self(cpu: int) -> List[int]:
    """Pin the load generator to one CPU (when the machine has it)."""
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError as exc:
        say(f"warning: cannot pin the load generator to CPU {cpu}: {exc}")
    return sorted(os.sched_getaffinity(0))


# ====================================================================== the server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class BenchServer:
    """gunicorn ``-k gevent`` serving bench_app on 127.0.0.1, pinned with taskset.

    ``cpu`` is a taskset CPU list (``0``, ``"0,1"``); ``store`` becomes ``FLASK_A2A_STORE``.
    ``helper_pids`` are processes that serve the workers (a Redis server): their CPU
    time is measured apart from the workers' and not counted as noise.
    """

    #: Whether ``POST /bench/forget`` empties its store before each run.
    forgets = True
    #: Names its log file.
    kind = "gunicorn"

    def __init__(self, cpu: Union[int, str], worker_connections: int, chunks: int, *,
                 workers: int = 1, store: str = "memory://",
                 env: Optional[Dict[str, str]] = None) -> None:
        self.port = free_port()
        self.workers = workers
        self.log_file = tempfile.NamedTemporaryFile(prefix=f"a2a-bench-{self.kind}-",
                                                    suffix=".log", delete=False)
        full_env = {**os.environ, "BENCH_CHUNKS": str(chunks), "PYTHONUNBUFFERED": "1",
                    "FLASK_A2A_STORE": store, "BENCH_PORT": str(self.port), **(env or {})}
        self.proc = subprocess.Popen(self.command(cpu, worker_connections), cwd=ROOT, env=full_env,
                                     stdout=self.log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self.worker_pids: List[int] = []
        self.helper_pids: List[int] = []
        self.keep_log = False

    @property
    def worker_pid(self) -> int:
        """The (first) worker's pid; 0 before :meth:`wait_ready`."""
        return self.worker_pids[0] if self.worker_pids else 0

    def cpu_seconds(self) -> float:
        """CPU time of all workers together."""
        return sum(cpu_seconds(pid) for pid in self.worker_pids)

    def helper_cpu_seconds(self) -> float:
        """CPU time of the helper processes (0 when there are none or they are gone)."""
        total = 0.0
        for pid in self.helper_pids:
            try:
                total += cpu_seconds(pid)
            except OSError:
                pass
        return total

    def command(self, cpu: Union[int, str], worker_connections: int) -> List[str]:
        cmd = [sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", str(self.workers),
               "-b", f"{HOST}:{self.port}", "--worker-connections", str(worker_connections),
               "--backlog", "4096", "--keep-alive", "10", "--timeout", "120",
               "--graceful-timeout", "3", "--log-level", "warning",
               "--pythonpath", str(BENCH_DIR)]
        if _gunicorn_has_flag("--no-control-socket"):
            cmd.append("--no-control-socket")
        cmd.append("bench_app:app")
        return pinned(cpu, cmd)

    def serving_pids(self) -> List[int]:
        """The processes that answer requests, once all of them exist (else none)."""
        workers = children_of(self.proc.pid)
        return sorted(workers) if len(workers) == self.workers else []

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the card answers and all ``workers`` worker processes exist."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited:\n" + self.log_tail())
            if self._card_ok():
                self.worker_pids = self.serving_pids()
                if self.worker_pids:
                    return
            gevent.sleep(0.1)
        raise RuntimeError(f"{self.kind} did not become ready:\n" + self.log_tail())

    def _card_ok(self) -> bool:
        try:
            conn = HttpConnection(self.port, timeout=2.0)
        except OSError:
            return False
        try:
            conn.send(b"GET /.well-known/agent-card.json HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            head = conn.read_head()
            conn.read_body(head)
            return head.status == 200
        except (OSError, ProtocolError):
            return False
        finally:
            conn.close()

    def log_tail(self, lines: int = 40) -> str:
        self.log_file.flush()
        text = Path(self.log_file.name).read_text(errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def worker_affinity(self) -> List[int]:
        """CPUs any worker may run on."""
        return sorted(set().union(*(os.sched_getaffinity(pid) for pid in self.worker_pids)))

    def stop(self) -> None:
        """SIGTERM the whole process group, then SIGKILL if it lingers."""
        if self.proc.poll() is None:
            for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
                try:
                    os.killpg(self.proc.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    self.proc.wait(wait)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self.log_file.close()
        if self.keep_log:
            say(f"{self.kind} log kept at {self.log_file.name}")
        else:
            os.unlink(self.log_file.name)


def pinned(cpu: Union[int, str], cmd: List[str]) -> List[str]:
    """``cmd`` run on the CPUs ``cpu`` names (a taskset list), where taskset exists."""
    if shutil.which("taskset"):
        return ["taskset", "-c", str(cpu), *cmd]
    say("warning: taskset not found; the server is not pinned")
    return cmd


class PeerServer(BenchServer):
    """The official a2a-sdk server (``sdk_peer.py``): one uvicorn process on 127.0.0.1,
    pinned like the gunicorn worker, its store keeping every task as it comes (it
    has no ``/bench/forget``); ``env`` may name a database store (``sdk_peer.py``)."""

    forgets = False
    kind = "uvicorn"

    def __init__(self, cpu: Union[int, str], chunks: int,
                 env: Optional[Dict[str, str]] = None) -> None:
        super().__init__(cpu, 0, chunks, env=env)

    def command(self, cpu: Union[int, str], worker_connections: int) -> List[str]:
        return pinned(cpu, [sys.executable, "-m", "uvicorn", "--app-dir", str(BENCH_DIR),
                            "--host", HOST, "--port", str(self.port), "--backlog", "4096",
                            "--no-access-log", "--log-level", "warning", "sdk_peer:app"])

    def serving_pids(self) -> List[int]:
        return [self.proc.pid]  # taskset execs uvicorn: one process, this one


def peer_installed() -> bool:
    """Whether the official SDK's server and uvicorn can be imported (the test extra)."""
    try:
        return all(importlib.util.find_spec(name) is not None
                   for name in ("a2a.server", "starlette", "sse_starlette", "uvicorn"))
    except ImportError:  # no ``a2a`` package at all
        return False


_FLAG_CACHE: Dict[str, bool] = {}


def _gunicorn_has_flag(flag: str) -> bool:
    if flag not in _FLAG_CACHE:
        out = subprocess.run([sys.executable, "-m", "gunicorn", "--help"], capture_output=True,
                             text=True, timeout=30).stdout
        _FLAG_CACHE[flag] = flag in out
    return _FLAG_CACHE[flag]


# ====================================================================== the HTTP client


class ResponseHead(NamedTuple):
    status: int
    length: Optional[int]
    chunked: bool
    content_type: str
    close: bool


def parse_head(raw: bytes) -> ResponseHead:
    """Status line and the few headers the client needs."""
    lines = raw.split(b"\r\n")
    parts = lines[0].split(b" ", 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
        raise ProtocolError(f"bad status line {lines[0][:80]!r}")
    length, chunked, content_type, close = None, False, "", False
    for line in lines[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value.lower()
        elif name == b"content-type":
            content_type = value.decode("latin-1")
        elif name == b"connection":
            close = value.lower() == b"close"
    return ResponseHead(int(parts[1]), length, chunked, content_type, close)


class HttpConnection:
    """One HTTP/1.1 keep-alive connection over a gevent socket (no pipelining)."""

    def __init__(self, port: int, timeout: float = IO_TIMEOUT) -> None:
        self.sock = gsocket.create_connection((HOST, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = b""
        self._pos = 0
        self.reusable = True

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> None:
        data = self.sock.recv(RECV_SIZE)
        if not data:
            raise ProtocolError("connection closed by the server")
        if self._pos >= len(self._buf):
            self._buf = data
        else:
            self._buf = self._buf[self._pos:] + data
        self._pos = 0

    def _take_until(self, sep: bytes) -> bytes:
        while True:
            index = self._buf.find(sep, self._pos)
            if index >= 0:
                out = self._buf[self._pos:index]
                self._pos = index + len(sep)
                return out
            if len(self._buf) - self._pos > MAX_HEAD:
                raise ProtocolError("header or chunk line too long")
            self._fill()

    def _take(self, size: int) -> bytes:
        while len(self._buf) - self._pos < size:
            self._fill()
        out = self._buf[self._pos:self._pos + size]
        self._pos += size
        return out

    def read_head(self) -> ResponseHead:
        head = parse_head(self._take_until(b"\r\n\r\n"))
        self.reusable = not head.close
        return head

    def read_body(self, head: ResponseHead) -> bytes:
        if head.length is None:
            raise ProtocolError("expected a Content-Length response")
        return self._take(head.length)

    def read_chunk(self) -> Optional[bytes]:
        """The next chunk of a chunked body; None after the last one (trailers skipped)."""
        size = int(self._take_until(b"\r\n").split(b";", 1)[0], 16)
        if size == 0:
            while self._take_until(b"\r\n"):
                pass
            return None
        return self._take(size + 2)[:-2]

    def read_events(self, start: float) -> Tuple[int, float, bytes]:
        """Read a chunked SSE body to its end in bulk (a chunk holds one or more whole frames).

        Returns the number of ``data:`` events, seconds from ``start`` to the first
        one, and the last chunk that held an event.
        """
        events, first, last = 0, 0.0, b""
        while True:
            buf, pos = self._buf, self._pos
            while True:
                eol = buf.find(b"\r\n", pos)
                if eol < 0:
                    break
                size = int(buf[pos:eol].split(b";", 1)[0], 16)
                end = eol + 2 + size
                if len(buf) < end + 2:
                    break
                if size == 0:
                    self._pos = eol + 2
                    while self._take_until(b"\r\n"):  # trailers (none expected)
                        pass
                    return events, first, last
                found = buf.count(b"\ndata:", eol + 2, end) + buf.startswith(b"data:", eol + 2)
                if found:
                    if not events:
                        first = time.perf_counter() - start
                    events += found
                    last = buf[eol + 2:end]
                pos = end + 2
            self._pos = pos
            if len(buf) - pos > MAX_CHUNK:
                raise ProtocolError("chunk too large")
            self._fill()

    def alive(self) -> bool:
        """True while the server has not closed the connection (non-blocking peek)."""
        try:
            self.sock.settimeout(0.0)
            return bool(self.sock.recv(1, socket.MSG_PEEK))
        except BlockingIOError:
            return True
        except OSError:
            return False
        finally:
            self.sock.settimeout(IO_TIMEOUT)


# ====================================================================== scenarios


_MESSAGE = ('{"jsonrpc":"2.0","id":%d,"method":"%s","params":{"message":{"messageId":"bench-%d",'
            '"role":"ROLE_USER","parts":[{"text":"hello"}]}%s}}')


def message_body(method: str, number: int, config: str = "") -> bytes:
    """A SendMessage-style JSON-RPC body with a unique messageId."""
    return (_MESSAGE % (number, method, number, config)).encode()


def rpc_body(method: str, params: Dict[str, Any], number: int = 1) -> bytes:
    return json.dumps({"jsonrpc": "2.0", "id": number, "method": method, "params": params}).encode()


def post(path: str, body: bytes, accept: str = "application/json") -> bytes:
    """The bytes of a POST request with the A2A 1.0 header."""
    head = (f"POST {path} HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"A2A-Version: 1.0\r\nAccept: {accept}\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode("ascii") + body


def rpc_call(port: int, path: str, body: bytes) -> Dict[str, Any]:
    """One JSON-RPC (or control) POST on a fresh connection; the decoded answer."""
    conn = HttpConnection(port)
    try:
        conn.send(post(path, body))
        head = conn.read_head()
        return json.loads(conn.read_body(head))
    finally:
        conn.close()


@dataclass(frozen=True)
class Scenario:
    """One kind of request the load generator sends."""

    label: str
    path: str
    method: str
    streaming: bool
    expect: bytes  # must be in the JSON body, or in the last event of a stream

    def request(self, number: int) -> bytes:
        accept = "text/event-stream" if self.streaming else "application/json"
        return post(self.path, message_body(self.method, number), accept)


def scenarios(chunks: int) -> Dict[str, Scenario]:
    """Every scenario of the benchmark, by key."""
    return {
        "send": Scenario("SendMessage (echo agent)", "/a2a", "SendMessage", False,
                         b"TASK_STATE_COMPLETED"),
        "bare_json": Scenario("bare Flask JSON route", "/bare/json", "SendMessage", False,
                              b'"ok":true'),
        "stream": Scenario(f"SendStreamingMessage ({chunks}-chunk agent)", "/chunks",
                           "SendStreamingMessage", True, b"TASK_STATE_COMPLETED"),
        "stream_echo": Scenario("SendStreamingMessage (echo agent)", "/a2a",
                                "SendStreamingMessage", True, b"TASK_STATE_COMPLETED"),
        "bare_sse": Scenario(f"bare Flask SSE route ({chunks} events)", "/bare/sse",
                             "SendStreamingMessage", True, f"chunk {chunks - 1} ".encode()),
    }


class Exchange(NamedTuple):
    units: int          # 1 for a JSON call, the number of data events for a stream
    first: float        # seconds to the full JSON answer, or to the first data event
    total: float        # seconds to the end of the answer


def count_events(chunk: bytes) -> int:
    """``data:`` lines in a chunk of whole SSE frames (JSON data escapes its newlines)."""
    return chunk.count(b"\ndata:") + chunk.startswith(b"data:")


def exchange(conn: HttpConnection, scenario: Scenario, number: int) -> Exchange:
    """Send one request on ``conn`` and read the whole answer."""
    start = time.perf_counter()
    conn.send(scenario.request(number))
    head = conn.read_head()
    if head.status != 200:
        raise ProtocolError(f"{scenario.path}: HTTP {head.status}")
    if not scenario.streaming:
        body = conn.read_body(head)
        if scenario.expect not in body:
            raise ProtocolError(f"{scenario.path}: unexpected body {body[:200]!r}")
        elapsed = time.perf_counter() - start
        return Exchange(1, elapsed, elapsed)
    return read_stream(conn, head, scenario, start)


def read_stream(conn: HttpConnection, head: ResponseHead, scenario: Scenario,
                start: float) -> Exchange:
    """Read an SSE body to its end; count events and time the first one."""
    if not (head.chunked and head.content_type.startswith("text/event-stream")):
        body = conn.read_body(head) if head.length is not None else b""
        raise ProtocolError(f"{scenario.path}: not an event stream: {body[:200]!r}")
    events, first, last = conn.read_events(start)
    if scenario.expect not in last:
        raise ProtocolError(f"{scenario.path}: stream ended with {last[:200]!r}")
    return Exchange(events, first, time.perf_counter() - start)


# ====================================================================== closed-loop load


@dataclass
class WorkerStats:
    """What one closed-loop client did during a run."""

    units: int = 0
    requests: int = 0
    errors: int = 0
    first_error: str = ""
    latencies: List[float] = field(default_factory=list)


@dataclass
class RunResult:
    """One measured run of one scenario at one concurrency."""

    rate: float          # units per second
    requests_per_s: float
    units: int
    requests: int
    errors: int
    elapsed: float
    client_cpu: float    # fraction of one CPU used by the load generator
    server_cpu: float    # fraction of one CPU used by the gunicorn worker(s)
    p50_ms: float
    p99_ms: float
    other_cpu: float = 0.0  # CPU used by other processes meanwhile (noise), fraction of one CPU
    steal: float = 0.0      # CPU stolen by the hypervisor meanwhile, fraction of one CPU
    helper_cpu: float = 0.0  # CPU used by the server's helper processes (redis-server)
    cut: int = 0            # exchanges still unfinished when the run was cut (not counted)
    first_error: str = ""

    @property
    def worker_cpu_us(self) -> float:
        """The worker's CPU per unit (request or event), in microseconds."""
        return self.server_cpu / self.rate * 1e6 if self.rate else 0.0


#: Request numbers (JSON-RPC ids and messageIds), unique within a run of the script.
_NUMBERS = itertools.count(1)


def load_worker(port: int, scenario: Scenario, deadline: float, stats: WorkerStats,
                numbers: Iterator[int]) -> None:
    """One client: request after request on a keep-alive connection until the deadline."""
    conn: Optional[HttpConnection] = None
    try:
        while time.perf_counter() < deadline and stats.errors < MAX_ERRORS_PER_WORKER:
            try:
                if conn is None:
                    conn = HttpConnection(port)
                result = exchange(conn, scenario, next(numbers))
            except (OSError, ProtocolError, ValueError) as exc:
                stats.errors += 1
                stats.first_error = stats.first_error or f"{type(exc).__name__}: {exc}"
                if conn is not None:
                    conn.close()
                    conn = None
                gevent.sleep(0.05)
                continue
            if not conn.reusable:
                conn.close()
                conn = None
            stats.requests += 1
            stats.units += result.units
            stats.latencies.append(result.total)
    finally:
        if conn is not None:
            conn.close()


def measure(server: BenchServer, scenario: Scenario, concurrency: int, duration: float,
            grace: float = IO_TIMEOUT + 5) -> RunResult:
    """Run ``concurrency`` closed-loop clients for ``duration`` seconds.

    A client still inside an exchange ``grace`` seconds after the deadline is
    cut off; that exchange is not counted (see ``RunResult.cut``).
    """
    stats = [WorkerStats() for _ in range(concurrency)]
    client0, server0, helper0 = own_cpu_seconds(), server.cpu_seconds(), server.helper_cpu_seconds()
    machine0 = machine_cpu_seconds()
    start = time.perf_counter()
    deadline = start + duration
    greenlets = [gevent.spawn(load_worker, server.port, scenario, deadline, s, _NUMBERS)
                 for s in stats]
    try:
        gevent.joinall(greenlets, timeout=duration + grace)
        cut = sum(not g.dead for g in greenlets)
    finally:
        gevent.killall(greenlets, block=True, timeout=5)
    elapsed = time.perf_counter() - start
    client, worker = own_cpu_seconds() - client0, server.cpu_seconds() - server0
    helper = server.helper_cpu_seconds() - helper0
    machine = [b - a for a, b in zip(machine0, machine_cpu_seconds())]
    result = summarize(stats, elapsed, client, worker)
    result.helper_cpu = helper / elapsed
    result.cut = cut
    result.other_cpu = max(0.0, machine[0] - client - worker - helper) / elapsed
    result.steal = machine[1] / elapsed
    return result


def summarize(stats: List[WorkerStats], elapsed: float, client_cpu: float,
              server_cpu: float) -> RunResult:
    latencies = sorted(x for s in stats for x in s.latencies)
    units = sum(s.units for s in stats)
    requests = sum(s.requests for s in stats)
    errors = [s for s in stats if s.errors]
    return RunResult(
        rate=units / elapsed, requests_per_s=requests / elapsed, units=units, requests=requests,
        errors=sum(s.errors for s in stats), elapsed=elapsed,
        client_cpu=client_cpu / elapsed, server_cpu=server_cpu / elapsed,
        p50_ms=percentile(latencies, 50) * 1000, p99_ms=percentile(latencies, 99) * 1000,
        first_error=errors[0].first_error if errors else "",
    )


def percentile(sorted_values: List[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list (0.0 when empty)."""
    if not sorted_values:
        return 0.0
    rank = min(len(sorted_values), max(1, math.ceil(pct / 100 * len(sorted_values))))
    return sorted_values[rank - 1]


# ====================================================================== run hygiene


def prepare_run(server: BenchServer, cfg: Config) -> None:
    """Before a run: drop finished tasks and collect garbage in the worker (unless --keep-tasks),
    then wait (bounded) for the machine to be quiet."""
    if server.forgets and not cfg.keep_tasks:
        rpc_call(server.port, "/bench/forget", b"{}")
    wait_for_quiet(server, cfg)


def noise_now(server: BenchServer, window: float = 0.5) -> float:
    """CPU used by other processes, plus CPU stolen by the hypervisor, over ``window`` seconds."""
    (busy0, steal0), own0 = machine_cpu_seconds(), own_cpu_seconds()
    worker0 = server.cpu_seconds() + server.helper_cpu_seconds()
    gevent.sleep(window)
    busy1, steal1 = machine_cpu_seconds()
    worker = server.cpu_seconds() + server.helper_cpu_seconds() - worker0
    other = (busy1 - busy0) - worker - (own_cpu_seconds() - own0)
    return (max(0.0, other) + (steal1 - steal0)) / window


def wait_for_quiet(server: BenchServer, cfg: Config) -> None:
    """Wait up to ``--quiet-wait`` seconds until other processes (and steal) use < ``--max-other-cpu``."""
    deadline = time.monotonic() + cfg.quiet_wait
    while time.monotonic() < deadline and noise_now(server) > cfg.max_other_cpu:
        pass



# ====================================================================== phase: throughput


@dataclass
class Comparison:
    """A2A vs ceiling at one concurrency; medians over repeats."""

    measure: str
    unit: str
    concurrency: int
    a2a: str
    ceiling: str
    a2a_runs: List[RunResult]
    ceiling_runs: List[RunResult]

    @property
    def a2a_median(self) -> float:
        return statistics.median(r.rate for r in self.a2a_runs)

    @property
    def ceiling_median(self) -> float:
        return statistics.median(r.rate for r in self.ceiling_runs)

    @property
    def ratio(self) -> float:
        return self.a2a_median / self.ceiling_median if self.ceiling_median else 0.0

    @property
    def a2a_cost_us(self) -> float:
        return _median_of(self.a2a_runs, "worker_cpu_us")

    @property
    def ceiling_cost_us(self) -> float:
        return _median_of(self.ceiling_runs, "worker_cpu_us")


def compare(server: BenchServer, cfg: Config, measure_name: str, unit: str,
            a2a: Scenario, ceiling: Scenario, concurrency: int,
            ceiling_server: Optional[BenchServer] = None,
            ceiling_name: str = "ceiling") -> Comparison:
    """Warm both scenarios, then alternate A2A and ceiling runs ``repeat`` times (the
    ceiling on ``ceiling_server`` when it has one of its own)."""
    other = ceiling_server or server
    say(f"  {measure_name} c={concurrency}: warm-up {cfg.warmup:.1f}s each")
    if cfg.warmup > 0:
        prepare_run(server, cfg)
        measure(server, a2a, concurrency, cfg.warmup)
        prepare_run(other, cfg)
        measure(other, ceiling, concurrency, cfg.warmup)
    result = Comparison(measure_name, unit, concurrency, a2a.label, ceiling.label, [], [])
    for index in range(cfg.repeat):
        for attempt in range(1 + cfg.noise_retries):
            prepare_run(server, cfg)
            a = measure(server, a2a, concurrency, cfg.duration)
            prepare_run(other, cfg)
            c = measure(other, ceiling, concurrency, cfg.duration)
            noisy = max(a.other_cpu + a.steal, c.other_cpu + c.steal) > cfg.max_other_cpu
            say(f"    run {index + 1}/{cfg.repeat}: a2a {_brief(a, unit)} | "
                f"{ceiling_name} {_brief(c, unit)}"
                + ("  [noisy: repeated]" if noisy and attempt < cfg.noise_retries else ""))
            if not noisy:
                break
        result.a2a_runs.append(a)
        result.ceiling_runs.append(c)
    return result


def _brief(r: RunResult, unit: str) -> str:
    return (f"{r.rate:9.1f} {unit} (cpu client {r.client_cpu:4.0%} server {r.server_cpu:4.0%} "
            f"other {r.other_cpu:4.0%} steal {r.steal:3.0%}, errors {r.errors})")


def throughput_phase(server: BenchServer, cfg: Config, kind: str) -> List[Comparison]:
    """SendMessage vs bare JSON (``json``) or 100-chunk stream vs bare SSE (``sse``)."""
    sc = scenarios(cfg.chunks)
    if kind == "json":
        return [compare(server, cfg, "SendMessage", "req/s", sc["send"], sc["bare_json"], c)
                for c in cfg.concurrency]
    return [compare(server, cfg, "SSE events", "events/s", sc["stream"], sc["bare_sse"], c)
            for c in cfg.sse_concurrency]


# ====================================================================== phase: peer


def peer_phase(server: BenchServer, cfg: Config) -> List[Comparison]:
    """SendMessage and the 100-chunk stream, a2a_flask against the official a2a-sdk
    server (``sdk_peer.py`` under uvicorn, on the same CPU), runs alternating."""
    sc = scenarios(cfg.chunks)
    peer = PeerServer(cfg.server_cpu, cfg.chunks)
    try:
        peer.wait_ready()
        say(f"  a2a-sdk server pid {peer.worker_pid} on CPUs {peer.worker_affinity()}, "
            f"port {peer.port}")
        plan = ([("SendMessage", "req/s", sc["send"], c) for c in cfg.concurrency]
                + [("SSE events", "events/s", sc["stream"], c) for c in cfg.sse_concurrency])
        return [compare(server, cfg, measure_name, unit, scenario,
                        replace(scenario, label="a2a-sdk " + scenario.label), c,
                        ceiling_server=peer, ceiling_name="a2a-sdk")
                for measure_name, unit, scenario, c in plan]
    except BaseException:
        peer.keep_log = True
        raise
    finally:
        peer.stop()


# ====================================================================== phase: first event


@dataclass
class Latency:
    label: str
    samples: List[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.samples) * 1000 if self.samples else 0.0

    @property
    def p90_ms(self) -> float:
        return percentile(sorted(self.samples), 90) * 1000


def first_event_samples(port: int, scenario: Scenario, count: int, budget: float) -> List[float]:
    """Sequential streams on one keep-alive connection; seconds to each first event."""
    samples: List[float] = []
    conn = HttpConnection(port)
    deadline = time.perf_counter() + budget
    try:
        for _ in range(count):
            if time.perf_counter() > deadline:
                break
            samples.append(exchange(conn, scenario, next(_NUMBERS)).first)
    finally:
        conn.close()
    return samples


def ttfe_phase(server: BenchServer, cfg: Config) -> Dict[str, Latency]:
    """First-event latency at concurrency 1, rounds interleaved across scenarios."""
    sc = scenarios(cfg.chunks)
    keys = ("stream", "stream_echo", "bare_sse")
    results = {k: Latency(sc[k].label, []) for k in keys}
    budget = max(10.0, cfg.duration * 4)
    for key in keys:
        first_event_samples(server.port, sc[key], 20, budget)  # warm-up
    for index in range(cfg.repeat):
        for key in keys:
            prepare_run(server, cfg)
            results[key].samples += first_event_samples(server.port, sc[key], cfg.ttfe_samples, budget)
        say(f"  round {index + 1}/{cfg.repeat}: " + ", ".join(
            f"{k} median {results[k].median_ms:.3f} ms" for k in keys))
    return results


# ====================================================================== phase: held streams


@dataclass
class HeldResult:
    """Idle streams held open at once, and what they cost the worker."""

    mode: str
    requested: int
    opened: int = 0             # answered 200 text/event-stream
    first_event: int = 0        # also delivered their first data event
    alive_after_hold: int = 0
    failed: int = 0
    failures: List[str] = field(default_factory=list)
    baseline_streams: int = 0
    rss_baseline_kib: int = 0
    rss_held_kib: int = 0
    kib_per_stream: float = 0.0
    rss_released_kib: int = 0
    fds_baseline: int = 0
    fds_held: int = 0
    fds_released: int = 0
    open_seconds: float = 0.0
    streams_per_s: float = 0.0


def start_hold_task(port: int) -> str:
    """Create a task on the hold agent and wait until it is WORKING; its id."""
    config = ',"configuration":{"returnImmediately":true}'
    task_id = rpc_call(port, "/hold", message_body("SendMessage", 1, config))["result"]["task"]["id"]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        task = rpc_call(port, "/hold", rpc_body("GetTask", {"id": task_id}))["result"]
        if task["status"]["state"] == "TASK_STATE_WORKING":
            return task_id
        gevent.sleep(0.05)
    raise RuntimeError(f"hold task {task_id} never became WORKING")


def open_idle_stream(port: int, request: bytes, result: HeldResult,
                     held: List[HttpConnection]) -> None:
    """Open one stream; keep it only if headers (and the first event) arrived."""
    conn: Optional[HttpConnection] = None
    try:
        conn = HttpConnection(port, timeout=IO_TIMEOUT)
        conn.send(request)
        head = conn.read_head()
        if head.status != 200 or not head.content_type.startswith("text/event-stream"):
            raise ProtocolError(f"HTTP {head.status} {head.content_type}")
        held.append(conn)
        result.opened += 1
        while True:  # the opening comment comes first, then the first event
            chunk = conn.read_chunk()
            if chunk is None:
                raise ProtocolError("stream ended while it should stay idle")
            if count_events(chunk):
                result.first_event += 1
                return
    except (OSError, ProtocolError, ValueError) as exc:
        result.failed += 1
        if len(result.failures) < 5:
            result.failures.append(f"{type(exc).__name__}: {exc}")
        if conn is not None and conn not in held:
            conn.close()


def open_streams(port: int, requests: Callable[[int], bytes], count: int, first_number: int,
                 cfg: Config, result: HeldResult, held: List[HttpConnection]) -> None:
    pool = gevent.pool.Pool(cfg.connect_concurrency)
    for number in range(first_number, first_number + count):
        pool.spawn(open_idle_stream, port, requests(number), result, held)
    pool.join()


def settle(seconds: float = 2.0) -> None:
    """Let the worker finish pending work before reading its RSS."""
    gevent.sleep(seconds)


def stream_requests(port: int, mode: str) -> Callable[[int], bytes]:
    """The request that opens one idle stream in ``mode`` (subscribe, send or bare)."""
    if mode == "subscribe":
        task_id = start_hold_task(port)
        say(f"  hold task {task_id} is WORKING")
        return lambda number: post("/hold", rpc_body("SubscribeToTask", {"id": task_id}, number),
                                   "text/event-stream")
    path = "/bare/idle" if mode == "bare" else "/hold"
    return lambda number: post(path, message_body("SendStreamingMessage", number), "text/event-stream")


def held_phase(server: BenchServer, cfg: Config, mode: str) -> HeldResult:
    """Hold ``cfg.streams`` idle streams; always release them and close the sockets."""
    result = HeldResult(mode, cfg.streams)
    held: List[HttpConnection] = []
    try:
        with gevent.Timeout(cfg.phase_timeout, RuntimeError("held-streams phase timed out")):
            hold_streams(server, cfg, stream_requests(server.port, mode), result, held)
    finally:
        release_streams(server, held, result)
    return result


def hold_streams(server: BenchServer, cfg: Config, requests: Callable[[int], bytes],
                 result: HeldResult, held: List[HttpConnection]) -> None:
    """Open a warm-up batch, read the baseline, open the rest, read RSS growth per stream."""
    pid, port = server.worker_pid, server.port
    warm = min(100, max(1, cfg.streams // 10))
    open_streams(port, requests, warm, 0, cfg, result, held)
    settle()
    result.baseline_streams = len(held)
    result.rss_baseline_kib, result.fds_baseline = rss_kib(pid), open_fds(pid)
    started = time.perf_counter()
    open_streams(port, requests, cfg.streams - warm, warm, cfg, result, held)
    result.open_seconds = time.perf_counter() - started
    result.streams_per_s = (cfg.streams - warm) / result.open_seconds
    settle()
    result.rss_held_kib, result.fds_held = rss_kib(pid), open_fds(pid)
    added = len(held) - result.baseline_streams
    if added > 0:
        result.kib_per_stream = (result.rss_held_kib - result.rss_baseline_kib) / added
    say(f"  {result.mode}: {len(held)} streams open in {result.open_seconds:.1f}s; worker RSS "
        f"{result.rss_baseline_kib} -> {result.rss_held_kib} KiB ({result.kib_per_stream:.2f} "
        f"KiB/stream); fds {result.fds_baseline} -> {result.fds_held}")
    gevent.sleep(cfg.hold_seconds)
    result.alive_after_hold = sum(conn.alive() for conn in held)


def held_ceiling(cfg: Config) -> HeldResult:
    """Bare idle Flask streams on a fresh worker of their own (freed memory is not reused)."""
    server = BenchServer(cfg.server_cpu, cfg.streams + 1024, cfg.chunks)
    try:
        server.wait_ready()
        say(f"phase held ceiling (separate worker pid {server.worker_pid})")
        return held_phase(server, cfg, "bare")
    except BaseException:
        server.keep_log = True
        raise
    finally:
        server.stop()


def release_streams(server: BenchServer, held: List[HttpConnection], result: HeldResult) -> None:
    """End the hold executors, close every client socket, wait for the worker to let go."""
    try:
        rpc_call(server.port, "/bench/release", b"{}")
    except (OSError, ProtocolError, ValueError) as exc:
        say(f"  warning: release failed: {exc}")
    for conn in held:
        conn.close()
    held.clear()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and open_fds(server.worker_pid) > result.fds_baseline:
        gevent.sleep(0.2)
    settle(1.0)
    result.fds_released = open_fds(server.worker_pid)
    result.rss_released_kib = rss_kib(server.worker_pid)


# ====================================================================== phase: wrk cross-check


@dataclass
class WrkCheck:
    """wrk and this load generator, back to back, on the same route and concurrency."""

    scenario: str
    path: str
    unit: str
    concurrency: int
    wrk_rate: float      # in ``unit`` (a stream counts as its events)
    wrk_cpu: float
    wrk_non_2xx: int
    own_rate: float
    own_client_cpu: float

    @property
    def ratio(self) -> float:
        return self.own_rate / self.wrk_rate if self.wrk_rate else 0.0


def wrk_phase(server: BenchServer, cfg: Config) -> List[WrkCheck]:
    """Each route measured by wrk (pinned like this process) and right after by this generator."""
    if not shutil.which("wrk"):
        say("  wrk not installed (apt-get install -y wrk); skipped")
        return []
    sc = scenarios(cfg.chunks)
    plan = [(sc["send"], max(cfg.concurrency)), (sc["bare_json"], max(cfg.concurrency)),
            (sc["stream"], max(cfg.sse_concurrency)), (sc["bare_sse"], max(cfg.sse_concurrency))]
    checks = []
    for scenario, concurrency in plan:
        checks.append(wrk_check(server, cfg, scenario, concurrency))
        c = checks[-1]
        say(f"  {c.path} c={c.concurrency}: wrk {c.wrk_rate:,.0f} {c.unit} (cpu {c.wrk_cpu:.0%}), "
            f"this generator {c.own_rate:,.0f} (cpu {c.own_client_cpu:.0%})")
    return checks


def wrk_check(server: BenchServer, cfg: Config, scenario: Scenario, concurrency: int) -> WrkCheck:
    """wrk first, then this generator, each for ``cfg.duration`` seconds."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(wrk_script(message_body(scenario.method, 1).decode(), scenario.streaming))
    try:
        prepare_run(server, cfg)
        wrk_rps, wrk_cpu, non_2xx = run_wrk(server, cfg, scenario.path, concurrency, script.name)
    finally:
        os.unlink(script.name)
    prepare_run(server, cfg)
    own = measure(server, scenario, concurrency, cfg.duration)
    per_request = own.units / own.requests if own.requests else 1.0
    return WrkCheck(scenario.label, scenario.path, "events/s" if scenario.streaming else "req/s",
                    concurrency, wrk_rps * per_request, wrk_cpu, non_2xx, own.rate, own.client_cpu)


def wrk_script(body: str, streaming: bool) -> str:
    accept = "text/event-stream" if streaming else "application/json"
    return ('wrk.method = "POST"\n'
            f"wrk.body = {json.dumps(body)}\n"
            'wrk.headers["Content-Type"] = "application/json"\n'
            'wrk.headers["A2A-Version"] = "1.0"\n'
            f'wrk.headers["Accept"] = "{accept}"\n')


def run_wrk(server: BenchServer, cfg: Config, path: str, concurrency: int,
            script: str) -> Tuple[float, float, int]:
    """Requests/s, CPU fraction and non-2xx count of one wrk run."""
    seconds = max(1, int(round(cfg.duration)))
    cmd = ["wrk", "-t1", f"-c{concurrency}", f"-d{seconds}s", "-s", script,
           f"http://{HOST}:{server.port}{path}"]
    if shutil.which("taskset"):
        cmd = ["taskset", "-c", str(cfg.client_cpu), *cmd]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 30).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) / seconds
    rps = re.search(r"Requests/sec:\s*([\d.]+)", out)
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s*(\d+)", out)
    return (float(rps.group(1)) if rps else 0.0), cpu, (int(non_2xx.group(1)) if non_2xx else 0)


# ====================================================================== report


class Row(NamedTuple):
    measure: str
    value: str
    ceiling: str
    ratio: str
    target: str
    verdict: str


def verdict(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def comparison_rows(comparisons: List[Comparison], target: float) -> List[Row]:
    rows = []
    for c in comparisons:
        rows.append(Row(f"{c.measure} c={c.concurrency} ({c.unit})", f"{c.a2a_median:,.0f}",
                        f"{c.ceiling_median:,.0f}", f"{c.ratio:.1%}", f">= {target:.0%}",
                        verdict(c.ratio >= target and not _errors(c))))
    return rows


def _errors(c: Comparison) -> int:
    return sum(r.errors for r in c.a2a_runs + c.ceiling_runs)


def latency_rows(latencies: Dict[str, Latency]) -> List[Row]:
    bare = latencies["bare_sse"]
    rows = []
    for key, name in (("stream", "first event, 100-chunk agent"), ("stream_echo", "first event, echo agent")):
        lat = latencies[key]
        rows.append(Row(f"{name}, median (ms)", f"{lat.median_ms:.3f}", f"{bare.median_ms:.3f}",
                        f"{_safe_ratio(lat.median_ms, bare.median_ms):.2f}x",
                        f"<= {TARGET_FIRST_EVENT_MS} ms", verdict(lat.median_ms <= TARGET_FIRST_EVENT_MS)))
        rows.append(Row(f"{name}, p90 (ms)", f"{lat.p90_ms:.3f}", f"{bare.p90_ms:.3f}",
                        f"{_safe_ratio(lat.p90_ms, bare.p90_ms):.2f}x", "(info)", ""))
    return rows


def _safe_ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def held_rows(held: HeldResult, ceiling: Optional[HeldResult]) -> List[Row]:
    count_ok = held.first_event >= TARGET_HELD_STREAMS and held.alive_after_hold >= TARGET_HELD_STREAMS
    scaled = ", scaled down" if held.requested < TARGET_HELD_STREAMS else ""
    kib_ceiling = f"{ceiling.kib_per_stream:.2f}" if ceiling else "-"
    kib_ratio = f"{_safe_ratio(held.kib_per_stream, ceiling.kib_per_stream):.2f}x" if ceiling else "-"
    return [
        Row(f"held idle streams ({held.mode}{scaled})", f"{held.alive_after_hold:,}",
            f"{ceiling.alive_after_hold:,}" if ceiling else "-",
            f"{_safe_ratio(held.alive_after_hold, held.requested):.0%} of asked",
            f">= {TARGET_HELD_STREAMS:,}", verdict(count_ok)),
        Row("worker RSS per held stream (KiB)", f"{held.kib_per_stream:.2f}", kib_ceiling, kib_ratio,
            f"<= {TARGET_HELD_RATIO:.2f}x",
            verdict(0 < held.kib_per_stream <= TARGET_HELD_RATIO * ceiling.kib_per_stream)
            if ceiling else "needs --held-ceiling"),
    ]


def render_table(rows: List[Row]) -> str:
    header = Row("measure", "a2a_flask", "ceiling", "ratio", "target", "result")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "+".join("-" * (w + 2) for w in widths)

    def fmt(row: Row) -> str:
        cells = [row[0].ljust(widths[0])] + [row[i].rjust(widths[i]) for i in range(1, len(row))]
        return " | ".join(cells)

    return "\n".join([fmt(header), line, *(fmt(r) for r in rows)])


def cpu_table(comparisons: List[Comparison]) -> str:
    """Median CPU use (fraction of one CPU) per measurement: is the load generator the bottleneck?"""
    header = ("measure", "a2a client", "a2a server", "ceil client", "ceil server", "other procs",
              "steal", "errors")
    rows: List[Tuple[str, ...]] = [header]
    for c in comparisons:
        runs = c.a2a_runs + c.ceiling_runs
        rows.append((f"{c.measure} c={c.concurrency}",
                     *(f"{_median_of(group, f):.0%}" for group in (c.a2a_runs, c.ceiling_runs)
                       for f in ("client_cpu", "server_cpu")),
                     f"{_median_of(runs, 'other_cpu'):.0%}", f"{_median_of(runs, 'steal'):.0%}",
                     str(_errors(c))))
    return format_table(rows)


def cost_table(comparisons: List[Comparison]) -> str:
    """Worker CPU per request or event, and what a2a_flask adds to the bare route's.

    The ratios depend on how fast the bare route is on the machine; this
    difference is a2a_flask's own work (protocol, task, store, events), the
    number to drive down.
    """
    rows: List[Tuple[str, ...]] = [("measure", "a2a worker CPU", "ceiling worker CPU",
                                    "a2a_flask's own")]
    for c in comparisons:
        unit = "event" if c.unit == "events/s" else "request"
        rows.append((f"{c.measure} c={c.concurrency} (us per {unit})", f"{c.a2a_cost_us:.1f}",
                     f"{c.ceiling_cost_us:.1f}", f"{c.a2a_cost_us - c.ceiling_cost_us:+.1f}"))
    return format_table(rows)


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells (the first one the header) as text: first column left, the rest right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(" | ".join(cell.rjust(w) if i else cell.ljust(w)
                                for i, (cell, w) in enumerate(zip(row, widths))) for row in rows)


def _median_of(runs: List[RunResult], name: str) -> float:
    return statistics.median(getattr(r, name) for r in runs)


def git_revision() -> str:
    """The checked-out commit, with ``+dirty`` when a2a_flask/ has local changes (read-only git)."""
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                              text=True, timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "a2a_flask"], cwd=ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+dirty" if dirty else "")


def environment(server: Optional[BenchServer], cfg: Config, client_cpus: List[int]) -> Dict[str, Any]:
    """Versions, CPU and pinning, so results can be compared across machines."""
    from importlib.metadata import version

    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    return {
        "python": platform.python_version(), "gevent": version("gevent"),
        "gunicorn": version("gunicorn"), "flask": version("flask"),
        "a2a_flask": version("a2a-flask"), "git": git_revision(), "cpu_model": model, "cpus": os.cpu_count(),
        "loadavg_at_start": Path("/proc/loadavg").read_text().split()[:3],
        "server_cpus": server.worker_affinity() if server else [],
        "client_cpus": client_cpus, "nofile": list(resource.getrlimit(resource.RLIMIT_NOFILE)),
        "gc_full_every": os.environ.get(GC_SETTING) or "0 (Python's own)",
        "a2a_sdk": _version_or_none("a2a-sdk"), "uvicorn": _version_or_none("uvicorn"),
    }


def _version_or_none(distribution: str) -> Optional[str]:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


@dataclass
class Results:
    env: Dict[str, Any] = field(default_factory=dict)
    comparisons: List[Comparison] = field(default_factory=list)
    latencies: Dict[str, Latency] = field(default_factory=dict)
    held: Optional[HeldResult] = None
    held_ceiling: Optional[HeldResult] = None
    wrk: List[WrkCheck] = field(default_factory=list)
    #: a2a_flask against the official a2a-sdk server (the "ceiling" side of each).
    peer: List[Comparison] = field(default_factory=list)
    worker_rss_kib: Dict[str, int] = field(default_factory=dict)

    def rows(self) -> List[Row]:
        rows = comparison_rows([c for c in self.comparisons if c.unit == "req/s"], TARGET_SEND_RATIO)
        rows += comparison_rows([c for c in self.comparisons if c.unit == "events/s"], TARGET_SSE_RATIO)
        if self.latencies:
            rows += latency_rows(self.latencies)
        if self.held is not None:
            rows += held_rows(self.held, self.held_ceiling)
        return rows


def print_report(results: Results) -> None:
    env = results.env
    print(f"\na2a_flask {env.get('a2a_flask')} at {env.get('git')}; Python {env.get('python')}, "
          f"gunicorn {env.get('gunicorn')}, gevent {env.get('gevent')}, Flask {env.get('flask')}; "
          f"{env.get('cpu_model')}, worker on CPUs {env.get('server_cpus')}, "
          f"load generator on CPUs {env.get('client_cpus')}; "
          f"A2A_GC_FULL_EVERY={env.get('gc_full_every')}\n")
    rows = results.rows()
    if rows:  # none when only the peer phase ran
        print(render_table(rows))
    if results.comparisons:
        print()
        print(cpu_table(results.comparisons))
        print()
        print(cost_table(results.comparisons))
    if results.peer:
        print()
        print(peer_table(results.peer, results.env))
    if results.wrk:
        print()
        print(wrk_table(results.wrk))


def peer_table(comparisons: List[Comparison], env: Dict[str, Any]) -> str:
    """a2a_flask against the official a2a-sdk server: rates, how many times faster, and
    the server CPU per request or event (information, no target)."""
    rows = [(f"against a2a-sdk {env.get('a2a_sdk')} (uvicorn {env.get('uvicorn')})", "a2a_flask",
             "a2a-sdk", "a2a_flask / sdk", "CPU a2a_flask", "CPU a2a-sdk")]
    for c in comparisons:
        unit = "event" if c.unit == "events/s" else "request"
        rows.append((f"{c.measure} c={c.concurrency} ({c.unit})",
                     f"{c.a2a_median:,.0f}", f"{c.ceiling_median:,.0f}", f"{c.ratio:.2f}x",
                     f"{c.a2a_cost_us:.1f} us/{unit}", f"{c.ceiling_cost_us:.1f} us/{unit}"))
    return format_table(rows)


def wrk_table(checks: List[WrkCheck]) -> str:
    """wrk vs this generator, back to back: ~100 % means the generator is not the limit."""
    rows = [("route (wrk cross-check)", "wrk", "this generator", "ratio", "wrk cpu", "generator cpu")]
    for c in checks:
        rows.append((f"{c.path} c={c.concurrency} ({c.unit})", f"{c.wrk_rate:,.0f}", f"{c.own_rate:,.0f}",
                     f"{c.ratio:.0%}", f"{c.wrk_cpu:.0%}", f"{c.own_client_cpu:.0%}"))
    return format_table(rows)


def to_json(results: Results, cfg: Config) -> Dict[str, Any]:
    def comparison(c: Comparison) -> Dict[str, Any]:
        return {"measure": c.measure, "unit": c.unit, "concurrency": c.concurrency,
                "a2a": {"scenario": c.a2a, "median": c.a2a_median, "runs": [asdict(r) for r in c.a2a_runs]},
                "ceiling": {"scenario": c.ceiling, "median": c.ceiling_median,
                            "runs": [asdict(r) for r in c.ceiling_runs]},
                "ratio": c.ratio, "a2a_cpu_us": c.a2a_cost_us,
                "ceiling_cpu_us": c.ceiling_cost_us}

    return {
        "config": asdict(cfg), "environment": results.env,
        "targets": {"send_ratio": TARGET_SEND_RATIO, "sse_ratio": TARGET_SSE_RATIO,
                    "held_streams": TARGET_HELD_STREAMS, "held_ratio": TARGET_HELD_RATIO,
                    "first_event_ms": TARGET_FIRST_EVENT_MS},
        "throughput": [comparison(c) for c in results.comparisons],
        "first_event": {k: {"scenario": v.label, "median_ms": v.median_ms, "p90_ms": v.p90_ms,
                            "samples": len(v.samples)} for k, v in results.latencies.items()},
        "held_streams": asdict(results.held) if results.held else None,
        "held_streams_ceiling": asdict(results.held_ceiling) if results.held_ceiling else None,
        "wrk": [dict(asdict(w), ratio=w.ratio) for w in results.wrk],
        "peer": [comparison(c) for c in results.peer],
        "worker_rss_kib_after_phase": results.worker_rss_kib,
        "table": [r._asdict() for r in results.rows()],
    }


# ====================================================================== main


def run(cfg: Config) -> Results:
    """Start the server, run the selected phases in order, always stop the server."""
    results = Results()
    client_cpus = pin_self(cfg.client_cpu)
    raise_nofile(cfg.streams + 4096)
    if "held" in cfg.phases and cfg.held_ceiling:
        results.held_ceiling = held_ceiling(cfg)
    server = BenchServer(cfg.server_cpu, cfg.streams + 1024, cfg.chunks)
    try:
        server.wait_ready()
        results.env = environment(server, cfg, client_cpus)
        say(f"a2a_flask at {results.env['git']}; "
            f"gunicorn worker pid {server.worker_pid} on CPUs {server.worker_affinity()}, "
            f"load generator on CPUs {client_cpus}, port {server.port}")
        results.worker_rss_kib["start"] = rss_kib(server.worker_pid)
        for phase in cfg.phases:
            run_phase(phase, server, cfg, results)
            results.worker_rss_kib[phase] = rss_kib(server.worker_pid)
            if server.proc.poll() is not None:
                raise RuntimeError("gunicorn died:\n" + server.log_tail())
    except BaseException:
        server.keep_log = True
        raise
    finally:
        server.stop()
    return results


def run_phase(phase: str, server: BenchServer, cfg: Config, results: Results) -> None:
    say(f"phase {phase}")
    if phase == "held":
        results.held = held_phase(server, cfg, cfg.held_mode)
    elif phase in ("json", "sse"):
        results.comparisons += throughput_phase(server, cfg, phase)
    elif phase == "ttfe":
        results.latencies = ttfe_phase(server, cfg)
    elif phase == "peer":
        results.peer = peer_phase(server, cfg)
    elif phase == "wrk":
        results.wrk = wrk_phase(server, cfg)


def main(argv: Optional[List[str]] = None) -> int:
    global _QUIET
    cfg = parse_args(argv)
    _QUIET = cfg.quiet
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    results = run(cfg)
    print_report(results)
    if cfg.json_path:
        Path(cfg.json_path).write_text(json.dumps(to_json(results, cfg), indent=2) + "\n")
        say(f"results written to {cfg.json_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
