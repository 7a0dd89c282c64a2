"""Compatibility path from 0.1, deprecated: the authentication hook lives in
:mod:`a2a_flask.web.auth` (``BearerAuth``, ``APIKeyAuth`` and ``Principal`` are
exported by :mod:`a2a_flask` too, the errors by :mod:`a2a_flask.errors`).  Each
name of 0.1 still imports from here, with a :class:`DeprecationWarning`."""
import typing as _typing

from .deprecation import Moved as _Moved
from .web import auth as _auth

__all__ = ["APIKeyAuth", "Authenticator", "BearerAuth", "Principal", "Authentication",
           "PermissionDeniedError", "UnauthenticatedError"]

_MOVED = _Moved.to(__name__, _auth, __all__)


def __getattr__(name: str) -> _typing.Any:
    return _MOVED.get(name)


def __dir__() -> _typing.List[str]:
    return list(__all__)
