"""File store paths (``A2A_STORE=sqlite:///...`` or ``shelve:///...``): missing
folders are created (and logged); a path that cannot be created or written
stops ``init_app`` with a message naming it."""
from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from typing import List

import pytest
from flask import Flask

from a2a_flask import A2A
from a2a_flask.stores import StoreError

from tests.conftest import echo, make_card, require
from tests.support.helpers import ROOT

pytestmark = pytest.mark.declare(server=[
    "test_workers_creating_the_folder_at_once_all_start",
    "test_a_read_only_folder_or_file_stops_the_app_from_the_environment"], slow=[
    "test_store_errors_never_carry_the_password",
    "test_an_unreachable_stores_outage_never_carries_the_password"])

SCHEMES = ("sqlite", "shelve")


def init(url: str) -> None:
    app = Flask("store_paths")
    app.config["A2A_STORE"] = url
    A2A(app, card=make_card(), executor=echo)
    app.extensions["a2a"]["a2a"].close()


@pytest.mark.parametrize("scheme", SCHEMES)
def test_missing_folders_are_created_and_said(scheme, tmp_path, caplog):
    path = tmp_path / "not" / "yet" / "tasks"
    with caplog.at_level(logging.WARNING, logger="a2a_flask"):
        init(f"{scheme}://{path}")
    assert path.parent.is_dir()
    assert f"created the folder {path.parent}" in caplog.text


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_folder_that_cannot_be_created_stops_init_app(scheme, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    for path in (blocker / "sub" / "tasks", "/proc/a2a-no-such/tasks"):
        with pytest.raises(StoreError) as caught:
            init(f"{scheme}://{path}")
        assert str(caught.value).startswith(f"cannot open {scheme} store at {path}: "
                                            "cannot create the folder ")


@pytest.mark.parametrize("scheme", SCHEMES)
def test_workers_creating_the_folder_at_once_all_start(scheme, tmp_path, monkeypatch):
    """gunicorn -w 4 on a fresh path: every worker sees no folder, one makes it, the
    others' makedirs find it made.  Each must start (one failing stopped the master)."""
    from a2a_flask import stores

    folder = tmp_path / "fresh"
    real_makedirs = os.makedirs

    def made_by_another_worker_first(name, *args, **kwargs):
        real_makedirs(name, *args, **kwargs)  # the other worker wins the race
        real_makedirs(name, *args, **kwargs)  # and this one finds the folder there

    monkeypatch.setattr(stores.os, "makedirs", made_by_another_worker_first)
    init(f"{scheme}://{folder}/tasks")
    assert folder.is_dir()


def test_a_folder_in_place_of_the_file_stops_init_app(tmp_path):
    (tmp_path / "tasks.db").mkdir()
    with pytest.raises(StoreError, match=f"{tmp_path}/tasks.db is a folder"):
        init(f"sqlite://{tmp_path}/tasks.db")
    (tmp_path / "shelf.dat").mkdir()
    with pytest.raises(StoreError, match=f"{tmp_path}/shelf.dat is a folder"):
        init(f"shelve://{tmp_path}/shelf")


def unprivileged() -> List[str]:
    """A command prefix under which file permissions apply (root ignores them)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        require("running as root without setpriv (util-linux): permissions cannot be enforced")
    return [setpriv, "--inh-caps=-all", "--ambient-caps=-all",
            "--bounding-set=-dac_override,-dac_read_search", "--reuid=0", "--"]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_a_read_only_folder_or_file_stops_the_app_from_the_environment(scheme, tmp_path):
    """As a user would: the example app, the store set by FLASK_A2A_STORE."""
    prefix = unprivileged()
    locked = tmp_path / "locked"
    locked.mkdir()
    writable = tmp_path / "open"
    writable.mkdir()
    existing = writable / "tasks"
    init(f"{scheme}://{existing}")  # create the store's files, then make them read-only
    for name in os.listdir(writable):
        os.chmod(writable / name, 0o444)
    os.chmod(locked, 0o555)
    try:
        for path, says in ((locked / "tasks", f"cannot write in the folder {locked}"),
                           (existing, "is not readable and writable")):
            env = dict(os.environ, FLASK_A2A_STORE=f"{scheme}://{path}")
            result = subprocess.run(prefix + [sys.executable, "-c", "import examples.echo_agent"],
                                    cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
            assert result.returncode != 0
            last = result.stderr.strip().splitlines()[-1]
            assert last.startswith("a2a_flask.protocol.errors.StoreError: "), result.stderr
            assert str(path) in last and says in last, last
    finally:
        os.chmod(locked, 0o755)


@pytest.mark.parametrize("url", [
    "redis://:s3cret@127.0.0.1:notaport/0",  # a port redis-py cannot read
    "redis://user:s3cret@127.0.0.1:notaport/0",
    "postgress://user:s3cret@db.example/tasks",  # a misspelt scheme
    "postgresql://user:s3cret@db.example/tasks?pool_size=many",
], ids=["redis-password", "redis-user", "unknown-scheme", "bad-pool-setting"])
def test_store_errors_never_carry_the_password(url):
    with pytest.raises(StoreError) as raised:
        init(url)
    assert "s3cret" not in str(raised.value)
    assert ":***@" in str(raised.value)


@pytest.mark.parametrize("url", ["redis://:s3cret@127.0.0.1:1/0",  # nothing listens on 1
                                 "redis://user:s3cret@127.0.0.1:1/0"])
def test_an_unreachable_stores_outage_never_carries_the_password(url, caplog):
    """A store that is down is an outage, reported at each call (not at start-up):
    neither the caller's error nor the log line names the password."""
    from a2a_flask import StoreUnavailable
    from a2a_flask.stores import open_store

    pytest.importorskip("redis")
    store = open_store(url)
    try:
        with pytest.raises(StoreUnavailable) as raised:
            store.load("t1")
    finally:
        store.close()
    assert "s3cret" not in str(raised.value) and "s3cret" not in str(raised.value.__cause__)
    assert "s3cret" not in caplog.text
