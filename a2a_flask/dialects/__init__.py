"""The wire edge: one dialect per protocol generation, and version negotiation.

Pure translation between each generation's JSON and the 1.0 models, with no
Flask and no engine: the bindings (``a2a_flask.web``) parse with a dialect,
call the engine, and render with the same dialect.  Below the dialects nothing
knows which version a client speaks.

Served generations: 1.0 (:mod:`.v1`); 0.3 and 0.2 (:mod:`.v03`), whose
endpoint also takes the 0.1 methods (:mod:`.v01`, they have no version
header of their own); the 0.3 REST shapes (:mod:`.rest03`).
"""
from __future__ import annotations

from . import v01, v03, v1, v11
from .registry import (
    Dialect,
    Method,
    PushRenderer,
    StreamRenderer,
    negotiate,
    normalise_version,
    push_renderer,
    register,
    register_push,
    resolve,
    supported_versions,
)

__all__ = ["Dialect", "Method", "PushRenderer", "StreamRenderer", "negotiate",
           "normalise_version", "push_renderer", "register", "register_push", "resolve",
           "supported_versions", "v1", "v11", "v03", "v01"]
