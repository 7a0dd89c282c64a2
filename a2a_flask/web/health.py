"""Health endpoints for orchestrators and load balancers (``A2A_HEALTH_PATH``).

``GET <path>`` is liveness: 200 whenever the worker answers requests at all, with
no store call.  ``GET <path>/ready`` is readiness: 200 when every agent of the app
can take work (its store answered a probe, and its worker is not stopping), 503
with ``Retry-After`` otherwise, so that a proxy or an orchestrator sends new work
elsewhere.  Both sit at the app's root, outside every agent's prefix, and serve
one answer for all agents of the app.

A crowd of probes costs each store at most one read a second
(:data:`PROBE_EVERY`): a probe reuses a result younger than that, and while one
read is under way the others answer from the last result rather than queue.
The answers name agents (public, as their cards are) and say "unavailable" for a
store, never why: the cause is in the server log (the store's outage line).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Dict, Iterable, Optional, Tuple

from flask import Flask, Response, current_app

from ..protocol.errors import StoreUnavailable
from ..stores import TaskStore
from .sse import dumps

#: Seconds a store probe's result is reused (at most one probe a store a second).
PROBE_EVERY = 1.0
#: The id a probe reads: no task has it (ids of tasks are never empty).
PROBE_TASK_ID = ""
#: What a 503 tells a prober to wait before asking again (seconds).
RETRY_AFTER = 1


class StoreProbe:
    """Whether one store answers, probed at most every :data:`PROBE_EVERY` seconds."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._checked_at = float("-inf")
        self._answered = False

    def answers(self) -> bool:
        """Whether the store answered its latest probe (probing again if that is old)."""
        if time.monotonic() - self._checked_at < PROBE_EVERY:
            return self._answered
        if not self._lock.acquire(blocking=False):
            return self._answered  # another probe is under way: its answer comes soon
        try:
            try:
                # A read of no task, through the store's outage guard: bounded by the
                # store's timeout, and an outage is StoreUnavailable.
                self.store.head(PROBE_TASK_ID)
                self._answered = True
            except StoreUnavailable:
                self._answered = False
            self._checked_at = time.monotonic()
            return self._answered
        finally:
            self._lock.release()


def _probe_of(store: TaskStore, probes: Dict[int, StoreProbe]) -> StoreProbe:
    """One probe per store object (agents of an app may share one)."""
    probe = probes.get(id(store))
    if probe is None or probe.store is not store:
        probe = probes[id(store)] = StoreProbe(store)
    return probe


def readiness(agents: Iterable[Tuple[str, Any]],
              probes: Dict[int, StoreProbe]) -> Tuple[bool, Dict[str, Dict[str, Any]]]:
    """Whether every agent can take work, and what each one's state is."""
    report: Dict[str, Dict[str, Any]] = {}
    ready = True
    for name, state in agents:
        stopping = state.service.runtime.stopping
        store_ok = _probe_of(state.store, probes).answers()
        report[name] = {"store": "ok" if store_ok else "unavailable", "stopping": stopping}
        ready = ready and store_ok and not stopping
    return ready, report


def register(app: Flask, path: str) -> None:
    """Serve liveness at ``path`` and readiness at ``path + "/ready"`` (once per app)."""
    if not path or "a2a_health" in app.view_functions:
        return
    base = "/" + path.strip("/")
    probes: Dict[int, StoreProbe] = {}

    def live() -> Response:
        return _json({"status": "ok"}, 200)

    def ready() -> Response:
        agents = current_app.extensions.get("a2a", {}).items()
        is_ready, report = readiness(agents, probes)
        body = {"status": "ready" if is_ready else "unavailable", "agents": report}
        return _json(body, 200 if is_ready else 503,
                     None if is_ready else {"Retry-After": str(RETRY_AFTER)})

    app.add_url_rule(base, "a2a_health", live, methods=["GET"])
    app.add_url_rule(base + "/ready", "a2a_health_ready", ready, methods=["GET"])


def _json(body: Dict[str, Any], status: int,
          headers: Optional[Dict[str, str]] = None) -> Response:
    response = Response(dumps(body), status=status, mimetype="application/json",
                        headers=headers)
    response.headers["Cache-Control"] = "no-store"
    return response
