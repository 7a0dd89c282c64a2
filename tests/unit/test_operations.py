"""The operation table is the single list of operations: everything derived covers it.

Adding an operation means one entry in ``a2a_flask.protocol.operations.OPERATIONS``
plus its ``Service`` method; these tests fail when something else lists
operations of its own, or when the table and what is derived from it disagree.
"""
from __future__ import annotations

import inspect
import re
from pathlib import Path
from typing import Any, List, Set, Tuple

import pytest

import a2a_flask
from a2a_flask import dialects, signals
from a2a_flask.dialects import v01, v03, v1
from a2a_flask.engine.service import AgentService
from a2a_flask.protocol import operations
from a2a_flask.protocol.calls import CallContext
from a2a_flask.protocol.operations import BY_NAME, OPERATIONS, DialectService, Service
from a2a_flask.web import rest, rest03


def public_methods(cls: type) -> Set[str]:
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction)
            if not name.startswith("_")}


def test_the_table_names_each_operation_once():
    names = [op.name for op in OPERATIONS]
    assert len(names) == len(set(names)) == 11
    assert set(BY_NAME) == set(names)


def test_every_service_method_is_an_operation_of_the_table():
    assert public_methods(Service) == {op.service_method for op in OPERATIONS}
    # What dialects ask besides the operations is not an operation.
    assert public_methods(DialectService) - public_methods(Service) == {"task_dialect",
                                                                        "card_for"}


def test_the_engine_service_has_every_method_of_the_protocol():
    # mypy --strict checks the signatures (the bindings pass an AgentService as a
    # DialectService); this says which is missing when one is.
    assert public_methods(DialectService) <= public_methods(AgentService)


class Recorder:
    """A service that records which method was called, and with what."""

    def __init__(self) -> None:
        self.calls: List[Tuple[str, Tuple[Any, ...]]] = []

    def __getattr__(self, name: str) -> Any:
        def method(*args: Any, **kwargs: Any) -> str:
            self.calls.append((name, args))
            return name

        return method


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: op.name)
def test_each_entry_calls_the_service_method_it_names(op):
    service, request, ctx = Recorder(), object(), CallContext()
    assert op.call(service, request, ctx) == op.service_method
    (name, args), = service.calls
    assert name == op.service_method
    assert args[-1] is ctx and (request in args or op.name == "GetExtendedAgentCard")


def test_the_10_dialect_serves_every_operation_under_its_own_name():
    assert {name: method.operation for name, method in v1.METHODS.items()} == BY_NAME


@pytest.mark.parametrize("module, missing", [(v03, {"ListTasks"}), (v01, set())])
def test_older_dialects_map_their_names_onto_operations_of_the_table(module, missing):
    served = set()
    for name, method in module.METHODS.items():
        assert method.operation is BY_NAME[method.operation.name], name
        assert method.streaming == method.operation.streaming, name
        served.add(method.operation.name)
    if module is v03:  # the 0.3 dialect holds every 0.3 operation (and the 0.1 names)
        assert set(BY_NAME) - served == missing


def test_every_jsonrpc_method_served_is_an_operation_of_the_table():
    for version in dialects.supported_versions():
        for name, method in dialects.negotiate(version).methods.items():
            assert method.operation is BY_NAME[method.operation.name], (version, name)


def expected_rest_rules() -> Set[Tuple[str, str]]:
    rules = set()
    for op in OPERATIONS:
        for spec in op.rest:
            for prefix in ("", "/<a2aid:tenant>"):
                rules |= {(verb, prefix + spec.rule) for verb in spec.verbs}
        for spec in op.routes03:
            rules |= {(verb, "/v1" + spec.rule) for verb in spec.verbs}
    return rules


def test_every_rest_route_served_comes_from_the_table(make_app):
    served = {(verb, rule) for rule, verbs in rest.TABLE.rules() for verb in verbs}
    assert served == expected_rest_rules()
    # The app has one rule for all of them (and one for the REST root itself).
    app = make_app()
    assert sorted(rule.rule for rule in app.url_map.iter_rules()
                  if rule.rule.startswith("/a2a/rest")) == ["/a2a/rest", "/a2a/rest/<a2apath:rest>"]


def test_a_literal_segment_wins_over_a_variable_as_in_werkzeug():
    """``/tasks/tasks`` is the task named ``tasks``; ``/v1/tasks`` is 0.3's list, not
    the tenant ``v1``'s; a path some route has, with another verb, is a 405."""
    route, path, _ = rest.TABLE.match("/tasks/tasks", "GET")
    assert route.method.operation.name == "GetTask" and path == {"id": "tasks"}
    route, path, _ = rest.TABLE.match("/v1/tasks", "GET")
    assert route.version == "0.3" and route.method.operation.name == "ListTasks"
    route, path, _ = rest.TABLE.match("/acme/tasks", "HEAD")
    assert route.version == "1.0" and path == {"tenant": "acme"}
    assert rest.TABLE.match("/tasks/t1:cancel", "GET") == (None, {}, ["POST"])
    assert rest.TABLE.match("/tasks/t1:cancel/", "POST") == (None, {}, [])
    assert rest.TABLE.match("/tasks/a:b", "GET") == (None, {}, [])


def test_rest_routes_are_named_by_their_operation():
    for route in rest.ROUTES + rest03.ROUTES:
        assert route.method.operation is BY_NAME[route.method.operation.name]
    assert [r.method.operation.name for r in rest.ROUTES] == [
        op.name for op in OPERATIONS for _ in op.rest]
    # 0.3 REST has every operation but under its own card route.
    assert {r.rule for r in rest03.ROUTES} - {r.rule for r in rest.ROUTES} == {"/card"}


def test_an_operation_without_03_routes_gets_none():
    op = operations.Operation("Future", dict, "future", lambda service, request, ctx: None,
                              rest=(operations.Route(("GET",), "/future"),))
    assert op.routes03 == ()
    assert BY_NAME["GetTask"].routes03 == BY_NAME["GetTask"].rest


def test_no_module_calls_the_service_by_a_name_in_a_string():
    # The getattr(service, name) the table replaced must not come back.
    root = Path(a2a_flask.__file__).parent
    for path in [*root.joinpath("dialects").glob("*.py"), *root.joinpath("web").glob("*.py")]:
        assert "getattr(service" not in path.read_text(), path


def test_each_rest_call_is_named_by_its_operation(make_app):
    # Metric labels and span names come from request_handled's method: a REST
    # call is counted as its operation's 1.0 method, refused or not.
    client = make_app().test_client()
    handled: List[Tuple[str, str]] = []

    def receiver(sender: Any, **kw: Any) -> None:
        handled.append((kw["version"], kw["method"]))

    signals.request_handled.connect(receiver)
    try:
        expected = []
        for op in OPERATIONS:
            for root, version, specs in (("/a2a/rest", "1.0", op.rest),
                                         ("/a2a/rest/v1", "0.3", op.routes03)):
                for spec in specs:
                    path = re.sub(r"<a2aid:\w+>", "nope", spec.rule)
                    for verb in spec.verbs:
                        client.open(root + path, method=verb, json={} if verb == "POST" else None)
                        expected.append((version, op.name))
    finally:
        signals.request_handled.disconnect(receiver)
    assert handled == expected
