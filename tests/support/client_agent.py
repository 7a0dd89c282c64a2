"""The agent the client and CLI tests talk to: behaviour chosen by the first word.

``slow N``   WORKING ("thinking..."), then N text chunks 50 ms apart, then COMPLETED
``ask``      INPUT_REQUIRED ("Which city?"); the follow-up completes with "Forecast for <text>"
``fail``     raises: the task FAILS
``reject``   REJECTED
``reply``    a direct Message, no task
``hold``     WORKING until canceled (at most 20 s)
``parts``    echoes the message's parts back as one artifact (files, data)
otherwise    echoes the text

Push notifications are on (loopback webhooks allowed, for tests) and an
extended card is configured.  Callers may be anonymous or send any bearer
token but ``bad`` (the token names the caller, who owns its tasks); the
extended card needs one.
"""
import time

from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, Part, TaskContext
from a2a_flask.web.auth import BearerAuth

SKILL = AgentSkill(id="test", name="Test", description="Behaviours for client tests", tags=["test"])

a2a = A2A(
    card=AgentCard(
        name="Client test agent",
        description="Behaviours for the client and CLI tests",
        version="2.0.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        default_input_modes=["text/plain", "application/json", "application/octet-stream"],
        skills=[SKILL],
    ),
    extended_card=AgentCard(
        name="Client test agent (extended)",
        description="What authenticated callers see",
        version="2.0.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=True),
        skills=[SKILL, AgentSkill(id="secret", name="Secret", description="Only for members",
                                  tags=["extended"])],
    ),
    auth=BearerAuth(lambda token: None if token == "bad" else f"user-{token}"),
)


def slow(ctx: TaskContext, count: str = "5") -> None:
    ctx.working("thinking...")
    for index in range(int(count)):
        if ctx.cancelled:
            return
        ctx.artifact(f"chunk-{index} ", artifact_id="answer", append=index > 0,
                     last_chunk=index == int(count) - 1)
        time.sleep(0.05)
    ctx.complete()


def ask(ctx: TaskContext) -> None:
    if ctx.follow_up:
        ctx.complete(f"Forecast for {ctx.text.strip()}")
    else:
        ctx.ask("Which city?")


def hold(ctx: TaskContext) -> None:
    ctx.working("holding")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not ctx.cancelled:
        time.sleep(0.05)


def parts(ctx: TaskContext) -> None:
    ctx.artifact(list(ctx.message.parts[1:]) or [Part(text="(no parts)")], name="echo")
    ctx.complete()


@a2a.executor
def behave(ctx: TaskContext):
    words = ctx.text.split()
    command = words[0] if words else ""
    if command == "slow":
        return slow(ctx, *words[1:2])
    if command == "ask" or ctx.follow_up:
        return ask(ctx)
    if command == "fail":
        raise RuntimeError("asked to fail")
    if command == "reject":
        return ctx.reject("Not today")
    if command == "reply":
        return ctx.reply("direct answer")
    if command == "hold":
        return hold(ctx)
    if command == "parts":
        return parts(ctx)
    return ctx.text


app = Flask(__name__)
app.config.update(A2A_PUSH_ALLOW_PRIVATE=True, A2A_AUTH_REQUIRED=False)
app.config.from_prefixed_env()
a2a.init_app(app)
