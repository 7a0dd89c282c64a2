"""What the observability hooks cost per SendMessage, in microseconds of CPU.

A SendMessage passes through these hooks once each: the call note (open,
learn the task from the request and the result, finish), ``task_created``,
two commits (WORKING, COMPLETED) and the executor run's wrapper.  This script
times exactly that sequence, in a fresh process per configuration (the
OpenTelemetry providers are global), alternating configurations, and prints
the medians: the figure to compare with a whole SendMessage's server CPU
(``bench.py`` prints requests/s; about 300-800 us of CPU per call on this
machine's class of CPU).

    python bench/observe_cost.py            # off, noop+prometheus, sdk+prometheus
    python bench/observe_cost.py --rounds 7 --calls 20000
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Dict, List

CONFIGS = ("off", "noop+prometheus", "sdk+prometheus", "sdk+otel-metrics+prometheus")


def measure(config: str, calls: int) -> float:
    """Median microseconds of the hook sequence for one SendMessage, in this process."""
    if "sdk" in config:
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider

        trace.set_tracer_provider(TracerProvider())  # spans are made, then dropped
    elif "noop" in config:
        from opentelemetry import trace

        trace.set_tracer_provider(trace.NoOpTracerProvider())
    if "otel-metrics" in config:
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader

        metrics.set_meter_provider(MeterProvider(metric_readers=[InMemoryMetricReader()]))
        from a2a_flask.observe import otel

        otel.connect_metrics()
    if "prometheus" in config:
        from a2a_flask.observe import prometheus

        prometheus.metrics()

    from a2a_flask.observe import calls as notes
    from a2a_flask.observe import tasks
    from a2a_flask.protocol import models as m

    message = m.Message(message_id="m", role=m.Role.USER, parts=[m.Part(text="hi")])
    request = m.SendMessageRequest(message=message)
    done = m.Task(id="t", context_id="c", status=m.TaskStatus(state=m.TaskState.COMPLETED))
    working = m.Task(id="t", context_id="c", status=m.TaskStatus(state=m.TaskState.WORKING))
    headers = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    created_at = m.utc_now()

    def one() -> None:
        note = notes.open_call(None, "jsonrpc", headers)
        note.version, note.method = "1.0", "SendMessage"
        note.about(request)
        tasks.run_scope(lambda: None, "t", "c")()
        tasks.created(None, "t", "c")
        tasks.committed(None, m.TaskState.SUBMITTED, working, created_at)
        tasks.committed(None, m.TaskState.WORKING, done, created_at)
        note.result(done)
        note.finish()

    samples: List[float] = []
    for _ in range(5):
        start = time.process_time()
        for _ in range(calls):
            one()
        samples.append((time.process_time() - start) / calls * 1e6)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.calls)))
        return
    results: Dict[str, List[float]] = {config: [] for config in CONFIGS}
    # One process's metrics: prometheus_client's multiprocess mode is on whenever the
    # variable exists, even empty.
    single_process = {k: v for k, v in os.environ.items()
                      if k.lower() != "prometheus_multiproc_dir"}
    for _ in range(args.rounds):
        for config in CONFIGS:
            out = subprocess.run([sys.executable, __file__, "--one", config,
                                  "--calls", str(args.calls)], check=True, capture_output=True,
                                 text=True, env=single_process)
            results[config].append(json.loads(out.stdout))
    print(f"{'configuration':30} {'us per SendMessage (median of ' + str(args.rounds) + ')':>36}")
    for config, values in results.items():
        print(f"{config:30} {statistics.median(values):36.1f}")


if __name__ == "__main__":
    main()
