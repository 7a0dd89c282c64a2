"""A bearer-token agent for the real-server test in ``tests/web/test_auth.py``.

Its callers come from the environment, so one module serves any test setup::

    A2A_TEST_TOKENS="alice-token=alice,bob-token=bob"   # token=principal id, comma-separated
    A2A_TEST_FORBIDDEN="mallory-token"                  # valid tokens refused with 403

    gunicorn -k gevent tests.support.auth_app:app

The agent asks a question on the first message (the task waits in
INPUT_REQUIRED, so it can be read, canceled and continued) and completes on a
follow-up.  ``FLASK_A2A_*`` variables configure it as in the examples.
"""
from __future__ import annotations

import os
from typing import Dict, Optional, Set

from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill
from a2a_flask.web.auth import BearerAuth
from a2a_flask.protocol.errors import PermissionDeniedError


def _tokens(raw: str) -> Dict[str, str]:
    pairs = (item.split("=", 1) for item in raw.split(",") if "=" in item)
    return {token.strip(): who.strip() for token, who in pairs if token.strip() and who.strip()}


TOKENS: Dict[str, str] = _tokens(os.environ.get("A2A_TEST_TOKENS", ""))
FORBIDDEN: Set[str] = {t.strip() for t in os.environ.get("A2A_TEST_FORBIDDEN", "").split(",")
                       if t.strip()}


def verify(token: str) -> Optional[str]:
    """The principal a token names; None for unknown tokens (401), 403 for refused ones."""
    if token in FORBIDDEN:
        raise PermissionDeniedError("This caller may not use this agent")
    return TOKENS.get(token)


a2a = A2A(
    card=AgentCard(
        name="Members only",
        description="An agent that serves callers with a bearer token.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id="ask", name="Ask", description="Asks, then answers",
                           tags=["auth"])],
    ),
    auth=BearerAuth(verify),
)


@a2a.executor
def agent(ctx):
    if ctx.follow_up:
        return f"done: {ctx.text}"
    ctx.ask("What else?")
    return None


app = Flask(__name__)
app.config.from_prefixed_env()
a2a.init_app(app)
