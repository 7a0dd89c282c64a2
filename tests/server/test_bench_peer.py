"""The benchmark's peer, the official a2a-sdk server in ``bench/sdk_peer.py``, answers
the very requests ``bench/bench.py`` sends it (a new SDK release that changed shape
would otherwise show up as a benchmark full of errors)."""
from __future__ import annotations

import os
import sys

import pytest

pytest.importorskip("a2a.server")
pytest.importorskip("uvicorn")

from tests.support.helpers import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "bench"))
import bench  # noqa: E402

pytestmark = pytest.mark.timeout(90)

CHUNKS = 5


@pytest.fixture(scope="module")
def peer():
    server = bench.PeerServer(",".join(map(str, sorted(os.sched_getaffinity(0)))), CHUNKS)
    try:
        server.wait_ready(timeout=60)
        yield server
    finally:
        server.stop()


def test_the_peer_completes_a_blocking_send(peer):
    conn = bench.HttpConnection(peer.port)
    try:
        first = bench.exchange(conn, bench.scenarios(CHUNKS)["send"], 1)
        second = bench.exchange(conn, bench.scenarios(CHUNKS)["send"], 2)  # keep-alive
    finally:
        conn.close()
    assert (first.units, second.units) == (1, 1)


def test_the_peer_streams_every_chunk_then_completes(peer):
    conn = bench.HttpConnection(peer.port)
    try:
        streamed = bench.exchange(conn, bench.scenarios(CHUNKS)["stream"], 3)
    finally:
        conn.close()
    # The task, WORKING, the chunks, COMPLETED (exchange checks the last one).
    assert streamed.units == CHUNKS + 3


def test_a_short_measured_run_on_the_peer_has_no_errors(peer):
    result = bench.measure(peer, bench.scenarios(CHUNKS)["send"], 2, 0.5)
    assert result.requests > 0 and result.errors == 0, result.first_error
    assert result.server_cpu > 0  # its CPU is read from the one uvicorn process
