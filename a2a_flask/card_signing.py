"""Compatibility path from 0.1, deprecated: signed cards live in
:mod:`a2a_flask.signing.cards`.  Each name of 0.1 still imports from here, with a
:class:`DeprecationWarning`."""
import typing as _typing

from .deprecation import Moved as _Moved
from .signing import cards as _cards

__all__ = ["CardSignatureError", "CardSigner", "canonical_json", "signing_payload", "verify_card"]

_MOVED = _Moved.to(__name__, _cards, __all__)


def __getattr__(name: str) -> _typing.Any:
    return _MOVED.get(name)


def __dir__() -> _typing.List[str]:
    return list(__all__)
