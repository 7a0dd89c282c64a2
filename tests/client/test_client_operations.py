"""The client has one method per operation of the table, and its 1.0 transports send
what the table says (``a2a_flask.protocol.operations``).

A new operation fails here until the client has it (named as its ``Service``
method), and until a sample call below shows it goes out as the table's JSON-RPC
method and REST route.
"""
from __future__ import annotations

import inspect
import json
import re
from typing import Any, Callable, Dict, List

import pytest
import requests

from a2a_flask.client import A2AClient, A2AConnectionError
from a2a_flask.client.legacy import V01Transport, V03Transport
from a2a_flask.client.transport import Transport
from a2a_flask.client.v1 import V1Transport
from a2a_flask.protocol.operations import BY_METHOD, OPERATIONS, Operation

#: The method names of 0.1.0, kept as aliases: alias -> the method it is.
ALIASES_0_1_0 = {
    "send": "send_message", "stream": "send_streaming_message",
    "subscribe": "subscribe_to_task", "cancel": "cancel_task",
    "set_push": "create_push_config", "get_push": "get_push_config",
    "list_push": "list_push_configs", "delete_push": "delete_push_config",
    "extended_card": "get_extended_card",
}
#: What the client has besides operations: its lifetime, and a wait made of GetTasks.
LIFETIME = {"connect", "close", "wait_for_task"}


def public_methods(cls: type) -> set:
    return {name for name, value in inspect.getmembers(cls)
            if not name.startswith("_") and (inspect.isfunction(value) or inspect.ismethod(value))}


def test_the_client_has_one_method_per_operation_named_as_its_service_method():
    operations = {op.service_method for op in OPERATIONS}
    assert public_methods(A2AClient) - LIFETIME - set(ALIASES_0_1_0) == operations


def test_the_names_of_010_are_the_same_methods():
    for alias, method in ALIASES_0_1_0.items():
        assert getattr(A2AClient, alias) is getattr(A2AClient, method), alias
        assert method in BY_METHOD, method
    # Each alias is documented where the client is.
    for alias in ALIASES_0_1_0:
        assert f"``{alias}``" in (A2AClient.__doc__ or ""), alias


@pytest.mark.parametrize("cls", [Transport, V1Transport, V03Transport, V01Transport])
def test_every_transport_offers_every_operation(cls):
    assert {op.service_method for op in OPERATIONS} <= public_methods(cls)


@pytest.mark.parametrize("cls", [V03Transport, V01Transport])
def test_the_older_generations_never_send_a_10_request(cls):
    # Each 0.x transport writes every operation in its own generation's shape (or
    # refuses it); none falls through to the 1.0 method of its base class.
    for op in OPERATIONS:
        owner = next(base for base in cls.__mro__ if op.service_method in vars(base))
        assert owner in (V03Transport, V01Transport), (cls, op.name)


# ------------------------------------------------------------------ what goes out


class Sent(Exception):
    """Raised by the recording session once it has seen the request."""


class RecordingSession(requests.Session):
    """Records each request and answers none (so no answer needs decoding)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: List[Dict[str, Any]] = []

    def request(self, method: str, url: str, **kwargs: Any) -> Any:  # type: ignore[override]
        self.sent.append({"verb": method, "url": url, "params": kwargs.get("params"),
                          "body": json.loads(kwargs["data"]) if kwargs.get("data") else None})
        raise requests.ConnectionError("recorded")


#: One call of each operation through the client, by service method.
SAMPLES: Dict[str, Callable[[A2AClient], Any]] = {
    "send_message": lambda c: c.send_message("hi"),
    "send_streaming_message": lambda c: c.send_streaming_message("hi"),
    "get_task": lambda c: c.get_task("t-1", history_length=2),
    "list_tasks": lambda c: c.list_tasks(page_size=5, include_artifacts=True),
    "cancel_task": lambda c: c.cancel_task("t-1", {"why": "test"}),
    "subscribe_to_task": lambda c: c.subscribe_to_task("t-1"),
    "create_push_config": lambda c: c.create_push_config("t-1", "https://hook.example/x",
                                                         token="tok"),
    "get_push_config": lambda c: c.get_push_config("t-1", "cfg-1"),
    "list_push_configs": lambda c: c.list_push_configs("t-1"),
    "delete_push_config": lambda c: c.delete_push_config("t-1", "cfg-1"),
    "get_extended_card": lambda c: c.get_extended_card(),
}


def test_every_operation_has_a_sample_call():
    assert set(SAMPLES) == set(BY_METHOD)


def sent_by(binding: str, url: str, op: Operation, tenant: str = "") -> Dict[str, Any]:
    session = RecordingSession()
    client = A2AClient(url, binding=binding, session=session, tenant=tenant, retries=0)
    with pytest.raises(A2AConnectionError):
        SAMPLES[op.service_method](client)
    (sent,) = session.sent
    return sent


@pytest.mark.parametrize("tenant", ["", "acme"])
@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_jsonrpc_sends_the_tables_method_name(op, tenant):
    sent = sent_by("JSONRPC", "http://agent.example/a2a", op, tenant)
    assert (sent["verb"], sent["url"]) == ("POST", "http://agent.example/a2a")
    assert sent["body"]["method"] == op.name
    assert sent["body"]["params"].get("tenant", "") == tenant


def rule_pattern(rule: str) -> str:
    """A rule as a regular expression matching the paths it routes."""
    parts = re.split(r"(<a2aid:\w+>)", rule)
    return "".join("[^/]+" if p.startswith("<a2aid:") else re.escape(p) for p in parts)


@pytest.mark.parametrize("tenant", ["", "acme"])
@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_rest_sends_the_tables_route(op, tenant):
    sent = sent_by("HTTP+JSON", "http://agent.example/a2a/rest", op, tenant)
    (route,) = op.rest
    root = "http://agent.example/a2a/rest" + (f"/{tenant}" if tenant else "")
    assert sent["verb"] in route.verbs
    assert re.fullmatch(re.escape(root) + rule_pattern(route.rule), sent["url"]), sent["url"]
    # The path holds its members; the rest is the body or the query, as the table says.
    members = sent["body"] if route.source == "body" else sent["params"] or {}
    assert not set(route.variables) & set(members), members
    assert "tenant" not in members
    if route.source != "body":
        assert sent["body"] is None
    if route.source != "query":
        assert not sent["params"]


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_rest_path_members_are_one_quoted_segment_each(op):
    values = {name: "a/b c:d" for name in op.rest[0].variables}
    path = op.rest[0].path(values)
    assert path.count("a%2Fb%20c%3Ad") == len(values)


def test_a_10_push_config_read_without_an_id_asks_for_the_one_named_after_the_task():
    for binding, url in (("JSONRPC", "http://agent.example/a2a"),
                         ("HTTP+JSON", "http://agent.example/a2a/rest")):
        session = RecordingSession()
        with pytest.raises(A2AConnectionError):
            A2AClient(url, binding=binding, session=session).get_push_config("t-9")
        (sent,) = session.sent
        if binding == "JSONRPC":
            assert sent["body"]["params"] == {"taskId": "t-9", "id": "t-9"}
        else:
            assert sent["url"].endswith("/tasks/t-9/pushNotificationConfigs/t-9")


def test_the_request_sent_is_the_callers_own_arguments():
    session = RecordingSession()
    client = A2AClient("http://agent.example/a2a/rest", binding="rest", session=session)
    for call in (lambda: client.get_task("t-1", history_length=2),
                 lambda: client.list_tasks(page_size=5, include_artifacts=True),
                 lambda: client.cancel_task("t-1", {"why": "test"}),
                 lambda: client.create_push_config("t-1", "https://hook.example/x", token="tok")):
        with pytest.raises(A2AConnectionError):
            call()
    get, listed, cancel, create = session.sent
    assert get["params"] == {"historyLength": 2}
    assert listed["params"] == {"pageSize": 5, "includeArtifacts": "true"}
    assert cancel["body"] == {"metadata": {"why": "test"}}
    assert create["body"] == {"url": "https://hook.example/x", "token": "tok"}
