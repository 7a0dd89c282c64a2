"""What a store outage says to the people who read it: the log
line and the ``flask a2a`` commands' error are one sentence each, say "task store
unavailable" once, and name no private class (``_Outage``)."""
from __future__ import annotations

import logging
import re
import sqlite3

import pytest

from a2a_flask.protocol.errors import StoreUnavailable
from a2a_flask.stores import StoreLimits, open_store
from a2a_flask.stores import base
from a2a_flask.web.commands.common import reason

LINE = re.compile(r"task store unavailable \((?P<store>\w+)\): (?P<cause>.+); callers are told "
                  r"so until it answers again")


def outage_of(store, caplog):
    """The StoreUnavailable a load raises, and the one line the store logged for it."""
    base._last_report.clear()  # a store of an earlier test may have had this id
    with caplog.at_level(logging.WARNING, logger="a2a_flask.store"):
        with pytest.raises(StoreUnavailable) as raised:
            store.load("t1")
    lines = [r.getMessage() for r in caplog.records if r.name == "a2a_flask.store"]
    assert len(lines) == 1, lines
    return raised.value, lines[0]


def check_text(line: str, error: StoreUnavailable, store_class: str) -> str:
    match = LINE.fullmatch(line)
    assert match is not None, line
    assert match["store"] == store_class
    cause = match["cause"]
    said = reason(error)  # what flask a2a prints after "Error: "
    assert said == f"task store unavailable: {cause}"
    for text in (line, said):
        assert text.count("task store unavailable") == 1, text
        assert "_Outage" not in text and not re.search(r"\b_[A-Z]\w*", text), text
        assert "\n" not in text
    return cause


def test_an_sql_outage_reads_as_one_sentence(caplog):
    pytest.importorskip("sqlalchemy")
    pytest.importorskip("psycopg")
    store = open_store("postgresql+psycopg://postgres@127.0.0.1:1/nothing",
                       limits=StoreLimits(timeout=2.0))
    try:
        error, line = outage_of(store, caplog)
    finally:
        store.close()
    cause = check_text(line, error, "SQLStore")
    assert "127.0.0.1" in cause and "1" in cause, cause  # the driver's own words


def test_a_redis_outage_names_the_drivers_error(caplog):
    pytest.importorskip("redis")
    store = open_store("redis://127.0.0.1:1/0", limits=StoreLimits(timeout=2.0))
    try:
        error, line = outage_of(store, caplog)
    finally:
        store.close()
    cause = check_text(line, error, "RedisStore")
    assert cause.startswith("ConnectionError: ") and "127.0.0.1:1" in cause, cause


def test_a_sqlite_outage_names_the_drivers_error(caplog, tmp_path, monkeypatch):
    store = open_store(f"sqlite:///{tmp_path}/tasks.db")

    def broken(*args, **kwargs):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "_query", broken)
    try:
        error, line = outage_of(store, caplog)
    finally:
        monkeypatch.undo()
        store.close()
    assert check_text(line, error, "SQLiteStore") == "OperationalError: disk I/O error"


def test_a_sqlite_store_locked_too_long_says_so_once(caplog, tmp_path):
    store = open_store(f"sqlite:///{tmp_path}/tasks.db")
    try:
        base._last_report.clear()
        with caplog.at_level(logging.WARNING, logger="a2a_flask.store"):
            error = store._unavailable("locked")
    finally:
        store.close()
    lines = [r.getMessage() for r in caplog.records if r.name == "a2a_flask.store"]
    cause = check_text(lines[0], error, "SQLiteStore")
    assert re.fullmatch(r"sqlite store at /*" + re.escape(f"{str(tmp_path).lstrip('/')}/tasks.db")
                        + r" stayed locked for [\d.]+s", cause), cause
