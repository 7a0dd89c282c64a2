"""A black-holed task store (its port accepts and never answers, or never accepts)
is a clear error within seconds, on every networked store, under real ``gunicorn -k
gevent``: -32603 "task store unavailable" (REST 503) within the bound, the card
answering meanwhile (docs/internals.rst, invariant 8; the other cases and the shared checks:
test_store_bounds.py).
"""
from __future__ import annotations

import pytest

from tests.support.dbservers import BlackHole
from tests.support.helpers import Server
from tests.support.store_outage import (
    KINDS, CardWatch, assert_log_is_clean, assert_unavailable_within_the_bound, env_for)

pytest.importorskip("sqlalchemy")
pytest.importorskip("redis")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("accept", [True, False], ids=["accepts", "never-accepts"])
def test_a_black_holed_store_is_a_clear_error_within_the_bound(kind, accept):
    with BlackHole(accept=accept) as hole:
        url = {"postgresql": hole.postgres_url, "mariadb": hole.mariadb_url,
               "redis": hole.redis_url}[kind]()
        with Server("tests.support.fault_app:app", workers=2, env=env_for(url)) as server, \
                CardWatch(server.url):
            assert_unavailable_within_the_bound(server)
            assert_unavailable_within_the_bound(server)
            assert_log_is_clean(server)

# Each starts gunicorn and a database server of its own.
pytestmark = [pytest.mark.slow, pytest.mark.server]
