"""``flask a2a copy-store`` from a source nobody vouches for: the source is only read
(nothing created, renamed or migrated where it lies), an earlier-format shelve store
is unpickled through a2a_flask's record classes alone, every task passes the API's
checks or is skipped and named, and whatever reaches the terminal is escaped."""
from __future__ import annotations

import collections
import dbm.dumb
import os
import pickle
import re
import sqlite3
import uuid
from pathlib import Path
from typing import Dict, Tuple

import pytest

from a2a_flask.protocol.events import apply_event
from a2a_flask.protocol.models import (Artifact, Message, Part, Role, TaskArtifactUpdateEvent,
                                       TaskState)
from a2a_flask.stores import ShelveStore, SQLiteStore, StoreError, open_store
from a2a_flask.stores.base import PushTarget, TaskRecord, scoped
from a2a_flask.stores.oldpickle import load_record
from a2a_flask.stores.readonly import open_read_only
from a2a_flask.stores.serial import dump_event, dump_task

from tests.conftest import (REDIS_URL, drop_redis_prefix, drop_sql_database, redis_up,
                            sql_admin, sql_test_url)
from tests.stores.test_shelve_log import _old_format_store
from tests.stores.test_stores import (SQLITE_0_1_TASKS, append, config, create, make_task,
                                      stamp, status_event)
from tests.support.wire import rpc

S = TaskState

pytestmark = pytest.mark.timeout(120)


def run(app, *args: str):
    return app.test_cli_runner().invoke(args=["a2a", *args])


def files(folder: Path) -> Dict[str, Tuple[int, int]]:
    """Every file under ``folder``: its size and modification time (ns), by name."""
    found = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            stat = os.stat(path)
            found[os.path.relpath(path, folder)] = (stat.st_size, stat.st_mtime_ns)
    return found


# ------------------------------------------------------------------ hostile pickles


class Hostile:
    """Unpickling this runs a shell command (what a crafted shelve file can hold)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        # posix.system, pickled by name: the spawn guard of the quick run replaces
        # os.system with a function of its own, which pickle cannot name.
        import posix

        return (posix.system, (f"touch {self.marker}",))


def _hostile_store(path: str, key: str, value: object) -> None:
    """A store of the earlier format with one good task, and ``value`` under ``key``."""
    _old_format_store(path)
    db = dbm.dumb.open(path, "w")
    try:
        db[key.encode()] = pickle.dumps(value, protocol=4)
    finally:
        db.close()


HOSTILE = {
    # A task record that is a call of os.system.
    "os.system": ("t:evil", lambda marker: Hostile(marker), r"'posix'\.'system'"),
    # An event of the good task that is one.
    "os.system event": ("e:old:2", lambda marker: Hostile(marker), r"'posix'\.'system'"),
    # Webhooks in a class outside the list (harmless, but not a2a_flask's).
    "other class": ("p:old", lambda marker: collections.OrderedDict(),
                    r"'collections'\.'OrderedDict'"),
}


@pytest.fixture(params=sorted(HOSTILE))
def hostile(request, tmp_path):
    """(store path, marker file, what the error names) of a hostile earlier-format store."""
    key, make, named = HOSTILE[request.param]
    marker = tmp_path / "ran"
    path = str(tmp_path / "source" / "tasks")
    os.makedirs(os.path.dirname(path))
    _hostile_store(path, key, make(marker))
    return path, marker, named


def test_a_hostile_earlier_format_store_is_refused_when_a_server_opens_it(hostile):
    path, marker, named = hostile
    with pytest.raises(StoreError) as caught:
        ShelveStore(path)  # a server's open migrates the earlier format
    message = str(caught.value)
    assert f"{path}.dat" in message and "refused" in message
    assert re.search(named, message)
    assert "move those files away" in message
    assert not marker.exists()
    assert os.path.exists(path + ".dir") and not os.path.exists(path + ".dir.migrated")


def test_a_hostile_earlier_format_store_is_refused_read_only_and_runs_nothing(hostile):
    path, marker, named = hostile
    before = files(Path(path).parent)
    with pytest.raises(StoreError, match=f"{path}.dat.*{named}.*refused"):
        open_read_only(f"shelve://{path}")
    assert not marker.exists()
    assert files(Path(path).parent) == before


def test_copy_store_refuses_a_hostile_source_naming_the_file(hostile, make_app, tmp_path):
    path, marker, named = hostile
    app = make_app(store=f"sqlite:///{tmp_path}/target.db")
    before = files(Path(path).parent)
    result = run(app, "copy-store", f"shelve://{path}")
    assert result.exit_code == 1
    assert result.output.startswith(f"Error: cannot open the source store shelve://{path}: ")
    assert f"{path}.dat" in result.output and "refused" in result.output
    assert not marker.exists()
    assert files(Path(path).parent) == before
    assert open_store(f"sqlite:///{tmp_path}/target.db").task_ids() == []


def test_the_record_unpickler_reads_the_earlier_formats_values_and_checks_their_kinds(tmp_path):
    record = TaskRecord(make_task("old", S.WORKING), 2, "acme", "alice", "0.3", stamp(1))
    for protocol in (3, 4, 5):  # (the earlier format wrote 4)
        assert load_record(pickle.dumps(record, protocol=protocol), "here") == record
    with pytest.raises(StoreError, match=r"here holds a pickle naming 'builtins'\.'eval'"):
        load_record(b"cbuiltins\neval\n(S'1'\ntR.", "here")
    # A value of the wrong kind under a key: refused, naming the file and the key.
    path = str(tmp_path / "tasks")
    _hostile_store(path, "l:old", PushTarget(config("c")))
    with pytest.raises(StoreError, match=r"tasks\.dat \(key 'l:old'\) holds a PushTarget"):
        open_read_only(f"shelve://{path}")


# ------------------------------------------------------------------ the source is only read


def _shelve_source(folder: Path) -> str:
    store = ShelveStore(str(folder / "tasks"))
    create(store, "t1", tenant="acme", owner="alice")
    append(store, "t1", [status_event("t1", S.WORKING), status_event("t1", S.COMPLETED, 2)])
    store.put_push_target("t1", PushTarget(config("c", token="tok"), "1.0", "alice", 1))
    create(store, "t2")
    store.close()
    return f"shelve://{folder}/tasks"


def _old_shelve_source(folder: Path) -> str:
    _old_format_store(str(folder / "tasks"))
    return f"shelve://{folder}/tasks"


def _sqlite_source(folder: Path) -> str:
    store = SQLiteStore(str(folder / "tasks.db"))
    create(store, "t1", tenant="acme", owner="alice")
    append(store, "t1", [status_event("t1", S.WORKING)])
    store.put_push_target("t1", PushTarget(config("c", token="tok"), "1.0", "alice", 0))
    store.close()
    assert not os.path.exists(folder / "tasks.db-wal")  # closed: read as immutable
    return f"sqlite:///{folder}/tasks.db"


def _old_sqlite_source(folder: Path) -> str:
    """A file of a2a_flask 0.1 (the snapshot in the task's row): moved to the current
    schema in memory, not on disk."""
    task = apply_event(make_task("t1"), status_event("t1", S.WORKING))
    old = sqlite3.connect(folder / "tasks.db")
    old.executescript(SQLITE_0_1_TASKS.format(extra=""))
    old.execute("INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?,?,?)", (
        "t1", "acme", "alice", "1.0", "ctx", "working", stamp(0), stamp(1), 2, dump_task(task)))
    old.executemany("INSERT INTO events VALUES (?,?,?)", [
        ("t1", 1, dump_event(make_task("t1"))), ("t1", 2, dump_event(status_event("t1", S.WORKING)))])
    old.commit()
    old.close()
    return f"sqlite:///{folder}/tasks.db"


SOURCES = {"shelve": _shelve_source, "shelve-earlier-format": _old_shelve_source,
           "sqlite": _sqlite_source, "sqlite-0.1-schema": _old_sqlite_source}


@pytest.mark.parametrize("kind", sorted(SOURCES))
def test_copy_store_changes_nothing_where_its_source_lies(kind, make_app, tmp_path):
    folder = tmp_path / "backup"
    folder.mkdir()
    source_url = SOURCES[kind](folder)
    before = files(folder)
    source = open_read_only(source_url)
    ids = sorted(source.task_ids())
    wanted = {task_id: (source.load(task_id), source.push_targets(task_id)) for task_id in ids}
    source.close()
    app = make_app(store=f"sqlite:///{tmp_path}/target/tasks.db")
    result = run(app, "copy-store", source_url)
    assert result.exit_code == 0, result.output
    assert f"Copied {len(ids)} tasks from {source_url}" in result.output
    assert files(folder) == before  # names, sizes and times: nothing created or written
    target = app.extensions["a2a"]["a2a"].store
    for task_id, (record, webhooks) in wanted.items():
        assert target.load(task_id) == record and target.push_targets(task_id) == webhooks


def test_a_read_only_shelve_store_refuses_writes(tmp_path):
    folder = tmp_path / "backup"
    folder.mkdir()
    _shelve_source(folder)
    store = ShelveStore(str(folder / "tasks"), read_only=True)
    try:
        with pytest.raises(StoreError, match="open read-only"):
            create(store, "t3")
    finally:
        store.close()
    with pytest.raises(StoreError, match="there is no shelve store at"):
        ShelveStore(str(tmp_path / "nothing" / "tasks"), read_only=True)
    assert not (tmp_path / "nothing").exists()


def test_copy_store_writes_nothing_to_a_redis_source(make_app, tmp_path):
    """Opening a Redis store moves an older key layout on its first call: not a source's."""
    redis_up()
    import redis

    prefix = f"a2atest-src-{uuid.uuid4().hex[:10]}"
    url = f"{REDIS_URL}?prefix={prefix}"
    client = redis.Redis.from_url(REDIS_URL)
    try:
        store = open_store(url)
        create(store, "t1")
        store.close()
        client.delete(f"{prefix}:layout")  # as an older release left it
        before = {key: client.dump(key) for key in client.scan_iter(f"{prefix}:*")}
        app = make_app(store=f"sqlite:///{tmp_path}/target.db")
        result = run(app, "copy-store", url)
        assert result.exit_code == 0, result.output
        assert "Copied 1 tasks" in result.output
        assert {key: client.dump(key) for key in client.scan_iter(f"{prefix}:*")} == before
    finally:
        drop_redis_prefix(prefix)
        client.close()


def test_copy_store_creates_no_tables_in_a_sql_source(make_app, tmp_path):
    import sqlalchemy as sa

    name = f"a2atest_{uuid.uuid4().hex[:12]}"
    url = sql_test_url("postgresql", name)
    try:
        app = make_app(store=f"sqlite:///{tmp_path}/target.db")
        result = run(app, "copy-store", url)
        assert result.exit_code == 1
        with sql_admin("postgresql").connect() as conn:
            schemas = conn.execute(sa.text(
                "SELECT count(*) FROM information_schema.schemata WHERE schema_name = :n"),
                {"n": name}).scalar()
        assert schemas == 0  # a server's first call would have created it and its tables
    finally:
        drop_sql_database("postgresql", name)


# ------------------------------------------------------------------ the API's checks


def _source_with(folder: Path, *records: Tuple[TaskRecord, list]) -> str:
    """An SQLite source holding each (record, later events) as its store takes them
    (the store checks nothing: these are what a crafted file could hold)."""
    store = SQLiteStore(str(folder / "tasks.db"))
    for record, events in records:
        store.create(record, record.task)
        if events:
            store.append(record.task.id, record.seq, events, record.after(events))
    store.close()
    return f"sqlite:///{folder}/tasks.db"


def test_copy_store_refuses_what_the_api_refuses_and_copies_the_rest(make_app, tmp_path):
    long_id = "x" * 300
    big = Message(message_id="big", role=Role.AGENT, parts=[Part(text="y" * 5000)],
                  task_id="big-task", context_id="ctx")
    # An artifact of 5,000 bytes, then replaced by a small one: the task ends small,
    # but no request could have brought the first.
    replaced = [TaskArtifactUpdateEvent("big-event", "ctx", Artifact("a", [Part(text=text)]))
                for text in ("z" * 5000, "small")]
    source_url = _source_with(
        tmp_path,
        (TaskRecord(make_task("good"), 1, "acme", "alice"), [status_event("good", S.WORKING)]),
        (TaskRecord(make_task(long_id), 1), []),
        (TaskRecord(make_task("bad-tenant"), 1, "ac\nme", "alice"), []),
        (TaskRecord(make_task("bad-owner"), 1, "", "al\x00ice"), []),
        (TaskRecord(make_task("big-task"), 1), [big]),
        (TaskRecord(make_task("big-event"), 1), replaced),
    )
    # A webhook whose token could not be sent as a header.
    store = SQLiteStore(str(tmp_path / "tasks.db"))
    store.create(TaskRecord(make_task("bad-hook"), 1), make_task("bad-hook"))
    store.put_push_target("bad-hook", PushTarget(config("c", token="tok\r\nX-Evil: 1")))
    store.close()
    app = make_app(store=f"sqlite:///{tmp_path}/target.db", max_task_bytes=1000)
    client = app.test_client()
    api_says = rpc(client, "GetTask", {"id": long_id})["error"]["message"]
    assert api_says == "id is longer than 256 characters"

    result = run(app, "copy-store", source_url)
    assert result.exit_code == 1
    assert "Copied 1 tasks" in result.output
    error = result.output.splitlines()[-1]
    assert error.startswith("Error: 6 tasks were refused, as the API would refuse them: ")
    assert f"{long_id} ({api_says})" in error
    assert "bad-tenant (tenant contains control characters)" in error
    assert "bad-owner (a Principal id must be at most 255 characters" in error
    assert ("big-task (The task would hold 5016 bytes, more than the 1000 a task may hold "
            "(A2A_MAX_TASK_BYTES))") in error
    assert ("big-event (event 2: The task would hold 5001 bytes, more than the 1000 a task "
            "may hold (A2A_MAX_TASK_BYTES))") in error
    assert "bad-hook (webhook: token contains a control character (U+000D))" in error
    target = app.extensions["a2a"]["a2a"].store
    assert target.task_ids() == ["good"]  # nothing of a refused task was written
    assert target.load("good").owner == "alice"


def test_control_characters_from_the_source_reach_the_terminal_escaped(make_app, tmp_path):
    crafted = "t\x1b]0;owned\x07\x1b[2J\u202e"  # set the window title, clear, reverse
    source_url = _source_with(tmp_path, (TaskRecord(make_task(crafted), 1), []))
    app = make_app(store=f"sqlite:///{tmp_path}/target.db")
    result = run(app, "copy-store", source_url)
    assert result.exit_code == 1
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "\u202e" not in result.output
    assert "t\\x1b]0;owned\\x07\\x1b[2J\\u202e (id contains control characters)" in result.output



def test_copy_store_copies_named_agents_tasks_and_checks_each_part_of_their_tenant(
        make_app, tmp_path):
    """A named agent's task is stored under its scope and the caller's tenant, parted by
    a control character (stores.base.scoped): copied with its scope; a part no agent or
    caller could have made is refused."""
    source_url = _source_with(
        tmp_path,
        (TaskRecord(make_task("billing-task"), 1, scoped("billing", "acme"), ""), []),
        (TaskRecord(make_task("default-task"), 1, "acme", "alice"), []),
        (TaskRecord(make_task("no-scope"), 1, "\x1facme", ""), []),
        (TaskRecord(make_task("bad-scope"), 1, scoped("bil\nling", "acme"), ""), []),
        (TaskRecord(make_task("bad-part"), 1, scoped("billing", "ac\x00me"), ""), []),
    )
    app = make_app(store=f"sqlite:///{tmp_path}/target.db")
    result = run(app, "copy-store", source_url)
    assert result.exit_code == 1
    assert "Copied 2 tasks" in result.output
    error = result.output.splitlines()[-1]
    assert error.startswith("Error: 3 tasks were refused, as the API would refuse them: ")
    assert "no-scope (the store scope is empty)" in error
    assert "bad-scope (the store scope contains control characters)" in error
    assert "bad-part (tenant contains control characters)" in error
    target = app.extensions["a2a"]["a2a"].store
    assert sorted(target.task_ids()) == ["billing-task", "default-task"]
    assert target.load("billing-task").tenant == scoped("billing", "acme")
    # The named agent sees its copied task, as it saw it in the source.
    billing = make_app(store=f"sqlite:///{tmp_path}/target.db", store_scope="billing")
    found = rpc(billing.test_client(), "GetTask", {"id": "billing-task", "tenant": "acme"})
    assert found.get("result", {}).get("id") == "billing-task", found
