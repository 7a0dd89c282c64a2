"""A streaming agent: reports progress, then streams its answer word by word.

Run it::

    gunicorn -k gevent -b 127.0.0.1:8000 examples.streaming_agent:app

A generator executor streams each yielded string as a chunk of one artifact;
``ctx.cancelled`` lets it stop early when a client cancels the task.
"""
import time

from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill

a2a = A2A(
    card=AgentCard(
        name="Storyteller",
        description="Streams a short story about the topic it is given, word by word.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id="story", name="Story", description="Tells a tiny story",
                           tags=["streaming", "story"], examples=["a lighthouse"])],
    )
)

#: Seconds between words (FLASK_A2A_WORD_DELAY=0 makes it instant).
DEFAULT_WORD_DELAY = 0.05


@a2a.executor
def tell(ctx):
    topic = ctx.text.strip() or "nothing in particular"
    ctx.working(f"Thinking about {topic}...")
    story = (f"Once upon a time there was {topic}. It waited, it wondered, "
             f"and in the end {topic} found exactly what it was looking for.")
    delay = float(app.config.get("A2A_WORD_DELAY", DEFAULT_WORD_DELAY))
    for word in story.split():
        if ctx.cancelled:
            return
        yield word + " "
        time.sleep(delay)


app = Flask(__name__)
app.config.from_prefixed_env()
a2a.init_app(app)
