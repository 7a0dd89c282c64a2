"""The Redis store on a Redis Cluster: ``redis+cluster://host:port[,host:port...]/0``.

Redis Cluster runs a script or a transaction only on keys of one hash slot, so the
keys carry hash tags (the part in braces is what Redis hashes):

``{p}:<kind>:{t:<id>}``  every key of one task (``task``, ``log``, ``push``,
                    ``pushorder``, ``lease``, and ``run``: the task has a runner):
                    one slot, so a create, an append (events, snapshot, lease
                    release) is one script, atomic as on one Redis
``{p}:owned:{o:<tenant, owner>}``, ``{p}:owned-ctx:{o:<tenant, owner>}:<context>``,
``{p}:owned-state:{o:<tenant, owner>}:<state>``  a caller's indexes: one slot per
                    caller, so ListTasks reads one node, O(page)
``{p}:running``, ``{p}:pushing``, ``{p}:layout``  one key each, anywhere

A write changes the task's slot first (one script), then the caller's indexes (a
second script, in the caller's slot: ``ZADD GT``, so two writes landing out of order
keep the newest score, and the entry of the state the task left goes). So an index
may, for a moment, list a task in the state it just left, or miss a task: until the
process pays the step an outage kept back (its next ListTasks or keeper round, see
``_index_step``), or, if it died between the two, until the task's next change of
state or status time (the keeper's lease expiry makes one for a run that died). An
append that changes neither (a streamed chunk) has no index step at all; ListTasks
checks every entry against the task's own hash, as on one Redis, and drops an entry
that is stale only if its score is still the one it read (``_UNLIST_UPTO``: an entry
written again meanwhile stays).
The running and pushing sets, which the keeper and the webhook
sweep read whole, are changed in a step of their own too, with the order chosen so
that nothing is ever lost from them (see :meth:`RedisClusterStore.acquire_lease`
and :meth:`RedisClusterStore.push_backlog`).

Change notices are plain ``PUBLISH`` from inside each task's script: Redis Cluster
forwards a published message to every node, so each process keeps one subscription
at any node, a slot that moves or a master that fails over changes nothing about it,
and the notice leaves with the write that it announces.  Sharded pub/sub
(``SPUBLISH``, Redis 7) would spare the other shards the message, but a script may
only publish to a channel in its own slot: each process would subscribe to a channel
per slot of every task it waits on, and resubscribe at every slot move; a lost
notice costs a waiter at most :data:`~.redis.SAFETY_POLL` either way.
"""
from __future__ import annotations

import json
import logging
import threading
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import unquote, urlencode, urlsplit

from ..protocol.models import TaskState
from .base import (LogEntry, PushTarget, StoreError, StoreLimits, TaskPage, TaskQuery, TaskRecord,
                   in_scope, is_behind, join_key, outages_as_unavailable, split_parts)
from .redis import _TERMINAL, COUNTS_KEPT, Creation, RedisStore, _cursor, _is_outage, _score
from .serial import EncodedEntries, dump_target
from .urls import safe_text

log = logging.getLogger("a2a_flask")

#: What ``{p}:layout`` holds in a cluster (the single-node store writes ``3``).
CLUSTER_LAYOUT = b"cluster-1"
#: redis-py's retries of one command over a moved slot or a lost node, before the
#: store answers "unavailable" (the engine's grace, A2A_STORE_GRACE, retries on).
RETRIES = 3

# A run's last write lets go of its lease (one another process took meanwhile stays).
_RELEASE_LEASE = """
local function release_lease(lease, run, owner)
  if owner == '' then return end
  local holder = redis.call('GET', lease)
  if holder and holder ~= owner then return end
  redis.call('DEL', lease, run)
end
"""

# KEYS: task, log, push, push order, lease, run.  ARGV: the hash's short fields (JSON),
# the snapshot, the task id, the ttl of a terminal task (0: none), the owner whose lease
# the events release ('' for none), the new seq, the channel, then the events.
_CREATE = _RELEASE_LEASE + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for name, value in pairs(cjson.decode(ARGV[1])) do redis.call('HSET', KEYS[1], name, value) end
redis.call('HSET', KEYS[1], 'snapshot', ARGV[2])
for i = 8, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
if tonumber(ARGV[4]) > 0 then
  for i = 1, 4 do redis.call('EXPIRE', KEYS[i], ARGV[4]) end
end
release_lease(KEYS[5], KEYS[6], ARGV[5])
redis.call('PUBLISH', ARGV[7], ARGV[3] .. ' ' .. ARGV[6])
return 1
"""

# KEYS: task, log, push, push order, and (when the events release the lease) lease, run.
# ARGV: expected seq, snapshot ('' keeps the stored one), state, updated_at, ttl of a
# terminal task, the snapshot's bytes, the bytes logged since, the history's length,
# tenant, owner, the owner whose lease goes ('' for none), task id, channel, events...
# The new seq, the state and updated_at the task had; -1 (not this caller's) or -2
# (stale seq).
_APPEND = _RELEASE_LEASE + """
local task = redis.call('HMGET', KEYS[1], 'seq', 'state', 'tenant', 'owner', 'updated_at')
local seq, old = task[1], task[2]
if not seq or task[3] ~= ARGV[9] or task[4] ~= ARGV[10] then return {-1, '', ''} end
if tonumber(seq) ~= tonumber(ARGV[1]) then return {-2, '', ''} end
for i = 14, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
local new = tonumber(ARGV[1]) + (#ARGV - 13)
redis.call('HSET', KEYS[1], 'seq', new, 'state', ARGV[3], 'updated_at', ARGV[4],
           'log_bytes', ARGV[7], 'history_len', ARGV[8])
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'snapshot', ARGV[2], 'snap_seq', new, 'snap_bytes', ARGV[6])
end
if tonumber(ARGV[5]) > 0 then
  for i = 1, 4 do redis.call('EXPIRE', KEYS[i], ARGV[5]) end
end
if KEYS[5] then release_lease(KEYS[5], KEYS[6], ARGV[11]) end
redis.call('PUBLISH', ARGV[13], ARGV[12] .. ' ' .. new)
return {new, old, task[5] or ''}
"""

# KEYS: the caller's index, its context's, its state's, and (if the state changed) the
# old state's.  ARGV: score, task id.  GT: a write landing after a newer one's leaves
# the newer score.
_INDEX = """
for i = 1, 3 do redis.call('ZADD', KEYS[i], 'GT', ARGV[1], ARGV[2]) end
if KEYS[4] then redis.call('ZREM', KEYS[4], ARGV[2]) end
return 1
"""

# KEYS: an index.  ARGV: task id, score.  The entry goes only if its score is at most
# the one read (an entry written again since has a later one, and stays).
_UNLIST_UPTO = """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then
  return redis.call('ZREM', KEYS[1], ARGV[1])
end
return 0
"""

# KEYS: lease, run.  ARGV: owner, ttl ms.  Set-if-absent, or renew our own.
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SET', KEYS[2], '1')
return 1
"""

# KEYS: lease, run.  ARGV: owner, ttl ms.  As the single-node _RENEW, with the task's
# ``run`` key in place of the running set's entry.
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if not holder and redis.call('EXISTS', KEYS[2]) == 1 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""

# KEYS: lease, run.  ARGV: owner ('' for whoever holds it).
_RELEASE = """
local holder = redis.call('GET', KEYS[1])
if ARGV[1] == '' or not holder or holder == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2])
  return 1
end
return 0
"""

# KEYS: task, push.  ARGV: the terminal states.  1 if the task owes no push: gone, no
# webhook left, or finished with every webhook served or given up.
_SETTLED = """
local fields = redis.call('HGETALL', KEYS[2])
local seq = redis.call('HGET', KEYS[1], 'seq')
if not seq or #fields == 0 then return 1 end
local state = redis.call('HGET', KEYS[1], 'state')
local finished = false
for i = 1, #ARGV do if state == ARGV[i] then finished = true end end
if not finished then return 0 end
for i = 1, #fields, 2 do
  if string.sub(fields[i], 1, 2) == 'd:' then
    local delivered, gave_up = string.match(fields[i + 1], '^(%d+) %d+ (%d)$')
    if gave_up ~= '1' and tonumber(delivered) < tonumber(seq) then return 0 end
  end
end
return 1
"""

# KEYS: task, log, push, push order.  ARGV: tenant, owner, updated_before, terminal
# states...  {1, context, state}: deleted (this caller's, finished, old enough);
# {2}: gone or another caller's (the entry is stale); {0}: kept.
_SWEEP = """
local task = redis.call('HMGET', KEYS[1], 'tenant', 'owner', 'state', 'updated_at',
                        'context_id')
if not task[3] or task[1] ~= ARGV[1] or task[2] ~= ARGV[2] then return {2} end
if task[4] >= ARGV[3] then return {0} end
for i = 4, #ARGV do
  if task[3] == ARGV[i] then
    redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
    return {1, task[5], task[3]}
  end
end
return {0}
"""


def cluster_options(url: str, query: Dict[str, List[str]]) -> Tuple[str, List[Tuple[str, int]]]:
    """A ``redis(s)+cluster://`` URL's first node as a ``redis(s)://`` URL redis-py reads
    (user, password and the options of ``query``), and every node's (host, port).

    :raises ValueError: no node, a node without a port, a database other than 0."""
    parts = urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    nodes: List[Tuple[str, int]] = []
    for node in hosts.split(","):
        host, sep, port = node.strip().rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(f"each node is host:port, not {node!r}")
        nodes.append((unquote(host.strip("[]")), int(port)))
    database = parts.path.strip("/")
    if database not in ("", "0"):
        raise ValueError("a Redis Cluster has only database 0")
    scheme = "rediss" if parts.scheme.startswith("rediss") else "redis"
    first = hosts.split(",")[0].strip()
    options = urlencode(query, doseq=True)
    return (f"{scheme}://{userinfo + '@' if userinfo else ''}{first}/0"
            f"{'?' + options if options else ''}", nodes)


class _LazyCluster:
    """A RedisCluster made at first use: redis-py's asks the cluster for its slots
    when made, and the app must start while the cluster is down (an outage answers
    "unavailable" then, as for one Redis).  Scripts register without it."""

    def __init__(self, make: Any) -> None:
        self._make = make
        self._client: Any = None
        self._lock = threading.Lock()

    def register_script(self, script: str) -> Any:
        from redis.commands.core import Script

        return Script(self, script)  # type: ignore[arg-type]  # used as a RedisCluster

    def get_encoder(self) -> Any:
        from redis import connection

        encoder: Any = getattr(connection, "Encoder")  # (redis-py does not type it)
        return encoder("utf-8", "strict", False)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    class _Pools:
        """What the store's close() disconnects: a cluster's pools (one per node) go
        with close() already."""

        def disconnect(self) -> None:
            pass

    connection_pool = _Pools()

    def __getattr__(self, name: str) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    self._client = self._make()
        return getattr(self._client, name)


# Guarded again: the outage guard wraps the methods of the class it decorates, and
# this one overrides some (those it inherits are guarded already).
@outages_as_unavailable((Exception,), _is_outage)
class RedisClusterStore(RedisStore):
    """The Redis store on Redis Cluster (see the module docstring)."""

    legacy = False  # a cluster store was never 0.1.0's
    claims_with_tasks = False  # the claim's key is in another slot than the task's

    def __init__(self, url: str, *, task_ttl: float = 0.0,
                 limits: Optional[StoreLimits] = None) -> None:
        super().__init__(url, task_ttl=task_ttl, limits=limits)
        if "{" in self.prefix or "}" in self.prefix:
            raise StoreError(f"a Redis Cluster store's prefix holds no braces: {self.prefix!r} "
                             "(they would make its own hash tag)")
        if self.wait_replicas:
            raise StoreError("wait_replicas is for redis:// and redis+sentinel:// stores: "
                             "a cluster's write goes to the master of its slot")
        self._c_create = self._redis.register_script(_CREATE)
        self._c_append = self._redis.register_script(_APPEND)
        self._c_index = self._redis.register_script(_INDEX)
        self._c_unlist = self._redis.register_script(_UNLIST_UPTO)
        self._c_acquire = self._redis.register_script(_ACQUIRE)
        self._c_renew = self._redis.register_script(_RENEW)
        self._c_release = self._redis.register_script(_RELEASE)
        self._c_settled = self._redis.register_script(_SETTLED)
        self._c_sweep = self._redis.register_script(_SWEEP)
        from redis import exceptions

        #: What a plain client on a node raises when the cluster moved on, or the node is
        #: gone (:meth:`_direct`).
        self._redirected: Tuple[type, ...] = (exceptions.AskError, exceptions.TryAgainError,
                                              exceptions.ClusterError)
        self._lost: Tuple[type, ...] = (exceptions.ConnectionError, exceptions.TimeoutError)
        self._response_error = exceptions.ResponseError
        #: Index steps an outage kept back: task id -> (keys, args) (:meth:`_index_step`).
        self._owed: Dict[str, Tuple[List[str], List[Any]]] = {}

    def _connect(self, url: str, query: Dict[str, List[str]], size: int) -> Any:
        import redis
        from redis import cluster
        from redis.backoff import ExponentialBackoff
        from redis.retry import Retry

        # Typed Any: redis-py types neither.
        node: Any = cluster.ClusterNode
        parse_url: Any = redis.connection.parse_url
        RedisCluster = cluster.RedisCluster
        first, nodes = cluster_options(url, query)
        timeout = self.limits.timeout
        parse_url(first)  # a URL redis-py cannot read stops the app here

        def make() -> Any:
            return RedisCluster(
                url=first, startup_nodes=[node(host, port) for host, port in nodes[1:]],
                # MOVED and ASK are followed as redis-py does; a lost node or a
                # failover retried a few times, then "unavailable" (see RETRIES).
                retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), RETRIES),
                require_full_coverage=False,
                connection_pool_class=redis.BlockingConnectionPool, max_connections=size,
                timeout=timeout, socket_connect_timeout=timeout, socket_timeout=timeout)

        return _LazyCluster(make)

    # ------------------------------------------------------------ keys

    def _task_tag(self, task_id: str) -> str:
        return "{t:" + task_id + "}"

    def _task_of(self, tag: str) -> str:
        return tag[3:-1]

    def _owner_tag(self, tenant: str, owner: str) -> str:
        return "{o:" + join_key(tenant, owner) + "}"

    def _index_parts(self, name: str) -> List[str]:
        if not name.startswith("{o:"):
            raise ValueError(f"not an index of a cluster store: {name!r}")
        parts, rest = split_parts(name[3:], 2)
        if rest == "}":
            return parts
        if not rest.startswith("}:"):
            raise ValueError(f"not an index of a cluster store: {name!r}")
        return parts + split_parts(rest[2:], 1)[0]

    # ------------------------------------------------------------ layout

    def _upgrade(self) -> None:
        """A new store is marked as the cluster's layout; a store whose keys another
        layout wrote (a single Redis's, moved over key by key) is refused: copy it
        with ``flask a2a copy-store``."""
        layout = self._redis.get(self._layout)
        if layout is None:
            self._redis.set(self._layout, CLUSTER_LAYOUT, nx=True)
            layout = self._redis.get(self._layout)
        if layout != CLUSTER_LAYOUT:
            raise StoreError(f"the keys under {self.prefix}: are not a cluster store's "
                             f"(layout {layout!r}): copy a single Redis's store into the "
                             "cluster with flask a2a copy-store")

    def _layout_done(self) -> bool:
        return True

    # ------------------------------------------------------------ writes

    def _indexes_of(self, tenant: str, owner: str, context_id: str, state: str,
                    old: Optional[str]) -> List[str]:
        keys = [self._index(tenant, owner), self._context_index(tenant, owner, context_id),
                self._state_index(tenant, owner, state)]
        if old and old != state:
            keys.append(self._state_index(tenant, owner, old))
        return keys

    def _run_create(self, made: Creation) -> bool:
        task_id, tenant, owner = made.record.task_id, made.record.tenant, made.record.owner
        created = self._script(
            self._c_create,
            [self._key(kind, task_id) for kind in ("task", "log", "push", "pushorder", "lease",
                                                    "run")],
            [json.dumps(made.fields), made.snapshot, task_id, made.ttl, made.release_owner,
             made.seq, self._channel, *made.logged])
        if created:
            self._index_step(task_id, self._indexes_of(tenant, owner, made.context_id,
                                                       made.state, None),
                             [made.score, task_id])
        return bool(created)

    def _run_append(self, task_id: str, expected_seq: int, record: TaskRecord, snapshot: str,
                    state: str, updated: str, ttl: int, size: int, since: int,
                    release_owner: str, logged: List[str]) -> int:
        tenant, owner = record.tenant, record.owner
        kinds = ("task", "log", "push", "pushorder") + (("lease", "run") if release_owner
                                                         else ())
        keys = [self._key(kind, task_id) for kind in kinds]
        args = [expected_seq, snapshot, state, updated, ttl, size, since,
                len(record.outline.history), tenant, owner, release_owner, task_id,
                self._channel, *logged]
        seq, old, was_updated = self._script(self._c_append, keys, args)
        # The index entries are the state and the status time: an append that moves
        # neither (a streamed chunk, a message to an open task) leaves them as they are,
        # and costs one round trip, as on one Redis.
        if seq > 0 and (old.decode(), was_updated.decode()) != (state, updated):
            self._index_step(task_id, self._indexes_of(tenant, owner, record.task.context_id,
                                                       state, old.decode()),
                             [_score(updated), task_id])
        return int(seq)

    def _direct(self, key: str, call: Any, write: bool = False) -> Any:
        """``call(client)`` on a plain client of the master the cluster client's slot
        map names for ``key``: redis-py's cluster client spends about 20 us of CPU
        routing each command (measured: 48 us against 26 us per GET), which the hot
        path of a stream (an append, the watchers' reads) pays per event.  A moved
        slot, a lost node or an error of the cluster's goes through the cluster
        client instead, which follows MOVED and ASK and learns the new map.  A
        ``write`` goes there only on a reply that says it was not made (MOVED, ASK...):
        after a lost connection it may have been, so the outage guard answers and
        the engine's grace asks whether it landed before it writes again."""
        # A write on the writers' pools (a crowd of readers never starves a run's
        # append), as far as the slot map goes; what is redirected goes through the
        # readers' cluster client, whose map the reads keep current.
        own = self._writer if write else self._redis
        try:
            client = own.get_redis_connection(own.get_node_from_key(key))
        except Exception:  # no slot map yet (the first call) or no node for the slot
            return call(self._redis)
        try:
            return call(client)
        except Exception as exc:
            # redis-py's cluster parser reads MOVED and ASK as MovedError and AskError
            # (their text is the slot and the node); a plain one leaves the reply's text.
            redirected = isinstance(exc, self._redirected) or (
                isinstance(exc, self._response_error) and str(exc).startswith(
                    ("MOVED", "ASK", "TRYAGAIN", "CLUSTERDOWN", "READONLY", "LOADING")))
            if not redirected and (write or not isinstance(exc, self._lost)):
                raise  # the command's own error (a script's), or a write that may be done
            return call(self._redis)

    def _script(self, script: Any, keys: List[str], args: List[Any]) -> Any:
        """A write's script, straight to the master of its keys' slot (:meth:`_direct`)."""
        return self._direct(keys[0], lambda client: script(keys=keys, args=args, client=client),
                            write=True)

    def load(self, task_id: str) -> Optional[TaskRecord]:
        key = self._key("task", task_id)
        fields = self._direct(key, lambda client: client.hgetall(key))
        return self._record(task_id, fields) if fields else None

    def head(self, task_id: str) -> Optional[Tuple[int, TaskState]]:
        key = self._key("task", task_id)
        seq, state = self._direct(key, lambda client: client.hmget(key, "seq", "state"))
        return (int(seq), TaskState(state.decode())) if seq is not None else None

    def read(self, task_id: str, after_seq: int) -> Sequence[LogEntry]:
        start = max(after_seq, 0)
        key = self._key("log", task_id)
        raw = self._direct(key, lambda client: client.lrange(key, start,
                                                             start + self.read_slice - 1))
        return EncodedEntries(range(start + 1, start + 1 + len(raw)), raw) if raw else []

    def _index_step(self, task_id: str, keys: List[str], args: List[Any]) -> None:
        """A write's second script, on the caller's indexes.  The task's write is done
        by then, so an outage here does not fail the call: the step is owed, and paid
        by this process's next ListTasks or keeper round (:meth:`_pay_owed`)."""
        try:
            self._script(self._c_index, keys, args)
        except Exception as exc:
            if not _is_outage(exc):
                raise
            if not self._owed:
                log.warning("the ListTasks indexes of task %s are owed (%s); they are "
                            "written once the cluster answers", task_id, safe_text(str(exc)))
            if len(self._owed) < COUNTS_KEPT:
                self._owed[task_id] = (keys, args)  # a later step replaces an earlier one
            return
        self._owed.pop(task_id, None)

    def _pay_owed(self) -> None:
        """Write the index steps an outage kept back; stop at the first that fails."""
        for task_id, (keys, args) in list(self._owed.items()):
            try:
                self._script(self._c_index, keys, args)
            except Exception as exc:
                if _is_outage(exc):
                    return
                raise
            if self._owed.get(task_id) == (keys, args):
                del self._owed[task_id]

    def list_tasks(self, query: TaskQuery) -> TaskPage:
        if self._owed:
            self._pay_owed()
        return super().list_tasks(query)

    def put_push_target(self, task_id: str, target: PushTarget) -> None:
        # The webhook first, then the pushing set: the sweep's settle (push_backlog)
        # re-checks after it takes a task out, so a webhook added meanwhile is seen.
        self._put_push_config(task_id, target)
        self._redis.sadd(self._pushing, task_id)

    def _put_push_config(self, task_id: str, target: PushTarget) -> None:
        key, order = self._key("push", task_id), self._key("pushorder", task_id)
        config_id = target.config.id
        pipe = self._redis.pipeline()
        pipe.hset(key, mapping={"c:" + config_id: dump_target(target),
                                "d:" + config_id: _cursor(target)})
        pipe.zadd(order, {config_id: self._redis.time()[0]}, nx=True)
        pipe.ttl(self._key("task", task_id))
        *_, task_ttl = pipe.execute()
        if task_ttl and task_ttl > 0:  # a finished task: its webhooks go with it
            self._redis.expire(key, task_ttl)
            self._redis.expire(order, task_ttl)

    # ------------------------------------------------------------ listing

    def _drop_stale(self, index: str, by: Optional[Tuple[str, str]], task_id: str, tenant: str,
                    owner: str, score: float) -> bool:
        return bool(self._c_unlist(keys=[index], args=[task_id, repr(score)]))

    # ------------------------------------------------------------ webhooks' sweep

    def push_backlog(self) -> List[str]:
        task_ids = [i.decode() for i in self._redis.smembers(self._pushing)]
        if not task_ids:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for task_id in task_ids:
            pipe.hmget(self._key("task", task_id), "seq", "state")
            pipe.hgetall(self._key("push", task_id))
        answers = pipe.execute()
        behind = []
        for task_id, (seq, state), fields in zip(task_ids, answers[::2], answers[1::2]):
            targets = [self._target(fields, key[2:].decode()) for key in fields
                       if key.startswith(b"c:")]
            if seq is not None and any(t is not None and is_behind(t, int(seq))
                                       for t in targets):
                behind.append(task_id)
            elif seq is None or not targets or state.decode() in _TERMINAL:
                self._settle_one(task_id)
        return behind

    def _settle_one(self, task_id: str) -> None:
        """Take a task that owes no push out of the pushing set: checked in its slot,
        taken out, checked again (a webhook registered in between puts it back)."""
        keys = [self._key("task", task_id), self._key("push", task_id)]
        if not self._c_settled(keys=keys, args=list(_TERMINAL)):
            return
        self._redis.srem(self._pushing, task_id)
        if not self._c_settled(keys=keys, args=list(_TERMINAL)):
            self._redis.sadd(self._pushing, task_id)

    # ------------------------------------------------------------ leases

    def acquire_lease(self, task_id: str, owner: str, ttl: float) -> bool:
        # Into the running set before and after the lease: a runner that dies between
        # leaves an entry (dropped by expired_leases), never a lease nobody would reap;
        # the second add wins over an expired_leases that took the entry out meanwhile.
        self._writer.sadd(self._running, task_id)
        taken = bool(self._script(self._c_acquire,
                                  [self._key("lease", task_id), self._key("run", task_id)],
                                  [owner, max(1, int(ttl * 1000))]))
        if taken:
            self._writer.sadd(self._running, task_id)
        return taken

    def renew_leases(self, owner: str, task_ids: List[str], ttl: float) -> None:
        for task_id in task_ids:
            self._script(self._c_renew, [self._key("lease", task_id), self._key("run", task_id)],
                         [owner, max(1, int(ttl * 1000))])

    def release_lease(self, task_id: str, owner: Optional[str]) -> None:
        # The running set's entry stays until expired_leases meets it without a runner.
        self._script(self._c_release, [self._key("lease", task_id), self._key("run", task_id)],
                     [owner or ""])

    def expired_leases(self) -> List[str]:
        if self._owed:  # (the keeper calls this every round)
            self._pay_owed()
        running = [i.decode() for i in self._redis.smembers(self._running)]
        if not running:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for task_id in running:
            pipe.exists(self._key("lease", task_id))
            pipe.exists(self._key("run", task_id))
        answers = pipe.execute()
        expired = []
        for task_id, alive, run in zip(running, answers[::2], answers[1::2]):
            if run and not alive:
                expired.append(task_id)
            elif not run:
                # Released: the entry goes, and comes back if a runner took the task
                # between the read and now (acquire_lease adds after its lease too).
                self._redis.srem(self._running, task_id)
                if self._redis.exists(self._key("run", task_id)):
                    self._redis.sadd(self._running, task_id)
        return expired

    # ------------------------------------------------------------ retention

    def purge(self, updated_before: str, scope: Optional[str] = None) -> int:
        """Finished tasks expire by themselves; this sweeps the index entries of those
        gone and deletes the old finished tasks that have no expiry."""
        gone = 0
        cutoff = _score(updated_before)
        for key, (tenant, owner) in self._indexes("owned", 2):
            if not in_scope(tenant, scope):
                continue
            for raw, score in self._redis.zrangebyscore(key, "-inf", cutoff, withscores=True):
                task_id = raw.decode()
                answer = self._c_sweep(
                    keys=[self._key(kind, task_id) for kind in ("task", "log", "push",
                                                                 "pushorder")],
                    args=[tenant, owner, updated_before, *_TERMINAL])
                if answer[0] == 0:
                    continue
                if answer[0] == 1:
                    gone += 1
                    for index in (self._context_index(tenant, owner, answer[1].decode()),
                                  self._state_index(tenant, owner, answer[2].decode())):
                        self._c_unlist(keys=[index], args=[task_id, repr(score)])
                self._c_unlist(keys=[key], args=[task_id, repr(score)])
        # Entries whose tasks expired, or changed hands, leave the other indexes too.
        for kind, field in (("owned-ctx", "context_id"), ("owned-state", "state")):
            for key, (tenant, owner, value) in self._indexes(kind, 3):
                for raw, score in self._redis.zrangebyscore(key, "-inf", cutoff,
                                                            withscores=True):
                    found = self._redis.hmget(self._key("task", raw.decode()), "tenant",
                                              "owner", field)
                    if found != [tenant.encode(), owner.encode(), value.encode()]:
                        self._c_unlist(keys=[key], args=[raw, repr(score)])
        return gone

    def _listener_failed(self) -> None:
        # The node of the subscription may be gone (a failover): ask the cluster
        # again where the slots are before subscribing anew.
        try:
            self._redis.nodes_manager.initialize()
        except Exception:  # still down: the listener tries again
            pass
