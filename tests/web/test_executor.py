"""The agent author's API: TaskContext and what an executor's return, yield or raise becomes."""
from __future__ import annotations

import base64
import threading
import time
from typing import Any, Dict, List, Optional

import pytest
from flask import current_app

from a2a_flask import Artifact, Message, Part, Role, TaskState
from a2a_flask.engine.states import TaskClosedError

from tests.conftest import make_card
from tests.support import wire
from tests.support.helpers import parse_sse, user_message, validate
from tests.support.tasks import COMPLETED, get_task
from tests.support.wire import mimetype, rpc


# ----------------------------------------------------------------- helpers


def run_task(client, message: Optional[Dict[str, Any]] = None, **configuration: Any) -> Dict[str, Any]:
    """SendMessage (blocking); the Task of the result, schema-validated."""
    params: Dict[str, Any] = {"message": message or user_message("hello")}
    if configuration:
        params["configuration"] = configuration
    body = rpc(client, "SendMessage", params)
    assert "error" not in body, body
    task = body["result"]["task"]
    validate(task, "Task")
    return task


def stream_results(client, message: Optional[Dict[str, Any]] = None) -> List[Dict[str, Any]]:
    response = wire.post(client, "SendStreamingMessage",
                         {"message": message or user_message("hello")})
    assert mimetype(response) == "text/event-stream", response.text
    results = [event["data"]["result"] for event in parse_sse(response.text)]
    for result in results:
        validate(result, "Stream Response")
    return results


def status_text(task: Dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in task["status"]["message"]["parts"])


def artifact_text(artifact: Dict[str, Any]) -> str:
    return "".join(p["text"] for p in artifact["parts"])


def wait_run_finished(app, task_id: str, timeout: float = 3.0) -> None:
    """Wait until the executor run of a task has returned (or raised) and been handled."""
    runtime = app.extensions["a2a"]["a2a"].service.runtime
    deadline = time.monotonic() + timeout
    while runtime.local_run(task_id) is not None:
        assert time.monotonic() < deadline, "the executor is still running"
        time.sleep(0.01)


def client_for(make_app, store_url, executor, **kwargs):
    return make_app(executor, store=store_url, **kwargs).test_client()


# ================================================================ what an executor returns


def test_returning_a_string_makes_a_text_artifact_and_completes(make_app, store_url):
    client = client_for(make_app, store_url, lambda ctx: "the answer is " + ctx.text)
    task = run_task(client, user_message("42"))
    assert task["status"]["state"] == COMPLETED
    assert len(task["artifacts"]) == 1
    assert task["artifacts"][0]["parts"] == [{"text": "the answer is 42"}]
    assert task["artifacts"][0]["artifactId"]


def test_returning_none_completes_without_artifacts(make_app, store_url):
    client = client_for(make_app, store_url, lambda ctx: None)
    task = run_task(client)
    assert task["status"]["state"] == COMPLETED
    assert "artifacts" not in task
    assert "message" not in task["status"]


def test_a_returned_value_is_logged_as_its_artifact_then_the_completion(make_app, store_url):
    app = make_app(lambda ctx: "x", store=store_url)
    task = run_task(app.test_client())
    wait_run_finished(app, task["id"])
    events = [entry.event for entry in app.extensions["a2a"]["a2a"].store.read(task["id"], 0)]
    assert [type(e).__name__ for e in events] == [
        "Task", "TaskArtifactUpdateEvent", "TaskStatusUpdateEvent"]
    assert events[2].status.state is TaskState.COMPLETED


def test_a_value_returned_after_asking_is_kept_and_the_task_waits_for_input(make_app, store_url):
    def ask_and_draft(ctx):
        ctx.ask("which one?")
        return "a draft"

    app = make_app(ask_and_draft, store=store_url)
    client = app.test_client()
    task = run_task(client)  # answered at the question; the draft follows it
    wait_run_finished(app, task["id"])
    task = get_task(client, task["id"])
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert [artifact_text(a) for a in task["artifacts"]] == ["a draft"]


def test_a_blocking_send_answers_once_the_task_ends_not_when_the_executor_returns(
        make_app, store_url):
    release = threading.Event()

    def complete_then_clean_up(ctx):
        ctx.complete("done")
        release.wait(10)  # clean-up after the answer: the caller does not wait for it

    app = make_app(complete_then_clean_up, store=store_url)
    try:
        task = run_task(app.test_client())
        assert task["status"]["state"] == COMPLETED
        runtime = app.extensions["a2a"]["a2a"].service.runtime
        assert runtime.local_run(task["id"]) is not None  # still running
    finally:
        release.set()
    wait_run_finished(app, task["id"])


def test_generator_chunks_build_one_artifact_by_appends(make_app, store_url):
    def chunks(ctx):
        for word in ("alpha ", "beta ", "gamma"):
            yield word

    client = client_for(make_app, store_url, chunks)
    results = stream_results(client)
    updates = [r["artifactUpdate"] for r in results if "artifactUpdate" in r]
    assert len(updates) == 3
    assert len({u["artifact"]["artifactId"] for u in updates}) == 1
    assert [u.get("append", False) for u in updates] == [False, True, True]
    assert results[-1]["statusUpdate"]["status"]["state"] == COMPLETED
    task = get_task(client, results[0]["task"]["id"])
    assert len(task["artifacts"]) == 1
    assert artifact_text(task["artifacts"][0]) == "alpha beta gamma"


def test_generator_may_yield_parts_artifacts_and_progress_messages(make_app, store_url):
    def mixed(ctx):
        yield Message(message_id="progress-1", role=Role.AGENT, parts=[Part(text="halfway")])
        yield Part(data={"n": 1})
        yield Artifact(artifact_id="fixed", parts=[Part(text="whole")], name="report")

    client = client_for(make_app, store_url, mixed)
    task = run_task(client)
    assert task["status"]["state"] == COMPLETED
    assert [a["parts"] for a in task["artifacts"]] == [[{"data": {"n": 1}}], [{"text": "whole"}]]
    assert task["artifacts"][1]["artifactId"] == "fixed"
    assert task["artifacts"][1]["name"] == "report"
    assert "halfway" in [m["parts"][0].get("text") for m in task["history"]]


@pytest.mark.parametrize("value, parts", [
    (Part(text="a part"), [{"text": "a part"}]),
    ([Part(text="one"), Part(url="https://example.com/f.txt", media_type="text/plain")],
     [{"text": "one"}, {"url": "https://example.com/f.txt", "mediaType": "text/plain"}]),
    ({"answer": 42}, [{"data": {"answer": 42}}]),
    ([1, 2, 3], [{"data": [1, 2, 3]}]),
], ids=["part", "parts", "dict", "list"])
def test_returning_parts_or_json_values_makes_an_artifact(make_app, store_url, value, parts):
    client = client_for(make_app, store_url, lambda ctx: value)
    task = run_task(client)
    assert task["status"]["state"] == COMPLETED
    assert task["artifacts"][0]["parts"] == parts


def test_returning_a_message_answers_with_that_message(make_app, store_url):
    answer = Message(message_id="reply-1", role=Role.AGENT, parts=[Part(text="just a message")])
    client = client_for(make_app, store_url, lambda ctx: answer)
    body = rpc(client, "SendMessage", {"message": user_message("hi", contextId="ctx-1")})
    validate(body["result"], "Send Message Response")
    message = body["result"]["message"]
    validate(message, "Message")
    assert message["messageId"] == "reply-1"
    assert message["contextId"] == "ctx-1"
    listed = rpc(client, "ListTasks", {})["result"]
    validate(listed, "List Tasks Response")
    assert listed["totalSize"] == 0


def test_raising_fails_the_task_naming_the_exception_type_only(make_app, store_url):
    def broken(ctx):
        ctx.working("starting")
        raise KeyError("secret-internal-detail")

    client = client_for(make_app, store_url, broken)
    task = run_task(client)
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    text = status_text(task)
    assert "KeyError" in text
    assert "secret-internal-detail" not in text
    assert "Traceback" not in repr(task) and "File \"" not in repr(task)
    assert task["status"]["message"]["role"] == "ROLE_AGENT"


def test_raising_before_any_update_still_creates_a_failed_task(make_app, store_url):
    def broken(ctx):
        raise RuntimeError("boom")

    client = client_for(make_app, store_url, broken)
    task = run_task(client)
    assert task["status"]["state"] == "TASK_STATE_FAILED"
    assert "RuntimeError" in status_text(task)


def test_raising_after_completion_leaves_the_task_completed(make_app, store_url):
    def late_failure(ctx):
        ctx.complete("all good")
        raise ValueError("too late")

    app = make_app(late_failure, store=store_url)
    client = app.test_client()
    task = run_task(client)
    wait_run_finished(app, task["id"])
    task = get_task(client, task["id"])
    assert task["status"]["state"] == COMPLETED
    assert status_text(task) == "all good"


# ================================================================ ctx status methods


@pytest.mark.parametrize("method, state", [
    ("complete", COMPLETED),
    ("fail", "TASK_STATE_FAILED"),
    ("reject", "TASK_STATE_REJECTED"),
    ("require_auth", "TASK_STATE_AUTH_REQUIRED"),
    ("ask", "TASK_STATE_INPUT_REQUIRED"),
])
def test_status_methods_set_the_state_with_a_message(make_app, store_url, method, state):
    def executor(ctx):
        getattr(ctx, method)(f"{method} said this")

    client = client_for(make_app, store_url, executor)
    task = run_task(client)
    assert task["status"]["state"] == state
    message = task["status"]["message"]
    assert message["role"] == "ROLE_AGENT"
    assert message["parts"] == [{"text": f"{method} said this"}]
    assert message["taskId"] == task["id"] and message["contextId"] == task["contextId"]
    validate(message, "Message")


def test_status_messages_may_be_parts_or_messages(make_app, store_url):
    def executor(ctx):
        ctx.working([Part(text="step"), Part(data={"pct": 50})])
        ctx.complete(Message(message_id="final", role=Role.AGENT, parts=[Part(text="done")]))

    client = client_for(make_app, store_url, executor)
    task = run_task(client)
    assert task["status"]["message"]["messageId"] == "final"
    progress = [m for m in task["history"] if m["role"] == "ROLE_AGENT"]
    assert progress[0]["parts"] == [{"text": "step"}, {"data": {"pct": 50}}]


def test_require_auth_pauses_and_the_next_message_resumes(make_app, store_url):
    def executor(ctx):
        if not ctx.follow_up:
            ctx.require_auth("please sign in")
            return None
        return "signed in as " + ctx.text

    client = client_for(make_app, store_url, executor)
    task = run_task(client)
    assert task["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    task = run_task(client, user_message("alice", "m-2", taskId=task["id"]))
    assert task["status"]["state"] == COMPLETED
    assert artifact_text(task["artifacts"][0]) == "signed in as alice"


def test_terminal_state_set_by_the_executor_is_final(make_app, store_url):
    caught: List[str] = []
    done = threading.Event()

    def executor(ctx):
        ctx.reject("no")
        for attempt in (lambda: ctx.working("again"), lambda: ctx.complete("yes"),
                        lambda: ctx.artifact("x")):
            try:
                attempt()
            except TaskClosedError:
                caught.append("closed")
        done.set()

    client = client_for(make_app, store_url, executor)
    task = run_task(client)
    assert task["status"]["state"] == "TASK_STATE_REJECTED"
    assert done.wait(3)
    assert caught == ["closed"] * 3
    assert "artifacts" not in get_task(client, task["id"])


def test_reply_after_a_task_update_completes_the_task_with_the_message(make_app, store_url):
    def executor(ctx):
        ctx.working("on it")
        ctx.reply("here you go")

    client = client_for(make_app, store_url, executor)
    task = run_task(client)
    assert task["status"]["state"] == COMPLETED
    assert status_text(task) == "here you go"


# ================================================================ ctx.artifact


def test_artifact_with_explicit_id_append_and_last_chunk_flags(make_app, store_url):
    def executor(ctx):
        ids = [ctx.artifact("part 1", artifact_id="doc", name="Document", description="A doc",
                            metadata={"k": "v"}),
               ctx.artifact("part 2", artifact_id="doc", append=True),
               ctx.artifact("part 3", artifact_id="doc", append=True, last_chunk=True),
               ctx.artifact("other", artifact_id="side", last_chunk=True)]
        assert ids == ["doc", "doc", "doc", "side"]

    client = client_for(make_app, store_url, executor)
    results = stream_results(client)
    updates = [r["artifactUpdate"] for r in results if "artifactUpdate" in r]
    flags = [(u["artifact"]["artifactId"], u.get("append", False), u.get("lastChunk", False))
             for u in updates]
    assert flags == [("doc", False, False), ("doc", True, False), ("doc", True, True),
                     ("side", False, True)]
    assert updates[0]["artifact"]["name"] == "Document"
    assert updates[0]["artifact"]["metadata"] == {"k": "v"}
    assert results[-1]["statusUpdate"]["status"]["state"] == COMPLETED
    task = get_task(client, results[0]["task"]["id"])
    doc, side = task["artifacts"]
    assert doc["artifactId"] == "doc" and doc["name"] == "Document"
    assert doc["description"] == "A doc"
    assert [p["text"] for p in doc["parts"]] == ["part 1", "part 2", "part 3"]
    assert side["parts"] == [{"text": "other"}]


def test_artifact_append_without_id_extends_the_last_artifact(make_app, store_url):
    returned: List[str] = []

    def executor(ctx):
        returned.append(ctx.artifact("a", append=True))  # nothing to extend yet: a new one
        returned.append(ctx.artifact("b", append=True))
        returned.append(ctx.artifact("c"))  # no append: a fresh artifact
        returned.append(ctx.artifact("d", append=True, last_chunk=True))

    client = client_for(make_app, store_url, executor)
    task = run_task(client)
    assert returned[0] == returned[1] != returned[2] == returned[3]
    assert [(a["artifactId"], [p["text"] for p in a["parts"]]) for a in task["artifacts"]] == [
        (returned[0], ["a", "b"]), (returned[2], ["c", "d"])]


def test_artifact_without_append_replaces_the_same_id(make_app, store_url):
    def executor(ctx):
        ctx.artifact("draft", artifact_id="doc")
        ctx.artifact("final", artifact_id="doc")

    client = client_for(make_app, store_url, executor)
    task = run_task(client)
    assert task["artifacts"] == [{"artifactId": "doc", "parts": [{"text": "final"}]}]


# ================================================================ reading the message


def test_files_data_and_text_of_raw_url_and_data_parts(make_app, store_url):
    seen: Dict[str, Any] = {}

    def executor(ctx):
        seen["text"] = ctx.text
        seen["files"] = [(p.kind, p.raw, p.url, p.media_type, p.filename) for p in ctx.files]
        seen["data"] = ctx.data
        seen["parts"] = [p.kind for p in ctx.parts]
        seen["metadata"] = ctx.metadata

    card = make_card(default_input_modes=["text/plain", "application/*", "image/*"])
    client = make_app(executor, card=card, store=store_url).test_client()
    message = user_message("first line", metadata={"source": "test"})
    message["parts"] += [
        {"raw": base64.b64encode(b"\x00binary\xff").decode(), "mediaType": "application/octet-stream",
         "filename": "blob.bin"},
        {"url": "https://example.com/cat.png", "mediaType": "image/png", "filename": "cat.png"},
        {"data": {"x": [1, 2]}, "mediaType": "application/json"},
        {"text": "second line"},
        {"data": None},
    ]
    task = run_task(client, message)
    assert task["status"]["state"] == COMPLETED
    assert seen["text"] == "first line\nsecond line"
    assert seen["files"] == [
        ("raw", b"\x00binary\xff", None, "application/octet-stream", "blob.bin"),
        ("url", None, "https://example.com/cat.png", "image/png", "cat.png"),
    ]
    assert seen["data"] == [{"x": [1, 2]}, None]
    assert seen["parts"] == ["text", "raw", "url", "data", "text", "data"]
    assert seen["metadata"] == {"source": "test"}


def test_context_ids_history_and_follow_up(make_app, store_url):
    seen: List[Dict[str, Any]] = []

    def executor(ctx):
        seen.append({"task_id": ctx.task_id, "context_id": ctx.context_id,
                     "message_id": ctx.message.message_id, "follow_up": ctx.follow_up,
                     "history": [m.message_id for m in ctx.history],
                     "task": ctx.task.id if ctx.task else None, "tenant": ctx.tenant})
        if not ctx.follow_up:
            ctx.ask("more?")

    client = client_for(make_app, store_url, executor)
    task = run_task(client, user_message("one", "m-1", contextId="ctx-9"))
    run_task(client, user_message("two", "m-2", taskId=task["id"]))
    first, second = seen
    assert first["task_id"] == second["task_id"] == task["id"]
    assert first["context_id"] == second["context_id"] == "ctx-9"
    assert (first["message_id"], first["follow_up"], first["history"]) == ("m-1", False, ["m-1"])
    assert first["task"] is None  # no task until the executor's first update
    assert second["message_id"] == "m-2" and second["follow_up"] is True
    assert second["history"][0] == "m-1" and second["history"][-1] == "m-2"
    assert len(second["history"]) == 3  # the question sits between the two turns
    assert second["task"] == task["id"] and second["tenant"] == ""


def test_executor_runs_inside_the_flask_app_context(make_app, store_url):
    seen: Dict[str, Any] = {}

    def executor(ctx):
        seen["app"] = current_app._get_current_object()
        seen["thread"] = threading.current_thread().name
        return current_app.config["GREETING"]

    app = make_app(executor, store=store_url)
    app.config["GREETING"] = "hello from config"
    task = run_task(app.test_client())
    assert task["artifacts"][0]["parts"] == [{"text": "hello from config"}]
    assert seen["app"] is app
    assert seen["thread"] != threading.main_thread().name


def test_ctx_status_accepts_any_state_value(make_app, store_url):
    def executor(ctx):
        ctx.status(TaskState.WORKING, "custom progress")
        ctx.status(TaskState.COMPLETED)

    client = client_for(make_app, store_url, executor)
    task = run_task(client)
    assert task["status"]["state"] == COMPLETED
    assert "message" not in task["status"]
    assert [m["parts"][0]["text"] for m in task["history"] if m["role"] == "ROLE_AGENT"] == [
        "custom progress"]
