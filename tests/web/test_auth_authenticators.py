"""Authenticators besides the matrix's bearer tokens: API keys, both schemes at once,
and a custom authenticator (the auth matrix: test_auth.py)."""
from __future__ import annotations

from typing import Dict, Iterator

import pytest
from flask import Flask, g, request

from a2a_flask import A2A
from a2a_flask.protocol.errors import PermissionDeniedError
from a2a_flask.protocol.models import SecurityRequirement, StringList, new_id
from a2a_flask.web.auth import APIKeyAuth, BearerAuth, Principal

from tests.conftest import make_card
# apps and fresh_app are fixtures (pytest finds them where they are imported).
from tests.support.auth_matrix import (
    MALLORY, NOBODY, Outcome, REST_V03, REST_V1, RPC_V03, RPC_V1, close, expect_ok,
    expect_task_not_found, fresh_app, make_task, paused, perform, state_of, verify,
)
from tests.support.helpers import ALICE, BOB, validate_card


# ------------------------------------------------------------------ other authenticators


def _rest_get(client, task_id: str, headers: Dict[str, str]) -> Outcome:
    return perform(client, REST_V1.build("get", task_id), headers)


def test_an_api_key_agent_declares_its_scheme_and_owns_tasks_by_key(fresh_app):
    keys = {"key-alice": "alice", "key-bob": "bob"}
    app = fresh_app(auth=APIKeyAuth(keys.get, header="X-API-Key"))
    client = app.test_client()
    card = client.get("/.well-known/agent-card.json").get_json()
    validate_card(card)
    assert card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"] == {
        "location": "header", "name": "X-API-Key"}
    assert card["securityRequirements"] == [{"schemes": {"apiKey": {}}}]
    assert (card["securitySchemes"]["apiKey"]["type"], card["securitySchemes"]["apiKey"]["in"]) \
        == ("apiKey", "header")
    assert card["security"] == [{"apiKey": []}]

    alice, bob = {"X-API-Key": "key-alice"}, {"X-API-Key": "key-bob"}
    task_id = make_task(client, REST_V1, alice)
    expect_task_not_found(REST_V1, _rest_get(client, task_id, bob))
    expect_task_not_found(RPC_V1, perform(client, RPC_V1.build("get", task_id), bob))
    expect_ok(REST_V1, _rest_get(client, task_id, alice))
    for caller in (NOBODY, {"X-API-Key": "key-mallory"}, {"X-API-Key": ""}, ALICE):
        refused = _rest_get(client, task_id, caller)
        assert refused.status == 401, (caller, refused.text)
        assert refused.headers["WWW-Authenticate"] == 'APIKey header="X-API-Key"'


def test_bearer_or_api_key_both_declared_and_one_principal_owns_across_schemes(fresh_app):
    keys = {"key-alice": "alice", "key-bob": "bob"}
    app = fresh_app(auth=[BearerAuth(verify), APIKeyAuth(keys.get)])
    client = app.test_client()
    card = client.get("/.well-known/agent-card.json").get_json()
    validate_card(card)
    assert set(card["securitySchemes"]) == {"bearer", "apiKey"}
    # Two alternatives: either scheme will do (not both at once).
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}},
                                            {"schemes": {"apiKey": {}}}]
    assert card["authentication"] == {"schemes": ["Bearer", "apiKey"]}

    task_id = make_task(client, RPC_V1, {"X-API-Key": "key-alice"})
    expect_ok(REST_V1, _rest_get(client, task_id, ALICE))  # the same alice, by bearer token
    expect_task_not_found(REST_V1, _rest_get(client, task_id, {"X-API-Key": "key-bob"}))
    expect_task_not_found(REST_V1, _rest_get(client, task_id, BOB))
    refused = _rest_get(client, task_id, NOBODY)
    assert refused.status == 401
    challenge = refused.headers["WWW-Authenticate"]
    assert 'Bearer realm="a2a"' in challenge and 'APIKey header="X-API-Key"' in challenge
    assert perform(client, RPC_V1.build("get", task_id), MALLORY).status == 403


USERS = {
    "s-alice": {"id": "alice", "role": "member"},
    "s-bob": {"id": "bob", "role": "member"},
    "s-eve": {"id": "eve", "role": "member", "disabled": True},
}
SESSION_CARD = dict(
    security_schemes={"session": {"apiKeySecurityScheme": {"location": "header",
                                                           "name": "X-Session"}}},
    security_requirements=[SecurityRequirement({"session": StringList()})],
)


def session_app(register_challenge: bool = False) -> Flask:
    """A flask-login style app: a before_request hook loads ``g.user``; the agent's
    ``@a2a.authenticate`` turns it into a Principal."""
    app = Flask("session_app")

    @app.before_request
    def load_user() -> None:
        g.user = USERS.get(request.headers.get("X-Session", ""))

    a2a = A2A(card=make_card(**SESSION_CARD), executor=paused, store="memory://")

    @a2a.authenticate
    def current_user():
        user = g.get("user")
        if user is None:
            return None
        if user.get("disabled"):
            raise PermissionDeniedError("This account is disabled")
        return Principal(user["id"], claims={"role": user["role"]})

    if register_challenge:
        current_user.challenge = 'Session header="X-Session"'  # type: ignore[attr-defined]
    a2a.init_app(app)
    return app


@pytest.fixture
def sessions() -> Iterator[Flask]:
    app = session_app()
    yield app
    close(app)


def test_a_custom_authenticator_from_flask_g_owns_tasks(sessions):
    client = sessions.test_client()
    card = client.get("/.well-known/agent-card.json").get_json()
    validate_card(card)
    assert card["securitySchemes"]["session"]["apiKeySecurityScheme"] == {
        "location": "header", "name": "X-Session"}
    assert card["securityRequirements"] == [{"schemes": {"session": {}}}]

    alice, bob = {"X-Session": "s-alice"}, {"X-Session": "s-bob"}
    task_id = make_task(client, RPC_V1, alice)
    assert state_of(sessions).store.load(task_id).owner == "alice"
    for binding in (RPC_V1, REST_V1, RPC_V03, REST_V03):
        expect_task_not_found(binding, perform(client, binding.build("get", task_id), bob))
        expect_ok(binding, perform(client, binding.build("get", task_id), alice))
    for binding in (RPC_V1, REST_V1):
        missing = perform(client, binding.build("get", task_id), {"X-Session": "s-unknown"})
        assert missing.status == 401 and missing.headers.get("WWW-Authenticate")
        disabled = perform(client, binding.build("get", task_id), {"X-Session": "s-eve"})
        assert disabled.status == 403 and "disabled" in disabled.text


def test_the_401_challenge_of_a_custom_authenticator_names_a_declared_scheme(sessions):
    refused = perform(sessions.test_client(), RPC_V1.build("get", new_id()), NOBODY)
    assert refused.status == 401
    assert not refused.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_custom_authenticator_may_name_its_own_challenge():
    app = session_app(register_challenge=True)
    try:
        refused = perform(app.test_client(), RPC_V1.build("get", new_id()), NOBODY)
        assert refused.headers["WWW-Authenticate"] == 'Session header="X-Session"'
    finally:
        close(app)
