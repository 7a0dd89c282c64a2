"""The DDL each store's schema makes, as text: what tests/stores/test_schema.py compares with
tests/data/stores/schema-ddl.json (recorded before the schemas shared one description)."""
from __future__ import annotations

from typing import Dict


def sqlite_ddl() -> Dict[str, str]:
    from a2a_flask.stores import sqlite

    return {"SCHEMA": sqlite.SCHEMA, "TASKS_TABLE": sqlite.TASKS_TABLE,
            "TASKS_INDEX": sqlite.TASKS_INDEX, "SIZE_COLUMNS": "\n".join(sqlite.SIZE_COLUMNS)}


def sql_ddl() -> Dict[str, str]:
    """The SQL store's CREATE TABLE and CREATE INDEX statements on each database."""
    from sqlalchemy.dialects import mysql, postgresql, sqlite as sa_sqlite
    from sqlalchemy.schema import CreateIndex, CreateTable

    from a2a_flask.stores.sql_schema import make_metadata

    out = {}
    for name, dialect in (("postgresql", postgresql.dialect()), ("mysql", mysql.dialect()),
                          ("sqlite", sa_sqlite.dialect())):
        for schema in (None, "tenant_schema"):
            meta = make_metadata(schema)
            for table in meta.sorted_tables:
                key = f"{name}:{schema}:{table.name}"
                out[key] = str(CreateTable(table).compile(dialect=dialect))
                for index in sorted(table.indexes, key=lambda i: i.name or ""):
                    out[f"{key}:{index.name}"] = str(CreateIndex(index).compile(dialect=dialect))
    return out
