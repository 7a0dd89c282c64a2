"""Settings mean what they say: every field read by its declared type, from Python
values and from the environment (``app.config.from_prefixed_env()``) alike.

The walk covers each field of :class:`~a2a_flask.config.Settings` with a Python
value, every accepted string spelling and a bad value, through ``init_app``;
then the inspector, version matching, the root card and the auth-required
stream rule are checked by their effect on requests, not by the parsed value.
"""
from __future__ import annotations

import gc
import os
from typing import Any, Dict, Iterator, List, Tuple

import pytest
from flask import Flask

from a2a_flask import A2A, AgentCapabilities
from a2a_flask.config import Settings, config_key, field_default, field_types, kind_of
from a2a_flask.web.agent_state import AgentState

from tests.conftest import echo, make_card
from tests.support.helpers import V1, rpc_body, user_message
from tests.support.wire import rpc

pytestmark = pytest.mark.declare(server=[
    "test_the_issue_case_over_real_gunicorn",
    "test_gc_full_every_applies_in_a_gunicorn_worker"])

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def spellings(words: Tuple[str, ...]) -> List[str]:
    """Each word in lower, upper and title case, and padded with spaces."""
    return sorted({w for word in words for w in (word, word.upper(), word.title(), f" {word} ")})


def _pem() -> Tuple[str, Any]:
    crypto = pytest.importorskip("cryptography.hazmat.primitives.asymmetric.ec")
    from cryptography.hazmat.primitives import serialization

    key = crypto.generate_private_key(crypto.SECP256R1())
    text = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode("ascii")
    return text, key


#: Strings some fields need (a valid URL prefix, store URL...); other strings take "x".
STRING_SAMPLES = {"url_prefix": ("/agents/x/", "/agents/x"),
                  "public_url": ("https://agents.example.com/", "https://agents.example.com"),
                  "store": ("memory://", "memory://"), "runner": ("inline", "inline")}


def cases(name: str, tp: Any) -> Dict[str, List[Tuple[Any, Any]]]:
    """``python``: (value, expected) set in app.config; ``env``: (string, expected)
    set in the environment and also in app.config; ``bad``: values that must stop init_app."""
    kind = kind_of(tp).name
    base, unset = kind.replace(" or unset", ""), kind.endswith(" or unset")
    python: List[Tuple[Any, Any]]
    env: List[Tuple[Any, Any]]
    if base == "boolean":
        python = [(True, True), (False, False)]
        env = [(s, True) for s in spellings(TRUE_WORDS)] + \
              [(s, False) for s in spellings(FALSE_WORDS)]
        bad: List[Any] = ["flase", "2", "y"]
    elif base == "integer":
        python, env = [(7, 7)], [("7", 7), (" 12 ", 12), ("1_000", 1000), ("2e3", 2000)]
        bad = ["seven", "1.5", True]
    elif base == "number":
        python, env = [(2.5, 2.5), (3, 3.0)], [("2.5", 2.5), ("3", 3.0), (" 0.25 ", 0.25)]
        bad = ["fast", "nan", "inf", True]
    elif base == "string":
        value, expected = STRING_SAMPLES.get(name, ("x", "x"))
        python, env = [(value, expected)], [(value, expected)]
        bad = [5, ["x"]]  # FLASK_A2A_X=5 reaches the config as the JSON number 5
    elif base == "host list":
        hosts = ("a.example", "10.0.0.0/8")
        python = [(list(hosts), hosts), (hosts, hosts)]
        env = [("a.example,10.0.0.0/8", hosts), ("a.example 10.0.0.0/8", hosts),
               (" a.example , 10.0.0.0/8 ", hosts)]
        bad = [5, [1, 2]]
    elif base == "private key":
        pem, key = _pem()
        python = [(pem, pem), (pem.encode(), pem.encode()), (key, key)]
        env = [(pem, pem)]
        bad = ["/etc/keys/agent.pem", b"not a key", 5]
    else:
        raise AssertionError(f"test_config knows no samples for settings of kind {kind!r} "
                             f"({name}): add them here")
    if unset:
        python.append((None, None))
        env += [("none", None), ("None", None), ("NONE", None), ("", None)]
    return {"python": python, "env": env, "bad": bad}


@pytest.fixture
def clean_env(monkeypatch) -> Iterator[Any]:
    for key in list(os.environ):
        if key.startswith("FLASK_"):
            monkeypatch.delenv(key)
    yield monkeypatch


def build(config: Dict[str, Any] = {}, *, env: Dict[str, str] = {}, monkeypatch: Any = None,
          debug: bool = False, push: bool = False) -> Tuple[Flask, AgentState]:
    """An app with one agent, configured from ``config`` and then the environment."""
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    app = Flask("config_test")
    app.debug = debug
    app.config.update(config)
    app.config.from_prefixed_env()
    card = make_card(capabilities=AgentCapabilities(streaming=True, push_notifications=push))
    a2a = A2A(card=card, executor=echo)
    a2a.init_app(app)
    return app, app.extensions["a2a"]["a2a"]


def read(key: str, value: Any, *, env: bool, monkeypatch: Any) -> Any:
    """``value`` read as setting ``key`` from a Flask app's config, set directly or
    from the environment, by the reader ``init_app`` uses."""
    app = Flask("config_read")
    if env:
        monkeypatch.setenv("FLASK_" + key, value)
        try:
            app.config.from_prefixed_env()
        finally:
            monkeypatch.delenv("FLASK_" + key)
    else:
        app.config[key] = value
    return getattr(Settings.from_config(app.config), key[len("A2A_"):].lower())


def through_init_app(key: str, value: Any) -> Any:
    app, state = build({key: value})
    state.close()
    return getattr(state.settings, key[len("A2A_"):].lower())


FIELDS = list(field_types().items())


@pytest.mark.parametrize("name,tp", FIELDS, ids=[name for name, _ in FIELDS])
def test_every_setting_reads_python_values_and_every_spelling(name, tp, clean_env):
    key = config_key(name)
    walk = cases(name, tp)
    for value, expected in walk["python"]:
        assert read(key, value, env=False, monkeypatch=clean_env) == expected, (key, value)
    for text, expected in walk["env"]:
        for env in (False, True):
            got = read(key, text, env=env, monkeypatch=clean_env)
            assert got == expected, (key, text, "environment" if env else "app.config")
            assert type(got) is type(expected)
    for value in walk["bad"]:
        for env in [False] + ([True] if isinstance(value, str) else []):
            with pytest.raises(ValueError) as caught:
                read(key, value, env=env, monkeypatch=clean_env)
            message = str(caught.value)
            assert key in message and " use " in message, message
            if kind_of(tp).name.startswith("private key") and isinstance(value, (str, bytes)):
                assert str(value) not in message  # key material never reaches a log
            elif not env:
                assert repr(value) in message, message
    # The same reader runs in init_app: the first spelling and the first bad value.
    text, expected = walk["env"][0]
    assert through_init_app(key, text) == expected
    with pytest.raises(ValueError, match=key):
        through_init_app(key, walk["bad"][0])
    # Unset: the declared default.
    assert getattr(Settings.from_config({}), name) == field_default(name)


def test_a_bad_value_names_key_value_and_what_is_accepted(clean_env):
    with pytest.raises(ValueError) as caught:
        build(env={"FLASK_A2A_INSPECTOR": "flase"}, monkeypatch=clean_env)
    assert str(caught.value) == (
        "A2A_INSPECTOR='flase' is not a valid boolean or unset: use true/false, 1/0, yes/no, "
        "on/off (any case); none or empty for unset")
    with pytest.raises(ValueError, match=r"inspector='maybe'"):
        A2A(Flask("x"), card=make_card(), executor=echo, inspector="maybe")
    with pytest.raises(TypeError, match="inspectr"):
        A2A(Flask("x"), card=make_card(), executor=echo, inspectr=True)


@pytest.mark.parametrize("key,value,rule", [
    ("A2A_LEASE_TTL", "0", "> 0"), ("A2A_SSE_KEEPALIVE", "-1", "> 0"),
    ("A2A_MAX_PARTS", "0", ">= 1"), ("A2A_MAX_HISTORY", "-1", ">= 0"),
    ("A2A_TASK_TTL", "-5", ">= 0"), ("A2A_CARD_MAX_AGE", "-1", ">= 0"),
    ("A2A_GC_FULL_EVERY", "-1", ">= 0"),
])
def test_range_checks_stay(key, value, rule, clean_env):
    with pytest.raises(ValueError, match=f"{key} must be {rule}"):
        build(env={"FLASK_" + key: value}, monkeypatch=clean_env)


# ------------------------------------------------------------------ effects, over HTTP

#: Every spelling from the environment (the issue's case); in app.config, Python
#: bools and a few strings (the same reader, walked above).
SWITCHES = ([("env", s, True) for s in spellings(TRUE_WORDS)] +
            [("env", s, False) for s in spellings(FALSE_WORDS)] +
            [("config", True, True), ("config", "On", True),
             ("config", False, False), ("config", "False", False)])


def effect_app(route: str, key: str, text: Any, monkeypatch: Any, **options: Any
               ) -> Tuple[Flask, AgentState]:
    if route == "env":
        return build(env={"FLASK_" + key: text}, monkeypatch=monkeypatch, **options)
    return build({key: text}, **options)


@pytest.mark.parametrize("route,text,on", SWITCHES)
def test_inspector_page_follows_every_spelling(route, text, on, clean_env):
    app, state = effect_app(route, "A2A_INSPECTOR", text, clean_env)  # not in debug mode
    try:
        response = app.test_client().get("/a2a/inspector/")
        assert response.status_code == (200 if on else 404), (route, text)
    finally:
        state.close()


@pytest.mark.parametrize("text", ["none", "None", ""])
@pytest.mark.parametrize("debug", [False, True])
def test_inspector_unset_follows_debug_mode(text, debug, clean_env):
    app, state = build(env={"FLASK_A2A_INSPECTOR": text}, monkeypatch=clean_env, debug=debug)
    try:
        assert app.test_client().get("/a2a/inspector/").status_code == (200 if debug else 404)
    finally:
        state.close()


@pytest.mark.parametrize("route,text,lenient", SWITCHES)
def test_version_matching_follows_every_spelling(route, text, lenient, clean_env):
    app, state = effect_app(route, "A2A_LENIENT_VERSION", text, clean_env)
    try:
        # A 1.0 method name without A2A-Version.
        body = app.test_client().post(
            "/a2a", json=rpc_body("SendMessage", {"message": user_message("hi")})).get_json()
        if lenient:
            assert body["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", body
        else:
            assert body["error"]["code"] == -32009, body
    finally:
        state.close()


@pytest.mark.parametrize("route,text,served", SWITCHES + [
    ("env", "none", True), ("env", "", True), ("config", None, True)])  # unset: the first agent
def test_root_card_follows_every_spelling(route, text, served, clean_env):
    app, state = effect_app(route, "A2A_ROOT_CARD", text, clean_env)
    try:
        client = app.test_client()
        for path in ("/.well-known/agent-card.json", "/.well-known/agent.json"):
            assert client.get(path).status_code == (200 if served else 404), (route, text, path)
        assert client.get("/a2a/.well-known/agent-card.json").status_code == 200
    finally:
        state.close()


def test_two_agents_error_names_a_fix_that_works():
    app = Flask("two")
    A2A(app, card=make_card(), executor=echo)
    with pytest.raises(RuntimeError, match="root_card=False") as caught:
        A2A(app, card=make_card(), executor=echo, name="b", url_prefix="/b", root_card="yes")
    assert "'b'" in str(caught.value)
    # ...and the fix it names does work.
    A2A(app, card=make_card(), executor=echo, name="c", url_prefix="/c", root_card=False)
    assert app.test_client().get("/c/.well-known/agent-card.json").status_code == 200
    for state in app.extensions["a2a"].values():
        state.close()


@pytest.mark.parametrize("text,closes", [("off", False), ("False", False), ("no", False),
                                         ("on", True), ("True", True), ("1", True)])
def test_close_stream_on_auth_required_follows_the_spelling(text, closes, clean_env):
    def ask_auth(ctx):
        ctx.require_auth("sign in")

    clean_env.setenv("FLASK_A2A_CLOSE_STREAM_ON_AUTH_REQUIRED", text)
    app = Flask("auth_stream")
    app.config.from_prefixed_env()
    A2A(app, card=make_card(), executor=ask_auth)
    state = app.extensions["a2a"]["a2a"]
    try:
        assert state.service.runtime.following.close_on_auth_required is closes
    finally:
        state.close()


@pytest.mark.parametrize("text,allowed", [("off", False), ("No", False), ("yes", True),
                                          ("ON", True)])
def test_push_allow_private_follows_the_spelling(text, allowed, clean_env):
    app, state = build(env={"FLASK_A2A_PUSH_ALLOW_PRIVATE": text}, monkeypatch=clean_env,
                       push=True)
    try:
        body = rpc(app.test_client(), "SendMessage", {
            "message": user_message("hi"),
            "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1:9/hook"}}},
            headers=V1)
        assert ("error" not in body) is allowed, body
    finally:
        state.close()


def test_the_issue_case_over_real_gunicorn():
    """FLASK_A2A_INSPECTOR=False and FLASK_A2A_LENIENT_VERSION=no used to switch both on."""
    import requests

    from tests.support.helpers import Server

    env = {"FLASK_A2A_INSPECTOR": "False", "FLASK_A2A_LENIENT_VERSION": "no"}
    with Server("examples.echo_agent:app", env=env) as server:
        assert requests.get(server.url + "/a2a/inspector/", timeout=10).status_code == 404
        body = requests.post(server.url + "/a2a", timeout=10, json=rpc_body(
            "SendMessage", {"message": user_message("hi")})).json()
        assert body["error"]["code"] == -32009, body
    # A misspelling stops the worker from booting, and the log says why.
    with pytest.raises(RuntimeError, match=r"ValueError: A2A_INSPECTOR='flase' is not a valid"):
        Server("examples.echo_agent:app", env={"FLASK_A2A_INSPECTOR": "flase"})


@pytest.fixture
def gc_threshold() -> Iterator[Tuple[int, int, int]]:
    """The collector's thresholds as they were; put back afterwards."""
    before = gc.get_threshold()
    yield before
    gc.set_threshold(*before)


def test_gc_full_every_raises_only_the_full_threshold(gc_threshold, clean_env):
    young, middle, _ = gc_threshold
    gc.set_threshold(young, middle, 10)
    build(env={"FLASK_A2A_GC_FULL_EVERY": "1000"}, monkeypatch=clean_env)
    assert gc.get_threshold() == (young, middle, 1000)
    # A smaller value (another agent's, say) never lowers it; 0 leaves it alone.
    build({"A2A_GC_FULL_EVERY": 50}, monkeypatch=clean_env)
    build(monkeypatch=clean_env)
    assert gc.get_threshold() == (young, middle, 1000)


def test_gc_full_every_applies_in_a_gunicorn_worker():
    import requests

    from tests.support.helpers import Server

    with Server("tests.support.memory_app:app", env={"FLASK_A2A_GC_FULL_EVERY": "500"}) as server:
        answer = requests.get(server.url + "/probe/heap", timeout=30).json()
    assert answer["gc_threshold"][2] == 500, answer


def test_webhook_policy_from_config_reads_by_type_too():
    from a2a_flask.push.guard import WebhookPolicy

    assert WebhookPolicy.from_config({"A2A_PUSH_ALLOW_PRIVATE": "off"}).allow_private is False
    assert WebhookPolicy.from_config({"A2A_PUSH_ALLOW_PRIVATE": "On"}).allow_private is True
    with pytest.raises(ValueError, match="A2A_PUSH_ALLOW_PRIVATE='nope'"):
        WebhookPolicy.from_config({"A2A_PUSH_ALLOW_PRIVATE": "nope"})
