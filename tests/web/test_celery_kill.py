"""A whole Celery worker (main process and pool, at once) SIGKILLed mid-run, on the
Redis broker and on RabbitMQ, with another worker alive: the rerun-safe task runs
again on the survivor once its lease expired, the other fails once, saying why; and
a replayed order of a running task does nothing.  One web tier, three prefork workers
and a short lease (A2A_LEASE_TTL) per broker; every wait is bounded."""
from __future__ import annotations

import os
import re
import signal
import time
import uuid
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from a2a_flask.engine.keeper import ORPHANED
from a2a_flask.engine.runners import RESTARTED, QueuedRun

from tests.conftest import redis_up
from tests.support.helpers import Server
from tests.web.test_celery import (RABBIT_BROKER, REDIS_BROKER, Worker, chunks, drop_queue, get,
                                   rabbit_up, send, texts, wait_state)

pytestmark = pytest.mark.server

pytest.importorskip("celery")

#: Seconds a lease lasts: a killed worker's task is taken care of about this long after.
LEASE_TTL = 4
#: Bound on the wait for a killed worker's task to end (the lease, a keeper round, a run).
AFTER_KILL = LEASE_TTL + 25


class Cluster:
    """A web tier and three Celery workers on one broker, a short lease."""

    def __init__(self, broker: str, log_dir: Path) -> None:
        self.broker = broker
        self.log_dir = log_dir
        self.env = {"FLASK_A2A_STORE": f"sqlite:///{log_dir}/tasks.db",
                    "CELERY_BROKER_URL": broker, "CELERY_QUEUE": f"a2a-test-{uuid.uuid4().hex}",
                    "FLASK_A2A_LEASE_TTL": str(LEASE_TTL)}
        self.web = Server("tests.support.celery_app:app", env=self.env)
        self.workers: List[Worker] = []
        self.dead: List[Worker] = []
        for _ in range(3):
            self.workers.append(Worker("tests.support.celery_app:celery", self.env,
                                       log_dir=self.log_dir))

    def running(self, path: str, text: str, hold: Path) -> Dict[str, Any]:
        """Send ``text`` held at its second step while the file ``hold`` exists
        (tests/support/celery_app.py) and wait until its run wrote its second chunk."""
        hold.touch()
        return self.wait_running(send(self.web, f"{text} hold:{hold}", path=path,
                                      immediately=True), path)

    def wait_running(self, task: Dict[str, Any], path: str) -> Dict[str, Any]:
        """Wait until ``task``'s run wrote its second chunk."""
        deadline = time.monotonic() + 20
        while "chunk 2;" not in chunks(get(self.web, task["id"], path)):
            assert time.monotonic() < deadline, get(self.web, task["id"], path)
            time.sleep(0.05)
        return task

    def kill_runner_of(self, task: Dict[str, Any], path: str) -> int:
        """SIGKILL the process group of the worker whose pool runs ``task`` (its pid is
        in the task's status texts); the pid killed."""
        pid = int(re.findall(r"\(pid (\d+)\)", " ".join(texts(get(self.web, task["id"],
                                                                    path))))[-1])
        worker, = [w for w in self.workers if pid in w.children()]
        os.killpg(worker.proc.pid, signal.SIGKILL)
        worker.proc.wait(10)
        self.workers.remove(worker)
        self.dead.append(worker)
        return pid

    def logs(self) -> str:
        return "".join(w.text() for w in self.workers + self.dead)

    def stop(self) -> None:
        for worker in self.workers + self.dead:
            worker.stop()
        self.web.stop()


@pytest.fixture(scope="module", params=["redis", "rabbitmq"])
def cluster(request: Any, tmp_path_factory: Any) -> Iterator[Cluster]:
    if request.param == "redis":
        redis_up()
        broker = REDIS_BROKER
    else:
        rabbit_up()
        broker = RABBIT_BROKER
    made = Cluster(broker, tmp_path_factory.mktemp(request.param))
    try:
        yield made
    finally:
        made.stop()
        drop_queue(broker, made.env["CELERY_QUEUE"])


def steps_of(task: Dict[str, Any]) -> List[str]:
    return [text.split(" (")[0] for text in texts(task)]


def test_a_replayed_order_of_a_running_task_does_nothing(cluster: Cluster,
                                                         tmp_path: Path) -> None:
    from celery import Celery

    from a2a_flask.stores import open_store

    hold = tmp_path / "hold"
    task = cluster.running("/safe", "slow:4", hold)
    store = open_store(cluster.env["FLASK_A2A_STORE"])
    try:
        queued_seq = store.read(task["id"], 0)[0].seq  # the order's: the task as queued
    finally:
        store.close()
    order = QueuedRun(agent="safe", task_id=task["id"], seq=queued_seq,
                      message_id=task["history"][0]["messageId"], follow_up=False,
                      queued_at=time.time())
    sender = Celery("replay", broker=cluster.broker)
    try:
        sender.send_task("a2a_flask.run.safe", args=[order.to_dict()], serializer="json",
                         queue=cluster.env["CELERY_QUEUE"])
    finally:
        sender.close()
    deadline = time.monotonic() + 20
    while "its order does nothing" not in cluster.logs():
        assert time.monotonic() < deadline, cluster.logs()[-3000:]
        time.sleep(0.1)
    hold.unlink()
    final = wait_state(cluster.web, task["id"], ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED"],
                       20, "/safe")
    assert final["status"]["state"] == "TASK_STATE_COMPLETED", final
    assert chunks(final) == ["chunk 1;", "chunk 2;", "chunk 3;", "chunk 4;"]
    assert steps_of(final) == [f"step {n} of 4" for n in range(1, 5)]


def test_killed_workers_tasks_rerun_on_the_survivor_or_fail_saying_why(
        cluster: Cluster, tmp_path: Path) -> None:
    """Two workers killed at once, each running a task: the rerun-safe one completes
    on the third, the other fails once, saying why."""
    holds = tmp_path / "hold-unsafe", tmp_path / "hold-safe"
    holds[0].touch()
    unsafe = send(cluster.web, f"slow:8 hold:{holds[0]}", path="/unsafe", immediately=True)
    safe = cluster.running("/safe", "slow:4", holds[1])
    cluster.wait_running(unsafe, "/unsafe")
    killed = cluster.kill_runner_of(safe, "/safe")
    cluster.kill_runner_of(unsafe, "/unsafe")
    for hold in holds:
        hold.unlink()  # the reruns go through
    started = time.monotonic()
    ended = ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED"]
    final = wait_state(cluster.web, safe["id"], ended, AFTER_KILL, "/safe")
    print(f"{cluster.broker.split(':')[0]}: completed {time.monotonic() - started:.1f} s "
          f"after the kill (lease {LEASE_TTL} s, run 4 s)")
    assert final["status"]["state"] == "TASK_STATE_COMPLETED", final
    # The first run's artifacts were dropped: one run's chunks, each once.
    assert chunks(final) == [f"chunk {n};" for n in range(1, 5)]
    assert steps_of(final) == ["step 1 of 4", "step 2 of 4", RESTARTED] + [
        f"step {n} of 4" for n in range(1, 5)]
    assert f"(pid {killed})" not in " ".join(texts(final)[-4:])  # on the survivor
    assert final["metadata"]["a2a_flask/restarts"]["count"] == 1

    failed = wait_state(cluster.web, unsafe["id"], ended, AFTER_KILL, "/unsafe")
    assert failed["status"]["state"] == "TASK_STATE_FAILED", failed
    assert failed["status"]["message"]["parts"][0]["text"] == ORPHANED
    time.sleep(1)  # nothing more happens to it (RabbitMQ delivered its order again)
    assert get(cluster.web, unsafe["id"], "/unsafe")["status"] == failed["status"]
