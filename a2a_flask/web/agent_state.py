"""What ``init_app`` built for one agent in one app, and its card's responses."""
from __future__ import annotations

from email.utils import formatdate
from typing import Callable, FrozenSet

from flask import Response, request

from . import routes
from .auth import Authentication
from .card_origin import CardOrigin, Source, card_origin
from ..config import Settings
from ..engine.service import AgentService
from ..protocol.cards import CardRenderer
from ..protocol.errors import A2AError
from ..stores import TaskStore


def origin_of(settings: Settings, renderer: CardRenderer) -> CardOrigin:
    """Where the current request's card of an agent points (see :class:`AgentState`)."""
    return card_origin(settings.public_url, settings.url_prefix,
                       declared=bool(renderer.card.supported_interfaces))


class AgentState:
    """What ``init_app`` built for one agent in one app."""

    def __init__(self, name: str, settings: Settings, service: AgentService,
                 renderer: CardRenderer, auth: Authentication,
                 release_store: Callable[[], None], *, store_url: str = "",
                 arguments: FrozenSet[str] = frozenset()) -> None:
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
        self.arguments = arguments
        #: The URL of the store (``A2A(store=...)`` or ``A2A_STORE``); empty for a store
        #: object given to ``A2A(...)``.
        self.store_url = store_url

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
        return origin_of(self.settings, self.renderer)

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
