"""POST a push notification to a webhook, connecting only to vetted addresses.

:meth:`WebhookTransport.post` checks the URL with the
:class:`~a2a_flask.push.guard.WebhookPolicy` *at send time* and then connects
to one of the addresses that check vetted, never resolving the name again:
the connection is pinned to the IP while the URL's host name still goes in
``Host``, in SNI and into certificate checking.  So a name that resolved to a
public address at registration and to ``127.0.0.1`` now (DNS rebinding) is
refused, and one that changes between the check and the connect cannot
redirect the push.  Redirects are never followed (a 3xx is just a non-2xx
answer) and environment proxies are ignored: both would route around the guard.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from http.cookiejar import DefaultCookiePolicy
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import requests
from requests.adapters import HTTPAdapter
from requests.cookies import RequestsCookieJar
# urllib3 is requests' own transport (a hard dependency of requests).
from urllib3.exceptions import NewConnectionError

from ..version import __version__
from .guard import Destination, WebhookPolicy

#: The attribute on a PreparedRequest naming the vetted ``(address, hostname)``.
_PIN = "_a2a_pinned_destination"
#: At most this many of a name's addresses are tried, so that a long DNS answer
#: of dead addresses cannot hold a delivery worker for minutes.
MAX_ADDRESS_ATTEMPTS = 4
_DROPPED_HEADERS = {"host", "content-length", "transfer-encoding"}


class WebhookDeliveryError(Exception):
    """The push could not be delivered (connect, TLS or read failure, timeout)."""


@dataclass
class WebhookResponse:
    """What the receiver answered."""

    status: int
    reason: str
    #: The start of the response body (at most ``max_response_bytes``), for log lines.
    body: bytes
    #: Seconds from the start of :meth:`WebhookTransport.post` to the end of reading.
    elapsed: float

    @property
    def ok(self) -> bool:
        """True for a 2xx answer, the only acknowledgement of a push."""
        return 200 <= self.status < 300


class _NoCookies(DefaultCookiePolicy):
    """One receiver's cookies must never be sent to another."""

    def set_ok(self, cookie: Any, request: Any) -> bool:
        return False

    def return_ok(self, cookie: Any, request: Any) -> bool:
        return False


class _PinnedAdapter(HTTPAdapter):
    """An adapter that connects to the address pinned on the request, never to a name.

    The pool key's host becomes the vetted IP; for https the URL's host name
    becomes ``server_hostname`` (SNI and certificate hostname check), which is
    also part of the pool key, so two names pinned to one IP never share a TLS
    connection.  A request without a pin is refused.
    """

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: Any, cert: Any = None,
    ) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(
            request, verify, cert)
        pin: Optional[Tuple[str, str]] = getattr(request, _PIN, None)
        if pin is None:
            raise ValueError("refusing to connect: the request was not pinned to a vetted address")
        address, hostname = pin
        host_params["host"] = address
        if host_params.get("scheme") == "https":
            pool_kwargs["server_hostname"] = hostname
        return host_params, pool_kwargs

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Any = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        # Never through a proxy: it would resolve and connect on its own.
        return super().send(request, stream=stream, timeout=timeout, verify=verify, cert=cert,
                            proxies={})


def _default_user_agent() -> str:
    return f"a2a-flask/{__version__}"


def _host_header(destination: Destination) -> str:
    host = f"[{destination.host}]" if ":" in destination.host else destination.host
    default = 443 if destination.scheme == "https" else 80
    return host if destination.port == default else f"{host}:{destination.port}"


def _root_cause(exc: BaseException) -> BaseException:
    """The innermost error under requests' and urllib3's wrappers."""
    for _ in range(6):
        reason = getattr(exc, "reason", None)
        if isinstance(reason, BaseException):
            exc = reason
        elif exc.args and isinstance(exc.args[0], BaseException):
            exc = exc.args[0]
        else:
            break
    return exc


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


class WebhookTransport:
    """Sends push notification requests; one per agent, shared by its delivery workers.

    Thread- and greenlet-safe for :meth:`post`: it keeps one
    :class:`requests.Session` whose only mutable state is urllib3's connection
    pools (which are locked) and a cookie jar that accepts no cookie.
    Under gevent the sockets are cooperative once gevent has patched them.

    :param policy: the SSRF policy every URL is checked against at send time.
    :param timeout: ``(connect, read)`` seconds; the connect timeout applies per
        address tried, the read timeout to each wait for data and to reading
        the response body as a whole.
    :param user_agent: the ``User-Agent`` header; defaults to ``a2a-flask/<version>``.
    :param max_response_bytes: how much of the response body is read and kept.
    :param verify: TLS verification as in requests: ``True`` (system CAs),
        a CA bundle path, or ``False`` (tests only).
    """

    def __init__(
        self,
        policy: WebhookPolicy,
        *,
        timeout: Tuple[float, float] = (5.0, 10.0),
        user_agent: str = "",
        max_response_bytes: int = 65536,
        verify: Union[bool, str] = True,
    ) -> None:
        connect, read = (float(t) for t in timeout)
        if connect <= 0 or read <= 0:
            raise ValueError(f"webhook timeouts must be positive, got {timeout!r}")
        self.policy = policy
        self.timeout = (connect, read)
        self.max_response_bytes = max(0, int(max_response_bytes))
        self.verify = verify
        session = requests.Session()
        session.trust_env = False  # no proxies, netrc or CA bundle from the environment
        session.cookies = RequestsCookieJar(policy=_NoCookies())
        session.headers["User-Agent"] = user_agent or _default_user_agent()
        # The body is only logged: spare the decompression (and its bombs).
        session.headers["Accept-Encoding"] = "identity"
        adapter = _PinnedAdapter(pool_connections=32, pool_maxsize=16, max_retries=0)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        self._session = session

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> WebhookResponse:
        """POST ``body`` to ``url`` with ``headers`` (``Content-Type`` is the caller's).

        :returns: the receiver's answer, whatever its status (3xx included).
        :raises UnsafeWebhookError: the policy refuses the URL now.
        :raises WebhookDeliveryError: no answer: connect, TLS or read failure, timeout.
        """
        started = time.monotonic()
        destination = self.policy.check(url)
        request = requests.Request(
            "POST", destination.url, data=bytes(body),
            headers={k: v for k, v in headers.items() if k.lower() not in _DROPPED_HEADERS},
        )
        prepared = self._session.prepare_request(request)
        prepared.headers["Host"] = _host_header(destination)
        where = f"{destination.host}:{destination.port}"
        failures = []
        for address in destination.addresses[:MAX_ADDRESS_ATTEMPTS]:
            setattr(prepared, _PIN, (address, destination.host))
            try:
                response = self._session.send(
                    prepared, timeout=self.timeout, verify=self.verify,
                    allow_redirects=False, stream=True, proxies={},
                )
            except requests.RequestException as exc:
                if _is_connect_failure(exc):
                    failures.append(f"{address}: {self._describe(exc)}")
                    continue
                raise WebhookDeliveryError(
                    f"push to {where} ({address}) failed: {self._describe(exc)}") from exc
            try:
                content = self._read(response, started)
            finally:
                response.close()
            return WebhookResponse(status=response.status_code, reason=response.reason or "",
                                   body=content, elapsed=time.monotonic() - started)
        raise WebhookDeliveryError(f"could not connect to {where}: " + "; ".join(failures))

    def _read(self, response: requests.Response, started: float) -> bytes:
        """The start of the body; what could not be read is dropped, not an error
        (the status line already told whether the receiver took the push)."""
        if self.max_response_bytes == 0:
            return b""
        deadline = started + self.timeout[0] + self.timeout[1]
        chunks = []
        size = 0
        try:
            for chunk in response.iter_content(chunk_size=8192):
                chunks.append(chunk)
                size += len(chunk)
                if size >= self.max_response_bytes or time.monotonic() > deadline:
                    break
        except (requests.RequestException, OSError):
            pass
        return b"".join(chunks)[: self.max_response_bytes]

    def _describe(self, exc: requests.RequestException) -> str:
        if isinstance(exc, requests.ConnectTimeout):
            return f"no connection within {self.timeout[0]:g} s"
        if isinstance(exc, requests.ReadTimeout):
            return f"no response within {self.timeout[1]:g} s"
        cause = _root_cause(exc)
        if isinstance(cause, NewConnectionError) and isinstance(cause.__cause__, OSError):
            # "Connection refused", "Network is unreachable", ... without urllib3's wrapping.
            cause = cause.__cause__
        text = cause.strerror if isinstance(cause, OSError) and cause.strerror else str(cause)
        # urllib3 prefixes "HTTPConnection(host=..., port=...): "; the caller names the host.
        if "): " in text and text.startswith(("HTTPConnection(", "HTTPSConnection(")):
            text = text.split("): ", 1)[1]
        kind = "TLS error: " if isinstance(exc, requests.exceptions.SSLError) else ""
        return kind + (text or type(cause).__name__)

    def close(self) -> None:
        """Close pooled connections; the transport must not be used afterwards."""
        self._session.close()

    def __enter__(self) -> "WebhookTransport":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
