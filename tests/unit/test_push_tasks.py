"""0.3 webhooks, which are pushed the whole task: one push stands for a burst of
events, and the bytes pushed grow linearly with the events (docs/internals.rst, invariant 10).

A push per event costs the task's size per event: 100 streamed chunks posted
287 KB to a 0.3 webhook and 400 chunks 3.7 MB, where a 1.0 webhook got 22 KB
and 84 KB.  These tests drive the dispatcher over a store whose log grows by
one event each time the drain waits for news, so that the webhook is never
behind: the case where coalescing alone would send one push per event.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Dict, List

import pytest

from a2a_flask.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    new_id,
)
from a2a_flask.push.delivery import TASK_PUSH_RATIO, RetryPolicy
from a2a_flask.push.transport import WebhookResponse
from a2a_flask.stores import MemoryStore
from a2a_flask.stores.base import Event, PushTarget, TaskRecord

from tests.support.helpers import WebhookReceiver
from tests.support.wire import rpc
from tests.web.test_push import FAST, PUSH, V03, _dispatcher, _RecordingTransport, result

TASK = "t1"


class _Story:
    """A task's log written step by step, each record the fold of the one before."""

    def __init__(self, store: MemoryStore, state: TaskState = TaskState.SUBMITTED) -> None:
        self.store = store
        task = Task(id=TASK, context_id="c", status=TaskStatus(state=state))
        self.record = TaskRecord(task, 1)
        store.create(self.record, task)

    def append(self, *events: Event) -> None:
        after = self.record.after(list(events))
        self.store.append(TASK, self.record.seq, list(events), after)
        self.record = after


def status(state: TaskState) -> TaskStatusUpdateEvent:
    return TaskStatusUpdateEvent(TASK, "c", TaskStatus(state=state))


def chunk(i: int) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent(TASK, "c", Artifact(artifact_id="a", parts=[
        Part(text=f"chunk number {i} ")]), append=i > 0)


def user_turn(text: str) -> Message:
    return Message(role=Role.USER, parts=[Part(text=text)], message_id=f"m-{text}",
                   task_id=TASK, context_id="c")


class _Paced(MemoryStore):
    """A store whose log grows by one step whenever a drain waits for news."""

    def __init__(self) -> None:
        super().__init__()
        self.steps: List[Callable[[], None]] = []

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        if self.steps:
            self.steps.pop(0)()


def _watch(store: MemoryStore, dialect: str, cursor: int = 0) -> None:
    store.put_push_target(TASK, PushTarget(TaskPushNotificationConfig(
        url="http://hooks.test/h", id="cfg", task_id=TASK), dialect=dialect,
        delivered_seq=cursor))


def _paced_stream(chunks: int, dialect: str) -> List[bytes]:
    """The bodies one webhook gets for a task that streams ``chunks`` chunks, one
    event per drain round (the webhook never falls behind)."""
    store = _Paced()
    story = _Story(store)
    _watch(store, dialect)
    store.steps = ([lambda: story.append(status(TaskState.WORKING))]
                   + [lambda i=i: story.append(chunk(i)) for i in range(chunks)]
                   + [lambda: story.append(status(TaskState.COMPLETED))])
    transport = _RecordingTransport()
    _dispatcher(store, transport, claim_ttl=5.0)._drain(TASK)
    assert not store.steps
    assert store.push_targets(TASK)[0].delivered_seq == chunks + 3
    return transport.bodies


def _text(body: bytes) -> str:
    task = json.loads(body)
    return "".join(part["text"] for artifact in task.get("artifacts", [])
                   for part in artifact["parts"])


def test_bytes_pushed_to_a_03_webhook_grow_linearly_with_the_stream():
    sizes: Dict[Any, int] = {}
    for chunks in (100, 400):
        v1 = _paced_stream(chunks, "1.0")
        v03 = _paced_stream(chunks, "0.3")
        assert len(v1) == chunks + 3  # 1.0: a push per event, as before
        sizes["1.0", chunks] = sum(map(len, v1))
        sizes["0.3", chunks] = total = sum(map(len, v03))
        last = json.loads(v03[-1])
        assert last["status"]["state"] == "completed"
        assert _text(v03[-1]) == "".join(f"chunk number {i} " for i in range(chunks))
        # What the events paid for, plus the settled state's push and one overshoot.
        assert total <= TASK_PUSH_RATIO * sizes["1.0", chunks] + 2 * len(v03[-1])
    assert sizes["0.3", 400] <= 4.5 * sizes["0.3", 100] + 10_000, sizes
    # A push per event would post 3.7 MB for 400 chunks.
    assert sizes["0.3", 400] < 250_000, sizes


def test_a_03_webhook_that_keeps_up_sees_the_task_grow_in_order():
    bodies = _paced_stream(40, "0.3")
    tasks = [json.loads(body) for body in bodies]
    order = ["submitted", "working", "completed"]
    states = [task["status"]["state"] for task in tasks]
    assert states == sorted(states, key=order.index)
    assert states[0] == "submitted" and states[-1] == "completed"
    texts = [_text(body) for body in bodies]
    assert all(later.startswith(earlier) for earlier, later in zip(texts, texts[1:]))
    assert len(set(texts[2:-1])) == len(texts[2:-1])  # each push shows something new
    # A short task is pushed event by event; the pushes thin out as it grows.
    assert texts[2:5] == ["chunk number 0 ", "chunk number 0 chunk number 1 ",
                          "chunk number 0 chunk number 1 chunk number 2 "]
    assert len(bodies) < 40


def test_a_03_webhook_that_is_behind_gets_one_push_for_the_burst():
    store = MemoryStore()
    store.read_slice = 4  # the burst is read in slices
    story = _Story(store)
    story.append(status(TaskState.WORKING))
    for i in range(12):
        story.append(chunk(i))
    story.append(status(TaskState.COMPLETED))
    _watch(store, "0.3")
    transport = _RecordingTransport()
    _dispatcher(store, transport, claim_ttl=1.0)._drain(TASK)
    assert len(transport.bodies) == 1
    assert json.loads(transport.bodies[0])["status"]["state"] == "completed"
    assert _text(transport.bodies[0]) == "".join(f"chunk number {i} " for i in range(12))
    assert store.push_targets(TASK)[0].delivered_seq == 15


def test_a_settled_state_is_always_pushed_and_a_user_turn_alone_is_not():
    """input-required is pushed at once however little the events since paid; the
    user's answer alone (no status yet) moves the cursor without a push."""
    store = _Paced()
    story = _Story(store, TaskState.WORKING)
    _watch(store, "0.3")
    many = 60
    store.steps = ([lambda i=i: story.append(chunk(i)) for i in range(many)]
                   + [lambda: story.append(status(TaskState.INPUT_REQUIRED))])
    transport = _RecordingTransport()
    _dispatcher(store, transport, claim_ttl=5.0)._drain(TASK)  # ends: the task waits
    assert json.loads(transport.bodies[-1])["status"]["state"] == "input-required"
    assert store.push_targets(TASK)[0].delivered_seq == many + 2
    pushed = len(transport.bodies)
    # The answer starts a new drain (as a continuation kicks one).
    story.append(user_turn("Paris"), status(TaskState.WORKING))
    cursors: List[int] = []
    store.steps = [lambda: story.append(user_turn("and Oslo")),
                   lambda: (cursors.append(store.push_targets(TASK)[0].delivered_seq),
                            story.append(status(TaskState.COMPLETED)))]
    _dispatcher(store, transport, claim_ttl=5.0)._drain(TASK)
    assert cursors == [many + 5]  # past the user's turn, with no push for it
    states = [json.loads(body)["status"]["state"] for body in transport.bodies[pushed:]]
    assert states == ["working", "completed"]
    assert store.push_targets(TASK)[0].delivered_seq == many + 6
    history = json.loads(transport.bodies[-1])["history"]
    assert [m["parts"][0]["text"] for m in history] == ["Paris", "and Oslo"]


class _FailingFirst(_RecordingTransport):
    """Answers the first push 500, then 200."""

    def post(self, url: str, body: bytes, headers: Any) -> WebhookResponse:
        if not self.bodies:
            self.bodies.append(body)
            return WebhookResponse(500, "Server Error", b"", 0.0)
        return super().post(url, body, headers)


def test_a_failed_03_push_is_retried_with_the_latest_task():
    store = _Paced()
    story = _Story(store)
    _watch(store, "0.3")
    transport = _FailingFirst()
    dispatcher = _dispatcher(store, transport, claim_ttl=5.0)
    dispatcher.retry = RetryPolicy(max_attempts=3, base_delay=0.01, max_delay=0.02)
    # While the first push waits for its retry, the task goes on and completes.
    store.steps = [lambda: story.append(status(TaskState.WORKING), chunk(0)),
                   lambda: story.append(status(TaskState.COMPLETED))]
    dispatcher._drain(TASK)
    states = [json.loads(body)["status"]["state"] for body in transport.bodies]
    assert states[0] == "submitted" and states[-1] == "completed"
    target = store.push_targets(TASK)[0]
    assert (target.delivered_seq, target.failures, target.gave_up) == (4, 0, False)


@pytest.mark.parametrize("dialect", ["1.0", "0.3"])
def test_a_webhook_registered_midway_gets_what_happens_from_then_on(dialect):
    store = _Paced()
    story = _Story(store, TaskState.WORKING)
    for i in range(5):
        story.append(chunk(i))
    _watch(store, dialect, cursor=story.record.seq)
    store.steps = [lambda: story.append(chunk(5)),
                   lambda: story.append(status(TaskState.COMPLETED))]
    transport = _RecordingTransport()
    _dispatcher(store, transport, claim_ttl=5.0)._drain(TASK)
    assert len(transport.bodies) == 2
    if dialect == "0.3":
        assert _text(transport.bodies[0]).endswith("chunk number 5 ")
        assert json.loads(transport.bodies[1])["status"]["state"] == "completed"


# ---------------------------------------------------------------- end to end


def test_a_03_push_carries_the_history_cut_to_max_history(make_app):
    """The push is the stored task, whose history the runtime keeps to
    A2A_MAX_HISTORY messages (a fold of the whole log kept every turn)."""
    turns: List[str] = []

    def asker(ctx):
        turns.append(ctx.text)  # the history itself keeps two messages
        if len(turns) < 4:
            ctx.ask(f"and then? ({len(turns)})")
        else:
            ctx.complete("that is all")

    with WebhookReceiver() as receiver:
        client = make_app(asker, **PUSH, **FAST, max_history=2).test_client()
        task_id = ""
        for turn in range(4):
            params: Dict[str, Any] = {"message": {
                "kind": "message", "role": "user", "messageId": new_id(),
                "parts": [{"kind": "text", "text": f"turn {turn}"}]}}
            if task_id:
                params["message"]["taskId"] = task_id
            else:
                params["configuration"] = {"pushNotificationConfig": {"url": receiver.hook()}}
            task_id = result(rpc(client, "message/send", params, headers=V03))["id"]
        pushes = receiver.wait_for(lambda got: any(
            p["json"]["status"]["state"] == "completed" for p in got))
    for push in pushes:
        assert len(push["json"].get("history", [])) <= 2, push["json"]
    assert pushes[-1]["json"]["history"][-1]["parts"][0]["text"] == "turn 3"
