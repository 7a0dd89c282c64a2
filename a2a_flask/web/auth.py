"""Who is calling: the authentication hook and ready-made Bearer and API-key checks.

An *authenticator* is a function called in the request context (so it can
read ``flask.request``, ``flask.g`` or flask-login's ``current_user``) that
returns the caller: a :class:`Principal`, a plain string id, or None for "no
credentials".  It raises :class:`~a2a_flask.errors.UnauthenticatedError` for
bad credentials and :class:`~a2a_flask.errors.PermissionDeniedError` for a
known caller who may not use the agent.

The principal's id owns what the caller creates: every task and webhook is
visible to its owner (within its tenant) only; anyone else is told it does
not exist.  :class:`BearerAuth` and :class:`APIKeyAuth` also declare their
scheme on the agent card, so clients know what to send.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from flask import request

from ..protocol.calls import Principal
from ..protocol.errors import PermissionDeniedError, UnauthenticatedError

__all__ = ["APIKeyAuth", "Authenticator", "BearerAuth", "Principal", "Authentication",
           "PermissionDeniedError", "UnauthenticatedError"]


Identity = Union[Principal, str, None]
#: A function of the current request: the caller, or None when it sent no credentials.
Authenticator = Callable[[], Identity]
#: A credential check: the secret the client sent -> the caller, or None if it is wrong.
Verifier = Callable[[str], Identity]


def as_principal(identity: Identity) -> Optional[Principal]:
    """A Principal from what an authenticator returned."""
    if identity is None or isinstance(identity, Principal):
        return identity
    if isinstance(identity, str) and identity:
        return Principal(identity)
    raise TypeError(f"an authenticator must return a Principal, a non-empty str or None, "
                    f"not {identity!r}")


class BearerAuth:
    """``Authorization: Bearer <token>``, checked by ``verify(token)``.

    ``verify`` returns the caller (a Principal or an id) or None for a token
    it does not accept (answered 401 ``invalid_token``).  It may raise
    :class:`PermissionDeniedError` for a valid token without access (403).
    """

    def __init__(self, verify: Verifier, *, scheme_name: str = "bearer",
                 bearer_format: str = "", description: str = "", realm: str = "a2a") -> None:
        self.verify = verify
        self.scheme_name = scheme_name
        self.realm = realm
        scheme: Dict[str, Any] = {"scheme": "Bearer"}
        if bearer_format:
            scheme["bearerFormat"] = bearer_format
        if description:
            scheme["description"] = description
        #: The 1.0 SecurityScheme this check declares on the card.
        self.security_scheme = {"httpAuthSecurityScheme": scheme}
        self.challenge = f'Bearer realm="{realm}"'

    def __call__(self) -> Identity:
        kind, _, token = request.headers.get("Authorization", "").partition(" ")
        if kind.lower() != "bearer":
            return None  # no bearer credentials (maybe another scheme's: not ours)
        if not token.strip():
            raise UnauthenticatedError(
                "The Authorization header must be 'Bearer <token>'",
                challenge=f'{self.challenge}, error="invalid_request"')
        caller = self.verify(token.strip())
        if caller is None:
            raise UnauthenticatedError(
                "The bearer token is invalid or expired",
                challenge=f'{self.challenge}, error="invalid_token"')
        return caller


class APIKeyAuth:
    """An API key in a header (``X-API-Key`` by default), checked by ``verify(key)``."""

    def __init__(self, verify: Verifier, *, header: str = "X-API-Key",
                 scheme_name: str = "apiKey", description: str = "") -> None:
        self.verify = verify
        self.header = header
        self.scheme_name = scheme_name
        scheme: Dict[str, Any] = {"location": "header", "name": header}
        if description:
            scheme["description"] = description
        self.security_scheme = {"apiKeySecurityScheme": scheme}
        # RFC 7235 wants a challenge with every 401; API keys have no standard one.
        self.challenge = f'APIKey header="{header}"'

    def __call__(self) -> Identity:
        key = request.headers.get(self.header)
        if key is None:
            return None
        caller = self.verify(key.strip()) if key.strip() else None
        if caller is None:
            raise UnauthenticatedError(f"The {self.header} header holds no valid API key",
                                       challenge=self.challenge)
        return caller


def _challenge_of(name: str, scheme: Mapping[str, Any]) -> str:
    """An RFC 7235 challenge for a card-declared 1.0 SecurityScheme."""
    if "httpAuthSecurityScheme" in scheme:
        kind = scheme["httpAuthSecurityScheme"].get("scheme") or "Bearer"
        return f'{kind[:1].upper()}{kind[1:]} realm="a2a"'
    if "apiKeySecurityScheme" in scheme:
        key = scheme["apiKeySecurityScheme"]
        return f'APIKey {key.get("location", "header")}="{key.get("name", name)}"'
    if "oauth2SecurityScheme" in scheme or "openIdConnectSecurityScheme" in scheme:
        return 'Bearer realm="a2a"'
    return ""  # mutual TLS: no HTTP challenge


class Authentication:
    """The authenticators of one agent, tried in order, and whether one must succeed.

    :param required: refuse callers without credentials (401).  When False,
        they are served as the anonymous caller (owner ``""``), and all
        anonymous callers share one set of tasks.
    """

    def __init__(self, authenticators: Sequence[Authenticator] = (), *,
                 required: bool = True) -> None:
        self.authenticators: List[Authenticator] = list(authenticators)
        self.required = required
        #: The card's securitySchemes: a check without a challenge of its own is
        #: answered with the challenge of what the card declares.
        self.declared: Dict[str, Dict[str, Any]] = {}

    @property
    def enabled(self) -> bool:
        return bool(self.authenticators)

    @property
    def challenge(self) -> str:
        """The ``WWW-Authenticate`` value of a 401: one challenge per scheme in use."""
        challenges = [getattr(a, "challenge", "") for a in self.authenticators]
        if not all(challenges):
            challenges += [_challenge_of(name, scheme) for name, scheme in self.declared.items()]
        return ", ".join(dict.fromkeys(c for c in challenges if c)) or 'Bearer realm="a2a"'

    def identify(self) -> Optional[Principal]:
        """The caller of the current request; raises 401/403 errors as configured."""
        for authenticate in self.authenticators:
            principal = as_principal(authenticate())
            if principal is not None:
                return principal
        if self.required and self.authenticators:
            raise UnauthenticatedError("This agent needs credentials; see securitySchemes "
                                       "in its agent card", challenge=self.challenge)
        return None

    def security_schemes(self) -> Dict[str, Dict[str, Any]]:
        """The card's ``securitySchemes`` declared by the ready-made checks."""
        return {a.scheme_name: a.security_scheme for a in self.authenticators  # type: ignore
                if hasattr(a, "security_scheme")}
