"""Idempotent sends: a send's ``Idempotency-Key``, bound once in the store to its task.

A send that carries the header binds the caller's key (scoped by agent, tenant and
owner, hashed) to its request's fingerprint and the task it makes: for a new task in
the write that makes it, before the agent runs
(:meth:`~a2a_flask.stores.base.TaskStore.create_claimed`, one atomic write where the
store can), for an existing task alone
(:meth:`~a2a_flask.stores.base.Coordination.claim_once`) before its turn is added.  A
retry finds the binding: the same request gets the first send's task, another
request :class:`~a2a_flask.protocol.errors.IdempotencyKeyReusedError`.
docs/safe-retries.rst says what a client sends and gets.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import Optional

from ..protocol.codec import encode
from ..protocol.errors import IdempotencyKeyReusedError, InvalidParamsError
from ..protocol.models import SendMessageRequest
from ..stores.base import OnceClaim, TaskStore, join_key

#: The header a client names a logical send with.
HEADER = "Idempotency-Key"
#: Longest key a caller may send (it is hashed before it reaches the store or a log).
MAX_KEY_LENGTH = 255
#: Printable ASCII without spaces: what a key may hold.
_KEY = re.compile(r"[\x21-\x7e]+")
#: Longest a retry waits for the first send to make its task (seconds).  The first
#: makes it with the binding (or, on a store that cannot, right after it); past this
#: the first is taken for dead between the two writes, and the retry makes the task itself.
ACCEPT_WAIT = 10.0
#: Where claims for keys start (the other claims are per task: ``push:...``).
_PREFIX = "idem:"


@dataclass(frozen=True)
class Once:
    """A send's key as the store keeps it, and its request's fingerprint."""

    #: The claim's key: the caller's scope and key, hashed (64 hex digits after the prefix).
    key: str
    #: SHA-256 of the request as :func:`fingerprint` reads it (hex).
    fingerprint: str
    #: Seconds the binding lasts (``A2A_IDEMPOTENCY_TTL``).
    ttl: float

    def value(self, task_id: str) -> str:
        """What the claim holds: the fingerprint, when it was bound (Unix seconds) and
        the task (``=`` and a nonce: the task the request names itself, whose id may
        be longer than a claim holds)."""
        return f"{self.fingerprint} {time.time():.0f} {task_id}"


@dataclass(frozen=True)
class Bound:
    """What the first send bound a key to."""

    #: Its task's id (``=...``: the task the request names).
    task_id: str
    #: Seconds since it was bound.
    age: float


def check_key(raw: str) -> None:
    """Refuse a key that is empty, too long, or not printable ASCII without spaces."""
    problem = ("must not be empty" if not raw else
               f"is longer than {MAX_KEY_LENGTH} characters" if len(raw) > MAX_KEY_LENGTH else
               "must be printable ASCII without spaces" if not _KEY.fullmatch(raw) else "")
    if problem:
        raise InvalidParamsError(f"{HEADER} {problem}", violations=[(HEADER, problem)])


def fingerprint(request: SendMessageRequest, client_task_id: str = "",
                dialect: str = "1.0") -> str:
    """The SHA-256 of what the send asks for: the whole message as sent, the request's
    metadata, the 0.1 task id, and the configuration except what only shapes the
    answer (``historyLength``, ``returnImmediately``: a retry may ask differently).
    A 0.1 message has no id (the dialect makes one up): its id is left out."""
    if dialect == "0.1":
        request = dataclasses.replace(
            request, message=dataclasses.replace(request.message, message_id=""))
    config = request.configuration
    if config is not None:
        config = dataclasses.replace(config, history_length=None, return_immediately=False)
    shaped = encode(config) if config is not None else {}
    body = {"message": encode(request.message), "configuration": shaped or None,
            "metadata": request.metadata, "id": client_task_id}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def once_for(raw: Optional[str], request: SendMessageRequest, client_task_id: str,
             tenant: str, owner: str, ttl: float, dialect: str = "1.0") -> Optional[Once]:
    """The send's :class:`Once` (None without the header); ``tenant`` as stored
    (the agent's scope and the caller's tenant).  Call it before the request is
    changed (the service fills in the message's ids)."""
    if raw is None:
        return None
    check_key(raw)
    scoped = hashlib.sha256(join_key(tenant, owner, raw).encode()).hexdigest()
    return Once(_PREFIX + scoped, fingerprint(request, client_task_id, dialect), ttl)


def claim(once: Once, value: str) -> OnceClaim:
    """The store's claim that binds the key to ``value`` (:meth:`Once.value`): what a
    new task's acceptance makes with the task
    (:meth:`~a2a_flask.stores.base.TaskStore.create_claimed`)."""
    return OnceClaim(once.key, value, once.ttl)


def bind(store: TaskStore, once: Once, value: str) -> Optional[Bound]:
    """Bind the key to ``value`` (:meth:`Once.value`) alone (a send to an existing
    task): :func:`judge` of what the store holds."""
    return judge(once, value, store.claim_once(once.key, value, once.ttl))


def judge(once: Once, value: str, held: str) -> Optional[Bound]:
    """What binding the key to ``value`` found the store holding (``held``): None when
    this send bound it, else what the first send bound it to.  Another request under
    the key is refused."""
    if held == value:
        return None
    first, _, rest = held.partition(" ")
    stamp, _, task_id = rest.partition(" ")
    if first != once.fingerprint:
        raise IdempotencyKeyReusedError(
            f"This {HEADER} was used for another request; send a new key for a new request",
            violations=[(HEADER, "was used for another request (another message or "
                                 "configuration)")])
    try:
        age = time.time() - float(stamp)
    except ValueError:
        age = 0.0
    return Bound(task_id, age)


def release(store: TaskStore, once: Once, value: str) -> None:
    """Drop the binding of a send that failed before it made its task (a retry may
    then make it), if it is still this send's; a store that fails now leaves it to expire."""
    try:
        store.release_claim(once.key, value)
    except Exception:  # the send's own error is what the caller hears
        pass


def await_task(store: TaskStore, task_id: str, timeout: float = ACCEPT_WAIT) -> bool:
    """Wait (cooperatively, polling with a back-off) until ``task_id`` exists; False
    if it still does not after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    pause = 0.005
    while store.head(task_id) is None:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        with store.notifier.ticket(task_id) as ticket:  # a write here wakes it at once
            ticket.wait(min(pause, left))
        pause = min(pause * 2, 0.25)
    return True
