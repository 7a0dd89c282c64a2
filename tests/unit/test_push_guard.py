"""The webhook SSRF guard (a2a_flask.push.guard) and the pinned transport
(a2a_flask.push.transport), against real loopback HTTP and HTTPS servers.

Names that must not depend on this machine's DNS go through a fake resolver;
the ``.test`` names it answers for do not resolve anywhere else (RFC 6761), so
a request that reaches a server for one of them proves the transport used
the vetted address instead of resolving again.
"""
from __future__ import annotations

import contextlib
import datetime
import pathlib
import socket
import ssl
import subprocess
import sys
import textwrap
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

import pytest
import requests

from a2a_flask.push.guard import (
    Destination,
    UnsafeWebhookError,
    WebhookPolicy,
    is_public_address,
)
from a2a_flask.push.transport import WebhookDeliveryError, WebhookResponse, WebhookTransport

from tests.conftest import require

pytestmark = [pytest.mark.timeout(30), pytest.mark.declare(server=["test_concurrent_posts_under_gevent"])]

PUBLIC_V4 = "93.184.216.34"
PUBLIC_V6 = "2606:2800:220:1:248:1893:25c8:1946"


# ------------------------------------------------------------------ helpers


def fake_dns(table: Dict[str, Sequence[str]]) -> Callable[..., List[Tuple[Any, ...]]]:
    """A getaddrinfo stand-in answering from ``table``; unknown names fail like NXDOMAIN.

    The hosts it was asked about are in ``resolve.calls``.
    """
    calls: List[str] = []

    def resolve(host: str, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                flags: int = 0) -> List[Tuple[Any, ...]]:
        calls.append(host)
        if host not in table:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (a, port, 0, 0)) if ":" in a
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in table[host]
        ]

    resolve.calls = calls  # type: ignore[attr-defined]
    return resolve


def no_dns(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"DNS must not be consulted here: {args!r}")


DNS = {
    "public.test": [PUBLIC_V4],
    "v6.test": [PUBLIC_V6],
    "dual.test": [PUBLIC_V4, PUBLIC_V6, PUBLIC_V4],
    "xn--bcher-kva.test": [PUBLIC_V4],
    "mixed.test": [PUBLIC_V4, "10.0.0.5"],
    "mixed6.test": [PUBLIC_V6, "::1"],
    "loopback.test": ["127.0.0.1"],
    "localtest.me": ["127.0.0.1"],
    "metadata-alias.test": ["169.254.169.254"],
    "169.254.169.254.nip.io": ["169.254.169.254"],
    "ula.test": ["fd12:3456:789a::1"],
    "mapped.test": ["::ffff:10.0.0.1"],
    "scoped.test": ["fe80::1%eth0"],
    "empty.test": [],
    "metadata.google.internal": ["169.254.169.254"],
    "hooks.internal": ["10.1.2.3"],
    "other.internal": ["10.1.2.4"],
    "sub.hooks.internal": ["10.1.2.5"],
    "a.corp.test": ["10.9.0.1"],
    "a.b.corp.test": ["10.9.0.2"],
    "corp.test": ["10.9.0.3"],
    "evilcorp.test": ["10.9.0.4"],
    "in-net.test": ["10.1.2.3"],
    "half-in-net.test": ["10.1.2.3", "127.0.0.2"],
    "localhost": ["127.0.0.1"],
}


def policy(**kwargs: Any) -> WebhookPolicy:
    kwargs.setdefault("resolver", fake_dns(DNS))
    return WebhookPolicy(**kwargs)


# ------------------------------------------------------------- SSRF table

REFUSED = [
    # loopback, by address and by name
    "http://127.0.0.1/",
    "http://127.0.0.1:8080/hook",
    "http://127.255.255.254/",
    "http://[::1]/",
    "http://[0:0:0:0:0:0:0:1]:80/",
    "http://localhost/",
    "http://LOCALHOST:5000/",
    "http://api.localhost/",
    "http://\u24dbocalhost/",  # circled l: IDNA maps it to "localhost"
    "http://loopback.test/",
    "http://localtest.me/",
    # one bad address among good ones is enough
    "http://mixed.test/",
    "http://mixed6.test/",
    # private ranges
    "http://10.0.0.1/",
    "http://172.16.0.1/",
    "http://172.31.255.255/",
    "http://192.168.1.1/",
    "http://[fd00::1]/",
    "http://ula.test/",
    "http://[::ffff:10.0.0.1]/",
    "http://mapped.test/",
    # cloud metadata, by address and by name
    "http://169.254.169.254/latest/meta-data/",
    "http://169.254.170.2/v2/credentials",
    "http://[fd00:ec2::254]/",
    "http://100.100.100.200/latest/meta-data/",
    "http://192.0.0.192/",
    "http://metadata.google.internal/computeMetadata/v1/",
    "http://metadata/",
    "http://instance-data/",
    "http://metadata-alias.test/",
    "http://169.254.169.254.nip.io/",
    # link-local, CGNAT, multicast, broadcast, unspecified, reserved, documentation
    "http://169.254.1.1/",
    "http://[fe80::1]/",
    "http://scoped.test/",
    "http://100.64.0.1/",
    "http://100.127.255.254/",
    "http://224.0.0.1/",
    "http://239.255.255.250:1900/",
    "http://[ff02::1]/",
    "http://255.255.255.255/",
    "http://0.0.0.0/",
    "http://0.0.0.0:8000/",
    "http://[::]/",
    "http://240.0.0.1/",
    "http://192.0.2.1/",
    "http://198.18.0.1/",
    "http://[2001:db8::1]/",
    # IPv6 forms embedding a non-public IPv4 address, and Teredo
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::ffff:169.254.169.254]/",
    "http://[2002:7f00:1::]/",
    "http://[2002:a9fe:a9fe::1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b::a00:1]/",
    "http://[::127.0.0.1]/",
    "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/",
    # decimal, hex, octal and short IPv4 forms
    "http://2130706433/",
    "http://0x7f000001/",
    "http://0x7f.1/",
    "http://0177.0.0.1/",
    "http://017700000001/",
    "http://127.1/",
    "http://127.0.1/",
    "http://3232235521/",
    # userinfo and parser confusion
    "http://127.0.0.1:80@example.com/",
    "http://example.com@127.0.0.1/",
    "http://user:pass@public.test/",
    "http://public.test\\@127.0.0.1/",
    "http://public.test /",
    "http://public.test\t/",
    "http://public.test\u00a0/",
    "http://127\u30020\u30020\u30021/",  # ideographic full stops
    "http://\uff11\uff12\uff17.0.0.1/",  # full-width digits
    # other schemes
    "file:///etc/passwd",
    "gopher://127.0.0.1:6379/_INFO",
    "ftp://public.test/",
    "javascript:alert(1)",
    "dict://127.0.0.1:11211/stat",
    "ws://public.test/",
    "//public.test/",
    # missing host, bad ports, zone ids
    "",
    "http:///path",
    "http://:80/",
    "http:public.test",
    "http://public.test:99999/",
    "http://public.test:0/",
    "http://public.test:abc/",
    "http://public.test:/",
    "http://public.test:+80/",
    "http://[fe80::1%25eth0]/",
    "http://[::1/",
    "http://[public.test]/",
    # unresolvable names fail closed
    "http://nonexistent.test/",
    "http://empty.test/",
]


def test_the_table_is_big_enough() -> None:
    assert len(REFUSED) >= 40 and len(set(REFUSED)) == len(REFUSED)


@pytest.mark.parametrize("url", REFUSED)
def test_ssrf_attempt_is_refused(url: str) -> None:
    with pytest.raises(UnsafeWebhookError) as info:
        policy().check(url)
    assert str(info.value).startswith("webhook URL refused: ")


@pytest.mark.parametrize("url", [
    "http://2130706433/", "http://0x7f.1/", "http://0177.0.0.1/", "http://127.1/",
    "http://localhost/",
])
def test_numeric_forms_are_refused_with_the_system_resolver(url: str) -> None:
    # No fake resolver: these are decided before (and whatever) getaddrinfo answers.
    with pytest.raises(UnsafeWebhookError):
        WebhookPolicy().check(url)


@pytest.mark.parametrize("url, words", [
    ("http://127.0.0.1/", ["loopback", "A2A_PUSH_ALLOWED_HOSTS", "A2A_PUSH_ALLOW_PRIVATE"]),
    ("http://mixed.test/", ["mixed.test resolves to 10.0.0.5", "private", "'mixed.test'"]),
    ("http://[::ffff:7f00:1]/", ["IPv4-mapped", "127.0.0.1", "loopback"]),
    ("http://[64:ff9b::7f00:1]/", ["NAT64", "127.0.0.1"]),
    ("http://100.64.0.1/", ["carrier-grade NAT"]),
    ("http://169.254.169.254/", ["metadata", "A2A_PUSH_ALLOWED_HOSTS"]),
    ("http://a:b@public.test/", ["credentials"]),
    ("gopher://public.test/", ["'gopher'", "http:// or https://"]),
    ("//public.test/", ["no scheme"]),
    ("http://nonexistent.test/", ["could not be resolved", "nonexistent.test"]),
    ("http://public.test:70000/", ["port", "1 to 65535"]),
    ("http://0x7f.1/", ["numeric", "dotted-decimal"]),
    ("http://[fe80::1%25eth0]/", ["zone"]),
])
def test_refusals_say_what_and_how_to_relax(url: str, words: List[str]) -> None:
    with pytest.raises(UnsafeWebhookError) as info:
        policy().check(url)
    for word in words:
        assert word in str(info.value)


def test_scheme_and_userinfo_refusals_do_not_suggest_the_allowlist() -> None:
    for url in ("file:///etc/passwd", "http://u@public.test/"):
        with pytest.raises(UnsafeWebhookError) as info:
            policy().check(url)
        assert "A2A_PUSH" not in str(info.value)


def test_any_resolver_failure_fails_closed() -> None:
    def broken(*args: Any) -> Any:
        raise RuntimeError("resolver crashed")

    def garbage(*args: Any) -> Any:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("not-an-ip", 80))]

    for resolver in (broken, garbage):
        with pytest.raises(UnsafeWebhookError, match="public.test"):
            WebhookPolicy(resolver=resolver).check("http://public.test/")


# ------------------------------------------------------------- passing URLs


@pytest.mark.parametrize("url, host, port, addresses", [
    ("https://public.test/hook", "public.test", 443, (PUBLIC_V4,)),
    ("http://v6.test:8080/x", "v6.test", 8080, (PUBLIC_V6,)),
    ("https://dual.test/", "dual.test", 443, (PUBLIC_V4, PUBLIC_V6)),
    (f"https://{PUBLIC_V4}/", PUBLIC_V4, 443, (PUBLIC_V4,)),
    (f"https://[{PUBLIC_V6}]:8443/", PUBLIC_V6, 8443, (PUBLIC_V6,)),
    ("http://[::ffff:93.184.216.34]/", "::ffff:5db8:d822", 80, ("::ffff:5db8:d822",)),
    ("http://[64:ff9b::5db8:d822]/", "64:ff9b::5db8:d822", 80, ("64:ff9b::5db8:d822",)),
    ("https://b\u00fccher.test/", "xn--bcher-kva.test", 443, (PUBLIC_V4,)),
    ("HTTPS://Public.TEST.:443/a/b?c=1&d=2#frag", "public.test", 443, (PUBLIC_V4,)),
])
def test_public_destinations_pass(url: str, host: str, port: int,
                                  addresses: Tuple[str, ...]) -> None:
    destination = policy().check(url)
    assert isinstance(destination, Destination)
    assert (destination.host, destination.port, destination.addresses) == (host, port, addresses)
    assert destination.scheme == url.split(":")[0].lower()


def test_destination_url_is_normalised() -> None:
    destination = policy().check("HTTPS://Public.TEST.:443/a/b?c=1&d=2#frag")
    assert destination.url == "https://public.test/a/b?c=1&d=2"
    assert policy().check("http://public.test").url == "http://public.test/"
    assert policy().check("http://public.test:8080/").url == "http://public.test:8080/"
    assert policy().check(f"http://[{PUBLIC_V6}]:81/").url == f"http://[{PUBLIC_V6}]:81/"


def test_literal_addresses_need_no_dns() -> None:
    destination = WebhookPolicy(resolver=no_dns).check(f"https://{PUBLIC_V4}:8443/p")
    assert destination.addresses == (PUBLIC_V4,)


def test_check_syntax_uses_no_dns() -> None:
    strict = WebhookPolicy(resolver=no_dns)
    strict.check_syntax("https://public.test/hook")
    strict.check_syntax("https://anything-at-all.example/hook")
    for url in ("http://127.0.0.1/", "http://localhost/", "http://metadata.google.internal/",
                "http://u:p@public.test/", "ftp://public.test/", "http://public.test:0/",
                "http://0x7f.1/"):
        with pytest.raises(UnsafeWebhookError):
            strict.check_syntax(url)


def test_a_policy_resolver_can_be_overridden_per_call() -> None:
    assert policy(resolver=no_dns).check(
        "https://public.test/", resolve=fake_dns(DNS)).addresses == (PUBLIC_V4,)


# ------------------------------------------------------------- relaxations


def test_allow_private_lets_loopback_and_private_pass() -> None:
    dev = policy(allow_private=True)
    assert dev.check("http://127.0.0.1:8080/").addresses == ("127.0.0.1",)
    assert dev.check("http://localhost:5000/").addresses == ("127.0.0.1",)
    assert dev.check("http://[::1]/").addresses == ("::1",)
    assert dev.check("http://mixed.test/").addresses == (PUBLIC_V4, "10.0.0.5")


def test_allow_private_never_allows_metadata_schemes_or_userinfo() -> None:
    dev = policy(allow_private=True)
    for url in ("http://169.254.169.254/", "http://metadata.google.internal/",
                "http://metadata-alias.test/", "http://[::ffff:169.254.169.254]/",
                "file:///etc/passwd", "gopher://127.0.0.1/", "http://u:p@127.0.0.1/",
                "http://example.com@127.0.0.1/", "http://127.0.0.1:0/"):
        with pytest.raises(UnsafeWebhookError):
            dev.check(url)


def test_allowed_hosts_exact_name() -> None:
    allowed = policy(allowed_hosts=("Hooks.Internal.",))
    assert allowed.allowed_hosts == ("Hooks.Internal.",)
    assert allowed.check("http://hooks.internal:9000/").addresses == ("10.1.2.3",)
    for url in ("http://other.internal/", "http://sub.hooks.internal/", "http://10.1.2.3/"):
        with pytest.raises(UnsafeWebhookError):
            allowed.check(url)


def test_allowed_hosts_wildcard_matches_subdomains_only() -> None:
    allowed = policy(allowed_hosts=("*.corp.test",))
    assert allowed.check("http://a.corp.test/").addresses == ("10.9.0.1",)
    assert allowed.check("http://a.b.corp.test/").addresses == ("10.9.0.2",)
    for url in ("http://corp.test/", "http://evilcorp.test/", "http://hooks.internal/"):
        with pytest.raises(UnsafeWebhookError):
            allowed.check(url)


def test_allowed_hosts_cidr_and_address_exempt_only_what_they_match() -> None:
    allowed = policy(allowed_hosts=("10.1.0.0/16", "127.0.0.1", "[::1]"))
    assert allowed.check("http://10.1.2.3/").addresses == ("10.1.2.3",)
    assert allowed.check("http://in-net.test/").addresses == ("10.1.2.3",)
    assert allowed.check("http://[::ffff:10.1.2.3]/").addresses == ("::ffff:a01:203",)
    assert allowed.check("http://127.0.0.1:9/").addresses == ("127.0.0.1",)
    assert allowed.check("http://[::1]:9/").addresses == ("::1",)
    for url in ("http://10.2.0.1/", "http://127.0.0.2/", "http://half-in-net.test/",
                "http://localhost/", "http://192.168.0.1/"):
        with pytest.raises(UnsafeWebhookError):
            allowed.check(url)


def test_metadata_needs_an_explicit_address_entry() -> None:
    with pytest.raises(UnsafeWebhookError, match="metadata"):
        policy(allowed_hosts=("*.internal",)).check("http://metadata.google.internal/")
    with pytest.raises(UnsafeWebhookError, match="metadata"):
        policy(allowed_hosts=("metadata-alias.test",)).check("http://metadata-alias.test/")
    explicit = policy(allowed_hosts=("metadata.google.internal", "169.254.169.254"))
    assert explicit.check("http://metadata.google.internal/").addresses == ("169.254.169.254",)


def test_allowlists_never_allow_other_schemes_or_userinfo() -> None:
    lax = policy(allow_private=True, allowed_hosts=("127.0.0.1", "public.test", "0.0.0.0/0"))
    for url in ("file:///etc/passwd", "file://127.0.0.1/etc/passwd", "gopher://127.0.0.1/",
                "ftp://public.test/", "http://user@public.test/", "http://public.test@127.0.0.1/",
                "http://127.0.0.1:80@public.test/", "javascript:alert(1)"):
        with pytest.raises(UnsafeWebhookError):
            lax.check(url)


def test_allowed_hosts_accepts_a_config_string_and_rejects_bad_entries() -> None:
    entries: Any = "hooks.internal, *.corp.test 10.1.0.0/16"
    allowed = policy(allowed_hosts=entries)
    assert allowed.allowed_hosts == ("hooks.internal", "*.corp.test", "10.1.0.0/16")
    assert allowed.check("http://a.corp.test/").addresses == ("10.9.0.1",)
    for bad in ("*", "http://x.test", "a b/c", "*.", "x..y"):
        with pytest.raises(ValueError, match="A2A_PUSH_ALLOWED_HOSTS"):
            WebhookPolicy(allowed_hosts=(bad,))


def test_from_config_reads_the_push_keys() -> None:
    config = {"A2A_PUSH_ALLOW_PRIVATE": True, "A2A_PUSH_ALLOWED_HOSTS": "hooks.internal"}
    built = WebhookPolicy.from_config(config)
    assert built == WebhookPolicy(allow_private=True, allowed_hosts=("hooks.internal",))
    assert WebhookPolicy.from_config({}) == WebhookPolicy()
    assert WebhookPolicy.from_config(config, allow_private=False).allow_private is False


# -------------------------------------------------------- is_public_address


@pytest.mark.parametrize("address", [
    PUBLIC_V4, "8.8.8.8", "1.1.1.1", PUBLIC_V6, "2001:4860:4860::8888",
    "::ffff:8.8.8.8", "64:ff9b::808:808", "2002:5db8:d822::1",
])
def test_public_addresses(address: str) -> None:
    import ipaddress

    assert is_public_address(address) is True
    assert is_public_address(ipaddress.ip_address(address)) is True


@pytest.mark.parametrize("address", [
    "127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.0.1", "169.254.169.254", "169.254.0.1",
    "100.64.0.1", "0.0.0.0", "0.1.2.3", "224.0.0.251", "255.255.255.255", "240.0.0.1",
    "192.0.0.192", "192.0.2.7", "198.51.100.1", "203.0.113.9", "198.19.0.1", "192.88.99.1",
    "100.100.100.200", "::", "::1", "fe80::1", "fe80::1%eth0", "fc00::1", "fd00:ec2::254",
    "ff02::1", "fec0::1", "2001:db8::1", "3fff::1", "100::1", "::ffff:127.0.0.1",
    "::ffff:192.168.0.1", "::127.0.0.1", "::8.8.8.8", "2002:7f00:1::", "2002:c0a8:1::1",
    "64:ff9b::7f00:1", "64:ff9b:1::8.8.8.8", "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "2001:2::1", "4000::1", "not an address", "", "example.com",
])
def test_non_public_addresses(address: str) -> None:
    assert is_public_address(address) is False


# ---------------------------------------------------------------- servers


@contextlib.contextmanager
def http_server(
    respond: Optional[Callable[[BaseHTTPRequestHandler], Tuple[int, Dict[str, str], bytes]]] = None,
    tls: Optional[ssl.SSLContext] = None,
    host: str = "127.0.0.1",
) -> Iterator[SimpleNamespace]:
    """A threaded HTTP(S) server on ``host`` port 0 recording the requests it gets."""
    seen: List[SimpleNamespace] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(SimpleNamespace(path=self.path, body=body,
                                        headers={k.lower(): v for k, v in self.headers.items()}))
            status, headers, payload = respond(self) if respond else (200, {}, b"ok")
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, *args: Any) -> None:
            pass

    server_class = ThreadingHTTPServer
    if ":" in host:
        server_class = type("V6Server", (ThreadingHTTPServer,), {"address_family": socket.AF_INET6})
    server = server_class((host, 0), Handler)
    server.daemon_threads = True
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield SimpleNamespace(port=server.server_address[1], seen=seen)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@contextlib.contextmanager
def silent_listener() -> Iterator[socket.socket]:
    """A socket that listens and never accepts: connects succeed, nothing ever answers."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    try:
        yield listener
    finally:
        listener.close()


def dead_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def transports() -> Iterator[Callable[..., WebhookTransport]]:
    made: List[WebhookTransport] = []

    def make(policy_: WebhookPolicy, **kwargs: Any) -> WebhookTransport:
        kwargs.setdefault("timeout", (2.0, 5.0))
        made.append(WebhookTransport(policy_, **kwargs))
        return made[-1]

    yield make
    for transport in made:
        transport.close()


LOOPBACK_OK = WebhookPolicy(allowed_hosts=("127.0.0.1",))


# ---------------------------------------------------------------- transport


def test_post_delivers_body_and_headers(transports: Callable[..., WebhookTransport]) -> None:
    with http_server(lambda h: (200, {"X-Seen": "1"}, b"thanks")) as server:
        result = transports(LOOPBACK_OK).post(
            f"http://127.0.0.1:{server.port}/hook?x=1", b'{"statusUpdate":{}}',
            {"Content-Type": "application/a2a+json", "X-A2A-Notification-Token": "tok",
             "Authorization": "Bearer abc"},
        )
    assert isinstance(result, WebhookResponse)
    assert (result.status, result.reason, result.body, result.ok) == (200, "OK", b"thanks", True)
    assert 0 <= result.elapsed < 5
    [request] = server.seen
    assert request.path == "/hook?x=1"
    assert request.body == b'{"statusUpdate":{}}'
    assert request.headers["content-type"] == "application/a2a+json"
    assert request.headers["x-a2a-notification-token"] == "tok"
    assert request.headers["authorization"] == "Bearer abc"
    assert request.headers["user-agent"].startswith("a2a-flask/")
    assert request.headers["host"] == f"127.0.0.1:{server.port}"


def test_non_2xx_answers_are_results_not_errors(
        transports: Callable[..., WebhookTransport]) -> None:
    with http_server(lambda h: (503, {}, b"busy")) as server:
        result = transports(LOOPBACK_OK).post(f"http://127.0.0.1:{server.port}/", b"{}", {})
    assert (result.status, result.body, result.ok) == (503, b"busy", False)


def test_response_body_is_capped(transports: Callable[..., WebhookTransport]) -> None:
    with http_server(lambda h: (200, {}, b"x" * 100_000)) as server:
        result = transports(LOOPBACK_OK, max_response_bytes=1000).post(
            f"http://127.0.0.1:{server.port}/", b"{}", {})
    assert result.status == 200 and result.body == b"x" * 1000


def test_redirects_are_not_followed(transports: Callable[..., WebhookTransport]) -> None:
    with http_server() as target:
        location = f"http://127.0.0.1:{target.port}/stolen"
        with http_server(lambda h: (302, {"Location": location}, b"")) as first:
            result = transports(LOOPBACK_OK).post(f"http://127.0.0.1:{first.port}/", b"{}", {})
    assert result.status == 302 and not result.ok
    assert len(first.seen) == 1
    assert target.seen == []


def test_default_policy_refuses_loopback_without_connecting(
        transports: Callable[..., WebhookTransport]) -> None:
    with silent_listener() as listener:
        port = listener.getsockname()[1]
        with pytest.raises(UnsafeWebhookError, match="loopback"):
            transports(WebhookPolicy()).post(f"http://127.0.0.1:{port}/", b"{}", {})
        listener.settimeout(0.3)
        with pytest.raises(socket.timeout):
            listener.accept()  # nobody connected


def test_dns_rebinding_is_refused_at_send_time(transports: Callable[..., WebhookTransport]) -> None:
    answers = iter([[PUBLIC_V4], ["127.0.0.1"]])

    def rebinding(host: str, port: int, *rest: Any) -> List[Tuple[Any, ...]]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in next(answers)]

    rebinding_policy = WebhookPolicy(resolver=rebinding)
    with http_server() as server:
        url = f"http://rebind.test:{server.port}/hook"
        assert rebinding_policy.check(url).addresses == (PUBLIC_V4,)  # at registration
        with pytest.raises(UnsafeWebhookError, match="rebind.test resolves to 127.0.0.1"):
            transports(rebinding_policy).post(url, b"{}", {})
    assert server.seen == []


def test_connection_is_pinned_to_the_vetted_address(
        transports: Callable[..., WebhookTransport]) -> None:
    resolve = fake_dns({"hooks.test": ["127.0.0.1"]})
    pinned = WebhookPolicy(allowed_hosts=("hooks.test",), resolver=resolve)
    with http_server() as server:
        result = transports(pinned).post(
            f"http://hooks.test:{server.port}/p", b"{}", {"Host": "evil.test"})
    assert result.status == 200
    [request] = server.seen
    assert request.headers["host"] == f"hooks.test:{server.port}"
    assert resolve.calls == ["hooks.test"]  # type: ignore[attr-defined]


def test_addresses_are_tried_in_order_on_connect_errors(
        transports: Callable[..., WebhookTransport]) -> None:
    # 127.0.0.2 is loopback too, but nothing listens there on this port: refused.
    resolve = fake_dns({"hooks.test": ["127.0.0.2", "127.0.0.1"]})
    both = WebhookPolicy(allowed_hosts=("127.0.0.0/8",), resolver=resolve)
    with http_server() as server:
        result = transports(both).post(f"http://hooks.test:{server.port}/", b"{}", {})
    assert result.status == 200 and len(server.seen) == 1


def test_connect_failure_on_every_address(transports: Callable[..., WebhookTransport]) -> None:
    port = dead_port()
    with pytest.raises(WebhookDeliveryError, match=f"could not connect to 127.0.0.1:{port}"):
        transports(LOOPBACK_OK).post(f"http://127.0.0.1:{port}/", b"{}", {})


def test_ipv6_pin(transports: Callable[..., WebhookTransport]) -> None:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        require("no IPv6 loopback (::1) on this machine")
    resolve = fake_dns({"hooks.test": ["::1"]})
    v6 = WebhookPolicy(allowed_hosts=("::1",), resolver=resolve)
    with http_server(host="::1") as server:
        assert transports(v6).post(f"http://[::1]:{server.port}/", b"a", {}).status == 200
        assert transports(v6).post(f"http://hooks.test:{server.port}/", b"b", {}).status == 200
    assert [r.headers["host"] for r in server.seen] == [f"[::1]:{server.port}",
                                                      f"hooks.test:{server.port}"]


def test_environment_proxies_are_ignored(transports: Callable[..., WebhookTransport],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    proxy = f"http://127.0.0.1:{dead_port()}"
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy",
                 "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    with http_server() as server:
        url = f"http://127.0.0.1:{server.port}/"
        # A plain requests call would go through the (dead) proxy...
        with pytest.raises(requests.exceptions.ProxyError):
            requests.post(url, data=b"{}", timeout=(2, 2))
        # ...the transport does not.
        assert transports(LOOPBACK_OK).post(url, b"{}", {}).status == 200
    assert len(server.seen) == 1


def test_a_silent_server_times_out(transports: Callable[..., WebhookTransport]) -> None:
    with silent_listener() as listener:
        port = listener.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(WebhookDeliveryError, match="no response within 0.5 s"):
            transports(LOOPBACK_OK, timeout=(1.0, 0.5)).post(f"http://127.0.0.1:{port}/", b"{}", {})
        assert time.monotonic() - started < 3


def test_unpinned_requests_never_connect(transports: Callable[..., WebhookTransport]) -> None:
    transport = transports(LOOPBACK_OK)
    with http_server() as server:
        with pytest.raises(requests.exceptions.InvalidURL, match="not pinned"):
            transport._session.post(f"http://127.0.0.1:{server.port}/", data=b"{}")
    assert server.seen == []


GEVENT_SCRIPT = textwrap.dedent("""
    from gevent import monkey; monkey.patch_all()
    import gevent
    from gevent.pywsgi import WSGIServer
    from a2a_flask.push.guard import WebhookPolicy
    from a2a_flask.push.transport import WebhookTransport

    seen = []
    def app(environ, start_response):
        seen.append((environ["HTTP_HOST"], environ["wsgi.input"].read()))
        start_response("204 No Content", [])
        return [b""]

    server = WSGIServer(("127.0.0.1", 0), app, log=None)
    server.start()
    transport = WebhookTransport(WebhookPolicy(allowed_hosts=("localhost",)), timeout=(2, 2))
    url = "http://localhost:%d/hook" % server.server_port
    jobs = [gevent.spawn(transport.post, url, b"%d" % i, {}) for i in range(20)]
    gevent.joinall(jobs, timeout=10, raise_error=True)
    assert all(job.successful() and job.value.status == 204 for job in jobs), jobs
    assert sorted(int(body) for _, body in seen) == list(range(20)), seen
    assert {host for host, _ in seen} == {"localhost:%d" % server.server_port}, seen
    transport.close()
    server.stop()
    print("ok")
""")


def test_concurrent_posts_under_gevent() -> None:
    # In a child process: monkey-patching this test process would affect the others.
    # It also exercises the system resolver, looked up at call time (after the patch).
    pytest.importorskip("gevent")
    done = subprocess.run([sys.executable, "-c", GEVENT_SCRIPT], capture_output=True, text=True,
                          timeout=60, cwd=str(pathlib.Path(__file__).parents[2]))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_bad_timeouts_are_rejected() -> None:
    with pytest.raises(ValueError):
        WebhookTransport(LOOPBACK_OK, timeout=(0, 1))


# -------------------------------------------------------------------- HTTPS


def _certificate(common_name: str, key: Any, issuer: Any, issuer_key: Any, ca: bool,
                 sans: Sequence[str] = ()) -> Any:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer.subject if issuer is not None else subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    )
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
    else:
        builder = (builder
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in sans]),
                                  critical=False)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                                  critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       issuer_key.public_key()), critical=False))
    return builder.sign(issuer_key, hashes.SHA256())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A throw-away CA and two server certificates, for hooks.test and other.test."""
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder = tmp_path_factory.mktemp("pki")

    def write(name: str, data: bytes) -> str:
        path = folder / name
        path.write_bytes(data)
        return str(path)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("a2a-flask test CA", ca_key, None, ca_key, ca=True)
    paths = {"ca": write("ca.pem", ca.public_bytes(serialization.Encoding.PEM))}
    for name in ("hooks.test", "other.test"):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(name, key, ca, ca_key, ca=False, sans=[name])
        paths[name] = (
            write(f"{name}.crt", cert.public_bytes(serialization.Encoding.PEM)),
            write(f"{name}.key", key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption())),
        )
    return SimpleNamespace(**{k.replace(".", "_"): v for k, v in paths.items()})


def server_tls(cert_and_key: Tuple[str, str], sni: List[Optional[str]]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(*cert_and_key)
    context.sni_callback = lambda sock, name, ctx: sni.append(name)
    return context


HTTPS_POLICY = WebhookPolicy(allowed_hosts=("hooks.test",),
                             resolver=fake_dns({"hooks.test": ["127.0.0.1"]}))


def test_https_through_the_pin_checks_sni_and_certificate(
        pki: SimpleNamespace, transports: Callable[..., WebhookTransport]) -> None:
    sni: List[Optional[str]] = []
    with http_server(tls=server_tls(pki.hooks_test, sni)) as server:
        result = transports(HTTPS_POLICY, verify=pki.ca).post(
            f"https://hooks.test:{server.port}/secure", b'{"task":{}}',
            {"Content-Type": "application/json"})
    assert result.status == 200
    assert sni == ["hooks.test"]
    [request] = server.seen
    assert request.headers["host"] == f"hooks.test:{server.port}"
    assert request.body == b'{"task":{}}'


def test_https_wrong_certificate_name_is_a_delivery_error(
        pki: SimpleNamespace, transports: Callable[..., WebhookTransport]) -> None:
    sni: List[Optional[str]] = []
    with http_server(tls=server_tls(pki.other_test, sni)) as server:
        with pytest.raises(WebhookDeliveryError, match="TLS error") as info:
            transports(HTTPS_POLICY, verify=pki.ca).post(
                f"https://hooks.test:{server.port}/", b"{}", {})
    assert "hooks.test" in str(info.value)
    assert server.seen == []


def test_https_untrusted_certificate_is_a_delivery_error(
        pki: SimpleNamespace, transports: Callable[..., WebhookTransport]) -> None:
    sni: List[Optional[str]] = []
    with http_server(tls=server_tls(pki.hooks_test, sni)) as server:
        with pytest.raises(WebhookDeliveryError, match="TLS error"):
            transports(HTTPS_POLICY).post(f"https://hooks.test:{server.port}/", b"{}", {})
    assert server.seen == []
