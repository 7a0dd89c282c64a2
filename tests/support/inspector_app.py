"""The app the inspector's browser test serves with gunicorn (``tests.support.inspector_app:app``).

Two agents, each with its inspector page turned on by ``A2A_INSPECTOR = True``:

* ``/a2a`` (streaming on), built from the example agents: a message starting
  with "weather" runs ``examples.multiturn_agent`` (asks "Which city?"), "files"
  answers with data and file artifacts, "fail" raises, anything else runs
  ``examples.streaming_agent`` (a story streamed word by word; the delay between
  words is ``FLASK_A2A_WORD_DELAY``);
* ``/plain`` (streaming off): ``examples.echo_agent``'s executor, so the page
  must fall back to ``SendMessage``.
"""
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, Part
from examples.echo_agent import echo
from examples.multiturn_agent import forecast
from examples.streaming_agent import tell

FILE_BYTES = b"id,name\n1,lighthouse\n"


def files(ctx):
    ctx.working("Packing the files...")
    ctx.artifact({"city": "Paris", "days": [21, 23], "ok": True}, name="forecast.json")
    ctx.artifact([Part(raw=FILE_BYTES, filename="places.csv", media_type="text/csv")],
                 name="places")
    ctx.artifact([Part(url="https://example.com/report.pdf", filename="report.pdf",
                       media_type="application/pdf")], name="report")
    ctx.complete("Here are your files.")


def dispatch(ctx):
    """Route on the first message of the task, so follow-ups reach the same agent."""
    first = ctx.history[0].text.strip().lower() if ctx.history else ctx.text.lower()
    if first.startswith("weather"):
        return forecast(ctx)
    if first.startswith("files"):
        return files(ctx)
    if first.startswith("fail"):
        raise RuntimeError("asked to fail")
    return tell(ctx)


card = AgentCard(
    name="Inspector test agent",
    description="Streams stories, asks for a city, and hands out files.",
    version="2.5.0",
    capabilities=AgentCapabilities(streaming=True),
    skills=[
        AgentSkill(id="story", name="Story", description="Tells a tiny story, word by word",
                   tags=["streaming", "story"], examples=["a lighthouse"]),
        AgentSkill(id="forecast", name="Forecast", description="A city's forecast",
                   tags=["weather", "multi-turn"], examples=["weather"]),
        AgentSkill(id="files", name="Files", description="Data and file artifacts",
                   tags=["artifacts"], examples=["files"]),
    ],
)
plain_card = AgentCard(
    name="Plain echo", description="Echoes text; no streaming.", version="1.0.0",
    capabilities=AgentCapabilities(streaming=False),
    skills=[AgentSkill(id="echo", name="Echo", description="Repeats the input", tags=["echo"])],
)

app = Flask(__name__)
app.config["A2A_INSPECTOR"] = True  # gunicorn does not run the app in debug mode
app.config.from_prefixed_env()
A2A(app, card=card, executor=dispatch)
A2A(app, card=plain_card, executor=echo, name="plain", url_prefix="/plain")
