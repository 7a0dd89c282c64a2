"""Workers boot without their task store and serve once it is up, with no restart, on
every networked store, under real ``gunicorn -k gevent`` (docs/internals.rst, invariant 8; the other
cases and the shared checks: test_store_bounds.py).
"""
from __future__ import annotations

import pytest

from tests.support.dbseeds import seeded
from tests.support.helpers import Server
from tests.support.store_outage import (
    KINDS, assert_log_is_clean, assert_unavailable_within_the_bound, completed, env_for, send,
    send_rest)

pytest.importorskip("sqlalchemy")
pytest.importorskip("redis")


@pytest.mark.parametrize("kind", KINDS)
def test_workers_boot_without_the_store_and_serve_once_it_is_up(kind):
    # The store's server is not running: gunicorn's workers boot all the same.
    with seeded(kind, start=False) as database, \
            Server("tests.support.fault_app:app", workers=2, env=env_for(database.url)) as server:
        assert_unavailable_within_the_bound(server)
        database.start()
        # The first call after the store is up works (tables created on the way,
        # for SQL), and so do the next ones, on every worker: no restart.
        answer = send(server, "now it is up")
        assert completed(answer), answer
        for _ in range(4):
            assert completed(send(server, "and again"))
        rest = send_rest(server, "over REST")
        assert rest.status_code == 200, rest.text
        assert_log_is_clean(server)

# Each starts gunicorn and a database server of its own.
pytestmark = [pytest.mark.slow, pytest.mark.server]
