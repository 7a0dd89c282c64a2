"""Starting and stopping an agent's runs.

A client message starts a :class:`~.run.Run`: the agent's executor, called in a
greenlet (or a thread) detached from the HTTP request, here (the inline runner)
or in another process a :class:`Runner` sends it to.  Cancel writes CANCELED at
once (so it always ends in CANCELED or -32002), then stops the executor
(:meth:`~.run.Run.request_stop`).  At shutdown the runs here get a grace period,
then their tasks fail with a status message that says why.
"""
from __future__ import annotations

import logging
import os
import time
from typing import Callable, List, Optional, Protocol, Union

from ..concurrency import Worker
from ..observe import tasks as observe
from ..protocol.errors import StoreUnavailable, TaskGenerationMismatchError
from ..protocol.events import Event
from ..protocol.models import Message, TaskState, TaskStatus, TaskStatusUpdateEvent, utc_now
from ..stores.base import OnceClaim, TaskRecord
from .keeper import Keeper
from .run import Run, TaskCancelled
from .states import Change, transition
from .writer import TaskWriter

log = logging.getLogger("a2a_flask")

#: The status message of a task whose queued run could not be sent to a worker.
NOT_QUEUED = "The task could not be queued for a worker; it was not run and can be sent again."


class Runner(Protocol):
    """Sends runs to other processes (the contract: :mod:`a2a_flask.engine.runners`)."""

    def start(self, run: Run) -> None:
        """Queue ``run``; the web side then follows its task's log."""


class Runs:
    """Starts, cancels and stops the runs of one agent."""

    def __init__(self, writer: TaskWriter, keeper: Keeper, invoke: Callable[[Run], None], *,
                 runner: Optional[Runner] = None, cancel_grace: float = 5.0) -> None:
        self.writer = writer
        self.keeper = keeper
        self._invoke = invoke
        #: Where runs go instead of this process (see :mod:`.runners`); None: run here.
        self.runner = runner
        self.cancel_grace = cancel_grace

    def start_claimed(self, message: Message, claim: OnceClaim, *, task_id: str,
                      context_id: str, tenant: str, owner: str, dialect: str,
                      streamed: bool = False) -> Union[Run, str]:
        """:meth:`start_new` for an idempotent send: its task is made SUBMITTED, its key
        bound (``claim``) and, for a run here, its lease taken in one store write
        before the executor starts (:meth:`.Run.claim_task`).  The value another send
        bound the key to, instead, when one did: nothing is started then."""
        run = Run(self.writer, message=message, task_id=task_id, context_id=context_id,
                  tenant=tenant, owner=owner, dialect=dialect, record=None)
        run.streamed = streamed
        here = self.runner is None
        if here:  # the lease goes with the acceptance (a queued run's worker takes it)
            self.keeper.hold(run, with_first_write=True)
        try:
            held = run.claim_task(claim)
        except BaseException:
            if here:
                self.keeper.let_go(run)
            raise
        if held is not None:
            if here:
                self.keeper.let_go(run)
            return held
        if here:
            self._run_here(run)
        else:
            self._launch(run)
        return run

    def start_new(self, message: Message, *, task_id: str, context_id: str, tenant: str,
                  owner: str, dialect: str, create_task: bool = False,
                  streamed: bool = False) -> Run:
        """Run the executor for a message that starts a new task (or a Message reply).

        ``create_task`` creates the task before the executor starts, for
        clients that only understand tasks (a reply then completes the task).
        """
        run = Run(self.writer, message=message, task_id=task_id, context_id=context_id,
                  tenant=tenant, owner=owner, dialect=dialect, record=None)
        run.streamed = streamed
        if create_task:
            run.ensure_task()
        self._launch(run)
        return run

    def continue_task(self, record: TaskRecord, message: Message,
                      if_generation: Optional[int] = None) -> TaskRecord:
        """Add a user message to an existing task; restart the executor if it was paused.

        ``if_generation`` (the 1.1 draft's ``ifGenerationMatch``): the message is
        appended only if the task's generation is this one, judged on the stored task
        by the append's compare-and-set (:meth:`.TaskWriter.commit`), else
        :class:`~a2a_flask.errors.TaskGenerationMismatchError` and nothing changes.
        Such a message always moves the generation (to a running task it comes with
        a status event restating the state), so that of several sends made on the same
        generation exactly one is appended (docs/generations.rst)."""
        task_id = record.task.id
        message.task_id, message.context_id = task_id, record.task.context_id
        resumed = False

        def build(current: TaskRecord) -> List[Event]:
            nonlocal resumed
            state = transition(current.state, Change.MESSAGE, task_id=task_id)
            if if_generation is not None and current.generation != if_generation:
                raise TaskGenerationMismatchError(
                    f"Task generation mismatch: expected {if_generation} but current "
                    f"generation is {current.generation}",
                    metadata={"taskId": task_id, "expectedGeneration": if_generation,
                              "currentGeneration": current.generation})
            resumed = state is not None
            if state is None and if_generation is None:
                return [message]  # the running executor sees it in ctx.history
            status = TaskStatus(state=state or current.state, timestamp=utc_now())
            return [message, TaskStatusUpdateEvent(task_id, current.task.context_id, status)]

        updated = self.writer.commit(task_id, build, record, caller=True)
        if resumed:
            run = Run(self.writer, message=message, task_id=task_id,
                      context_id=record.task.context_id, tenant=record.tenant,
                      owner=record.owner, dialect=record.dialect, record=updated)
            self._launch(run)
        return updated

    def _launch(self, run: Run) -> None:
        if self.runner is None:
            self.start_here(run)
            return
        try:
            self.runner.start(run)  # queued: a worker process claims and runs it
        except Exception:
            # The task exists; nothing will run it: fail it now rather than leave it queued.
            log.exception("could not queue task %s for a worker", run.task_id)
            self.writer.fail(run.task_id, NOT_QUEUED)
            raise

    def start_here(self, run: Run, *, leased: bool = False) -> None:
        """Claim ``run`` (its lease; ``leased``: taken already) and start its executor
        in a greenlet or thread of this process: the inline runner, and what a queued
        run's worker calls."""
        self.keeper.hold(run, leased=leased)
        self._run_here(run)

    def _run_here(self, run: Run) -> None:
        """Start the executor of ``run``, held here already (:meth:`.Keeper.hold`)."""
        keeper = self.keeper

        def target() -> None:
            try:
                self._invoke(run)
            finally:
                run.end()
                keeper.let_go(run)

        run.worker = Worker(observe.run_scope(target, run.task_id, run.context_id),
                            name=f"a2a-task-{run.task_id}")

    def cancel(self, task_id: str) -> TaskRecord:
        """Move a task to CANCELED now, then stop its executor if it runs here (one
        running elsewhere is stopped by its keeper, which sees the state)."""

        def build(current: TaskRecord) -> List[Event]:
            state = transition(current.state, Change.CANCEL, task_id=task_id)
            assert state is not None  # (the table: a cancel always moves or is refused)
            status = TaskStatus(state=state, timestamp=utc_now())
            return [TaskStatusUpdateEvent(task_id, current.task.context_id, status)]

        record = self.writer.commit(task_id, build)
        run = self.keeper.run_here(task_id)
        if run is not None:
            run.request_stop(self.cancel_grace)
        return record

    def stop(self, deadline: float) -> None:
        """Wait until ``deadline`` (monotonic) for the runs here to finish; fail the tasks
        of the rest with a status message that says why, release their leases, and
        stop their executors."""
        keeper = self.keeper
        # Runs started while the first ones finish (a send accepted just before the
        # stop began) get the same deadline: look again until none is left.
        while True:
            pending = [run for run in keeper.runs_here() if not run.finished.is_set()]
            left = deadline - time.monotonic()
            if not pending or left <= 0:
                break
            pending[0].finished.wait(left)
        pid = os.getpid()
        for run in keeper.runs_here():
            if run.finished.is_set() or not keeper.take_back(run):
                continue  # another call (a signal, then the exit) is on it: one line per task
            run.cancel_requested = True  # its next emission stops it
            try:
                record = self.writer.fail(run.task_id, (
                    f"The server shut down (worker {pid} stopped) before this task finished; "
                    "it was not completed and can be sent again."))
                if record is not None and record.state is TaskState.FAILED:
                    log.warning("task %s failed: the worker shut down before it finished",
                                run.task_id)
                keeper.store.release_lease(run.task_id, keeper.owner)
            except StoreUnavailable:
                log.warning("task %s was running at shutdown and the store is down: its "
                            "lease expires and it fails then", run.task_id)
            if run.worker is not None:
                run.worker.kill(TaskCancelled)
