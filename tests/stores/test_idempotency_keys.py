"""What idempotency keys cost each store: one claim each, gone once it ran out (the
contract, ``claim_once``, is checked on every store by tests/stores/test_stores*.py)."""
from __future__ import annotations

import time

import pytest

from a2a_flask.protocol.models import new_id

from tests.conftest import SQL_STORES
from tests.support.store_cases import _drop_store_names, open_store  # noqa: F401 (its cleanup)


def claims_held(store, kind: str) -> int:
    """How many claims the store holds (expired ones included, until they are removed)."""
    if kind == "memory":
        return len(store._claims)
    if kind == "sqlite":
        return int(store._query("SELECT COUNT(*) FROM claims")[0][0])
    if kind == "redis":  # each has an expiry of its own: Redis removes it
        return sum(1 for _ in store._redis.scan_iter(store._claim_key("idem:*")))
    import sqlalchemy as sa

    with store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(store.claims)).scalar())


@pytest.mark.parametrize("kind", ["memory", "sqlite", "redis", *SQL_STORES])
def test_purge_removes_the_keys_that_ran_out(kind, tmp_path):
    store = open_store(kind, str(tmp_path / "tasks"))
    try:
        for index in range(5):
            store.claim_once(f"idem:{new_id()}", f"fp {index}", 0.05 if index else 60.0)
        assert claims_held(store, kind) == 5 or kind == "redis"
        time.sleep(0.3)
        store.purge("2000-01-01T00:00:00Z")
        assert claims_held(store, kind) == 1
    finally:
        store.close()
