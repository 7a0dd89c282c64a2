"""Interop: the official ``a2a-sdk`` Python client (1.x, JSON-RPC 1.0) against our gunicorn server.

The SDK is asyncio/httpx based; each test runs one coroutine with ``asyncio.run``.
Clients are built the way the SDK documents: resolve the card with
``A2ACardResolver`` (or ``create_client(url)``), then ``ClientFactory(ClientConfig(...)).create(card)``.
Every HTTP request the SDK makes is recorded, so the tests also check that it
spoke 1.0 (``A2A-Version: 1.0``, PascalCase JSON-RPC methods).
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from typing import Any, AsyncIterator, List

import httpx
import pytest

pytest.importorskip("a2a.client")

from a2a.client import A2ACardResolver, ClientConfig, ClientFactory, create_client  # noqa: E402
from a2a.types.a2a_pb2 import (  # noqa: E402
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import (  # noqa: E402
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict  # noqa: E402

RESUBSCRIBE = "test-resubscribe-message-id"
METHODS_1_0 = {"SendMessage", "SendStreamingMessage", "GetTask", "ListTasks", "CancelTask",
               "SubscribeToTask"}


def run(coro: Any, timeout: float = 30.0) -> Any:
    """Run one coroutine to the end, bounded in time."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


def user_msg(prefix: str, text: str = "hi", **fields: Any) -> Message:
    return Message(message_id=f"{prefix}-{uuid.uuid4().hex[:10]}", role=Role.ROLE_USER,
                   parts=[Part(text=text)], **fields)


def send_request(prefix: str, text: str = "hi", *, return_immediately: bool = False,
                 **fields: Any) -> SendMessageRequest:
    request = SendMessageRequest(message=user_msg(prefix, text, **fields))
    if return_immediately:
        request.configuration.CopyFrom(SendMessageConfiguration(return_immediately=True))
    return request


def kind(event: StreamResponse) -> str:
    """``task``, ``message``, ``artifact`` or the state of a status update (no prefix)."""
    which = event.WhichOneof("payload")
    if which == "status_update":
        return TaskState.Name(event.status_update.status.state).replace("TASK_STATE_", "")
    return "artifact" if which == "artifact_update" else which


def check_spoke_1_0(requests_seen: List[httpx.Request]) -> None:
    """Every JSON-RPC call carried ``A2A-Version: 1.0`` and used a 1.0 method name."""
    calls = [r for r in requests_seen if r.method == "POST"]
    assert calls
    for request in calls:
        assert request.headers.get("A2A-Version") == "1.0", request.url
        assert request.headers["Content-Type"] == "application/json"
        body = json.loads(request.content)
        assert body["jsonrpc"] == "2.0" and body["method"] in METHODS_1_0, body
        assert isinstance(body["id"], str) and body["id"]


class SDK:
    """Two SDK clients on one httpx client: ``blocking`` (SendMessage) and ``streaming``."""

    def __init__(self, blocking: Any, streaming: Any, seen: List[httpx.Request]) -> None:
        self.blocking, self.streaming, self.seen = blocking, streaming, seen

    def methods(self) -> List[str]:
        return [json.loads(r.content)["method"] for r in self.seen if r.method == "POST"]


@contextlib.asynccontextmanager
async def sdk_clients(server) -> AsyncIterator[SDK]:
    """Clients built from the card the SDK resolved from our server; checks they spoke 1.0."""
    seen: List[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request)

    async with httpx.AsyncClient(timeout=30, event_hooks={"request": [record]}) as http:
        card = await A2ACardResolver(http, server.url).get_agent_card()
        blocking = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        streaming = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(card)
        try:
            yield SDK(blocking, streaming, seen)
        finally:
            await blocking.close()
            await streaming.close()
    check_spoke_1_0(seen)


async def collect(stream: AsyncIterator[StreamResponse]) -> List[StreamResponse]:
    return [event async for event in stream]


# ------------------------------------------------------------------ card


def test_sdk_card_resolver_parses_our_agent_card(conformance_server):
    async def main():
        async with httpx.AsyncClient(timeout=10) as http:
            return await A2ACardResolver(http, conformance_server.url).get_agent_card()

    card = run(main())
    assert card.name == "A2A Flask conformance agent"
    jsonrpc = [i for i in card.supported_interfaces if i.protocol_binding == "JSONRPC"]
    assert [i.protocol_version for i in jsonrpc] == ["1.0", "0.3"]  # 1.0 preferred
    assert {i.url for i in jsonrpc} == {conformance_server.url + "/a2a"}
    assert card.capabilities.streaming and card.capabilities.push_notifications
    assert [s.id for s in card.skills] == ["tck"]
    assert "text/plain" in card.default_input_modes


def test_sdk_create_client_from_url_talks_to_our_jsonrpc_endpoint(conformance_server):
    seen: List[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request)

    async def main():
        async with httpx.AsyncClient(timeout=30, event_hooks={"request": [record]}) as http:
            client = await create_client(conformance_server.url,
                                         ClientConfig(httpx_client=http, streaming=False))
            async with client:
                return await collect(client.send_message(send_request("tck-complete-task")))

    events = run(main())
    assert len(events) == 1 and events[0].task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [str(r.url) for r in seen] == [conformance_server.url + "/.well-known/agent-card.json",
                                          conformance_server.url + "/a2a"]
    check_spoke_1_0(seen)


# ------------------------------------------------------------------ send


def test_sdk_blocking_send_returns_completed_task_with_artifact(conformance_server):
    async def main():
        async with sdk_clients(conformance_server) as sdk:
            events = await collect(sdk.blocking.send_message(send_request("tck-artifact-text")))
            return events, sdk.methods()

    events, methods = run(main())
    assert methods == ["SendMessage"]
    assert len(events) == 1 and events[0].HasField("task")
    task = events[0].task
    assert task.id and task.context_id
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for p in task.artifacts[0].parts] == ["Generated text content"]


@pytest.mark.parametrize("prefix", ["tck-artifact-file", "tck-artifact-file-url", "tck-artifact-data"])
def test_sdk_decodes_file_url_and_data_parts(conformance_server, prefix):
    async def main():
        async with sdk_clients(conformance_server) as sdk:
            return await collect(sdk.blocking.send_message(send_request(prefix)))

    (event,) = run(main())
    part = event.task.artifacts[0].parts[0]
    if prefix == "tck-artifact-file":
        assert part.raw == b"Generated file content"
        assert (part.filename, part.media_type) == ("output.txt", "text/plain")
    elif prefix == "tck-artifact-file-url":
        assert part.url == "https://example.com/output.txt"
        assert (part.filename, part.media_type) == ("output.txt", "text/plain")
    else:
        assert MessageToDict(part)["data"] == {"key": "value", "count": 42}
        assert part.media_type == "application/json"


def test_sdk_streaming_send_yields_events_in_order_ending_completed(conformance_server):
    async def main():
        async with sdk_clients(conformance_server) as sdk:
            events = await collect(sdk.streaming.send_message(send_request("tck-stream-001")))
            return events, sdk.methods()

    events, methods = run(main())
    assert methods == ["SendStreamingMessage"]
    assert [kind(e) for e in events] == ["task", "WORKING", "artifact", "COMPLETED"]
    task_id = events[0].task.id
    assert all(e.status_update.task_id == task_id for e in events if e.HasField("status_update"))
    assert events[2].artifact_update.task_id == task_id
    assert [p.text for p in events[2].artifact_update.artifact.parts] == ["Streamed text content"]


def test_sdk_streaming_chunked_artifact_flags(conformance_server):
    async def main():
        async with sdk_clients(conformance_server) as sdk:
            return await collect(sdk.streaming.send_message(
                send_request("tck-stream-artifact-chunked")))

    events = run(main())
    chunks = [e.artifact_update for e in events if e.HasField("artifact_update")]
    assert [(c.append, c.last_chunk) for c in chunks] == [(True, False), (True, True)]
    assert [c.artifact.parts[0].text for c in chunks] == ["chunk-1 ", "chunk-2"]
    assert kind(events[-1]) == "COMPLETED"


def test_sdk_direct_message_response_send_and_stream(conformance_server):
    async def main():
        async with sdk_clients(conformance_server) as sdk:
            return [await collect(client.send_message(send_request("tck-message-response")))
                    for client in (sdk.blocking, sdk.streaming)], sdk.methods()

    results, methods = run(main())
    assert methods == ["SendMessage", "SendStreamingMessage"]
    for events in results:
        assert [kind(e) for e in events] == ["message"]
        message = events[0].message
        assert message.role == Role.ROLE_AGENT
        assert [p.text for p in message.parts] == ["Direct message response"]
        assert message.context_id and not message.task_id


def test_sdk_input_required_then_follow_up_completes(conformance_server):
    async def main():
        async with sdk_clients(conformance_server) as sdk:
            (first,) = await collect(sdk.blocking.send_message(send_request("tck-input-required")))
            task = first.task
            follow_up = send_request("tck-input-required", "more", task_id=task.id,
                                     context_id=task.context_id)
            (second,) = await collect(sdk.blocking.send_message(follow_up))
            return task, second.task

    asked, done = run(main())
    assert asked.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert [p.text for p in asked.status.message.parts] == ["Please provide more input"]
    assert done.id == asked.id and done.status.state == TaskState.TASK_STATE_COMPLETED
    assert [p.text for p in done.status.message.parts] == ["Thanks, got it"]


def test_sdk_streaming_input_required_then_streaming_follow_up_completes(conformance_server):
    async def main():
        async with sdk_clients(conformance_server) as sdk:
            first = await collect(sdk.streaming.send_message(send_request("tck-input-required")))
            task = first[0].task
            second = await collect(sdk.streaming.send_message(
                send_request("tck-input-required", "more", task_id=task.id)))
            return first, second

    first, second = run(main())
    assert [kind(e) for e in first] == ["task", "INPUT_REQUIRED"]
    assert [kind(e) for e in second] == ["task", "COMPLETED"]
    assert second[0].task.id == first[0].task.id


# ------------------------------------------------------------------ tasks


def test_sdk_get_task_and_list_tasks(conformance_server):
    context_id = f"sdk-ctx-{uuid.uuid4().hex[:10]}"

    async def main():
        async with sdk_clients(conformance_server) as sdk:
            client = sdk.blocking
            ids = []
            for _ in range(2):
                (event,) = await collect(client.send_message(
                    send_request("tck-artifact-text", context_id=context_id)))
                ids.append(event.task.id)
            got = await client.get_task(GetTaskRequest(id=ids[0], history_length=0))
            listed = await client.list_tasks(ListTasksRequest(context_id=context_id))
            with_artifacts = await client.list_tasks(
                ListTasksRequest(context_id=context_id, include_artifacts=True, page_size=1))
            with pytest.raises(TaskNotFoundError) as missing:
                await client.get_task(GetTaskRequest(id="no-such-task"))
            return ids, got, listed, with_artifacts, missing.value

    ids, got, listed, with_artifacts, missing = run(main())
    assert got.id == ids[0] and got.context_id == context_id
    assert got.status.state == TaskState.TASK_STATE_COMPLETED and len(got.history) == 0
    assert sorted(t.id for t in listed.tasks) == sorted(ids)
    stamps = [t.status.timestamp.ToDatetime() for t in listed.tasks]
    assert stamps == sorted(stamps, reverse=True)  # most recently updated first
    assert listed.total_size == 2 and listed.page_size == 50 and listed.next_page_token == ""
    assert all(len(t.artifacts) == 0 for t in listed.tasks)
    assert len(with_artifacts.tasks) == 1 and with_artifacts.next_page_token
    assert [p.text for p in with_artifacts.tasks[0].artifacts[0].parts] == ["Generated text content"]
    assert missing.data == {"taskId": "no-such-task"}


def test_sdk_subscribe_to_live_task_gets_snapshot_then_completion(conformance_server):
    async def main():
        async with sdk_clients(conformance_server) as sdk:
            (started,) = await collect(sdk.blocking.send_message(
                send_request(RESUBSCRIBE, return_immediately=True)))
            events = await collect(sdk.streaming.subscribe(
                SubscribeToTaskRequest(id=started.task.id)))
            final = await sdk.blocking.get_task(GetTaskRequest(id=started.task.id))
            return started.task, events, final

    started, events, final = run(main())
    assert started.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    assert kind(events[0]) == "task" and events[0].task.id == started.id
    assert kind(events[-1]) == "COMPLETED"
    assert set(kind(e) for e in events[1:-1]) <= {"WORKING"}
    assert final.status.state == TaskState.TASK_STATE_COMPLETED


def test_sdk_cancel_live_task_ends_subscription_with_canceled(conformance_server):
    async def main():
        async with sdk_clients(conformance_server) as sdk:
            (started,) = await collect(sdk.blocking.send_message(
                send_request(RESUBSCRIBE, return_immediately=True)))
            task_id = started.task.id
            events: List[StreamResponse] = []
            first = asyncio.Event()

            async def consume() -> None:
                async for event in sdk.streaming.subscribe(SubscribeToTaskRequest(id=task_id)):
                    events.append(event)
                    first.set()

            consumer = asyncio.create_task(consume())
            await asyncio.wait_for(first.wait(), 10)
            canceled = await sdk.blocking.cancel_task(CancelTaskRequest(id=task_id))
            await asyncio.wait_for(consumer, 10)
            final = await sdk.blocking.get_task(GetTaskRequest(id=task_id))
            with pytest.raises(TaskNotCancelableError):
                await sdk.blocking.cancel_task(CancelTaskRequest(id=task_id))
            with pytest.raises(UnsupportedOperationError):
                await collect(sdk.streaming.subscribe(SubscribeToTaskRequest(id=task_id)))
            return canceled, events, final

    canceled, events, final = run(main())
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    assert kind(events[0]) == "task"
    assert kind(events[-1]) == "CANCELED"
    assert final.status.state == TaskState.TASK_STATE_CANCELED


def test_sdk_message_to_terminal_task_raises_unsupported_operation(conformance_server):
    async def main():
        async with sdk_clients(conformance_server) as sdk:
            (done,) = await collect(sdk.blocking.send_message(send_request("tck-complete-task")))
            with pytest.raises(UnsupportedOperationError) as raised:
                await collect(sdk.blocking.send_message(
                    send_request("tck-complete-task", task_id=done.task.id)))
            return done.task, raised.value

    task, error = run(main())
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert error.data and error.data.get("taskId") == task.id


def test_sdk_streams_text_with_unicode_line_separators(conformance_server):
    """The SDK's line reader (httpx ``aiter_lines``) also splits on U+2028/U+2029/U+0085,
    which SSE does not; our frames escape them so its streams survive such text."""
    text = "line\u2028sep\u2029para\x85nel"

    async def main():
        async with sdk_clients(conformance_server) as sdk:
            return await collect(sdk.streaming.send_message(send_request("plain", text)))

    events = run(main())
    assert [p.text for e in events if e.HasField("artifact_update")
            for p in e.artifact_update.artifact.parts] == [text]
