"""The Celery runner's run orders travel as JSON, and its worker task takes no other
content, whatever the Celery app's own serializer settings.

An app here sends its own tasks with pickle and accepts pickle; the broker is
kombu's in-memory transport and the worker runs in this process (Celery's testing
worker, solo pool), so nothing outside the test is needed.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from flask import Flask

from a2a_flask import A2A
from a2a_flask.web.celery_runner import TASK_PREFIX

from tests.conftest import make_card
from tests.support.helpers import user_message

pytest.importorskip("celery")

from celery import Celery  # noqa: E402  (after the skip)

TASK_NAME = TASK_PREFIX + "a2a"


#: What unpickling a :class:`Marker` noted: a pickled run order must never get that far.
UNPICKLED: List[str] = []


def _note_unpickled(what: str) -> str:
    UNPICKLED.append(what)
    return what


class Marker:
    """Pickles to a call of :func:`_note_unpickled`, as a crafted payload would to
    any callable."""

    def __reduce__(self) -> Any:
        return _note_unpickled, ("a pickled run order was unpickled",)


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Tuple[Flask, Celery, List[str]]]:
    """A Flask app whose agent's runs go to a Celery app that prefers pickle; the
    texts its executor ran."""
    celery = Celery("pickle_app", broker=f"memory://serializer-{tmp_path.name}",
                    set_as_current=False)
    celery.conf.update(task_serializer="pickle", accept_content=["pickle", "json"],
                       result_serializer="pickle", task_ignore_result=True,
                       task_default_queue=f"q-{tmp_path.name}",
                       broker_connection_retry_on_startup=True)
    ran: List[str] = []
    agent = A2A(card=make_card(), store=f"sqlite:///{tmp_path}/tasks.db", runner="celery",
                celery=celery)
    agent.executor(lambda ctx: ran.append(ctx.text) or f"ran {ctx.text}")
    app = Flask("celery_serializer")
    agent.init_app(app)
    yield app, celery, ran
    app.extensions["a2a"]["a2a"].close()


def _submit(app: Flask, text: str) -> str:
    answer = app.test_client().post("/a2a", headers={"A2A-Version": "1.0"}, json={
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": user_message(text, f"m-{text}"),
                   "configuration": {"returnImmediately": True}}}).get_json()
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED", answer
    return str(task["id"])


def _take_queued(celery: Celery) -> Any:
    """The one message waiting on the app's queue, taken off it."""
    with celery.connection_for_read() as connection:
        queue = connection.SimpleQueue(celery.conf.task_default_queue)
        message = queue.get(timeout=5)
        message.ack()
        queue.close()
    return message


def test_a_run_order_travels_as_json_whatever_the_apps_serializer(agent: Any) -> None:
    app, celery, _ = agent
    assert celery.tasks[TASK_NAME].serializer == "json"  # its retries too
    _submit(app, "hello")
    message = _take_queued(celery)
    assert message.headers["task"] == TASK_NAME
    assert message.content_type == "application/json"
    args, kwargs, _ = message.decode()  # JSON text: plain data, nothing to unpickle
    assert args[0]["agent"] == "a2a" and kwargs == {}


def test_a_pickled_run_order_is_refused_and_a_json_one_runs(agent: Any) -> None:
    """An order sent by hand with pickle (which the app accepts for its own tasks) is
    rejected by the worker before it is unpickled; the same order as JSON then runs
    once."""
    from celery import signals as celery_signals
    from celery.contrib.testing.worker import start_worker

    app, celery, ran = agent
    task_id = _submit(app, "order")
    order: Dict[str, Any] = _take_queued(celery).decode()[0][0]
    rejected: List[BaseException] = []
    json_done = threading.Event()

    def on_rejected(message: Any = None, exc: Any = None, **_: Any) -> None:
        rejected.append(exc)

    def on_done(sender: Any = None, **_: Any) -> None:
        if getattr(sender, "name", None) == TASK_NAME:
            json_done.set()

    celery_signals.task_rejected.connect(on_rejected, weak=False)
    celery_signals.task_postrun.connect(on_done, weak=False)
    try:
        UNPICKLED.clear()
        celery.send_task(TASK_NAME, args=[order, Marker()], serializer="pickle")
        celery.send_task(TASK_NAME, args=[order], serializer="json")
        with start_worker(celery, pool="solo", perform_ping_check=False,
                          shutdown_timeout=10, loglevel="WARNING"):
            assert json_done.wait(30), "the JSON run order never ran"
    finally:
        celery_signals.task_rejected.disconnect(on_rejected)
        celery_signals.task_postrun.disconnect(on_done)
    assert len(rejected) == 1 and "application/json" in str(rejected[0]), rejected
    assert UNPICKLED == []  # refused on its content type, before its body was decoded
    assert ran == ["order"]  # the pickled order ran nothing; the JSON one ran once
    record = app.extensions["a2a"]["a2a"].service.runtime.store.load(task_id)
    assert record.state.value == "TASK_STATE_COMPLETED"
