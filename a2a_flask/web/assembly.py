"""Builds one agent's object graph, in one place, through constructors.

``init_app`` describes the agent (:class:`AgentSpec`), reads the settings, and
calls :func:`assemble`; what it gets back (an :class:`AgentState`) is complete,
and ``init_app`` only registers it with the app.  The order below is the order
of the dependencies, each part built from the ones above it:

store -> shared log, process name, stream context -> webhook delivery ->
runtime (writer, keeper, runs, following) -> service -> card renderer -> state.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from flask import Flask

from .. import dialects
from ..dialects.v11 import VERSION as DRAFT_VERSION
from ..config import Settings, config_key, scope_problem, store_scope
from ..engine.executor import Executor, invoke
from ..engine.following import stream_context
from ..engine.keeper import ProcessName
from ..engine.run import Run
from ..engine.runs import Runner
from ..engine.runtime import Runtime
from ..engine.service import AgentService, ExtendedCard, Limits
from ..observe import otel
from ..protocol.calls import StreamContext
from ..protocol.cards import CardRenderer, Endpoint, with_security
from ..protocol.models import AgentCard
from ..push.delivery import PushDispatcher, RetryPolicy
from ..push.guard import WebhookPolicy
from ..push.transport import WebhookTransport
from ..stores import StoreLimits, TaskStore, open_store, store_label
from ..stores.shared import SharedLog
from .agent_state import AgentState, origin_of
from .auth import Authentication, Authenticator
from .deploy import anonymous_stream_limit, gunicorn_workers, on_worker_shutdown

log = logging.getLogger("a2a_flask")

#: Where the public keys of signed cards and pushes are published, under the agent's prefix.
JWKS_PATH = "/.well-known/jwks.json"


@dataclass
class AgentSpec:
    """What the app's author declared for one agent (the arguments of ``A2A(...)``)."""

    name: str
    card: AgentCard
    executor: Executor
    endpoints: List[Endpoint]
    store: Any = None
    extended_card: Optional[ExtendedCard] = None
    authenticators: Sequence[Authenticator] = ()
    rerun_safe: bool = False
    celery: Any = None
    #: The settings given as arguments (they win over app.config), by name.
    arguments: Tuple[str, ...] = ()
    #: The sender of the agent's signals (the A2A extension object).
    sender: Any = None


def assemble(app: Flask, spec: AgentSpec, settings: Settings) -> AgentState:
    """Build ``spec``'s agent for ``app``: its store, engine, service, card and auth."""
    auth = Authentication(list(spec.authenticators), required=settings.auth_required)
    card = with_security(spec.card, auth)
    auth.declared = card.security_schemes
    scope = _scope(spec, settings)
    store, release_store = _store(app, spec, settings)
    release_store = _claim_scope(app, spec, settings, store, scope, release_store)
    shared_log = SharedLog(store)
    name = ProcessName()
    streams = stream_context(store,
                             close_on_auth_required=settings.close_stream_on_auth_required)
    policy, push = None, None
    if card.capabilities.push_notifications:
        policy, push = _push(spec, settings, store, shared_log, name, streams, scope)

    def run_in_app(run: Run) -> None:
        with app.app_context():
            invoke(spec.executor, run)

    runtime = Runtime(store, run_in_app, cancel_grace=settings.cancel_grace,
                      close_on_auth_required=settings.close_stream_on_auth_required,
                      lease_ttl=settings.lease_ttl, task_ttl=settings.task_ttl,
                      max_history=settings.max_history,
                      max_task_bytes=settings.max_task_bytes,
                      store_grace=settings.store_grace, sender=spec.sender,
                      runner=_runner(app, spec, settings), log=shared_log, name=name,
                      chores=[push.sweep] if push is not None else [],
                      # In each gunicorn worker: at SIGTERM or HUP, running tasks get the
                      # graceful timeout, then fail with a clear status message.
                      stop_hooks=[on_worker_shutdown], scope=scope)
    endpoints = list(spec.endpoints)
    if settings.protocol_draft:  # the card names the 1.1 draft only where it is served
        drafts = [(binding, DRAFT_VERSION, path) for binding, version, path
                  in endpoints if version == "1.0"]
        after = 1 + max((index for index, endpoint in enumerate(endpoints)
                         if endpoint[1] == "1.0"), default=-1)
        endpoints[after:after] = drafts
    renderer = CardRenderer(card, endpoints, _card_signer(spec.name, settings, card),
                            legacy=bool(settings.legacy_card))
    service = AgentService(
        card, runtime, blocking_timeout=settings.blocking_timeout,
        keepalive=settings.sse_keepalive, extended_card=spec.extended_card,
        interfaces=lambda: renderer.interfaces(origin_of(settings, renderer).base_url),
        limits=Limits(settings.max_parts, settings.max_file_size,
                      settings.max_streams_per_caller,
                      anonymous_stream_limit(settings.max_anonymous_streams),
                      settings.max_push_configs),
        push=push, webhook_policy=policy, auth_challenge=auth.challenge,
        lenient_version=settings.lenient_version, stream_context=streams, scope=scope,
        idempotency_ttl=settings.idempotency_ttl, protocol_draft=settings.protocol_draft,
        long_poll_timeout=settings.long_poll_timeout)
    arguments = frozenset(spec.arguments + (("store",) if spec.store is not None else ()))
    store_url = "" if isinstance(spec.store, TaskStore) else str(spec.store or settings.store)
    return AgentState(spec.name, settings, service, renderer, auth, release_store,
                      store_url=store_url, arguments=arguments)


def _store(app: Flask, spec: AgentSpec,
           settings: Settings) -> Tuple[TaskStore, Callable[[], None]]:
    """The agent's store and how to let go of it; refuses a process-local store (the
    memory store) that other processes would have to share."""
    url = ""
    if isinstance(spec.store, TaskStore):
        store, release = spec.store, spec.store.close
    else:
        limits = StoreLimits(settings.store_timeout, settings.store_pool_size,
                             settings.store_writer_pool_size)
        url = spec.store or settings.store
        store, release = _open_shared(app, url, settings.task_ttl, limits)
    if not store.process_local:
        return store, release
    label = store_label(store, url if isinstance(url, str) else "")
    if settings.runner != "inline":
        raise RuntimeError(
            f"A2A agent {spec.name!r} has A2A_RUNNER={settings.runner} with the {label}: "
            "its workers run in other processes and must share the task store. "
            "Set A2A_STORE to sqlite:///path (one host), redis://..., postgresql://... "
            "or mysql://...")
    workers = gunicorn_workers()
    if workers is not None and workers > 1:
        log.warning(
            "A2A agent %r uses the %s under %d gunicorn workers: each worker "
            "sees only its own tasks, so GetTask, streams and cancels will miss tasks "
            "run by other workers. Set A2A_STORE to sqlite:///path (one host) or "
            "redis://host:6379/0 (several hosts).", spec.name, label, workers)
    return store, release


def _scope(spec: AgentSpec, settings: Settings) -> str:
    """The agent's store scope (``A2A_STORE_SCOPE``, else from its name)."""
    scope = store_scope(spec.name, settings.store_scope)
    problem = scope_problem(scope)
    if problem:
        raise ValueError(
            f"A2A agent {spec.name!r}: its name, the store scope its tasks are stored "
            f"under by default, {problem}; set {config_key('store_scope')} to a shorter "
            "one without control characters")
    return scope


def _claim_scope(app: Flask, spec: AgentSpec, settings: Settings, store: TaskStore,
                 scope: str, release: Callable[[], None]) -> Callable[[], None]:
    """Refuse a second agent of ``app`` with ``scope`` on the same store (one object, or
    one URL however it was opened): the two would see each other's tasks.  Returns
    ``release``, which also gives the scope back."""
    if store.process_local and not isinstance(spec.store, TaskStore):
        return release  # an agent's own memory store: nobody else's tasks are in it
    where: Any = ("url", str(spec.store or settings.store)) if not isinstance(
        spec.store, TaskStore) else ("object", id(store))
    claims: Dict[Any, Dict[str, str]] = app.extensions.setdefault("a2a_store_scopes", {})
    holders = claims.setdefault(where, {})
    if scope in holders:
        release()
        label = "the default (empty) store scope" if not scope else f"store scope {scope!r}"
        raise RuntimeError(
            f"A2A agents {holders[scope]!r} and {spec.name!r} share a task store with "
            f"{label}: each would see the other's tasks. Give one of them its own "
            f"{config_key('store_scope')} (or its own store)")
    holders[scope] = spec.name

    def release_both() -> None:
        if holders.pop(scope, None) is not None and not holders:
            claims.pop(where, None)
        release()

    return release_both


def _runner(app: Flask, spec: AgentSpec, settings: Settings) -> Optional[Runner]:
    """Where runs go: None runs them in the web worker (``A2A_RUNNER=inline``)."""
    if settings.runner != "celery":
        return None
    from .celery_runner import CeleryRunner

    return CeleryRunner(app, spec.name, celery=spec.celery, rerun_safe=spec.rerun_safe)


def jwks_url(settings: Settings) -> str:
    """Where the signing keys are published, when the public URL is known up front."""
    return settings.public_url + settings.url_prefix + JWKS_PATH if settings.public_url else ""


def _card_signer(agent: str, settings: Settings, card: AgentCard) -> Any:
    if settings.card_signing_key is None:
        return None
    if not settings.public_url and not card.supported_interfaces:
        log.warning(
            "A2A agent %r has A2A_CARD_SIGNING_KEY but no A2A_PUBLIC_URL: its card's "
            "URLs come from each request, so the card is served unsigned. Set "
            "A2A_PUBLIC_URL to the agent's public base URL (https://agents.example.com) "
            "to sign it.", agent)
    from ..signing.cards import CardSigner

    return CardSigner(settings.card_signing_key, jwks_url=jwks_url(settings))


def _push(spec: AgentSpec, settings: Settings, store: TaskStore, shared_log: SharedLog,
          name: ProcessName, stream_context: StreamContext,
          scope: str) -> Tuple[WebhookPolicy, PushDispatcher]:
    """Webhook delivery with its SSRF guard, retries, tracing and (optionally) signatures."""
    policy = WebhookPolicy(allow_private=settings.push_allow_private,
                           allowed_hosts=settings.push_allowed_hosts)
    transport = WebhookTransport(
        policy, timeout=(min(5.0, settings.push_timeout), settings.push_timeout))
    transport.prepare()  # not on the first push, in a serving worker
    signer = None
    if settings.push_signing_key is not None:
        from ..signing.pushes import PushSigner

        signer = PushSigner(settings.push_signing_key, jwks_url=jwks_url(settings))
    push = PushDispatcher(
        store, otel.TracedTransport(transport),
        renderer_for=lambda version: functools.partial(
            dialects.push_renderer(version), stream_context),
        owner=name,
        retry=RetryPolicy(settings.push_max_attempts, settings.push_retry_delay,
                          settings.push_retry_max_delay),
        claim_ttl=settings.lease_ttl, signer=signer, sender=spec.sender, log=shared_log,
        store_grace=settings.store_grace, scope=scope)
    return policy, push


def _open_shared(app: Flask, url: Any, task_ttl: float,
                 limits: StoreLimits) -> Tuple[TaskStore, Callable[[], None]]:
    """The store ``url`` names for an agent of ``app``, and how to let go of it.

    Agents of one app that name the same store share one object: each opening
    it would keep its own connections and, for shelve, its own index of the
    file, reading all of it again whenever another one compacts it.  A
    process-local store (``memory://``) is not shared: each agent opens its own.
    The shared object is closed when the last agent using it lets go.
    """
    if not isinstance(url, str):
        own = open_store(url, task_ttl=task_ttl, limits=limits)
        return own, own.close
    shared: Dict[Tuple[str, float, StoreLimits], List[Any]] = app.extensions.setdefault(
        "a2a_stores", {})
    key = (url, task_ttl, limits)
    if key not in shared:
        opened = open_store(url, task_ttl=task_ttl, limits=limits)
        if opened.process_local:  # never kept here: the next agent opens its own
            return opened, opened.close
        shared[key] = [opened, 0]
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
