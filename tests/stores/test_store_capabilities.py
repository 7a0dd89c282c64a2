"""What the store contract says in methods and class attributes rather than private
names: the calls the outage guard wraps, ``process_local`` and
what the web tier and the ``flask a2a`` commands do with it (the example dict store
is treated exactly as the memory store), and the one snapshot rule."""
from __future__ import annotations

import logging
from typing import List

import pytest
from flask import Flask

from a2a_flask import A2A
from a2a_flask.protocol.events import Event
from a2a_flask.protocol.models import TaskState
from a2a_flask.stores import MemoryStore, ShelveStore, SQLiteStore, TaskStore, open_store
from a2a_flask.stores.base import CONTRACT, finishes, snapshot_due
from a2a_flask.testing.store_contract import chunk_event, make_task, status_event, user_turn
from a2a_flask.web import assembly

from examples.dict_store import DictStore
from tests.conftest import make_card


def guarded_store_classes() -> List[type]:
    from a2a_flask.stores.redis import RedisStore
    from a2a_flask.stores.sql import SQLStore

    return [ShelveStore, SQLiteStore, RedisStore, SQLStore]


# ------------------------------------------------------------------ the outage guard


def test_the_guarded_calls_are_the_methods_marked_in_the_contract():
    """CONTRACT comes from the @backend_call marks on the contract's methods: the
    abstract ones, and those with defaults that reach the data."""
    assert set(CONTRACT) == set(TaskStore.__abstractmethods__) | {
        "head", "task_ids", "create_with", "append_released", "create_claimed"}
    assert not {"entries", "wake", "prepare", "close", "answering",
                "create_tables"} & set(CONTRACT)


@pytest.mark.parametrize("cls", guarded_store_classes(), ids=lambda cls: cls.__name__)
def test_every_networked_built_in_store_guards_every_contract_call(cls):
    unguarded = [name for name in CONTRACT if not hasattr(getattr(cls, name), "__wrapped__")]
    assert unguarded == []


# ------------------------------------------------------------------ process_local


def test_the_stores_of_one_process_say_so():
    assert MemoryStore.process_local and DictStore.process_local
    assert not any(cls.process_local for cls in guarded_store_classes())
    assert not TaskStore.process_local  # the default: shared
    # In this process: never down, guard or not.
    assert DictStore().answering(0.0) and MemoryStore().answering(0.0)


def test_an_agent_on_a_process_local_store_is_refused_under_celery():
    """The refusal at init_app: by the store's process_local, not its class."""
    for store, named in [("dict://", "the dict store"), (DictStore(), "the DictStore"),
                         (None, "the memory store")]:
        agent = A2A(card=make_card(), runner="celery", store=store)
        agent.executor(lambda ctx: "x")
        with pytest.raises(RuntimeError, match=f"A2A_RUNNER=celery with {named}: its "
                                               "workers run in other processes"):
            agent.init_app(Flask("x"))


def test_a_process_local_store_under_several_workers_is_warned_about(monkeypatch, caplog):
    monkeypatch.setattr(assembly, "gunicorn_workers", lambda: 3)
    with caplog.at_level(logging.WARNING, logger="a2a_flask"):
        app = Flask("x")
        A2A(app, card=make_card(), executor=lambda ctx: "x", store="dict://")
    assert "uses the dict store under 3 gunicorn workers" in caplog.text
    for state in app.extensions["a2a"].values():
        state.close()


def test_each_agent_opens_its_own_process_local_store(make_app):
    app = make_app(store="dict://")
    A2A(app, card=make_card(name="Second"), executor=lambda ctx: "x", name="second",
        url_prefix="/second", store="dict://")
    first, second = (app.extensions["a2a"][name].store for name in ("a2a", "second"))
    assert isinstance(first, DictStore) and isinstance(second, DictStore)
    assert first is not second
    app.extensions["a2a"]["second"].close()


def run(app, *args: str):
    return app.test_cli_runner().invoke(args=["a2a", *args])


def test_the_commands_treat_the_dict_store_as_the_memory_store(make_app, tmp_path):
    app = make_app(store="dict://")
    assert run(app, "tasks").output == (
        "No tasks. (The dict store holds only this process's tasks: a server's are in its "
        "own memory.)\n")
    doctor = run(app, "doctor").output
    assert "  warn   the dict store keeps tasks in one process, lost when it stops" in doctor
    assert run(app, "create-tables").output == (
        "The DictStore keeps no SQL tables: nothing to create.\n")
    other = f"sqlite:///{tmp_path}/other.db"
    open_store(other).close()
    assert run(app, "copy-store", other).output == (
        "Error: the agent's store is dict://: give the target with --to URL\n")
    for args in (["dict://", "--to", other], [other, "--to", "dict://"]):
        result = run(app, "copy-store", *args)
        assert result.exit_code == 1
        assert result.output == ("Error: dict:// lives in one process: there is nothing to "
                                 "copy from or to it from here\n")
    memory = make_app()  # the memory store, as before
    assert run(memory, "copy-store", "memory://", "--to", other).output == (
        "Error: memory:// lives in one process: there is nothing to copy from or to it "
        "from here\n")
    assert "(The memory store holds only this process's tasks" in run(memory, "tasks").output


# ------------------------------------------------------------------ one snapshot rule


def test_the_rule_of_a_store_that_counts_nothing_is_the_sql_stores():
    """``snapshot_due`` with nothing counted stores the snapshot when the log passes a
    power of two, when the events finish the task and when one replaces the task: the
    rule the SQL store kept by itself before."""
    kinds: List[List[Event]] = [
        [chunk_event("t1", 1)], [chunk_event("t1", 1), chunk_event("t1", 2)],
        [user_turn("t1", "more")], [status_event("t1", TaskState.WORKING)],
        [status_event("t1", TaskState.COMPLETED)], [make_task("t1", TaskState.WORKING)],
        [chunk_event("t1", 1), make_task("t1", TaskState.FAILED)],
        [user_turn("t1", "a"), user_turn("t1", "b"), status_event("t1", TaskState.CANCELED)]]
    for expected_seq in range(1, 300):
        for events in kinds:
            seq = expected_seq + len(events)
            before = (finishes(events) or seq.bit_length() != expected_seq.bit_length()
                      or any(event.__class__.__name__ == "Task" for event in events))
            assert snapshot_due(None, seq, events) is before, (expected_seq, events)
