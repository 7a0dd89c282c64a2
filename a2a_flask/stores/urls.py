"""Store URLs as they may be shown: every secret a URL can carry masked.

A store URL names its database and, often, how to log in to it: a password in
the user info (``postgresql://app:secret@db/tasks``) or in the query, a form
libpq, redis-py and the MySQL drivers all accept (``?password=secret``,
libpq's ``sslpassword``, MySQLdb's ``passwd``).  Commands, log lines and error
messages show a URL only through :func:`safe_url`, and text that may quote one
(a driver's error) through :func:`safe_text`.

What is masked:

* the password of the user info (the user name stays: it is no secret);
* the value of every query (and fragment) parameter whose name, percent-decoded
  and in any case, contains one of :data:`SECRET_WORDS`: ``password``,
  ``sslpassword``, ``passwd``, ``pass``, ``pwd``, ``passphrase``, ``secret``,
  ``token``, ``credential(s)``, ``api_key`` or ``apikey``, each time it occurs.

Parameters that name a key or certificate *file* (libpq's ``sslkey``,
``sslcert``, MySQL's ``ssl_key``, redis-py's ``ssl_keyfile``) stay: a path
tells nothing a reader of the logs could log in with.
"""
from __future__ import annotations

import re
from urllib.parse import unquote_plus

#: What a parameter's name contains when its value is a secret (compared in lower case).
SECRET_WORDS = ("pass", "pwd", "secret", "token", "credential", "apikey", "api_key")
#: What a masked secret reads as.
MASK = "***"

#: A URL in text: its scheme, then everything up to a blank or a quote.
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<rest>[^\s'\"<>]*)")
#: The user name of a URL's user info, up to the colon before its password.
_USER = re.compile(r"[^:/?#@]*:")
#: ``key=value`` pairs of a libpq connection string quoted in a message
#: (``host=db password=secret``): the value, quoted or bare.
_KEYWORD = re.compile(r"(?P<key>[A-Za-z_][A-Za-z0-9_]*)\s*=\s*(?P<value>'(?:[^'\\]|\\.)*'|\S+)")


def secret_name(name: str) -> bool:
    """Whether a URL parameter of this name (as written: percent-encoded, any case)
    holds a secret."""
    decoded = unquote_plus(name).strip().lower()
    return any(word in decoded for word in SECRET_WORDS)


def _mask_parameters(query: str) -> str:
    """A query (or fragment) with the value of each secret parameter masked."""
    # The separators kept, so that the rest stays as written; a fragment's own
    # parameters ("#password=...") are split off too.
    pieces = re.split(r"([&;?#])", query)
    for index in range(0, len(pieces), 2):
        name, equals, _ = pieces[index].partition("=")
        if equals and secret_name(name):
            pieces[index] = f"{name}={MASK}"
    return "".join(pieces)


def _password_end(rest: str, start: int) -> int:
    """Where the password that starts at ``start`` of a URL's ``rest`` (after its
    scheme) ends: at the last "@" of the authority as ``urllib`` reads it, or at the
    first "@" after the colon as SQLAlchemy reads it (its passwords may hold "/", "?"
    and "#"), whichever is further; -1 without an "@"."""
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    return max(authority.rfind("@"), rest.find("@", start))


def safe_url(url: str) -> str:
    """A store URL for messages and logs: its password, and every secret of its
    query, masked (see the module docstring).  Text that is no URL comes back as it
    is, with any ``password=...`` in it masked."""
    return safe_text(url)


def _mask_url(found: "re.Match[str]") -> str:
    rest = found.group("rest")
    user = _USER.match(rest)
    end = _password_end(rest, user.end()) if user is not None else -1
    if user is not None and end > user.end():
        rest = rest[:user.end()] + MASK + rest[end:]
        after_userinfo = user.end() + len(MASK) + 1
    else:
        after_userinfo = re.split(r"[/?#]", rest, maxsplit=1)[0].rfind("@") + 1
    head, tail = rest[:after_userinfo], rest[after_userinfo:]
    parameters = re.search(r"[?#]", tail)
    if parameters is not None:
        tail = tail[:parameters.end()] + _mask_parameters(tail[parameters.end():])
    return found.group("scheme") + head + tail


def _mask_keyword(found: "re.Match[str]") -> str:
    return f"{found.group('key')}={MASK}" if secret_name(found.group("key")) else found.group(0)


def safe_text(text: str) -> str:
    """``text`` (an error message, a log line's argument) with the secrets of every URL
    in it masked, and those of any libpq-style ``key=value`` pairs outside URLs."""
    masked = []
    start = 0
    for found in _URL.finditer(text):
        masked.append(_KEYWORD.sub(_mask_keyword, text[start:found.start()]))
        masked.append(_mask_url(found))
        start = found.end()
    masked.append(_KEYWORD.sub(_mask_keyword, text[start:]))
    return "".join(masked)
