"""The agent card as served: interfaces filled in, validated, cached with an ETag."""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from typing import Dict, List, Tuple

from .codec import encode
from .models import AgentCard, AgentInterface

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


@dataclass(frozen=True)
class RenderedCard:
    body: bytes
    etag: str


class CardRenderer:
    """Renders the card for a base URL once and remembers the result."""

    def __init__(self, card: AgentCard, endpoints: List[Endpoint]) -> None:
        self.card = card
        self.endpoints = endpoints
        self._cache: Dict[str, RenderedCard] = {}

    def interfaces(self, base_url: str) -> List[AgentInterface]:
        if self.card.supported_interfaces:
            return self.card.supported_interfaces
        return [AgentInterface(url=base_url + path, protocol_binding=binding,
                               protocol_version=version)
                for binding, version, path in self.endpoints]

    def render(self, base_url: str) -> RenderedCard:
        """The card for clients reaching the agent at ``base_url`` (scheme, host, prefix)."""
        rendered = self._cache.get(base_url)
        if rendered is None:
            card = dataclasses.replace(self.card, supported_interfaces=self.interfaces(base_url))
            body = json.dumps(encode(card), separators=(",", ":"), sort_keys=False).encode()
            rendered = RenderedCard(body, '"%s"' % hashlib.sha256(body).hexdigest()[:32])
            if len(self._cache) < 64:  # bounded: Host headers come from clients
                self._cache[base_url] = rendered
        return rendered
