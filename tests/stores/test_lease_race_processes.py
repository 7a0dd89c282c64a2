"""Processes racing for one task's lease on a file store (SQLite, shelve): exactly
one wins, as threads do in the store contract (a2a_flask/testing/store_contract.py)."""
from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from a2a_flask.stores import open_store
from a2a_flask.testing.store_contract import create

pytestmark = pytest.mark.server

RACERS = 4


def race(url: str, owner: str, start: Any, won: Any) -> None:
    store = open_store(url)
    try:
        start.wait(20)
        if store.acquire_lease("t1", owner, 60.0):
            with won.get_lock():
                won.value += 1
    finally:
        store.close()


@pytest.mark.parametrize("scheme", ["sqlite", "shelve"])
def test_of_processes_racing_for_a_lease_exactly_one_wins(tmp_path: Path, scheme: str) -> None:
    url = f"{scheme}:///{tmp_path}/tasks{'.db' if scheme == 'sqlite' else ''}"
    store = open_store(url)
    try:
        create(store, "t1")
    finally:
        store.close()
    context = multiprocessing.get_context("spawn")
    start, won = context.Barrier(RACERS), context.Value("i", 0)
    racers = [context.Process(target=race, args=(url, f"worker-{n}", start, won))
              for n in range(RACERS)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(60)
        assert racer.exitcode == 0
    assert won.value == 1
