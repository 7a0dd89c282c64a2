"""The agent of the fault tests: what it does is the first word of the message.

``sleep S``      works for S seconds, then completes ("slept S")
``wait``         works until canceled (cooperatively)
``raise``        raises RuntimeError
``stubborn S``   ignores cancel (swallows the kill too) for S seconds, then returns
``spin``         busy-loops in pure Python, looking only at ``ctx.cancelled``
``hog S``        busy-loops S seconds without ever yielding (the watchdog must say so)
``weird``        returns an object of a type the library does not know
``flood N``      emits N artifact updates (one artifact, replaced each time), then completes
``ticks N``      streams N chunks ("tick 0;", ...) a quarter second apart, then completes
``ask``          asks for more input (INPUT_REQUIRED); each answer starting with ``ask`` asks again
anything else    completes at once with the text echoed

Config comes from the environment (``FLASK_A2A_*``), as for the examples.
"""
from __future__ import annotations

import time

from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, TaskContext
from a2a_flask.engine.run import TaskCancelled

a2a = A2A(card=AgentCard(
    name="Fault agent", description="Misbehaves on request", version="1.0.0",
    capabilities=AgentCapabilities(streaming=True, push_notifications=True),
    skills=[AgentSkill(id="faults", name="Faults", description="Misbehaves", tags=["test"])]))


class Unknown:
    """A value no executor should return."""


def hog(seconds: float) -> None:
    """Compute without yielding (as a careless agent might)."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


@a2a.executor
def misbehave(ctx: TaskContext):
    words = ctx.text.split()
    kind = words[0] if words else ""
    arg = float(words[1]) if len(words) > 1 and words[1][:1].isdigit() else 0.0
    if kind == "sleep":
        ctx.working("sleeping")
        time.sleep(arg)
        return f"slept {arg:g}"
    if kind == "wait":
        ctx.working("waiting for cancel")
        while not ctx.cancelled:
            time.sleep(0.05)
        return None
    if kind == "raise":
        raise RuntimeError("the agent broke")
    if kind == "stubborn":
        ctx.working("ignoring cancel")
        end = time.monotonic() + arg
        while time.monotonic() < end:
            try:
                time.sleep(0.05)
            except TaskCancelled:
                continue  # swallowed: this agent will not stop
        return None
    if kind == "spin":
        ctx.working("spinning")
        while not ctx.cancelled:
            pass
        return None
    if kind == "hog":
        ctx.working("hogging")
        hog(arg)
        return "done hogging"
    if kind == "weird":
        return Unknown()
    if kind == "flood":
        for n in range(int(arg)):
            ctx.artifact(f"event {n}", artifact_id="flood")
        return "flooded"
    if kind == "ticks":
        ctx.working("ticking")
        for n in range(int(arg)):
            ctx.artifact(f"tick {n};", artifact_id="ticks", append=n > 0)
            time.sleep(0.25)
        return None
    if kind == "ask":
        ctx.ask("more?")
        return None
    return ctx.text


app = Flask(__name__)
app.config.from_prefixed_env()
a2a.init_app(app)
