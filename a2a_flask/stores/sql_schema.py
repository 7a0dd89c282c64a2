"""The tables of the SQL store (SQLAlchemy Core), for ``create_all`` or the app's migrations.

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

from typing import Any, Optional

import sqlalchemy as sa
from sqlalchemy.dialects import mysql

#: The longest id the server accepts (see ``engine.service.MAX_ID_LENGTH``).
_ID = 256


def _key(length: int) -> Any:
    """A short text column compared byte for byte."""
    return (sa.String(length, collation="C")
            .with_variant(mysql.VARCHAR(length, charset="utf8mb4", collation="utf8mb4_bin"),
                          "mysql", "mariadb"))


def _body() -> Any:
    """JSON text of any size (MySQL's TEXT stops at 64 KiB)."""
    return sa.Text().with_variant(mysql.LONGTEXT(charset="utf8mb4"), "mysql", "mariadb")


def make_metadata(schema: Optional[str] = None) -> sa.MetaData:
    """The store's tables, in ``schema`` (PostgreSQL schema / MySQL database) if given."""
    meta = sa.MetaData(schema=schema)
    sa.Table(
        "a2a_tasks", meta,
        sa.Column("id", _key(_ID), primary_key=True),
        sa.Column("tenant", _key(255), nullable=False),
        sa.Column("owner", _key(255), nullable=False),
        sa.Column("dialect", sa.String(16), nullable=False),
        sa.Column("context_id", _key(_ID), nullable=False),
        sa.Column("state", sa.String(32), nullable=False),
        sa.Column("created_at", _key(32), nullable=False),
        sa.Column("updated_at", _key(32), nullable=False),
        # The log's last sequence number: the compare-and-set of every append.
        sa.Column("seq", sa.Integer, nullable=False),
        # The snapshot is the task as of snap_seq; later events are folded in on load.
        sa.Column("snap_seq", sa.Integer, nullable=False),
        # How many history entries the latest snapshot keeps (the runtime trims the front).
        sa.Column("history_len", sa.Integer, nullable=False),
        sa.Column("snapshot", _body(), nullable=False),
        sa.Index("a2a_tasks_by_update", "tenant", "owner", "updated_at", "id",
                 mysql_length={"tenant": 191, "owner": 191}),
    )
    sa.Table(
        "a2a_events", meta,
        sa.Column("task_id", _key(_ID), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event", _body(), nullable=False),
    )
    sa.Table(
        "a2a_leases", meta,
        sa.Column("task_id", _key(_ID), primary_key=True),
        sa.Column("owner", _key(255), nullable=False),
        sa.Column("expires", sa.Float(precision=53), nullable=False),
    )
    sa.Table(
        "a2a_push_targets", meta,
        sa.Column("task_id", _key(_ID), primary_key=True),
        sa.Column("id", _key(_ID), primary_key=True),
        sa.Column("position", sa.Integer, nullable=False),
        sa.Column("target", _body(), nullable=False),
        sa.Column("delivered_seq", sa.Integer, nullable=False),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("gave_up", sa.Boolean, nullable=False),
    )
    sa.Table(
        "a2a_claims", meta,
        sa.Column("key", _key(_ID + 64), primary_key=True),
        sa.Column("owner", _key(255), nullable=False),
        sa.Column("expires", sa.Float(precision=53), nullable=False),
    )
    return meta


#: The tables in the connection's default schema: give this to Alembic.
metadata = make_metadata()


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
