"""Blinker signals a host app can subscribe to (``signal.connect(fn)``).

Every signal's sender is the :class:`~a2a_flask.A2A` extension object of the
agent (``None`` where no agent is known, such as a store error outside a
request); the arguments are keyword arguments.  Receivers run in the greenlet
or thread where the thing happened: keep them quick.  A receiver that raises is
logged (logger ``a2a_flask.signals``) and skipped: it never breaks a request, a
task or a delivery.

Requests
    ``request_handled(sender, binding, version, method, code, duration, task_id,
    context_id)``: one A2A call was answered.  ``binding`` is ``"jsonrpc"`` or
    ``"rest"``; ``version`` the protocol version served (``"1.0"``, ``"0.3"``,
    ... or ``""`` when the request was refused before it was known);
    ``method`` the 1.0 method name (``"SendMessage"``, ``"GetTask"``, ...;
    ``"unknown"`` when none was recognised); ``code`` the JSON-RPC error code
    of the answer (``0`` for success; the REST binding reports the same codes);
    ``duration`` seconds until the response (for a stream: until its first byte);
    ``task_id`` / ``context_id`` the task it concerned, or ``""``.

Tasks (sent where a task's event is committed to the store, whichever worker)
    ``task_created(sender, task_id, context_id)``: a task exists (SUBMITTED).
    ``task_state_changed(sender, task_id, context_id, old, new)``: its state
    moved (two :class:`~a2a_flask.protocol.models.TaskState` values).
    ``task_finished(sender, task_id, context_id, state, duration)``: it reached a
    terminal state; ``duration`` is seconds since it was created.
    ``task_run(sender, task_id, context_id, queue_wait, run_time)``: a run queued
    through a runner (Celery) ended in its worker; ``queue_wait`` is seconds from
    queued to started, ``run_time`` seconds the worker spent on it (sent there).

Streams
    ``stream_opened(sender, binding, method)``: an SSE response started.
    ``stream_closed(sender, binding, method, reason, duration)``: it ended;
    ``reason`` is ``"finished"`` (the task ended or was interrupted),
    ``"client"`` (the client went away) or ``"error"``.

Stores
    ``store_error(sender, operation, exception)``: a store call failed
    (``operation`` is ``"load"``, ``"append"``, ...); the caller got
    "task store unavailable" or an internal error.

Webhooks
    ``push_sent(sender, task_id, config_id, url, seq, status, attempt)``
        A webhook answered 2xx to one event of a task.
    ``push_failed(sender, task_id, config_id, url, seq, status, attempt, error, gave_up)``
        One delivery attempt failed (``status`` is None when no answer came);
        ``gave_up`` is true on the last attempt, after which the webhook gets nothing
        more until it is registered again.
"""
from __future__ import annotations

import logging
from typing import Any

from blinker import Namespace, NamedSignal

_signals = Namespace()

request_handled = _signals.signal("a2a-request-handled")
task_created = _signals.signal("a2a-task-created")
task_state_changed = _signals.signal("a2a-task-state-changed")
task_finished = _signals.signal("a2a-task-finished")
task_run = _signals.signal("a2a-task-run")
stream_opened = _signals.signal("a2a-stream-opened")
stream_closed = _signals.signal("a2a-stream-closed")
store_error = _signals.signal("a2a-store-error")
push_sent = _signals.signal("a2a-push-sent")
push_failed = _signals.signal("a2a-push-failed")

log = logging.getLogger("a2a_flask.signals")


def send(signal: NamedSignal, sender: Any, **kwargs: Any) -> None:
    """Send ``signal`` to each receiver; one that raises is logged, the rest still run.

    Without receivers this is one attribute test, so emission points cost
    nothing when nobody listens.
    """
    if not signal.receivers:
        return
    for receiver in signal.receivers_for(sender):
        try:
            receiver(sender, **kwargs)
        except Exception:
            log.exception("a receiver of the %s signal failed: %r", signal.name, receiver)


#: The method of a metrics backend that receives each signal (see :func:`connect_methods`).
_METHODS = {request_handled: "on_request", task_created: "on_created",
            task_state_changed: "on_state", stream_opened: "on_open",
            stream_closed: "on_close", push_sent: "on_sent", push_failed: "on_failed",
            store_error: "on_store_error", task_run: "on_run"}


def connect_methods(backend: Any) -> None:
    """Connect each signal to the ``backend``'s method for it, where it has one
    (``on_request``, ``on_created``, ``on_state``, ``on_open``, ``on_close``,
    ``on_sent``, ``on_failed``, ``on_store_error``, ``on_run``).  Strong references: a
    backend lives as long as the process."""
    for signal, name in _METHODS.items():
        method = getattr(backend, name, None)
        if method is not None:
            signal.connect(method, weak=False)


__all__ = ["connect_methods", "push_failed", "push_sent", "request_handled", "send", "store_error",
           "stream_closed", "stream_opened", "task_created", "task_finished",
           "task_run", "task_state_changed"]
