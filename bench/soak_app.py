"""The agent of ``bench/soak.py``: what it does is the first word of the message.

``quick``       completes at once
``chunks N``    streams N artifact chunks (a short sleep between them), then completes
``slow S``      works S seconds, then completes
``wait``        works until canceled (cooperatively)

The store comes from ``FLASK_A2A_STORE``; webhooks to loopback are allowed
(``FLASK_A2A_PUSH_ALLOW_PRIVATE=1``, set by the soak).
"""
from __future__ import annotations

import time
from typing import Iterator, Optional

from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, TaskContext

a2a = A2A(card=AgentCard(
    name="Soak agent", description="Quick, streaming, slow and cancelable tasks",
    version="1.0.0", capabilities=AgentCapabilities(streaming=True, push_notifications=True),
    skills=[AgentSkill(id="soak", name="Soak", description="Load", tags=["bench"])]))


@a2a.executor
def soak(ctx: TaskContext) -> Optional[object]:
    words = ctx.text.split()
    kind = words[0] if words else "quick"
    arg = float(words[1]) if len(words) > 1 else 0.0
    if kind == "chunks":
        return _chunks(int(arg))
    if kind == "slow":
        ctx.working("working")
        time.sleep(arg)
        return "done"
    if kind == "wait":
        ctx.working("waiting for cancel")
        while not ctx.cancelled:
            time.sleep(0.05)
        return None
    return "ok"


def _chunks(count: int) -> Iterator[str]:
    for n in range(count):
        time.sleep(0.01)
        yield f"chunk {n} "


app = Flask(__name__)
# The bench holds tens of thousands of anonymous streams on purpose.
app.config["A2A_MAX_ANONYMOUS_STREAMS"] = 0
app.config.from_prefixed_env()
a2a.init_app(app)
