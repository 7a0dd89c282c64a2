"""The engine's two hooks: each committed change of a task, and each executor run."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any, Callable

from .. import signals
from . import context, otel


def created(sender: Any, task_id: str, context_id: str) -> None:
    """A task was written to the store for the first time (SUBMITTED)."""
    signals.send(signals.task_created, sender, task_id=task_id, context_id=context_id)


def committed(sender: Any, before: Any, after: Any, created_at: str) -> None:
    """A change of ``before`` (the task's state) to task ``after`` was appended: signal
    ``task_state_changed`` when the state moved, ``task_finished`` when it ended."""
    new = after.status.state
    if new is before or not (signals.task_state_changed.receivers
                             or signals.task_finished.receivers):
        return
    signals.send(signals.task_state_changed, sender, task_id=after.id,
                 context_id=after.context_id, old=before, new=new)
    if new.terminal and signals.task_finished.receivers:
        signals.send(signals.task_finished, sender, task_id=after.id,
                     context_id=after.context_id, state=new, duration=_age(created_at))


def _age(created_at: str) -> float:
    """Seconds since an RFC 3339 timestamp (0.0 if it cannot be read)."""
    try:
        start = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return 0.0
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    return max(0.0, (datetime.now(timezone.utc) - start).total_seconds())


def run_scope(target: Callable[[], None], task_id: str,
              context_id: str) -> Callable[[], None]:
    """Wrap an executor run: its log records name the task, and with tracing on it is an
    ``a2a.execute`` span, a child of the request that started it (called in that
    request, so the parent is captured here; the run may outlive it)."""
    tracer = otel.tracer()
    parent = otel.current_context() if tracer is not None else None

    def scoped() -> None:
        token = context.bind(task_id, context_id)
        span = otel.RunSpan(tracer, parent, task_id, context_id) if tracer is not None else None
        error = None
        try:
            target()
        except BaseException as exc:
            error = exc
            raise
        finally:
            if span is not None:
                span.end(error)
            context.reset(token)

    return scoped
