"""Signed agent cards (spec §8.4): RFC 8785 canonical JSON, JWS, JWKS, client checks."""
from __future__ import annotations

import base64
import json

import pytest
import requests

pytestmark = pytest.mark.declare(server=[
    "test_the_served_card_is_signed_and_the_client_checks_it"])

pytest.importorskip("cryptography")
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, rsa  # noqa: E402

from a2a_flask.signing.cards import (  # noqa: E402
    CardSignatureError,
    CardSigner,
    canonical_json,
    signing_payload,
    verify_card,
)
from a2a_flask.client import A2AClient, CardVerificationError  # noqa: E402

from tests.support.helpers import Server, free_port, validate_card  # noqa: E402


def test_canonical_json_follows_rfc_8785():
    assert canonical_json({"b": 1, "a": [True, None, "x"], "é": {"z": 1.0, "y": 1e21}}) == (
        '{"a":[true,null,"x"],"b":1,"é":{"y":1e+21,"z":1}}'.encode())
    assert canonical_json("\u2028\n\"\\") == b'"\xe2\x80\xa8\\n\\"\\\\"'
    # Members sort by UTF-16 code units: U+1F600 (D83D...) before U+FB01.
    assert canonical_json({"\ufb01": 1, "\U0001f600": 2}).decode() == '{"\U0001f600":2,"\ufb01":1}'
    assert canonical_json(0.1) == b"0.1" and canonical_json(1e-7) == b"1e-7"


def test_the_spec_example_payload():
    card = {"name": "Example Agent", "description": "", "capabilities": {
        "streaming": False, "pushNotifications": False, "extensions": []}, "skills": [],
        "signatures": [{"protected": "x", "signature": "y"}]}
    # Required members stay (even empty), defaulted repeated members and signatures go.
    assert signing_payload(card) == (b'{"capabilities":{"pushNotifications":false,'
                                     b'"streaming":false},"description":"","name":"Example Agent"}')


@pytest.mark.parametrize("key", [ec.generate_private_key(ec.SECP256R1()),
                                 rsa.generate_private_key(public_exponent=65537, key_size=2048)],
                         ids=["ES256", "RS256"])
def test_sign_and_verify_round_trip(key):
    signer = CardSigner(key, key_id="k1", jwks_url="https://agent.example.com/jwks.json")
    card = signer.signed({"name": "A", "skills": [{"id": "s"}], "version": "1"})
    header = verify_card(card, signer.jwks())
    assert header == {"alg": signer.algorithm, "typ": "JOSE", "kid": "k1",
                      "jku": "https://agent.example.com/jwks.json"}
    protected = card["signatures"][0]["protected"]
    assert json.loads(base64.urlsafe_b64decode(protected + "==")) == header
    # Member order and whitespace do not matter; content does.
    reordered = json.loads(json.dumps(dict(reversed(list(card.items())))))
    verify_card(reordered, signer.jwks())
    with pytest.raises(CardSignatureError, match="does not verify"):
        verify_card({**card, "name": "B"}, signer.jwks())
    other = CardSigner(ec.generate_private_key(ec.SECP256R1()), key_id="k1")
    with pytest.raises(CardSignatureError):
        verify_card(card, other.jwks())
    with pytest.raises(CardSignatureError, match="no signatures"):
        verify_card({"name": "A"}, signer.jwks())


def test_a_forged_alg_none_signature_is_refused():
    signer = CardSigner(ec.generate_private_key(ec.SECP256R1()), key_id="k1")
    header = base64.urlsafe_b64encode(b'{"alg":"none","kid":"k1"}').rstrip(b"=").decode()
    card = {"name": "A", "signatures": [{"protected": header, "signature": ""}]}
    with pytest.raises(CardSignatureError, match="not accepted"):
        verify_card(card, signer.jwks())


def pem_key() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def test_the_served_card_is_signed_and_the_client_checks_it():
    port = free_port()
    env = {"FLASK_A2A_CARD_SIGNING_KEY": pem_key(),
           "FLASK_A2A_PUBLIC_URL": f"http://127.0.0.1:{port}"}
    with Server("examples.echo_agent:app", env=env, port=port) as server:
        card = requests.get(server.url + "/.well-known/agent-card.json", timeout=10).json()
        validate_card(card)
        assert card["supportedInterfaces"][0]["url"] == server.url + "/a2a"
        jwks = requests.get(server.url + "/a2a/.well-known/jwks.json", timeout=10).json()
        assert verify_card(card, jwks)["alg"] == "ES256"
        with A2AClient.connect(server.url, card_keys=jwks) as agent:
            assert agent.send("hi").status.state.name == "COMPLETED"
        stranger = CardSigner(ec.generate_private_key(ec.SECP256R1())).jwks()
        with pytest.raises(CardVerificationError, match="not trusted"):
            A2AClient.connect(server.url, card_keys=stranger)
