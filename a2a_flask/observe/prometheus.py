"""Prometheus metrics (the ``prometheus`` extra), fed by the signals.

The metrics live in their own registry, so they never collide with
``prometheus_flask_exporter`` or anything else on the default one.  Under
gunicorn with several workers set ``PROMETHEUS_MULTIPROC_DIR`` (an empty
directory, before the workers start): each worker writes its numbers there and
a scrape of any worker answers the sum over all of them; the gunicorn
``child_exit`` hook must call ``multiprocess.mark_process_dead(worker.pid)``
so that a dead worker's open streams stop counting.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Tuple

from .. import signals
from ..version import install_extra
from .otel import state_label

#: prometheus_client, imported on first use (an app without metrics never loads it).
_prom: Any = None

#: Seconds: A2A calls run from a millisecond (GetTask) to minutes (blocking sends).
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
           30.0, 60.0, 300.0)

_metrics: Optional["Metrics"] = None


class Metrics:
    """The a2a_* metrics of this process, connected to the signals."""

    def __init__(self) -> None:
        self.registry = _prom.CollectorRegistry(auto_describe=True)
        reg = self.registry
        self.requests = _prom.Counter(
            "a2a_requests", "A2A calls answered", ["binding", "version", "method", "code"],
            registry=reg)
        self.duration = _prom.Histogram(
            "a2a_request_duration_seconds", "Seconds until an A2A call was answered "
            "(a stream: until it started)", ["binding", "method"], buckets=BUCKETS,
            registry=reg)
        self.tasks = _prom.Counter(
            "a2a_tasks", "Tasks entering each state", ["state"], registry=reg)
        self.streams = _prom.Gauge(
            "a2a_open_streams", "SSE streams open now", registry=reg,
            multiprocess_mode="livesum")
        self.pushes = _prom.Counter(
            "a2a_push_attempts", "Webhook delivery attempts by outcome", ["outcome"],
            registry=reg)
        self.store_errors = _prom.Counter(
            "a2a_store_errors", "Failed task store calls", ["operation"], registry=reg)
        self.queue_wait = _prom.Histogram(
            "a2a_task_queue_wait_seconds", "Seconds a queued run (Celery) waited for a worker",
            buckets=BUCKETS, registry=reg)
        self.run_time = _prom.Histogram(
            "a2a_task_run_seconds", "Seconds a worker spent on a queued run (Celery)",
            buckets=BUCKETS, registry=reg)
        # labels() costs more than the increment: keep each label set's children (the
        # label values are bounded: methods and codes the server knows, task states).
        self._by_call: Dict[Tuple[str, str, str, int], Tuple[Any, Any]] = {}
        self._by_state: Dict[Any, Any] = {}
        signals.connect_methods(self)

    def on_request(self, _: Any, *, binding: str, version: str, method: str, code: int,
                   duration: float, **__: Any) -> None:
        key = (binding, version, method, code)
        children = self._by_call.get(key)
        if children is None:
            children = self._by_call[key] = (
                self.requests.labels(binding, version, method, str(code)),
                self.duration.labels(binding, method))
        children[0].inc()
        children[1].observe(duration)

    def _count_state(self, state: Any) -> None:
        child = self._by_state.get(state)
        if child is None:
            child = self._by_state[state] = self.tasks.labels(state_label(state))
        child.inc()

    def on_created(self, _: Any, **kw: Any) -> None:
        self._count_state("submitted")

    def on_state(self, _: Any, **kw: Any) -> None:
        self._count_state(kw["new"])

    def on_open(self, _: Any, **kw: Any) -> None:
        self.streams.inc()

    def on_close(self, _: Any, **kw: Any) -> None:
        self.streams.dec()

    def on_sent(self, _: Any, **kw: Any) -> None:
        self.pushes.labels("sent").inc()

    def on_failed(self, _: Any, **kw: Any) -> None:
        self.pushes.labels("gave_up" if kw.get("gave_up") else "failed").inc()

    def on_store_error(self, _: Any, **kw: Any) -> None:
        self.store_errors.labels(kw["operation"]).inc()

    def on_run(self, _: Any, *, queue_wait: float, run_time: float, **__: Any) -> None:
        self.queue_wait.observe(queue_wait)
        self.run_time.observe(run_time)

    def exposition(self) -> Tuple[bytes, str]:
        """The text format and its content type: this process's numbers, or with
        ``PROMETHEUS_MULTIPROC_DIR`` set the sum over every worker's."""
        registry = self.registry
        # prometheus_client's own test: the variable being set at all (even empty).
        if "PROMETHEUS_MULTIPROC_DIR" in os.environ or "prometheus_multiproc_dir" in os.environ:
            registry = _prom.CollectorRegistry()
            _prom.multiprocess.MultiProcessCollector(registry)
        return _prom.generate_latest(registry), _prom.CONTENT_TYPE_LATEST


def metrics() -> Metrics:
    """This process's metrics, made on first use (shared by every agent of the process)."""
    global _metrics, _prom
    if _metrics is None:
        try:
            import prometheus_client
            import prometheus_client.multiprocess
        except ImportError:
            raise RuntimeError("A2A_METRICS_PATH needs prometheus-client: "
                               + install_extra("prometheus")) from None
        _prom = prometheus_client
        _metrics = Metrics()
    return _metrics
