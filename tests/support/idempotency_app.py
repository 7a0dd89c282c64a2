"""The agent of tests/server/test_idempotency_servers.py: it counts its runs.

Each run appends its task id as a line to the file ``A2A_TEST_RUNS`` names (every
worker writes to the same file, so the test counts the runs of all of them).  A
message ``slow N`` works N seconds first (a blocking agent a client times out on),
``steps`` streams a few status updates; anything else completes at once.  Callers:
``Bearer alice-token`` is alice, ``Bearer bob-token`` bob.
``FLASK_A2A_*`` variables configure it as in the examples.
"""
from __future__ import annotations

import os
import time
from typing import Any, Optional

from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill
from a2a_flask.web.auth import BearerAuth

RUNS = os.environ.get("A2A_TEST_RUNS", "")
TOKENS = {"alice-token": "alice", "bob-token": "bob"}


def verify(token: str) -> Optional[str]:
    return TOKENS.get(token)


a2a = A2A(
    card=AgentCard(name="Counted", description="Counts its runs.", version="1.0.0",
                   capabilities=AgentCapabilities(streaming=True),
                   skills=[AgentSkill(id="count", name="Count", description="Counts its runs",
                                      tags=["test"])]),
    auth=BearerAuth(verify),
)


@a2a.executor
def agent(ctx: Any) -> str:
    if RUNS:
        with open(RUNS, "a") as runs:  # one short line: appends do not interleave
            runs.write(ctx.task_id + "\n")
    words = ctx.text.split()
    if words[:1] == ["slow"]:
        time.sleep(float(words[1]))  # gunicorn's gevent worker made this cooperative
    elif words[:1] == ["steps"]:
        for step in range(3):
            ctx.working(f"step {step}")
            time.sleep(0.05)
    return "done"


app = Flask(__name__)
app.config.from_prefixed_env()
a2a.init_app(app)
