"""A task never has two runs: the lease is taken set-if-absent by a new run's first
write, by :meth:`Keeper.hold` and by a queued run's claim; a task whose run's lease
expired is queued again once (rerun-safe) or failed, saying why.  In one process,
with a list as the runner's queue (the real Celery workers: test_celery_kill.py)."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest
from flask import Flask

from a2a_flask import A2A
from a2a_flask.engine import keeper as keeper_module
from a2a_flask.engine.keeper import ORPHANED, Keeper
from a2a_flask.engine.lifecycles import LeaseState
from a2a_flask.engine.run import Run
from a2a_flask.engine.runners import (MAX_RESTARTS, RESTARTED, RESTARTS_KEY, TOO_MANY_RESTARTS,
                                      LeaseBusy, QueuedRun, claim, execute, queue, requeue)
from a2a_flask.engine.writer import Lease, LeaseHeld, TaskWriter
from a2a_flask.protocol.models import (Artifact, Message, Part, Role, Task, TaskArtifactUpdateEvent,
                                       TaskState, TaskStatus, TaskStatusUpdateEvent, utc_now)
from a2a_flask.stores import MemoryStore
from a2a_flask.stores.base import TaskRecord

from tests.conftest import make_card
from tests.support.helpers import user_message


def new_record(task_id: str) -> TaskRecord:
    message = Message(message_id=f"m-{task_id}", role=Role.USER, parts=[Part(text="x")])
    return TaskRecord(Task(id=task_id, context_id="ctx", history=[message],
                           status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now())), 1)


def working(task_id: str) -> List[Any]:
    return [TaskStatusUpdateEvent(task_id, "ctx", TaskStatus(state=TaskState.WORKING))]


# ---------------------------------------------------------------- the engine alone


def test_a_first_write_does_not_take_a_lease_another_process_holds() -> None:
    store = MemoryStore()
    assert store.acquire_lease("t", "other-process", 60)
    lease = Lease("this-process", 60, LeaseState.DEFERRED)
    record = new_record("t")
    with pytest.raises(LeaseHeld):
        TaskWriter(store).create(record, record.task, working("t"), lease)
    assert lease.state is LeaseState.DEFERRED  # as the lifecycle says: a refused take moves nothing
    assert store.load("t") is None  # and the write was not made


def test_hold_waits_for_a_lease_being_let_go_then_refuses_one_that_stays(
        monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemoryStore()
    record = new_record("t")
    store.create(record, record.task)
    keeper = Keeper(store, TaskWriter(store), lease_ttl=60)
    run = Run(keeper.writer, message=record.task.history[0], task_id="t", context_id="ctx",
              tenant="", owner="", dialect="1.0", record=record)
    store.acquire_lease("t", "previous-turn", 60)
    threading.Timer(0.3, lambda: store.release_lease("t", "previous-turn")).start()
    keeper.hold(run)  # the previous turn's run let it go meanwhile
    assert run.lease is not None and run.lease.held
    keeper.let_go(run)
    store.acquire_lease("t", "another-run", 60)
    monkeypatch.setattr(keeper_module, "LEASE_WAIT", 0.2)
    with pytest.raises(LeaseHeld):
        keeper.hold(run)
    keeper.close()


# ---------------------------------------------------------------- a queued run


class Agent:
    """An agent on a SQLite store whose runner is a list; ``orphaned`` as a runner's."""

    def __init__(self, tmp_path: Path, *, rerun_safe: bool, name: str = "a2a") -> None:
        self.queued: List[Dict[str, Any]] = []
        self.rerun_safe = rerun_safe
        self.name = name
        agent = A2A(card=make_card(), name=name, url_prefix=f"/{name}",
                    store=f"sqlite:///{tmp_path}/tasks.db")
        agent.executor(rerun_safe=rerun_safe)(lambda ctx: f"ran {ctx.text}")
        self.app = Flask(name)
        agent.init_app(self.app)
        self.state = self.app.extensions["a2a"][name]
        self.runtime = self.state.service.runtime
        self.runtime.runs.runner = self
        self.runtime.keeper.orphaned = self.orphaned

    def start(self, run: Run) -> None:
        self.queued.append(queue(run, self.name).to_dict())

    def orphaned(self, task_id: str) -> bool:
        if not self.rerun_safe:
            return False
        order = requeue(self.runtime, task_id, self.name)
        if order is not None:
            self.queued.append(order.to_dict())
        return True

    def send(self, text: str) -> QueuedRun:
        self.app.test_client().post(f"/{self.name}", headers={"A2A-Version": "1.0"}, json={
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": user_message(text, f"m-{text}"),
                       "configuration": {"returnImmediately": True}}})
        return QueuedRun.from_dict(self.queued[-1])

    def another_worker_runs(self, order: QueuedRun, ttl: float) -> None:
        """Another worker claimed ``order`` and wrote half its work (then it may die)."""
        assert self.runtime.store.acquire_lease(order.task_id, "other-worker", ttl)
        self.runtime.commit(order.task_id, lambda record: working(order.task_id) + [
            TaskArtifactUpdateEvent(order.task_id, record.task.context_id,
                                    Artifact(artifact_id="a", parts=[Part(text="half")]))])

    def load(self, task_id: str) -> TaskRecord:
        record = self.runtime.store.load(task_id)
        assert record is not None
        return record

    def close(self) -> None:
        self.state.close()


@pytest.fixture
def agents(tmp_path: Path) -> Iterator[Any]:
    made: List[Agent] = []

    def make(**kwargs: Any) -> Agent:
        made.append(Agent(tmp_path, **kwargs))
        return made[-1]

    yield make
    for agent in made:
        agent.close()


@pytest.mark.parametrize("rerun_safe", [True, False])
def test_an_order_delivered_again_while_another_worker_runs_it_does_nothing(
        agents: Any, rerun_safe: bool) -> None:
    agent = agents(rerun_safe=rerun_safe)
    order = agent.send("x")
    agent.another_worker_runs(order, 60)
    seq = agent.load(order.task_id).seq
    with agent.app.app_context():
        assert claim(agent.runtime, order, rerun_safe=rerun_safe) is None
    record = agent.load(order.task_id)  # neither failed nor restarted: untouched
    assert record.seq == seq and record.state is TaskState.WORKING
    assert [p.text for a in record.task.artifacts for p in a.parts] == ["half"]


def test_a_first_delivery_whose_task_another_process_leases_is_tried_again(
        agents: Any) -> None:
    agent = agents(rerun_safe=True)
    order = agent.send("x")
    agent.runtime.store.acquire_lease(order.task_id, "previous-turn", 60)
    with agent.app.app_context(), pytest.raises(LeaseBusy):
        claim(agent.runtime, order, rerun_safe=True)
    agent.runtime.store.release_lease(order.task_id, "previous-turn")
    with agent.app.app_context():
        assert execute(agent.runtime, order, rerun_safe=True) is not None
    assert agent.load(order.task_id).state is TaskState.COMPLETED


def test_an_expired_lease_queues_a_rerun_safe_task_again_once(agents: Any) -> None:
    agent = agents(rerun_safe=True)
    order = agent.send("x")
    agent.another_worker_runs(order, 0.05)  # and dies
    time.sleep(0.2)
    keeper = agent.runtime.keeper
    keeper.tend()
    keeper.tend()  # the lease was let go with the order: queued once
    assert len(agent.queued) == 2
    rerun = QueuedRun.from_dict(agent.queued[-1])
    assert rerun.rerun and rerun.task_id == order.task_id and rerun.message_id == "m-x"
    assert agent.load(order.task_id).state is TaskState.WORKING  # not failed
    with agent.app.app_context():
        assert execute(agent.runtime, rerun, rerun_safe=True) is not None
        assert execute(agent.runtime, rerun, rerun_safe=True) is None  # again: nothing
    record = agent.load(order.task_id)
    assert record.state is TaskState.COMPLETED
    assert [p.text for a in record.task.artifacts for p in a.parts] == ["ran x"]
    assert RESTARTED in [p.text for m in record.task.history for p in m.parts]
    assert record.task.metadata[RESTARTS_KEY] == {"messageId": "m-x", "count": 1}


def test_reruns_of_a_task_whose_runs_keep_dying_are_bounded(agents: Any) -> None:
    agent = agents(rerun_safe=True)
    order = agent.send("x")
    for _ in range(MAX_RESTARTS + 1):
        agent.another_worker_runs(order, 0.05)  # and dies
        time.sleep(0.2)
        agent.runtime.keeper.tend()
        rerun = QueuedRun.from_dict(agent.queued[-1])
        with agent.app.app_context():
            run = claim(agent.runtime, rerun, rerun_safe=True)
        if run is not None:  # restarted: then its worker dies too
            agent.runtime.keeper.let_go(run)
            agent.runtime.store.release_lease(order.task_id, agent.runtime.keeper.owner)
    record = agent.load(order.task_id)
    assert record.state is TaskState.FAILED
    assert record.task.status.message.parts[0].text == TOO_MANY_RESTARTS
    assert record.task.metadata[RESTARTS_KEY]["count"] == MAX_RESTARTS


def test_an_expired_lease_of_an_unsafe_task_fails_it_saying_why(agents: Any) -> None:
    agent = agents(rerun_safe=False)
    order = agent.send("x")
    agent.another_worker_runs(order, 0.05)
    time.sleep(0.2)
    agent.runtime.keeper.tend()
    record = agent.load(order.task_id)
    assert record.state is TaskState.FAILED
    assert record.task.status.message.parts[0].text == ORPHANED
    assert len(agent.queued) == 1


def test_another_agents_orphan_is_left_to_its_keepers_for_two_leases(agents: Any) -> None:
    """Two agents share a store: the unsafe agent's keeper does not fail the rerun-safe
    agent's orphan (that one's keepers queue it again), unless they stay silent."""
    safe = agents(rerun_safe=True, name="safe")
    unsafe = agents(rerun_safe=False, name="unsafe")
    order = safe.send("x")
    safe.another_worker_runs(order, 0.05)
    time.sleep(0.2)
    keeper = unsafe.runtime.keeper
    keeper.lease_ttl = 0.2
    keeper.tend()
    assert safe.load(order.task_id).state is TaskState.WORKING
    time.sleep(0.5)  # two leases' time: the safe agent is served no more?
    keeper.tend()
    assert safe.load(order.task_id).state is TaskState.FAILED
