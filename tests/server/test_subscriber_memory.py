"""Idle subscribers of a big task cost a worker about what one costs.

A task holding a 2 MB message of empty JSON objects (decoded, about ten times
that), 16 ``SubscribeToTask`` streams opened one after another and left idle, in
a real ``gunicorn -k gevent`` worker on each networked store and SQLite: the
worker's RSS (``/proc/<pid>/status``) may grow by less than ``LIMIT`` times the
message's size over all of them together.  Each stream used to keep its own
decoded snapshot (about 21 MiB each here, 330 MiB for 16), and the shared feed
the last one loaded for as long as it lived.  What remains is the allocator's:
memory freed between two loads is not all reused by the next one (measured:
5-12 MiB whether 8 or 48 streams).  The measurement is ``tests/support/subscriber_rss.py``'s,
which ``bench/memory.py --subscribers`` prints.
"""
from __future__ import annotations

import pytest

from tests.conftest import redis_up, sql_admin
from tests.support import subscriber_rss

SUBSCRIBERS = 16
MESSAGE_BYTES = 2_000_000
#: How many times the message's size all the subscribers may grow the worker by.
LIMIT = 8


def _service_up(store: str) -> None:
    if store == "redis":
        redis_up()
    elif store == "postgresql":
        sql_admin("postgresql")  # requires the server


@pytest.mark.parametrize("store", ["sqlite", "redis", "postgresql"])
def test_idle_subscribers_of_a_big_task_cost_about_what_one_costs(store: str) -> None:
    _service_up(store)
    (_, url, cleanup), = subscriber_rss.stores([store])
    try:
        found = subscriber_rss.measure(url, subscribers=SUBSCRIBERS, message_bytes=MESSAGE_BYTES)
    finally:
        cleanup()
    assert found["snapshot_bytes"] > MESSAGE_BYTES  # each stream got the whole task
    grown = found["rss_last_kib"] - found["rss_before_kib"]
    assert grown * 1024 < LIMIT * MESSAGE_BYTES, (
        f"{SUBSCRIBERS} idle subscribers grew the worker by {grown} KiB on {store}: {found}")
