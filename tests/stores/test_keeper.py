"""The runtime's keeper: orphaned tasks fail, remote cancels stop runs, old tasks go."""
from __future__ import annotations

import threading
import time

import pytest

from a2a_flask.protocol.models import Message, Part, Role, Task, TaskState, TaskStatus, utc_now
from a2a_flask.engine.runtime import Runtime
from a2a_flask.stores import open_store
from a2a_flask.stores.base import TaskRecord, scoped

from tests.support.helpers import wait_until
from tests.stores.test_stores import append, create, status_event


@pytest.fixture
def shared(store_url):
    """One store opened twice, as two worker processes would."""
    first, second = open_store(store_url), open_store(store_url)
    yield first, second
    for store in (first, second):
        store.close()


def runtime_on(store, invoke=lambda run: None, **options) -> Runtime:
    return Runtime(store, invoke, cancel_grace=0.2, **options)


def working_task(store, task_id: str) -> None:
    task = Task(id=task_id, context_id="ctx",
                status=TaskStatus(state=TaskState.WORKING, timestamp=utc_now()),
                history=[Message(message_id="m", role=Role.USER, parts=[Part(text="hi")])])
    store.create(TaskRecord(task, 1), task)


@pytest.mark.no_memory_store("one process: the memory store has no other runner to lose")
def test_a_task_whose_runner_stopped_renewing_fails_with_a_message(shared):
    dead_store, live_store = shared
    working_task(dead_store, "orphan")
    dead_store.acquire_lease("orphan", "dead-worker", 0.1)  # then the worker dies
    time.sleep(0.3)
    survivor = runtime_on(live_store)
    survivor.keeper.name = lambda: "live-worker"  # type: ignore[assignment]
    survivor.keeper.tend()
    record = live_store.load("orphan")
    assert record.state is TaskState.FAILED
    assert "lease expired" in record.task.status.message.parts[0].text
    assert live_store.expired_leases() == []
    survivor.keeper.tend()  # a second round changes nothing
    assert live_store.load("orphan").seq == record.seq


def test_a_live_runner_keeps_its_lease(make_app, store_url):
    """The keeper renews the lease of a run for as long as it runs: two lifetimes
    after the start (and several renewals), no lease has expired."""
    release = threading.Event()

    def slow(ctx):
        release.wait(30)
        return "done"

    # The keeper renews every third of the lease (1 s here): long enough that a busy
    # machine holding the keeper's thread back a while cannot expire a live lease.
    ttl = 3.0
    app = make_app(slow, store=store_url, lease_ttl=ttl)
    state = app.extensions["a2a"]["a2a"]
    renewals = []
    renew = state.store.renew_leases

    def counted(owner, task_ids, seconds):
        renew(owner, task_ids, seconds)
        renewals.extend(task_ids)

    state.store.renew_leases = counted
    client = app.test_client()
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": {"messageId": "m", "role": "ROLE_USER",
                                   "parts": [{"text": "x"}]},
                       "configuration": {"returnImmediately": True}}}
    started = time.monotonic()
    task_id = client.post("/a2a", json=body, headers={"A2A-Version": "1.0"}
                          ).get_json()["result"]["task"]["id"]
    wait_until(lambda: renewals.count(task_id) >= 3 and time.monotonic() - started > 2 * ttl,
               30, "two lease lifetimes and three renewals")
    assert state.store.expired_leases() == []
    assert state.store.load(task_id).state is not TaskState.FAILED
    release.set()
    wait_until(lambda: state.store.load(task_id).state is TaskState.COMPLETED, 15,
               "the task to complete")


@pytest.mark.no_memory_store("one process: the memory store is not shared")
def test_a_cancel_from_another_process_stops_the_run_here(shared):
    here_store, there_store = shared
    started, stopped = threading.Event(), threading.Event()

    def stubborn(ctx):
        started.set()
        while not ctx.cancelled:  # only the keeper can tell it, nothing here cancels
            time.sleep(0.02)
        stopped.set()

    from a2a_flask.engine.executor import invoke

    here = runtime_on(here_store, lambda run: invoke(stubborn, run))
    here.keeper.ensure = lambda: None  # type: ignore[method-assign]  (we call tend ourselves)
    message = Message(message_id="m", role=Role.USER, parts=[Part(text="x")])
    run = here.start_new(message, task_id="remote", context_id="ctx", tenant="", owner="",
                         dialect="1.0", create_task=True)
    assert started.wait(5)
    runtime_on(there_store).cancel("remote")
    run.is_cancelled = lambda: run.cancel_requested  # type: ignore[method-assign]
    here.keeper.tend()
    assert run.cancel_requested
    assert stopped.wait(5)
    assert here_store.load("remote").state is TaskState.CANCELED
    here.close()


@pytest.mark.no_memory_store("the memory store's head is its record: no fold to spare")
def test_a_keeper_round_reads_running_tasks_heads_not_their_records(store_url):
    """A load from an append-only store folds a long stream's recent chunks, and the
    keeper looks at every running task every second: it asks for the head (sequence
    number and state)."""
    store = open_store(store_url)
    release = threading.Event()
    here = runtime_on(store, lambda run: (run.set_status(TaskState.WORKING), release.wait(5)))
    here.keeper.ensure = lambda: None  # type: ignore[method-assign]  (we call tend ourselves)
    message = Message(message_id="m", role=Role.USER, parts=[Part(text="x")])
    here.start_new(message, task_id="running", context_id="ctx", tenant="", owner="",
                   dialect="1.0", create_task=True)
    wait_until(lambda: store.head("running")[1] is TaskState.WORKING, 15, "the run to start")
    loads = []
    store.load = lambda task_id: loads.append(task_id)  # type: ignore[method-assign]
    try:
        here.keeper.tend()
    finally:
        release.set()
        del store.load
    assert loads == []
    here.close()
    store.close()


def test_a_task_ttl_of_zero_keeps_finished_tasks_forever(store_url):
    """A2A_TASK_TTL=0: a task finished in 2025 outlives purge rounds; the same
    rounds under a TTL purge it (the store could)."""
    store = open_store(store_url)
    try:
        create(store, "ancient", second=1)
        append(store, "ancient", [status_event("ancient", TaskState.COMPLETED, second=2)])
        forever = runtime_on(store, task_ttl=0)
        for _ in range(2):
            forever.keeper._last_purge = 0.0  # would be a purge round, if there were a TTL
            forever.keeper.tend()
        assert store.load("ancient") is not None
        purging = runtime_on(store, task_ttl=60)
        purging.keeper._last_purge = 0.0
        purging.keeper.tend()
        assert store.load("ancient") is None
    finally:
        store.close()


def test_tend_purges_finished_tasks_older_than_the_ttl(shared):
    store, _ = shared
    working_task(store, "old")
    runtime = runtime_on(store, task_ttl=2.0)
    canceled_at = time.monotonic()
    runtime.cancel("old")
    runtime.keeper.tend()  # too young
    assert store.load("old") is not None

    def purged() -> bool:
        runtime.keeper._last_purge = 0.0  # the next round is a purge round
        runtime.keeper.tend()
        return store.load("old") is None

    wait_until(purged, 30, "the purge of the finished task")
    assert time.monotonic() - canceled_at >= 1.5  # not before it was (about) the TTL old


def test_an_agents_ttl_purges_only_its_own_tasks():
    """Agents sharing a store keep their own retention: the keeper of the agent with
    scope ``x`` purges x's finished tasks, not those of ``y`` nor of the default agent."""
    store = open_store("memory://")
    try:
        for task_id, tenant in (("of-x", scoped("x", "")), ("of-y", scoped("y", "")),
                                ("of-default", "")):
            create(store, task_id, second=1, tenant=tenant)
            append(store, task_id, [status_event(task_id, TaskState.COMPLETED, second=2)])
        keeper = runtime_on(store, task_ttl=60, scope="x").keeper
        keeper._last_purge = 0.0  # the next round is a purge round
        keeper.tend()
        assert [store.load(t) is None for t in ("of-x", "of-y", "of-default")] == \
            [True, False, False]
    finally:
        store.close()


# -- when a run takes its lease

LEASE_AND_WRITES = ("acquire_lease", "release_lease", "create", "create_with", "append",
                    "append_released")


def store_calls(store) -> list:
    """The names of ``store``'s lease and write calls from now on, in order (a store's
    default ``create_with`` shows as the calls it stands for, inside its own)."""
    calls: list = []
    for name in LEASE_AND_WRITES:
        method = getattr(store, name)

        def recorded(*args, _name=name, _method=method, **kwargs):
            calls.append(_name)
            return _method(*args, **kwargs)

        setattr(store, name, recorded)
    return calls


def running(store, agent) -> Runtime:
    """A runtime on ``store`` whose runs call ``agent`` (an executor)."""
    from a2a_flask.engine.executor import invoke

    return runtime_on(store, lambda run: invoke(agent, run))


def start(runtime, task_id: str):
    message = Message(message_id=f"m-{task_id}", role=Role.USER, parts=[Part(text="x")])
    return runtime.start_new(message, task_id=task_id, context_id="ctx", tenant="",
                             owner="", dialect="1.0")


def ended(runtime, run) -> None:
    wait_until(lambda: run.finished.is_set() and runtime.keeper.run_here(run.task_id) is None,
               15, "the run to end and let its lease go")


def test_a_new_task_the_agent_finishes_at_once_is_one_write_and_no_lease(store_url):
    """A blocking send's whole run: the task is made finished, in one store call,
    and no lease is ever taken or released for it (the store had just answered)."""
    store = open_store(store_url)
    runtime = running(store, lambda ctx: "done")
    try:
        store.load("warm-up")  # an answer: the store is up
        calls = store_calls(store)
        run = start(runtime, "quick")
        ended(runtime, run)
        assert store.load("quick").state is TaskState.COMPLETED
        assert calls[0] == "create_with"
        assert "acquire_lease" not in calls and "release_lease" not in calls
        assert store.expired_leases() == []
    finally:
        runtime.close()
        store.close()


def test_a_new_task_that_goes_on_running_has_its_lease_before_it_is_stored(store_url):
    """The first write of a run that leaves its task running takes the deferred lease
    first, the keeper renews it, and the last write lets it go."""
    release = threading.Event()

    def working(ctx):
        ctx.working("on it")
        release.wait(15)
        return "done"

    store = open_store(store_url)
    runtime = running(store, working)
    runtime.keeper.ensure = lambda: None  # type: ignore[method-assign]  (we call tend)
    try:
        store.load("warm-up")
        calls = store_calls(store)
        renewed: list = []
        renew = store.renew_leases
        store.renew_leases = lambda owner, ids, ttl: (renewed.extend(ids), renew(owner, ids, ttl))
        run = start(runtime, "long")
        wait_until(lambda: run.record is not None, 15, "the task to be made")
        assert calls[0] == "acquire_lease"
        assert calls[1] in ("create_with", "create")
        runtime.keeper.tend()
        assert renewed == ["long"]
        release.set()
        ended(runtime, run)
        assert store.load("long").state is TaskState.COMPLETED
        assert calls.count("acquire_lease") == 1
        assert "append_released" in calls or calls[-1] == "release_lease"
    finally:
        release.set()
        runtime.close()
        store.close()


def test_a_task_made_before_the_agent_answers_has_its_lease_first(store_url):
    """``returnImmediately`` (and a webhook) make the task before the agent's first
    emission: that write takes the deferred lease too."""
    release = threading.Event()
    store = open_store(store_url)
    runtime = running(store, lambda ctx: release.wait(15) and "done")
    try:
        store.load("warm-up")
        calls = store_calls(store)
        run = start(runtime, "early")
        assert run.ensure_task() is not None
        assert calls[:2] == ["acquire_lease", "create"]
        release.set()
        ended(runtime, run)
        assert store.load("early").state is TaskState.COMPLETED
    finally:
        release.set()
        runtime.close()
        store.close()


def test_a_store_that_has_not_answered_lately_is_leased_before_the_agent_runs(store_url):
    """A store not known to be up (no answer within ANSWERED_WITHIN, or an outage
    since) gets the lease call first: if it is down the caller hears it and the
    agent's code never runs."""
    from a2a_flask.protocol.errors import StoreUnavailable

    ran = threading.Event()
    store = open_store(store_url)
    runtime = running(store, lambda ctx: ran.set() or "done")
    try:
        store.answering = lambda within: False  # type: ignore[method-assign]
        calls = store_calls(store)
        run = start(runtime, "careful")
        ended(runtime, run)
        assert calls[0] == "acquire_lease"
        assert store.load("careful").state is TaskState.COMPLETED

        def down(*args):
            raise StoreUnavailable()

        store.acquire_lease = down  # type: ignore[method-assign]
        ran.clear()
        with pytest.raises(StoreUnavailable):
            start(runtime, "refused")
        assert not ran.wait(0.2)
    finally:
        runtime.close()
        store.close()


def test_a_run_that_answers_with_a_message_takes_and_releases_no_lease(store_url):
    store = open_store(store_url)
    runtime = running(store, lambda ctx: Message(message_id="r", role=Role.AGENT,
                                                 parts=[Part(text="hi")]))
    try:
        store.load("warm-up")
        calls = store_calls(store)
        run = start(runtime, "reply")
        ended(runtime, run)
        assert run.reply is not None
        assert calls == []
    finally:
        runtime.close()
        store.close()
