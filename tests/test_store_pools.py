"""Readers never fail writers (issue 41, item 2), on Redis, PostgreSQL and MariaDB: with
every reader connection of the store taken, a running task's own writes and lease
renewals still go through (they have a pool of their own), and a reader waits for a
connection (up to ``A2A_STORE_TIMEOUT``) instead of failing at once; past the wait it
gets "task store unavailable", never a driver error.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator, List

import pytest

from a2a_flask import StoreUnavailable
from a2a_flask.protocol.models import TaskState as S
from a2a_flask.stores import StoreLimits, open_store

from .test_stores import create, status_event

STORES = ["redis", "postgresql", "mariadb"]
#: Small pools, so that a test can take every reader connection.
LIMITS = StoreLimits(timeout=5.0, pool_size=2, writer_pool_size=1)


@contextlib.contextmanager
def readers_taken(store: Any) -> Iterator[List[Any]]:
    """Hold every connection of the store's readers' pool (none left to lend)."""
    held: List[Any] = []
    if hasattr(store, "engine"):  # SQL: the readers' engine, overflow included
        pool = store.engine.pool
        for _ in range(pool.size() + pool._max_overflow):
            held.append(store.engine.connect())
        release = [conn.close for conn in held]
    else:  # Redis: the blocking pool's connections
        pool = store._redis.connection_pool
        for _ in range(pool.max_connections):
            held.append(pool.get_connection())
        release = [lambda c=conn: pool.release(c) for conn in held]
    try:
        yield release
    finally:
        for give_back in release:
            with contextlib.suppress(Exception):
                give_back()


def sized_url(store_url: str) -> str:
    """The SQL store's URL without overflow (the readers' pool is exactly pool_size)."""
    if store_url.startswith("redis"):
        return store_url
    return store_url + ("&" if "?" in store_url else "?") + "max_overflow=0"


@pytest.mark.parametrize("store_url", STORES, indirect=True)
def test_a_running_tasks_writes_and_leases_go_through_when_readers_take_every_connection(
        store_url):
    store = open_store(sized_url(store_url), limits=LIMITS)
    try:
        create(store, "t1", S.WORKING)
        record = store.load("t1")
        with readers_taken(store):
            events = [status_event("t1", S.WORKING, second=2)]
            assert store.append("t1", record.seq, events, record.after(events)) == 2
            store.acquire_lease("t1", "runner-a", 30)
            store.renew_leases("runner-a", ["t1"], 30)
            store.release_lease("t1", "runner-a")
        assert store.load("t1").seq == 2
    finally:
        store.close()


@pytest.mark.parametrize("store_url", STORES, indirect=True)
def test_a_reader_waits_for_a_busy_pool_instead_of_failing(store_url):
    store = open_store(sized_url(store_url), limits=LIMITS)
    try:
        create(store, "t1", S.WORKING)
        with readers_taken(store) as release:
            # One reader connection comes back a moment later: the waiting read gets it.
            threading.Timer(0.3, release.pop()).start()
            assert store.load("t1").seq == 1
    finally:
        store.close()


@pytest.mark.parametrize("store_url", STORES, indirect=True)
def test_past_the_wait_a_reader_gets_task_store_unavailable(store_url):
    store = open_store(sized_url(store_url), limits=StoreLimits(timeout=0.5, pool_size=2,
                                                                writer_pool_size=1))
    try:
        create(store, "t1", S.WORKING)
        with readers_taken(store):
            with pytest.raises(StoreUnavailable):
                store.load("t1")
        assert store.load("t1").seq == 1  # and it serves again once connections are back
    finally:
        store.close()
