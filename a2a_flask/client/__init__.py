"""A blocking A2A client on :mod:`requests`: any agent, any protocol generation.

.. code-block:: python

    from a2a_flask.client import A2AClient

    with A2AClient.connect("http://127.0.0.1:8000") as agent:
        task = agent.send_message("hello")          # waits for the answer
        for event in agent.send_streaming_message("tell me a story"):
            print(event)                            # Task, status and artifact updates

The client reads 1.0, 0.3 and 0.1 agent cards, speaks A2A 1.0 (JSON-RPC or
HTTP+JSON) and falls back to 0.3 or 0.1 JSON-RPC, always returning the 1.0
models of :mod:`a2a_flask.protocol.models`.  Its errors are those of
:mod:`a2a_flask.errors`: an agent's error is the very class its server raised
(``except TaskNotFoundError``), a failed exchange an :class:`A2ATransportError`,
and every one an :class:`A2AException`.
"""
from typing import Any as _Any

from ..deprecation import Moved as _Moved
from ..protocol import errors as _errors
from ..protocol.errors import *  # noqa: F401,F403  (the whole tree: a client's one import)
from .card import fetch_card, read_card
from .client import A2AClient, parse_state
from .errors import RENAMED as _RENAMED
from .messages import artifact_text, data_part, file_part, make_message, text_part
from .stream import EventStream

_MOVED = _Moved(__name__, _RENAMED)


def __getattr__(name: str) -> _Any:
    """The error names of 0.1.0 that the tree replaced, with a :class:`DeprecationWarning`."""
    return _MOVED.get(name)


__all__ = [
    "A2AClient",
    "EventStream",
    "fetch_card",
    "read_card",
    "parse_state",
    "make_message",
    "text_part",
    "file_part",
    "data_part",
    "artifact_text",
]
# The error tree (a2a_flask.errors), every one, for a client's one import.
__all__ += _errors.__all__
