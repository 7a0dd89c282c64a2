"""The Flask side of observability: the metrics endpoint, and the once-per-process
setup ``init_app`` asks for.  (REST calls are named by their operation's 1.0
method, from :mod:`a2a_flask.protocol.operations`, as JSON-RPC calls are.)"""
from __future__ import annotations

from flask import Flask, Response

from ..observe import context, otel, prometheus

_metered = False


def attach(app: Flask, metrics_path: str) -> None:
    """Observe the agents of ``app``: the log context, (once per process) OpenTelemetry
    metrics when a meter provider is set, and (once per app) the Prometheus endpoint
    at ``metrics_path`` (empty: none)."""
    global _metered
    context.install()  # the loggers of every module imported by now
    if not _metered:
        _metered = True
        otel.connect_metrics()
    if not metrics_path or "a2a_metrics" in app.view_functions:
        return
    metrics = prometheus.metrics()  # fails here, at start-up, without prometheus-client

    def serve_metrics() -> Response:
        body, content_type = metrics.exposition()
        return Response(body, content_type=content_type)

    app.add_url_rule("/" + metrics_path.strip("/"), "a2a_metrics", serve_metrics,
                     methods=["GET"])

