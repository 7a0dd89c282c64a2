"""``flask a2a create-tables`` and ``copy-store``: work on whole stores."""
from __future__ import annotations

import functools
import os
import time
from typing import Any, Callable, List, Optional
from urllib.parse import urlsplit

import click

from ...stores import TaskStore, open_store
from ...stores.base import safe_url
from ...stores.copy import Admission, CopyTally, Outcome, copy_task
from ...stores.readonly import open_read_only
from .admission import ApiAdmission
from .common import Failure, a2a, chosen_agent, one_line_errors, printable, progress, reason


@a2a.command("create-tables")
@one_line_errors
def create_tables_command() -> None:
    """Create the store's tables where they are missing (TaskStore.create_tables): a
    step of its own for deploy pipelines, before the servers start."""
    store = chosen_agent().store
    tables = store.create_tables()  # a StoreError says why not, in one line
    if tables is None:
        click.echo(f"The {type(store).__name__} keeps no SQL tables: nothing to create.")
        return
    # The SQL store's first call creates missing tables too, unless the app gave A2A
    # a SQLStore made with create_tables=False.
    created = f"Created {', '.join(tables.created)}; a" if tables.created else "A"
    click.echo(f"{created}ll {len(tables.names)} tables are in place in {tables.where}.")


def _escaped(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The command's error with control characters shown as escapes: the source's
    ids and names reach it, and a terminal would obey an escape sequence."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except click.ClickException as exc:
            # click 8.2 types ``message`` as Final; the instance's own text is ours to escape.
            setattr(exc, "message", printable(exc.message))
            raise
    return wrapper


@a2a.command("copy-store")
@click.argument("source_url")
@click.option("--to", "target_url", metavar="TARGET_URL", default=None,
              help="The store to copy to (default: the agent's own store).")
@_escaped
@one_line_errors
def copy_store_command(source_url: str, target_url: Optional[str]) -> None:
    """Copy every task of SOURCE_URL, with its whole event log, owner, tenant,
    webhooks and delivery cursors, into the agent's store (or --to's).

    Safe to run again: tasks the target already holds are skipped, tasks an
    interrupted run left half-copied are finished.  Stop the servers writing
    to the source first (or run it once more after they stop).  The source is
    only read (nothing is created or changed there), and every task must pass
    the API's checks (ids, tenant, owner, size, webhooks): one that fails is
    skipped, named, and the command ends with status 1.
    """
    agent = chosen_agent()
    own = agent.store_url or f"the agent's {type(agent.store).__name__}"
    target_name = safe_url(target_url or own)
    if target_url is None and agent.store.process_local:
        raise Failure(f"the agent's store is {own}: give the target with --to URL")
    if _same(target_url or agent.store_url, source_url):
        raise Failure("the source and the target are the same store")
    _check_exists(source_url)
    source = _open(source_url, "source", read_only=True)
    try:
        target = agent.store if target_url is None else _open(
            target_url, "target", task_ttl=agent.settings.task_ttl)
        try:
            _copy_all(source, target, safe_url(source_url), target_name, ApiAdmission(agent))
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


def _open(url: str, role: str, task_ttl: float = 0.0, read_only: bool = False) -> TaskStore:
    """The store ``url`` names (``read_only``: nothing created, migrated or written
    there), refused if it lives in this process only (this command's own copy of it
    holds nothing a server wrote)."""
    try:
        store = open_read_only(url) if read_only else open_store(url, task_ttl=task_ttl)
    except Exception as exc:  # a driver's own error types, unknown to us
        raise Failure(f"cannot open the {role} store {safe_url(url)}: {reason(exc)}") from None
    if store.process_local:
        store.close()
        raise Failure(f"{urlsplit(url).scheme}:// lives in one process: there is nothing to "
                      "copy from or to it from here")
    return store


def _copy_all(source: TaskStore, target: TaskStore, source_name: str, target_name: str,
              admission: Admission) -> None:
    started = time.monotonic()
    try:
        ids = source.task_ids()
    except NotImplementedError as exc:
        raise Failure(str(exc)) from None
    tally = CopyTally()
    with progress(len(ids), f"Copying {len(ids)} tasks") as advance:
        for task_id in ids:
            tally.add(task_id, copy_task(source, target, task_id, admission))
            advance(1)
    counts = tally.outcomes
    click.echo(printable(
        f"Copied {counts[Outcome.COPIED]} tasks from {source_name} to {target_name} "
        f"in {time.monotonic() - started:.1f}s: {tally.events} events, "
        f"{tally.webhooks} webhooks; {counts[Outcome.RESUMED]} finished from an earlier "
        f"run, {counts[Outcome.PRESENT]} already there."))
    failed = []
    if tally.refused:
        failed.append(f"{len(tally.refused)} tasks were refused, as the API would refuse "
                      f"them: {_listed(tally.refused)}")
    if tally.conflicts:
        failed.append(f"{len(tally.conflicts)} tasks were not copied, the target holds other "
                      f"tasks under their ids: {_listed(tally.conflicts)}")
    if failed:
        raise Failure(". ".join(failed))  # (escaped by _escaped)


def _listed(items: List[str]) -> str:
    return "; ".join(items[:10]) + (" ..." if len(items) > 10 else "")
