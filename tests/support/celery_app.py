"""Two agents whose runs go to Celery (tests/web/test_celery.py): ``/safe`` may run a task
again after its worker died, ``/unsafe`` may not.  The store comes from
FLASK_A2A_STORE, the broker from CELERY_BROKER_URL, the queue from CELERY_QUEUE."""
import os
import time

from celery import Celery
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill


def card(name: str) -> AgentCard:
    return AgentCard(name=name, description="Works slowly in a Celery worker", version="1.0.0",
                     capabilities=AgentCapabilities(streaming=True),
                     skills=[AgentSkill(id="slow", name="Slow", description="slow:N",
                                        tags=["test"])])


def steps(ctx):
    """``slow:N``: N steps of a second, each a status and a chunk of one artifact.
    ``slow:N hold:PATH``: after step 2, wait while the file PATH exists (up to 120 s),
    so that a test kills the run there however slow the machine is, and a rerun
    after the test removed the file goes through."""
    text = ctx.text.strip()
    if not text.startswith("slow:"):
        return text
    artifact = None
    count, _, hold = text[5:].partition(" hold:")
    count = int(count)
    for step in range(1, count + 1):
        time.sleep(1)
        if ctx.cancelled:
            return None
        ctx.working(f"step {step} of {count} (pid {os.getpid()})")
        artifact = ctx.artifact(f"chunk {step};", artifact_id=artifact, append=bool(artifact))
        held_until = time.monotonic() + 120
        while step == 2 and hold and os.path.exists(hold) and time.monotonic() < held_until:
            time.sleep(0.05)
    return None


safe = A2A(card=card("safe"), name="safe", url_prefix="/safe", runner="celery")
safe.executor(rerun_safe=True)(steps)
unsafe = A2A(card=card("unsafe"), name="unsafe", url_prefix="/unsafe", runner="celery")
unsafe.executor(steps)

celery = Celery("celery_app", broker=os.environ["CELERY_BROKER_URL"])
celery.conf.update(task_default_queue=os.environ["CELERY_QUEUE"], worker_prefetch_multiplier=1,
                   broker_connection_retry_on_startup=True, task_ignore_result=True)

app = Flask(__name__)
app.config.from_prefixed_env()
app.extensions["celery"] = celery
safe.init_app(app)
unsafe.init_app(app)
