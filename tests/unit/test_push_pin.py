"""The webhook transport connects to the vetted address, whatever the system resolver says.

``localhost`` resolves to 127.0.0.1 on this machine.  The policy's resolver
says 127.0.0.2.  Two real servers listen on the same port, one on each
address: the push must reach 127.0.0.2 and never 127.0.0.1.  A transport
that let requests or urllib3 resolve the name itself (requests 2.31 did, with
the earlier pin) reaches the decoy on 127.0.0.1 and fails here.
"""
from __future__ import annotations

import contextlib
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any, Iterator, List, Optional

import pytest
import requests
import urllib3

from a2a_flask.push.guard import WebhookPolicy
from a2a_flask.push.transport import WebhookDeliveryError, WebhookTransport

from tests.unit.test_push_guard import _certificate, fake_dns

NAME = "localhost"
VETTED, DECOY = "127.0.0.2", "127.0.0.1"


@contextlib.contextmanager
def server(host: str, port: int, tls: Optional[ssl.SSLContext] = None) -> Iterator[List[str]]:
    """A real HTTP(S) server on ``host:port``; yields the Host headers it received."""
    seen: List[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append(self.headers.get("Host", ""))
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer((host, port), Handler)
    httpd.daemon_threads = True
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def shared_port() -> int:
    """A port free on both loopback addresses."""
    for _ in range(20):
        with socket.socket() as first:
            first.bind((VETTED, 0))
            port = first.getsockname()[1]
            with socket.socket() as second:
                try:
                    second.bind((DECOY, port))
                except OSError:
                    continue
        return int(port)
    raise AssertionError("no port free on both 127.0.0.1 and 127.0.0.2 in 20 tries")


@pytest.fixture(scope="module")
def localhost_pki(tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A throw-away CA and a certificate for ``localhost``."""
    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    folder = tmp_path_factory.mktemp("pin-pki")
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("pin test CA", ca_key, None, ca_key, ca=True)
    cert = _certificate(NAME, key, ca, ca_key, ca=False, sans=[NAME])
    paths = {"ca": folder / "ca.pem", "cert": folder / "cert.pem", "key": folder / "key.pem"}
    paths["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths["cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths["key"].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                               serialization.PrivateFormat.PKCS8,
                                               serialization.NoEncryption()))
    return SimpleNamespace(**{k: str(v) for k, v in paths.items()})


def tls_context(pki: SimpleNamespace) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.cert, pki.key)
    return context


def pinned_policy() -> WebhookPolicy:
    return WebhookPolicy(allowed_hosts=(NAME, "other.test", "127.0.0.0/8"), resolver=fake_dns({NAME: [VETTED]}))


def versions() -> str:
    return f"requests {requests.__version__}, urllib3 {urllib3.__version__}"


def test_the_system_resolver_really_says_the_decoy() -> None:
    # The premise: a transport that resolved the name itself would reach the decoy.
    assert DECOY in {info[4][0] for info in socket.getaddrinfo(NAME, 80, socket.AF_INET)}


def test_http_goes_to_the_vetted_address_not_where_dns_points() -> None:
    port = shared_port()
    with server(VETTED, port) as vetted, server(DECOY, port) as decoy:
        with WebhookTransport(pinned_policy(), timeout=(2.0, 5.0)) as transport:
            for _ in range(3):  # pooled connections keep the pin too
                assert transport.post(f"http://{NAME}:{port}/hook", b"{}", {}).status == 204
    assert decoy == [], versions()
    assert vetted == [f"{NAME}:{port}"] * 3


def test_https_goes_to_the_vetted_address_with_the_name_for_sni_and_certificate(
        localhost_pki: SimpleNamespace) -> None:
    port = shared_port()
    tls = tls_context(localhost_pki)
    with server(VETTED, port, tls) as vetted, server(DECOY, port, tls) as decoy:
        with WebhookTransport(pinned_policy(), timeout=(2.0, 5.0),
                              verify=localhost_pki.ca) as transport:
            result = transport.post(f"https://{NAME}:{port}/hook", b"{}", {})
    assert result.status == 204
    assert decoy == [], versions()
    assert vetted == [f"{NAME}:{port}"]


def test_two_names_on_one_address_get_their_own_tls_pools(localhost_pki: SimpleNamespace) -> None:
    port = shared_port()
    other = WebhookPolicy(allowed_hosts=(NAME, "other.test", "127.0.0.0/8"),
                          resolver=fake_dns({NAME: [VETTED], "other.test": [VETTED]}))
    with server(VETTED, port, tls_context(localhost_pki)) as vetted:
        with WebhookTransport(other, timeout=(2.0, 5.0), verify=localhost_pki.ca) as transport:
            assert transport.post(f"https://{NAME}:{port}/", b"{}", {}).status == 204
            # The localhost certificate does not name other.test: a pooled connection
            # made for localhost must not carry this push.
            with pytest.raises(Exception, match="TLS error"):
                transport.post(f"https://other.test:{port}/", b"{}", {})
    assert vetted == [f"{NAME}:{port}"]


def _read_request(conn: socket.socket) -> bytes:
    """One HTTP request off ``conn`` (head and Content-Length body); b"" if it closed."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return b""
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        body += conn.recv(65536)
    return head


def test_a_keep_alive_connection_closed_as_it_is_reused_costs_no_failed_push() -> None:
    """The receiver closes its idle connection just as the next push arrives on it
    (the request is read, no answer comes): the push goes again on a new connection."""
    no_answer = b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    port = listener.getsockname()[1]
    connections: List[int] = []

    def serve() -> None:
        for number in (1, 2):
            conn, _ = listener.accept()
            with conn:
                conn.settimeout(10)
                _read_request(conn)
                conn.sendall(no_answer)
                connections.append(number)
                if number == 1:
                    _read_request(conn)  # the second push, on the kept-alive connection: dropped

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        with WebhookTransport(WebhookPolicy(allowed_hosts=("127.0.0.1",)),
                              timeout=(2.0, 5.0)) as transport:
            url = f"http://127.0.0.1:{port}/hook"
            assert transport.post(url, b"{}", {}).status == 204
            assert transport.post(url, b"{}", {}).status == 204  # no WebhookDeliveryError
    finally:
        thread.join(10)
        listener.close()
    assert connections == [1, 2], versions()


def test_https_connections_load_the_ca_certificates_once_at_start(
        localhost_pki: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    """requests handed urllib3 the CA bundle's path for each new connection, and urllib3
    loaded the whole bundle each time (tens of ms holding a gevent worker's hub; a
    push under load tripped the hub watchdog).  The transport loads it once."""
    port = shared_port()
    other = WebhookPolicy(allowed_hosts=(NAME, "other.test", "127.0.0.0/8"),
                          resolver=fake_dns({NAME: [VETTED], "other.test": [VETTED]}))
    with server(VETTED, port, tls_context(localhost_pki)) as vetted:
        with WebhookTransport(other, timeout=(2.0, 5.0), verify=localhost_pki.ca) as transport:
            transport.prepare()
            loads = []
            real = ssl.SSLContext.load_verify_locations

            def counted(context: ssl.SSLContext, *args: Any, **kwargs: Any) -> None:
                loads.append(args or kwargs)
                real(context, *args, **kwargs)

            monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", counted)
            for _ in range(3):
                assert transport.post(f"https://{NAME}:{port}/hook", b"{}",
                                      {"Connection": "close"}).status == 204
            # https to an IP address goes through the plain adapter: the same context.
            try:
                transport.post(f"https://{VETTED}:{port}/hook", b"{}", {"Connection": "close"})
            except WebhookDeliveryError:
                pass  # the certificate names the host, not the address: refused, as it should
    assert loads == [], loads
    assert vetted == [f"{NAME}:{port}"] * 3
