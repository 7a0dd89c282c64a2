"""The agent card as served: interfaces filled in, validated, cached with an ETag."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import dataclass
from typing import Any, Dict, List, Tuple

from .codec import encode
from .models import AgentCard, AgentInterface, SecurityRequirement, StringList

#: ``(protocolBinding, protocolVersion, path under the agent's prefix)`` of each endpoint.
Endpoint = Tuple[str, str, str]


def check_card(card: AgentCard) -> None:
    """Refuse a card that would break clients, with a message saying what to fix."""
    missing = [name for name in ("name", "description", "version") if not getattr(card, name)]
    if missing:
        raise ValueError(f"AgentCard needs {', '.join(missing)}")
    if not card.skills:
        raise ValueError("AgentCard needs at least one AgentSkill (skills=[...])")
    for skill in card.skills:
        if not (skill.id and skill.name and skill.description and skill.tags):
            raise ValueError(f"AgentSkill {skill.id or skill.name!r} needs id, name, "
                             "description and at least one tag")
    if not card.default_input_modes or not card.default_output_modes:
        raise ValueError("AgentCard needs default_input_modes and default_output_modes")


def with_default_capabilities(card: AgentCard, has_extended_card: bool) -> AgentCard:
    """Fill capabilities left unset with what this library does: streaming on,
    push off, the extended card on only when one is configured."""
    caps = card.capabilities
    caps = dataclasses.replace(
        caps,
        streaming=True if caps.streaming is None else caps.streaming,
        push_notifications=False if caps.push_notifications is None else caps.push_notifications,
        extended_agent_card=(has_extended_card if caps.extended_agent_card is None
                             else caps.extended_agent_card),
    )
    return dataclasses.replace(card, capabilities=caps)


def with_security(card: AgentCard, auth: Any) -> AgentCard:
    """Declare the schemes of the ready-made authenticators (``BearerAuth``,
    ``APIKeyAuth``) on a card that declares none itself; any one of them will do."""
    schemes = auth.security_schemes()
    if not schemes or card.security_schemes:
        return card
    return dataclasses.replace(
        card, security_schemes=schemes,
        security_requirements=[SecurityRequirement({name: StringList()}) for name in schemes])


# 1.0 SecurityScheme wrapper member -> (0.3 ``type``, {1.0 member: 0.3 member}).
_SCHEME_TYPES = {
    "apiKeySecurityScheme": ("apiKey", {"location": "in", "name": "name"}),
    "httpAuthSecurityScheme": ("http", {"scheme": "scheme", "bearerFormat": "bearerFormat"}),
    "oauth2SecurityScheme": ("oauth2", {"flows": "flows", "oauth2MetadataUrl": "oauth2MetadataUrl"}),
    "openIdConnectSecurityScheme": ("openIdConnect", {"openIdConnectUrl": "openIdConnectUrl"}),
    "mtlsSecurityScheme": ("mutualTLS", {}),
}


def _scheme_v03(scheme: Dict[str, Any]) -> Dict[str, Any]:
    """A 1.0 SecurityScheme with the 0.3 (OpenAPI-style) members merged in."""
    for wrapper, (kind, members) in _SCHEME_TYPES.items():
        inner = scheme.get(wrapper)
        if isinstance(inner, dict):
            flat = {"type": kind, **{new: inner[old] for old, new in members.items() if old in inner}}
            if "description" in inner:
                flat["description"] = inner["description"]
            return {**scheme, **flat}
    return scheme


def union_card(card: Dict[str, Any]) -> Dict[str, Any]:
    """The 1.0 card JSON plus the members 0.3 and 0.1 clients read, when 0.3 is served.

    Every generation ignores the members it does not know, so one document
    serves them all (the 0.3 members come from the ``protocolVersion: "0.3"``
    interfaces; with none, the card is left as it is).
    """
    legacy = [i for i in card.get("supportedInterfaces", []) if i.get("protocolVersion") == "0.3"]
    if not legacy:
        return card
    out = dict(card)
    out["protocolVersion"] = "0.3.0"
    out["url"] = legacy[0]["url"]
    out["preferredTransport"] = legacy[0]["protocolBinding"]
    out["additionalInterfaces"] = [{"url": i["url"], "transport": i["protocolBinding"]}
                                   for i in legacy]
    out["supportsAuthenticatedExtendedCard"] = bool(
        card.get("capabilities", {}).get("extendedAgentCard"))
    schemes = card.get("securitySchemes")
    if schemes:
        out["securitySchemes"] = {name: _scheme_v03(s) for name, s in schemes.items()}
        # 0.1's AgentAuthentication names the schemes a client may use.
        out["authentication"] = {"schemes": sorted(
            {s.get("scheme", s.get("type", name)) for name, s in out["securitySchemes"].items()})}
    requirements = card.get("securityRequirements")
    if requirements:
        out["security"] = [{name: scopes.get("list", []) for name, scopes in r.get("schemes", {}).items()}
                           for r in requirements]
    return out


@dataclass(frozen=True)
class RenderedCard:
    body: bytes
    etag: str


class CardRenderer:
    """Renders the card for a base URL and remembers the last few results."""

    #: Rendered cards kept: each base URL is one entry, and the least recently served
    #: goes first, so Host headers chosen by clients cannot grow it.
    CACHE_SIZE = 32

    def __init__(self, card: AgentCard, endpoints: List[Endpoint], signer: Any = None,
                 legacy: bool = True) -> None:
        self.card = card
        self.endpoints = endpoints
        #: Add the 0.3/0.1 members (:func:`union_card`); False: the pure 1.0 card.
        self.legacy = legacy
        #: Signs the cards :meth:`render` is asked to sign
        #: (:class:`~a2a_flask.signing.cards.CardSigner`), or None.
        self.signer = signer
        self._cached = functools.lru_cache(maxsize=self.CACHE_SIZE)(self._render)

    def interfaces(self, base_url: str) -> List[AgentInterface]:
        if self.card.supported_interfaces:
            return self.card.supported_interfaces
        return [AgentInterface(url=base_url + path, protocol_binding=binding,
                               protocol_version=version)
                for binding, version, path in self.endpoints]

    def render(self, base_url: str, sign: bool) -> RenderedCard:
        """The card for clients reaching the agent at ``base_url`` (scheme, host, prefix);
        signed when ``sign`` and there is a signer (the URLs are part of what is signed,
        so only a base URL the operator configured may be)."""
        return self._cached(base_url, sign and self.signer is not None)

    def cached(self) -> int:
        """How many rendered cards are kept now."""
        return self._cached.cache_info().currsize

    def _render(self, base_url: str, sign: bool) -> RenderedCard:
        card = dataclasses.replace(self.card, supported_interfaces=self.interfaces(base_url))
        served = encode(card)
        if self.legacy:
            served = union_card(served)
        if sign:
            served = self.signer.signed(served)
        body = json.dumps(served, separators=(",", ":")).encode()
        return RenderedCard(body, '"%s"' % hashlib.sha256(body).hexdigest()[:32])
