"""The inspector page: its blueprint (Flask test client), then the real page in
headless Chromium, driven by Playwright, against a real gunicorn + gevent server.

The browser tests need a Chromium binary (Debian's ``chromium`` package; or set
``A2A_TEST_CHROMIUM`` to a Chrome/Chromium executable) and the ``playwright``
package (in the ``test`` extra; it drives the system browser, no browser download).
Without either they are skipped, saying why (they fail under ``A2A_REQUIRE_SERVICES=1``,
as in CI: see ``require`` in tests/conftest.py).
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Dict, List, Optional
from urllib.parse import urljoin, urlsplit

import pytest
import requests
from flask import Blueprint, Flask

import a2a_flask.web.inspector
from a2a_flask import A2A
from a2a_flask.web.inspector import CONTENT_SECURITY_POLICY, make_inspector

from tests.conftest import make_card, require
from tests.support.helpers import V1, Server
from tests.support.wire import rpc

pytestmark = pytest.mark.declare(server=["chromium"])

PACKAGE = Path(a2a_flask.web.inspector.__file__).resolve().parent
ASSETS = [PACKAGE / "static" / "inspector.js", PACKAGE / "static" / "inspector.css",
          PACKAGE / "static" / "favicon.svg", PACKAGE / "templates" / "a2a_inspector" / "index.html"]


# ------------------------------------------------------------------ the blueprint


def inspector_app(**options: Any) -> Flask:
    app = Flask("inspector_test")
    app.register_blueprint(make_inspector(**options), url_prefix="/a2a")
    return app


def test_page_is_served_with_a_strict_content_security_policy():
    response = inspector_app().test_client().get("/a2a/inspector/")
    assert response.status_code == 200
    assert response.mimetype == "text/html"
    csp = response.headers["Content-Security-Policy"]
    assert csp == CONTENT_SECURITY_POLICY and csp.startswith("default-src 'self';")
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Cache-Control"] == "no-cache"
    html = response.get_data(as_text=True)
    assert 'data-rpc-url="../"' in html
    assert 'data-card-url="../.well-known/agent-card.json"' in html


def test_inspector_without_slash_redirects_relatively():
    response = inspector_app().test_client().get("/a2a/inspector")
    assert response.status_code == 308
    assert urljoin("http://host/a2a/inspector", response.headers["Location"]) == \
        "http://host/a2a/inspector/"


@pytest.mark.parametrize("name, mimetype", [("inspector.js", "text/javascript"),
                                            ("inspector.css", "text/css"),
                                            ("favicon.svg", "image/svg+xml")])
def test_assets_are_served_from_the_package(name, mimetype):
    response = inspector_app().test_client().get(f"/a2a/inspector/static/{name}")
    assert response.status_code == 200
    assert response.mimetype == mimetype
    assert response.headers["X-Content-Type-Options"] == "nosniff"


def test_assets_load_nothing_from_elsewhere_and_nothing_inline():
    """No CDN, no external font or script, no inline script or style (CSP would block them)."""
    for path in ASSETS:
        text = path.read_text(encoding="utf-8")
        text = text.replace('xmlns="http://www.w3.org/2000/svg"', "")
        assert not re.search(r"(src|href)\s*=\s*[\"']?(https?:)?//", text), path
        assert "@import" not in text and "url(" not in text, path
        assert not re.search(r"fetch\(\s*[\"'`]https?:", text), path
    html = ASSETS[-1].read_text(encoding="utf-8")
    assert "<style" not in html and " style=" not in html
    assert not re.search(r"\son[a-z]+\s*=", html)  # no inline event handlers
    assert re.findall(r"<script[^>]*>", html) == ['<script src="static/inspector.js" defer>']


def test_urls_given_to_the_page_can_be_overridden():
    app = inspector_app(rpc_url="/rpc", card_url=lambda: "/cards/me.json", poll_interval=0)
    html = app.test_client().get("/a2a/inspector/").get_data(as_text=True)
    assert 'data-rpc-url="/rpc"' in html
    assert 'data-card-url="/cards/me.json"' in html
    assert 'data-poll-ms="0"' in html


def test_nests_in_an_agent_blueprint_and_registers_twice_with_names():
    app = Flask("inspector_test")
    parent = Blueprint("agent_x", __name__, url_prefix="/agents/x")
    parent.register_blueprint(make_inspector())
    app.register_blueprint(parent)
    app.register_blueprint(make_inspector(), url_prefix="/agents/y", name="a2a_inspector_y")
    client = app.test_client()
    for prefix in ("/agents/x", "/agents/y"):
        assert client.get(f"{prefix}/inspector/").status_code == 200
        assert client.get(f"{prefix}/inspector/static/inspector.js").status_code == 200


def test_enabled_is_asked_in_each_request():
    app = Flask("inspector_test")
    app.register_blueprint(make_inspector(enabled=lambda: app.debug), url_prefix="/a2a")
    client = app.test_client()
    assert client.get("/a2a/inspector/").status_code == 404
    assert client.get("/a2a/inspector/static/inspector.js").status_code == 404
    app.debug = True
    assert client.get("/a2a/inspector/").status_code == 200
    assert client.get("/a2a/inspector/static/inspector.js").status_code == 200


@pytest.mark.parametrize("prefix", ["/a2a", ""])
def test_nested_in_the_agents_own_blueprint(prefix):
    app = Flask("inspector_test")
    app.config["A2A_URL_PREFIX"] = prefix
    agent = A2A(app, card=make_card(), executor=lambda ctx: ctx.text)
    try:
        client = app.test_client()
        page = f"http://localhost{prefix}/inspector/"
        assert client.get(page).status_code == 404  # not in debug mode
        app.debug = True
        assert client.get(page).status_code == 200
        assert client.get(page + "static/inspector.css").status_code == 200
        assert rpc(client, "ListTasks", {}, path=urljoin(page, "../"))["result"]["tasks"] == []
        card = client.get(urljoin(page, "../.well-known/agent-card.json"))
        assert card.status_code == 200 and card.get_json()["name"] == "Test agent"
    finally:
        agent.state(app).close()


def test_relative_urls_reach_the_agent_next_to_it(make_app):
    app = make_app(inspector=True)
    client = app.test_client()
    page = "http://localhost/a2a/inspector/"
    assert client.get(page).status_code == 200
    endpoint = urljoin(page, "../")
    assert endpoint == "http://localhost/a2a/"
    body = rpc(client, "ListTasks", {}, path="/a2a/")
    assert body["result"]["tasks"] == []
    card = client.get(urljoin(page, "../.well-known/agent-card.json"))
    assert card.status_code == 200 and card.get_json()["name"] == "Test agent"


# ------------------------------------------------------------------ the real page


def find_chromium() -> Optional[str]:
    for name in (os.environ.get("A2A_TEST_CHROMIUM"), "chromium", "chromium-browser",
                 "google-chrome", "google-chrome-stable"):
        if name:
            path = shutil.which(name)
            if path:
                return path
    return None


CHROMIUM = find_chromium()
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - the test extra installs it
    sync_playwright = None


@pytest.fixture(scope="module")
def chromium() -> str:
    """The browser the tests drive; without it (or Playwright) they skip, or fail in CI."""
    if sync_playwright is None:
        require("playwright is not installed (pip install -e '.[test]')")
    if CHROMIUM is None:
        require("no Chromium binary found (apt-get install chromium, or set A2A_TEST_CHROMIUM)")
    return CHROMIUM


#: Before the test's own fixtures: no server is started for a test that cannot run.
needs_browser = pytest.mark.usefixtures("chromium")


#: The file tests/support/inspector_app.py hands out (not imported: that builds its agents).
FILE_BYTES = b"id,name\n1,lighthouse\n"
#: Seconds between the streamed words of the story: slow enough to see it arrive.
WORD_DELAY = 0.12
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--disable-dev-shm-usage"]


def story(topic: str) -> str:
    """What examples.streaming_agent tells about ``topic``."""
    return (f"Once upon a time there was {topic}. It waited, it wondered, "
            f"and in the end {topic} found exactly what it was looking for.")


@pytest.fixture(scope="module")
def server():
    with Server("tests.support.inspector_app:app", env={"FLASK_A2A_WORD_DELAY": str(WORD_DELAY)}) as srv:
        yield srv


@pytest.fixture(scope="module")
def browser(chromium):
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS,
                                             timeout=30_000)
        yield browser
        browser.close()
    finally:
        playwright.stop()


class Watch:
    """Everything on the page that should not happen, plus the JSON-RPC calls it made."""

    def __init__(self, page) -> None:
        self.problems: List[str] = []
        self.calls: List[Dict[str, Any]] = []
        self.gets: List[str] = []
        page.on("console", lambda m: m.type == "error" and self.problems.append(f"console: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"page error: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url} {r.failure}"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(
            f"HTTP {r.status}: {r.url}"))
        page.on("request", self._request)

    def _request(self, request) -> None:
        if request.method == "GET":
            self.gets.append(request.url)
        if request.method == "POST" and request.post_data:
            body = json.loads(request.post_data)
            self.calls.append({"method": body.get("method"), "params": body.get("params"),
                               "headers": request.headers})

    def api_urls(self) -> List[str]:
        """The URLs of the page's requests to the inspector's API, in order."""
        return [u for u in self.gets if "/inspector/api/" in u]

    def api_paths(self) -> List[str]:
        return [urlsplit(u).path for u in self.api_urls()]

    def methods(self) -> List[str]:
        return [c["method"] for c in self.calls]

    def sends(self, method: str) -> List[Dict[str, Any]]:
        return [c for c in self.calls if c["method"] == method]

    def assert_clean(self) -> None:
        assert self.problems == []


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1400, "height": 1000}, accept_downloads=True)
    page = context.new_page()
    page.set_default_timeout(20_000)
    page.watch = Watch(page)
    yield page
    context.close()


def open_inspector(page, server, prefix: str = "/a2a", name: str = "Inspector test agent"):
    page.goto(server.url + prefix + "/inspector")  # the redirect to .../inspector/ included
    assert page.url == server.url + prefix + "/inspector/"
    page.wait_for_function("name => document.querySelector('#card-name')?.textContent === name",
                           arg=name)
    page.wait_for_selector("#tasks-status:not(:empty)")


def say(page, text: str) -> None:
    """Type into the message box like a person and press Enter."""
    box = page.get_by_label("Message")
    box.press_sequentially(text, delay=5)
    box.press("Enter")


def agent_turn(page, index: int):
    return page.locator(".turn-agent").nth(index)


def wait_turn_state(page, index: int, state: str) -> None:
    page.wait_for_selector(f".turn-agent >> nth={index}")
    page.wait_for_function(
        "([i, s]) => document.querySelectorAll('.turn-agent')[i]?.dataset.state === s",
        arg=[index, state], timeout=30_000)


def task_item(page, task_id: str):
    return page.locator(f'li.task[data-task-id="{task_id}"]')


def open_task(page, task_id: str):
    """Open the task's panel (a click on its row) unless it is open; its detail."""
    item = task_item(page, task_id)
    if item.locator(".task-toggle").get_attribute("aria-expanded") != "true":
        item.locator(".task-toggle").click()
    item.locator(".timeline-entry").first.wait_for()
    return item.locator(".task-detail")


def timeline_states(page, task_id: str) -> List[str]:
    """The states of the task's timeline, in order (its status events)."""
    open_task(page, task_id)
    return task_item(page, task_id).locator(".timeline-entry[data-state]").evaluate_all(
        "nodes => nodes.map(n => n.dataset.state)")


#: Records, on every change of the chat log, the streamed text's length and the state.
RECORDER = """() => {
  window.__snaps = [];
  const log = document.getElementById("chat-log");
  new MutationObserver(() => {
    const turns = log.querySelectorAll(".turn-agent");
    const turn = turns[turns.length - 1];
    if (!turn) return;
    const text = Array.from(turn.querySelectorAll(".artifact .part-text"))
      .map(n => n.textContent).join("");
    window.__snaps.push({t: performance.now(), len: text.length, state: turn.dataset.state || ""});
  }).observe(log, {subtree: true, childList: true, characterData: true, attributes: true});
}"""


@needs_browser
@pytest.mark.timeout(60)
def test_page_loads_clean_and_shows_the_card(server, page):
    open_inspector(page, server)
    assert page.title() == "Inspector test agent · A2A inspector"
    card = page.locator("#card-view")
    assert "Streams stories, asks for a city" in card.inner_text()
    assert "Streaming: yes" in card.inner_text()
    assert page.locator(".skill").count() == 3
    assert page.locator(".interfaces tbody tr").count() >= 2
    assert "JSONRPC" in page.locator(".interfaces").inner_text()
    assert page.locator("#endpoint-url").inner_text() == server.url + "/a2a/"
    # Raw JSON toggle
    assert not page.locator("#card-json").is_visible()
    page.get_by_text("Raw JSON").click()
    raw = json.loads(page.locator("#card-json").inner_text())
    assert raw["name"] == "Inspector test agent" and raw["version"] == "2.5.0"
    # An example fills the box; Shift+Enter is a new line, not a send.
    page.get_by_role("button", name="a lighthouse", exact=True).click()
    assert page.get_by_label("Message").input_value() == "a lighthouse"
    page.get_by_label("Message").press("Shift+Enter")
    assert page.get_by_label("Message").input_value() == "a lighthouse\n"
    assert page.locator(".turn").count() == 0
    assert page.locator("#chat-log").get_attribute("aria-live") == "polite"
    assert page.watch.sends("SendStreamingMessage") == []
    page.watch.assert_clean()


@needs_browser
@pytest.mark.timeout(60)
def test_answer_streams_in_as_it_arrives(server, page):
    open_inspector(page, server)
    page.evaluate(RECORDER)
    say(page, "a lighthouse")
    wait_turn_state(page, 0, "completed")
    turn = agent_turn(page, 0)
    expected = story("a lighthouse")
    assert turn.locator(".artifact .part-text").inner_text().strip() == expected
    assert "Thinking about a lighthouse..." in turn.locator(".status-message").inner_text()
    assert turn.get_attribute("aria-busy") == "false"

    snaps = page.evaluate("window.__snaps")
    done_at = min(s["t"] for s in snaps if s["state"] == "completed")
    partial = [s for s in snaps if 0 < s["len"] < len(expected) and s["state"] != "completed"]
    assert len({s["len"] for s in partial}) >= 5, snaps  # the text grew chunk by chunk...
    assert done_at - partial[0]["t"] > 1000 * WORD_DELAY * 5  # ...well before the end

    call = page.watch.sends("SendStreamingMessage")[0]
    assert call["headers"]["a2a-version"] == "1.0"
    assert call["params"]["message"]["parts"] == [{"text": "a lighthouse"}]
    assert call["params"]["message"]["role"] == "ROLE_USER"

    # The task list shows the task and its timeline; its details come from GetTask.
    task_id = turn.get_attribute("data-task-id")
    page.wait_for_selector(f'li.task[data-task-id="{task_id}"][data-state="completed"]')
    assert timeline_states(page, task_id) == ["submitted", "working", "completed"]
    detail = open_task(page, task_id)
    detail.locator(".artifact").wait_for()
    assert expected in detail.locator(".artifact").inner_text()
    assert detail.locator(".msg-user").first.inner_text().split("\n")[-1] == "a lighthouse"
    assert task_item(page, task_id).locator(".task-toggle").get_attribute("aria-expanded") == "true"
    # The row says what was asked; the list and the panel come from the inspector's API.
    assert task_item(page, task_id).locator(".task-asked").inner_text() == "a lighthouse"
    assert page.watch.api_paths() and all(p.startswith("/a2a/inspector/api/tasks")
                                          for p in page.watch.api_paths())
    page.watch.assert_clean()


@needs_browser
@pytest.mark.timeout(60)
def test_multi_turn_conversation_continues_the_task(server, page):
    open_inspector(page, server)
    say(page, "weather")
    wait_turn_state(page, 0, "input-required")
    assert "Which city?" in agent_turn(page, 0).inner_text()
    assert "waiting for your answer" in page.locator("#conversation").inner_text()
    task_id = agent_turn(page, 0).get_attribute("data-task-id")

    say(page, "Paris")
    wait_turn_state(page, 1, "completed")
    answer = agent_turn(page, 1)
    assert answer.get_attribute("data-task-id") == task_id
    assert answer.locator(".artifact").inner_text().endswith("Paris: sunny, 21 °C")
    assert "Here is the forecast for Paris." in answer.inner_text()
    first, second = page.watch.sends("SendStreamingMessage")
    context_id = second["params"]["message"]["contextId"]
    assert second["params"]["message"]["taskId"] == task_id
    assert "taskId" not in first["params"]["message"]

    # The timeline went through INPUT_REQUIRED, back to WORKING, then COMPLETED.
    page.wait_for_selector(f'li.task[data-task-id="{task_id}"][data-state="completed"]')
    assert timeline_states(page, task_id) == ["submitted", "input-required", "working", "completed"]

    # The next message is a new task in the same context.
    say(page, "a fox")
    wait_turn_state(page, 2, "completed")
    third = page.watch.sends("SendStreamingMessage")[2]["params"]["message"]
    assert third["contextId"] == context_id and "taskId" not in third
    assert agent_turn(page, 2).get_attribute("data-task-id") != task_id
    page.watch.assert_clean()


@needs_browser
@pytest.mark.timeout(60)
def test_data_file_and_url_artifacts_render(server, page):
    open_inspector(page, server)
    say(page, "files")
    wait_turn_state(page, 0, "completed")
    turn = agent_turn(page, 0)
    assert json.loads(turn.locator(".part-data").inner_text()) == \
        {"city": "Paris", "days": [21, 23], "ok": True}
    link = turn.locator("a.file-link")
    assert link.get_attribute("download") == "places.csv"
    assert link.get_attribute("href").startswith("blob:")
    assert f"text/csv, {len(FILE_BYTES)} bytes" in turn.locator(".part-file").inner_text()
    with page.expect_download() as download:
        link.click()
    assert Path(download.value.path()).read_bytes() == FILE_BYTES
    assert download.value.suggested_filename == "places.csv"
    url = turn.locator(".part-url a")
    assert url.get_attribute("href") == "https://example.com/report.pdf"
    assert url.get_attribute("rel") == "noopener noreferrer"
    assert url.inner_text() == "report.pdf"
    assert "Here are your files." in turn.inner_text()

    # A failing agent: the state says so, with the agent's status message.
    say(page, "fail please")
    wait_turn_state(page, 1, "failed")
    assert "RuntimeError" in agent_turn(page, 1).inner_text()
    page.watch.assert_clean()


@needs_browser
@pytest.mark.timeout(60)
def test_errors_are_shown_with_code_and_message(server, page):
    open_inspector(page, server)
    page.get_by_label("Auto-refresh").uncheck()  # so the page does not learn of the cancel
    say(page, "weather")
    wait_turn_state(page, 0, "input-required")
    task_id = agent_turn(page, 0).get_attribute("data-task-id")
    page.wait_for_selector(f'li.task[data-task-id="{task_id}"][data-state="input-required"]')
    page.wait_for_function("() => !document.querySelector('#send-button').disabled"
                           " && !A2AInspector.tasks.loading && A2AInspector.tasks.loadAgain === null")
    # The turn is over and the list's last refresh came back: nothing tells the page now.
    canceled = server.rpc("CancelTask", {"id": task_id})  # another client cancels it
    assert canceled["result"]["status"]["state"] == "TASK_STATE_CANCELED"

    say(page, "Paris")  # an answer to a task that is now terminal
    error = page.locator("#chat-error")
    error.wait_for()
    assert page.locator("#chat-error").get_attribute("role") == "alert"
    assert re.match(r"JSON-RPC error -32004: .+", error.inner_text()), error.inner_text()
    assert "-32004" in agent_turn(page, 1).locator(".turn-error").inner_text()
    assert not page.locator("#send-button").is_disabled()  # ready for the next message

    # The page's own Cancel button on a waiting task.
    page.get_by_role("button", name="New conversation").click()
    say(page, "weather")
    wait_turn_state(page, 0, "input-required")
    own = agent_turn(page, 0).get_attribute("data-task-id")
    page.get_by_role("button", name="Cancel task").click()
    page.wait_for_selector(f'li.task[data-task-id="{own}"][data-state="canceled"]')
    assert requests.post(server.url + "/a2a/", json={
        "jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": own}},
        headers=V1, timeout=10).json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    page.watch.assert_clean()


@needs_browser
@pytest.mark.timeout(60)
def test_falls_back_to_send_message_without_streaming(server, page):
    open_inspector(page, server, prefix="/plain", name="Plain echo")
    assert "Streaming: no" in page.locator("#card-view").inner_text()
    assert "SendMessage" in page.locator("#chat-mode").inner_text()
    say(page, "hello plain")
    wait_turn_state(page, 0, "completed")
    assert agent_turn(page, 0).locator(".artifact").inner_text().endswith("hello plain")
    assert page.watch.sends("SendStreamingMessage") == []
    (call,) = page.watch.sends("SendMessage")
    assert call["params"]["configuration"] == {"returnImmediately": False}
    assert call["headers"]["a2a-version"] == "1.0"
    task_id = agent_turn(page, 0).get_attribute("data-task-id")
    page.wait_for_selector(f'li.task[data-task-id="{task_id}"][data-state="completed"]')
    page.watch.assert_clean()
