"""The suite's one way to make a user message, read a task back and wait for its state.

``target`` is where the JSON-RPC ``GetTask`` goes: an app or its Flask test client
(through :mod:`tests.support.wire`), or a real server, anything with an ``rpc(method,
params, path=...)`` that returns the decoded answer (:class:`tests.support.helpers.Server`);
``path`` picks the agent by its endpoint (``/a2a`` by default).
"""
from __future__ import annotations

import time
from typing import Any, Dict, Iterable, Union

from flask import Flask
from flask.testing import FlaskClient

from a2a_flask.protocol.models import new_id

from tests.support import wire
from tests.support.helpers import validate

#: The task states as the 1.0 wire spells them.
SUBMITTED = "TASK_STATE_SUBMITTED"
WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"
FAILED = "TASK_STATE_FAILED"
CANCELED = "TASK_STATE_CANCELED"
REJECTED = "TASK_STATE_REJECTED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"
#: The states a task never leaves.
TERMINAL = frozenset({COMPLETED, FAILED, CANCELED, REJECTED})


def message(text: str = "hello", **extra: Any) -> Dict[str, Any]:
    """A 1.0 user message with a fresh id; ``extra`` adds or replaces members."""
    return {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": text}], **extra}


def message03(text: str = "hi", **extra: Any) -> Dict[str, Any]:
    """The same as a 0.3 JSON-RPC client writes it (``kind`` members, lower-case role)."""
    return {"kind": "message", "role": "user", "messageId": new_id(),
            "parts": [{"kind": "text", "text": text}], **extra}


def call(target: Any, method: str, params: Any = None, *, path: str = "/a2a") -> Dict[str, Any]:
    """A JSON-RPC call on ``target`` (see the module docstring) at its endpoint ``path``;
    the decoded answer."""
    if isinstance(target, (Flask, FlaskClient)):
        return wire.rpc(target, method, params, path=path)
    answer: Dict[str, Any] = target.rpc(method, params, path=path)
    return answer


def get_task(target: Union[Flask, FlaskClient, Any], task_id: str, *, path: str = "/a2a",
             **params: Any) -> Dict[str, Any]:
    """``GetTask`` of ``task_id`` (``params`` such as ``historyLength`` added): the task,
    after checking the call succeeded and the task is valid by the 1.0 schema."""
    answer = call(target, "GetTask", {"id": task_id, **params}, path=path)
    assert "result" in answer, answer
    task: Dict[str, Any] = answer["result"]
    validate(task, "Task")
    return task


def wait_for_state(target: Union[Flask, FlaskClient, Any], task_id: str,
                   states: Iterable[str], timeout: float = 15.0, *,
                   path: str = "/a2a") -> Dict[str, Any]:
    """Read the task until it is in one of ``states`` (returned); fail after ``timeout``
    seconds, saying the state it stayed in."""
    wanted = frozenset(states)
    deadline = time.monotonic() + timeout
    while True:
        task = get_task(target, task_id, path=path)
        if task["status"]["state"] in wanted:
            return task
        assert time.monotonic() < deadline, \
            f"task {task_id} stayed {task['status']}, not {sorted(wanted)}, for {timeout}s"
        time.sleep(0.02)
