"""The A2A 1.1 draft in-process (docs/generations.rst): task generations on tasks and
events, long-poll GetTask, ``ifGenerationMatch``, the draft's opt-in and its card,
and the REST ``application/a2a+json`` content type, through the Flask test client."""
from __future__ import annotations

import threading
from typing import Any, Dict, List, Optional

import pytest
from flask import Flask

from a2a_flask import AgentCapabilities

from tests.conftest import make_card
from tests.support.helpers import Gate, parse_sse, rpc_body, user_message, wait_until

V11 = {"A2A-Version": "1.1"}
V10 = {"A2A-Version": "1.0"}
REST = "/a2a/rest"
GATES: Dict[str, Gate] = {}


def agent(ctx):
    """``ask``: asks until it hears ``done``; ``stream``: a status, two chunks, done;
    ``gate NAME``: waits for the test to open ``GATES[NAME]``, then finishes."""
    word, _, arg = (ctx.history[0].text if ctx.history else ctx.text).partition(" ")
    if word == "ask":
        return "bye" if ctx.text == "done" else ctx.ask("more?")
    if word == "stream":
        ctx.working("working")
        ctx.artifact("one ", artifact_id="story")
        ctx.artifact("two", artifact_id="story", append=True, last_chunk=True)
        return None
    if word == "chunks":
        for index in range(int(arg)):
            ctx.artifact(f"{index} ", artifact_id="long", append=index > 0)
        return None
    if word == "gate":
        gate = GATES[arg]
        ctx.working("waiting")
        gate.release.wait(10)
        return "opened"
    return ctx.text


@pytest.fixture
def draft_app(make_app) -> Flask:
    return make_app(agent, card=make_card(capabilities=AgentCapabilities(streaming=True)),
                    protocol_draft=True, long_poll_timeout=5.0)


def call(client, method: str, params: Any, headers: Dict[str, str] = V11) -> Dict[str, Any]:
    answer = client.post("/a2a", json=rpc_body(method, params), headers=headers)
    assert answer.status_code == 200, answer.data
    body: Dict[str, Any] = answer.get_json()
    return body


def send(client, text: str, task_id: str = "", headers: Dict[str, str] = V11,
         **configuration: Any) -> Dict[str, Any]:
    params: Dict[str, Any] = {"message": user_message(text, message_id=f"m-{text}-{id(text)}")}
    if task_id:
        params["message"]["taskId"] = task_id
    if configuration:
        params["configuration"] = configuration
    return call(client, "SendMessage", params, headers)


def get(client, task_id: str, headers: Dict[str, str] = V11, **params: Any) -> Dict[str, Any]:
    return call(client, "GetTask", {"id": task_id, **params}, headers)


# ------------------------------------------------------------------ the opt-in


def test_without_the_draft_1_1_is_refused_and_the_card_names_no_1_1(make_app):
    client = make_app(agent).test_client()
    answer = call(client, "GetTask", {"id": "x"})
    assert answer["error"]["code"] == -32009
    assert "1.1" not in answer["error"]["data"][0]["metadata"]["supportedVersions"]
    assert client.get(f"{REST}/tasks/x", headers=V11).status_code == 400
    card = client.get("/.well-known/agent-card.json").get_json()
    assert {i["protocolVersion"] for i in card["supportedInterfaces"]} == {"1.0", "0.3"}


def test_the_card_names_1_1_where_the_draft_is_served(draft_app):
    card = draft_app.test_client().get("/.well-known/agent-card.json").get_json()
    versions = [(i["protocolBinding"], i["protocolVersion"]) for i in card["supportedInterfaces"]]
    assert versions[:4] == [("JSONRPC", "1.0"), ("HTTP+JSON", "1.0"),
                            ("JSONRPC", "1.1"), ("HTTP+JSON", "1.1")]


# ------------------------------------------------------------------ generations


def test_a_task_counts_one_generation_per_status_and_artifact_event(draft_app):
    client = draft_app.test_client()
    task = send(client, "stream")["result"]["task"]
    # created (1), working (2), two chunks (3, 4), completed (5)
    assert task["generation"] == "5"
    assert get(client, task["id"])["result"]["generation"] == "5"
    listed = call(client, "ListTasks", {})["result"]["tasks"]
    assert [t["generation"] for t in listed] == ["5"]
    # 1.0 and 0.3 answers carry no generation
    assert "generation" not in get(client, task["id"], V10)["result"]
    assert "generation" not in client.get(f"{REST}/tasks/{task['id']}").get_json()


def test_stream_events_carry_consecutive_generations_and_a_resume_counts_them(draft_app):
    client = draft_app.test_client()
    body = rpc_body("SendStreamingMessage", {"message": user_message("stream", "m-s")})
    events = [e["data"]["result"] for e in parse_sse(
        client.post("/a2a", json=body, headers=V11).get_data(as_text=True))]
    generations = [int(next(iter(e.values()))["generation"]) for e in events]
    assert generations == [1, 2, 3, 4, 5]
    task_id = events[0]["task"]["id"]
    # A resume after event 2 (the working status) counts generation 3 from the log.
    replay = client.post("/a2a", json=rpc_body("SubscribeToTask", {"id": task_id}),
                         headers={**V11, "Last-Event-ID": "2"}).get_data(as_text=True)
    assert [int(next(iter(e["data"]["result"].values()))["generation"])
            for e in parse_sse(replay)] == [3, 4, 5]
    plain = client.post("/a2a", json=body | {"id": 2}, headers=V10).get_data(as_text=True)
    assert "generation" not in plain


@pytest.mark.no_memory_store
def test_generations_survive_each_store_and_its_lazy_snapshots(make_app, store_url):
    """Stored with the snapshot (not a column), folded forward over the events logged
    after it: a reopened store reads the same generation."""
    client = make_app(agent, store=store_url, protocol_draft=True).test_client()
    task = send(client, "chunks 70")["result"]["task"]
    assert task["generation"] == "72"  # created, 70 chunks, COMPLETED
    task = send(client, "ask")["result"]["task"]
    for turn in range(5):
        task = send(client, f"t{turn}", task["id"], ifGenerationMatch=task["generation"]
                    )["result"]["task"]
    reopened = make_app(agent, store=store_url, protocol_draft=True).test_client()
    assert get(reopened, task["id"])["result"]["generation"] == "12" == task["generation"]


def test_a_task_stored_before_generations_gets_its_generation_from_its_log(make_app, tmp_path):
    import sqlite3

    url = f"sqlite://{tmp_path}/old.db"
    client = make_app(agent, store=url, protocol_draft=True).test_client()
    task = send(client, "ask")["result"]["task"]
    task = send(client, "again", task["id"])["result"]["task"]
    assert task["generation"] == "4"
    with sqlite3.connect(f"{tmp_path}/old.db") as db:  # as an earlier a2a_flask stored it
        db.execute("UPDATE snapshots SET snapshot = json_remove(snapshot, '$.generation')")
    client = make_app(agent, store=url, protocol_draft=True).test_client()
    assert "generation" not in get(client, task["id"])["result"]  # read alone: not known
    assert get(client, task["id"], currentGeneration=0)["result"]["generation"] == "4"
    refused = send(client, "late", task["id"], ifGenerationMatch=3)["error"]
    assert refused["data"][0]["metadata"]["currentGeneration"] == "4"
    assert send(client, "next", task["id"], ifGenerationMatch=4)["result"]["task"]["status"][
        "state"] == "TASK_STATE_INPUT_REQUIRED"
    assert get(client, task["id"], currentGeneration=0)["result"]["generation"] == "6"


# ------------------------------------------------------------------ ifGenerationMatch


def test_if_generation_match_refuses_a_stale_message_and_changes_nothing(draft_app):
    client = draft_app.test_client()
    task = send(client, "ask")["result"]["task"]
    assert (task["status"]["state"], task["generation"]) == ("TASK_STATE_INPUT_REQUIRED", "2")
    stale = send(client, "late", task["id"], ifGenerationMatch=1)["error"]
    assert stale["code"] == -32010
    info = stale["data"][0]
    assert info["reason"] == "TASK_GENERATION_MISMATCH"
    assert info["metadata"] == {"taskId": task["id"], "expectedGeneration": "1",
                                "currentGeneration": "2"}
    assert get(client, task["id"])["result"] == task  # unchanged
    rest = client.post(f"{REST}/message:send", headers=V11, json={
        "message": {**user_message("late", "m-r"), "taskId": task["id"]},
        "configuration": {"ifGenerationMatch": "7"}})
    assert rest.status_code == 409
    assert rest.get_json()["error"]["status"] == "ABORTED"
    answer = send(client, "more", task["id"], ifGenerationMatch="2")["result"]["task"]
    assert (answer["status"]["state"], answer["generation"]) == ("TASK_STATE_INPUT_REQUIRED", "4")


def test_if_generation_match_is_ignored_under_1_0_and_for_a_new_task(draft_app):
    client = draft_app.test_client()
    assert send(client, "hello", ifGenerationMatch=99)["result"]["task"]["generation"] == "3"
    task = send(client, "ask")["result"]["task"]
    later = send(client, "more", task["id"], V10, ifGenerationMatch=99)["result"]["task"]
    assert later["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


def test_a_guarded_message_to_a_running_task_moves_its_generation(draft_app):
    """Two sends made on one generation: the first appends (with a status event that
    restates WORKING), the second is refused."""
    client = draft_app.test_client()
    GATES["run"] = gate = Gate()
    try:
        task = send(client, "gate run", returnImmediately=True)["result"]["task"]
        wait_until(lambda: get(client, task["id"])["result"]["generation"] == "2", 5, "working")
        first = send(client, "one", task["id"], ifGenerationMatch=2, returnImmediately=True)
        assert first["result"]["task"]["generation"] == "3"
        second = send(client, "two", task["id"], ifGenerationMatch=2, returnImmediately=True)
        assert second["error"]["code"] == -32010
    finally:
        gate.release.set()


@pytest.mark.parametrize("bad", [-1, "-1", "x", 2 ** 63, "1.5", 1.5, True])
def test_generation_values_are_non_negative_int64(draft_app, bad):
    client = draft_app.test_client()
    task = send(client, "hello")["result"]["task"]
    answer = get(client, task["id"], currentGeneration=bad)
    assert answer["error"]["code"] == -32602
    assert answer["error"]["data"][1]["fieldViolations"][0]["field"] == "currentGeneration"
    assert send(client, "x", task["id"], ifGenerationMatch=bad)["error"]["code"] == -32602
    assert client.get(f"{REST}/tasks/{task['id']}?currentGeneration={bad}",
                      headers=V11).status_code == 400


# ------------------------------------------------------------------ long-poll


def test_long_poll_answers_at_once_when_the_task_is_past_it_or_finished(draft_app):
    client = draft_app.test_client()
    task = send(client, "hello")["result"]["task"]
    assert get(client, task["id"], currentGeneration=1)["result"]["generation"] == "3"
    # Finished: it never advances; answered at once (not after the 5 s timeout).
    assert get(client, task["id"], currentGeneration=3)["result"]["generation"] == "3"
    rest = client.get(f"{REST}/tasks/{task['id']}?currentGeneration=0", headers=V11)
    assert rest.get_json()["generation"] == "3"


def test_long_poll_holds_until_the_task_advances_both_bindings(draft_app):
    client = draft_app.test_client()
    GATES["poll"] = gate = Gate()
    task = send(client, "gate poll", returnImmediately=True)["result"]["task"]
    wait_until(lambda: get(client, task["id"])["result"]["generation"] == "2", 5, "working")
    answers: List[Any] = []
    polls = [threading.Thread(target=lambda: answers.append(
                 get(draft_app.test_client(), task["id"], currentGeneration=2)["result"])),
             threading.Thread(target=lambda: answers.append(draft_app.test_client().get(
                 f"{REST}/tasks/{task['id']}?currentGeneration=2", headers=V11).get_json()))]
    for poll in polls:
        poll.start()
    log = draft_app.extensions["a2a"]["a2a"].service.runtime.log
    wait_until(lambda: log.feeds() == 1, 5, "both polls following the task")
    assert not answers
    gate.release.set()
    for poll in polls:
        poll.join(10)
    assert [a["status"]["state"] for a in answers] == ["TASK_STATE_COMPLETED"] * 2
    # the returned artifact (3) and COMPLETED (4), in one append
    assert {a["generation"] for a in answers} == {"4"}


def test_long_poll_answers_the_task_as_it_is_after_its_timeout(make_app):
    app = make_app(agent, protocol_draft=True, long_poll_timeout=0.2)
    client = app.test_client()
    task = send(client, "ask")["result"]["task"]
    assert get(client, task["id"], currentGeneration=2)["result"] == task


class _Counting:
    """Counts the store calls a crowd makes (wrapping the store's own methods)."""

    def __init__(self, store: Any) -> None:
        self.counts: Dict[str, int] = {}
        for name in ("load", "read", "head"):
            original = getattr(store, name)
            setattr(store, name, self._counted(name, original))

    def _counted(self, name: str, original: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.counts[name] = self.counts.get(name, 0) + 1
            return original(*args, **kwargs)
        return counted


def _woken_cost(app: Flask, crowd: int, name: str) -> Dict[str, int]:
    """The store calls ``crowd`` long-polls of one task make from one event on."""
    state = app.extensions["a2a"]["a2a"]
    client = app.test_client()
    GATES[name] = gate = Gate()
    task = send(client, f"gate {name}", returnImmediately=True)["result"]["task"]
    wait_until(lambda: get(client, task["id"])["result"]["generation"] == "2", 5, "working")
    counting = _Counting(state.service.store)
    answers: List[Optional[str]] = []
    polls = [threading.Thread(target=lambda: answers.append(
        get(app.test_client(), task["id"], currentGeneration=2)["result"]["generation"]))
        for _ in range(crowd)]
    for poll in polls:
        poll.start()
    log = state.service.runtime.log
    wait_until(lambda: log._followers.get(task["id"]) == crowd, 10, "the crowd waiting")
    before = dict(counting.counts)
    gate.release.set()
    for poll in polls:
        poll.join(10)
    assert answers == ["4"] * crowd  # the returned artifact (3) and COMPLETED (4)
    return {name: counting.counts.get(name, 0) - before.get(name, 0) for name in counting.counts}


@pytest.mark.parametrize("store_url", ["memory", "sqlite"], indirect=True)
def test_a_crowd_of_long_polls_costs_the_store_what_one_does(make_app, store_url):
    app = make_app(agent, store=store_url, protocol_draft=True, long_poll_timeout=10.0)
    one = _woken_cost(app, 1, "one")
    crowd = _woken_cost(app, 20, "crowd")
    # The feed reads the event once, and loads the task once, for all twenty; a
    # wake of the shared feed that finds nothing yet (SQLite's poll tick during the
    # write) costs one more read for the crowd as a whole, never one per poll.
    assert sum(crowd.values()) <= sum(one.values()) + 4 < 20, (one, crowd)


# ------------------------------------------------------------------ REST content type


def test_rest_answers_a2a_json_to_clients_that_accept_it(draft_app):
    client = draft_app.test_client()
    a2a_json = {"Accept": "application/a2a+json"}
    sent = client.post(f"{REST}/message:send", headers=a2a_json,
                       json={"message": user_message("hello", "m-ct")})
    assert sent.status_code == 200 and sent.mimetype == "application/a2a+json"
    task_id = sent.get_json()["task"]["id"]
    assert client.get(f"{REST}/tasks/nope", headers=a2a_json).mimetype == "application/a2a+json"
    assert client.get(f"{REST}/tasks/{task_id}", headers={**a2a_json, **V11}).mimetype \
        == "application/a2a+json"
    for accept in ("*/*", "application/json", "application/a2a+json;q=0"):
        assert client.get(f"{REST}/tasks/{task_id}",
                          headers={"Accept": accept}).mimetype == "application/json"
    # A request body typed application/a2a+json is taken.
    typed = client.post(f"{REST}/message:send", data=b'{"message":{"messageId":"m-t",'
                        b'"role":"ROLE_USER","parts":[{"text":"hi"}]}}',
                        headers={"Content-Type": "application/a2a+json", **a2a_json})
    assert typed.status_code == 200 and typed.get_json()["task"]["status"]["state"] \
        == "TASK_STATE_COMPLETED"
    stream = client.post(f"{REST}/message:stream", headers=a2a_json,
                         json={"message": user_message("stream", "m-sse")})
    assert stream.mimetype == "text/event-stream"
