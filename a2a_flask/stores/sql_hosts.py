"""PostgreSQL URLs naming several hosts, and failover to whichever is the primary.

libpq reads a list of hosts in a URL two ways, and SQLAlchemy a third::

    postgresql://app@db1:5432,db2:5433/tasks?target_session_attrs=read-write
    postgresql://app@/tasks?host=db1,db2&port=5432,5433
    postgresql://app@/tasks?host=db1:5432&host=db2:5433

Each new connection tries the hosts in order (or in a random order with
``load_balance_hosts=random``) and keeps the first whose session has the
``target_session_attrs`` asked for.  After a failover the old primary refuses
connections or is a standby, so new connections land on the new primary.

:func:`split_url` reads every spelling into :class:`Hosts` and rewrites the URL
into the one SQLAlchemy hands to its libpq drivers (psycopg 3, psycopg2) as
libpq's own comma lists, ``?host=db1,db2&port=5432,5433``.  pg8000 knows
one host only: :func:`connect_first` is the loop libpq runs, for the pg8000
connections the store opens (its pool on a ``postgresql+pg8000://`` URL, and the
``LISTEN`` connection of every driver, :mod:`.sql_listen`).

The store writes: a URL naming several hosts connects only to a writable
session (``read-write`` unless it asks for ``primary``, or ``any`` explicitly);
``read-only``, ``standby`` and ``prefer-standby`` are refused.  A statement that
still meets a read-only session (a primary fenced or demoted under a pooled
connection) is an outage, and the connection is dropped (:func:`read_only`).
"""
from __future__ import annotations

import random
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit, urlunsplit

#: libpq's values of ``target_session_attrs`` that suit a store that writes.
SESSION_ATTRS = ("read-write", "primary", "any")
#: libpq's values the store refuses: a standby cannot take its writes.
READ_ONLY_ATTRS = ("read-only", "standby", "prefer-standby")
#: libpq's values of ``load_balance_hosts``.
LOAD_BALANCE = ("disable", "random")
#: The query parameters that say where to connect (all taken out by :func:`split_url`).
WHERE = ("host", "port", "target_session_attrs", "load_balance_hosts")
#: The SQLSTATE of "cannot execute ... in a read-only transaction".
READ_ONLY_SQLSTATE = "25006"

Host = Tuple[Optional[str], Optional[int]]


@dataclass(frozen=True)
class Hosts:
    """Where a PostgreSQL URL connects: ``hosts`` in order, each (host name, address
    or socket directory; port), None for libpq's default; the session kept."""

    hosts: Tuple[Host, ...]
    target_session_attrs: str = "any"
    load_balance: str = "disable"

    @property
    def several(self) -> bool:
        return len(self.hosts) > 1

    def for_listening(self) -> "Hosts":
        """The same hosts for the ``LISTEN`` connection: on the primary only (a standby
        can neither listen nor receive the primary's notifications)."""
        if self.several or self.target_session_attrs != "any":
            return replace(self, target_session_attrs="read-write")
        return self


def _port(text: str, where: str) -> Optional[int]:
    text = text.strip()
    if not text:
        return None  # libpq's default
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"bad port {text!r} in {where} (a number from 1 to 65535)")
    return int(text)


#: ``host:port``, ``[v6]:port`` or ``[v6]``: the port after the last colon outside brackets.
_HOST_PORT = re.compile(r"^(?:\[(?P<v6>[^\]]*)\]|(?P<name>[^:\[\]]*))(?::(?P<port>[^:]*))?$")


def _entry(text: str, where: str) -> Host:
    """One ``host[:port]`` of a list (a bare IPv6 address, with colons, is a host)."""
    text = unquote(text.strip())
    if text.startswith("/"):
        return text, None  # a socket directory
    found = _HOST_PORT.match(text)
    if found is None:
        if text.count(":") > 1:  # a bare IPv6 address (libpq's keyword form)
            return text, None
        raise ValueError(f"bad host {text!r} in {where}")
    host = found.group("v6") if found.group("v6") is not None else found.group("name")
    port = found.group("port")
    return (host or None), (_port(port, where) if port is not None else None)


def _split_list(values: Sequence[str]) -> List[str]:
    return [piece for value in values for piece in value.split(",")]


def parse_hosts(netloc_hosts: str, query_hosts: Sequence[str], query_ports: Sequence[str],
                attrs: Optional[str], load_balance: Optional[str]) -> Hosts:
    """The :class:`Hosts` of a URL: the host list of its netloc (``h1:p1,h2:p2``;
    empty for none), its ``host`` and ``port`` parameters (each a value as written,
    a comma list, or repeated) and its ``target_session_attrs`` and
    ``load_balance_hosts``.  A ValueError names what is wrong."""
    if netloc_hosts and query_hosts:
        raise ValueError("hosts both before the path and in ?host=: give one list")
    if netloc_hosts:
        entries = [_entry(text, "the URL's host list") for text in netloc_hosts.split(",")]
    elif query_hosts:
        entries = [_entry(text, "?host=") for text in _split_list(query_hosts)]
    else:
        entries = [(None, None)]
    if query_ports:
        if any(port is not None for _, port in entries):
            raise ValueError("ports both after the hosts (host:port) and in ?port=: give one")
        ports = [_port(text, "?port=") for text in _split_list(query_ports)]
        if len(ports) == 1:
            ports = ports * len(entries)
        if len(ports) != len(entries):
            raise ValueError(f"{len(entries)} hosts but {len(ports)} ports in ?port=")
        entries = [(host, port) for (host, _), port in zip(entries, ports)]
    if any(host is None for host, _ in entries) and len(entries) > 1:
        raise ValueError("an empty host in the URL's host list")
    if attrs is None:
        # A store that writes cannot use a standby: libpq's default (any) would keep
        # the first host that answers, the old primary come back as a standby.
        attrs = "read-write" if len(entries) > 1 else "any"
    if attrs in READ_ONLY_ATTRS:
        raise ValueError(f"target_session_attrs={attrs}: the task store writes, so it needs "
                         "read-write (or primary)")
    if attrs not in SESSION_ATTRS:
        raise ValueError(f"target_session_attrs must be one of {', '.join(SESSION_ATTRS)}, "
                         f"not {attrs!r}")
    load_balance = load_balance or "disable"
    if load_balance not in LOAD_BALANCE:
        raise ValueError(f"load_balance_hosts must be one of {', '.join(LOAD_BALANCE)}, "
                         f"not {load_balance!r}")
    return Hosts(tuple(entries), attrs, load_balance)


def _one(values: Sequence[str], name: str) -> Optional[str]:
    if len(values) > 1:
        raise ValueError(f"{name} is given {len(values)} times")
    return values[0] if values else None


def split_url(url: str) -> Tuple[str, Optional[Hosts]]:
    """A PostgreSQL store URL as SQLAlchemy reads it, and its :class:`Hosts`; the URL
    comes back unchanged (and None) when it names one host in the usual way.

    Several hosts (or a socket directory in ``?host=``) are written as libpq's
    lists, ``?host=h1,h2&port=p1,p2&target_session_attrs=...``, which SQLAlchemy
    passes to libpq as they are.  A ValueError names what is wrong (a bad port,
    mismatched lists, a session the store cannot use).
    """
    parts = urlsplit(url)
    pairs = parse_qsl(parts.query, keep_blank_values=True)
    userinfo, at, hostlist = parts.netloc.rpartition("@")
    named = {name for name, _ in pairs}
    if "," not in hostlist and not named.intersection(WHERE):
        _entry(hostlist, "the URL's host") if hostlist else None  # a bad port fails here
        return url, None
    values = {name: [value for key, value in pairs if key == name] for name in WHERE}
    hosts = parse_hosts(hostlist, values["host"], values["port"],
                        _one(values["target_session_attrs"], "target_session_attrs"),
                        _one(values["load_balance_hosts"], "load_balance_hosts"))
    rest = [(name, value) for name, value in pairs if name not in WHERE]
    (host, port), = hosts.hosts[:1]
    if not hosts.several and (host is None or not host.startswith("/")):
        # One host: back in the netloc, where every driver reads it.
        netloc = userinfo + at + _netloc_host(host, port)
    else:
        netloc = userinfo + at
        rest += [("host", ",".join(h or "" for h, _ in hosts.hosts)),
                 ("port", ",".join(str(p) if p else "" for _, p in hosts.hosts))]
    if hosts.target_session_attrs != "any" or "target_session_attrs" in named:
        rest.append(("target_session_attrs", hosts.target_session_attrs))
    if "load_balance_hosts" in named:
        rest.append(("load_balance_hosts", hosts.load_balance))
    query = urlencode(rest, safe="/,:")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment)), hosts


def _netloc_host(host: Optional[str], port: Optional[int]) -> str:
    text = "" if host is None else (f"[{host}]" if ":" in host else quote(host, safe=""))
    return text + (f":{port}" if port else "")


def hosts_of(host: Optional[str], port: Optional[int],
             query: Mapping[str, Union[str, Sequence[str]]]) -> Hosts:
    """The :class:`Hosts` of a SQLAlchemy URL's parts (``url.host``, ``url.port``,
    ``url.query``), in any of the spellings :func:`split_url` reads."""
    def listed(name: str) -> List[str]:
        value = query.get(name)
        return [] if value is None else [value] if isinstance(value, str) else list(value)

    query_hosts = listed("host")
    netloc = "" if host is None and port is None else _netloc_host(host, port)
    return parse_hosts(netloc, query_hosts, listed("port"),
                       _one(listed("target_session_attrs"), "target_session_attrs"),
                       _one(listed("load_balance_hosts"), "load_balance_hosts"))


def read_only(exc: BaseException) -> bool:
    """Whether a driver's error is PostgreSQL's "cannot execute ... in a read-only
    transaction" (SQLSTATE 25006): the session is on a standby, or on a primary
    fenced read-only for a switchover."""
    code = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)  # psycopg 3, 2
    if code is None and exc.args and isinstance(exc.args[0], dict):  # pg8000: the fields
        code = exc.args[0].get("C")
    return code == READ_ONLY_SQLSTATE


def _suits(connection: Any, attrs: str) -> bool:
    """Whether a new DBAPI connection's session is what ``attrs`` asks for (libpq's
    test: a hot standby is read-only, and so is a primary fenced with
    ``default_transaction_read_only``)."""
    cursor = connection.cursor()
    try:
        cursor.execute("SELECT pg_is_in_recovery(), current_setting('transaction_read_only')")
        recovering, read_only_setting = cursor.fetchone()
    finally:
        cursor.close()
    connection.rollback()  # pg8000 opened a transaction for the query
    if attrs == "primary":
        return not recovering
    return not recovering and read_only_setting != "on"


def connect_first(hosts: Hosts, params: Mapping[str, Any],
                  connect: Callable[[Dict[str, Any]], Any],
                  unsuitable_error: Callable[[str], BaseException],
                  socket_param: str = "unix_sock") -> Any:
    """Connect to the first of ``hosts`` whose session suits (libpq's loop, for pg8000):
    ``connect(params)`` opens one connection with ``host``/``port`` (or, for a socket
    directory, ``socket_param``) set in ``params``.  Every host failing raises the
    last host's error, or ``unsuitable_error(message)`` (the driver's own error type,
    which the pool reports as a connection failure) when each answered with the
    wrong session."""
    order = list(hosts.hosts)
    if hosts.load_balance == "random":
        random.shuffle(order)
    base = {key: value for key, value in params.items() if key not in WHERE}
    last: Optional[BaseException] = None
    reasons: List[str] = []
    for host, port in order:
        attempt = dict(base)
        if host is not None and host.startswith("/"):
            attempt[socket_param] = f"{host}/.s.PGSQL.{port or 5432}"
        else:
            attempt["host"] = host or "localhost"
            attempt["port"] = port or 5432
        where = f"{host or 'localhost'}:{port or 5432}"
        try:
            connection = connect(attempt)
        except Exception as exc:  # this host is down: the next one
            last = exc
            reasons.append(f"{where}: {exc}")
            continue
        try:
            if (hosts.target_session_attrs == "any"
                    or _suits(connection, hosts.target_session_attrs)):
                return connection
            reasons.append(f"{where}: not a {hosts.target_session_attrs} session")
        except Exception as exc:
            reasons.append(f"{where}: {exc}")
        try:
            connection.close()
        except Exception:
            pass
    if last is not None and len(order) == 1:
        raise last  # one host, down: the driver's own error
    raise unsuitable_error("; ".join(reasons))
