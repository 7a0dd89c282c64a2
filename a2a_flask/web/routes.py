"""What both REST flavours share: the route table's shape, request bodies and
query strings, the JSON error body, and JSON answers for paths no route has."""
from __future__ import annotations

import dataclasses
import re
import typing
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple, Type

from flask import Blueprint, Response, current_app, request
from werkzeug.exceptions import HTTPException
from werkzeug.routing import BaseConverter

from ..dialects.registry import Method
from ..protocol.codec import decode, field_specs
from ..protocol.operations import OPERATIONS, Operation
from ..protocol.operations import Route as OperationRoute
from ..protocol.errors import (
    A2AError,
    InvalidParamsError,
    MethodNotFoundError,
    UnsupportedMediaTypeError,
)
from .headers import is_json_mimetype, parse_json, read_body, refuse_lone_surrogates
from .sse import dumps


class AnyPathConverter(BaseConverter):
    """The rest of a path, newlines included (``path`` stops at them), so that no
    path under the agent's prefix escapes its JSON errors."""

    regex = r"[\s\S]*"
    weight = 300  # the last resort: every real route wins over it
    part_isolating = False  # it spans slashes


def error_response(exc: A2AError, headers: Optional[Dict[str, str]] = None) -> Response:
    return Response(dumps(error_body(exc)), status=exc.http_status, mimetype="application/json",
                    headers={**(headers or {}), **exc.headers})


def error_body(exc: A2AError) -> Dict[str, Any]:
    """The google.rpc.Status-style body of an error, for a response or a stream event."""
    return {"error": {"code": exc.http_status, "status": exc.grpc_status,
                      "message": exc.message, "details": exc.details()}}


def json_body() -> Dict[str, Any]:
    """The request body as a JSON object ({} when empty); otherwise 415 for a body
    that is not JSON by its ``Content-Type``, 400 for bad JSON or a non-object.

    An empty body needs a JSON ``Content-Type`` too, or none from a client that is
    no web page: a browser posts a form's type, or no type at all, cross-site
    without a CORS preflight, cookies included, and such a POST must change
    nothing.  Browsers say a page sent it (``Origin``, ``Sec-Fetch-Site``); SDKs
    post an empty cancel with no type and neither header.
    """
    raw = read_body()
    if not is_json_mimetype(request.mimetype) and (raw.strip() or request.mimetype
                                                   or _from_a_web_page()):
        raise UnsupportedMediaTypeError(
            f"Content-Type must be application/json or application/a2a+json, not "
            f"{request.mimetype or 'missing'}", metadata={"contentType": request.mimetype})
    if not raw.strip():
        return {}
    body = parse_json(raw)
    if not isinstance(body, dict):
        raise InvalidParamsError("The body must be a JSON object",
                                 violations=[("body", "must be an object")])
    refuse_lone_surrogates(body, raw)
    return body


def _from_a_web_page() -> bool:
    """Whether a browser sent the request from a page (of this site or another)."""
    return ("Origin" in request.headers
            or request.headers.get("Sec-Fetch-Site", "none") not in ("none", ""))


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


def request_builder(cls: Type[Any], source: str,
                    extras: Optional[Callable[[Any, Dict[str, Any]], None]] = None) -> Builder:
    """Builds ``cls`` from the path's variables (named as its members) and the
    members in ``source``: ``"body"``, ``"query"`` or ``""`` (the path alone).
    ``extras(request, members)`` then reads what the codec does not (a draft's
    members) from the body, or the query's parameters as strings."""

    def build(path: Dict[str, str]) -> Any:
        if source == "body":
            members = json_body()
        elif source == "query":
            members = query_params(cls)
        else:
            members = {}
        parsed = decode(cls, {**members, **path})
        if extras is not None:
            extras(parsed, members if source == "body" else request.args.to_dict())
        return parsed

    return build


@dataclasses.dataclass
class Route:
    """One REST route as served: its rule and verbs, the operation as its flavour
    builds (``method.parse``: the path's variables -> the request) and answers it."""

    rule: str
    verbs: Tuple[str, ...]
    method: Method
    version: str


def routes_of(version: str, specs: Callable[[Operation[Any]], Tuple[OperationRoute, ...]],
              method: Callable[[Operation[Any], OperationRoute], Method]) -> List[Route]:
    """The routes of one REST flavour: for every operation of the table, its routes
    (``specs``) served by the Method ``method`` makes."""
    return [Route(spec.rule, spec.verbs, method(op, spec), version)
            for op in OPERATIONS for spec in specs(op)]


#: The converter of a route's path variables: one path segment without ``:``, so
#: that ``/tasks/<a2aid:id>:cancel`` routes correctly.
_VARIABLE = re.compile(r"<a2aid:(\w+)>")


class RouteTable:
    """Routes matched by path and verb in one Flask view (a catch-all rule per agent):
    each Werkzeug rule compiles Python code when an app registers it, and the REST
    flavours have 35 routes, which every app (and every gunicorn worker) would pay.

    Matching follows Werkzeug's: at each segment a literal wins over a variable
    (``/tasks/tasks`` is the task ``tasks``, not tenant ``tasks``'s list), and a path
    some route has, with a verb none of them takes, is a 405.
    """

    def __init__(self, mounts: Iterable[Tuple[str, Iterable[Route]]]) -> None:
        entries = []
        for prefix, routes in mounts:
            for route in routes:
                rule = prefix + route.rule
                # Sorting by which segments are variables puts literals first.
                variables = tuple("<" in segment for segment in rule.split("/"))
                entries.append((variables, rule, route))
        entries.sort(key=lambda entry: entry[0])  # stable: the table's order otherwise
        self._entries = [(rule, re.compile(_regex(rule)), route) for _, rule, route in entries]

    def rules(self) -> List[Tuple[str, Tuple[str, ...]]]:
        """Every rule (Werkzeug's syntax) and its verbs, in matching order."""
        return [(rule, route.verbs) for rule, _, route in self._entries]

    def match(self, path: str, verb: str) -> Tuple[Optional[Route], Dict[str, str], List[str]]:
        """The route for ``path`` and ``verb`` (HEAD as GET) and its path variables;
        else None and the verbs the path's routes take (empty: no route has it)."""
        wanted = "GET" if verb == "HEAD" else verb
        allowed: List[str] = []
        for _, regex, route in self._entries:
            found = regex.fullmatch(path)
            if found is None:
                continue
            if wanted in route.verbs:
                return route, found.groupdict(), []
            allowed.extend(v for v in route.verbs if v not in allowed)
        return None, {}, allowed


def _regex(rule: str) -> str:
    """The regular expression of a rule such as ``/tasks/<a2aid:id>:cancel``."""
    parts, end = [], 0
    for variable in _VARIABLE.finditer(rule):
        parts += [_literal(rule, rule[end:variable.start()]), f"(?P<{variable[1]}>[^/:]+)"]
        end = variable.end()
    return "".join(parts) + _literal(rule, rule[end:])


def _literal(rule: str, text: str) -> str:
    if "<" in text:
        raise ValueError(f"route {rule!r}: only <a2aid:name> variables are supported")
    return re.escape(text)


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
    return not_routed(allowed)


def not_routed(allowed: List[str]) -> Response:
    """The JSON answer to a request no route takes: 405 with ``Allow`` when routes
    of its path take the verbs ``allowed``, else 404."""
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


#: Every verb a client may send; the unknown-route handler answers each in JSON.
ANY_METHOD = ["GET", "POST", "PUT", "PATCH", "DELETE", "TRACE", "CONNECT"]


def add_unknown_routes(bp: Blueprint, base: str, served: Tuple[str, ...] = (),
                       below: bool = True) -> None:
    """JSON 404/405 answers for ``base`` and, with ``below``, everything under it
    that no route serves (``served``: the verbs a route at ``base`` itself has)."""
    verbs = [m for m in ANY_METHOD if m not in served]
    if verbs:
        bp.add_url_rule(base, f"{base.strip('/') or 'root'}_unknown", unknown_route,
                        methods=verbs, merge_slashes=False, strict_slashes=False)
    if below:
        bp.add_url_rule(base + "/<a2apath:rest>", f"{base.strip('/') or 'root'}_any_unknown",
                        unknown_route, methods=ANY_METHOD, merge_slashes=False)
