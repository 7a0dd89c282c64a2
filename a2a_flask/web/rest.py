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

import logging
from typing import Any, Callable, Dict

from flask import Blueprint, Response, request

from ..dialects import normalise_version, supported_versions
from ..dialects.registry import operation as op
from ..dialects.v1 import render_send_result
from ..engine.service import AgentService
from ..observe.calls import open_call
from ..protocol import models as m
from ..protocol.calls import CallContext
from ..protocol.codec import decode
from ..protocol.errors import A2AError, InternalError, VersionNotSupportedError
from . import rest03
from .auth import Authentication
from .headers import negotiate_extensions, requested_version
from .observing import route_method
from .routes import (
    Route,
    add_unknown_routes,
    error_body,
    error_response,
    json_body,
    query_params,
)
from .sse import dumps, event_stream, parse_last_event_id

log = logging.getLogger("a2a_flask")

REST_PATH = "/rest"
VERSION = "1.0"


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


def _view(service: AgentService, auth: Authentication, route: Route) -> Callable[..., Response]:
    def view(tenant: str = "", **path: str) -> Response:
        headers: Dict[str, str] = {}
        note = open_call(service.runtime.sender, "rest", request.headers)
        note.version, note.method = route.version, route_method(request.method, route.rule)
        try:
            principal = auth.identify()
            _check_version(route.version)
            extensions, echo = negotiate_extensions(service.card)
            if echo:
                headers["A2A-Extensions"] = echo
            parsed = route.build(path)
            if tenant and hasattr(parsed, "tenant"):
                parsed.tenant = tenant
            note.about(parsed)
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
                return event_stream(result, render, error_body, headers)
            note.result(result)
            return Response(dumps(route.render(result)), mimetype="application/json",
                            headers=headers)
        except A2AError as exc:
            note.code = exc.code
            return error_response(exc, headers)
        except Exception:
            log.exception("REST request failed")
            note.code = InternalError.code
            return error_response(InternalError(), headers)
        finally:
            note.finish()

    return view


def register_routes(bp: Blueprint, service: AgentService, auth: Authentication) -> None:
    """Add every REST route to an agent's blueprint: 1.0 at ``/rest`` and
    ``/rest/<tenant>``, the 0.3 flavour at ``/rest/v1``."""
    mounts = [(rest03.ROUTES, (REST_PATH + rest03.PREFIX,)),
              (ROUTES, (REST_PATH, REST_PATH + "/<a2aid:tenant>"))]
    count = 0
    for routes, prefixes in mounts:
        for route in routes:
            view = _view(service, auth, route)
            for prefix in prefixes:
                count += 1
                # No merge_slashes: "//tasks" is not a route (and no HTML redirect page).
                bp.add_url_rule(prefix + route.rule, f"rest_{count}", view,
                                methods=list(route.methods), merge_slashes=False)
    add_unknown_routes(bp, REST_PATH)


