"""Push notification signatures (a2a_flask.signing.pushes): ES256 and RS256 JWTs."""
from __future__ import annotations

import base64
import hashlib
import hmac
import importlib
import json
import sys
from typing import Any, Dict, Iterator

import pytest

pytest.importorskip("cryptography")

from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature  # noqa: E402

from a2a_flask.signing import jws, pushes  # noqa: E402
from a2a_flask.signing.pushes import (  # noqa: E402
    PushSignatureError,
    PushSigner,
    jwk_thumbprint,
    verify_push,
)

pytestmark = pytest.mark.timeout(30)

NOW = 1_760_000_000.0
BODY = b'{"statusUpdate":{"taskId":"task-1","status":{"state":"TASK_STATE_COMPLETED"}}}'


# ------------------------------------------------------------------ helpers


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def part(token: str, index: int) -> Dict[str, Any]:
    return json.loads(unb64(token.split(".")[index]))


def forge(header: Dict[str, Any], claims: Dict[str, Any], signature: bytes = b"") -> str:
    return ".".join([b64(json.dumps(header).encode()), b64(json.dumps(claims).encode()),
                     b64(signature)])


@pytest.fixture(scope="module")
def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


@pytest.fixture(scope="module")
def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(params=["ES256", "RS256"])
def signer(request: pytest.FixtureRequest, ec_key: Any, rsa_key: Any) -> PushSigner:
    return PushSigner(ec_key if request.param == "ES256" else rsa_key,
                      issuer="https://agent.example.com", jwks_url="https://agent.example.com/jwks")


@pytest.fixture
def token(signer: PushSigner) -> str:
    return signer.sign(BODY, task_id="task-1", now=NOW)


def rejected(token: str, keys: Any, body: bytes = BODY, **kwargs: Any) -> str:
    kwargs.setdefault("now", NOW + 1)
    with pytest.raises(PushSignatureError) as info:
        verify_push(body, token, keys, **kwargs)
    return str(info.value)


# ---------------------------------------------------------------- round trip


def test_round_trip(signer: PushSigner, token: str) -> None:
    claims = verify_push(BODY, token, signer.jwks(), task_id="task-1", now=NOW + 1)
    assert claims["taskId"] == "task-1"
    assert claims["iss"] == "https://agent.example.com"
    assert claims["iat"] == int(NOW) and claims["exp"] == int(NOW) + 300
    assert claims["request_body_sha256"] == hashlib.sha256(BODY).hexdigest()
    assert isinstance(claims["jti"], str) and len(claims["jti"]) >= 16
    assert part(token, 0) == {"alg": signer.algorithm, "typ": "JWT", "kid": signer.key_id,
                              "jku": "https://agent.example.com/jwks"}
    assert "=" not in token and token.count(".") == 2


def test_algorithm_is_inferred(ec_key: Any, rsa_key: Any) -> None:
    assert PushSigner(ec_key).algorithm == "ES256"
    assert PushSigner(rsa_key).algorithm == "RS256"
    assert PushSigner(ec_key, algorithm="ES256").algorithm == "ES256"


def test_any_key_form_verifies(signer: PushSigner, token: str) -> None:
    jwk = signer.jwks()["keys"][0]
    for keys in (signer.jwks(), [jwk], jwk, signer._key.public_key(), signer._key):
        assert verify_push(BODY, token, keys, now=NOW)["taskId"] == "task-1"
    assert verify_push(BODY, "Bearer " + token, signer.jwks(), now=NOW)["taskId"] == "task-1"


def test_minimal_header_and_claims(ec_key: Any) -> None:
    token = PushSigner(ec_key, key_id="k1", ttl=60).sign(b"", task_id="t", now=NOW)
    assert part(token, 0) == {"alg": "ES256", "typ": "JWT", "kid": "k1"}
    claims = part(token, 1)
    assert set(claims) == {"iat", "exp", "jti", "taskId", "request_body_sha256"}
    assert claims["exp"] - claims["iat"] == 60
    assert claims["request_body_sha256"] == hashlib.sha256(b"").hexdigest()


def test_every_token_has_its_own_jti(ec_key: Any) -> None:
    s = PushSigner(ec_key)
    first, second = (s.sign(BODY, task_id="t", now=NOW) for _ in range(2))
    assert part(first, 1)["jti"] != part(second, 1)["jti"]


def test_es256_signature_is_raw_r_and_s(ec_key: Any) -> None:
    token = PushSigner(ec_key).sign(BODY, task_id="t", now=NOW)
    signature = unb64(token.split(".")[2])
    assert len(signature) == 64
    # Independently: r||s re-encoded as DER verifies with cryptography.
    r, s = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big")
    der = encode_dss_signature(r, s)
    signed = token.rsplit(".", 1)[0].encode("ascii")
    ec_key.public_key().verify(der, signed, ec.ECDSA(hashes.SHA256()))


def test_rs256_signature_is_pkcs1_v15(rsa_key: Any) -> None:
    token = PushSigner(rsa_key).sign(BODY, task_id="t", now=NOW)
    signature = unb64(token.split(".")[2])
    assert len(signature) == 256
    rsa_key.public_key().verify(signature, token.rsplit(".", 1)[0].encode("ascii"),
                                padding.PKCS1v15(), hashes.SHA256())


def test_pem_keys_are_accepted(ec_key: Any) -> None:
    pem = ec_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                               serialization.NoEncryption())
    from_bytes, from_text = PushSigner(pem), PushSigner(pem.decode("ascii"))
    assert from_bytes.key_id == from_text.key_id == PushSigner(ec_key).key_id
    token = from_text.sign(BODY, task_id="t", now=NOW)
    assert verify_push(BODY, token, ec_key.public_key(), now=NOW)["taskId"] == "t"


def test_bad_keys_are_refused(ec_key: Any, rsa_key: Any) -> None:
    encrypted = ec_key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                     serialization.BestAvailableEncryption(b"secret"))
    with pytest.raises(ValueError, match="PEM"):
        PushSigner(encrypted)
    with pytest.raises(ValueError, match="PEM"):
        PushSigner("not a key")
    with pytest.raises(ValueError, match="P-256"):
        PushSigner(ec.generate_private_key(ec.SECP384R1()))
    with pytest.raises(ValueError, match="2048"):
        PushSigner(rsa.generate_private_key(public_exponent=65537, key_size=1024))
    with pytest.raises(ValueError, match="RS256"):
        PushSigner(rsa_key, algorithm="ES256")
    with pytest.raises(TypeError):
        PushSigner(ec_key.public_key())
    with pytest.raises(ValueError, match="ttl"):
        PushSigner(ec_key, ttl=0)


# --------------------------------------------------------------------- JWKS


def test_jwks_members_ec(ec_key: Any) -> None:
    signer = PushSigner(ec_key, key_id="agent-key-1")
    [jwk] = signer.jwks()["keys"]
    assert set(jwk) == {"kty", "crv", "x", "y", "kid", "alg", "use"}  # no private "d"
    assert (jwk["kty"], jwk["crv"], jwk["kid"], jwk["alg"], jwk["use"]) == (
        "EC", "P-256", "agent-key-1", "ES256", "sig")
    numbers = ec_key.public_key().public_numbers()
    assert unb64(jwk["x"]) == numbers.x.to_bytes(32, "big")
    assert unb64(jwk["y"]) == numbers.y.to_bytes(32, "big")


def test_jwks_members_rsa(rsa_key: Any) -> None:
    [jwk] = PushSigner(rsa_key).jwks()["keys"]
    assert set(jwk) == {"kty", "n", "e", "kid", "alg", "use"}  # no d, p, q, dp, dq, qi
    assert (jwk["kty"], jwk["e"], jwk["alg"], jwk["use"]) == ("RSA", "AQAB", "RS256", "sig")
    assert int.from_bytes(unb64(jwk["n"]), "big") == rsa_key.public_key().public_numbers().n


def test_default_kid_is_the_rfc7638_thumbprint(ec_key: Any) -> None:
    signer = PushSigner(ec_key)
    [jwk] = signer.jwks()["keys"]
    canonical = json.dumps({k: jwk[k] for k in ("crv", "kty", "x", "y")}, separators=(",", ":"))
    assert signer.key_id == b64(hashlib.sha256(canonical.encode()).digest())


def test_thumbprint_matches_the_rfc7638_example() -> None:
    n = ("0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6t"
         "Soc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65Y"
         "GjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-"
         "bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw")
    key = rsa.RSAPublicNumbers(65537, int.from_bytes(unb64(n), "big")).public_key()
    assert jwk_thumbprint(key) == "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"


# ---------------------------------------------------------------- rejections


def test_tampered_body(signer: PushSigner, token: str) -> None:
    assert "body does not match" in rejected(token, signer.jwks(), body=BODY + b" ")
    altered = BODY.replace(b"task-1", b"task-2")
    assert "body does not match" in rejected(token, signer.jwks(), body=altered)


def test_tampered_payload(signer: PushSigner, token: str) -> None:
    header, payload, signature = token.split(".")
    claims = json.loads(unb64(payload))
    claims["taskId"] = "task-2"
    forged = ".".join([header, b64(json.dumps(claims).encode()), signature])
    assert "signature does not verify" in rejected(forged, signer.jwks())


def test_tampered_signature(signer: PushSigner, token: str) -> None:
    header, payload, signature = token.split(".")
    raw = bytearray(unb64(signature))
    raw[10] ^= 1
    assert "signature does not verify" in rejected(".".join([header, payload, b64(bytes(raw))]),
                                                   signer.jwks())


def test_wrong_key(signer: PushSigner, token: str) -> None:
    if signer.algorithm == "ES256":
        other = PushSigner(ec.generate_private_key(ec.SECP256R1()), key_id=signer.key_id)
    else:
        other = PushSigner(rsa.generate_private_key(public_exponent=65537, key_size=2048),
                           key_id=signer.key_id)
    assert "signature does not verify" in rejected(token, other.jwks())
    assert "signature does not verify" in rejected(token, other._key.public_key())


def test_key_of_the_other_type(ec_key: Any, rsa_key: Any) -> None:
    token = PushSigner(ec_key, key_id="k").sign(BODY, task_id="t", now=NOW)
    assert "RS256" in rejected(token, rsa_key.public_key())
    rsa_jwks = PushSigner(rsa_key, key_id="k").jwks()
    assert "does not fit ES256" in rejected(token, rsa_jwks)


def test_unknown_kid(signer: PushSigner, token: str) -> None:
    jwks = signer.jwks()
    jwks["keys"][0]["kid"] = "someone-else"
    assert "unknown key id" in rejected(token, jwks)


def test_expired(signer: PushSigner, token: str) -> None:
    assert "expired" in rejected(token, signer.jwks(), now=NOW + 300 + 31)
    # within the leeway it still passes
    assert verify_push(BODY, token, signer.jwks(), now=NOW + 300 + 29)


def test_issued_in_the_future(signer: PushSigner, token: str) -> None:
    assert "future" in rejected(token, signer.jwks(), now=NOW - 31)
    assert verify_push(BODY, token, signer.jwks(), now=NOW - 29)


def test_too_old_for_the_receiver(ec_key: Any) -> None:
    signer = PushSigner(ec_key, ttl=3600)
    token = signer.sign(BODY, task_id="t", now=NOW)
    assert "old" in rejected(token, signer.jwks(), now=NOW + 400, max_age=300, leeway=30)
    assert verify_push(BODY, token, signer.jwks(), now=NOW + 400, max_age=600)


def test_wrong_task_id(signer: PushSigner, token: str) -> None:
    assert "task-1" in rejected(token, signer.jwks(), task_id="task-2")


def test_alg_none(signer: PushSigner) -> None:
    claims = {"iat": int(NOW), "exp": int(NOW) + 300, "taskId": "task-1",
              "request_body_sha256": hashlib.sha256(BODY).hexdigest()}
    for alg in ("none", "None", "NONE"):
        token = forge({"alg": alg, "typ": "JWT", "kid": signer.key_id}, claims)
        assert "not accepted" in rejected(token, signer.jwks())
        assert "not accepted" in rejected(token + b64(b"\0" * 64), signer._key.public_key())


def test_hs256_with_the_public_key_as_secret(signer: PushSigner) -> None:
    # The classic key-confusion forgery: HMAC keyed with the published public key.
    public_pem = signer._key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    claims = {"iat": int(NOW), "exp": int(NOW) + 300, "taskId": "task-1",
              "request_body_sha256": hashlib.sha256(BODY).hexdigest()}
    head = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": signer.key_id}).encode())
    body = b64(json.dumps(claims).encode())
    mac = hmac.new(public_pem, f"{head}.{body}".encode(), hashlib.sha256).digest()
    forged = f"{head}.{body}.{b64(mac)}"
    assert "'HS256' is not accepted" in rejected(forged, signer.jwks())
    assert "'HS256' is not accepted" in rejected(forged, signer._key.public_key())


def test_der_encoded_es256_signature_is_refused(ec_key: Any) -> None:
    signer = PushSigner(ec_key)
    token = signer.sign(BODY, task_id="t", now=NOW)
    signed = token.rsplit(".", 1)[0]
    der = ec_key.sign(signed.encode("ascii"), ec.ECDSA(hashes.SHA256()))
    assert "64 bytes" in rejected(f"{signed}.{b64(der)}", signer.jwks())


def test_duplicate_header_members_are_refused(ec_key: Any) -> None:
    signer = PushSigner(ec_key)
    token = signer.sign(BODY, task_id="t", now=NOW)
    _, payload, signature = token.split(".")
    header = '{"alg":"ES256","kid":"%s","alg":"none"}' % signer.key_id
    forged = ".".join([b64(header.encode()), payload, signature])
    assert "duplicate" in rejected(forged, signer.jwks())


def test_crit_and_foreign_typ_are_refused(ec_key: Any) -> None:
    signer = PushSigner(ec_key)
    payload = signer.sign(BODY, task_id="t", now=NOW).split(".")[1]
    for extra, words in (({"crit": ["exp"]}, "critical"), ({"typ": "dpop+jwt"}, "not JWT")):
        header = {"alg": "ES256", "typ": "JWT", "kid": signer.key_id, **extra}
        signed = b64(json.dumps(header).encode()) + "." + payload
        assert words in rejected(forge_signed(signer, signed), signer.jwks())


def forge_signed(signer: PushSigner, signed: str) -> str:
    """``signed`` with a valid signature by ``signer`` (to reach the later checks)."""
    return signed + "." + b64(signer.signature(signed.encode("ascii")))


def test_missing_claims_are_refused(ec_key: Any) -> None:
    signer = PushSigner(ec_key, key_id="k")
    head = b64(json.dumps({"alg": "ES256", "typ": "JWT", "kid": "k"}).encode())
    good = {"iat": int(NOW), "exp": int(NOW) + 300, "taskId": "t",
            "request_body_sha256": hashlib.sha256(BODY).hexdigest()}
    for name in ("iat", "exp", "request_body_sha256"):
        claims = {k: v for k, v in good.items() if k != name}
        token = forge_signed(signer, head + "." + b64(json.dumps(claims).encode()))
        assert name in rejected(token, signer.jwks())
    bad_iat = dict(good, iat=True)
    assert "iat" in rejected(forge_signed(signer, head + "." + b64(json.dumps(bad_iat).encode())),
                             signer.jwks())
    assert verify_push(BODY, forge_signed(signer, head + "." + b64(json.dumps(good).encode())),
                       signer.jwks(), now=NOW)


@pytest.mark.parametrize("token", [
    "", "abc", "a.b", "a.b.c.d", "!!!.e30.", "e30.e30.e30", "bm90IGpzb24.e30.", "W10.e30.",
])
def test_malformed_tokens(ec_key: Any, token: str) -> None:
    assert rejected(token, PushSigner(ec_key).jwks())


def test_keys_argument_must_be_keys(ec_key: Any) -> None:
    token = PushSigner(ec_key).sign(BODY, task_id="t", now=NOW)
    with pytest.raises(TypeError):
        verify_push(BODY, token, ["not a jwk"], now=NOW)
    assert "unknown key id" in rejected(token, {"keys": []})
    kidless = forge_signed(PushSigner(ec_key), b64(b'{"alg":"ES256"}') + "." + token.split(".")[1])
    assert "no key in the JWKS fits ES256" in rejected(kidless, {"keys": []})
    assert verify_push(BODY, kidless, PushSigner(ec_key).jwks(), now=NOW)


# ------------------------------------------------------- optional dependency


@pytest.fixture
def without_cryptography(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(sys.modules):
        if name == "cryptography" or name.startswith("cryptography."):
            monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.setitem(sys.modules, "cryptography", None)
    jws._crypto.cache_clear()
    yield
    jws._crypto.cache_clear()


def test_missing_cryptography_gives_a_clear_error(without_cryptography: None,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    # The module itself imports without cryptography...
    import a2a_flask.signing

    monkeypatch.setattr(a2a_flask.signing, "pushes", pushes)
    monkeypatch.delitem(sys.modules, "a2a_flask.signing.pushes")
    fresh = importlib.import_module("a2a_flask.signing.pushes")
    assert fresh is not pushes
    # ...and using it names the extra to install.
    with pytest.raises(ImportError, match=r"a2a-flask\[signing\]"):
        fresh.PushSigner(b"-----BEGIN PRIVATE KEY-----")
    with pytest.raises(ImportError, match=r"a2a-flask\[signing\]"):
        fresh.verify_push(BODY, "a.b.c", {"keys": []})
