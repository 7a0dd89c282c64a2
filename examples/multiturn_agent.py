"""A multi-turn agent: it asks for what it is missing (INPUT_REQUIRED).

Send "weather" and it asks "Which city?"; answer on the same task (same
``taskId``) and it completes with a (made-up) forecast.

Run it::

    gunicorn -k gevent -b 127.0.0.1:8000 examples.multiturn_agent:app
"""
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill

a2a = A2A(
    card=AgentCard(
        name="Weather",
        description="Gives a forecast once it knows the city.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id="forecast", name="Forecast", description="A city's forecast",
                           tags=["weather", "multi-turn"], examples=["weather"])],
    )
)


@a2a.executor
def forecast(ctx):
    if not ctx.follow_up:
        ctx.ask("Which city?")
        return None
    city = ctx.text.strip() or "somewhere"
    ctx.artifact(f"{city}: sunny, 21 °C", name="forecast")
    ctx.complete(f"Here is the forecast for {city}.")


app = Flask(__name__)
app.config.from_prefixed_env()
a2a.init_app(app)
