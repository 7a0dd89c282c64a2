"""Observability: lifecycle signals glue, OpenTelemetry, Prometheus, log context.

The core calls this package at its choke points (one call each): the bindings
open a :class:`~a2a_flask.observe.calls.CallNote` per request, the runtime
reports commits and wraps executor runs, the SSE layer reports streams,
webhook delivery wraps each attempt.  Everything else (spans, metrics) hangs
off those calls or off the blinker signals of :mod:`a2a_flask.signals`, and
costs a branch or two when nothing is configured.  OpenTelemetry and
prometheus-client are imported only when they are installed and asked for.
"""
