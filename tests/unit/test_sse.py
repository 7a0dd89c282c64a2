"""The SSE body: what it writes, when, and what it leaves for the server to hold.

The body is driven here as a WSGI server drives it (next chunk, write, next
chunk), with items standing in for a stream: events, pauses (None) and waits.
"""
from __future__ import annotations

from typing import Any, List, Optional


from a2a_flask.protocol.calls import Wait
from a2a_flask.protocol.events import LogEntry
from a2a_flask.web.sse import KEEPALIVE, OPENING, event_stream


class RecordedWait(Wait):
    """A wait that notes how many chunks the server had been handed when it was made."""

    __slots__ = ("written", "made_after")

    def __init__(self, written: List[bytes]) -> None:
        super().__init__()
        self.written = written
        self.made_after: Optional[int] = None

    def block(self) -> None:
        self.made_after = len(self.written)


def serve(items: List[Any], written: Optional[List[bytes]] = None) -> List[bytes]:
    """The chunks a server is handed, in order (empty ones included); ``(seq, event)``
    pairs among ``items`` are served as log entries."""
    served = [LogEntry(*item) if isinstance(item, tuple) else item for item in items]
    response = event_stream(iter(served), render=lambda item: {"event": item.event},
                            render_error=lambda exc: {"error": str(exc)})
    written = [] if written is None else written
    for chunk in response.response:
        assert isinstance(chunk, bytes)
        written.append(chunk)
    return written


def data_chunks(written: List[bytes]) -> List[bytes]:
    return [chunk for chunk in written if chunk]


def test_a_first_event_ready_at_once_is_the_first_write():
    written = serve([(1, "task"), None, (2, "done")])
    assert written[0] == b'id: 1\ndata: {"event":"task"}\n\n'
    assert OPENING not in written


def test_a_stream_that_parks_before_its_first_event_opens_first_then_lets_go():
    written: List[bytes] = []
    wait = RecordedWait(written)
    serve([wait, (1, "task"), None], written)
    # The opening comment, then an empty chunk (servers skip it; the chunk they
    # held, the opening, is let go), and only then the wait.
    assert written[:2] == [OPENING, b""]
    assert wait.made_after == 2
    assert data_chunks(written)[1] == b'id: 1\ndata: {"event":"task"}\n\n'


def test_each_park_hands_the_server_an_empty_chunk_so_it_drops_the_events_it_wrote():
    written: List[bytes] = []
    first, second = RecordedWait(written), RecordedWait(written)
    serve([(1, "snapshot"), None, first, (2, "working"), None, second], written)
    assert written == [b'id: 1\ndata: {"event":"snapshot"}\n\n', b"",
                       b'id: 2\ndata: {"event":"working"}\n\n', b""]
    assert (first.made_after, second.made_after) == (2, 4)


def test_the_first_pause_with_nothing_to_send_opens_later_ones_keep_alive():
    written = serve([None, None, (1, "task"), None, None])
    assert written == [OPENING, KEEPALIVE, b'id: 1\ndata: {"event":"task"}\n\n', KEEPALIVE]


def test_no_opening_after_events_were_sent():
    written = serve([(1, "task"), None, None])
    assert written == [b'id: 1\ndata: {"event":"task"}\n\n', KEEPALIVE]
