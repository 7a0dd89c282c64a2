"""Finding an agent's card, reading any generation of it, and picking an interface.

A base URL is tried at ``/.well-known/agent-card.json`` (0.3 and 1.0), then at
``/.well-known/agent.json`` (0.1 and 0.2); a URL that already names a ``.json``
document is fetched as it is.  A URL with a path (an endpoint such as
``http://host/a2a``) is also looked up at the host root, but the root card is
taken only if one of its interfaces lives at or under that path: otherwise
there is no agent at the URL (:class:`NoAgentError`).  Whatever its generation, the card is returned
as a 1.0 :class:`~a2a_flask.protocol.models.AgentCard` whose ``supported_interfaces``
list every interface it offers:

* 1.0: ``supportedInterfaces`` (``url``, ``protocolBinding``, ``protocolVersion``, ``tenant``);
* 0.3/0.2: ``url`` + ``preferredTransport``, then ``additionalInterfaces``, all
  at the card's ``protocolVersion``;
* 0.1: ``url`` (JSON-RPC), no ``protocolVersion``.

Interfaces this client speaks rank 1.0 (JSON-RPC or HTTP+JSON, in card order),
then 0.3 JSON-RPC, then 0.1 JSON-RPC.  ``prefer`` reorders or forces them.

A card may send the client to another origin than the URL it was asked for (a
card on the web site, the API on its own host; a client inside the network
reaching a card that names the public address): that is followed, because it
is legitimate, but where credentials would go along and no trusted signature
vouches for the card, :func:`warn_other_origin` says so in the log.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union
from urllib.parse import urljoin, urlsplit

import requests

from ..protocol import models as m
from ..protocol.errors import A2AException, A2AResponseError, NoAgentError
from .errors import from_http
from .stream import transport_error
from .wire import decode_model

WELL_KNOWN = ("/.well-known/agent-card.json", "/.well-known/agent.json")

JSONRPC, HTTP_JSON = "JSONRPC", "HTTP+JSON"
#: (binding, generation) pairs this client speaks, best first.
SPOKEN: Tuple[Tuple[str, str], ...] = ((JSONRPC, "1.0"), (HTTP_JSON, "1.0"), (JSONRPC, "0.3"),
                                       (JSONRPC, "0.1"))

_BINDING_NAMES = {"jsonrpc": JSONRPC, "json-rpc": JSONRPC, "rpc": JSONRPC,
                  "rest": HTTP_JSON, "http+json": HTTP_JSON, "http": HTTP_JSON,
                  "httpjson": HTTP_JSON, "grpc": "GRPC"}
_VERSION_TOKEN = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.\d+)?$")

Prefer = Union[str, Sequence[str], None]


def generation(version: str) -> str:
    """The wire generation of a protocol version: ``1.0``, ``0.3`` (0.2 reads alike) or ``0.1``."""
    match = _VERSION_TOKEN.match((version or "").strip())
    if not match:
        return version
    major, minor = int(match.group(1)), int(match.group(2) or 0)
    if major == 0 and minor in (2, 3):
        return "0.3"
    return f"{major}.{minor}"


def binding_name(name: str) -> str:
    """``rest`` -> ``HTTP+JSON``, ``jsonrpc`` -> ``JSONRPC``; other names upper-cased."""
    return _BINDING_NAMES.get(name.strip().lower(), name.strip().upper())


# ------------------------------------------------------------------ fetching


def card_urls(url: str) -> List[str]:
    """Where to look for the card of ``url``, in order."""
    if urlsplit(url).path.endswith(".json"):
        return [url]
    base = url.rstrip("/")
    urls = [base + path for path in WELL_KNOWN]
    parts = urlsplit(base)
    if parts.path not in ("", "/"):  # an agent mounted under a path: try the host root too
        root = f"{parts.scheme}://{parts.netloc}"
        urls += [root + path for path in WELL_KNOWN]
    return urls


def _serves(card: Dict[str, Any], card_url: str, url: str) -> bool:
    """Whether one of the card's interfaces lives at or under the path of ``url``."""
    path = urlsplit(url).path.rstrip("/")
    return any(urlsplit(iface.url).path.rstrip("/") == path
               or urlsplit(iface.url).path.startswith(path + "/")
               for iface in interfaces_of(card, card_url, fallback=True))


def fetch_card(url: str, *, session: requests.Session, headers: Optional[Dict[str, str]] = None,
               timeout: Any = (5, 60)) -> Tuple[Dict[str, Any], str]:
    """The card JSON for a base URL (or a card URL), and the URL it was found at.

    :raises NoAgentError: when no card is found for ``url``.
    """
    tried = []
    own = card_urls(url)[:len(WELL_KNOWN)]
    for candidate in card_urls(url):
        try:
            response = session.get(candidate, headers={"Accept": "application/json",
                                                       **(headers or {})}, timeout=timeout)
        except requests.RequestException as exc:
            raise transport_error(exc, candidate) from exc
        with response:
            if response.status_code in (404, 405, 410):
                tried.append(candidate)
                continue
            if response.status_code >= 400:
                error = from_http(response)
                error.message = f"{error.message} (fetching the agent card at {candidate})"
                error.args = (error.message,)
                raise error
            try:
                body = response.json()
            except ValueError:
                raise A2AResponseError(f"The agent card at {candidate} is not JSON",
                                       response=response) from None
            if not isinstance(body, dict):
                raise A2AResponseError(f"The agent card at {candidate} is not an object",
                                       response=response)
            if candidate not in own and not _serves(body, candidate, url):
                offered = ", ".join(sorted({i.url for i in interfaces_of(body, candidate)}))
                raise NoAgentError(f"No agent at {url}: the host's card at {candidate} is for "
                                   f"an agent at {offered or 'no URL'}", response=response)
            return body, response.url or candidate
    raise NoAgentError(f"No agent card found (HTTP 404) at {', '.join(tried)}: "
                       f"there is no agent at {url}")


# ------------------------------------------------------------------ reading


def card_generation(card: Dict[str, Any]) -> str:
    """``1.0`` for a card with ``supportedInterfaces``, else that of its ``protocolVersion``
    (``0.1`` when it has none: 0.1 cards did not say)."""
    if isinstance(card.get("supportedInterfaces"), list) and card["supportedInterfaces"]:
        return "1.0"
    version = card.get("protocolVersion")
    return generation(version) if isinstance(version, str) and version else "0.1"


def interfaces_of(card: Dict[str, Any], card_url: str = "", *, fallback: bool = False
                  ) -> List[m.AgentInterface]:
    """Every interface a card of any generation declares, URLs made absolute.

    With ``fallback``, a legacy top-level ``url`` served over JSON-RPC is also
    offered as a 0.1 interface (a union card's 0.3 endpoint often answers 0.1
    too): ranked last, so used only when asked for or when nothing else fits.
    """
    found: List[m.AgentInterface] = []

    def add(url: Any, binding: Any, version: Any, tenant: Any = "") -> None:
        if not isinstance(url, str) or not url:
            return
        iface = m.AgentInterface(url=urljoin(card_url, url) if card_url else url,
                                 protocol_binding=binding_name(binding or JSONRPC),
                                 protocol_version=str(version or ""),
                                 tenant=tenant if isinstance(tenant, str) else "")
        if not any(_same(iface, seen) for seen in found):
            found.append(iface)

    for entry in card.get("supportedInterfaces") or []:
        if isinstance(entry, dict):
            add(entry.get("url"), entry.get("protocolBinding"),
                entry.get("protocolVersion") or "1.0", entry.get("tenant", ""))
    legacy_version = card.get("protocolVersion") if isinstance(card.get("protocolVersion"), str) \
        else ""
    if not found:
        add(card.get("url"), card.get("preferredTransport"), legacy_version or "0.1")
        for entry in card.get("additionalInterfaces") or []:
            if isinstance(entry, dict):
                add(entry.get("url"), entry.get("transport"), legacy_version or "0.1")
    if fallback and binding_name(card.get("preferredTransport") or JSONRPC) == JSONRPC:
        add(card.get("url"), JSONRPC, "0.1")
    return found


def _same(a: m.AgentInterface, b: m.AgentInterface) -> bool:
    return (a.url.rstrip("/"), a.protocol_binding, generation(a.protocol_version), a.tenant) == \
        (b.url.rstrip("/"), b.protocol_binding, generation(b.protocol_version), b.tenant)


def read_card(card: Dict[str, Any], card_url: str = "") -> m.AgentCard:
    """A card of any generation as a 1.0 AgentCard listing all its interfaces."""
    interfaces = interfaces_of(card, card_url)
    if card_generation(card) == "1.0":
        model = decode_model(m.AgentCard, card, "agent card")
        model.supported_interfaces = interfaces
        return model
    return _legacy_card(card, interfaces)


def _strings(value: Any) -> List[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _legacy_card(card: Dict[str, Any], interfaces: List[m.AgentInterface]) -> m.AgentCard:
    caps: Any = card.get("capabilities") if isinstance(card.get("capabilities"), dict) else {}
    extensions = [m.AgentExtension(uri=e.get("uri", ""), description=e.get("description") or "",
                                   required=bool(e.get("required")), params=e.get("params"))
                  for e in caps.get("extensions") or [] if isinstance(e, dict)]
    skills = [m.AgentSkill(id=str(s.get("id", "")), name=str(s.get("name", "")),
                           description=str(s.get("description") or ""),
                           tags=_strings(s.get("tags")), examples=_strings(s.get("examples")),
                           input_modes=_strings(s.get("inputModes")),
                           output_modes=_strings(s.get("outputModes")))
              for s in card.get("skills") or [] if isinstance(s, dict)]
    provider = card.get("provider")
    requirements = [m.SecurityRequirement({name: m.StringList(_strings(scopes))
                                           for name, scopes in r.items()})
                    for r in card.get("security") or [] if isinstance(r, dict)]
    schemes = card.get("securitySchemes")
    return m.AgentCard(
        name=str(card.get("name", "")),
        description=str(card.get("description") or ""),
        version=str(card.get("version", "")),
        supported_interfaces=interfaces,
        capabilities=m.AgentCapabilities(
            streaming=caps.get("streaming") if isinstance(caps.get("streaming"), bool) else None,
            push_notifications=caps.get("pushNotifications")
            if isinstance(caps.get("pushNotifications"), bool) else None,
            extensions=extensions,
            extended_agent_card=bool(card.get("supportsAuthenticatedExtendedCard")),
        ),
        default_input_modes=_strings(card.get("defaultInputModes")) or ["text/plain"],
        default_output_modes=_strings(card.get("defaultOutputModes")) or ["text/plain"],
        skills=skills,
        provider=m.AgentProvider(url=str(provider.get("url", "")),
                                 organization=str(provider.get("organization", "")))
        if isinstance(provider, dict) else None,
        documentation_url=card.get("documentationUrl") or None,
        icon_url=card.get("iconUrl") or None,
        security_schemes=dict(schemes) if isinstance(schemes, dict) else {},
        security_requirements=requirements,
    )


# ------------------------------------------------------------------ origins

log = logging.getLogger("a2a_flask.client")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> str:
    """``scheme://host:port`` of a URL, the scheme's default port filled in."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # not a port: the origin is whatever the rest says
        port = None
    return f"{scheme}://{parts.hostname or ''}:{port or _DEFAULT_PORTS.get(scheme, '')}"


def warn_other_origin(asked: str, interface_url: str) -> bool:
    """Log a warning (and return True) when ``interface_url``, taken from an unsigned
    card, lies at another origin than ``asked``, the URL the caller gave with credentials."""
    if origin(asked) == origin(interface_url):
        return False
    # repr(): the card's text is the agent's choice, kept to one line in the log.
    log.warning("The agent card for %r sends this client to another origin, %r, with the "
                "token and headers given to connect(). Connect with that URL if it is the "
                "agent's, or pass card_keys= to accept only a card the agent signed.",
                origin(asked)[:300], origin(interface_url)[:300])
    return True


# ------------------------------------------------------------------ choosing


def speaks(iface: m.AgentInterface) -> bool:
    return (iface.protocol_binding, generation(iface.protocol_version)) in SPOKEN


def _rank(iface: m.AgentInterface) -> int:
    key = (iface.protocol_binding, generation(iface.protocol_version))
    return 0 if key[1] == "1.0" else SPOKEN.index(key)


def matches(preference: str, iface: m.AgentInterface) -> bool:
    """Whether an interface fits a preference such as ``rest``, ``0.3``, ``jsonrpc@0.1``."""
    tokens = [t for t in re.split(r"[\s@,;]+", preference.strip()) if t]
    for token in tokens:
        if _VERSION_TOKEN.match(token):
            if generation(token) != generation(iface.protocol_version):
                return False
        elif binding_name(token) != iface.protocol_binding:
            return False
    return bool(tokens)


def choose(interfaces: Sequence[m.AgentInterface], prefer: Prefer = None) -> m.AgentInterface:
    """The interface to use: the best one this client speaks, or the first that fits
    ``prefer`` (a string or a list of them, tried in order)."""
    usable = sorted((i for i in interfaces if speaks(i)), key=_rank)
    offered = ", ".join(f"{i.protocol_binding} {i.protocol_version} at {i.url}"
                        for i in interfaces) or "none"
    if prefer:
        for preference in [prefer] if isinstance(prefer, str) else list(prefer):
            for iface in usable:
                if matches(preference, iface):
                    return iface
        raise A2AException(f"No interface this client speaks matches prefer={prefer!r}; "
                           f"the agent offers: {offered}")
    if not usable:
        raise A2AException("The agent offers no interface this client speaks "
                           f"(JSON-RPC 1.0/0.3/0.1, HTTP+JSON 1.0); it offers: {offered}")
    return usable[0]


__all__ = ["fetch_card", "NoAgentError", "read_card", "interfaces_of", "choose", "generation", "binding_name",
           "card_generation", "matches", "speaks", "origin", "warn_other_origin", "JSONRPC",
           "HTTP_JSON"]
