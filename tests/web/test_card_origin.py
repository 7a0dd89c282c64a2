"""Where the card's URLs come from: no request may make the card point elsewhere.

The rules (``a2a_flask/web/card_origin.py``): ``A2A_PUBLIC_URL`` wins, then Flask's
``SERVER_NAME``, then the ``Host`` header, only when well-formed and trusted
(``TRUSTED_HOSTS``). A Host-derived card carries ``Vary: Host`` and no signature;
a bad Host gets 400; the render cache stays small whatever Hosts arrive. The
same is checked against real gunicorn, with ``Host: evil.example``.
"""
from __future__ import annotations

import json
import logging
import socket
from typing import Any, Dict

import pytest
import requests
from flask import Flask
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.test import EnvironBuilder

from a2a_flask import A2A, AgentInterface
from a2a_flask.client import A2AClient
from a2a_flask.client.card import origin, warn_other_origin
from a2a_flask.protocol.cards import CardRenderer

from tests.conftest import echo, make_card
from tests.support.helpers import ALICE, Server, bearer_auth, free_port, validate_card
from tests.support.wire import rpc

pytestmark = pytest.mark.declare(server=[
    "test_gunicorn_serves_host_derived_cards_unsigned_with_vary_and_refuses_bad_hosts",
    "test_gunicorn_with_public_url_ignores_the_host",
    "test_gunicorn_with_trusted_hosts_refuses_other_hosts"], slow=[
    "test_the_render_cache_stays_bounded_after_10000_hosts"])

CARD = "/.well-known/agent-card.json"
EVIL = {"Host": "evil.example"}


def card_of(response: Any) -> Dict[str, Any]:
    assert response.status_code == 200, response.get_data(as_text=True)
    card = json.loads(response.get_data(as_text=True))
    validate_card(card)
    return card


def urls(card: Dict[str, Any]) -> set:
    """Every URL the card sends clients to, 1.0 and 0.3 members alike."""
    return ({i["url"] for i in card["supportedInterfaces"]} | {card["url"]}
            | {i["url"] for i in card["additionalInterfaces"]})


def pem_key() -> str:
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def assert_refused(response: Any) -> None:
    """HTTP 400 and nothing of a card (Flask 3.1 refuses an untrusted Host itself, with
    its own page; an older Flask gets the card's JSON error)."""
    assert response.status_code == 400, response.get_data(as_text=True)
    assert b"supportedInterfaces" not in response.get_data()


# ------------------------------------------------------------------ Host header


def test_a_host_derived_card_names_that_host_and_varies_on_host(make_app):
    client = make_app(store="memory://").test_client()
    response = client.get(CARD, headers=EVIL)
    assert urls(card_of(response)) == {"http://evil.example/a2a", "http://evil.example/a2a/rest"}
    assert response.headers["Vary"] == "Host"
    assert response.headers["Cache-Control"] == "public, max-age=300"
    again = client.get(CARD, headers={**EVIL, "If-None-Match": response.headers["ETag"]})
    assert again.status_code == 304 and again.headers["Vary"] == "Host"


def test_the_default_port_is_dropped_and_the_host_lower_cased(make_app):
    client = make_app(store="memory://").test_client()
    plain = card_of(client.get(CARD, headers={"Host": "Agents.Example:80"}))
    assert plain["url"] == "http://agents.example/a2a"
    tls = card_of(client.get(CARD, base_url="https://agents.example", headers={
        "Host": "agents.example:443"}))
    assert tls["url"] == "https://agents.example/a2a"
    other = card_of(client.get(CARD, headers={"Host": "[::1]:8080"}))
    assert other["url"] == "http://[::1]:8080/a2a"


@pytest.mark.parametrize("host", [
    "", "evil.example\r\nX-Injected: 1", "user@evil.example", "user:pw@evil.example",
    "evil.example:0", "evil.example:65536", "evil.example:99999", "evil.example:80:80",
    "evil.example:port", "evil.example/a2a", "evil example", "evil.example?x", "évil.example",
    "[::1%25eth0]", "[::1", "-evil.example", "a" * 64 + ".example", "a." * 130 + "example",
], ids=["empty", "crlf", "userinfo", "userinfo-password", "port-0", "port-65536",
        "port-99999", "two-ports", "port-name", "path", "space", "query", "non-ascii",
        "zone-id", "open-bracket", "leading-hyphen", "long-label", "too-long"])
def test_a_malformed_host_gets_400_and_no_card(make_app, host):
    app = make_app(store="memory://")
    # Straight through WSGI: werkzeug 2.2's test client itself chokes on "[::1" while
    # rebuilding the request's URL after the answer.
    environ = EnvironBuilder(path=CARD).get_environ()
    environ["HTTP_HOST"] = host
    started = []
    body = b"".join(app(environ, lambda status, headers, *_: started.append((status, headers))))
    status, headers = started[0]
    assert status.startswith("400 ") and b"supportedInterfaces" not in body, (status, body)
    if ("Content-Type", "application/json") in headers:  # ours, not werkzeug's own 400
        error = json.loads(body)["error"]
        assert error["status"] == "INVALID_ARGUMENT" and "Host header" in error["message"]


def test_trusted_hosts_refuses_every_other_host(make_app):
    app = make_app(store="memory://")
    app.config["TRUSTED_HOSTS"] = ["agents.example", ".corp.example"]
    client = app.test_client()
    assert_refused(client.get(CARD, headers=EVIL))
    assert_refused(client.get(CARD, headers={"Host": "agents.example.evil.example"}))
    assert card_of(client.get(CARD, headers={"Host": "agents.example:8443"}))["url"] == (
        "http://agents.example:8443/a2a")
    assert card_of(client.get(CARD, headers={"Host": "x.corp.example"}))["url"] == (
        "http://x.corp.example/a2a")


def test_a_request_class_trusted_hosts_list_is_honoured(make_app):
    app = make_app(store="memory://")

    class Trusting(app.request_class):  # type: ignore[name-defined,misc]
        trusted_hosts = ["agents.example"]

    app.request_class = Trusting
    client = app.test_client()
    assert_refused(client.get(CARD, headers=EVIL))
    assert card_of(client.get(CARD, headers={"Host": "agents.example"}))["url"] == (
        "http://agents.example/a2a")


def test_an_untrusted_host_gets_no_extended_card_either(make_app):
    app = Flask("extended")
    from a2a_flask import AgentCapabilities

    caps = AgentCapabilities(streaming=True, extended_agent_card=True)
    A2A(app, card=make_card(capabilities=caps), executor=echo, store="memory://",
        extended_card=make_card(name="Extended", capabilities=caps), auth=bearer_auth())
    try:
        client = app.test_client()
        good = rpc(client, "GetExtendedAgentCard", headers={**ALICE, **EVIL})
        assert good["result"]["supportedInterfaces"][0]["url"] == "http://evil.example/a2a"
        bad = client.post("/a2a", json={"jsonrpc": "2.0", "id": 1,
                                        "method": "GetExtendedAgentCard", "params": {}},
                          headers={**ALICE, "A2A-Version": "1.0"},
                          environ_overrides={"HTTP_HOST": "user@evil.example"})
        assert bad.get_json()["error"]["code"] == -32600
        assert "supportedInterfaces" not in bad.get_data(as_text=True)
    finally:
        for state in app.extensions["a2a"].values():
            state.close()


def test_a_scheme_a_proxy_passed_on_that_is_not_http_gets_400(make_app):
    app = make_app(store="memory://")
    app.wsgi_app = ProxyFix(app.wsgi_app, x_proto=1)
    response = app.test_client().get(CARD, headers={"X-Forwarded-Proto": "javascript"})
    assert response.status_code == 400
    assert response.get_json()["error"]["message"] == (
        "The request's scheme is neither http nor https")


def test_an_odd_mount_point_is_quoted_into_a_valid_url(make_app):
    client = make_app(store="memory://").test_client()
    card = card_of(client.get(CARD, environ_overrides={"SCRIPT_NAME": '/my mount"<x>'}))
    assert card["url"] == "http://localhost/my%20mount%22%3Cx%3E/a2a"


# ------------------------------------------------------------------ configured URLs


def test_public_url_wins_and_the_card_does_not_vary(make_app):
    client = make_app(store="memory://", public_url="https://agents.example.com").test_client()
    response = client.get(CARD, headers=EVIL)
    assert urls(card_of(response)) == {"https://agents.example.com/a2a",
                                       "https://agents.example.com/a2a/rest"}
    assert "Vary" not in response.headers
    # Even a Host the card would refuse changes nothing: the request plays no part.
    assert card_of(client.get(CARD, environ_overrides={"HTTP_HOST": "u@x"}))["url"] == (
        "https://agents.example.com/a2a")


@pytest.mark.parametrize("value", ["agents.example.com", "ftp://agents.example.com",
                                   "https://user:pw@agents.example.com", "https://",
                                   "https://agents.example.com/?x=1",
                                   "https://agents.example.com/#top"])
def test_a_public_url_that_is_no_http_url_stops_init_app(value):
    app = Flask("bad_public_url")
    with pytest.raises(ValueError, match="A2A_PUBLIC_URL must be an absolute http"):
        A2A(app, card=make_card(), executor=echo, store="memory://", public_url=value)
    assert not app.extensions.get("a2a")


@pytest.mark.filterwarnings("ignore:Current server name")  # Flask < 3.1, on its way to 404
def test_server_name_fixes_the_host_whatever_the_host_header(make_app):
    app = make_app(store="memory://")
    app.config["SERVER_NAME"] = "agents.example:8443"
    client = app.test_client()
    response = client.get(CARD, base_url="https://agents.example:8443")
    assert urls(card_of(response)) == {"https://agents.example:8443/a2a",
                                       "https://agents.example:8443/a2a/rest"}
    assert "Vary" not in response.headers
    # Flask 3.1 serves any Host (SERVER_NAME no longer restricts them): the card keeps
    # the configured name; older Flask answers 404 for a Host that is not SERVER_NAME.
    evil = client.get(CARD, base_url="https://agents.example:8443", headers=EVIL)
    assert evil.status_code in (200, 404)
    if evil.status_code == 200:
        assert card_of(evil)["url"] == "https://agents.example:8443/a2a"
        assert "Vary" not in evil.headers


def test_declared_interfaces_ignore_the_host(make_app):
    declared = [AgentInterface(url="https://api.example.com/a2a", protocol_binding="JSONRPC",
                               protocol_version="1.0")]
    client = make_app(card=make_card(supported_interfaces=declared),
                      store="memory://").test_client()
    response = client.get(CARD, headers=EVIL)
    assert card_of(response)["supportedInterfaces"][0]["url"] == "https://api.example.com/a2a"
    assert "Vary" not in response.headers


# ------------------------------------------------------------------ signing


def test_a_host_derived_card_is_never_signed_and_init_app_says_so(make_app, caplog):
    key = pem_key()
    with caplog.at_level(logging.WARNING, logger="a2a_flask"):
        client = make_app(store="memory://", card_signing_key=key).test_client()
    assert "A2A_CARD_SIGNING_KEY but no A2A_PUBLIC_URL" in caplog.text
    for headers in ({}, EVIL):
        response = client.get(CARD, headers=headers)
        assert "signatures" not in card_of(response)
        assert response.headers["Vary"] == "Host"


def test_a_server_name_card_is_not_signed_either(make_app):
    app = make_app(store="memory://", card_signing_key=pem_key())
    app.config["SERVER_NAME"] = "localhost"
    assert "signatures" not in card_of(app.test_client().get(CARD))


def test_public_url_and_declared_cards_are_signed(make_app, caplog):
    key = pem_key()
    declared = [AgentInterface(url="https://api.example.com/a2a", protocol_binding="JSONRPC",
                               protocol_version="1.0")]
    with caplog.at_level(logging.WARNING, logger="a2a_flask"):
        public = make_app(store="memory://", card_signing_key=key,
                          public_url="https://agents.example.com").test_client()
        own = make_app(card=make_card(supported_interfaces=declared), store="memory://",
                       card_signing_key=key).test_client()
    assert "A2A_PUBLIC_URL" not in caplog.text
    for client in (public, own):
        assert len(card_of(client.get(CARD, headers=EVIL))["signatures"]) == 1


# ------------------------------------------------------------------ the render cache


@pytest.mark.slow
def test_the_render_cache_stays_bounded_after_10000_hosts(make_app):
    app = make_app(store="memory://")
    renderer: CardRenderer = app.extensions["a2a"]["a2a"].renderer
    client = app.test_client()
    for n in range(10_000):
        response = client.get(CARD, headers={"Host": f"h{n}.evil.example"})
        assert response.status_code == 200
    assert renderer.cached() == CardRenderer.CACHE_SIZE
    # The cache still does its job: the agent's own host is served from it.
    etag = client.get(CARD).headers["ETag"]
    assert client.get(CARD).headers["ETag"] == etag
    assert renderer._cached.cache_info().hits >= 1


# ------------------------------------------------------------------ the client


def test_origin_fills_in_default_ports():
    assert origin("http://Agents.Example/a2a") == origin("http://agents.example:80/x")
    assert origin("https://agents.example") != origin("http://agents.example")
    assert origin("https://agents.example:8443/") == "https://agents.example:8443"


def test_the_client_warns_when_a_card_sends_credentials_elsewhere(caplog):
    with caplog.at_level(logging.WARNING, logger="a2a_flask.client"):
        assert not warn_other_origin("http://127.0.0.1:80/", "http://127.0.0.1/a2a")
        assert not caplog.text
        assert warn_other_origin("https://agents.example", "http://evil.example/a2a\r\nx")
    assert "'https://agents.example:443'" in caplog.text
    assert "'http://evil.example:80'" in caplog.text
    assert "\r" not in caplog.text


# ------------------------------------------------------------------ real gunicorn


def raw_get(server: Server, host: str) -> requests.Response:
    return requests.get(server.url + CARD, headers={"Host": host}, timeout=10)


def test_gunicorn_serves_host_derived_cards_unsigned_with_vary_and_refuses_bad_hosts(caplog):
    env = {"FLASK_A2A_CARD_SIGNING_KEY": pem_key()}
    with Server("examples.echo_agent:app", env=env) as server:
        evil = raw_get(server, "evil.example")
        assert evil.status_code == 200
        assert evil.json()["url"] == "http://evil.example/a2a"
        assert "signatures" not in evil.json()
        assert evil.headers["Vary"] == "Host"
        bad = raw_get(server, "user@evil.example")
        assert bad.status_code == 400 and bad.json()["error"]["status"] == "INVALID_ARGUMENT"
        # A line break in Host (requests will not send one: write the bytes) ends the
        # request in gunicorn itself, before any view runs.
        with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
            sock.sendall(b"GET " + CARD.encode() + b" HTTP/1.1\r\n"
                         b"Host: evil.example\rX: y\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 400"), answer[:200]
        assert b"evil.example/a2a" not in answer
        assert "no A2A_PUBLIC_URL" in server.log_text()
        # The agent's own address still works end to end, and nothing is said.
        with caplog.at_level(logging.WARNING, logger="a2a_flask.client"):
            with A2AClient.connect(server.url, token="t") as agent:
                assert agent.interface.url == server.url + "/a2a"
                assert agent.send("hi").status.state.name == "COMPLETED"
        assert "another origin" not in caplog.text


def test_gunicorn_with_public_url_ignores_the_host(caplog):
    port = free_port()
    public = f"http://localhost:{port}"
    env = {"FLASK_A2A_PUBLIC_URL": public, "FLASK_A2A_CARD_SIGNING_KEY": pem_key()}
    with Server("examples.echo_agent:app", env=env, port=port) as server:
        evil = raw_get(server, "evil.example")
        assert evil.status_code == 200
        assert urls(evil.json()) == {public + "/a2a", public + "/a2a/rest"}
        assert "Vary" not in evil.headers
        assert len(evil.json()["signatures"]) == 1
        assert "no A2A_PUBLIC_URL" not in server.log_text()
        # Asked at 127.0.0.1, sent to localhost: followed (it is the same agent), and
        # the client says that its token goes to another origin than the one it was given.
        with caplog.at_level(logging.WARNING, logger="a2a_flask.client"):
            with A2AClient.connect(server.url, token="t") as agent:
                assert agent.interface.url == public + "/a2a"
                assert agent.send("hi").status.state.name == "COMPLETED"
        assert "another origin, 'http://localhost:" in caplog.text
        caplog.clear()
        jwks = requests.get(server.url + "/a2a/.well-known/jwks.json", timeout=10).json()
        with caplog.at_level(logging.WARNING, logger="a2a_flask.client"):
            with A2AClient.connect(server.url, token="t", card_keys=jwks) as agent:
                assert agent.interface.url == public + "/a2a"
        assert "another origin" not in caplog.text


def test_gunicorn_with_trusted_hosts_refuses_other_hosts():
    env = {"FLASK_TRUSTED_HOSTS": '["127.0.0.1"]'}
    with Server("examples.echo_agent:app", env=env) as server:
        assert raw_get(server, "evil.example").status_code == 400
        assert b"supportedInterfaces" not in raw_get(server, "evil.example").content
        own = requests.get(server.url + CARD, timeout=10)
        assert own.status_code == 200 and own.json()["url"] == server.url + "/a2a"
        assert own.headers["Vary"] == "Host"
