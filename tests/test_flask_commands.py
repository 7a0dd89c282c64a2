"""``flask a2a ...``: the commands init_app adds to the app's ``flask`` command, through
Flask's CliRunner and as real ``flask --app examples.echo_agent`` processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any, Dict, List

import pytest

from a2a_flask import A2A, AgentCapabilities
from a2a_flask.protocol.models import TaskState

from .conftest import make_card
from .helpers import ROOT, V1, rpc, stream, user_message, wait_until

pytestmark = pytest.mark.timeout(120)


def chunky(ctx):
    """Streams each word as an artifact chunk; "ask" pauses for input; "wait" runs
    until it is canceled."""
    if ctx.text == "wait":
        ctx.working("waiting")
        while not ctx.cancelled:
            time.sleep(0.05)
        return None
    if ctx.text == "ask":
        ctx.ask("which city?")
        return None
    ctx.working("chunking")
    for word in ctx.text.split():
        ctx.artifact(word + " ", artifact_id="words", append=True)
    ctx.complete("done")
    return None


PUSH_CARD = make_card(capabilities=AgentCapabilities(streaming=True, push_notifications=True))


@pytest.fixture
def agent_app(make_app, tmp_path):
    return make_app(chunky, card=PUSH_CARD, store=f"sqlite:///{tmp_path}/tasks.db")


def run(app, *args: str):
    return app.test_cli_runner().invoke(args=["a2a", *args])


def send(client, text: str, **params: Any) -> Dict[str, Any]:
    body = rpc(client, "SendMessage", {"message": user_message(text, f"m-{text}-{time.time()}"),
                                       **params})
    return body["result"]["task"]


def fill(client) -> List[str]:
    """Three tasks: a streamed one with a webhook, a paused one, and a short one."""
    hook = {"url": "https://hooks.example.com/a2a", "token": "secret-token"}
    first = stream(client, "SendStreamingMessage", {
        "message": user_message("one two three four", "m-stream"),
        "configuration": {"taskPushNotificationConfig": hook}})
    streamed = first[0]["data"]["result"]["task"]["id"]
    asked = send(client, "ask")["id"]
    short = send(client, "hi")["id"]
    return [streamed, asked, short]


# ------------------------------------------------------------------ tasks, task


def test_tasks_lists_every_task_newest_first(agent_app):
    ids = fill(agent_app.test_client())
    result = run(agent_app, "tasks")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["ID", "STATE", "UPDATED", "CONTEXT", "OWNER", "EVENTS"]
    assert [line.split()[0] for line in lines[1:4]] == list(reversed(ids))
    assert lines[1].split()[1] == "completed" and lines[2].split()[1] == "input-required"
    assert lines[-1] == "3 of 3 tasks (every caller)."


def test_tasks_filters_and_limits(agent_app):
    streamed, asked, short = fill(agent_app.test_client())
    result = run(agent_app, "tasks", "--state", "input-required")
    assert [line.split()[0] for line in result.output.splitlines()[1:-1]] == [asked]
    result = run(agent_app, "tasks", "--state", "TASK_STATE_COMPLETED", "--limit", "1")
    assert [line.split()[0] for line in result.output.splitlines()[1:-1]] == [short]
    assert result.output.splitlines()[-1] == "1 of 2 tasks (every caller)."
    # As ListTasks answers the anonymous caller: tenant '' and owner ''.
    result = run(agent_app, "tasks", "--owner", "", "--limit", "2")
    assert result.output.splitlines()[-1] == "2 of 3 tasks (tenant '', owner '')."
    assert run(agent_app, "tasks", "--owner", "nobody").output == "No tasks.\n"


def test_tasks_json_is_a_list_tasks_response(agent_app):
    ids = fill(agent_app.test_client())
    result = run(agent_app, "tasks", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["totalSize"] == 3 and [t["id"] for t in body["tasks"]] == list(reversed(ids))
    assert body["tasks"][0]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert all("history" not in t for t in body["tasks"])


def test_task_shows_one_task(agent_app):
    client = agent_app.test_client()
    streamed = fill(client)[0]
    result = run(agent_app, "task", streamed)
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"Task      {streamed}" in out and "State     completed" in out
    assert "Message   done" in out
    assert "words: one two three four" in out
    assert "https://hooks.example.com/a2a" in out
    body = json.loads(run(agent_app, "task", streamed, "--json", "--history", "0").output)
    got = rpc(client, "GetTask", {"id": streamed, "historyLength": 0})["result"]
    assert body == got


@pytest.mark.parametrize("args, message", [
    (["tasks", "--state", "finished"], "Error: unknown state 'finished': use one of submitted"),
    (["task", "nope"], "Error: no task 'nope' in the store"),
    (["cancel", "nope"], "Error: no task 'nope' in the store"),
    (["purge", "--older-than", "7 days"], "Error: --older-than '7 days' is not an age"),
    (["purge", "--finished-before", "yesterday"], "Error: --finished-before 'yesterday' is not"),
    (["purge"], "Error: give one of --finished-before DATE or --older-than AGE"),
    (["copy-store", "nosuch://x"], "Error: cannot open the source store nosuch://x: unknown"),
    (["copy-store", "redis://127.0.0.1:1/0"],
     "Error: cannot open the source store redis://127.0.0.1:1/0: cannot reach the redis store"),
    (["--agent", "other", "tasks"], "Error: no agent named 'other' in this app (it has: a2a)"),
])
def test_bad_input_is_one_line_and_exit_status_1(agent_app, args, message):
    result = run(agent_app, *args)
    assert result.exit_code == 1
    assert result.output.startswith(message), result.output
    assert len(result.output.strip().splitlines()) == 1
    assert "Traceback" not in result.output


# ------------------------------------------------------------------ cancel, purge


def test_cancel_stops_the_running_executor_and_streams_see_it(agent_app):
    client = agent_app.test_client()
    task_id = send(client, "wait", configuration={"returnImmediately": True})["id"]
    store = agent_app.extensions["a2a"]["a2a"].store
    wait_until(lambda: store.head(task_id)[1] is TaskState.WORKING, 10, "the task to work")
    result = run(agent_app, "cancel", task_id)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"Task {task_id} canceled (it was working)")
    assert store.head(task_id)[1] is TaskState.CANCELED
    runtime = agent_app.extensions["a2a"]["a2a"].service.runtime
    wait_until(lambda: runtime.local_run(task_id) is None, 10, "the executor to stop")
    again = run(agent_app, "cancel", task_id)
    assert again.exit_code == 1 and "already canceled" in again.output


def test_purge_counts_then_deletes_only_old_finished_tasks(agent_app):
    streamed, asked, short = fill(agent_app.test_client())
    dry = run(agent_app, "purge", "--older-than", "0s", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.output.startswith("2 finished tasks last updated before ")
    assert "would be deleted (dry run)" in dry.output
    assert run(agent_app, "purge", "--finished-before", "2000-01-01").output.startswith(
        "0 finished tasks")
    result = run(agent_app, "purge", "--older-than", "0s")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "Deleted 2 tasks."
    store = agent_app.extensions["a2a"]["a2a"].store
    assert store.task_ids() == [asked]
