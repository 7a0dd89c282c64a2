"""Runners: where a task's executor runs.

The default (no runner on the :class:`~.runtime.Runtime`) runs each executor in a
greenlet or thread of the web worker that received the message.  A :class:`Runner`
sends runs elsewhere, to worker processes fed by a queue (Celery, see
:mod:`a2a_flask.web.celery_runner`).  What a runner must do:

1. **enqueue** (web side, :meth:`Runner.start`): call :func:`queue` (it makes
   the task exist in the store and lets the HTTP side follow the task's log), then
   put the :class:`QueuedRun` it returns (a small JSON object) on its queue;
2. **claim and run** (worker side): with the agent's app context, call
   :func:`execute` with that object: it takes the task's lease, loads the task,
   decides whether this is a first run or a re-delivery (see below) and runs the
   executor with the same :class:`~.executor.TaskContext` API, writing to the
   shared store, until it ends; on :class:`LeaseBusy` queue the object again a
   second later (for about a lease's time);
3. **hand back**: acknowledge the message only after :func:`execute` returned
   (late acknowledgement);
4. **run orphans again** (optional, a runner method ``orphaned(task_id) -> bool``
   that the keeper asks about each of its agent's tasks whose lease expired): for a
   rerun-safe agent, put the order :func:`requeue` returns (if any) on the queue
   and answer True; False lets the keeper fail the task.

A run's worker claims it by taking the task's lease first, set-if-absent
(:meth:`~a2a_flask.stores.TaskStore.acquire_lease`): while another worker's lease
on the task is live, a delivery of the task's order does nothing (a late or
replayed delivery of an order whose run goes on elsewhere is acknowledged and
logged), or, when that order has not run yet (the task's previous turn has not
let its lease go), :func:`claim` raises :class:`LeaseBusy` and the runner tries
it again shortly.  So a task never has two runs at once.

A run whose worker died (killed, out of memory, its host lost) stops renewing its
lease.  Once the lease expired, a keeper (in any process of the agent) either asks
the runner to queue the task again (:func:`requeue`, an order marked ``rerun``),
when the agent declared that safe, or fails the task, saying why.  Whichever
delivery then claims the task (that order, or the first one delivered again by
the broker) finds a run that wrote to the task and died: it runs again from the
start (the first run's artifacts are dropped and a status message says the task
restarted; after :data:`MAX_RESTARTS` restarts of one turn the task fails
instead), or, not rerun-safe, fails the task once, saying why.  This waits for
the lease (``A2A_LEASE_TTL``), never for the broker's redelivery (Redis's
``visibility_timeout``).
Nothing else of the engine knows about runners: streams, blocking sends and
cancels read the store's log, whichever process writes it.
"""
from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Dict, List, Optional

from ..protocol.models import (Message, Role, Task, TaskState, TaskStatus,
                               TaskStatusUpdateEvent, utc_now)
from ..protocol.events import Event
from ..stores.base import TaskRecord
from .run import Run
from .runs import Runner
from .runtime import Runtime
from .states import Change, transition
from .writer import agent_message

__all__ = ["LeaseBusy", "MAX_RESTARTS", "NOT_RERUN", "QueuedRun", "RESTARTED", "RESTARTS_KEY",
           "Runner", "TOO_MANY_RESTARTS", "claim", "execute", "queue", "requeue"]

log = logging.getLogger("a2a_flask")

#: The status message of a task whose run was delivered again and restarted.
RESTARTED = ("The worker running this task stopped before it finished; the task was "
             "restarted from the beginning.")
#: Restarts of one run after which its task is failed instead (TOO_MANY_RESTARTS).
MAX_RESTARTS = 3
#: The status message of a task whose runs' workers kept dying.
TOO_MANY_RESTARTS = (f"The worker running this task stopped before it finished, after "
                     f"{MAX_RESTARTS} restarts too; the task failed and can be sent again.")
#: The task's metadata key that counts its restarts: ``{"messageId": the user's message
#: of the turn that restarted, "count": restarts of that turn}``.
RESTARTS_KEY = "a2a_flask/restarts"
#: The status message of a task whose run was delivered again and may not run twice.
NOT_RERUN = ("The worker running this task stopped before it finished, and this agent "
             "does not run a task twice; the task failed and can be sent again.")


@dataclasses.dataclass
class QueuedRun:
    """What a worker needs to run a queued task (the message itself is in the task)."""

    #: The agent's name (``A2A(name=...)``): which executor runs it.
    agent: str
    task_id: str
    #: The task's sequence number once queued: a later change means a run started.
    seq: int
    #: The user's message that started the run (found in the task's history).
    message_id: str
    #: Whether the message continued an existing task (``ctx.follow_up``).
    follow_up: bool
    #: When it was queued (Unix time), for the queue wait.
    queued_at: float
    #: The W3C ``traceparent`` of the request that queued it (tracing on), else empty.
    traceparent: str = ""
    #: Queued again by a keeper after the lease of its run expired (:func:`requeue`):
    #: the run at ``seq`` died, so this one restarts the task.
    rerun: bool = False

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-able form for a queue's message."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> "QueuedRun":
        """Read :meth:`to_dict`'s form back, checking each field's type."""
        if not isinstance(data, dict):
            raise ValueError("a queued run must be an object")
        values: Dict[str, Any] = {}
        for field in dataclasses.fields(cls):
            value = data.get(field.name, field.default)
            kind = {"seq": int, "follow_up": bool, "rerun": bool,
                    "queued_at": (int, float)}.get(field.name, str)
            if value is dataclasses.MISSING or not isinstance(value, kind):  # type: ignore[arg-type]
                raise ValueError(f"a queued run's {field.name} is missing or of the wrong type")
            values[field.name] = value
        return cls(**values)


def queue(run: Run, agent: str) -> QueuedRun:
    """Web side: make the run's task exist and hand the HTTP side over to its log.

    The local run ends here (it is settled and finished with no reply), so a
    blocking send, a stream or a ``returnImmediately`` send follows the task in
    the store, where the worker writes.
    """
    record = run.ensure_task()
    assert record is not None  # no reply is possible before the executor ran
    run.end()
    return QueuedRun(agent=agent, task_id=run.task_id, seq=record.seq,
                     message_id=run.message.message_id, follow_up=run.follow_up,
                     queued_at=time.time())


class LeaseBusy(RuntimeError):
    """An order that has not run yet found its task's lease live in another process
    (the previous turn's run has not let it go yet): try the order again shortly."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id}: another process holds its lease; the run "
                         "is tried again")
        self.task_id = task_id


def _earlier_runs(runtime: Runtime, order: QueuedRun, record: TaskRecord) -> Optional[bool]:
    """What earlier deliveries of this order did: None (nothing: this is the first
    run), False (one wrote to the task and died), True (one ended its turn: it asked
    for input or finished, and only the acknowledgement was lost)."""
    if record.seq == order.seq:
        return None
    started = False
    for entry in runtime.store.read(order.task_id, order.seq):
        event = entry.event
        if isinstance(event, Message) and event.role is Role.USER:
            continue
        started = True
        status = event.status if isinstance(event, (Task, TaskStatusUpdateEvent)) else None
        if status is not None and status.state.settled:
            return True
    return False if started else None


def _user_message(record: TaskRecord, message_id: str) -> Message:
    """The user's message ``message_id`` of the task, else its last user's message
    (trimmed from the history: A2A_MAX_HISTORY)."""
    history = record.task.history
    found = next((m for m in reversed(history) if m.message_id == message_id), None)
    if found is None:
        found = next((m for m in reversed(history) if m.role is Role.USER),
                     Message(message_id=message_id, role=Role.USER, parts=[]))
    return found


def _restart(runtime: Runtime, task_id: str, message_id: str) -> Optional[TaskRecord]:
    """Drop a dead run's artifacts and say that the task restarts (one Task event),
    counting the restarts of this turn (:data:`RESTARTS_KEY`); after
    :data:`MAX_RESTARTS` of them fail the task instead.  None: nothing to run."""
    too_many = False

    def build(current: TaskRecord) -> List[Event]:
        nonlocal too_many
        too_many = False
        if current.state.terminal:
            return []
        task = current.task
        counted = task.metadata.get(RESTARTS_KEY) if task.metadata else None
        count = (counted.get("count", 0) if isinstance(counted, dict)
                 and counted.get("messageId") == message_id else 0)
        if not isinstance(count, int) or count >= MAX_RESTARTS:
            too_many = True  # its runs kill their workers (out of memory?): failed below
            return []
        history = task.history + ([task.status.message] if task.status.message else [])
        status = TaskStatus(state=TaskState.WORKING, timestamp=utc_now(),
                            message=agent_message(RESTARTED, task_id, task.context_id))
        metadata = {**(task.metadata or {}),
                    RESTARTS_KEY: {"messageId": message_id, "count": count + 1}}
        fresh: Event = Task(id=task.id, context_id=task.context_id, status=status,
                            history=history, artifacts=[], metadata=metadata)
        return [fresh]

    record = runtime.commit(task_id, build)
    if record.state.terminal:
        return None
    if too_many:
        runtime.fail(task_id, TOO_MANY_RESTARTS)
        return None
    return record


def claim(runtime: Runtime, order: QueuedRun, *, rerun_safe: bool) -> Optional[Run]:
    """The run to execute for ``order``, its lease taken by this process, or None when
    there is nothing to run: the task is gone or finished; another process runs it
    (its lease is live: a late or replayed delivery); or its run died and it was
    failed (not rerun-safe, or restarted too often).

    :raises LeaseBusy: the order has not run, and another process holds the lease.
    """
    keeper = runtime.keeper
    if not keeper.take(order.task_id):
        record = runtime.store.load(order.task_id)
        if (record is not None and not record.state.terminal and not order.rerun
                and _earlier_runs(runtime, order, record) is None):
            raise LeaseBusy(order.task_id)
        log.info("task %s runs in another process (its lease is live): this delivery of "
                 "its order does nothing", order.task_id)
        return None
    # With the lease, the task changes no more under us but by callers (a cancel).
    run = _claimed(runtime, order, rerun_safe)
    if run is None:
        keeper.store.release_lease(order.task_id, keeper.owner)
    return run


def _claimed(runtime: Runtime, order: QueuedRun, rerun_safe: bool) -> Optional[Run]:
    """:func:`claim`'s decision, once this process holds the task's lease."""
    record = runtime.store.load(order.task_id)
    if record is None or record.state.terminal:
        return None
    earlier = _earlier_runs(runtime, order, record)
    if earlier:
        return None  # delivered again after its run ended its turn: nothing to do
    message = _user_message(record, order.message_id)
    if earlier is False or order.rerun:  # a run of it wrote to the task and died
        if not rerun_safe:
            runtime.fail(order.task_id, NOT_RERUN)
            return None
        restarted = _restart(runtime, order.task_id, message.message_id)
        if restarted is None:
            return None
        record = restarted
    task = record.task
    run = Run(runtime.writer, message=message, task_id=task.id, context_id=task.context_id,
              tenant=record.tenant, owner=record.owner, dialect=record.dialect, record=record)
    run.follow_up = order.follow_up
    return run


def requeue(runtime: Runtime, task_id: str, agent: str) -> Optional[QueuedRun]:
    """Keeper side: the order that runs ``task_id`` again, whose run's lease expired
    (:attr:`.Keeper.orphaned`), or None when there is nothing to queue: another keeper
    took the expired lease first (one order), or the task is not running any more.
    The runner sends the order; its claim restarts the task."""
    keeper = runtime.keeper
    if not keeper.take(task_id):  # the expired lease: exactly one keeper takes it
        return None
    try:
        record = runtime.store.load(task_id)
        if record is None or transition(record.state, Change.ORPHAN) is None:
            return None  # finished, or waiting for its caller: nothing runs it
        history = record.task.history
        users = [m for m in history if m.role is Role.USER]
        message_id = users[-1].message_id if users else ""
        # The order's follow_up as queued is not kept: a task with an earlier user's
        # message was continued (or was sent more while running: rare, and told apart
        # by nothing stored).
        return QueuedRun(agent=agent, task_id=task_id, seq=record.seq, message_id=message_id,
                         follow_up=len(users) > 1, queued_at=time.time(), rerun=True)
    finally:
        # Let it go before the order is sent: its worker takes it.
        keeper.store.release_lease(task_id, keeper.owner)


def execute(runtime: Runtime, order: QueuedRun, *, rerun_safe: bool) -> Optional[Run]:
    """Worker side: claim the order's run, run it here until it ends, return it
    (None when there was nothing to run)."""
    run = claim(runtime, order, rerun_safe=rerun_safe)
    if run is None:
        return None
    runtime.start_here(run, leased=True)
    run.finished.wait()
    return run
