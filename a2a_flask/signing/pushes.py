"""Optional JWT signatures on push notifications (ES256 or RS256).

The agent signs each push with :class:`PushSigner` and publishes the public
key as a JWKS (:meth:`PushSigner.jwks`); a receiver checks a push with
:func:`verify_push`.  The token binds the exact body bytes (claim
``request_body_sha256``), the task (``taskId``) and a short validity window
(``iat``/``exp``), so a captured push cannot be altered, replayed much later
or replayed for another task.  The JWS itself is :mod:`a2a_flask.signing.jws`
(``pip install 'a2a-flask[signing]'``).
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from typing import Any, Dict, Optional

from ..protocol.errors import PushSignatureError, SignatureError
from .jws import (
    Keys,
    Signer,
    _b64decode,
    _b64encode,
    _crypto,
    _dumps,
    _json_object,
    jwk_thumbprint,
    verify_signature,
)

__all__ = ["BODY_HASH_CLAIM", "PushSignatureError", "PushSigner", "body_sha256",
           "jwk_thumbprint", "verify_push"]

#: The claim holding the hex SHA-256 of the exact request body.
BODY_HASH_CLAIM = "request_body_sha256"


def body_sha256(body: bytes) -> str:
    """The value of the ``request_body_sha256`` claim for ``body``."""
    return hashlib.sha256(body).hexdigest()


class PushSigner(Signer):
    """Signs push notification bodies as compact JWTs (see :class:`~a2a_flask.signing.jws.Signer`
    for the key parameters).

    :param issuer: the ``iss`` claim (e.g. the agent's URL); omitted if empty.
    :param ttl: seconds a token is valid (``exp - iat``).
    """

    def __init__(self, private_key: Any, *, key_id: str = "", algorithm: str = "",
                 issuer: str = "", jwks_url: str = "", ttl: float = 300.0) -> None:
        if ttl <= 0:
            raise ValueError(f"ttl must be positive, got {ttl}")
        super().__init__(private_key, key_id=key_id, algorithm=algorithm, jwks_url=jwks_url)
        self.issuer = issuer
        self.ttl = float(ttl)

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
        signed = _b64encode(_dumps(self.header("JWT"))) + "." + _b64encode(_dumps(claims))
        return signed + "." + _b64encode(self.signature(signed.encode("ascii")))


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
    try:
        return _verified_claims(body, token, keys, task_id=task_id, max_age=max_age,
                                leeway=leeway, now=now)
    except PushSignatureError:
        raise
    except SignatureError as exc:  # the JWS layer's: an encoding, a key, the signature
        raise PushSignatureError(str(exc)) from None


def _verified_claims(body: bytes, token: str, keys: Keys, *, task_id: Optional[str],
                     max_age: float, leeway: float, now: Optional[float]) -> Dict[str, Any]:
    """:func:`verify_push`'s checks, in order; the JWS layer's errors pass through."""
    _crypto()  # a missing dependency is reported whatever the token looks like
    if not isinstance(token, str) or not token:
        raise PushSignatureError("no token")
    if token[:7].lower() == "bearer ":
        token = token[7:].strip()
    parts = token.split(".")
    if len(parts) != 3:
        raise PushSignatureError("not a compact JWS (expected three dot-separated parts)")
    header = _json_object(_b64decode(parts[0], "the token header"), "header")
    if "crit" in header:
        raise PushSignatureError(
            f"critical header extensions are not supported: {header['crit']!r}")
    if header.get("typ", "JWT") not in ("JWT", "jwt"):
        raise PushSignatureError(f"token type {header.get('typ')!r} is not JWT")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise PushSignatureError("the 'kid' header is not a string")
    signature = _b64decode(parts[2], "the token signature")
    verify_signature(keys, kid, header.get("alg"), signature,
                     (parts[0] + "." + parts[1]).encode("ascii"))

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
