"""The Celery runner with real processes: a gunicorn gevent web tier, Celery workers
started here (prefork and gevent pools), Redis and RabbitMQ as brokers, SQLite as the
shared store.  Every wait is bounded."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Dict, List

import pytest
from flask import Flask

from a2a_flask import A2A
from a2a_flask.engine.keeper import ORPHANED
from a2a_flask.engine.runners import RESTARTED, QueuedRun, execute, queue

from tests.conftest import drop_sql_database, make_card, redis_up, require, sql_test_url
from tests.support.helpers import Server, stop_process_group, user_message, wait_until, worker_pids

pytestmark = pytest.mark.declare(server=[
    "processes",
    "test_the_callers_trace_and_the_run_times_cross_the_queue"], slow=["env"])

pytest.importorskip("celery")

ROOT = Path(__file__).resolve().parents[2]
#: The brokers: a Redis database of these tests' own, and RabbitMQ's default vhost.
REDIS_BROKER = os.environ.get("A2A_TEST_CELERY_REDIS", "redis://127.0.0.1:6379/12")
RABBIT_BROKER = os.environ.get("A2A_TEST_RABBITMQ", "amqp://guest:guest@127.0.0.1:5672//")


def rabbit_up() -> None:
    import kombu

    try:
        with kombu.Connection(RABBIT_BROKER, connect_timeout=3) as connection:
            connection.ensure_connection(max_retries=1)
    except Exception as exc:
        require(f"RabbitMQ at {RABBIT_BROKER} does not answer ({exc}); start it")


class Worker:
    """A Celery worker process of ``app_spec``, its log in a file."""

    def __init__(self, app_spec: str, env: Dict[str, str], *, pool: str = "prefork",
                 concurrency: int = 1, log_dir: Path) -> None:
        name = uuid.uuid4().hex[:6]
        self.log_path = log_dir / f"celery-{name}.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            # A node name of its own: two workers on RabbitMQ cannot share one (its
            # remote-control queue is exclusive).
            [sys.executable, "-m", "celery", "-A", app_spec, "worker", "-P", pool,
             "-n", f"a2a-{name}@%h",
             "-c", str(concurrency), "--loglevel=INFO", "--without-mingle",
             "--without-gossip", "-Q", env["CELERY_QUEUE"]],
            cwd=ROOT, env={**os.environ, **env}, stdout=self._log, stderr=subprocess.STDOUT,
            start_new_session=True)
        try:
            self.wait_for(lambda text: "ready." in text, 40, "the worker did not start")
        except BaseException:
            self.stop()  # the constructor fails: nobody else could stop it
            raise

    def text(self) -> str:
        return self.log_path.read_text(errors="replace")

    def wait_for(self, done: Callable[[str], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done(self.text()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{what}; worker log:\n{self.text()[-3000:]}")
            time.sleep(0.1)

    def finished_runs(self) -> int:
        return self.text().count("succeeded in")

    def run_times(self) -> List[float]:
        """How long each finished run took, as the worker logged it (seconds)."""
        return [float(seconds) for seconds in re.findall(r"succeeded in ([0-9.]+)s", self.text())]

    def children(self) -> List[int]:
        with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as handle:
            return [int(pid) for pid in handle.read().split()]

    def warm_stop(self, timeout: float = 30) -> None:
        """SIGTERM: Celery's warm shutdown (running tasks finish first)."""
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout)

    def stop(self) -> None:
        stop_process_group(self.proc)
        self._log.close()


def drop_queue(broker: str, queue: str) -> None:
    """Delete a test's queue from its broker (RabbitMQ keeps durable queues)."""
    import kombu

    with kombu.Connection(broker, connect_timeout=3) as connection:
        connection.default_channel.queue_delete(queue)
    if broker.startswith("redis"):  # kombu leaves the queue's exchange bindings
        import redis

        client = redis.Redis.from_url(broker)
        client.delete(f"_kombu.binding.{queue}", f"_kombu.binding_permanent.{queue}")
        client.close()


@pytest.fixture
def env(tmp_path: Path) -> Any:
    """A store file and a queue of this test's own, on the Redis broker."""
    redis_up()
    queue = f"a2a-test-{uuid.uuid4().hex}"
    yield {"FLASK_A2A_STORE": f"sqlite:///{tmp_path}/tasks.db",
           "CELERY_BROKER_URL": REDIS_BROKER, "CELERY_QUEUE": queue}
    drop_queue(REDIS_BROKER, queue)


@pytest.fixture
def processes(tmp_path: Path) -> Any:
    """Starts servers and workers; stops whatever is left at the end."""
    started: List[Any] = []

    def start(kind: str, *args: Any, **kwargs: Any) -> Any:
        made = Server(*args, **kwargs) if kind == "web" else Worker(*args, log_dir=tmp_path,
                                                                     **kwargs)
        started.append(made)
        return made

    start.started = started  # type: ignore[attr-defined]
    yield start
    for made in reversed(started):
        made.stop()


def send(server: Server, text: str, *, path: str = "/a2a", immediately: bool = False,
         timeout: float = 30) -> Dict[str, Any]:
    params: Dict[str, Any] = {"message": user_message(text, uuid.uuid4().hex)}
    if immediately:
        params["configuration"] = {"returnImmediately": True}
    answer = server.rpc("SendMessage", params, path=path, timeout=timeout)
    assert "result" in answer, answer
    return answer["result"]["task"]


def get(server: Server, task_id: str, path: str = "/a2a") -> Dict[str, Any]:
    answer = server.rpc("GetTask", {"id": task_id}, path=path)
    assert "result" in answer, answer
    return answer["result"]


def wait_state(server: Server, task_id: str, states: List[str], timeout: float,
               path: str = "/a2a") -> Dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task = get(server, task_id, path)
        if task["status"]["state"] in states:
            return task
        assert time.monotonic() < deadline, task
        time.sleep(0.1)


def texts(task: Dict[str, Any]) -> List[str]:
    messages = task.get("history", []) + ([task["status"]["message"]]
                                         if task["status"].get("message") else [])
    return [m["parts"][0]["text"] for m in messages if m["role"] == "ROLE_AGENT"]


def chunks(task: Dict[str, Any]) -> List[str]:
    return [part["text"] for artifact in task.get("artifacts", [])
            for part in artifact["parts"]]


# ----------------------------------------------------------------- no services


def test_memory_store_is_refused_at_start() -> None:
    agent = A2A(card=make_card(), runner="celery")
    agent.executor(lambda ctx: "x")
    with pytest.raises(RuntimeError, match="A2A_RUNNER=celery with the memory store"):
        agent.init_app(Flask("x"))


def test_a_queued_run_is_read_back_with_checked_types() -> None:
    order = QueuedRun("a2a", "t", 1, "m", False, 1.5, "")
    assert QueuedRun.from_dict(order.to_dict()) == order
    for bad in (None, [], {**order.to_dict(), "seq": "1"}, {"agent": "a2a"}):
        with pytest.raises(ValueError):
            QueuedRun.from_dict(bad)


def test_the_runner_seam_without_celery(tmp_path: Path) -> None:
    """A runner of a few lines (a list as its queue): the web side answers with the
    queued task, the worker side runs it with the same TaskContext, to the store."""
    queued: List[Dict[str, Any]] = []

    class ListRunner:
        def start(self, run: Any) -> None:
            queued.append(queue(run, "a2a").to_dict())

    agent = A2A(card=make_card(), store=f"sqlite:///{tmp_path}/tasks.db")
    agent.executor(lambda ctx: f"ran {ctx.text}")
    app = Flask("seam")
    agent.init_app(app)
    runtime = app.extensions["a2a"]["a2a"].service.runtime
    runtime.runs.runner = ListRunner()
    answer = app.test_client().post("/a2a", headers={"A2A-Version": "1.0"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": user_message("x", "m-seam"),
                   "configuration": {"returnImmediately": True}}}).get_json()
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    order, = queued
    with app.app_context():
        run = execute(runtime, QueuedRun.from_dict(order), rerun_safe=False)
        assert run is not None
        # Delivered again after it finished: nothing runs twice.
        assert execute(runtime, QueuedRun.from_dict(order), rerun_safe=False) is None
    record = runtime.store.load(order["task_id"])
    assert record.state.value == "TASK_STATE_COMPLETED"
    assert [part.text for artifact in record.task.artifacts
            for part in artifact.parts] == ["ran x"]
    app.extensions["a2a"]["a2a"].close()


def test_a_queued_task_that_asks_for_input_is_queued_again_by_the_answer(tmp_path: Path) -> None:
    queued: List[Dict[str, Any]] = []

    class ListRunner:
        def start(self, run: Any) -> None:
            queued.append(queue(run, "a2a").to_dict())

    def ask(ctx: Any) -> Any:
        if not ctx.follow_up:
            ctx.ask("which city?")
            return None
        return f"weather in {ctx.text}"

    agent = A2A(card=make_card(), store=f"sqlite:///{tmp_path}/tasks.db")
    agent.executor(ask)
    app = Flask("ask")
    agent.init_app(app)
    runtime = app.extensions["a2a"]["a2a"].service.runtime
    runtime.runs.runner = ListRunner()
    client = app.test_client()

    def send_rpc(message: Dict[str, Any]) -> Dict[str, Any]:
        return client.post("/a2a", headers={"A2A-Version": "1.0"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": message, "configuration": {"returnImmediately": True}}
        }).get_json()["result"]["task"]

    task = send_rpc(user_message("weather?", "m-1"))
    with app.app_context():
        execute(runtime, QueuedRun.from_dict(queued[-1]), rerun_safe=False)
    assert runtime.store.load(task["id"]).state.value == "TASK_STATE_INPUT_REQUIRED"
    answered = send_rpc(user_message("Paris", "m-2", taskId=task["id"]))
    assert answered["status"]["state"] == "TASK_STATE_WORKING"
    assert len(queued) == 2 and queued[-1]["follow_up"] and queued[-1]["message_id"] == "m-2"
    with app.app_context():
        # The first order delivered again (its acknowledgement lost): its run ended
        # its turn, so nothing runs and the task is not failed.
        for rerun_safe in (False, True):
            assert execute(runtime, QueuedRun.from_dict(queued[0]),
                           rerun_safe=rerun_safe) is None
        assert runtime.store.load(task["id"]).state.value == "TASK_STATE_WORKING"
        execute(runtime, QueuedRun.from_dict(queued[-1]), rerun_safe=False)
    record = runtime.store.load(task["id"])
    assert record.state.value == "TASK_STATE_COMPLETED"
    assert [part.text for artifact in record.task.artifacts
            for part in artifact.parts] == ["weather in Paris"]
    app.extensions["a2a"]["a2a"].close()


def test_runs_whose_workers_keep_dying_restart_three_times_then_fail(tmp_path: Path) -> None:
    from a2a_flask.engine.runners import MAX_RESTARTS, TOO_MANY_RESTARTS, claim
    from a2a_flask.protocol.models import (Artifact, Part, TaskArtifactUpdateEvent, TaskState,
                                           TaskStatus, TaskStatusUpdateEvent)

    queued: List[Dict[str, Any]] = []

    class ListRunner:
        def start(self, run: Any) -> None:
            queued.append(queue(run, "a2a").to_dict())

    agent = A2A(card=make_card(), store=f"sqlite:///{tmp_path}/tasks.db")
    agent.executor(lambda ctx: "never run here")
    app = Flask("dying")
    agent.init_app(app)
    runtime = app.extensions["a2a"]["a2a"].service.runtime
    runtime.runs.runner = ListRunner()
    app.test_client().post("/a2a", headers={"A2A-Version": "1.0"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": user_message("x", "m-dying"),
                   "configuration": {"returnImmediately": True}}})
    order = QueuedRun.from_dict(queued[0])
    task_id = order.task_id

    def die_after_writing(record: Any) -> List[Any]:
        """What a run writes before its worker is killed."""
        status = TaskStatus(state=TaskState.WORKING)
        return [TaskStatusUpdateEvent(task_id, record.task.context_id, status),
                TaskArtifactUpdateEvent(task_id, record.task.context_id,
                                        Artifact(artifact_id="a", parts=[Part(text="half")]))]

    for restart in range(MAX_RESTARTS):
        runtime.commit(task_id, die_after_writing)
        run = claim(runtime, order, rerun_safe=True)
        assert run is not None and run.record.task.artifacts == []
        assert run.record.task.status.message.parts[0].text == RESTARTED
    runtime.commit(task_id, die_after_writing)
    assert claim(runtime, order, rerun_safe=True) is None
    record = runtime.store.load(task_id)
    assert record.state is TaskState.FAILED
    assert record.task.status.message.parts[0].text == TOO_MANY_RESTARTS
    app.extensions["a2a"]["a2a"].close()


# ------------------------------------------------------------- real processes


def test_tasks_run_in_the_worker_and_cancel_and_a_burst(env: Dict[str, str],
                                                        processes: Any) -> None:
    web = processes("web", "examples.celery_agent:app", env=env, workers=2)
    worker = processes("worker", "examples.celery_agent:celery", env, concurrency=2)
    done = send(web, "hello")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert chunks(done) == ["hello"]
    # A stream follows the worker's events as they come.
    events = [event["data"]["result"] for event in web.stream(
        "SendStreamingMessage", {"message": user_message("slow:2", "m-stream")})]
    assert events[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert [e["statusUpdate"]["status"]["message"]["parts"][0]["text"] for e in events
            if "statusUpdate" in e and e["statusUpdate"]["status"].get("message")] == [
        "worked 1 of 2 s", "worked 2 of 2 s"]
    assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    # Cancel from the web tier stops the run in the worker within about 2 s.
    task = send(web, "slow:20", immediately=True)
    wait_state(web, task["id"], ["TASK_STATE_WORKING"], 15)
    before = worker.finished_runs()
    answer = web.rpc("CancelTask", {"id": task["id"]})
    assert answer["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    worker.wait_for(lambda text: text.count("succeeded in") > before, 10, "the run went on")
    # The run stopped at the cancel (it looks each second), not at the end of its
    # 20 s of work.
    assert worker.run_times()[-1] < 20, worker.text()[-3000:]
    assert get(web, task["id"])["status"]["state"] == "TASK_STATE_CANCELED"

    # A burst: every task completes, each once.
    with ThreadPoolExecutor(8) as pool:
        sent = list(pool.map(lambda n: send(web, f"burst {n}", immediately=True)["id"],
                             range(200)))
    deadline = time.monotonic() + 60
    for n, task_id in enumerate(sent):
        task = wait_state(web, task_id, ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED"],
                          max(1.0, deadline - time.monotonic()))
        assert task["status"]["state"] == "TASK_STATE_COMPLETED" and chunks(task) == [
            f"burst {n}"], task


def resubscribe(server: Server, task_id: str, opened: threading.Event) -> List[Dict[str, Any]]:
    """A SubscribeToTask's results; ``opened`` is set at its first event (the snapshot)."""
    results = []
    for event in server.stream("SubscribeToTask", {"id": task_id}, timeout=30):
        opened.set()
        if "result" in event["data"]:
            results.append(event["data"]["result"])
    opened.set()
    return results


def store_head(url: str, task_id: str) -> int:
    """The sequence number of a task's last event, read from its store."""
    from a2a_flask.stores import open_store

    store = open_store(url)
    try:
        head = store.head(task_id)
    finally:
        store.close()
    assert head is not None, task_id
    return head[0]


def test_web_restarts_and_a_warm_worker_shutdown_during_a_task(
        tmp_path: Path, processes: Any, request: Any) -> None:
    """RabbitMQ, a gevent-pool worker: the web tier reloads (HUP) and then stops and
    starts again (SIGTERM) while a 15 s task runs; the Celery worker gets a warm
    shutdown before the task ends.  The task completes, and a resubscribe on the new
    web server sees each of its events once, in order.  (The run outlasts two
    gunicorn boots on a loaded 2-CPU machine; each step waits for what it needs.)"""
    seconds = 15
    rabbit_up()
    env = {"FLASK_A2A_STORE": f"sqlite:///{tmp_path}/tasks.db",
           "CELERY_BROKER_URL": RABBIT_BROKER, "CELERY_QUEUE": f"a2a-test-{uuid.uuid4().hex}"}
    request.addfinalizer(lambda: drop_queue(RABBIT_BROKER, env["CELERY_QUEUE"]))
    web = processes("web", "examples.celery_agent:app", env=env)
    worker = processes("worker", "examples.celery_agent:celery", env, pool="gevent",
                       concurrency=10)
    task = send(web, f"slow:{seconds}", immediately=True)
    wait_state(web, task["id"], ["TASK_STATE_WORKING"], 15)
    old = set(worker_pids(web))
    web.proc.send_signal(signal.SIGHUP)  # a reload: new workers, the old ones stop
    wait_until(lambda: not old & set(worker_pids(web)) and worker_pids(web), 30,
               "gunicorn's workers to be replaced")
    assert get(web, task["id"])["status"]["state"] == "TASK_STATE_WORKING"
    port = web.port
    web.stop(graceful=True)  # SIGTERM: the web tier is gone while the run writes more events
    seq = store_head(env["FLASK_A2A_STORE"], task["id"])
    wait_until(lambda: store_head(env["FLASK_A2A_STORE"], task["id"]) > seq, 15,
               "the run to write an event while no web server runs")
    web = processes("web", "examples.celery_agent:app", env=env, port=port)
    opened = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        following = pool.submit(resubscribe, web, task["id"], opened)
        assert opened.wait(20), "the resubscribe did not open"
        worker.warm_stop(timeout=20)  # waits for the run: the task is not failed
        assert worker.proc.returncode == 0
        events = following.result(timeout=20)
    # The resubscribe opened while the run went on (a finished task has no stream).
    assert events and events[0]["task"]["status"]["state"] == "TASK_STATE_WORKING", events
    final = events[-1]
    assert final["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED", events
    task = get(web, task["id"])
    steps = [f"worked {n} of {seconds} s" for n in range(1, seconds + 1)]
    assert texts(task) == steps
    assert chunks(task) == [f"step {n}\n" for n in range(1, seconds + 1)] + [
        f"done after {seconds} s"]
    # The resubscribe: a snapshot, then each later event once, in order.
    assert "task" in events[0]
    seen = [event["statusUpdate"]["status"]["message"]["parts"][0]["text"]
            for event in events[1:] if "statusUpdate" in event
            and event["statusUpdate"]["status"].get("message")]
    assert texts(events[0]["task"]) + seen == steps


def test_no_worker_then_a_worker_then_a_killed_one(env: Dict[str, str], processes: Any,
                                                  tmp_path: Path) -> None:
    """No worker: a non-blocking send answers SUBMITTED at once, a blocking one at
    A2A_BLOCKING_TIMEOUT with the task as it stands; both run once a worker comes.
    Then a worker's pool process is SIGKILLed mid-task (Celery gives its order back
    at once, and the new pool process finds the dead run's lease live: nothing): once
    the lease expired, the rerun-safe agent runs the task again (the final task holds
    the second run's chunks only, and says it restarted); the other fails it once,
    saying why.  (A whole worker killed: tests/web/test_celery_kill.py.)"""
    env = {**env, "FLASK_A2A_LEASE_TTL": "3"}
    web = processes("web", "tests.support.celery_app:app",
                    env={**env, "FLASK_A2A_BLOCKING_TIMEOUT": "5"})
    started = time.monotonic()
    queued = send(web, "queued", path="/safe", immediately=True)
    assert queued["status"]["state"] == "TASK_STATE_SUBMITTED"
    answered = time.monotonic() - started
    assert answered < 4.5, answered  # not held for the blocking timeout
    started = time.monotonic()
    blocked = send(web, "blocked", path="/safe")
    assert blocked["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert 4.5 < time.monotonic() - started < 15
    worker = processes("worker", "tests.support.celery_app:celery", env)
    for task_id, text in ((queued["id"], "queued"), (blocked["id"], "blocked")):
        task = wait_state(web, task_id, ["TASK_STATE_COMPLETED"], 20, path="/safe")
        assert chunks(task) == [text]

    for path in ("/safe", "/unsafe"):
        hold = tmp_path / f"hold{path.replace('/', '-')}"
        hold.touch()  # the run waits after step 2 until the kill: never too late
        task = send(web, f"slow:3 hold:{hold}", path=path, immediately=True)
        deadline = time.monotonic() + 15
        while "chunk 2;" not in chunks(get(web, task["id"], path)):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child, = worker.children()
        os.kill(child, signal.SIGKILL)
        hold.unlink()  # a rerun goes through
        final = wait_state(web, task["id"], ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED"], 20,
                           path)
        if path == "/safe":
            assert final["status"]["state"] == "TASK_STATE_COMPLETED", final
            assert chunks(final) == ["chunk 1;", "chunk 2;", "chunk 3;"]
            assert [t.split(" (")[0] for t in texts(final)] == [
                "step 1 of 3", "step 2 of 3", RESTARTED, "step 1 of 3", "step 2 of 3",
                "step 3 of 3"]
        else:
            assert final["status"]["state"] == "TASK_STATE_FAILED", final
            assert final["status"]["message"]["parts"][0]["text"] == ORPHANED
            time.sleep(1)  # nothing more happens to it
            assert get(web, task["id"], path)["status"] == final["status"]


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_networked_stores_with_a_prefork_worker(kind: str, env: Dict[str, str],
                                                processes: Any) -> None:
    """The SQL stores' engines are made in each forked pool process, never shared
    across a fork (the Redis store: bench/celery_bench.py --store redis://...)."""
    name = f"a2a_celery_{uuid.uuid4().hex[:8]}"
    store = sql_test_url(kind, name)
    try:
        env = {**env, "FLASK_A2A_STORE": store}
        web = processes("web", "examples.celery_agent:app", env=env)
        processes("worker", "examples.celery_agent:celery", env, concurrency=2)
        first, second = send(web, "slow:1", immediately=True), send(web, "hello")
        assert chunks(second) == ["hello"]
        done = wait_state(web, first["id"], ["TASK_STATE_COMPLETED"], 15)
        assert chunks(done) == ["step 1\n", "done after 1 s"]
    finally:
        for made in reversed(processes.started):
            made.stop()
        drop_sql_database(kind, name)


TRACED = """
import contextlib, json, sys, time, types
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from flask import Flask
from a2a_flask import A2A, signals
from tests.conftest import make_card

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

class Broker:
    '''What the runner uses of a Celery app, with a list as the queue.'''
    amqp = None
    def __init__(self):
        self.tasks, self.sent = {}, []
    def connection_for_write(self):
        return contextlib.nullcontext(types.SimpleNamespace(transport=None))
    def task(self, **options):
        def register(fn):
            self.tasks[options["name"]] = (fn, options)
            return fn
        return register
    def send_task(self, name, args, **options):
        self.sent.append((name, args))

broker = Broker()
agent = A2A(card=make_card(), runner="celery", celery=broker, store=sys.argv[1])
agent.executor(lambda ctx: "traced")
app = Flask("traced")
agent.init_app(app)
runs = []
signals.task_run.connect(lambda sender, **kw: runs.append(kw), weak=False)
answer = app.test_client().post("/a2a", headers={
    "A2A-Version": "1.0",
    "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}, json={
    "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
        "configuration": {"returnImmediately": True}}}).get_json()
(name, args), = broker.sent
run, options = broker.tasks[name]
run(types.SimpleNamespace(), *args)
for _ in range(100):  # the run's span ends just after the run says it finished
    spans = {s.name: s for s in exporter.get_finished_spans()}
    if "a2a.execute" in spans:
        break
    time.sleep(0.02)
print(sorted(spans), file=sys.stderr)
print(json.dumps({"state": answer["result"]["task"]["status"]["state"], "name": name,
                  "options": {k: options[k] for k in ("acks_late", "reject_on_worker_lost")},
                  "trace": format(spans["a2a.execute"].context.trace_id, "032x"),
                  "parent": format(spans["a2a.execute"].parent.span_id, "016x"),
                  "server": format(spans["SendMessage"].context.span_id, "016x"),
                  "runs": [sorted(kw) for kw in runs]}))
"""


def test_the_callers_trace_and_the_run_times_cross_the_queue(tmp_path: Path) -> None:
    """With tracing on, the worker's ``a2a.execute`` span is a child of the request that
    queued the run (its traceparent rides in the message); ``task_run`` reports the
    queue wait and run time; the task is registered with late acknowledgement."""
    pytest.importorskip("opentelemetry.sdk")
    import json

    done = subprocess.run([sys.executable, "-c", TRACED, f"sqlite:///{tmp_path}/t.db"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["state"] == "TASK_STATE_SUBMITTED" and found["name"] == "a2a_flask.run.a2a"
    assert found["options"] == {"acks_late": True, "reject_on_worker_lost": True}
    assert found["trace"] == "0af7651916cd43dd8448eb211c80319c"
    assert found["parent"] == found["server"]
    assert found["runs"] == [["context_id", "queue_wait", "run_time", "task_id"]]
