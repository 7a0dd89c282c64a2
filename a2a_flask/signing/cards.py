"""Signed agent cards (spec §8.4): detached JWS over the RFC 8785 canonical card.

The agent signs the card exactly as it serves it (all members, including the
0.3 ones a union card carries), minus ``signatures`` and minus members left
at their defaults (null, empty lists, empty objects); the signature goes in
``signatures``.  A client checks a card with :func:`verify_card` and keys it
trusts (``jku`` in the header says where the agent publishes them, but a
verifier should not fetch keys from a URL the card itself names).
Needs ``pip install 'a2a-flask[signing]'``.
"""
from __future__ import annotations

import json
import math
from typing import Any, Dict, List

from ..protocol.errors import CardSignatureError, SignatureError
from .jws import Keys, Signer, _b64decode, _b64encode, _dumps, _json_object, verify_signature

__all__ = ["CardSignatureError", "CardSigner", "canonical_json", "signing_payload", "verify_card"]


def _number(value: float) -> str:
    """An ECMAScript number, as RFC 8785 wants it."""
    if not math.isfinite(value):
        raise ValueError("RFC 8785 has no form for NaN or infinity")
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        mantissa, exponent = text.split("e")
        sign = "-" if exponent.startswith("-") else "+"
        text = f"{mantissa}e{sign}{exponent.lstrip('+-').lstrip('0') or '0'}"
    return text


def canonical_json(value: Any) -> bytes:
    """RFC 8785 (JCS): sorted members (by UTF-16 code units), no whitespace,
    minimal string escapes, ECMAScript numbers."""
    def write(item: Any) -> str:
        if isinstance(item, dict):
            keys = sorted(item, key=lambda key: key.encode("utf-16-be"))
            return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + write(item[k])
                                  for k in keys) + "}"
        if isinstance(item, list):
            return "[" + ",".join(write(v) for v in item) + "]"
        if isinstance(item, float):
            return _number(item)
        return json.dumps(item, ensure_ascii=False)

    return write(value).encode("utf-8")


def _without_defaults(value: Any) -> Any:
    if isinstance(value, dict):
        kept = {k: _without_defaults(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, [], {})}
    if isinstance(value, list):
        return [_without_defaults(v) for v in value]
    return value


def signing_payload(card: Dict[str, Any]) -> bytes:
    """The bytes a card signature covers."""
    return canonical_json(_without_defaults({k: v for k, v in card.items() if k != "signatures"}))


class CardSigner(Signer):
    """Signs agent cards (see :class:`~a2a_flask.signing.jws.Signer` for the key parameters)."""

    def sign(self, card: Dict[str, Any]) -> Dict[str, str]:
        """An AgentCardSignature (``protected``, ``signature``) for the card's JSON."""
        protected = _b64encode(_dumps(self.header("JOSE")))
        signed = (protected + "." + _b64encode(signing_payload(card))).encode("ascii")
        return {"protected": protected, "signature": _b64encode(self.signature(signed))}

    def signed(self, card: Dict[str, Any]) -> Dict[str, Any]:
        """The card with this signer's signature added to ``signatures``."""
        return {**card, "signatures": list(card.get("signatures", [])) + [self.sign(card)]}


def verify_card(card: Dict[str, Any], keys: Keys) -> Dict[str, Any]:
    """The protected header of the first signature of ``card`` that ``keys`` verify.

    :param keys: a JWKS dict, a list of JWKs, one JWK, or a public key object.
    :raises CardSignatureError: no signature, or none verifies (the message
        says why the last one failed).
    """
    signatures: List[Any] = card.get("signatures") or []
    if not signatures:
        raise CardSignatureError("the card carries no signatures")
    payload = _b64encode(signing_payload(card))
    problem = ""
    for entry in signatures:
        try:
            if not isinstance(entry, dict):
                raise CardSignatureError("a signature entry is not an object")
            protected = entry.get("protected")
            header = _json_object(_b64decode(protected, "the protected header"), "header")
            if "crit" in header:
                raise CardSignatureError("critical header extensions are not supported")
            kid = header.get("kid")
            signature = _b64decode(entry.get("signature"), "the signature")
            verify_signature(keys, kid if isinstance(kid, str) else None, header.get("alg"),
                             signature, f"{protected}.{payload}".encode("ascii"))
            return header
        except SignatureError as exc:
            problem = str(exc)
    raise CardSignatureError(f"no signature of the card verifies: {problem}")
