"""An idempotent send's acceptance on PostgreSQL and MariaDB (``create_claimed``): what it
sends the server (the contract suite checks that it is atomic on every store)."""
from __future__ import annotations

import uuid

import pytest

from a2a_flask.stores import open_store
from a2a_flask.stores.base import OnceClaim, TaskRecord
from a2a_flask.testing.store_contract import make_task, stamp

from tests.conftest import SQL_STORES, drop_sql_database, sql_test_url

pytest.importorskip("sqlalchemy")


@pytest.fixture(params=SQL_STORES)
def store(request):
    name = f"a2atest_{uuid.uuid4().hex[:12]}"
    request.addfinalizer(lambda: drop_sql_database(request.param, name))
    made = open_store(sql_test_url(request.param, name))
    yield made
    made.close()


def test_a_new_key_its_task_and_lease_are_one_statement_or_transaction(store, monkeypatch):
    from a2a_flask.stores import sql_raw

    store.load("warm-up")  # (the tables are made on first use)
    sent = []
    original = sql_raw.Session.text
    monkeypatch.setattr(sql_raw.Session, "text", lambda self, text, *args: sent.append(
        text) or original(self, text, *args))
    task = make_task("t1")
    record = TaskRecord(task, 1, "", "", "1.0", stamp(0))
    claim = OnceClaim("idem:k1", "fp 0 t1", 60.0)
    assert store.create_claimed(record, task, claim, "worker-a", 60.0) == "fp 0 t1"
    if store.postgres:
        assert len(sent) == 1
    else:  # BEGIN, the binding, the task, the lease, COMMIT (the event: executemany)
        assert [text.split()[0] for text in sent] == ["BEGIN", "INSERT", "INSERT", "INSERT",
                                                      "COMMIT"]
    sent.clear()
    other = make_task("t2")
    retry = store.create_claimed(TaskRecord(other, 1, "", "", "1.0", stamp(0)), other,
                                 OnceClaim("idem:k1", "fp 0 t2", 60.0), "worker-b", 60.0)
    assert retry == "fp 0 t1" and store.head("t2") is None
    assert store.acquire_lease("t1", "worker-b", 60.0) is False
