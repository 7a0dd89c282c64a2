"""One description of the relational stores' tables (a2a_flask/stores/schema.py): the
DDL SQLite runs and the tables the SQL store creates are the ones recorded before
both were derived from it (tests/data/stores/schema-ddl.json), and SQLite needs
only the standard library."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from a2a_flask.stores import schema

from tests.support.helpers import DATA
from tests.support.schema_ddl import sql_ddl, sqlite_ddl

pytestmark = pytest.mark.declare(server=["test_the_sqlite_store_needs_no_sqlalchemy"], slow=[
    "test_the_sql_store_creates_the_tables_it_created_before"])

RECORDED = json.loads((DATA / "stores" / "schema-ddl.json").read_text())


def test_sqlite_runs_the_ddl_it_ran_before() -> None:
    assert sqlite_ddl() == RECORDED["sqlite"]


def test_the_sql_store_creates_the_tables_it_created_before() -> None:
    pytest.importorskip("sqlalchemy")
    made = sql_ddl()
    assert sorted(made) == sorted(RECORDED["sql"])  # postgresql, mysql, sqlite; both schemas
    for key, ddl in RECORDED["sql"].items():
        assert made[key] == ddl, key


def test_both_stores_share_the_coordination_tables_and_task_columns() -> None:
    from a2a_flask.stores.sql_schema import make_metadata

    tables = make_metadata().tables
    for table in schema.SHARED_TABLES:
        assert [c.name for c in tables["a2a_" + table.name].columns] == [
            c.name for c in table.columns]
    sql_tasks = [c.name for c in tables["a2a_tasks"].columns]
    assert sql_tasks[:len(schema.TASK_COLUMNS)] == [c.name for c in schema.TASK_COLUMNS]


def test_the_sqlite_store_needs_no_sqlalchemy(tmp_path) -> None:
    code = ("import sys; sys.modules['sqlalchemy'] = None\n"  # importing it now fails
            "from a2a_flask.stores import open_store\n"
            f"store = open_store('sqlite:///{tmp_path}/tasks.db'); store.close()\n"
            "assert 'a2a_flask.stores.sql_schema' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
