"""The store contract (:mod:`a2a_flask.testing.store_contract`) and what it leaves
open on the memory store, as it keeps tasks and as it freezes each as soon as it
finishes; ``test_stores_<kind>.py`` runs the same cases on each other built-in
(the cases: tests/support/store_cases.py).  Other test modules import the
contract's helpers from here."""
from __future__ import annotations

import pytest

# The helpers other test modules import from here.
from tests.support.store_cases import (  # noqa: F401
    ALL_STORES,
    SHARED_STORES,
    SQLITE_0_1_TASKS,
    S,
    TestStoreContract,
    _drop_store_names,
    append,
    chunk_event,
    config,
    create,
    ids,
    kind_fixture,
    make_task,
    open_store,
    stamp,
    status_event,
    store,
    stored_snapshot_seq,
    target,
    test_read_slices_end_where_each_store_keeps_its_records,
    test_stores_of_json_text_hand_out_the_text,
    user_turn,
)

pytestmark = [pytest.mark.slow, pytest.mark.declare(server=[
    "TestStoreContract.test_process_local_says_whether_other_processes_see_the_tasks"])]

#: ``memory-frozen`` is the memory store freezing each task as soon as it finishes
#: (its default keeps the last 32 as objects): every case also runs on frozen tasks.
kind = kind_fixture("memory", "memory-frozen")
