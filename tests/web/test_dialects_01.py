"""The 0.1 JSON-RPC dialect (``tasks/send``, ``tasks/sendSubscribe``...) through the Flask
test client, on every store; every response and stream event validated against the v0.1
schema.  The agent under test and the helpers are tests/web/test_dialects.py's."""
from __future__ import annotations

import threading

from tests.support.helpers import validate
from tests.web.test_dialects import (  # noqa: F401 - client and push_client are fixtures
    FILE_B64,
    STATES_01,
    call,
    client,
    error,
    gate,
    msg01,
    new_id,
    post,
    push_client,
    read_sse,
    release,
    result,
    results,
    send01,
    stream01,
    text_of,
    v01,
    wait_state,
)


# ================================================================== 0.1


def test_v01_tasks_send_keeps_client_task_id_and_session_id(client):
    task_id = new_id()
    task = result(send01(client, task_id, "hello", sessionId="session-1"))
    validate(task, "Task", "v0.1")
    assert task["id"] == task_id and task["sessionId"] == "session-1"
    assert task["status"]["state"] == "completed"
    assert "kind" not in task and "contextId" not in task
    assert task["artifacts"] == [{"parts": [{"type": "text", "text": "hello"}], "index": 0}]
    assert task["history"] == [{"role": "user", "parts": [{"type": "text", "text": "hello"}]}]


def test_v01_second_tasks_send_with_same_id_continues_the_task(client):
    task_id = new_id()
    asked = result(send01(client, task_id, "ask", sessionId="s-2"))
    assert asked["status"]["state"] == "input-required"
    assert asked["status"]["message"] == {"role": "agent",
                                          "parts": [{"type": "text", "text": "Which city?"}]}
    done = result(send01(client, task_id, "Paris", sessionId="s-2"))
    assert done["id"] == task_id and done["sessionId"] == "s-2"
    assert done["status"]["state"] == "completed"
    assert [(m["role"], text_of(m)) for m in done["history"]] == [
        ("user", "ask"), ("agent", "Which city?"), ("user", "Paris")]
    # A finished task takes no more messages: 1.0's -32004, never 0.1's -32009 (-32009 is VersionNotSupported in 1.0).
    error(send01(client, task_id, "again"), -32004)


def test_v01_history_length(client):
    task_id = new_id()
    send01(client, task_id, "ask")
    done = result(send01(client, task_id, "Oslo", historyLength=1))
    assert [text_of(m) for m in done["history"]] == ["Oslo"]
    got = result(v01(call(client, "tasks/get", {"id": task_id, "historyLength": 0}), "GetTaskResponse"))
    assert "history" not in got


def test_v01_tasks_send_subscribe_event_shapes(client):
    task_id = new_id()
    items = results(stream01(client, "tasks/sendSubscribe",
                             {"id": task_id, "sessionId": "s-3", "message": msg01("stream")}))
    assert all("kind" not in i and i["id"] == task_id for i in items)
    statuses = [i for i in items if "status" in i]
    assert [s["status"]["state"] for s in statuses] == ["submitted", "working", "completed"]
    assert [s["final"] for s in statuses] == [False, False, True]
    assert items[-1] is statuses[-1]
    chunks = [i["artifact"] for i in items if "artifact" in i]
    assert chunks == [
        {"parts": [{"type": "text", "text": "chunk-1 "}], "index": 0, "append": True},
        {"parts": [{"type": "text", "text": "chunk-2"}], "index": 0, "append": True,
         "lastChunk": True}]
    for chunk in chunks:
        validate(chunk, "Artifact", "v0.1")


def test_v01_two_artifacts_get_distinct_indexes(client):
    task_id = new_id()
    items = results(stream01(client, "tasks/sendSubscribe", {"id": task_id, "message": msg01("two")}))
    assert [i["artifact"]["index"] for i in items if "artifact" in i] == [0, 1]
    got = result(call(client, "tasks/get", {"id": task_id}))
    assert [(a["name"], a["index"]) for a in got["artifacts"]] == [("one", 0), ("two", 1)]


def test_v01_stream_closes_at_input_required_and_continues(client):
    task_id = new_id()
    first = results(stream01(client, "tasks/sendSubscribe", {"id": task_id, "message": msg01("ask")}))
    assert first[-1]["status"]["state"] == "input-required" and first[-1]["final"] is True
    second = results(stream01(client, "tasks/sendSubscribe",
                              {"id": task_id, "message": msg01("Lima")}))
    assert second[-1]["status"]["state"] == "completed" and second[-1]["final"] is True
    assert text_of(second[-1]["status"]["message"]) == "thanks, Lima"


def test_v01_tasks_get_cancel_of_a_live_task(client):
    task_id = new_id()
    with gate() as key:
        response = post(client, "tasks/sendSubscribe",
                        {"id": task_id, "message": msg01(f"gate {key}")}, stream=True)
        live = wait_state(client, task_id, {"working"})
        v01({"jsonrpc": "2.0", "id": 1, "result": live}, "GetTaskResponse")
        assert live["id"] == task_id and "kind" not in live
        canceled = result(v01(call(client, "tasks/cancel", {"id": task_id}), "CancelTaskResponse"))
        assert canceled["status"]["state"] == "canceled" and "kind" not in canceled
        events = read_sse(response)
    for event in events:
        v01(event["data"], "SendTaskStreamingResponse")
    last = results(events)[-1]
    assert last["status"]["state"] == "canceled" and last["final"] is True
    error(v01(call(client, "tasks/cancel", {"id": task_id}), "CancelTaskResponse"), -32002)
    error(v01(call(client, "tasks/get", {"id": "nope"}), "GetTaskResponse"), -32001)


def test_v01_tasks_resubscribe_live_task(client):
    task_id = new_id()
    with gate() as key:
        original = post(client, "tasks/sendSubscribe",
                        {"id": task_id, "message": msg01(f"gate {key}")}, stream=True)
        wait_state(client, task_id, {"working"})
        response = post(client, "tasks/resubscribe", {"id": task_id}, stream=True)
        release(key)
        events = read_sse(response)
        read_sse(original)
    for event in events:
        v01(event["data"], "SendTaskStreamingResponse")
    items = results(events)
    assert items[0] == {"id": task_id, "status": items[0]["status"], "final": False}
    assert items[-1]["status"]["state"] == "completed" and items[-1]["final"] is True
    assert [i["artifact"]["index"] for i in items if "artifact" in i] == [0]


def test_v01_resubscribe_with_last_event_id_keeps_artifact_indexes(client):
    task_id = new_id()
    full = stream01(client, "tasks/sendSubscribe", {"id": task_id, "message": msg01("two")})
    cut = next(e for e in full if "artifact" in e["data"]["result"])["id"]
    replay = stream01(client, "tasks/resubscribe", {"id": task_id},
                      headers={"Last-Event-ID": cut})
    assert [(e["id"], e["data"]) for e in replay] == [
        (e["id"], e["data"]) for e in full if int(e["id"]) > int(cut)]


def test_v01_resubscribe_to_input_required_task_marks_only_the_last_event_final(client):
    task_id = new_id()
    send01(client, task_id, "ask")
    response = post(client, "tasks/resubscribe", {"id": task_id}, stream=True)
    answer = threading.Timer(0.3, send01, args=(client, task_id, "Rome"))
    answer.start()
    try:
        items = results(read_sse(response))
    finally:
        answer.join(5)
    assert items[0]["status"]["state"] == "input-required"
    assert items[-1]["status"]["state"] == "completed"
    finals = [i["final"] for i in items if "status" in i]
    assert finals == [False] * (len(finals) - 1) + [True]


def test_v01_push_notification_set_and_get(push_client):
    client = push_client
    task_id = new_id()
    send01(client, task_id, "hello")
    config = {"url": "https://client.example.com/hook", "token": "tok",
              "authentication": {"schemes": ["Bearer"], "credentials": "secret"}}
    created = result(v01(call(client, "tasks/pushNotification/set",
                              {"id": task_id, "pushNotificationConfig": config}),
                         "SetTaskPushNotificationResponse"))
    assert created == {"id": task_id, "pushNotificationConfig": config}
    got = result(v01(call(client, "tasks/pushNotification/get", {"id": task_id}),
                     "GetTaskPushNotificationResponse"))
    assert got["id"] == task_id
    assert got["pushNotificationConfig"]["url"] == config["url"]
    assert got["pushNotificationConfig"]["authentication"]["schemes"] == ["Bearer"]
    assert got["pushNotificationConfig"]["token"] != "tok"  # masked
    # 0.1 has one config per task: set replaces it.
    replaced = {"url": "https://client.example.com/other"}
    call(client, "tasks/pushNotification/set", {"id": task_id, "pushNotificationConfig": replaced})
    got = result(call(client, "tasks/pushNotification/get", {"id": task_id}))
    assert got["pushNotificationConfig"] == replaced


def test_v01_push_notification_in_tasks_send(push_client):
    task_id = new_id()
    send01(push_client, task_id, "hello",
           pushNotification={"url": "https://client.example.com/hook", "token": "t"})
    got = result(call(push_client, "tasks/pushNotification/get", {"id": task_id}))
    assert got["pushNotificationConfig"]["url"] == "https://client.example.com/hook"


def test_v01_push_notification_without_capability_is_32003(client):
    task_id = new_id()
    send01(client, task_id, "hello")
    body = call(client, "tasks/pushNotification/set",
                {"id": task_id, "pushNotificationConfig": {"url": "https://c.example.com/h"}})
    error(v01(body, "SetTaskPushNotificationResponse"), -32003)
    error(v01(call(client, "tasks/pushNotification/get", {"id": task_id}),
              "GetTaskPushNotificationResponse"), -32003)
    error(send01(client, new_id(), "x", pushNotification={"url": "https://c.example.com/h"}),
          -32003)


def test_v01_agent_message_reply_reaches_0_1_client_as_completed_task(client):
    task_id = new_id()
    task = result(send01(client, task_id, "reply"))
    assert task["id"] == task_id and task["status"]["state"] == "completed"
    assert task["status"]["message"] == {"role": "agent", "parts": [{"type": "text", "text": "pong"}]}
    items = results(stream01(client, "tasks/sendSubscribe", {"id": new_id(), "message": msg01("reply")}))
    assert all("status" in i for i in items)  # no Message event in a 0.1 stream
    assert items[-1]["status"]["state"] == "completed" and items[-1]["final"] is True
    assert text_of(items[-1]["status"]["message"]) == "pong"


def test_v01_rejected_shows_as_failed_and_auth_required_as_input_required(client):
    rejected = result(send01(client, new_id(), "reject"))
    assert rejected["status"]["state"] == "failed"
    assert text_of(rejected["status"]["message"]) == "Will not do that"
    auth = result(send01(client, new_id(), "auth"))
    assert auth["status"]["state"] == "input-required"
    items = results(stream01(client, "tasks/sendSubscribe", {"id": new_id(), "message": msg01("reject")}))
    assert {i["status"]["state"] for i in items} <= STATES_01
    assert items[-1]["status"]["state"] == "failed" and items[-1]["final"] is True


def test_v01_file_and_data_parts_in_both_directions(client):
    parts = [
        {"type": "text", "text": "parts"},
        {"type": "file", "file": {"bytes": FILE_B64, "mimeType": "text/x-python", "name": "a.py"}},
        {"type": "file", "file": {"uri": "https://example.com/r.pdf", "mimeType": "application/pdf"}},
        {"type": "data", "data": {"rows": [1, 2]}},
    ]
    body = call(client, "tasks/send", {"id": new_id(), "message": msg01("", parts=parts)})
    task = result(v01(body, "SendTaskResponse"))
    assert task["artifacts"][0]["parts"] == parts
    assert task["history"][0]["parts"] == parts
    values = result(send01(client, new_id(), "values"))
    assert [a["parts"][0]["data"] for a in values["artifacts"]] == [
        {"value": [1, 2]}, {"value": 42}, {"value": "text"}, {"value": None}, {"k": "v"}]
