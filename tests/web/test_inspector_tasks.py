"""The inspector's task list and task panel: its JSON API in-process (who sees what,
bounds, parameters, files), then the page in headless Chromium against a real
gunicorn + gevent server (``tests.support.inspector_tasks_app``): rows, filters,
pages, a live task's timeline, cancel, artifacts and hostile strings.

Set ``A2A_SCREENSHOTS`` to a folder to save the screenshots the docs show
(``A2A_SCREENSHOTS=docs/_static``).
"""
from __future__ import annotations

import base64
import json
import os
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
import requests
from flask import Flask
from urllib.parse import parse_qs, urlsplit

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, Part
from a2a_flask.web.inspector import make_inspector
from a2a_flask.engine.writer import generation_at
from a2a_flask.web.inspector.api import MAX_TEXT

from tests.support.helpers import V1, Server, free_port
from tests.web.test_inspector import (  # noqa: F401 - the browser fixtures
    CHROMIUM_ARGS, Watch, browser, chromium, needs_browser)

#: The browser tests start gunicorn and Chromium (tests/conftest.py reads this).
pytestmark = pytest.mark.declare(server=["chromium"])

FILE_BYTES = b"id,name\n1,lighthouse\n"
HOSTILE = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=2</script>'
HOSTILE_FILE = '"><img src=y onerror=window.__pwned=3>.csv'
HOSTILE_META = {"<b>key</b>": '<img src=z onerror="window.__pwned=4">'}
HOSTILE_TENANT = "<svg onload=window.__pwned=5>"
SKILLS = [AgentSkill(id="echo", name="Echo", description="Echoes", tags=["echo"])]


# ------------------------------------------------------------------ the API, in-process


def caller():
    from flask import request
    return request.headers.get("X-User") or None


def executor(ctx):
    text = ctx.text.strip()
    if text.startswith("fail"):
        ctx.fail(f"The quota of {ctx.tenant or 'everyone'} is used up")
    elif text.startswith("chunks"):
        ctx.working("Writing...")
        for index in range(10):
            ctx.artifact(f"word{index} ", append=True)
        ctx.complete("Written.")
    elif text.startswith("long"):
        ctx.artifact("x" * (MAX_TEXT + 500), name="long")
        ctx.complete()
    else:
        for step in range(3):
            ctx.working(f"Step {step}")
        parts = [Part(text=text)] + [Part(raw=f.raw, filename=f.filename, media_type=f.media_type)
                                     for f in ctx.files]
        ctx.artifact(parts, name="echo")
        ctx.complete("Echoed.")


@pytest.fixture
def api_app():
    """An agent whose callers are named by ``X-User`` (anonymous without it)."""
    app = Flask("inspector_tasks_test")
    app.config.update(A2A_INSPECTOR=True, A2A_AUTH_REQUIRED=False, A2A_PUSH_ALLOW_PRIVATE=True)
    card = AgentCard(name="Tasks", description="d", version="1", skills=SKILLS,
                     capabilities=AgentCapabilities(streaming=True, push_notifications=True),
                     default_input_modes=["text/plain", "text/csv"])
    A2A(app, card=card, executor=executor, auth=caller)
    yield app
    for state in app.extensions["a2a"].values():
        state.close()


def send(target, text: str, user: Optional[str] = None, tenant: str = "",
         parts: Optional[List[Dict[str, Any]]] = None, metadata: Optional[Dict[str, Any]] = None,
         wait: bool = True, prefix: str = "/a2a") -> Dict[str, Any]:
    """SendMessage to the app (a Flask test client) or a server's URL; the task."""
    message: Dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER",
                               "parts": parts or [{"text": text}]}
    if metadata:
        message["metadata"] = metadata
    params: Dict[str, Any] = {"message": message, "configuration": {"returnImmediately": not wait}}
    if tenant:
        params["tenant"] = tenant
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    headers = {**V1, **({"X-User": user} if user else {})}
    if isinstance(target, str):
        answer = requests.post(target + prefix, json=body, headers=headers, timeout=30).json()
    else:
        answer = target.post("/a2a/", json=body, headers=headers).get_json()
    assert "result" in answer, answer
    return answer["result"]["task"]


def api(client, path: str, user: Optional[str] = None, **query: Any):
    response = client.get("/a2a/inspector/api/" + path, query_string=query,
                          headers={"X-User": user} if user else {})
    return response


def test_rows_say_what_was_asked_who_asked_and_why_it_failed(api_app):
    client = api_app.test_client()
    done = send(client, "hello there\nsecond line", "alice")
    failed = send(client, "fail at 10:42", "alice")
    send(client, "bob's question", "bob")
    send(client, "tenant task", "alice", tenant="acme")
    send(client, "anonymous task")

    response = api(client, "tasks", "alice")
    assert response.status_code == 200 and response.mimetype == "application/json"
    assert response.headers["Cache-Control"] == "no-store"
    rows = {row["id"]: row for row in response.get_json()["tasks"]}
    assert set(rows) == {done["id"], failed["id"]}  # not bob's, not the other tenant's
    row = rows[failed["id"]]
    assert row["state"] == "TASK_STATE_FAILED" and row["asked"] == "fail at 10:42"
    assert row["statusText"] == "The quota of everyone is used up"
    assert row["owner"] == "alice" and row["tenant"] == ""
    assert row["createdAt"] <= row["updatedAt"]
    assert rows[done["id"]]["asked"] == "hello there"  # the first line
    assert rows[done["id"]]["contextId"] == done["contextId"]

    (acme,) = api(client, "tasks", "alice", tenant="acme").get_json()["tasks"]
    assert acme["asked"] == "tenant task" and acme["tenant"] == "acme" and acme["owner"] == "alice"
    (anonymous,) = api(client, "tasks").get_json()["tasks"]
    assert anonymous["asked"] == "anonymous task" and anonymous["owner"] == ""

    # Filters are the store's: state and context, one page at a time.
    only = api(client, "tasks", "alice", state="failed").get_json()["tasks"]
    assert [r["id"] for r in only] == [failed["id"]]
    only = api(client, "tasks", "alice", contextId=done["contextId"]).get_json()["tasks"]
    assert [r["id"] for r in only] == [done["id"]]


def test_a_row_names_the_tenant_as_the_caller_does():
    """An agent not named ``a2a`` keeps its tasks under its store scope: the page says
    the tenant the caller named, not how the store keys it."""
    app = Flask("inspector_scoped")
    app.config.update(A2A_INSPECTOR=True)
    A2A(app, card=AgentCard(name="Scoped", description="d", version="1", skills=SKILLS),
        executor=executor, name="scoped", url_prefix="/a2a")
    try:
        client = app.test_client()
        task = send(client, "hello acme", tenant="acme")
        (row,) = api(client, "tasks", tenant="acme").get_json()["tasks"]
        assert row["id"] == task["id"] and row["tenant"] == "acme"
        detail = api(client, f"tasks/{task['id']}", tenant="acme").get_json()
        assert detail["task"]["tenant"] == "acme"
        assert api(client, "tasks").get_json()["tasks"] == []
    finally:
        for state in app.extensions["a2a"].values():
            state.close()


def test_pages_are_the_stores(api_app):
    client = api_app.test_client()
    ids = [send(client, f"note {n}", "carol")["id"] for n in range(7)]
    first = api(client, "tasks", "carol", pageSize=5).get_json()
    assert len(first["tasks"]) == 5 and first["totalSize"] == 7 and first["nextPageToken"]
    second = api(client, "tasks", "carol", pageSize=5, pageToken=first["nextPageToken"]).get_json()
    assert len(second["tasks"]) == 2 and not second["nextPageToken"]
    assert {r["id"] for r in first["tasks"] + second["tasks"]} == set(ids)


def test_a_task_is_its_owners_only(api_app):
    client = api_app.test_client()
    task = send(client, "private", "alice", parts=[
        {"text": "private"}, {"raw": base64.b64encode(FILE_BYTES).decode(), "filename": "a.csv",
                              "mediaType": "text/csv"}])
    assert api(client, f"tasks/{task['id']}", "alice").status_code == 200
    for user, tenant in (("bob", ""), (None, ""), ("alice", "acme")):
        for path in (f"tasks/{task['id']}", f"tasks/{task['id']}/file"):
            query = {"source": "message", "id": task["history"][0]["messageId"], "part": 1} \
                if path.endswith("file") else {}
            response = api(client, path, user, **query, **({"tenant": tenant} if tenant else {}))
            assert response.status_code == 404, (user, tenant, path)
            assert response.get_json()["error"]["status"] == "NOT_FOUND"
    # An unknown task and someone else's answer alike.
    unknown = api(client, "tasks/no-such-task", "alice").get_json()["error"]
    hidden = api(client, f"tasks/{task['id']}", "bob").get_json()["error"]
    assert unknown["status"] == hidden["status"] == "NOT_FOUND"
    assert hidden["message"] == f"Task {task['id']} not found"


def test_the_auth_hook_decides(api_app):
    app = Flask("inspector_auth_test")
    app.config.update(A2A_INSPECTOR=True)  # credentials required (the default)
    A2A(app, card=AgentCard(name="Locked", description="d", version="1", skills=SKILLS),
        executor=executor, auth=caller)
    try:
        client = app.test_client()
        assert client.get("/a2a/inspector/").status_code == 200  # the page holds no data
        for path in ("tasks", "tasks/x", "tasks/x/file"):
            response = api(client, path)
            assert response.status_code == 401, path
            assert response.headers["WWW-Authenticate"]
        assert api(client, "tasks", "alice").status_code == 200
    finally:
        for state in app.extensions["a2a"].values():
            state.close()


@pytest.mark.parametrize("path, query, field", [
    ("tasks", {"state": "done"}, "state"),
    ("tasks", {"pageSize": "0"}, "pageSize"),
    ("tasks", {"pageSize": "51"}, "pageSize"),
    ("tasks", {"pageSize": "ten"}, "pageSize"),
    ("tasks", {"pageSize": "-1"}, "pageSize"),
    ("tasks", {"pageToken": "x" * 1025}, "pageToken"),
    ("tasks", {"contextId": "a\nb"}, "contextId"),
    ("tasks", {"contextId": "c" * 257}, "contextId"),
    ("tasks", {"tenant": "t\x00"}, "tenant"),
    ("tasks", {"historyLength": "3"}, "historyLength"),
    ("tasks/ID", {"after": "-1"}, "after"),
    ("tasks/ID", {"after": "1e3"}, "after"),
    ("tasks/ID", {"events": "0"}, "events"),
    ("tasks/ID", {"events": "1001"}, "events"),
    ("tasks/ID", {"history": "201"}, "history"),
    ("tasks/ID", {"pageSize": "5"}, "pageSize"),
    ("tasks/ID/file", {"source": "status", "id": "m", "part": "0"}, "source"),
    ("tasks/ID/file", {"source": "message", "id": "m", "part": "x"}, "part"),
])
def test_every_parameter_is_checked(api_app, path, query, field):
    client = api_app.test_client()
    task = send(client, "hello", "alice")
    response = api(client, path.replace("ID", task["id"]), "alice", **query)
    assert response.status_code == 400, response.get_data(as_text=True)
    details = response.get_json()["error"]["details"]
    violations = [v for d in details for v in d.get("fieldViolations", [])]
    assert [v["field"] for v in violations] == [field]


def test_a_parameter_given_twice_is_refused(api_app):
    client = api_app.test_client()
    response = client.get("/a2a/inspector/api/tasks?state=failed&state=completed")
    assert response.status_code == 400 and "more than once" in response.get_json()["error"]["message"]


def test_parameters_are_checked_before_any_task_is_looked_up(api_app):
    client = api_app.test_client()
    assert api(client, "tasks/no-such-task", "alice", events="0").status_code == 400
    assert api(client, "tasks/no-such-task/file", "alice", source="x").status_code == 400


def test_a_tasks_panel_is_bounded(api_app):
    client = api_app.test_client()
    task = send(client, "chunks please", "dave")
    whole = api(client, f"tasks/{task['id']}", "dave").get_json()
    timeline = whole["timeline"]
    assert not timeline["more"] and timeline["last"] == timeline["seq"]
    kinds = [e["kind"] for e in timeline["entries"]]
    assert kinds == ["created", "status", "artifact", "status"]  # ten chunks, one entry
    chunks = timeline["entries"][2]
    assert chunks["chunks"] == 10 and chunks["seq"] < chunks["lastSeq"] and chunks["inherited"]
    assert chunks["chars"] == len("".join(f"word{i} " for i in range(10)))
    assert whole["artifacts"][0]["parts"] == [
        {"kind": "text", "text": "".join(f"word{i} " for i in range(10)), "cut": False}]

    # A slice of the log: at most `events` entries read, then more from where it stopped.
    first = api(client, f"tasks/{task['id']}", "dave", events=3).get_json()["timeline"]
    assert first["more"] and first["last"] == 3
    assert [e["seq"] for e in first["entries"]] == [1, 2, 3]
    rest = api(client, f"tasks/{task['id']}", "dave", after=3,
               generation=first["generation"]).get_json()["timeline"]
    assert not rest["more"] and rest["entries"][0]["seq"] == 4
    assert rest["entries"][-1]["state"] == "TASK_STATE_COMPLETED"

    # Each entry's generation (the A2A 1.1 draft): one per event but a caller's message,
    # the chunks' entry at its last chunk's; a slice counts on from what the one before
    # said, and ends where the whole log does.
    store = api_app.extensions["a2a"]["a2a"].store
    assert [e["generation"] for e in timeline["entries"]] == [1, 2, 12, 13]
    assert timeline["generation"] == generation_at(store, task["id"], timeline["seq"]) == 13
    assert [e["generation"] for e in first["entries"]] == [1, 2, 3] == [
        generation_at(store, task["id"], seq) for seq in (1, 2, 3)]
    assert rest["entries"][0]["generation"] == 12 and rest["generation"] == 13  # chunks 4-12
    restart = api(client, f"tasks/{task['id']}", "dave", generation=99).get_json()["timeline"]
    assert restart["entries"][0]["generation"] == 1  # from the start, the count starts at 0

    # The newest messages, and how many there are.
    few = api(client, f"tasks/{task['id']}", "dave", history=1).get_json()
    assert len(few["history"]) == 1 and few["historyTotal"] > 1

    # A long text is cut, and says so.
    long = send(client, "long text", "dave")
    (part,) = api(client, f"tasks/{long['id']}", "dave").get_json()["artifacts"][0]["parts"]
    assert part["cut"] and len(part["text"]) == MAX_TEXT


def test_files_are_links_and_come_as_attachments(api_app):
    client = api_app.test_client()
    task = send(client, "here", "erin", parts=[
        {"text": "here"}, {"raw": base64.b64encode(FILE_BYTES).decode(), "filename": HOSTILE_FILE,
                           "mediaType": "text/csv"}])
    detail = api(client, f"tasks/{task['id']}", "erin").get_json()
    assert detail["task"]["askedFiles"] == [HOSTILE_FILE]
    (file_part,) = [p for p in detail["artifacts"][0]["parts"] if p["kind"] == "file"]
    assert file_part["name"] == HOSTILE_FILE and file_part["size"] == len(FILE_BYTES)
    assert "raw" not in json.dumps(detail["artifacts"])  # no content inlined
    response = client.get("/a2a/inspector/api/" + file_part["href"], headers={"X-User": "erin"})
    assert response.status_code == 200 and response.data == FILE_BYTES
    assert response.mimetype == "application/octet-stream"  # never rendered as the caller says
    assert response.headers["Content-Disposition"].startswith("attachment;")
    assert '"' not in response.headers["Content-Disposition"].split("filename=", 1)[1].strip('"')
    assert "sandbox" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    # The file the caller sent, from the conversation.
    (sent,) = [p for p in detail["history"][0]["parts"] if p["kind"] == "file"]
    assert client.get("/a2a/inspector/api/" + sent["href"],
                      headers={"X-User": "erin"}).data == FILE_BYTES
    gone = client.get("/a2a/inspector/api/" + sent["href"].replace("part=1", "part=7"),
                      headers={"X-User": "erin"})
    assert gone.status_code == 404


def test_webhooks_show_their_cursor_and_no_secret(api_app):
    client = api_app.test_client()
    task = send(client, "hook me", "frank")
    body = {"jsonrpc": "2.0", "id": 2, "method": "CreateTaskPushNotificationConfig",
            "params": {"taskId": task["id"], "id": "hook-1", "token": "s3cret-token",
                       "url": f"http://127.0.0.1:{free_port()}/hook"}}
    answer = client.post("/a2a/", json=body, headers={**V1, "X-User": "frank"}).get_json()
    assert "result" in answer, answer
    detail = api(client, f"tasks/{task['id']}", "frank").get_json()
    (hook,) = detail["webhooks"]
    assert hook["id"] == "hook-1" and hook["url"].endswith("/hook") and hook["token"] is True
    assert 0 <= hook["delivered"] <= detail["timeline"]["seq"]
    assert "s3cret" not in json.dumps(detail)


def test_without_an_agent_the_page_has_no_task_api():
    app = Flask("inspector_alone")
    app.register_blueprint(make_inspector(), url_prefix="/a2a")
    client = app.test_client()
    assert 'data-api-url=""' in client.get("/a2a/inspector/").get_data(as_text=True)
    assert client.get("/a2a/inspector/api/tasks").status_code == 404


def test_the_task_api_is_off_with_the_page():
    app = Flask("inspector_debug_only")  # A2A_INSPECTOR unset: on in debug mode only
    A2A(app, card=AgentCard(name="Debug", description="d", version="1", skills=SKILLS),
        executor=executor)
    try:
        client = app.test_client()
        assert api(client, "tasks").status_code == 404
        app.debug = True
        assert api(client, "tasks").status_code == 200
    finally:
        for state in app.extensions["a2a"].values():
            state.close()


def test_the_page_of_an_agent_points_at_its_api(api_app):
    html = api_app.test_client().get("/a2a/inspector/").get_data(as_text=True)
    assert 'data-api-url="api/"' in html


# ------------------------------------------------------------------ the real page

SCREENSHOTS = os.environ.get("A2A_SCREENSHOTS")


def screenshot(target, name: str) -> None:
    """Save a screenshot for the docs when A2A_SCREENSHOTS names a folder."""
    if SCREENSHOTS:
        target.screenshot(path=str(Path(SCREENSHOTS) / name))


@pytest.fixture(scope="module")
def server(chromium):
    with Server("tests.support.inspector_tasks_app:app", env={"FLASK_A2A_TICK": "0.3"}) as srv:
        yield srv


@pytest.fixture(scope="module")
def seeded(server) -> Dict[str, Dict[str, Any]]:
    """What several callers asked before the page opens."""
    url = server.url
    return {
        "hello": send(url, "hello from alice", "alice"),
        "failed": send(url, "fail at 10:42", "alice"),
        "report": send(url, "report attached", "alice", parts=[
            {"text": "report attached"},
            {"raw": base64.b64encode(FILE_BYTES).decode(), "filename": "q3 report.csv",
             "mediaType": "text/csv"}]),
        "files": send(url, "files please", "alice"),
        "bob": send(url, "bob's question", "bob"),
        "acme": send(url, "fail for acme", "alice", tenant="acme"),
    }


@pytest.fixture
def as_user(browser, server):
    """``as_user("alice")``: a page whose requests carry alice's cookie (None: anonymous)."""
    contexts = []

    def open_page(user: Optional[str], hash_: str = "", prefix: str = "/a2a"):
        context = browser.new_context(viewport={"width": 1400, "height": 1000},
                                      accept_downloads=True)
        contexts.append(context)
        if user:
            context.add_cookies([{"name": "user", "value": user, "url": server.url}])
        page = context.new_page()
        page.set_default_timeout(20_000)
        page.watch = Watch(page)
        page.dialogs = []
        page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
        page.goto(server.url + prefix + "/inspector/" + hash_)
        page.wait_for_function("() => document.querySelector('#card-name')?.textContent")
        page.wait_for_selector("#tasks-status:not(:empty)")
        page.wait_for_function("() => !A2AInspector.tasks.loading")
        return page

    yield open_page
    for context in contexts:
        context.close()


def row(page, task_id: str):
    return page.locator(f'li.task[data-task-id="{task_id}"]')


def visible_ids(page) -> List[str]:
    return page.locator("li.task:not([hidden])").evaluate_all(
        "nodes => nodes.map(n => n.dataset.taskId)")


def open_panel(page, task_id: str):
    item = row(page, task_id)
    if item.locator(".task-toggle").get_attribute("aria-expanded") != "true":
        item.locator(".task-toggle").click()
    item.locator(".timeline-entry").first.wait_for()
    return item.locator(".task-detail")


def api_queries(page) -> List[Dict[str, List[str]]]:
    """The query strings of the page's requests to the inspector's API, in order."""
    return [parse_qs(urlsplit(u).query) for u in page.watch.api_urls()]


@needs_browser
@pytest.mark.timeout(90)
def test_rows_say_what_was_asked_who_asked_and_how_it_went(seeded, as_user):
    page = as_user("alice")
    ids = visible_ids(page)
    mine = [seeded[k]["id"] for k in ("hello", "failed", "report", "files")]
    assert set(mine) <= set(ids)
    assert seeded["bob"]["id"] not in ids and seeded["acme"]["id"] not in ids

    failed = row(page, seeded["failed"]["id"])
    assert failed.get_attribute("data-state") == "failed"
    assert failed.locator(".task-asked").inner_text() == "fail at 10:42"
    assert failed.locator(".task-reason").inner_text() == "The quota of everyone is used up"
    assert failed.locator(".task-owner").inner_text() == "owner alice"
    assert failed.locator(".task-tenant").count() == 0  # no tenant: nothing said
    assert failed.locator(".task-started").inner_text().startswith("started ")
    assert failed.locator(".task-duration").inner_text().startswith("took ")
    assert failed.locator(".task-id").inner_text() == seeded["failed"]["id"][:8]
    assert failed.locator(".task-actions button").count() == 0  # over: nothing to cancel

    report = row(page, seeded["report"]["id"])
    assert report.locator(".task-asked").inner_text() == "report attached"
    assert report.locator(".task-file").inner_text() == "q3 report.csv"
    assert row(page, seeded["hello"]["id"]).locator(".task-reason").count() == 0
    assert page.locator("#tasks-status").inner_text() == f"{len(ids)} task(s)."
    # The rows do not repeat the state and the time.
    assert failed.locator(".state").count() == 1
    screenshot(page.locator("#tasks-panel"), "inspector-tasks.png")

    # The other tenant, named in the filter: its row says so.
    page.get_by_label("Tenant").fill("acme")
    page.get_by_label("Tenant").press("Enter")
    page.wait_for_function("id => document.querySelector(`li.task[data-task-id='${id}']`)",
                           arg=seeded["acme"]["id"])
    acme = row(page, seeded["acme"]["id"])
    assert acme.locator(".task-tenant").inner_text() == "tenant acme"
    assert acme.locator(".task-reason").inner_text() == "The quota of acme is used up"
    assert visible_ids(page) == [seeded["acme"]["id"]]
    assert api_queries(page)[-1]["tenant"] == ["acme"]
    page.watch.assert_clean()


@needs_browser
@pytest.mark.timeout(120)
def test_filters_search_and_pages(server, as_user):
    notes = [send(server.url, f"note {n}", "carol") for n in range(23)]
    failed = send(server.url, "fail on purpose", "carol")
    page = as_user("carol")
    assert len(visible_ids(page)) == 20
    assert page.locator("#tasks-status").inner_text() == "Showing 20 of 24 tasks."
    more = page.get_by_role("button", name="Load more tasks")
    more.click()
    page.wait_for_function("() => document.querySelectorAll('li.task').length === 24")
    assert more.is_hidden()
    assert page.locator("#tasks-status").inner_text() == "24 task(s)."
    queries = api_queries(page)
    assert all(q["pageSize"] == ["20"] for q in queries)  # a page at a time, never all
    assert "pageToken" in queries[-1]

    # Search: what was asked, in the rows loaded (no request per key).
    before = len(page.watch.api_urls())
    page.get_by_label("Search what was asked").fill("note 2")
    assert sorted(page.locator("li.task:not([hidden]) .task-asked").all_inner_texts()) == \
        ["note 2", "note 20", "note 21", "note 22"]
    assert "4 of the 24 loaded match “note 2”." in page.locator("#tasks-status").inner_text()
    assert len(page.watch.api_urls()) == before
    page.get_by_label("Search what was asked").fill("")
    assert len(visible_ids(page)) == 24

    # State: the store's filter.
    page.get_by_label("State").select_option("failed")
    page.wait_for_function("() => document.querySelectorAll('li.task').length === 1")
    assert visible_ids(page) == [failed["id"]]
    assert api_queries(page)[-1]["state"] == ["failed"]

    # Context: from a task's panel, or typed.
    page.get_by_role("button", name="Clear").click()
    page.wait_for_function("() => document.querySelectorAll('li.task').length === 20")
    open_panel(page, notes[-1]["id"])
    page.get_by_role("button", name="Tasks of this context").click()
    page.wait_for_function("() => document.querySelectorAll('li.task').length === 1")
    assert visible_ids(page) == [notes[-1]["id"]]
    assert page.get_by_label("Context").input_value() == notes[-1]["contextId"]
    assert api_queries(page)[-1]["contextId"] == [notes[-1]["contextId"]]
    page.watch.assert_clean()


@needs_browser
@pytest.mark.timeout(120)
def test_a_running_task_is_followed_live_and_canceled(server, as_user, seeded):
    task = send(server.url, "slow job for alice", "alice", wait=False)
    page = as_user("alice", hash_=f"#task={task['id']}")  # a link to the task opens it
    item = row(page, task["id"])
    detail = item.locator(".task-detail")
    detail.locator(".timeline-entry").first.wait_for()
    assert item.locator(".task-toggle").get_attribute("aria-expanded") == "true"
    assert item.locator(".task-duration").inner_text().startswith("running for ")
    page.wait_for_function(
        "id => document.querySelector(`li.task[data-task-id='${id}'] .live`)"
        "?.textContent.startsWith('Following live')", arg=task["id"])

    def count() -> int:
        return detail.locator('.timeline-entry[data-kind="status"]').count()

    seen = count()
    # The timeline grows while the page watches, without a reload or a click.
    page.wait_for_function(
        "([id, n]) => document.querySelectorAll(`li.task[data-task-id='${id}']"
        " .timeline-entry[data-kind='status']`).length >= n", arg=[task["id"], seen + 3],
        timeout=30_000)
    assert "SubscribeToTask" in page.watch.methods()
    subscribe = page.watch.sends("SubscribeToTask")[0]
    assert subscribe["params"] == {"id": task["id"]}
    assert int(subscribe["headers"]["last-event-id"]) >= 2  # from where the timeline stopped
    texts = detail.locator('.timeline-entry[data-kind="status"] .timeline-text').all_text_contents()
    assert texts[:3] == [" Step 1", " Step 2", " Step 3"]
    seqs = detail.locator(".timeline-entry").evaluate_all("ns => ns.map(n => +n.dataset.seq)")
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)  # in order, none twice
    # Read in several slices while it ran: each entry's generation, counted on across them.
    generations = detail.locator(".timeline-entry").evaluate_all(
        "ns => ns.map(n => +n.dataset.generation)")
    assert generations[0] == 1 and all(b > a for a, b in zip(generations, generations[1:]))
    assert detail.locator(".timeline-entry .generation").first.inner_text() == "g1"
    screenshot(page.locator("#tasks-panel"), "inspector-task.png")

    detail.get_by_role("button", name="Cancel this task").click()
    page.wait_for_selector(f'li.task[data-task-id="{task["id"]}"][data-state="canceled"]')
    page.wait_for_function(
        "id => [...document.querySelectorAll(`li.task[data-task-id='${id}'] .timeline-entry`)]"
        ".pop()?.dataset.state === 'canceled'", arg=task["id"])
    assert detail.get_by_role("button", name="Cancel this task").count() == 0
    assert item.locator(".task-duration").inner_text().startswith("took ")
    state = requests.post(server.url + "/a2a", json={
        "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task["id"]}},
        headers={**V1, "X-User": "alice"}, timeout=10).json()["result"]["status"]["state"]
    assert state == "TASK_STATE_CANCELED"
    assert page.watch.sends("CancelTask")[0]["params"] == {"id": task["id"]}
    page.wait_for_function(
        "id => document.querySelector(`li.task[data-task-id='${id}'] .live`)?.textContent === ''",
        arg=task["id"])
    page.watch.assert_clean()


@needs_browser
@pytest.mark.timeout(90)
def test_artifacts_render_by_type(seeded, as_user):
    page = as_user("alice")
    detail = open_panel(page, seeded["files"]["id"])
    detail.locator(".artifact").nth(3).wait_for()
    artifacts = detail.locator(".artifact")
    assert artifacts.nth(0).locator(".part-text").inner_text() == "A plain text answer."
    assert json.loads(artifacts.nth(1).locator(".part-data").inner_text()) == \
        {"city": "Paris", "days": [21, 23]}
    link = artifacts.nth(2).locator("a.file-link")
    assert link.inner_text() == "Download places.csv"
    assert link.get_attribute("download") == "places.csv"
    assert f"text/csv, {len(FILE_BYTES)} bytes" in artifacts.nth(2).inner_text()
    with page.expect_download() as download:
        link.click()
    assert Path(download.value.path()).read_bytes() == FILE_BYTES
    url = artifacts.nth(3).locator(".part-url a")
    assert url.get_attribute("href") == "https://example.com/report.pdf"
    assert url.get_attribute("rel") == "noopener noreferrer" and url.inner_text() == "report.pdf"
    # The conversation: the question, the agent's messages.
    conversation = detail.locator(".conversation")
    assert conversation.locator(".msg-user").first.inner_text().endswith("files please")
    assert "Here are your files." in conversation.locator(".msg-agent").last.inner_text()
    kinds = detail.locator(".timeline-entry").evaluate_all("ns => ns.map(n => n.dataset.kind)")
    assert kinds == ["created", "status", "artifact", "artifact", "artifact", "artifact", "status"]

    # The file a caller sent comes back from its message.
    report = open_panel(page, seeded["report"]["id"])
    sent = report.locator(".msg-user a.file-link")
    assert sent.inner_text() == "Download q3 report.csv"
    with page.expect_download() as download:
        sent.click()
    assert Path(download.value.path()).read_bytes() == FILE_BYTES
    assert download.value.suggested_filename == "q3 report.csv"
    screenshot(page.locator(f'li.task[data-task-id="{seeded["files"]["id"]}"]'),
               "inspector-artifacts.png")
    page.watch.assert_clean()


@needs_browser
@pytest.mark.timeout(90)
def test_caller_strings_are_shown_as_text_never_run(server, as_user):
    task = send(server.url, HOSTILE, "mallory", tenant=HOSTILE_TENANT, metadata=HOSTILE_META,
                parts=[{"text": HOSTILE},
                       {"raw": base64.b64encode(FILE_BYTES).decode(), "filename": HOSTILE_FILE,
                        "mediaType": "text/csv"}])
    failing = send(server.url, "fail " + HOSTILE, "mallory", tenant=HOSTILE_TENANT)
    hook_url = 'https://hooks.example.com/hook?q="><svg/onload=window.__pwned=6>'  # no space
    hooked = requests.post(server.url + "/a2a", headers={**V1, "X-User": "mallory"}, timeout=10, json={
        "jsonrpc": "2.0", "id": 2, "method": "CreateTaskPushNotificationConfig",
        "params": {"taskId": task["id"], "id": HOSTILE, "url": hook_url,
                   "tenant": HOSTILE_TENANT}}).json()
    assert "result" in hooked, hooked
    page = as_user("mallory")
    page.get_by_label("Tenant").fill(HOSTILE_TENANT)
    page.get_by_label("Tenant").press("Enter")
    page.wait_for_function("() => document.querySelectorAll('li.task').length === 2")
    item = row(page, task["id"])
    assert item.locator(".task-asked").inner_text() == HOSTILE.split("\n")[0]
    assert item.locator(".task-file").inner_text() == HOSTILE_FILE
    assert item.locator(".task-tenant").inner_text() == f"tenant {HOSTILE_TENANT}"
    assert row(page, failing["id"]).locator(".task-reason").inner_text() == \
        f"The quota of {HOSTILE_TENANT} is used up"
    detail = open_panel(page, task["id"])
    detail.locator(".artifact").wait_for()
    detail.locator(".part-metadata summary").first.click()
    assert json.loads(detail.locator(".part-metadata pre").first.inner_text()) == HOSTILE_META
    assert detail.locator(".artifact .part-text").inner_text() == HOSTILE
    assert detail.locator(".artifact a.file-link").inner_text() == f"Download {HOSTILE_FILE}"
    assert detail.locator(".artifact a.file-link").get_attribute("download") == HOSTILE_FILE
    assert detail.locator(".timeline-entry").first.locator(".timeline-text").text_content() == HOSTILE
    hook = detail.locator("tr.webhook")
    assert hook.locator("td").first.inner_text() == HOSTILE
    assert hook.locator(".webhook-url").inner_text() == hook_url
    assert hook.locator(".webhook-cursor").inner_text().startswith(("all ", "through event "))
    # Nothing the callers wrote became an element, ran, or opened a dialog.
    injected = page.locator("#task-list img, #task-list script, #task-list svg, #task-list b")
    assert injected.count() == 0
    assert page.evaluate("() => window.__pwned") is None
    assert page.dialogs == []
    page.watch.assert_clean()  # no CSP report of a blocked inline script either


@needs_browser
@pytest.mark.timeout(90)
def test_the_page_shows_the_callers_tasks_only(seeded, as_user):
    bob = as_user("bob")
    assert visible_ids(bob) == [seeded["bob"]["id"]]
    assert row(bob, seeded["bob"]["id"]).locator(".task-owner").inner_text() == "owner bob"
    bob.watch.assert_clean()

    anonymous = as_user(None)
    assert not set(visible_ids(anonymous)) & {t["id"] for t in seeded.values()}

    # A link to someone else's task finds nothing, as the API would say.
    page = as_user("bob", hash_=f"#task={seeded['hello']['id']}")
    error = row(page, seeded["hello"]["id"]).locator(".task-detail .error")
    error.wait_for()
    assert error.inner_text().startswith("HTTP 404:")
    assert "hello from alice" not in page.locator("#tasks-panel").inner_text()
    assert [p for p in page.watch.problems if "404" not in p] == []


@needs_browser
@pytest.mark.timeout(90)
def test_without_the_task_api_the_page_reads_the_protocol(server, as_user):
    done = send(server.url, "plain hello", "gina", prefix="/bare")
    failed = send(server.url, "fail plainly", "gina", prefix="/bare")
    page = as_user("gina", prefix="/bare")
    assert set(visible_ids(page)) == {done["id"], failed["id"]}
    item = row(page, failed["id"])
    assert item.locator(".task-asked").inner_text() == "fail plainly"
    assert item.locator(".task-reason").inner_text() == "The quota of everyone is used up"
    detail = open_panel(page, done["id"])
    detail.locator(".artifact").wait_for()
    assert detail.locator(".artifact .part-text").inner_text() == "plain hello"
    assert detail.locator(".msg-user").first.inner_text().endswith("plain hello")
    assert detail.locator('.timeline-entry[data-state="completed"]').count() == 1
    assert page.watch.api_urls() == []
    assert {"ListTasks", "GetTask"} <= set(page.watch.methods())
    page.watch.assert_clean()
