"""The lifecycles of a lease and of a run, every pair: each state or phase, each event.

The expectations are written out row by row, apart from the tables in
``a2a_flask/engine/lifecycles.py``: a change to one must be a change to the other.
Each pair is played on the real objects (the writer and the keeper for a lease,
a run for a run), and checked against what the store was asked and holds.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

import pytest

from a2a_flask.engine.executor import invoke
from a2a_flask.engine.keeper import Keeper
from a2a_flask.engine.lifecycles import (
    LEASE_TABLE,
    RUN_TABLE,
    SIGNALS,
    LeaseAction,
    LeaseEvent,
    LeaseState,
    LeaseStep,
    LifecycleError,
    RunEvent,
    RunPhase,
    Signal,
    lease_step,
    run_move,
)
from a2a_flask.engine.run import Run
from a2a_flask.engine.runtime import Runtime
from a2a_flask.engine.writer import Lease, TaskWriter
from a2a_flask.protocol.errors import StoreUnavailable
from a2a_flask.protocol.models import (Message, Part, Role, Task, TaskState, TaskStatus,
                                       TaskStatusUpdateEvent, utc_now)
from a2a_flask.stores import MemoryStore
from a2a_flask.stores.base import SequenceConflict, TaskRecord

OWNER = "this-process"
#: Leases in these tests expire at once, so that ``expired_leases()`` lists every
#: lease the store holds (no clock is waited on).
GONE_AT_ONCE = -1.0

# ================================================================ a lease

DEFERRED, HELD, DONE = LeaseState.DEFERRED, LeaseState.HELD, LeaseState.DONE
WRITE, FINISHING, ENDS = LeaseEvent.WRITE, LeaseEvent.FINISHING_WRITE, LeaseEvent.RUN_ENDS
#: A write's own store call, and the same write letting the lease go with it.
PLAIN, RELEASING = "write", "write+release"
#: What each event asks of the store, and the lease's state after.
LEASE_EXPECTED: Dict[LeaseState, Dict[LeaseEvent, Tuple[List[str], LeaseState]]] = {
    DEFERRED: {WRITE: (["acquire_lease", PLAIN], HELD),
               FINISHING: ([PLAIN], DONE),  # never taken: nothing to let go
               ENDS: ([], DONE)},
    HELD: {WRITE: ([PLAIN], HELD),
           FINISHING: ([RELEASING], DONE),
           ENDS: (["release_lease"], DONE)},
    DONE: {WRITE: ([PLAIN], DONE),  # any later write leaves it alone
           FINISHING: ([PLAIN], DONE),
           ENDS: ([], DONE)},
}
ACTIONS = {  # the same, as the table's actions
    ("acquire_lease", PLAIN): LeaseAction.TAKE_FIRST, (PLAIN,): LeaseAction.NOTHING,
    (RELEASING,): LeaseAction.RELEASE_WITH_WRITE, ("release_lease",): LeaseAction.RELEASE,
    (): LeaseAction.NOTHING,
}


def recorded(store: MemoryStore) -> List[str]:
    """The lease and write calls made to ``store`` from now on (those a call makes
    inside another are its own, not listed)."""
    calls: List[str] = []
    depth = [0]
    names = {"acquire_lease": None, "release_lease": None, "create": PLAIN, "append": PLAIN,
             "append_released": RELEASING, "create_with": PLAIN}
    for name, kind in names.items():
        method = getattr(store, name)

        def call(*args: Any, _name: str = name, _kind: Optional[str] = kind,
                 _method: Any = method, **kwargs: Any) -> Any:
            if not depth[0]:
                releases = _name == "create_with" and kwargs.get("release_owner") is not None
                calls.append(RELEASING if releases else _kind or _name)
            depth[0] += 1
            try:
                return _method(*args, **kwargs)
            finally:
                depth[0] -= 1

        setattr(store, name, call)
    return calls


def new_record(task_id: str) -> TaskRecord:
    message = Message(message_id=f"m-{task_id}", role=Role.USER, parts=[Part(text="x")])
    task = Task(id=task_id, context_id="ctx", history=[message],
                status=TaskStatus(state=TaskState.SUBMITTED, timestamp=utc_now()))
    return TaskRecord(task, 1)


def status_event(task_id: str, state: TaskState) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(task_id, "ctx", TaskStatus(state=state, timestamp=utc_now()))


def leased_store(state: LeaseState, task_id: str, *, exists: bool) -> Tuple[MemoryStore, Lease]:
    """A store in which the task exists or not, and a lease on it in ``state`` (in the
    store exactly when HELD)."""
    store = MemoryStore()
    if exists:
        record = new_record(task_id)
        store.create(record, record.task)
    if state is HELD:
        store.acquire_lease(task_id, OWNER, GONE_AT_ONCE)
    return store, Lease(OWNER, GONE_AT_ONCE, state)


def ends_run(store: MemoryStore, lease: Lease, task_id: str) -> Keeper:
    """A keeper of ``store`` with a run on ``task_id`` that holds ``lease``."""
    keeper = Keeper(store, TaskWriter(store), lease_ttl=GONE_AT_ONCE)
    keeper.name = lambda: OWNER  # type: ignore[assignment]
    run = Run(keeper.writer, message=new_record(task_id).task.history[0], task_id=task_id,
              context_id="ctx", tenant="", owner="", dialect="1.0", record=store.load(task_id))
    run.lease = lease
    keeper._runs[task_id] = run  # as hold() leaves it, minus hold()'s own lease call
    return keeper


def play(kind: str, store: MemoryStore, lease: Lease, task_id: str, event: LeaseEvent,
         keeper: Optional[Keeper]) -> None:
    """``event`` happens to ``lease``: a write (by :meth:`TaskWriter.commit` on the
    stored task, or by :meth:`TaskWriter.create` making it), or the run's end (the
    keeper of :func:`ends_run` lets it go)."""
    if event is ENDS:
        assert keeper is not None
        run = keeper.run_here(task_id)
        assert run is not None
        keeper.let_go(run)
        assert keeper.run_here(task_id) is None
        return
    state = TaskState.COMPLETED if event is FINISHING else TaskState.WORKING
    writer = TaskWriter(store)
    if kind == "commit":
        writer.commit(task_id, lambda current: [status_event(task_id, state)], lease=lease)
    else:
        record = new_record(task_id)
        writer.create(record, record.task, [status_event(task_id, state)], lease)


def test_the_lease_table_has_a_row_for_every_state_and_a_column_for_every_event():
    assert set(LEASE_TABLE) == set(LeaseState) == set(LEASE_EXPECTED)
    assert all(set(row) == set(LeaseEvent) for row in LEASE_TABLE.values())


@pytest.mark.parametrize("event", list(LeaseEvent), ids=lambda e: e.name)
@pytest.mark.parametrize("state", list(LeaseState), ids=lambda s: s.name)
def test_the_table_says_every_lease_move(state: LeaseState, event: LeaseEvent) -> None:
    calls, after = LEASE_EXPECTED[state][event]
    assert lease_step(state, event) == LeaseStep(ACTIONS[tuple(calls)], after)
    lease = Lease(OWNER, 1.0, state)
    assert lease.step(event) == lease_step(state, event)
    assert lease.state is state  # asking moves nothing


#: Each pair, and how it is played: a write on a stored task or one that makes it;
#: a run's end (``end``) on a stored task.
PLAYS = [(state, event, kind) for state in LeaseState for event in LeaseEvent
         for kind in (("end",) if event is ENDS else ("commit", "create"))]


@pytest.mark.parametrize("state, event, kind", PLAYS,
                         ids=[f"{s.name}-{e.name}-{k}" for s, e, k in PLAYS])
def test_every_lease_move_on_the_store(state: LeaseState, event: LeaseEvent, kind: str) -> None:
    """Each pair, played: the store is asked what the row says, and holds the lease
    after it exactly when the lease says HELD."""
    task_id = f"{state.name}-{event.name}-{kind}".lower()
    store, lease = leased_store(state, task_id, exists=kind != "create")
    keeper = ends_run(store, lease, task_id) if event is ENDS else None
    calls = recorded(store)
    play(kind, store, lease, task_id, event, keeper)
    expected_calls, expected_state = LEASE_EXPECTED[state][event]
    assert calls == expected_calls
    assert lease.state is expected_state
    assert lease.held is (expected_state is HELD)
    assert (task_id in store.expired_leases()) is lease.held


def test_a_finishing_write_that_fails_leaves_a_deferred_lease_deferred():
    """The lease moves once the store did what the move asks: a first write that
    would have finished the task, and failed, leaves the lease to the next one (a
    failure the run records with the task made running takes it then)."""
    store, lease = leased_store(DEFERRED, "t", exists=False)

    def down(*args: Any, **kwargs: Any) -> int:
        raise StoreUnavailable()

    store.create_with = down  # type: ignore[method-assign]
    record = new_record("t")
    with pytest.raises(StoreUnavailable):
        TaskWriter(store).create(record, record.task, [status_event("t", TaskState.COMPLETED)],
                                 lease)
    assert lease.state is DEFERRED
    del store.__dict__["create_with"]
    calls = recorded(store)
    TaskWriter(store).create(record, record.task, [], lease)  # made alone: it goes on
    assert calls == ["acquire_lease", PLAIN]
    assert lease.state is HELD


def test_a_lease_taken_first_stays_held_when_its_write_fails():
    store, lease = leased_store(DEFERRED, "t", exists=False)

    def down(*args: Any, **kwargs: Any) -> int:
        raise StoreUnavailable()

    store.create_with = down  # type: ignore[method-assign]
    record = new_record("t")
    with pytest.raises(StoreUnavailable):
        TaskWriter(store).create(record, record.task, [status_event("t", TaskState.WORKING)],
                                 lease)
    assert lease.state is HELD  # in the store: the keeper renews it, the run's end lets it go
    assert "t" in store.expired_leases()


def test_a_finishing_append_that_conflicts_releases_the_lease_on_its_retry():
    store, lease = leased_store(HELD, "t", exists=True)
    append_released = store.append_released
    tries: List[TaskState] = []  # the lease's state at each try

    def once_stale(*args: Any, **kwargs: Any) -> int:
        tries.append(lease.state)
        if len(tries) == 1:
            raise SequenceConflict()
        return append_released(*args, **kwargs)

    store.append_released = once_stale  # type: ignore[method-assign]
    TaskWriter(store).commit("t", lambda current: [status_event("t", TaskState.COMPLETED)],
                             lease=lease)
    assert tries == [HELD, HELD]  # the conflict left it held: the retry lets it go
    assert lease.state is DONE
    assert "t" not in store.expired_leases()


# ================================================================ a run

P, E, G = RunPhase, RunEvent, Signal
#: The phase each event leads to; missing: refused.
RUN_EXPECTED: Dict[RunPhase, Dict[RunEvent, RunPhase]] = {
    P.UNDECIDED: {E.TASK_MADE: P.WORKING, E.REPLY: P.REPLIED, E.START_FAILED: P.UNSTARTED,
                  E.END: P.ENDED_UNDECIDED},
    P.WORKING: {E.SETTLE: P.SETTLED, E.START_FAILED: P.UNSTARTED, E.END: P.ENDED},
    P.SETTLED: {E.SETTLE: P.SETTLED, E.END: P.ENDED},
    P.REPLIED: {E.END: P.ENDED},
    P.UNSTARTED: {E.TASK_MADE: P.UNSTARTED, E.END: P.ENDED},
    P.ENDED: {E.TASK_MADE: P.ENDED, E.SETTLE: P.ENDED},
    P.ENDED_UNDECIDED: {E.TASK_MADE: P.ENDED},
}
#: The events a run has set in each phase.
SET_IN: Dict[RunPhase, set] = {
    P.UNDECIDED: set(), P.WORKING: {G.DECIDED},
    P.SETTLED: {G.DECIDED, G.SETTLED}, P.REPLIED: {G.DECIDED, G.SETTLED},
    P.UNSTARTED: {G.DECIDED, G.SETTLED},
    P.ENDED: {G.DECIDED, G.SETTLED, G.FINISHED}, P.ENDED_UNDECIDED: {G.SETTLED, G.FINISHED},
}


def user(text: str = "hello") -> Message:
    return Message(message_id=f"m-{text}", role=Role.USER, parts=[Part(text=text)])


def new_run(runtime: Runtime, task_id: str = "t1") -> Run:
    return Run(runtime.writer, message=user(), task_id=task_id, context_id="c1", tenant="",
               owner="", dialect="1.0", record=None)


def signals_of(run: Run) -> set:
    waited = {G.DECIDED: run.decided, G.SETTLED: run.settled, G.FINISHED: run.finished}
    return {signal for signal, event in waited.items() if event.is_set()}


def run_in(phase: RunPhase) -> Run:
    """A run brought to ``phase`` through its own calls (no executor runs)."""
    runtime = Runtime(MemoryStore(), lambda run: None)
    run = new_run(runtime)
    reply = Message(message_id="r", role=Role.AGENT, parts=[Part(text="pong")])
    if phase in (P.WORKING, P.SETTLED, P.ENDED):
        run.ensure_task()
    if phase is P.SETTLED:
        run.set_status(TaskState.INPUT_REQUIRED)
    if phase is P.REPLIED:
        run.set_reply(reply)
    if phase is P.UNSTARTED:
        run.fail_to_start(StoreUnavailable())
    if phase in (P.ENDED, P.ENDED_UNDECIDED):
        run.end()
    assert run.phase is phase
    return run


def test_the_run_table_has_a_row_for_every_phase():
    assert set(RUN_TABLE) == set(RunPhase) == set(RUN_EXPECTED) == set(SIGNALS)
    assert {phase: set(signals) for phase, signals in SIGNALS.items()} == SET_IN


@pytest.mark.parametrize("event", list(RunEvent), ids=lambda e: e.name)
@pytest.mark.parametrize("phase", list(RunPhase), ids=lambda p: p.name)
def test_every_run_move(phase: RunPhase, event: RunEvent) -> None:
    """Allowed moves land in the phase the row says, with exactly that phase's events
    set; refused ones raise and change nothing."""
    run = run_in(phase)
    assert signals_of(run) == SET_IN[phase]
    expected = RUN_EXPECTED[phase].get(event)
    if expected is None:
        with pytest.raises(LifecycleError, match=phase.name):
            run_move(phase, event)
        with pytest.raises(LifecycleError):
            with run._lock:
                run._move(event)
        assert run.phase is phase
        assert signals_of(run) == SET_IN[phase]
    else:
        assert run_move(phase, event) is expected
        with run._lock:
            run._move(event)
        assert run.phase is expected
        assert signals_of(run) == SET_IN[expected]


def test_a_run_on_an_existing_task_starts_working():
    runtime = Runtime(MemoryStore(), lambda run: None)
    record = new_run(runtime).ensure_task()
    follow_up = Run(runtime.writer, message=user("more"), task_id="t1", context_id="c1",
                    tenant="", owner="", dialect="1.0", record=record)
    assert follow_up.phase is P.WORKING
    assert signals_of(follow_up) == {G.DECIDED}


@pytest.fixture
def runtime_of() -> Iterator[Callable[[Any], Runtime]]:
    """Runtimes whose runs call an agent (an executor); their keepers stop after."""
    made: List[Runtime] = []

    def make(agent: Any) -> Runtime:
        made.append(Runtime(MemoryStore(), lambda run: invoke(agent, run)))
        return made[-1]

    yield make
    for runtime in made:
        runtime.close()


def started(runtime: Runtime) -> Run:
    return runtime.start_new(user(), task_id="t1", context_id="c1", tenant="", owner="",
                             dialect="1.0")


def test_a_blocking_run_moves_undecided_working_settled_ended(runtime_of):
    seen: List[RunPhase] = []
    go_on = threading.Event()

    def agent(ctx: Any) -> str:
        seen.append(ctx._run.phase)
        ctx.working()
        seen.append(ctx._run.phase)
        ctx.ask("name?")
        seen.append(ctx._run.phase)
        go_on.wait(5)
        return None

    runtime = runtime_of(agent)
    run = started(runtime)
    assert run.settled.wait(5)
    assert not run.finished.is_set()
    go_on.set()
    assert run.finished.wait(5)
    assert seen == [P.UNDECIDED, P.WORKING, P.SETTLED]
    assert run.phase is P.ENDED


def test_a_replying_run_moves_replied_then_ended(runtime_of):
    runtime = runtime_of(lambda ctx: Message(message_id="r", role=Role.AGENT,
                                             parts=[Part(text="pong")]))
    run = started(runtime)
    assert run.finished.wait(5)
    assert run.phase is P.ENDED
    assert run.reply is not None and run.record is None


def test_a_run_whose_store_is_down_moves_unstarted_then_ended(runtime_of):
    runtime = runtime_of(lambda ctx: "done")
    store = runtime.writer.store

    def down(*args: Any, **kwargs: Any) -> int:
        raise StoreUnavailable()

    store.create_with = down  # type: ignore[method-assign]
    run = started(runtime)
    assert run.finished.wait(5)
    assert run.phase is P.ENDED
    assert isinstance(run.error, StoreUnavailable)


def test_a_run_stopped_before_it_decided_ends_undecided_and_a_caller_decides_it(runtime_of):
    """An executor stopped before its first emission ends the run with no task and
    no reply: ``decided`` stays unset until a caller makes the task."""
    go_on = threading.Event()

    def agent(ctx: Any) -> None:
        go_on.wait(5)
        ctx.working()  # raises TaskCancelled: the run was stopped

    runtime = runtime_of(agent)
    run = started(runtime)
    run.request_stop(5.0)
    go_on.set()
    assert run.finished.wait(5)
    assert run.phase is P.ENDED_UNDECIDED
    assert not run.decided.is_set()
    assert run.ensure_task() is not None  # a returnImmediately send's, say
    assert run.phase is P.ENDED
    assert run.decided.is_set()
