"""The smallest useful agent: every task completes with an artifact echoing the text.

Run it::

    gunicorn -k gevent -b 127.0.0.1:8000 examples.echo_agent:app

Configuration comes from ``FLASK_A2A_*`` environment variables, e.g.
``FLASK_A2A_STORE=shelve:///tmp/echo-tasks``.
"""
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill

a2a = A2A(
    card=AgentCard(
        name="Echo",
        description="Echoes back whatever text it is sent.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id="echo", name="Echo", description="Repeats the input text",
                           tags=["echo"], examples=["hello"])],
    )
)


@a2a.executor
def echo(ctx):
    """Returning a string completes the task with that text as an artifact."""
    return ctx.text


app = Flask(__name__)
app.config.from_prefixed_env()
a2a.init_app(app)
