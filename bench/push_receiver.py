"""The webhook receiver of ``bench/push.py``: counts pushes, remembers when each path
last got one.  ``POST /hook/<name>`` answers 204; ``GET /count`` reports;
``POST /reset`` starts over.  One gevent worker, so plain dicts are safe."""
from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, Iterable

_state: Dict[str, Any] = {"total": 0, "latest": 0.0, "last": {}}


def app(environ: Dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    path, method = environ["PATH_INFO"], environ["REQUEST_METHOD"]
    if method == "POST" and path.startswith("/hook/"):
        environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        now = time.time()
        _state["total"] += 1
        _state["latest"] = now
        _state["last"][path] = now
        start_response("204 No Content", [])
        return [b""]
    if path == "/reset":
        _state.update(total=0, latest=0.0, last={})
    body = json.dumps(_state).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [body]
