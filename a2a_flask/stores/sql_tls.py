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
import ssl
from typing import Any, Optional

from sqlalchemy import event
from sqlalchemy.engine import Engine

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


def share_one_tls_context_pg8000(engine: Engine) -> None:
    """pg8000 connections of ``engine`` try TLS with the shared context, and plain text
    once the server has refused TLS (pg8000's own default, "prefer").

    pg8000 takes a context it is given as "TLS required", so a refusal is caught here
    and remembered for the engine: the next connections skip the attempt, as a
    server does not gain TLS without a restart.
    """
    InterfaceError: Any = importlib.import_module("pg8000.exceptions").InterfaceError
    shared = unverified_context()
    plain = False

    def connect(dialect: Any, record: Any, cargs: Any, cparams: Any) -> Any:
        nonlocal plain
        if not plain:
            try:
                return dialect.connect(*cargs, ssl_context=shared, **cparams)
            except InterfaceError as exc:
                if "refuses SSL" not in str(exc):
                    raise
                plain = True
        return dialect.connect(*cargs, ssl_context=False, **cparams)

    event.listen(engine, "do_connect", connect)
