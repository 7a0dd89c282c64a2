"""TLS for the SQL drivers' new connections: libpq's ``sslmode`` on pg8000, and no
CA files loaded on the hub.

Given no TLS settings, PyMySQL and pg8000 both *prefer* TLS without verifying
anything: they try it, fall back to plain text when the server has none, and
build a fresh ``ssl.create_default_context()`` for every connection they open.
That call reads the system's CA bundle, 30 to 40 ms of CPU (over 0.1 s while
workers start on two cores) holding a gevent worker's hub each time a pool
grows or the ``LISTEN`` connection opens, for certificates that are never
checked.  The engines the store builds get one shared context instead, made
without CA files because it verifies nothing, and the same preference.

pg8000 knows nothing of libpq's ``sslmode`` and ``sslrootcert``: the store
takes them out of a ``postgresql+pg8000://`` URL and makes each new
connection follow them as libpq (psycopg) does; see
:func:`share_one_tls_context_pg8000`.  libpq's other TLS settings (client
certificates, CRLs...) pg8000 cannot honour: a URL naming one is refused.
"""
from __future__ import annotations

import importlib
import logging
import os
import ssl
from typing import Any, Dict, Optional, Tuple

from sqlalchemy import event
from sqlalchemy.engine import Engine

from .sql_hosts import Hosts, connect_first

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
#: The CA file libpq reads when the URL names none (``$HOME/.postgresql/root.crt``).
DEFAULT_ROOTCERT = os.path.join("~", ".postgresql", "root.crt")


def pg8000_tls_options(query: Dict[str, str], *,
                       strict: bool = True) -> Tuple[str, Optional[str]]:
    """``sslmode`` and the CA file to verify against, taken out of a pg8000 URL's
    query (pg8000 itself knows neither), as libpq reads them.

    The CA file is ``sslrootcert`` (``system``: the system's CAs), else
    ``~/.postgresql/root.crt`` when it exists; None: verify nothing.  Refused
    with a ValueError, as libpq refuses them: a mode it does not know, a verify
    mode with no CA file, ``sslrootcert=system`` below ``verify-full``.  Refused
    where libpq would go on: an ``sslrootcert`` file that is not there (libpq
    then verifies nothing under ``require``), and with ``strict``, libpq's other
    TLS settings (``sslcert``, ``sslkey``...), which pg8000 cannot honour.
    """
    mode = query.pop("sslmode", "prefer")
    if mode not in SSL_MODES:
        raise ValueError(f"sslmode must be one of {', '.join(SSL_MODES)}, not {mode!r}")
    rootcert = query.pop("sslrootcert", None)
    others = sorted(key for key in query if key.startswith("ssl"))
    if strict and others:
        raise ValueError(f"pg8000 cannot honour {', '.join(others)} (libpq's): use the psycopg "
                         "driver (postgresql+psycopg://) for them")
    if rootcert == "system":
        if mode != "verify-full":
            raise ValueError(f"sslmode={mode} may not be used with sslrootcert=system "
                             "(use verify-full), as libpq says")
    elif rootcert is not None:
        if not os.path.isfile(rootcert):
            raise ValueError(f"the sslrootcert file {rootcert} does not exist")
    elif os.path.isfile(os.path.expanduser(DEFAULT_ROOTCERT)):
        rootcert = os.path.expanduser(DEFAULT_ROOTCERT)
    elif mode in ("verify-ca", "verify-full"):
        raise ValueError(f"sslmode={mode} needs the CA to verify against: sslrootcert=/path/"
                         "to/ca.pem, or sslrootcert=system with verify-full (libpq would read "
                         f"{DEFAULT_ROOTCERT}, which does not exist)")
    return mode, rootcert


def _verifying_context(mode: str, rootcert: str) -> ssl.SSLContext:
    """A context that checks the server's certificate chain against ``rootcert``
    (and, for verify-full, its name).  Built once per engine, when the store
    opens: it reads CA files."""
    context = ssl.create_default_context(cafile=None if rootcert == "system" else rootcert)
    context.check_hostname = mode == "verify-full"
    return context


def share_one_tls_context_pg8000(engine: Engine, sslmode: str = "prefer",
                                 rootcert: Optional[str] = None,
                                 hosts: Optional[Hosts] = None) -> None:
    """pg8000 connections of ``engine`` follow libpq's ``sslmode``, each new one
    deciding afresh (a server may gain or lose TLS while the pool lives).

    ``disable`` connects in plain text; ``allow`` too, and asks for TLS when
    the server refuses the plain connection; ``prefer`` (the default, as libpq's
    and pg8000's own) asks for TLS, and connects in plain text when the server
    has none or the handshake fails, saying so in the log (a warning, once per
    engine, unless the server is on this host); ``require`` encrypts and never
    falls back; ``verify-ca`` and ``verify-full`` check the certificate,
    ``verify-full`` its host name too.  Whenever a CA file is known
    (``rootcert``), every mode that encrypts verifies the chain against it, as
    libpq does: ``require`` with ``sslrootcert`` is ``verify-ca``.  Without
    one, TLS uses the shared unverified context.

    pg8000 takes a context it is given as "TLS required": a fall-back is a new
    connection made here, which costs a new connection to the server only for
    ``prefer`` on a server without TLS (the pool then keeps it).

    ``hosts``: the URL's hosts and session (:mod:`.sql_hosts`), tried in turn as
    libpq does; each host gets the TLS treatment above.
    """
    errors: Any = importlib.import_module("pg8000.exceptions")
    if sslmode == "disable":
        context: Any = False
    elif rootcert is not None:
        context = _verifying_context(sslmode, rootcert)
    else:
        context = unverified_context()
    warned = False

    def attempt(dialect: Any, cargs: Any, cparams: Any, tls: Any) -> Any:
        return dialect.connect(*cargs, ssl_context=tls, **cparams)

    def plain_after(exc: Exception, host: Any) -> None:
        nonlocal warned
        _say_plain_text(engine, exc, quiet=warned, host=host)
        warned = True

    def connect(dialect: Any, record: Any, cargs: Any, cparams: Any) -> Any:
        if hosts is None:
            connection = connect_one(dialect, cargs, cparams)
        else:
            connection = connect_first(hosts, cparams,
                                       lambda params: connect_one(dialect, cargs, params),
                                       errors.InterfaceError)
        _quiet_close(connection, errors.InterfaceError)
        return connection

    def connect_one(dialect: Any, cargs: Any, cparams: Any) -> Any:
        if sslmode == "disable":
            return attempt(dialect, cargs, cparams, False)
        if sslmode == "allow":
            try:
                return attempt(dialect, cargs, cparams, False)
            except errors.Error as exc:
                # pg8000 raises the server's error (a dict of its fields) as it came: the
                # server turned plain text down, so ask for TLS, as libpq does.
                if not (exc.args and isinstance(exc.args[0], dict)):
                    raise  # the network: TLS would not get through either
            return attempt(dialect, cargs, cparams, context)
        if sslmode != "prefer":
            return attempt(dialect, cargs, cparams, context)
        try:
            return attempt(dialect, cargs, cparams, context)
        except errors.InterfaceError as exc:
            if "refuses SSL" not in str(exc):
                raise  # the network: no plain text would get through either
            plain_after(exc, cparams.get("host"))
        except ssl.SSLError as exc:  # the handshake failed: libpq goes on in plain text
            plain_after(exc, cparams.get("host"))
        return attempt(dialect, cargs, cparams, False)

    event.listen(engine, "do_connect", connect)


def _quiet_close(connection: Any, network_error: Any) -> None:
    """Make a pg8000 connection's ``close`` quiet when its socket is gone already (a
    server stopped, a failover): pg8000 raises there, after closing its socket, and
    the pool would log that as an error with a traceback."""
    close = connection.close

    def quiet() -> None:
        try:
            close()
        except network_error:
            pass  # nobody left to say goodbye to: the socket is closed all the same

    connection.close = quiet


def _say_plain_text(engine: Engine, why: Optional[Exception] = None, *,
                    quiet: bool = False, host: Optional[str] = None) -> None:
    """Log a fall-back to plain text: a warning (unless ``quiet``: said already) for a
    server on another host, a debug line for one on this host."""
    host = host or engine.url.host or ""  # the one connected to, of several
    local = host in ("", "localhost") or host.startswith(("127.", "/")) or host == "::1"
    log.log(logging.DEBUG if local or quiet else logging.WARNING,
            "PostgreSQL at %s refused TLS%s: connecting in plain text (sslmode=prefer); "
            "add sslmode=require or verify-full to the store URL to refuse that",
            host or "local", f" ({why})" if why is not None else "")
