"""The lifecycles of a run's lease and of a run: a table each, and the function each move asks.

**A lease** (:class:`~.writer.Lease`) is a run's claim on its task in the store: the
keeper renews it each round, and a task whose lease runs out is failed as an
orphan (:mod:`.keeper`).  It is in one of three states (:class:`LeaseState`)::

    DEFERRED  not in the store yet: a run that makes a new task while the store has
              just answered takes it with its first write (Keeper.hold)
    HELD      in the store; the keeper renews it
    DONE      let go (with the write that finished the task, or when the run ended),
              or never needed (the run's first write finished its task)

A run starts with its lease HELD or DEFERRED (:meth:`.Keeper.hold` chooses), and
three things happen to it (:class:`LeaseEvent`): a write of the run that leaves
its task running, a write that finishes the task, and the run's end.
:data:`LEASE_TABLE` says, for each state and each of them, what the store is asked
besides the write (:class:`LeaseAction`) and the state after.  Read as rows::

    DEFERRED  a write that leaves the task running takes the lease first (a task is
              never stored running without one; an idempotent send's acceptance
              takes it in the same store write); a finishing write, or the end of a
              run that wrote nothing, needs no lease at all
    HELD      the finishing write lets the lease go in the same store call (where the
              store can); the end of a run that did not finish its task lets it go alone
    DONE      nothing is asked: any later write leaves it alone

Every pair is allowed.  Asking the table moves nothing (:meth:`.Lease.step`); the
writer (:meth:`.TaskWriter.commit`, :meth:`.TaskWriter.create`) and, at a run's
end, the keeper (:meth:`.Keeper.let_go`) make the store calls and then move the
lease, and nothing else moves it (at shutdown :meth:`.Runs.stop` takes back the
runs still going, fails their tasks and releases their leases in the store
whatever their state: those runs are over).  A lease moves once the store has
done what the move asks, never before: a deferred lease is HELD once taken
(whatever its write does next), and a write that fails leaves the lease as it
was, so that the run's next try asks the table again.  (The run's end leaves it
DONE even when the store did not answer the release: nobody renews it any more,
and it expires.)

In the store a lease is free, live (held by one process, until its expiry) or
expired, and taking it is set-if-absent
(:meth:`~a2a_flask.stores.TaskStore.acquire_lease`): a process takes a free or
expired lease or renews its own, never another's live one, so a task has one run
at a time.  A take the store refuses moves nothing: TAKE_FIRST raises
:class:`~.writer.LeaseHeld` and the lease stays DEFERRED (the write is not made);
:meth:`.Keeper.hold` waits briefly for the lease to be let go, then raises the
same; a queued run's claim takes it before anything else and, refused, runs
nothing (:mod:`.runners`).  A lease that expired (its process died) is a keeper's
of the task's agent: it fails the task and drops the lease, or, for a rerun-safe
agent whose runner runs tasks elsewhere, takes the lease (one keeper of all),
queues the task again and lets it go.

**A run** (:class:`~.run.Run`) is one call of an executor.  The HTTP side waits on
three of its events: ``decided`` (the run made a task or a reply, or failed before
either: a stream knows what to follow), ``settled`` (a blocking send can answer)
and ``finished`` (the executor returned).  Which are set is the run's phase
(:class:`RunPhase`, :data:`SIGNALS`): only a move of the phase sets them, and none
is ever cleared::

    UNDECIDED        a new task's run before its first emission   (none)
    WORKING          its task exists (a run on an existing task,  decided
                     a follow-up or a queued one, starts here)
    SETTLED          it wrote a terminal or interrupted state     decided, settled
    REPLIED          it answered with a Message: no task, ever    decided, settled
    UNSTARTED        it failed before it made a task or a reply   decided, settled
                     (the store was down): its caller gets its error
    ENDED            its executor returned, or it went to a       decided, settled,
                     worker process's queue (runners.queue)       finished
    ENDED_UNDECIDED  its executor returned before the run made    settled, finished
                     anything (stopped at shutdown before its
                     first emission, its store closed or failed)

:data:`RUN_TABLE` gives the phase each event (:class:`RunEvent`) leads to; a pair
it lacks is refused (:class:`LifecycleError`: a bug in the engine, never a
caller's error).  Read as rows::

    UNDECIDED        the task is made (WORKING), a reply (REPLIED), a failure to
                     start (UNSTARTED), or the end (ENDED_UNDECIDED)
    WORKING          a settled state written (SETTLED); the end
    SETTLED          another settled state written (an interrupted task goes on);
                     the end
    REPLIED          the end
    UNSTARTED        the end
    ENDED, ENDED_UNDECIDED   nothing of the executor's any more

and five moves that a caller's :meth:`~.run.Run.ensure_task` (``returnImmediately``,
a webhook's registration) or the run's background append make in a race with the
executor: a caller makes the task of a run that failed to start (UNSTARTED, or
ENDED after it, stays) or that ended undecided (ENDED: ``decided`` now, for a
stream of the task); the executor fails to start while a caller made its task
(UNSTARTED all the same: it is what its waiter hears); chunks the executor left
waiting are appended, settled, after it returned (ENDED stays).

Beside its phase a run has one latch, ``cancel_requested``: set once a cancel or
the shutdown asks it to stop (its next emission raises), never cleared; one
transient, ``stalled``: true while one of its appends waits for the store to come
back; and ``error``, what its waiting caller gets (set when it enters UNSTARTED,
or before it ends when its task stopped for a store outage).  ``follow_up`` and
``streamed`` say how it was started; they are set before its executor runs.
"""
from __future__ import annotations

import enum
from typing import Dict, FrozenSet, NamedTuple


class LifecycleError(RuntimeError):
    """A move the table refuses: the engine asked something its lifecycle forbids."""


class _Keyed(enum.Enum):
    """An enum whose members key the tables below: hashed by identity, in C (a
    plain Enum hashes its name in Python, and the tables are read on every write)."""

    __hash__ = object.__hash__


# ------------------------------------------------------------------ a lease


class LeaseState(_Keyed):
    """Where a run's lease is (see the module docstring)."""

    DEFERRED = "to be taken with the run's first write"
    HELD = "in the store, renewed by the keeper"
    DONE = "let go, or never needed"


class LeaseEvent(_Keyed):
    """What happens to a run's lease."""

    WRITE = "the run writes and its task goes on running"
    FINISHING_WRITE = "the run writes the events that finish its task"
    RUN_ENDS = "the run ended"


class LeaseAction(_Keyed):
    """What the store is asked for a lease, besides the write itself."""

    NOTHING = "nothing"
    TAKE_FIRST = "take the lease, before the write (or in it: a claimed creation's)"
    RELEASE_WITH_WRITE = "let the lease go with the write (one call where the store can)"
    RELEASE = "let the lease go"


class LeaseStep(NamedTuple):
    """One cell of :data:`LEASE_TABLE`."""

    action: LeaseAction
    then: LeaseState


LS, LE, LA = LeaseState, LeaseEvent, LeaseAction
_LEFT_ALONE = LeaseStep(LA.NOTHING, LS.DONE)
#: What each event asks of the store and leaves the lease in, for each state.
LEASE_TABLE: Dict[LeaseState, Dict[LeaseEvent, LeaseStep]] = {
    LS.DEFERRED: {LE.WRITE: LeaseStep(LA.TAKE_FIRST, LS.HELD),
                  LE.FINISHING_WRITE: LeaseStep(LA.NOTHING, LS.DONE),
                  LE.RUN_ENDS: LeaseStep(LA.NOTHING, LS.DONE)},
    LS.HELD: {LE.WRITE: LeaseStep(LA.NOTHING, LS.HELD),
              LE.FINISHING_WRITE: LeaseStep(LA.RELEASE_WITH_WRITE, LS.DONE),
              LE.RUN_ENDS: LeaseStep(LA.RELEASE, LS.DONE)},
    LS.DONE: {LE.WRITE: _LEFT_ALONE, LE.FINISHING_WRITE: _LEFT_ALONE, LE.RUN_ENDS: _LEFT_ALONE},
}


def lease_step(state: LeaseState, event: LeaseEvent) -> LeaseStep:
    """What ``event`` asks of the store for a lease in ``state``, and its state after."""
    return LEASE_TABLE[state][event]


# ------------------------------------------------------------------ a run


class RunPhase(_Keyed):
    """Where a run is (see the module docstring)."""

    UNDECIDED = "no task and no reply yet"
    WORKING = "its task exists"
    SETTLED = "it wrote a terminal or interrupted state"
    REPLIED = "it answered with a Message"
    UNSTARTED = "it failed before it made a task or a reply"
    ENDED = "its executor returned, or it went to a worker's queue"
    ENDED_UNDECIDED = "its executor returned before the run made a task or a reply"


class RunEvent(_Keyed):
    """What happens to a run."""

    TASK_MADE = "its task is made (its first write, or a caller's ensure_task)"
    SETTLE = "it wrote a terminal or interrupted state"
    REPLY = "the executor answered with a Message"
    START_FAILED = "it failed before it made a task or a reply"
    END = "its executor returned, or it went to a worker's queue"


class Signal(_Keyed):
    """The events of a run that the HTTP side waits on."""

    DECIDED = "decided"
    SETTLED = "settled"
    FINISHED = "finished"


RP, RE, SG = RunPhase, RunEvent, Signal
#: The phase each event leads to, for each phase; a missing pair is refused.
RUN_TABLE: Dict[RunPhase, Dict[RunEvent, RunPhase]] = {
    RP.UNDECIDED: {RE.TASK_MADE: RP.WORKING, RE.REPLY: RP.REPLIED,
                   RE.START_FAILED: RP.UNSTARTED, RE.END: RP.ENDED_UNDECIDED},
    RP.WORKING: {RE.SETTLE: RP.SETTLED, RE.END: RP.ENDED,
                 RE.START_FAILED: RP.UNSTARTED},  # a caller made the task meanwhile
    RP.SETTLED: {RE.SETTLE: RP.SETTLED, RE.END: RP.ENDED},
    RP.REPLIED: {RE.END: RP.ENDED},
    RP.UNSTARTED: {RE.END: RP.ENDED,
                   RE.TASK_MADE: RP.UNSTARTED},  # a caller made the task afterwards
    RP.ENDED: {RE.TASK_MADE: RP.ENDED,  # a caller made the task after a failed start
               RE.SETTLE: RP.ENDED},  # chunks left waiting, appended after the end
    RP.ENDED_UNDECIDED: {RE.TASK_MADE: RP.ENDED},  # a caller made the task afterwards
}
#: The events set while a run is in each phase (a move sets those of its new phase).
SIGNALS: Dict[RunPhase, FrozenSet[Signal]] = {
    RP.UNDECIDED: frozenset(),
    RP.WORKING: frozenset({SG.DECIDED}),
    RP.SETTLED: frozenset({SG.DECIDED, SG.SETTLED}),
    RP.REPLIED: frozenset({SG.DECIDED, SG.SETTLED}),
    RP.UNSTARTED: frozenset({SG.DECIDED, SG.SETTLED}),
    RP.ENDED: frozenset({SG.DECIDED, SG.SETTLED, SG.FINISHED}),
    RP.ENDED_UNDECIDED: frozenset({SG.SETTLED, SG.FINISHED}),
}


def run_move(phase: RunPhase, event: RunEvent) -> RunPhase:
    """The phase ``event`` leads a run in ``phase`` to.

    :raises LifecycleError: the table has no such move.
    """
    try:
        return RUN_TABLE[phase][event]
    except KeyError:
        raise LifecycleError(f"a run {phase.name} cannot take {event.name} "
                             f"({event.value}): it is {phase.value}") from None
