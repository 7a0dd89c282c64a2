"""The keeper: one background loop per process and agent that tends the runs here.

Each round it renews the leases of the runs in this process, stops runs whose
task was canceled by another process, fails tasks whose runner stopped renewing
(a killed worker, a lost host), records failures the store was down to take,
deletes finished tasks past the task TTL, and does the agent's other chores
(resuming webhook deliveries).  The keeper also holds the table of runs in this
process: a run is in it exactly while this process holds its lease (or will take
it with its first write, see :meth:`Keeper.hold`).
"""
from __future__ import annotations

import logging
import os
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Callable, Dict, List, Optional, Sequence

from ..concurrency import Worker
from ..protocol.errors import StoreUnavailable, TaskNotFoundError
from ..protocol.events import Event
from ..protocol.models import TaskState, TaskStatus, TaskStatusUpdateEvent, format_timestamp, new_id, utc_now
from ..stores.base import TaskRecord, TaskStore
from .lifecycles import LeaseAction, LeaseEvent, LeaseState, lease_step
from .states import Change, transition
from .writer import Lease, LeaseHeld, TaskWriter, agent_message

if TYPE_CHECKING:
    from .run import Run

log = logging.getLogger("a2a_flask")

#: The status message of a task failed because its runner's lease expired.
ORPHANED = ("The worker running this task stopped (its lease expired); the task failed "
            "and can be sent again.")
#: Seconds a new run waits, at most, for another process's lease on its task to be
#: let go (the previous turn's run, whose executor returns just after it asked for input).
LEASE_WAIT = 2.0

#: A new run defers its lease to its first write when the store answered a call
#: this recently (seconds) with no outage since (see :meth:`Keeper.hold`): a store
#: that went down earlier still fails the call before the agent's code runs.
ANSWERED_WITHIN = 1.0


class ProcessName:
    """This process's name in leases and claims (``host:pid:random``): a new one in
    each process, so that a forked worker never renews its parent's leases."""

    def __init__(self) -> None:
        self._pid = 0
        self._name = ""

    def __call__(self) -> str:
        pid = os.getpid()
        if self._pid != pid:
            self._pid, self._name = pid, f"{socket.gethostname()}:{pid}:{new_id()[:8]}"
        return self._name


class Keeper:
    """Leases, remote cancels, orphans and retention for one agent in this process."""

    def __init__(self, store: TaskStore, writer: TaskWriter, *,
                 name: Optional[ProcessName] = None, lease_ttl: float = 30.0,
                 task_ttl: float = 0.0, store_grace: float = 0.0, cancel_grace: float = 5.0,
                 chores: Sequence[Callable[[], None]] = (),
                 on_new_process: Sequence[Callable[[], object]] = (),
                 scope: Optional[str] = None,
                 orphaned: Optional[Callable[[str], bool]] = None) -> None:
        self.store = store
        #: The agent's store scope (:func:`~a2a_flask.stores.base.scoped`): its own
        #: orphans are taken care of at once, another agent's sharing the store only
        #: once that agent's keepers had two leases' time to (None: every task is ours).
        self.scope = scope
        #: Another agent's tasks with an expired lease -> when first seen (monotonic).
        self._foreign: Dict[str, float] = {}
        self.writer = writer
        self.name = name or ProcessName()
        self.lease_ttl = lease_ttl
        self.task_ttl = task_ttl
        self.store_grace = store_grace
        self.cancel_grace = cancel_grace
        #: More work for each round (such as resuming webhook deliveries).
        self.chores = list(chores)
        #: Called once in each process that starts a keeper (after a fork: in the worker).
        self.on_new_process = list(on_new_process)
        #: Task id -> its run in this process, while this process holds its lease.
        self._runs: Dict[str, "Run"] = {}
        self._pid = 0
        self._lock = threading.Lock()
        self._last_purge = 0.0
        self._closed = False
        #: Rounds fail no expired lease before this (monotonic): after an outage,
        #: the live owners renew theirs first.
        self._orphans_after = 0.0
        self._outage_seen = False
        #: Takes care of a task whose runner's lease expired instead of failing it
        #: (a runner that queues the task again: :mod:`.runners`): True when it did.
        self.orphaned = orphaned

    @property
    def owner(self) -> str:
        """This process's name in leases and claims."""
        return self.name()

    # -- the runs here

    def take(self, task_id: str) -> bool:
        """Take the lease of ``task_id`` for this process (or renew ours); False while
        another process's lease on it is live (the store's set-if-absent)."""
        return self.store.acquire_lease(task_id, self.owner, self.lease_ttl)

    def hold(self, run: "Run", *, leased: bool = False, with_first_write: bool = False) -> None:
        """Take ``run``'s lease and count it among this process's runs.

        The lease comes first, so that a store that is down fails the call before
        the agent's code runs.  A run that makes a new task while the store has just
        answered (:data:`ANSWERED_WITHIN`) defers its lease to its first write
        instead (:data:`.lifecycles.LEASE_TABLE`): until then nothing of the task is
        stored, so there is nothing to guard, and a task the agent finishes at once
        (a blocking send's whole run) is written in one store call with no lease at
        all.  ``leased``: the caller took the lease already (:meth:`take`).
        ``with_first_write``: the caller makes the task next, before the agent's code
        runs (an idempotent send's acceptance), and the lease is taken in that write
        whether or not the store answered lately.

        Taking it is set-if-absent: while another process's lease on the task is
        live, this waits up to :data:`LEASE_WAIT` for it to be let go, then raises
        :class:`~.writer.LeaseHeld` (a task never has two runs)."""
        self.ensure()
        owner = self.owner
        if run.record is None and not leased and (with_first_write
                                                  or self.store.answering(ANSWERED_WITHIN)):
            run.lease = Lease(owner, self.lease_ttl, LeaseState.DEFERRED)
        else:
            deadline = time.monotonic() + LEASE_WAIT
            while not leased and not self.take(run.task_id):
                if time.monotonic() > deadline:
                    raise LeaseHeld(run.task_id)
                time.sleep(0.1)  # cooperative under gevent
            run.lease = Lease(owner, self.lease_ttl)
        self._runs[run.task_id] = run

    def let_go(self, run: "Run") -> None:
        """``run`` ended: release its lease if it holds it still (its last write, or
        shutdown, let it go; or it never took it).  The lease is DONE after, whether
        or not the store answered: nobody renews it any more, so it expires."""
        if self._runs.get(run.task_id) is not run:
            return
        del self._runs[run.task_id]
        lease = run.lease
        step = lease_step(lease.state if lease is not None else LeaseState.HELD,
                          LeaseEvent.RUN_ENDS)
        if step.action is LeaseAction.RELEASE and not self.store.closed:
            self._release(run.task_id)
        if lease is not None:
            lease.state = step.then

    def _release(self, task_id: str) -> None:
        """Release this process's lease on ``task_id``; one the store does not
        release expires (the reaper then finds a finished task)."""
        try:
            self.store.release_lease(task_id, self.owner)
        except StoreUnavailable:
            pass  # logged by the store
        except Exception:
            if not self.store.closed:  # closed meanwhile (shutting down): nothing to say
                log.exception("could not release the lease of task %s", task_id)

    def take_back(self, run: "Run") -> bool:
        """Remove ``run`` from this process's runs without releasing its lease (shutdown
        fails its task first); False when another caller already took it."""
        if self._runs.get(run.task_id) is not run:
            return False
        del self._runs[run.task_id]
        return True

    def run_here(self, task_id: str) -> Optional["Run"]:
        """The run of ``task_id`` in this process, if any."""
        return self._runs.get(task_id)

    def runs_here(self) -> List["Run"]:
        """The runs in this process now."""
        return list(self._runs.values())

    # -- the loop

    def ensure(self) -> None:
        """Start this process's keeper if it has none (after a fork, a new one)."""
        pid = os.getpid()
        if self._pid == pid:
            return
        with self._lock:
            if self._pid == pid:
                return
            self._pid = pid
            self._runs = {}  # runs of a parent process do not run here
            Worker(self._keep, name="a2a-keeper")
        for hook in self.on_new_process:
            hook()

    def close(self) -> None:
        """Stop this process's keeper (the store is closed separately)."""
        self._closed = True

    def _keep(self) -> None:
        tick = min(1.0, self.lease_ttl / 3)
        while True:
            time.sleep(tick)
            if self._closed or self.store.closed or self._pid != os.getpid():
                return
            try:
                self.tend()
            except StoreUnavailable:
                self._outage_seen = True  # the store logged it; the next round tries again
            except Exception:  # a store hiccup must not end the keeper
                log.exception("a2a keeper round failed")

    def tend(self) -> None:
        """One round, run every second or so in each process.

        Records the failures the store missed; renews the leases of the runs here;
        stops runs whose task was canceled by another process; fails tasks whose
        runner died (lease expired); and deletes terminal tasks older than the task
        TTL (every minute, or every half TTL when that is shorter); then does the
        :attr:`chores`.
        """
        for task_id in self.writer.record_missed_failures():
            self.store.release_lease(task_id, self.owner)
        runs = self.runs_here()
        self.store.renew_leases(self.owner, [run.task_id for run in runs
                                             if run.lease is None or run.lease.held],
                                self.lease_ttl)
        if self._outage_seen:
            # Renewals failed during an outage; the other processes' did too, and their
            # leases may have run out meanwhile though their runs go on.  Each keeper
            # renews in its first round after the outage: judge leases only once every
            # live owner has had a lease's time to do so.
            self._outage_seen = False
            if self.store_grace:
                self._orphans_after = time.monotonic() + self.lease_ttl
        for run in runs:
            if not run.cancel_requested and run.record is not None:
                # The head, not the record: loading a long stream's task folds its
                # recent chunks, and this runs every second for every running task.
                head = self.store.head(run.task_id)
                if head is not None and head[1] is TaskState.CANCELED:
                    run.request_stop(self.cancel_grace)
        if time.monotonic() >= self._orphans_after:
            self._orphans()
        now = time.monotonic()
        if self.task_ttl and now - self._last_purge >= min(60.0, max(1.0, self.task_ttl / 2)):
            self._last_purge = now
            cutoff = datetime.now(timezone.utc) - timedelta(seconds=self.task_ttl)
            purged = self.store.purge(format_timestamp(cutoff), scope=self.scope)
            if purged:
                log.info("purged %d finished tasks older than %ss", purged, self.task_ttl)
        for chore in self.chores:
            chore()

    def _orphans(self) -> None:
        """Take care of the tasks whose lease expired: queue them again through
        :attr:`orphaned` (a runner), or fail them."""
        now = time.monotonic()
        seen, self._foreign = self._foreign, {}
        for task_id in self.store.expired_leases():
            if self.scope is not None and task_id not in self._runs:
                record = self.store.load(task_id)
                if record is not None and record.scope != self.scope:
                    since = self._foreign[task_id] = seen.get(task_id, now)
                    if now - since >= 2 * self.lease_ttl:  # its agent is served no more?
                        self._fail_orphan(task_id)
                    continue  # its own agent's keepers queue it again or fail it
            if task_id in self._runs or self.orphaned is None or not self.orphaned(task_id):
                self._fail_orphan(task_id)

    def _fail_orphan(self, task_id: str) -> None:
        """Fail a task whose runner stopped renewing its lease (killed worker, lost host)."""
        failed = False

        def build(current: TaskRecord) -> List[Event]:
            nonlocal failed
            state = transition(current.state, Change.ORPHAN)
            failed = False
            if state is None or task_id in self._runs:
                return []
            failed = True
            message = agent_message(ORPHANED, task_id, current.task.context_id)
            status = TaskStatus(state=state, message=message, timestamp=utc_now())
            return [TaskStatusUpdateEvent(task_id, current.task.context_id, status)]

        try:
            self.writer.commit(task_id, build)
        except TaskNotFoundError:
            pass
        if failed:  # only by this round (a failure recorded before is logged already)
            log.warning("task %s failed: its runner's lease expired", task_id)
        self.store.release_lease(task_id, None)
