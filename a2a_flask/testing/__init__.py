"""Helpers for testing your agent: the real client, wired to your app in-process.

.. code-block:: python

    from a2a_flask.testing import A2ATestClient

    def test_echo(app):
        agent = A2ATestClient(app)
        task = agent.send_message("hello")
        assert task.status.state is TaskState.COMPLETED
        events = list(agent.send_streaming_message("hello"))  # typed events, from SSE
        agent.wait_for(task.id, TaskState.COMPLETED)
        answer = agent.rpc("message/send", {...}, version="0.3")  # the raw wire, any dialect
        assert answer.json()["result"]["kind"] == "task"

:class:`A2ATestClient` is an :class:`~a2a_flask.client.A2AClient` whose HTTP
requests go through Flask's test client instead of the network, so every
operation, the SSE parsing, the error types and the decoding are exactly the
client's.  Streams are read as the app produces them (the response is not
buffered), so a test can watch a task run.
"""
from __future__ import annotations

import time
from typing import Any, Dict, Iterable, Iterator, Optional, Union
from urllib.parse import urlsplit

import requests
from flask import Flask
from requests.adapters import BaseAdapter
from requests.structures import CaseInsensitiveDict
from requests.utils import get_encoding_from_headers

from ..client import A2AClient
from ..client.card import read_card
from ..client.client import parse_state
from ..protocol.models import TaskState, Task

BASE_URL = "http://localhost"


class _Body:
    """The file-like ``raw`` of a requests Response, reading a WSGI app's output lazily."""

    def __init__(self, response: Any) -> None:
        self._response = response
        self._chunks: Iterator[bytes] = iter(response.iter_encoded())
        self._buffer = b""
        self.closed = False
        self.chunked = False

    def read1(self, amt: int = -1) -> bytes:
        while not self._buffer:
            # An empty chunk is not the end: WSGI allows them (streams send one before
            # they wait), and servers skip them.
            chunk = next(self._chunks, None)
            if chunk is None:
                return b""
            self._buffer = chunk
        if amt is None or amt < 0:
            amt = len(self._buffer)
        out, self._buffer = self._buffer[:amt], self._buffer[amt:]
        return out

    def read(self, amt: Optional[int] = None, **_: Any) -> bytes:
        if amt is None:
            out = self._buffer + b"".join(self._chunks)
            self._buffer = b""
            return out
        out = b""
        while len(out) < amt:
            piece = self.read1(amt - len(out))
            if not piece:
                break
            out += piece
        return out

    def stream(self, amt: Optional[int] = None, decode_content: bool = True) -> Iterator[bytes]:
        while True:
            piece = self.read1(-1 if amt is None else amt)
            if not piece:
                return
            yield piece

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._response.close()  # ends the app's generator (the stream's subscription)

    def release_conn(self) -> None:
        self.close()


class FlaskAdapter(BaseAdapter):
    """A requests transport adapter that sends each request to a Flask app."""

    def __init__(self, app: Flask) -> None:
        super().__init__()
        self.app = app

    def send(self, request: requests.PreparedRequest, stream: bool = False, timeout: Any = None,
             verify: Any = True, cert: Any = None, proxies: Any = None) -> requests.Response:
        url = urlsplit(request.url or "")
        body = request.body
        if isinstance(body, str):
            body = body.encode("utf-8")
        headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
        flask_response = self.app.test_client().open(
            url.path or "/", base_url=f"{url.scheme}://{url.netloc}", query_string=url.query,
            method=request.method, headers=headers, data=body or b"", buffered=False)
        response = requests.Response()
        response.status_code = flask_response.status_code
        response.reason = flask_response.status.partition(" ")[2]
        response.headers = CaseInsensitiveDict(flask_response.headers)
        response.encoding = get_encoding_from_headers(response.headers)
        response.raw = _Body(flask_response)
        response.url = request.url or ""
        response.request = request
        response.connection = self  # type: ignore[assignment]  # the stubs expect an HTTPAdapter
        if not stream:
            response.content  # noqa: B018  (read it all now, as requests does)
            response.raw.close()
        return response

    def close(self) -> None:
        pass


class A2ATestClient(A2AClient):
    """The A2A client, talking A2A 1.0 to one agent of ``app`` in-process.

    :param app: the Flask app the agent is registered on.
    :param name: the agent's name (``A2A(name=...)``, default ``a2a``).
    :param binding: ``JSONRPC`` (default) or ``HTTP+JSON`` (``rest``).
    :param options: anything :class:`~a2a_flask.client.A2AClient` accepts
        (``headers``, ``token``, ``tenant``, ``extensions``, ...).
    """

    def __init__(self, app: Flask, name: str = "a2a", *, binding: str = "JSONRPC",
                 **options: Any) -> None:
        try:
            state = app.extensions["a2a"][name]
        except KeyError:
            raise LookupError(f"No A2A agent named {name!r} on this app; call init_app first") \
                from None
        url = BASE_URL + state.settings.url_prefix
        if binding.strip().lower() in ("rest", "http+json", "http"):
            url += "/rest"
        session = requests.Session()
        session.mount("http://", FlaskAdapter(app))
        session.mount("https://", FlaskAdapter(app))
        options.setdefault("max_reconnects", 0)  # in-process: a broken stream is a bug
        # In-process nothing is lost on the way: sends carry a key only when a test gives
        # one (an app's Message replies stay Messages), and nothing is retried.
        options.setdefault("idempotent", False)
        super().__init__(url, binding=binding, version="1.0", session=session, **options)
        self._owns_session = True
        self.app = app
        self.agent_name = name
        self._card_url = BASE_URL + state.settings.url_prefix + "/.well-known/agent-card.json"
        #: The agent's JSON-RPC endpoint (whatever ``binding`` the typed calls use).
        self.rpc_url = BASE_URL + state.settings.url_prefix
        self.card = read_card(self.card_json(), self._card_url)

    def wait_for(self, task_id: str, state: Union[TaskState, str, Iterable[Union[TaskState, str]],
                                                  None] = None,
                 *, timeout: float = 5.0, interval: float = 0.02) -> Task:
        """Poll the task until it reaches ``state`` (one or several; default: any
        terminal or interrupted state) and return it.

        :raises TimeoutError: naming the last state seen, after ``timeout`` seconds.
        """
        if state is None:
            wanted = None
        elif isinstance(state, (TaskState, str)):
            wanted = {parse_state(state)}
        else:
            wanted = {parse_state(s) for s in state}
        deadline = time.monotonic() + timeout
        while True:
            task = self.get_task(task_id)
            current = task.status.state
            if (current in wanted) if wanted else current.settled:
                return task
            if time.monotonic() >= deadline:
                goal = ", ".join(sorted(s.name for s in wanted)) if wanted else \
                    "a terminal or interrupted state"
                raise TimeoutError(f"Task {task_id} is {current.name} after {timeout}s; "
                                   f"waited for {goal}")
            time.sleep(interval)

    def rpc(self, method: str, params: Any = None, *, version: Optional[str] = "1.0",
            headers: Optional[Dict[str, str]] = None, request_id: Any = 1,
            stream: bool = False) -> requests.Response:
        """Send one JSON-RPC request exactly as written and return the raw answer: its
        status, headers and wire JSON (``.json()``), or its SSE body.

        Any method name and params go, of any protocol generation (``message/send``
        with ``version="0.3"``; ``version=None`` sends no ``A2A-Version`` header, as a
        0.x client does), so a test can see what an older client or a broken one sees.
        ``params=None`` leaves the member out; ``stream=True`` reads the body as the
        app writes it (``iter_content``), for a stream that stays open.
        """
        body: Dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        sent = {} if version is None else {"A2A-Version": version}
        sent.update(headers or {})
        return self.session.post(self.rpc_url, json=body, headers=sent, stream=stream)

    def card_json(self) -> Any:
        """The agent's public card exactly as the app serves it (JSON)."""
        return self.session.get(self._card_url).json()


__all__ = ["A2ATestClient", "FlaskAdapter"]
