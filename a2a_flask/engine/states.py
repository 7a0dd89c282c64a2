"""The task state machine: one table, and :func:`transition`, which every change asks.

A change comes from one of three places, and :class:`Change` names them:

* the **executor** sets a state (``STATUS``), adds output that keeps the state
  (``OUTPUT``: an artifact, a chunk, a message), or returns (``FINISH``);
* the **caller** sends a message to the task (``MESSAGE``) or cancels it (``CANCEL``);
* the **engine** fails a task (``FAIL``: shutdown, an outage past the grace) or
  fails an orphan whose runner stopped renewing its lease (``ORPHAN``).

:data:`TABLE` says, for each state a task is in and each change, what the change
does: move the task to a state, keep its state (:data:`KEEP`), do nothing
(:data:`NOTHING`: the change has nothing left to do), or refuse (a
:class:`Refusal`, raised as the error the protocol names).  Read as rows::

    open (SUBMITTED, WORKING)     anything goes; FINISH completes, MESSAGE is added
                                  to the history for the running executor
    interrupted (INPUT_REQUIRED,  the executor is paused: MESSAGE resumes it (WORKING);
      AUTH_REQUIRED)              FINISH and ORPHAN leave the task waiting for its caller
    terminal (COMPLETED, FAILED,  nothing changes any more: the executor's changes are
      CANCELED, REJECTED)         refused, the caller's are refused with the protocol's
                                  errors, the engine's do nothing

``STATUS`` may never ask for SUBMITTED (a task has it only at creation) or
UNSPECIFIED.  :meth:`TaskWriter.commit <a2a_flask.engine.writer.TaskWriter.commit>`
applies changes with compare-and-set; each of its ``build`` steps asks
:func:`transition` about the state the task is in at that moment.
"""
from __future__ import annotations

import enum
from typing import Dict, Optional, Union

from ..protocol.errors import TaskNotCancelableError, UnsupportedOperationError
from ..protocol.models import TaskState


class TaskClosedError(RuntimeError):
    """An executor tried to change a task that already reached a terminal state."""


class Change(enum.Enum):
    """What is asked of a task, and by whom (see the module docstring)."""

    STATUS = "executor sets a state"
    OUTPUT = "executor adds an artifact or a message"
    FINISH = "executor returned"
    MESSAGE = "caller sends a message"
    CANCEL = "caller cancels"
    FAIL = "engine fails the task"
    ORPHAN = "engine fails a task whose runner is gone"


class Refusal(enum.Enum):
    """Why a change is refused; :func:`transition` raises the matching error."""

    CLOSED = "the task is finished: its executor can change it no more"
    FINISHED_TAKES_NO_MESSAGE = "a finished task takes no more messages"
    NOT_CANCELABLE = "a finished task cannot be canceled"


#: The change is allowed and the task keeps its state.
KEEP = "keep"
#: The change has nothing to do (no event is written).
NOTHING = "nothing"

Outcome = Union[TaskState, str, Refusal]

S, C = TaskState, Change
_OPEN: Dict[Change, Outcome] = {
    C.STATUS: KEEP, C.OUTPUT: KEEP, C.FINISH: S.COMPLETED, C.MESSAGE: KEEP,
    C.CANCEL: S.CANCELED, C.FAIL: S.FAILED, C.ORPHAN: S.FAILED,
}
_INTERRUPTED: Dict[Change, Outcome] = {
    C.STATUS: KEEP, C.OUTPUT: KEEP, C.FINISH: NOTHING, C.MESSAGE: S.WORKING,
    C.CANCEL: S.CANCELED, C.FAIL: S.FAILED, C.ORPHAN: NOTHING,
}
_TERMINAL: Dict[Change, Outcome] = {
    C.STATUS: Refusal.CLOSED, C.OUTPUT: Refusal.CLOSED, C.FINISH: NOTHING,
    C.MESSAGE: Refusal.FINISHED_TAKES_NO_MESSAGE, C.CANCEL: Refusal.NOT_CANCELABLE,
    C.FAIL: NOTHING, C.ORPHAN: NOTHING,
}
#: What each change does to a task in each state (``STATUS``: :data:`KEEP` stands
#: for "the state asked for").  UNSPECIFIED is no task's state: it has no row.
TABLE: Dict[TaskState, Dict[Change, Outcome]] = {
    S.SUBMITTED: _OPEN, S.WORKING: _OPEN,
    S.INPUT_REQUIRED: _INTERRUPTED, S.AUTH_REQUIRED: _INTERRUPTED,
    S.COMPLETED: _TERMINAL, S.FAILED: _TERMINAL, S.CANCELED: _TERMINAL, S.REJECTED: _TERMINAL,
}


def transition(current: TaskState, change: Change, *, to: Optional[TaskState] = None,
               task_id: str = "") -> Optional[TaskState]:
    """What ``change`` does to a task in state ``current``: the state to write, None
    when the state stays (output, a message to a running task) or when there is
    nothing to do (the caller tells the two apart by what it would write besides).

    :param to: the state ``STATUS`` asks for.
    :param task_id: named in the errors callers receive.
    :raises TaskClosedError: the executor changes a finished task.
    :raises ValueError: ``STATUS`` asks for SUBMITTED or UNSPECIFIED.
    :raises UnsupportedOperationError: a message to a finished task.
    :raises TaskNotCancelableError: a cancel of a finished task.
    """
    outcome = TABLE[current][change]
    if isinstance(outcome, Refusal):
        raise _refused(outcome, current, task_id)
    if change is Change.STATUS:
        if to is None or to in (S.UNSPECIFIED, S.SUBMITTED):
            raise ValueError(f"a task cannot move to {'nothing' if to is None else to.value}")
        return to
    return outcome if isinstance(outcome, TaskState) else None


def _refused(refusal: Refusal, current: TaskState, task_id: str) -> Exception:
    facts = {"taskId": task_id, "state": current.value}
    if refusal is Refusal.CLOSED:
        return TaskClosedError(f"task is already {current.value}")
    if refusal is Refusal.FINISHED_TAKES_NO_MESSAGE:
        return UnsupportedOperationError(
            f"Task {task_id} is {current.value}; a terminal task takes no more messages "
            "(start a new task in the same context)", metadata=facts)
    return TaskNotCancelableError(f"Task {task_id} is already {current.value}", metadata=facts)
