"""Where the card's URLs come from, and whether a request may choose them.

The card tells clients where to send their messages (and their credentials).
A card that lists its ``supported_interfaces`` itself needs no base URL; for
the others it is taken, in this order, from:

1. ``A2A_PUBLIC_URL``: fixed by the operator; the only card that is signed.
2. Flask's ``SERVER_NAME``: the configured host, with the scheme and mount
   point of the request (as the WSGI server or a proxy middleware set them, as
   ``url_for(_external=True)`` does); the ``Host`` header plays no part.
3. The request's ``Host`` header, when it is a well-formed ``host[:port]`` and,
   where a trust list is set (Flask's ``TRUSTED_HOSTS``, or the request class's
   ``trusted_hosts``), on that list.  Such a card varies with ``Host`` and is
   never signed.

A ``Host`` that is malformed or not trusted gets HTTP 400, never a card.
"""
from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from flask import current_app, request
from werkzeug.exceptions import SecurityError
from werkzeug.sansio.utils import host_is_trusted

from ..protocol.errors import InvalidRequestError


class Source(enum.Enum):
    """What chose the host in the card's URLs."""

    #: The card lists its ``supported_interfaces`` itself: no base URL is needed.
    DECLARED = "supported_interfaces"
    PUBLIC_URL = "A2A_PUBLIC_URL"
    SERVER_NAME = "SERVER_NAME"
    HOST_HEADER = "Host"


@dataclass(frozen=True)
class CardOrigin:
    """The base URL of the card's interfaces (scheme, host, mount point, prefix)."""

    base_url: str
    source: Source

    @property
    def signable(self) -> bool:
        """Only URLs the operator configured whole are worth a signature."""
        return self.source in (Source.DECLARED, Source.PUBLIC_URL)


# A DNS name (labels of letters, digits, ``-`` and ``_``, an optional final dot) or an
# IPv4 address, or a bracketed IPv6 address; then an optional port.  No user info, no
# path, no whitespace, no zone id: nothing else may reach a card.
_HOST = re.compile(r"""
    (?P<name>
        (?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.)*
        [a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?\.?
      | \[[0-9a-f:.]{2,45}\]
    )
    (?::(?P<port>[0-9]{1,5}))?
""", re.VERBOSE)
#: The longest DNS name (253) plus a port.
_MAX_HOST = 253 + 6
# What a path may hold unescaped (RFC 3986 pchar and "/"): the mount point is quoted
# with it, so that a mount point with a space or a quote still makes a valid URL.
_PATH_SAFE = "/-._~!$&'()*+,;=:@"


def normal_host(value: str) -> str:
    """``value`` lower-cased if it is a well-formed ``host[:port]``, else ``""``."""
    host = value.lower()
    match = _HOST.fullmatch(host) if len(host) <= _MAX_HOST else None
    if match is None:
        return ""
    port = match.group("port")
    if port is not None and not 1 <= int(port) <= 65535:
        return ""
    return host


def check_public_url(public_url: str) -> None:
    """Refuse an ``A2A_PUBLIC_URL`` that is no absolute ``http(s)`` URL of a host.

    :raises ValueError: naming the key, the value and what it needs.
    """
    if not public_url:
        return
    parts = urlsplit(public_url)
    if (parts.scheme not in ("http", "https") or not normal_host(parts.netloc)
            or parts.query or parts.fragment):
        raise ValueError(f"A2A_PUBLIC_URL must be an absolute http or https URL such as "
                         f"https://agents.example.com (an optional path, no user info, query "
                         f"or fragment), got {public_url!r}")


def card_origin(public_url: str, url_prefix: str, declared: bool = False) -> CardOrigin:
    """The origin of the current request's card (see the module's docstring).

    :param declared: the card lists its interfaces itself (then nothing else matters).
    :raises InvalidRequestError: (HTTP 400) for a malformed or untrusted ``Host``,
        or a scheme other than ``http`` and ``https``.
    """
    if declared:
        return CardOrigin("", Source.DECLARED)
    if public_url:
        return CardOrigin(public_url + url_prefix, Source.PUBLIC_URL)
    scheme = request.scheme
    if scheme not in ("http", "https"):  # a proxy middleware passed on anything
        raise InvalidRequestError("The request's scheme is neither http nor https")
    root = quote(request.script_root, safe=_PATH_SAFE)
    server_name = current_app.config.get("SERVER_NAME")
    if server_name:
        return CardOrigin(f"{scheme}://{server_name}{root}{url_prefix}", Source.SERVER_NAME)
    return CardOrigin(f"{scheme}://{_trusted_host(scheme)}{root}{url_prefix}", Source.HOST_HEADER)


def _untrusted() -> InvalidRequestError:
    return InvalidRequestError("The Host header names no host this agent serves (TRUSTED_HOSTS)")


def _trusted_host(scheme: str) -> str:
    # The header as sent: werkzeug's request.host trims a default port off the end,
    # which would let "evil.example:80:80" pass as "evil.example:80".
    raw = request.headers.get("Host")
    if raw is None:  # HTTP/1.0: the server's own address
        try:
            raw = request.host
        except SecurityError:  # werkzeug checked a request class's trusted_hosts
            raise _untrusted() from None
    host = normal_host(raw)
    if not host:
        raise InvalidRequestError("The Host header is missing or not a valid host[:port]")
    # Flask 3.1 applies TRUSTED_HOSTS to every request before any view runs; older
    # Flask does not know the key, so the card applies it itself.
    trusted = current_app.config.get("TRUSTED_HOSTS") or request.trusted_hosts
    if trusted and not host_is_trusted(host, trusted):
        raise _untrusted()
    default_port = ":443" if scheme == "https" else ":80"
    return host[:-len(default_port)] if host.endswith(default_port) else host
