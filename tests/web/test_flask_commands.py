"""``flask a2a ...``: the commands init_app adds to the app's ``flask`` command, through
Flask's CliRunner and as real ``flask --app examples.echo_agent`` processes."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from typing import Any, Dict, List

import pytest

from a2a_flask.protocol.models import TaskPushNotificationConfig, TaskState
from a2a_flask.stores import copy as copy_module
from a2a_flask.stores.base import PushTarget
from a2a_flask.web.commands import tasks as task_commands

from tests.conftest import (REDIS_URL, drop_redis_prefix, drop_sql_database, make_card, redis_up,
                            sql_test_url)
from tests.support.helpers import ROOT, Server, WebhookReceiver, user_message, wait_until
from tests.support.wire import rpc, stream

pytestmark = [pytest.mark.timeout(120), pytest.mark.declare(server=[
    "test_doctor_reports_the_store_the_settings_and_their_sources",
    "test_cancel_from_the_command_line_stops_a_task_a_server_runs",
    "test_copy_sqlite_to_postgresql_then_serve_it",
    "test_flask_command_on_the_echo_example",
    "test_flask_command_says_why_the_app_does_not_load"], slow=[
    "target_url",
    "test_bad_input_is_one_line_and_exit_status_1",
    "test_create_tables_on_postgresql_and_on_a_store_without_tables",
    "test_flask_command_on_the_echo_example",
    "test_flask_command_says_why_the_app_does_not_load",
    "test_cancel_from_the_command_line_stops_a_task_a_server_runs",
    "test_copy_sqlite_to_postgresql_then_serve_it"])]


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


@pytest.fixture
def agent_app(make_app, tmp_path):
    """An agent on SQLite.  Its card declares no webhooks, so that no delivery moves
    their cursors while a test compares them: :func:`fill` stores them itself."""
    return make_app(chunky, store=f"sqlite:///{tmp_path}/tasks.db")


def run(app, *args: str):
    return app.test_cli_runner().invoke(args=["a2a", *args])


def send(client, text: str, **params: Any) -> Dict[str, Any]:
    body = rpc(client, "SendMessage", {"message": user_message(text, f"m-{text}-{time.time()}"),
                                       **params})
    return body["result"]["task"]


def fill(client, store) -> List[str]:
    """Three tasks: a streamed one with two webhooks (one of them some way through its
    deliveries), a paused one, and a short one."""
    first = stream(client, "SendStreamingMessage", {
        "message": user_message("one two three four", "m-stream")})
    streamed = first[0]["data"]["result"]["task"]["id"]
    for number, (delivered, failures) in enumerate([(3, 1), (0, 0)]):
        config = TaskPushNotificationConfig(id=f"hook-{number}", task_id=streamed,
                                            url=f"https://hooks.example.com/{number}",
                                            token="secret-token")
        store.put_push_target(streamed, PushTarget(config, "1.0", "", delivered, failures))
    asked = send(client, "ask")["id"]
    short = send(client, "hi")["id"]
    return [streamed, asked, short]


def store_of(app):
    return app.extensions["a2a"]["a2a"].store


# ------------------------------------------------------------------ tasks, task


def test_tasks_lists_every_task_newest_first(agent_app):
    ids = fill(agent_app.test_client(), store_of(agent_app))
    result = run(agent_app, "tasks")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].split() == ["ID", "STATE", "UPDATED", "CONTEXT", "OWNER", "EVENTS"]
    assert [line.split()[0] for line in lines[1:4]] == list(reversed(ids))
    assert lines[1].split()[1] == "completed" and lines[2].split()[1] == "input-required"
    assert lines[-1] == "3 of 3 tasks (every caller)."


def test_tasks_filters_and_limits(agent_app):
    streamed, asked, short = fill(agent_app.test_client(), store_of(agent_app))
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
    ids = fill(agent_app.test_client(), store_of(agent_app))
    result = run(agent_app, "tasks", "--json")
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    assert body["totalSize"] == 3 and [t["id"] for t in body["tasks"]] == list(reversed(ids))
    assert body["tasks"][0]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert all("history" not in t for t in body["tasks"])


def test_task_shows_one_task(agent_app):
    client = agent_app.test_client()
    streamed = fill(client, store_of(agent_app))[0]
    result = run(agent_app, "task", streamed)
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"Task      {streamed}" in out and "State     completed" in out
    assert "Message   done" in out
    assert "words: one two three four" in out
    assert "hook-0: https://hooks.example.com/0 (delivered through event 3)" in out
    body = json.loads(run(agent_app, "task", streamed, "--json", "--history", "0").output)
    got = rpc(client, "GetTask", {"id": streamed, "historyLength": 0})["result"]
    assert body == got


@pytest.mark.parametrize("args, message", [
    (["tasks", "--state", "finished"], "Error: unknown state 'finished': use one of submitted"),
    (["task", "nope"], "Error: no task 'nope' in the store"),
    (["task", "a\x1bb"], "Error: ID contains control characters"),
    (["cancel", "x" * 2000], "Error: ID is longer than"),
    (["cancel", "nope"], "Error: no task 'nope' in the store"),
    (["purge", "--older-than", "7 days"], "Error: --older-than '7 days' is not an age"),
    (["purge", "--finished-before", "yesterday"], "Error: --finished-before 'yesterday' is not"),
    (["purge"], "Error: give one of --finished-before DATE or --older-than AGE"),
    (["copy-store", "nosuch://x"], "Error: cannot open the source store nosuch://x: unknown"),
    (["copy-store", "redis://127.0.0.1:1/0"],
     "Error: task store unavailable: ConnectionError: Error 111 connecting to 127.0.0.1:1"),
    (["copy-store", "sqlite:///nowhere/tasks.db"],
     "Error: there is no sqlite store at /nowhere/tasks.db"),
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
    streamed, asked, short = fill(agent_app.test_client(), store_of(agent_app))
    dry = run(agent_app, "purge", "--finished-before", "2999-01-01T00:00:00+01:00", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert dry.output.startswith("2 finished tasks last updated before 2998-12-31T23:00:00.000Z")
    assert "would be deleted (dry run)" in dry.output
    assert run(agent_app, "purge", "--older-than", "1.5d").output.startswith("0 finished tasks")
    result = run(agent_app, "purge", "--finished-before", "2999-01-01")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == "Deleted 2 tasks."
    store = agent_app.extensions["a2a"]["a2a"].store
    assert store.task_ids() == [asked]


def test_purge_deletes_a_large_store_in_steps(agent_app, monkeypatch):
    monkeypatch.setattr(task_commands, "PAGE", 2)  # steps of 10 tasks
    store = store_of(agent_app)
    from a2a_flask.protocol.models import Task, TaskStatus
    from a2a_flask.stores.base import TaskRecord

    for number in range(25):
        stamp = f"2025-01-01T00:00:{number // 2:02d}.000Z"  # ties across step bounds
        task = Task(id=f"t{number:02d}", context_id="c",
                    status=TaskStatus(state=TaskState.COMPLETED, timestamp=stamp))
        store.create(TaskRecord(task, 1), task)
    result = run(agent_app, "purge", "--finished-before", "2025-01-01T00:00:12Z")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0].startswith("24 finished tasks last updated before")
    assert result.output.splitlines()[-1] == "Deleted 24 tasks."
    assert store.task_ids() == ["t24"]


# ------------------------------------------------------------------ copy-store


@pytest.fixture(params=["sqlite", "shelve", "redis", "postgresql", "mariadb"])
def target_url(request, tmp_path):
    """A fresh store of each kind to copy into (Redis: a key prefix of its own;
    PostgreSQL: a schema of its own), dropped afterwards."""
    kind = request.param
    if kind == "redis":
        redis_up()
        prefix = f"a2atest-copy-{uuid.uuid4().hex[:10]}"
        request.addfinalizer(lambda: drop_redis_prefix(prefix))
        return f"{REDIS_URL}?prefix={prefix}"
    if kind in ("postgresql", "mariadb"):
        name = f"a2atest_{uuid.uuid4().hex[:12]}"
        url = sql_test_url(kind, name)
        request.addfinalizer(lambda: drop_sql_database(kind, name))
        return url
    return f"{kind}:///{tmp_path}/copy/tasks"


def answers(client, seqs: Dict[str, int]) -> Dict[str, Any]:
    """What a server says about the tasks: GetTask, ListTasks, and SubscribeToTask
    resumed after each event of each task (Last-Event-ID)."""
    said: Dict[str, Any] = {"list": rpc(client, "ListTasks", {})["result"]}
    for task_id in seqs:
        task = rpc(client, "GetTask", {"id": task_id})["result"]
        said[task_id] = task
        for last in range(1, seqs[task_id]):
            said[f"{task_id}@{last}"] = stream(client, "SubscribeToTask", {"id": task_id},
                                               headers={"Last-Event-ID": str(last)})
    return said


def kept(store, task_id: str):
    """All a store keeps of a task: its record's fields, its log and its webhooks."""
    record = store.load(task_id)
    return (record.task, record.seq, record.tenant, record.owner, record.dialect,
            record.created_at, list(store.entries(task_id, 0)), store.push_targets(task_id))


def test_copy_store_copies_tasks_logs_and_webhooks_exactly(agent_app, make_app, target_url,
                                                           tmp_path, monkeypatch):
    monkeypatch.setattr(copy_module, "BATCH", 2)  # long logs go in several appends
    ids = fill(agent_app.test_client(), store_of(agent_app))
    source = agent_app.extensions["a2a"]["a2a"].store
    source_url = f"sqlite:///{tmp_path}/tasks.db"
    result = run(agent_app, "copy-store", source_url, "--to", target_url)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1].startswith(f"Copied 3 tasks from {source_url} to ")
    assert "0 finished from an earlier run, 0 already there." in result.output
    served = make_app(chunky, store=target_url)
    target = store_of(served)
    for task_id in ids:
        assert kept(target, task_id) == kept(source, task_id)
    seqs = {task_id: source.head(task_id)[0] for task_id in ids}
    assert answers(served.test_client(), seqs) == answers(agent_app.test_client(), seqs)
    again = run(agent_app, "copy-store", source_url, "--to", target_url)
    assert again.exit_code == 0, again.output
    assert "Copied 0 tasks" in again.output and "3 already there." in again.output
    # And back, from this kind of store, into a file of another kind.
    back_url = f"shelve://{tmp_path}/back/tasks"
    back = run(agent_app, "copy-store", target_url, "--to", back_url)
    assert back.exit_code == 0, back.output
    from a2a_flask.stores import open_store

    copy = open_store(back_url)
    try:
        assert [kept(copy, task_id) for task_id in ids] == [kept(source, i) for i in ids]
    finally:
        copy.close()


def test_copy_store_keeps_a_history_the_runtime_trimmed(make_app, target_url, tmp_path,
                                                        monkeypatch):
    monkeypatch.setattr(copy_module, "BATCH", 1)
    app = make_app(chunky, store=f"sqlite://{tmp_path}/trimmed.db", max_history=2)
    client = app.test_client()
    task = send(client, "ask")
    for turn in range(3):
        rpc(client, "SendMessage", {"message": user_message(
            "ask", f"m-turn-{turn}", taskId=task["id"], contextId=task["contextId"])})
    source = store_of(app)
    assert len(source.load(task["id"]).task.history) == 2
    result = run(app, "copy-store", f"sqlite://{tmp_path}/trimmed.db", "--to", target_url)
    assert result.exit_code == 0, result.output
    target = make_app(chunky, store=target_url, max_history=2)
    assert kept(store_of(target), task["id"]) == kept(source, task["id"])


def test_copy_store_finishes_an_interrupted_copy_and_refuses_other_tasks(agent_app, tmp_path):
    streamed, asked, short = fill(agent_app.test_client(), store_of(agent_app))
    source = agent_app.extensions["a2a"]["a2a"].store
    target_url = f"sqlite:///{tmp_path}/copy.db"
    from a2a_flask.stores import open_store
    from a2a_flask.stores.base import TaskRecord

    target = open_store(target_url)
    # An earlier run stopped after the first two events of the streamed task.
    first, second = list(source.entries(streamed, 0, through=2))
    record = source.load(streamed)
    start = TaskRecord(first.event, 1, record.tenant, record.owner, record.dialect,
                       record.created_at)
    target.create(start, first.event)
    target.append(streamed, 1, [second.event], start.after([second.event]))
    # Another task under the id of the short one.
    other = source.load(short)
    other_first = next(iter(source.entries(short, 0)))
    target.create(TaskRecord(other_first.event, 1, "elsewhere", "mallory"), other_first.event)
    target.close()
    result = run(agent_app, "copy-store", f"sqlite:///{tmp_path}/tasks.db", "--to", target_url)
    assert result.exit_code == 1
    assert "Copied 1 tasks" in result.output and "1 finished from an earlier run" in result.output
    assert result.output.splitlines()[-1] == (
        f"Error: 1 tasks were not copied, the target holds other tasks under their ids: "
        f"{short} (the target's task belongs to another caller)")
    target = open_store(target_url)
    try:
        assert kept(target, streamed) == kept(source, streamed)
        assert target.load(short).owner == "mallory" and other.owner == ""
    finally:
        target.close()


def test_copy_store_into_the_apps_own_store(make_app, agent_app, tmp_path):
    ids = fill(agent_app.test_client(), store_of(agent_app))
    other = make_app(chunky, store=f"shelve:///{tmp_path}/other/tasks")
    result = run(other, "copy-store", f"sqlite:///{tmp_path}/tasks.db")
    assert result.exit_code == 0, result.output
    assert sorted(other.extensions["a2a"]["a2a"].store.task_ids()) == sorted(ids)
    assert run(other, "copy-store", f"shelve:///{tmp_path}/other/tasks").output == (
        "Error: the source and the target are the same store\n")


# ------------------------------------------------------------------ create-tables, doctor


def test_create_tables_on_postgresql_and_on_a_store_without_tables(make_app, agent_app):
    name = f"a2atest_{uuid.uuid4().hex[:12]}"
    url = sql_test_url("postgresql", name)
    try:
        app = make_app(store=url)
        result = run(app, "create-tables")  # loading the app created none (no store call yet)
        assert result.exit_code == 0, result.output
        assert result.output.startswith("Created a2a_tasks, a2a_events, a2a_leases, "
                                        "a2a_push_targets, a2a_claims; all 5 tables are in "
                                        "place in postgresql"), result.output
        assert f"(schema {name})" in result.output
        result = run(app, "create-tables")
        assert result.output.startswith("All 5 tables are in place in postgresql")
        import sqlalchemy as sa

        engine = store_of(app).engine
        with engine.begin() as conn:
            conn.execute(sa.text(f'DROP TABLE "{name}".a2a_claims'))
        result = run(app, "create-tables")
        assert result.output.startswith(
            "Created a2a_claims; all 5 tables are in place in postgresql"), result.output
    finally:
        drop_sql_database("postgresql", name)
    result = run(agent_app, "create-tables")
    assert result.output == "The SQLiteStore keeps no SQL tables: nothing to create.\n"


def test_doctor_reports_the_store_the_settings_and_their_sources(make_app, monkeypatch, tmp_path):
    from flask import Flask
    from a2a_flask import A2A

    monkeypatch.setenv("FLASK_A2A_TASK_TTL", "60")
    monkeypatch.setenv("A2A_LEASE_TTL", "10")  # read by nothing: a warning
    monkeypatch.setenv("WEB_CONCURRENCY", "4")
    app = Flask("doctored")
    app.config.from_prefixed_env()
    app.config["A2A_PUSH_ALLOW_PRIVATE"] = True
    A2A(app, card=make_card(), executor=chunky, inspector=True)
    result = run(app, "doctor")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == "Agent 'a2a' (Test agent 1.0.0) at /a2a"
    assert lines[1].startswith("  ok     store MemoryStore 'memory://' answered in ")
    assert "  set    A2A_TASK_TTL = 60.0  (environment FLASK_A2A_TASK_TTL)" in lines
    assert "  set    A2A_PUSH_ALLOW_PRIVATE = True  (app.config)" in lines
    assert "  set    A2A_INSPECTOR = True  (A2A(inspector=...))" in lines
    warnings = [line for line in lines if line.startswith("  warn")]
    assert len(warnings) == 4, warnings
    assert "asks gunicorn for 4 workers" in warnings[0]
    assert "A2A_INSPECTOR is on outside debug mode" in warnings[1]
    assert "A2A_PUSH_ALLOW_PRIVATE is on" in warnings[2]
    assert "A2A_LEASE_TTL is set in the environment but the app does not read it" in warnings[3]
    assert lines[-1] == "0 errors, 4 warnings."
    strict = run(app, "doctor", "--strict")
    assert strict.exit_code == 1 and strict.output.splitlines()[-1] == "Error: 0 errors, 4 warnings"
    for state in app.extensions["a2a"].values():
        state.close()


def test_doctor_fails_when_the_store_stops_answering(agent_app):
    store_of(agent_app).close()  # the file is closed: every read fails
    result = run(agent_app, "doctor")
    assert result.exit_code == 1
    assert "  error  store SQLiteStore" in result.output
    assert result.output.splitlines()[-1] == "Error: 1 error, 0 warnings"


def test_an_app_with_two_agents_needs_agent(make_app, tmp_path):
    from a2a_flask import A2A

    app = make_app(store=f"sqlite://{tmp_path}/one.db")
    A2A(app, card=make_card(name="Second"), executor=chunky, name="second",
        url_prefix="/second", store=f"sqlite://{tmp_path}/two.db")
    result = run(app, "tasks")
    assert result.output == ("Error: this app has several agents (a2a, second): choose one "
                             "with flask a2a --agent NAME ...\n")
    assert run(app, "--agent", "second", "tasks").output == "No tasks.\n"
    doctor = run(app, "doctor")
    assert doctor.exit_code == 0 and "Agent 'second' (Second 1.0.0) at /second" in doctor.output
    assert f"  set    A2A_STORE = 'sqlite://{tmp_path}/two.db'  (A2A(store=...))" in doctor.output
    app.extensions["a2a"]["second"].close()


# ------------------------------------------------------------------ real flask processes


def flask(*args: str, env: Dict[str, str], app: str = "examples.echo_agent"):
    return subprocess.run([sys.executable, "-m", "flask", "--app", app, "a2a", *args],
                          cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=60)


@pytest.mark.parametrize("kind", ["sqlite", "redis", "postgresql"])
def test_flask_command_on_the_echo_example(kind, request, tmp_path):
    """``flask --app examples.echo_agent a2a ...`` as a user runs it, on each kind of
    shared store: the store it names answers, with the tasks an app put there."""
    url = f"sqlite://{tmp_path}/echo.db"
    if kind == "redis":
        redis_up()
        prefix = f"a2atest-echo-{uuid.uuid4().hex[:10]}"
        request.addfinalizer(lambda: drop_redis_prefix(prefix))
        url = f"{REDIS_URL}?prefix={prefix}"
    elif kind == "postgresql":
        name = f"a2atest_{uuid.uuid4().hex[:12]}"
        url = sql_test_url(kind, name)
        request.addfinalizer(lambda: drop_sql_database(kind, name))
    env = {"FLASK_A2A_STORE": url}
    done = flask("doctor", env=env)
    assert done.returncode == 0, done.stderr
    assert "  ok     store " in done.stdout and "(environment FLASK_A2A_STORE)" in done.stdout
    from a2a_flask import A2A
    from flask import Flask

    app = Flask("filler")
    A2A(app, card=make_card(), executor=chunky, store=url)
    task = send(app.test_client(), "one two")
    app.extensions["a2a"]["a2a"].close()
    listed = flask("tasks", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    assert [t["id"] for t in json.loads(listed.stdout)["tasks"]] == [task["id"]]
    shown = flask("task", task["id"], env=env)
    assert shown.returncode == 0 and "State     completed" in shown.stdout
    assert flask("create-tables", env=env).returncode == 0
    purged = flask("purge", "--finished-before", "2999-01-01", env=env)
    assert purged.stdout.splitlines()[-1] == "Deleted 1 tasks.", purged.stdout + purged.stderr


def test_flask_command_says_why_the_app_does_not_load():
    # The group is a flask.commands plugin (setup.cfg): found before the app loads.
    done = flask("doctor", env={"FLASK_A2A_STORE": "redis://127.0.0.1:notaport/0"})
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr
    assert "cannot use the redis store URL redis://127.0.0.1:notaport/0" in done.stderr
    # A store that is down is no reason not to load the app: doctor loads it and says so.
    down = flask("doctor", env={"FLASK_A2A_STORE": "redis://127.0.0.1:1/0"})
    assert down.returncode != 0
    assert "Traceback" not in down.stderr, down.stderr
    assert "Connection refused" in down.stdout + down.stderr
    bad = flask("tasks", "--state", "nope", env={"FLASK_A2A_STORE": "memory://"})
    assert bad.returncode == 1 and bad.stderr.startswith("Error: unknown state 'nope'")


# ------------------------------------------------------------------ real servers


def served_answers(server: Server, seqs: Dict[str, int]) -> Dict[str, Any]:
    """:func:`answers`, from a real server."""
    said: Dict[str, Any] = {"list": server.rpc("ListTasks", {})["result"]}
    for task_id, seq in seqs.items():
        said[task_id] = server.rpc("GetTask", {"id": task_id})["result"]
        for last in range(1, seq):
            said[f"{task_id}@{last}"] = list(server.stream(
                "SubscribeToTask", {"id": task_id}, headers={"Last-Event-ID": str(last)}))
    return said


def test_cancel_from_the_command_line_stops_a_task_a_server_runs(tmp_path):
    """``flask a2a cancel`` in its own process cancels a task a gunicorn worker runs:
    the worker's keeper stops the executor, its stream and its webhook see CANCELED.
    (On Redis: under a loaded machine a webhook drain's SQLite reads can hold a
    gevent worker's hub past the watchdog's 0.1 s, which is the SQLite store's
    own affair, not this command's.)"""
    redis_up()
    prefix = f"a2atest-cancel-{uuid.uuid4().hex[:10]}"
    app = "tests.support.fault_app"  # "wait": works until canceled, however slow the command
    env = {"FLASK_A2A_STORE": f"{REDIS_URL}?prefix={prefix}", "FLASK_A2A_PUSH_ALLOW_PRIVATE": "1"}
    try:
        with WebhookReceiver() as receiver, Server(f"{app}:app", env=env) as server:
            slow = server.rpc("SendMessage", {
                "message": user_message("wait", uuid.uuid4().hex),
                "configuration": {"returnImmediately": True,
                                  "taskPushNotificationConfig": {"url": receiver.hook()}},
            })["result"]["task"]["id"]
            seen: List[Dict[str, Any]] = []
            watcher = threading.Thread(target=lambda: seen.extend(
                server.stream("SubscribeToTask", {"id": slow})), daemon=True)
            watcher.start()
            done = flask("cancel", slow, env=env, app=app)
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith(f"Task {slow} canceled (it was working)")
            watcher.join(20)
            assert seen[-1]["data"]["result"]["statusUpdate"]["status"]["state"] == (
                "TASK_STATE_CANCELED")
            receiver.wait_for(lambda got: any(
                "TASK_STATE_CANCELED" in json.dumps(push["json"]) for push in got))
    finally:
        drop_redis_prefix(prefix)


def test_copy_sqlite_to_postgresql_then_serve_it(tmp_path):
    """The whole path: a store filled by a real server on SQLite, copied to
    PostgreSQL by ``flask a2a copy-store``; a server there answers as the first."""
    app = "examples.conformance_agent"
    source_env = {"FLASK_A2A_STORE": f"sqlite://{tmp_path}/tasks.db"}
    name = f"a2atest_{uuid.uuid4().hex[:12]}"
    target_env = {"FLASK_A2A_STORE": sql_test_url("postgresql", name)}
    try:
        with Server(f"{app}:app", env=source_env) as source:
            ids = []
            for message_id in ("tck-stream-artifact-chunked", "tck-input-required",
                               "tck-stream-artifact-file", "plain"):
                events = list(source.stream("SendStreamingMessage",
                                            {"message": user_message("hi", message_id)}))
                ids.append(events[0]["data"]["result"]["task"]["id"])
            canceled = flask("cancel", ids[1], env=source_env, app=app)
            assert canceled.returncode == 0, canceled.stderr
            copied = flask("copy-store", source_env["FLASK_A2A_STORE"], env=target_env, app=app)
            assert copied.returncode == 0, copied.stderr
            assert copied.stdout.startswith("Copied 4 tasks from sqlite://"), copied.stdout
            from a2a_flask.stores import open_store

            store = open_store(source_env["FLASK_A2A_STORE"])
            seqs = {task_id: store.head(task_id)[0] for task_id in ids}
            store.close()
            with Server(f"{app}:app", env=target_env) as target:
                assert served_answers(target, seqs) == served_answers(source, seqs)
    finally:
        drop_sql_database("postgresql", name)


def test_callers_text_reaches_the_terminal_escaped(agent_app):
    client = agent_app.test_client()
    task = rpc(client, "SendMessage", {"message": user_message(
        "ask \x1b]0;owned\x07 \x9b2J", "m-escapes")})["result"]["task"]
    shown = run(agent_app, "task", task["id"]).output
    assert "\x1b" not in shown and "\x9b" not in shown and "\x07" not in shown
    assert "ask \\x1b]0;owned\\x07 \\x9b2J" in shown
    listed = run(agent_app, "task", task["id"], "--json").output
    assert "\x1b" not in listed and "\x9b" not in listed
    assert json.loads(listed)["history"][0]["parts"][0]["text"].startswith("ask \x1b]0;owned")
