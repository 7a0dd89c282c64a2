"""Coordination kept in dicts: one implementation for the stores that hold it in memory.

:class:`~.base.Coordination` (webhooks and their delivery cursors, claims,
leases) decides the same way in every store that keeps it in dicts: the memory
store, the shelve store (whose dicts are an index of its log file), the
example ``dict://`` store.  :class:`DictCoordination` holds that logic once.
Each method decides under the store's lock, on current dicts, which
:data:`Change` it makes (if any); the store applies it (the shelve store first
writes it to its log as a record, so other processes apply it too).

A store mixing it in provides three small methods: :meth:`~DictCoordination._coordinate`
(run a decision under its lock, keep and apply its changes),
:meth:`~DictCoordination._observe` (run a look under its lock) and
:meth:`~DictCoordination._log_seq` (a task's last sequence number), and calls
:meth:`~DictCoordination._reset_coordination` when it starts and
:meth:`~DictCoordination._forget_coordination` when it deletes a task.
"""
from __future__ import annotations

import dataclasses
import time
from abc import abstractmethod
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, TypeVar, Union

from .base import Coordination, OnceClaim, PushTarget, SequenceConflict, is_behind

T = TypeVar("T")


class PutTarget(NamedTuple):
    """A webhook of a task inserted, or replaced by its config's id (keeping its place)."""

    task_id: str
    target: PushTarget


class DropTarget(NamedTuple):
    """A webhook of a task deleted."""

    task_id: str
    config_id: str


class MoveCursor(NamedTuple):
    """A webhook's delivery cursor moved (a webhook deleted meanwhile stays deleted)."""

    task_id: str
    config_id: str
    delivered_seq: int
    failures: int
    gave_up: bool


class TakeClaim(NamedTuple):
    """A claim taken or renewed by ``owner`` until ``expires`` (a Unix time)."""

    key: str
    owner: str
    expires: float


class DropClaim(NamedTuple):
    """A claim dropped."""

    key: str


class HoldLeases(NamedTuple):
    """``owner`` holds the leases of these tasks until ``expires`` (taken or renewed)."""

    task_ids: Tuple[str, ...]
    owner: str
    expires: float


class DropLease(NamedTuple):
    """A task's lease dropped."""

    task_id: str


#: One change to the coordination dicts.
Change = Union[PutTarget, DropTarget, MoveCursor, TakeClaim, DropClaim, HoldLeases, DropLease]
#: What a decision returns: the changes to make, and the method's result.
Decision = Tuple[Sequence[Change], T]


class DictCoordination(Coordination):
    """:class:`~.base.Coordination` over three dicts (see the module docstring)."""

    #: Each task's webhooks by config id, in creation order.
    _targets: Dict[str, Dict[str, PushTarget]]
    #: Each claimed key's (owner, expiry).
    _claims: Dict[str, Tuple[str, float]]
    #: Each leased task's (owner, expiry).
    _leases: Dict[str, Tuple[str, float]]

    # ------------------------------------------------------------ what the store provides

    @abstractmethod
    def _coordinate(self, decide: Callable[[], Decision[T]], durable: bool) -> T:
        """Run ``decide`` under the store's lock on current dicts, keep the changes it
        returns (``durable``: safely, before returning; webhooks are, while claims,
        leases and cursors may be lost to a power cut), apply them with
        :meth:`_apply_change`, and return its result."""

    @abstractmethod
    def _observe(self, look: Callable[[], T]) -> T:
        """Run ``look`` under the store's lock on current dicts."""

    @abstractmethod
    def _log_seq(self, task_id: str) -> Optional[int]:
        """The task's last sequence number, or None if there is no such task
        (called inside :meth:`_observe`)."""

    # ------------------------------------------------------------ the dicts

    def _reset_coordination(self) -> None:
        """Start with nothing (or again, before reading everything anew)."""
        self._targets = {}
        self._claims = {}
        self._leases = {}

    def _forget_coordination(self, task_id: str) -> None:
        """A task was deleted: so are its webhooks and its lease (under the lock)."""
        self._targets.pop(task_id, None)
        self._leases.pop(task_id, None)

    def _apply_change(self, change: Change) -> None:
        """Make ``change`` to the dicts (under the lock)."""
        _APPLY[type(change)](self, change)

    def _put_target(self, change: PutTarget) -> None:
        self._targets.setdefault(change.task_id, {})[change.target.config.id] = change.target

    def _drop_target(self, change: DropTarget) -> None:
        self._targets.get(change.task_id, {}).pop(change.config_id, None)

    def _move_cursor(self, change: MoveCursor) -> None:
        targets = self._targets.get(change.task_id, {})
        moved = targets.get(change.config_id)
        if moved is not None:  # replaced, not changed: a caller may hold the old one
            targets[change.config_id] = dataclasses.replace(
                moved, delivered_seq=change.delivered_seq, failures=change.failures,
                gave_up=change.gave_up)

    def _take_claim(self, change: TakeClaim) -> None:
        self._claims[change.key] = (change.owner, change.expires)

    def _drop_claim(self, change: DropClaim) -> None:
        self._claims.pop(change.key, None)

    def _hold_leases(self, change: HoldLeases) -> None:
        for task_id in change.task_ids:
            self._leases[task_id] = (change.owner, change.expires)

    def _drop_lease(self, change: DropLease) -> None:
        self._leases.pop(change.task_id, None)

    # ------------------------------------------------------------ push targets

    def put_push_target(self, task_id: str, target: PushTarget) -> None:
        self._coordinate(lambda: ([PutTarget(task_id, target)], None), durable=True)

    def push_targets(self, task_id: str) -> List[PushTarget]:
        # Copies: the delivery code moves its cursor on the object it holds.
        return self._observe(lambda: [dataclasses.replace(t)
                                      for t in self._targets.get(task_id, {}).values()])

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        def decide() -> Decision[None]:
            if config_id not in self._targets.get(task_id, {}):
                return [], None
            return [DropTarget(task_id, config_id)], None

        self._coordinate(decide, durable=True)

    def record_push_progress(self, task_id: str, config_id: str, delivered_seq: int,
                             failures: int, gave_up: bool) -> None:
        def decide() -> Decision[None]:
            if config_id not in self._targets.get(task_id, {}):
                return [], None  # deleted meanwhile: stays deleted
            return [MoveCursor(task_id, config_id, delivered_seq, failures, gave_up)], None

        # Losing the last cursor move to a power cut means one push is sent again (at least once).
        self._coordinate(decide, durable=False)

    def push_backlog(self) -> List[str]:
        def behind() -> List[str]:
            found = []
            for task_id, targets in self._targets.items():
                seq = self._log_seq(task_id)
                if seq is not None and any(is_behind(t, seq) for t in targets.values()):
                    found.append(task_id)
            return found

        return self._observe(behind)

    # ------------------------------------------------------------ claims

    def claim(self, key: str, owner: str, ttl: float) -> bool:
        def decide() -> Decision[bool]:
            now = time.time()
            holder, expires = self._claims.get(key, (owner, 0.0))
            if holder != owner and expires >= now:
                return [], False
            return [TakeClaim(key, owner, now + ttl)], True

        return self._coordinate(decide, durable=False)

    def claim_once(self, key: str, value: str, ttl: float) -> str:
        def decide() -> Decision[str]:
            now = time.time()
            held = self._claims.get(key)
            if held is not None and held[1] >= now:
                return [], held[0]
            return [TakeClaim(key, value, now + ttl)], value

        # Durable: a key lost to a power cut would let a retry run the agent again.
        return self._coordinate(decide, durable=True)

    def _claimed_creation(self, claim: OnceClaim, task_id: str, lease_owner: Optional[str],
                          lease_ttl: float) -> Decision[str]:
        """What :meth:`~.base.TaskStore.create_claimed` changes here besides the task
        (under the store's lock, in the same step as the task's creation): the binding
        and the lease, or nothing and the value of an unexpired binding.  Raises
        :class:`~.base.SequenceConflict` when the task exists or another owner's live
        lease holds its id."""
        now = time.time()
        held = self._claims.get(claim.key)
        if held is not None and held[1] >= now:
            return [], held[0]
        if self._log_seq(task_id) is not None:
            raise SequenceConflict(task_id)
        changes: List[Change] = [TakeClaim(claim.key, claim.value, now + claim.ttl)]
        if lease_owner is not None:
            holder, expires = self._leases.get(task_id, (lease_owner, 0.0))
            if holder != lease_owner and expires >= now:
                raise SequenceConflict(task_id)
            changes.append(HoldLeases((task_id,), lease_owner, now + lease_ttl))
        return changes, claim.value

    def _expired_claims(self) -> List[str]:
        """The claims that ran out (under the lock): what retention drops."""
        now = time.time()
        return [key for key, (_, expires) in self._claims.items() if expires < now]

    def release_claim(self, key: str, owner: str) -> None:
        def decide() -> Decision[None]:
            held = self._claims.get(key)
            if held is None or held[0] != owner:
                return [], None
            return [DropClaim(key)], None

        self._coordinate(decide, durable=False)

    # ------------------------------------------------------------ leases

    def acquire_lease(self, task_id: str, owner: str, ttl: float) -> bool:
        def decide() -> Decision[bool]:
            now = time.time()
            holder, expires = self._leases.get(task_id, (owner, 0.0))
            if holder != owner and expires >= now:
                return [], False  # another owner's live lease: its run goes on
            return [HoldLeases((task_id,), owner, now + ttl)], True

        return self._coordinate(decide, durable=False)

    def renew_leases(self, owner: str, task_ids: List[str], ttl: float) -> None:
        def decide() -> Decision[None]:
            held = tuple(t for t in task_ids if self._leases.get(t, (None, 0.0))[0] == owner)
            if not held:
                return [], None
            return [HoldLeases(held, owner, time.time() + ttl)], None

        if task_ids:
            self._coordinate(decide, durable=False)

    def release_lease(self, task_id: str, owner: Optional[str]) -> None:
        def decide() -> Decision[None]:
            lease = self._leases.get(task_id)
            if lease is None or (owner is not None and lease[0] != owner):
                return [], None
            return [DropLease(task_id)], None

        self._coordinate(decide, durable=False)

    def expired_leases(self) -> List[str]:
        now = time.time()
        return self._observe(lambda: [task_id for task_id, (_, expires) in self._leases.items()
                                      if expires < now])


#: How each kind of change is made (a lookup, not a chain of isinstance checks:
#: leases and claims change on every run).
_APPLY: Dict[type, Callable[[DictCoordination, Any], None]] = {
    PutTarget: DictCoordination._put_target,
    DropTarget: DictCoordination._drop_target,
    MoveCursor: DictCoordination._move_cursor,
    TakeClaim: DictCoordination._take_claim,
    DropClaim: DictCoordination._drop_claim,
    HoldLeases: DictCoordination._hold_leases,
    DropLease: DictCoordination._drop_lease,
}
