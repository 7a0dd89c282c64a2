"""The auth matrix (issue 6): principals x operations x dialects x bindings.

Nobody but a task's owner (a principal id, within a tenant) may read, list,
cancel, subscribe to, continue, or touch the webhooks of a task, in any
protocol generation (1.0, 0.3, 0.1) and any binding (JSON-RPC, REST, REST
with a ``/{tenant}`` prefix, 0.3's ``/rest/v1``).  Every denial must be the
"task not found" answer (-32001 / HTTP 404 ``TASK_NOT_FOUND``), look exactly
like the answer for a task id that does not exist, and change nothing: the
owner's view of the task and of its webhooks is the same afterwards.

Each matrix case also runs the same operation as the owner, so a request that
was wrong for reasons of its own (and would be refused for everybody) cannot
pass for a denial, and for the operations that change things it checks that
the snapshot compared before and after does see a change.

Callers without credentials or with bad ones get 401 with ``WWW-Authenticate``;
a caller the authenticator refuses gets 403; both are the same bytes whether or
not the task exists.  The matrix uses the Flask test client and the memory
store; one test repeats the essentials over real HTTP against gunicorn.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Tuple
from urllib.parse import urlencode

import pytest
import requests
from flask import Flask, g, request

from a2a_flask import A2A, AgentCapabilities
from a2a_flask.web.auth import APIKeyAuth, BearerAuth, Principal
from a2a_flask.protocol.codec import encode
from a2a_flask.protocol.errors import PermissionDeniedError
from a2a_flask.protocol.models import SecurityRequirement, StringList, new_id
from a2a_flask.stores.base import TaskQuery

from tests.conftest import make_card
from tests.support.helpers import ALICE, BOB, TOKENS, V1, Gate, Server, parse_sse, rpc_body, validate_card

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

OPS = ("get", "cancel", "subscribe", "continue", "continue-stream", "continue-push",
       "push-create", "push-get", "push-list", "push-delete")
#: Operations that change a task or its webhooks when the owner runs them.
MUTATING = {"cancel", "continue", "continue-stream", "continue-push", "push-create",
            "push-delete"}


def v1_message(text: str, task_id: str = "") -> Dict[str, Any]:
    message = {"messageId": new_id(), "role": "ROLE_USER", "parts": [{"text": text}]}
    if task_id:
        message["taskId"] = task_id
    return message


class Binding:
    """How one binding of one protocol generation spells each operation."""

    name = ""
    kind = "jsonrpc"  # or "rest"
    ops: Tuple[str, ...] = OPS
    tenant = ""
    can_list = True

    def build(self, op: str, task_id: str = "", config_id: str = "") -> Req:
        return getattr(self, "op_" + op.replace("-", "_"))(task_id, config_id)

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

    def op_get(self, t: str, c: str) -> Req:
        return self._rpc("GetTask", {"id": t})

    def op_cancel(self, t: str, c: str) -> Req:
        return self._rpc("CancelTask", {"id": t})

    def op_subscribe(self, t: str, c: str) -> Req:
        return self._rpc("SubscribeToTask", {"id": t}, True)

    def op_continue(self, t: str, c: str) -> Req:
        return self._rpc("SendMessage", {"message": v1_message("follow-up", t)})

    def op_continue_stream(self, t: str, c: str) -> Req:
        return self._rpc("SendStreamingMessage", {"message": v1_message("follow-up", t)}, True)

    def op_continue_push(self, t: str, c: str) -> Req:
        return self._rpc("SendMessage", {"message": v1_message("follow-up", t), "configuration": {
            "taskPushNotificationConfig": {"url": WEBHOOK, "token": push_token()}}})

    def op_push_create(self, t: str, c: str) -> Req:
        return self._rpc("CreateTaskPushNotificationConfig",
                         {"taskId": t, "url": WEBHOOK, "token": push_token()})

    def op_push_get(self, t: str, c: str) -> Req:
        return self._rpc("GetTaskPushNotificationConfig", {"taskId": t, "id": c})

    def op_push_list(self, t: str, c: str) -> Req:
        return self._rpc("ListTaskPushNotificationConfigs", {"taskId": t})

    def op_push_delete(self, t: str, c: str) -> Req:
        return self._rpc("DeleteTaskPushNotificationConfig", {"taskId": t, "id": c})

    def op_list(self, **query: Any) -> Req:
        return self._rpc("ListTasks", query)

    def listed(self, result: Any) -> Tuple[List[str], int, str]:
        return [t["id"] for t in result["tasks"]], result["totalSize"], result["nextPageToken"]

    def op_card(self) -> Req:
        return self._rpc("GetExtendedAgentCard", {})


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

    def op_get(self, t: str, c: str) -> Req:
        return Req("GET", f"{self.prefix}/tasks/{t}")

    def op_cancel(self, t: str, c: str) -> Req:
        return Req("POST", f"{self.prefix}/tasks/{t}:cancel")

    def op_subscribe(self, t: str, c: str) -> Req:
        return Req("POST", f"{self.prefix}/tasks/{t}:subscribe", streaming=True)

    def op_subscribe_get(self, t: str, c: str) -> Req:
        return Req("GET", f"{self.prefix}/tasks/{t}:subscribe", streaming=True)

    def op_continue(self, t: str, c: str) -> Req:
        return Req("POST", self.prefix + "/message:send", {"message": v1_message("follow-up", t)})

    def op_continue_stream(self, t: str, c: str) -> Req:
        return Req("POST", self.prefix + "/message:stream",
                   {"message": v1_message("follow-up", t)}, streaming=True)

    def op_continue_push(self, t: str, c: str) -> Req:
        return Req("POST", self.prefix + "/message:send", {
            "message": v1_message("follow-up", t),
            "configuration": {"taskPushNotificationConfig": {"url": WEBHOOK,
                                                             "token": push_token()}}})

    def op_push_create(self, t: str, c: str) -> Req:
        return Req("POST", f"{self.prefix}/tasks/{t}/pushNotificationConfigs",
                   {"url": WEBHOOK, "token": push_token()})

    def op_push_get(self, t: str, c: str) -> Req:
        return Req("GET", f"{self.prefix}/tasks/{t}/pushNotificationConfigs/{c}")

    def op_push_list(self, t: str, c: str) -> Req:
        return Req("GET", f"{self.prefix}/tasks/{t}/pushNotificationConfigs")

    def op_push_delete(self, t: str, c: str) -> Req:
        return Req("DELETE", f"{self.prefix}/tasks/{t}/pushNotificationConfigs/{c}")

    def op_list(self, **query: Any) -> Req:
        return Req("GET", f"{self.prefix}/tasks" + (f"?{urlencode(query)}" if query else ""))

    def listed(self, result: Any) -> Tuple[List[str], int, str]:
        return [t["id"] for t in result["tasks"]], result["totalSize"], result["nextPageToken"]

    def op_card(self) -> Req:
        return Req("GET", self.prefix + "/extendedAgentCard")


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

    def op_card(self) -> Req:
        return Req("GET", self.prefix + "/card")


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


MATRIX = [pytest.param(case, op, id=f"{case.id}:{op}") for case in cases()
          for op in case.binding.ops]

#: 0.1's ``tasks/send`` creates the task when the id is free, so only these are
#: not compared with the answer for a missing task (see the 0.1 test below).
V01_SENDS = {("jsonrpc-0.1", op) for op in ("continue", "continue-stream", "continue-push")}
#: The owner's equivalent where the owner's binding lacks the operation.
SAME_AS = {"push-get-first": "push-get", "subscribe-get": "subscribe"}


@pytest.mark.parametrize("case,op", MATRIX)
def test_nobody_but_the_owner_reaches_a_task(apps, case: Case, op: str):
    app = apps[case.app]
    client = app.test_client()
    owner, intruder = dict(case.owner), dict(case.intruder)
    task_id, config_id = make_victim(client, case.owner_binding, owner)
    before = snapshot(app, client, case.owner_binding, owner, task_id, config_id)

    denied = perform(client, case.binding.build(op, task_id, config_id), intruder)

    expect_task_not_found(case.binding, denied, op)
    for secret in (SECRET, before["task"]["contextId"], PUSH_TOKEN):
        assert secret not in denied.text
    assert snapshot(app, client, case.owner_binding, owner, task_id, config_id) == before
    if (case.binding.name, op) not in V01_SENDS:
        missing_task, missing_config = new_id(), new_id()
        missing = perform(client, case.binding.build(op, missing_task, missing_config), intruder)
        assert shape(denied, task_id, config_id) == shape(missing, missing_task, missing_config)

    # Control: the owner may do it, so the request itself was a good one.
    owner_op = op if op in case.owner_binding.ops else SAME_AS[op]
    allowed = perform(client, case.owner_binding.build(owner_op, task_id, config_id), owner)
    expect_ok(case.owner_binding, allowed)
    if op in MUTATING:
        assert snapshot(app, client, case.owner_binding, owner, task_id, config_id) != before


@pytest.mark.parametrize("op", ["cancel", "continue", "subscribe"])
@pytest.mark.parametrize("binding", BINDINGS, ids=repr)
def test_a_finished_task_of_another_principal_is_not_found_rather_than_refused(
        apps, binding: Binding, op: str):
    """The owner hears 'not cancelable' / 'terminal'; anyone else only 'not found',
    which does not reveal that the task exists or that it has finished."""
    client = apps["strict"].test_client()
    task_id = make_task(client, binding, ALICE, text="finish now")
    denied = perform(client, binding.build(op, task_id), BOB)
    expect_task_not_found(binding, denied, op)
    if (binding.name, op) not in V01_SENDS:
        missing = new_id()
        assert shape(denied, task_id) == shape(perform(client, binding.build(op, missing), BOB),
                                               missing)
    owned = perform(client, binding.build(op, task_id), ALICE)
    own = (_complete_events(owned.text)[0]["data"] if (binding.name, op) in ERRORS_IN_STREAM
           else owned.json())
    code = own["error"]["code"] if binding.kind == "jsonrpc" else \
        own["error"]["details"][0]["reason"]
    assert code in ({-32002, -32004} if binding.kind == "jsonrpc"
                    else {"TASK_NOT_CANCELABLE", "UNSUPPORTED_OPERATION"}), own


SMUGGLED_WEBHOOKS = {
    # Bob registers a webhook on his own task, or with a new message, naming alice's
    # task or reusing her config id: it must land on his task, never on hers.
    "1.0-create-with-her-config-id": lambda bobs, hers, cid: RPC_V1._rpc(
        "CreateTaskPushNotificationConfig",
        {"taskId": bobs, "id": cid, "url": "https://example.com/bob"}),
    "1.0-send-with-config-naming-her-task": lambda bobs, hers, cid: RPC_V1._rpc(
        "SendMessage", {"message": v1_message("new"), "configuration": {
            "returnImmediately": True, "taskPushNotificationConfig": {
                "taskId": hers, "id": cid, "url": "https://example.com/bob"}}}),
    "0.3-set-with-her-task-inside": lambda bobs, hers, cid: RPC_V03._rpc(
        "tasks/pushNotificationConfig/set", {"taskId": bobs, "pushNotificationConfig": {
            "id": cid, "taskId": hers, "url": "https://example.com/bob"}}),
    "0.3-rest-named-after-her-config": lambda bobs, hers, cid: Req(
        "POST", f"/a2a/rest/v1/tasks/{bobs}/pushNotificationConfigs", {
            "name": f"tasks/{hers}/pushNotificationConfigs/{cid}",
            "pushNotificationConfig": {"id": cid, "url": "https://example.com/bob"}}),
}


@pytest.mark.parametrize("how", SMUGGLED_WEBHOOKS)
def test_a_webhook_naming_anothers_task_lands_on_the_callers_own_task(apps, how: str):
    app = apps["strict"]
    client = app.test_client()
    hers, config_id = make_victim(client, RPC_V1, ALICE)
    before = snapshot(app, client, RPC_V1, ALICE, hers, config_id)
    bobs = make_task(client, RPC_V1, BOB)
    registered = perform(client, SMUGGLED_WEBHOOKS[how](bobs, hers, config_id), BOB)
    assert registered.status == 200 and "error" not in registered.json(), registered.text
    assert hers not in registered.text
    deleted = perform(client, RPC_V1.build("push-delete", bobs, config_id), BOB)
    expect_ok(RPC_V1, deleted)
    assert snapshot(app, client, RPC_V1, ALICE, hers, config_id) == before


# ------------------------------------------------------------------ ListTasks

LIST_CASES = [pytest.param(case, id=case.id) for case in cases() if case.binding.can_list
              and case.owner_binding.can_list]


@pytest.mark.parametrize("case", LIST_CASES)
def test_list_tasks_shows_and_counts_only_the_callers_own_tasks(fresh_app, case: Case):
    app = fresh_app(required=case.app == "strict")
    client = app.test_client()
    owner, intruder = dict(case.owner), dict(case.intruder)
    theirs = [make_task(client, case.owner_binding, owner) for _ in range(3)]
    mine = make_task(client, case.binding, intruder, text="my own task")
    their_context = state_of(app).store.load(theirs[0]).task.context_id

    def listing(binding: Binding, headers: Dict[str, str], **query: Any):
        outcome = perform(client, binding.op_list(**query), headers)
        return binding.listed(expect_ok(binding, outcome)), outcome.text

    (ids, total, token), text = listing(case.binding, intruder)
    assert (ids, total, token) == ([mine], 1, "")
    assert not any(t in text for t in theirs) and SECRET not in text
    (ids, total, _), _ = listing(case.binding, intruder, contextId=their_context)
    assert (ids, total) == ([], 0)
    (ids, total, _), _ = listing(case.binding, intruder, pageSize=1)
    assert (ids, total) == ([mine], 1)

    # The owner's page token does not open the owner's list to anybody else.
    (first, total, token), _ = listing(case.owner_binding, owner, pageSize=1)
    assert total == 3 and len(first) == 1 and token
    (ids, total, _), text = listing(case.binding, intruder, pageSize=1, pageToken=token)
    assert total == 1 and not set(ids) & set(theirs)
    # Control: the owner sees all three, and only them.
    (ids, total, _), _ = listing(case.owner_binding, owner)
    assert (sorted(ids), total) == (sorted(theirs), 3)


# ------------------------------------------------------------------ 401 / 403

REFUSALS = [
    # name, app, caller, HTTP status, what WWW-Authenticate must hold (None: no header needed)
    ("no-credentials", "strict", NOBODY, 401, 'Bearer realm="a2a"'),
    ("bad-token", "strict", BAD_TOKEN, 401, 'error="invalid_token"'),
    ("bad-token-auth-optional", "open", BAD_TOKEN, 401, 'error="invalid_token"'),
    ("not-bearer", "strict", MALFORMED, 401, 'Bearer realm="a2a"'),
    ("forbidden", "strict", MALLORY, 403, None),
    ("forbidden-auth-optional", "open", MALLORY, 403, None),
]


@pytest.mark.parametrize("binding", BINDINGS, ids=repr)
@pytest.mark.parametrize("name,app_name,caller,status,challenge", REFUSALS,
                         ids=[r[0] for r in REFUSALS])
def test_refused_callers_learn_nothing_and_change_nothing(apps, binding: Binding, name: str,
                                                          app_name: str, caller, status: int,
                                                          challenge: Optional[str]):
    app = apps[app_name]
    client = app.test_client()
    task_id, config_id = make_victim(client, binding, ALICE)
    before = snapshot(app, client, binding, ALICE, task_id, config_id)
    requests_ = [(op, binding.build(op, task_id, config_id), binding.build(op, new_id(), new_id()))
                 for op in binding.ops]
    requests_.append(("send", binding.create("hello"), binding.create("hello")))
    if binding.can_list:
        requests_.append(("list", binding.op_list(), binding.op_list(pageSize=5)))
    code, reason = {401: (-32040, "UNAUTHENTICATED"), 403: (-32041, "PERMISSION_DENIED")}[status]
    for op, existing_req, missing_req in requests_:
        existing = perform(client, existing_req, caller)
        missing = perform(client, missing_req, caller)
        assert existing.status == status, (op, existing.text)
        assert existing.mimetype == "application/json", (op, existing.text[:200])
        if challenge is not None:
            assert challenge in existing.headers.get("WWW-Authenticate", ""), (op, existing.headers)
        body = existing.json()
        if binding.kind == "jsonrpc":
            assert body["id"] is None  # a stranger's body is not read
            assert body["error"]["code"] == code
            assert body["error"]["data"][0]["reason"] == reason
        else:
            assert (body["error"]["code"], body["error"]["status"]) == (status, reason)
            assert body["error"]["details"][0]["reason"] == reason
        # Identical whether or not the task exists: not a byte depends on it.
        assert existing.text == missing.text, op
        assert task_id not in existing.text and SECRET not in existing.text
    assert snapshot(app, client, binding, ALICE, task_id, config_id) == before
    # The card stays public, whoever asks.
    card = client.get("/.well-known/agent-card.json", headers=caller)
    assert card.status_code == 200 and card.get_json()["securitySchemes"]


@pytest.mark.parametrize("app_name", ["strict", "open"])
def test_anonymous_is_refused_or_is_its_own_owner(apps, app_name: str):
    """Without credentials: 401 when they are required; else the anonymous owner "",
    who sees its own tasks only (alice's are covered by the matrix)."""
    client = apps[app_name].test_client()
    created = perform(client, RPC_V1.create("anonymous here"), NOBODY)
    if app_name == "strict":
        assert created.status == 401
        assert created.headers["WWW-Authenticate"] == 'Bearer realm="a2a"'
        return
    task_id = RPC_V1.task_id_of(expect_ok(RPC_V1, created))
    record = state_of(apps[app_name]).store.load(task_id)
    assert (record.owner, record.tenant) == ("", "")
    expect_ok(RPC_V1, perform(client, RPC_V1.build("get", task_id), NOBODY))
    expect_task_not_found(RPC_V1, perform(client, RPC_V1.build("get", task_id), BOB))


# ------------------------------------------------------------------ extended card

CARD_BINDINGS = [RPC_V1, REST_V1, REST_V1_ACME, RPC_V03, REST_V03]
CARD_CALLERS = [
    # name, app, caller, expected: a card name, or (HTTP status, WWW-Authenticate fragment)
    ("alice", "strict", ALICE, "Members: alice"),
    ("bob", "strict", BOB, "Members: bob"),
    ("bob-auth-optional", "open", BOB, "Members: bob"),
    ("anonymous-auth-optional", "open", NOBODY, (401, 'Bearer realm="a2a"')),
    ("no-credentials", "strict", NOBODY, (401, 'Bearer realm="a2a"')),
    ("bad-token", "strict", BAD_TOKEN, (401, 'error="invalid_token"')),
    ("forbidden", "strict", MALLORY, (403, None)),
]


@pytest.mark.parametrize("binding", CARD_BINDINGS, ids=repr)
@pytest.mark.parametrize("name,app_name,caller,expected", CARD_CALLERS,
                         ids=[c[0] for c in CARD_CALLERS])
def test_the_extended_card_is_for_authenticated_callers_and_per_caller(
        apps, binding: Binding, name: str, app_name: str, caller, expected):
    client = apps[app_name].test_client()
    public = client.get("/.well-known/agent-card.json").get_json()
    assert public["capabilities"]["extendedAgentCard"] is True
    assert public["supportsAuthenticatedExtendedCard"] is True
    outcome = perform(client, binding.op_card(), caller)
    if binding is REST_V03 and name == "anonymous-auth-optional":
        expected = public["name"]  # 0.3's GetAgentCard: the public card for anonymous callers
    if isinstance(expected, str):
        card = expect_ok(binding, outcome)
        assert card["name"] == expected
        validate_card(card)
        return
    status, challenge = expected
    assert outcome.status == status, outcome.text
    assert "Members" not in outcome.text
    if challenge:
        assert challenge in outcome.headers["WWW-Authenticate"]
    error = outcome.json()["error"]
    reason = error["data"][0]["reason"] if binding.kind == "jsonrpc" else \
        error["details"][0]["reason"]
    assert reason == {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED"}[status]


# ------------------------------------------------------------------ other authenticators


def _rest_get(client, task_id: str, headers: Dict[str, str]) -> Outcome:
    return perform(client, REST_V1.build("get", task_id), headers)


def test_an_api_key_agent_declares_its_scheme_and_owns_tasks_by_key(fresh_app):
    keys = {"key-alice": "alice", "key-bob": "bob"}
    app = fresh_app(auth=APIKeyAuth(keys.get, header="X-API-Key"))
    client = app.test_client()
    card = client.get("/.well-known/agent-card.json").get_json()
    validate_card(card)
    assert card["securitySchemes"]["apiKey"]["apiKeySecurityScheme"] == {
        "location": "header", "name": "X-API-Key"}
    assert card["securityRequirements"] == [{"schemes": {"apiKey": {}}}]
    assert (card["securitySchemes"]["apiKey"]["type"], card["securitySchemes"]["apiKey"]["in"]) \
        == ("apiKey", "header")
    assert card["security"] == [{"apiKey": []}]

    alice, bob = {"X-API-Key": "key-alice"}, {"X-API-Key": "key-bob"}
    task_id = make_task(client, REST_V1, alice)
    expect_task_not_found(REST_V1, _rest_get(client, task_id, bob))
    expect_task_not_found(RPC_V1, perform(client, RPC_V1.build("get", task_id), bob))
    expect_ok(REST_V1, _rest_get(client, task_id, alice))
    for caller in (NOBODY, {"X-API-Key": "key-mallory"}, {"X-API-Key": ""}, ALICE):
        refused = _rest_get(client, task_id, caller)
        assert refused.status == 401, (caller, refused.text)
        assert refused.headers["WWW-Authenticate"] == 'APIKey header="X-API-Key"'


def test_bearer_or_api_key_both_declared_and_one_principal_owns_across_schemes(fresh_app):
    keys = {"key-alice": "alice", "key-bob": "bob"}
    app = fresh_app(auth=[BearerAuth(verify), APIKeyAuth(keys.get)])
    client = app.test_client()
    card = client.get("/.well-known/agent-card.json").get_json()
    validate_card(card)
    assert set(card["securitySchemes"]) == {"bearer", "apiKey"}
    # Two alternatives: either scheme will do (not both at once).
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}},
                                            {"schemes": {"apiKey": {}}}]
    assert card["authentication"] == {"schemes": ["Bearer", "apiKey"]}

    task_id = make_task(client, RPC_V1, {"X-API-Key": "key-alice"})
    expect_ok(REST_V1, _rest_get(client, task_id, ALICE))  # the same alice, by bearer token
    expect_task_not_found(REST_V1, _rest_get(client, task_id, {"X-API-Key": "key-bob"}))
    expect_task_not_found(REST_V1, _rest_get(client, task_id, BOB))
    refused = _rest_get(client, task_id, NOBODY)
    assert refused.status == 401
    challenge = refused.headers["WWW-Authenticate"]
    assert 'Bearer realm="a2a"' in challenge and 'APIKey header="X-API-Key"' in challenge
    assert perform(client, RPC_V1.build("get", task_id), MALLORY).status == 403


USERS = {
    "s-alice": {"id": "alice", "role": "member"},
    "s-bob": {"id": "bob", "role": "member"},
    "s-eve": {"id": "eve", "role": "member", "disabled": True},
}
SESSION_CARD = dict(
    security_schemes={"session": {"apiKeySecurityScheme": {"location": "header",
                                                           "name": "X-Session"}}},
    security_requirements=[SecurityRequirement({"session": StringList()})],
)


def session_app(register_challenge: bool = False) -> Flask:
    """A flask-login style app: a before_request hook loads ``g.user``; the agent's
    ``@a2a.authenticate`` turns it into a Principal."""
    app = Flask("session_app")

    @app.before_request
    def load_user() -> None:
        g.user = USERS.get(request.headers.get("X-Session", ""))

    a2a = A2A(card=make_card(**SESSION_CARD), executor=paused, store="memory://")

    @a2a.authenticate
    def current_user():
        user = g.get("user")
        if user is None:
            return None
        if user.get("disabled"):
            raise PermissionDeniedError("This account is disabled")
        return Principal(user["id"], claims={"role": user["role"]})

    if register_challenge:
        current_user.challenge = 'Session header="X-Session"'  # type: ignore[attr-defined]
    a2a.init_app(app)
    return app


@pytest.fixture
def sessions() -> Iterator[Flask]:
    app = session_app()
    yield app
    close(app)


def test_a_custom_authenticator_from_flask_g_owns_tasks(sessions):
    client = sessions.test_client()
    card = client.get("/.well-known/agent-card.json").get_json()
    validate_card(card)
    assert card["securitySchemes"]["session"]["apiKeySecurityScheme"] == {
        "location": "header", "name": "X-Session"}
    assert card["securityRequirements"] == [{"schemes": {"session": {}}}]

    alice, bob = {"X-Session": "s-alice"}, {"X-Session": "s-bob"}
    task_id = make_task(client, RPC_V1, alice)
    assert state_of(sessions).store.load(task_id).owner == "alice"
    for binding in (RPC_V1, REST_V1, RPC_V03, REST_V03):
        expect_task_not_found(binding, perform(client, binding.build("get", task_id), bob))
        expect_ok(binding, perform(client, binding.build("get", task_id), alice))
    for binding in (RPC_V1, REST_V1):
        missing = perform(client, binding.build("get", task_id), {"X-Session": "s-unknown"})
        assert missing.status == 401 and missing.headers.get("WWW-Authenticate")
        disabled = perform(client, binding.build("get", task_id), {"X-Session": "s-eve"})
        assert disabled.status == 403 and "disabled" in disabled.text


def test_the_401_challenge_of_a_custom_authenticator_names_a_declared_scheme(sessions):
    refused = perform(sessions.test_client(), RPC_V1.build("get", new_id()), NOBODY)
    assert refused.status == 401
    assert not refused.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_custom_authenticator_may_name_its_own_challenge():
    app = session_app(register_challenge=True)
    try:
        refused = perform(app.test_client(), RPC_V1.build("get", new_id()), NOBODY)
        assert refused.headers["WWW-Authenticate"] == 'Session header="X-Session"'
    finally:
        close(app)


# ------------------------------------------------------------------ live streams


class LiveStream:
    """An SSE response read piece by piece while the task runs."""

    def __init__(self, response) -> None:
        assert response.status_code == 200 and response.mimetype == "text/event-stream", \
            response.get_data(as_text=True)
        self.response = response
        self.chunks = iter(response.response)
        self.text = ""

    def read_until(self, needle: str) -> None:
        while needle not in self.text.lower():
            self.text += next(self.chunks).decode()

    def read_to_end(self) -> str:
        for chunk in self.chunks:
            self.text += chunk.decode()
        self.response.close()
        return self.text


def open_stream(client, req: Req, headers: Dict[str, str]) -> LiveStream:
    return LiveStream(client.open(req.path, method=req.method, json=req.body,
                                  headers={**req.headers, **headers}, buffered=False))


@pytest.mark.parametrize("binding", [RPC_V1, REST_V1, REST_V1_ACME, RPC_V03, REST_V03, RPC_V01],
                         ids=repr)
def test_a_subscribe_to_anothers_live_task_fails_before_any_stream(fresh_app, binding: Binding):
    gate = Gate()

    def live(ctx):
        ctx.working("started")
        gate.release.wait(10)
        ctx.artifact("alice-live-result")
        ctx.complete()

    app = fresh_app(live)
    client = app.test_client()
    try:
        stream = open_stream(client, binding.create("go", stream=True), ALICE)
        stream.read_until("working")
        [record] = state_of(app).store.list_tasks(
            TaskQuery(tenant=binding.tenant, owner="alice")).records
        task_id = record.task.id
        resubscribed = open_stream(client, binding.build("subscribe", task_id), ALICE)
        resubscribed.read_until("working")

        ops = [o for o in binding.ops if o.startswith("subscribe")]
        for op in ops + ["continue-stream", "continue", "cancel"]:
            denied = perform(client, binding.build(op, task_id), BOB)
            expect_task_not_found(binding, denied, op)
            assert "alice-live-result" not in denied.text
            unauthenticated = perform(client, binding.build(op, task_id), NOBODY)
            assert unauthenticated.status == 401
            assert unauthenticated.mimetype == "application/json"
        assert state_of(app).service.open_streams("bob") == 0
        assert state_of(app).service.open_streams("alice") == 2

        gate.release.set()
        for live_stream in (stream, resubscribed):
            text = live_stream.read_to_end()
            assert "alice-live-result" in text and "completed" in text.lower()
            assert '"error"' not in text
        assert state_of(app).store.load(task_id).state.value == "TASK_STATE_COMPLETED"
        assert state_of(app).service.open_streams("alice") == 0
    finally:
        gate.release.set()


# ------------------------------------------------------------------ 0.1's client-chosen ids


@pytest.mark.parametrize("method", ["tasks/send", "tasks/sendSubscribe"])
def test_v01_send_with_another_principals_task_id_never_touches_their_task(apps, method):
    """0.1 clients choose task ids, and ids are global: an id another caller's task
    already uses is answered TaskNotFound (a free one creates a task). That tells a
    prober the id is taken (a documented 0.1 limitation, docs/security.rst: such
    ids must be unguessable, as the 0.1 spec's UUIDs are); it never reaches the task."""
    app = apps["strict"]
    client = app.test_client()
    alices = make_task(client, RPC_V01, ALICE)
    before = app.extensions["a2a"]["a2a"].store.load(alices)
    message = RpcV01.message("bob here")
    streaming = method == "tasks/sendSubscribe"

    def send(task_id: str) -> Outcome:
        return perform(client, RpcV01._rpc(method, {"id": task_id, "message": message},
                                           streaming), BOB)

    taken, free = send(alices), send(new_id())
    assert '"code":-32001' in taken.text.replace(" ", "") and "bob here" not in taken.text
    assert "error" not in free.text, free.text
    after = app.extensions["a2a"]["a2a"].store.load(alices)
    assert (after.seq, after.task, after.owner) == (before.seq, before.task, before.owner)


# ------------------------------------------------------------------ over real HTTP


def test_401_403_and_404_over_real_http_with_gunicorn():
    env = {"A2A_TEST_TOKENS": "t-alice=alice,t-bob=bob", "A2A_TEST_FORBIDDEN": "t-mallory"}
    alice, bob = {"Authorization": "Bearer t-alice"}, {"Authorization": "Bearer t-bob"}
    mallory = {"Authorization": "Bearer t-mallory"}
    with Server("tests.support.auth_app:app", env=env) as server:
        def rpc(method: str, params: Any, headers: Dict[str, str]) -> requests.Response:
            return requests.post(server.url + "/a2a", json=rpc_body(method, params),
                                 headers={**V1, **headers}, timeout=30)

        def rest(method: str, path: str, headers: Dict[str, str], **kw: Any) -> requests.Response:
            return requests.request(method, server.url + "/a2a/rest" + path, headers=headers,
                                    timeout=30, **kw)

        card = requests.get(server.url + "/.well-known/agent-card.json", timeout=30)
        assert card.status_code == 200
        validate_card(card.json())
        assert card.json()["securitySchemes"]["bearer"]["httpAuthSecurityScheme"] == {
            "scheme": "Bearer"}

        created = rest("POST", "/message:send", alice, json={"message": v1_message(SECRET)})
        assert created.status_code == 200, created.text
        task_id = created.json()["task"]["id"]
        missing_id = new_id()

        for headers, status, challenge in ((NOBODY, 401, 'Bearer realm="a2a"'),
                                           ({"Authorization": "Bearer nope"}, 401,
                                            'error="invalid_token"'),
                                           (mallory, 403, None)):
            answers = [rpc("GetTask", {"id": task_id}, headers),
                       rest("GET", f"/tasks/{task_id}", headers)]
            twins = [rpc("GetTask", {"id": missing_id}, headers),
                     rest("GET", f"/tasks/{missing_id}", headers)]
            for answer, twin in zip(answers, twins):
                assert answer.status_code == status, answer.text
                assert answer.headers["Content-Type"].startswith("application/json")
                assert answer.content == twin.content
                if challenge:
                    assert challenge in answer.headers["WWW-Authenticate"]

        denied_rpc = rpc("GetTask", {"id": task_id}, bob)
        assert denied_rpc.status_code == 200 and denied_rpc.json()["error"]["code"] == -32001
        denied_rest = rest("GET", f"/tasks/{task_id}", bob)
        assert denied_rest.status_code == 404
        assert denied_rest.json()["error"]["details"][0]["reason"] == "TASK_NOT_FOUND"
        subscribe = rest("POST", f"/tasks/{task_id}:subscribe", bob, stream=True)
        assert subscribe.status_code == 404
        assert subscribe.headers["Content-Type"].startswith("application/json")
        subscribe.close()
        canceled = rest("POST", f"/tasks/{task_id}:cancel", bob)
        assert canceled.status_code == 404 and SECRET not in canceled.text

        own = rest("GET", f"/tasks/{task_id}", alice)
        assert own.status_code == 200
        assert own.json()["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert SECRET in own.text
