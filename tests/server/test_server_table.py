"""The conformance agent's behaviour table (``examples/conformance_agent.py``: what
each messageId prefix does, sent and streamed) on real servers, gunicorn -k gevent and
the threaded werkzeug dev server; the helpers are tests/server/test_server.py's."""
from __future__ import annotations

import base64
from typing import Any, Dict, List, Optional, Tuple

import pytest

from tests.server.test_server import (
    SERVERS,
    SSEStream,
    aggregate_artifacts,
    check_sse_framing,
    dev_server,  # noqa: F401 - a fixture, this module's werkzeug server
    kind,
    msg,
    unique,
)
from tests.support.helpers import user_message, validate
from tests.support.tasks import COMPLETED, INPUT_REQUIRED, REJECTED, SUBMITTED, WORKING, get_task


@pytest.fixture(params=SERVERS)
def any_server(request):
    """The conformance agent: the example module under gunicorn, or in-process under werkzeug."""
    if request.param == "gunicorn-gevent":
        return request.getfixturevalue("conformance_server")
    return request.getfixturevalue("dev_server")


TEXT = "echo this back"
FILE_PART = {"raw": base64.b64encode(b"Generated file content").decode(), "filename": "output.txt",
             "mediaType": "text/plain"}
URL_PART = {"url": "https://example.com/output.txt", "filename": "output.txt", "mediaType": "text/plain"}
DATA_PART = {"data": {"key": "value", "count": 42}, "mediaType": "application/json"}
STREAMED_TEXT = [[{"text": "Streamed text content"}]]

#: prefix -> (final state, artifacts as lists of parts, final status text, stream after the Task)
BEHAVIOURS: Dict[str, Tuple[str, list, Optional[str], List[str]]] = {
    "tck-complete-task": (COMPLETED, [], "Hello from TCK", ["COMPLETED"]),
    "tck-artifact-text": (COMPLETED, [[{"text": "Generated text content"}]], None,
                          ["artifact", "COMPLETED"]),
    "tck-artifact-file": (COMPLETED, [[FILE_PART]], None, ["artifact", "COMPLETED"]),
    "tck-artifact-file-url": (COMPLETED, [[URL_PART]], None, ["artifact", "COMPLETED"]),
    "tck-artifact-data": (COMPLETED, [[DATA_PART]], None, ["artifact", "COMPLETED"]),
    "tck-input-required": (INPUT_REQUIRED, [], "Please provide more input", ["INPUT_REQUIRED"]),
    "tck-reject-task": (REJECTED, [], "Task rejected", ["REJECTED"]),
    "tck-stream-001": (COMPLETED, STREAMED_TEXT, None, ["WORKING", "artifact", "COMPLETED"]),
    "tck-stream-003": (COMPLETED, STREAMED_TEXT, None, ["WORKING", "artifact", "COMPLETED"]),
    "tck-stream-ordering-001": (COMPLETED, STREAMED_TEXT, None, ["WORKING", "artifact", "COMPLETED"]),
    "tck-stream-artifact-text": (COMPLETED, STREAMED_TEXT, None, ["WORKING", "artifact", "COMPLETED"]),
    "tck-stream-002": (COMPLETED, [], None, ["COMPLETED"]),
    "tck-stream-artifact-file": (COMPLETED, [[FILE_PART]], None, ["WORKING", "artifact", "COMPLETED"]),
    "tck-stream-artifact-chunked": (COMPLETED, [[{"text": "chunk-1 "}, {"text": "chunk-2"}]], None,
                                    ["WORKING", "artifact", "artifact", "COMPLETED"]),
    "tck-not-in-the-table": (COMPLETED, [], "Hello from TCK", ["COMPLETED"]),
    "test-kit-continue": (INPUT_REQUIRED, [], "Please provide more input", ["INPUT_REQUIRED"]),
    "plain-echo": (COMPLETED, [[{"text": TEXT}]], None, ["artifact", "COMPLETED"]),
}


def check_status_text(task_status: Dict[str, Any], text: Optional[str], task: Dict[str, Any]) -> None:
    if text is None:
        assert "message" not in task_status
        return
    message = task_status["message"]
    assert message["role"] == "ROLE_AGENT"
    assert message["parts"] == [{"text": text}]
    assert message["taskId"] == task["id"] and message["contextId"] == task["contextId"]


@pytest.mark.parametrize("prefix", sorted(BEHAVIOURS))
def test_send_message_behaviour_matches_table(any_server, prefix):
    state, artifacts, status_text, _ = BEHAVIOURS[prefix]
    message = msg(prefix, TEXT)
    body = any_server.rpc("SendMessage", {"message": message})
    task = body["result"]["task"]
    validate(task, "Task")
    assert task["id"] and task["contextId"]
    assert task["status"]["state"] == state
    assert [a["parts"] for a in task.get("artifacts", [])] == artifacts
    check_status_text(task["status"], status_text, task)
    assert task["history"][0]["messageId"] == message["messageId"]
    assert get_task(any_server, task["id"]) == task


@pytest.mark.parametrize("prefix", sorted(BEHAVIOURS))
def test_streaming_message_behaviour_matches_table(any_server, prefix):
    state, artifacts, status_text, after_task = BEHAVIOURS[prefix]
    with SSEStream(any_server.url, "SendStreamingMessage", {"message": msg(prefix, TEXT)},
                   request_id=f"stream-{prefix}") as stream:
        stream.read_all()
    check_sse_framing(stream)
    results = stream.results
    assert [kind(r) for r in results] == ["task"] + after_task
    task = results[0]["task"]
    assert task["status"]["state"] == SUBMITTED
    for result in results[1:]:
        update = result.get("statusUpdate") or result["artifactUpdate"]
        assert update["taskId"] == task["id"] and update["contextId"] == task["contextId"]
        assert "kind" not in update and "final" not in update
    assert aggregate_artifacts(results) == artifacts
    last = results[-1]["statusUpdate"]
    assert last["status"]["state"] == state
    check_status_text(last["status"], status_text, task)
    final = get_task(any_server, task["id"])
    assert final["status"]["state"] == state
    assert [a["parts"] for a in final.get("artifacts", [])] == artifacts


def test_message_response_is_a_direct_message_on_send(any_server):
    body = any_server.rpc("SendMessage", {"message": msg("tck-message-response")})
    assert set(body["result"]) == {"message"}
    message = body["result"]["message"]
    validate(message, "Message")
    assert message["role"] == "ROLE_AGENT"
    assert message["parts"] == [{"text": "Direct message response"}]
    assert message["contextId"] and "taskId" not in message


def test_message_response_stream_is_one_message_event_then_close(any_server):
    with SSEStream(any_server.url, "SendStreamingMessage", {"message": msg("tck-message-response")},
                   request_id=7) as stream:
        stream.read_all()
    check_sse_framing(stream)
    assert stream.ended and len(stream.events) == 1
    message = stream.results[0]["message"]
    assert message["parts"] == [{"text": "Direct message response"}]
    assert "taskId" not in message


def test_longest_prefix_wins_for_file_url_over_file(any_server):
    url_task = any_server.rpc("SendMessage", {"message": msg("tck-artifact-file-url")})["result"]["task"]
    file_task = any_server.rpc("SendMessage", {"message": msg("tck-artifact-file")})["result"]["task"]
    assert url_task["artifacts"][0]["parts"] == [URL_PART]
    assert file_task["artifacts"][0]["parts"] == [FILE_PART]


def test_chunked_artifact_flags_and_aggregate(any_server):
    with SSEStream(any_server.url, "SendStreamingMessage",
                   {"message": msg("tck-stream-artifact-chunked")}) as stream:
        stream.read_all()
    updates = [r["artifactUpdate"] for r in stream.results if "artifactUpdate" in r]
    assert len(updates) == 2
    first, second = updates
    assert first["artifact"]["artifactId"] == second["artifact"]["artifactId"] == "chunked-artifact"
    assert first["artifact"]["parts"] == [{"text": "chunk-1 "}]
    assert second["artifact"]["parts"] == [{"text": "chunk-2"}]
    # Both chunks are sent with append (as the reference SUTs do); only the second is the last.
    assert first.get("append") is True and not first.get("lastChunk", False)
    assert second.get("append") is True and second.get("lastChunk") is True
    task = get_task(any_server, first["taskId"])
    assert task["artifacts"] == [{"artifactId": "chunked-artifact",
                                  "parts": [{"text": "chunk-1 "}, {"text": "chunk-2"}]}]


def test_input_required_then_follow_up_send_completes(any_server):
    task = any_server.rpc("SendMessage", {"message": msg("tck-input-required", "first")})["result"]["task"]
    assert task["status"]["state"] == INPUT_REQUIRED
    follow_up = msg("tck-input-required", "second", taskId=task["id"], contextId=task["contextId"])
    done = any_server.rpc("SendMessage", {"message": follow_up})["result"]["task"]
    assert done["id"] == task["id"] and done["contextId"] == task["contextId"]
    assert done["status"]["state"] == COMPLETED
    check_status_text(done["status"], "Thanks, got it", done)
    history = [(m["role"], m["parts"][0]["text"]) for m in done["history"]]
    assert history == [("ROLE_USER", "first"), ("ROLE_AGENT", "Please provide more input"),
                       ("ROLE_USER", "second")]


def test_input_required_then_follow_up_stream_completes(any_server):
    with SSEStream(any_server.url, "SendStreamingMessage",
                   {"message": msg("tck-input-required")}) as first:
        first.read_all()
    check_sse_framing(first)
    assert [kind(r) for r in first.results] == ["task", "INPUT_REQUIRED"]  # interrupted: closed
    task = first.results[0]["task"]
    follow_up = msg("tck-input-required", "more", taskId=task["id"])  # contextId inferred
    with SSEStream(any_server.url, "SendStreamingMessage", {"message": follow_up}) as second:
        second.read_all()
    check_sse_framing(second)
    assert [kind(r) for r in second.results] == ["task", "COMPLETED"]
    assert second.results[0]["task"]["status"]["state"] == WORKING
    assert int(second.events[0]["id"]) > int(first.events[-1]["id"])
    check_status_text(second.results[-1]["statusUpdate"]["status"], "Thanks, got it", task)
    assert get_task(any_server, task["id"])["status"]["state"] == COMPLETED


def test_same_message_id_reused_across_several_tasks(any_server):
    message_id = unique("tck-complete-task")
    ids = set()
    for _ in range(3):
        task = any_server.rpc("SendMessage", {"message": user_message("hi", message_id)})["result"]["task"]
        assert task["status"]["state"] == COMPLETED
        assert task["history"][0]["messageId"] == message_id
        ids.add(task["id"])
    with SSEStream(any_server.url, "SendStreamingMessage",
                   {"message": user_message("hi", message_id)}) as stream:
        stream.read_all()
    assert [kind(r) for r in stream.results] == ["task", "COMPLETED"]
    ids.add(stream.results[0]["task"]["id"])
    assert len(ids) == 4, "a reused messageId must start a new task each time"


def test_same_message_id_reused_as_follow_up(any_server):
    message_id = unique("tck-input-required")
    task = any_server.rpc("SendMessage", {"message": user_message("q", message_id)})["result"]["task"]
    assert task["status"]["state"] == INPUT_REQUIRED
    again = user_message("a", message_id, taskId=task["id"], contextId=task["contextId"])
    done = any_server.rpc("SendMessage", {"message": again})["result"]["task"]
    assert done["status"]["state"] == COMPLETED
    users = [m for m in done["history"] if m["role"] == "ROLE_USER"]
    assert [m["messageId"] for m in users] == [message_id, message_id]


@pytest.mark.parametrize("text", ["héllo ✓ 漢字 🚀", "line\u2028sep\u2029para\x85nel", "tab\tcr\rlf\n"])
def test_stream_round_trips_non_ascii_and_unicode_separators(any_server, text):
    """Per the SSE spec only CR and LF end a line; anything else stays inside ``data:``."""
    with SSEStream(any_server.url, "SendStreamingMessage", {"message": msg("plain", text)}) as stream:
        stream.read_all()
    check_sse_framing(stream)
    assert aggregate_artifacts(stream.results) == [[{"text": text}]]
