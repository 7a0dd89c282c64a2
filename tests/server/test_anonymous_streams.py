"""Anonymous streams cannot take a whole worker.

One client opens 1,000 idle anonymous SubscribeToTask streams against a default
``gunicorn -k gevent`` worker (1,000 ``worker_connections``): with
``A2A_MAX_ANONYMOUS_STREAMS`` unset a quarter of them are served, the rest get
HTTP 429, and the worker still answers its card and a SendMessage.
"""
from __future__ import annotations

import json
import resource
import socket
from typing import Any, Dict, Iterator, List

import pytest
import requests

from a2a_flask.protocol.models import new_id

from tests.support.helpers import Server
from tests.support.subscriber_rss import open_subscription

#: Streams the client opens: gunicorn's default worker_connections.
STREAMS = 1000
#: What the worker serves of them by default: a quarter of its connections.
SERVED = STREAMS // 4


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    # One socket per stream on each side: the server inherits the raised limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 4 * STREAMS
    if soft < wanted and (hard == resource.RLIM_INFINITY or hard >= wanted):
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    try:
        with Server("tests.support.fault_app:app",
                    env={"FLASK_A2A_SSE_KEEPALIVE": "5"}) as running:
            yield running
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _answer_head(sock: socket.socket) -> bytes:
    """What the server sent first: the status line and headers, and for a stream its
    first event (for a refusal, its JSON body)."""
    data = b""
    while b"\r\n\r\n" not in data or not (b"data:" in data or data.rstrip().endswith(b"}")):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def _message(text: str) -> Dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": text}]}


def test_a_thousand_idle_anonymous_streams_leave_the_worker_serving(server: Server) -> None:
    task = server.rpc("SendMessage", {"message": _message("wait"),
                                      "configuration": {"returnImmediately": True}})
    task_id = task["result"]["task"]["id"]
    socks: List[socket.socket] = []
    try:
        socks = [open_subscription(server.port, task_id) for _ in range(STREAMS)]
        heads = [_answer_head(sock) for sock in socks]
        statuses = [head.split(b" ", 2)[1] if head else b"closed" for head in heads]
        assert statuses.count(b"200") == SERVED, {s: statuses.count(s) for s in set(statuses)}
        assert statuses.count(b"429") == STREAMS - SERVED
        refused = next(head for head in heads if b" 429 " in head.split(b"\r\n", 1)[0])
        error = json.loads(refused.split(b"\r\n\r\n", 1)[1])["error"]
        assert error["code"] == -32042 and "A2A_MAX_ANONYMOUS_STREAMS" in error["message"]
        assert all(b"data:" in head for head in heads if b" 200 " in head.split(b"\r\n", 1)[0])
        # The served streams stay open and idle: the worker still answers everyone else
        # (generous bounds: what is checked is that it answers at all).
        card = requests.get(server.url + "/.well-known/agent-card.json", timeout=30)
        assert card.status_code == 200 and card.json()["name"] == "Fault agent"
        sent = server.rpc("SendMessage", {"message": _message("hello")}, timeout=30)
        assert sent["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", sent
    finally:
        for sock in socks:
            sock.close()
        server.rpc("CancelTask", {"id": task_id})
