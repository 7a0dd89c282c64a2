"""The suite's one way to send a JSON-RPC request to an app in-process and read the answer.

Everything goes through :class:`a2a_flask.testing.A2ATestClient` (its ``rpc`` and its
session, which hands each request to the app as a server would), so what a test sees is
what a client on the wire sees.  ``target`` is the app or its Flask test client; ``path``
picks the agent by its endpoint (``/a2a`` by default).

* :func:`post`: the raw answer (a ``requests.Response``), for tests of statuses and headers;
* :func:`send`: the same for a body sent as it is (bytes, malformed JSON);
* :func:`rpc`: a JSON answer, checked (200, JSON, the envelope echoing our id), decoded;
* :func:`stream` and :func:`sse`: the events of a streaming answer, decoded.
"""
from __future__ import annotations

import weakref
from typing import Any, Dict, List, Optional, Union
from urllib.parse import urljoin, urlsplit

import requests
from flask import Flask
from flask.testing import FlaskClient

from a2a_flask.testing import BASE_URL, A2ATestClient

from tests.support.helpers import parse_sse

Target = Union[Flask, FlaskClient]

#: One test client per app and endpoint: reading the card once, not per request.
_AGENTS: "weakref.WeakKeyDictionary[Flask, Dict[str, A2ATestClient]]" = \
    weakref.WeakKeyDictionary()


def agent(target: Target, path: str = "/a2a") -> A2ATestClient:
    """The :class:`A2ATestClient` of the agent whose JSON-RPC endpoint is ``path`` (a
    path or a URL; any agent of the app when none is: its session reaches the whole app)."""
    app = target if isinstance(target, Flask) else target.application
    agents = _AGENTS.setdefault(app, {})
    if path not in agents:
        states = app.extensions["a2a"]
        wanted = urlsplit(path).path.rstrip("/")
        name = next((n for n, s in states.items() if s.settings.url_prefix.rstrip("/") == wanted),
                    next(iter(states)))
        agents[path] = A2ATestClient(app, name)
    return agents[path]


def mimetype(response: requests.Response) -> str:
    """The media type of an answer, without its parameters."""
    return response.headers.get("Content-Type", "").partition(";")[0].strip().lower()


def post(target: Target, method: str, params: Any = None, *, version: Optional[str] = "1.0",
         headers: Optional[Dict[str, str]] = None, path: str = "/a2a", request_id: Any = 1,
         query: Optional[Dict[str, str]] = None, body: Any = None,
         stream: bool = False) -> requests.Response:
    """Send ``method`` with ``params`` (or ``body``, any JSON, as it is) and return the
    raw answer.  ``version=None`` sends no ``A2A-Version`` header (a 0.x client);
    ``query`` goes in the URL; ``stream=True`` leaves the body to be read as it comes."""
    client = agent(target, path)
    url = urljoin(BASE_URL, path)
    if url == client.rpc_url and body is None and query is None:
        return client.rpc(method, params, version=version, headers=headers,
                          request_id=request_id, stream=stream)
    if body is None:
        body = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
    return _post(client, url, _headers(version, headers), stream, json=body, params=query)


def send(target: Target, data: Union[bytes, str], *, version: Optional[str] = "1.0",
         content_type: Optional[str] = "application/json",
         headers: Optional[Dict[str, str]] = None, path: str = "/a2a",
         stream: bool = False) -> requests.Response:
    """POST ``data`` as it is (bad JSON, odd encodings: tests of what the endpoint
    refuses) and return the raw answer; ``content_type=None`` sends no Content-Type."""
    sent = _headers(version, headers)
    if content_type is not None:
        sent["Content-Type"] = content_type
    body = data.encode("utf-8") if isinstance(data, str) else data
    return _post(agent(target, path), urljoin(BASE_URL, path), sent, stream, data=body)


def _headers(version: Optional[str], headers: Optional[Dict[str, str]]) -> Dict[str, str]:
    sent = {} if version is None else {"A2A-Version": version}
    sent.update(headers or {})
    return sent


def _post(client: A2ATestClient, url: str, headers: Dict[str, str], stream: bool,
          **request: Any) -> requests.Response:
    """POST through the client's session with ``headers`` as given: set after the
    request is prepared, so a value requests would refuse (``" 1.0 "``) still goes,
    as a careless client could send it."""
    prepared = client.session.prepare_request(requests.Request("POST", url, **request))
    prepared.headers.update(headers)
    return client.session.send(prepared, stream=stream)


def rpc(target: Target, method: str, params: Any = None, **options: Any) -> Dict[str, Any]:
    """:func:`post`, then check that the answer is a 200 JSON-RPC response echoing our
    id, and return it decoded."""
    response = post(target, method, params, **options)
    assert response.status_code == 200, response.text[:500]
    assert mimetype(response) == "application/json", (mimetype(response), response.text[:500])
    answer = response.json()
    sent_id = options["body"].get("id") if isinstance(options.get("body"), dict) else \
        options.get("request_id", 1)
    assert answer["jsonrpc"] == "2.0" and answer["id"] == sent_id, answer
    return answer


def sse(response: requests.Response) -> List[Dict[str, Any]]:
    """Every event of a streamed answer (``{"id", "event", "data"}``), after checking
    that it is one: 200, ``text/event-stream``."""
    assert response.status_code == 200, response.text[:500]
    assert mimetype(response) == "text/event-stream", (mimetype(response), response.text[:500])
    return parse_sse(response.text)


def stream(target: Target, method: str, params: Any = None,
           **options: Any) -> List[Dict[str, Any]]:
    """:func:`post` a streaming method; every SSE event in order, or the one JSON
    answer as ``[{"data": answer}]`` when it is not a stream."""
    response = post(target, method, params, **options)
    if response.status_code == 200 and mimetype(response) == "application/json":
        return [{"data": response.json()}]
    return sse(response)
