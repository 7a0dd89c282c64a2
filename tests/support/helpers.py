"""Test helpers: JSON-RPC calls, SSE parsing, schema validation, real servers."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional

import requests

from tests.support.ports import (  # noqa: F401 (free_port: tests import it from here)
    check_listener, free_port, listener_pids, reserve_port)

ROOT = Path(__file__).resolve().parents[2]
#: The files the suite reads: schemas, seeds, recorded wire and store output.
DATA = ROOT / "tests" / "data"
#: The official JSON schemas, copied into the repository (see tests/data/schemas/README.rst).
SPEC = DATA / "schemas"

V1 = {"A2A-Version": "1.0"}


def rpc_body(method: str, params: Any = None, request_id: Any = 1) -> Dict[str, Any]:
    body: Dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return body


def user_message(text: str = "hello", message_id: str = "m-1", **extra: Any) -> Dict[str, Any]:
    message = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    message.update(extra)
    return message


def parse_sse(text: str) -> List[Dict[str, Any]]:
    """SSE events as dicts: ``{"id", "event", "data" (decoded JSON)}``; comments dropped."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        fields: Dict[str, Any] = {}
        data_lines = []
        for line in block.split("\n"):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data_lines.append(value)
            else:
                fields[name] = value
        if data_lines:
            fields["data"] = json.loads("\n".join(data_lines))
            events.append(fields)
    return events


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``predicate`` until it returns something true (returned); fail after
    ``timeout`` seconds saying ``what`` never happened."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
        time.sleep(0.05)


class Gate:
    """A live task's gate: ``release`` lets it finish, ``done`` says the executor returned."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.done = threading.Event()


# ------------------------------------------------------------- schemas


def _load_schema_registry(version: str):
    from referencing import Registry, Resource

    doc = json.loads((SPEC / version / "a2a.schema.json").read_text())
    definitions = doc.get("definitions") or doc.get("$defs")
    registry = Registry()
    if version == "v1.0":
        # The 1.0 schema refers to its parts by protobuf file names.
        for title, schema in definitions.items():
            compact = title.replace(" ", "")
            for name in (f"lf.a2a.v1.{compact}.jsonschema.json",
                         f"google.protobuf.{compact}.jsonschema.json"):
                registry = registry.with_resource(name, Resource.from_contents(
                    schema, default_specification=_draft()))
    return doc, definitions, registry


def _draft():
    from referencing.jsonschema import DRAFT202012

    return DRAFT202012


_CACHE: Dict[str, Any] = {}


def validate(instance: Any, definition: str, version: str = "v1.0") -> None:
    """Validate against a definition of an official schema (``"Task"``, ``"Stream Response"``)."""
    import jsonschema

    if version not in _CACHE:
        _CACHE[version] = _load_schema_registry(version)
    doc, definitions, registry = _CACHE[version]
    if version == "v1.0":
        schema = definitions[definition]
    else:
        schema = {"$ref": f"#/definitions/{definition}", "definitions": definitions}
        if "$defs" in doc:
            schema = {"$ref": f"#/$defs/{definition}", "$defs": definitions}
    validator_cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    validator_cls(schema, registry=registry).validate(instance)


def validate_stream_response(result: Dict[str, Any]) -> None:
    validate(result, "Stream Response")


# ------------------------------------------------------------- real servers


def stop_process_group(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` (SIGTERM: a graceful stop) to a server started with
    ``start_new_session`` and its workers; SIGKILL what is still there after 10 s."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def gunicorn_options() -> List[str]:
    """What every gunicorn a test starts is given besides its own settings:
    ``--no-control-socket`` where the installed gunicorn has it (27 and later open
    one control socket per user, ``~/.gunicorn/gunicorn.ctl``, which every parallel
    gunicorn of the suite would otherwise claim)."""
    if not _GUNICORN_OPTIONS:
        from gunicorn.config import KNOWN_SETTINGS

        flags = {flag for setting in KNOWN_SETTINGS for flag in (setting.cli or ())}
        _GUNICORN_OPTIONS.append(["--no-control-socket"] if "--no-control-socket" in flags else [])
    return list(_GUNICORN_OPTIONS[0])


_GUNICORN_OPTIONS: List[List[str]] = []


#: What gevent's monitor thread writes when a greenlet kept the hub from running.
BLOCKED_MARK = "appears to be blocked"
#: The longest a greenlet may hold the hub before the watchdog reports it (seconds of
#: wall time; a report counts only if the worker was not merely waiting for a CPU:
#: see :func:`blocked_in_our_code`).
MAX_BLOCKING_TIME = 0.1
#: How tests/support/gunicorn_watch.py says how the hub's thread spent a blocked period.
_SCHEDULING = re.compile(r"Scheduling: ran ([\d.]+) s, waited for a CPU ([\d.]+) s, of ([\d.]+) s")
_INSIDE = re.compile(r"Inside the block: ran ([\d.]+) s, waited for a CPU ([\d.]+) s, of ([\d.]+) s")


#: Paths in a blocked stack that make the report ours: the package, the test and
#: example apps.  See :func:`blocked_in_our_code`.
OUR_CODE = ("/a2a_flask/", "/tests/", "/examples/", "/bench/")
#: Where gevent's sockets call their non-blocking OS socket (the innermost frame of
#: a report taken while the worker was not scheduled).  See :func:`blocked_in_our_code`.
NON_BLOCKING_SOCKET_CALLS = ("gevent/_socketcommon.py", "gevent/_socket3.py")
#: The stores whose calls are synchronous local file I/O (docs/stores.rst says so): a
#: thread asleep in one waits for the disk.  See :func:`blocked_in_our_code`.
LOCAL_FILE_STORES = ("/a2a_flask/stores/sqlite.py", "/a2a_flask/stores/shelve.py")


def blocked_reports(log_text: str) -> List[str]:
    """The hub-blocked reports in a worker log: each one's headline and blocked stack
    (gevent's list of every greenlet that follows it is left out)."""
    reports = []
    for chunk in log_text.split("=" * 80)[1:]:
        if BLOCKED_MARK in chunk:
            reports.append(chunk.split("\nInfo:", 1)[0].strip())
    return reports


#: gunicorn's steps of a worker's boot, before its first connection (see below).
BOOT_STEPS = ("load_wsgi", "post_worker_init")


def blocked_in_our_code(report: str) -> bool:
    """Whether a report's blocked stack runs through our code.

    The monitor measures wall time: on a loaded 2-core machine the worker can
    simply not be scheduled for 0.1 s, and the report then catches whatever ran
    last, typically a socket ``send`` inside gunicorn with none of our frames.
    A greenlet of ours that really keeps the hub (a spin, a blocking call) is
    caught with our frames on its stack, so only those reports fail a test.
    Loading the app (imports, ``init_app``) and the test servers' own
    ``post_worker_init`` happen before the worker takes its first connection, so
    they keep no caller waiting: a stack in either does not count.

    The same holds when the innermost frame is a call on a gevent socket's own
    non-blocking OS socket (``self._sock.recv``): that call returns at once, so a
    report stopped there caught a worker that was not scheduled, not one that
    kept the hub.

    And whatever the stack, the hub must have been kept for MAX_BLOCKING_TIME of the
    worker's own time, not of the machine's, and for most of the time since the
    check before the report (wholly inside the block; the first window may begin in
    the idle hub's poll, whose sleep looks like a blocking call's): the report's scheduling line (added by
    tests/support/gunicorn_watch.py from the kernel's accounting, from before the
    block began) says how long the hub's thread ran or slept in a blocking call, as
    against waited, runnable, for a CPU.  A greenlet that keeps the hub spends its
    time running (a spin) or asleep in a call (a blocking call), so it is caught
    however busy the machine; a worker that was merely not given a CPU is not.

    One kind of sleep is the disk's, not ours: the SQLite and shelve stores read and
    write a local file synchronously (their documented trade), so a statement can
    sleep on a disk that the rest of the machine keeps busy.  A report whose innermost
    frame is in one of those stores counts only for the time the thread ran; a slow
    query or a large pickle there still fails.
    """
    stack = report.split("Blocked Stack", 1)[-1]
    files = [line for line in stack.splitlines() if line.strip().startswith("File")]
    scheduling = _SCHEDULING.search(report)
    if scheduling:
        ran, waited, wall = map(float, scheduling.groups())
        if wall - waited < MAX_BLOCKING_TIME:
            return False
        in_local_file = files and any(name in files[-1] for name in LOCAL_FILE_STORES)
        if in_local_file and ran < MAX_BLOCKING_TIME:
            return False
    inside = _INSIDE.search(report)
    if inside:
        _, waited, wall = map(float, inside.groups())
        if waited > (wall - waited):  # within the block, mostly waiting for a CPU
            return False
    if any(f"in {boot}" in stack for boot in BOOT_STEPS):
        return False
    if files and any(name in files[-1] for name in NON_BLOCKING_SOCKET_CALLS):
        return False
    return any(part in line for line in files for part in OUR_CODE)


class Server:
    """A real gunicorn (gevent workers by default) serving ``app_spec`` on loopback.

    gevent workers run with gevent's monitor thread (the hub watchdog): a
    greenlet that keeps the hub for more than :data:`MAX_BLOCKING_TIME` is
    reported in the worker log, and :meth:`stop` fails the test with the
    reported stack when it runs through our code (:func:`blocked_in_our_code`),
    unless ``allow_blocking`` (a test that blocks on purpose
    reads :meth:`blocked` itself).
    """

    def __init__(self, app_spec: str, *, workers: int = 1, worker_class: str = "gevent",
                 env: Optional[Dict[str, str]] = None, extra_args: Optional[List[str]] = None,
                 allow_blocking: bool = False, graceful_timeout: float = 2,
                 port: Optional[int] = None) -> None:
        # The port stays reserved until stop(): no other test's server can take it
        # before gunicorn binds it (see tests/support/ports.py).  A ``port`` given is
        # the caller's (from free_port(), reserved for the process).
        self._reservation = None if port else reserve_port()
        self.port = port or self._reservation.port  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{self.port}"
        self.allow_blocking = allow_blocking
        cmd = [sys.executable, "-m", "gunicorn", "-k", worker_class, "-w", str(workers),
               "-b", f"127.0.0.1:{self.port}", "--graceful-timeout", f"{graceful_timeout:g}",
               "--log-level", "warning", "-c", "python:tests.support.gunicorn_watch",
               *gunicorn_options(), *(extra_args or []), app_spec]
        watchdog = {}
        if worker_class == "gevent":
            watchdog = {"GEVENT_MONITOR_THREAD_ENABLE": "1",
                        "GEVENT_MAX_BLOCKING_TIME": str(MAX_BLOCKING_TIME)}
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"a2a-gunicorn-{self.port}.log"
        self._log = open(self.log_path, "wb")
        self._stopped = False
        try:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env={**os.environ, **watchdog, **(env or {})}, stdout=self._log,
                stderr=subprocess.STDOUT, start_new_session=True)
        except BaseException:
            self._log.close()
            self._release()
            raise
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        """Wait until this gunicorn listens on its port and its card answers; a slow
        first answer (workers booting on a busy machine) is waited out.  gunicorn is
        stopped whenever start-up fails: at once, with its log, if it exits or if
        another process serves the port."""
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"gunicorn exited: {self.log_path.read_text()}")
                # The master holds the listening socket: an answer on the port is ours.
                if check_listener(self.port, [self.proc.pid], "gunicorn"):
                    try:
                        requests.get(self.url + "/.well-known/agent-card.json", timeout=5)
                        return
                    except (requests.ConnectionError, requests.Timeout):
                        pass
                time.sleep(0.1)
            raise RuntimeError("gunicorn did not start in time")
        except BaseException:
            self.allow_blocking = True  # the start-up error is the news
            self.stop()  # the constructor fails: nobody else could stop it
            raise

    def rpc(self, method: str, params: Any = None, *, headers: Optional[dict] = None,
            timeout: float = 30, path: str = "/a2a") -> Dict[str, Any]:
        response = requests.post(self.url + path, json=rpc_body(method, params),
                                 headers={**V1, **(headers or {})}, timeout=timeout)
        assert response.status_code == 200, response.text
        return response.json()

    def stream(self, method: str, params: Any, *, headers: Optional[dict] = None,
               timeout: float = 30, path: str = "/a2a") -> Iterator[Dict[str, Any]]:
        """SSE events as they arrive."""
        with requests.post(self.url + path, json=rpc_body(method, params),
                           headers={**V1, **(headers or {})}, stream=True,
                           timeout=timeout) as response:
            assert response.status_code == 200, response.text
            buffer = ""
            for chunk in response.iter_content(chunk_size=None, decode_unicode=True):
                buffer += chunk
                while "\n\n" in buffer:
                    block, buffer = buffer.split("\n\n", 1)
                    yield from parse_sse(block + "\n\n")

    def log_text(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def blocked(self) -> List[str]:
        """The watchdog's hub-blocked reports so far (see :func:`blocked_reports`)."""
        return blocked_reports(self.log_text())

    def stop(self, graceful: bool = False) -> None:
        """Stop gunicorn; fail if the watchdog reported a blocked hub (see the class).

        gunicorn's quick stop (SIGQUIT) unless ``graceful``: an idle graceful stop
        (SIGTERM) costs 1.5-2 s, as a gevent worker looks at its stop flag once a
        second, against about 0.5 s.  A test of what a graceful stop does says so.
        """
        if self._stopped:
            return
        self._stopped = True
        try:
            stop_process_group(self.proc, signal.SIGTERM if graceful else signal.SIGQUIT)
        finally:
            self._log.close()
            self._release()
        if not self.allow_blocking:
            reports = [report for report in self.blocked() if blocked_in_our_code(report)]
            if reports:
                raise AssertionError(
                    f"the gevent hub was blocked for more than {MAX_BLOCKING_TIME}s "
                    f"({len(reports)} report(s) in {self.log_path}); first:\n{reports[0]}")

    def _release(self) -> None:
        if self._reservation is not None:
            self._reservation.release()

    def __enter__(self) -> "Server":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def worker_pids(server: Server) -> List[int]:
    """The pids of a real server's gunicorn workers."""
    with open(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children") as handle:
        return [int(pid) for pid in handle.read().split()]


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_status_kib(pid: int, field: str) -> int:
    """A size from ``/proc/<pid>/status`` in KiB: ``VmRSS`` now, ``VmHWM`` its peak."""
    with open(f"/proc/{pid}/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def rss_kib(pid: int) -> int:
    return proc_status_kib(pid, "VmRSS")


#: The longest the probe allows for each of its requests (seconds).
PROBE_LIMIT = 0.2
#: An answer slower than this, not counting the time the server's processes waited
#: for a CPU meanwhile (the kernel's own count: :func:`cpu_waited`), fails the probe
#: at once, however rare: a worker that stalls this long of its own time is not
#: merely losing the CPU to the machine's other work.
STALL_LIMIT = 1.0
#: Slow answers (over the limit, under STALL_LIMIT) a Probing tolerates: one in
#: ``SLOW_SHARE`` probes (at least one).  A frozen worker answers no probe at all.
SLOW_SHARE = 10
#: The tries :func:`probe` gives a worker whose answer was merely slow.
PROBE_TRIES = 3


def measure(url: str, task_id: str = "", *, headers: Optional[dict] = None) -> Dict[str, float]:
    """One round of the liveness probe: the agent card and a GetTask, each within 5 s
    and right (fails the test otherwise); the seconds each took.

    ``task_id`` defaults to an id no task has (a -32001 answer still goes to the
    store).  The time is the server's: from sending the request to its answer's
    headers (requests' ``elapsed``), so a slow test process does not count.
    """
    with requests.Session() as session:
        card = session.get(url + "/.well-known/agent-card.json", timeout=5)
        get = session.post(url + "/a2a", json=rpc_body(
            "GetTask", {"id": task_id or "no-such-task-probe"}), headers={**V1, **(headers or {})},
            timeout=5)
    assert card.status_code == 200, f"card: HTTP {card.status_code}"
    assert get.status_code == 200 and ("result" in get.json() or "error" in get.json()), get.text
    return {"card": card.elapsed.total_seconds(), "GetTask": get.elapsed.total_seconds()}


def server_pids(url: str) -> List[int]:
    """The processes serving ``url``'s loopback port (those holding its listening socket:
    a gunicorn's master and workers)."""
    from urllib.parse import urlsplit

    return listener_pids(urlsplit(url).port or 80)


def cpu_waited(pids: List[int]) -> Dict[int, float]:
    """Seconds each process's main thread has spent runnable, waiting for a CPU
    (``/proc/<pid>/schedstat``); a process that is gone counts 0."""
    waited = {}
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat") as handle:
                waited[pid] = int(handle.read().split()[1]) / 1e9
        except (OSError, ValueError, IndexError):
            waited[pid] = 0.0
    return waited


def measure_round(url: str, task_id: str, headers: Optional[dict],
                  pids: List[int]) -> Dict[str, Any]:
    """One :func:`measure` round, with the most any of ``pids`` waited for a CPU during
    it: ``{"times": ..., "waited": seconds}``."""
    before = cpu_waited(pids)
    times = measure(url, task_id, headers=headers)
    after = cpu_waited(pids)
    return {"times": times,
            "waited": max((after[pid] - before[pid] for pid in pids), default=0.0)}


def stalled(record: Dict[str, Any]) -> bool:
    """Whether a round's slowest answer took more than STALL_LIMIT of the server's own
    time (its time waiting for a CPU left out)."""
    return max(record["times"].values()) - record.get("waited", 0.0) > STALL_LIMIT


def probe(url: str, task_id: str = "", *, limit: float = PROBE_LIMIT,
          headers: Optional[dict] = None) -> Dict[str, float]:
    """The worker is live: a round of :func:`measure` answers within ``limit`` seconds
    of the server's own time (its time waiting for a CPU left out).

    On a loaded machine the odd answer is late for want of a CPU, not of the worker:
    a slow round is tried again, up to PROBE_TRIES rounds.  No answer, a wrong
    one or one slower than STALL_LIMIT fails at once.  Returns the good round's times.
    """
    slow: List[Dict[str, float]] = []
    pids = server_pids(url)
    while True:
        record = measure_round(url, task_id, headers, pids)
        times = record["times"]
        worst = max(times.values())
        assert not stalled(record), \
            f"the worker stalled: {record} (stall limit {STALL_LIMIT}s of its own time)"
        if worst - record["waited"] <= limit:  # the server's own time, as for a stall
            return times
        slow.append(times)
        assert len(slow) < PROBE_TRIES, \
            f"the worker answered the probe too slowly: {slow} (limit {limit}s)"


class Probing:
    """Probe a server every ``interval`` seconds while a fault is on:
    ``with Probing(server.url, task_id) as probing: ...``; leaving the block fails the
    test if a probe failed (no answer, a wrong one, or one slower than STALL_LIMIT of
    the server's own time),
    if more than the odd answer was slower than ``limit``, or if none ran.
    :meth:`wait_for` waits until some number of probes answered (a fault that lasts
    until a condition, not for a time): a failed probe fails it at once.

    The probes run in a process of their own: in a thread of the test process they
    would wait for the GIL whenever the test itself computes (reading a fast stream,
    say), and measure the test's slowness, not the worker's.

    An answer is slow when it took more than ``limit`` of the server's own time (its
    time waiting for a CPU left out, as for a stall): on a 2-core machine with other
    work the OS still delays the odd one, so one probe in SLOW_SHARE may be slow.
    With ``saturating=True`` (a fault that keeps the worker's own CPU busy on purpose:
    an executor flooding events, fifty drains retrying at once) a probe queues behind
    the worker's own work, which no CPU count separates from a slow worker, and how
    long depends on the machine's speed (a CI run saw 4 of 8 over 0.2 s): only errors
    and stalls fail it.  A frozen worker misses every probe; one that stalls (the
    watchdog of :class:`Server` reports stalls of our code) fails at once.
    """

    def __init__(self, url: str, task_id: str = "", *, interval: float = 0.1,
                 limit: float = PROBE_LIMIT, headers: Optional[dict] = None,
                 saturating: bool = False) -> None:
        self.limit = limit
        self.saturating = saturating
        self.args = json.dumps({"url": url, "task_id": task_id, "interval": interval,
                                "headers": headers or {}, "pids": server_pids(url)})
        self.slow: List[str] = []
        self.worst = 0.0
        self.failures: List[str] = []
        self._records: List[Dict[str, Any]] = []
        self._arrived = threading.Condition()
        self._proc: Optional[subprocess.Popen] = None
        self._reader: Optional[threading.Thread] = None

    @property
    def count(self) -> int:
        """How many probes have answered (or failed) so far."""
        with self._arrived:
            return len(self._records)

    def __enter__(self) -> "Probing":
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _PROBE_LOOP, self.args], cwd=ROOT, stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True)
        assert self._proc.stdout is not None
        assert self._proc.stdout.readline().strip() == "ready"
        self._reader = threading.Thread(target=self._read, args=(self._proc.stdout,),
                                        daemon=True)
        self._reader.start()
        return self

    def _read(self, out: Any) -> None:
        for line in out:
            record = json.loads(line)
            with self._arrived:
                self._records.append(record)
                self._arrived.notify_all()

    def wait_for(self, count: int, timeout: float = 60.0) -> None:
        """Wait until ``count`` probes have answered; fail at once if one failed."""
        deadline = time.monotonic() + timeout
        with self._arrived:
            while True:
                faults = [f for f in map(_fault, self._records) if f]
                assert not faults, f"a probe failed: {faults[0]}"
                if len(self._records) >= count:
                    return
                remaining = deadline - time.monotonic()
                assert remaining > 0, f"only {len(self._records)} of {count} probes in {timeout}s"
                self._arrived.wait(min(remaining, 0.5))

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        proc, reader = self._proc, self._reader
        assert proc is not None and proc.stdin is not None and reader is not None
        proc.stdin.close()  # the loop's signal to stop
        timer = threading.Timer(15, proc.kill)
        timer.start()
        try:
            reader.join()
            proc.wait()
        finally:
            timer.cancel()
        for record in self._records:
            fault = _fault(record)
            if fault:
                self.failures.append(fault)
                continue
            worst = max(record["times"].values())
            self.worst = max(self.worst, worst)
            if worst - record.get("waited", 0.0) > self.limit:
                self.slow.append(f"{record['at']} {record['times']}")
        if not self.saturating and len(self.slow) > max(1, len(self._records) // SLOW_SHARE):
            self.failures.append(f"{len(self.slow)} of {len(self._records)} answered after "
                                 f"{self.limit}s: {self.slow[:3]}")
        if exc_type is None:
            assert self._records, "no probe ran"
            assert not self.failures, (f"{len(self.failures)} of {len(self._records)} probes "
                                       f"failed; first: {self.failures[0]}")


def _fault(record: Dict[str, Any]) -> str:
    """What makes one of Probing's records a failure at once ('' if nothing)."""
    if "error" in record:
        return f"{record['at']} {record['error']}"
    if stalled(record):
        return (f"{record['at']} stalled: {record['times']}, {record.get('waited', 0):.3f}s of "
                f"it waiting for a CPU (stall limit {STALL_LIMIT}s)")
    return ""


# The probe loop of Probing: one JSON line per probe until stdin closes.
_PROBE_LOOP = """
import json, select, sys, time
import requests
from tests.support.helpers import measure_round
args = json.loads(sys.argv[1])
print("ready", flush=True)
while True:
    try:
        record = measure_round(args["url"], args["task_id"], args["headers"], args["pids"])
    except (AssertionError, requests.RequestException, ValueError) as exc:
        record = {"error": str(exc)}
    record["at"] = time.strftime("%H:%M:%S")
    print(json.dumps(record), flush=True)
    if select.select([sys.stdin], [], [], args["interval"])[0]:
        break  # stdin closed (EOF is readable)
"""


#: Top-level members the union card adds for 0.3 and 0.1 clients (see a2a_flask.protocol.cards).
LEGACY_CARD_MEMBERS = ("protocolVersion", "url", "preferredTransport", "additionalInterfaces",
                       "supportsAuthenticatedExtendedCard", "security", "authentication")
_SCHEME_V03_MEMBERS = ("type", "in", "name", "scheme", "bearerFormat", "flows",
                       "oauth2MetadataUrl", "openIdConnectUrl", "description")


def card_v1_view(card: Dict[str, Any]) -> Dict[str, Any]:
    """The 1.0 members of a served (union) card."""
    view = {k: v for k, v in card.items() if k not in LEGACY_CARD_MEMBERS}
    if "securitySchemes" in card:
        view["securitySchemes"] = {
            name: {k: v for k, v in scheme.items() if k not in _SCHEME_V03_MEMBERS}
            for name, scheme in card["securitySchemes"].items()}
    return view


def validate_card(card: Dict[str, Any]) -> None:
    """A served card: its 1.0 members against the 1.0 schema and, when it carries the
    0.3 members, the whole document against the 0.3 schema."""
    validate(card_v1_view(card), "Agent Card")
    if "protocolVersion" in card:
        validate(card, "AgentCard", "v0.3")


# ------------------------------------------------------------- webhooks


class WebhookReceiver:
    """A real HTTP server on loopback that records the pushes it gets.

    ``script`` lists what to answer to the next requests, in order: an int is
    a status code, a float is seconds to stall before answering 200 (for
    timeouts), ``("redirect", url)`` answers 302, ``(status, headers)`` answers
    with those headers (``(429, {"Retry-After": "1"})``); once it is used up
    every push gets ``default`` (200).
    """

    def __init__(self, default: int = 200) -> None:
        from werkzeug.serving import make_server

        self.default = default
        self.script: List[Any] = []
        self.received: List[Dict[str, Any]] = []  # answered 2xx
        self.attempts: List[Dict[str, Any]] = []  # every request
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def _app(self, environ, start_response):
        from werkzeug.wrappers import Request, Response

        request = Request(environ)
        body = request.get_data()
        record = {"path": request.path, "headers": dict(request.headers),
                  "body": body, "json": json.loads(body) if body else None,
                  "at": time.monotonic()}
        with self._lock:
            action = self.script.pop(0) if self.script else self.default
            self.attempts.append(record)
        if isinstance(action, float):
            time.sleep(action)
            action = 200
        if isinstance(action, tuple) and action[0] == "redirect":
            response = Response("", status=302, headers={"Location": action[1]})
        elif isinstance(action, tuple):
            response = Response("{}", status=action[0], headers=action[1],
                                mimetype="application/json")
        else:
            response = Response("{}", status=action, mimetype="application/json")
        if 200 <= response.status_code < 300:
            with self._lock:
                self.received.append(record)
                self._arrived.notify_all()
        return response(environ, start_response)

    def hook(self, path: str = "/hook") -> str:
        return self.url + path

    def wait_for(self, predicate, timeout: float = 15.0) -> List[Dict[str, Any]]:
        """Wait until ``predicate(received)`` holds; the pushes received so far."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while not predicate(self.received):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"pushes never arrived; got {len(self.received)}: "
                                         f"{[r['json'] for r in self.received]}")
                self._arrived.wait(min(remaining, 0.1))
            return list(self.received)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> "WebhookReceiver":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def wait_until_delivered(store: Any, task_id: str, timeout: float = 30.0) -> None:
    """Wait until nothing more can be pushed for a finished task: every webhook of it
    has had its last event (or was given up on) and no drain holds its deliveries.

    The positive marker a "nothing more came" check waits for: a drain sends only
    while it holds the task's claim, and a new one starts only for a webhook whose
    cursor is behind; so once the claim is free with every cursor at the head, a
    push still to come could only be a bug.  ``store`` is the agent's store, or one
    opened on its URL in the test process.
    """
    key = f"push:{task_id}"

    def done() -> bool:
        head = store.head(task_id)
        if head is None or not head[1].terminal or any(
                t.delivered_seq < head[0] and not t.gave_up for t in store.push_targets(task_id)):
            return False
        if not store.claim(key, "test-observer", 1.0):
            return False  # a drain is still on it
        store.release_claim(key, "test-observer")
        return True

    wait_until(done, timeout, f"the deliveries of task {task_id} to end")


# ------------------------------------------------------------- callers

#: Bearer tokens the test agents accept, and whom they name.
TOKENS = {"alice-token": "alice", "bob-token": "bob"}
ALICE = {"Authorization": "Bearer alice-token"}
BOB = {"Authorization": "Bearer bob-token"}


def bearer_auth():
    """The authenticator of the test agents: ``Bearer alice-token`` is alice."""
    from a2a_flask.web.auth import BearerAuth

    return BearerAuth(TOKENS.get)
