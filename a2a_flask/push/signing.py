"""Compatibility path from 0.1, deprecated: signed pushes live in
:mod:`a2a_flask.signing.pushes`.  Each name of 0.1 still imports from here, with a
:class:`DeprecationWarning`."""
import typing as _typing

from ..deprecation import Moved as _Moved
from ..signing import pushes as _pushes

__all__ = ["BODY_HASH_CLAIM", "PushSignatureError", "PushSigner", "body_sha256",
           "jwk_thumbprint", "verify_push"]

_MOVED = _Moved.to(__name__, _pushes, __all__)


def __getattr__(name: str) -> _typing.Any:
    return _MOVED.get(name)


def __dir__() -> _typing.List[str]:
    return list(__all__)
