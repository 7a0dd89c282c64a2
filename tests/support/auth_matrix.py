"""The auth matrix's world (tests/web/test_auth*.py): callers, apps, and how every
binding of every protocol generation spells each operation.

The 1.0 bindings send each operation as the operation table says
(``a2a_flask.protocol.operations``: the JSON-RPC method, the REST route); the
0.3 and 0.1 ones spell theirs by hand (those generations never gain operations).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple
from urllib.parse import urlencode

import pytest
from flask import Flask

from a2a_flask import A2A, AgentCapabilities
from a2a_flask.protocol.codec import encode
from a2a_flask.protocol.errors import PermissionDeniedError
from a2a_flask.protocol.models import new_id
from a2a_flask.protocol.operations import BY_NAME as OPERATION, Operation, Route
from a2a_flask.web.auth import BearerAuth

from tests.conftest import make_card
from tests.support.helpers import ALICE, BOB, TOKENS, V1, parse_sse, rpc_body


# ------------------------------------------------------------------ callers

NOBODY: Dict[str, str] = {}
MALLORY = {"Authorization": "Bearer mallory-token"}  # a valid token the agent refuses (403)
BAD_TOKEN = {"Authorization": "Bearer stolen-or-expired"}
MALFORMED = {"Authorization": "Basic YWxpY2U6c2VjcmV0"}  # not a Bearer credential

#: What the owner's tasks say: it must never reach anybody else.
SECRET = "alice-secret"
WEBHOOK = "https://example.com/hooks/owner"
PUSH_TOKEN = "owner-push-token"


def push_token() -> str:
    """A fresh webhook token (so that setting 0.1's one webhook again is a change)."""
    return f"{PUSH_TOKEN}-{new_id()}"


def verify(token: str) -> Optional[str]:
    """The test agents' bearer check: alice and bob, and mallory who is refused."""
    if token == "mallory-token":
        raise PermissionDeniedError("mallory may not use this agent")
    return TOKENS.get(token)


def paused(ctx):
    """Asks on the first message (INPUT_REQUIRED: readable, cancelable, continuable,
    subscribable, and stable while we look); a follow-up completes the task.
    ``finish`` completes at once (a terminal task)."""
    if ctx.follow_up:
        return f"done: {ctx.text}"
    if ctx.text.startswith("finish"):
        return "finished"
    ctx.ask("Which account?")
    return None


def members_card(ctx):
    """The extended card, per caller."""
    return make_card(name=f"Members: {ctx.principal.id}", description="For members only")


def build_app(executor=paused, *, auth: Any = None, required: bool = True,
              **settings: Any) -> Flask:
    app = Flask("auth_matrix")
    A2A(app, card=make_card(capabilities=AgentCapabilities(streaming=True,
                                                          push_notifications=True)),
        executor=executor, store="memory://",
        auth=BearerAuth(verify) if auth is None else auth, auth_required=required,
        extended_card=members_card, push_allowed_hosts="example.com", push_max_attempts=1,
        **settings)
    return app


def close(app: Flask) -> None:
    for state in app.extensions.get("a2a", {}).values():
        state.close()


def state_of(app: Flask):
    return app.extensions["a2a"]["a2a"]


@pytest.fixture(scope="module")
def apps() -> Iterator[Dict[str, Flask]]:
    """``strict``: credentials required; ``open``: callers without any are the anonymous owner."""
    built = {"strict": build_app(required=True), "open": build_app(required=False)}
    yield built
    for app in built.values():
        close(app)


@pytest.fixture
def fresh_app() -> Iterator[Any]:
    """A factory of apps closed after the test (for exact counts and private executors)."""
    made: List[Flask] = []

    def factory(*args: Any, **kwargs: Any) -> Flask:
        app = build_app(*args, **kwargs)
        made.append(app)
        return app

    yield factory
    for app in made:
        close(app)


# ------------------------------------------------------------------ requests and answers


@dataclass
class Req:
    method: str
    path: str
    body: Any = None
    headers: Dict[str, str] = field(default_factory=dict)
    streaming: bool = False


@dataclass
class Outcome:
    status: int
    mimetype: str
    headers: Dict[str, str]
    text: str

    def json(self) -> Any:
        return json.loads(self.text)


def _complete_events(text: str) -> List[Dict[str, Any]]:
    end = text.rfind("\n\n")
    return parse_sse(text[:end + 2]) if end >= 0 else []


def perform(client, req: Req, headers: Dict[str, str]) -> Outcome:
    """Send ``req`` as the caller with ``headers``; of a stream, read up to its first event."""
    response = client.open(req.path, method=req.method, json=req.body,
                           headers={**req.headers, **headers}, buffered=not req.streaming)
    try:
        if response.mimetype == "text/event-stream":
            text = ""
            for chunk in response.response:
                text += chunk.decode()
                if _complete_events(text):
                    break
        else:
            text = response.get_data(as_text=True)
    finally:
        response.close()
    return Outcome(response.status_code, response.mimetype, dict(response.headers), text)


# ------------------------------------------------------------------ bindings x dialects

def v1_message(text: str, task_id: str = "") -> Dict[str, Any]:
    message = {"messageId": new_id(), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        message["taskId"] = task_id
    return message


def follow_up(t: str, c: str) -> Dict[str, Any]:
    return {"message": v1_message("follow-up", t)}


#: Each operation of the matrix in 1.0: the operation of the table
#: (a2a_flask.protocol.operations) and its params for task ``t`` and push config ``c``.
#: The 1.0 bindings send it as the table says (RpcV1: its method; RestV1: its route).
V1_CALLS: Dict[str, Tuple[str, Callable[[str, str], Dict[str, Any]]]] = {
    "get": ("GetTask", lambda t, c: {"id": t}),
    "cancel": ("CancelTask", lambda t, c: {"id": t}),
    "subscribe": ("SubscribeToTask", lambda t, c: {"id": t}),
    "continue": ("SendMessage", follow_up),
    "continue-stream": ("SendStreamingMessage", follow_up),
    "continue-push": ("SendMessage", lambda t, c: {**follow_up(t, c), "configuration": {
        "taskPushNotificationConfig": {"url": WEBHOOK, "token": push_token()}}}),
    "push-create": ("CreateTaskPushNotificationConfig",
                    lambda t, c: {"taskId": t, "url": WEBHOOK, "token": push_token()}),
    "push-get": ("GetTaskPushNotificationConfig", lambda t, c: {"taskId": t, "id": c}),
    "push-list": ("ListTaskPushNotificationConfigs", lambda t, c: {"taskId": t}),
    "push-delete": ("DeleteTaskPushNotificationConfig", lambda t, c: {"taskId": t, "id": c}),
}
#: The operations that reach no one task, each with the test that keeps callers apart.
TESTED_APART = {
    "ListTasks": "test_list_tasks_shows_and_counts_only_the_callers_own_tasks",
    "GetExtendedAgentCard": "test_the_extended_card_is_for_authenticated_callers_and_per_caller",
}
OPS = tuple(V1_CALLS)
#: Operations that change a task or its webhooks when the owner runs them.
MUTATING = {"cancel", "continue", "continue-stream", "continue-push", "push-create",
            "push-delete"}


class Binding:
    """How one binding of one protocol generation spells each operation: its own
    ``op_*`` method, or (1.0) the table's, through :meth:`call`."""

    name = ""
    kind = "jsonrpc"  # or "rest"
    ops: Tuple[str, ...] = OPS
    tenant = ""
    can_list = True

    def build(self, op: str, task_id: str = "", config_id: str = "") -> Req:
        spelled = getattr(self, "op_" + op.replace("-", "_"), None)
        if spelled is not None:
            return spelled(task_id, config_id)
        method, params = V1_CALLS[op]
        return self.call(OPERATION[method], params(task_id, config_id))

    def call(self, operation: Operation, params: Dict[str, Any]) -> Req:
        """``operation`` with these 1.0 params, as this binding sends it."""
        raise NotImplementedError(f"{self.name} spells each operation itself")

    def result(self, body: Any) -> Any:
        """The payload of a successful answer (JSON-RPC ``result``, REST body)."""
        return body["result"] if self.kind == "jsonrpc" else body

    def __repr__(self) -> str:
        return self.name


class RpcV1(Binding):
    kind = "jsonrpc"

    def __init__(self, tenant: str = "") -> None:
        self.tenant = tenant
        self.name = "jsonrpc-1.0" + (f"@{tenant}" if tenant else "")

    def _rpc(self, method: str, params: Dict[str, Any], streaming: bool = False) -> Req:
        if self.tenant:
            params = {**params, "tenant": self.tenant}
        return Req("POST", "/a2a", rpc_body(method, params), dict(V1), streaming)

    def create(self, text: str, stream: bool = False) -> Req:
        return self._rpc("SendStreamingMessage" if stream else "SendMessage",
                         {"message": v1_message(text)}, stream)

    def task_id_of(self, result: Any) -> str:
        return result["task"]["id"]

    def config_id_of(self, result: Any, task_id: str) -> str:
        return result["id"]

    def call(self, operation: Operation, params: Dict[str, Any]) -> Req:
        return self._rpc(operation.name, params, operation.streaming)

    def op_list(self, **query: Any) -> Req:
        return self.call(OPERATION["ListTasks"], query)

    def listed(self, result: Any) -> Tuple[List[str], int, str]:
        return [t["id"] for t in result["tasks"]], result["totalSize"], result["nextPageToken"]

    def op_card(self) -> Req:
        return self.call(OPERATION["GetExtendedAgentCard"], {})


class RestV1(Binding):
    kind = "rest"
    ops = OPS + ("subscribe-get",)

    def __init__(self, tenant: str = "") -> None:
        self.tenant = tenant
        self.name = "rest-1.0" + (f"@{tenant}" if tenant else "")
        self.prefix = "/a2a/rest" + (f"/{tenant}" if tenant else "")

    def create(self, text: str, stream: bool = False) -> Req:
        return Req("POST", self.prefix + ("/message:stream" if stream else "/message:send"),
                   {"message": v1_message(text)}, streaming=stream)

    def task_id_of(self, result: Any) -> str:
        return result["task"]["id"]

    def config_id_of(self, result: Any, task_id: str) -> str:
        return result["id"]

    def routes(self, operation: Operation) -> Tuple[Route, ...]:
        return operation.rest

    def call(self, operation: Operation, params: Dict[str, Any], verb: str = "") -> Req:
        """On the operation's route: the path takes its members, the rest is the body or
        the query, as the table says; POST where the route also serves GET."""
        route = self.routes(operation)[0]
        path = self.prefix + route.path(params)
        rest = {k: v for k, v in params.items() if k not in route.variables}
        if route.source == "query" and rest:
            path += f"?{urlencode(rest)}"
        verb = verb or ("POST" if "POST" in route.verbs else route.verbs[0])
        return Req(verb, path, rest if route.source == "body" else None,
                   streaming=operation.streaming)

    def op_subscribe_get(self, t: str, c: str) -> Req:
        return self.call(OPERATION["SubscribeToTask"], {"id": t}, verb="GET")

    def op_list(self, **query: Any) -> Req:
        return self.call(OPERATION["ListTasks"], query)

    def listed(self, result: Any) -> Tuple[List[str], int, str]:
        return [t["id"] for t in result["tasks"]], result["totalSize"], result["nextPageToken"]

    def op_card(self) -> Req:
        return self.call(OPERATION["GetExtendedAgentCard"], {})


class RpcV03(Binding):
    """0.3 JSON-RPC: no ``A2A-Version`` header, slash names, bare results."""

    name = "jsonrpc-0.3"
    kind = "jsonrpc"
    ops = OPS + ("push-get-first",)
    can_list = False  # 0.3 JSON-RPC has no tasks/list

    @staticmethod
    def _rpc(method: str, params: Dict[str, Any], streaming: bool = False) -> Req:
        return Req("POST", "/a2a", rpc_body(method, params), {}, streaming)

    @staticmethod
    def message(text: str, task_id: str = "") -> Dict[str, Any]:
        message = {"kind": "message", "messageId": new_id(), "role": "user",
                   "parts": [{"kind": "text", "text": text}]}
        if task_id:
            message["taskId"] = task_id
        return message

    def create(self, text: str, stream: bool = False) -> Req:
        return self._rpc("message/stream" if stream else "message/send",
                         {"message": self.message(text)}, stream)

    def task_id_of(self, result: Any) -> str:
        return result["id"]

    def config_id_of(self, result: Any, task_id: str) -> str:
        return result["pushNotificationConfig"]["id"]

    def op_get(self, t: str, c: str) -> Req:
        return self._rpc("tasks/get", {"id": t})

    def op_cancel(self, t: str, c: str) -> Req:
        return self._rpc("tasks/cancel", {"id": t})

    def op_subscribe(self, t: str, c: str) -> Req:
        return self._rpc("tasks/resubscribe", {"id": t}, True)

    def op_continue(self, t: str, c: str) -> Req:
        return self._rpc("message/send", {"message": self.message("follow-up", t)})

    def op_continue_stream(self, t: str, c: str) -> Req:
        return self._rpc("message/stream", {"message": self.message("follow-up", t)}, True)

    def op_continue_push(self, t: str, c: str) -> Req:
        return self._rpc("message/send", {
            "message": self.message("follow-up", t),
            "configuration": {"pushNotificationConfig": {"url": WEBHOOK, "token": push_token()}}})

    def op_push_create(self, t: str, c: str) -> Req:
        return self._rpc("tasks/pushNotificationConfig/set", {
            "taskId": t, "pushNotificationConfig": {"url": WEBHOOK, "token": push_token()}})

    def op_push_get(self, t: str, c: str) -> Req:
        return self._rpc("tasks/pushNotificationConfig/get",
                         {"id": t, "pushNotificationConfigId": c})

    def op_push_get_first(self, t: str, c: str) -> Req:
        return self._rpc("tasks/pushNotificationConfig/get", {"id": t})

    def op_push_list(self, t: str, c: str) -> Req:
        return self._rpc("tasks/pushNotificationConfig/list", {"id": t})

    def op_push_delete(self, t: str, c: str) -> Req:
        return self._rpc("tasks/pushNotificationConfig/delete",
                         {"id": t, "pushNotificationConfigId": c})

    def op_card(self) -> Req:
        return self._rpc("agent/getAuthenticatedExtendedCard", {})


class RestV03(RestV1):
    """0.3 HTTP+JSON under ``/rest/v1`` (``content`` parts, ``name``d push configs)."""

    name = "rest-0.3"
    prefix = "/a2a/rest/v1"

    def __init__(self) -> None:  # 0.3 REST has no tenant in its paths
        self.tenant = ""

    def routes(self, operation: Operation) -> Tuple[Route, ...]:
        return operation.routes03

    @staticmethod
    def message(text: str, task_id: str = "") -> Dict[str, Any]:
        message = {"messageId": new_id(), "role": "ROLE_USER", "content": [{"text": text}]}
        if task_id:
            message["taskId"] = task_id
        return message

    def create(self, text: str, stream: bool = False) -> Req:
        return Req("POST", self.prefix + ("/message:stream" if stream else "/message:send"),
                   {"message": self.message(text)}, streaming=stream)

    def config_id_of(self, result: Any, task_id: str) -> str:
        return result["pushNotificationConfig"]["id"]

    def op_continue(self, t: str, c: str) -> Req:
        return Req("POST", self.prefix + "/message:send",
                   {"message": self.message("follow-up", t)})

    def op_continue_stream(self, t: str, c: str) -> Req:
        return Req("POST", self.prefix + "/message:stream",
                   {"message": self.message("follow-up", t)}, streaming=True)

    def op_continue_push(self, t: str, c: str) -> Req:
        return Req("POST", self.prefix + "/message:send", {
            "message": self.message("follow-up", t),
            "configuration": {"blocking": True,
                              "pushNotification": {"url": WEBHOOK, "token": push_token()}}})

    def op_push_create(self, t: str, c: str) -> Req:
        return Req("POST", f"{self.prefix}/tasks/{t}/pushNotificationConfigs",
                   {"pushNotificationConfig": {"url": WEBHOOK, "token": push_token()}})


class RpcV01(Binding):
    """0.1 JSON-RPC: client-chosen task ids, ``tasks/send``, one webhook per task."""

    name = "jsonrpc-0.1"
    kind = "jsonrpc"
    ops = ("get", "cancel", "subscribe", "continue", "continue-stream", "continue-push",
           "push-create", "push-get")
    can_list = False

    @staticmethod
    def _rpc(method: str, params: Dict[str, Any], streaming: bool = False) -> Req:
        return Req("POST", "/a2a", rpc_body(method, params), {}, streaming)

    @staticmethod
    def message(text: str) -> Dict[str, Any]:
        return {"role": "user", "parts": [{"type": "text", "text": text}]}

    def create(self, text: str, stream: bool = False) -> Req:
        return self._rpc("tasks/sendSubscribe" if stream else "tasks/send",
                         {"id": new_id(), "message": self.message(text)}, stream)

    def task_id_of(self, result: Any) -> str:
        return result["id"]

    def config_id_of(self, result: Any, task_id: str) -> str:
        return task_id  # 0.1 has one webhook per task, named by the task

    def op_get(self, t: str, c: str) -> Req:
        return self._rpc("tasks/get", {"id": t})

    def op_cancel(self, t: str, c: str) -> Req:
        return self._rpc("tasks/cancel", {"id": t})

    def op_subscribe(self, t: str, c: str) -> Req:
        return self._rpc("tasks/resubscribe", {"id": t}, True)

    def op_continue(self, t: str, c: str) -> Req:
        return self._rpc("tasks/send", {"id": t, "message": self.message("follow-up")})

    def op_continue_stream(self, t: str, c: str) -> Req:
        return self._rpc("tasks/sendSubscribe", {"id": t, "message": self.message("follow-up")},
                         True)

    def op_continue_push(self, t: str, c: str) -> Req:
        return self._rpc("tasks/send", {
            "id": t, "message": self.message("follow-up"),
            "pushNotification": {"url": WEBHOOK, "token": push_token()}})

    def op_push_create(self, t: str, c: str) -> Req:
        return self._rpc("tasks/pushNotification/set", {
            "id": t, "pushNotificationConfig": {"url": WEBHOOK, "token": push_token()}})

    def op_push_get(self, t: str, c: str) -> Req:
        return self._rpc("tasks/pushNotification/get", {"id": t})


RPC_V1, RPC_V1_ACME, RPC_V1_GLOBEX = RpcV1(), RpcV1("acme"), RpcV1("globex")
REST_V1, REST_V1_ACME, REST_V1_GLOBEX = RestV1(), RestV1("acme"), RestV1("globex")
RPC_V03, REST_V03, RPC_V01 = RpcV03(), RestV03(), RpcV01()
#: Every binding x dialect, as the owner's tasks are reached in the matrix.
BINDINGS = [RPC_V1, RPC_V1_ACME, REST_V1, REST_V1_ACME, RPC_V03, REST_V03, RPC_V01]
#: The bindings that carry no tenant.
UNTENANTED = [b for b in BINDINGS if not b.tenant]


# ------------------------------------------------------------------ checks


def expect_ok(binding: Binding, outcome: Outcome) -> Any:
    """A successful answer's payload (of a stream: its first event)."""
    assert outcome.status == 200, (outcome.status, outcome.text[:500])
    if outcome.mimetype == "text/event-stream":
        data = _complete_events(outcome.text)[0]["data"]
    else:
        assert outcome.mimetype == "application/json", outcome.mimetype
        data = outcome.json()
    assert "error" not in data, data
    return binding.result(data)


#: Bindings whose ``tasks/resubscribe`` sends its error as the one event of a stream (0.3
#: clients opened a stream and read events); everything else answers a plain error.
ERRORS_IN_STREAM = {("jsonrpc-0.3", "subscribe"), ("jsonrpc-0.1", "subscribe")}


def expect_task_not_found(binding: Binding, outcome: Outcome, op: str = "") -> None:
    """-32001 (HTTP 200) in JSON-RPC, 404 NOT_FOUND in REST; reason TASK_NOT_FOUND; no
    stream, except one error event and nothing else for a 0.x ``tasks/resubscribe``."""
    if (binding.name, op) in ERRORS_IN_STREAM:
        assert outcome.mimetype == "text/event-stream", outcome.text[:300]
        events = _complete_events(outcome.text)
        assert len(events) == 1 and "event" not in events[0], outcome.text[:500]
        body = events[0]["data"]
    else:
        assert outcome.mimetype == "application/json", f"a stream started: {outcome.text[:300]}"
        body = outcome.json()
    if binding.kind == "jsonrpc":
        assert outcome.status == 200, (outcome.status, body)
        error = body["error"]
        assert error["code"] == -32001, body
        info = error["data"][0]
    else:
        assert outcome.status == 404, (outcome.status, body)
        error = body["error"]
        assert (error["code"], error["status"]) == (404, "NOT_FOUND"), body
        info = error["details"][0]
    assert info["reason"] == "TASK_NOT_FOUND", body


def shape(outcome: Outcome, *ids: str) -> Tuple[int, str, Any]:
    """An answer with the ids it names replaced by placeholders, for comparing denials."""
    text = outcome.text
    for n, value in enumerate(ids):
        text = text.replace(value, f"<id{n}>")
    if outcome.mimetype == "text/event-stream":
        return outcome.status, outcome.mimetype, _complete_events(text)
    return outcome.status, outcome.mimetype, json.loads(text)


def make_task(client, binding: Binding, headers: Dict[str, str], text: str = "") -> str:
    result = expect_ok(binding, perform(client, binding.create(text or f"{SECRET} {new_id()}"),
                                        headers))
    return binding.task_id_of(result)


def make_victim(client, binding: Binding, headers: Dict[str, str]) -> Tuple[str, str]:
    """A task in INPUT_REQUIRED with one webhook: ``(task id, config id)``."""
    task_id = make_task(client, binding, headers)
    pushed = expect_ok(binding, perform(client, binding.build("push-create", task_id), headers))
    return task_id, binding.config_id_of(pushed, task_id)


def snapshot(app: Flask, client, binding: Binding, headers: Dict[str, str], task_id: str,
             config_id: str) -> Dict[str, Any]:
    """Everything about a task: the store's record and webhooks, and the owner's view."""
    store = state_of(app).store
    record = store.load(task_id)
    push_op = "push-list" if "push-list" in binding.ops else "push-get"
    return {
        "seq": record.seq,
        "task": encode(record.task),
        "owner": (record.tenant, record.owner, record.dialect),
        "webhooks": sorted(json.dumps(encode(t.config), sort_keys=True)
                           for t in store.push_targets(task_id)),
        "owner's GetTask": expect_ok(binding, perform(client, binding.build("get", task_id),
                                                      headers)),
        "owner's webhooks": expect_ok(binding, perform(
            client, binding.build(push_op, task_id, config_id), headers)),
    }


# ------------------------------------------------------------------ the matrix


@dataclass(frozen=True)
class Case:
    """Who owns the task (and where), and who tries to reach it (and how)."""

    name: str
    app: str  # "strict" (credentials required) or "open" (anonymous callers served)
    owner: Tuple[Tuple[str, str], ...]
    owner_binding: Binding
    intruder: Tuple[Tuple[str, str], ...]
    binding: Binding

    @property
    def id(self) -> str:
        return f"{self.name}:{self.binding.name}"


def _case(name: str, app: str, owner: Dict[str, str], owner_binding: Binding,
          intruder: Dict[str, str], binding: Binding) -> Case:
    return Case(name, app, tuple(owner.items()), owner_binding, tuple(intruder.items()), binding)


def cases() -> List[Case]:
    found = []
    for b in BINDINGS:
        found.append(_case("bob-on-alice", "strict", ALICE, b, BOB, b))
        found.append(_case("anonymous-on-alice", "open", ALICE, b, NOBODY, b))
        found.append(_case("alice-on-anonymous", "open", NOBODY, b, ALICE, b))
    # Tenants: the same principal in another tenant (or in none) is somebody else.
    for b in UNTENANTED:
        found.append(_case("alice-on-alice@acme", "strict", ALICE, REST_V1_ACME, ALICE, b))
    for b in (RPC_V1_GLOBEX, REST_V1_GLOBEX):
        found.append(_case("alice@globex-on-alice@acme", "strict", ALICE, RPC_V1_ACME, ALICE, b))
    for b in (RPC_V1_ACME, REST_V1_ACME):
        found.append(_case("alice@acme-on-alice", "strict", ALICE, RPC_V1, ALICE, b))
    return found
