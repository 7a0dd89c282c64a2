"""The task engine: apply_event, commits, runs, cancel, follow (the state machine's table: test_states.py)."""
from __future__ import annotations

import copy
import dataclasses
import itertools
import pickle
import threading
import time
from typing import List, Optional

import pytest

from a2a_flask.protocol.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from a2a_flask.engine.executor import invoke
from a2a_flask.protocol.models import (
    Artifact,
    Message,
    Part,
    PartList,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    utc_now,
)
from a2a_flask.engine.following import closes_stream
from a2a_flask.engine.run import Run, TaskCancelled
from a2a_flask.engine.runtime import Runtime
from a2a_flask.engine.states import TaskClosedError
from a2a_flask.protocol.calls import Wait
from a2a_flask.protocol.codec import encode
from a2a_flask.protocol.events import apply_event
from a2a_flask.protocol.jsontext import encode_text
from a2a_flask.stores import MemoryStore, ShelveStore
from a2a_flask.stores.base import SequenceConflict, TaskRecord
from a2a_flask.stores.frozen import freeze_task, thaw_task

from tests.support.helpers import user_message
from tests.support.wire import stream

S = TaskState
TERMINAL = [S.COMPLETED, S.FAILED, S.CANCELED, S.REJECTED]


# ----------------------------------------------------------------- helpers


def msg(text: str, role: Role = Role.AGENT, message_id: Optional[str] = None) -> Message:
    return Message(message_id=message_id or f"id-{text}", role=role, parts=[Part(text=text)],
                   task_id="t1", context_id="c1")


def task(state: TaskState = S.WORKING, *, message: Optional[Message] = None,
         history: Optional[List[Message]] = None, artifacts: Optional[List[Artifact]] = None) -> Task:
    return Task(id="t1", context_id="c1",
                status=TaskStatus(state=state, message=message, timestamp=utc_now()),
                history=list(history or []), artifacts=list(artifacts or []))


def status(state: TaskState, message: Optional[Message] = None) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent("t1", "c1", TaskStatus(state=state, message=message,
                                                         timestamp=utc_now()))


def chunk(artifact_id: str, text: str, *, append: bool = False,
          last_chunk: bool = False) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent("t1", "c1", Artifact(artifact_id=artifact_id, parts=[Part(text=text)]),
                                   append, last_chunk)


def texts(parts: List[Part]) -> List[str]:
    return [p.text for p in parts]


@pytest.fixture(params=["memory", "shelve"])
def store(request, tmp_path):
    made = MemoryStore() if request.param == "memory" else ShelveStore(str(tmp_path / "rt"))
    yield made
    made.close()


def new_run(runtime: Runtime, task_id: str = "t1") -> Run:
    message = msg("hello", Role.USER, "m-1")
    return Run(runtime.writer, message=message, task_id=task_id, context_id="c1", tenant="", owner="",
               dialect="1.0", record=None)


def wait_until(condition, timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.01)


def idle_runtime(store, **kwargs) -> Runtime:
    """A runtime whose executor does nothing (tests drive runs by hand)."""
    return Runtime(store, lambda run: None, **kwargs)


# ================================================================ apply_event


def test_status_update_moves_the_previous_status_message_into_history():
    question = msg("question?")
    before = task(S.INPUT_REQUIRED, message=question, history=[msg("hi", Role.USER)])
    after = apply_event(before, status(S.WORKING))
    assert after.status.state is S.WORKING
    assert after.status.message is None
    assert [m.parts[0].text for m in after.history] == ["hi", "question?"]


def test_status_update_without_a_previous_message_keeps_history():
    before = task(S.WORKING, history=[msg("hi", Role.USER)])
    after = apply_event(before, status(S.COMPLETED, msg("done")))
    assert after.history == before.history
    assert after.status.message.parts[0].text == "done"


def test_user_message_lands_after_the_agents_question():
    before = task(S.INPUT_REQUIRED, message=msg("question?"), history=[msg("hi", Role.USER)])
    answer = msg("answer", Role.USER)
    after = apply_event(before, answer)
    assert [m.parts[0].text for m in after.history] == ["hi", "question?", "answer"]
    after = apply_event(after, status(S.WORKING))
    assert [m.parts[0].text for m in after.history] == ["hi", "question?", "answer"]


def test_message_event_appends_to_history():
    before = task(history=[msg("one", Role.USER)])
    after = apply_event(before, msg("two", Role.USER))
    assert [m.parts[0].text for m in after.history] == ["one", "two"]


def test_appended_artifact_chunks_are_merged():
    current = task()
    for event in (chunk("a", "Hel"), chunk("a", "lo, ", append=True),
                  chunk("a", "world", append=True, last_chunk=True)):
        current = apply_event(current, event)
    assert len(current.artifacts) == 1
    assert current.artifacts[0].artifact_id == "a"
    assert texts(current.artifacts[0].parts) == ["Hel", "lo, ", "world"]


def test_a_long_streams_snapshot_keeps_plain_text_parts_as_their_text():
    """A long stream's parts stay in its task's snapshot while it runs: past
    COMPACT_PARTS, plain text parts (text and nothing else) are kept as strings,
    which Python's collector does not walk, so no part object of theirs stays
    alive.  A short artifact keeps a list.

    The chunks' own parts are watched (weak references), not every Part in the
    process: other tests' threads may still make and drop theirs meanwhile."""
    import gc
    import weakref

    from a2a_flask.protocol.events import COMPACT_PARTS, apply_events

    count = COMPACT_PARTS + 100
    start = current = task()
    watched = []
    for index in range(count):
        event = chunk("a", f"c{index}", append=index > 0)
        watched.append(weakref.ref(event.artifact.parts[0]))
        current = apply_event(current, event)
        if index + 1 == COMPACT_PARTS:
            assert type(current.artifacts[0].parts) is list
    del event
    assert isinstance(current.artifacts[0].parts, PartList)
    gc.collect()
    assert [ref for ref in watched if ref() is not None] == []
    assert texts(current.artifacts[0].parts) == [f"c{index}" for index in range(count)]
    events = [chunk("a", f"c{index}", append=index > 0) for index in range(count)]
    assert apply_events(start, events) == current


def test_a_part_list_behaves_as_a_list_of_the_parts_added():
    rich, data = Part(text="r", metadata={"k": 1}), Part(data={"x": [1]})
    as_list = [Part(text="one"), Part(text="two"), rich, data]
    current = task(artifacts=[Artifact("a", PartList(as_list[:1]))])
    for event in (chunk("a", "two", append=True),
                  TaskArtifactUpdateEvent("t1", "ctx", Artifact("a", [rich, data]), append=True)):
        current = apply_event(current, event)
    parts = current.artifacts[0].parts
    assert isinstance(parts, PartList) and len(parts) == 4
    assert parts == as_list and as_list == parts and parts == PartList(as_list)
    assert parts != as_list[:3] and parts != [Part(text="one", filename="f")] + as_list[1:]
    assert parts[2] is rich and parts[0] == Part(text="one") and parts[-1] == data
    assert parts[1:3] == [Part(text="two"), rich] and isinstance(parts[1:3], PartList)
    assert list(parts) == as_list and Part(text="two") in parts and parts.index(data) == 3
    assert [Part(text="zero")] + parts == [Part(text="zero")] + as_list
    assert (parts + [Part(text="end")])[-1] == Part(text="end") and len(parts) == 4
    changed = parts.copy()
    changed[0] = Part(text="ONE")
    changed.append(Part(text="five"))
    changed += [Part(raw=b"6")]
    changed.insert(1, Part(url="https://example.com/x"))
    del changed[2]
    assert texts(changed[:1]) == ["ONE"] and changed[1].url == "https://example.com/x"
    assert changed[2:] == [rich, data, Part(text="five"), Part(raw=b"6")]
    assert parts == as_list  # a copy changed, not the snapshot
    assert pickle.loads(pickle.dumps(parts)) == parts and copy.deepcopy(parts) == parts
    assert repr(parts).startswith("PartList([Part(text='one'")
    listed = dataclasses.replace(current.artifacts[0], parts=as_list)
    assert encode(current.artifacts[0]) == encode(listed)
    assert encode_text(current.artifacts[0]) == encode_text(listed)
    assert thaw_task(freeze_task(current)) == current


def test_artifact_without_append_replaces_the_one_with_the_same_id():
    current = apply_event(task(), chunk("a", "first"))
    current = apply_event(current, chunk("b", "other"))
    current = apply_event(current, chunk("a", "second"))
    assert [a.artifact_id for a in current.artifacts] == ["a", "b"]
    assert texts(current.artifacts[0].parts) == ["second"]


def test_chunks_of_different_artifacts_stay_apart():
    current = task()
    for event in (chunk("a", "a1"), chunk("b", "b1"), chunk("a", "a2", append=True),
                  chunk("b", "b2", append=True)):
        current = apply_event(current, event)
    assert [(a.artifact_id, texts(a.parts)) for a in current.artifacts] == [
        ("a", ["a1", "a2"]), ("b", ["b1", "b2"])]


@pytest.mark.parametrize("seed", range(40))
def test_apply_events_folds_as_apply_event_does_one_at_a_time(seed):
    """Runs of appended chunks join their artifact in one step; the snapshot is the one
    the events make one by one, whatever the mix (fixed seeds, so failures repeat)."""
    import random

    from a2a_flask.protocol.events import apply_events

    rng = random.Random(seed)
    events = []
    for number in range(rng.randint(0, 30)):
        kind = rng.random()
        if kind < 0.7:
            events.append(chunk(rng.choice("abc"), f"p{number}", append=rng.random() < 0.8))
        elif kind < 0.85:
            events.append(status(rng.choice([S.WORKING, S.INPUT_REQUIRED]), msg(f"s{number}")))
        else:
            events.append(msg(f"u{number}", Role.USER))
    start = task(artifacts=[Artifact(artifact_id="a", parts=[Part(text="old")])])
    one_by_one = start
    for event in events:
        one_by_one = apply_event(one_by_one, event)
    assert apply_events(start, events) == one_by_one
    assert texts(start.artifacts[0].parts) == ["old"]  # the input is left untouched


@pytest.mark.parametrize("seed", range(20))
def test_a_record_after_events_holds_the_task_they_make_whichever_branch_reads_it(seed):
    """``TaskRecord.after`` keeps chunks unfolded until its task is read; records
    that branch off one record (a stale writer, a retried append) each keep their
    own chunks, whatever was read before (fixed seeds, so failures repeat)."""
    import random

    rng = random.Random(seed)
    start = task(artifacts=[Artifact(artifact_id="a", parts=[Part(text="old")])])
    records = [(TaskRecord(start, 2, "acme", "alice"), start)]
    for number in range(60):
        record, expected = rng.choice(records[-3:])  # often a branch off an older record
        kind = rng.random()
        if kind < 0.8:
            events = [chunk(rng.choice("ab"), f"p{number}.{i}", append=rng.random() < 0.9)
                      for i in range(rng.randint(1, 3))]
        elif kind < 0.9:
            events = [status(rng.choice([S.WORKING, S.INPUT_REQUIRED]), msg(f"s{number}"))]
        else:
            events = [msg(f"u{number}", Role.USER)]
        for event in events:
            expected = apply_event(expected, event)
        after = record.after(events)
        assert (after.seq, after.tenant, after.owner) == (record.seq + len(events), "acme", "alice")
        assert after.outline.status == expected.status and after.state is expected.status.state
        assert after.outline.history == expected.history
        if rng.random() < 0.3:
            assert after.task == expected
        records.append((after, expected))
    for record, expected in records:
        assert record.task == expected
    assert texts(start.artifacts[0].parts) == ["old"]


def test_a_record_folds_its_chunks_once_when_its_task_is_first_read(monkeypatch):
    from a2a_flask.stores import base

    folds = []
    fold = base.apply_events
    monkeypatch.setattr(base, "apply_events", lambda t, e: folds.append(len(e)) or fold(t, e))
    record = TaskRecord(task(), 2)
    for number in range(500):
        record = record.after([chunk("a", str(number), append=number > 0)])
    assert folds == [] and record.state is S.WORKING  # 500 appends, nothing folded
    assert texts(record.task.artifacts[0].parts) == [str(n) for n in range(500)]
    assert folds == [500]
    assert record.task is record.task and folds == [500]  # kept
    done = record.after([chunk("a", "last", append=True), status(S.COMPLETED)])
    assert folds == [500, 2] and done.state is S.COMPLETED  # folded on from the last read
    assert texts(done.task.artifacts[0].parts)[-2:] == ["499", "last"]


def test_a_record_holds_a_bounded_number_of_chunks_unfolded(monkeypatch):
    """A fold does not yield: one of a whole long stream would hold a gevent worker."""
    from a2a_flask.stores import base

    folds = []
    fold = base.apply_events
    monkeypatch.setattr(base, "apply_events", lambda t, e: folds.append(len(e)) or fold(t, e))
    record = TaskRecord(task(), 2)
    for number in range(2 * base.MAX_UNFOLDED + 2):  # each chunk replaces the artifact
        record = record.after([chunk("a", str(number))])
    assert folds == [base.MAX_UNFOLDED + 1] * 2
    assert texts(record.task.artifacts[0].parts) == [str(2 * base.MAX_UNFOLDED + 1)]


def test_apply_event_leaves_the_input_task_untouched():
    before = task(S.INPUT_REQUIRED, message=msg("q"), history=[msg("hi", Role.USER)],
                  artifacts=[Artifact(artifact_id="a", parts=[Part(text="x")])])
    frozen = dataclasses.replace(before, history=list(before.history),
                                 artifacts=list(before.artifacts))
    apply_event(before, status(S.WORKING))
    apply_event(before, msg("answer", Role.USER))
    apply_event(before, chunk("a", "y", append=True))
    assert before == frozen
    assert texts(before.artifacts[0].parts) == ["x"]


def test_a_task_event_replaces_the_snapshot():
    replacement = task(S.COMPLETED)
    assert apply_event(task(), replacement) is replacement


def test_apply_event_refuses_other_objects():
    with pytest.raises(TypeError):
        apply_event(task(), "not an event")  # type: ignore[arg-type]


# ================================================================ closes_stream


@pytest.mark.parametrize("state", TERMINAL + [S.INPUT_REQUIRED])
def test_terminal_and_input_required_status_close_a_stream(state):
    assert closes_stream(status(state))


def test_working_status_and_artifacts_keep_a_stream_open():
    assert not closes_stream(status(S.WORKING))
    assert not closes_stream(chunk("a", "x", last_chunk=True))


def test_auth_required_closes_a_stream_only_when_configured():
    assert closes_stream(status(S.AUTH_REQUIRED))
    assert not closes_stream(status(S.AUTH_REQUIRED), close_on_auth_required=False)


def test_task_snapshot_closes_a_stream_only_when_terminal():
    assert not closes_stream(task(S.SUBMITTED))
    assert not closes_stream(task(S.INPUT_REQUIRED))
    assert closes_stream(task(S.COMPLETED))


def test_agent_message_closes_a_stream_and_user_message_does_not():
    assert closes_stream(msg("reply", Role.AGENT))
    assert not closes_stream(msg("turn", Role.USER))


# ================================================================ runs and commits


def test_run_creates_the_task_once_as_submitted_with_the_user_message(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    record = run.ensure_task()
    assert run.ensure_task() is record
    assert run.decided.is_set()
    loaded = store.load("t1")
    assert loaded.seq == 1 and loaded.state is S.SUBMITTED
    assert [m.message_id for m in loaded.task.history] == ["m-1"]


def test_terminal_task_refuses_every_further_change(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    run.set_status(S.WORKING)
    run.set_status(S.COMPLETED, msg("done"))
    seq = store.load("t1").seq
    for change in (lambda: run.set_status(S.WORKING), lambda: run.set_status(S.FAILED),
                   lambda: run.add_artifact(Artifact(artifact_id="a", parts=[Part(text="x")]))):
        with pytest.raises(TaskClosedError):
            change()
    record = store.load("t1")
    assert record.seq == seq and record.state is S.COMPLETED
    assert record.task.status.message.parts[0].text == "done"
    assert record.task.artifacts == []


def test_a_run_cannot_move_its_task_back_to_submitted(store):
    run = new_run(idle_runtime(store))
    with pytest.raises(ValueError):
        run.set_status(S.SUBMITTED)
    assert store.load("t1").seq == 1


def test_commit_retries_after_a_sequence_conflict(store):
    runtime = idle_runtime(store)
    new_run(runtime).ensure_task()
    calls = []

    def build(record: TaskRecord):
        calls.append(record.seq)
        if len(calls) == 1:  # someone else appends in between
            other = msg("sneaky", Role.USER)
            store.append("t1", record.seq, [other], record.after([other]))
        return [status(S.WORKING)]

    record = runtime.commit("t1", build)
    assert calls == [1, 2]
    assert record.seq == 3 and record.state is S.WORKING
    assert [e.seq for e in store.read("t1", 0)] == [1, 2, 3]
    assert [m.message_id for m in store.load("t1").task.history] == ["m-1", "id-sneaky"]


def test_a_run_appending_chunks_one_by_one_folds_them_only_now_and_then(store, monkeypatch):
    """Each chunk is its own append here (no gevent: appended at once).  The task's
    artifact is rebuilt only when the store stores a snapshot (at doubling
    lengths) or someone reads the task, not once per chunk: a chunk costs the
    same however long its artifact already is."""
    from a2a_flask.protocol import events as folding

    merges = []
    merge = folding._merge_artifact
    monkeypatch.setattr(folding, "_merge_artifact",
                        lambda artifacts, event: merges.append(1) or merge(artifacts, event))
    run = new_run(idle_runtime(store))
    run.set_status(S.WORKING)
    for number in range(1000):
        run.add_artifact(Artifact("a", [Part(text=str(number))]), append=number > 0)
    assert len(merges) <= 12, len(merges)  # one per stored snapshot; none on the memory store
    assert run.task is not None and len(run.task.artifacts[0].parts) == 1000
    run.finish()
    stored = store.load("t1")
    assert stored.state is S.COMPLETED
    assert texts(stored.task.artifacts[0].parts) == [str(n) for n in range(1000)]


def test_commit_from_a_stale_known_record_reloads_and_judges_again(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    stale = run.ensure_task()
    other = msg("sneaky", Role.USER)
    store.append("t1", 1, [other], stale.after([other]))  # another request
    seen = []

    def build(record: TaskRecord):
        seen.append(record.seq)
        return [status(S.WORKING)]

    record = runtime.commit("t1", build, stale)
    assert seen == [1, 2]  # the stale record's append conflicted; the stored one won
    assert record.seq == 3 and [m.message_id for m in record.task.history] == ["m-1", "id-sneaky"]
    # A run whose record is stale sees a cancel made elsewhere, not a stale "still working".
    cancel = status(S.CANCELED)
    store.append("t1", 3, [cancel], record.after([cancel]))
    with pytest.raises(TaskCancelled):
        run.add_artifact(Artifact(artifact_id="a", parts=[Part(text="x")]))
    assert store.load("t1").state is S.CANCELED and store.load("t1").seq == 4


def test_commit_on_a_missing_task_is_task_not_found(store):
    with pytest.raises(TaskNotFoundError):
        idle_runtime(store).commit("nope", lambda record: [])


def test_set_reply_before_any_task_answers_with_a_message(store):
    run = new_run(idle_runtime(store))
    run.set_reply(msg("pong"))
    assert run.decided.is_set()
    assert run.reply.context_id == "c1" and run.reply.task_id == ""
    assert store.load("t1") is None
    with pytest.raises(TaskClosedError):
        run.set_status(S.WORKING)
    assert store.load("t1") is None


def test_set_reply_after_a_task_exists_completes_it_with_the_message(store):
    run = new_run(idle_runtime(store))
    run.set_status(S.WORKING)
    run.set_reply(msg("pong"))
    assert run.reply is None
    record = store.load("t1")
    assert record.state is S.COMPLETED
    assert record.task.status.message.parts[0].text == "pong"


# ================================================================ runtime: executors, continue


def start(runtime: Runtime, task_id: str = "t1") -> Run:
    return runtime.start_new(msg("hello", Role.USER, "m-1"), task_id=task_id, context_id="c1",
                             tenant="", owner="", dialect="1.0")


def executor_runtime(store, fn, **kwargs) -> Runtime:
    return Runtime(store, lambda run: invoke(fn, run), **kwargs)


def test_start_new_runs_the_executor_detached_and_tracks_it(store):
    release = threading.Event()

    def fn(ctx):
        ctx.working()
        release.wait(5)
        return "done"

    runtime = executor_runtime(store, fn)
    run = start(runtime)
    assert run.decided.wait(3)
    assert runtime.local_run("t1") is run
    release.set()
    assert run.finished.wait(3)
    assert runtime.local_run("t1") is None
    assert store.load("t1").state is S.COMPLETED


def test_continue_a_terminal_task_is_unsupported(store):
    runtime = executor_runtime(store, lambda ctx: "done")
    run = start(runtime)
    assert run.finished.wait(3)
    record = store.load("t1")
    with pytest.raises(UnsupportedOperationError):
        runtime.continue_task(record, msg("more", Role.USER))
    assert store.load("t1").seq == record.seq


def test_continue_an_interrupted_task_resumes_working_in_one_step(store):
    calls = []

    def fn(ctx):
        calls.append((ctx.follow_up, ctx.text))
        if not ctx.follow_up:
            ctx.ask("name?")
            return None
        return "hi " + ctx.text

    runtime = executor_runtime(store, fn)
    assert start(runtime).finished.wait(3)
    record = store.load("t1")
    assert record.state is S.INPUT_REQUIRED
    updated = runtime.continue_task(record, msg("bob", Role.USER, "m-2"))
    assert updated.seq == record.seq + 2  # the message and WORKING, appended together
    assert updated.state is S.WORKING
    new_events = [e.event for e in store.read("t1", record.seq)]
    assert isinstance(new_events[0], Message) and new_events[0].message_id == "m-2"
    assert isinstance(new_events[1], TaskStatusUpdateEvent)
    final = runtime.wait_settled("t1", 3)
    assert final.state is S.COMPLETED
    assert calls == [(False, "hello"), (True, "bob")]


def test_continue_a_working_task_only_adds_the_message(store):
    release = threading.Event()
    seen = []

    def fn(ctx):
        ctx.working()
        release.wait(5)
        seen.append([m.message_id for m in ctx._run.writer.store.load(ctx.task_id).task.history])

    runtime = executor_runtime(store, fn)
    run = start(runtime)
    try:
        wait_until(lambda: store.load("t1") is not None and store.load("t1").state is S.WORKING)
        record = store.load("t1")
        updated = runtime.continue_task(record, msg("extra", Role.USER, "m-2"))
        assert updated.seq == record.seq + 1 and updated.state is S.WORKING
        assert runtime.local_run("t1") is run  # no second executor
    finally:
        release.set()
    assert run.finished.wait(3)
    assert seen == [["m-1", "m-2"]]


# ================================================================ cancel


def test_cancel_writes_canceled_at_once_and_flags_the_run(store):
    release = threading.Event()
    outcome = []

    def fn(ctx):
        ctx.working()
        release.wait(5)
        outcome.append(ctx.cancelled)
        try:
            ctx.working("after cancel")
        except TaskCancelled:
            outcome.append("TaskCancelled")
            raise

    runtime = executor_runtime(store, fn)
    run = start(runtime)
    wait_until(lambda: store.load("t1") is not None and store.load("t1").state is S.WORKING)
    record = runtime.cancel("t1")
    assert record.state is S.CANCELED
    assert run.cancel_requested
    release.set()
    assert run.finished.wait(3)
    assert outcome == [True, "TaskCancelled"]
    assert store.load("t1").state is S.CANCELED
    assert store.load("t1").seq == record.seq


def test_cancel_a_terminal_task_is_not_cancelable(store):
    runtime = executor_runtime(store, lambda ctx: None)
    assert start(runtime).finished.wait(3)
    with pytest.raises(TaskNotCancelableError):
        runtime.cancel("t1")
    assert store.load("t1").state is S.COMPLETED


def test_cancel_an_unknown_task_is_task_not_found(store):
    with pytest.raises(TaskNotFoundError):
        idle_runtime(store).cancel("nope")


def test_is_cancelled_notices_a_cancel_written_by_another_process(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    run.set_status(S.WORKING)
    other = idle_runtime(store)  # no local run there: only the store changes
    other.cancel("t1")
    assert not run.cancel_requested
    deadline = time.monotonic() + 2
    while not run.is_cancelled():
        assert time.monotonic() < deadline, "cancel never noticed"
        time.sleep(0.05)
    with pytest.raises(TaskCancelled):
        run.set_status(S.COMPLETED)


def test_emitting_to_a_task_canceled_elsewhere_raises_task_cancelled(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    run.set_status(S.WORKING)
    idle_runtime(store).cancel("t1")
    with pytest.raises(TaskCancelled):  # the commit sees CANCELED in the store
        run.add_artifact(Artifact(artifact_id="a", parts=[Part(text="x")]))
    assert store.load("t1").task.artifacts == []


# ================================================================ waiting and following


def test_wait_settled_returns_at_an_interrupted_state(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    run.set_status(S.WORKING)
    timer = threading.Timer(0.1, lambda: run.set_status(S.INPUT_REQUIRED, msg("q")))
    timer.start()
    started = time.monotonic()
    record = runtime.wait_settled("t1", 5)
    assert time.monotonic() - started < 3
    assert record.state is S.INPUT_REQUIRED
    timer.join()


def test_wait_settled_times_out_with_the_task_as_it_is(store):
    runtime = idle_runtime(store)
    new_run(runtime).set_status(S.WORKING)
    started = time.monotonic()
    record = runtime.wait_settled("t1", 0.2)
    assert 0.15 <= time.monotonic() - started < 2
    assert record.state is S.WORKING


def test_wait_settled_on_a_missing_task_is_task_not_found(store):
    with pytest.raises(TaskNotFoundError):
        idle_runtime(store).wait_settled("nope", 0.1)


def test_follow_yields_the_log_in_order_and_ends_at_a_terminal_state(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    run.set_status(S.WORKING)

    def finish():
        run.add_artifact(Artifact(artifact_id="a", parts=[Part(text="x")]))
        run.set_status(S.COMPLETED)

    timer = threading.Timer(0.1, finish)
    timer.start()
    entries = [e for e in runtime.follow("t1", 0, heartbeat=5) if e is not None]
    timer.join()
    assert [e.seq for e in entries] == [1, 2, 3, 4]
    assert isinstance(entries[0].event, Task)
    assert entries[-1].event.status.state is S.COMPLETED


def test_follow_reads_a_long_log_slice_by_slice(store):
    store.read_slice = 2
    runtime = idle_runtime(store)
    run = new_run(runtime)
    run.set_status(S.WORKING)
    for index in range(5):
        run.add_artifact(Artifact(artifact_id=f"a{index}", parts=[Part(text="x")]))
    run.set_status(S.COMPLETED)
    entries = [e for e in runtime.follow("t1", 1, heartbeat=5) if e is not None]
    assert [e.seq for e in entries] == list(range(2, 9))
    assert entries[-1].event.status.state is S.COMPLETED


def test_follow_sends_heartbeats_while_idle_and_stops_at_input_required(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    run.set_status(S.WORKING)
    items = []
    # The question comes once the follower has sent two heartbeats, however late.
    for item in runtime.follow("t1", 2, heartbeat=0.1):
        items.append(item)
        if items.count(None) == 2:
            run.set_status(S.INPUT_REQUIRED, msg("q"))
    assert items.count(None) >= 2
    assert [i.seq for i in items if i is not None] == [3]


def test_follow_of_a_fully_read_terminal_task_ends_at_once(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    run.set_status(S.COMPLETED)
    started = time.monotonic()
    assert list(runtime.follow("t1", 2, heartbeat=5)) == []
    assert time.monotonic() - started < 1


def test_follow_can_leave_its_waits_to_the_consumer(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    run.set_status(S.WORKING)
    items = runtime.follow("t1", 2, heartbeat=5, park_outside=True)
    parked = next(items)
    assert isinstance(parked, Wait) and not parked.done
    timer = threading.Timer(0.1, lambda: run.set_status(S.COMPLETED))
    timer.start()
    parked.wait()  # the consumer blocks here, until the update wakes it
    assert parked.done
    assert [i.seq for i in items if i is not None and not isinstance(i, Wait)] == [3]
    timer.join()


def test_a_wait_the_consumer_skips_is_made_by_the_stream_itself(store):
    runtime = idle_runtime(store)
    run = new_run(runtime)
    run.set_status(S.WORKING)
    timer = threading.Timer(0.3, lambda: run.set_status(S.COMPLETED))
    timer.start()
    items = list(runtime.follow("t1", 2, heartbeat=5, park_outside=True))
    timer.join()
    waits = [i for i in items if isinstance(i, Wait)]
    # It blocked by itself (a few wake-ups at most), it did not spin through waits.
    assert 1 <= len(waits) <= 5 and all(w.done for w in waits)
    assert [i.seq for i in items if i is not None and not isinstance(i, Wait)] == [3]


def test_store_append_conflict_is_reported(store):
    runtime = idle_runtime(store)
    new_run(runtime).ensure_task()
    record = store.load("t1")
    store.append("t1", 1, [status(S.WORKING)], record.after([status(S.WORKING)]))
    with pytest.raises(SequenceConflict):
        store.append("t1", 1, [status(S.FAILED)], record.after([status(S.FAILED)]))


def test_status_timestamps_never_go_backwards_even_for_the_first_update(make_app, monkeypatch):
    ticks = itertools.count()
    monkeypatch.setattr("a2a_flask.engine.run.utc_now",
                        lambda: "2026-01-01T00:00:%02d.000Z" % next(ticks))

    def agent(ctx):
        ctx.working("on it")
        ctx.complete()

    client = make_app(agent).test_client()
    stamps = []
    for event in stream(client, "SendStreamingMessage", {"message": user_message("hi")}):
        result = event["data"]["result"]
        status = (result.get("task") or result.get("statusUpdate") or {}).get("status")
        if status:
            stamps.append(status["timestamp"])
    assert len(stamps) == 3
    assert stamps == sorted(stamps), stamps
