"""Agents of one app that share a store keep their tasks apart.

Agent ``y`` asks "city?"; agent ``x``, on the same store, must answer every request
about that task as about a task that does not exist (its executor never runs on it),
on every store backend (the memory store and the example store shared as one object),
through JSON-RPC and the ``flask a2a`` commands.  Then what a task stored before store
scopes existed looks like (the default agent keeps it; a named one does so only with
``A2A_STORE_SCOPE=a2a``), and the refusals at ``init_app``.
"""
from __future__ import annotations

from typing import Any, Dict, List

import pytest
from flask import Flask

from a2a_flask import A2A, AgentCapabilities
from a2a_flask.protocol.models import Message, Part, Role, Task, TaskState, TaskStatus, utc_now
from a2a_flask.stores import MemoryStore, TaskQuery, TaskRecord, open_store
from a2a_flask.stores.base import SCOPE_SEPARATOR, scoped

from examples.dict_store import DictStore
from tests.conftest import STORES, make_card
from tests.support.helpers import user_message
from tests.support.wire import rpc, stream

NOT_FOUND = -32001
#: Every store backend, and the example store (``dict://``, examples/dict_store.py).
EVERY_STORE = pytest.mark.parametrize("store_url", STORES + ["dict"], indirect=True)
PUSH_CARD = dict(capabilities=AgentCapabilities(streaming=True, push_notifications=True))


class Agents:
    """An app with agents ``x`` (at /x) and ``y`` (at /y) on one store; ``ran`` lists
    who ran on which task."""

    def __init__(self, store: Any, names=("x", "y"), **config: Any) -> None:
        self.ran: List[tuple] = []
        self.app = Flask("isolation")
        self.app.config.update({"A2A_PUSH_ALLOWED_HOSTS": "example.com",
                                **{"A2A_" + k.upper(): v for k, v in config.items()}})
        try:
            for name in names:
                A2A(self.app, card=make_card(**PUSH_CARD), executor=self._executor(name),
                    store=store, name=name, url_prefix=f"/{name}")
        except Exception:
            self.close()
            raise

    def _executor(self, name: str):
        def run(ctx):
            self.ran.append((name, ctx.task_id, ctx.text, ctx.tenant))
            if name == "y" and not ctx.follow_up:
                ctx.ask("city?")
                return None
            return f"{name} handled: {ctx.text}"
        return run

    def rpc(self, name: str, method: str, params: Any) -> Dict[str, Any]:
        return rpc(self.app, method, params, path=f"/{name}")

    def state(self, name: str):
        return self.app.extensions["a2a"][name]

    def cli(self, *args: str):
        return self.app.test_cli_runner().invoke(args=["a2a", *args])

    def close(self) -> None:
        for state in list(self.app.extensions.get("a2a", {}).values()):
            state.close()


def shared_store(store_url: str) -> Any:
    """What two agents share: the URL, or for a process-local store one object (each
    agent naming ``memory://`` or ``dict://`` would get its own)."""
    if store_url.startswith("memory:"):
        return MemoryStore()
    return DictStore() if store_url.startswith("dict:") else store_url


@pytest.fixture
def agents(store_url):
    made = Agents(shared_store(store_url))
    yield made
    made.close()


def code(answer: Dict[str, Any]) -> int:
    assert "result" not in answer, answer
    return answer["error"]["code"]


def ys_question(agents: Agents) -> Dict[str, Any]:
    task = agents.rpc("y", "SendMessage", {"message": user_message("trip", "m-y")})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return task


@EVERY_STORE
def test_an_agent_cannot_reach_another_agents_task(agents):
    task = ys_question(agents)
    task_id = task["id"]
    ran = list(agents.ran)
    # GetTask, ListTasks (not counted either).
    assert code(agents.rpc("x", "GetTask", {"id": task_id})) == NOT_FOUND
    listed = agents.rpc("x", "ListTasks", {})["result"]
    assert (listed.get("tasks", []), listed["totalSize"]) == ([], 0)
    # A follow-up through x: not found, and x's executor never runs.
    follow_up = user_message("Paris", "m-x", taskId=task_id, contextId=task["contextId"])
    assert code(agents.rpc("x", "SendMessage", {"message": follow_up})) == NOT_FOUND
    streamed = stream(agents.app, "SendStreamingMessage", {"message": follow_up}, path="/x")
    assert streamed[0]["data"]["error"]["code"] == NOT_FOUND
    # CancelTask and SubscribeToTask.
    assert code(agents.rpc("x", "CancelTask", {"id": task_id})) == NOT_FOUND
    subscribed = stream(agents.app, "SubscribeToTask", {"id": task_id}, path="/x")
    assert subscribed[0]["data"]["error"]["code"] == NOT_FOUND
    # Every push-config operation.
    hook = {"taskId": task_id, "id": "h1", "url": "https://example.com/hook"}
    assert code(agents.rpc("x", "CreateTaskPushNotificationConfig", hook)) == NOT_FOUND
    assert agents.rpc("y", "CreateTaskPushNotificationConfig", hook)["result"]["id"] == "h1"
    for method, params in [("GetTaskPushNotificationConfig", {"taskId": task_id, "id": "h1"}),
                           ("ListTaskPushNotificationConfigs", {"taskId": task_id}),
                           ("DeleteTaskPushNotificationConfig", {"taskId": task_id, "id": "h1"})]:
        assert code(agents.rpc("x", method, params)) == NOT_FOUND, method
    assert agents.ran == ran  # nobody ran
    # y's task is as y left it, its webhook still there.
    mine = agents.rpc("y", "GetTask", {"id": task_id})["result"]
    assert mine["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert [m["messageId"] for m in mine["history"]] == [m["messageId"] for m in task["history"]]
    configs = agents.rpc("y", "ListTaskPushNotificationConfigs", {"taskId": task_id})["result"]
    assert [c["id"] for c in configs["configs"]] == ["h1"]
    # y itself goes on with its task: y's executor, not x's.
    answered = agents.rpc("y", "SendMessage", {"message": follow_up})["result"]["task"]
    assert answered["status"]["state"] == "TASK_STATE_COMPLETED"
    assert agents.ran[-1][:3] == ("y", task_id, "Paris")
    assert [t["id"] for t in agents.rpc("y", "ListTasks", {})["result"]["tasks"]] == [task_id]


@EVERY_STORE
def test_each_agent_lists_only_its_own_tasks_in_each_tenant(agents):
    ys = ys_question(agents)["id"]
    xs = agents.rpc("x", "SendMessage", {"message": user_message("hi", "m-x1")})["result"]["task"]
    xs_acme = agents.rpc("x", "SendMessage", {"message": user_message("hi", "m-x2"),
                                              "tenant": "acme"})["result"]["task"]
    ids = lambda name, **params: [t["id"] for t in agents.rpc(name, "ListTasks", params)["result"].get("tasks", [])]
    assert ids("x") == [xs["id"]]
    assert ids("x", tenant="acme") == [xs_acme["id"]]
    assert ids("y") == [ys]
    assert ids("y", tenant="acme") == []
    assert code(agents.rpc("y", "GetTask", {"id": xs_acme["id"], "tenant": "acme"})) == NOT_FOUND
    # The executor sees the caller's tenant, not how it is stored.
    assert ("x", xs_acme["id"], "hi", "acme") in agents.ran


@EVERY_STORE
def test_the_commands_of_an_agent_show_none_of_another_agents_tasks(agents):
    task_id = ys_question(agents)["id"]
    mine = agents.rpc("x", "SendMessage", {"message": user_message("hi", "m-x")})["result"]["task"]["id"]
    listed = agents.cli("--agent", "x", "tasks")
    assert listed.exit_code == 0, listed.output
    assert mine in listed.output and task_id not in listed.output
    assert "1 of 1 tasks" in listed.output
    by_owner = agents.cli("--agent", "x", "tasks", "--owner", "")
    assert mine in by_owner.output and task_id not in by_owner.output
    for command in (["task", task_id], ["cancel", task_id]):
        result = agents.cli("--agent", "x", *command)
        assert result.exit_code == 1
        assert f"no task {task_id!r} in the store" in result.output, result.output
    assert agents.rpc("y", "GetTask", {"id": task_id})["result"]["status"]["state"] == \
        "TASK_STATE_INPUT_REQUIRED"
    theirs = agents.cli("--agent", "y", "tasks")
    assert task_id in theirs.output and mine not in theirs.output
    shown = agents.cli("--agent", "y", "task", task_id)
    assert shown.exit_code == 0 and "input-required" in shown.output, shown.output


@EVERY_STORE
def test_an_agents_purge_deletes_only_its_own_finished_tasks(agents):
    """``flask a2a --agent x purge`` is x's retention: y's finished task stays."""
    theirs = ys_question(agents)["id"]
    done = agents.rpc("y", "SendMessage", {"message": {**user_message("Paris", "m-y2"),
                                                       "taskId": theirs}})
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED", done
    mine = agents.rpc("x", "SendMessage", {"message": user_message("hi", "m-x")})["result"]["task"]
    assert mine["status"]["state"] == "TASK_STATE_COMPLETED"
    purged = agents.cli("--agent", "x", "purge", "--finished-before", "2999-01-01")
    assert purged.exit_code == 0, purged.output
    assert "1 finished tasks" in purged.output and "Deleted 1 tasks." in purged.output
    assert code(agents.rpc("x", "GetTask", {"id": mine["id"]})) == NOT_FOUND
    assert agents.rpc("y", "GetTask", {"id": theirs})["result"]["status"]["state"] == \
        "TASK_STATE_COMPLETED"


# ------------------------------------------------------------- scopes and tenants


@EVERY_STORE
def test_no_tenant_of_the_default_agent_reaches_a_named_agents_tasks(store_url):
    made = Agents(shared_store(store_url), names=("a2a", "x"))
    try:
        xs = made.rpc("x", "SendMessage", {"message": user_message("hi", "m-x")})["result"]["task"]
        # The tenant "x" of the default agent is not agent x's (empty) tenant...
        assert code(made.rpc("a2a", "GetTask", {"id": xs["id"], "tenant": "x"})) == NOT_FOUND
        assert made.rpc("a2a", "ListTasks", {"tenant": "x"})["result"]["totalSize"] == 0
        assert made.rpc("a2a", "ListTasks", {})["result"]["totalSize"] == 0
        # ...and no tenant may hold the separator the stored scope ends with.
        forged = made.rpc("a2a", "GetTask", {"id": xs["id"], "tenant": "x" + SCOPE_SEPARATOR})
        assert code(forged) == -32602
    finally:
        made.close()


def test_a_named_agents_tenants_leave_room_for_its_scope():
    made = Agents(MemoryStore(), names=("x",))
    try:
        longest = "t" * (255 - len("x") - 1)
        assert made.rpc("x", "SendMessage", {"message": user_message("hi"), "tenant": longest}
                        )["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
        too_long = made.rpc("x", "ListTasks", {"tenant": longest + "t"})["error"]
        assert too_long["code"] == -32602 and "longer than 253 characters" in too_long["message"]
    finally:
        made.close()


# ------------------------------------------------------------- tasks stored before scopes


def old_task(store, task_id: str) -> None:
    """A task as 0.1 stored it: anonymous, no tenant, no agent scope."""
    message = Message(message_id="m-old", role=Role.USER, parts=[Part(text="old")],
                      task_id=task_id, context_id="c-old")
    task = Task(id=task_id, context_id="c-old",
                status=TaskStatus(state=TaskState.COMPLETED, timestamp=utc_now()),
                history=[message])
    store.create(TaskRecord(task, 1, "", "", "1.0"), task)


@EVERY_STORE
@pytest.mark.parametrize("name, scope, sees", [
    ("a2a", "", True),     # the default agent: every task it stored is still its own
    ("x", "", False),      # a named agent: its older tasks are not its own...
    ("x", "a2a", True),    # ...unless it keeps the default agent's scope
])
def test_a_task_stored_before_scopes_is_the_default_agents(store_url, tmp_path, name, scope, sees):
    store = shared_store(store_url)
    if isinstance(store, str):
        opened = open_store(store)
        old_task(opened, "old-1")
        opened.close()
    else:
        old_task(store, "old-1")
    made = Agents(store, names=(name,), store_scope=scope)
    try:
        got = made.rpc(name, "GetTask", {"id": "old-1"})
        listed = made.rpc(name, "ListTasks", {})["result"]
        cli = made.cli("--agent", name, "tasks")
        if sees:
            assert got["result"]["id"] == "old-1"
            assert [t["id"] for t in listed["tasks"]] == ["old-1"]
            assert "old-1" in cli.output
        else:
            assert code(got) == NOT_FOUND
            assert listed["totalSize"] == 0
            assert "old-1" not in cli.output
    finally:
        made.close()


def test_an_old_record_lists_under_the_empty_scope_only():
    """What every store holds for a task of the default agent is what it held before."""
    assert scoped("", "acme") == "acme" and scoped("", "") == ""
    store = MemoryStore()
    old_task(store, "old-1")
    assert [r.task_id for r in store.list_tasks(TaskQuery()).records] == ["old-1"]
    assert store.list_tasks(TaskQuery(tenant=scoped("x", ""))).records == []


# ------------------------------------------------------------- refused at init_app


def test_two_agents_with_one_scope_on_one_store_are_refused(tmp_path):
    url = f"sqlite:///{tmp_path}/tasks.db"
    with pytest.raises(RuntimeError, match="share a task store with store scope 'shared'"):
        Agents(url, store_scope="shared")
    with pytest.raises(RuntimeError, match="the default \\(empty\\) store scope"):
        Agents(url, names=("a2a", "x"), store_scope="a2a")
    one = MemoryStore()
    with pytest.raises(RuntimeError, match="share a task store"):
        Agents(one, store_scope="shared")
    # Each agent naming memory:// has a store of its own: nothing to keep apart.
    Agents("memory://", store_scope="shared").close()
    # Different scopes on one store are fine, and a closed agent gives its scope back.
    made = Agents(url)
    made.close()


def test_a_scope_that_cannot_be_stored_is_refused():
    with pytest.raises(ValueError, match="A2A_STORE_SCOPE must be at most 64 characters"):
        Agents(MemoryStore(), names=("x",), store_scope="s" * 65)
    with pytest.raises(ValueError, match="its name, the store scope"):
        Agents(MemoryStore(), names=("n" * 65,))
