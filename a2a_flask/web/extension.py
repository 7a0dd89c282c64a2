"""The Flask extension: ``A2A(app=None, ...)`` plus ``init_app(app)``.

One :class:`A2A` object is one agent.  ``init_app`` reads the ``A2A_*`` config
once, opens the store, builds the runtime and registers a blueprint (the
JSON-RPC endpoint and the agent's own card under ``url_prefix``) plus the card
at the host root ``/.well-known/agent-card.json`` and ``/.well-known/agent.json``.
Per-app state lives in ``app.extensions["a2a"][name]``; several agents with
different names and prefixes can share an app, and agents of one app that name
the same store URL share one store object (``app.extensions["a2a_stores"]``).
"""
from __future__ import annotations

import functools
import logging
from email.utils import formatdate
from typing import (Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple, Union,
                    overload)

from flask import Blueprint, Flask, Response, current_app, request

from .. import dialects
from . import commands, jsonrpc, observing, rest, routes
from .auth import Authentication, Authenticator
from .card_origin import CardOrigin, Source, card_origin, check_public_url
from ..protocol.errors import A2AError
from ..protocol.cards import CardRenderer, Endpoint, check_card, with_default_capabilities, with_security
from ..config import Settings
from ..engine.executor import Executor, invoke
from ..protocol.models import AgentCard
from ..push.delivery import PushDispatcher, RetryPolicy
from ..push.guard import WebhookPolicy
from ..push.transport import WebhookTransport
from ..engine.runtime import Run, Runtime
from .deploy import collect_fully_every, gunicorn_workers, on_worker_shutdown
from .headers import BODY_LIMIT_KEY, BODY_TIMEOUT_KEY
from ..engine.service import AgentService, ExtendedCard, Limits
from ..stores import MemoryStore, StoreLimits, TaskStore, open_store

log = logging.getLogger("a2a_flask")

WELL_KNOWN_PATHS = ("/.well-known/agent-card.json", "/.well-known/agent.json")
#: Where the public keys of signed pushes are published, under the agent's prefix.
JWKS_PATH = "/.well-known/jwks.json"


def _card_endpoint(path: str) -> str:
    """``/.well-known/agent-card.json`` -> ``agent_card``."""
    return path.rsplit("/", 1)[1].split(".")[0].replace("-", "_")


class AgentState:
    """What ``init_app`` built for one agent in one app."""

    def __init__(self, name: str, settings: Settings, service: AgentService,
                 renderer: CardRenderer, auth: Authentication,
                 release_store: Callable[[], None]) -> None:
        self.name = name
        #: Who is calling: asked by both bindings before they read a request's body.
        self.auth = auth
        self.settings = settings
        self.service = service
        self.renderer = renderer
        self.card_modified = formatdate(usegmt=True)
        #: Closes the store, or lets go of it where other agents of the app share it.
        self._release_store = release_store
        #: The settings given as arguments to ``A2A(...)`` (they win over app.config).
        self.arguments: FrozenSet[str] = frozenset()
        #: The URL of the store (``A2A(store=...)`` or ``A2A_STORE``); empty for a store
        #: object given to ``A2A(...)``.
        self.store_url = settings.store

    @property
    def store(self) -> TaskStore:
        return self.service.store

    def close(self) -> None:
        """Stop the background keeper and close the store (tests, app shutdown); a store
        shared with other agents of the app is closed with the last of them."""
        self.service.runtime.close()
        if self.service.push is not None:
            self.service.push.transport.close()
        self._release_store()

    def card_origin(self) -> CardOrigin:
        """Where the current request's card points, and what chose it (see
        :mod:`a2a_flask.web.card_origin`); HTTP 400 for a bad or untrusted ``Host``."""
        return card_origin(self.settings.public_url, self.settings.url_prefix,
                           declared=bool(self.renderer.card.supported_interfaces))

    def base_url(self) -> str:
        """Scheme, host, mount point and prefix clients use to reach this agent."""
        return self.card_origin().base_url

    def card_response(self) -> Response:
        """The public card with caching headers; 304 when the client's copy is current."""
        # Health checks often fetch the card: let them start this worker's keeper too
        # (it resumes webhook deliveries and reaps orphaned tasks after a restart).
        self.service.runtime.ensure_keeper()
        try:
            origin = self.card_origin()
        except A2AError as exc:
            return routes.error_response(exc)
        rendered = self.renderer.render(origin.base_url, sign=origin.signable)
        headers = {
            "Cache-Control": f"public, max-age={self.settings.card_max_age}",
            "ETag": rendered.etag,
            "Last-Modified": self.card_modified,
            "Access-Control-Allow-Origin": "*",
        }
        if origin.source is Source.HOST_HEADER:  # a shared cache must keep one per host
            headers["Vary"] = "Host"
        if request.if_none_match.contains_weak(rendered.etag.strip('"')):
            return Response(status=304, headers=headers)
        return Response(rendered.body, mimetype="application/json", headers=headers)


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
        """Read config, open the store, and register the agent's routes on ``app``."""
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
        auth = Authentication(self.authenticators, required=settings.auth_required)
        card = with_security(self.card, auth)
        auth.declared = card.security_schemes
        if isinstance(self._store, TaskStore):
            store, release_store = self._store, self._store.close
        else:
            limits = StoreLimits(settings.store_timeout, settings.store_pool_size,
                                 settings.store_writer_pool_size)
            store, release_store = _open_shared(app, self._store or settings.store,
                                                settings.task_ttl, limits)
        if settings.runner != "inline" and isinstance(store, MemoryStore):
            raise RuntimeError(
                f"A2A agent {self.name!r} has A2A_RUNNER={settings.runner} with the memory "
                "store: its workers run in other processes and must share the task store. "
                "Set A2A_STORE to sqlite:///path (one host), redis://..., postgresql://... "
                "or mysql://...")
        workers = gunicorn_workers()
        if isinstance(store, MemoryStore) and workers is not None and workers > 1:
            log.warning(
                "A2A agent %r uses the memory store under %d gunicorn workers: each worker "
                "sees only its own tasks, so GetTask, streams and cancels will miss tasks "
                "run by other workers. Set A2A_STORE to sqlite:///path (one host) or "
                "redis://host:6379/0 (several hosts).", self.name, workers)
        executor = self._executor

        def run_in_app(run: Run) -> None:
            with app.app_context():
                invoke(executor, run)

        runtime = Runtime(store, run_in_app, cancel_grace=settings.cancel_grace,
                          close_on_auth_required=settings.close_stream_on_auth_required,
                          lease_ttl=settings.lease_ttl, task_ttl=settings.task_ttl,
                          max_history=settings.max_history,
                          max_task_bytes=settings.max_task_bytes,
                          store_grace=settings.store_grace)
        if settings.runner == "celery":
            from .celery_runner import CeleryRunner

            runtime.runner = CeleryRunner(app, self.name, runtime, celery=self.celery,
                                          rerun_safe=self._rerun_safe)
        # In each gunicorn worker: at SIGTERM or HUP, running tasks get the graceful
        # timeout, then fail with a clear status message (not left to their leases).
        runtime.process_hooks.append(lambda: on_worker_shutdown(runtime.shutdown))
        service = AgentService(card, runtime, blocking_timeout=settings.blocking_timeout,
                               keepalive=settings.sse_keepalive, extended_card=self.extended_card)
        service.auth_challenge = auth.challenge
        service.limits = Limits(settings.max_parts, settings.max_file_size,
                                settings.max_streams_per_caller,
                                settings.max_anonymous_streams, settings.max_push_configs)
        renderer = CardRenderer(card, self.endpoints(), self._card_signer(settings, card),
                                legacy=bool(settings.legacy_card))
        state = AgentState(self.name, settings, service, renderer, auth, release_store)
        state.store_url = "" if isinstance(self._store, TaskStore) else str(
            self._store or settings.store)
        state.arguments = frozenset([name for name, value in self._overrides.items()
                                     if value is not None]
                                    + (["store"] if self._store is not None else []))
        service.interfaces = lambda: state.renderer.interfaces(state.base_url())
        service.lenient_version = settings.lenient_version
        if card.capabilities.push_notifications:
            self._set_up_push(service, settings)
        registry[self.name] = state
        commands.register(app)
        app.url_map.converters.setdefault("a2aid", routes.IdConverter)
        app.url_map.converters.setdefault("a2apath", routes.AnyPathConverter)
        app.register_blueprint(self._blueprint(state))
        observing.attach(self, app, service, settings.metrics_path)
        serve_root = settings.root_card if settings.root_card is not None else len(registry) == 1
        if serve_root:
            self._register_root_card(app, state)

    @staticmethod
    def _jwks_url(settings: Settings) -> str:
        """Where the signing keys are published, when the public URL is known up front."""
        return settings.public_url + settings.url_prefix + JWKS_PATH if settings.public_url else ""

    def _card_signer(self, settings: Settings, card: AgentCard) -> Any:
        if settings.card_signing_key is None:
            return None
        if not settings.public_url and not card.supported_interfaces:
            log.warning(
                "A2A agent %r has A2A_CARD_SIGNING_KEY but no A2A_PUBLIC_URL: its card's "
                "URLs come from each request, so the card is served unsigned. Set "
                "A2A_PUBLIC_URL to the agent's public base URL (https://agents.example.com) "
                "to sign it.", self.name)
        from ..signing.cards import CardSigner

        return CardSigner(settings.card_signing_key, jwks_url=self._jwks_url(settings))

    def _set_up_push(self, service: AgentService, settings: Settings) -> None:
        """Webhook delivery with its SSRF guard, retries and (optionally) signatures."""
        policy = WebhookPolicy(allow_private=settings.push_allow_private,
                               allowed_hosts=settings.push_allowed_hosts)
        runtime = service.runtime
        transport = WebhookTransport(
            policy, timeout=(min(5.0, settings.push_timeout), settings.push_timeout))
        transport.prepare()  # not on the first push, in a serving worker
        signer = None
        if settings.push_signing_key is not None:
            from ..signing.pushes import PushSigner

            signer = PushSigner(settings.push_signing_key, jwks_url=self._jwks_url(settings))
        service.webhook_policy = policy
        service.push = PushDispatcher(
            service.store, transport,
            renderer_for=lambda version: functools.partial(
                dialects.push_renderer(version), service.stream_context()),
            owner=runtime.process_owner,
            retry=RetryPolicy(settings.push_max_attempts, settings.push_retry_delay,
                              settings.push_retry_max_delay),
            claim_ttl=settings.lease_ttl, signer=signer, sender=self, log=runtime.log,
            store_grace=settings.store_grace)
        runtime.chores.append(service.push.sweep)

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
                enabled=(lambda: current_app.debug) if inspector is None else None))
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


def _open_shared(app: Flask, url: Any, task_ttl: float,
                 limits: StoreLimits) -> Tuple[TaskStore, Callable[[], None]]:
    """The store ``url`` names for an agent of ``app``, and how to let go of it.

    Agents of one app that name the same store share one object: each opening
    it would keep its own connections and, for shelve, its own index of the
    file, reading all of it again whenever another one compacts it.  The memory
    store is not shared: ``memory://`` is each agent's own.  The shared object is
    closed when the last agent using it lets go.
    """
    if not isinstance(url, str) or url.split(":", 1)[0] == "memory":
        own = open_store(url, task_ttl=task_ttl, limits=limits)
        return own, own.close
    shared: Dict[Tuple[str, float, StoreLimits], List[Any]] = app.extensions.setdefault(
        "a2a_stores", {})
    key = (url, task_ttl, limits)
    if key not in shared:
        shared[key] = [open_store(url, task_ttl=task_ttl, limits=limits), 0]
    entry = shared[key]
    entry[1] += 1
    released = False

    def release() -> None:
        nonlocal released
        if released:
            return
        released = True
        entry[1] -= 1
        if entry[1] == 0:
            shared.pop(key, None)
            entry[0].close()

    store: TaskStore = entry[0]
    return store, release
