"""The Redis store behind Redis Sentinel, on a setup of the test's own (a master, two
replicas, three sentinels; one for the module): the store contract through the
sentinels, the URL's options, ``wait_replicas`` (an acknowledged write is on the
replica; with no replica to wait for, the write answers "unavailable"), and a real
2-worker gunicorn riding out a killed master under streamed tasks, webhooks and
blocking sends."""
from __future__ import annotations

import uuid
from typing import Any, Iterator, List

import pytest

from a2a_flask.protocol.errors import StoreUnavailable
from a2a_flask.stores import StoreError, open_store
from a2a_flask.stores.redis_sentinel import RedisSentinelStore, sentinel_options
from a2a_flask.testing.store_contract import StoreContract, create, must_load

from tests.support.redis_topologies import RedisSentinelTopology, _client

redis = pytest.importorskip("redis")

pytestmark = [pytest.mark.slow, pytest.mark.declare(server=["sentinel"])]


@pytest.fixture(scope="module")
def sentinel() -> Iterator[RedisSentinelTopology]:
    with RedisSentinelTopology() as topology:
        yield topology


def fresh(sentinel: RedisSentinelTopology, query: str = "") -> RedisSentinelStore:
    store = open_store(f"{sentinel.url}?prefix=t{uuid.uuid4().hex[:10]}{query}")
    assert isinstance(store, RedisSentinelStore)
    return store


class TestSentinelContract(StoreContract):
    """The whole contract on the master the sentinels name."""

    @pytest.fixture
    def store_factory(self, sentinel: RedisSentinelTopology) -> Any:
        return lambda: fresh(sentinel)


def test_sentinel_urls_and_errors():
    sentinels, service, master, own = sentinel_options(
        "rediss+sentinel://app:s%40cret@s1:26379,s2:26380/mymaster/2",
        {"sentinel_password": ["spw"], "ssl_cert_reqs": ["none"]})
    assert sentinels == [("s1", 26379), ("s2", 26380)] and service == "mymaster"
    assert (master["username"], master["password"], master["db"]) == ("app", "s@cret", 2)
    assert master["ssl"] is True and master["ssl_cert_reqs"] == "none"
    assert own == {"ssl": True, "ssl_cert_reqs": "none", "password": "spw"}
    for url, said in [("redis+sentinel://s1/mymaster/0", "host:port"),
                      ("redis+sentinel://s1:26379", "service_name"),
                      ("redis+sentinel://s1:26379/mymaster/x", "service_name"),
                      ("redis+sentinel://s1:26379/m/0?wait_replicas=-1", "wait_replicas")]:
        with pytest.raises(StoreError, match=said):
            open_store(url)
    # Opening sends nothing: the app starts while the sentinels are down.
    open_store("redis+sentinel://127.0.0.1:1/mymaster/0").close()


def test_wait_replicas_acknowledges_a_write_once_the_replica_has_it(sentinel):
    store = fresh(sentinel, "&wait_replicas=1&wait_timeout_ms=2000")
    try:
        create(store, "t1", owner="alice")
        replica = _client(sentinel.replica.port)
        assert replica.hget(store._key("task", "t1"), "owner") == b"alice"
        # No replica to wait for: the write is not acknowledged ("unavailable").
        unreachable = fresh(sentinel, "&wait_replicas=3&wait_timeout_ms=100")
        try:
            with pytest.raises(StoreUnavailable):
                create(unreachable, "t2")
        finally:
            unreachable.close()
        assert must_load(store, "t1").owner == "alice"
    finally:
        store.close()


def test_a_killed_master_under_streams_webhooks_and_blocking_sends(sentinel):
    """SIGKILL of the master while six tasks stream over 2 workers; the sentinels
    promote a replica in about 2 s, which A2A_STORE_GRACE rides out.  With
    ``wait_replicas=1``: replication is asynchronous, and without it a write the
    master acknowledged in its last milliseconds may be missing on the promoted
    replica (the run's next append then conflicts)."""
    from tests.support.redis_load import under_load

    def fault(store: Any, task_ids: List[str]) -> None:
        old, new = sentinel.kill_master()
        assert old != new

    log = under_load(f"{sentinel.url}?prefix=faults{uuid.uuid4().hex[:8]}"
                     "&wait_replicas=1&wait_timeout_ms=500", fault)
    assert "task store unavailable" in log  # the kill was felt, and ridden out
