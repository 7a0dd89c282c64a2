"""POST a push notification to a webhook, connecting only to vetted addresses.

:meth:`WebhookTransport.post` checks the URL with the
:class:`~a2a_flask.push.guard.WebhookPolicy` *at send time* and then connects
to one of the addresses that check vetted, never resolving the name again:
the request's URL carries the IP itself (so neither requests nor urllib3, in
any version, has a name to look up) while the URL's host name still goes in
``Host``, in SNI and into certificate checking.  So a name that resolved to a
public address at registration and to ``127.0.0.1`` now (DNS rebinding) is
refused, and one that changes between the check and the connect cannot
redirect the push.  Redirects are never followed (a 3xx is just a non-2xx
answer) and environment proxies are ignored: both would route around the guard.
"""
from __future__ import annotations

import email.utils
import ipaddress
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Optional, Protocol, Tuple, Union
from urllib.parse import urlsplit, urlunsplit

from ..version import __version__
from .guard import Destination, WebhookPolicy

if TYPE_CHECKING:
    import requests

    from .pinned import _PinnedAdapter

# requests (and urllib3, http.cookiejar) are imported by prepare() or the first push,
# from .pinned: they are a third of ``import a2a_flask``, and most agents never push.
#: TLS adapters kept (one per webhook host name); the least recently used is closed.
MAX_TLS_HOSTS = 64
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
    #: Seconds the receiver asked us to wait (``Retry-After``, on 429 and 503), if it did.
    retry_after: Optional[float] = None

    @property
    def ok(self) -> bool:
        """True for a 2xx answer, the only acknowledgement of a push."""
        return 200 <= self.status < 300


def parse_retry_after(value: Optional[str]) -> Optional[float]:
    """``Retry-After`` as seconds from now: delay-seconds or an HTTP date; None if
    absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max(0.0, when.timestamp() - time.time())


def _pinned_url(url: str, address: str, port: int) -> str:
    """``url`` with its host replaced by the IP address (the port made explicit)."""
    parts = urlsplit(url)
    host = f"[{address}]" if ":" in address else address
    return urlunsplit((parts.scheme, f"{host}:{port}", parts.path or "/", parts.query, ""))


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


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


class Transport(Protocol):
    """What webhook delivery posts through (:class:`WebhookTransport`, or a wrapper of
    one such as :class:`a2a_flask.observe.otel.TracedTransport`)."""

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> WebhookResponse:
        """POST ``body`` to ``url``."""

    def close(self) -> None:
        """Let go of pooled connections."""


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
        self.user_agent = user_agent or _default_user_agent()
        self._built: Optional[Tuple[requests.Session, _PinnedAdapter]] = None
        #: The TLS context of every https webhook, its CAs loaded once (in prepare).
        self._context: Any = None
        self._tls: "OrderedDict[str, _PinnedAdapter]" = OrderedDict()
        self._tls_lock = threading.Lock()

    def _build(self) -> Tuple[requests.Session, _PinnedAdapter]:
        """The session and its plain adapter, made on first use."""
        with self._tls_lock:
            if self._built is None:
                from .pinned import pinned_session, verifying_context

                self._context = verifying_context(self.verify)
                self._built = pinned_session(self.user_agent, self._context)
            return self._built

    def prepare(self) -> None:
        """Import requests, build the session and load the CA certificates now (call
        it at start-up).

        Left to the first push, the import (100 ms and more) and the certificates
        (tens of ms) would hold a gevent worker's hub while it serves: every
        request and stream would wait.
        """
        self._build()

    @property
    def _session(self) -> requests.Session:
        return self._build()[0]

    def _adapter(self, destination: Destination) -> _PinnedAdapter:
        """The adapter for a destination: a TLS one names its host for SNI and certificates."""
        if destination.scheme != "https" or _is_ip(destination.host):
            return self._build()[1]
        self._build()  # the TLS context, made with the session
        from .pinned import _PinnedAdapter

        with self._tls_lock:
            adapter = self._tls.pop(destination.host, None)
            if adapter is None:
                adapter = _PinnedAdapter(destination.host, ssl_context=self._context,
                                         pool_connections=4, pool_maxsize=16, max_retries=0)
                if len(self._tls) >= MAX_TLS_HOSTS:
                    self._tls.popitem(last=False)[1].close()
            self._tls[destination.host] = adapter
            return adapter

    def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> WebhookResponse:
        """POST ``body`` to ``url`` with ``headers`` (``Content-Type`` is the caller's).

        :returns: the receiver's answer, whatever its status (3xx included).
        :raises UnsafeWebhookError: the policy refuses the URL now.
        :raises WebhookDeliveryError: no answer: connect, TLS or read failure, timeout.
        """
        import requests

        from .pinned import _PIN, _is_connect_failure, _is_dropped_connection

        started = time.monotonic()
        destination = self.policy.check(url)
        request = requests.Request(
            "POST", destination.url, data=bytes(body),
            headers={k: v for k, v in headers.items() if k.lower() not in _DROPPED_HEADERS},
        )
        prepared = self._session.prepare_request(request)
        prepared.headers["Host"] = _host_header(destination)
        named_url = prepared.url or destination.url
        adapter = self._adapter(destination)
        where = f"{destination.host}:{destination.port}"
        failures = []
        for address in destination.addresses[:MAX_ADDRESS_ATTEMPTS]:
            prepared.url = _pinned_url(named_url, address, destination.port)
            setattr(prepared, _PIN, address)
            try:
                try:
                    # The adapter directly: no session redirect, cookie or proxy logic on the way.
                    response = adapter.send(prepared, stream=True, timeout=self.timeout,
                                            verify=self.verify, proxies={})
                except requests.RequestException as exc:
                    if not _is_dropped_connection(exc):
                        raise
                    # The receiver closed a pooled keep-alive connection as we reused it
                    # (a race no pool check can close): once more, on a new connection,
                    # rather than a failed attempt and a retry after the backoff.
                    response = adapter.send(prepared, stream=True, timeout=self.timeout,
                                            verify=self.verify, proxies={})
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
                                   body=content, elapsed=time.monotonic() - started,
                                   retry_after=parse_retry_after(
                                       response.headers.get("Retry-After")))
        raise WebhookDeliveryError(f"could not connect to {where}: " + "; ".join(failures))

    def _read(self, response: requests.Response, started: float) -> bytes:
        """The start of the body; what could not be read is dropped, not an error
        (the status line already told whether the receiver took the push)."""
        import requests

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
        import requests
        from urllib3.exceptions import NewConnectionError

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
        if self._built is not None:
            self._built[0].close()
        with self._tls_lock:
            for adapter in self._tls.values():
                adapter.close()
            self._tls.clear()

    def __enter__(self) -> "WebhookTransport":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()
