"""Every ``A2A_*`` configuration key, its default, and how it is read.

Keys are read once, in ``init_app``, from ``app.config``; arguments given to
:class:`~a2a_flask.A2A` win over them.  With ``app.config.from_prefixed_env()``
an environment variable such as ``FLASK_A2A_STORE=shelve:///tmp/a2a`` sets
``A2A_STORE`` (Flask parses numbers and booleans in such values as JSON).
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping, Optional


@dataclass
class Settings:
    """The configuration of one agent; attribute ``x`` is config key ``A2A_X``."""

    #: Where the JSON-RPC endpoint is mounted; the REST binding lives under ``<prefix>/rest``.
    url_prefix: str = "/a2a"
    #: The public base URL (``https://agents.example.com``) used in the card behind a proxy;
    #: empty means "the URL the request came in on".
    public_url: str = ""
    #: The task store, as a URL: ``memory://`` or ``shelve:///path/to/file``.
    store: str = "memory://"
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
    #: Seconds finished tasks are kept (0 keeps them forever).
    task_ttl: float = 3600.0
    #: ``Cache-Control: max-age`` of the agent card, in seconds.
    card_max_age: int = 300
    #: Whether streams end at AUTH_REQUIRED (credentials may arrive out of band).
    close_stream_on_auth_required: bool = True
    #: Serve a 1.0 method name sent without ``A2A-Version`` as 1.0 instead of answering
    #: -32009 (a missing header means 0.3, spec §3.6.2).
    lenient_version: bool = False
    #: Serve the public card at the host root ``/.well-known/...`` (the first agent does by default).
    root_card: Optional[bool] = None
    #: Refuse callers without credentials when an authenticator is set (401); False serves
    #: them as one shared anonymous caller.
    auth_required: bool = True
    #: Largest request body in bytes (larger: HTTP 413 with a JSON error).
    max_content_length: int = 16 * 1024 * 1024
    #: Most parts in one message.
    max_parts: int = 100
    #: Largest inline file (a ``raw`` part), in bytes after base64 decoding.
    max_file_size: int = 10 * 1024 * 1024
    #: Messages kept in a task's history (the oldest go first; 0 keeps all).
    max_history: int = 1000
    #: Open streams per authenticated caller in one worker process (0: no limit).
    max_streams_per_caller: int = 100
    #: Serve the inspector page at ``<prefix>/inspector/``; None: only while ``app.debug``.
    inspector: Optional[bool] = None
    #: Let webhooks call private, loopback and link-local addresses (development only).
    push_allow_private: bool = False
    #: Hosts webhooks may call although they are not public: exact names, ``*.example.com``,
    #: IP addresses or CIDR networks (a list, or one string separated by commas or spaces).
    push_allowed_hosts: Any = ()
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
    card_signing_key: Any = None
    #: Sign pushes with this private key (PEM text or bytes, or a ``cryptography`` EC P-256
    #: or RSA key; needs ``pip install a2a-flask[signing]``); the public key is served at
    #: ``<prefix>/.well-known/jwks.json``.
    push_signing_key: Any = None

    @classmethod
    def from_config(cls, config: Mapping[str, Any], **overrides: Any) -> "Settings":
        """Read ``A2A_*`` keys from a Flask config; non-None ``overrides`` win."""
        values = {}
        for f in fields(cls):
            key = "A2A_" + f.name.upper()
            if overrides.get(f.name) is not None:
                values[f.name] = overrides[f.name]
            elif key in config:
                values[f.name] = config[key]
        settings = cls(**values)
        settings.url_prefix = "/" + settings.url_prefix.strip("/") if settings.url_prefix.strip("/") else ""
        settings.public_url = settings.public_url.rstrip("/")
        settings.task_ttl = float(settings.task_ttl)
        if settings.task_ttl < 0:
            raise ValueError(f"A2A_TASK_TTL must be >= 0, got {settings.task_ttl}")
        settings.push_allow_private = _flag(settings.push_allow_private)
        settings.auth_required = _flag(settings.auth_required)
        for name in ("max_content_length", "max_parts", "max_file_size", "push_max_attempts"):
            value = int(getattr(settings, name))
            if value < 1:
                raise ValueError(f"A2A_{name.upper()} must be >= 1, got {value}")
            setattr(settings, name, value)
        for name in ("max_history", "max_streams_per_caller"):
            value = int(getattr(settings, name))
            if value < 0:
                raise ValueError(f"A2A_{name.upper()} must be >= 0 (0: no limit), got {value}")
            setattr(settings, name, value)
        for name in ("sse_keepalive", "blocking_timeout", "cancel_grace", "lease_ttl",
                     "push_timeout", "push_retry_delay", "push_retry_max_delay"):
            value = float(getattr(settings, name))
            if value <= 0:
                raise ValueError(f"A2A_{name.upper()} must be positive, got {value}")
            setattr(settings, name, value)
        settings.card_max_age = int(settings.card_max_age)
        return settings


def _flag(value: Any) -> bool:
    """A boolean from config or an environment string ("1", "true", "yes", "on")."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
