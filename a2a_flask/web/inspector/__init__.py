"""The inspector: a page in the browser to look at an agent and chat with it.

:func:`make_inspector` returns a Flask blueprint serving one page at
``/inspector/`` (plus a redirect from ``/inspector``) and its assets under
``/inspector/static/``.  Register it at the agent's prefix::

    app.register_blueprint(make_inspector(), url_prefix="/a2a")
    # -> page at /a2a/inspector/, JSON-RPC at /a2a/, card at /a2a/.well-known/agent-card.json

The page is plain HTML, CSS and JavaScript shipped in this package: no build
step, no CDN, no external fonts, no inline script or style, so it runs under
the strict ``Content-Security-Policy: default-src 'self'`` it is served with.

**How the page finds the agent.**  The view writes the JSON-RPC URL and the
card URL into data attributes of the page; by default they are *relative to
the page*: ``../`` and ``../.well-known/agent-card.json``.  Relative URLs keep
working wherever the blueprint is mounted (any prefix, a ``SCRIPT_NAME``, a
reverse proxy that rewrites the path) without knowing the agent's endpoint
names.  Pass ``rpc_url``/``card_url`` (strings, or functions called per
request, e.g. using ``url_for``) to point the page elsewhere.

**What the page reads.**  The card and the chat use the agent's own API (A2A
1.0 JSON-RPC, from the browser).  The task rows and a task's timeline, owner,
tenant and webhooks come from a small read-only JSON API of the inspector under
``/inspector/api/`` (:mod:`.api`), served when the blueprint knows its agent
(``agent=``, as ``A2A(...)`` registers it): it identifies the caller with the
agent's authentication hook and reads tasks through the agent's service, so a
caller sees exactly the tasks the API shows it.  Without an agent the page lists
tasks with ``ListTasks`` and shows what a task says of itself.

To change the page, put your own ``templates/a2a_inspector/index.html`` in the
app: the app's templates win over the blueprint's.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Callable, Optional, Tuple, Union

from flask import Blueprint, Response, abort, redirect, render_template
from werkzeug.wrappers import Response as WerkzeugResponse

from . import api

if TYPE_CHECKING:
    from ..agent_state import AgentState
    from ...engine.service import AgentService
    from ..auth import Authentication

__all__ = ["make_inspector", "CONTENT_SECURITY_POLICY"]

HERE = os.path.dirname(os.path.abspath(__file__))

#: Sent with every inspector response: the page loads nothing but its own files
#: and talks only to its own origin.
CONTENT_SECURITY_POLICY = ("default-src 'self'; base-uri 'none'; form-action 'none'; "
                           "frame-ancestors 'none'; object-src 'none'")

UrlOption = Union[str, Callable[[], str]]


def _resolve(value: UrlOption) -> str:
    return value() if callable(value) else value


def make_inspector(import_name: str = __name__, *, rpc_url: UrlOption = "../",
                   card_url: UrlOption = "../.well-known/agent-card.json",
                   poll_interval: float = 5.0,
                   enabled: Optional[Callable[[], bool]] = None,
                   agent: Optional[Callable[[], "AgentState"]] = None) -> Blueprint:
    """A blueprint named ``a2a_inspector`` serving the inspector page.

    :param import_name: the blueprint's import name (its assets and template are
        always found next to this module, whatever the name).
    :param rpc_url: the A2A 1.0 JSON-RPC endpoint, absolute or relative to the page
        (default ``../``: the prefix the blueprint is registered at); or a function
        returning it, called in each request.
    :param card_url: the agent card, likewise (default ``../.well-known/agent-card.json``).
    :param poll_interval: seconds between task-list refreshes in the page (0: never).
    :param enabled: a function called in each request; when it returns false the page
        and its assets answer 404 (e.g. ``lambda: current_app.debug``: on only in
        debug mode, even when debug is switched on after the blueprint was registered).
    :param agent: a function returning the agent's state (``lambda: a2a.state()``):
        turns on the inspector's task API (rows with owner, tenant and times, each
        task's timeline and webhooks), which asks the agent's authentication hook and
        service.  ``A2A(...)`` passes it when it registers the page itself.

    Register it once per agent, at that agent's ``url_prefix``; several agents in
    one app need distinct names: ``app.register_blueprint(make_inspector(),
    url_prefix="/agents/x", name="a2a_inspector_x")``.  It can also be nested in
    a blueprint whose prefix is the agent's (``bp.register_blueprint(make_inspector())``).
    """
    bp = Blueprint("a2a_inspector", import_name,
                   static_folder=os.path.join(HERE, "static"),
                   static_url_path="/inspector/static",
                   template_folder=os.path.join(HERE, "templates"))

    if enabled is not None:
        @bp.before_request
        def only_when_enabled() -> None:
            if not enabled():
                abort(404)

    @bp.route("/inspector/", methods=["GET"])
    def index() -> Response:
        html = render_template("a2a_inspector/index.html", rpc_url=_resolve(rpc_url),
                               card_url=_resolve(card_url),
                               poll_ms=int(max(poll_interval, 0) * 1000),
                               api_url="api/" if agent is not None else "")
        response = Response(html, mimetype="text/html")
        response.headers["Cache-Control"] = "no-cache"
        return response

    if agent is not None:
        def parts() -> Tuple["AgentService", "Authentication"]:
            state = agent()
            return state.service, state.auth

        @bp.route("/inspector/api/tasks", methods=["GET"])
        def api_tasks() -> Response:
            return api.answer(lambda: api.list_view(parts))

        @bp.route("/inspector/api/tasks/<path:task_id>/file", methods=["GET"])
        def api_file(task_id: str) -> Response:
            return api.answer(lambda: api.file_view(parts, task_id))

        @bp.route("/inspector/api/tasks/<path:task_id>", methods=["GET"])
        def api_task(task_id: str) -> Response:
            return api.answer(lambda: api.detail_view(parts, task_id))

    @bp.route("/inspector", methods=["GET"], strict_slashes=True)
    def redirect_to_index() -> WerkzeugResponse:
        # Relative, so it is right behind any proxy: /x/inspector -> /x/inspector/
        return redirect("inspector/", code=308)

    @bp.after_request
    def harden(response: Response) -> Response:
        # A file's own, stricter policy (sandbox) stays.
        response.headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        return response

    return bp
