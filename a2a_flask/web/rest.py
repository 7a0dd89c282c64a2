"""The HTTP+JSON (REST) binding of A2A 1.0, under ``<prefix>/rest``.

Every route of the proto's HTTP annotations, each also under a ``/{tenant}``
prefix.  Requests reuse the 1.0 dialect's models; results are the same JSON as
JSON-RPC results without the envelope; streams carry bare StreamResponse
objects; errors are ``{"error": {"code", "status", "message", "details"}}``
with the HTTP status of the 1.0.1 mapping.

The path already names the protocol (1.0), so a request without
``A2A-Version`` is served as 1.0; a header naming another version gets
``VERSION_NOT_SUPPORTED``.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Tuple

from flask import Blueprint, Response, request

from ..dialects import normalise_version, supported_versions, v1, v11
from ..dialects.registry import Method, StreamRenderer
from ..engine.service import AgentService
from ..observe.calls import CallNote, open_call
from ..protocol.calls import ServedItem
from ..protocol.errors import A2AError, VersionNotSupportedError
from ..protocol.operations import Operation
from ..protocol.operations import Route as OperationRoute
from . import rest03
from .auth import Authentication
from .dispatch import Binding, EventRenderer, dispatch
from .headers import requested_version
from .routes import (
    ANY_METHOD,
    Route,
    RouteTable,
    add_unknown_routes,
    error_body,
    error_response,
    not_routed,
    request_builder,
    routes_of,
)
from .sse import dumps, event_stream

REST_PATH = "/rest"
VERSION = "1.0"


def _method(op: Operation[Any], spec: OperationRoute) -> Method:
    """An operation as the 1.0 routes serve it: the request built from path, query
    or body as its route says; the result written as by 1.0 JSON-RPC."""
    return Method(request_builder(op.request, spec.source), op, v1.METHODS[op.name].render,
                  stream_renderer=lambda stream: v1.render_event)


#: The 1.0 routes: every operation's of the table.
ROUTES = routes_of(VERSION, lambda op: op.rest, _method)


def _draft_method(op: Operation[Any], spec: OperationRoute) -> Method:
    """An operation as the 1.0 routes serve it to a request that says 1.1 (the draft:
    :mod:`~a2a_flask.dialects.v11`), on an agent that serves it."""
    return Method(request_builder(op.request, spec.source, v11.add_draft_members), op,
                  v11.METHODS[op.name].render, stream_renderer=v11.stream_renderer,
                  dialect=VERSION)


#: The same routes, as a request saying ``A2A-Version: 1.1`` is served (by rule and verbs).
DRAFT_METHODS = {(route.rule, route.verbs): route.method
                 for route in routes_of(v11.VERSION, lambda op: op.rest, _draft_method)}

#: The media type of A2A's HTTP+JSON bodies (1.0.1 §11: SHOULD), sent to clients that
#: list it in ``Accept``; others get ``application/json``, as before.
A2A_JSON = "application/a2a+json"


def _json_type() -> str:
    """The Content-Type of a 1.0 (or 1.1) REST answer: ``application/a2a+json`` when
    the request's ``Accept`` names it (a wildcard does not), else ``application/json``."""
    for value, quality in request.accept_mimetypes:
        if quality > 0 and value.lower() == A2A_JSON:
            return A2A_JSON
    return "application/json"


def _check_version(route_version: str, drafts: bool = False) -> str:
    """The version a request to a route of ``route_version`` speaks: that one (a
    missing header too), or the 1.1 draft on 1.0's routes where the agent serves it;
    VERSION_NOT_SUPPORTED for any other."""
    raw = requested_version()
    if raw is None or not raw.strip():
        return route_version
    spoken = normalise_version(raw)
    if spoken == v11.VERSION and route_version == VERSION and drafts:
        return spoken
    if spoken != route_version:
        supported = ", ".join(supported_versions(drafts))
        raise VersionNotSupportedError(
            f"A2A-Version {raw.strip()} is not served on the {route_version} REST routes; "
            f"this server speaks {supported} (0.3 REST lives under /v1)",
            metadata={"requestedVersion": raw.strip(), "supportedVersions": supported},
        )
    return spoken


class _Rest(Binding):
    """The HTTP+JSON binding of one request to ``route``."""

    failure = "REST request failed"

    def __init__(self, route: Route, tenant: str, path: Dict[str, str]) -> None:
        self.route, self.tenant, self.path = route, tenant, path

    def resolve(self, service: AgentService, note: CallNote) -> Tuple[str, Method, StreamRenderer]:
        version = _check_version(self.route.version, service.protocol_draft)
        route = self.route
        method = (route.method if version == route.version
                  else DRAFT_METHODS[(route.rule, route.verbs)])
        assert method.stream_renderer is not None
        return version, method, method.stream_renderer

    def parse(self, method: Method) -> Any:
        parsed = method.parse(self.path)
        if self.tenant and hasattr(parsed, "tenant"):
            parsed.tenant = self.tenant
        return parsed

    def answer(self, body: Any, headers: Dict[str, str]) -> Response:
        mimetype = _json_type() if self.route.version == VERSION else "application/json"
        return Response(dumps(body), mimetype=mimetype, headers=headers)

    def stream(self, items: Iterable[ServedItem], render_event: EventRenderer,
               headers: Dict[str, str]) -> Response:
        return event_stream(items, render_event, error_body, headers)

    def error(self, exc: A2AError, headers: Dict[str, str]) -> Response:
        response = error_response(exc, headers)
        if self.route.version == VERSION:
            response.mimetype = _json_type()
        return response


#: Every REST route: 0.3 under ``/v1``, 1.0 at the root and under ``/<tenant>``.
TABLE = RouteTable([(rest03.PREFIX, rest03.ROUTES), ("", ROUTES),
                    ("/<a2aid:tenant>", ROUTES)])


def _view(service: AgentService, auth: Authentication) -> Callable[..., Response]:
    def view(rest: str) -> Response:
        route, path, allowed = TABLE.match("/" + rest, request.method)
        if route is None:
            return not_routed(allowed)
        tenant = path.pop("tenant", "")
        note = open_call(service.runtime.sender, "rest", request.headers)
        # Named before the caller is identified: refused calls are counted by method too.
        note.version, note.method = route.version, route.method.operation.name
        try:
            return dispatch(service, auth, note, _Rest(route, tenant, path))
        finally:
            note.finish()

    return view


def register_routes(bp: Blueprint, service: AgentService, auth: Authentication) -> None:
    """Serve every REST route of :data:`TABLE` under ``/rest`` of an agent's blueprint
    (one rule: see :class:`~a2a_flask.web.routes.RouteTable`)."""
    # No merge_slashes: "//tasks" is not a route (and no HTML redirect page).
    bp.add_url_rule(REST_PATH + "/<a2apath:rest>", "rest", _view(service, auth),
                    methods=ANY_METHOD, merge_slashes=False)
    add_unknown_routes(bp, REST_PATH, below=False)
