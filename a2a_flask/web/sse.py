"""Server-Sent Events framing and the streaming Flask response.

Every event carries an ``id:`` (the task log's sequence number) so that a
client can resume with ``Last-Event-ID``; idle streams get a comment line every
keep-alive interval so proxies and clients know the connection lives.  The
body is a plain generator: under gunicorn's gevent worker each open stream is
one parked greenlet.
"""
from __future__ import annotations

import logging
import re
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional

from flask import Response

from ..observe.calls import StreamNote, stream_note
from ..protocol.errors import A2AError, InternalError
from ..protocol.jsontext import json_text
from ..protocol.calls import ServedItem, Wait

log = logging.getLogger("a2a_flask")

KEEPALIVE = b": keep-alive\n\n"
#: Most events sent in one write: a stream catching up on a long log holds at most
#: this many rendered events (a reader that stops reading makes the write wait).
MAX_BATCH = 64
#: Sent first when a stream pauses before its first event, so that the status line
#: and headers leave at once.
OPENING = b": stream open\n\n"
HEADERS = {
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # nginx: do not buffer the stream
}


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON for a response body (a ``JSONText`` goes in as it is).

    A lone surrogate (a client may send ``"\\ud800"``, and errors echo what
    was sent) has no UTF-8 form: it leaves as its ``\\uXXXX`` escape, which is
    what it is inside a JSON string, the only place ``json.dumps`` puts it.
    """
    return json_text(value).encode("utf-8", "backslashreplace")


def dumps_line(value: Any) -> str:
    """Compact JSON safe inside one SSE ``data:`` line (from a JSON value or a ``JSONText``).

    U+2028, U+2029 and U+0085 are legal raw in JSON strings and in SSE, but
    several clients' line readers (httpx's ``aiter_lines``, used by the
    a2a-sdk) split on them; as escapes they mean the same and split nothing.
    """
    text = json_text(value)
    for char, escape in _LINE_BREAKERS.items():
        if char in text:
            text = text.replace(char, escape)
    return text


_EVENT_ID = re.compile(r"[0-9]{1,18}")

_LINE_BREAKERS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"}


def frame(data: Any, event_id: Optional[int] = None, event: Optional[str] = None) -> bytes:
    """One SSE event whose ``data:`` is ``data`` as compact JSON (a single line)."""
    head = ""
    if event_id is not None:
        head += f"id: {event_id}\n"
    if event:
        head += f"event: {event}\n"
    return (head + "data: " + dumps_line(data) + "\n\n").encode("utf-8", "backslashreplace")


def parse_last_event_id(raw: Optional[str]) -> Optional[int]:
    """The sequence number in a ``Last-Event-ID`` header; None if absent or not ours."""
    if raw is None:
        return None
    raw = raw.strip()
    # ASCII digits only, and few enough for int(): "²" passes isdigit() but not int().
    return int(raw) if _EVENT_ID.fullmatch(raw) else None


def _body(items: Iterable[ServedItem], render: Callable[[Any], Optional[Any]],
          render_error: Callable[[A2AError], Any], note: StreamNote) -> Iterator[bytes]:
    """The chunks of a stream's body (see :func:`event_stream`).

    A module-level generator, not a closure: a parked stream then holds no
    function object and no cells of its own, only this generator's frame.
    """
    note.opened()
    reason = "finished"
    # Events that are ready together leave in one write; a pause (None)
    # sends them, or a comment when there is nothing to send.  The status line
    # and headers leave with the first write: the first event when it is ready
    # at once (one write fewer before it), the opening comment otherwise.
    pending: List[bytes] = []
    opened = False
    try:
        for item in items:
            if isinstance(item, Wait):
                if not opened:  # about to park: let the client know the stream is open
                    opened = True
                    yield OPENING
                # The server keeps the last chunk it wrote until the next one comes;
                # an empty one (which servers skip) lets the rendered events go.
                yield b""
                item.wait()  # parked here, with none of the stream's generators on the stack
            elif item is not None:
                data = render(item)
                if data is not None:
                    pending.append(frame(data, item.seq))
                    if len(pending) >= MAX_BATCH:  # a long backlog: bounded writes
                        opened = True
                        yield b"".join(pending)
                        pending.clear()
                # Parked streams are many: keep no rendered event alive in between.
                data = item = None
            elif pending:
                opened = True
                yield b"".join(pending)
                pending.clear()
            else:
                yield KEEPALIVE if opened else OPENING
                opened = True
        if pending:
            yield b"".join(pending)
    except A2AError as exc:
        reason = "error"
        yield b"".join(pending) + frame(render_error(exc), event="error")
    except GeneratorExit:
        reason = "client"
        raise  # the client went away: only this subscription ends
    except Exception:
        reason = "error"
        log.exception("stream failed")
        yield b"".join(pending) + frame(render_error(InternalError()), event="error")
    finally:
        note.closed(reason)
        close = getattr(items, "close", None)
        if close is not None:
            close()


def event_stream(
    items: Iterable[ServedItem],
    render: Callable[[Any], Optional[Any]],
    render_error: Callable[[A2AError], Any],
    headers: Optional[Dict[str, str]] = None,
) -> Response:
    """A ``text/event-stream`` response from stream items.

    ``render`` makes the data of one event (None skips it); ``render_error``
    makes the data of the single error event sent if the stream fails midway.
    """
    response = Response(_body(items, render, render_error, stream_note()),
                        mimetype="text/event-stream", headers={**HEADERS, **(headers or {})})
    response.direct_passthrough = True
    return response
