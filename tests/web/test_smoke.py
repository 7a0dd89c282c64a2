"""A first end-to-end pass through the test client, per store."""
from tests.support.helpers import user_message, validate
from tests.support.wire import rpc, stream


def test_send_message_completes_with_echo_artifact(client):
    body = rpc(client, "SendMessage", {"message": user_message("hello world")})
    task = body["result"]["task"]
    validate(task, "Task")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "hello world"}]


def test_streaming_first_event_is_task_and_every_event_has_an_id(client):
    events = stream(client, "SendStreamingMessage", {"message": user_message("hi")})
    assert "task" in events[0]["data"]["result"]
    assert [int(e["id"]) for e in events] == sorted(int(e["id"]) for e in events)
    for event in events:
        validate(event["data"]["result"], "Stream Response")
    assert events[-1]["data"]["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
