"""Optional JWT signatures on push notifications (ES256 or RS256).

The agent signs each push with :class:`PushSigner` and publishes the public
key as a JWKS (:meth:`PushSigner.jwks`); a receiver checks a push with
:func:`verify_push`.  The token binds the exact body bytes (claim
``request_body_sha256``), the task (``taskId``) and a short validity window
(``iat``/``exp``), so a captured push cannot be altered, replayed much later
or replayed for another task.

JWS (RFC 7515) is written by hand on top of ``cryptography``, which is an
optional dependency: ``pip install 'a2a-flask[signing]'``.  Only ES256 and
RS256 are produced or accepted; ``none`` and the HMAC algorithms are refused,
so a public key can never be misused as an HMAC secret.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import re
import secrets
import time
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

ALGORITHMS = ("ES256", "RS256")
#: The claim holding the hex SHA-256 of the exact request body.
BODY_HASH_CLAIM = "request_body_sha256"
MIN_RSA_BITS = 2048
_B64URL = re.compile(r"^[A-Za-z0-9_-]*$")


class PushSignatureError(ValueError):
    """A push token that does not verify; ``str(err)`` says precisely why."""


@functools.lru_cache(maxsize=None)
def _crypto() -> SimpleNamespace:
    """The ``cryptography`` names used here, imported on first use."""
    try:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
        from cryptography.hazmat.primitives.asymmetric.utils import (
            decode_dss_signature,
            encode_dss_signature,
        )
    except ImportError as exc:
        raise ImportError(
            "push notification signing needs the 'cryptography' package: "
            "pip install 'a2a-flask[signing]'"
        ) from exc
    return SimpleNamespace(
        InvalidSignature=InvalidSignature, hashes=hashes, serialization=serialization,
        ec=ec, padding=padding, rsa=rsa,
        decode_dss_signature=decode_dss_signature, encode_dss_signature=encode_dss_signature,
    )


# ------------------------------------------------------------- encodings

def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64decode(text: Any, what: str) -> bytes:
    if not isinstance(text, str) or not _B64URL.match(text) or len(text) % 4 == 1:
        raise PushSignatureError(f"{what} is not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _int_bytes(value: int, length: int = 0) -> bytes:
    return value.to_bytes(length or max(1, (value.bit_length() + 7) // 8), "big")


def _unique_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    result: Dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # {"alg":"ES256","alg":"none"}: parsers disagree on which one wins.
            raise PushSignatureError(f"duplicate member {key!r} in the token")
        result[key] = value
    return result


def _json_object(data: bytes, what: str) -> Dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, PushSignatureError):
            raise
        raise PushSignatureError(f"the token {what} is not JSON") from None
    if not isinstance(value, dict):
        raise PushSignatureError(f"the token {what} is not a JSON object")
    return value


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def body_sha256(body: bytes) -> str:
    """The value of the ``request_body_sha256`` claim for ``body``."""
    return hashlib.sha256(body).hexdigest()


# ------------------------------------------------------------------ keys

def _key_algorithm(key: Any) -> str:
    """ES256 for a P-256 key, RS256 for an RSA key of 2048 bits or more (public or private)."""
    c = _crypto()
    if isinstance(key, (c.ec.EllipticCurvePrivateKey, c.ec.EllipticCurvePublicKey)):
        if not isinstance(key.curve, c.ec.SECP256R1):
            raise ValueError(f"EC keys must be on P-256 for ES256, not {key.curve.name}")
        return "ES256"
    if isinstance(key, (c.rsa.RSAPrivateKey, c.rsa.RSAPublicKey)):
        if key.key_size < MIN_RSA_BITS:
            raise ValueError(f"RSA keys must have at least {MIN_RSA_BITS} bits, "
                             f"not {key.key_size}")
        return "RS256"
    raise TypeError(f"expected an EC P-256 or RSA key, got {type(key).__name__}")


def _public_jwk(public_key: Any) -> Dict[str, str]:
    """The RFC 7517 members that define a public key (exactly those RFC 7638 hashes)."""
    c = _crypto()
    if isinstance(public_key, c.ec.EllipticCurvePublicKey):
        numbers = public_key.public_numbers()
        return {"crv": "P-256", "kty": "EC", "x": _b64encode(_int_bytes(numbers.x, 32)),
                "y": _b64encode(_int_bytes(numbers.y, 32))}
    numbers = public_key.public_numbers()
    return {"e": _b64encode(_int_bytes(numbers.e)), "kty": "RSA",
            "n": _b64encode(_int_bytes(numbers.n))}


def jwk_thumbprint(public_key: Any) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public key, base64url."""
    canonical = json.dumps(_public_jwk(public_key), separators=(",", ":"), sort_keys=True)
    return _b64encode(hashlib.sha256(canonical.encode("ascii")).digest())


def _jwk_to_key(jwk: Dict[str, Any], alg: str) -> Any:
    c = _crypto()
    try:
        if alg == "ES256":
            x, y = _b64decode(jwk.get("x"), "JWK x"), _b64decode(jwk.get("y"), "JWK y")
            if len(x) != 32 or len(y) != 32:
                raise ValueError("P-256 coordinates must be 32 bytes")
            return c.ec.EllipticCurvePublicNumbers(
                int.from_bytes(x, "big"), int.from_bytes(y, "big"), c.ec.SECP256R1()).public_key()
        n, e = _b64decode(jwk.get("n"), "JWK n"), _b64decode(jwk.get("e"), "JWK e")
        numbers = c.rsa.RSAPublicNumbers(int.from_bytes(e, "big"), int.from_bytes(n, "big"))
        key = numbers.public_key()
        _key_algorithm(key)
        return key
    except (ValueError, TypeError) as exc:
        raise PushSignatureError(
            f"key {jwk.get('kid', '')!r} is not a valid {alg} JWK: {exc}") from None


def _jwk_fits(jwk: Dict[str, Any], alg: str) -> bool:
    if jwk.get("use", "sig") != "sig" or jwk.get("alg", alg) != alg:
        return False
    if alg == "ES256":
        return jwk.get("kty") == "EC" and jwk.get("crv") == "P-256"
    return jwk.get("kty") == "RSA"


Keys = Union[Dict[str, Any], Sequence[Dict[str, Any]], Any]


def _candidate_keys(keys: Keys, kid: Optional[str], alg: str) -> List[Any]:
    """The public keys that may have signed a token with this ``kid`` and ``alg``."""
    if isinstance(keys, dict):
        jwks = keys["keys"] if "keys" in keys else [keys]
        if not isinstance(jwks, list):
            raise TypeError("a JWKS's 'keys' member must be a list")
    elif isinstance(keys, (list, tuple)):
        jwks = list(keys)
    else:
        # A key object: no kid to match; its type must fit the algorithm.
        public = keys.public_key() if hasattr(keys, "private_bytes") else keys
        try:
            key_alg = _key_algorithm(public)
        except (TypeError, ValueError) as exc:
            raise PushSignatureError(f"the verification key is not usable: {exc}") from None
        if key_alg != alg:
            raise PushSignatureError(f"the token is signed with {alg} but the key is for {key_alg}")
        return [public]
    if not all(isinstance(j, dict) for j in jwks):
        raise TypeError("keys must be a JWKS dict, a list of JWK dicts or a public key object")
    if kid is not None:
        jwks = [j for j in jwks if j.get("kid") == kid]
        if not jwks:
            raise PushSignatureError(f"unknown key id {kid!r}: no key in the JWKS has it")
    fitting = [j for j in jwks if _jwk_fits(j, alg)]
    if not fitting:
        if kid is not None:
            raise PushSignatureError(
                f"key {kid!r} does not fit {alg} (its kty, crv, alg or use differ)")
        raise PushSignatureError(f"no key in the JWKS fits {alg}")
    return [_jwk_to_key(j, alg) for j in fitting]


def _verify_signature(public_key: Any, alg: str, signature: bytes, signed: bytes) -> bool:
    c = _crypto()
    try:
        if alg == "ES256":
            r = int.from_bytes(signature[:32], "big")
            s = int.from_bytes(signature[32:], "big")
            der = c.encode_dss_signature(r, s)
            public_key.verify(der, signed, c.ec.ECDSA(c.hashes.SHA256()))
        else:
            public_key.verify(signature, signed, c.padding.PKCS1v15(), c.hashes.SHA256())
    except c.InvalidSignature:
        return False
    return True


# --------------------------------------------------------------- signing

class PushSigner:
    """Signs push notification bodies as compact JWTs.

    :param private_key: a ``cryptography`` EC P-256 or RSA (>= 2048 bits)
        private key, or its unencrypted PEM (bytes or str).
    :param key_id: the ``kid``; defaults to the key's RFC 7638 thumbprint.
    :param algorithm: ``ES256`` or ``RS256``; inferred from the key if empty.
    :param issuer: the ``iss`` claim (e.g. the agent's URL); omitted if empty.
    :param jwks_url: where :meth:`jwks` is served; sent as the ``jku`` header.
        Receivers should fetch keys only from a URL they trust, not from ``jku``.
    :param ttl: seconds a token is valid (``exp - iat``).
    """

    def __init__(self, private_key: Any, *, key_id: str = "", algorithm: str = "",
                 issuer: str = "", jwks_url: str = "", ttl: float = 300.0) -> None:
        c = _crypto()
        if isinstance(private_key, (str, bytes)):
            data = private_key.encode("ascii") if isinstance(private_key, str) else private_key
            try:
                private_key = c.serialization.load_pem_private_key(data, password=None)
            except (ValueError, TypeError) as exc:
                raise ValueError(f"not an unencrypted PEM private key: {exc}") from None
        if not hasattr(private_key, "private_bytes"):
            raise TypeError(f"expected a private key, got {type(private_key).__name__}")
        inferred = _key_algorithm(private_key)
        if algorithm and algorithm != inferred:
            raise ValueError(f"algorithm {algorithm!r} does not fit this key (it needs {inferred})")
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        self.algorithm = inferred
        self.key_id = key_id or jwk_thumbprint(private_key.public_key())
        self.issuer = issuer
        self.jwks_url = jwks_url
        self.ttl = float(ttl)
        self._key = private_key

    def _header(self) -> Dict[str, str]:
        header = {"alg": self.algorithm, "typ": "JWT", "kid": self.key_id}
        if self.jwks_url:
            header["jku"] = self.jwks_url
        return header

    def sign(self, body: bytes, *, task_id: str, now: Optional[float] = None) -> str:
        """A compact JWT over ``body`` (the exact bytes POSTed) for task ``task_id``."""
        issued = int(time.time() if now is None else now)
        claims: Dict[str, Any] = {}
        if self.issuer:
            claims["iss"] = self.issuer
        claims.update({
            "iat": issued,
            "exp": issued + int(round(self.ttl)),
            "jti": secrets.token_hex(16),
            "taskId": task_id,
            BODY_HASH_CLAIM: body_sha256(body),
        })
        signed = _b64encode(_dumps(self._header())) + "." + _b64encode(_dumps(claims))
        return signed + "." + _b64encode(self._signature(signed.encode("ascii")))

    def _signature(self, signed: bytes) -> bytes:
        c = _crypto()
        if self.algorithm == "ES256":
            # RFC 7518 §3.4: the raw 32-byte r and s, not cryptography's DER.
            r, s = c.decode_dss_signature(self._key.sign(signed, c.ec.ECDSA(c.hashes.SHA256())))
            return _int_bytes(r, 32) + _int_bytes(s, 32)
        return self._key.sign(signed, c.padding.PKCS1v15(), c.hashes.SHA256())

    def jwks(self) -> Dict[str, Any]:
        """The public key set to publish (at ``jwks_url``): ``{"keys": [jwk]}``."""
        jwk: Dict[str, Any] = dict(_public_jwk(self._key.public_key()))
        jwk.update({"kid": self.key_id, "alg": self.algorithm, "use": "sig"})
        return {"keys": [jwk]}


# ------------------------------------------------------------- verifying

def _numeric_claim(claims: Dict[str, Any], name: str) -> float:
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PushSignatureError(f"the {name!r} claim is missing or not a number")
    return float(value)


def verify_push(body: bytes, token: str, keys: Keys, *, task_id: Optional[str] = None,
                max_age: float = 300.0, leeway: float = 30.0,
                now: Optional[float] = None) -> Dict[str, Any]:
    """Check a push token against the body received; for webhook receivers.

    :param body: the exact request body bytes.
    :param token: the compact JWT (a leading ``Bearer `` is ignored).
    :param keys: a JWKS dict, a list of JWKs, one JWK, or a public key object.
        The token's ``jku`` is never fetched: pass keys from a source you trust.
    :param task_id: if given, the ``taskId`` claim must equal it.
    :param max_age: the oldest ``iat`` accepted, in seconds (replay window).
    :param leeway: clock skew tolerated, in seconds.
    :returns: the verified claims.
    :raises PushSignatureError: saying which check failed.
    """
    _crypto()  # a missing dependency is reported whatever the token looks like
    if not isinstance(token, str) or not token:
        raise PushSignatureError("no token")
    if token[:7].lower() == "bearer ":
        token = token[7:].strip()
    parts = token.split(".")
    if len(parts) != 3:
        raise PushSignatureError("not a compact JWS (expected three dot-separated parts)")
    header = _json_object(_b64decode(parts[0], "the token header"), "header")
    alg = header.get("alg")
    if alg not in ALGORITHMS:
        raise PushSignatureError(f"algorithm {alg!r} is not accepted (only ES256 and RS256)")
    if "crit" in header:
        raise PushSignatureError(
            f"critical header extensions are not supported: {header['crit']!r}")
    if header.get("typ", "JWT") not in ("JWT", "jwt"):
        raise PushSignatureError(f"token type {header.get('typ')!r} is not JWT")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise PushSignatureError("the 'kid' header is not a string")

    signature = _b64decode(parts[2], "the token signature")
    if alg == "ES256" and len(signature) != 64:
        raise PushSignatureError(f"an ES256 signature is 64 bytes (raw r||s), not {len(signature)}")
    signed = (parts[0] + "." + parts[1]).encode("ascii")
    candidates = _candidate_keys(keys, kid, alg)
    if not any(_verify_signature(k, alg, signature, signed) for k in candidates):
        raise PushSignatureError("the signature does not verify with the key"
                                 + (f" {kid!r}" if kid else ""))

    claims = _json_object(_b64decode(parts[1], "the token payload"), "payload")
    current = time.time() if now is None else now
    issued = _numeric_claim(claims, "iat")
    expires = _numeric_claim(claims, "exp")
    if issued > current + leeway:
        raise PushSignatureError(f"the token is issued {issued - current:.0f} s in the future")
    if expires <= current - leeway:
        raise PushSignatureError(f"the token expired {current - expires:.0f} s ago")
    if current - issued > max_age + leeway:
        raise PushSignatureError(f"the token is {current - issued:.0f} s old, "
                                 f"more than the {max_age:g} s accepted")
    if expires < issued:
        raise PushSignatureError("the token expires before it is issued")
    if "nbf" in claims and _numeric_claim(claims, "nbf") > current + leeway:
        raise PushSignatureError("the token is not valid yet (nbf)")
    claimed_hash = claims.get(BODY_HASH_CLAIM)
    if not isinstance(claimed_hash, str):
        raise PushSignatureError(f"the {BODY_HASH_CLAIM!r} claim is missing")
    if not hmac.compare_digest(claimed_hash.lower().encode("ascii", "replace"),
                               body_sha256(body).encode("ascii")):
        raise PushSignatureError("the body does not match the signed hash (it was altered)")
    if task_id is not None and claims.get("taskId") != task_id:
        raise PushSignatureError(f"the token is for task {claims.get('taskId')!r}, "
                                 f"not {task_id!r}")
    return claims
