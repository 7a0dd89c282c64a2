"""One note per A2A call, opened by the binding and closed when it answers.

It times the call, knows the method and outcome, binds the task for log
records, drives the SERVER span when tracing is on, and sends
``request_handled`` (and the stream signals) at the end.  The bindings call
:func:`open_call` once and set a field or two; nothing else of theirs changes.
"""
from __future__ import annotations

from time import perf_counter
from contextvars import ContextVar
from typing import Any, Optional

from .. import signals
from . import context, otel

#: Requests whose ``id`` is a task id (elsewhere ``id`` names a push config).
_BY_ID = frozenset({"GetTaskRequest", "CancelTaskRequest", "SubscribeToTaskRequest"})

_call: ContextVar[Optional["CallNote"]] = ContextVar("a2a_call", default=None)


class CallNote:
    """What is known about one call; the binding fills ``version``, ``method``, ``code``."""

    __slots__ = ("sender", "binding", "version", "method", "code", "task_id", "context_id",
                 "state", "started", "_span", "_token", "_call_token")

    def __init__(self, sender: Any, binding: str, headers: Any) -> None:
        self.sender = sender
        self.binding = binding
        self.version = ""
        self.method = "unknown"
        self.code = 0
        self.task_id = self.context_id = self.state = ""
        self.started = perf_counter()
        # A keep-alive connection's greenlet serves many requests: start clean each time.
        self._token = context.bind("", "")
        self._call_token = _call.set(self)
        tracer = otel.tracer()
        self._span = None if tracer is None else otel.start_server(tracer, binding, headers)

    def about(self, request: Any) -> None:
        """Learn the task from a parsed request (its ``id``, ``task_id`` or message)."""
        message = getattr(request, "message", None)
        if message is not None:
            self._bind(message.task_id or "", message.context_id or "")
            return
        task_id = getattr(request, "task_id", "") or ""
        if not task_id and type(request).__name__ in _BY_ID:
            task_id = request.id
        self._bind(task_id, "")

    def result(self, value: Any) -> None:
        """Learn the task (and its state) from an operation's result, a Task or a Message."""
        status = getattr(value, "status", None)
        if status is not None and hasattr(value, "id"):
            self.state = otel.state_label(status.state)
            self._bind(value.id, getattr(value, "context_id", ""))
        elif hasattr(value, "message_id"):
            self._bind(getattr(value, "task_id", "") or self.task_id,
                       getattr(value, "context_id", "") or self.context_id)

    def _bind(self, task_id: str, context_id: str) -> None:
        self.task_id = task_id or self.task_id
        self.context_id = context_id or self.context_id
        context.bind(self.task_id, self.context_id)

    def finish(self) -> None:
        """The response is ready: signal, end the span, unbind."""
        duration = perf_counter() - self.started
        if self._span is not None:
            otel.end_server(self._span, self.method, self.code, self.task_id, self.context_id,
                            self.state)
        if signals.request_handled.receivers:  # (building the arguments costs too)
            signals.send(signals.request_handled, self.sender, binding=self.binding,
                         version=self.version, method=self.method, code=self.code,
                         duration=duration, task_id=self.task_id, context_id=self.context_id)
        _call.reset(self._call_token)
        context.reset(self._token)


def open_call(sender: Any, binding: str, headers: Any) -> CallNote:
    """Start the note of a call (``binding``: ``"jsonrpc"`` or ``"rest"``; ``headers``:
    the request's, a mapping, read only for ``traceparent`` when tracing is on)."""
    return CallNote(sender, binding, headers)


class StreamNote:
    """One SSE response: ``stream_opened`` when it starts, ``stream_closed`` when it ends."""

    __slots__ = ("sender", "binding", "method", "started", "task")

    def __init__(self, call: Optional[CallNote]) -> None:
        self.sender = call.sender if call is not None else None
        self.binding = call.binding if call is not None else ""
        self.method = call.method if call is not None else ""
        self.task = (call.task_id, call.context_id) if call is not None else ("", "")
        self.started = 0.0

    def opened(self) -> None:
        self.started = perf_counter()
        # The body runs after the view returned: name the task again for its log records.
        context.bind(*self.task)
        signals.send(signals.stream_opened, self.sender, binding=self.binding,
                     method=self.method)

    def closed(self, reason: str) -> None:
        context.bind("", "")
        signals.send(signals.stream_closed, self.sender, binding=self.binding,
                     method=self.method, reason=reason,
                     duration=perf_counter() - self.started)


def stream_note() -> StreamNote:
    """A note for a stream the current call answers with."""
    return StreamNote(_call.get())
