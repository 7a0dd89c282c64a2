"""The ``flask a2a`` group and what its commands share: finding the app and the
agent, one-line errors, and how tasks are read and shown."""
from __future__ import annotations

import contextlib
import functools
import json
import sys
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Tuple, TypeVar

import click
from flask import Flask, current_app
from flask.cli import NoAppException, ScriptInfo

from ...protocol.codec import encode
from ...protocol.errors import A2AError, StoreUnavailable
from ...protocol.models import Message, Part, TaskState
from ...stores import StoreError, TaskQuery, TaskRecord, TaskStore
from ...stores.base import decode_page_token, encode_page_token, in_scope, outage_cause, unscoped
from ...stores.urls import safe_text

F = TypeVar("F", bound=Callable[..., Any])

#: ListTasks' largest page: what one store call returns at most.
PAGE = 100


class Failure(click.ClickException):
    """A command's error: ``Error: <message>`` on stderr, exit status 1."""


# ------------------------------------------------------------------ the group


@click.group("a2a")
@click.option("--agent", "agent_name", metavar="NAME", default=None,
              help="The agent to work on (its name=...; needed when the app has several).")
@click.pass_context
def a2a(ctx: click.Context, agent_name: Optional[str]) -> None:
    """Inspect and maintain the task stores of this app's A2A agents."""
    ctx.meta["a2a_agent"] = agent_name


def app_in_context() -> Flask:
    """The app the command runs for, with its app context pushed.

    Loading the app runs ``init_app``, which opens the store: an error there
    (a store that is down, a setting that cannot be read) is one line here.
    """
    if current_app:
        app: Flask = current_app._get_current_object()  # type: ignore[attr-defined]
        return app
    ctx = click.get_current_context()
    info = ctx.find_object(ScriptInfo)
    if info is None:
        raise Failure("no Flask app: run this as flask --app yourapp a2a ...")
    try:
        app = info.load_app()
    except NoAppException as exc:  # Flask's own: a usage error (exit 2) with a traceback
        raise Failure(f"the app did not load: {not_loaded(exc)}") from None
    except click.ClickException:
        raise
    except Exception as exc:  # whatever the app's module raised while loading
        raise Failure(f"the app did not load: {reason(exc)}") from None
    ctx.with_resource(app.app_context())
    return app


def not_loaded(exc: NoAppException) -> str:
    """Why Flask could not load the app, in one line.

    An ``ImportError`` the app's module raised (a2a_flask's own for a setting
    whose optional package is missing says what to install) comes wrapped in
    Flask's error with its traceback: the ``ImportError`` alone is shown.
    """
    inner = exc.__context__
    if isinstance(inner, ImportError):
        return reason(inner)
    lines = exc.format_message().strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def agents() -> Dict[str, Any]:
    """The app's agents by name (:class:`~a2a_flask.web.agent_state.AgentState`)."""
    found: Dict[str, Any] = app_in_context().extensions.get("a2a", {})
    if not found:
        raise Failure("this app has no A2A agent (no A2A(...).init_app(app) ran)")
    return found


def chosen_agent() -> Any:
    """The agent ``--agent`` names, or the app's only one."""
    found = agents()
    name = click.get_current_context().meta.get("a2a_agent")
    if name is None:
        if len(found) > 1:
            raise Failure(f"this app has several agents ({', '.join(sorted(found))}): "
                          "choose one with flask a2a --agent NAME ...")
        return next(iter(found.values()))
    if name not in found:
        raise Failure(f"no agent named {name!r} in this app (it has: "
                      f"{', '.join(sorted(found))})")
    return found[name]


def one_line_errors(fn: F) -> F:
    """Turn the errors a store or the engine raises into one line and exit status 1."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except click.ClickException:
            raise
        except (StoreError, StoreUnavailable, A2AError, OSError, ValueError) as exc:
            raise Failure(reason(exc)) from None

    return wrapper  # type: ignore[return-value]


def reason(exc: BaseException) -> str:
    """An exception as one line: its message, with the cause a store outage hides."""
    if isinstance(exc, StoreUnavailable) and exc.__cause__ is not None:
        return f"task store unavailable: {outage_cause(exc.__cause__)}"
    text = safe_text(" ".join(str(exc).split())) or type(exc).__name__  # it may quote a URL
    return text if isinstance(exc, (StoreError, A2AError)) else f"{type(exc).__name__}: {text}"


# ------------------------------------------------------------------ reading tasks


def parse_state(value: Optional[str]) -> Optional[TaskState]:
    """``completed``, ``COMPLETED`` or ``TASK_STATE_COMPLETED`` -> the state."""
    if value is None:
        return None
    word = value.strip().upper().replace("-", "_")
    word = word if word.startswith("TASK_STATE_") else "TASK_STATE_" + word
    try:
        state = TaskState(word)
    except ValueError:
        state = TaskState.UNSPECIFIED
    if state is TaskState.UNSPECIFIED:
        names = ", ".join(short_state(s) for s in TaskState if s is not TaskState.UNSPECIFIED)
        raise Failure(f"unknown state {value!r}: use one of {names}")
    return state


def short_state(state: TaskState) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``input-required``."""
    return state.value[len("TASK_STATE_"):].lower().replace("_", "-")


def every_record(store: TaskStore, scope: Optional[str] = None) -> Iterator[TaskRecord]:
    """Every task of the store, whoever owns it (one load each); with ``scope``, only
    those of the agents with that store scope (``A2A_STORE_SCOPE``)."""
    for task_id in store.task_ids():
        record = store.load(task_id)
        # None: purged since it was listed.
        if record is not None and in_scope(record.tenant, scope):
            yield record


def agents_task(agent: Any, task_id: str) -> TaskRecord:
    """The agent's task ``task_id``: a task of another agent sharing its store is
    not the agent's to show or change, and is missing as one that is not there."""
    record: Optional[TaskRecord] = agent.store.load(task_id)
    if record is None or record.scope != agent.service.scope:
        raise Failure(f"no task {task_id!r} in the store")
    return record


def select(store: TaskStore, query: TaskQuery, limit: int, every_caller: bool,
           scope: str = "") -> Tuple[List[TaskRecord], int, str]:
    """Up to ``limit`` records, newest status first, from ``query.page_token`` on;
    how many match in all; and the token of the next page ('' on the last)."""
    if not every_caller:
        records: List[TaskRecord] = []
        while True:
            # Pages end where the listing ends, so the store's token starts the next one.
            query.page_size = min(PAGE, limit - len(records))
            page = store.list_tasks(query)
            records += page.records
            if not page.next_page_token or len(records) >= limit:
                return records, page.total_size, page.next_page_token
            query.page_token = page.next_page_token
    found = [r for r in every_record(store, scope)
             if (not query.context_id or r.context_id == query.context_id)
             and (query.state is None or r.state is query.state)]
    found.sort(key=lambda r: (r.updated_at, r.task_id), reverse=True)
    start = 0
    if query.page_token:  # the stores' own cursor: the (time, id) of the last task shown
        cursor = decode_page_token(query.page_token)
        start = next((i for i, r in enumerate(found) if (r.updated_at, r.task_id) < cursor),
                     len(found))
    shown = found[start:start + limit]
    more = start + limit < len(found)
    return shown, len(found), encode_page_token(shown[-1]) if more and shown else ""


@contextlib.contextmanager
def progress(length: int, label: str) -> Iterator[Callable[[int], None]]:
    """``advance(n)`` for a progress bar on stderr, drawn only when stderr is a
    terminal: a pipe or a log gets the command's result lines alone."""
    if not sys.stderr.isatty():
        yield lambda steps: None
        return
    with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
        yield bar.update


def printable(text: str) -> str:
    """Callers' text made safe for a terminal: control characters (an escape
    sequence could rewrite the screen or the window title) shown as ``\\x1b``."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in text)


def part_text(part: Part, width: int = 0) -> str:
    """A part as one line of printable text: its text, its data as JSON, or what
    file it is; cut to ``width`` characters when given."""
    if part.text is not None:
        text = part.text
    elif part.raw is not None or part.url is not None:
        what = part.filename or part.url or "file"
        text = f"[{what}{', ' + part.media_type if part.media_type else ''}]"
    else:
        text = json.dumps(encode(part).get("data"), ensure_ascii=False)  # printable() below
    text = printable(" ".join(text.split()))
    return text[:width - 1] + "…" if width and len(text) > width else text


def message_text(message: Optional[Message], width: int = 0) -> str:
    if message is None:
        return ""
    return part_text(Part(text=" ".join(part_text(p) for p in message.parts)), width)


def table(rows: List[List[str]]) -> Iterable[str]:
    """Rows as left-aligned columns (the first row is the header)."""
    rows = [[printable(cell) for cell in row] for row in rows]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        yield "  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()


def caller(record: TaskRecord) -> str:
    """Who owns a task, as the listing shows it (its tenant without the agent's scope)."""
    who = record.owner or "-"
    tenant = unscoped(record.tenant)[1]
    return f"{tenant}/{who}" if tenant else who


def emit_json(value: Any) -> None:
    # ASCII: a control character (C1 ones too) reaches the terminal escaped.
    click.echo(json.dumps(value, indent=2))
