"""The followers of one task share their store reads (stores/shared.py): whatever
their number, the store is read about once per event and waited on once, and each
follower still gets every event once, in order, from wherever it started."""
from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Callable, Dict, List, Optional

import pytest

from a2a_flask.engine.runtime import Runtime
from a2a_flask.protocol.models import Artifact, Part, TaskArtifactUpdateEvent, TaskState
from a2a_flask.stores.shared import WINDOW, SharedLog

from tests.stores.test_stores import create, open_store, status_event

pytestmark = pytest.mark.declare(server=[
    "test_a_thousand_greenlet_followers_share_one_wait_and_one_read_per_event"], slow=[
    "test_followers_see_every_event_once_in_order_and_the_store_is_read_per_event[redis-1]",
    "test_followers_see_every_event_once_in_order_and_the_store_is_read_per_event[redis-50]",
    "test_a_follower_behind_the_window_reads_the_store_itself_and_loses_nothing[redis]"])

#: The stores this is checked on: in process, a file, across hosts.
KINDS = ["memory", "sqlite", "redis"]


class Counting:
    """A store whose read, wait, head and load calls are counted (everything else as
    is), with how many of its waits are under way now."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.calls: Counter = Counter()
        self.waiting = Waiting()

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._store, name)
        if name in ("read", "wait", "head", "load"):
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.calls[name] += 1
                return found(*args, **kwargs)
            return self.waiting.around(counted) if name == "wait" else counted
        return found


class Waiting:
    """How many callers are inside the waits it wraps now: what tells a test that
    every follower is parked, instead of a pause long enough to hope so."""

    def __init__(self) -> None:
        self.inside = 0
        self._lock = threading.Lock()

    def around(self, wait: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                self.inside += 1
            try:
                return wait(*args, **kwargs)
            finally:
                with self._lock:
                    self.inside -= 1
        return counted


def parked(runtime: Runtime) -> Waiting:
    """Counts the followers of ``runtime`` waiting for news now (in its shared log's wait)."""
    waiting = Waiting()
    runtime.log.wait = waiting.around(runtime.log.wait)  # type: ignore[method-assign]
    return waiting


def chunk(number: int) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent("t1", "ctx", Artifact("a", [Part(text=f"c{number} ")]),
                                   append=number > 0)


@pytest.fixture(params=KINDS)
def store(request, tmp_path):
    opened = open_store(request.param, str(tmp_path / "tasks"))
    yield opened
    opened.close()


def follow_all(runtime: Runtime, count: int, after: Dict[int, int],
               results: Dict[int, List[int]]) -> List[threading.Thread]:
    """``count`` followers of t1, follower ``i`` after ``after.get(i, 2)``, each
    recording the sequence numbers it got."""
    def follow(index: int) -> None:
        got = results.setdefault(index, [])
        for entry in runtime.follow("t1", after.get(index, 2), heartbeat=5.0):
            if entry is not None:
                got.append(entry.seq)

    threads = [threading.Thread(target=follow, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    return threads


def write(store: Any, events: List[Any], pause: float = 0.0) -> None:
    record = store.load("t1")
    for event in events:
        record = record.after([event])
        store.append("t1", record.seq - 1, [event], record)
        if pause:
            time.sleep(pause)


def wait_for(predicate, what: str, limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


@pytest.mark.parametrize("followers", [1, 50])
def test_followers_see_every_event_once_in_order_and_the_store_is_read_per_event(
        store, followers):
    create(store, "t1")
    write(store, [status_event("t1", TaskState.WORKING)])
    counting = Counting(store)
    runtime = Runtime(counting, lambda run: None)
    results: Dict[int, List[int]] = {}
    waiting = parked(runtime)
    threads = follow_all(runtime, followers, {}, results)
    # Every follower reached its wait, and the store is waited on (by the one follower,
    # or by the feed's watcher): a count taken now is the baseline.
    wait_for(lambda: runtime.log.followed() == 1 and len(results) == followers
             and waiting.inside == followers and counting.waiting.inside >= 1,
             "every follower waiting")
    before = Counter(counting.calls)
    events = [chunk(n) for n in range(40)] + [status_event("t1", TaskState.COMPLETED, 2)]
    write(store, events, pause=0.005)
    for thread in threads:
        thread.join(30)
    assert all(not thread.is_alive() for thread in threads)
    expected = list(range(3, 3 + len(events)))
    assert all(results[i] == expected for i in range(followers)), results
    used = counting.calls - before
    # One follower reads about twice per event (the entry, then "nothing more");
    # fifty share those reads: per event, not per follower.
    assert used["read"] <= 3 * len(events), used
    assert used["wait"] <= 3 * len(events), used
    assert used["head"] <= followers + 2, used  # at the start and the heartbeat, not per event
    assert runtime.log.followed() == 0 and runtime.log.feeds() == 0


def test_a_follower_behind_the_window_reads_the_store_itself_and_loses_nothing(store):
    """A late joiner (Last-Event-ID far back) and the crowd at the head: the window
    holds only the newest entries; the late one reads the older ones from the store."""
    create(store, "t1")
    write(store, [status_event("t1", TaskState.WORKING)] + [chunk(n) for n in range(WINDOW + 50)])
    runtime = Runtime(store, lambda run: None)
    head = store.head("t1")[0]
    results: Dict[int, List[int]] = {}
    waiting = parked(runtime)
    threads = follow_all(runtime, 5, {0: 1, 1: head, 2: head, 3: head, 4: head - 3}, results)
    # Every follower read what it was behind and waits at the head.
    wait_for(lambda: runtime.log.feeds() == 1 and len(results) == 5 and waiting.inside == 5,
             "every follower waiting at the head")
    write(store, [chunk(1000 + n) for n in range(10)] + [status_event("t1",
                                                                     TaskState.COMPLETED, 2)])
    for thread in threads:
        thread.join(30)
    last = store.head("t1")[0]
    assert results[0] == list(range(2, last + 1))
    assert results[4] == list(range(head - 2, last + 1))
    for index in (1, 2, 3):
        assert results[index] == list(range(head + 1, last + 1))


def test_a_thousand_greenlet_followers_share_one_wait_and_one_read_per_event():
    """Under gevent (as in a worker): a thousand followers of one task in one process."""
    script = r"""
from gevent import monkey; monkey.patch_all()
import gevent, json, sys, time
sys.path.insert(0, sys.argv[1])
from collections import Counter
from a2a_flask.engine.runtime import Runtime
from a2a_flask.stores import MemoryStore
from tests.stores.test_shared_log import Counting, chunk, parked, write
from tests.stores.test_stores import create, status_event
from a2a_flask.protocol.models import TaskState

store = MemoryStore()
create(store, "t1")
write(store, [status_event("t1", TaskState.WORKING)])
counting = Counting(store)
runtime = Runtime(counting, lambda run: None)
got = {}
waiting = parked(runtime)
def follow(i):
    got[i] = [e.seq for e in runtime.follow("t1", 2, heartbeat=5.0) if e is not None]
followers = [gevent.spawn(follow, i) for i in range(1000)]
deadline = time.monotonic() + 60  # every follower waiting, and the watcher on the store
while not (waiting.inside == 1000 and counting.waiting.inside >= 1):
    assert time.monotonic() < deadline, (waiting.inside, counting.waiting.inside)
    gevent.sleep(0.01)
before = Counter(counting.calls)
events = [chunk(n) for n in range(50)] + [status_event("t1", TaskState.COMPLETED, 2)]
def writer():
    record = store.load("t1")
    for event in events:
        record = record.after([event])
        store.append("t1", record.seq - 1, [event], record)
        gevent.sleep(0.005)
gevent.joinall([gevent.spawn(writer)] + followers, timeout=60)
expected = list(range(3, 3 + len(events)))
print(json.dumps({"complete": sum(got.get(i) == expected for i in range(1000)),
                  "calls": dict(counting.calls - before), "events": len(events),
                  "feeds": runtime.log.feeds()}))
"""
    import json
    import subprocess
    import sys

    from tests.support.helpers import ROOT

    done = subprocess.run([sys.executable, "-c", script, str(ROOT)], capture_output=True,
                          text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["complete"] == 1000, report
    assert report["feeds"] == 0
    events = report["events"]
    assert report["calls"].get("read", 0) <= 3 * events, report
    assert report["calls"].get("wait", 0) <= 3 * events, report
    assert report["calls"].get("head", 0) <= 1010, report  # once each, at the start


def test_a_crowd_attaching_at_once_shares_one_load():
    store = Counting(open_store("memory", ""))
    log = SharedLog(store)  # type: ignore[arg-type]
    create(store._store, "t1")
    slow_load = store._store.load

    def slow(task_id: str) -> Optional[Any]:
        time.sleep(0.2)
        return slow_load(task_id)

    store._store.load = slow
    records = []
    threads = [threading.Thread(target=lambda: records.append(log.load("t1")))
               for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert len(records) == 20 and all(r is records[0] for r in records)
    assert store.calls["load"] < 20  # those that asked while it was read shared it
