"""The client's side of the A2A 1.1 draft's generations (docs/generations.rst): an
event stream reports gaps in them, and gives them up where the agent does not keep
them.  (Against a real agent: tests/server/test_generations_server.py.)"""
from __future__ import annotations

import logging
from typing import List

from a2a_flask.client.stream import EventStream, StreamItem
from a2a_flask.protocol import models as m


def status(generation: int, state: m.TaskState = m.TaskState.WORKING) -> StreamItem:
    return StreamItem(m.TaskStatusUpdateEvent("t", "c", m.TaskStatus(state=state),
                                              generation=generation))


def stream_of(generations: List[int]) -> EventStream:
    stream = EventStream(iter([StreamItem(m.Task(id="t", context_id="c",
                                                 generation=generations[0]))]
                              + [status(g) for g in generations[1:]]))
    list(stream)
    return stream


def test_a_skip_in_generations_is_a_gap_the_caller_can_see(caplog):
    with caplog.at_level(logging.WARNING, "a2a_flask.client"):
        stream = stream_of([3, 4, 7, 8, 10])
    assert stream.generation_gaps == [(4, 7), (8, 10)]
    assert stream.generation == 10
    assert "skipped generations 5 to 6: 2 event(s) missed" in caplog.text


def test_consecutive_generations_have_no_gap():
    stream = stream_of([1, 2, 3, 4])
    assert (stream.generation_gaps, stream.generation) == ([], 4)


def test_a_repeat_or_a_missing_generation_means_the_agent_keeps_none():
    assert (stream_of([2, 3, 3, 9]).generation_gaps, stream_of([2, 3, 3, 9]).generation) \
        == ([], 0)
    assert stream_of([2, 0, 9]).generation_gaps == []
    assert stream_of([0, 0, 0]).generation == 0  # a 1.0 agent: nothing to say
