"""The Flask side of observability: method names of REST routes, the metrics
endpoint, and the once-per-process setup ``init_app`` asks for."""
from __future__ import annotations

from typing import Any, Dict, Tuple

from flask import Flask, Response

from ..observe import context, otel, prometheus

#: The 1.0 method each REST route serves (by verb and rule, 1.0 and 0.3 flavours alike):
#: metric labels and span names stay those of JSON-RPC.
REST_METHODS: Dict[Tuple[str, str], str] = {
    ("POST", "/message:send"): "SendMessage",
    ("POST", "/message:stream"): "SendStreamingMessage",
    ("GET", "/tasks"): "ListTasks",
    ("GET", "/tasks/<a2aid:id>"): "GetTask",
    ("POST", "/tasks/<a2aid:id>:cancel"): "CancelTask",
    ("GET", "/tasks/<a2aid:id>:subscribe"): "SubscribeToTask",
    ("POST", "/tasks/<a2aid:id>:subscribe"): "SubscribeToTask",
    ("POST", "/tasks/<a2aid:task_id>/pushNotificationConfigs"): "CreateTaskPushNotificationConfig",
    ("GET", "/tasks/<a2aid:task_id>/pushNotificationConfigs"): "ListTaskPushNotificationConfigs",
    ("GET", "/tasks/<a2aid:task_id>/pushNotificationConfigs/<a2aid:config_id>"):
        "GetTaskPushNotificationConfig",
    ("DELETE", "/tasks/<a2aid:task_id>/pushNotificationConfigs/<a2aid:config_id>"):
        "DeleteTaskPushNotificationConfig",
    ("GET", "/extendedAgentCard"): "GetExtendedAgentCard",
    ("GET", "/card"): "GetExtendedAgentCard",
}

_metered = False


def attach(agent: Any, app: Flask, service: Any, metrics_path: str) -> None:
    """Observe one agent of ``app``: it sends the task signals, its webhooks are
    traced, and (once per process) OpenTelemetry metrics when a meter provider is
    set and (once per app) the Prometheus endpoint at ``metrics_path`` (empty: none)."""
    global _metered
    service.runtime.sender = agent
    if service.push is not None:
        service.push.transport = otel.TracedTransport(service.push.transport)
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


def route_method(verb: str, rule: str) -> str:
    """The method name of a REST route (``"unknown"`` for one not in the table)."""
    return REST_METHODS.get((verb, rule), "unknown")

