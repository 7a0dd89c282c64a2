"""The Redis store's keys: callers whose tenant and owner nest never
share an index, an expired task's index entry never lists another caller's task
that took its id, and the indexes of 0.1.0 move to the new layout without a task
going missing, however many processes open the store at once."""
from __future__ import annotations

import multiprocessing
import time
import uuid
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import redis
import requests

from a2a_flask.protocol.models import TaskState
from a2a_flask.stores.base import TaskQuery, TaskRecord, split_key
from a2a_flask.stores.redis import LAYOUT, RedisStore

from tests.conftest import REDIS_URL, drop_redis_prefix, redis_up
from tests.support.helpers import V1, Server, rpc_body
from tests.support.tasks import message
from tests.stores.test_stores import append, create, ids, make_task, stamp, status_event

pytestmark = [pytest.mark.slow, pytest.mark.declare(server=[
    "test_processes_opening_the_store_at_once_all_see_every_task",
    "test_callers_whose_ids_nest_see_nothing_of_each_other_over_gunicorn"])]

S = TaskState
#: Callers whose ``tenant:owner`` is one string: 0.1.0 gave each pair one index.
NESTED = [(":github", "alice"), ("", "github:alice"), ("a:b", "c"), ("a", "b:c")]


@pytest.fixture
def prefix() -> Iterator[str]:
    redis_up()
    name = f"a2atest-{uuid.uuid4().hex[:12]}"
    yield name
    drop_redis_prefix(name)


def open_store(prefix: str, **options: Any) -> RedisStore:
    return RedisStore(f"{REDIS_URL}?prefix={prefix}", **options)


def keys(store: RedisStore, kind: str) -> List[str]:
    return sorted(k.decode() for k in store._redis.scan_iter(f"{store.prefix}:{kind}:*"))


def listed(store: RedisStore, tenant: str, owner: str) -> Tuple[List[str], int]:
    page = store.list_tasks(TaskQuery(tenant=tenant, owner=owner))
    assert all((r.tenant, r.owner) == (tenant, owner) for r in page.records)
    return ids(page), page.total_size


def as_0_1_0(store: RedisStore) -> None:
    """Turn the store's indexes into those 0.1.0 wrote: ``{p}:idx:{tenant}:{owner}``,
    where nesting callers share one key, and no layout mark."""
    client = store._redis
    for key in keys(store, "owned"):
        tenant, owner = split_key(key[len(f"{store.prefix}:owned:"):])
        entries = client.zrange(key, 0, -1, withscores=True)
        client.zadd(f"{store.prefix}:idx:{tenant}:{owner}", dict(entries))
        client.delete(key)
    client.delete(f"{store.prefix}:layout")


def fill_nested(store: RedisStore) -> None:
    for n, (tenant, owner) in enumerate(NESTED):
        create(store, f"task-{n}", tenant=tenant, owner=owner, second=n)


def assert_apart(store: RedisStore) -> None:
    for n, (tenant, owner) in enumerate(NESTED):
        assert listed(store, tenant, owner) == ([f"task-{n}"], 1), (tenant, owner)


# ----------------------------------------------------------------- the layout


def test_an_index_key_names_its_tenant_and_owner_unambiguously(prefix):
    store = open_store(prefix)
    try:
        fill_nested(store)
        assert keys(store, "owned") == sorted(f"{prefix}:owned:{k}" for k in (
            "7::github:5:alice", "0::12:github:alice", "3:a:b:1:c", "1:a:3:b:c"))
        assert keys(store, "idx") == []
        assert store._redis.get(f"{prefix}:layout") == LAYOUT
        assert_apart(store)
    finally:
        store.close()


# ----------------------------------------------------------------- stale entries


@pytest.mark.parametrize("task_ttl, expiring", [(0, False), (60, True)])
def test_a_finished_task_expires_only_under_a_task_ttl(prefix, task_ttl, expiring):
    """A2A_TASK_TTL=0 keeps finished tasks forever: their keys get no expiry, as
    they do under a TTL."""
    store = open_store(prefix, task_ttl=task_ttl)
    try:
        create(store, "done", second=1)
        append(store, "done", [status_event("done", S.COMPLETED, second=2)])
        ttls = [store._redis.ttl(store._key(kind, "done")) for kind in ("task", "log")]
        if expiring:
            assert all(0 < ttl <= task_ttl for ttl in ttls), ttls
        else:
            assert ttls == [-1, -1]  # -1: the key exists and never expires
    finally:
        store.close()


def test_an_expired_tasks_id_taken_by_another_caller_never_lists_for_the_first(prefix):
    """A finished task expires (the task TTL) while its index entry waits for the
    next purge; a 0.1 client then creates a task with the same id."""
    expiring = open_store(prefix, task_ttl=1)
    store = open_store(prefix)
    try:
        create(expiring, "reused", tenant="acme", owner="alice", second=1)
        append(expiring, "reused", [status_event("reused", S.COMPLETED, second=2)])
        deadline = time.monotonic() + 30
        while store.load("reused") is not None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert store.load("reused") is None  # expired; alice's index still names it
        assert store._redis.zcard(store._index("acme", "alice")) == 1

        create(store, "reused", tenant="acme", owner="bob", second=40)
        append(store, "reused", [status_event("reused", S.COMPLETED, second=41)])
        assert listed(store, "acme", "alice") == ([], 0)
        assert listed(store, "acme", "bob") == (["reused"], 1)
        filtered = store.list_tasks(TaskQuery(tenant="acme", owner="alice", state=S.COMPLETED))
        assert (ids(filtered), filtered.total_size) == ([], 0)

        # Alice's list met her stale entry and took it out; the purge has nothing of
        # hers left, and bob's finished task, newer than the cutoff, stays.
        assert store._redis.zcard(store._index("acme", "alice")) == 0
        assert store.purge(stamp(30)) == 0
        assert store.load("reused").owner == "bob"
        assert listed(store, "acme", "bob") == (["reused"], 1)
    finally:
        expiring.close()
        store.close()


def test_purge_sweeps_only_its_own_prefix_even_when_the_prefix_is_a_pattern(prefix):
    """SCAN takes a glob pattern: a prefix holding ``*`` must not reach other stores."""
    star, other = open_store(prefix + "*"), open_store(prefix + "-b")
    try:
        create(other, "theirs", second=1)
        append(other, "theirs", [status_event("theirs", S.COMPLETED, second=2)])
        assert star.purge(stamp(59)) == 0
        assert listed(other, "", "") == (["theirs"], 1)
        assert other.purge(stamp(59)) == 1
    finally:
        star.close()
        other.close()
        drop_redis_prefix(prefix + "-b")


def test_purge_leaves_keys_it_did_not_write_alone(prefix):
    store = open_store(prefix)
    try:
        store._redis.zadd(f"{prefix}:owned:not-a-pair", {"x": 0})
        create(store, "done", second=1)
        append(store, "done", [status_event("done", S.COMPLETED, second=2)])
        assert store.purge(stamp(59)) == 1
        assert store._redis.zcard(f"{prefix}:owned:not-a-pair") == 1
    finally:
        store.close()


# ----------------------------------------------------------------- upgrading 0.1.0


def test_the_indexes_of_0_1_0_move_at_the_stores_first_call(prefix):
    first = open_store(prefix)
    fill_nested(first)
    create(first, "gone", tenant="a", owner="b:c", second=9)
    as_0_1_0(first)
    first._redis.delete(first._key("task", "gone"), first._key("log", "gone"))
    assert keys(first, "owned") == [] and len(keys(first, "idx")) == 2  # two shared keys
    first.close()

    store = open_store(prefix)
    try:
        assert len(keys(store, "idx")) == 2  # opening sends nothing (the app starts without Redis)
        assert store.load("no-such-task") is None  # the first call moves them
        assert keys(store, "idx") == []
        assert store._redis.get(f"{prefix}:layout") == LAYOUT
        assert_apart(store)
        # The entry of a task that is gone was dropped, not moved.
        assert store._redis.zrange(store._index("a", "b:c"), 0, -1) == [b"task-3"]
        # Appends keep using the new index, and the move is not made again.
        append(store, "task-1", [status_event("task-1", S.WORKING, second=20)])
        reopened = open_store(prefix)
        assert_apart(reopened)
        reopened.close()
    finally:
        store.close()


def test_a_list_moves_an_old_index_left_behind(prefix):
    """A 0.1.0 process still writing during a rolling upgrade (or one opened while
    another process moves the indexes): the caller's list moves its old index first."""
    store = open_store(prefix)
    try:
        fill_nested(store)
        as_0_1_0(store)
        store._redis.set(f"{prefix}:layout", LAYOUT)  # as if moved: only lists can move them now
        # alice in tenant ":github" had one old key with github:alice: her list
        # moves both entries, each to its owner's index, and shows her own only.
        assert listed(store, ":github", "alice") == (["task-0"], 1)
        assert store._redis.zrange(store._index("", "github:alice"), 0, -1) == [b"task-1"]
        assert keys(store, "idx") == [f"{prefix}:idx:a:b:c"]
        assert_apart(store)
        assert keys(store, "idx") == []
    finally:
        store.close()


def test_a_move_cut_short_is_finished_by_the_next_store_to_open(prefix):
    store = open_store(prefix)
    fill_nested(store)
    # Cut short after the first move had copied the entries, before it removed
    # them, with its lock expired: the old keys are full, the new ones too.
    for n, (tenant, owner) in enumerate(NESTED):
        store._redis.zadd(store._old_index(tenant, owner), {f"task-{n}": n})
    store._redis.delete(f"{prefix}:layout")
    store.close()
    store = open_store(prefix)
    try:
        store.load("no-such-task")  # its first call
        assert keys(store, "idx") == []
        assert_apart(store)
    finally:
        store.close()


def _open_and_list(prefix: str, start: Any, results: Any) -> None:
    """Child process: open the store when told, list every caller at once."""
    start.wait(10)
    store = open_store(prefix)
    results.put([listed(store, tenant, owner) for tenant, owner in NESTED])
    store.close()


def test_processes_opening_the_store_at_once_all_see_every_task(prefix):
    store = open_store(prefix)
    fill_nested(store)
    for n in range(4, 300):  # enough for a move to take a while
        create(store, f"task-{n}", tenant="a:b", owner="c", second=n % 60)
    as_0_1_0(store)
    ctx = multiprocessing.get_context("spawn")
    start, results = ctx.Event(), ctx.Queue()
    children = [ctx.Process(target=_open_and_list, args=(prefix, start, results))
                for _ in range(4)]
    for child in children:
        child.start()
    try:
        start.set()
        answers = [results.get(timeout=60) for _ in children]
    finally:
        for child in children:
            child.join(30)
            if child.is_alive():
                child.kill()
    assert [child.exitcode for child in children] == [0] * 4
    for answer in answers:  # (task-2 and the 296 more are one caller's)
        assert [total for _, total in answer] == [1, 1, 297, 1]
        assert [answer[n][0] for n in (0, 1, 3)] == [["task-0"], ["task-1"], ["task-3"]]
    try:
        assert keys(store, "idx") == []
        assert store._redis.get(f"{prefix}:layout") == LAYOUT
    finally:
        store.close()


# ----------------------------------------------------------------- ListTasks in O(page)


class CountingPipelines:
    """Counts the task hashes a store's pipelines read (HMGET and HGETALL)."""

    def __init__(self, store: RedisStore) -> None:
        self.reads = 0
        self._pipeline = store._redis.pipeline
        store._redis.pipeline = self.pipeline

    def pipeline(self, *args: Any, **kwargs: Any) -> Any:
        pipe = self._pipeline(*args, **kwargs)
        counter = self

        class Counted(type(pipe)):  # type: ignore[misc]
            def hmget(self, *a: Any, **k: Any) -> Any:
                counter.reads += 1
                return super().hmget(*a, **k)

            def hgetall(self, *a: Any, **k: Any) -> Any:
                counter.reads += 1
                return super().hgetall(*a, **k)

        pipe.__class__ = Counted
        return pipe


def fill_many(store: RedisStore, count: int) -> None:
    """``count`` (< 1,000) tasks of one caller over two contexts, one in three
    finished, each updated at its own millisecond but the ten newest, finished at
    the same one (ties)."""
    for n in range(count):
        task = make_task(f"t{n:04d}", context_id="even" if n % 2 == 0 else "odd")
        task.status.timestamp = f"2025-01-01T00:00:00.{n:03d}Z"
        store.create(TaskRecord(task, 1, "", "", "1.0", task.status.timestamp), task)
        if n % 3 == 0:
            event = status_event(task.id, S.COMPLETED)
            event.status.timestamp = (f"2025-01-01T00:00:01.{n:03d}Z" if n >= 30
                                      else "2025-01-01T00:00:02.000Z")
            append(store, task.id, [event])


@pytest.mark.parametrize("query", [
    TaskQuery(page_size=10), TaskQuery(page_size=10, context_id="odd"),
    TaskQuery(page_size=10, state=S.COMPLETED), TaskQuery(page_size=10, updated_after=stamp(30)),
], ids=["all", "context", "state", "updated_after"])
def test_a_page_reads_the_page_not_the_callers_tasks(prefix, query):
    """600 tasks: each page reads a few dozen task hashes, not 600, and the pages
    together are the whole filtered list with the right total."""
    store = open_store(prefix)
    try:
        fill_many(store, 600)
        everything = store.list_tasks(TaskQuery(page_size=100, context_id=query.context_id,
                                                state=query.state,
                                                updated_after=query.updated_after))
        counting = CountingPipelines(store)
        seen: List[str] = []
        token, pages = "", 0
        while True:
            before = counting.reads
            page = store.list_tasks(TaskQuery(
                page_size=10, context_id=query.context_id, state=query.state,
                updated_after=query.updated_after, page_token=token))
            # The page's hashes twice (checked, then read whole), the batches' growth
            # (each twice the last) and the ties at the page token's time: a few
            # pages' worth, never the 600.
            assert counting.reads - before <= 6 * 10, counting.reads - before
            assert page.total_size == everything.total_size
            seen.extend(ids(page))
            pages += 1
            token = page.next_page_token
            if not token or pages == 5:
                break
        assert seen == ids(everything)[:len(seen)] and len(seen) == min(50, len(ids(everything)))
    finally:
        store.close()


def test_a_state_change_moves_the_task_between_state_indexes(prefix):
    store = open_store(prefix)
    try:
        create(store, "a", S.WORKING, second=1)
        working, completed = (store._state_index("", "", s.value) for s in (S.WORKING, S.COMPLETED))
        assert store._redis.zrange(working, 0, -1) == [b"a"]
        append(store, "a", [status_event("a", S.COMPLETED, second=2)])
        assert store._redis.zrange(working, 0, -1) == []
        assert store._redis.zrange(completed, 0, -1) == [b"a"]
        assert ids(store.list_tasks(TaskQuery(state=S.WORKING))) == []
        assert ids(store.list_tasks(TaskQuery(state=S.COMPLETED))) == ["a"]
        assert store.purge(stamp(30)) == 1
        assert keys(store, "owned-ctx") == keys(store, "owned-state") == keys(store, "owned") == []
    finally:
        store.close()


def test_the_context_and_state_indexes_of_an_older_store_are_built_at_its_first_call(prefix):
    store = open_store(prefix)
    fill_many(store, 40)
    expected = {name: ids(store.list_tasks(TaskQuery(page_size=100, **query))) for name, query in (
        ("odd", {"context_id": "odd"}), ("done", {"state": S.COMPLETED}),
        ("both", {"context_id": "even", "state": S.SUBMITTED}))}
    assert all(expected.values())
    for key in keys(store, "owned-ctx") + keys(store, "owned-state"):
        store._redis.delete(key)
    store._redis.set(f"{prefix}:layout", "2")  # as a store of layout 2 left it
    store.close()

    def lists(store: RedisStore) -> dict:
        return {name: ids(store.list_tasks(TaskQuery(page_size=100, **query))) for name, query
                in (("odd", {"context_id": "odd"}), ("done", {"state": S.COMPLETED}),
                    ("both", {"context_id": "even", "state": S.SUBMITTED}))}

    # While another process upgrades it (it holds the lock), a filtered list reads
    # the caller's index.
    client = redis.Redis.from_url(REDIS_URL)
    client.set(f"{prefix}:upgrading", "1", ex=60)
    meanwhile = open_store(prefix)
    try:
        assert meanwhile._redis.get(f"{prefix}:layout") == b"2"
        assert lists(meanwhile) == expected
    finally:
        meanwhile.close()
    client.delete(f"{prefix}:upgrading")  # (it died: its lock expired)
    client.close()
    store = open_store(prefix)
    try:
        store.load("no-such-task")  # the first call upgrades (opening sends nothing)
        assert store._redis.get(f"{prefix}:layout") == LAYOUT
        assert len(keys(store, "owned-ctx")) == 2 and len(keys(store, "owned-state")) == 2
        assert lists(store) == expected
    finally:
        store.close()


# ----------------------------------------------------------------- over real HTTP

SECRET = "github-alice-secret"


def test_callers_whose_ids_nest_see_nothing_of_each_other_over_gunicorn(prefix):
    """The attack of nesting ids against a real server on Redis: caller ``alice``
    with tenant ``:github`` asks for the tasks of caller ``github:alice`` (no
    tenant), and caller ``c`` with tenant ``a:b`` for those of ``b:c`` in tenant
    ``a``; tasks stored by 0.1.0 before the upgrade are there too."""
    tokens = {"t-gh": "github:alice", "t-alice": "alice", "t-c": "c", "t-bc": "b:c"}
    seeded = open_store(prefix)
    create(seeded, "stored-by-0.1.0", owner="github:alice", second=1)
    as_0_1_0(seeded)
    seeded.close()
    env = {"A2A_TEST_TOKENS": ",".join(f"{t}={who}" for t, who in tokens.items()),
           "FLASK_A2A_STORE": f"{REDIS_URL}?prefix={prefix}"}

    def auth(token: str) -> Dict[str, str]:
        return {**V1, "Authorization": f"Bearer {token}"}

    with Server("tests.support.auth_app:app", env=env) as server:
        def rpc(token: str, method: str, params: Any) -> Dict[str, Any]:
            answer = requests.post(server.url + "/a2a", json=rpc_body(method, params),
                                   headers=auth(token), timeout=30)
            assert answer.status_code == 200, answer.text
            return answer.json()

        def rest(token: str, method: str, path: str, **kw: Any) -> requests.Response:
            return requests.request(method, server.url + "/a2a/rest" + path,
                                    headers=auth(token), timeout=30, **kw)

        # github:alice: one task over JSON-RPC, finished (it has an artifact), one over REST.
        asked = rpc("t-gh", "SendMessage", {"message": message(SECRET)})["result"]["task"]
        done = rpc("t-gh", "SendMessage", {"message": message(SECRET, taskId=asked["id"])})
        assert done["result"]["task"]["artifacts"], done
        by_rest = rest("t-gh", "POST", "/message:send", json={"message": message(SECRET)})
        assert by_rest.status_code == 200, by_rest.text
        theirs = sorted([asked["id"], by_rest.json()["task"]["id"], "stored-by-0.1.0"])
        # b:c, in tenant "a" (a REST path).
        in_a = rest("t-bc", "POST", "/a/message:send", json={"message": message(SECRET)})
        assert in_a.status_code == 200, in_a.text
        bcs = in_a.json()["task"]["id"]

        # The owners see their own (so the lists below are not empty by accident).
        own = rpc("t-gh", "ListTasks", {})["result"]
        assert sorted(t["id"] for t in own["tasks"]) == theirs and own["totalSize"] == 3
        own_rest = rest("t-bc", "GET", "/a/tasks").json()
        assert [t["id"] for t in own_rest["tasks"]] == [bcs] and own_rest["totalSize"] == 1

        for token, tenant, victims in (("t-alice", ":github", theirs), ("t-c", "a:b", [bcs])):
            listed_rpc = rpc(token, "ListTasks", {"tenant": tenant})
            assert listed_rpc["result"]["tasks"] == [], listed_rpc
            assert listed_rpc["result"]["totalSize"] == 0
            listed_rest = rest(token, "GET", "/tasks", params={"tenant": tenant})
            assert listed_rest.status_code == 200, listed_rest.text
            assert listed_rest.json()["tasks"] == [] and listed_rest.json()["totalSize"] == 0
            # A tenant holding ":" cannot be a REST path segment: no route, no task.
            by_path = rest(token, "GET", f"/{tenant}/tasks")
            assert by_path.status_code == 404 and SECRET not in by_path.text
            for victim in victims:
                got = rpc(token, "GetTask", {"id": victim, "tenant": tenant})
                assert got["error"]["code"] == -32001 and SECRET not in str(got)
                got_rest = rest(token, "GET", f"/tasks/{victim}", params={"tenant": tenant})
                assert got_rest.status_code == 404 and SECRET not in got_rest.text
            assert SECRET not in str(listed_rpc) + listed_rest.text
