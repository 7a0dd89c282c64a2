"""Signatures: JWS over agent cards (spec §8.4) and JWTs on push notifications.

Needs the optional ``cryptography`` dependency (``pip install 'a2a-flask[signing]'``)
only when a key is used; importing this package costs nothing without it.
"""
from .cards import CardSignatureError, CardSigner, verify_card
from .pushes import PushSignatureError, PushSigner, verify_push

__all__ = ["CardSignatureError", "CardSigner", "verify_card", "PushSignatureError",
           "PushSigner", "verify_push"]
