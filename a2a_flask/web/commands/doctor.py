"""``flask a2a doctor``: is each agent of the app set up to serve?

For each agent: whether its store answers and how fast, every setting that
differs from its default and where it came from (an ``A2A(...)`` argument,
``app.config``, or the environment through ``app.config.from_prefixed_env()``),
and warnings where a production server would be unsafe.  Exits 1 on an error
(and, with ``--strict``, on a warning).
"""
from __future__ import annotations

import json
import os
import time
from typing import Any, List, Optional, Tuple

import click
from flask import Flask

from ...config import config_key, field_default, field_types
from ...stores import store_label
from ...stores.base import safe_url
from ..deploy import configured_workers
from .common import Failure, a2a, agents, app_in_context, one_line_errors, reason

#: The settings whose values are never shown.
SECRET = ("card_signing_key", "push_signing_key")
#: An id no task has: the probe reads a task that is not there.
PROBE_ID = "a2a-doctor-probe"


def _from_environment(raw: str) -> Any:
    """A value as ``app.config.from_prefixed_env()`` reads it: JSON when it parses."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def source_of(name: str, agent: Any, config: Any) -> str:
    """Where an agent's setting came from."""
    if name in agent.arguments:
        return f"A2A({name}=...)"
    key = config_key(name)
    for variable in ("FLASK_" + key, key):
        raw = os.environ.get(variable)
        if raw is not None and config.get(key) in (raw, _from_environment(raw)):
            return f"environment {variable}"
    return "app.config"


def shown(name: str, value: Any) -> str:
    """A setting's value as doctor prints it: keys never, a store URL's password masked."""
    if name in SECRET:
        return "<private key>"
    if name == "store" and isinstance(value, str):
        return repr(safe_url(value))
    return repr(value)


def changed_settings(agent: Any, app: Flask) -> List[Tuple[str, str, str]]:
    """(key, value, where from) of each setting that differs from its default."""
    rows = []
    for name in field_types():
        value = getattr(agent.settings, name)
        if name == "store" and name in agent.arguments:  # A2A(store=...) wins over A2A_STORE
            value = agent.store_url or f"<{type(agent.store).__name__} object>"
        if value != field_default(name) or name in agent.arguments:
            rows.append((config_key(name), shown(name, value),
                         source_of(name, agent, app.config)))
    return rows


def probe(store: Any) -> Tuple[Optional[float], str]:
    """Milliseconds the store took to answer one read, or None and why it did not."""
    started = time.perf_counter()
    try:
        store.head(PROBE_ID)
    except Exception as exc:  # any backend's failure is the answer here
        return None, reason(exc)
    return (time.perf_counter() - started) * 1000, ""


def warnings_for(agent: Any, app: Flask) -> List[str]:
    """What would be unsafe in production."""
    settings = agent.settings
    found = []
    if agent.store.process_local:
        workers = configured_workers()
        many = (f"; the environment asks gunicorn for {workers} workers, and each would see "
                "only its own tasks" if workers and workers > 1 else "")
        label = store_label(agent.store, agent.store_url)
        found.append(f"the {label} keeps tasks in one process, lost when it stops"
                     f"{many}; set A2A_STORE to sqlite:///path (one host), "
                     "redis://... or postgresql://... (several)")
    signing = [config_key(name) for name in SECRET if getattr(settings, name) is not None]
    if signing and not settings.public_url and not agent.renderer.card.supported_interfaces:
        found.append(f"{' and '.join(signing)} set without A2A_PUBLIC_URL: the card's URLs "
                     "come from each request, so the card is served unsigned and the key "
                     "set's URL is not known in advance")
    if settings.inspector and not app.debug:
        found.append("A2A_INSPECTOR is on outside debug mode: anyone who reaches the app "
                     "can read and send tasks through the inspector page")
    if settings.push_allow_private:
        found.append("A2A_PUSH_ALLOW_PRIVATE is on: callers' webhooks may reach private, "
                     "loopback and link-local addresses (development only)")
    for name in field_types():
        key = config_key(name)
        if key in os.environ and key not in app.config and "FLASK_" + key not in os.environ:
            found.append(f"{key} is set in the environment but the app does not read it "
                         f"(name it FLASK_{key} and call app.config.from_prefixed_env())")
    return found


@a2a.command("doctor")
@click.option("--strict", is_flag=True, help="Exit 1 on warnings too.")
@one_line_errors
def doctor_command(strict: bool) -> None:
    """Check each agent: its store answers, its settings, and what is unsafe in production."""
    app = app_in_context()
    chosen = click.get_current_context().meta.get("a2a_agent")
    found = agents()
    if chosen is not None and chosen not in found:
        raise Failure(f"no agent named {chosen!r} in this app (it has: "
                      f"{', '.join(sorted(found))})")
    errors = warnings = 0
    for name, agent in sorted(found.items()):
        if chosen is not None and name != chosen:
            continue
        card = agent.renderer.card
        click.echo(f"Agent {name!r} ({card.name} {card.version}) at "
                   f"{agent.settings.url_prefix or '/'}")
        store_name = type(agent.store).__name__
        if agent.store_url:
            store_name += " " + shown("store", agent.store_url)
        millis, reason = probe(agent.store)
        if millis is None:
            errors += 1
            click.echo(f"  error  store {store_name} did not answer: {reason}")
        else:
            click.echo(f"  ok     store {store_name} answered in {millis:.1f} ms")
        for key, value, where in changed_settings(agent, app):
            click.echo(f"  set    {key} = {value}  ({where})")
        for text in warnings_for(agent, app):
            warnings += 1
            click.echo(f"  warn   {text}")
    summary = (f"{errors} error{'s' * (errors != 1)}, "
               f"{warnings} warning{'s' * (warnings != 1)}")
    if errors or (strict and warnings):
        raise Failure(summary)
    click.echo(summary + ".")
