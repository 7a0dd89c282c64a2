"""``flask a2a tasks --json --page-token``: a script pages through a store; the
commands' one-line errors when the app does not load for a2a_flask's own reasons
(a setting's optional package missing, a bad value); progress bars on a terminal only."""
from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from typing import Dict, List, Optional

import pytest
from click.testing import CliRunner
from flask.cli import cli as flask_cli

from a2a_flask.protocol.models import Task, TaskState, TaskStatus
from a2a_flask.stores import open_store
from a2a_flask.signing import jws
from a2a_flask.stores.base import TaskRecord
from a2a_flask.web.commands import common

from tests.support.helpers import ROOT

pytestmark = pytest.mark.timeout(120)

#: Task ids by age, newest first: ``t06`` and ``t05`` share a time (the id breaks the tie).
STAMPS = {"t00": "2025-01-01T00:00:00.000Z", "t01": "2025-01-01T00:00:01.000Z",
          "t02": "2025-01-01T00:00:02.000Z", "t03": "2025-01-01T00:00:03.000Z",
          "t04": "2025-01-01T00:00:03.000Z", "t05": "2025-01-01T00:00:05.000Z",
          "t06": "2025-01-01T00:00:05.000Z"}
NEWEST_FIRST = sorted(STAMPS, key=lambda i: (STAMPS[i], i), reverse=True)


def fill(store) -> None:
    for task_id, stamp in STAMPS.items():
        task = Task(id=task_id, context_id="c",
                    status=TaskStatus(state=TaskState.COMPLETED, timestamp=stamp))
        store.create(TaskRecord(task, 1), task)


@pytest.fixture
def paged_app(make_app, tmp_path):
    app = make_app(store=f"sqlite:///{tmp_path}/tasks.db")
    fill(app.extensions["a2a"]["a2a"].store)
    return app


def run(app, *args: str):
    return app.test_cli_runner().invoke(args=["a2a", *args])


def pages(app, *args: str) -> List[Dict]:
    """Every page ``tasks --json`` gives, following nextPageToken as a script would."""
    found: List[Dict] = []
    token: Optional[str] = None
    while token != "":
        result = run(app, "tasks", "--json", *args,
                     *(["--page-token", token] if token else []))
        assert result.exit_code == 0, result.output
        found.append(json.loads(result.output))
        token = found[-1]["nextPageToken"]
        assert len(found) <= len(STAMPS), "the pages do not end"
    return found


@pytest.mark.parametrize("whose", [[], ["--owner", ""]], ids=["every-caller", "owner"])
def test_a_script_pages_through_every_task(paged_app, whose):
    got = pages(paged_app, "--limit", "3", *whose)
    assert [[t["id"] for t in page["tasks"]] for page in got] == [
        NEWEST_FIRST[0:3], NEWEST_FIRST[3:6], NEWEST_FIRST[6:]]
    assert [page["totalSize"] for page in got] == [7, 7, 7]
    assert all(page["nextPageToken"] for page in got[:-1])


def test_a_page_larger_than_a_store_call_ends_where_it_says(paged_app, monkeypatch):
    # Two store calls make each page of 3 (2 + 1): the token is the last task shown's.
    monkeypatch.setattr(common, "PAGE", 2)
    got = pages(paged_app, "--limit", "3", "--owner", "")
    assert [t["id"] for page in got for t in page["tasks"]] == NEWEST_FIRST
    assert len(got) == 3


def test_the_last_page_has_no_token_and_filters_hold_across_pages(paged_app):
    whole = json.loads(run(paged_app, "tasks", "--json", "--limit", "7").output)
    assert [t["id"] for t in whole["tasks"]] == NEWEST_FIRST and whole["nextPageToken"] == ""
    got = pages(paged_app, "--limit", "1", "--state", "completed", "--context", "c")
    assert [t["id"] for page in got for t in page["tasks"]] == NEWEST_FIRST
    none = pages(paged_app, "--limit", "2", "--context", "other")
    assert none == [{"tasks": [], "nextPageToken": "", "pageSize": 2, "totalSize": 0}]


def test_the_text_listing_starts_at_the_page_token(paged_app):
    token = json.loads(run(paged_app, "tasks", "--json", "--limit", "5").output)["nextPageToken"]
    result = run(paged_app, "tasks", "--page-token", token)
    assert result.exit_code == 0, result.output
    assert [line.split()[0] for line in result.output.splitlines()[1:-1]] == NEWEST_FIRST[5:]


@pytest.mark.parametrize("token", ["nope", "eyJhIjogMX0", "W10"])
def test_a_token_this_command_did_not_print_is_one_line(paged_app, token):
    for whose in ([], ["--owner", ""]):
        result = run(paged_app, "tasks", "--page-token", token, *whose)
        assert result.exit_code == 1
        assert result.output == (f"Error: --page-token {token!r} is not a nextPageToken "
                                 "this command printed\n")


# ------------------------------------------------------------------ real flask processes

#: ``python -m flask``, with ``cryptography`` made impossible to import.
NO_CRYPTOGRAPHY = ("import sys; sys.modules['cryptography'] = None; "
                   "from flask.cli import main; main()")
#: The shape of a PEM private key: the setting reads it; signing needs cryptography.
PEM = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMG\n-----END PRIVATE KEY-----\n"
SIGNING = {"FLASK_A2A_CARD_SIGNING_KEY": PEM, "FLASK_A2A_PUBLIC_URL": "https://agents.example.com"}
MISSING = ("Error: the app did not load: ImportError: signing needs the 'cryptography' "
           "package: pip install 'a2a-flask[signing]' (from a checkout: "
           "pip install -e '.[signing]')\n")


def flask(*args: str, env: Dict[str, str], code: Optional[str] = None,
          **popen) -> subprocess.CompletedProcess:
    start = ["-c", code] if code else ["-m", "flask"]
    return subprocess.run([sys.executable, *start, "--app", "examples.echo_agent", "a2a", *args],
                          cwd=ROOT, env={**os.environ, **env}, text=True, timeout=60,
                          **({"capture_output": True} if not popen else popen))


@pytest.mark.parametrize("args", [
    ["doctor"], ["tasks"], ["task", "t00"], ["cancel", "t00"], ["purge", "--older-than", "7d"],
    ["create-tables"], ["copy-store", "sqlite:///nowhere.db"],
])
def test_a_missing_optional_package_is_one_line_for_every_command(args, tmp_path, monkeypatch):
    """In this process, through Flask's own ``flask`` group (the next test runs the
    real command)."""
    # The package and every submodule an earlier test imported: a cached
    # ``cryptography.exceptions`` would be found without its parent.
    for name in [name for name in sys.modules
                 if name == "cryptography" or name.startswith("cryptography.")] + ["cryptography"]:
        monkeypatch.setitem(sys.modules, name, None)
    jws._crypto.cache_clear()  # an earlier test's import of cryptography is remembered
    monkeypatch.syspath_prepend(str(ROOT))
    monkeypatch.delitem(sys.modules, "examples.echo_agent", raising=False)
    try:
        result = CliRunner().invoke(
            flask_cli, ["--app", "examples.echo_agent", "a2a", *args],
            env={**SIGNING, "FLASK_A2A_STORE": f"sqlite://{tmp_path}/t.db"})
    finally:
        jws._crypto.cache_clear()
    assert result.exit_code == 1, result.output
    assert result.output == MISSING


@pytest.mark.server  # it starts flask processes
def test_a_missing_optional_package_is_one_line_from_the_flask_command(tmp_path):
    done = flask("doctor", code=NO_CRYPTOGRAPHY, env={
        **SIGNING, "FLASK_A2A_STORE": f"sqlite://{tmp_path}/tasks.db"})
    assert done.returncode == 1, done.stderr
    assert done.stderr == MISSING and done.stdout == ""


@pytest.mark.server  # it starts flask processes
def test_a_bad_setting_or_app_is_one_line(tmp_path):
    bad = flask("doctor", env={"FLASK_A2A_TASK_TTL": "soon"})
    assert bad.returncode == 1
    assert bad.stderr.startswith("Error: the app did not load: ValueError: A2A_TASK_TTL='soon' "
                                 "is not a valid number")
    assert len(bad.stderr.splitlines()) == 1
    # Flask's own reasons too (its usage errors would exit 2 with a traceback).
    missing = subprocess.run([sys.executable, "-m", "flask", "--app", "no_such_module_here",
                              "a2a", "tasks"], cwd=tmp_path, capture_output=True, text=True,
                             timeout=60)
    assert missing.returncode == 1
    assert missing.stderr == ("Error: the app did not load: ModuleNotFoundError: No module "
                              "named 'no_such_module_here'\n")


@pytest.mark.server  # it starts flask processes
def test_progress_shows_on_a_terminal_only(tmp_path):
    url = f"sqlite://{tmp_path}/tasks.db"
    for name in ("first", "second"):  # one to copy, one to purge on a terminal
        store = open_store(f"sqlite://{tmp_path}/{name}.db")
        fill(store)
        store.close()
    env = {"FLASK_A2A_STORE": url}
    # Through pipes (a script, a log): the result lines alone, nothing on stderr.
    piped = flask("copy-store", f"sqlite://{tmp_path}/first.db", env=env)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    assert piped.stdout.startswith("Copied 7 tasks")
    piped = flask("purge", "--finished-before", "2999-01-01", env=env)
    assert piped.returncode == 0 and piped.stderr == "", piped.stderr
    assert piped.stdout.splitlines()[-1] == "Deleted 7 tasks."
    # On a terminal: the bar, on stderr (copy-store draws its own with the same helper).
    leader, follower = pty.openpty()
    try:
        done = flask("purge", "--finished-before", "2999-01-01",
                     env={"FLASK_A2A_STORE": f"sqlite://{tmp_path}/second.db"},
                     stdout=subprocess.PIPE, stderr=follower)
    finally:
        os.close(follower)
    terminal = read_all(leader)
    assert done.returncode == 0, terminal
    assert done.stdout.splitlines()[-1] == "Deleted 7 tasks."
    assert "Deleting" in terminal


def read_all(fd: int) -> str:
    """What a pseudo-terminal received, once its other end has closed."""
    chunks = []
    try:
        while True:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            chunks.append(chunk)
    except OSError:  # EIO: the other end is closed and everything was read
        pass
    finally:
        os.close(fd)
    return b"".join(chunks).decode(errors="replace")
