"""a2a_flask.client against a server built on the official ``a2a-sdk`` (uvicorn):
proof that it is a real A2A client and not only a mirror of our server."""
from __future__ import annotations

import sys

import pytest

pytest.importorskip("a2a.server")
pytest.importorskip("uvicorn")

from a2a_flask.protocol import models as m  # noqa: E402
from a2a_flask.client import (  # noqa: E402
    A2AClient,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    artifact_text,
)

from tests.support.client_support import DropProxy, SdkServer, read_live, shared  # noqa: E402

pytestmark = [pytest.mark.timeout(60), pytest.mark.server]

PREFERS = ["jsonrpc@1.0", "rest", "jsonrpc@0.3"]


@pytest.fixture(scope="session")
def sdk_server():
    return shared("sdk", SdkServer)


@pytest.fixture(params=PREFERS)
def sdk(request, sdk_server):
    with A2AClient.connect(sdk_server.url, prefer=request.param, timeout=(5, 20)) as client:
        yield client


def chunks(events):
    return "".join(artifact_text(e.artifact) for e in events
                   if isinstance(e, m.TaskArtifactUpdateEvent))


def last_state(events):
    return [e.status.state for e in events if isinstance(e, (m.Task, m.TaskStatusUpdateEvent))][-1]


def test_card_resolution_reads_the_sdk_card(sdk_server):
    with A2AClient.connect(sdk_server.url) as agent:
        assert agent.card.name == "SDK agent"
        assert (agent.interface.protocol_binding, agent.interface.protocol_version) == \
            ("JSONRPC", "1.0")
        assert agent.interface.url == sdk_server.url + "/a2a"
        offered = {(i.protocol_binding, i.protocol_version) for i in agent.card.supported_interfaces}
        assert offered == {("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")}
        assert agent.card.capabilities.streaming is True


def test_send_get_and_typed_errors(sdk):
    task = sdk.send_message("hello sdk")
    assert task.status.state is m.TaskState.COMPLETED
    assert artifact_text(task.artifacts[0]) == "hello sdk"
    fetched = sdk.get_task(task.id)
    assert fetched.id == task.id and fetched.status.state is m.TaskState.COMPLETED
    with pytest.raises(TaskNotFoundError):
        sdk.get_task("no-such-task")
    with pytest.raises(TaskNotCancelableError):
        sdk.cancel_task(task.id)


def test_stream_in_order(sdk):
    with sdk.send_streaming_message("stream please") as events:
        seen = list(events)
    assert isinstance(seen[0], m.Task)
    assert chunks(seen) == "part-0 part-1 part-2 "
    assert last_state(seen) is m.TaskState.COMPLETED


def test_cancel_a_running_task_ends_its_subscription(sdk):
    started = sdk.send_message("hold", return_immediately=True)
    assert started.status.state in (m.TaskState.SUBMITTED, m.TaskState.WORKING)
    with sdk.subscribe_to_task(started.id) as events:
        first = next(events)
        assert isinstance(first, m.Task) and first.id == started.id
        assert sdk.cancel_task(started.id).status.state is m.TaskState.CANCELED
        assert last_state([first, *events]) is m.TaskState.CANCELED


def test_list_tasks_over_1_0(sdk_server):
    with A2AClient.connect(sdk_server.url) as agent:
        task = agent.send_message("listed")
        page = agent.list_tasks(context_id=task.context_id)
        assert [t.id for t in page.tasks] == [task.id]
    with A2AClient.connect(sdk_server.url, prefer="0.3") as legacy:
        with pytest.raises(UnsupportedOperationError):
            legacy.list_tasks()


def test_push_on_an_agent_without_push_is_typed(sdk):
    task = sdk.send_message("x")
    with pytest.raises(PushNotificationNotSupportedError):
        sdk.create_push_config(task.id, "http://127.0.0.1:9/hook")


@pytest.mark.parametrize("prefer", ["jsonrpc@1.0", "rest"])
def test_stream_resumes_by_subscribing_when_the_agent_sends_no_event_ids(sdk_server, prefer):
    """The SDK sends no SSE ids: the client re-attaches with a plain subscribe, gets the
    Task as it is now, then the rest of the events."""
    trigger = b"SendStreamingMessage" if prefer == "jsonrpc@1.0" else b"message:stream"
    with DropProxy(sdk_server.port, triggers=[trigger], cut_after=800) as proxy:
        # The SDK's card names its own port: address the proxy directly.
        path, binding = ("/a2a", "jsonrpc") if prefer == "jsonrpc@1.0" else ("/rest", "rest")
        with A2AClient(proxy.url + path, binding=binding) as agent:
            with agent.send_streaming_message("slow") as events:
                seen = list(events)
        assert proxy.cut_count == 1 and events.reconnects == 1
    snapshots = [e for e in seen if isinstance(e, m.Task)]
    assert len(snapshots) == 2  # the first event, and the re-attachment's
    assert last_state(seen) is m.TaskState.COMPLETED
    # What the snapshot already held plus what streamed after it: the whole story.
    resumed_at = seen.index(snapshots[1])
    held = "".join(artifact_text(a) for a in snapshots[1].artifacts)
    assert held + chunks(seen[resumed_at:]) == "part-0 part-1 part-2 part-3 "


def test_a_stream_whose_task_ended_meanwhile_reports_the_final_task(sdk_server):
    with DropProxy(sdk_server.port, triggers=[b"SendStreamingMessage"], cut_after=800) as proxy:
        with A2AClient(proxy.url + "/a2a") as agent:
            events = agent.send_streaming_message("stream")
            events.backoff = 1.0  # re-attach only after the task is over
            seen = list(events)
        assert proxy.cut_count == 1
    final = seen[-1]
    assert isinstance(final, m.Task) and final.status.state is m.TaskState.COMPLETED
    assert artifact_text(final.artifacts[0]) == "part-0 part-1 part-2 "


def test_the_cli_streams_an_sdk_agents_answer_live(sdk_server):
    """``a2a-flask send URL TEXT --stream`` against another SDK's agent: text arrives
    while the task still runs."""
    text, live, status, stderr = read_live(
        [sys.executable, "-m", "a2a_flask", "send", sdk_server.url, "slow", "--stream"],
        b"part-0", b"part-3")
    assert status == 0, stderr
    assert live, text
    lines = text.splitlines()
    assert "part-0 part-1 part-2 part-3" in lines[-2] and lines[-1] == "[completed]"
