"""A store in Redis: many workers on many hosts (``pip install a2a-flask[redis]``).

Layout, under a key prefix (``a2a`` unless the URL says ``?prefix=...``):

``{p}:task:{id}``   hash: the record's fields, the JSON snapshot and ``snap_seq``, the
                    last event it includes (later events are folded in on load, and
                    the history cut to ``history_len``); ``snap_bytes`` and
                    ``log_bytes``, the snapshot's size and the bytes logged since,
                    say when the next snapshot is due (:func:`~.base.snapshot_due`)
``{p}:log:{id}``    list: the event log, entry ``seq - 1`` is event ``seq``
``{p}:owned:{tenant and owner}``  sorted set of a caller's task ids by status time
                    (ListTasks); the pair is :func:`~.base.join_key`'d
                    (``a2a:owned:0::12:github:alice``), so no two pairs share a key
``{p}:owned-ctx:{tenant, owner and context id}``  the same, one context's tasks
``{p}:owned-state:{tenant, owner and state}``  the same, the tasks in one state
                    (an append that changes the state moves the entry)
``{p}:push:{id}``   hash: ``c:<config id>`` -> the webhook (JSON), ``d:<config id>`` -> its
                    delivery cursor ("delivered_seq failures gave_up")
``{p}:pushorder:{id}``  sorted set: config ids in creation order
``{p}:pushing``     set: tasks whose webhooks may still owe a push (the sweep reads
                    these; a finished task leaves once every webhook has had all)
``{p}:claim:{key}`` string: who does a job (a task's deliveries), with a Redis expiry
``{p}:lease:{id}``  string: the runner, with a Redis expiry (renewed by the runner)
``{p}:running``     set: tasks that have a runner (to find expired leases)
``{p}:notify``      pub/sub channel: "task id seq" after every append
``{p}:layout``      ``3`` once the indexes of 0.1.0, ``{p}:idx:{tenant}:{owner}``, are moved
                    and the context and state indexes built (see :meth:`RedisStore._upgrade`)
``{p}:upgrading``   string, with an expiry: the process upgrading the layout

Every other key holds one caller-chosen string (a task id, or a claim key made
of a fixed word and a task id), last, after a fixed word: no two of them meet.

Appends are one Lua script (compare-and-set on the sequence number, push the
events, store the snapshot when :func:`~.base.snapshot_due` says so, index,
publish), so they are atomic across hosts, and a streamed chunk costs the same
at any task length.
Each process keeps one pub/sub subscription and wakes its local waiters; a
waiter also re-reads every second, in case a message was lost on a reconnect.
Finished tasks get a Redis expiry (the task TTL), so retention costs nothing;
their index entries stay until the next purge, and an id a 0.1 client uses again
meanwhile names someone else's task: ListTasks reads the tenant and owner of
every task it returns from the task's own hash.

``?wait_replicas=N&wait_timeout_ms=M`` makes a create or an append wait (``WAIT``)
until N replicas have it before it is acknowledged (docs/workers-and-hosts.rst,
"Sentinel").  The keys are made from a task's tag and a caller's (:meth:`RedisStore._key`
and the index helpers): the Redis Cluster store (:mod:`.redis_cluster`) only changes
the tags, and :mod:`.redis_sentinel` only how the client finds its master.

ListTasks costs O(page), not O(tasks): it reads the one index that holds every
filter (the context's, else the state's, else the caller's), newest first, from
the page token's place, and counts ``totalSize`` with ``ZCOUNT``.  Only a query
naming both a context and a state reads the context's whole index.  An entry whose
task expired counts in ``totalSize`` until a list or the next purge meets it
(within a minute); a list that meets one removes it.
"""
from __future__ import annotations

import json
import os
import re
import threading
import time
from datetime import datetime
from typing import Any, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union
from urllib.parse import parse_qs, urlsplit

from ..concurrency import Worker
from ..protocol.models import TERMINAL_STATES, TaskState
from ..version import install_extra
from .base import (
    Event,
    LogEntry,
    OnceClaim,
    PushTarget,
    SequenceConflict,
    StoreError,
    StoreLimits,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    decode_page_token,
    encode_page_token,
    fold,
    in_scope,
    is_behind,
    join_key,
    kept_history,
    outages_as_unavailable,
    safe_url,
    snapshot_due,
    split_key,
)
from .serial import (EncodedEntries, dump_event, dump_target, dump_task, load_event, load_target,
                     load_task)

#: How often a waiter re-reads without a wake-up (seconds): a safety net only.
SAFETY_POLL = 1.0
#: What ``{p}:layout`` holds once the indexes of 0.1.0 are moved (``2``) and the context
#: and state indexes built (``3``) (:meth:`RedisStore._upgrade`).
LAYOUT = b"3"
#: How long a process upgrading the layout keeps others from starting to (seconds):
#: if it dies, the next process to use the store after this upgrades it.
UPGRADE_LOCK = 300
#: Tasks whose snapshot counts a process remembers (the dict is dropped whole past it).
COUNTS_KEPT = 10000
#: Index entries moved per round trip.
MOVE_BATCH = 500
#: Longest string Redis stores (and its default ``proto-max-bulk-len``), in bytes.
MAX_VALUE = 512 * 1024 * 1024
#: Error replies that mean "the server cannot serve now", not "our command is wrong".
_OUTAGE_REPLIES = ("OOM", "READONLY", "MISCONF", "LOADING", "MASTERDOWN", "CLUSTERDOWN",
                   "TRYAGAIN", "BUSY")


def _is_outage(exc: BaseException) -> bool:
    """A connection error or timeout, a reply saying the server is full or not ready,
    or a cluster still moving a slot or electing a master once redis-py's own retries
    are spent (MOVED, ASK, no node for a slot, no node reachable).  A command whose
    keys span slots (CROSSSLOT) is a bug, not an outage."""
    import redis
    from redis import exceptions

    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, exceptions.AskError,
                        exceptions.ClusterError)):
        return True
    if isinstance(exc, exceptions.RedisClusterException):
        text = str(exc).lower()
        if "not enabled" in text:  # redis+cluster:// at a Redis without cluster mode
            return False
        return ("slot" not in text
                or isinstance(exc, getattr(exceptions, "SlotNotCoveredError", ())))
    return isinstance(exc, redis.ResponseError) and str(exc).startswith(_OUTAGE_REPLIES)


def redis_errors() -> Any:
    """redis-py's exceptions module (imported when a store is used)."""
    from redis import exceptions

    return exceptions


_TERMINAL = frozenset(state.value for state in TERMINAL_STATES)


def _check_lengths(task_id: str, texts: List[str]) -> List[str]:
    """``texts`` (a snapshot, log entries), once each is known to fit in a Redis string.

    :raises StoreError: before anything is written, for one over :data:`MAX_VALUE`
        bytes, which Redis would refuse (a task's snapshot past it would leave the
        task unwritable).
    """
    for text in texts:
        if len(text) * 4 > MAX_VALUE and len(text.encode("utf-8", "surrogatepass")) > MAX_VALUE:
            raise StoreError(f"task {task_id}: a value of more than {MAX_VALUE} bytes cannot "
                             "be stored in Redis (A2A_MAX_TASK_BYTES keeps tasks below it)")
    return texts


# A run's last write releases its lease with it (a lease another process took meanwhile
# is never dropped): the lease key and the running set, the owner ('' for no release),
# the task id.
_RELEASE_LEASE = """
local function release_lease(lease, running, owner, task_id)
  if owner == '' then return end
  local holder = redis.call('GET', lease)
  if holder and holder ~= owner then return end
  if holder then redis.call('DEL', lease) end
  redis.call('SREM', running, task_id)
end
"""

# KEYS: task, log, index, channel, push, push order, context index, state index, and
# (when the events release the lease) lease, running set.  ARGV:
# expected seq, snapshot ('' keeps the stored one), state, updated_at, score, task id, ttl
# seconds for terminal tasks (0 = none), the new snapshot's bytes, the bytes logged since
# the snapshot, the history's length, the state indexes' common start (the old state's
# entry leaves its index: a state is ASCII, so Lua's length is join_key's), the task's
# tenant and owner (a task of another caller that took the id is never written),
# the owner whose lease the events release ('' for none: see _RELEASE_LEASE), events...
_APPEND = _RELEASE_LEASE + """
local task = redis.call('HMGET', KEYS[1], 'seq', 'state', 'tenant', 'owner')
local seq, old = task[1], task[2]
if not seq or task[3] ~= ARGV[12] or task[4] ~= ARGV[13] then return -1 end
if tonumber(seq) ~= tonumber(ARGV[1]) then return -2 end
for i = 15, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
local new = tonumber(ARGV[1]) + (#ARGV - 14)
redis.call('HSET', KEYS[1], 'seq', new, 'state', ARGV[3], 'updated_at', ARGV[4],
           'log_bytes', ARGV[9], 'history_len', ARGV[10])
if ARGV[2] ~= '' then
  redis.call('HSET', KEYS[1], 'snapshot', ARGV[2], 'snap_seq', new, 'snap_bytes', ARGV[8])
end
if old and old ~= ARGV[3] then
  redis.call('ZREM', ARGV[11] .. #old .. ':' .. old, ARGV[6])
end
redis.call('ZADD', KEYS[3], ARGV[5], ARGV[6])
redis.call('ZADD', KEYS[7], ARGV[5], ARGV[6])
redis.call('ZADD', KEYS[8], ARGV[5], ARGV[6])
if tonumber(ARGV[7]) > 0 then
  for i = 1, 6 do
    if i ~= 3 and i ~= 4 then redis.call('EXPIRE', KEYS[i], ARGV[7]) end
  end
end
release_lease(KEYS[9], KEYS[10], ARGV[14], ARGV[6])
redis.call('PUBLISH', KEYS[4], ARGV[6] .. ' ' .. new)
return new
"""

# KEYS: task, log, channel, push, push order, lease, running set, then the indexes (the
# caller's, its context's, its state's).  ARGV: the task hash's short fields (a JSON
# object of strings: one argument, not two per field, since redis-py's CPU per call
# grows with its arguments), the snapshot, the score, the task id, the ttl seconds of
# a terminal task (0 = none), the owner whose lease the events release ('' for none),
# the new seq, then the events (the first one and those of the run's first emission).
_CREATE = _RELEASE_LEASE + """
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
for name, value in pairs(cjson.decode(ARGV[1])) do redis.call('HSET', KEYS[1], name, value) end
redis.call('HSET', KEYS[1], 'snapshot', ARGV[2])
for i = 8, #ARGV do redis.call('RPUSH', KEYS[2], ARGV[i]) end
for i = 8, #KEYS do redis.call('ZADD', KEYS[i], ARGV[3], ARGV[4]) end
if tonumber(ARGV[5]) > 0 then
  for _, i in ipairs({1, 2, 4, 5}) do redis.call('EXPIRE', KEYS[i], ARGV[5]) end
end
release_lease(KEYS[6], KEYS[7], ARGV[6], ARGV[4])
redis.call('PUBLISH', KEYS[3], ARGV[4] .. ' ' .. ARGV[7])
return 1
"""

# _CREATE with an idempotent send's key bound and the task's lease taken in the same
# script (TaskStore.create_claimed).  KEYS: _CREATE's, then the claim.  ARGV: _CREATE's,
# then the claim's value, its ttl ms, the lease's owner ('' for none), its ttl ms.  The
# value bound already, 0 when the task exists or another owner's live lease holds its
# id (nothing written then), else _CREATE's 1.
_CREATE_CLAIMED = """
local lease_ttl, lease_owner = table.remove(ARGV), table.remove(ARGV)
local claim_ttl, value = table.remove(ARGV), table.remove(ARGV)
local claim = table.remove(KEYS)
local held = redis.call('GET', claim)
if held then return held end
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if lease_owner ~= '' then
  local holder = redis.call('GET', KEYS[6])
  if holder and holder ~= lease_owner then return 0 end
  redis.call('SET', KEYS[6], lease_owner, 'PX', lease_ttl)
  redis.call('SADD', KEYS[7], ARGV[4])
end
redis.call('SET', claim, value, 'PX', claim_ttl)
""" + _CREATE

# KEYS: lease, running set.  ARGV: owner ('' for whoever holds it), task id.
_RELEASE = """
local holder = redis.call('GET', KEYS[1])
if ARGV[1] == '' or not holder or holder == ARGV[1] then
  if holder then redis.call('DEL', KEYS[1]) end
  redis.call('SREM', KEYS[2], ARGV[2])
  return 1
end
return 0
"""

# KEYS: lease, running set.  ARGV: owner, ttl ms, task id.  Take a free lease or
# renew our own; another owner's live lease is left alone (0).
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('SADD', KEYS[2], ARGV[3])
return 1
"""

# KEYS: lease, running set.  ARGV: owner, ttl ms, task id.  A lease that expired
# but was not reaped yet (still in the running set) is taken back, as the other
# stores do; one the reaper handled stays gone.
_RENEW = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not holder and redis.call('SISMEMBER', KEYS[2], ARGV[3]) == 1 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""


# KEYS: claim.  ARGV: owner, ttl ms.  Take a free claim or renew our own.
_CLAIM = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
"""

# KEYS: claim.  ARGV: value, ttl ms.  Bind a free key, or answer what holds it.
_CLAIM_ONCE = """
local holder = redis.call('GET', KEYS[1])
if holder then return holder end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ARGV[1]
"""

# KEYS: claim.  ARGV: owner.
_UNCLAIM = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# KEYS: push.  ARGV: config id, cursor.  Only a webhook that still exists moves.
_PROGRESS = """
if redis.call('HEXISTS', KEYS[1], 'c:' .. ARGV[1]) == 0 then return 0 end
return redis.call('HSET', KEYS[1], 'd:' .. ARGV[1], ARGV[2])
"""


# KEYS: task, push, pushing set.  ARGV: task id, then the terminal states.  A task
# that is gone, has no webhook left, or is finished with every webhook served (or
# given up) leaves the pushing set: the sweep reads only tasks that may still owe
# a push.  One script: a webhook registered meanwhile (one MULTI) is seen.
_SETTLE = """
local fields = redis.call('HGETALL', KEYS[2])
local seq = redis.call('HGET', KEYS[1], 'seq')
if seq and #fields > 0 then
  local state = redis.call('HGET', KEYS[1], 'state')
  local finished = false
  for i = 2, #ARGV do if state == ARGV[i] then finished = true end end
  if not finished then return 0 end
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 2) == 'd:' then
      local delivered, gave_up = string.match(fields[i + 1], '^(%d+) %d+ (%d)$')
      if gave_up ~= '1' and tonumber(delivered) < tonumber(seq) then return 0 end
    end
  end
end
return redis.call('SREM', KEYS[3], ARGV[1])
"""


# KEYS: task, log, push, push order, index, the task's context index.  ARGV: task id,
# the index's tenant and owner, updated_before, the state indexes' common start, the
# context id, then the terminal states.  One index entry at purge: the task goes if it
# is this index's, terminal and old enough, its context and state entries with it; the
# entry goes with it, or alone if its task is gone (expired) or its id now names
# another caller's task (an id used again after expiry).  1 if the entry went.
_SWEEP = """
local task = redis.call('HMGET', KEYS[1], 'tenant', 'owner', 'state', 'updated_at',
                        'context_id')
if task[3] and task[1] == ARGV[2] and task[2] == ARGV[3] then
  if task[4] >= ARGV[4] then return 0 end
  local finished = false
  for i = 7, #ARGV do if task[3] == ARGV[i] then finished = true end end
  if not finished then return 0 end
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  if task[5] == ARGV[6] then redis.call('ZREM', KEYS[6], ARGV[1]) end
  redis.call('ZREM', ARGV[5] .. #task[3] .. ':' .. task[3], ARGV[1])
end
return redis.call('ZREM', KEYS[5], ARGV[1])
"""

# KEYS: task, a context or state index.  ARGV: task id, the index's tenant and owner,
# the task field the index is by ('context_id' or 'state'), its value.  An entry
# whose task is gone, or is no longer this index's, leaves it; 1 if it went.
_UNLIST = """
local task = redis.call('HMGET', KEYS[1], 'tenant', 'owner', ARGV[4])
if task[1] == ARGV[2] and task[2] == ARGV[3] and task[3] == ARGV[5] then return 0 end
return redis.call('ZREM', KEYS[2], ARGV[1])
"""


def _glob(text: str) -> str:
    """``text`` matched literally in a SCAN pattern."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", text)


def _cursor(target: PushTarget) -> str:
    return f"{target.delivered_seq} {target.failures} {int(target.gave_up)}"


def _score(timestamp: str) -> float:
    """A sorted-set score from our canonical timestamp (milliseconds since the epoch)."""
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp() * 1000


class Creation(NamedTuple):
    """What one create writes (:meth:`RedisStore._creation`), in the store's encoding."""

    record: TaskRecord
    context_id: str
    state: str
    #: The task hash's fields.
    fields: Dict[str, str]
    snapshot: str
    #: The index score (the status time).
    score: float
    #: Seconds the finished task is kept (0: for ever, or not finished).
    ttl: int
    release_owner: str
    seq: int
    #: The log entries, encoded.
    logged: List[str]


@outages_as_unavailable((Exception,), _is_outage)
class RedisStore(TaskStore):
    """See the module docstring.  ``url`` is ``redis://host:port/db[?prefix=name]``."""

    #: Whether an idempotent send's key is bound in the script that makes its task
    #: (:meth:`create_claimed`): one server, where a script may name any key.  A key
    #: layout that puts the claim in another slot than the task (Redis Cluster) sets
    #: it False, and the binding and the task are two steps (docs/stores.rst).
    claims_with_tasks: bool = True

    def __init__(self, url: str, *, task_ttl: float = 0.0,
                 limits: Optional[StoreLimits] = None) -> None:
        try:
            import redis
        except ImportError:
            raise StoreError("the redis store needs the redis package: "
                             + install_extra("redis")) from None
        limits = limits or StoreLimits()
        query = parse_qs(urlsplit(url).query)
        self.prefix = query.pop("prefix", ["a2a"])[0]
        self.task_ttl = task_ttl
        self.limits = limits
        try:
            #: Replicas an acknowledged create or append waits for (WAIT; 0: none).
            self.wait_replicas = int(query.pop("wait_replicas", ["0"])[0])
            #: How long it waits for them (milliseconds) before answering "unavailable".
            self.wait_timeout_ms = int(query.pop("wait_timeout_ms", ["1000"])[0])
            if self.wait_replicas < 0 or self.wait_timeout_ms <= 0:
                raise ValueError("wait_replicas must be 0 or more, wait_timeout_ms above 0")
            # Nothing is sent yet (the first call does, see prepare): the app starts
            # while Redis is down; a URL redis-py cannot read stops it here.
            # Typed Any: redis-py's return types are unions of sync and async forms.
            self._redis: Any = self._connect(url, query, limits.pool_size)
            #: A running task's own writes and lease renewals: a pool readers never use.
            self._writer: Any = self._connect(url, query, limits.writer_pool_size)
        except (ValueError, redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            raise StoreError(f"cannot use the redis store URL {safe_url(url)}: {exc}") from None
        self.prepared = False
        self._append = self._redis.register_script(_APPEND)
        self._create = self._redis.register_script(_CREATE)
        self._create_claimed = self._redis.register_script(_CREATE_CLAIMED)
        self._renew = self._redis.register_script(_RENEW)
        self._release = self._redis.register_script(_RELEASE)
        self._acquire = self._redis.register_script(_ACQUIRE)
        self._claim = self._redis.register_script(_CLAIM)
        self._unclaim = self._redis.register_script(_UNCLAIM)
        self._claim_once = self._redis.register_script(_CLAIM_ONCE)
        self._progress = self._redis.register_script(_PROGRESS)
        self._settle = self._redis.register_script(_SETTLE)
        self._sweep = self._redis.register_script(_SWEEP)
        self._unlist = self._redis.register_script(_UNLIST)
        self._indexed = False  # the context and state indexes are whole (layout 3)
        #: (seq, snap_seq, snap_bytes, log_bytes) of tasks this process wrote last.
        self._written: Dict[str, Tuple[int, int, int, int]] = {}
        self._listener_lock = threading.Lock()
        self._listener_pid = 0

    #: Whether indexes of 0.1.0 may be left to move (:meth:`_upgrade`).
    legacy = True

    def _connect(self, url: str, query: Dict[str, List[str]], size: int) -> Any:
        """A client of at most ``size`` connections for the store's URL (``query``:
        the options the store did not take)."""
        import redis

        # A blocking pool: when every connection is busy a caller waits (up to the
        # timeout) for one instead of failing at once (redis-py's default pool).
        timeout = self.limits.timeout
        pool = redis.BlockingConnectionPool.from_url(
            url.split("?", 1)[0], max_connections=size, timeout=timeout,
            socket_connect_timeout=timeout, socket_timeout=timeout, health_check_interval=30)
        return redis.Redis(connection_pool=pool)

    def prepare(self) -> None:
        """The first call's work: bring an older store's layout up to date
        (:meth:`_upgrade`); opening the store sends nothing, so the app starts
        while Redis is down."""
        self._upgrade()

    # ------------------------------------------------------------ keys

    # Every key is made here, from a task's tag (:meth:`_task_tag`) or a caller's
    # (:meth:`_owner_tag`): the cluster store (redis_cluster.py) changes only the tags,
    # so that each task's keys share a hash slot, and each caller's indexes another.

    def _task_tag(self, task_id: str) -> str:
        """What names a task in its keys: the id itself here."""
        return task_id

    def _task_of(self, tag: str) -> str:
        """The task id a :meth:`_task_tag` names."""
        return tag

    def _owner_tag(self, tenant: str, owner: str) -> str:
        """What names a caller in its indexes: the pair joined so that no other pair
        makes it."""
        return join_key(tenant, owner)

    def _index_parts(self, name: str) -> List[str]:
        """The tenant, owner (and context or state) an index's name after its kind
        holds; ValueError for a name no index has."""
        return split_key(name)

    def _key(self, kind: str, task_id: str) -> str:
        return f"{self.prefix}:{kind}:{self._task_tag(task_id)}"

    def _index(self, tenant: str, owner: str) -> str:
        """A caller's index."""
        return f"{self.prefix}:owned:{self._owner_tag(tenant, owner)}"

    def _context_index(self, tenant: str, owner: str, context_id: str) -> str:
        return f"{self.prefix}:owned-ctx:{self._owner_tag(tenant, owner)}:{join_key(context_id)}"

    def _state_indexes(self, tenant: str, owner: str) -> str:
        """The start every state index of a caller shares (the state's part follows)."""
        return f"{self.prefix}:owned-state:{self._owner_tag(tenant, owner)}:"

    def _state_index(self, tenant: str, owner: str, state: str) -> str:
        return self._state_indexes(tenant, owner) + join_key(state)

    def _claim_key(self, key: str) -> str:
        """A claim's key (``key`` is a fixed word and a task id: one key, any slot)."""
        return f"{self.prefix}:claim:{key}"

    def _old_index(self, tenant: str, owner: str) -> str:
        """The index of 0.1.0, which callers whose ids nest shared (``:github`` +
        ``alice`` and ``""`` + ``github:alice``)."""
        return f"{self.prefix}:idx:{tenant}:{owner}"

    @property
    def _layout(self) -> str:
        return f"{self.prefix}:layout"

    @property
    def _upgrading(self) -> str:
        return f"{self.prefix}:upgrading"

    @property
    def _channel(self) -> str:
        return f"{self.prefix}:notify"

    @property
    def _running(self) -> str:
        return f"{self.prefix}:running"

    @property
    def _pushing(self) -> str:
        return f"{self.prefix}:pushing"

    # ------------------------------------------------------------ records

    def _record(self, task_id: str, fields: Dict[bytes, bytes]) -> TaskRecord:
        """A record from the task hash: its snapshot plus the events logged after it."""
        def text(name: str) -> str:
            return fields[name.encode()].decode()

        seq = int(text("seq"))
        task = load_task(text("snapshot"))
        snap_seq = int(fields.get(b"snap_seq", seq))  # absent: written before lazy snapshots
        if snap_seq < seq:
            # Log entry i holds event i + 1; entries only ever get added, so the
            # range is exactly the events after the snapshot, up to this seq.
            raw = self._redis.lrange(self._key("log", task_id), snap_seq, seq - 1)
            history_len = fields.get(b"history_len")
            task = kept_history(fold(task, (load_event(item.decode()) for item in raw)),
                                None if history_len is None else int(history_len))
        return TaskRecord(task, seq, text("tenant"), text("owner"), text("dialect"),
                          text("created_at"))

    def create(self, record: TaskRecord, first_event: Event) -> None:
        self._create_task(record, [first_event], record, "")

    def create_with(self, record: TaskRecord, first_event: Event, events: List[Event],
                    after: TaskRecord, release_owner: Optional[str] = None) -> int:
        self._create_task(record, [first_event, *events], after, release_owner or "")
        return after.seq

    def create_claimed(self, record: TaskRecord, first_event: Event, claim: OnceClaim,
                       lease_owner: Optional[str] = None, lease_ttl: float = 0.0) -> str:
        if not self.claims_with_tasks:
            return super().create_claimed(record, first_event, claim, lease_owner, lease_ttl)
        made = self._creation(record, [first_event], record, "")
        keys, args = self._creation_script(made)
        held = self._create_claimed(
            keys=[*keys, self._claim_key(claim.key)],
            args=[*args, claim.value, max(1, int(claim.ttl * 1000)), lease_owner or "",
                  max(1, int(lease_ttl * 1000))],
            client=self._writer)
        if held == 0:
            raise SequenceConflict(record.task.id)
        if held != 1:
            return held.decode() if isinstance(held, bytes) else str(held)
        self._remember(record.task.id, (record.seq, record.seq, len(made.snapshot), 0))
        return claim.value

    def _create_task(self, record: TaskRecord, events: List[Event], after: TaskRecord,
                     release_owner: str) -> None:
        """One write (:meth:`_run_create`): the task as ``after`` (its snapshot), its log
        ``events``, its index entries, and the lease ``release_owner`` lets go of (if any)."""
        made = self._creation(record, events, after, release_owner)
        if not self._run_create(made):
            raise SequenceConflict(after.task.id)
        if after.state.terminal:
            self._written.pop(after.task.id, None)
        else:
            self._remember(after.task.id, (after.seq, after.seq, len(made.snapshot), 0))

    def _creation(self, record: TaskRecord, events: List[Event], after: TaskRecord,
                  release_owner: str) -> "Creation":
        """What a create writes: the task as ``after``, its log ``events``, the lease."""
        task = after.task
        snapshot = _check_lengths(task.id, [dump_task(task)])[0]
        state = after.state
        updated = after.outline.status.timestamp or record.created_at
        fields = {"tenant": record.tenant, "owner": record.owner, "dialect": record.dialect,
                  "context_id": task.context_id, "state": state.value,
                  "created_at": record.created_at, "updated_at": updated,
                  "seq": str(after.seq), "snap_seq": str(after.seq),
                  "snap_bytes": str(len(snapshot)), "log_bytes": "0",
                  "history_len": str(len(after.outline.history))}
        ttl = int(self.task_ttl) if state.terminal and self.task_ttl else 0
        return Creation(record, task.context_id, state.value, fields, snapshot, _score(updated),
                        ttl, release_owner, after.seq,
                        _check_lengths(task.id, [dump_event(e) for e in events]))

    def _creation_script(self, made: "Creation") -> Tuple[List[str], List[Any]]:
        """The keys and arguments of :data:`_CREATE` for ``made``."""
        task_id, tenant, owner = made.record.task_id, made.record.tenant, made.record.owner
        return ([self._key("task", task_id), self._key("log", task_id), self._channel,
                 self._key("push", task_id), self._key("pushorder", task_id),
                 self._key("lease", task_id), self._running,
                 self._index(tenant, owner),
                 self._context_index(tenant, owner, made.context_id),
                 self._state_index(tenant, owner, made.state)],
                [json.dumps(made.fields), made.snapshot, made.score, task_id, made.ttl,
                 made.release_owner, made.seq, *made.logged])

    def _run_create(self, made: "Creation") -> bool:
        """The create's write (one script); False if the task exists."""
        keys, args = self._creation_script(made)
        return bool(self._write(self._create, keys=keys, args=args))

    def _write(self, script: Any, keys: List[str], args: List[Any]) -> Any:
        """A task's write (a create or an append script), through the writers' pool;
        with ``wait_replicas``, acknowledged only once that many replicas have it."""
        if not self.wait_replicas:
            return script(keys=keys, args=args, client=self._writer)
        # WAIT counts the writes of its own connection: one pipeline, one connection.
        for loaded in (False, True):
            pipe = self._writer.pipeline(transaction=False)
            pipe.evalsha(script.sha, len(keys), *keys, *args)
            pipe.wait(self.wait_replicas, self.wait_timeout_ms)
            try:
                answer, replicas = pipe.execute()
                break
            except redis_errors().NoScriptError:
                if loaded:
                    raise
                self._writer.script_load(script.script)  # a new (or restarted) master
        if replicas < self.wait_replicas:
            raise redis_errors().ResponseError(
                f"MASTERDOWN the write reached {replicas} of {self.wait_replicas} replicas "
                f"within {self.wait_timeout_ms} ms (wait_replicas)")
        return answer

    def _remember(self, task_id: str, counts: Tuple[int, int, int, int]) -> None:
        """Keep a task's (seq, snap_seq, snap_bytes, log_bytes) as this process wrote them:
        the next append here needs no read first (see :meth:`_counts`)."""
        if len(self._written) >= COUNTS_KEPT:
            self._written.clear()
        self._written[task_id] = counts

    def _counts(self, task_id: str, expected_seq: int) -> Tuple[int, int, int]:
        """(snap_seq, snap_bytes, log_bytes) of a task at ``expected_seq``: remembered
        when this process made that head (any other write moved the head, so the
        numbers are exact), else read."""
        kept = self._written.get(task_id)
        if kept is not None and kept[0] == expected_seq:
            return kept[1], kept[2], kept[3]
        seq, snap_seq, snap_bytes, log_bytes = self._writer.hmget(  # appends: the writers' pool
            self._key("task", task_id), "seq", "snap_seq", "snap_bytes", "log_bytes")
        if seq is None:
            raise SequenceConflict(task_id)
        # A task written before lazy snapshots has no snap_seq: a snapshot is due.
        return (-1 if snap_seq is None else int(snap_seq)), int(snap_bytes or 0), \
            int(log_bytes or 0)

    def load(self, task_id: str) -> Optional[TaskRecord]:
        fields = self._redis.hgetall(self._key("task", task_id))
        return self._record(task_id, fields) if fields else None

    def head(self, task_id: str) -> Optional[Tuple[int, TaskState]]:
        seq, state = self._redis.hmget(self._key("task", task_id), "seq", "state")
        return (int(seq), TaskState(state.decode())) if seq is not None else None

    def append(self, task_id: str, expected_seq: int, events: List[Event],
               record: TaskRecord) -> int:
        return self._append_events(task_id, expected_seq, events, record, "")

    def append_released(self, task_id: str, expected_seq: int, events: List[Event],
                        record: TaskRecord, owner: str) -> int:
        return self._append_events(task_id, expected_seq, events, record, owner)

    def _append_events(self, task_id: str, expected_seq: int, events: List[Event],
                       record: TaskRecord, release_owner: str) -> int:
        snap_seq, size, since = self._counts(task_id, expected_seq)
        last = expected_seq + len(events)
        logged = _check_lengths(task_id, [dump_event(e) for e in events])
        # Bytes, as the file stores count them: a message to an open task is logged
        # alone, and the snapshot is stored again only once the bytes logged since the
        # last one pay for it (a task written before the counts starts them at 0).
        since += sum(len(text) for text in logged)
        due = snap_seq < 0 or snapshot_due(snap_seq, last, events, logged=since,
                                           snapshot_size=size)
        snapshot = _check_lengths(task_id, [dump_task(record.task)])[0] if due else ""
        if due:
            snap_seq, size, since = last, len(snapshot), 0
        state = record.state
        updated = record.outline.status.timestamp or record.created_at
        ttl = int(self.task_ttl) if state.terminal and self.task_ttl else 0
        seq = self._run_append(task_id, expected_seq, record, snapshot, state.value, updated,
                               ttl, size, since, release_owner, logged)
        if seq < 0:
            self._written.pop(task_id, None)
            raise SequenceConflict(task_id)
        if state.terminal:
            self._written.pop(task_id, None)
        else:
            self._remember(task_id, (int(seq), snap_seq, size, since))
        return int(seq)

    def _run_append(self, task_id: str, expected_seq: int, record: TaskRecord, snapshot: str,
                    state: str, updated: str, ttl: int, size: int, since: int,
                    release_owner: str, logged: List[str]) -> int:
        """The append's write (one script): the new seq, or < 0 for a conflict."""
        tenant, owner = record.tenant, record.owner
        return int(self._write(
            self._append,
            keys=[self._key("task", task_id), self._key("log", task_id),
                  self._index(tenant, owner), self._channel,
                  self._key("push", task_id), self._key("pushorder", task_id),
                  self._context_index(tenant, owner, record.task.context_id),
                  self._state_index(tenant, owner, state),
                  # The lease's keys only where the events release it: each argument
                  # costs redis-py CPU, and a stream appends many times.
                  *((self._key("lease", task_id), self._running) if release_owner else ())],
            args=[expected_seq, snapshot, state, updated, _score(updated), task_id,
                  ttl, size, since, len(record.outline.history),
                  self._state_indexes(tenant, owner), tenant, owner, release_owner, *logged]))

    def read(self, task_id: str, after_seq: int) -> Sequence[LogEntry]:
        start = max(after_seq, 0)
        raw = self._redis.lrange(self._key("log", task_id), start, start + self.read_slice - 1)
        return EncodedEntries(range(start + 1, start + 1 + len(raw)), raw) if raw else []

    # ------------------------------------------------------------ wake-ups

    def _ensure_listener(self) -> None:
        """One pub/sub subscription per process, fanning out to local waiters."""
        pid = os.getpid()
        if self._listener_pid == pid:
            return
        with self._listener_lock:
            if self._listener_pid == pid:
                return
            self._listener_pid = pid
            Worker(self._listen, name="a2a-redis-listener")

    def _listen(self) -> None:
        while not self.closed and self._listener_pid == os.getpid():
            try:
                pubsub = self._redis.pubsub(ignore_subscribe_messages=True)
                try:
                    pubsub.subscribe(self._channel)
                    # Timed reads (not listen()): the connection's socket timeout
                    # would otherwise end an idle subscription every few seconds.
                    while not self.closed:
                        message = pubsub.get_message(timeout=SAFETY_POLL)
                        if message is not None and message["type"] == "message":
                            task_id = message["data"].decode().rsplit(" ", 1)[0]
                            self.notifier.notify(task_id)
                finally:
                    pubsub.close()
            except Exception:  # reconnect; waiters re-read meanwhile (SAFETY_POLL)
                time.sleep(0.5)
                self._listener_failed()

    def _listener_failed(self) -> None:
        """After the subscription failed, before it is made again."""

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        self._ensure_listener()

        def passed() -> bool:
            seq, state = self._redis.hmget(self._key("task", task_id), "seq", "state")
            return seq is None or int(seq) > after_seq or state.decode() in _TERMINAL

        # Wake-ups come from the subscription; the clock as "version" makes the
        # waiter re-read every SAFETY_POLL too, in case a message was lost.
        self.notifier.wait_polling(task_id, passed, time.monotonic, timeout, SAFETY_POLL)

    # ------------------------------------------------------------ listing

    def list_tasks(self, query: TaskQuery) -> TaskPage:
        tenant, owner = query.tenant, query.owner
        if self.legacy and self._redis.exists(self._old_index(tenant, owner)):
            # Written by a 0.1.0 process (a rolling upgrade), or not moved yet.
            self._move_index(self._old_index(tenant, owner))
        # The one index that applies the most filters: a context's, a state's, or the
        # caller's; ``by`` names the task field it is by, and its value.
        index, by = self._index(tenant, owner), None
        if self._layout_done():
            if query.context_id:
                by = ("context_id", query.context_id)
                index = self._context_index(tenant, owner, query.context_id)
            elif query.state is not None:
                by = ("state", query.state.value)
                index = self._state_index(tenant, owner, query.state.value)
        low = _score(query.updated_after) if query.updated_after else float("-inf")
        filters = {name for name, wanted in (("context_id", query.context_id),
                                             ("state", query.state)) if wanted}
        # The index alone applies every filter but the time: ZCOUNT is the total.
        counted = filters <= {by[0] if by else ""}
        cursor = decode_page_token(query.page_token) if query.page_token else None
        its_tenant, its_owner = tenant.encode(), owner.encode()

        def matches(fields: List[Optional[bytes]]) -> bool:
            task_tenant, task_owner, context_id, state, updated = fields
            if state is None or task_tenant != its_tenant or task_owner != its_owner:
                return False
            return ((not query.context_id or context_id == query.context_id.encode())
                    and (query.state is None or state == query.state.value.encode())
                    and (not query.updated_after or bytes(updated or b"").decode()
                         >= query.updated_after))

        total = self._redis.zcount(index, low, "+inf") if counted else 0
        page: List[Tuple[str, str]] = []  # (updated_at, task id), newest first
        high = _score(cursor[0]) if cursor else float("inf")
        for batch in self._newest_first(index, high, low, query.page_size + 1):
            pipe = self._redis.pipeline(transaction=False)
            for task_id, _ in batch:
                pipe.hmget(self._key("task", task_id), "tenant", "owner", "context_id",
                           "state", "updated_at")
            found = []
            for (task_id, score), fields in zip(batch, pipe.execute()):
                if not matches(fields):
                    # Gone, or no longer this index's (expired, its id taken by another
                    # caller, its state moved on): a stale entry leaves the index.
                    if counted and self._drop_stale(index, by, task_id, tenant, owner, score):
                        total -= 1
                    continue
                place = (fields[4].decode(), task_id)
                if cursor is None or place < cursor:
                    found.append(place)
                if not counted:
                    total += 1
            page.extend(sorted(found, reverse=True))
            if counted and len(page) > query.page_size:
                break  # (uncounted, the whole index is read to count)
        more = len(page) > query.page_size
        page = page[:query.page_size]
        pipe = self._redis.pipeline(transaction=False)
        for _, task_id in page:
            pipe.hgetall(self._key("task", task_id))
        fetched = zip((task_id for _, task_id in page), pipe.execute() if page else [])
        # Read again, so checked again (the id may have changed hands in between);
        # a task that is gone has no fields.
        records = [self._record(task_id, fields) for task_id, fields in fetched
                   if fields.get(b"tenant") == its_tenant and fields.get(b"owner") == its_owner]
        return TaskPage(records, max(total, 0),
                        encode_page_token(records[-1]) if more and records else "")

    def _newest_first(self, index: str, high: float, low: float,
                      first: int) -> Iterator[List[Tuple[str, float]]]:
        """The ids in ``index`` scored from ``high`` down to ``low`` (both included),
        with their scores, newest first, in batches (the first of ``first`` ids, each
        next twice the last).

        A batch goes on from where the last ended, by score and, among ties, by how
        many of the last score were read (Redis orders ties by member, as the page
        token's ``(updated_at, id)`` does)."""
        size, top, skip = first, "+inf" if high == float("inf") else repr(high), 0
        while True:
            batch = self._redis.zrevrangebyscore(index, top, low, start=skip, num=size,
                                                 withscores=True)
            if batch:
                yield [(member.decode(), score) for member, score in batch]
            if len(batch) < size:
                return
            last = batch[-1][1]
            tied = sum(1 for _, score in batch if score == last)
            skip = skip + tied if top == repr(last) else tied
            size, top = size * 2, repr(last)

    def _drop_stale(self, index: str, by: Optional[Tuple[str, str]], task_id: str, tenant: str,
                    owner: str, score: float) -> bool:
        """Take a stale entry (read with ``score``) out of ``index`` (by the task field and
        value ``by``, or the caller's index when None); False if it was not stale after
        all (the task changed between the read and now, and is listed next time)."""
        key = self._key("task", task_id)
        if by is None:  # the caller's index: the purge's script, with no cutoff
            return bool(self._sweep(keys=[key, self._key("log", task_id), self._key(
                "push", task_id), self._key("pushorder", task_id), index, index],
                args=[task_id, tenant, owner, "", "", "", *_TERMINAL]))
        return bool(self._unlist(keys=[key, index], args=[task_id, tenant, owner, *by]))

    def _layout_done(self) -> bool:
        """Whether the context and state indexes are whole (read once they are)."""
        if not self._indexed:
            self._indexed = self._redis.get(self._layout) == LAYOUT
        return self._indexed

    # ------------------------------------------------------------ push configs

    def task_ids(self) -> List[str]:
        start = f"{self.prefix}:task:"
        keys = self._redis.scan_iter(match=_glob(start) + "*", count=1000)
        # SCAN may return a key more than once (the keyspace grew meanwhile).
        return list(dict.fromkeys(self._task_of(key.decode()[len(start):]) for key in keys))

    def put_push_target(self, task_id: str, target: PushTarget) -> None:
        key = self._key("push", task_id)
        order = self._key("pushorder", task_id)
        config_id = target.config.id
        pipe = self._redis.pipeline()
        pipe.hset(key, mapping={"c:" + config_id: dump_target(target),
                                "d:" + config_id: _cursor(target)})
        pipe.zadd(order, {config_id: self._redis.time()[0]}, nx=True)
        pipe.sadd(self._pushing, task_id)
        pipe.ttl(self._key("task", task_id))
        *_, task_ttl = pipe.execute()
        if task_ttl and task_ttl > 0:  # a finished task: its webhooks go with it
            self._redis.expire(key, task_ttl)
            self._redis.expire(order, task_ttl)

    def push_targets(self, task_id: str) -> List[PushTarget]:
        ids = [i.decode() for i in self._redis.zrange(self._key("pushorder", task_id), 0, -1)]
        if not ids:
            return []
        fields = self._redis.hgetall(self._key("push", task_id))
        return [target for target in (self._target(fields, config_id) for config_id in ids)
                if target is not None]

    @staticmethod
    def _target(fields: Dict[bytes, bytes], config_id: str) -> Optional[PushTarget]:
        text = fields.get(("c:" + config_id).encode())
        if text is None:
            return None
        delivered, failures, gave_up = fields.get(("d:" + config_id).encode(), b"0 0 0").split()
        return load_target(text.decode(), int(delivered), int(failures), gave_up == b"1")

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        pipe = self._redis.pipeline()
        pipe.hdel(self._key("push", task_id), "c:" + config_id, "d:" + config_id)
        pipe.zrem(self._key("pushorder", task_id), config_id)
        pipe.execute()

    def record_push_progress(self, task_id: str, config_id: str, delivered_seq: int,
                             failures: int, gave_up: bool) -> None:
        self._progress(keys=[self._key("push", task_id)],
                       args=[config_id, f"{delivered_seq} {failures} {int(gave_up)}"])

    def push_backlog(self) -> List[str]:
        task_ids = [i.decode() for i in self._redis.smembers(self._pushing)]
        if not task_ids:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for task_id in task_ids:
            pipe.hmget(self._key("task", task_id), "seq", "state")
            pipe.hgetall(self._key("push", task_id))
        answers = pipe.execute()
        behind, settled = [], []
        for task_id, (seq, state), fields in zip(task_ids, answers[::2], answers[1::2]):
            targets = [self._target(fields, key[2:].decode()) for key in fields
                       if key.startswith(b"c:")]
            if seq is not None and any(t is not None and is_behind(t, int(seq))
                                       for t in targets):
                behind.append(task_id)
            elif seq is None or not targets or state.decode() in _TERMINAL:
                settled.append(task_id)  # gone, no webhook left, or owes nothing more
        if settled:
            # The script re-checks each one: the sweep's read may be stale by now.
            pipe = self._redis.pipeline(transaction=False)
            for task_id in settled:
                self._settle(keys=[self._key("task", task_id), self._key("push", task_id),
                                   self._pushing], args=[task_id, *_TERMINAL], client=pipe)
            pipe.execute()
        return behind

    # ------------------------------------------------------------ claims

    def claim(self, key: str, owner: str, ttl: float) -> bool:
        return bool(self._claim(keys=[self._claim_key(key)],
                                args=[owner, max(1, int(ttl * 1000))]))

    def claim_once(self, key: str, value: str, ttl: float) -> str:
        held = self._claim_once(keys=[self._claim_key(key)],
                                args=[value, max(1, int(ttl * 1000))])
        return held.decode() if isinstance(held, bytes) else str(held)

    def release_claim(self, key: str, owner: str) -> None:
        self._unclaim(keys=[self._claim_key(key)], args=[owner])

    # ------------------------------------------------------------ leases

    def acquire_lease(self, task_id: str, owner: str, ttl: float) -> bool:
        # One script: set-if-absent, or renew our own (an expired lease is absent).
        return bool(self._acquire(keys=[self._key("lease", task_id), self._running],
                                  args=[owner, max(1, int(ttl * 1000)), task_id],
                                  client=self._writer))

    def renew_leases(self, owner: str, task_ids: List[str], ttl: float) -> None:
        for task_id in task_ids:
            self._renew(keys=[self._key("lease", task_id), self._running],
                        args=[owner, int(ttl * 1000), task_id], client=self._writer)

    def release_lease(self, task_id: str, owner: Optional[str]) -> None:
        # One script: a lease another process took meanwhile is never dropped.
        self._release(keys=[self._key("lease", task_id), self._running],
                      args=[owner or "", task_id], client=self._writer)

    def expired_leases(self) -> List[str]:
        running = [i.decode() for i in self._redis.smembers(self._running)]
        if not running:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for task_id in running:
            pipe.exists(self._key("lease", task_id))
        return [task_id for task_id, alive in zip(running, pipe.execute()) if not alive]

    # ------------------------------------------------------------ retention

    def purge(self, updated_before: str, scope: Optional[str] = None) -> int:
        """Finished tasks expire by themselves; this sweeps their index entries (and
        deletes what has no expiry: tasks that finished before the TTL was set)."""
        gone = 0
        cutoff = _score(updated_before)
        for key, (tenant, owner) in self._indexes("owned", 2):
            if not in_scope(tenant, scope):
                continue
            for raw in self._redis.zrangebyscore(key, "-inf", cutoff):
                task_id = raw.decode()
                context_id = self._redis.hget(self._key("task", task_id), "context_id")
                context_id = "" if context_id is None else context_id.decode()
                gone += self._sweep(
                    keys=[*(self._key(kind, task_id) for kind in ("task", "log", "push",
                                                                    "pushorder")),
                          key, self._context_index(tenant, owner, context_id)],
                    args=[task_id, tenant, owner, updated_before,
                          self._state_indexes(tenant, owner), context_id, *_TERMINAL])
        # Entries whose tasks expired, or changed hands, leave the other indexes too.
        for kind, field in (("owned-ctx", "context_id"), ("owned-state", "state")):
            for key, (tenant, owner, value) in self._indexes(kind, 3):
                for raw in self._redis.zrangebyscore(key, "-inf", cutoff):
                    self._unlist(keys=[self._key("task", raw.decode()), key],
                                 args=[raw, tenant, owner, field, value])
        return gone

    def _indexes(self, kind: str, parts: int) -> Iterator[Tuple[bytes, List[str]]]:
        """Every index of one kind under this prefix, with the parts of its name."""
        start = f"{self.prefix}:{kind}:"
        for key in self._redis.scan_iter(match=_glob(start) + "*", count=1000):
            try:
                named = self._index_parts(key.decode()[len(start):])
            except ValueError:
                continue  # not ours: a key of a store whose prefix starts with ours
            if len(named) == parts:
                yield key, named

    # ------------------------------------------------------------ upgrading the layout

    def _upgrade(self) -> None:
        """Bring the layout to :data:`LAYOUT`, once per store.

        Layout 2 moved the indexes of 0.1.0, ``{p}:idx:{tenant}:{owner}``, which
        may hold the tasks of several callers (``:github`` + ``alice`` and ``""`` +
        ``github:alice``): each entry goes to the index of its task's own tenant
        and owner, read from the task's hash (:meth:`_move_index`).  Layout 3 adds
        the context and state indexes, built from the callers' indexes.  The first
        process to use the store upgrades it; others using it meanwhile go on at
        once: each ListTasks first moves the old index its query names, if one is
        left, and filters by reading the caller's index until the layout is 3 (so
        nothing is missing while the upgrade runs, or while a 0.1.0 process still
        writes during a rolling upgrade).  Both steps are idempotent: an upgrade
        cut short is finished by the next process to use the store.
        """
        layout = self._redis.get(self._layout)
        if layout == LAYOUT:
            return
        if not self._redis.set(self._upgrading, "1", nx=True, ex=UPGRADE_LOCK):
            return  # another process upgrades it
        if layout != b"2":
            for key in self._redis.scan_iter(match=_glob(f"{self.prefix}:idx:") + "*",
                                             count=1000):
                self._move_index(key)
        for key, _ in self._indexes("owned", 2):
            done = 0
            while True:
                ids = self._redis.zrange(key, done, done + MOVE_BATCH - 1)
                if not ids:
                    break
                self._reindex(ids)
                done += len(ids)
        self._redis.set(self._layout, LAYOUT)
        self._redis.delete(self._upgrading)

    def _reindex(self, ids: List[bytes]) -> None:
        """Put each task in the indexes of its tenant and owner (the caller's, its
        context's, its state's), read from its hash; a task that is gone in none."""
        pipe = self._redis.pipeline(transaction=False)
        for task_id in ids:
            pipe.hmget(self._key("task", task_id.decode()), "tenant", "owner", "updated_at",
                       "context_id", "state")
        rows = pipe.execute()
        pipe = self._redis.pipeline(transaction=False)
        for task_id, (tenant, owner, updated, context_id, state) in zip(ids, rows):
            if tenant is None:
                continue
            tenant, owner = tenant.decode(), owner.decode()
            entry = {task_id: _score(updated.decode())}
            pipe.zadd(self._index(tenant, owner), entry)
            pipe.zadd(self._context_index(tenant, owner, context_id.decode()), entry)
            pipe.zadd(self._state_index(tenant, owner, state.decode()), entry)
        pipe.execute()

    def _move_index(self, old: Union[str, bytes]) -> None:
        """Move the entries of an index of 0.1.0 to the indexes of their tasks'
        own tenants and owners; entries of tasks that are gone are dropped."""
        while True:
            ids = self._redis.zrange(old, 0, MOVE_BATCH - 1)
            if not ids:
                return  # (Redis deletes a sorted set when its last entry goes)
            # Added before removed: an entry is always in one index or the other.
            self._reindex(ids)
            self._redis.zrem(old, *ids)

    def close(self) -> None:
        super().close()
        for client in (self._redis, self._writer):
            client.close()
            try:
                client.connection_pool.disconnect()
            except (AttributeError, OSError):
                # redis-py before 4.6 races here with a connection that the listener
                # thread disconnects at the same moment (its socket is gone midway).
                pass
