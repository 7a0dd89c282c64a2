"""``flask a2a create-tables`` and ``copy-store``: work on whole stores."""
from __future__ import annotations

import os
import sys
import time
from typing import Optional
from urllib.parse import urlsplit

import click

from ...stores import MemoryStore, TaskStore, open_store
from ...stores.base import safe_url
from ...stores.copy import CopyTally, Outcome, copy_task
from .common import Failure, a2a, chosen_agent, one_line_errors, reason


@a2a.command("create-tables")
@one_line_errors
def create_tables_command() -> None:
    """Create the SQL store's tables where they are missing: a step of its own for
    deploy pipelines, before the servers start."""
    store = chosen_agent().store
    engine = getattr(store, "engine", None)
    if engine is None:
        kind = type(store).__name__
        click.echo(f"The {kind} keeps no SQL tables: nothing to create.")
        return
    import sqlalchemy as sa

    from ...stores.sql import create_all

    schema = getattr(store, "schema", None)
    try:
        before = set(sa.inspect(engine).get_table_names(schema=schema))
        create_all(engine, schema)
    except sa.exc.SQLAlchemyError as exc:
        cause = getattr(exc, "orig", None) or exc  # the driver's own words
        raise Failure(f"cannot create the tables: {reason(cause)}") from None
    names = [store.tasks, store.events, store.leases, store.targets, store.claims]
    made = [t.name for t in names if t.name not in before]
    where = engine.url.render_as_string(hide_password=True) + (f" (schema {schema})"
                                                              if schema else "")
    # The store's first call creates missing tables too, unless the app gave A2A a
    # SQLStore made with create_tables=False.
    created = f"Created {', '.join(made)}; a" if made else "A"
    click.echo(f"{created}ll {len(names)} tables are in place in {where}.")


@a2a.command("copy-store")
@click.argument("source_url")
@click.option("--to", "target_url", metavar="TARGET_URL", default=None,
              help="The store to copy to (default: the agent's own store).")
@one_line_errors
def copy_store_command(source_url: str, target_url: Optional[str]) -> None:
    """Copy every task of SOURCE_URL, with its whole event log, owner, tenant,
    webhooks and delivery cursors, into the agent's store (or --to's).

    Safe to run again: tasks the target already holds are skipped, tasks an
    interrupted run left half-copied are finished.  Stop the servers writing
    to the source first (or run it once more after they stop).
    """
    agent = chosen_agent()
    for url in (source_url, target_url):
        if url is not None and url.split(":", 1)[0] == "memory":
            raise Failure("memory:// lives in one process: there is nothing to copy "
                          "from or to it from here")
    own = agent.store_url or f"the agent's {type(agent.store).__name__}"
    target_name = safe_url(target_url or own)
    if target_url is None and isinstance(agent.store, MemoryStore):
        raise Failure("the agent's store is memory://: give the target with --to URL")
    if _same(target_url or agent.store_url, source_url):
        raise Failure("the source and the target are the same store")
    _check_exists(source_url)
    source = _open(source_url, "source")
    try:
        target = agent.store if target_url is None else _open(
            target_url, "target", task_ttl=agent.settings.task_ttl)
        try:
            _copy_all(source, target, safe_url(source_url), target_name)
        finally:
            if target is not agent.store:
                target.close()
    finally:
        source.close()


def _same(one: str, other: str) -> bool:
    """Whether two store URLs name the same store (file stores by their absolute path)."""
    def where(url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme in ("sqlite", "shelve"):
            return parts.scheme + ":" + os.path.abspath(parts.netloc + parts.path)
        return url
    return bool(one) and where(one) == where(other)


def _check_exists(url: str) -> None:
    """A file store named as the source must be there (opening one creates it)."""
    parts = urlsplit(url)
    path = parts.netloc + parts.path
    files = {"sqlite": [path], "shelve": [path + ".log", path + ".dat"]}.get(parts.scheme)
    if files and not any(os.path.exists(name) for name in files):
        raise Failure(f"there is no {parts.scheme} store at {os.path.abspath(path)}")


def _open(url: str, role: str, task_ttl: float = 0.0) -> TaskStore:
    try:
        return open_store(url, task_ttl=task_ttl)
    except Exception as exc:  # a driver's own error types, unknown to us
        raise Failure(f"cannot open the {role} store {safe_url(url)}: {reason(exc)}") from None


def _copy_all(source: TaskStore, target: TaskStore, source_name: str, target_name: str) -> None:
    started = time.monotonic()
    try:
        ids = source.task_ids()
    except NotImplementedError as exc:
        raise Failure(str(exc)) from None
    tally = CopyTally()
    with click.progressbar(ids, label=f"Copying {len(ids)} tasks",
                           file=sys.stderr) as bar:
        for task_id in bar:
            tally.add(task_id, copy_task(source, target, task_id))
    counts = tally.outcomes
    click.echo(f"Copied {counts[Outcome.COPIED]} tasks from {source_name} to {target_name} "
               f"in {time.monotonic() - started:.1f}s: {tally.events} events, "
               f"{tally.webhooks} webhooks; {counts[Outcome.RESUMED]} finished from an earlier "
               f"run, {counts[Outcome.PRESENT]} already there.")
    if tally.conflicts:
        raise Failure(f"{len(tally.conflicts)} tasks were not copied, the target holds other "
                      f"tasks under their ids: {'; '.join(tally.conflicts[:10])}"
                      f"{' ...' if len(tally.conflicts) > 10 else ''}")
