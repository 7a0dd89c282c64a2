"""A shelve store written with every record kind, at fixed clock readings: the bytes
of its log file are kept in ``tests/data/stores/shelve-kinds.log`` (written by the code of
before the record kinds were named) and must stay the same."""
from __future__ import annotations

import os
from unittest import mock

from a2a_flask.protocol.models import TaskState
from a2a_flask.stores import ShelveStore
from a2a_flask.stores.base import PushTarget

from tests.support.helpers import DATA
from tests.stores.test_stores import append, config, create, status_event, user_turn

GOLDEN = os.path.join(DATA, "stores", "shelve-kinds.log")
#: The same store after a compaction (which writes snapshot records, "s").
GOLDEN_COMPACTED = os.path.join(DATA, "stores",
                                "shelve-kinds-compacted.log")
NOW = 1_700_000_000.0


def write_every_kind(path: str, *, compact: bool = False) -> ShelveStore:
    """Open a shelve store at ``path`` and write each record kind at least once
    (then, with ``compact``, compact it)."""
    with mock.patch("a2a_flask.stores.shelve.time.time", return_value=NOW):
        store = ShelveStore(path)
        create(store, "t1")                                              # t (with meta)
        append(store, "t1", [user_turn("t1", "more")])                   # t
        create(store, "t2", TaskState.SUBMITTED, second=2)
        append(store, "t2", [status_event("t2", TaskState.COMPLETED, 3)])
        store.put_push_target("t1", PushTarget(config("c1"), "1.0", "alice"))   # p
        store.put_push_target("t1", PushTarget(config("c2"), "0.3", "alice"))
        store.record_push_progress("t1", "c1", 2, 1, False)              # pp
        store.delete_push_config("t1", "c2")                             # pd
        assert store.claim("job", "w1", 30.0)                            # c
        store.claim("gone", "w1", 30.0)
        store.release_claim("gone", "w1")                                # cu
        store.acquire_lease("t1", "w1", 60.0)                            # l
        store.renew_leases("w1", ["t1"], 90.0)
        store.acquire_lease("t2", "w2", 60.0)
        store.release_lease("t2", None)                                  # lu
        assert store.purge("2026-01-01T00:00:00.000Z") == 1              # x
        if compact:
            store.compact()
    return store
