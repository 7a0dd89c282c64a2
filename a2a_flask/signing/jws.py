"""JWS (RFC 7515) with ES256 or RS256, written on top of ``cryptography``.

Shared by signed push notifications (:mod:`a2a_flask.signing.pushes`) and
signed agent cards (:mod:`a2a_flask.signing.cards`).  ``cryptography`` is an
optional dependency (``pip install 'a2a-flask[signing]'``), imported on first
use.  Only ES256 and RS256 are produced or accepted; ``none`` and the HMAC
algorithms are refused, so a public key can never be misused as an HMAC secret.
"""
from __future__ import annotations

import base64
import functools
import hashlib
import json
import re
from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from ..protocol.errors import SignatureError
from ..version import install_extra

ALGORITHMS = ("ES256", "RS256")
MIN_RSA_BITS = 2048
_B64URL = re.compile(r"^[A-Za-z0-9_-]*$")


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
            f"signing needs the 'cryptography' package: {install_extra('signing')}"
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
        raise SignatureError(f"{what} is not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _int_bytes(value: int, length: int = 0) -> bytes:
    return value.to_bytes(length or max(1, (value.bit_length() + 7) // 8), "big")


def _unique_keys(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    result: Dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            # {"alg":"ES256","alg":"none"}: parsers disagree on which one wins.
            raise SignatureError(f"duplicate member {key!r} in the token")
        result[key] = value
    return result


def _json_object(data: bytes, what: str) -> Dict[str, Any]:
    try:
        value = json.loads(data.decode("utf-8"), object_pairs_hook=_unique_keys)
    except (UnicodeDecodeError, ValueError) as exc:
        if isinstance(exc, SignatureError):
            raise
        raise SignatureError(f"the token {what} is not JSON") from None
    if not isinstance(value, dict):
        raise SignatureError(f"the token {what} is not a JSON object")
    return value


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


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
        raise SignatureError(
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
        key_object: Any = keys
        public = key_object.public_key() if hasattr(keys, "private_bytes") else keys
        try:
            key_alg = _key_algorithm(public)
        except (TypeError, ValueError) as exc:
            raise SignatureError(f"the verification key is not usable: {exc}") from None
        if key_alg != alg:
            raise SignatureError(f"the token is signed with {alg} but the key is for {key_alg}")
        return [public]
    if not all(isinstance(j, dict) for j in jwks):
        raise TypeError("keys must be a JWKS dict, a list of JWK dicts or a public key object")
    if kid is not None:
        jwks = [j for j in jwks if j.get("kid") == kid]
        if not jwks:
            raise SignatureError(f"unknown key id {kid!r}: no key in the JWKS has it")
    fitting = [j for j in jwks if _jwk_fits(j, alg)]
    if not fitting:
        if kid is not None:
            raise SignatureError(
                f"key {kid!r} does not fit {alg} (its kty, crv, alg or use differ)")
        raise SignatureError(f"no key in the JWKS fits {alg}")
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

class Signer:
    """A private key that signs JWS, and the JWKS that publishes its public half.

    :param private_key: a ``cryptography`` EC P-256 or RSA (>= 2048 bits)
        private key, or its unencrypted PEM (bytes or str).
    :param key_id: the ``kid``; defaults to the key's RFC 7638 thumbprint.
    :param algorithm: ``ES256`` or ``RS256``; inferred from the key if empty.
    :param jwks_url: where :meth:`jwks` is served; sent as the ``jku`` header.
        Verifiers should fetch keys only from a URL they trust, not from ``jku``.
    """

    def __init__(self, private_key: Any, *, key_id: str = "", algorithm: str = "",
                 jwks_url: str = "") -> None:
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
        self.algorithm = inferred
        self.key_id = key_id or jwk_thumbprint(private_key.public_key())
        self.jwks_url = jwks_url
        self._key = private_key

    def header(self, typ: str) -> Dict[str, str]:
        """The protected header: ``alg``, ``typ``, ``kid`` and (if set) ``jku``."""
        header = {"alg": self.algorithm, "typ": typ, "kid": self.key_id}
        if self.jwks_url:
            header["jku"] = self.jwks_url
        return header

    def signature(self, signed: bytes) -> bytes:
        """The JWS signature bytes of a signing input."""
        c = _crypto()
        if self.algorithm == "ES256":
            # RFC 7518 §3.4: the raw 32-byte r and s, not cryptography's DER.
            r, s = c.decode_dss_signature(self._key.sign(signed, c.ec.ECDSA(c.hashes.SHA256())))
            return _int_bytes(r, 32) + _int_bytes(s, 32)
        signature: bytes = self._key.sign(signed, c.padding.PKCS1v15(), c.hashes.SHA256())
        return signature

    def jwks(self) -> Dict[str, Any]:
        """The public key set to publish (at ``jwks_url``): ``{"keys": [jwk]}``."""
        jwk: Dict[str, Any] = dict(_public_jwk(self._key.public_key()))
        jwk.update({"kid": self.key_id, "alg": self.algorithm, "use": "sig"})
        return {"keys": [jwk]}


def verify_signature(keys: "Keys", kid: Optional[str], alg: Any, signature: bytes,
                     signed: bytes) -> None:
    """Check a JWS signature with the fitting keys; SignatureError if none verifies."""
    if alg not in ALGORITHMS:
        raise SignatureError(f"algorithm {alg!r} is not accepted (only ES256 and RS256)")
    if alg == "ES256" and len(signature) != 64:
        raise SignatureError(f"an ES256 signature is 64 bytes (raw r||s), not {len(signature)}")
    if not any(_verify_signature(k, alg, signature, signed)
               for k in _candidate_keys(keys, kid, alg)):
        raise SignatureError("the signature does not verify with the key"
                             + (f" {kid!r}" if kid else ""))
