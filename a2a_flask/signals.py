"""Blinker signals a host app can subscribe to (``signal.connect(fn)``).

``push_sent(sender, task_id, config_id, url, seq, status, attempt)``
    A webhook answered 2xx to one event of a task.
``push_failed(sender, task_id, config_id, url, seq, status, attempt, error, gave_up)``
    One delivery attempt failed (``status`` is None when no answer came);
    ``gave_up`` is true on the last attempt, after which the webhook gets nothing
    more until it is registered again.

The sender is the :class:`~a2a_flask.A2A` extension object of the agent.
Receivers run in the delivering greenlet or thread: keep them quick.
"""
from __future__ import annotations

from blinker import Namespace

_signals = Namespace()

push_sent = _signals.signal("a2a-push-sent")
push_failed = _signals.signal("a2a-push-failed")

__all__ = ["push_failed", "push_sent"]
