"""OpenTelemetry, as an instrumentation library: the API only, and only when set up.

Nothing here imports ``opentelemetry`` until it is asked whether tracing is
on, and the answer is computed once per process: tracing is on when the
``opentelemetry-api`` package is installed and the application has set a
real tracer provider (``opentelemetry-instrument``, or ``trace.set_tracer_provider``
at import or in gunicorn's ``post_fork``) before the worker's first request (the
meter provider: before ``init_app``).  Otherwise every hook is one ``is None`` test.
Where no code has imported the API and no ``OTEL_PYTHON_*_PROVIDER`` variable names a
provider, none can be set, and the API is not imported at all.

Spans
    One SERVER span per A2A call, named after the method, with ``rpc.system``
    (``jsonrpc`` or ``rest``), ``rpc.method``, ``rpc.jsonrpc.error_code`` and
    ``a2a.task.id``, ``a2a.context.id``, ``a2a.task.state``.  Its parent is the
    incoming W3C ``traceparent``.  When a local span is already current (the
    ``opentelemetry-instrumentation-flask`` SERVER span), no second SERVER span is
    made: that span is renamed after the method and gets the attributes.
    A child span ``a2a.execute`` per executor run (it may outlive the request),
    and a CLIENT span ``a2a.push`` per webhook delivery attempt, whose parent is
    the run's span when this process ran the task; its ``traceparent`` goes out
    with the webhook.
Metrics (the meter provider's, when one is set)
    ``a2a.server.request.duration`` (s), ``a2a.tasks`` {state},
    ``a2a.streams.open``, ``a2a.push.attempts`` {outcome}, fed by the signals.
"""
from __future__ import annotations

import contextlib
import os
import sys
from collections import OrderedDict
from typing import Any, Iterator, Mapping, MutableMapping, Optional

from .. import signals
from ..version import __version__
from . import context

#: Per process: None before the first look, then the tracer or False (off).
_tracer: Any = None
#: The span context of each task's last run here, so that its webhooks join its trace.
_task_spans: "OrderedDict[str, Any]" = OrderedDict()
_TASK_SPANS_KEPT = 10_000


def _forget() -> None:
    """After a fork the child looks again (a provider may be set in ``post_fork``)."""
    global _tracer
    _tracer = None
    _task_spans.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget)


def _provider_possible(api: str, variable: str) -> bool:
    """Whether a provider may be set: only code that imported the API module, or the
    environment variable naming one, can set it.  Importing the API just to learn
    that none is set would cost milliseconds of every start where it is installed."""
    return api in sys.modules or variable in os.environ


def _look() -> Any:
    if not _provider_possible("opentelemetry.trace", "OTEL_PYTHON_TRACER_PROVIDER"):
        return False
    try:
        from opentelemetry import trace
    except ImportError:
        return False
    provider = trace.get_tracer_provider()
    if isinstance(provider, (trace.ProxyTracerProvider, trace.NoOpTracerProvider)):
        return False
    return trace.get_tracer("a2a_flask", __version__)


def tracer() -> Any:
    """This process's tracer, or None when tracing is off (the cheap hot-path test)."""
    global _tracer
    if _tracer is None:
        _tracer = _look()
    return _tracer or None


# ------------------------------------------------------------------ server spans


class ServerSpan:
    """The span of one A2A call and the context it was made current in."""

    __slots__ = ("span", "token", "owned")

    def __init__(self, span: Any, token: Any, owned: bool) -> None:
        self.span, self.token, self.owned = span, token, owned


def start_server(tracer_: Any, system: str, headers: Any) -> ServerSpan:
    """Start (or adopt) the SERVER span of a call and make it current."""
    from opentelemetry import context, propagate, trace

    current = trace.get_current_span()
    if current.is_recording():
        # An HTTP instrumentation made the SERVER span already: enrich it, do not nest a twin.
        current.set_attribute("rpc.system", system)
        return ServerSpan(current, None, False)
    parent = propagate.extract(headers)
    span = tracer_.start_span(system, context=parent, kind=trace.SpanKind.SERVER,
                              attributes={"rpc.system": system})
    token = context.attach(trace.set_span_in_context(span, parent))
    return ServerSpan(span, token, True)


def end_server(server: ServerSpan, method: str, code: int, task_id: str, context_id: str,
               state: str) -> None:
    """Name the span after the method, set the outcome, end it (if ours) and detach."""
    from opentelemetry import context, trace

    span = server.span
    span.update_name(method)
    attributes = {"rpc.method": method, "rpc.jsonrpc.error_code": code}
    if task_id:
        attributes["a2a.task.id"] = task_id
    if context_id:
        attributes["a2a.context.id"] = context_id
    if state:
        attributes["a2a.task.state"] = state
    span.set_attributes(attributes)  # one call: each takes the span's lock
    if code:
        span.set_status(trace.Status(trace.StatusCode.ERROR, f"JSON-RPC error {code}"))
    if server.owned:
        span.end()
        context.detach(server.token)


# ------------------------------------------------------------------ executor runs


def current_context() -> Any:
    """The OpenTelemetry context here (to hand to a greenlet that starts later)."""
    from opentelemetry import context

    return context.get_current()


class RunSpan:
    """The ``a2a.execute`` span of one executor run, current while it runs."""

    def __init__(self, tracer_: Any, parent: Any, task_id: str, context_id: str) -> None:
        from opentelemetry import context, trace

        self.span = tracer_.start_span("a2a.execute", context=parent,
                                       kind=trace.SpanKind.INTERNAL,
                                       attributes={"a2a.task.id": task_id,
                                                   "a2a.context.id": context_id})
        self.token = context.attach(trace.set_span_in_context(self.span, parent))
        _task_spans[task_id] = self.span.get_span_context()
        _task_spans.move_to_end(task_id)
        while len(_task_spans) > _TASK_SPANS_KEPT:
            _task_spans.popitem(last=False)

    def end(self, error: Optional[BaseException]) -> None:
        from opentelemetry import context, trace

        if error is not None:
            self.span.record_exception(error)
            self.span.set_status(trace.Status(trace.StatusCode.ERROR, type(error).__name__))
        self.span.end()
        context.detach(self.token)


# ------------------------------------------------------------------ webhooks and clients


class PushSpan:
    """The CLIENT span of one webhook delivery attempt."""

    def __init__(self, tracer_: Any, task_id: str, url: str,
                 headers: MutableMapping[str, str]) -> None:
        from opentelemetry import propagate, trace

        parent_span = _task_spans.get(task_id)
        parent = trace.set_span_in_context(trace.NonRecordingSpan(parent_span)) \
            if parent_span is not None else None
        self.span = tracer_.start_span("a2a.push", context=parent, kind=trace.SpanKind.CLIENT,
                                       attributes={"a2a.task.id": task_id,
                                                   "url.full": context.shown_url(url),
                                                   "http.request.method": "POST"})
        propagate.inject(headers, context=trace.set_span_in_context(self.span))

    def end(self, status: Optional[int], error: str) -> None:
        from opentelemetry import trace

        if status is not None:
            self.span.set_attribute("http.response.status_code", status)
        if error:
            self.span.set_status(trace.Status(trace.StatusCode.ERROR, error))
        self.span.end()


@contextlib.contextmanager
def remote_parent(traceparent: str) -> Iterator[None]:
    """Make a W3C ``traceparent`` carried in a queue's message the current context (a
    run started inside becomes its child); nothing without it or without tracing."""
    if not traceparent or len(traceparent) > 64 or tracer() is None:
        yield
        return
    from opentelemetry import context, propagate

    token = context.attach(propagate.extract({"traceparent": traceparent}))
    try:
        yield
    finally:
        context.detach(token)


def inject(headers: MutableMapping[str, str]) -> None:
    """Add ``traceparent`` (and the other configured propagators' headers) for the
    current span, when opentelemetry-api is installed (clients need no provider)."""
    global _propagate
    if _propagate is None:
        try:
            from opentelemetry import propagate
        except ImportError:
            propagate = False  # type: ignore[assignment]
        _propagate = propagate
    if _propagate:
        _propagate.inject(headers)


#: opentelemetry.propagate once looked up, or False when it is not installed.
_propagate: Any = None


# ------------------------------------------------------------------ metrics


def connect_metrics() -> bool:
    """Feed OpenTelemetry metrics from the signals when a meter provider is set."""
    if not _provider_possible("opentelemetry.metrics", "OTEL_PYTHON_METER_PROVIDER"):
        return False
    try:
        from opentelemetry import metrics
        from opentelemetry.metrics import NoOpMeterProvider
    except ImportError:
        return False
    provider = metrics.get_meter_provider()
    if type(provider).__name__ == "_ProxyMeterProvider" or isinstance(provider, NoOpMeterProvider):
        return False
    _Meters(metrics.get_meter("a2a_flask", __version__))
    return True


class _Meters:
    """The instruments, connected to the signals (strongly: they live as long as the process)."""

    def __init__(self, meter: Any) -> None:
        self.duration = meter.create_histogram(
            "a2a.server.request.duration", unit="s", description="A2A calls, until the response")
        self.tasks = meter.create_counter(
            "a2a.tasks", description="Tasks entering each state")
        self.streams = meter.create_up_down_counter(
            "a2a.streams.open", description="Open SSE streams")
        self.pushes = meter.create_counter(
            "a2a.push.attempts", description="Webhook delivery attempts by outcome")
        self.queue_wait = meter.create_histogram(
            "a2a.task.queue_wait", unit="s", description="Queued runs' wait for a worker")
        self.run_time = meter.create_histogram(
            "a2a.task.run_time", unit="s", description="Worker time of queued runs")
        signals.connect_methods(self)

    def on_run(self, _: Any, **kw: Any) -> None:
        self.queue_wait.record(kw["queue_wait"])
        self.run_time.record(kw["run_time"])

    def on_request(self, _: Any, **kw: Any) -> None:
        self.duration.record(kw["duration"], {"rpc.system": kw["binding"],
                                              "rpc.method": kw["method"],
                                              "a2a.version": kw["version"],
                                              "rpc.jsonrpc.error_code": kw["code"]})

    def on_created(self, _: Any, **kw: Any) -> None:
        self.tasks.add(1, {"a2a.task.state": "submitted"})

    def on_state(self, _: Any, **kw: Any) -> None:
        self.tasks.add(1, {"a2a.task.state": state_label(kw["new"])})

    def on_open(self, _: Any, **kw: Any) -> None:
        self.streams.add(1)

    def on_close(self, _: Any, **kw: Any) -> None:
        self.streams.add(-1)

    def on_sent(self, _: Any, **kw: Any) -> None:
        self.pushes.add(1, {"outcome": "sent"})

    def on_failed(self, _: Any, **kw: Any) -> None:
        self.pushes.add(1, {"outcome": "gave_up" if kw.get("gave_up") else "failed"})


def state_label(state: Any) -> str:
    """``TaskState.INPUT_REQUIRED`` -> ``"input_required"``."""
    return str(getattr(state, "name", state)).lower()


class TracedTransport:
    """A webhook transport whose every POST is a CLIENT span that sends its ``traceparent``.

    It wraps the dispatcher's transport (so delivery itself knows nothing of
    tracing) and learns the task from the delivering greenlet's context, which
    names it (see :func:`a2a_flask.observe.context.scoped`).  With tracing off,
    a post is one ``is None`` test longer.
    """

    def __init__(self, transport: Any) -> None:
        self._transport = transport

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Any:
        tracer_ = tracer()
        if tracer_ is None:
            return self._transport.post(url, body, headers)
        sent = dict(headers)
        span = PushSpan(tracer_, context.current()[0], url, sent)
        try:
            response = self._transport.post(url, body, sent)
        except BaseException as exc:
            span.end(None, str(exc) or type(exc).__name__)
            raise
        status = response.status
        span.end(status, "" if 200 <= status < 300 else f"HTTP {status}")
        return response

    def close(self) -> None:
        self._transport.close()
