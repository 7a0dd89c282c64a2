"""The requests side of :mod:`.transport`: a session that only connects to vetted addresses.

Imported on the first push, not with the package: requests, urllib3 and
``http.cookiejar`` take a third of ``import a2a_flask``.
"""
from __future__ import annotations

import http.client
import os
import ssl
from http.cookiejar import DefaultCookiePolicy
from typing import Any, Optional, Tuple, Union
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.cookies import RequestsCookieJar
# urllib3 is requests' own transport (a hard dependency of requests).
from urllib3.exceptions import NewConnectionError, ProtocolError

#: The attribute on a PreparedRequest naming the vetted address its URL must carry.
_PIN = "_a2a_pinned_address"


class _NoCookies(DefaultCookiePolicy):
    """One receiver's cookies must never be sent to another."""

    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        return False


def verifying_context(verify: Union[bool, str]) -> Optional[ssl.SSLContext]:
    """One TLS context for every webhook connection, its CA certificates loaded now
    (``verify``: True for requests' CA bundle, or a bundle file or folder); None
    when nothing is verified.

    requests hands urllib3 the bundle's path for every new connection, and
    urllib3 then loads the whole bundle (tens of milliseconds, more on a loaded
    machine) into a fresh context, holding a gevent worker's hub each time.
    """
    if verify is False:
        return None
    from requests.utils import DEFAULT_CA_BUNDLE_PATH
    from urllib3.util.ssl_ import create_urllib3_context

    where = DEFAULT_CA_BUNDLE_PATH if verify is True else verify
    context = create_urllib3_context()
    if os.path.isdir(where):
        context.load_verify_locations(capath=where)
    else:
        context.load_verify_locations(cafile=where)
    return context


class _PinnedAdapter(HTTPAdapter):
    """An adapter that only sends requests whose URL names the vetted IP address.

    The pin is in the URL itself (``http://203.0.113.7:8080/hook``), so no
    version of requests or urllib3 has a name to resolve; the host name goes
    in ``Host`` (set by the transport) and, for https, in ``server_hostname``
    (SNI and the certificate's hostname check), a pool setting given through
    :meth:`init_poolmanager`, the hook requests documents for that.  One such
    adapter serves one host name, so two names pinned to one IP never share a
    TLS connection.  A request the transport did not pin is refused.
    """

    def __init__(self, server_hostname: str = "", ssl_context: Optional[ssl.SSLContext] = None,
                 **kwargs: Any) -> None:
        # Read by init_poolmanager, which the base class calls.
        self._server_hostname, self._ssl_context = server_hostname, ssl_context
        super().__init__(**kwargs)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False,
                         **pool_kwargs: Any) -> None:
        if self._server_hostname:
            pool_kwargs["server_hostname"] = self._server_hostname
        if self._ssl_context is not None:
            pool_kwargs["ssl_context"] = self._ssl_context
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        super().cert_verify(conn, url, verify, cert)  # type: ignore[no-untyped-call]
        if verify and self._ssl_context is not None:
            # The shared context holds the CAs already: a path here would make urllib3
            # load the bundle again for each new connection.
            conn.ca_certs = conn.ca_cert_dir = None

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Any = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        pinned: Optional[str] = getattr(request, _PIN, None)
        if pinned is None or urlsplit(request.url or "").hostname != pinned:
            raise requests.exceptions.InvalidURL(
                "refusing to connect: the request was not pinned to a vetted address")
        # Never through a proxy: it would resolve and connect on its own.
        return super().send(request, stream=stream, timeout=timeout, verify=verify, cert=cert,
                            proxies={})


def _is_connect_failure(exc: requests.RequestException) -> bool:
    """True when nothing reached the receiver, so another address may be tried."""
    if isinstance(exc, requests.ConnectTimeout):
        return True
    if isinstance(exc, (requests.exceptions.SSLError, requests.exceptions.ProxyError)):
        return False
    if isinstance(exc, requests.ConnectionError):
        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        return isinstance(reason, NewConnectionError)
    return False


def _is_dropped_connection(exc: requests.RequestException) -> bool:
    """True when the connection closed before any answer: a pooled keep-alive
    connection the receiver closed just as it was reused looks like this."""
    cause = exc.args[0] if isinstance(exc, requests.ConnectionError) and exc.args else None
    return isinstance(cause, ProtocolError) and any(
        isinstance(arg, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError,
                         http.client.RemoteDisconnected)) for arg in cause.args)


def pinned_session(user_agent: str, ssl_context: Optional[ssl.SSLContext] = None,
                   ) -> Tuple[requests.Session, _PinnedAdapter]:
    """A session that keeps no cookies and ignores the environment, with its plain
    adapter (which serves https to IP addresses too, with ``ssl_context``)."""
    session = requests.Session()
    session.trust_env = False  # no proxies, netrc or CA bundle from the environment
    session.cookies = RequestsCookieJar(policy=_NoCookies())
    session.headers["User-Agent"] = user_agent
    # The body is only logged: spare the decompression (and its bombs).
    session.headers["Accept-Encoding"] = "identity"
    adapter = _PinnedAdapter(ssl_context=ssl_context, pool_connections=32, pool_maxsize=16,
                             max_retries=0)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session, adapter
