"""Every ``A2A_*`` configuration key, its default, and how it is read.

Keys are read once, in ``init_app``, from ``app.config``; arguments given to
:class:`~a2a_flask.A2A` win over them.  With ``app.config.from_prefixed_env()``
an environment variable such as ``FLASK_A2A_STORE=shelve:///tmp/a2a`` sets
``A2A_STORE``.  Flask hands such values over as JSON when they parse as JSON
(``1``, ``true``) and as strings otherwise (``False``, ``off``), so every value
is read by the field's declared type, the same way from Python and from the
environment (see :data:`KINDS`); a value that does not fit stops ``init_app``
with a :class:`ValueError` naming the key, the value and what is accepted.
"""
from __future__ import annotations

import math
import re
from dataclasses import MISSING, dataclass, fields
from typing import (Any, Callable, Dict, Mapping, Optional, Protocol, Tuple, Union,
                    get_args, get_origin, get_type_hints, runtime_checkable)


@runtime_checkable
class PrivateKeyObject(Protocol):
    """A ``cryptography`` private key (EC P-256 or RSA): anything with ``private_bytes``."""

    def private_bytes(self, *args: Any, **kwargs: Any) -> bytes: ...


#: A signing key: PEM text, PEM bytes or a ``cryptography`` private key object.
SigningKey = Union[str, bytes, PrivateKeyObject]
#: Host names, ``*.domain`` suffixes, IP addresses or CIDR networks.
HostList = Tuple[str, ...]


@dataclass
class Settings:
    """The configuration of one agent; attribute ``x`` is config key ``A2A_X``."""

    #: Where the JSON-RPC endpoint is mounted; the REST binding lives under ``<prefix>/rest``.
    url_prefix: str = "/a2a"
    #: The public base URL (``https://agents.example.com``) of the card's links; empty: Flask's
    #: ``SERVER_NAME``, else the request's ``Host`` if well-formed and in ``TRUSTED_HOSTS``
    #: (when set).  Only a card with configured URLs is signed.
    public_url: str = ""
    #: The task store, as a URL: ``memory://`` (per process), ``shelve:///path/to/file``
    #: or ``sqlite:///path/to/file.db`` (one host; missing folders are created),
    #: ``redis://host:6379/0``, ``redis+cluster://h:p,h:p/0``, ``redis+sentinel://h:p/name/0``
    #: (several hosts; the ``redis`` extra).
    store: str = "memory://"
    #: The name this agent's tasks are stored under, which keeps them apart from the tasks
    #: of other agents sharing its store: the agent sees only the tasks stored under its
    #: own.  Empty: the agent's name.  ``a2a`` (the default agent's name) stores them
    #: as every task was stored before 0.2.0, with no name: set it to keep an upgraded
    #: agent's older tasks.  At most 64 characters, no control characters; two agents
    #: of one app sharing a store may not have the same one.
    store_scope: str = ""
    #: Seconds any one call to a networked store (Redis, PostgreSQL, MySQL/MariaDB) may
    #: take: connecting, each command or statement, and the wait for a pooled connection.
    #: Past it the caller gets "task store unavailable" (REST 503) and the connection
    #: that hung is dropped, never used again.
    store_timeout: float = 5.0
    #: Connections each worker process may hold to a networked store for reads (and all
    #: but a running task's own writes); a caller finding them all busy waits up to
    #: ``A2A_STORE_TIMEOUT`` for one.  The SQL store may open ``max_overflow`` (a URL
    #: parameter, 10) more under a burst.
    store_pool_size: int = 20
    #: Connections each worker process keeps apart for running tasks' own writes and
    #: lease renewals, so that a crowd of readers cannot starve the work they watch.
    store_writer_pool_size: int = 5
    #: Seconds between SSE keep-alive comments on an idle stream.
    sse_keepalive: float = 15.0
    #: Longest time a blocking SendMessage waits for a terminal or interrupted state
    #: before it returns the task as it is.
    blocking_timeout: float = 300.0
    #: Seconds a canceled executor may take to stop by itself before it is killed.
    cancel_grace: float = 5.0
    #: Seconds a worker's claim on a running task lasts without renewal: a task whose
    #: worker died is failed within about this time.  It must exceed the longest time
    #: an executor holds the CPU without yielding (under gevent).
    lease_ttl: float = 30.0
    #: Where executors run: ``inline`` (a greenlet or thread of the web worker that got
    #: the message) or ``celery`` (Celery workers, the ``celery`` extra; the Celery app
    #: from ``A2A(celery=...)`` or ``app.extensions["celery"]``; not with ``memory://``).
    runner: str = "inline"
    #: Seconds a store outage (a database restart, a failover) may last without losing
    #: work: a running task's writes, and its streams' and webhooks' progress, wait for
    #: the store and go on in order; past it the task fails.  0: the first failed
    #: write stops the task (which is failed once the store answers again).
    store_grace: float = 30.0
    #: Seconds finished tasks are kept (0 keeps them forever).
    task_ttl: float = 3600.0
    #: Seconds the server keeps a send's ``Idempotency-Key``: a retry with the same key
    #: within it gets the first send's task (docs/safe-retries.rst).
    idempotency_ttl: float = 86400.0
    #: ``Cache-Control: max-age`` of the agent card, in seconds.
    card_max_age: int = 300
    #: Whether streams end at AUTH_REQUIRED (credentials may arrive out of band).
    close_stream_on_auth_required: bool = True
    #: Serve a 1.0 method name sent without ``A2A-Version`` as 1.0 instead of answering
    #: -32009 (a missing header means 0.3, spec §3.6.2).
    lenient_version: bool = False
    #: Also serve the A2A 1.1 draft (task generations, long-poll GetTask,
    #: ``ifGenerationMatch``: docs/generations.rst) to requests that say
    #: ``A2A-Version: 1.1``, and declare it in the card.  A draft: it may still change.
    protocol_draft: bool = False
    #: Longest time a 1.1 long-poll GetTask (``currentGeneration``) holds its answer
    #: before it answers with the task as it is.
    long_poll_timeout: float = 30.0
    #: Serve the public card at the host root ``/.well-known/...`` (the first agent does by default).
    root_card: Optional[bool] = None
    #: Serve the union card: the 1.0 card plus the members 0.3 and 0.1 clients read
    #: (``url``, ``preferredTransport``, ``protocolVersion``, ...).  False serves the pure
    #: 1.0 card, valid against the 1.0 schema (strict 1.0 parsers refuse unknown members),
    #: which 0.3 clients can no longer read.
    legacy_card: bool = True
    #: Refuse callers without credentials when an authenticator is set (401); False serves
    #: them as one shared anonymous caller.
    auth_required: bool = True
    #: Largest request body in bytes (larger: HTTP 413 with a JSON error).
    max_content_length: int = 16 * 1024 * 1024
    #: Seconds a request body may take to arrive whole (slower: HTTP 408, under gevent).
    body_timeout: float = 30.0
    #: Most parts in one message.
    max_parts: int = 100
    #: Largest inline file (a ``raw`` part), in bytes after base64 decoding.
    max_file_size: int = 10 * 1024 * 1024
    #: Messages kept in a task's history (the oldest go first; 0 keeps all).
    max_history: int = 1000
    #: Most bytes one task may hold: its messages and artifacts, counted as content
    #: (text in UTF-8, inline files as base64, data and metadata as JSON).  A message
    #: that would take a task past it is refused (JSON-RPC -32602, REST 413); an
    #: executor's emission past it raises ``TaskTooLargeError`` in the executor.
    #: 0: no limit (a store's own limits then remain: 1 GiB per shelve record, 512 MB
    #: per Redis value).
    max_task_bytes: int = 64 * 1024 * 1024
    #: Open streams per authenticated caller in one worker process (0: no limit).
    max_streams_per_caller: int = 100
    #: Open streams of all anonymous callers together in one worker process (0: no
    #: limit): what a crowd without credentials may hold of a worker's memory and
    #: connections.  Unset: a quarter of the worker's connections, gunicorn's
    #: ``--worker-connections`` as its command line (or ``GUNICORN_CMD_ARGS``) says it
    #: (1000 by default: 250 streams), 250 elsewhere.
    max_anonymous_streams: Optional[int] = None
    #: Webhooks one task may have (0: no limit): each of its events is pushed to each.
    max_push_configs: int = 10
    #: Process-wide, opt-in: run Python's full garbage collections only after this many
    #: middle-generation ones (``gc.set_threshold``'s third value; Python's own is 10).
    #: Stored tasks are many long-lived objects that every full pass walks again; 0
    #: leaves the interpreter's setting alone.  The largest value of any agent wins.
    gc_full_every: int = 0
    #: Serve the inspector page at ``<prefix>/inspector/``; None: only while ``app.debug``.
    inspector: Optional[bool] = None
    #: Serve the Prometheus metrics (``a2a_requests_total``, ...) at this path of the app,
    #: e.g. ``/metrics`` (needs ``pip install a2a-flask[prometheus]``); empty: not served.
    metrics_path: str = ""
    #: Serve health endpoints at this path of the app, e.g. ``/healthz``: liveness there,
    #: readiness (each agent's store answers, its worker is not stopping) at
    #: ``<path>/ready``; empty: not served (see :mod:`a2a_flask.web.health`).
    health_path: str = ""
    #: Let webhooks call private, loopback and link-local addresses (development only).
    push_allow_private: bool = False
    #: Hosts webhooks may call although they are not public: exact names, ``*.example.com``,
    #: IP addresses or CIDR networks (a list, or one string separated by commas or spaces).
    push_allowed_hosts: HostList = ()
    #: Seconds a webhook has to answer one push (connecting: at most 5 of them).
    push_timeout: float = 10.0
    #: Failed pushes in a row after which a webhook is given up on.
    push_max_attempts: int = 8
    #: Seconds before the first retry of a failed push; each next one waits about twice
    #: as long (with jitter), up to ``A2A_PUSH_RETRY_MAX_DELAY``.
    push_retry_delay: float = 1.0
    push_retry_max_delay: float = 300.0
    #: Sign the agent card (spec §8.4) with this private key (PEM text or bytes, or a
    #: ``cryptography`` EC P-256 or RSA key; needs ``pip install a2a-flask[signing]``);
    #: the public key is served at ``<prefix>/.well-known/jwks.json``.
    card_signing_key: Optional[SigningKey] = None
    #: Sign pushes with this private key (PEM text or bytes, or a ``cryptography`` EC P-256
    #: or RSA key; needs ``pip install a2a-flask[signing]``); the public key is served at
    #: ``<prefix>/.well-known/jwks.json``.
    push_signing_key: Optional[SigningKey] = None


    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "Settings":
        """Read ``A2A_*`` keys from a Flask config; non-None ``overrides`` win.

        Each value is read by its field's declared type (see :data:`KINDS`).
        :raises ValueError: for a value its field cannot read, or one out of range.
        :raises TypeError: for an override that names no setting.
        """
        hints = field_types()
        unknown = sorted(set(overrides) - set(hints))
        if unknown:
            raise TypeError(f"unknown A2A setting(s): {', '.join(unknown)}")
        values: Dict[str, Any] = {}
        for name, tp in hints.items():
            if overrides.get(name) is not None:
                values[name] = read_value(f"{name}=", tp, overrides[name])
            elif config_key(name) in config:
                values[name] = read_value(config_key(name), tp, config[config_key(name)])
        settings = cls(**values)
        prefix = settings.url_prefix.strip("/")
        settings.url_prefix = "/" + prefix if prefix else ""
        settings.public_url = settings.public_url.rstrip("/")
        settings._check_ranges()
        return settings

    def _check_ranges(self) -> None:
        for names, ok, rule in _RANGES:
            for name in names:
                value = getattr(self, name)
                if value is not None and not ok(value):  # None: unset, worked out later
                    raise ValueError(f"{config_key(name)} must be {rule}, got {value!r}")


#: The longest store scope (``A2A_STORE_SCOPE``): it goes before the caller's tenant in
#: each stored task's tenant column, which holds 255 characters.
MAX_SCOPE_LENGTH = 64
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")

#: The values of ``A2A_RUNNER``: where executors run.
RUNNERS = ("inline", "celery")
_AT_LEAST_ONE = ("max_content_length", "max_parts", "max_file_size", "push_max_attempts",
                 "store_pool_size", "store_writer_pool_size")
_NOT_NEGATIVE = ("task_ttl", "card_max_age", "max_history", "max_task_bytes",
                 "max_streams_per_caller", "max_anonymous_streams", "max_push_configs",
                 "gc_full_every", "store_grace")
_POSITIVE = ("store_timeout", "sse_keepalive", "blocking_timeout", "long_poll_timeout",
             "cancel_grace", "lease_ttl", "idempotency_ttl",
             "body_timeout", "push_timeout", "push_retry_delay", "push_retry_max_delay")
_RANGES: Tuple[Tuple[Tuple[str, ...], Callable[[Any], bool], str], ...] = (
    (_AT_LEAST_ONE, lambda v: v >= 1, ">= 1"),
    (_NOT_NEGATIVE, lambda v: v >= 0, ">= 0"),
    (_POSITIVE, lambda v: v > 0, "> 0"),
    (("runner",), lambda v: v in RUNNERS, " or ".join(RUNNERS)),
    (("store_scope",), lambda v: scope_problem(v) == "",
     f"at most {MAX_SCOPE_LENGTH} characters without control characters"),
)


def scope_problem(scope: str) -> str:
    """What is wrong with a store scope ('' if nothing)."""
    if len(scope) > MAX_SCOPE_LENGTH:
        return f"is longer than {MAX_SCOPE_LENGTH} characters"
    return "contains control characters" if _CONTROL.search(scope) else ""


#: The default agent's name: its tasks are stored with an empty scope, as every task
#: was before scopes existed.
DEFAULT_AGENT = "a2a"


def store_scope(agent: str, setting: str) -> str:
    """The store scope of the agent named ``agent`` (``A2A_STORE_SCOPE`` is ``setting``):
    the name its tasks are stored under, empty for :data:`DEFAULT_AGENT`."""
    name = setting or agent
    return "" if name == DEFAULT_AGENT else name


def config_key(name: str) -> str:
    """``inspector`` -> ``A2A_INSPECTOR``."""
    return "A2A_" + name.upper()


def field_types() -> Dict[str, Any]:
    """Each setting's name and declared type, in declaration order."""
    hints = get_type_hints(Settings)
    return {f.name: hints[f.name] for f in fields(Settings)}


def field_default(name: str) -> Any:
    """The default value of one setting."""
    for f in fields(Settings):
        if f.name == name:
            return f.default if f.default is not MISSING else None
    raise KeyError(name)


# ------------------------------------------------------------------ reading by type


class _Reject(Exception):
    """A value the reader of a kind cannot read."""


@dataclass(frozen=True)
class Kind:
    """How one declared type is read: its name, the spellings it takes, its reader."""

    name: str
    accepted: str
    read: Callable[[Any], Any]


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")
_UNSET = ("", "none")


def _read_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    # Flask's from_prefixed_env reads FLASK_A2A_X=1 as the JSON number 1.
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise _Reject


def _read_int(value: Any) -> int:
    if isinstance(value, bool):
        raise _Reject  # True is an int to Python, never a size to a person
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*[+-]?\d+(_\d+)*\s*", value):
        return int(value)
    number = _read_float(value)
    if not number.is_integer():
        raise _Reject
    return int(number)


def _read_float(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise _Reject
    try:
        number = float(value)
    except ValueError:
        raise _Reject from None
    if not math.isfinite(number):
        raise _Reject
    return number


def _read_str(value: Any) -> str:
    if not isinstance(value, str):
        raise _Reject
    return value


def _read_hosts(value: Any) -> HostList:
    if isinstance(value, str):
        return tuple(entry for entry in re.split(r"[\s,]+", value) if entry)
    if isinstance(value, (list, tuple, set, frozenset)) and all(isinstance(v, str) for v in value):
        return tuple(entry.strip() for entry in value if entry.strip())
    raise _Reject


def _read_key(value: Any) -> SigningKey:
    if isinstance(value, (str, bytes)):
        text = value if isinstance(value, str) else value.decode("ascii", "replace")
        if "-----BEGIN" in text and "PRIVATE KEY-----" in text:
            return value
        raise _Reject
    if isinstance(value, PrivateKeyObject):
        return value
    raise _Reject


#: How each declared type is read.  ``Optional[T]`` reads as ``T`` and also takes
#: None, ``"none"`` (any case) or an empty string as "not set".
KINDS: Dict[Any, Kind] = {
    bool: Kind("boolean", "true/false, 1/0, yes/no, on/off (any case)", _read_bool),
    int: Kind("integer", "a whole number (100, \"100\")", _read_int),
    float: Kind("number", "a number (2.5, \"2.5\")", _read_float),
    str: Kind("string", "a string", _read_str),
    HostList: Kind("host list", "a list of strings, or one string separated by commas "
                   "or spaces", _read_hosts),
    SigningKey: Kind("private key", "PEM text or bytes (-----BEGIN ... PRIVATE KEY-----) "
                     "or a cryptography private key object", _read_key),
}


def _optional_of(tp: Any) -> Any:
    """``T`` for ``Optional[T]``, else None."""
    if get_origin(tp) is Union and type(None) in get_args(tp):
        rest = tuple(a for a in get_args(tp) if a is not type(None))
        return rest[0] if len(rest) == 1 else Union[rest]
    return None


def kind_of(tp: Any) -> Kind:
    """The :class:`Kind` of a declared type; ``Optional[T]`` adds "unset" to ``T``'s."""
    inner = _optional_of(tp)
    if inner is None:
        if tp not in KINDS:
            raise TypeError(f"no reader for settings of type {tp!r}: add one to KINDS")
        return KINDS[tp]
    base = kind_of(inner)

    def read(value: Any) -> Any:
        if value is None or (isinstance(value, str) and value.strip().lower() in _UNSET):
            return None
        return base.read(value)

    return Kind(base.name + " or unset", base.accepted + "; none or empty for unset", read)


def read_value(key: str, tp: Any, value: Any) -> Any:
    """``value`` read as type ``tp``; ``key`` names the setting in the error."""
    kind = kind_of(tp)
    try:
        return kind.read(value)
    except _Reject:
        secret = kind.name.startswith(KINDS[SigningKey].name) and isinstance(value, (str, bytes))
        # Never echo what may be key material into a log.
        shown = f"<{type(value).__name__} of {len(value)} characters>" if secret else repr(value)
        raise ValueError(f"{key}{'' if key.endswith('=') else '='}{shown} is not "
                         f"a valid {kind.name}: use {kind.accepted}") from None


__all__ = ["Settings", "Kind", "KINDS", "HostList", "SigningKey", "PrivateKeyObject",
           "config_key", "field_types", "field_default", "kind_of", "read_value"]
