"""The tables of the SQL store (SQLAlchemy Core), for ``create_all`` or the app's migrations.

They are built from :mod:`.schema`, the description SQLite's DDL is made from too.

Every table is prefixed ``a2a_`` so it sits beside the app's own tables.  An
app that manages its schema with Alembic adds :data:`metadata` to its
``target_metadata`` (``target_metadata = [db.metadata, a2a_metadata]``) and
autogenerate writes the migration; anyone else lets the store create the
tables on first use, or calls :func:`create_all` once.

Text that identifies or orders things (ids, tenants, timestamps) is compared
byte for byte on every database (``COLLATE "C"`` on PostgreSQL, ``utf8mb4_bin``
on MySQL/MariaDB), so ``"a"`` and ``"A"`` are two tasks and pages come out in
the same order as on the other stores.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from . import schema as layout

#: Every table's name starts with this, to sit beside the app's own tables.
PREFIX = "a2a_"

def _key(length: int) -> Any:
    """A short text column compared byte for byte."""
    return (sa.String(length, collation="C")
            .with_variant(mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"),
                          "mysql", "mariadb"))


def _body() -> Any:
    """JSON text of any size (MySQL's TEXT stops at 64 KiB)."""
    return sa.Text().with_variant(mysql.LONGTEXT(charset="utf8mb4"), "mysql", "mariadb")


def _type(column: layout.Column) -> Any:
    """The SQLAlchemy type of a column of :mod:`.schema`."""
    if column.kind == "key":
        return _key(column.length)
    if column.kind == "text":
        return sa.String(column.length)
    if column.kind == "body":
        return _body()
    return {"int": sa.Integer, "real": sa.Float(precision=53), "bool": sa.Boolean}[column.kind]


def _table(meta: sa.MetaData, table: layout.Table, *extra: Any) -> sa.Table:
    """``table`` of :mod:`.schema` as SQLAlchemy's, named ``a2a_`` + its name."""
    columns = []
    for column in table.columns:
        if column.primary:  # (never null); an integer in a key is a number we choose, not a counter
            options: Dict[str, Any] = {"primary_key": True}
            if column.kind == "int":
                options["autoincrement"] = False
        else:
            options = {"nullable": column.nullable}
        columns.append(sa.Column(column.name, _type(column), **options))
    return sa.Table(PREFIX + table.name, meta, *columns, *extra)


def make_metadata(schema: Optional[str] = None) -> sa.MetaData:
    """The store's tables, in ``schema`` (PostgreSQL schema / MySQL database) if given."""
    meta = sa.MetaData(schema=schema)
    index = layout.TASKS_BY_UPDATE
    _table(meta, layout.SQL_TASKS,
           sa.Index(PREFIX + index.name, *index.columns,
                    mysql_length={"tenant": 191, "owner": 191}))
    for table in layout.SHARED_TABLES:
        _table(meta, table)
    return meta


#: The tables in the connection's default schema: give this to Alembic.
metadata = make_metadata()


#: The longest the tables' creation may wait for the schema lock and run (ms).
DDL_TIMEOUT_MS = 60_000


def create_all(engine: sa.engine.Engine, schema: Optional[str] = None) -> None:
    """Create the store's tables (and the PostgreSQL schema) where they are missing.

    Safe to run from many processes at once: a database-wide lock serialises
    the check-then-create, which SQLAlchemy's ``checkfirst`` alone does not.
    """
    meta = metadata if schema is None else make_metadata(schema)
    name = engine.dialect.name
    # A session-level lock: held across the DDL whether or not the engine's
    # sessions autocommit (each DDL statement may commit on its own).
    lock, unlock = {
        "postgresql": ("SELECT pg_advisory_lock(7220151)", "SELECT pg_advisory_unlock(7220151)"),
        "mysql": ("SELECT GET_LOCK('a2a_flask_schema', 30)",
                  "SELECT RELEASE_LOCK('a2a_flask_schema')"),
    }.get("mysql" if name == "mariadb" else name, ("SELECT 1", "SELECT 1"))
    with engine.connect() as conn:
        if name == "postgresql":
            # Waiting for another process's DDL is not an outage: the store's short
            # statement timeout gives way to a bound of its own, for this transaction.
            conn.execute(sa.text(f"SET LOCAL statement_timeout = {DDL_TIMEOUT_MS}"))
        conn.execute(sa.text(lock))
        try:
            if schema is not None and name == "postgresql":
                conn.execute(sa.text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
            meta.create_all(conn, checkfirst=True)
            conn.commit()
        finally:
            conn.rollback()
            conn.execute(sa.text(unlock))
            conn.commit()
