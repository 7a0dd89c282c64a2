"""The agent card: well-known paths, schema, caching, interface URLs, the extended card.

Every card served is validated against the official 1.0 JSON schema ("Agent
Card"), and the JSON-RPC URL it advertises is POSTed to, so that a wrong
``supportedInterfaces`` (wrong scheme, host, mount point or prefix) fails.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, Optional
from urllib.parse import urlsplit

import pytest
from flask import Flask
from werkzeug.http import parse_date
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.test import Client

from a2a_flask import (
    A2A,
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
)
from a2a_flask.engine.service import CallContext

from tests.conftest import echo, make_card
from tests.support import wire
from tests.support.helpers import (
    ALICE, LEGACY_CARD_MEMBERS, V1, bearer_auth, card_v1_view, rpc_body, user_message, validate,
    validate_card)
from tests.support.wire import rpc

CARD_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"


# ------------------------------------------------------------------ helpers


def get_card(client: Any, path: str = CARD_PATHS[0], **kwargs: Any) -> Dict[str, Any]:
    """GET a card, check the response, validate it against the schema, return it."""
    response = client.get(path, **kwargs)
    assert response.status_code == 200, (path, response.status_code)
    assert response.mimetype == "application/json"
    card = json.loads(response.get_data(as_text=True))
    validate_card(card)
    return card


def interface(card: Dict[str, Any], binding: str = "JSONRPC", version: str = "1.0") -> Dict[str, Any]:
    matches = [i for i in card["supportedInterfaces"]
               if i["protocolBinding"] == binding and i["protocolVersion"] == version]
    assert len(matches) == 1, card["supportedInterfaces"]
    return matches[0]


def jsonrpc_url(card: Dict[str, Any]) -> str:
    return interface(card)["url"]


def assert_url_serves_jsonrpc(client: Any, url: str, headers: Optional[Dict[str, str]] = None,
                              **kwargs: Any) -> None:
    """POST a SendMessage to an absolute URL from a card; it must answer with a task."""
    response = client.post(url, json=rpc_body("SendMessage", {"message": user_message("via card")}),
                           headers={**V1, **(headers or {})}, **kwargs)
    assert response.status_code == 200, (url, response.status_code)
    body = json.loads(response.get_data(as_text=True))
    assert "error" not in body, body
    validate(body["result"], "Send Message Response")


def rpc_error(body: Dict[str, Any], code: int, reason: str) -> None:
    assert "result" not in body, body
    assert body["error"]["code"] == code, body
    infos = [d for d in body["error"]["data"] if d["@type"] == ERROR_INFO]
    assert [i["reason"] for i in infos] == [reason]


@pytest.fixture
def client(make_app):
    return make_app(store="memory://").test_client()


# ------------------------------------------------------------------ paths and schema


def test_card_at_agent_card_json_is_a_valid_1_0_card(client):
    card = get_card(client)
    assert card["name"] == "Test agent"
    assert card["description"] and card["version"] == "1.0.0"
    assert card["defaultInputModes"] and card["defaultOutputModes"]
    assert card["skills"][0] == {"id": "test", "name": "Test", "description": "Tests things",
                                 "tags": ["test"]}
    assert card["capabilities"]["streaming"] is True


def test_legacy_agent_json_serves_the_same_card(client):
    assert get_card(client, CARD_PATHS[1]) == get_card(client, CARD_PATHS[0])
    assert client.get(CARD_PATHS[1]).data == client.get(CARD_PATHS[0]).data


def test_card_1_0_part_uses_1_0_member_names_only(client):
    card = card_v1_view(get_card(client))
    for old in ("url", "protocolVersion", "protocolVersions", "preferredTransport",
                "additionalInterfaces", "supportsAuthenticatedExtendedCard", "security"):
        assert old not in card
    assert "stateTransitionHistory" not in card["capabilities"]


def test_card_carries_the_0_3_members_derived_from_the_0_3_interface(client):
    card = get_card(client)
    legacy = interface(card, "JSONRPC", "0.3")
    assert card["protocolVersion"] == "0.3.0"
    assert card["url"] == legacy["url"] == interface(card)["url"]
    assert card["preferredTransport"] == "JSONRPC"
    assert {"url": legacy["url"], "transport": "JSONRPC"} in card["additionalInterfaces"]
    assert card["supportsAuthenticatedExtendedCard"] is False


def _strict_app(**config: Any) -> Flask:
    """An agent with a bearer scheme (whose 0.3 form the union card adds) and extensions."""
    app = Flask("strict_card")
    app.config.update({"A2A_" + k.upper(): v for k, v in config.items()})
    card = make_card(capabilities=AgentCapabilities(streaming=True, extensions=[
        AgentExtension(uri="https://example.com/ext/v1", description="optional")]))
    A2A(app, card=card, executor=echo, store="memory://", auth=bearer_auth(),
        auth_required=False)
    return app


@pytest.mark.parametrize("setting", [False, 0], ids=["False", "0-from-env"])
def test_legacy_card_off_serves_the_pure_1_0_card(setting):
    app = _strict_app(legacy_card=setting)
    try:
        client = app.test_client()
        for path in (CARD_PATHS[0], CARD_PATHS[1], "/a2a" + CARD_PATHS[0]):
            card = client.get(path).get_json()
            validate(card, "Agent Card")  # the whole document: no member beyond 1.0's
            assert not set(card) & set(LEGACY_CARD_MEMBERS), sorted(card)
            assert card["securitySchemes"] == {
                "bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
            # The 0.3 interfaces stay listed: a valid 1.0 AgentInterface each.
            assert interface(card, "JSONRPC", "0.3")["url"] == jsonrpc_url(card)
            assert_url_serves_jsonrpc(client, jsonrpc_url(card))
    finally:
        _close(app)


def test_the_default_union_card_is_refused_by_the_strict_1_0_schema():
    """What the setting is for: a strict 1.0 reader refuses the union card."""
    import jsonschema

    app = _strict_app()
    try:
        card = get_card(app.test_client())
        assert card["protocolVersion"] == "0.3.0" and card["securitySchemes"]["bearer"]["type"]
        with pytest.raises(jsonschema.ValidationError):
            validate(card, "Agent Card")
    finally:
        _close(app)


def test_card_declares_jsonrpc_1_0_interface_first(client):
    card = get_card(client)
    first = card["supportedInterfaces"][0]
    assert first["protocolBinding"] == "JSONRPC"
    for entry in card["supportedInterfaces"]:
        assert re.fullmatch(r"\d+\.\d+", entry["protocolVersion"]), entry
        assert entry["url"].startswith("http://localhost/")


def test_card_jsonrpc_url_is_the_real_endpoint(client):
    card = get_card(client)
    assert jsonrpc_url(card) == "http://localhost/a2a"
    assert_url_serves_jsonrpc(client, jsonrpc_url(card))


def test_card_rest_url_answers_the_rest_binding(client):
    url = interface(get_card(client), "HTTP+JSON")["url"]
    response = client.get(url + "/tasks", headers=V1)
    assert response.status_code == 200
    validate(response.get_json(), "List Tasks Response")


def test_card_is_also_served_under_the_agent_prefix(client):
    root = get_card(client)
    for path in CARD_PATHS:
        assert get_card(client, "/a2a" + path) == root


def test_card_responses_allow_cross_origin_reads(client):
    assert client.get(CARD_PATHS[0]).headers["Access-Control-Allow-Origin"] == "*"


def test_unset_capabilities_are_filled_with_what_the_library_serves(make_app):
    app = make_app(card=make_card(capabilities=AgentCapabilities()), store="memory://")
    card = get_card(app.test_client())
    assert card["capabilities"] == {"streaming": True, "pushNotifications": False,
                                    "extendedAgentCard": False}


def test_explicit_capabilities_are_kept(make_app):
    caps = AgentCapabilities(streaming=False, push_notifications=True)
    card = get_card(make_app(card=make_card(capabilities=caps), store="memory://").test_client())
    assert card["capabilities"]["streaming"] is False
    assert card["capabilities"]["pushNotifications"] is True


def test_declared_extensions_appear_in_the_card(make_app):
    card = make_card(capabilities=AgentCapabilities(streaming=True, extensions=[
        AgentExtension(uri="https://example.com/ext/v1", description="An ext", required=True,
                       params={"level": 2})]))
    served = get_card(make_app(card=card, store="memory://").test_client())
    assert served["capabilities"]["extensions"] == [
        {"uri": "https://example.com/ext/v1", "description": "An ext", "required": True,
         "params": {"level": 2}}]


def test_explicit_supported_interfaces_are_served_verbatim(make_app):
    fixed = AgentInterface(url="https://fixed.example.com/rpc", protocol_binding="JSONRPC",
                           protocol_version="1.0", tenant="acme")
    app = make_app(card=make_card(supported_interfaces=[fixed]), store="memory://")
    card = get_card(app.test_client())
    assert card["supportedInterfaces"] == [{"url": "https://fixed.example.com/rpc",
                                            "protocolBinding": "JSONRPC",
                                            "protocolVersion": "1.0", "tenant": "acme"}]


# ------------------------------------------------------------------ caching


def test_card_has_cache_control_etag_and_last_modified(client):
    response = client.get(CARD_PATHS[0])
    assert re.search(r"(^|[ ,])max-age=\d+", response.headers["Cache-Control"])
    etag = response.headers["ETag"]
    assert re.fullmatch(r'(W/)?"[^"]+"', etag)
    assert parse_date(response.headers["Last-Modified"]) is not None


def test_card_max_age_follows_config(make_app):
    response = make_app(store="memory://", card_max_age=60).test_client().get(CARD_PATHS[0])
    assert "max-age=60" in response.headers["Cache-Control"]


def test_etag_is_stable_and_shared_by_both_paths(client):
    etags = {client.get(path).headers["ETag"] for path in CARD_PATHS * 2}
    assert len(etags) == 1


def test_if_none_match_with_current_etag_is_304(client):
    etag = client.get(CARD_PATHS[0]).headers["ETag"]
    response = client.get(CARD_PATHS[0], headers={"If-None-Match": etag})
    assert response.status_code == 304
    assert response.data == b""
    assert response.headers["ETag"] == etag


def test_if_none_match_star_is_304(client):
    response = client.get(CARD_PATHS[0], headers={"If-None-Match": "*"})
    assert response.status_code == 304
    assert response.data == b""
    assert "max-age" in response.headers["Cache-Control"]


def test_if_none_match_with_stale_etag_gets_the_card(client):
    response = client.get(CARD_PATHS[0], headers={"If-None-Match": '"stale-etag"'})
    assert response.status_code == 200
    validate_card(response.get_json())


def test_card_for_another_host_names_that_host_and_has_its_own_etag(client):
    first = client.get(CARD_PATHS[0], base_url="http://one.example")
    second = client.get(CARD_PATHS[0], base_url="https://two.example:8443")
    assert jsonrpc_url(first.get_json()) == "http://one.example/a2a"
    assert jsonrpc_url(second.get_json()) == "https://two.example:8443/a2a"
    assert first.headers["ETag"] != second.headers["ETag"]


# ------------------------------------------------------------------ interface URLs


def test_public_url_config_wins_over_the_request_host(make_app):
    client = make_app(store="memory://",
                      public_url="https://agents.example.com/base/").test_client()
    card = get_card(client, base_url="http://internal:8080")
    assert jsonrpc_url(card) == "https://agents.example.com/base/a2a"
    assert interface(card, "HTTP+JSON")["url"] == "https://agents.example.com/base/a2a/rest"


def test_custom_url_prefix_is_in_the_card_and_served(make_app):
    client = make_app(store="memory://", url_prefix="/agents/x").test_client()
    card = get_card(client)
    assert jsonrpc_url(card) == "http://localhost/agents/x"
    assert_url_serves_jsonrpc(client, jsonrpc_url(card))
    for path in CARD_PATHS:
        assert get_card(client, "/agents/x" + path) == card
    assert wire.post(client, "ListTasks", {}).status_code == 404


def test_url_prefix_without_leading_slash_is_normalised(make_app):
    client = make_app(store="memory://", url_prefix="agents/y/").test_client()
    card = get_card(client)
    assert jsonrpc_url(card) == "http://localhost/agents/y"
    assert_url_serves_jsonrpc(client, jsonrpc_url(card))


def test_empty_url_prefix_serves_jsonrpc_at_the_root(make_app):
    client = make_app(store="memory://", url_prefix="").test_client()
    card = get_card(client)
    url = jsonrpc_url(card)
    assert urlsplit(url).path in ("", "/")
    assert_url_serves_jsonrpc(client, url)


def test_script_name_mount_point_is_in_the_card(client):
    card = get_card(client, environ_overrides={"SCRIPT_NAME": "/mount"})
    assert jsonrpc_url(card) == "http://localhost/mount/a2a"
    assert_url_serves_jsonrpc(client, "/a2a", environ_overrides={"SCRIPT_NAME": "/mount"})


def test_dispatcher_middleware_mount_is_in_the_card(make_app):
    app = make_app(store="memory://")
    outer = Client(DispatcherMiddleware(Flask("outer"), {"/team/agent": app}))
    card = get_card(outer, "/team/agent" + CARD_PATHS[0])
    assert jsonrpc_url(card) == "http://localhost/team/agent/a2a"
    assert_url_serves_jsonrpc(outer, jsonrpc_url(card))
    assert outer.get(CARD_PATHS[0]).status_code == 404  # the outer app serves no card


def test_proxy_fix_forwarded_headers_are_in_the_card(make_app):
    app = make_app(store="memory://")
    app.wsgi_app = ProxyFix(app.wsgi_app, x_for=1, x_proto=1, x_host=1, x_port=1, x_prefix=1)
    client = app.test_client()
    forwarded = {"X-Forwarded-For": "203.0.113.9", "X-Forwarded-Proto": "https",
                 "X-Forwarded-Host": "agents.example.com", "X-Forwarded-Prefix": "/edge"}
    card = get_card(client, headers=forwarded)
    assert jsonrpc_url(card) == "https://agents.example.com/edge/a2a"
    # The proxy strips /edge before forwarding, so the app sees the path /a2a.
    assert_url_serves_jsonrpc(client, "/a2a", headers=forwarded)
    direct = get_card(client)
    assert jsonrpc_url(direct) == "http://localhost/a2a"


def test_forwarded_headers_are_ignored_without_proxy_fix(client):
    card = get_card(client, headers={"X-Forwarded-Host": "evil.example",
                                     "X-Forwarded-Proto": "https"})
    assert jsonrpc_url(card) == "http://localhost/a2a"


# ------------------------------------------------------------------ extended card


def _extended_capabilities() -> AgentCapabilities:
    return AgentCapabilities(streaming=True, extended_agent_card=True)


def test_extended_card_not_declared_is_32004(client):
    body = rpc(client, "GetExtendedAgentCard")
    rpc_error(body, -32004, "UNSUPPORTED_OPERATION")


def test_extended_card_declared_but_not_configured_is_32007(make_app):
    app = make_app(card=make_card(capabilities=_extended_capabilities()), store="memory://")
    client = app.test_client()
    assert get_card(client)["capabilities"]["extendedAgentCard"] is True
    rpc_error(rpc(client, "GetExtendedAgentCard", {}), -32007,
              "EXTENDED_AGENT_CARD_NOT_CONFIGURED")


def _extended_app(extended: Any) -> Flask:
    app = Flask("extended")
    A2A(app, card=make_card(capabilities=_extended_capabilities()), executor=echo,
        store="memory://", extended_card=extended, auth=bearer_auth(), auth_required=False)
    return app


def _close(app: Flask) -> None:
    for state in app.extensions["a2a"].values():
        state.store.close()


def test_extended_card_configured_is_returned(make_app):
    extended = make_card(name="Test agent (extended)", capabilities=_extended_capabilities(),
                         skills=[AgentSkill(id="test", name="Test", description="Tests things",
                                            tags=["test"]),
                                 AgentSkill(id="secret", name="Secret", description="Hidden",
                                            tags=["vip"])])
    app = _extended_app(extended)
    try:
        body = rpc(app.test_client(), "GetExtendedAgentCard", headers=ALICE)
        assert "error" not in body, body
        validate(body["result"], "Agent Card")
        assert body["result"]["name"] == "Test agent (extended)"
        assert [s["id"] for s in body["result"]["skills"]] == ["test", "secret"]
    finally:
        _close(app)


def test_extended_card_is_for_authenticated_callers_only():
    app = _extended_app(make_card(name="Members only", capabilities=_extended_capabilities()))
    try:
        client = app.test_client()
        response = wire.post(client, "GetExtendedAgentCard")
        assert response.status_code == 401
        assert response.headers["WWW-Authenticate"].startswith('Bearer realm="a2a"')
        body = response.json()
        assert body["error"]["code"] == -32040 and body["id"] == 1
        assert body["error"]["data"][0]["reason"] == "UNAUTHENTICATED"
        bad = wire.post(client, "GetExtendedAgentCard", headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401 and 'error="invalid_token"' in bad.headers["WWW-Authenticate"]
        # The public card stays public, and declares the scheme to use.
        public = card_v1_view(get_card(client))
        assert public["securitySchemes"] == {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
        assert public["securityRequirements"] == [{"schemes": {"bearer": {}}}]
        validate_card(get_card(client))
    finally:
        _close(app)


def test_extended_card_function_gets_the_call_context(make_app):
    seen = []

    def per_caller(ctx: CallContext) -> AgentCard:
        seen.append(ctx)
        return make_card(name=f"For tenant {ctx.tenant or '-'}",
                         capabilities=_extended_capabilities())

    app = _extended_app(per_caller)
    try:
        body = rpc(app.test_client(), "GetExtendedAgentCard", {"tenant": "acme"}, headers=ALICE)
        validate(body["result"], "Agent Card")
        assert body["result"]["name"] == "For tenant acme"
        assert len(seen) == 1 and isinstance(seen[0], CallContext)
        assert seen[0].dialect == "1.0" and seen[0].principal.id == "alice"
    finally:
        _close(app)


def test_configured_extended_card_is_advertised_when_capability_left_unset(make_app):
    app = Flask("extended_unset")
    A2A(app, card=make_card(capabilities=AgentCapabilities()), executor=echo, store="memory://",
        extended_card=make_card(name="Extended"), auth=bearer_auth())
    try:
        client = app.test_client()
        assert get_card(client)["capabilities"]["extendedAgentCard"] is True
        body = rpc(client, "GetExtendedAgentCard", headers=ALICE)
        validate(body["result"], "Agent Card")
        assert body["result"]["name"] == "Extended"
    finally:
        _close(app)


def test_extended_card_lists_the_real_interfaces_like_the_public_card(make_app):
    app = _extended_app(make_card(name="Extended", capabilities=_extended_capabilities()))
    try:
        client = app.test_client()
        body = rpc(client, "GetExtendedAgentCard", headers=ALICE)
        validate(body["result"], "Agent Card")
        public = get_card(client)
        assert body["result"]["supportedInterfaces"] == public["supportedInterfaces"]
    finally:
        _close(app)


# ------------------------------------------------------------------ card checks


@pytest.mark.parametrize("overrides", [
    {"skills": []},
    {"skills": [AgentSkill(id="s", name="S", description="d", tags=[])]},
    {"skills": [AgentSkill(id="", name="S", description="d", tags=["t"])]},
    {"skills": [AgentSkill(id="s", name="S", description="", tags=["t"])]},
    {"name": ""},
    {"description": ""},
    {"version": ""},
    {"default_input_modes": []},
    {"default_output_modes": []},
], ids=["no-skills", "skill-without-tags", "skill-without-id", "skill-without-description",
        "no-name", "no-description", "no-version", "no-input-modes", "no-output-modes"])
def test_incomplete_card_is_refused_at_construction(overrides):
    with pytest.raises(ValueError):
        A2A(card=make_card(**overrides), executor=echo)


def test_card_without_skills_is_refused_even_with_an_app():
    app = Flask("no_skills")
    with pytest.raises(ValueError, match="skill"):
        A2A(app, card=make_card(skills=[]), executor=echo)
    assert "a2a" not in app.extensions or not app.extensions["a2a"]
    assert app.test_client().get(CARD_PATHS[0]).status_code == 404
