#!/usr/bin/env python
"""Bytes written to disk by messages to one open task.

One task waits for input (its executor asks again after every message); the
script sends it ``--count`` messages of ``--size`` bytes of text each through
the JSON-RPC endpoint (Flask's test client, in this process) and prints, per
store, what this process wrote meanwhile (``/proc/self/io``: ``wchar``, the
bytes handed to ``write``-like calls, and ``write_bytes``, what reached the
block device), the store's files at the end, and the time of the first and
the last message.  Linear growth writes about ``count * size`` bytes in all
(each message once in the log, plus snapshots that double); a snapshot
rewritten with every message writes about ``count^2 * size / 2``.

    python bench/task_growth.py [--stores sqlite,shelve] [--count 30] [--size 1048576]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flask import Flask  # noqa: E402

from a2a_flask import A2A, AgentCard, AgentSkill  # noqa: E402

V1 = {"A2A-Version": "1.0"}


def io_counters() -> Dict[str, int]:
    """This process's I/O counters (``wchar``, ``write_bytes``...)."""
    with open("/proc/self/io") as counters:
        return {name: int(value) for name, value in
                (line.split(": ") for line in counters.read().splitlines())}


def make_app(store_url: str, max_task_bytes: int) -> Tuple[Flask, A2A]:
    card = AgentCard(name="Growth", description="Asks again", version="1.0.0",
                     skills=[AgentSkill(id="ask", name="Ask", description="...", tags=["t"])])
    a2a = A2A(card=card)

    @a2a.executor
    def ask(ctx):  # type: ignore[no-untyped-def]
        ctx.ask("more?")

    app = Flask(__name__)
    app.config.update(A2A_STORE=store_url, A2A_TASK_TTL=0,
                      A2A_MAX_CONTENT_LENGTH=4 * max_task_bytes or 1 << 30)
    if max_task_bytes:
        app.config["A2A_MAX_TASK_BYTES"] = max_task_bytes
    a2a.init_app(app)
    return app, a2a


def send(client, text: str, task_id: str, number: int) -> Tuple[str, str]:
    message = {"messageId": f"m-{number}", "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        message["taskId"] = task_id
    body = {"jsonrpc": "2.0", "id": number, "method": "SendMessage",
            "params": {"message": message, "configuration": {"historyLength": 0}}}
    reply = client.post("/a2a", json=body, headers=V1).get_json()
    if "error" in reply:
        raise RuntimeError(f"message {number} refused: {reply['error']['message']}")
    task = reply["result"]["task"]
    return task["id"], task["status"]["state"]


def run(kind: str, count: int, size: int, max_task_bytes: int) -> Dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="a2a-growth-", dir=os.getcwd()) as directory:
        url = f"{kind}://{directory}/tasks" + (".db" if kind == "sqlite" else "")
        app, a2a = make_app(url, max_task_bytes)
        client = app.test_client()
        text = "x" * size
        task_id, _ = send(client, text, "", 0)
        before = io_counters()
        timings: List[float] = []
        for number in range(1, count):
            started = time.perf_counter()
            task_id, state = send(client, text, task_id, number)
            timings.append(time.perf_counter() - started)
            assert state == "TASK_STATE_INPUT_REQUIRED", state
        after = io_counters()
        files = sum(path.stat().st_size for path in Path(directory).iterdir() if path.is_file())
        a2a.store(app).close()
    return {"wchar": after["wchar"] - before["wchar"],
            "write_bytes": after["write_bytes"] - before["write_bytes"],
            "files": files, "first": timings[0], "last": timings[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="sqlite,shelve")
    parser.add_argument("--count", type=int, default=30)
    parser.add_argument("--size", type=int, default=1 << 20)
    parser.add_argument("--max-task-bytes", type=int, default=1 << 30,
                        help="A2A_MAX_TASK_BYTES for the run (0: the default)")
    args = parser.parse_args()
    mib = 1 << 20
    print(f"{args.count} messages of {args.size / mib:g} MiB to one INPUT_REQUIRED task "
          f"(sent: {args.count * args.size / mib:.0f} MiB)")
    print(f"{'store':8} {'wchar MiB':>10} {'disk MiB':>9} {'files MiB':>10} "
          f"{'first ms':>9} {'last ms':>8}")
    for kind in args.stores.split(","):
        result = run(kind, args.count, args.size, args.max_task_bytes)
        print(f"{kind:8} {result['wchar'] / mib:10.1f} {result['write_bytes'] / mib:9.1f} "
              f"{result['files'] / mib:10.1f} {result['first'] * 1000:9.1f} "
              f"{result['last'] * 1000:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
