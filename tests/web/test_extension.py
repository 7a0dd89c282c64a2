"""The Flask extension object: ``init_app``, per-app state, several agents, ``A2A_*`` config.

Each test builds its own app(s) through the ``new_app`` fixture, which closes
every store it opened when the test ends.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator, List

import pytest
from flask import Flask

from a2a_flask import A2A, MemoryStore, ShelveStore, StoreUnavailable
from a2a_flask.web.agent_state import AgentState

from tests.conftest import echo, make_card
from tests.support import wire
from tests.support.helpers import V1, parse_sse, rpc_body, user_message, validate, validate_card
from tests.support.wire import rpc

CARD_PATH = "/.well-known/agent-card.json"


@pytest.fixture
def new_app() -> Iterator[Callable[..., Flask]]:
    """``new_app(**config)``: an empty Flask app with ``A2A_*`` keys set; stores closed after."""
    apps: List[Flask] = []

    def factory(**config: Any) -> Flask:
        app = Flask(f"ext_app_{len(apps)}")
        app.config.update({"A2A_" + key.upper(): value for key, value in config.items()})
        apps.append(app)
        return app

    yield factory
    for app in apps:
        for state in app.extensions.get("a2a", {}).values():
            state.store.close()


def send(client: Any, text: str, path: str = "/a2a") -> dict:
    """SendMessage through ``path``; the completed task, schema-checked."""
    body = rpc(client, "SendMessage", {"message": user_message(text)}, path=path)
    assert "error" not in body, body
    validate(body["result"], "Send Message Response")
    return body["result"]["task"]


def artifact_text(task: dict) -> str:
    return task["artifacts"][0]["parts"][0]["text"]


def jsonrpc_url(card: dict) -> str:
    return next(i["url"] for i in card["supportedInterfaces"] if i["protocolBinding"] == "JSONRPC")


# ------------------------------------------------------------------ init_app


def test_init_app_pattern_with_executor_decorator(new_app):
    a2a = A2A(card=make_card())

    @a2a.executor
    def shout(ctx):
        return ctx.text.upper()

    app = new_app()
    assert "a2a" not in app.extensions
    a2a.init_app(app)
    task = send(app.test_client(), "quiet please")
    assert artifact_text(task) == "QUIET PLEASE"


def test_state_lives_in_app_extensions_under_the_agent_name(new_app):
    app = new_app()
    a2a = A2A(app, card=make_card(), executor=echo, name="helper")
    state = app.extensions["a2a"]["helper"]
    assert isinstance(state, AgentState)
    assert state.name == "helper"
    assert a2a.state(app) is state
    assert a2a.store(app) is state.store
    assert state.service.store is state.store
    with app.app_context():
        assert a2a.state() is state


def test_one_extension_object_serves_two_apps_with_separate_state(new_app):
    a2a = A2A(card=make_card(), executor=echo)
    first, second = new_app(), new_app(url_prefix="/other")
    a2a.init_app(first)
    a2a.init_app(second)
    assert a2a.state(first) is not a2a.state(second)
    assert a2a.store(first) is not a2a.store(second)
    task = send(first.test_client(), "one")
    assert a2a.store(first).load(task["id"]) is not None
    assert a2a.store(second).load(task["id"]) is None
    send(second.test_client(), "two", path="/other")


def test_init_app_without_executor_raises(new_app):
    app = new_app()
    with pytest.raises(RuntimeError, match="executor"):
        A2A(card=make_card()).init_app(app)
    assert not app.extensions.get("a2a")


# ------------------------------------------------------------------ several agents


@pytest.fixture
def two_agents(new_app) -> Flask:
    app = new_app()
    A2A(app, card=make_card(name="Alpha"), executor=lambda ctx: "alpha:" + ctx.text,
        name="alpha", url_prefix="/alpha", store="memory://")
    A2A(app, card=make_card(name="Beta"), executor=lambda ctx: "beta:" + ctx.text,
        name="beta", url_prefix="/beta", store="memory://")
    return app


def test_two_agents_each_answer_on_their_own_endpoint(two_agents):
    client = two_agents.test_client()
    assert artifact_text(send(client, "hi", path="/alpha")) == "alpha:hi"
    assert artifact_text(send(client, "hi", path="/beta")) == "beta:hi"
    assert wire.post(client, "ListTasks", {}).status_code == 404


def test_two_agents_keep_separate_stores(two_agents):
    client = two_agents.test_client()
    task = send(client, "mine", path="/alpha")
    found = rpc(client, "GetTask", {"id": task["id"]}, path="/alpha")["result"]
    validate(found, "Task")
    assert found["id"] == task["id"]
    error = rpc(client, "GetTask", {"id": task["id"]}, path="/beta")["error"]
    assert error["code"] == -32001
    assert set(two_agents.extensions["a2a"]) == {"alpha", "beta"}


def test_agents_naming_one_store_share_one_object_closed_with_the_last(new_app, tmp_path):
    """Each opening the URL would make two indexes of one shelve file, each reading
    all of it again after the other compacts it; memory:// stays each agent's own."""
    url = f"shelve://{tmp_path}/shared"
    app = new_app(store=url)
    alpha = A2A(app, card=make_card(), executor=echo, name="alpha", url_prefix="/alpha")
    beta = A2A(app, card=make_card(), executor=echo, name="beta", url_prefix="/beta")
    own = A2A(app, card=make_card(), executor=echo, name="own", url_prefix="/own",
              store="memory://")
    mine = A2A(app, card=make_card(), executor=echo, name="mine", url_prefix="/mine",
               store="memory://")
    assert isinstance(alpha.store(app), ShelveStore) and alpha.store(app) is beta.store(app)
    assert own.store(app) is not mine.store(app)
    other_app = new_app(store=url)  # another app (as another worker would): its own object
    other = A2A(other_app, card=make_card(), executor=echo, name="alpha", url_prefix="/alpha")
    assert other.store(other_app) is not alpha.store(app)

    client = app.test_client()
    first = send(client, "one", path="/alpha")
    alpha.state(app).close()
    alpha.state(app).close()  # closing twice lets go once: beta still has the store
    second = send(client, "two", path="/beta")
    assert beta.store(app).load(first["id"]) is not None
    beta.state(app).close()  # the last one: closed now
    with pytest.raises(StoreUnavailable):  # (its files are closed)
        beta.store(app).load(second["id"])
    assert other.store(other_app).load(second["id"]).task.artifacts[0].parts[0].text == "two"


def test_two_agents_each_serve_their_own_card_under_their_prefix(two_agents):
    client = two_agents.test_client()
    for name, prefix in (("Alpha", "/alpha"), ("Beta", "/beta")):
        response = client.get(prefix + CARD_PATH)
        assert response.status_code == 200
        card = response.get_json()
        validate_card(card)
        assert card["name"] == name
        assert jsonrpc_url(card) == "http://localhost" + prefix
        assert client.get(prefix + "/.well-known/agent.json").get_json() == card


def test_only_the_first_agent_serves_the_root_card(two_agents):
    client = two_agents.test_client()
    for path in (CARD_PATH, "/.well-known/agent.json"):
        card = client.get(path).get_json()
        validate_card(card)
        assert card["name"] == "Alpha"
        assert jsonrpc_url(card) == "http://localhost/alpha"


def test_duplicate_agent_name_raises_and_keeps_the_first(new_app):
    app = new_app()
    A2A(app, card=make_card(name="First"), executor=echo, name="dup", url_prefix="/one")
    first_state = app.extensions["a2a"]["dup"]
    with pytest.raises(RuntimeError, match="dup"):
        A2A(app, card=make_card(name="Second"), executor=echo, name="dup", url_prefix="/two")
    assert app.extensions["a2a"]["dup"] is first_state
    assert app.extensions["a2a"]["dup"].service.card.name == "First"


def test_second_agent_with_default_name_raises(new_app):
    app = new_app()
    A2A(app, card=make_card(), executor=echo)
    with pytest.raises(RuntimeError):
        A2A(app, card=make_card(), executor=echo, url_prefix="/other")


# ------------------------------------------------------------------ config


def test_config_keys_are_read_from_app_config(new_app, tmp_path):
    app = new_app(url_prefix="/cfg", sse_keepalive=0.25, store=f"shelve://{tmp_path}/cfg-tasks",
                  blocking_timeout=12, card_max_age=42)
    A2A(app, card=make_card(), executor=echo)
    state = app.extensions["a2a"]["a2a"]
    assert state.settings.url_prefix == "/cfg"
    assert state.settings.sse_keepalive == 0.25
    assert state.service.keepalive == 0.25
    assert state.service.blocking_timeout == 12.0
    assert isinstance(state.store, ShelveStore)
    client = app.test_client()
    task = send(client, "configured", path="/cfg")
    assert state.store.load(task["id"]) is not None
    assert list(tmp_path.glob("cfg-tasks*")), "the shelve file named by A2A_STORE was not used"
    assert wire.post(client, "ListTasks", {}).status_code == 404
    assert "max-age=42" in client.get(CARD_PATH).headers["Cache-Control"]


def test_sse_keepalive_config_sets_the_comment_interval(new_app):
    def slow(ctx):
        time.sleep(0.3)
        return ctx.text

    app = new_app(sse_keepalive=0.05, store="memory://")
    A2A(app, card=make_card(), executor=slow)
    response = app.test_client().post(
        "/a2a", json=rpc_body("SendStreamingMessage", {"message": user_message("slow")}),
        headers=V1)
    assert response.mimetype == "text/event-stream"
    text = response.get_data(as_text=True)
    assert text.count(": keep-alive") >= 2, text
    events = parse_sse(text)
    assert events[-1]["data"]["result"]["statusUpdate"]["status"]["state"] == \
        "TASK_STATE_COMPLETED"
    for event in events:
        validate(event["data"]["result"], "Stream Response")


def test_default_keepalive_sends_no_comment_on_a_short_stream(new_app):
    def slow(ctx):
        time.sleep(0.1)
        return ctx.text

    app = new_app(store="memory://")
    A2A(app, card=make_card(), executor=slow)
    assert app.extensions["a2a"]["a2a"].settings.sse_keepalive == 15.0
    response = app.test_client().post(
        "/a2a", json=rpc_body("SendStreamingMessage", {"message": user_message("slow")}),
        headers=V1)
    assert ": keep-alive" not in response.get_data(as_text=True)


def test_constructor_arguments_win_over_config(new_app, tmp_path):
    app = new_app(url_prefix="/cfg", sse_keepalive=0.25, store=f"shelve://{tmp_path}/cfg-tasks")
    A2A(app, card=make_card(), executor=echo, url_prefix="/ctor", store="memory://",
        sse_keepalive=7)
    state = app.extensions["a2a"]["a2a"]
    assert state.settings.url_prefix == "/ctor"
    assert state.service.keepalive == 7.0
    assert isinstance(state.store, MemoryStore)
    assert not list(tmp_path.glob("cfg-tasks*"))
    client = app.test_client()
    send(client, "ctor", path="/ctor")
    assert client.post("/cfg", json=rpc_body("ListTasks", {}), headers=V1).status_code == 404
    assert jsonrpc_url(client.get(CARD_PATH).get_json()) == "http://localhost/ctor"


def test_store_instance_is_used_as_given(new_app):
    store = MemoryStore()
    app = new_app(store="shelve:///nonexistent-dir/never-opened")
    a2a = A2A(app, card=make_card(), executor=echo, store=store)
    assert a2a.store(app) is store
    task = send(app.test_client(), "into my store")
    assert store.load(task["id"]) is not None


def test_unset_keys_use_documented_defaults(new_app):
    app = new_app()
    A2A(app, card=make_card(), executor=echo)
    settings = app.extensions["a2a"]["a2a"].settings
    assert settings.url_prefix == "/a2a"
    assert settings.store == "memory://"
    assert settings.sse_keepalive == 15.0
    assert isinstance(app.extensions["a2a"]["a2a"].store, MemoryStore)


@pytest.mark.parametrize("key", ["sse_keepalive", "blocking_timeout", "cancel_grace"])
def test_non_positive_durations_are_refused(new_app, key):
    app = new_app(**{key: 0})
    with pytest.raises(ValueError, match=key.upper()):
        A2A(app, card=make_card(), executor=echo)
