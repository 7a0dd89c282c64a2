"""Shared fixtures: an app factory, the test client, stores, and real servers."""
from __future__ import annotations

import os
import uuid
from typing import Any, Callable, Optional

import pytest
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill
from a2a_flask.web.extension import AgentState

from .helpers import Server


def make_card(**overrides: Any) -> AgentCard:
    values = dict(
        name="Test agent",
        description="An agent for tests",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id="test", name="Test", description="Tests things", tags=["test"])],
    )
    values.update(overrides)
    return AgentCard(**values)


def echo(ctx):
    return ctx.text


@pytest.fixture(params=["memory", "shelve", "sqlite", "redis"])
def store_url(request, tmp_path) -> str:
    """Each test using it runs once per store backend (Redis: a key prefix of its own)."""
    if request.param == "memory":
        return "memory://"
    if request.param == "redis":
        prefix = f"a2atest-{uuid.uuid4().hex[:12]}"
        request.addfinalizer(lambda: drop_redis_prefix(prefix))
        return f"{REDIS_URL}?prefix={prefix}"
    return f"{request.param}://{tmp_path}/tasks"


REDIS_URL = os.environ.get("A2A_TEST_REDIS", "redis://127.0.0.1:6379/15")


def drop_redis_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()


@pytest.fixture
def make_app(tmp_path) -> Callable[..., Flask]:
    """Build an app with one agent: ``make_app(executor, card=..., store=..., **config)``.

    Webhooks on ``example.com`` names pass the SSRF guard by name (the machine
    has no DNS for them); tests of the guard itself set ``push_allowed_hosts``.
    """
    created = []

    def factory(executor: Optional[Callable] = None, *, card: Optional[AgentCard] = None,
                store: Any = None, **config: Any) -> Flask:
        config.setdefault("push_allowed_hosts", "example.com,*.example.com")
        app = Flask("test_app")
        app.config.update({"A2A_" + k.upper(): v for k, v in config.items()})
        A2A(app, card=card or make_card(), executor=executor or echo, store=store)
        created.append(app)
        return app

    yield factory
    for app in created:
        for state in app.extensions.get("a2a", {}).values():
            state.close()


@pytest.fixture
def app(make_app, store_url) -> Flask:
    return make_app(store=store_url)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def a2a(app) -> AgentState:
    """The agent's state: ``a2a.service``, ``a2a.store``, ``a2a.settings``."""
    return app.extensions["a2a"]["a2a"]


@pytest.fixture(scope="session")
def conformance_server():
    """A real ``gunicorn -k gevent`` running the conformance agent on a free port."""
    with Server("examples.conformance_agent:app") as server:
        yield server
