"""The Celery runner (``A2A_RUNNER=celery``, the ``celery`` extra): executors run in
Celery workers, the web tier only records tasks and follows their logs.

The web tier queues each run as a Celery message (a :class:`~a2a_flask.engine.runners.QueuedRun`,
sent by task name, so the web tier needs no worker code); the worker runs
it inside the Flask app context, writing to the shared task store, which is the
result (no result backend).  The Celery task is registered with late
acknowledgement and ``reject_on_worker_lost``.  A task is claimed with its lease
(set-if-absent): a delivery whose task runs in another worker does nothing.  A run
whose worker died is run again, or its task failed, once its lease expired: a
keeper queues it again through this runner (rerun-safe agents) or fails it,
whatever the broker's redelivery does (see :mod:`a2a_flask.engine.runners`).
Run orders travel as JSON whatever the app's serializer, and the worker refuses
any other content type for them (a pickled order is never executed).
Celery is imported only here, and only when the runner is configured.
"""
from __future__ import annotations

import logging
import math
import time
from typing import Any, Dict, Optional

from flask import Flask

from .. import signals
from ..engine.runners import LeaseBusy, QueuedRun, execute, queue, requeue
from ..engine.run import Run
from ..engine.runs import NOT_QUEUED
from ..engine.runtime import Runtime
from ..observe import otel
from ..protocol.errors import StoreUnavailable

#: The Celery task name of an agent's runs is this prefix plus the agent's name.
TASK_PREFIX = "a2a_flask.run."
#: Seconds before a run that found the store down is tried again (re-queued, not lost).
STORE_RETRY_DELAY = 2.0
#: Seconds before an order whose task's lease another process holds is tried again
#: (:class:`~a2a_flask.engine.runners.LeaseBusy`), for about a lease's time at most.
LEASE_RETRY_DELAY = 1.0

log = logging.getLogger("a2a_flask")
#: How run orders travel, whatever the app's ``task_serializer``; the worker refuses any
#: other content type for them, whatever its ``accept_content``.
SERIALIZER = "json"
CONTENT_TYPE = "application/json"


def _json_only_strategy(task: Any, app: Any, consumer: Any, **options: Any) -> Any:
    """How the worker takes run orders: Celery's own strategy, behind a check of the
    message's content type.  One that is not JSON is refused as Celery refuses a
    message it cannot take (logged, rejected, ``task_rejected``) before its body is
    decoded.

    An app may accept pickle for its own tasks (``accept_content``); a pickled run
    order is then still never unpickled: Celery's strategy decodes the body, so the
    check comes before it, on the content type the message's properties carry.  (A
    message of Celery's first protocol is decoded before any task's strategy runs:
    keeping pickle out of a worker altogether is ``accept_content``'s job.)
    """
    from celery.worker.strategy import default  # type: ignore[import-untyped]
    from kombu.exceptions import ContentDisallowed

    handle = default(task, app, consumer, **options)

    def handle_json_only(message: Any, *args: Any, **kwargs: Any) -> Any:
        if message.content_type != CONTENT_TYPE:
            raise ContentDisallowed(
                f"{task.name}: a run order must be {CONTENT_TYPE}, not "
                f"{message.content_type!r}; refused")
        return handle(message, *args, **kwargs)

    return handle_json_only


class CeleryRunner:
    """Queues an agent's runs on a Celery app and runs them in its workers.

    ``celery`` is the Celery app, or None to use ``app.extensions["celery"]``
    (Flask's documented app-factory pattern sets it), looked up when first needed.
    """

    def __init__(self, app: Flask, agent: str, *, celery: Any = None,
                 rerun_safe: bool = False) -> None:
        self.flask_app = app
        self.agent = agent
        self.rerun_safe = rerun_safe
        self.task_name = TASK_PREFIX + agent
        self._celery = celery
        self._registered: Optional[Any] = None
        if self.find() is not None:
            self.register()
            self.prepare()
        else:  # the app factory may set app.extensions["celery"] after init_app
            from celery import signals as celery_signals  # type: ignore[import-untyped]

            celery_signals.worker_init.connect(self._on_worker_init, weak=False)

    def find(self) -> Any:
        """The Celery app, or None when none is known yet."""
        return self._celery if self._celery is not None else (
            self.flask_app.extensions.get("celery"))

    def celery(self) -> Any:
        """The Celery app; a clear error when there is none."""
        found = self.find()
        if found is None:
            raise RuntimeError(
                f"A2A agent {self.agent!r} has A2A_RUNNER=celery but no Celery app: pass "
                "celery=... to A2A(...) or set app.extensions['celery'] (as Flask's "
                "documentation's celery_init_app does)")
        return found

    def prepare(self) -> None:
        """Import the broker's client now, at start-up: the first send would import it
        (hundreds of milliseconds) while the worker serves requests."""
        celery = self.celery()
        with celery.connection_for_write() as connection:
            connection.transport  # resolves (imports) the transport, connects nothing
        celery.amqp  # the message protocol's module

    def _on_worker_init(self, **_: Any) -> None:
        if self.find() is not None:
            self.register()
            self.prepare()

    def register(self) -> None:
        """Register the worker's task on the Celery app (once)."""
        celery = self.celery()
        if self._registered is celery:
            return
        self._registered = celery
        if self.task_name in celery.tasks:
            return
        runner = self

        def run(task: Any, order: Dict[str, Any]) -> None:
            try:
                runner.run(order)
            except StoreUnavailable:  # before the run started (after, the run handles it)
                raise task.retry(countdown=STORE_RETRY_DELAY, max_retries=None)
            except LeaseBusy as busy:
                # Its task's previous run has not let the lease go yet, or died holding
                # it: that lease is let go or expires within a lease's time.
                tries = math.ceil(runner.runtime().keeper.lease_ttl / LEASE_RETRY_DELAY) + 2
                if task.request.retries >= tries:
                    log.warning("%s; given up after %d tries", busy, tries)
                    return
                raise task.retry(countdown=LEASE_RETRY_DELAY, max_retries=None)

        celery.task(name=self.task_name, acks_late=True, reject_on_worker_lost=True,
                    ignore_result=True, shared=False, bind=True, serializer=SERIALIZER,
                    # By name, as Celery names its own (a function here would be bound).
                    Strategy=f"{__name__}:_json_only_strategy")(run)

    # -- web side

    def start(self, run: Run) -> None:
        """Record the run's task and queue it (the enqueue step of a runner)."""
        order = queue(run, self.agent)
        headers: Dict[str, str] = {}
        if otel.tracer() is not None:
            otel.inject(headers)
        order.traceparent = headers.get("traceparent", "")
        self.send(order)

    def send(self, order: QueuedRun) -> None:
        """Put ``order`` on the queue."""
        # JSON whatever the app's task_serializer: the worker takes no other (see
        # _json_only_strategy), and a run order is plain data.
        self.celery().send_task(self.task_name, args=[order.to_dict()], serializer=SERIALIZER)

    def orphaned(self, task_id: str) -> bool:
        """The keeper found ``task_id``'s lease expired (its worker died): queue it again
        when the agent is rerun-safe (True), else let the keeper fail it (False)."""
        if not self.rerun_safe:
            return False
        runtime = self.runtime()
        order = requeue(runtime, task_id, self.agent)
        if order is None:
            return True  # another keeper queued it, or nothing runs it any more
        try:
            self.send(order)
        except Exception:
            log.exception("could not queue task %s again for a worker", task_id)
            runtime.fail(task_id, NOT_QUEUED)
            return True
        log.warning("task %s: its worker stopped (its lease expired); queued again",
                    task_id)
        return True

    # -- worker side

    def runtime(self) -> Runtime:
        """The agent's engine in this process (the app's registry holds it)."""
        runtime: Runtime = self.flask_app.extensions["a2a"][self.agent].service.runtime
        return runtime

    def run(self, data: Any) -> None:
        """Claim and run one queued run in this worker, in the Flask app context."""
        order = QueuedRun.from_dict(data)
        started = time.time()
        runtime = self.runtime()
        with self.flask_app.app_context(), otel.remote_parent(order.traceparent):
            done = execute(runtime, order, rerun_safe=self.rerun_safe)
        if done is not None:
            signals.send(signals.task_run, runtime.sender, task_id=order.task_id,
                         context_id=done.context_id,
                         queue_wait=max(0.0, started - order.queued_at),
                         run_time=time.time() - started)
