"""An agent whose work runs in Celery workers; the web tier only records and serves tasks.

Run the web tier and a worker, each in its own terminal.  The store must be one
both reach: SQLite on one host (``celery-agent.db`` in the temp folder by default),
or Redis, PostgreSQL, MariaDB (``FLASK_A2A_STORE``); the broker is
``CELERY_BROKER_URL`` (Redis on 127.0.0.1 by default)::

    gunicorn -k gevent -b 127.0.0.1:8000 examples.celery_agent:app
    celery -A examples.celery_agent:celery worker --loglevel=INFO

It echoes text; ``slow:N`` works N seconds, with a status and a chunk each second,
and stops when the task is canceled.  Rerunning a task is harmless here, so it
says so: a task whose worker was killed runs again from the start.
"""
import os
import tempfile
import time

from celery import Celery, Task
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill

a2a = A2A(
    card=AgentCard(
        name="Celery echo",
        description="Echoes text; 'slow:N' works N seconds in a Celery worker.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes, slowly on request",
                           tags=["echo", "celery"], examples=["hello", "slow:10"])],
    ),
)


@a2a.executor(rerun_safe=True)
def work(ctx):
    text = ctx.text.strip()
    if not text.startswith("slow:"):
        return text
    try:
        seconds = max(0, min(int(text[5:]), 3600))
    except ValueError:
        ctx.reject("slow:N needs a whole number of seconds")
        return None
    artifact = None
    for second in range(1, seconds + 1):
        time.sleep(1)
        if ctx.cancelled:
            return None
        ctx.working(f"worked {second} of {seconds} s")
        artifact = ctx.artifact(f"step {second}\n", artifact_id=artifact or None,
                                append=artifact is not None)
    return f"done after {seconds} s"


def celery_init_app(app: Flask) -> Celery:
    """The Flask documentation's pattern: tasks run in the app context, the Celery app
    is configured from ``app.config["CELERY"]`` and kept in ``app.extensions``."""
    class FlaskTask(Task):
        def __call__(self, *args, **kwargs):
            with app.app_context():
                return self.run(*args, **kwargs)

    celery_app = Celery(app.name, task_cls=FlaskTask)
    celery_app.config_from_object(app.config["CELERY"])
    celery_app.set_default()
    app.extensions["celery"] = celery_app
    return celery_app


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["A2A_RUNNER"] = "celery"  # FLASK_A2A_RUNNER=inline runs in the web tier
    # A store both processes reach: this file unless FLASK_A2A_STORE names another.
    app.config["A2A_STORE"] = "sqlite:///" + os.path.join(tempfile.gettempdir(),
                                                          "celery-agent.db")
    app.config.from_prefixed_env()  # FLASK_A2A_STORE -> A2A_STORE, ...
    app.config["CELERY"] = {
        "broker_url": os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0"),
        "broker_connection_retry_on_startup": True,
        # A run is long: a worker takes one at a time, so the others wait for free workers.
        "worker_prefetch_multiplier": 1,
        "task_ignore_result": True,  # the task store is the result
        "task_default_queue": os.environ.get("CELERY_QUEUE", "celery"),
        # Redis as broker: a message unacknowledged this long is delivered again. A run
        # holds its task's lease, so a second delivery of a running task does nothing:
        # this only bounds how long a message prefetched by a killed worker waits (a
        # started run's task is taken care of when its lease expires, A2A_LEASE_TTL).
        "broker_transport_options": {"visibility_timeout": 300},
    }
    celery_init_app(app)  # first: the agent finds it in app.extensions["celery"]
    a2a.init_app(app)
    return app


app = create_app()
celery = app.extensions["celery"]
