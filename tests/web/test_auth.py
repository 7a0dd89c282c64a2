"""The auth matrix: principals x operations x dialects x bindings.

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
store; test_auth_streams.py repeats the essentials over real HTTP against gunicorn.
The callers, apps and bindings are in ``tests/support/auth_matrix.py``; other
authenticators are tested in test_auth_authenticators.py, live streams and 0.1's
client-chosen ids in test_auth_streams.py.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import pytest

from a2a_flask.protocol.models import new_id
from a2a_flask.protocol.operations import OPERATIONS

# apps and fresh_app are fixtures (pytest finds them where they are imported).
from tests.support.auth_matrix import (
    BAD_TOKEN, BINDINGS, Binding, Case, ERRORS_IN_STREAM, MALFORMED, MALLORY, MUTATING, NOBODY,
    OPS, PUSH_TOKEN, REST_V03, REST_V1, REST_V1_ACME, RPC_V03, RPC_V1, Req, SECRET,
    TESTED_APART, V1_CALLS, _complete_events, apps, cases, expect_ok, expect_task_not_found,
    fresh_app, make_task, make_victim, perform, shape, snapshot, state_of, v1_message,
)
from tests.support.helpers import ALICE, BOB, validate_card


# ------------------------------------------------------------------ the matrix

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


# ------------------------------------------------------------------ coverage of the table


def test_every_operation_of_the_table_is_auth_tested():
    """Every operation of ``a2a_flask.protocol.operations`` is in the matrix above, through
    V1_CALLS (each 1.0 binding sends it as the table says), or has a test of its own here:
    a new operation fails this until it is auth-tested."""
    in_matrix = {method for method, _ in V1_CALLS.values()}
    assert in_matrix | set(TESTED_APART) == {op.name for op in OPERATIONS}
    assert not in_matrix & set(TESTED_APART)
    for binding in BINDINGS:
        if binding.name.startswith(("jsonrpc-1.0", "rest-1.0")):
            assert set(OPS) <= set(binding.ops), binding
    for test in TESTED_APART.values():
        assert callable(globals()[test]), test
