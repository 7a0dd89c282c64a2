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

import dataclasses
import logging
import typing
from typing import Any, Callable, Dict, Optional

from flask import Blueprint, Response, current_app, request
from werkzeug.exceptions import HTTPException
from werkzeug.routing import BaseConverter

from . import models as m
from .codec import field_specs, decode, encode
from .dialects import StreamRenderer, normalise_version, supported_versions
from .dialects.v1 import render_event, render_send_result
from .errors import (
    A2AError,
    ContentTypeNotSupportedError,
    InternalError,
    InvalidParamsError,
    MethodNotFoundError,
    VersionNotSupportedError,
)
from .headers import (
    is_json_mimetype,
    negotiate_extensions,
    parse_json,
    read_body,
    refuse_lone_surrogates,
    requested_version,
)
from .service import AgentService, CallContext
from .sse import dumps, event_stream, parse_last_event_id

log = logging.getLogger("a2a_flask")

REST_PATH = "/rest"
VERSION = "1.0"


class IdConverter(BaseConverter):
    """A path segment without ``:`` so ``/tasks/<id>:cancel`` routes correctly."""

    regex = r"[^/:]+"


class AnyPathConverter(BaseConverter):
    """The rest of a path, newlines included (``path`` stops at them), so that no
    path under the agent's prefix escapes its JSON errors."""

    regex = r"[\s\S]*"
    weight = 300  # the last resort: every real route wins over it
    part_isolating = False  # it spans slashes


def error_response(exc: A2AError, headers: Optional[Dict[str, str]] = None) -> Response:
    return Response(dumps(_error_body(exc)), status=exc.http_status, mimetype="application/json",
                    headers={**(headers or {}), **exc.headers})


def _error_body(exc: A2AError) -> Dict[str, Any]:
    """The google.rpc.Status-style body of an error, for a response or a stream event."""
    return {"error": {"code": exc.http_status, "status": exc.grpc_status,
                      "message": exc.message, "details": exc.details()}}


def json_body() -> Dict[str, Any]:
    """The request body as a JSON object ({} when empty); -32005/-32700/-32602 otherwise."""
    raw = read_body()
    if not raw.strip():
        return {}
    if not is_json_mimetype(request.mimetype):
        raise ContentTypeNotSupportedError(
            f"Content-Type must be application/json, not {request.mimetype or 'missing'}")
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise InvalidParamsError("The body must be a JSON object",
                                 violations=[("body", "must be an object")])
    refuse_lone_surrogates(body, raw)
    return body


def query_params(cls: type) -> Dict[str, Any]:
    """Query parameters for a request model: booleans from ``true``/``false``."""
    values: Dict[str, Any] = {}
    for spec in field_specs(cls):
        raw = request.args.get(spec.wire, request.args.get(spec.attr))
        if raw is None:
            continue
        if typing.Optional[bool] == spec.type or spec.type is bool:
            values[spec.wire] = {"true": True, "false": False}.get(raw.lower(), raw)
        else:
            values[spec.wire] = raw
    return values


# Each route: how to build the request model from the path, query and body.
Builder = Callable[[Dict[str, str]], Any]


def _send(_: Dict[str, str]) -> Any:
    return decode(m.SendMessageRequest, json_body())


def _get_task(path: Dict[str, str]) -> Any:
    return decode(m.GetTaskRequest, {**query_params(m.GetTaskRequest), "id": path["id"]})


def _list_tasks(_: Dict[str, str]) -> Any:
    return decode(m.ListTasksRequest, query_params(m.ListTasksRequest))


def _cancel(path: Dict[str, str]) -> Any:
    return decode(m.CancelTaskRequest, {**json_body(), "id": path["id"]})


def _subscribe(path: Dict[str, str]) -> Any:
    return m.SubscribeToTaskRequest(id=path["id"])


def _create_push(path: Dict[str, str]) -> Any:
    return decode(m.TaskPushNotificationConfig, {**json_body(), "taskId": path["task_id"]})


def _push_ref(path: Dict[str, str]) -> Any:
    return m.TaskPushConfigRequest(task_id=path["task_id"], id=path["config_id"])


def _list_push(path: Dict[str, str]) -> Any:
    query = query_params(m.ListTaskPushNotificationConfigsRequest)
    return decode(m.ListTaskPushNotificationConfigsRequest, {**query, "taskId": path["task_id"]})


def _empty(_: Dict[str, str]) -> Any:
    return m.GetExtendedAgentCardRequest()


@dataclasses.dataclass
class Route:
    """One REST route: how to build the request, which operation, how to answer."""

    rule: str
    methods: tuple
    build: Builder
    operation: Callable[[AgentService, Any, CallContext], Any]
    render: Callable[[Any], Any] = encode
    streaming: bool = False
    stream_renderer: StreamRenderer = lambda stream: render_event
    version: str = VERSION


def op(name: str) -> Callable[[AgentService, Any, CallContext], Any]:
    """The service operation ``name`` as a route operation."""
    return lambda service, req, ctx: getattr(service, name)(req, ctx)


ROUTES = [
    Route("/message:send", ("POST",), _send, op("send_message"), render_send_result),
    Route("/message:stream", ("POST",), _send, op("send_streaming_message"), streaming=True),
    Route("/tasks", ("GET",), _list_tasks, op("list_tasks")),
    Route("/tasks/<a2aid:id>", ("GET",), _get_task, op("get_task")),
    Route("/tasks/<a2aid:id>:cancel", ("POST",), _cancel, op("cancel_task")),
    Route("/tasks/<a2aid:id>:subscribe", ("GET", "POST"), _subscribe, op("subscribe_to_task"),
          streaming=True),
    Route("/tasks/<a2aid:task_id>/pushNotificationConfigs", ("POST",), _create_push,
          op("create_push_config")),
    Route("/tasks/<a2aid:task_id>/pushNotificationConfigs", ("GET",), _list_push,
          op("list_push_configs")),
    Route("/tasks/<a2aid:task_id>/pushNotificationConfigs/<a2aid:config_id>", ("GET",),
          _push_ref, op("get_push_config")),
    Route("/tasks/<a2aid:task_id>/pushNotificationConfigs/<a2aid:config_id>", ("DELETE",),
          _push_ref, op("delete_push_config")),
    Route("/extendedAgentCard", ("GET",), _empty,
          lambda service, req, ctx: service.get_extended_card(ctx)),
]


def _check_version(route_version: str) -> None:
    raw = requested_version()
    if raw is not None and raw.strip() and normalise_version(raw) != route_version:
        supported = ", ".join(supported_versions())
        raise VersionNotSupportedError(
            f"A2A-Version {raw.strip()} is not served on the {route_version} REST routes; "
            f"this server speaks {supported} (0.3 REST lives under /v1)",
            metadata={"requestedVersion": raw.strip(), "supportedVersions": supported},
        )


def _view(service: AgentService, route: Route) -> Callable[..., Response]:
    def view(tenant: str = "", **path: str) -> Response:
        headers: Dict[str, str] = {}
        try:
            principal = service.auth.identify()
            _check_version(route.version)
            extensions, echo = negotiate_extensions(service.card)
            if echo:
                headers["A2A-Extensions"] = echo
            parsed = route.build(path)
            if tenant and hasattr(parsed, "tenant"):
                parsed.tenant = tenant
            ctx = CallContext(
                tenant=tenant or getattr(parsed, "tenant", "") or "",
                dialect=route.version,
                extensions=extensions,
                last_event_id=parse_last_event_id(request.headers.get("Last-Event-ID")),
                principal=principal,
            )
            result = route.operation(service, parsed, ctx)
            if route.streaming:
                render = route.stream_renderer(service.stream_context())
                return event_stream(result, render, _error_body, headers)
            return Response(dumps(route.render(result)), mimetype="application/json",
                            headers=headers)
        except A2AError as exc:
            return error_response(exc, headers)
        except Exception:
            log.exception("REST request failed")
            return error_response(InternalError(), headers)

    return view


def unknown_route(**_: str) -> Response:
    """404 for paths no route has; 405 (with ``Allow``) for a known path and wrong verb."""
    adapter = current_app.url_map.bind_to_environ(request.environ)
    allowed = []
    for method in ("GET", "POST", "DELETE"):
        try:
            endpoint, _args = adapter.match(method=method)
        except HTTPException:
            continue
        if not endpoint.endswith("_unknown"):
            allowed.append(method)
    if allowed:
        exc: A2AError = MethodNotFoundError(
            f"{request.method} is not allowed on {request.path}; use {', '.join(allowed)}",
            metadata={"path": request.path, "method": request.method})
        exc.http_status, exc.grpc_status = 405, "UNIMPLEMENTED"
        response = error_response(exc)
        response.headers["Allow"] = ", ".join(allowed)
        return response
    return error_response(MethodNotFoundError(
        f"No A2A route {request.method} {request.path}",
        metadata={"path": request.path, "method": request.method}))


def register_routes(bp: Blueprint, service: AgentService) -> None:
    """Add every REST route to an agent's blueprint: 1.0 at ``/rest`` and
    ``/rest/<tenant>``, the 0.3 flavour at ``/rest/v1``."""
    from .dialects.rest03 import ROUTES as ROUTES_V03, V03_PREFIX

    mounts = [(ROUTES_V03, (REST_PATH + V03_PREFIX,)),
              (ROUTES, (REST_PATH, REST_PATH + "/<a2aid:tenant>"))]
    count = 0
    for routes, prefixes in mounts:
        for route in routes:
            view = _view(service, route)
            for prefix in prefixes:
                count += 1
                # No merge_slashes: "//tasks" is not a route (and no HTML redirect page).
                bp.add_url_rule(prefix + route.rule, f"rest_{count}", view,
                                methods=list(route.methods), merge_slashes=False)
    add_unknown_routes(bp, REST_PATH)


#: Every verb a client may send; the unknown-route handler answers each in JSON.
ANY_METHOD = ["GET", "POST", "PUT", "PATCH", "DELETE", "TRACE", "CONNECT"]


def add_unknown_routes(bp: Blueprint, base: str, served: tuple = ()) -> None:
    """JSON 404/405 answers for everything under ``base`` that no route serves
    (``served``: the verbs a route at ``base`` itself has)."""
    bp.add_url_rule(base, f"{base.strip('/') or 'root'}_unknown", unknown_route,
                    methods=[m for m in ANY_METHOD if m not in served], merge_slashes=False,
                    strict_slashes=False)
    bp.add_url_rule(base + "/<a2apath:rest>", f"{base.strip('/') or 'root'}_any_unknown",
                    unknown_route, methods=ANY_METHOD, merge_slashes=False)
