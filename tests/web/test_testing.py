"""a2a_flask.testing: the client wired to an app in-process, for users' own tests."""
from __future__ import annotations

import threading
import time

import pytest

from a2a_flask import AgentCapabilities, TaskState
from a2a_flask.protocol import models as m
from a2a_flask.client import TaskNotFoundError, UnsupportedOperationError, artifact_text
from a2a_flask.testing import A2ATestClient

from tests.conftest import make_card

pytestmark = pytest.mark.timeout(30)


def storyteller(ctx):
    ctx.working("thinking")
    for word in ctx.text.split():
        yield word + " "


def test_send_returns_the_task(make_app):
    agent = A2ATestClient(make_app())
    task = agent.send("hello")
    assert task.status.state is TaskState.COMPLETED
    assert artifact_text(task.artifacts[0]) == "hello"
    assert agent.card.name == "Test agent"
    assert agent.get_task(task.id).id == task.id


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_stream_yields_parsed_typed_events(make_app, binding):
    agent = A2ATestClient(make_app(storyteller), binding=binding)
    events = list(agent.stream("once upon a time"))
    assert isinstance(events[0], m.Task)
    assert [e.status.state for e in events if isinstance(e, m.TaskStatusUpdateEvent)] == \
        [TaskState.WORKING, TaskState.COMPLETED]
    text = "".join(artifact_text(e.artifact) for e in events
                   if isinstance(e, m.TaskArtifactUpdateEvent))
    assert text == "once upon a time "


def test_the_stream_arrives_while_the_task_runs(make_app):
    """Streams are not buffered: the first event is there before the task finishes."""
    gate = threading.Event()

    def gated(ctx):
        ctx.working("waiting for the gate")
        gate.wait(5)
        return "done"

    agent = A2ATestClient(make_app(gated))
    with agent.stream("go") as events:
        first = next(events)
        assert isinstance(first, m.Task)
        working = next(events)
        assert working.status.state is TaskState.WORKING
        assert agent.get_task(first.id).status.state is TaskState.WORKING
        gate.set()
        assert [e for e in events][-1].status.state is TaskState.COMPLETED


def test_wait_for_list_and_cancel(make_app):
    release = threading.Event()

    def slow(ctx):
        ctx.working("busy")
        while not (release.is_set() or ctx.cancelled):
            time.sleep(0.01)
        return "finished"

    agent = A2ATestClient(make_app(slow))
    first = agent.send("one", return_immediately=True)
    agent.wait_for(first.id, "working")
    second = agent.send("two", return_immediately=True)
    assert agent.wait_for(second.id, TaskState.WORKING).status.state is TaskState.WORKING
    listed = agent.list_tasks(state="working")
    assert {t.id for t in listed.tasks} == {first.id, second.id}
    assert agent.cancel(second.id).status.state is TaskState.CANCELED
    with pytest.raises(TimeoutError, match="WORKING after 0.1s"):
        agent.wait_for(first.id, "completed", timeout=0.1)
    release.set()
    assert agent.wait_for(first.id).status.state is TaskState.COMPLETED


def test_errors_are_the_clients_typed_errors(make_app):
    agent = A2ATestClient(make_app(card=make_card(capabilities=AgentCapabilities(streaming=False))))
    with pytest.raises(TaskNotFoundError):
        agent.get_task("missing")
    with pytest.raises(UnsupportedOperationError):
        list(agent.stream("no streaming here"))


def test_a_named_agent_under_its_own_prefix(make_app):
    from flask import Flask

    from a2a_flask import A2A

    app = Flask("two_agents")
    A2A(app, card=make_card(name="First"), executor=lambda ctx: "first")
    A2A(app, card=make_card(name="Second"), executor=lambda ctx: "second", name="second",
        url_prefix="/second")
    try:
        second = A2ATestClient(app, "second")
        assert second.card.name == "Second"
        assert artifact_text(second.send("hi").artifacts[0]) == "second"
        assert artifact_text(A2ATestClient(app).send("hi").artifacts[0]) == "first"
        with pytest.raises(LookupError, match="third"):
            A2ATestClient(app, "third")
    finally:
        for state in app.extensions["a2a"].values():
            state.close()


def test_rpc_sends_any_request_as_written_and_returns_the_raw_answer(make_app):
    # rpc() speaks JSON-RPC whatever binding the typed calls use.
    agent = A2ATestClient(make_app(storyteller), binding="rest")
    old = agent.rpc("message/send", {"message": {"kind": "message", "messageId": "m-1",
                                                 "role": "user",
                                                 "parts": [{"kind": "text", "text": "hi"}]}},
                    version="0.3", request_id="r-7")
    assert old.status_code == 200 and old.headers["Content-Type"].startswith("application/json")
    answer = old.json()
    assert answer["id"] == "r-7" and answer["result"]["kind"] == "task"  # 0.3 on the wire
    unknown = agent.rpc("NoSuchMethod", version=None).json()
    assert unknown["id"] == 1 and unknown["error"]["code"] == -32601
    streamed = agent.rpc("SendStreamingMessage", {"message": {
        "messageId": "m-2", "role": "ROLE_USER", "parts": [{"text": "a b"}]}}, stream=True)
    assert streamed.headers["Content-Type"].startswith("text/event-stream")
    assert "TASK_STATE_COMPLETED" in streamed.text
