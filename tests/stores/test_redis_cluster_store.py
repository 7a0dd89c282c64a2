"""The Redis store on a Redis Cluster of the test's own (3 masters, 3 replicas, one for
the module): the store contract, the key layout (a task's keys in one slot, a caller's
indexes in another), a stale index entry, the layout mark, ``flask a2a copy-store``
from a single Redis into the cluster, and a real 2-worker gunicorn riding out a manual
failover and a slot migration under streamed tasks, webhooks and blocking sends."""
from __future__ import annotations

import uuid
from typing import Any, Iterator, List

import pytest

from a2a_flask.protocol.models import TaskPushNotificationConfig, TaskState
from a2a_flask.stores import StoreError, open_store
from a2a_flask.stores.base import PushTarget, StoreLimits, TaskQuery
from a2a_flask.stores.redis import _is_outage
from a2a_flask.stores.redis_cluster import RedisClusterStore, cluster_options
from a2a_flask.testing.store_contract import (StoreContract, append, create, ids, must_load,
                                              status_event)

from tests.conftest import REDIS_URL, drop_redis_prefix, redis_up
from tests.support.redis_topologies import RedisClusterTopology

redis = pytest.importorskip("redis")

pytestmark = [pytest.mark.slow, pytest.mark.declare(server=["cluster"])]

S = TaskState


@pytest.fixture(scope="module")
def cluster() -> Iterator[RedisClusterTopology]:
    with RedisClusterTopology() as topology:
        yield topology


def fresh(cluster: RedisClusterTopology, **options: Any) -> RedisClusterStore:
    store = open_store(f"{cluster.url}?prefix=t{uuid.uuid4().hex[:10]}", **options)
    assert isinstance(store, RedisClusterStore)
    return store


class TestClusterContract(StoreContract):
    """The whole contract on the cluster."""

    @pytest.fixture
    def store_factory(self, cluster: RedisClusterTopology) -> Any:
        return lambda: fresh(cluster)


# ----------------------------------------------------------------- the layout


def slot(store: RedisClusterStore, key: str) -> int:
    return int(store._redis.keyslot(key))


def test_a_task_s_keys_share_a_slot_and_a_caller_s_indexes_another(cluster):
    store = fresh(cluster)
    try:
        for n, task_id in enumerate(["a", "b}c", "{d}", "e:f"]):
            create(store, task_id, tenant="acme", owner="al}ice", second=n)
            hook = TaskPushNotificationConfig(url="https://example.com/h", id="h", task_id=task_id)
            store.put_push_target(task_id, PushTarget(hook, "1.0"))
            store.acquire_lease(task_id, "me", 30)
            append(store, task_id, [status_event(task_id, S.WORKING, 10 + n)])
        keys = {key.decode() for key in store._redis.scan_iter(match=f"{store.prefix}:*")}
        for task_id in ["a", "b}c", "{d}", "e:f"]:
            mine = {key for key in keys if key.endswith("{t:" + task_id + "}")}
            assert len(mine) == 6, mine  # task, log, push, pushorder, lease, run
            assert len({slot(store, key) for key in mine}) == 1
        indexes = {key for key in keys if ":owned" in key}
        assert len(indexes) == 3  # the caller's, its context's, its (one) state's
        assert len({slot(store, key) for key in indexes}) == 1
        assert sorted(store.task_ids()) == ["a", "b}c", "e:f", "{d}"]
        page = store.list_tasks(TaskQuery(tenant="acme", owner="al}ice", state=S.WORKING))
        assert ids(page) == ["e:f", "{d}", "b}c", "a"] and page.total_size == 4
    finally:
        store.close()


def test_a_stale_index_entry_is_skipped_and_one_written_again_stays(cluster):
    """The index step comes after the task's write: ListTasks checks each entry against
    the task, drops one that is stale, and never one written again since it read it."""
    store = fresh(cluster)
    try:
        create(store, "t1", owner="alice", second=1)
        append(store, "t1", [status_event("t1", S.WORKING, 2)])
        submitted = store._state_index("", "alice", S.SUBMITTED.value)
        # The state the task left, as if the process died between write and index step.
        store._redis.zadd(submitted, {"t1": 1})
        page = store.list_tasks(TaskQuery(owner="alice", state=S.SUBMITTED))
        assert (ids(page), page.total_size) == ([], 0)
        assert store._redis.zscore(submitted, "t1") is None  # dropped
        # An entry scored later than the one read stays (written again meanwhile).
        store._redis.zadd(submitted, {"t1": 5})
        assert not store._drop_stale(submitted, ("state", "submitted"), "t1", "", "alice", 4.0)
        assert store._redis.zscore(submitted, "t1") == 5
    finally:
        store.close()


def test_an_index_step_an_outage_kept_back_is_written_by_the_next_list(cluster,
                                                                       monkeypatch):
    """The task's write is done when its index step meets an outage: the append is
    acknowledged, and the process's next ListTasks writes the step first."""
    store = fresh(cluster)
    try:
        create(store, "t1", owner="alice", second=1)
        real = store._c_index

        def down(*args: Any, **kwargs: Any) -> Any:
            raise redis.ConnectionError("the caller's slot's master is gone")

        monkeypatch.setattr(store, "_c_index", down)
        assert append(store, "t1", [status_event("t1", S.WORKING, 2)]) == 2
        assert list(store._owed) == ["t1"]
        monkeypatch.setattr(store, "_c_index", real)
        page = store.list_tasks(TaskQuery(owner="alice", state=S.WORKING))
        assert (ids(page), page.total_size) == (["t1"], 1) and not store._owed
    finally:
        store.close()


def test_the_cluster_refuses_keys_of_a_single_redis_layout(cluster):
    store = fresh(cluster)
    try:
        store._redis.set(store._layout, "3")
        with pytest.raises(StoreError, match="copy-store"):
            store.load("t1")
    finally:
        store.close()


def test_cluster_urls_and_errors():
    first, nodes = cluster_options("rediss+cluster://u:p%40ss@h1:7000,[::1]:7001/0",
                                   {"ssl_cert_reqs": ["none"]})
    assert first == "rediss://u:p%40ss@h1:7000/0?ssl_cert_reqs=none"
    assert nodes == [("h1", 7000), ("::1", 7001)]
    for url, said in [("redis+cluster://h1/0", "host:port"),
                      ("redis+cluster://h1:7000/3", "only database 0"),
                      ("redis+cluster://h1:7000/0?prefix=a{b}", "no braces"),
                      ("redis+cluster://h1:7000/0?wait_replicas=1", "wait_replicas")]:
        with pytest.raises(StoreError, match=said):
            open_store(url)
    # Opening sends nothing: the app starts while the cluster is down.
    open_store("redis+cluster://127.0.0.1:1/0").close()


def test_a_moved_slot_past_the_retries_is_an_outage_and_crossslot_a_bug():
    exceptions = redis.exceptions
    assert _is_outage(exceptions.MovedError("3999 127.0.0.1:6381"))
    assert _is_outage(exceptions.AskError("3999 127.0.0.1:6381"))
    assert _is_outage(exceptions.ClusterDownError("CLUSTERDOWN The cluster is down"))
    assert _is_outage(exceptions.TryAgainError("TRYAGAIN"))
    assert _is_outage(exceptions.RedisClusterException("TTL exhausted."))
    assert _is_outage(exceptions.SlotNotCoveredError("slot 5 not covered"))
    assert not _is_outage(exceptions.ClusterCrossSlotError(
        "CROSSSLOT Keys in request don't hash to the same slot"))
    assert not _is_outage(exceptions.RedisClusterException(
        "EVALSHA - all keys must map to the same key slot"))
    assert not _is_outage(exceptions.RedisClusterException(
        "Cluster mode is not enabled on this node"))


def test_every_call_of_the_cluster_store_answers_unavailable_when_it_is_down():
    """The cluster store's own methods (leases, sweeps, lists) are guarded as those it
    inherits: a cluster nobody answers is "task store unavailable", never a raw error."""
    from a2a_flask.protocol.errors import StoreUnavailable

    store = open_store("redis+cluster://127.0.0.1:1/0", limits=StoreLimits(timeout=1))
    try:
        for call in (lambda: store.acquire_lease("t1", "me", 5), store.expired_leases,
                     store.push_backlog, lambda: store.list_tasks(TaskQuery()),
                     lambda: store.purge("2025-01-01T00:00:00.000Z"), lambda: store.load("t")):
            with pytest.raises(StoreUnavailable):
                call()
    finally:
        store.close()


# ----------------------------------------------------------------- copy-store


def test_copy_store_moves_a_single_redis_store_into_the_cluster(cluster, make_app, tmp_path):
    from tests.web.test_flask_commands import chunky, fill, kept, run, store_of

    redis_up()
    prefix = f"a2atest-copy-{uuid.uuid4().hex[:10]}"
    try:
        source_url = f"{REDIS_URL}?prefix={prefix}"
        app = make_app(chunky, store=source_url)
        task_ids = fill(app.test_client(), store_of(app))
        target_url = f"{cluster.url}?prefix=copied{uuid.uuid4().hex[:8]}"
        result = run(app, "copy-store", source_url, "--to", target_url)
        assert result.exit_code == 0, result.output
        assert result.output.splitlines()[-1].startswith("Copied 3 tasks from ")
        target = open_store(target_url)
        try:
            for task_id in task_ids:
                assert kept(target, task_id) == kept(store_of(app), task_id)
            listed = ids(target.list_tasks(TaskQuery(tenant="", owner="")))
            assert sorted(listed) == sorted(task_ids)
        finally:
            target.close()
        again = run(app, "copy-store", source_url, "--to", target_url)
        assert "Copied 0 tasks" in again.output and "3 already there." in again.output
    finally:
        drop_redis_prefix(prefix)


# ----------------------------------------------------------------- faults, under gunicorn


def test_a_failover_and_a_slot_move_under_streams_webhooks_and_blocking_sends(cluster):
    """A manual failover (CLUSTER FAILOVER on a replica) of the master of one streamed
    task's slot, then that of another task moved to another master, while six tasks
    stream over 2 workers: every stream whole, every webhook whole, no error."""
    from tests.support.redis_load import under_load

    def faults(store: Any, task_ids: List[str]) -> None:
        first = cluster.master_of(cluster.slot_of(store._key("task", task_ids[0])))
        cluster.failover(first)
        moved = cluster.slot_of(store._key("task", task_ids[1]))
        target = next(port for port in cluster.masters()
                      if port != cluster.master_of(moved))
        cluster.move_slot(moved, target)

    # (Here redis-py's own retries hide both; on a loaded machine a slower failover
    # may show as a bounded "unavailable", which the grace rides out.)
    under_load(f"{cluster.url}?prefix=faults{uuid.uuid4().hex[:8]}", faults)


def test_a_store_opened_before_the_faults_still_reads_every_task(cluster):
    """After the module's failover and slot move, a client whose slot map is stale
    follows MOVED (redis-py's own retries): nothing surfaces."""
    store = fresh(cluster)
    try:
        for n in range(20):
            create(store, f"t{n}", owner="bob", second=n % 60)
        assert len(ids(store.list_tasks(TaskQuery(owner="bob", page_size=50)))) == 20
        moved = store._redis.keyslot(store._key("task", "t3"))
        target = next(port for port in cluster.masters() if port != cluster.master_of(moved))
        cluster.move_slot(moved, target, pause=0)
        assert must_load(store, "t3").task.id == "t3"
        append(store, "t3", [status_event("t3", S.COMPLETED, 59)])
        assert ids(store.list_tasks(TaskQuery(owner="bob", state=S.COMPLETED))) == ["t3"]
    finally:
        store.close()
