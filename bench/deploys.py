"""What a deploy does to running work: four deploys of gunicorn under load, measured.

Each scenario starts ``gunicorn -k gevent`` (the flags of docs/deployment.rst)
serving ``examples/streaming_agent.py`` (each task streams about 23 chunks,
``--word-delay`` apart) on a shared store, drives it from client threads
(streams, subscriptions to running tasks, blocking and non-blocking sends,
on loopback), does the deploy in the
middle of the load, stops the load, and reads every acknowledged task back
from the store:

``reload``        ``kill -HUP`` of the master, twice (at 1/3 and 2/3 of the load)
``max-requests``  workers recycled by ``--max-requests`` (and its jitter) all along
``upgrade-quit``  ``kill -USR2`` (a new master re-executes), then ``QUIT`` of the old
                  master, as gunicorn's upgrade recipe ends
``upgrade-term``  the same, ending with ``TERM`` of the old master instead
``rolling``       two masters ("hosts") behind nginx from docs/deployment.rst; each
                  stopped (``TERM``), started again and waited for (readiness,
                  then nginx's ``fail_timeout``), one after the other
``rolling-drain`` the same, each host first marked ``down`` in nginx (a reload),
                  and back once it is ready again

Per scenario it prints: tasks acknowledged (the client got a task id), lost
(acknowledged, then missing or never finished: must be 0), failed (each with its
status message), streams cut and resumed with ``SubscribeToTask`` and
``Last-Event-ID`` (and how many of those saw every chunk once, in order), sends
refused with 503 ``WORKER_STOPPING`` (sent again after ``Retry-After``),
connections refused, and other errors.

Usage (Redis and PostgreSQL on 127.0.0.1; each run uses a fresh prefix, or a
fresh database it drops at the end)::

    python bench/deploys.py --duration 25
    python bench/deploys.py --stores redis --scenarios reload,rolling --duration 20
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import requests

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the package, and the recipe's nginx from the test suite
    sys.path.insert(0, str(ROOT))

from a2a_flask.protocol.models import new_id  # noqa: E402
from a2a_flask.stores import open_store  # noqa: E402

V1 = {"A2A-Version": "1.0"}
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
            "TASK_STATE_REJECTED"}
SCENARIOS = ("reload", "max-requests", "upgrade-quit", "upgrade-term", "rolling",
             "rolling-drain", "celery-restart")
TOPIC = "a deploy"
#: What the load sends, what the agent serving it streams, and the app, by runner.
APPS = {"inline": "examples.streaming_agent:app", "celery": "examples.celery_agent:app"}


def expected_story(topic: str = TOPIC) -> str:
    """What examples/streaming_agent.py streams for ``topic``, chunk after chunk."""
    story = (f"Once upon a time there was {topic}. It waited, it wondered, "
             f"and in the end {topic} found exactly what it was looking for.")
    return "".join(word + " " for word in story.split())


#: The message each task gets, and the text of its artifacts at the end (set by main:
#: the inline runner serves examples/streaming_agent.py, the Celery runner
#: examples/celery_agent.py, whose "slow:N" streams a step a second).
#: ``pace``: seconds a non-blocking sender pauses after each send (the other clients
#: wait for their task); Celery workers take fewer tasks a second than a web worker.
WORKLOAD: Dict[str, Any] = {"text": TOPIC, "expected": expected_story(), "pace": 0.1}
CELERY_SECONDS = 2


def celery_expected(seconds: int = CELERY_SECONDS) -> str:
    """What examples/celery_agent.py's ``slow:N`` leaves in its artifacts."""
    return "".join(f"step {n}\n" for n in range(1, seconds + 1)) + f"done after {seconds} s"


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def children(pid: int) -> List[int]:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return False


def wait_for(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise RuntimeError(f"timed out waiting for {what}")


# ------------------------------------------------------------------ servers


class Master:
    """One gunicorn master with the page's flags, on a loopback port."""

    def __init__(self, folder: Path, env: Dict[str, str], workers: int, grace: float,
                 port: Optional[int] = None, extra: Optional[List[str]] = None,
                 app: str = APPS["inline"]) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.pidfile = folder / f"gunicorn-{self.port}.pid"
        self.log_path = folder / f"gunicorn-{self.port}.log"
        gunicorn = shutil.which("gunicorn", path=os.path.dirname(sys.executable)) or "gunicorn"
        # The gunicorn script, not ``python -m``: USR2 re-executes this very command line.
        self.cmd = [gunicorn, "-k", "gevent", "-w", str(workers), "--worker-connections", "2000",
                    "-b", f"127.0.0.1:{self.port}", "--graceful-timeout", f"{grace:g}",
                    "--keep-alive", "75", "--no-control-socket", "--pid", str(self.pidfile),
                    "--log-level", "info", *(extra or []), app]
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
        self.workers = workers
        self.start()

    def start(self) -> None:
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.proc.pid
        wait_for(self.ready, 60, f"gunicorn on {self.port} to be ready")

    def ready(self) -> bool:
        if not alive(self.pid):
            raise RuntimeError(f"gunicorn exited: {self.log_path.read_text()[-3000:]}")
        try:
            return requests.get(self.url + "/healthz/ready", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def signal(self, signum: int) -> None:
        os.kill(self.pid, signum)

    def stop_and_wait(self, timeout: float) -> None:
        """``TERM`` (graceful) and wait for the master to exit."""
        self.signal(signal.SIGTERM)
        wait_for(lambda: not alive(self.pid), timeout, "the master to stop")
        self.proc.poll()
        self.log.close()

    def upgrade(self, finish: int, timeout: float) -> None:
        """USR2: a new master re-executes and starts its workers; then ``finish``
        (QUIT or TERM) to the old master, and the new one serves alone."""
        old = self.pid
        os.kill(old, signal.SIGUSR2)

        def new_master() -> Optional[int]:
            # gunicorn 27 writes the new master's pid to "<pidfile>.2" (older ones
            # move the old master's to "<pidfile>.oldbin" and write the new one's).
            for path in (Path(f"{self.pidfile}.2"), self.pidfile):
                try:
                    pid = int(path.read_text().strip())
                except (OSError, ValueError):
                    continue
                if pid != old and len(children(pid)) >= self.workers:
                    return pid
            return None

        new = wait_for(new_master, 60, "the new master and its workers")
        time.sleep(1.0)  # its workers import the app and bind the store
        os.kill(old, finish)
        wait_for(lambda: not alive(old), timeout, "the old master to exit")
        self.proc.poll()
        self.pid = new

    def worker_pids(self) -> List[int]:
        return children(self.pid)

    def kill(self) -> None:
        for pid in [*children(self.pid), self.pid]:
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            pass
        if not self.log.closed:
            self.log.close()


class CeleryWorker:
    """``celery worker`` (prefork) running the agent's executors, on its own queue."""

    def __init__(self, folder: Path, env: Dict[str, str], concurrency: int) -> None:
        celery = shutil.which("celery", path=os.path.dirname(sys.executable)) or "celery"
        self.cmd = [celery, "-A", "examples.celery_agent:celery", "worker", "-c",
                    str(concurrency), "--loglevel=INFO", "-Q", env["CELERY_QUEUE"],
                    # A node name of its own: another worker on this host has the default.
                    "-n", f"{env['CELERY_QUEUE']}@%h",
                    "--without-gossip", "--without-mingle", "--without-heartbeat"]
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
        self.log_path = folder / "celery.log"
        self.start()

    def start(self) -> None:
        self.log = open(self.log_path, "ab")
        before = self._readies()
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        wait_for(lambda: self._readies() > before or self._exited(), 60,
                 "the Celery worker to be ready")

    def _readies(self) -> int:
        return self.log_path.read_bytes().count(b" ready.") if self.log_path.exists() else 0

    def _exited(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"celery exited: {self.log_path.read_text()[-3000:]}")
        return False

    def warm_restart(self, timeout: float) -> None:
        """``TERM``: Celery's warm shutdown (running tasks finish), then a new worker."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout)
        self.log.close()
        self.start()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        if not self.log.closed:
            self.log.close()


# ------------------------------------------------------------------ the load


@dataclass
class Tally:
    """What the clients saw, shared by their threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    acknowledged: Dict[str, str] = field(default_factory=dict)  # task id -> kind
    counts: collections.Counter = field(default_factory=collections.Counter)
    errors: collections.Counter = field(default_factory=collections.Counter)
    bad_streams: List[str] = field(default_factory=list)

    def add(self, name: str, n: int = 1) -> None:
        with self.lock:
            self.counts[name] += n

    def error(self, text: str) -> None:
        with self.lock:
            self.errors[text[:160]] += 1

    def ack(self, task_id: str, kind: str) -> None:
        with self.lock:
            self.acknowledged[task_id] = kind


class Client:
    """One load thread's HTTP client; refusals are counted and sent again."""

    def __init__(self, base: str, tally: Tally, verify: Any) -> None:
        self.base = base
        self.tally = tally
        self.session = requests.Session()
        # Per request: a session's own verify loses to REQUESTS_CA_BUNDLE in requests.
        self.verify = verify

    def post(self, method: str, params: Dict[str, Any], *, stream: bool = False,
             headers: Optional[Dict[str, str]] = None,
             timeout: float = 60) -> Optional[requests.Response]:
        """The answer, or None when it was refused (after counting it and pausing)."""
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        try:
            answer = self.session.post(self.base + "/a2a", json=body, stream=stream,
                                       verify=self.verify,
                                       headers={**V1, **(headers or {})}, timeout=timeout)
        except requests.ConnectionError as exc:
            refused = "refused" in str(exc).lower()
            self.tally.add("connections refused" if refused else "connections lost")
            if not refused:
                self.tally.error(f"{method}: {type(exc).__name__}")
            time.sleep(0.2)
            return None
        except requests.Timeout:
            self.tally.error(f"{method}: timeout")
            return None
        if answer.status_code == 503:
            reason = _reason(answer)
            self.tally.add(f"refused 503 {reason}")
            time.sleep(float(answer.headers.get("Retry-After", "1")))
            answer.close()
            return None
        if answer.status_code != 200:
            self.tally.error(f"{method}: HTTP {answer.status_code}")
            answer.close()
            time.sleep(0.2)
            return None
        return answer


def _reason(answer: requests.Response) -> str:
    try:
        return answer.json()["error"]["data"][0]["reason"]
    except (ValueError, KeyError, IndexError, TypeError):
        return "(no reason)"


def message(text: str) -> Dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": text}]}


def sse_events(answer: requests.Response) -> Iterator[Dict[str, Any]]:
    """``{"id": int|None, "data": ...}`` for each SSE event, as it arrives."""
    buffer = ""
    for chunk in answer.iter_content(chunk_size=None, decode_unicode=True):
        buffer += chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            event: Dict[str, Any] = {"id": None}
            data = []
            for line in block.split("\n"):
                if line.startswith("id:"):
                    event["id"] = int(line[3:].strip())
                elif line.startswith("data:"):
                    data.append(line[5:].strip())
            if data:
                event["data"] = json.loads("\n".join(data))
                yield event


def nonblocking(client: Client) -> None:
    answer = client.post("SendMessage", {"message": message(WORKLOAD["text"]),
                                         "configuration": {"returnImmediately": True}})
    if answer is not None:
        client.tally.ack(answer.json()["result"]["task"]["id"], "non-blocking")
    time.sleep(WORKLOAD["pace"])  # bounded: at most 1/pace sends a second per thread


def blocking(client: Client) -> None:
    answer = client.post("SendMessage", {"message": message(WORKLOAD["text"])})
    if answer is not None:
        client.tally.ack(answer.json()["result"]["task"]["id"], "blocking")


def streaming(client: Client) -> None:
    """A streamed send, read to its end (resumed from its last event if cut)."""
    answer = client.post("SendStreamingMessage", {"message": message(WORKLOAD["text"])},
                         stream=True)
    if answer is not None:
        read_stream(client, answer, "", "stream")


def watching(client: Client) -> None:
    """A non-blocking send, then a ``SubscribeToTask`` read to the task's end: a
    stream whose worker stops while the task runs elsewhere is cut, and resumed."""
    answer = client.post("SendMessage", {"message": message(WORKLOAD["text"]),
                                         "configuration": {"returnImmediately": True}})
    if answer is None:
        return
    task_id = answer.json()["result"]["task"]["id"]
    client.tally.ack(task_id, "watched")
    # On a connection of its own (the send's would reach the worker running the
    # task): any worker of any host serves it.
    watcher = Client(client.base, client.tally, client.verify)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = watcher.post("SubscribeToTask", {"id": task_id}, stream=True)
        if answer is not None:
            read_stream(watcher, answer, task_id, "watched")
            break
    watcher.session.close()


def _texts(artifacts: List[Dict[str, Any]]) -> str:
    return "".join(p.get("text", "") for a in artifacts for p in a.get("parts", []))


def read_stream(client: Client, answer: requests.Response, task_id: str, kind: str) -> None:
    """Read a stream to the task's end; a cut stream is resumed with ``SubscribeToTask``
    and ``Last-Event-ID``, as a client does; then check it saw every chunk once."""
    ids: List[int] = []
    text = ""
    state = ""
    resumes = 0
    deadline = time.monotonic() + 90
    while True:
        if not answer.headers.get("Content-Type", "").startswith("text/event-stream"):
            # A subscription to a task that has ended (and whose events were all
            # seen): a JSON error. Its end is read with GetTask.
            error = answer.json().get("error")
            answer.close()
            task = client.post("GetTask", {"id": task_id})
            body = task.json().get("result") if task is not None else None
            if body is None or body["status"]["state"] not in TERMINAL:
                client.tally.error(f"{kind} subscription refused: {error}")
                break
            state = body["status"]["state"]
            if not ids:
                text = _texts(body.get("artifacts", []))
            break
        try:
            with answer:
                for event in sse_events(answer):
                    result = event["data"].get("result")
                    if result is None:  # an error event ends the stream
                        client.tally.error(f"stream error event: {event['data'].get('error')}")
                        break
                    if event["id"] is not None:
                        ids.append(event["id"])
                    body = next(iter(result.values()))
                    if not task_id:
                        task_id = body.get("taskId") or body.get("id", "")
                        client.tally.ack(task_id, kind)
                    if "task" in result:  # a subscription's opening snapshot
                        text = _texts(body.get("artifacts", []))
                    if "artifactUpdate" in result:
                        text += _texts([body["artifact"]])
                    status = body.get("status")
                    if status:
                        state = status["state"]
        except (requests.ConnectionError, requests.exceptions.ChunkedEncodingError):
            pass
        if state in TERMINAL or not task_id or time.monotonic() > deadline:
            break
        # Cut before the end: resume where it stopped.
        resumes += 1
        answer = None
        while answer is None and time.monotonic() < deadline:
            headers = {"Last-Event-ID": str(ids[-1])} if ids else {}
            answer = client.post("SubscribeToTask", {"id": task_id}, stream=True,
                                 headers=headers)
        if answer is None:
            break
    if not task_id:
        return
    client.tally.add("streams")
    if resumes:
        client.tally.add("streams resumed")
    whole = state == "TASK_STATE_COMPLETED" and text == WORKLOAD["expected"] and \
        ids == sorted(set(ids))
    if state == "TASK_STATE_FAILED":
        client.tally.add("streams ended FAILED")
    if resumes and whole:
        client.tally.add("streams resumed without gap or repeat")
    elif state == "TASK_STATE_COMPLETED" and not whole:
        with client.tally.lock:
            client.tally.bad_streams.append(
                f"{kind} {task_id}: {resumes} resumes, ids {ids}, text {text!r}")
    elif state not in TERMINAL:
        client.tally.error(f"{kind} stream of {task_id} ended {state or 'without a state'}")


def load(base: str, tally: Tally, stop: threading.Event, verify: Any,
         mix: Dict[str, int]) -> List[threading.Thread]:
    ops = {"streams": streaming, "watchers": watching, "blocking": blocking,
           "non-blocking": nonblocking}
    threads = []
    for kind, count in mix.items():
        for _ in range(count):
            def loop(op: Callable[[Client], None] = ops[kind]) -> None:
                client = Client(base, tally, verify)
                while not stop.is_set():
                    try:
                        op(client)
                    except Exception as exc:  # noqa: BLE001 - counted, the load goes on
                        tally.error(f"{op.__name__}: {type(exc).__name__}: {exc}")
                        time.sleep(0.2)
            thread = threading.Thread(target=loop, daemon=True)
            thread.start()
            threads.append(thread)
    return threads


# ------------------------------------------------------------------ scenarios


def drain(proxy: Any, port: int, down: bool) -> None:
    """Mark the host on ``port`` ``down`` in nginx's site file (or not), and reload
    nginx: new requests go to the other host, the ones under way finish."""
    site = proxy.folder / "site.conf"
    text = site.read_text()
    host = f"server 127.0.0.1:{port} "
    assert host in text, text
    text = text.replace(host + "down ", host) if not down else text.replace(host, host + "down ")
    site.write_text(text)
    os.kill(proxy.proc.pid, signal.SIGHUP)
    time.sleep(1.0)  # nginx starts workers with the new configuration


@dataclass
class Result:
    scenario: str
    store: str
    runner: str
    acknowledged: Dict[str, int]
    lost: List[str]
    failed: Dict[str, int]
    counts: Dict[str, int]
    errors: Dict[str, int]
    bad_streams: List[str]
    deploy_seconds: float
    recycled: int


def read_back(store_url: str, task_ids: List[str], wait: float) -> Tuple[List[str], Dict[str, int]]:
    """(lost, failed by status message): lost tasks are missing or never ended."""
    store = open_store(store_url)
    try:
        deadline = time.monotonic() + wait
        pending = list(task_ids)
        states: Dict[str, Any] = {}
        while pending:
            still = []
            for task_id in pending:
                record = store.load(task_id)
                states[task_id] = record
                if record is None or record.task.status.state.value not in TERMINAL:
                    still.append(task_id)
            pending = still
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        lost = [f"{t}: {'missing' if states[t] is None else states[t].task.status.state.value}"
                for t in pending]
        failed: Dict[str, int] = collections.Counter()
        for task_id, record in states.items():
            if record is not None and record.task.status.state.value == "TASK_STATE_FAILED":
                status_message = record.task.status.message
                text = " ".join(p.text or "" for p in status_message.parts) if status_message \
                    else "(no message)"
                failed[text] += 1
        return lost, dict(failed)
    finally:
        store.close()


def run_scenario(name: str, store_label: str, store_url: str, args: argparse.Namespace,
                 folder: Path) -> Result:
    env = {"FLASK_A2A_STORE": store_url, "FLASK_A2A_HEALTH_PATH": "/healthz",
           "FLASK_A2A_WORD_DELAY": str(args.word_delay)}
    app = APPS[args.runner]
    celery_worker: Optional[CeleryWorker] = None
    if args.runner == "celery":
        env.update(CELERY_BROKER_URL=args.broker, CELERY_QUEUE=f"deploys-{uuid.uuid4().hex[:8]}",
                   FLASK_A2A_RUNNER="celery")
    extra = (["--max-requests", str(args.max_requests), "--max-requests-jitter",
              str(args.max_requests // 3)] if name == "max-requests" else [])
    masters: List[Master] = []
    proxy: Any = None
    tally = Tally()
    stop = threading.Event()
    recycled = 0
    try:
        if args.runner == "celery":
            celery_worker = CeleryWorker(folder, env, args.celery_concurrency)
        masters.append(Master(folder, env, args.workers, args.grace, extra=extra, app=app))
        base, verify = masters[0].url, None
        if name.startswith("rolling"):
            masters.append(Master(folder, env, args.workers, args.grace, app=app))
            from tests.server.test_deployment_recipe import Nginx, self_signed

            cert, key = self_signed(folder)
            proxy = Nginx(folder / "nginx", [m.port for m in masters], cert, key)
            base, verify = proxy.url, proxy.verify
        mix = {"streams": args.streams, "watchers": args.watchers, "blocking": args.blocking,
               "non-blocking": args.nonblocking}
        threads = load(base, tally, stop, verify, mix)
        seen_workers = set(masters[0].worker_pids())
        started = time.monotonic()
        deploy_time = 0.0

        def at(fraction: float) -> None:
            while time.monotonic() < started + args.duration * fraction:
                seen_workers.update(masters[0].worker_pids())
                time.sleep(0.2)

        if name == "reload":
            for fraction in (1 / 3, 2 / 3):
                at(fraction)
                t0 = time.monotonic()
                masters[0].signal(signal.SIGHUP)
                deploy_time += time.monotonic() - t0
        elif name in ("upgrade-quit", "upgrade-term"):
            at(1 / 3)
            t0 = time.monotonic()
            masters[0].upgrade(signal.SIGQUIT if name == "upgrade-quit" else signal.SIGTERM,
                               args.grace + 15)
            deploy_time = time.monotonic() - t0
        elif name == "rolling":
            at(1 / 4)
            t0 = time.monotonic()
            for master in masters:
                master.stop_and_wait(args.grace + 15)
                master.start()
                # nginx took the host out for fail_timeout at its first refused
                # connection: wait that out, or the next stop leaves no host at all.
                time.sleep(args.fail_timeout)
            deploy_time = time.monotonic() - t0
        elif name == "celery-restart":
            if celery_worker is None:
                raise SystemExit("celery-restart needs --runner celery")
            at(1 / 3)
            t0 = time.monotonic()
            celery_worker.warm_restart(args.grace + 30)
            deploy_time = time.monotonic() - t0
        elif name == "rolling-drain":
            at(1 / 4)
            t0 = time.monotonic()
            for master in masters:
                drain(proxy, master.port, True)
                master.stop_and_wait(args.grace + 15)
                master.start()
                drain(proxy, master.port, False)
            deploy_time = time.monotonic() - t0
        at(1.0)
        stop.set()
        for thread in threads:
            thread.join(120)
        seen_workers.update(masters[0].worker_pids())
        recycled = len(seen_workers) - args.workers
        lost, failed = read_back(store_url, list(tally.acknowledged), args.grace + 30)
        kinds = collections.Counter(tally.acknowledged.values())
        return Result(name, store_label, args.runner, dict(kinds), lost, failed, dict(tally.counts),
                      dict(tally.errors), tally.bad_streams, round(deploy_time, 1), recycled)
    finally:
        stop.set()
        if proxy is not None:
            proxy.stop()
        for master in masters:
            master.kill()
        if celery_worker is not None:
            celery_worker.kill()


# ------------------------------------------------------------------ stores


class Stores:
    """The shared services, each scenario on a fresh prefix or database."""

    def __init__(self, redis_url: str, postgres_url: str) -> None:
        self.redis_url = redis_url
        self.postgres_url = postgres_url
        self.cleanups: List[Callable[[], None]] = []

    def url(self, label: str) -> str:
        tag = f"deploys{uuid.uuid4().hex[:10]}"
        if label == "redis":
            import redis

            client = redis.Redis.from_url(self.redis_url)
            client.ping()

            def drop_keys() -> None:
                keys = list(client.scan_iter(f"{tag}:*", count=1000))
                for start in range(0, len(keys), 500):
                    client.delete(*keys[start:start + 500])
            self.cleanups.append(drop_keys)
            return f"{self.redis_url}?prefix={tag}"
        if label == "postgresql":
            import psycopg

            with psycopg.connect(self.postgres_url + "/postgres", autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{tag}"')

            def drop_database() -> None:
                with psycopg.connect(self.postgres_url + "/postgres", autocommit=True) as conn:
                    conn.execute(f'DROP DATABASE IF EXISTS "{tag}" WITH (FORCE)')
            self.cleanups.append(drop_database)
            return f"{self.postgres_url}/{tag}"
        raise ValueError(f"no store {label!r} (redis, postgresql)")

    def close(self) -> None:
        for cleanup in self.cleanups:
            try:
                cleanup()
            except Exception as exc:  # noqa: BLE001 - report and go on cleaning
                print(f"cleanup failed: {exc}", file=sys.stderr)


# ------------------------------------------------------------------ output


def report(result: Result) -> str:
    acknowledged = sum(result.acknowledged.values())
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(result.acknowledged.items()))
    counts = result.counts
    refused = {k[len("refused 503 "):]: n for k, n in counts.items() if k.startswith("refused 503")}
    lines = [
        f"== {result.scenario} on {result.store}, {result.runner} runner "
        f"(deploy took {result.deploy_seconds} s"
        + (f", {result.recycled} workers recycled" if result.scenario == "max-requests" else "")
        + ")",
        f"   acknowledged {acknowledged} ({kinds}); lost {len(result.lost)}; "
        f"failed {sum(result.failed.values())}",
        f"   streams {counts.get('streams', 0)}: resumed {counts.get('streams resumed', 0)}, "
        f"of which without gap or repeat "
        f"{counts.get('streams resumed without gap or repeat', 0)}; "
        f"ended FAILED {counts.get('streams ended FAILED', 0)}; "
        f"incomplete {len(result.bad_streams)}",
        f"   refused: 503 {refused or 0}; connections refused "
        f"{counts.get('connections refused', 0)}; connections lost "
        f"{counts.get('connections lost', 0)}",
    ]
    for text, n in sorted(result.failed.items()):
        lines.append(f"   failed x{n}: {text}")
    for text in result.lost[:10]:
        lines.append(f"   LOST {text}")
    for text in result.bad_streams[:5]:
        lines.append(f"   INCOMPLETE STREAM {text[:300]}")
    for text, n in sorted(result.errors.items()):
        lines.append(f"   error x{n}: {text}")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenarios", help="comma list; default: all but celery-restart "
                        "(inline runner), reload, rolling-drain and celery-restart (celery)")
    parser.add_argument("--runner", choices=sorted(APPS), default="inline")
    parser.add_argument("--broker", default="amqp://guest:guest@127.0.0.1:5672//",
                        help="Celery's broker (--runner celery)")
    parser.add_argument("--celery-concurrency", type=int, default=8,
                        help="Celery worker processes (prefork)")
    parser.add_argument("--stores", default="redis,postgresql")
    parser.add_argument("--duration", type=float, default=25.0, help="seconds of load each")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per master")
    parser.add_argument("--grace", type=float, default=20.0, help="--graceful-timeout")
    parser.add_argument("--word-delay", type=float, default=0.1,
                        help="seconds between the agent's chunks (a task takes ~23 of them)")
    parser.add_argument("--streams", type=int, default=4, help="stream client threads")
    parser.add_argument("--watchers", type=int, default=2,
                        help="threads that send, then follow the task with SubscribeToTask")
    parser.add_argument("--blocking", type=int, default=2, help="blocking send threads")
    parser.add_argument("--nonblocking", type=int, default=2, help="non-blocking send threads")
    parser.add_argument("--max-requests", type=int, default=60,
                        help="gunicorn --max-requests in the max-requests scenario")
    parser.add_argument("--fail-timeout", type=float, default=10.0,
                        help="nginx's fail_timeout (the page's): rolling waits it out")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("--postgresql", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--json", help="write the results here too")
    parser.add_argument("--logs", help="keep the servers' and nginx's logs in this folder")
    args = parser.parse_args(argv)
    default = ("reload,rolling-drain,celery-restart" if args.runner == "celery"
               else ",".join(SCENARIOS[:-1]))
    scenarios = [s for s in (args.scenarios or default).split(",") if s]
    if args.runner == "celery":
        WORKLOAD.update(text=f"slow:{CELERY_SECONDS}", expected=celery_expected(), pace=1.0)
    unknown = set(scenarios) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios {sorted(unknown)}; known: {', '.join(SCENARIOS)}")
    stores = Stores(args.redis, args.postgresql)
    results: List[Result] = []
    failures = 0
    try:
        with tempfile.TemporaryDirectory(prefix="a2a-deploys-") as scratch:
            tmp = args.logs or scratch
            for store_label in [s for s in args.stores.split(",") if s]:
                for name in scenarios:
                    folder = Path(tmp) / f"{store_label}-{args.runner}-{name}"
                    folder.mkdir(parents=True)
                    result = run_scenario(name, store_label, stores.url(store_label), args,
                                          folder)
                    results.append(result)
                    print(report(result), flush=True)
                    failures += len(result.lost) + len(result.bad_streams)
    finally:
        stores.close()
    if args.json:
        with open(args.json, "w") as handle:
            json.dump([r.__dict__ for r in results], handle, indent=2)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
