"""``flask a2a tasks``, ``task``, ``cancel`` and ``purge``."""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import Optional

import click

from ...engine.service import check_id, view
from ...protocol.codec import encode
from ...protocol.errors import InvalidParamsError, TaskNotCancelableError
from ...protocol.models import ListTasksResponse, Part, format_timestamp, parse_timestamp
from ...stores import TaskQuery, store_label
from ...stores.base import decode_page_token, scoped, unscoped
from .common import (PAGE, Failure, a2a, agents_task, caller, chosen_agent, emit_json,
                     every_record, message_text, one_line_errors, parse_state, part_text,
                     printable, progress, select, short_state, table)


@a2a.command("tasks")
@click.option("--state", help="Only tasks in this state (completed, working, input-required...).")
@click.option("--context", "context_id", default="", help="Only tasks of this context id.")
@click.option("--tenant", default=None, help="Only this tenant's tasks (as stored).")
@click.option("--owner", default=None,
              help="Only this caller's tasks (the principal id as stored; '' for anonymous).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(min=1),
              help="Most tasks shown.")
@click.option("--page-token", default="", metavar="TOKEN",
              help="Start after the tasks already listed: the nextPageToken of --json.")
@click.option("--json", "as_json", is_flag=True,
              help="Print a 1.0 ListTasksResponse (tasks without their history).")
@one_line_errors
def tasks_command(state: Optional[str], context_id: str, tenant: Optional[str],
                  owner: Optional[str], limit: int, page_token: str, as_json: bool) -> None:
    """List the agent's tasks, most recently updated first.

    With --tenant or --owner the store's ListTasks index answers, exactly as
    for that caller; without them every task of every caller is listed
    (which reads each task of the store).  Tasks of other agents sharing the
    store (another A2A_STORE_SCOPE) are not listed.
    """
    agent = chosen_agent()
    wanted = parse_state(state)
    every_caller = tenant is None and owner is None
    scope = agent.service.scope
    query = TaskQuery(tenant=scoped(scope, tenant or ""), owner=owner or "",
                      context_id=context_id, state=wanted, page_token=page_token)
    check_id(context_id, "--context")
    if page_token:
        try:
            decode_page_token(page_token)
        except InvalidParamsError:
            raise Failure(f"--page-token {page_token!r} is not a nextPageToken this command "
                          "printed") from None
    records, total, next_token = select(agent.store, query, limit, every_caller, scope)
    if as_json:
        tasks = [view(r.task, 0) for r in records]
        emit_json(encode(ListTasksResponse(tasks, next_token, limit, total)))
        return
    if not records:
        label = store_label(agent.store, agent.store_url)
        click.echo("No tasks." + (f" (The {label} holds only this process's tasks: a "
                                  "server's are in its own memory.)"
                                  if agent.store.process_local else ""))
        return
    rows = [["ID", "STATE", "UPDATED", "CONTEXT", "OWNER", "EVENTS"]]
    rows += [[r.task_id, short_state(r.state), r.updated_at, r.context_id, caller(r),
              str(r.seq)] for r in records]
    for line in table(rows):
        click.echo(line)
    whose = "every caller" if every_caller else f"tenant {tenant or ''!r}, owner {owner or ''!r}"
    click.echo(f"{len(records)} of {total} tasks ({whose}).")


def say(text: str) -> None:
    """One line of output, its callers' text made safe for a terminal."""
    click.echo(printable(text))


@a2a.command("task")
@click.argument("task_id")
@click.option("--history", "history_length", type=click.IntRange(min=0), default=None,
              help="Show only the newest N messages of the history.")
@click.option("--json", "as_json", is_flag=True, help="Print the task as a 1.0 Task object.")
@one_line_errors
def task_command(task_id: str, history_length: Optional[int], as_json: bool) -> None:
    """Show one task: its status, history, artifacts and webhooks."""
    check_id(task_id, "ID")
    agent = chosen_agent()
    store = agent.store
    record = agents_task(agent, task_id)
    task = record.task
    shown = view(task, history_length)
    history = shown.history
    if as_json:
        emit_json(encode(shown))
        return
    status = task.status
    lines = [("Task", task.id), ("Context", task.context_id),
             ("State", f"{short_state(status.state)} (since {status.timestamp or '?'})"),
             ("Owner", caller(record) if record.owner or unscoped(record.tenant)[1]
              else "- (anonymous)"),
             ("Created", record.created_at), ("Events", f"{record.seq} (dialect {record.dialect})")]
    if status.message is not None:
        lines.append(("Message", message_text(status.message, 200)))
    for label, value in lines:
        say(f"{label:<9} {value}")
    say(f"History   {len(history)} of {len(task.history)} messages")
    for message in history:
        say(f"  {message.role.value.lower().replace('role_', ''):<6} "
                   f"{message_text(message, 100)}")
    say(f"Artifacts {len(task.artifacts)}")
    for artifact in task.artifacts:
        text = " ".join(part_text(p) for p in artifact.parts)
        say(f"  {artifact.name or artifact.artifact_id}: {part_text(Part(text=text), 100)}")
    targets = store.push_targets(task_id)
    say(f"Webhooks  {len(targets)}")
    for target in targets:
        cursor = "gave up" if target.gave_up else f"delivered through event {target.delivered_seq}"
        say(f"  {target.config.id}: {target.config.url} ({cursor})")


# ------------------------------------------------------------------ changing tasks


@a2a.command("cancel")
@click.argument("task_id")
@one_line_errors
def cancel_command(task_id: str) -> None:
    """Cancel a task as its caller would: it becomes CANCELED now, streams and webhooks
    see it, and the process running its executor (this one or a server's) stops it."""
    check_id(task_id, "ID")
    agent = chosen_agent()
    runtime = agent.service.runtime
    before = agents_task(agent, task_id)
    try:
        record = runtime.cancel(task_id)
    except TaskNotCancelableError:
        head = runtime.store.head(task_id)
        state = short_state(head[1]) if head is not None else "gone"
        raise Failure(f"task {task_id} is already {state}: a finished task cannot be "
                      "canceled") from None
    click.echo(f"Task {task_id} canceled (it was {short_state(before.state)}); "
               f"event {record.seq} records it.")


_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", re.IGNORECASE)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def cutoff_of(finished_before: Optional[str], older_than: Optional[str]) -> str:
    """The timestamp before which finished tasks go, from either option."""
    if (finished_before is None) == (older_than is None):
        raise Failure("give one of --finished-before DATE or --older-than AGE (e.g. 7d)")
    if older_than is not None:
        match = _DURATION.fullmatch(older_than)
        if match is None:
            raise Failure(f"--older-than {older_than!r} is not an age: use a number and "
                          "s, m, h, d or w (90m, 12h, 7d, 2w)")
        seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
        return format_timestamp(datetime.now(timezone.utc) - timedelta(seconds=seconds))
    text = (finished_before or "").strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        text += "T00:00:00Z"
    try:
        return parse_timestamp(text)
    except ValueError:
        raise Failure(f"--finished-before {finished_before!r} is not a date: use 2026-01-31 "
                      "or an RFC 3339 time such as 2026-01-31T12:00:00Z") from None


@a2a.command("purge")
@click.option("--finished-before", metavar="DATE",
              help="Delete tasks that finished before this date or RFC 3339 time (UTC).")
@click.option("--older-than", metavar="AGE", help="Delete tasks finished longer ago than "
              "this (90m, 12h, 7d, 2w).")
@click.option("--dry-run", is_flag=True, help="Count them, delete nothing.")
@one_line_errors
def purge_command(finished_before: Optional[str], older_than: Optional[str],
                  dry_run: bool) -> None:
    """Delete finished tasks (completed, failed, canceled, rejected) last updated
    before a time, with their logs and webhooks; running tasks are never touched.
    Like A2A_TASK_TTL it deletes the chosen agent's tasks only: other agents sharing
    its store (another A2A_STORE_SCOPE) keep theirs."""
    cutoff = cutoff_of(finished_before, older_than)
    agent = chosen_agent()
    store, scope = agent.store, agent.service.scope
    stamps = sorted(r.updated_at for r in every_record(store, scope)
                    if r.state.terminal and r.updated_at < cutoff)
    click.echo(f"{len(stamps)} finished tasks last updated before {cutoff}"
               f"{' would be deleted (dry run).' if dry_run else '.'}")
    if dry_run or not stamps:
        return
    gone = 0
    with progress(len(stamps), "Deleting") as advance:
        # The store deletes by time: step through the tasks' own times, oldest
        # first, a few hundred tasks at a time, so the bar moves as they go.
        for bound in stamps[PAGE * 5::PAGE * 5] + [cutoff]:
            count = store.purge(bound, scope=scope)
            gone += count
            advance(count)
    click.echo(f"Deleted {gone} tasks.")


# ------------------------------------------------------------------ the store itself
