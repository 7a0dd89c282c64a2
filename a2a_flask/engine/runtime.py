"""The task engine of one agent: its parts, built in one place.

:class:`Runtime` assembles four parts with one job each, and is what the
service calls:

* :class:`~.writer.TaskWriter` (``writer.py``): commits changes to tasks;
* :class:`~.runs.Runs` (``runs.py``): starts, cancels and stops executor runs
  (each one a :class:`~.run.Run`, ``run.py``);
* :class:`~.keeper.Keeper` (``keeper.py``): the background loop of each
  process: leases, remote cancels, orphans, retention;
* :class:`~.following.Following` (``following.py``): waits on tasks and
  follows their logs.

How a task lives
----------------
A client message starts a :class:`Run`: the agent's executor, called in a
greenlet (or a thread) detached from the HTTP request.  The task itself is
created lazily, on the run's first task-shaped emission, so an agent may
instead answer with a single Message and no task ever exists.

Every change is an event appended to the task's log in the store together with
the snapshot it yields (:func:`apply_event`); under gevent the streamed chunks
of a burst wait in their run until the executor yields, and are appended
together (:meth:`.Run.add_artifact`).  Appends are compare-and-set on
the sequence number; :meth:`.TaskWriter.commit` reloads and retries on conflict and
applies every change, each asking the state machine (:mod:`.states`, one table)
what it does to the task as it is at that moment:

* terminal states (COMPLETED, FAILED, CANCELED, REJECTED) never change;
* SUBMITTED exists only at creation, UNSPECIFIED never;
* a user message to an interrupted task (INPUT_REQUIRED, AUTH_REQUIRED) is
  appended to the history and moves the task back to WORKING in the same step.

Cancel writes CANCELED at once (so it always ends in CANCELED or -32002), then
stops the executor: cooperatively first (``ctx.cancelled`` turns true, and any
further emission raises :class:`TaskCancelled`), and by force once the grace
period is over (the greenlet is killed; a thread cannot be, but it can no
longer change the task).

Everything that waits (blocking sends, streams, resubscribes) reads the log
from a sequence number on, so they all see the same events in the same order.

A store outage shorter than ``store_grace`` (``A2A_STORE_GRACE``) loses no
work: a run's appends are retried in order while its executor waits at its
next emission (:meth:`.Run._append`), followers wait for the store instead of
ending, and keepers judge leases only a lease's time after an outage (see
docs/workers-and-hosts.rst, "A store outage: the grace").
"""
from __future__ import annotations

import time
from typing import Callable, Iterator, List, Optional, Sequence, Union

from ..protocol.calls import Wait
from ..protocol.events import Event
from ..protocol.models import Message
from ..stores.base import LogEntry, OnceClaim, TaskRecord, TaskStore
from ..stores.shared import SharedLog
from .following import Following
from .keeper import Keeper, ProcessName
from .run import Run
from .runs import Runner, Runs
from .writer import TaskWriter

#: Arranges for ``shutdown(grace)`` to be called when the current process is told to
#: stop (such as :func:`a2a_flask.web.deploy.on_worker_shutdown`).
StopHook = Callable[[Callable[[float], None]], object]


class Runtime:
    """The engine of one agent: its writer, runs, keeper and following, and the
    operations the service calls on them."""

    def __init__(self, store: TaskStore, invoke: Callable[[Run], None], *,
                 cancel_grace: float = 5.0, close_on_auth_required: bool = True,
                 lease_ttl: float = 30.0, task_ttl: float = 0.0, max_history: int = 0,
                 max_task_bytes: int = 0, store_grace: float = 0.0, sender: object = None,
                 runner: Optional[Runner] = None, log: Optional[SharedLog] = None,
                 name: Optional[ProcessName] = None,
                 chores: Sequence[Callable[[], None]] = (),
                 stop_hooks: Sequence[StopHook] = (), scope: Optional[str] = None) -> None:
        self.store = store
        #: The reads of followers, shared per task in this process (streams, waits, pushes).
        self.log = log or SharedLog(store)
        self.writer = TaskWriter(store, sender=sender, max_history=max_history,
                                 max_task_bytes=max_task_bytes, store_grace=store_grace)
        self.keeper = Keeper(store, self.writer, name=name, lease_ttl=lease_ttl,
                             task_ttl=task_ttl, store_grace=store_grace,
                             cancel_grace=cancel_grace, chores=chores,
                             on_new_process=[self._stop_with(hook) for hook in stop_hooks],
                             scope=scope,
                             # A runner may queue again a task whose run's lease
                             # expired (see .runners).
                             orphaned=getattr(runner, "orphaned", None))
        self.following = Following(self.log, self.keeper, store_grace=store_grace,
                                   close_on_auth_required=close_on_auth_required)
        self.runs = Runs(self.writer, self.keeper, invoke, runner=runner,
                         cancel_grace=cancel_grace)
        self._shutdown_deadline: Optional[float] = None

    def _stop_with(self, hook: StopHook) -> Callable[[], object]:
        return lambda: hook(self.shutdown)

    @property
    def sender(self) -> object:
        """The sender of the task signals (the A2A extension object)."""
        return self.writer.sender

    # -- writing

    def commit(self, task_id: str, build: Callable[[TaskRecord], List[Event]],
               known: Optional[TaskRecord] = None, *, caller: bool = False) -> TaskRecord:
        """See :meth:`.TaskWriter.commit`."""
        return self.writer.commit(task_id, build, known, caller=caller)

    def check_message_size(self, message: Message) -> None:
        """See :meth:`.TaskWriter.check_message_size`."""
        self.writer.check_message_size(message)

    def fail(self, task_id: str, text: str) -> Optional[TaskRecord]:
        """See :meth:`.TaskWriter.fail`."""
        return self.writer.fail(task_id, text)

    # -- runs

    def start_claimed(self, message: Message, claim: OnceClaim, *, task_id: str,
                      context_id: str, tenant: str, owner: str, dialect: str,
                      streamed: bool = False) -> Union[Run, str]:
        """See :meth:`.Runs.start_claimed`."""
        return self.runs.start_claimed(message, claim, task_id=task_id, context_id=context_id,
                                       tenant=tenant, owner=owner, dialect=dialect,
                                       streamed=streamed)

    def start_new(self, message: Message, *, task_id: str, context_id: str, tenant: str,
                  owner: str, dialect: str, create_task: bool = False,
                  streamed: bool = False) -> Run:
        """See :meth:`.Runs.start_new`."""
        return self.runs.start_new(message, task_id=task_id, context_id=context_id,
                                   tenant=tenant, owner=owner, dialect=dialect,
                                   create_task=create_task, streamed=streamed)

    def continue_task(self, record: TaskRecord, message: Message,
                      if_generation: Optional[int] = None) -> TaskRecord:
        """See :meth:`.Runs.continue_task`."""
        return self.runs.continue_task(record, message, if_generation)

    def start_here(self, run: Run, *, leased: bool = False) -> None:
        """See :meth:`.Runs.start_here`."""
        self.runs.start_here(run, leased=leased)

    def cancel(self, task_id: str) -> TaskRecord:
        """See :meth:`.Runs.cancel`."""
        return self.runs.cancel(task_id)

    def local_run(self, task_id: str) -> Optional[Run]:
        """The run of ``task_id`` in this process, if any."""
        return self.keeper.run_here(task_id)

    # -- the process

    def ensure_keeper(self) -> None:
        """Start this process's keeper if it has none (after a fork, a new one)."""
        self.keeper.ensure()

    def close(self) -> None:
        """Stop this process's keeper (the store is closed separately)."""
        self.keeper.close()

    @property
    def stopping(self) -> bool:
        """Whether this process's work is stopping (:meth:`shutdown` was called)."""
        return self._shutdown_deadline is not None

    def shutdown(self, grace: float) -> None:
        """Stop this process's work: streams of tasks running elsewhere end now; the
        runs here get ``grace`` seconds to finish; the rest are FAILED with a status
        message that says why, and their leases released.

        Safe to call more than once (a signal, then the exit): a later call keeps
        the first call's deadline.
        """
        if self._shutdown_deadline is None:
            self._shutdown_deadline = time.monotonic() + grace
        self.following.stop()
        self.runs.stop(self._shutdown_deadline)

    # -- reading

    def wait_settled(self, task_id: str, timeout: float) -> TaskRecord:
        """See :meth:`.Following.wait_settled`."""
        return self.following.wait_settled(task_id, timeout)

    def long_poll(self, record: TaskRecord, current: int, timeout: float) -> TaskRecord:
        """See :meth:`.Following.long_poll`."""
        return self.following.long_poll(record, current, timeout)

    def follow(self, task_id: str, after_seq: int, heartbeat: float, *,
               park_outside: bool = False) -> Iterator[Union[LogEntry, None, Wait]]:
        """See :meth:`.Following.follow`."""
        return self.following.follow(task_id, after_seq, heartbeat, park_outside=park_outside)
