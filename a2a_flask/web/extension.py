"""The Flask extension: ``A2A(app=None, ...)`` plus ``init_app(app)``.

One :class:`A2A` object is one agent.  ``init_app`` reads the ``A2A_*`` config
once, builds the agent (:mod:`.assembly`: store, engine, service) and registers a blueprint (the
JSON-RPC endpoint and the agent's own card under ``url_prefix``) plus the card
at the host root ``/.well-known/agent-card.json`` and ``/.well-known/agent.json``.
Per-app state lives in ``app.extensions["a2a"][name]``; several agents with
different names and prefixes can share an app, and agents of one app that name
the same store URL share one store object (``app.extensions["a2a_stores"]``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence, Union, overload

from flask import Blueprint, Flask, Response, current_app, request

from . import commands, health, jsonrpc, observing, rest, routes
from .agent_state import AgentState
from .assembly import JWKS_PATH, AgentSpec, assemble
from .auth import Authenticator
from .card_origin import check_public_url
from .deploy import collect_fully_every
from .headers import BODY_LIMIT_KEY, BODY_TIMEOUT_KEY
from ..config import Settings
from ..engine.executor import Executor
from ..engine.service import ExtendedCard
from ..protocol.cards import Endpoint, check_card, with_default_capabilities
from ..protocol.models import AgentCard
from ..stores import TaskStore

__all__ = ["A2A"]

WELL_KNOWN_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")


def _card_endpoint(path: str) -> str:
    """``/.well-known/agent-card.json`` -> ``agent_card``."""
    return path.rsplit("/", 1)[1].split(".")[0].replace("-", "_")


class A2A:
    """Turns an executor function into an A2A agent inside a Flask app.

    :param app: a Flask app to set up at once (or call :meth:`init_app` later).
    :param card: the public :class:`~a2a_flask.protocol.models.AgentCard`; leave its
        ``supported_interfaces`` empty to have them built from the real endpoints.
    :param executor: the agent function (or set it with the :meth:`executor` decorator).
    :param store: a :class:`~a2a_flask.stores.TaskStore` or a store URL; wins over
        ``A2A_STORE``.  Agents of one app that name the same URL share one store object.
    :param url_prefix: where the endpoint lives; wins over ``A2A_URL_PREFIX`` (default ``/a2a``).
    :param name: the key in ``app.extensions["a2a"]``; give each agent of one app its own.
    :param extended_card: the extended card (served to authenticated callers only), or a
        function of the call context returning one (``ctx.principal`` is the caller).
    :param auth: who may call: an authenticator (see :mod:`a2a_flask.web.auth`, e.g.
        ``BearerAuth(verify)``) or a list of them, tried in order; or use the
        :meth:`authenticate` decorator.  Without one, everybody may call.
    :param celery: the Celery app runs are queued on with ``A2A_RUNNER=celery``
        (default: ``app.extensions["celery"]``); see ``docs/celery.rst``.
    :param settings: any other setting by name (``inspector=True``, ``task_ttl=60``),
        read like its ``A2A_*`` key (see :mod:`a2a_flask.config`) and winning over it;
        a name that is no setting raises :class:`TypeError` in ``init_app``.
    """

    def __init__(self, app: Optional[Flask] = None, *, card: AgentCard,
                 executor: Optional[Executor] = None, store: Any = None,
                 url_prefix: Optional[str] = None, name: str = "a2a",
                 extended_card: Optional[ExtendedCard] = None,
                 auth: Union[Authenticator, Sequence[Authenticator], None] = None,
                 celery: Any = None, **settings: Any) -> None:
        check_card(card)
        if isinstance(extended_card, AgentCard):
            check_card(extended_card)
        self.card = with_default_capabilities(card, extended_card is not None)
        self._executor = executor
        self._rerun_safe = False
        #: The Celery app runs go to with ``A2A_RUNNER=celery`` (None: app.extensions["celery"]).
        self.celery = celery
        self._store = store
        self.name = name
        self.extended_card = extended_card
        self.authenticators: List[Authenticator] = (
            [] if auth is None else [auth] if callable(auth) else list(auth))
        self._overrides = dict(settings, url_prefix=url_prefix)
        if app is not None:
            self.init_app(app)

    @overload
    def executor(self, fn: Executor) -> Executor: ...

    @overload
    def executor(self, *, rerun_safe: bool = False) -> Callable[[Executor], Executor]: ...

    def executor(self, fn: Optional[Executor] = None, *,
                 rerun_safe: bool = False) -> Union[Executor, Callable[[Executor], Executor]]:
        """Decorator: register ``fn(ctx)`` as this agent's executor.

        ``@a2a.executor(rerun_safe=True)`` declares that running a task again from the
        start is safe: a queued run (``A2A_RUNNER=celery``) whose worker died is then
        run again instead of failing its task.
        """
        def register(fn: Executor) -> Executor:
            self._executor = fn
            self._rerun_safe = rerun_safe
            return fn

        return register if fn is None else register(fn)

    def authenticate(self, fn: Authenticator) -> Authenticator:
        """Decorator: ``fn()`` names the caller of the current request.

        It returns a :class:`~a2a_flask.Principal`, an id string, or None
        (no credentials); it raises ``UnauthenticatedError`` for bad ones and
        ``PermissionDeniedError`` for a caller who may not use this agent.
        Register it before ``init_app``.  Declare its scheme on the card
        (``security_schemes``) so that clients know what to send.
        """
        self.authenticators.append(fn)
        return fn

    # ------------------------------------------------------------ setup

    def init_app(self, app: Flask) -> None:
        """Read config, build the agent (:func:`~a2a_flask.web.assembly.assemble`), and
        register its routes on ``app``."""
        if self._executor is None:
            raise RuntimeError(f"A2A agent {self.name!r} has no executor; decorate a function "
                               "with @a2a.executor or pass executor=...")
        registry: Dict[str, AgentState] = app.extensions.setdefault("a2a", {})
        if self.name in registry:
            raise RuntimeError(f"an A2A agent named {self.name!r} is already registered; "
                               "pass name=... to give each agent its own")
        settings = Settings.from_config(app.config, **self._overrides)
        check_public_url(settings.public_url)
        if settings.gc_full_every:
            collect_fully_every(settings.gc_full_every)
        spec = AgentSpec(self.name, self.card, self._executor, self.endpoints(),
                         store=self._store, extended_card=self.extended_card,
                         authenticators=self.authenticators, rerun_safe=self._rerun_safe,
                         celery=self.celery, sender=self,
                         arguments=tuple(name for name, value in self._overrides.items()
                                         if value is not None))
        state = assemble(app, spec, settings)
        registry[self.name] = state
        commands.register(app)
        app.url_map.converters.setdefault("a2apath", routes.AnyPathConverter)
        app.register_blueprint(self._blueprint(state))
        observing.attach(app, settings.metrics_path)
        health.register(app, settings.health_path)
        serve_root = settings.root_card if settings.root_card is not None else len(registry) == 1
        if serve_root:
            self._register_root_card(app, state)

    def endpoints(self) -> List[Endpoint]:
        """The bindings this agent serves, relative to its prefix."""
        return [("JSONRPC", "1.0", ""), ("HTTP+JSON", "1.0", rest.REST_PATH),
                ("JSONRPC", "0.3", ""), ("HTTP+JSON", "0.3", rest.REST_PATH)]

    def _blueprint(self, state: AgentState) -> Blueprint:
        bp = Blueprint(f"a2a_{self.name}", __name__, url_prefix=state.settings.url_prefix or None)
        body_limit = state.settings.max_content_length
        body_timeout = state.settings.body_timeout

        @bp.before_request
        def prepare() -> None:
            # Each worker process needs its keeper (leases, orphans, retention) running.
            state.service.runtime.ensure_keeper()
            request.environ[BODY_LIMIT_KEY] = body_limit
            request.environ[BODY_TIMEOUT_KEY] = body_timeout

        def rpc() -> Response:
            return jsonrpc.handle(state.service, state.auth)

        bp.add_url_rule("/", "jsonrpc", rpc, methods=["POST"], strict_slashes=False)
        rest.register_routes(bp, state.service, state.auth)
        if state.settings.url_prefix:
            # Everything under the prefix answers in JSON, even a path or verb no route
            # has (at the host root the app's own routes and error pages stay in charge);
            # other verbs on the JSON-RPC URL get a JSON-RPC 405.
            bp.add_url_rule("/", "jsonrpc_wrong_verb", jsonrpc.wrong_verb,
                            methods=list(jsonrpc.WRONG_VERBS), strict_slashes=False)
            routes.add_unknown_routes(bp, "", served=("POST",) + jsonrpc.WRONG_VERBS)
            for path in WELL_KNOWN_PATHS:
                bp.add_url_rule(path, _card_endpoint(path), state.card_response, methods=["GET"])
        signers = [state.renderer.signer,
                   state.service.push.signer if state.service.push is not None else None]
        keys = [key for signer in signers if signer is not None for key in signer.jwks()["keys"]]
        if keys:
            jwks = {"keys": list({key["kid"]: key for key in keys}.values())}
            bp.add_url_rule(JWKS_PATH, "jwks", lambda: jwks, methods=["GET"])
        inspector = state.settings.inspector
        if inspector is not False:
            from .inspector import make_inspector

            # None: on in debug mode only, asked per request (debug is often set after init_app).
            bp.register_blueprint(make_inspector(
                enabled=(lambda: current_app.debug) if inspector is None else None,
                agent=lambda: state))
        return bp

    def _register_root_card(self, app: Flask, state: AgentState) -> None:
        for path in WELL_KNOWN_PATHS:
            endpoint = "a2a_root_" + _card_endpoint(path)
            if endpoint in app.view_functions:
                raise RuntimeError(
                    f"another A2A agent already serves the root card; pass root_card=False "
                    f"to A2A(...) for agent {state.name!r} or the other one (A2A_ROOT_CARD "
                    "in app.config applies to every agent of the app)")
            app.add_url_rule(path, endpoint, state.card_response, methods=["GET"])

    # ------------------------------------------------------------ access

    def state(self, app: Optional[Flask] = None) -> AgentState:
        """This agent's state in ``app`` (default: the current app)."""
        app = app or current_app
        state: AgentState = app.extensions["a2a"][self.name]
        return state

    def store(self, app: Optional[Flask] = None) -> TaskStore:
        """The task store this agent uses in ``app``."""
        return self.state(app).store
