"""The app tests/web/test_inspector_tasks.py serves with gunicorn
(``tests.support.inspector_tasks_app:app``): one agent at ``/a2a`` whose tasks the
inspector's task list and task panel show, inspector on, streaming on (and the same
agent at ``/bare`` with an inspector that has no task API).

Callers: the ``user`` cookie (what the browser sends) or the ``X-User`` header (what
the test's own requests send) names the caller; without either the caller is
anonymous.  A test app only: a real agent checks credentials.

What the first word of a message does:

* ``slow``: a long-running task, a WORKING status every ``FLASK_A2A_TICK`` seconds
  (default 0.3) for up to 400 of them; it stops when canceled;
* ``fail``: FAILED, saying why (the tenant's quota is used up);
* ``files``: a text, a JSON, a file and a link artifact;
* anything else: echoed, the message's text and files as one artifact that carries
  the message's metadata.
"""
import time

from flask import Flask, request

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, Part
from a2a_flask.web.inspector import make_inspector

FILE_BYTES = b"id,name\n1,lighthouse\n"


def caller():
    """The test's caller: the ``user`` cookie or the ``X-User`` header, else anonymous."""
    return request.cookies.get("user") or request.headers.get("X-User") or None


def work(ctx):
    text = ctx.text.strip()
    first = text.split(" ", 1)[0].lower()
    if first == "slow":
        tick = float(app.config.get("A2A_TICK", 0.3))
        for step in range(1, 401):
            if ctx.cancelled:
                return
            ctx.working(f"Step {step}")
            time.sleep(tick)
        ctx.complete("Done at last.")
    elif first == "fail":
        ctx.fail(f"The quota of {ctx.tenant or 'everyone'} is used up")
    elif first == "files":
        ctx.working("Packing the files...")
        ctx.artifact("A plain text answer.", name="notes")
        ctx.artifact({"city": "Paris", "days": [21, 23]}, name="forecast.json")
        ctx.artifact([Part(raw=FILE_BYTES, filename="places.csv", media_type="text/csv")],
                     name="places")
        ctx.artifact([Part(url="https://example.com/report.pdf", filename="report.pdf",
                           media_type="application/pdf")], name="report")
        ctx.complete("Here are your files.")
    else:
        parts = [Part(text=text or "(nothing)")]
        parts += [Part(raw=f.raw, filename=f.filename, media_type=f.media_type)
                  for f in ctx.files]
        ctx.artifact(parts, name=text[:60] or "echo", metadata=ctx.metadata or None)
        ctx.complete("Echoed.")


card = AgentCard(
    name="Task list agent",
    description="Echoes, fails, runs long and hands out files.",
    version="1.0.0",
    capabilities=AgentCapabilities(streaming=True, push_notifications=True),
    default_input_modes=["text/plain", "text/csv", "application/octet-stream"],
    skills=[AgentSkill(id="echo", name="Echo", description="Echoes text and files",
                       tags=["echo"], examples=["hello", "slow", "fail", "files"])],
)

app = Flask(__name__)
app.config["A2A_INSPECTOR"] = True  # gunicorn does not run the app in debug mode
app.config["A2A_AUTH_REQUIRED"] = False  # no cookie: the anonymous caller
# Webhooks to this name pass the guard by name (no DNS here): their table is shown.
app.config["A2A_PUSH_ALLOWED_HOSTS"] = "hooks.example.com"
app.config.from_prefixed_env()
A2A(app, card=card, executor=work, auth=caller)
# The same agent at /bare, its inspector registered by hand without agent=: the page
# reads tasks with ListTasks and GetTask only.
A2A(app, card=card, executor=work, auth=caller, name="bare", url_prefix="/bare",
    inspector=False, root_card=False)
app.register_blueprint(make_inspector(), url_prefix="/bare", name="bare_inspector")
