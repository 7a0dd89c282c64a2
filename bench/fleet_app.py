"""The agents of ``bench/fleet.py``: one runs in the web tier (``/a2a``), one in Celery
workers (``/celery``), both on the store ``FLASK_A2A_STORE`` names.

``ticks N``   N artifact chunks a tenth of a second apart, then completes
``quick``     completes at once

Every run of a task appends its process id to ``FLEET_RUNS_DIR/<task id>``, so the
fleet counts tasks that ran more than once (a Celery worker killed mid-run: the
task is ``rerun_safe``).  The broker is ``CELERY_BROKER_URL``, the queue ``CELERY_QUEUE``.
"""
from __future__ import annotations

import os
import time
from typing import Iterator, Optional

from celery import Celery
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, TaskContext

RUNS = os.environ.get("FLEET_RUNS_DIR", "")


def card(name: str) -> AgentCard:
    return AgentCard(name=name, description="Ticks", version="1.0.0",
                     capabilities=AgentCapabilities(streaming=True, push_notifications=True),
                     skills=[AgentSkill(id="ticks", name="Ticks", description="ticks N",
                                        tags=["bench"])])


def ticks(ctx: TaskContext) -> Optional[Iterator[str]]:
    if RUNS:
        with open(os.path.join(RUNS, ctx.task_id), "a") as handle:
            handle.write(f"{os.getpid()}\n")
    words = ctx.text.split()
    if not words or words[0] != "ticks":
        return None
    return _ticks(ctx, int(words[1]))


def _ticks(ctx: TaskContext, count: int) -> Iterator[str]:
    for n in range(count):
        time.sleep(0.1)
        if ctx.cancelled:
            return
        yield f"tick {n};"


web = A2A(card=card("fleet web"))
web.executor(ticks)
worked = A2A(card=card("fleet celery"), name="celery", url_prefix="/celery", runner="celery")
worked.executor(rerun_safe=True)(ticks)

celery = Celery("fleet_app", broker=os.environ.get("CELERY_BROKER_URL",
                                                   "redis://127.0.0.1:6379/12"))
celery.conf.update(task_default_queue=os.environ.get("CELERY_QUEUE", "fleet"),
                   worker_prefetch_multiplier=1, broker_connection_retry_on_startup=True,
                   task_ignore_result=True)

app = Flask(__name__)
app.config["A2A_MAX_ANONYMOUS_STREAMS"] = 0
app.config.from_prefixed_env()
app.extensions["celery"] = celery
web.init_app(app)
worked.init_app(app)
