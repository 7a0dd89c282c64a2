"""Memory stays flat: after a warm-up, more tasks do not grow a worker's heap.

Per store (the memory store aside: it keeps every task until its TTL, by
design) and per path, ``TASKS`` more tasks after ``WARMUP`` may grow the
traced heap by less than ``LIMIT`` bytes each.  The probe, its paths and what
the measurement counts are in ``memory_probe.py``; ``bench/memory.py`` prints
the same figures for longer runs.  A store added to ``memory_probe.STORES``
is measured here too.  The Redis cases take about half the time: they are in
``test_memory_redis.py``, so that parallel runs spread the two files.

A batch can grow by a few KiB that do not come back (a cache that fills
once, a connection pool reaching the peak concurrency): so a batch over the
limit is followed by another, up to ``BATCHES``, and the test fails only if
every one grew too much.  A leak grows every batch.
"""
from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import requests

from tests.support import memory_probe
from tests.conftest import redis_up
from tests.support.helpers import Server

pytestmark = pytest.mark.declare(slow=["test_more_tasks_do_not_grow_the_heap"])

ROOT = Path(__file__).resolve().parents[2]

#: Bytes a task may leave behind (the issue's bound).
LIMIT = 64
#: Warm-up and measured tasks per store.  Redis grows its connection pool to the
#: peak of concurrent calls, which a slow machine raises now and then: a few KiB
#: in one batch (CI saw 77-116 B/task over three batches of 40), which more
#: tasks dilute.
BATCH = {"redis": (20, 80)}
WARMUP, TASKS = 10, 40
#: Batches measured at most: the test fails only if every one grows too much.
#: (Redis now and then grows one batch by a few KiB: its connection pool
#: reaching a new peak of concurrent calls.  The next batch is flat.  On a loaded
#: machine the threads an earlier test of the same process left behind, such as
#: deliveries still resolving a host, allocate during a batch too: a run under a
#: CPU hog saw 75, 140 and 67 B/task.)
BATCHES = 5

#: The stores measured in a file of their own (test_memory_redis.py).
ELSEWHERE = ("redis",)
CASES = [(store, path) for store in memory_probe.STORES if store not in ELSEWHERE
         for path in memory_probe.PATHS]


@pytest.mark.parametrize("store, path", CASES, ids=[f"{s}-{p}" for s, p in CASES])
def test_more_tasks_do_not_grow_the_heap(store, path, tmp_path):
    assert_flat(store, path, tmp_path)


def assert_flat(store: str, path: str, tmp_path: Path) -> None:
    """``TASKS`` more tasks of ``path`` on ``store`` leave less than ``LIMIT`` bytes each."""
    if store == "redis":
        redis_up()
    warmup, tasks = BATCH.get(store, (WARMUP, TASKS))
    # A fresh interpreter per case: the threads earlier tests of this pytest process
    # left running (an app's keeper, a delivery resolving a host) allocate during a
    # batch too, and CI saw them read as a steady 110-190 B/task on SQLite.
    command = [sys.executable, "-m", "tests.support.memory_probe", store, path, str(tmp_path),
               "--warmup", str(warmup), "--tasks", str(tasks), "--limit", str(LIMIT),
               "--batches", str(BATCHES)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    measured = json.loads(done.stdout.splitlines()[-1])
    grown, where = measured["grown"], measured["where"]
    assert min(grown) < LIMIT, (
        f"{path} on {store}: each task left {', then '.join(f'{g:.0f}' for g in grown)} "
        f"bytes behind (limit {LIMIT}); where one more batch grew:\n" + "\n".join(where))


def _send_and_stream(session: requests.Session, url: str) -> None:
    """One blocking SendMessage and one SendStreamingMessage, each to COMPLETED."""
    for method in ("SendMessage", "SendStreamingMessage"):
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": {
            "role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "hi"}]}}}
        response = session.post(url + "/a2a", json=body, headers={"A2A-Version": "1.0"},
                                timeout=30)
        assert response.status_code == 200 and b"TASK_STATE_COMPLETED" in response.content, \
            response.content[-300:]


def test_a_gevent_worker_does_not_grow_either(tmp_path):
    """The same bound in a real ``gunicorn -k gevent`` worker (gevent's primitives),
    read from the worker's own tracemalloc through the test app's /probe/heap."""
    env = {"FLASK_A2A_STORE": f"sqlite:///{tmp_path}/tasks"}
    with Server("tests.support.memory_app:app", env=env, extra_args=["--timeout", "120"]) as server, \
            requests.Session() as session:
        def heap() -> int:
            answer = session.get(server.url + "/probe/heap", timeout=30).json()
            assert answer["running"] == 0, answer
            return int(answer["heap"])

        def batch(tasks: int) -> float:
            before = heap()
            for _ in range(tasks):
                _send_and_stream(session, server.url)
            return (heap() - before) / tasks

        for _ in range(WARMUP):
            _send_and_stream(session, server.url)
        batch(WARMUP // 2)  # starts tracing; the warm-up's second half is traced
        grown = [batch(TASKS)]
        while min(grown) >= LIMIT and len(grown) < BATCHES:
            grown.append(batch(TASKS))
    assert min(grown) < LIMIT, f"each task left {grown} bytes behind in the gevent worker"
