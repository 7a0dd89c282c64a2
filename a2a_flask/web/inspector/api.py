"""The inspector's own read-only JSON: task rows, one task's timeline, its files.

What the agent's API does not say and the page needs: who a task belongs to
(owner, tenant), when it was created, each event of its log in order, and each
webhook's delivery cursor.  Every view identifies the caller with the agent's
authentication hook, and reaches tasks only through the agent's service
(``list_tasks`` for a page, ``visible`` for one task), so a caller sees exactly
the tasks the API would show it, and an unknown task and someone else's look
the same (404).  Every answer is bounded: at most :data:`MAX_PAGE_SIZE` rows,
:data:`MAX_EVENTS` log entries and :data:`MAX_HISTORY` messages per request,
texts cut at :data:`MAX_TEXT` characters; file contents are never inlined (a
link fetches one part, as an attachment).
"""
from __future__ import annotations

import io
import json
import re
from urllib.parse import quote, urlencode
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from flask import Response, request, send_file

from ...engine.service import AgentService
from ...protocol.calls import CONTROL_CHARACTER, CallContext
from ...protocol.codec import encode
from ...protocol.errors import A2AError, InvalidParamsError, TaskNotFoundError
from ...protocol.events import entry_moves_generation
from ...protocol.models import (
    Artifact,
    ListTasksRequest,
    Message,
    Part,
    Role,
    Task,
    TaskArtifactUpdateEvent,
    TaskState,
    TaskStatusUpdateEvent,
)
from ...stores.base import TaskRecord
from ..auth import Authentication
from ..routes import error_response

__all__ = ["list_view", "detail_view", "file_view", "answer", "MAX_PAGE_SIZE", "MAX_EVENTS",
           "MAX_HISTORY"]

#: Rows per page: the page asks for 20, a caller for at most this.
MAX_PAGE_SIZE = 50
DEFAULT_PAGE_SIZE = 20
#: Log entries read per timeline request (the page asks again from the last one).
MAX_EVENTS = 1000
DEFAULT_EVENTS = 200
#: Newest messages of the conversation per request.
MAX_HISTORY = 200
DEFAULT_HISTORY = 30
#: Characters of one text (a message's, an artifact's joined text parts) sent whole.
MAX_TEXT = 8000
#: Characters of a short text: what was asked, a status message in a row or the timeline.
SHORT_TEXT = 300
#: Artifacts shown per task, and parts per message or artifact.
MAX_ARTIFACTS = 50
MAX_PARTS = 50
#: Characters of a data part's JSON sent as JSON; a larger one is sent cut, as text.
MAX_DATA = 20000
MAX_TOKEN = 1024

#: What the page calls each kind of part.
KINDS = {"text": "text", "raw": "file", "url": "link", "data": "data"}
STATES = {s.name.lower().replace("_", "-"): s for s in TaskState if s is not TaskState.UNSPECIFIED}

Agent = Callable[[], Tuple[AgentService, Authentication]]


def _bad(field: str, problem: str) -> InvalidParamsError:
    return InvalidParamsError(f"{field} {problem}", violations=[(field, problem)])


class Query:
    """The query string of one request, read strictly: unknown or repeated names, and
    values out of range, are a 400 naming the parameter."""

    def __init__(self, allowed: Iterable[str]) -> None:
        args = request.args
        for name in args:
            if name not in allowed:
                raise _bad(name, "is not a parameter of this view")
            if len(args.getlist(name)) > 1:
                raise _bad(name, "is given more than once")
        self.args = args

    def text(self, name: str, limit: int = 256) -> str:
        value = self.args.get(name, "")
        if len(value) > limit:
            raise _bad(name, f"is longer than {limit} characters")
        if CONTROL_CHARACTER.search(value):
            raise _bad(name, "contains control characters")
        return value

    def number(self, name: str, default: int, low: int, high: int) -> int:
        raw = self.args.get(name)
        if raw is None or raw == "":
            return default
        if not re.fullmatch(r"[0-9]{1,9}", raw):
            raise _bad(name, "must be a whole number")
        value = int(raw)
        if not low <= value <= high:
            raise _bad(name, f"must be between {low} and {high}")
        return value


def _context(query: Query, auth: Authentication) -> CallContext:
    """Who asks, in which tenant: the agent's hook decides who (401/403 as the API)."""
    principal = auth.identify()
    return CallContext(tenant=query.text("tenant"), principal=principal)


def _record(service: AgentService, task_id: str, ctx: CallContext) -> TaskRecord:
    """The task as the service lets this caller see it (404 otherwise)."""
    # The service's own visibility rule (tenant, owner and whatever else it checks).
    return service.visible(task_id, ctx)


def _cut(text: str, limit: int) -> Tuple[str, bool]:
    return (text, False) if len(text) <= limit else (text[:limit], True)


def _first_line(text: str, limit: int = SHORT_TEXT) -> str:
    line = text.strip().split("\n", 1)[0].strip()
    return line if len(line) <= limit else line[:limit - 1] + "…"


def _file_name(part: Part) -> str:
    return part.filename or "file"


def _file_size(part: Part) -> Optional[int]:
    return len(part.raw) if isinstance(part.raw, bytes) else None


def _parts(parts: Iterable[Part], link: Callable[[int], str]) -> Tuple[List[Dict[str, Any]], int]:
    """Parts as the page shows them: texts that follow each other joined (streamed
    chunks), each cut at MAX_TEXT; files as name, type, size and a link; data as JSON."""
    shown: List[Dict[str, Any]] = []
    dropped = 0
    for index, part in enumerate(parts):
        kind = part.kind
        if kind == "text" and shown and shown[-1]["kind"] == "text" and not shown[-1]["cut"]:
            joined, cut = _cut(shown[-1]["text"] + (part.text or ""), MAX_TEXT)
            shown[-1].update(text=joined, cut=cut)
            continue
        if len(shown) >= MAX_PARTS:
            dropped += 1
            continue
        if kind == "text":
            text, cut = _cut(part.text or "", MAX_TEXT)
            shown.append({"kind": "text", "text": text, "cut": cut})
        elif kind == "raw":
            shown.append({"kind": "file", "name": _file_name(part),
                          "mediaType": part.media_type, "size": _file_size(part),
                          "href": link(index)})
        elif kind == "url":
            shown.append({"kind": "url", "url": part.url, "name": part.filename,
                          "mediaType": part.media_type})
        else:
            shown.append({"kind": "data", **_bounded_json(part.data)})
    return shown, dropped


def _bounded_json(value: Any) -> Dict[str, Any]:
    """A caller's JSON (metadata) as the page shows it: whole, or its text cut."""
    if value is None:
        return {"data": None, "cut": False}
    text = json.dumps(encode(value), ensure_ascii=False, indent=2)
    if len(text) <= MAX_DATA:
        return {"data": encode(value), "cut": False}
    return {"text": text[:MAX_DATA], "cut": True}


def _message(message: Message, task_id: str) -> Dict[str, Any]:
    def link(index: int) -> str:
        return _file_href(task_id, "message", message.message_id, index)
    parts, dropped = _parts(message.parts, link)
    return {"messageId": message.message_id,
            "role": "user" if message.role is Role.USER else "agent",
            "parts": parts, "partsDropped": dropped,
            "metadata": _bounded_json(message.metadata) if message.metadata else None}


def _artifact(artifact: Artifact, task_id: str) -> Dict[str, Any]:
    def link(index: int) -> str:
        return _file_href(task_id, "artifact", artifact.artifact_id, index)
    parts, dropped = _parts(artifact.parts, link)
    return {"artifactId": artifact.artifact_id, "name": artifact.name,
            "description": _first_line(artifact.description), "parts": parts,
            "partsDropped": dropped,
            "metadata": _bounded_json(artifact.metadata) if artifact.metadata else None}


def _file_href(task_id: str, source: str, owner_id: str, index: int) -> str:
    """A link relative to the API's root (the page joins it to its API URL)."""
    return (f"tasks/{quote(task_id, safe='')}/file?"
            + urlencode({"source": source, "id": owner_id, "part": index}))


def _asked(task: Task) -> Tuple[str, List[str]]:
    """The first line of the first user message kept, and the names of its files."""
    for message in task.history:
        if message.role is Role.USER:
            files = [_first_line(_file_name(p), 120) for p in message.parts if p.kind == "raw"]
            files += [_first_line(p.filename or p.url or "", 120)
                      for p in message.parts if p.kind == "url"]
            return _first_line(message.text), files[:5]
    return "", []


def _summary(task: Task, record: Optional[TaskRecord], ctx: CallContext) -> Dict[str, Any]:
    asked, files = _asked(task)
    status = task.status
    return {
        "id": task.id,
        "contextId": task.context_id,
        "state": status.state.value,
        "asked": asked,
        "askedFiles": files,
        "statusText": _first_line(status.message.text) if status.message else "",
        # The service shows a caller its own tasks in the tenant it names, and only
        # those: the caller's owner id and tenant are the task's.  (The record's tenant
        # may hold more, e.g. the store scope of the agent: not for the page.)
        "owner": ctx.owner,
        "tenant": ctx.tenant,
        "createdAt": record.created_at if record else "",
        "updatedAt": status.timestamp,
        "artifacts": len(task.artifacts),
    }


def list_view(agent: Agent) -> Response:
    """One page of rows: ``state``, ``contextId``, ``tenant``, ``pageSize``, ``pageToken``."""
    service, auth = agent()
    query = Query(("state", "contextId", "tenant", "pageSize", "pageToken"))
    ctx = _context(query, auth)
    state_name = query.text("state", 32)
    if state_name and state_name not in STATES:
        raise _bad("state", "must be one of " + ", ".join(sorted(STATES)))
    page = service.list_tasks(ListTasksRequest(
        context_id=query.text("contextId"),
        status=STATES[state_name] if state_name else TaskState.UNSPECIFIED,
        page_size=query.number("pageSize", DEFAULT_PAGE_SIZE, 1, MAX_PAGE_SIZE),
        page_token=query.text("pageToken", MAX_TOKEN),
        include_artifacts=False, tenant=ctx.tenant), ctx)
    rows = []
    for task in page.tasks:
        try:
            record: Optional[TaskRecord] = _record(service, task.id, ctx)
        except TaskNotFoundError:  # purged since the page was read: shown as listed
            record = None
        rows.append(_summary(task, record, ctx))
    return _json({"tasks": rows, "nextPageToken": page.next_page_token,
                  "totalSize": page.total_size, "pageSize": page.page_size})


def _timeline(service: AgentService, record: TaskRecord, after: int, limit: int,
              generation: int) -> Dict[str, Any]:
    """Log entries after ``after``, at most ``limit`` of them read; artifact chunks that
    follow each other for one artifact are one entry with their count.  An entry with
    no time of its own (artifacts, messages) has the time of the status before it
    (``inherited``).  Each says the task's generation after it (the A2A 1.1 draft,
    docs/generations.rst), counted on from ``generation``, the one at ``after``: the
    page reads the log in order and hands back what the slice before said, so no
    slice reads the entries before it."""
    entries: List[Dict[str, Any]] = []
    last_time = ""
    read = 0
    last_seq = after
    for entry in service.store.entries(record.task_id, after, through=record.seq):
        if read >= limit:
            break
        read += 1
        last_seq = entry.seq
        event = entry.event
        generation += entry_moves_generation(entry)
        if isinstance(event, Task):
            last_time = event.status.timestamp or last_time
            asked, files = _asked(event)
            entries.append({"seq": entry.seq, "kind": "created", "state": event.status.state.value,
                            "time": last_time, "text": asked, "files": files,
                            "generation": generation})
        elif isinstance(event, TaskStatusUpdateEvent):
            last_time = event.status.timestamp or last_time
            message = event.status.message
            entries.append({"seq": entry.seq, "kind": "status", "state": event.status.state.value,
                            "time": last_time, "generation": generation,
                            "text": _first_line(message.text) if message else ""})
        elif isinstance(event, TaskArtifactUpdateEvent):
            artifact = event.artifact
            previous = entries[-1] if entries else None
            size = sum(len(p.text or "") for p in artifact.parts)
            if (previous is not None and previous["kind"] == "artifact" and event.append
                    and previous["artifactId"] == artifact.artifact_id):
                previous.update(chunks=previous["chunks"] + 1, lastSeq=entry.seq,
                                chars=previous["chars"] + size, generation=generation,
                                lastChunk=bool(event.last_chunk))
                continue
            entries.append({"seq": entry.seq, "lastSeq": entry.seq, "kind": "artifact",
                            "artifactId": artifact.artifact_id,
                            "name": _first_line(artifact.name, 120),
                            "partKinds": sorted({KINDS[p.kind] for p in artifact.parts}),
                            "append": bool(event.append), "lastChunk": bool(event.last_chunk),
                            "chunks": 1, "chars": size, "time": last_time, "inherited": True,
                            "generation": generation})
        elif isinstance(event, Message):
            entries.append({"seq": entry.seq, "kind": "message",
                            "role": "user" if event.role is Role.USER else "agent",
                            "text": _first_line(event.text), "time": last_time,
                            "inherited": True, "generation": generation})
    return {"entries": entries, "after": after, "last": last_seq, "seq": record.seq,
            "generation": generation, "more": last_seq < record.seq}


def _webhooks(service: AgentService, record: TaskRecord) -> List[Dict[str, Any]]:
    """Each webhook, its secrets masked, and how far its delivery got in the log."""
    hooks = []
    for target in service.store.push_targets(record.task_id):
        config = target.config
        hooks.append({"id": config.id, "url": config.url,
                      "token": bool(config.token),
                      "authentication": config.authentication.scheme
                      if config.authentication is not None else "",
                      "delivered": target.delivered_seq, "failures": target.failures,
                      "gaveUp": target.gave_up})
    return hooks


def detail_view(agent: Agent, task_id: str) -> Response:
    """One task: its row, status, newest messages, artifacts, webhooks and a slice of
    its log (``after``, ``events``, and ``generation``: the one the slice before said it
    ended at); ``history`` messages (newest)."""
    service, auth = agent()
    query = Query(("tenant", "after", "events", "history", "generation"))
    ctx = _context(query, auth)
    after = query.number("after", 0, 0, 10 ** 9)
    # From the start of the log, the count starts at 0 whatever the caller says.
    generation = query.number("generation", 0, 0, 10 ** 9) if after else 0
    limit = query.number("events", DEFAULT_EVENTS, 1, MAX_EVENTS)
    keep = query.number("history", DEFAULT_HISTORY, 1, MAX_HISTORY)
    record = _record(service, task_id, ctx)
    task = record.task
    history = task.history[-keep:]
    status = task.status
    body = {
        "task": _summary(task, record, ctx),
        "status": {"state": status.state.value, "timestamp": status.timestamp,
                   "message": _message(status.message, task.id) if status.message else None},
        "history": [_message(m, task.id) for m in history],
        "historyTotal": len(task.history),
        "artifacts": [_artifact(a, task.id) for a in task.artifacts[:MAX_ARTIFACTS]],
        "artifactsTotal": len(task.artifacts),
        "webhooks": _webhooks(service, record),
        "timeline": _timeline(service, record, after, limit, generation),
        "metadata": _bounded_json(task.metadata),
        "streaming": bool(service.card.capabilities.streaming),
    }
    return _json(body)


def _find_part(task: Task, source: str, owner_id: str, index: int) -> Optional[Part]:
    holders: List[Tuple[str, Any]] = []
    if source == "artifact":
        holders = [(a.artifact_id, a.parts) for a in task.artifacts]
    elif source == "message":
        messages = list(task.history)
        if task.status.message is not None:
            messages.append(task.status.message)
        holders = [(m.message_id, m.parts) for m in messages]
    for holder_id, parts in holders:
        if holder_id == owner_id and index < len(parts):
            part: Part = parts[index]
            return part
    return None


_UNSAFE_NAME = re.compile(r"[\x00-\x1f\x7f-\x9f/\\\"]")


def file_view(agent: Agent, task_id: str) -> Response:
    """One file part's bytes, always as an attachment of type octet-stream: a caller's
    file is never rendered by the browser on the agent's origin."""
    service, auth = agent()
    query = Query(("tenant", "source", "id", "part"))
    ctx = _context(query, auth)
    source = query.text("source", 16)
    if source not in ("artifact", "message"):
        raise _bad("source", "must be artifact or message")
    holder, index = query.text("id"), query.number("part", 0, 0, 10 ** 6)
    record = _record(service, task_id, ctx)
    part = _find_part(record.task, source, holder, index)
    if part is None or not isinstance(part.raw, bytes):
        raise TaskNotFoundError("No such file in this task", metadata={"taskId": task_id})
    name = _UNSAFE_NAME.sub("_", _file_name(part))[:200] or "file"
    response = send_file(io.BytesIO(part.raw), mimetype="application/octet-stream",
                         as_attachment=True, download_name=name, max_age=0)
    response.headers["Content-Security-Policy"] = "sandbox; default-src 'none'"
    return response


def _json(body: Mapping[str, Any]) -> Response:
    response = Response(json.dumps(body, ensure_ascii=False, separators=(",", ":")),
                        mimetype="application/json")
    response.headers["Cache-Control"] = "no-store"
    return response


def answer(view: Callable[[], Response]) -> Response:
    """The view's answer, or its A2A error as the REST binding writes one."""
    try:
        return view()
    except A2AError as exc:
        return error_response(exc)
