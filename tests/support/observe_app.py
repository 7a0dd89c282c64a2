"""An agent for the observability tests, run under real gunicorn.

With ``OBSERVE_OTEL=1`` it sets an OpenTelemetry SDK tracer provider with an
in-memory exporter (and a meter provider with an in-memory reader) at import,
as an application would, and shows what was recorded at ``/test/spans`` and
``/test/otel-metrics``.  ``FLASK_A2A_*`` variables configure the agent.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Dict, List

from flask import Flask, jsonify

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill

OTEL = os.environ.get("OBSERVE_OTEL") == "1"

if OTEL:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

a2a = A2A(card=AgentCard(
    name="Observed", description="Echoes; 'fail' fails, 'ask' asks.", version="1.0.0",
    capabilities=AgentCapabilities(streaming=True, push_notifications=True),
    skills=[AgentSkill(id="echo", name="Echo", description="Echoes", tags=["echo"])]))


@a2a.executor
def run(ctx: Any) -> Any:
    if ctx.text == "fail":
        raise RuntimeError("asked to fail")
    if ctx.text == "ask":
        return ctx.ask("which one?")
    logging.getLogger("a2a_flask").info("echoing")
    ctx.working("echoing")
    return ctx.text


app = Flask(__name__)
app.config.from_prefixed_env()
a2a.init_app(app)


@app.get("/test/spans")
def spans() -> Any:
    found: List[Dict[str, Any]] = []
    for span in exporter.get_finished_spans() if OTEL else ():
        found.append({
            "name": span.name, "kind": span.kind.name,
            "trace_id": format(span.context.trace_id, "032x"),
            "span_id": format(span.context.span_id, "016x"),
            "parent_id": format(span.parent.span_id, "016x") if span.parent else None,
            "attributes": dict(span.attributes or {}),
        })
    return jsonify(found)


@app.get("/test/otel-metrics")
def otel_metrics() -> Any:
    names: Dict[str, Any] = {}
    data = reader.get_metrics_data() if OTEL else None
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                names[metric.name] = [
                    {"attributes": dict(p.attributes or {}),
                     "value": getattr(p, "value", None), "count": getattr(p, "count", None)}
                    for p in metric.data.data_points]
    return jsonify(names)
