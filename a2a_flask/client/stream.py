"""Server-Sent Events in, typed events out, across dropped connections.

:func:`iter_sse` parses the ``text/event-stream`` body of a
:class:`requests.Response` as it arrives.  :class:`EventStream` is what
``A2AClient.stream()`` and ``subscribe()`` return: an iterator of 1.0 events
that, when the connection breaks before the stream is over, re-attaches to the
task (``SubscribeToTask`` / ``tasks/resubscribe``) with ``Last-Event-ID`` set
to the last event it saw, and drops anything it has already yielded.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, Optional, Set, Tuple

import requests
import urllib3

from ..protocol import models as m
from ..protocol.errors import A2AConnectionError, A2AError, A2AResponseError, A2ATimeoutError
from .wire import Event

log = logging.getLogger("a2a_flask.client")


@dataclass
class SSEEvent:
    """One dispatched SSE event: its ``data`` lines joined, and ``id``/``event`` if sent."""

    data: str
    id: Optional[str] = None
    event: str = "message"


@dataclass
class StreamItem:
    """One decoded stream event, its SSE id, and whether the stream ends with it."""

    event: Event
    id: Optional[str] = None
    final: bool = False


def transport_error(exc: BaseException, url: str = "") -> A2AConnectionError:
    """A requests/urllib3 failure as :class:`A2AConnectionError` or :class:`A2ATimeoutError`."""
    where = f" ({url})" if url else ""
    cause: Any = exc
    while cause is not None:
        if isinstance(cause, (requests.Timeout, urllib3.exceptions.TimeoutError, TimeoutError)):
            return A2ATimeoutError(f"Timed out talking to the agent{where}: {exc}")
        cause = cause.args[0] if getattr(cause, "args", None) and isinstance(
            cause.args[0], BaseException) else None
    return A2AConnectionError(f"Connection to the agent failed{where}: {exc}")


_NETWORK_ERRORS = (requests.RequestException, urllib3.exceptions.HTTPError, OSError)


def _chunks(response: requests.Response) -> Iterator[bytes]:
    """The body's bytes as they arrive (one network read at a time)."""
    raw = response.raw
    try:
        if getattr(raw, "chunked", False) or not hasattr(raw, "read1"):
            # urllib3 hands out each HTTP chunk as soon as it is complete.
            yield from response.iter_content(chunk_size=None)
            return
        while True:  # close-delimited body: read1 returns whatever has arrived
            data = raw.read1(65536)
            if not data:
                return
            yield data
    except _NETWORK_ERRORS as exc:
        raise transport_error(exc, response.url) from exc


def iter_json_events(response: requests.Response) -> Iterator[Tuple[SSEEvent, Any]]:
    """Each SSE event with its ``data`` parsed as JSON (InvalidAgentResponse if it is not)."""
    for sse in iter_sse(response):
        try:
            yield sse, json.loads(sse.data)
        except ValueError:
            raise A2AResponseError(f"Stream event is not JSON: {sse.data[:200]!r}",
                                   response=response) from None


def iter_sse(response: requests.Response) -> Iterator[SSEEvent]:
    """Parse an event stream: lines end in CR, LF or CRLF; comments are skipped;
    ``data`` lines join with newlines; a blank line dispatches the event."""
    buffer = b""
    data: List[str] = []
    event_id: Optional[str] = None
    event_type = ""
    pending_cr = False
    for chunk in _chunks(response):
        if pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]  # the LF of a CRLF split across two reads
        pending_cr = chunk.endswith(b"\r")
        buffer += chunk
        lines = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
        buffer = lines.pop()
        for raw in lines:
            line = raw.decode("utf-8", errors="replace")
            if not line:
                if data:
                    yield SSEEvent("\n".join(data), event_id, event_type or "message")
                data, event_type = [], ""
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            if value.startswith(" "):
                value = value[1:]
            if name == "data":
                data.append(value)
            elif name == "id" and "\0" not in value:
                event_id = value  # like browsers, the last id stays until replaced
            elif name == "event":
                event_type = value
    # A stream cut inside an event does not dispatch it (as in browsers).


#: Opens a re-attachment: ``(task_id, last_event_id)`` -> items.
Resume = Callable[[str, Optional[str]], Iterator[StreamItem]]
#: Fetches the task when it can no longer be re-attached to (it ended meanwhile).
Refresh = Callable[[str], m.Task]


class EventStream:
    """An iterator of :class:`~a2a_flask.protocol.models.Task`, ``Message``,
    ``TaskStatusUpdateEvent`` and ``TaskArtifactUpdateEvent``.

    It ends after the agent's last event (a terminal state, an interrupted
    state, a Message, a 0.x ``final``) or when the agent closes the stream.  A
    broken connection is re-attached up to ``max_reconnects`` times in a row;
    events already yielded (same or lower numeric SSE id) are skipped.  Use it
    in a ``with`` block, or call :meth:`close`, to let go of the connection early.

    :ivar task_id: the task the stream follows, once known.
    :ivar last_event_id: the SSE id of the last event yielded, if the agent sends ids.
    :ivar reconnects: how many times the stream was re-attached.
    :ivar generation: the task's generation after the last event (an agent of the A2A
        1.1 draft sends it; 0: none seen, or the agent does not keep them).
    :ivar generation_gaps: ``(last seen, received)`` for each event whose generation
        skipped some (events this stream missed: a
        :meth:`~a2a_flask.client.A2AClient.get_task` tells where the task is); each is
        also logged as a warning.
    """

    def __init__(self, items: Iterator[StreamItem], *, resume: Optional[Resume] = None,
                 refresh: Optional[Refresh] = None, max_reconnects: int = 3,
                 backoff: float = 0.25, task_id: str = "",
                 last_event_id: Optional[str] = None) -> None:
        self._items: Optional[Iterator[StreamItem]] = items
        self._resume = resume
        self._refresh = refresh
        self.max_reconnects = max_reconnects
        self.backoff = backoff
        self.task_id = task_id
        self.context_id = ""
        self.last_event_id = last_event_id
        self.reconnects = 0
        self._attempts = 0  # reconnects since the last event that got through
        self._last_seq: Optional[int] = (
            int(last_event_id) if last_event_id is not None and last_event_id.isdigit() else None)
        self._seen_ids: Set[str] = set()
        self._done = False
        self.generation = 0
        self.generation_gaps: List[Tuple[int, int]] = []
        self._ignore_generations = False

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        while not self._done and self._items is not None:
            try:
                item = next(self._items)
            except StopIteration:
                break
            except A2AConnectionError as exc:
                self._reattach(exc)
                continue
            if self._already_seen(item.id):
                continue
            self._attempts = 0
            self._note(item)
            if item.final:
                self.close()
            return item.event
        self.close()
        raise StopIteration

    def _already_seen(self, event_id: Optional[str]) -> bool:
        if event_id is None:
            return False
        if event_id.isdigit():
            seq = int(event_id)
            if self._last_seq is not None and seq <= self._last_seq:
                return True
            self._last_seq = seq
        elif event_id in self._seen_ids:
            return True
        else:
            self._seen_ids.add(event_id)
        self.last_event_id = event_id
        return False

    def _note(self, item: StreamItem) -> None:
        event = item.event
        self._note_generation(getattr(event, "generation", 0))
        if isinstance(event, m.Task):
            self.task_id, self.context_id = event.id or self.task_id, event.context_id
        elif isinstance(event, (m.TaskStatusUpdateEvent, m.TaskArtifactUpdateEvent)):
            self.task_id = event.task_id or self.task_id
            self.context_id = event.context_id or self.context_id

    def _note_generation(self, received: int) -> None:
        """Track the 1.1 draft's generations: a skip is a gap (recorded and logged); a
        missing one after others, or a repeat, says the agent does not keep them, and
        they are ignored from then on (as the draft says)."""
        if self._ignore_generations:
            return
        if received <= 0 or received <= self.generation:
            if self.generation:
                self._ignore_generations = True
                self.generation = 0
            return
        if self.generation and received > self.generation + 1:
            self.generation_gaps.append((self.generation, received))
            log.warning("stream of task %s skipped generations %d to %d: %d event(s) missed",
                        self.task_id, self.generation + 1, received - 1,
                        received - self.generation - 1)
        self.generation = received

    def _reattach(self, exc: A2AConnectionError) -> None:
        """Re-attach after a broken connection, or raise ``exc`` if that cannot be done."""
        self._drop_items()
        while True:
            if self._resume is None or not self.task_id or self._attempts >= self.max_reconnects:
                self.close()
                raise exc
            self._attempts += 1
            self.reconnects += 1
            time.sleep(self.backoff * (2 ** (self._attempts - 1)))
            log.info("stream of task %s broke (%s); re-attaching after event %s",
                     self.task_id, exc, self.last_event_id)
            try:
                self._items = self._resume(self.task_id, self.last_event_id)
                return
            except A2AConnectionError as again:
                exc = again
            except A2AError:
                # Refused: typically the task ended while we were away (-32004, or
                # -32602 from some agents) and the agent keeps no replay.  Then its
                # final state is all there is left to report.
                task = self._refresh(self.task_id) if self._refresh is not None else None
                if task is None or not (task.status.state.terminal
                                        or task.status.state.interrupted):
                    raise
                self._items = iter([StreamItem(task, None, True)])
                return

    def _drop_items(self) -> None:
        items, self._items = self._items, None
        close = getattr(items, "close", None)
        if close is not None:
            close()

    def close(self) -> None:
        """Stop reading and release the connection."""
        self._done = True
        self._drop_items()

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


__all__ = ["SSEEvent", "StreamItem", "EventStream", "iter_sse", "transport_error"]
