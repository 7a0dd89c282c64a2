"""Runners: where a task's executor runs.

The default (no runner on the :class:`~.runtime.Runtime`) runs each executor in a
greenlet or thread of the web worker that received the message.  A :class:`Runner`
sends runs elsewhere, to worker processes fed by a queue (Celery, see
:mod:`a2a_flask.web.celery_runner`).  What a runner must do:

1. **enqueue** (web side, :meth:`Runner.start`): call :func:`queue` (it makes
   the task exist in the store and lets the HTTP side follow the task's log), then
   put the :class:`QueuedRun` it returns (a small JSON object) on its queue;
2. **claim and run** (worker side): with the agent's app context, call
   :func:`execute` with that object: it loads the task, decides whether this is
   a first run or a re-delivery (see below), takes the task's lease and runs the
   executor with the same :class:`~.executor.TaskContext` API, writing to the
   shared store, until it ends;
3. **hand back**: acknowledge the message only after :func:`execute` returned
   (late acknowledgement), so that a run whose worker died is delivered again.

A run delivered again after its worker died (the task changed since it was
queued, and not only by the user's messages) either runs again from the start,
when the agent declared that safe (the first run's artifacts are dropped and a
status message says the task restarted; after :data:`MAX_RESTARTS` restarts the
task fails instead), or fails the task once, saying why.
Nothing else of the engine knows about runners: streams, blocking sends and
cancels read the store's log, whichever process writes it.
"""
from __future__ import annotations

import dataclasses
import time
from typing import Any, Dict, List, Optional, Tuple

from ..protocol.models import (Message, Role, Task, TaskState, TaskStatus,
                               TaskStatusUpdateEvent, utc_now)
from ..protocol.events import Event
from ..stores.base import TaskRecord
from .run import Run
from .runs import Runner
from .runtime import Runtime
from .writer import agent_message

__all__ = ["MAX_RESTARTS", "NOT_RERUN", "QueuedRun", "RESTARTED", "Runner", "TOO_MANY_RESTARTS",
           "claim", "execute", "queue"]

#: The status message of a task whose run was delivered again and restarted.
RESTARTED = ("The worker running this task stopped before it finished; the task was "
             "restarted from the beginning.")
#: Restarts of one run after which its task is failed instead (TOO_MANY_RESTARTS).
MAX_RESTARTS = 3
#: The status message of a task whose runs' workers kept dying.
TOO_MANY_RESTARTS = (f"The worker running this task stopped before it finished, after "
                     f"{MAX_RESTARTS} restarts too; the task failed and can be sent again.")
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
            kind = {"seq": int, "follow_up": bool, "queued_at": (int, float)}.get(field.name, str)
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
    run.decided.set()
    run.settled.set()
    run.finished.set()
    return QueuedRun(agent=agent, task_id=run.task_id, seq=record.seq,
                     message_id=run.message.message_id, follow_up=run.follow_up,
                     queued_at=time.time())


def _earlier_runs(runtime: Runtime, order: QueuedRun,
                  record: TaskRecord) -> Tuple[Optional[bool], int]:
    """What earlier deliveries of this order did: None (nothing: this is the first
    run), False (one wrote to the task and died), True (one ended its turn: it asked
    for input or finished, and only the acknowledgement was lost); and how many
    times the task was restarted since."""
    if record.seq == order.seq:
        return None, 0
    started, restarts = False, 0
    for entry in runtime.store.read(order.task_id, order.seq):
        event = entry.event
        if isinstance(event, Message) and event.role is Role.USER:
            continue
        started = True
        restarts += isinstance(event, Task)  # only a restart appends a whole task
        status = event.status if isinstance(event, (Task, TaskStatusUpdateEvent)) else None
        if status is not None and status.state.settled:
            return True, restarts
    return (False if started else None), restarts


def _restart(runtime: Runtime, task_id: str) -> Optional[TaskRecord]:
    """Drop a dead run's artifacts and say that the task restarts (one Task event)."""
    def build(current: TaskRecord) -> List[Event]:
        if current.state.terminal:
            return []
        task = current.task
        history = task.history + ([task.status.message] if task.status.message else [])
        status = TaskStatus(state=TaskState.WORKING, timestamp=utc_now(),
                            message=agent_message(RESTARTED, task_id, task.context_id))
        fresh: Event = Task(id=task.id, context_id=task.context_id, status=status,
                            history=history, artifacts=[], metadata=task.metadata)
        return [fresh]

    record = runtime.commit(task_id, build)
    return None if record.state.terminal else record


def claim(runtime: Runtime, order: QueuedRun, *, rerun_safe: bool) -> Optional[Run]:
    """The run to execute for ``order``, or None when there is nothing to run (the task
    is gone or finished, or it was delivered again and failed as it may not rerun)."""
    record = runtime.store.load(order.task_id)
    if record is None or record.state.terminal:
        return None
    earlier, restarts = _earlier_runs(runtime, order, record)
    if earlier:
        return None  # delivered again after its run ended its turn: nothing to do
    if earlier is False:
        if not rerun_safe:
            runtime.fail(order.task_id, NOT_RERUN)
            return None
        if restarts >= MAX_RESTARTS:  # its runs kill their workers (out of memory?)
            runtime.fail(order.task_id, TOO_MANY_RESTARTS)
            return None
        restarted = _restart(runtime, order.task_id)
        if restarted is None:
            return None
        record = restarted
    task = record.task
    message = next((m for m in reversed(task.history) if m.message_id == order.message_id),
                   None)
    if message is None:  # trimmed from the history (A2A_MAX_HISTORY): the last user's
        message = next((m for m in reversed(task.history) if m.role is Role.USER),
                       Message(message_id=order.message_id, role=Role.USER, parts=[]))
    run = Run(runtime.writer, message=message, task_id=task.id, context_id=task.context_id,
              tenant=record.tenant, owner=record.owner, dialect=record.dialect, record=record)
    run.follow_up = order.follow_up
    run.decided.set()
    return run


def execute(runtime: Runtime, order: QueuedRun, *, rerun_safe: bool) -> Optional[Run]:
    """Worker side: claim the order's run, run it here until it ends, return it
    (None when there was nothing to run)."""
    run = claim(runtime, order, rerun_safe=rerun_safe)
    if run is None:
        return None
    runtime.start_here(run)
    run.finished.wait()
    return run
