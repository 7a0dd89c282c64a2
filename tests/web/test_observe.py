"""Observability: one trace from client to webhook, Prometheus under two workers,
signals that never break a request, and log records that name their task."""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Dict, List, Tuple

import pytest
import requests
from blinker import NamedSignal

from a2a_flask import signals
from a2a_flask.client import A2AClient

from tests.support.helpers import (
    ROOT, V1, Server, WebhookReceiver, rpc_body, user_message, wait_until)

pytestmark = pytest.mark.declare(server=[
    "test_one_trace_from_the_client_through_a_worker_to_the_webhook",
    "test_a_failing_call_is_an_error_span_named_after_its_method",
    "test_prometheus_sums_two_gunicorn_workers",
    "test_a_provider_set_only_by_the_environment_is_found",
    "test_metrics_are_off_unless_asked_for",
    "test_under_the_flask_instrumentation_there_is_one_server_span"])

pytest.importorskip("opentelemetry.sdk")
prometheus_client = pytest.importorskip("prometheus_client")

APP = "tests.support.observe_app:app"


def _env(tmp_path: Any, **extra: str) -> Dict[str, str]:
    return {"FLASK_A2A_STORE": f"sqlite:///{tmp_path}/tasks.db",
            "FLASK_A2A_PUSH_ALLOW_PRIVATE": "1", **extra}


# ------------------------------------------------------------------ OpenTelemetry


def test_one_trace_from_the_client_through_a_worker_to_the_webhook(tmp_path):
    from opentelemetry.sdk.trace import TracerProvider

    # The client's own span, from a provider of its own (the global one is left alone).
    tracer = TracerProvider().get_tracer("test-client")
    with WebhookReceiver() as receiver, \
            Server(APP, env=_env(tmp_path, OBSERVE_OTEL="1")) as server:
        with tracer.start_as_current_span("caller") as caller, \
                A2AClient(server.url + "/a2a") as client:
            # A query string often carries the receiver's secret: spans leave it out.
            task = client.send("hello", push=receiver.hook("/hook?key=s3cret"))
        trace_id = format(caller.get_span_context().trace_id, "032x")
        caller_id = format(caller.get_span_context().span_id, "016x")
        assert task.status.state.name == "COMPLETED"
        pushes = receiver.wait_for(lambda got: any(
            p["json"] and "statusUpdate" in p["json"]
            and p["json"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
            for p in got))
        # Every webhook request carries the caller's trace id, from a span of the server's.
        for push in pushes:
            version, pushed_trace, parent, _flags = push["headers"]["Traceparent"].split("-")
            assert (version, pushed_trace) == ("00", trace_id)

        deadline = time.monotonic() + 10
        while True:
            spans = requests.get(server.url + "/test/spans", timeout=5).json()
            if sum(s["name"] == "a2a.push" for s in spans) >= len(pushes) or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.1)
        otel_metrics = requests.get(server.url + "/test/otel-metrics", timeout=5).json()

    by_name: Dict[str, List[Dict[str, Any]]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    [send] = by_name["SendMessage"]
    assert send["kind"] == "SERVER"
    assert (send["trace_id"], send["parent_id"]) == (trace_id, caller_id)
    assert send["attributes"]["rpc.system"] == "jsonrpc"
    assert send["attributes"]["rpc.method"] == "SendMessage"
    assert send["attributes"]["rpc.jsonrpc.error_code"] == 0
    assert send["attributes"]["a2a.task.id"] == task.id
    assert send["attributes"]["a2a.context.id"] == task.context_id
    assert send["attributes"]["a2a.task.state"] == "completed"
    [run] = by_name["a2a.execute"]
    assert (run["trace_id"], run["parent_id"]) == (trace_id, send["span_id"])
    assert run["attributes"]["a2a.task.id"] == task.id
    pushed = by_name["a2a.push"]
    assert len(pushed) == len(pushes)
    for span in pushed:
        assert span["kind"] == "CLIENT"
        assert (span["trace_id"], span["parent_id"]) == (trace_id, run["span_id"])
        assert span["attributes"]["http.response.status_code"] == 200
        assert span["attributes"]["url.full"] == receiver.hook("/hook")
    # The webhook saw the span ids of those CLIENT spans as its parents.
    assert {p["headers"]["Traceparent"].split("-")[2] for p in pushes} == \
        {s["span_id"] for s in pushed}

    # OpenTelemetry metrics came from the same signals.
    [duration] = [p for p in otel_metrics["a2a.server.request.duration"]
                  if p["attributes"]["rpc.method"] == "SendMessage"]
    assert duration["count"] == 1
    states = {p["attributes"]["a2a.task.state"]: p["value"] for p in otel_metrics["a2a.tasks"]}
    assert states["submitted"] == 1 and states["completed"] == 1
    outcomes = {p["attributes"]["outcome"]: p["value"] for p in otel_metrics["a2a.push.attempts"]}
    assert outcomes == {"sent": len(pushes)}


def test_a_failing_call_is_an_error_span_named_after_its_method(tmp_path):
    with Server(APP, env=_env(tmp_path, OBSERVE_OTEL="1")) as server:
        answer = server.rpc("GetTask", {"id": "no-such-task"})
        assert answer["error"]["code"] == -32001
        missing = requests.get(server.url + "/a2a/rest/tasks/nope", timeout=5)
        assert missing.status_code == 404
        spans = requests.get(server.url + "/test/spans", timeout=5).json()
    rpc_span, rest_span = [s for s in spans if s["name"] == "GetTask"]
    assert rpc_span["parent_id"] is None and rpc_span["kind"] == "SERVER"
    assert rpc_span["attributes"]["rpc.jsonrpc.error_code"] == -32001
    assert rpc_span["attributes"]["a2a.task.id"] == "no-such-task"
    assert rest_span["attributes"]["rpc.system"] == "rest"
    assert rest_span["attributes"]["rpc.jsonrpc.error_code"] == -32001


# ------------------------------------------------------------------ Prometheus


def _families(text: str) -> Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    values = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            values[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return values


def test_prometheus_sums_two_gunicorn_workers(tmp_path):
    multiproc = tmp_path / "prom"
    multiproc.mkdir()
    env = _env(tmp_path, FLASK_A2A_METRICS_PATH="/metrics",
               PROMETHEUS_MULTIPROC_DIR=str(multiproc))
    sent = {"ok": 12, "unknown_task": 5, "unknown_method": 3, "rest_ok": 4, "failed": 2}
    # One connection per worker: a worker that holds one connection (an idle keep-alive
    # counts) accepts no other, so two kept-alive sessions reach both workers.
    with WebhookReceiver() as receiver, Server(APP, workers=2, env=env, extra_args=[
            "--worker-connections", "1", "--keep-alive", "60"]) as server:
        sessions = [requests.Session(), requests.Session()]
        turn = iter(range(10_000))

        def session() -> requests.Session:
            return sessions[next(turn) % 2]

        def send(verb: str, url: str, **kwargs: Any) -> requests.Response:
            chosen = session()
            try:
                return chosen.request(verb, url, timeout=30, **kwargs)
            except requests.ConnectionError:
                # A kept-alive connection the worker dropped before reading the request
                # (nothing was processed): the session reconnects, to the free worker.
                return chosen.request(verb, url, timeout=30, **kwargs)

        def call(method: str, params: Any) -> Dict[str, Any]:
            return send("POST", server.url + "/a2a", json=rpc_body(method, params),
                        headers=V1).json()

        task_ids = []
        for i in range(sent["ok"]):
            params: Dict[str, Any] = {"message": user_message("hi", f"m-ok-{i}")}
            if i == 0:
                params["configuration"] = {"taskPushNotificationConfig": {"url": receiver.hook()}}
            task_ids.append(call("SendMessage", params)["result"]["task"]["id"])
        for i in range(sent["failed"]):
            state = call("SendMessage", {"message": user_message("fail", f"m-f-{i}")})
            assert state["result"]["task"]["status"]["state"] == "TASK_STATE_FAILED"
        for i in range(sent["unknown_task"]):
            assert call("GetTask", {"id": f"nope-{i}"})["error"]["code"] == -32001
        for _ in range(sent["unknown_method"]):
            assert call("NoSuchMethod", {})["error"]["code"] == -32601
        for task_id in task_ids[:sent["rest_ok"]]:
            got = send("GET", f"{server.url}/a2a/rest/tasks/{task_id}")
            assert got.status_code == 200
        with session().post(server.url + "/a2a", json=rpc_body(
                "SendStreamingMessage", {"message": user_message("s", "m-s")}),
                headers=V1, stream=True, timeout=30) as response:
            assert b"TASK_STATE_COMPLETED" in response.content
        # The last push carries the finished task; the delivering worker counts each
        # push after the receiver answered it, and a stream after its last byte.
        pushes = receiver.wait_for(lambda got: "TASK_STATE_COMPLETED" in str(got[-1]["json"])
                                   if got else False)
        sent_pushes = (("a2a_push_attempts_total", (("outcome", "sent"),)), len(pushes))
        closed = (("a2a_open_streams", ()), 0)

        def scrape_all() -> List[Dict[Tuple[str, Tuple[Tuple[str, str], ...]], float]]:
            scrapes = []
            for _ in range(4):  # two from each worker: each answers the sum
                response = send("GET", server.url + "/metrics")
                assert response.status_code == 200
                assert response.headers["Content-Type"].startswith("text/plain")
                scrapes.append(_families(response.text))
            last = scrapes[-1]
            counted = all(last.get(key) == value for key, value in (sent_pushes, closed))
            return scrapes if counted else []

        scrapes = wait_until(scrape_all, 30, "the push and the stream to be counted")
        for each in sessions:
            each.close()
        workers_seen = {p.name.split("_")[-1] for p in multiproc.glob("counter_*.db")}

    assert len(workers_seen) == 2  # both workers counted something
    values = scrapes[-1]
    for name in ("a2a_tasks_total", "a2a_push_attempts_total"):  # both workers' sums agree
        assert {k: v for k, v in scrapes[-2].items() if k[0] == name} == \
            {k: v for k, v in values.items() if k[0] == name}

    def requests_total(version: str, method: str, code: int, binding: str = "jsonrpc") -> float:
        key = ("a2a_requests_total", (("binding", binding), ("code", str(code)),
                                      ("method", method), ("version", version)))
        return values.get(key, 0.0)

    assert requests_total("1.0", "SendMessage", 0) == sent["ok"] + sent["failed"]
    assert requests_total("1.0", "GetTask", -32001) == sent["unknown_task"]
    assert requests_total("", "unknown", -32601) == sent["unknown_method"]
    assert requests_total("1.0", "GetTask", 0, "rest") == sent["rest_ok"]
    assert requests_total("1.0", "SendStreamingMessage", 0) == 1
    count = values[("a2a_request_duration_seconds_count",
                    (("binding", "jsonrpc"), ("method", "SendMessage")))]
    assert count == sent["ok"] + sent["failed"]
    tasks = {labels[0][1]: v for (name, labels), v in values.items()
             if name == "a2a_tasks_total"}
    started = sent["ok"] + sent["failed"] + 1
    assert tasks["submitted"] == started
    assert tasks["completed"] == sent["ok"] + 1
    assert tasks["failed"] == sent["failed"]
    assert values[("a2a_open_streams", ())] == 0
    assert values[("a2a_push_attempts_total", (("outcome", "sent"),))] == len(pushes)


PROVIDERS = """
import json, sys
from a2a_flask.observe import otel
found = [otel.connect_metrics(), otel.tracer() is not None]
print(json.dumps(found + ["opentelemetry.metrics" in sys.modules,
                          "opentelemetry.trace" in sys.modules]))
"""


@pytest.mark.parametrize("variables, expected", [
    ({}, [False, False, False, False]),  # the API is not even imported
    ({"OTEL_PYTHON_METER_PROVIDER": "sdk_meter_provider"}, [True, False]),
    ({"OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"}, [False, True]),
])
def test_a_provider_set_only_by_the_environment_is_found(variables, expected):
    """With no provider anywhere, start-up and the first call do not import the API to
    learn so; one named by ``OTEL_PYTHON_METER_PROVIDER`` (or ``..._TRACER_...``) is found."""
    import json
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run([sys.executable, "-c", PROVIDERS], capture_output=True, text=True,
                          timeout=60, env={**env, **variables})
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found[:len(expected)] == expected


def test_metrics_are_off_unless_asked_for(tmp_path):
    with Server(APP, env=_env(tmp_path)) as server:
        assert requests.get(server.url + "/metrics", timeout=5).status_code == 404


def test_prometheus_counts_store_errors_from_the_signal():
    from a2a_flask.observe import prometheus

    metrics = prometheus.metrics()
    before = metrics.store_errors.labels("append")._value.get()
    signals.send(signals.store_error, None, operation="append", exception=OSError("disk"))
    assert metrics.store_errors.labels("append")._value.get() == before + 1
    body, content_type = metrics.exposition()
    assert b"a2a_store_errors_total" in body and content_type.startswith("text/plain")


# ------------------------------------------------------------------ signals and logs


@pytest.fixture
def served(make_app):
    """The agent on a real (threaded werkzeug) HTTP server in this process, so that
    signals and log records are seen here."""
    from werkzeug.serving import make_server

    def agent(ctx):
        if ctx.text == "fail":
            raise RuntimeError("asked to fail")
        logging.getLogger("a2a_flask").warning("working on it")
        return ctx.text

    app = make_app(agent, store="memory://")
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(5)


def _send(url: str, text: str, message_id: str) -> Dict[str, Any]:
    response = requests.post(url + "/a2a", json=rpc_body(
        "SendMessage", {"message": user_message(text, message_id)}), headers=V1, timeout=10)
    assert response.status_code == 200
    return response.json()


def test_every_lifecycle_signal_fires_with_its_arguments(served):
    seen: List[Tuple[str, Dict[str, Any]]] = []
    receivers = {}
    for name in ("request_handled", "task_created", "task_state_changed", "task_finished",
                 "stream_opened", "stream_closed"):
        def receiver(sender, _name=name, **kw):
            seen.append((_name, kw))
        receivers[name] = receiver
        getattr(signals, name).connect(receiver)
    try:
        task = _send(served, "hello", "m-sig")["result"]["task"]
        with requests.post(served + "/a2a/rest/message:stream", json={
                "message": user_message("streamed", "m-sig-2")},
                headers=V1, stream=True, timeout=10) as response:
            assert response.status_code == 200
            response.content  # read it to the end
        deadline = time.monotonic() + 5
        while not any(n == "stream_closed" for n, _ in seen) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        for name, receiver in receivers.items():
            getattr(signals, name).disconnect(receiver)
    names = [n for n, _ in seen]
    handled = [kw for n, kw in seen if n == "request_handled"]
    assert handled[0]["binding"] == "jsonrpc" and handled[0]["method"] == "SendMessage"
    assert handled[0]["version"] == "1.0" and handled[0]["code"] == 0
    assert handled[0]["task_id"] == task["id"] and handled[0]["duration"] > 0
    assert handled[1]["binding"] == "rest" and handled[1]["method"] == "SendStreamingMessage"
    created = [kw for n, kw in seen if n == "task_created"]
    assert created[0] == {"task_id": task["id"], "context_id": task["contextId"]}
    moves = [(kw["old"].name, kw["new"].name) for n, kw in seen
             if n == "task_state_changed" and kw["task_id"] == task["id"]]
    assert moves == [("SUBMITTED", "COMPLETED")]
    finished = [kw for n, kw in seen if n == "task_finished"]
    assert finished[0]["state"].name == "COMPLETED" and finished[0]["duration"] >= 0
    assert names.count("stream_opened") == names.count("stream_closed") == 1
    closed = next(kw for n, kw in seen if n == "stream_closed")
    assert closed["reason"] == "finished" and closed["binding"] == "rest"


def test_a_raising_receiver_breaks_nothing(served, caplog):
    calls = []

    def broken(sender, **kw):
        raise RuntimeError("receiver bug")

    def counting(sender, **kw):
        calls.append(kw)

    every = [value for value in vars(signals).values() if isinstance(value, NamedSignal)]
    assert len(every) == 10
    for signal in every:
        signal.connect(broken)
    signals.request_handled.connect(counting)
    try:
        with caplog.at_level(logging.ERROR, logger="a2a_flask.signals"):
            answer = _send(served, "hello", "m-broken")
            missing = requests.post(served + "/a2a", json=rpc_body("GetTask", {"id": "x"}),
                                    headers=V1, timeout=10).json()
            events = list(requests.post(served + "/a2a", json=rpc_body(
                "SendStreamingMessage", {"message": user_message("s", "m-broken-s")}),
                headers=V1, timeout=10).iter_lines())
    finally:
        for signal in every:
            signal.disconnect(broken)
        signals.request_handled.disconnect(counting)
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert missing["error"]["code"] == -32001
    assert any(b"TASK_STATE_COMPLETED" in line for line in events)
    assert len(calls) == 3  # the receiver after the broken one still ran
    failures = [r for r in caplog.records if "receiver of the" in r.getMessage()]
    assert failures and all(r.exc_info for r in failures)
    assert {"a2a-request-handled", "a2a-task-created", "a2a-task-finished",
            "a2a-stream-opened", "a2a-stream-closed"} <= {r.args[0] for r in failures}


def test_log_records_name_their_task(served, caplog):
    with caplog.at_level(logging.INFO, logger="a2a_flask"):
        task = _send(served, "hello", "m-log")["result"]["task"]
        failed = _send(served, "fail", "m-log-fail")["result"]["task"]
    working = [r for r in caplog.records if r.getMessage() == "working on it"]
    assert [(r.task_id, r.context_id) for r in working] == [(task["id"], task["contextId"])]
    crashed = [r for r in caplog.records if r.exc_info and r.task_id == failed["id"]]
    assert crashed and crashed[0].context_id == failed["contextId"]
    # Outside any task (a fresh context, as a new greenlet has) the fields are there, empty.
    import contextvars

    record = logging.LogRecord("a2a_flask", logging.INFO, __file__, 1, "idle", (), None)
    contextvars.Context().run(logging.getLogger("a2a_flask").filters[0].filter, record)
    assert (record.task_id, record.context_id) == ("", "")


NESTED = """
import json, threading, requests
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.instrumentation.flask import FlaskInstrumentor
from werkzeug.serving import make_server

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
import examples.echo_agent as agent
FlaskInstrumentor().instrument_app(agent.app)
server = make_server("127.0.0.1", 0, agent.app, threaded=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
requests.post(f"http://127.0.0.1:{server.server_port}/a2a", timeout=10, json={
    "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "nope"}},
    headers={"A2A-Version": "1.0",
             "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"})
server.shutdown()
print(json.dumps([{"name": s.name, "kind": s.kind.name, "attributes": dict(s.attributes)}
                  for s in exporter.get_finished_spans()]))
"""


def test_under_the_flask_instrumentation_there_is_one_server_span():
    """opentelemetry-instrumentation-flask's SERVER span is the call's span: renamed after
    the method and given the A2A attributes, not doubled by a second SERVER span."""
    import json
    import subprocess
    import sys

    pytest.importorskip("opentelemetry.instrumentation.flask")
    done = subprocess.run([sys.executable, "-c", NESTED], capture_output=True, text=True,
                          timeout=60, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    spans = json.loads(done.stdout.strip().splitlines()[-1])
    servers = [s for s in spans if s["kind"] == "SERVER"]
    assert len(servers) == 1
    [span] = servers
    assert span["name"] == "GetTask"
    assert span["attributes"]["http.route"]  # the instrumentation's own span
    assert span["attributes"]["rpc.method"] == "GetTask"
    assert span["attributes"]["rpc.jsonrpc.error_code"] == -32001


def test_the_grafana_dashboard_graphs_metrics_that_exist():
    import json
    import re

    from a2a_flask.observe import prometheus

    path = ROOT / "examples" / "grafana-dashboard.json"
    dashboard = json.loads(path.read_text())
    used = {re.sub(r"_bucket$", "", name)
            for panel in dashboard["panels"] for target in panel["targets"]
            for name in re.findall(r"\ba2a_[a-z_]+", target["expr"])}
    served = prometheus.metrics().exposition()[0].decode()
    assert used and all(f"# TYPE {name} " in served for name in used), used


def test_task_durations_are_read_from_the_stored_creation_time():
    from datetime import datetime, timedelta, timezone

    from a2a_flask.observe.tasks import _age
    from a2a_flask.protocol.models import format_timestamp

    five_ago = format_timestamp(datetime.now(timezone.utc) - timedelta(seconds=5))
    assert 4.9 < _age(five_ago) < 6
    assert _age("not a time") == 0.0


def test_every_logger_of_the_package_names_the_task(make_app):
    import importlib
    import pkgutil

    import a2a_flask
    from a2a_flask.observe.context import TaskContextFilter

    for module in pkgutil.walk_packages(a2a_flask.__path__, "a2a_flask."):
        try:
            importlib.import_module(module.name)
        except ImportError:  # a backend whose optional extra is not installed
            continue
    logging.getLogger("a2a_flask.made_late")  # a module's logger made before init_app
    make_app()
    ours = [name for name in logging.Logger.manager.loggerDict
            if name == "a2a_flask" or name.startswith("a2a_flask.")]
    missing = [name for name in ours if not any(
        isinstance(f, TaskContextFilter) for f in logging.getLogger(name).filters)]
    assert "a2a_flask.made_late" in ours and missing == []


def test_a_store_outage_is_signalled_with_its_operation():
    from a2a_flask.protocol.errors import StoreUnavailable
    from a2a_flask.stores import MemoryStore, base

    @base.outages_as_unavailable((ConnectionError,))
    class Down(MemoryStore):
        def load(self, task_id):
            raise ConnectionError("refused")

    seen = []

    def on_error(sender, **kw):
        seen.append(kw)

    signals.store_error.connect(on_error)
    try:
        with pytest.raises(StoreUnavailable):
            Down().load("t-1")
    finally:
        signals.store_error.disconnect(on_error)
    assert [(kw["operation"], type(kw["exception"])) for kw in seen] == [("load", ConnectionError)]
