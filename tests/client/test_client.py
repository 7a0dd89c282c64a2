"""a2a_flask.client against our own server (real gunicorn + gevent) in every
binding and dialect: 1.0 JSON-RPC, 1.0 HTTP+JSON, 0.3 JSON-RPC, 0.1 JSON-RPC."""
from __future__ import annotations

import threading
import time
from typing import Any, List

import pytest

from a2a_flask.protocol import models as m
from a2a_flask.client import (
    A2AClient,
    A2AConnectionError,
    A2AException,
    A2AHTTPError,
    A2ATimeoutError,
    ContentTypeNotSupportedError,
    InvalidParamsError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
    VersionNotSupportedError,
    artifact_text,
)

from tests.support.client_support import DropProxy, LocalHTTP, client_agent_server
from tests.support.helpers import free_port

pytestmark = [pytest.mark.timeout(60), pytest.mark.declare(server=["agent_server"])]


@pytest.fixture(scope="session")
def agent_server():
    """The agent of tests/support/client_agent.py on a real gunicorn (shared with other modules)."""
    return client_agent_server()

#: prefer= value -> (binding, generation) it must select.
DIALECTS = {
    "jsonrpc@1.0": ("JSONRPC", "1.0"),
    "rest": ("HTTP+JSON", "1.0"),
    "jsonrpc@0.3": ("JSONRPC", "0.3"),
    "0.1": ("JSONRPC", "0.1"),
}
V1 = ["jsonrpc@1.0", "rest"]
#: What starts a stream in each dialect (what the drop proxy watches for).
STREAM_CALLS = {"jsonrpc@1.0": b"SendStreamingMessage", "rest": b"message:stream",
                "jsonrpc@0.3": b'"message/stream"', "0.1": b"tasks/sendSubscribe"}
RESUME_CALLS = [b"SubscribeToTask", b":subscribe", b"tasks/resubscribe"]


@pytest.fixture(params=list(DIALECTS))
def dialect(request) -> str:
    return request.param


@pytest.fixture
def agent(agent_server, dialect):
    with A2AClient.connect(agent_server.url, prefer=dialect, timeout=(5, 20)) as client:
        yield client


def chunks(events: List[Any]) -> str:
    return "".join(artifact_text(e.artifact) for e in events
                   if isinstance(e, m.TaskArtifactUpdateEvent))


def states(events: List[Any]) -> List[m.TaskState]:
    return [e.status.state for e in events if isinstance(e, (m.Task, m.TaskStatusUpdateEvent))]


def start_holding_task(agent: A2AClient) -> str:
    """A task that stays WORKING until canceled (started with a stream we let go of)."""
    with agent.send_streaming_message("hold") as events:
        first = next(events)
    task_id = first.id if isinstance(first, m.Task) else first.task_id
    assert task_id
    return task_id


# ------------------------------------------------------------------ card and interfaces


def test_connect_reads_the_card_and_picks_1_0_jsonrpc_by_default(agent_server):
    with A2AClient.connect(agent_server.url) as agent:
        assert agent.interface.protocol_binding == "JSONRPC"
        assert agent.interface.protocol_version == "1.0"
        assert agent.interface.url == agent_server.url + "/a2a"
        assert agent.card.name == "Client test agent"
        assert agent.card.capabilities.push_notifications is True
        assert [s.id for s in agent.card.skills] == ["test"]
        bindings = {(i.protocol_binding, i.protocol_version) for i in agent.card.supported_interfaces}
        assert {("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"), ("JSONRPC", "0.3")} <= bindings


def test_prefer_selects_each_interface(agent_server, dialect):
    with A2AClient.connect(agent_server.url, prefer=dialect) as agent:
        binding, version = DIALECTS[dialect]
        assert (agent.interface.protocol_binding, agent.interface.protocol_version[:3]) == \
            (binding, version)
        assert type(agent.transport).__name__ == {
            "jsonrpc@1.0": "JsonRpcTransport", "rest": "RestTransport",
            "jsonrpc@0.3": "V03Transport", "0.1": "V01Transport"}[dialect]


def test_prefer_that_nothing_matches_is_a_clear_error(agent_server):
    with pytest.raises(A2AException, match="No interface this client speaks matches"):
        A2AClient.connect(agent_server.url, prefer="grpc")
    # A list is tried in order.
    with A2AClient.connect(agent_server.url, prefer=["grpc", "rest"]) as agent:
        assert agent.interface.protocol_binding == "HTTP+JSON"


def test_card_url_variants_resolve(agent_server):
    for url in (agent_server.url + "/", agent_server.url + "/.well-known/agent.json",
                agent_server.url + "/a2a"):
        with A2AClient.connect(url) as agent:
            assert agent.card.name == "Client test agent"
            assert agent.send_message("hi").status.state is m.TaskState.COMPLETED


def test_a_0_1_card_at_agent_json_only_is_found_and_spoken(agent_server):
    """No agent-card.json: the client falls back to agent.json, reads a 0.1 card and
    speaks 0.1 to the endpoint it names (our server's)."""
    card = {"name": "Seed agent", "url": agent_server.url + "/a2a", "version": "0.1",
            "capabilities": {"streaming": True}, "authentication": {"schemes": ["public"]},
            "skills": [{"id": "s", "name": "S"}]}
    with LocalHTTP({"/.well-known/agent.json": card}) as cards:
        with A2AClient.connect(cards.url) as agent:
            assert agent.interface.protocol_version == "0.1"
            assert agent.card.name == "Seed agent" and agent.card.capabilities.streaming
            task = agent.send_message("hello seeds")
            assert task.status.state is m.TaskState.COMPLETED
            assert artifact_text(task.artifacts[0]) == "hello seeds"


def test_no_card_anywhere_is_an_http_error():
    with LocalHTTP({}) as empty:
        with pytest.raises(A2AHTTPError, match="No agent card found"):
            A2AClient.connect(empty.url)


def test_explicit_endpoints_work_without_a_card(agent_server):
    cases = [(agent_server.url + "/a2a", "JSONRPC", "1.0"), (agent_server.url + "/a2a/rest", "rest", "1.0"),
             (agent_server.url + "/a2a", "jsonrpc", "0.3"), (agent_server.url + "/a2a", "JSONRPC", "0.1")]
    for url, binding, version in cases:
        with A2AClient(url, binding=binding, version=version) as agent:
            assert agent.card is None
            task = agent.send_message("direct")
            assert artifact_text(task.artifacts[0]) == "direct", (binding, version)
    with pytest.raises(A2AException, match="does not speak GRPC"):
        A2AClient(agent_server.url, binding="grpc")


# ------------------------------------------------------------------ operations, every dialect


def test_send_text_returns_the_completed_task(agent):
    task = agent.send_message("hello there")
    assert isinstance(task, m.Task)
    assert task.status.state is m.TaskState.COMPLETED
    assert task.id and task.context_id
    assert artifact_text(task.artifacts[0]) == "hello there"
    again = agent.get_task(task.id)
    assert again.id == task.id and again.status.state is m.TaskState.COMPLETED
    assert any(msg.role is m.Role.USER and msg.text == "hello there" for msg in again.history)
    assert len(agent.get_task(task.id, history_length=1).history) <= 1


def test_stream_yields_typed_events_in_order(agent):
    with agent.send_streaming_message("slow 4") as events:
        seen = list(events)
    assert chunks(seen) == "chunk-0 chunk-1 chunk-2 chunk-3 "
    assert states(seen)[-1] is m.TaskState.COMPLETED
    assert m.TaskState.WORKING in states(seen)
    working = [e for e in seen if isinstance(e, m.TaskStatusUpdateEvent)
               and e.status.state is m.TaskState.WORKING]
    assert working[0].status.message.text == "thinking..."
    task_ids = {getattr(e, "task_id", None) or getattr(e, "id", None) for e in seen}
    assert len(task_ids) == 1 and events.task_id in task_ids
    assert events.last_event_id is not None and int(events.last_event_id) >= len(seen)


def test_input_required_then_follow_up_on_the_same_task(agent):
    first = agent.send_message("ask")
    assert first.status.state is m.TaskState.INPUT_REQUIRED
    assert first.status.message.text == "Which city?"
    done = agent.send_message("Paris", task_id=first.id)
    assert done.id == first.id
    assert done.status.state is m.TaskState.COMPLETED
    assert done.status.message.text == "Forecast for Paris"


def test_streamed_follow_up_completes(agent):
    with agent.send_streaming_message("ask") as events:
        seen = list(events)
    assert states(seen)[-1] is m.TaskState.INPUT_REQUIRED
    with agent.send_streaming_message("Oslo", task_id=events.task_id) as events2:
        seen2 = list(events2)
    assert states(seen2)[-1] is m.TaskState.COMPLETED
    assert events2.task_id == events.task_id


def test_file_and_data_parts_round_trip(agent, tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"some notes\n")
    task = agent.send_message("parts", file=path, data={"pages": [1, 2]})
    parts = task.artifacts[0].parts
    files = [p for p in parts if p.raw is not None]
    assert files[0].raw == b"some notes\n"
    assert files[0].filename == "notes.txt" and files[0].media_type == "text/plain"
    assert [p.data for p in parts if p.data is not m.UNSET] == [{"pages": [1, 2]}]


def test_subscribe_then_cancel_ends_the_stream_canceled(agent):
    task_id = start_holding_task(agent)
    subscription = agent.subscribe_to_task(task_id)
    first = next(subscription)
    assert (first.id if isinstance(first, m.Task) else first.task_id) == task_id
    canceled = agent.cancel_task(task_id)
    assert canceled.status.state is m.TaskState.CANCELED
    rest = list(subscription)
    assert states([first] + rest)[-1] is m.TaskState.CANCELED
    with pytest.raises(TaskNotCancelableError) as caught:
        agent.cancel_task(task_id)
    assert caught.value.code == -32002


def test_failed_and_rejected_tasks_are_results_not_errors(agent):
    assert agent.send_message("fail").status.state is m.TaskState.FAILED
    rejected = agent.send_message("reject").status.state
    # 0.1 has no REJECTED: the server sends "failed".
    assert rejected is (m.TaskState.FAILED if agent.interface.protocol_version == "0.1"
                        else m.TaskState.REJECTED)


def test_push_config_lifecycle(agent):
    task = agent.send_message("hello")
    with LocalHTTP() as hooks:
        created = agent.create_push_config(task.id, hooks.url + "/hook", token="tok-1")
        assert created.url == hooks.url + "/hook" and created.task_id == task.id
        fetched = agent.get_push_config(task.id, created.id)
        assert fetched.url == created.url
        assert [c.url for c in agent.list_push_configs(task.id)] == [created.url]
        if agent.interface.protocol_version == "0.1":
            with pytest.raises(UnsupportedOperationError):
                agent.delete_push_config(task.id, created.id)
        else:
            agent.delete_push_config(task.id, created.id)
            assert agent.list_push_configs(task.id) == []
            agent.delete_push_config(task.id, created.id)  # idempotent


def test_extended_card_needs_credentials(agent_server, dialect):
    with A2AClient.connect(agent_server.url, prefer=dialect, token="member") as member:
        if dialect == "0.1":
            with pytest.raises(UnsupportedOperationError, match="0.3 or 1.0"):
                member.get_extended_card()
            return
        card = member.get_extended_card()
        assert card.name == "Client test agent (extended)"
        assert {s.id for s in card.skills} == {"test", "secret"}
        assert member.card is card
    with A2AClient.connect(agent_server.url, prefer=dialect) as anonymous:
        with pytest.raises(UnauthenticatedError) as caught:
            anonymous.get_extended_card()
        assert caught.value.status_code == 401
        assert caught.value.response.headers["WWW-Authenticate"].startswith("Bearer")


def test_bad_credentials_are_an_authentication_error(agent_server):
    for prefer in ("jsonrpc@1.0", "rest", "0.3"):
        with A2AClient.connect(agent_server.url, prefer=prefer, token="bad") as agent:
            with pytest.raises(UnauthenticatedError, match="invalid or expired"):
                agent.send_message("let me in")


def test_tasks_belong_to_the_caller(agent_server):
    with A2AClient.connect(agent_server.url, token="alice") as alice, \
            A2AClient.connect(agent_server.url, token="bob") as bob:
        task = alice.send_message("mine")
        assert alice.get_task(task.id).id == task.id
        with pytest.raises(TaskNotFoundError):
            bob.get_task(task.id)


def test_unknown_task_is_task_not_found_in_every_dialect(agent):
    with pytest.raises(TaskNotFoundError) as caught:
        agent.get_task("no-such-task")
    error = caught.value
    assert error.code == -32001
    assert error.response is not None
    if agent.interface.protocol_binding == "HTTP+JSON":
        assert error.status_code == 404 and error.error["status"] == "NOT_FOUND"
    else:
        assert error.status_code == 200 and error.error["code"] == -32001
    assert error.reason == "TASK_NOT_FOUND" and error.metadata.get("taskId") == "no-such-task"


def test_message_to_a_finished_task_is_unsupported_operation(agent):
    task = agent.send_message("hello")
    with pytest.raises(UnsupportedOperationError):
        agent.send_message("again", task_id=task.id)


def test_subscribe_to_a_finished_or_unknown_task_raises_in_every_dialect(agent):
    """0.x servers send these errors as one stream event, 1.0 as a plain answer: the
    client raises the same errors either way."""
    task = agent.send_message("hello")
    with pytest.raises(UnsupportedOperationError):
        list(agent.subscribe_to_task(task.id))
    with pytest.raises(TaskNotFoundError):
        list(agent.subscribe_to_task("no-such-task"))


# ------------------------------------------------------------------ 1.0-only operations


@pytest.mark.parametrize("prefer", V1)
def test_list_tasks_filters_and_pages(agent_server, prefer):
    with A2AClient.connect(agent_server.url, prefer=prefer) as agent:
        first = agent.send_message("one")
        agent.send_message("two", context_id=first.context_id)
        page = agent.list_tasks(context_id=first.context_id)
        assert page.total_size == 2 and len(page.tasks) == 2
        assert all(t.context_id == first.context_id for t in page.tasks)
        assert all(not t.artifacts for t in page.tasks)
        with_artifacts = agent.list_tasks(context_id=first.context_id, include_artifacts=True)
        assert all(t.artifacts for t in with_artifacts.tasks)
        one = agent.list_tasks(context_id=first.context_id, page_size=1)
        assert len(one.tasks) == 1 and one.next_page_token
        other = agent.list_tasks(context_id=first.context_id, page_size=1,
                                 page_token=one.next_page_token)
        assert {one.tasks[0].id, other.tasks[0].id} == {t.id for t in page.tasks}
        assert agent.list_tasks(context_id=first.context_id, state="working").total_size == 0
        assert agent.list_tasks(context_id=first.context_id, state="completed").total_size == 2


@pytest.mark.parametrize("prefer", ["jsonrpc@0.3", "0.1"])
def test_list_tasks_on_legacy_interfaces_is_refused_without_asking(agent_server, prefer):
    with A2AClient.connect(agent_server.url, prefer=prefer) as agent:
        with pytest.raises(UnsupportedOperationError, match="ListTasks needs A2A 1.0") as caught:
            agent.list_tasks()
        assert caught.value.response is None


@pytest.mark.parametrize("prefer", V1)
def test_direct_message_replies(agent_server, prefer):
    # Without a key: a keyed send always makes a task (docs/safe-retries.rst).
    with A2AClient.connect(agent_server.url, prefer=prefer, idempotent=False) as agent:
        reply = agent.send_message("reply")
        assert isinstance(reply, m.Message) and reply.text == "direct answer"
        events = list(agent.send_streaming_message("reply"))
        assert len(events) == 1 and isinstance(events[0], m.Message)


def test_direct_message_reply_over_0_3(agent_server):
    with A2AClient.connect(agent_server.url, prefer="0.3", idempotent=False) as agent:
        reply = agent.send_message("reply")
        assert isinstance(reply, m.Message) and reply.role is m.Role.AGENT
        assert reply.text == "direct answer"


@pytest.mark.parametrize("prefer", V1)
def test_tenant_scopes_tasks(agent_server, prefer):
    with A2AClient.connect(agent_server.url, prefer=prefer, tenant="acme") as acme, \
            A2AClient.connect(agent_server.url, prefer=prefer) as public:
        task = acme.send_message("for acme")
        assert acme.get_task(task.id).id == task.id
        with pytest.raises(TaskNotFoundError):
            public.get_task(task.id)
        assert [t.id for t in acme.list_tasks(context_id=task.context_id).tasks] == [task.id]


# ------------------------------------------------------------------ typed errors


def test_invalid_params_carry_field_violations(agent_server):
    with A2AClient.connect(agent_server.url) as agent:
        task = agent.send_message("x")
        with pytest.raises(InvalidParamsError) as caught:
            agent.get_task(task.id, history_length=-1)
        assert caught.value.code == -32602
    with A2AClient.connect(agent_server.url, prefer="rest") as agent:
        with pytest.raises(InvalidParamsError) as caught:
            agent.list_tasks(page_size=500)
        assert caught.value.status_code == 400
        assert any(v["field"] == "pageSize" for v in caught.value.field_violations)


def test_unsupported_media_type_is_content_type_not_supported(agent_server, tmp_path):
    image = tmp_path / "pic.png"
    image.write_bytes(b"\x89PNG....")
    for prefer in V1:
        with A2AClient.connect(agent_server.url, prefer=prefer) as agent:
            with pytest.raises(ContentTypeNotSupportedError, match="image/png"):
                agent.send_message("look", file=image)


def test_wrong_version_header_is_version_not_supported(agent_server):
    with A2AClient.connect(agent_server.url, headers={"A2A-Version": "0.5"}) as agent:
        with pytest.raises(VersionNotSupportedError) as caught:
            agent.send_message("hi")
        assert caught.value.code == -32009


def test_unknown_rest_route_is_method_not_found(agent_server):
    with A2AClient(agent_server.url + "/a2a/rest/x/y", binding="rest") as agent:
        with pytest.raises(MethodNotFoundError) as caught:
            agent.get_task("t")
        assert caught.value.status_code == 404


@pytest.mark.parametrize("binding", ["jsonrpc", "rest"])
def test_capabilities_the_agent_lacks_are_typed(make_app, binding):
    """An agent without push or an extended card (in-process, through the same client)."""
    from a2a_flask.testing import A2ATestClient

    agent = A2ATestClient(make_app(), binding=binding)
    task = agent.send_message("hi")
    with pytest.raises(PushNotificationNotSupportedError) as caught:
        agent.create_push_config(task.id, "http://127.0.0.1:9/hook")
    assert caught.value.code == -32003
    with pytest.raises(UnsupportedOperationError):
        agent.get_extended_card()


# ------------------------------------------------------------------ headers on the wire


@pytest.mark.parametrize("prefer", ["jsonrpc@1.0", "rest", "jsonrpc@0.3"])
def test_headers_auth_extensions_and_tenant_go_on_the_wire(agent_server, prefer):
    with DropProxy(agent_server.port) as proxy:
        with A2AClient.connect(proxy.url, prefer=prefer, token="sekrit",
                               headers={"X-Trace": "t-1"}, extensions=["urn:a2a:ext:demo"],
                               tenant="acme" if prefer != "jsonrpc@0.3" else "") as agent:
            agent.send_message("hi")
        sent = proxy.sent_text
    assert "Authorization: Bearer sekrit" in sent and "X-Trace: t-1" in sent
    if prefer == "jsonrpc@0.3":
        assert "A2A-Version" not in sent and "X-A2A-Extensions: urn:a2a:ext:demo" in sent
        assert '"method":"message/send"' in sent and '"kind":"message"' in sent
    else:
        assert "A2A-Version: 1.0" in sent and "A2A-Extensions: urn:a2a:ext:demo" in sent
    if prefer == "jsonrpc@1.0":
        assert '"method":"SendMessage"' in sent and '"tenant":"acme"' in sent
    if prefer == "rest":
        assert "POST /a2a/rest/acme/message:send HTTP/1.1" in sent


# ------------------------------------------------------------------ resuming streams


def test_stream_resumes_after_a_dropped_connection_without_gaps_or_duplicates(agent_server,
                                                                              dialect):
    with DropProxy(agent_server.port, triggers=[STREAM_CALLS[dialect]], cut_after=1100) as proxy:
        with A2AClient.connect(proxy.url, prefer=dialect) as agent:
            with agent.send_streaming_message("slow 12") as events:
                seen = list(events)
        assert proxy.cut_count == 1
        assert events.reconnects == 1
        sent = proxy.sent_text
    assert "Last-Event-ID: " in sent
    assert any(call.decode() in sent for call in RESUME_CALLS)
    # Every chunk exactly once, in order: nothing lost, nothing repeated.
    assert chunks(seen) == "".join(f"chunk-{i} " for i in range(12))
    assert states(seen)[-1] is m.TaskState.COMPLETED
    assert states(seen).count(m.TaskState.WORKING) == 1


def test_subscribe_resumes_too(agent_server):
    with DropProxy(agent_server.port, triggers=[b"SubscribeToTask"], cut_after=700) as proxy:
        with A2AClient.connect(proxy.url) as agent:
            started = agent.send_message("slow 14", return_immediately=True)
            with agent.subscribe_to_task(started.id) as events:
                seen = list(events)
        assert proxy.cut_count == 1 and events.reconnects == 1
    text = chunks(seen)
    assert states(seen)[-1] is m.TaskState.COMPLETED
    # The subscription began at some chunk; from there on, each one once and in order.
    expected = "".join(f"chunk-{i} " for i in range(14))
    assert text and expected.endswith(text)


def test_stream_gives_up_after_max_reconnects(agent_server):
    # The first stream breaks after its first events, every re-attachment before its first.
    cut_after = {STREAM_CALLS["jsonrpc@1.0"]: 1100, **{call: 400 for call in RESUME_CALLS}}
    with DropProxy(agent_server.port, triggers=[STREAM_CALLS["jsonrpc@1.0"], *RESUME_CALLS],
                   cut_after=cut_after, cuts=10) as proxy:
        with A2AClient.connect(proxy.url, max_reconnects=2) as agent:
            started = time.monotonic()
            events = agent.send_streaming_message("slow 40")
            with pytest.raises(A2AConnectionError):
                for _ in events:
                    pass
        assert events.reconnects == 2 and proxy.cut_count == 3
        assert time.monotonic() - started < 10
        agent_task = events.task_id
    with A2AClient.connect(agent_server.url) as direct:
        direct.cancel_task(agent_task)


def test_a_stream_cut_before_any_event_cannot_resume(agent_server):
    with DropProxy(agent_server.port, triggers=[b"SendStreamingMessage"], cut_after=150) as proxy:
        with A2AClient.connect(proxy.url) as agent:
            with pytest.raises(A2AConnectionError):
                list(agent.send_streaming_message("slow 2"))
        assert proxy.cut_count == 1


# ------------------------------------------------------------------ timeouts and connections


def test_read_timeout_on_a_blocking_send(agent_server):
    # One try: each retry of the send (the default is 3) would wait out the timeout again.
    # The read timeout bounds the card's fetch and list_tasks too: 2 s, not less, so that
    # a loaded machine answers those in time.
    with A2AClient.connect(agent_server.url, timeout=(5, 2), retries=0) as agent:
        started = time.monotonic()
        with pytest.raises(A2ATimeoutError):
            agent.send_message("hold")
        assert time.monotonic() - started < 10
        tasks = agent.list_tasks(state="working").tasks
    with A2AClient.connect(agent_server.url) as agent:
        for task in tasks:
            try:
                agent.cancel_task(task.id)
            except TaskNotCancelableError:
                pass


def test_a_silent_stream_times_out_after_bounded_reconnects(agent_server):
    with A2AClient.connect(agent_server.url, timeout=(5, 2), max_reconnects=1) as agent:
        started = time.monotonic()
        events = agent.send_streaming_message("hold")
        with pytest.raises(A2ATimeoutError):
            list(events)
        assert events.reconnects == 1
        assert time.monotonic() - started < 15  # two reads of 2 s; not the 60 s default
    with A2AClient.connect(agent_server.url) as agent:
        assert agent.cancel_task(events.task_id).status.state is m.TaskState.CANCELED


def test_connection_refused_is_a_connection_error():
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(A2AConnectionError) as caught:
        A2AClient.connect(url)
    assert not isinstance(caught.value, A2ATimeoutError)
    with A2AClient(url + "/a2a") as agent:
        with pytest.raises(A2AConnectionError):
            agent.send_message("anyone?")


def test_concurrent_streams_share_one_client(agent_server):
    results: List[str] = []
    with A2AClient.connect(agent_server.url) as agent:
        def run() -> None:
            results.append(chunks(list(agent.send_streaming_message("slow 3"))))

        threads = [threading.Thread(target=run) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    assert results == ["chunk-0 chunk-1 chunk-2 "] * 3


# ------------------------------------------------------------------ the pieces, without a server


@pytest.mark.parametrize("code,version,expected", [
    (-32001, "1.0", "TaskNotFoundError"),
    (-32001, "0.1", "TaskNotFoundError"),
    (-32004, "0.3", "UnsupportedOperationError"),
    (-32006, "1.0", "InvalidAgentResponseError"),
    (-32006, "0.3", "InvalidAgentResponseError"),
    (-32006, "0.1", "StreamingNotSupportedError"),
    (-32007, "1.0", "ExtendedAgentCardNotConfiguredError"),
    (-32007, "0.3", "ExtendedAgentCardNotConfiguredError"),
    (-32007, "0.1", "UnauthenticatedError"),
    (-32008, "1.0", "ExtensionSupportRequiredError"),
    (-32008, "0.1", "PermissionDeniedError"),
    (-32009, "1.0", "VersionNotSupportedError"),
    (-32009, "0.1", "InvalidTaskStateError"),
    (-32010, "0.1", "ResourceExhaustedError"),
    (-32011, "0.1", "ResourceUnavailableError"),
    (-32011, "1.0", "A2AError"),
    (-32601, "0.1", "MethodNotFoundError"),
])
def test_jsonrpc_codes_are_read_in_the_version_of_the_call(code, version, expected):
    from a2a_flask.client.errors import from_jsonrpc

    error = from_jsonrpc({"code": code, "message": "boom"}, version)
    assert type(error).__name__ == expected
    assert error.code == code and error.message == "boom" and error.error["code"] == code


def test_the_error_info_reason_wins_over_a_colliding_code():
    from a2a_flask.client.errors import from_jsonrpc

    data = [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "VERSION_NOT_SUPPORTED",
             "domain": "a2a-protocol.org", "metadata": {"supportedVersions": "1.0, 0.3"}}]
    error = from_jsonrpc({"code": -32009, "message": "no", "data": data}, "0.1")
    assert isinstance(error, VersionNotSupportedError)
    assert error.reason == "VERSION_NOT_SUPPORTED"
    assert error.metadata == {"supportedVersions": "1.0, 0.3"}


def test_rest_error_bodies():
    import requests

    from a2a_flask.client.errors import from_rest
    from a2a_flask.errors import A2AError

    response = requests.Response()
    response.status_code = 400
    body = {"error": {"code": 400, "status": "FAILED_PRECONDITION", "message": "done already",
                      "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                   "reason": "TASK_NOT_CANCELABLE", "domain": "a2a-protocol.org"}]}}
    error = from_rest(body, response)
    assert isinstance(error, TaskNotCancelableError) and error.code == -32002
    assert error.status_code == 400 and error.message == "done already"
    unknown = from_rest({"error": {"code": 409, "status": "ABORTED", "message": "x"}}, response)
    assert type(unknown) is A2AError
    response._content = b"<html>Bad gateway</html>"
    response.status_code = 502
    assert isinstance(from_rest(None, response), A2AHTTPError)
    problem = from_rest({"type": "about:blank", "title": "Not Found", "status": 404}, response)
    assert isinstance(problem, A2AHTTPError) and problem.error["title"] == "Not Found"


def test_a_0_3_card_becomes_a_1_0_card_with_its_interfaces():
    from a2a_flask.client.card import choose, interfaces_of, read_card

    card = {
        "protocolVersion": "0.3.0", "name": "Legacy", "description": "d", "version": "3",
        "url": "https://agent.example/rpc", "preferredTransport": "JSONRPC",
        "additionalInterfaces": [{"url": "https://agent.example/rpc", "transport": "JSONRPC"},
                                 {"url": "https://agent.example/grpc", "transport": "GRPC"},
                                 {"url": "/v1", "transport": "HTTP+JSON"}],
        "capabilities": {"streaming": True, "pushNotifications": False},
        "supportsAuthenticatedExtendedCard": True,
        "skills": [{"id": "s", "name": "S", "description": "sd", "tags": ["t"]}],
        "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        "security": [{"bearer": []}],
    }
    model = read_card(card, "https://agent.example/.well-known/agent-card.json")
    assert model.name == "Legacy" and model.capabilities.extended_agent_card is True
    assert [(i.url, i.protocol_binding, i.protocol_version) for i in model.supported_interfaces] == [
        ("https://agent.example/rpc", "JSONRPC", "0.3.0"),
        ("https://agent.example/grpc", "GRPC", "0.3.0"),
        ("https://agent.example/v1", "HTTP+JSON", "0.3.0")]
    assert model.security_requirements[0].schemes["bearer"].list == []
    assert model.skills[0].tags == ["t"]
    chosen = choose(interfaces_of(card, "https://agent.example/", fallback=True))
    assert (chosen.protocol_binding, chosen.protocol_version) == ("JSONRPC", "0.3.0")
    forced = choose(interfaces_of(card, "https://agent.example/", fallback=True), "0.1")
    assert (forced.url, forced.protocol_version) == ("https://agent.example/rpc", "0.1")
    with pytest.raises(A2AException, match=r"HTTP\+JSON 0.3.0 at /v1"):
        choose(interfaces_of(card), "rest")  # 0.3 REST is not spoken


def test_card_generations_and_interface_ranking():
    from a2a_flask.client.card import card_generation, choose, generation, interfaces_of, matches

    assert card_generation({"url": "http://x", "name": "seed"}) == "0.1"
    assert card_generation({"url": "http://x", "protocolVersion": "0.2.5"}) == "0.3"
    assert generation("1.0.1") == "1.0" and generation("0.2.6") == "0.3" and generation("0.1") == "0.1"
    v1 = {"supportedInterfaces": [
        {"url": "grpc.example:443", "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {"url": "/legacy", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
        {"url": "/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0", "tenant": "t1"},
        {"url": "/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}]}
    found = interfaces_of(v1, "https://h/.well-known/agent-card.json", fallback=True)
    best = choose(found)  # the first 1.0 interface this client speaks, in card order
    assert (best.url, best.protocol_binding, best.tenant) == ("https://h/rest", "HTTP+JSON", "t1")
    assert choose(found, "jsonrpc").url == "https://h/rpc"
    assert choose(found, ["0.1", "jsonrpc@0.3"]).url == "https://h/legacy"
    assert matches("rest@1.0", best) and matches("HTTP+JSON 1.0", best) and matches("v1", best)
    assert not matches("jsonrpc", best) and not matches("0.3", best)


def test_1_0_card_interface_tenant_is_used(agent_server):
    from a2a_flask.client.card import interfaces_of

    card = {"name": "Tenanted", "description": "d", "version": "1",
            "supportedInterfaces": [{"url": agent_server.url + "/a2a/rest",
                                     "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0",
                                     "tenant": "blue"}],
            "capabilities": {}, "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"], "skills": []}
    assert interfaces_of(card)[0].tenant == "blue"
    with LocalHTTP({"/.well-known/agent-card.json": card}) as cards:
        with A2AClient.connect(cards.url) as blue:
            assert blue.transport.tenant == "blue"
            task = blue.send_message("in blue")
            assert blue.get_task(task.id).id == task.id
        with A2AClient(agent_server.url + "/a2a") as default:
            with pytest.raises(TaskNotFoundError):
                default.get_task(task.id)


class FakeBody:
    """A response body that arrives in the given pieces."""

    def __init__(self, pieces):
        self.pieces = list(pieces)
        self.chunked = False

    def read1(self, amt=-1):
        return self.pieces.pop(0) if self.pieces else b""

    def close(self):
        pass


def sse_events(*pieces):
    import requests

    from a2a_flask.client.stream import iter_sse

    response = requests.Response()
    response.raw = FakeBody(pieces)
    return list(iter_sse(response))


def test_sse_parsing_rules():
    events = sse_events(b": comment\r\n", b"id: 7\r", b"\nevent: error\r\ndata: {\"a\":\r\n",
                        b"data: 1}\r\n\r\n", b"data: second\n\n", b"id: 8\ndata: cut short")
    assert [(e.id, e.event, e.data) for e in events] == [
        ("7", "error", '{"a":\n1}'),
        ("7", "message", "second"),  # an id stays until the next one
    ]
    assert sse_events(b"data:no space\n\ndata: \xe2\x80", b"\xa8 sep\n\n")[1].data == "\u2028 sep"


def test_event_stream_reattaches_skips_duplicates_and_gives_up():
    from a2a_flask.client.stream import EventStream, StreamItem

    def status(seq, state=m.TaskState.WORKING):
        event = m.TaskStatusUpdateEvent(task_id="t1", context_id="c1",
                                        status=m.TaskStatus(state=state))
        return StreamItem(event, str(seq), state.terminal)

    log = [status(1), status(2), status(3), status(4), status(5, m.TaskState.COMPLETED)]
    resumed_from = []

    def broken(upto):
        def items():
            yield from log[:upto]
            raise A2AConnectionError("cut")
        return items()

    def resume(task_id, last_id):
        resumed_from.append(last_id)
        # A server replaying one event too many: the client must drop it.
        return iter(log[int(last_id) - 2:])

    stream = EventStream(broken(3), resume=resume, backoff=0)
    seen = [e.status.state for e in stream]
    assert seen == [m.TaskState.WORKING] * 4 + [m.TaskState.COMPLETED]
    assert resumed_from == ["3"] and stream.reconnects == 1 and stream.last_event_id == "5"

    always_broken = EventStream(broken(2), resume=lambda t, i: broken(0), max_reconnects=2,
                                backoff=0)
    with pytest.raises(A2AConnectionError):
        list(always_broken)
    assert always_broken.reconnects == 2

    before_any_event = EventStream(broken(0), resume=resume, backoff=0)
    with pytest.raises(A2AConnectionError):
        list(before_any_event)
    assert before_any_event.reconnects == 0


def test_event_stream_reports_the_final_task_when_it_cannot_reattach():
    from a2a_flask.client.stream import EventStream, StreamItem

    first = m.Task(id="t1", context_id="c1", status=m.TaskStatus(state=m.TaskState.WORKING))
    done = m.Task(id="t1", context_id="c1", status=m.TaskStatus(state=m.TaskState.COMPLETED))

    def items():
        yield StreamItem(first)
        raise A2AConnectionError("cut")

    def refused(task_id, last_id):
        raise UnsupportedOperationError("terminal task")

    stream = EventStream(items(), resume=refused, refresh=lambda task_id: done, backoff=0)
    assert list(stream) == [first, done]


def test_legacy_shapes_become_1_0_models():
    from a2a_flask.client.wire import event_from_v01, event_from_v03, push_config_in, task_in

    task03 = {"kind": "task", "id": "t", "contextId": "c",
              "status": {"state": "input-required", "message": {
                  "kind": "message", "messageId": "m", "role": "agent",
                  "parts": [{"kind": "text", "text": "Which city?"}]}},
              "artifacts": [{"artifactId": "a", "parts": [
                  {"kind": "file", "file": {"bytes": "aGk=", "mimeType": "text/plain", "name": "f"}},
                  {"kind": "file", "file": {"uri": "https://x/y"}},
                  {"kind": "data", "data": {"k": 1}}]}]}
    task, final = event_from_v03(task03)
    assert not final and task.status.state is m.TaskState.INPUT_REQUIRED
    assert task.status.message.role is m.Role.AGENT and task.status.message.text == "Which city?"
    raw, url, data = task.artifacts[0].parts
    assert (raw.raw, raw.media_type, raw.filename) == (b"hi", "text/plain", "f")
    assert url.url == "https://x/y" and data.data == {"k": 1}
    update, final = event_from_v03({"kind": "status-update", "taskId": "t", "contextId": "c",
                                    "status": {"state": "working"}, "final": True})
    assert final and update.status.state is m.TaskState.WORKING
    seed = m.Task
    from a2a_flask.client.wire import decode_model
    task01 = decode_model(seed, task_in({"id": "t", "sessionId": "s", "status": {"state": "cancelled"},
                                         "artifacts": [{"index": 2, "parts": [{"type": "text",
                                                                               "text": "x"}]}]}))
    assert task01.context_id == "s" and task01.status.state is m.TaskState.CANCELED
    assert task01.artifacts[0].artifact_id == "2"
    chunk, final = event_from_v01({"id": "t", "artifact": {"index": 0, "append": True,
                                                           "parts": [{"type": "text", "text": "y"}]}},
                                  "s")
    assert (chunk.task_id, chunk.context_id, chunk.append, chunk.artifact.artifact_id) == \
        ("t", "s", True, "0")
    config = push_config_in({"taskId": "t", "pushNotificationConfig": {
        "id": "p", "url": "https://hook", "authentication": {"schemes": ["Bearer"]}}})
    assert (config.task_id, config.id, config.authentication.scheme) == ("t", "p", "Bearer")


def test_messages_are_built_from_text_files_and_data(tmp_path):
    from a2a_flask.client import data_part, file_part, make_message

    image = tmp_path / "pic.png"
    image.write_bytes(b"\x89PNG")
    message = make_message("look", file=image, data=[1, 2], context_id="c")
    assert message.role is m.Role.USER and message.message_id and message.context_id == "c"
    text, picture, data = message.parts
    assert text.text == "look"
    assert (picture.raw, picture.filename, picture.media_type) == (b"\x89PNG", "pic.png", "image/png")
    assert data.data == [1, 2] and data.media_type == "application/json"
    unknown = tmp_path / "blob.weird-ext"
    unknown.write_bytes(b"?")
    assert file_part(unknown).media_type == "application/octet-stream"
    assert data_part(None).data is None
    with pytest.raises(ValueError):
        make_message()
