"""TLS for the SQL drivers' new connections, without loading CA files on the hub.

Given no TLS settings, PyMySQL and pg8000 both *prefer* TLS without verifying
anything: they try it, fall back to plain text when the server has none, and
build a fresh ``ssl.create_default_context()`` for every connection they open.
That call reads the system's CA bundle, 30 to 40 ms of CPU (over 0.1 s while
workers start on two cores) holding a gevent worker's hub each time a pool
grows or the ``LISTEN`` connection opens, for certificates that are never
checked.  The engines the store builds get one shared context instead, made
without CA files because it verifies nothing, and the same preference.
"""
from __future__ import annotations

import importlib
import logging
import ssl
from typing import Any, Dict, Optional, Tuple

from sqlalchemy import event
from sqlalchemy.engine import Engine

log = logging.getLogger("a2a_flask.stores.sql")

_unverified: Optional[ssl.SSLContext] = None


def unverified_context() -> ssl.SSLContext:
    """The process's one client context that encrypts and verifies nothing (what the
    drivers build by default, minus the CA files it would not use)."""
    global _unverified
    if _unverified is None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        _unverified = context
    return _unverified


def share_one_tls_context_pymysql(engine: Engine) -> None:
    """PyMySQL connections of ``engine`` given no TLS options use the shared context."""
    # Imported by name: PyMySQL ships no type information.
    Connection: Any = importlib.import_module("pymysql.connections").Connection
    shared = unverified_context()

    class _Connection(Connection):  # type: ignore[misc]
        def _create_ssl_ctx(self, sslp: Any) -> Any:
            return shared if sslp == {} else super()._create_ssl_ctx(sslp)

    def connect(dialect: Any, record: Any, cargs: Any, cparams: Any) -> Any:
        return _Connection(*cargs, **cparams)

    event.listen(engine, "do_connect", connect)


#: libpq's ``sslmode`` values, which pg8000 engines honour too (libpq's default: prefer).
SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


def pg8000_tls_options(query: Dict[str, str]) -> Tuple[str, Optional[str]]:
    """``sslmode`` and ``sslrootcert`` taken out of a pg8000 URL's query (pg8000 itself
    knows neither); a mode libpq does not know is refused."""
    mode = query.pop("sslmode", "prefer")
    if mode not in SSL_MODES:
        raise ValueError(f"sslmode must be one of {', '.join(SSL_MODES)}, not {mode!r}")
    return mode, query.pop("sslrootcert", None)


def _verifying_context(mode: str, rootcert: Optional[str]) -> ssl.SSLContext:
    """A context that checks the server's certificate (and, for verify-full, its name).
    Built once per engine, when the store opens: it reads CA files."""
    context = ssl.create_default_context(cafile=rootcert)
    context.check_hostname = mode == "verify-full"
    return context


def share_one_tls_context_pg8000(engine: Engine, sslmode: str = "prefer",
                                 rootcert: Optional[str] = None) -> None:
    """pg8000 connections of ``engine`` follow libpq's ``sslmode``.

    ``prefer`` (the default, as libpq's and pg8000's own) tries TLS with the shared
    unverified context and connects in plain text once the server has refused it,
    saying so in the log (a warning unless the server is on this host);
    ``require`` encrypts without verifying and never falls back; ``verify-ca`` and
    ``verify-full`` check the certificate against ``rootcert`` (or the system's CAs),
    ``verify-full`` its host name too; ``disable`` never asks.

    pg8000 takes a context it is given as "TLS required", so a refusal is caught here
    and remembered for the engine: the next connections skip the attempt, as a
    server does not gain TLS without a restart.
    """
    InterfaceError: Any = importlib.import_module("pg8000.exceptions").InterfaceError
    if sslmode in ("verify-ca", "verify-full"):
        context: Any = _verifying_context(sslmode, rootcert)
    else:
        context = False if sslmode == "disable" else unverified_context()
    fallback = sslmode in ("allow", "prefer")
    plain = False

    def connect(dialect: Any, record: Any, cargs: Any, cparams: Any) -> Any:
        nonlocal plain
        if not plain:
            try:
                return dialect.connect(*cargs, ssl_context=context, **cparams)
            except InterfaceError as exc:
                if not (fallback and "refuses SSL" in str(exc)):
                    raise
                plain = True
                _say_plain_text(engine)
        return dialect.connect(*cargs, ssl_context=False, **cparams)

    event.listen(engine, "do_connect", connect)


def _say_plain_text(engine: Engine) -> None:
    host = engine.url.host or ""
    local = host in ("", "localhost") or host.startswith(("127.", "/")) or host == "::1"
    log.log(logging.DEBUG if local else logging.WARNING,
            "PostgreSQL at %s refused TLS: connecting in plain text (sslmode=prefer); "
            "add sslmode=require or verify-full to the store URL to refuse that", host or "local")
