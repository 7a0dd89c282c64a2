"""The client's safe retries: one ``Idempotency-Key`` per logical send, tried again when
no answer came (docs/safe-retries.rst).  In-process: an adapter loses answers after the
agent accepted the send.  The real-server case is in tests/server/test_idempotency_servers.py."""
from __future__ import annotations

from typing import Any, List

import pytest
import requests
from flask import Flask

from a2a_flask import A2A
from a2a_flask.client import A2AClient
from a2a_flask.errors import A2AConnectionError, A2AHTTPError, IdempotencyKeyReusedError
from a2a_flask.protocol import models as m
from a2a_flask.stores.base import TaskQuery
from a2a_flask.testing import BASE_URL, FlaskAdapter

from tests.conftest import make_card

RUNS: List[str] = []


def counted(ctx: Any) -> None:
    RUNS.append(ctx.task_id)
    ctx.complete("done")


class Losing(FlaskAdapter):
    """Hands each request to the app, then loses the first ``lose`` answers (a proxy
    that dropped the connection after the agent accepted), or answers them ``status``."""

    def __init__(self, app: Flask, lose: int, status: int = 0) -> None:
        super().__init__(app)
        self.lose, self.status = lose, status
        self.keys: List[str] = []

    def send(self, request: requests.PreparedRequest, *args: Any, **kwargs: Any) -> Any:
        self.keys.append(request.headers.get("Idempotency-Key", ""))
        response = super().send(request, *args, **kwargs)
        if self.lose <= 0:
            return response
        self.lose -= 1
        if self.status:
            response.status_code = self.status
            return response
        raise requests.ConnectionError("connection reset by peer (after the agent accepted)")


@pytest.fixture
def app():
    RUNS.clear()
    made = Flask("retries")
    A2A(made, card=make_card(), executor=counted, store="memory://")
    yield made
    made.extensions["a2a"]["a2a"].close()


def client_for(app: Flask, adapter: FlaskAdapter, **options: Any) -> A2AClient:
    session = requests.Session()
    session.mount("http://", adapter)
    return A2AClient(BASE_URL + "/a2a", session=session, retry_backoff=0.001, **options)


def tasks_in(app: Flask) -> int:
    return len(app.extensions["a2a"]["a2a"].store.list_tasks(TaskQuery()).records)


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
def test_a_lost_answer_is_asked_again_and_the_agent_runs_once(app, binding):
    adapter = Losing(app, lose=2)
    client = client_for(app, adapter, binding=binding)
    if binding == "HTTP+JSON":
        client = A2AClient(BASE_URL + "/a2a/rest", binding=binding, session=client.session,
                           retry_backoff=0.001)
    task = client.send_message("hi")
    assert isinstance(task, m.Task) and task.status.state is m.TaskState.COMPLETED
    assert len(adapter.keys) == 3 and len(set(adapter.keys)) == 1 and adapter.keys[0]
    assert RUNS == [task.id] and tasks_in(app) == 1
    client.send_message("hi")  # another logical send: another key
    assert len(set(adapter.keys)) == 2 and len(RUNS) == 2


def test_a_lost_stream_is_asked_again_and_replays_the_first_run(app):
    adapter = Losing(app, lose=1)
    events = list(client_for(app, adapter).send_streaming_message("hi"))
    assert isinstance(events[-1], m.TaskStatusUpdateEvent) or events[-1].status.state.terminal
    assert len(RUNS) == 1 and tasks_in(app) == 1 and len(set(adapter.keys)) == 1


def test_503_is_tried_again_and_the_retries_are_bounded(app):
    adapter = Losing(app, lose=10, status=503)
    with pytest.raises(A2AHTTPError) as caught:
        client_for(app, adapter, retries=2).send_message("hi")
    assert caught.value.status_code == 503
    assert len(adapter.keys) == 3 and len(RUNS) == 1  # each try the same send


def test_connection_errors_end_the_send_after_the_retries(app):
    adapter = Losing(app, lose=10)
    with pytest.raises(A2AConnectionError):
        client_for(app, adapter, retries=1).send_message("hi")
    assert len(adapter.keys) == 2 and len(RUNS) == 1


def test_no_retries_and_no_key_when_not_idempotent(app):
    adapter = Losing(app, lose=1)
    with pytest.raises(A2AConnectionError):
        client_for(app, adapter, idempotent=False).send_message("hi")
    assert adapter.keys == [""]


def test_a_key_given_by_the_caller_is_sent_and_checked(app):
    adapter = Losing(app, lose=0)
    client = client_for(app, adapter)
    first = client.send_message("hi", idempotency_key="order-42")
    again = client.send_message(m.Message(role=m.Role.USER, message_id="other",
                                          parts=[m.Part(text="hi")]),
                                idempotency_key="order-43")
    assert first.id != again.id
    with pytest.raises(IdempotencyKeyReusedError):
        client.send_message("something else", idempotency_key="order-42")
    assert adapter.keys == ["order-42", "order-43", "order-42"]
