"""The SSRF guard: which webhook URLs a push notification may be sent to.

A client chooses the webhook URL, so without a guard an agent would POST to
whatever the client names: its own admin port, a database on the private
network, the cloud metadata service.  The policy here fails closed:

* ``http`` and ``https`` only, a host is required, no userinfo (``a@b`` is a
  classic way to make two URL parsers disagree on the host), a valid port,
  no ambiguous numeric hosts (``2130706433``, ``0x7f.1``, ``127.1``);
* the name is resolved and **every** address must be public: loopback,
  private, link-local, shared (CGNAT), multicast, reserved, documentation and
  the IPv6 forms that embed a non-public IPv4 address are all refused;
* cloud metadata endpoints are refused by name and by address, even when
  private addresses are allowed.

:class:`WebhookPolicy.check` returns a :class:`Destination` whose
``addresses`` are the vetted IPs; the transport connects to those and never
resolves the name again, so DNS rebinding between the check and the
connection cannot redirect a push.  Call ``check`` at registration (to
answer the client early) and again at send time.

Operators relax the address rule with ``A2A_PUSH_ALLOWED_HOSTS`` (exact
names, ``*.example.com``, IP addresses or CIDR networks) or, for
development only, ``A2A_PUSH_ALLOW_PRIVATE``.
"""
from __future__ import annotations

import ipaddress
import re
import socket
from dataclasses import dataclass, field
from typing import (Any, Callable, Dict, FrozenSet, Iterable, List, Mapping, Optional, Tuple,
                    Union)
from urllib.parse import urlsplit

from ..config import config_key, field_types, read_value

Address = Union[ipaddress.IPv4Address, ipaddress.IPv6Address]
Network = Union[ipaddress.IPv4Network, ipaddress.IPv6Network]
#: ``socket.getaddrinfo``-compatible: ``resolve(host, port, family, type)`` returns
#: ``[(family, type, proto, canonname, sockaddr), ...]`` with the address in ``sockaddr[0]``.
Resolver = Callable[..., Iterable[Tuple[Any, ...]]]

ALLOWED_SCHEMES = {"http": 80, "https": 443}
MAX_URL_LENGTH = 2048



def _relax_hint(entry: str) -> str:
    return (f"if this receiver is trusted, add {entry!r} to A2A_PUSH_ALLOWED_HOSTS "
            "(A2A_PUSH_ALLOW_PRIVATE=True lifts the rule for every host, in development only)")


class UnsafeWebhookError(ValueError):
    """A webhook URL the policy refuses; ``str(err)`` is a message a client can act on."""


@dataclass(frozen=True)
class Destination:
    """A webhook URL that passed the policy, with the addresses to connect to."""

    #: The URL normalised: lower-case scheme and host, no fragment, default port dropped.
    url: str
    #: ``"http"`` or ``"https"``.
    scheme: str
    #: The host as it goes in ``Host`` and SNI: IDNA-encoded, lower case, no brackets.
    host: str
    port: int
    #: Vetted IP addresses, in resolver order without duplicates; connect to these only.
    addresses: Tuple[str, ...]


# ---------------------------------------------------------------- addresses

def _nets(*specs: str) -> Tuple[Network, ...]:
    return tuple(ipaddress.ip_network(s) for s in specs)


# Ordered: the first match names the kind of address in the refusal message.
_V4_RANGES: Tuple[Tuple[Tuple[Network, ...], str], ...] = (
    (_nets("0.0.0.0/8"), "an unspecified ('this network') address"),
    (_nets("127.0.0.0/8"), "a loopback address"),
    (_nets("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"), "a private (RFC 1918) address"),
    (_nets("100.64.0.0/10"), "a shared (carrier-grade NAT) address"),
    (_nets("169.254.0.0/16"), "a link-local address"),
    (_nets("192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"), "a documentation address"),
    (_nets("198.18.0.0/15"), "a benchmarking address"),
    (_nets("192.0.0.0/24"), "an IETF protocol assignment address"),
    (_nets("192.88.99.0/24"), "a 6to4 relay anycast address"),
    (_nets("224.0.0.0/4"), "a multicast address"),
    (_nets("255.255.255.255/32"), "the broadcast address"),
    (_nets("240.0.0.0/4"), "a reserved address"),
)
_V6_RANGES: Tuple[Tuple[Tuple[Network, ...], str], ...] = (
    (_nets("::/128"), "the unspecified address"),
    (_nets("::1/128"), "a loopback address"),
    (_nets("64:ff9b:1::/48"), "a local-use NAT64 address"),
    (_nets("::/96"), "a deprecated IPv4-compatible IPv6 address"),
    (_nets("100::/64"), "a discard-only address"),
    (_nets("2001::/32"), "a Teredo address"),
    (_nets("2001:db8::/32", "3fff::/20"), "a documentation address"),
    (_nets("2001:2::/48"), "a benchmarking address"),
    (_nets("2001:10::/28", "2001:20::/28"), "an ORCHID address"),
    (_nets("fc00::/7"), "a private (unique local) address"),
    (_nets("fe80::/10"), "a link-local address"),
    (_nets("fec0::/10"), "a site-local address"),
    (_nets("ff00::/8"), "a multicast address"),
)
_V6_GLOBAL_UNICAST = ipaddress.ip_network("2000::/3")
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_V4_MAPPED = ipaddress.ip_network("::ffff:0:0/96")

#: Cloud instance metadata services (AWS, ECS, GCP, Alibaba, Oracle): never a
#: webhook, and a push there could act with the agent host's credentials.
METADATA_ADDRESSES: FrozenSet[Address] = frozenset(ipaddress.ip_address(a) for a in (
    "169.254.169.254", "169.254.170.2", "169.254.169.253", "100.100.100.200",
    "192.0.0.192", "fd00:ec2::254", "fd00:ec2::23", "fd20:ce::254",
))
METADATA_HOSTNAMES: FrozenSet[str] = frozenset((
    "metadata", "metadata.google.internal", "metadata.goog",
    "instance-data", "instance-data.ec2.internal",
))


def _as_address(address: Union[str, Address]) -> Address:
    if isinstance(address, (ipaddress.IPv4Address, ipaddress.IPv6Address)):
        ip = address
    else:
        ip = ipaddress.ip_address(str(address).strip("[]"))
    if isinstance(ip, ipaddress.IPv6Address) and ip.scope_id:
        # A zone id picks an interface, it does not change which address is meant.
        ip = ipaddress.IPv6Address(int(ip))
    return ip


def _address_text(ip: Address) -> str:
    """An address as text, the same on every Python (3.13 writes an IPv4-mapped IPv6
    address as ``::ffff:1.2.3.4``, earlier versions as ``::ffff:102:304``)."""
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        value = int(ip.ipv4_mapped)
        return f"::ffff:{value >> 16:x}:{value & 0xFFFF:x}"
    return str(ip)


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> Optional[Tuple[ipaddress.IPv4Address, str]]:
    """The IPv4 address an IPv6 form stands for, if connecting to it reaches that IPv4 host."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped, "an IPv4-mapped IPv6 address"
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF), "a NAT64 address"
    if ip.sixtofour is not None:
        return ip.sixtofour, "a 6to4 address"
    return None


def _classify(ip: Address) -> Optional[str]:
    """None for a public address, else what it is (for the refusal message)."""
    if ip in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        if embedded is not None:
            inner, form = embedded
            kind = _classify(inner)
            return None if kind is None else f"{form} of {inner}, {kind}"
        table = _V6_RANGES
    else:
        table = _V4_RANGES
    for networks, kind in table:
        if any(ip in net for net in networks):
            return kind
    if isinstance(ip, ipaddress.IPv6Address) and ip not in _V6_GLOBAL_UNICAST:
        return "a reserved address"
    # Python's own flags as a second opinion (the registries grow): fail closed.
    if (not ip.is_global or ip.is_private or ip.is_loopback or ip.is_link_local
            or ip.is_multicast or ip.is_reserved or ip.is_unspecified):
        return "a non-public address"
    return None


def is_public_address(address: Union[str, Address]) -> bool:
    """True if ``address`` is a globally routable unicast address a webhook may use.

    IPv6 forms that reach an IPv4 host (IPv4-mapped, NAT64 ``64:ff9b::/96``,
    6to4) are judged by that IPv4 address; Teredo and the deprecated
    IPv4-compatible form are never public.  A string that is not an IP address
    is not public.
    """
    try:
        ip = _as_address(address)
    except ValueError:
        return False
    return _classify(ip) is None


def header_value_problem(value: str) -> str:
    """Why ``value`` cannot go out as an HTTP header value, or ``""`` if it can.

    A webhook's token and credentials are sent as headers.  ``requests`` and
    ``http.client`` refuse CR and LF (header injection) and a leading space,
    and cannot encode characters beyond Latin-1: a stored value like that would
    fail every delivery, so it is refused when the webhook is registered.  Any
    control character is refused, not only the ones today's libraries reject.
    """
    for char in value:
        code = ord(char)
        if code < 0x20 or 0x7F <= code < 0xA0:
            return f"contains a control character (U+{code:04X})"
        if code > 0xFF:
            return f"contains U+{code:04X}; HTTP header values carry Latin-1 characters only"
    if value.startswith(" "):
        return "starts with a space"
    return ""


def _is_metadata(ip: Address) -> bool:
    if ip in METADATA_ADDRESSES:
        return True
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = _embedded_ipv4(ip)
        return embedded is not None and embedded[0] in METADATA_ADDRESSES
    return False


# --------------------------------------------------------------------- URLs

_LABEL = re.compile(r"^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$")
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")
_PORT = re.compile(r"^[0-9]{1,5}$")


@dataclass(frozen=True)
class _Parsed:
    scheme: str
    host: str
    port: int
    url: str
    ip: Optional[Address]


def _refuse(message: str) -> UnsafeWebhookError:
    return UnsafeWebhookError("webhook URL refused: " + message)


def _normalise_hostname(raw: str, what: str = "host") -> str:
    """Lower-case, IDNA-encoded, no trailing dot; UnsafeWebhookError if not a DNS name."""
    name = raw.lower()
    if not name.isascii():
        try:
            name = name.encode("idna").decode("ascii")
        except UnicodeError:
            raise _refuse(f"{what} {raw!r} is not a valid internationalised domain name") from None
    name = name[:-1] if name.endswith(".") else name
    labels = name.split(".")
    if not name or len(name) > 253 or not all(_LABEL.match(label) for label in labels):
        raise _refuse(f"{what} {raw!r} is not a valid host name")
    if _NUMERIC_LABEL.match(labels[-1]):
        # A name ending in a number is an IPv4 address to URL parsers and to
        # inet_aton ("127.1", "2130706433", "0x7f.1", "0177.0.0.1"); parsers
        # disagree on the odd forms, so only dotted decimal is accepted.
        raise _refuse(f"host {raw!r} is an ambiguous numeric address; write IPv4 addresses "
                      "in dotted-decimal form (e.g. 93.184.216.34)")
    return name


def _parse(url: str) -> _Parsed:
    if not isinstance(url, str) or not url:
        raise _refuse("the URL is empty")
    if len(url) > MAX_URL_LENGTH:
        raise _refuse(f"the URL is longer than {MAX_URL_LENGTH} characters")
    if any(c <= " " or c == "\x7f" or c == "\\" or c.isspace() for c in url):
        raise _refuse("the URL contains whitespace, control characters or backslashes")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise _refuse(f"the URL does not parse ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in ALLOWED_SCHEMES:
        shown = f"scheme {scheme!r} is not allowed" if scheme else "the URL has no scheme"
        raise _refuse(f"{shown}; webhook URLs must be http:// or https://")
    netloc = parts.netloc
    if "@" in netloc:
        raise _refuse("credentials in the URL (user:password@host) are not allowed; "
                      "send them with the push configuration's authentication instead")
    if netloc.startswith("["):
        end = netloc.find("]")
        if end < 0:
            raise _refuse("unterminated IPv6 address in brackets")
        raw_host, rest = netloc[1:end], netloc[end + 1:]
        if "%" in raw_host:
            raise _refuse("IPv6 zone identifiers (fe80::1%eth0) are not allowed")
        try:
            ip: Optional[Address] = ipaddress.IPv6Address(raw_host)
        except ValueError:
            raise _refuse(f"[{raw_host}] is not a valid IPv6 address") from None
    else:
        raw_host, sep, port_text = netloc.partition(":")
        rest = sep + port_text
        ip = None
    if rest and not rest.startswith(":"):
        raise _refuse(f"unexpected {rest!r} after the host")
    if not raw_host:
        raise _refuse("the URL has no host")
    port = ALLOWED_SCHEMES[scheme]
    if rest:
        port_text = rest[1:]
        if not _PORT.match(port_text) or not 0 < int(port_text) < 65536:
            raise _refuse(f"port {port_text!r} is not a number from 1 to 65535")
        port = int(port_text)
    if ip is None:
        try:
            ip = ipaddress.IPv4Address(raw_host)
        except ValueError:
            ip = None
    if ip is not None:
        host = _address_text(ip)
        url_host = f"[{host}]" if ip.version == 6 else host
    else:
        host = url_host = _normalise_hostname(raw_host)
    normalised = f"{scheme}://{url_host}"
    if port != ALLOWED_SCHEMES[scheme]:
        normalised += f":{port}"
    normalised += (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Parsed(scheme, host, port, normalised, ip)


# ------------------------------------------------------------------ policy

def _split_entries(value: Union[str, Iterable[str], None]) -> Tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = re.split(r"[\s,]+", value)
    return tuple(str(v).strip() for v in value if str(v).strip())


@dataclass(frozen=True)
class WebhookPolicy:
    """Which webhook URLs pushes may go to; immutable and safe to share.

    :param allow_private: ``A2A_PUSH_ALLOW_PRIVATE``: lift the public-address
        rule for every host (development only).  Cloud metadata endpoints stay
        refused.
    :param allowed_hosts: ``A2A_PUSH_ALLOWED_HOSTS``: entries that skip the
        public-address rule: exact host names (``hooks.internal``), wildcards
        (``*.example.com`` matches any subdomain, not the apex), IP addresses
        or CIDR networks (``10.1.0.0/16``).  A name entry exempts every address
        the name resolves to, except cloud metadata addresses, which only an
        address or network entry can exempt.  A comma-separated string is
        accepted.  Entries never relax the scheme, userinfo or port rules.
    :param resolver: ``getaddrinfo``-compatible callable (tests inject one);
        ``None`` looks up :func:`socket.getaddrinfo` at call time, so a gevent
        patch applied after import is honoured.
    """

    allow_private: bool = False
    allowed_hosts: Tuple[str, ...] = ()
    resolver: Optional[Resolver] = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        entries = _split_entries(self.allowed_hosts)
        names: List[str] = []
        suffixes: List[str] = []
        networks: List[Network] = []
        for entry in entries:
            try:
                networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                continue
            except ValueError:
                pass
            try:
                if entry.startswith("*."):
                    suffixes.append("." + _normalise_hostname(entry[2:], "allowed host"))
                else:
                    names.append(_normalise_hostname(entry, "allowed host"))
            except UnsafeWebhookError:
                raise ValueError(f"A2A_PUSH_ALLOWED_HOSTS: {entry!r} is not a host name, "
                                 "'*.domain', IP address or CIDR network") from None
        object.__setattr__(self, "allowed_hosts", entries)
        object.__setattr__(self, "allow_private", bool(self.allow_private))
        object.__setattr__(self, "_names", frozenset(names))
        object.__setattr__(self, "_suffixes", tuple(suffixes))
        object.__setattr__(self, "_networks", tuple(networks))

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "WebhookPolicy":
        """Read ``A2A_PUSH_ALLOW_PRIVATE`` and ``A2A_PUSH_ALLOWED_HOSTS`` from a Flask config."""
        # The same typed reader as init_app: "off" from the environment means False.
        types = field_types()
        values: Dict[str, Any] = {}
        for argument, name in (("allow_private", "push_allow_private"),
                               ("allowed_hosts", "push_allowed_hosts")):
            if config_key(name) in config:
                values[argument] = read_value(config_key(name), types[name],
                                              config[config_key(name)])
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    # -- matching

    def _host_exempt(self, host: str) -> bool:
        names: FrozenSet[str] = getattr(self, "_names")
        suffixes: Tuple[str, ...] = getattr(self, "_suffixes")
        return host in names or any(host.endswith(s) for s in suffixes)

    def _address_exempt(self, ip: Address) -> bool:
        candidates = [ip]
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            candidates.append(ip.ipv4_mapped)
        networks: Tuple[Network, ...] = getattr(self, "_networks")
        return any(c in net for c in candidates for net in networks)

    def _vet_address(self, parsed: _Parsed, ip: Address) -> None:
        kind = _classify(ip)
        if kind is None or self._address_exempt(ip):
            return
        where = (f"{parsed.host} is {kind}" if parsed.ip is not None
                 else f"{parsed.host} resolves to {ip}, {kind}")
        if _is_metadata(ip):
            raise _refuse(f"{where}; it stays refused with "
                          "A2A_PUSH_ALLOW_PRIVATE, only an explicit address entry in "
                          "A2A_PUSH_ALLOWED_HOSTS allows it")
        if self.allow_private or (parsed.ip is None and self._host_exempt(parsed.host)):
            return
        raise _refuse(f"{where}; pushes go only to public addresses; {_relax_hint(parsed.host)}")

    def _vet_name(self, parsed: _Parsed) -> None:
        host = parsed.host
        if host in METADATA_HOSTNAMES and not self._host_exempt(host):
            raise _refuse(f"{host} is a cloud metadata service name; only an explicit "
                          "entry in A2A_PUSH_ALLOWED_HOSTS allows it")
        if (host == "localhost" or host.endswith(".localhost")) and not (
                self.allow_private or self._host_exempt(host)):
            raise _refuse(f"{host} is a loopback name; pushes go only to public addresses; "
                          f"{_relax_hint(host)}")

    # -- the checks

    def check_syntax(self, url: str) -> None:
        """Every rule that needs no DNS: scheme, host, userinfo, port, literal
        addresses and refused names.  Raises :class:`UnsafeWebhookError`."""
        parsed = _parse(url)
        if parsed.ip is not None:
            self._vet_address(parsed, parsed.ip)
        else:
            self._vet_name(parsed)

    def check(self, url: str, resolve: Optional[Resolver] = None) -> Destination:
        """Check ``url`` fully, resolving its host; every address must pass.

        :param resolve: overrides the policy's resolver for this call.
        :returns: the :class:`Destination` to connect to (its addresses only).
        :raises UnsafeWebhookError: the URL is refused, or its host does not resolve.
        """
        parsed = _parse(url)
        if parsed.ip is not None:
            self._vet_address(parsed, parsed.ip)
            addresses: Tuple[Address, ...] = (parsed.ip,)
        else:
            self._vet_name(parsed)
            addresses = self._resolve(parsed, resolve or self.resolver or socket.getaddrinfo)
            for ip in addresses:
                self._vet_address(parsed, ip)
        return Destination(url=parsed.url, scheme=parsed.scheme, host=parsed.host,
                           port=parsed.port,
                           addresses=tuple(_address_text(ip) for ip in addresses))

    def check_registration(self, url: str) -> None:
        """The check when a webhook is registered: :meth:`check`, except that a host
        named in ``allowed_hosts`` is trusted by name without a DNS lookup (so an
        operator's internal name need not resolve from here yet); every send still
        runs the full :meth:`check`."""
        parsed = _parse(url)
        if parsed.ip is None and self._host_exempt(parsed.host):
            self._vet_name(parsed)
        else:
            self.check(url)

    @staticmethod
    def _resolve(parsed: _Parsed, resolve: Resolver) -> Tuple[Address, ...]:
        try:
            infos = list(resolve(parsed.host, parsed.port, 0, socket.SOCK_STREAM))
        except Exception as exc:  # noqa: BLE001 - any resolver failure fails closed
            reason = exc.args[-1] if isinstance(exc, OSError) and exc.args else exc
            raise _refuse(f"host {parsed.host} could not be resolved ({reason})") from None
        found: List[Address] = []
        for info in infos:
            try:
                ip = _as_address(info[4][0])
            except (ValueError, TypeError, IndexError):
                raise _refuse(f"host {parsed.host} resolved to something that is not "
                              f"an IP address: {info!r}") from None
            if ip not in found:
                found.append(ip)
        if not found:
            raise _refuse(f"host {parsed.host} resolved to no address")
        return tuple(found)
