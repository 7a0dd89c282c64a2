"""PostgreSQL URLs naming several hosts (a2a_flask/stores/sql_hosts.py): every spelling
libpq and SQLAlchemy read, what each driver is handed, the URLs refused at start, and
the pg8000 connection loop (libpq's), with fake connections: no server here (the
failover itself: tests/server/test_pg_failover.py)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import pytest

sa = pytest.importorskip("sqlalchemy")

from a2a_flask.stores.base import StoreError  # noqa: E402
from a2a_flask.stores.sql_hosts import (Hosts, connect_first, hosts_of, read_only,  # noqa: E402
                                        split_url)

TWO = Hosts((("db1", 5432), ("db2", 5433)), "read-write")


@pytest.mark.parametrize("url", [
    "postgresql://app@db1:5432,db2:5433/tasks",                           # libpq's netloc list
    "postgresql://app@/tasks?host=db1,db2&port=5432,5433",                # libpq's keywords
    "postgresql://app@/tasks?host=db1:5432&host=db2:5433",                # SQLAlchemy's repeats
    "postgresql://app@/tasks?host=db1&host=db2&port=5432,5433",
    "postgresql://app@/tasks?host=db1,db2&port=5432&port=5433",
    "postgresql://app@db1:5432,db2:5433/tasks?target_session_attrs=read-write",
])
def test_every_spelling_reads_the_same_hosts(url):
    rewritten, hosts = split_url(url)
    assert hosts == TWO
    assert rewritten == ("postgresql://app@/tasks?host=db1,db2&port=5432,5433"
                         "&target_session_attrs=read-write")


def test_one_port_for_every_host_and_default_ports():
    assert split_url("postgresql://u@/d?host=a,b&port=6000")[1] == Hosts(
        (("a", 6000), ("b", 6000)), "read-write")
    rewritten, hosts = split_url("postgresql://u@a,b:6001/d")
    assert hosts == Hosts((("a", None), ("b", 6001)), "read-write")
    assert "port=,6001" in rewritten  # an empty port: libpq's default


def test_ipv6_hosts_and_socket_directories():
    _, hosts = split_url("postgresql://u@[::1]:5432,[fe80::2]/d")
    assert hosts == Hosts((("::1", 5432), ("fe80::2", None)), "read-write")
    _, hosts = split_url("postgresql://u@/d?host=::1,127.0.0.1&port=1,2")
    assert hosts is not None and hosts.hosts == (("::1", 1), ("127.0.0.1", 2))
    rewritten, hosts = split_url("postgresql://u@/d?host=%2Fvar%2Frun%2Fpostgresql")
    assert hosts == Hosts((("/var/run/postgresql", None),), "any")
    assert "host=/var/run/postgresql" in rewritten


def test_one_host_stays_as_it_was():
    for url in ("postgresql://app:secret@db:5432/tasks?schema=a2a&sslmode=require",
                "postgresql+pg8000://app@db/tasks", "postgresql://app@/tasks"):
        assert split_url(url) == (url, None)
    # A single host given in the query goes back to the netloc, where every driver reads it.
    rewritten, hosts = split_url("postgresql://app@/tasks?host=db:6000&schema=x")
    assert rewritten == "postgresql://app@db:6000/tasks?schema=x"
    assert hosts == Hosts((("db", 6000),), "any")


def test_the_session_kept():
    assert split_url("postgresql://u@a,b/d?target_session_attrs=primary")[1].target_session_attrs \
        == "primary"
    # "any" explicitly: libpq's own default, kept as asked.
    assert split_url("postgresql://u@a,b/d?target_session_attrs=any")[1].target_session_attrs \
        == "any"
    one = split_url("postgresql://u@a/d?target_session_attrs=read-write")[1]
    assert one == Hosts((("a", None),), "read-write")
    lb = split_url("postgresql://u@a,b/d?load_balance_hosts=random")
    assert lb[1].load_balance == "random" and "load_balance_hosts=random" in lb[0]


@pytest.mark.parametrize("url, says", [
    ("postgresql://u@db:x/d", "bad port 'x'"),
    ("postgresql://u@db:0/d", "bad port '0'"),
    ("postgresql://u@db:65536/d", "bad port '65536'"),
    ("postgresql://u@a:1,b:port/d", "bad port 'port'"),
    ("postgresql://u@/d?host=a,b&port=1,2,3", "2 hosts but 3 ports"),
    ("postgresql://u@/d?host=a:1,b:2&port=3", "ports both"),
    ("postgresql://u@a,b/d?host=c", "hosts both"),
    ("postgresql://u@a,,b/d", "an empty host"),
    ("postgresql://u@a,b/d?target_session_attrs=standby", "needs read-write"),
    ("postgresql://u@a,b/d?target_session_attrs=read-only", "needs read-write"),
    ("postgresql://u@a,b/d?target_session_attrs=prefer-standby", "needs read-write"),
    ("postgresql://u@a,b/d?target_session_attrs=writable", "must be one of"),
    ("postgresql://u@a,b/d?target_session_attrs=any&target_session_attrs=primary",
     "given 2 times"),
    ("postgresql://u@a,b/d?load_balance_hosts=yes", "load_balance_hosts must be"),
    ("postgresql+pg8000://u@a:1,b:x/d", "bad port 'x'"),
    ("postgresql+psycopg://u@a:99999/d", "bad port '99999'"),
])
def test_bad_urls_are_a_store_error_at_start(url, says):
    from a2a_flask.stores import open_store

    with pytest.raises(StoreError) as caught:
        open_store(url)
    assert says in str(caught.value)
    assert "cannot use the SQL store URL" in str(caught.value)


def test_a_bad_mysql_port_or_host_list_is_a_store_error_too():
    from a2a_flask.stores import open_store

    with pytest.raises(StoreError, match="cannot use the SQL store URL"):
        open_store("mysql://root@db:port/a2a")
    with pytest.raises(StoreError, match="names one host"):
        open_store("mariadb://root@db1:3306,db2:3306/a2a")


def test_the_password_is_masked_in_the_error():
    from a2a_flask.stores import open_store

    with pytest.raises(StoreError) as caught:
        open_store("postgresql://app:hunter2@a:1,b:x/d")
    assert "hunter2" not in str(caught.value)


# ---------------------------------------------------------------- what each driver is handed

def _connect_args(dialect: Any, url: str) -> Dict[str, Any]:
    from sqlalchemy.engine import make_url

    rewritten, _ = split_url(url)
    return dict(dialect.create_connect_args(make_url(rewritten))[1])


@pytest.mark.parametrize("module, name", [
    ("sqlalchemy.dialects.postgresql.psycopg", "PGDialect_psycopg"),
    ("sqlalchemy.dialects.postgresql.psycopg2", "PGDialect_psycopg2"),
])
def test_libpq_drivers_get_libpq_lists(module, name):
    """psycopg 3 and psycopg2 hand libpq its own keywords (the dialect is built without
    the driver: psycopg2 need not be installed)."""
    import importlib

    dialect = getattr(importlib.import_module(module), name)()
    args = _connect_args(dialect, "postgresql://u@[::1]:1,db2:2/d")
    assert {key: args[key] for key in ("host", "port", "target_session_attrs")} == {
        "host": "::1,db2", "port": "1,2", "target_session_attrs": "read-write"}


def test_the_store_builds_its_psycopg_engines_on_every_host():
    pytest.importorskip("psycopg")
    from a2a_flask.stores.sql import open_sql_store

    store = open_sql_store("postgresql://u@h:1,h:2/d?schema=s")
    try:
        for engine in (store.engine, store.writer_engine):
            args = engine.dialect.create_connect_args(engine.url)[1]
            assert (args["host"], args["port"]) == ("h,h", "1,2")
            assert args["target_session_attrs"] == "read-write"
        # The LISTEN connection (pg8000, of its own) follows the same hosts, on the primary.
        assert store._listen_at == Hosts((("h", 1), ("h", 2)), "read-write")
    finally:
        store.close()


def test_the_listener_of_an_apps_engine_follows_its_hosts():
    """A2A(store=engine) with SQLAlchemy's spelling: the LISTEN connection reads it too
    (it went to the driver's default localhost:5432)."""
    pytest.importorskip("psycopg")
    from a2a_flask.stores.sql import SQLStore

    engine = sa.create_engine("postgresql+psycopg://u@/d?host=h:1&host=h:2")
    store = SQLStore(engine)
    try:
        assert store._listen_at == Hosts((("h", 1), ("h", 2)), "read-write")
    finally:
        engine.dispose()
    with pytest.raises(StoreError, match="needs read-write"):
        SQLStore(sa.create_engine("postgresql+psycopg://u@/d?host=a,b&port=1,2"
                                  "&target_session_attrs=standby"))


def test_hosts_of_a_sqlalchemy_url():
    from sqlalchemy.engine import make_url

    url = make_url("postgresql+pg8000://u@/d?host=a,b&port=1,2&target_session_attrs=primary")
    assert hosts_of(url.host, url.port, url.query) == Hosts((("a", 1), ("b", 2)), "primary")
    url = make_url("postgresql://u@a:7/d")
    assert hosts_of(url.host, url.port, url.query) == Hosts((("a", 7),), "any")


def test_listening_asks_for_the_primary():
    assert Hosts((("a", 1), ("b", 2)), "any").for_listening().target_session_attrs \
        == "read-write"
    one = Hosts((("a", 1),), "any")
    assert one.for_listening() is one


# ---------------------------------------------------------------- the pg8000 loop

class FakeConnection:
    def __init__(self, where: Tuple[Any, Any], recovering: bool, read_only_setting: str) -> None:
        self.where, self.row = where, (recovering, read_only_setting)
        self.closed = False
        self.rolled_back = False

    def cursor(self) -> "FakeCursor":
        return FakeCursor(self.row)

    def rollback(self) -> None:
        self.rolled_back = True

    def close(self) -> None:
        self.closed = True


class FakeCursor:
    def __init__(self, row: Tuple[bool, str]) -> None:
        self.row = row

    def execute(self, statement: str) -> None:
        assert "pg_is_in_recovery()" in statement

    def fetchone(self) -> Tuple[bool, str]:
        return self.row

    def close(self) -> None:
        pass


class Down(Exception):
    pass


class Unsuitable(Exception):
    pass


def servers(**state: Optional[str]) -> Tuple[Any, List[FakeConnection]]:
    """A fake connect(): per host name, "primary", "standby", "fenced" or None (down)."""
    opened: List[FakeConnection] = []

    def connect(params: Dict[str, Any]) -> FakeConnection:
        assert "target_session_attrs" not in params and "load_balance_hosts" not in params
        kind = state[params["host"]]
        if kind is None:
            raise Down(f"{params['host']} refused")
        connection = FakeConnection((params["host"], params["port"]), kind == "standby",
                                    "on" if kind in ("standby", "fenced") else "off")
        opened.append(connection)
        return connection

    return connect, opened


def test_the_first_writable_host_wins():
    connect, opened = servers(a=None, b="standby", c="primary")
    hosts = Hosts((("a", 1), ("b", 2), ("c", None)), "read-write")
    got = connect_first(hosts, {"host": "a,b,c", "port": "1,2,", "user": "u",
                                "target_session_attrs": "read-write"}, connect, Unsuitable)
    assert got.where == ("c", 5432) and not got.closed and got.rolled_back
    assert opened[0].closed  # the standby's connection was closed


def test_primary_takes_a_fenced_primary_read_write_does_not():
    connect, _ = servers(a="fenced", b="primary")
    both = (("a", 1), ("b", 2))
    assert connect_first(Hosts(both, "primary"), {}, connect, Unsuitable).where == ("a", 1)
    assert connect_first(Hosts(both, "read-write"), {}, connect, Unsuitable).where == ("b", 2)
    assert connect_first(Hosts(both, "any"), {}, connect, Unsuitable).where == ("a", 1)


def test_no_suitable_host_is_the_drivers_error_naming_each():
    connect, _ = servers(a=None, b="standby")
    with pytest.raises(Unsuitable) as caught:
        connect_first(Hosts((("a", 1), ("b", 2)), "read-write"), {}, connect, Unsuitable)
    assert "a:1: a refused" in str(caught.value)
    assert "b:2: not a read-write session" in str(caught.value)
    connect, _ = servers(a=None)
    with pytest.raises(Down):  # one host, down: the driver's own error as it came
        connect_first(Hosts((("a", 1),), "any"), {}, connect, Unsuitable)


def test_socket_directories_and_random_order():
    seen: List[Dict[str, Any]] = []

    def connect(params: Dict[str, Any]) -> Any:
        seen.append(params)
        return FakeConnection(("socket", None), False, "off")

    connect_first(Hosts((("/run/pg", 5433),), "any"), {"user": "u"}, connect, Unsuitable)
    assert seen == [{"user": "u", "unix_sock": "/run/pg/.s.PGSQL.5433"}]
    firsts = set()
    for _ in range(60):
        connect, opened = servers(a="primary", b="primary")
        firsts.add(connect_first(Hosts((("a", 1), ("b", 2)), "any", "random"), {}, connect,
                                 Unsuitable).where[0])
    assert firsts == {"a", "b"}


# ---------------------------------------------------------------- read-only sessions

def test_read_only_errors_of_every_driver():
    class Psycopg3(Exception):
        sqlstate = "25006"

    class Psycopg2(Exception):
        pgcode = "25006"

    assert read_only(Psycopg3("cannot execute INSERT in a read-only transaction"))
    assert read_only(Psycopg2("cannot execute INSERT in a read-only transaction"))
    assert read_only(Exception({"S": "ERROR", "C": "25006", "M": "cannot execute INSERT"}))
    assert not read_only(Exception({"S": "ERROR", "C": "23505"}))
    assert not read_only(Exception("cannot execute"))


# ---------------------------------------------------------------- pg8000's raw statements

def test_raw_statements_apply_the_drivers_bind_processors():
    """pg8000's dialect converts a Float parameter (a lease's TTL): the raw statements
    do as SQLAlchemy does (every task start on a pg8000 store was a TypeError)."""
    pytest.importorskip("pg8000")
    from a2a_flask.stores.sql_raw import Compiled

    engine = sa.create_engine("postgresql+pg8000://u@h/d")  # never connects
    statement = sa.select(sa.literal_column("1") + sa.bindparam("v_ttl", type_=sa.Float),
                          sa.bindparam("v_owner", type_=sa.String))
    compiled = Compiled(statement, engine)
    values = compiled.parameters({"v_ttl": 5, "v_owner": "me"})
    assert list(values) == [5.0, "me"] and isinstance(values[0], float)


def test_a_read_only_session_drops_its_connection_on_every_postgres_engine():
    """The store's engines and an app's own (once, however many stores it backs):
    SQLAlchemy then drops the connection, and the next one looks for the primary."""
    pytest.importorskip("psycopg")
    from types import SimpleNamespace

    from a2a_flask.stores.sql import SQLStore, _drop_read_only, open_sql_store

    class ReadOnly(Exception):
        sqlstate = "25006"

    engine = sa.create_engine("postgresql+psycopg://u@h/d")  # an app's: never connects
    SQLStore(engine)
    SQLStore(engine)
    assert sa.event.contains(engine, "handle_error", _drop_read_only)
    store = open_sql_store("postgresql://u@h1,h2/d")
    try:
        for own in (store.engine, store.writer_engine):
            assert sa.event.contains(own, "handle_error", _drop_read_only)
    finally:
        store.close()
    context = SimpleNamespace(original_exception=ReadOnly("cannot execute UPDATE in a "
                                                          "read-only transaction"),
                              is_disconnect=False)
    _drop_read_only(context)
    assert context.is_disconnect
    context = SimpleNamespace(original_exception=ValueError("other"), is_disconnect=False)
    _drop_read_only(context)
    assert not context.is_disconnect


def test_a_socket_error_pg8000_lets_out_is_an_outage():
    """pg8000 raises a reset connection as the socket's own ConnectionResetError (a
    primary stopped mid-read): an outage that drops the connection, not an error
    that stops a webhook's delivery after its push went out (it was sent again)."""
    pytest.importorskip("pg8000")
    from types import SimpleNamespace

    from a2a_flask.stores.sql import SQLStore, _drop_read_only, _Outage

    store = SQLStore(sa.create_engine("postgresql+pg8000://u@h/d"))  # never connects
    with pytest.raises(_Outage, match="ConnectionResetError"):
        with store._errors(store.engine):
            raise ConnectionResetError(104, "Connection reset by peer")
    context = SimpleNamespace(original_exception=ConnectionResetError(), is_disconnect=False)
    _drop_read_only(context)
    assert context.is_disconnect
