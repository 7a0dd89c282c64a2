"""What idle subscribers of a big task cost a real worker, read from its RSS.

Shared by ``tests/server/test_subscriber_memory.py`` (which asserts a bound) and
``bench/memory.py --subscribers`` (which prints the numbers).  A ``gunicorn -k
gevent`` worker (one) serves the fault agent (``tests/support/fault_app.py``) on
a store; one task asks for input (so it stays open) with a message of
``message_bytes`` of JSON text made of empty objects (``[{},{},...]``: the most
Python objects per byte a client can send).  Then subscribers open
``SubscribeToTask`` streams one after another, each reading its snapshot whole
and then staying idle, and the worker's ``VmRSS`` (``/proc/<pid>/status``) is
read before the first, after the first and after the last.

What one subscriber costs is its stream (a parked greenlet, a socket: a few KiB)
plus, while it sends it, the task's snapshot; what must not be there is one
snapshot per idle subscriber.  Memory the worker freed stays in its RSS (the
allocator keeps it for the next use), so the first subscriber's figure holds the
peak of loading and sending one snapshot, and the next ones reuse that memory.
"""
from __future__ import annotations

import json
import socket
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional

import requests

from tests.support.helpers import Server, rss_kib, worker_pids

#: Seconds the worker is given to settle before each RSS reading (a stream's last
#: writes, the feed's record dropped after its LOAD_AGE).
SETTLE = 1.5


def big_message(message_bytes: int) -> Dict[str, Any]:
    """A 1.0 user message asking the fault agent for input, with a data part of about
    ``message_bytes`` of JSON text: a list of empty objects."""
    count = max(1, message_bytes // 3)  # "{}," per object
    return {"role": "ROLE_USER", "messageId": uuid.uuid4().hex,
            "parts": [{"text": "ask"}, {"data": [{}] * count}]}


def open_subscription(port: int, task_id: str) -> socket.socket:
    """A raw SubscribeToTask request on a socket of its own, its answer left unread."""
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask",
                       "params": {"id": task_id}}).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(b"POST /a2a HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"A2A-Version: 1.0\r\nContent-Length: " + str(len(body)).encode()
                 + b"\r\n\r\n" + body)
    return sock


def _read_snapshot(sock: socket.socket) -> int:
    """Read the stream's head and its first event whole; returns its bytes."""
    data = bytearray()
    while True:
        chunk = sock.recv(1 << 20)
        if not chunk:
            raise AssertionError(f"the stream ended before its snapshot: {bytes(data[:300])!r}")
        data += chunk
        start = data.find(b"data:")
        if start >= 0 and data.find(b"\n\n", start) >= 0:
            break
    assert data.startswith(b"HTTP/1.1 200"), bytes(data[:300])
    assert b"TASK_STATE_INPUT_REQUIRED" in data, bytes(data[:300])
    return len(data)


def _settled_rss(pid: int) -> int:
    time.sleep(SETTLE)
    return rss_kib(pid)


def measure(store_url: str, *, subscribers: int, message_bytes: int,
            env: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Open ``subscribers`` idle subscribers of a task holding a message of
    ``message_bytes``; the worker's RSS (KiB) before the first, after it and after all."""
    # Decoding and encoding megabytes of JSON keeps the hub for a while: not what is
    # measured here, and the watchdog's report of each (a formatted stack, the
    # source lines it reads) would be counted in the worker's memory.
    with Server("tests.support.fault_app:app", env={
            "FLASK_A2A_STORE": store_url, "FLASK_A2A_SSE_KEEPALIVE": "30",
            "GEVENT_MONITOR_THREAD_ENABLE": "false", **(env or {})},
            extra_args=["--timeout", "120"], allow_blocking=True) as server:
        pid = worker_pids(server)[0]
        answer = requests.post(server.url + "/a2a", json={
            "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
            "params": {"message": big_message(message_bytes)}},
            headers={"A2A-Version": "1.0"}, timeout=120).json()
        task = answer["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", str(answer)[:300]
        del answer
        socks: List[socket.socket] = []
        try:
            before = _settled_rss(pid)
            socks.append(open_subscription(server.port, task["id"]))
            snapshot = _read_snapshot(socks[0])
            first = _settled_rss(pid)
            for _ in range(subscribers - 1):
                socks.append(open_subscription(server.port, task["id"]))
                _read_snapshot(socks[-1])
            last = _settled_rss(pid)
        finally:
            for sock in socks:
                sock.close()
    return {"subscribers": subscribers, "message_bytes": message_bytes,
            "snapshot_bytes": snapshot, "rss_before_kib": before, "rss_first_kib": first,
            "rss_last_kib": last, "first_kib": first - before,
            "each_next_kib": (last - first) / max(1, subscribers - 1)}


def stores(names: List[str]) -> Iterator[Any]:
    """``(name, store URL, cleanup)`` for each of ``names`` (sqlite, redis, postgresql)."""
    import shutil
    import tempfile

    from tests.conftest import REDIS_URL, drop_sql_database, sql_test_url
    from tests.support.memory_probe import _drop_redis_prefix

    for name in names:
        tag = f"a2asub{uuid.uuid4().hex[:8]}"
        if name == "sqlite":
            folder = tempfile.mkdtemp(prefix="a2asub-")
            yield name, f"sqlite:///{folder}/tasks.db", lambda f=folder: shutil.rmtree(f, True)
        elif name == "redis":
            yield name, f"{REDIS_URL}?prefix={tag}", lambda t=tag: _drop_redis_prefix(t)
        elif name == "postgresql":
            yield name, sql_test_url("postgresql", tag), \
                lambda t=tag: drop_sql_database("postgresql", t)
        else:
            raise ValueError(f"unknown store {name!r}")
