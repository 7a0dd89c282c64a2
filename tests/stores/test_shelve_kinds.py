"""The shelve store's record kinds: named in code, the same bytes on disk."""
from __future__ import annotations

import json
import pathlib
import shutil

from a2a_flask.protocol.models import TaskState
from a2a_flask.stores import ShelveStore
from a2a_flask.stores import shelve as shelve_store
from a2a_flask.stores.recordlog import RecordLog

from tests.support.shelve_kinds_case import GOLDEN, GOLDEN_COMPACTED, NOW, write_every_kind


def kinds_in(path: str) -> list:
    log = RecordLog(path, path + ".lock")
    try:
        return [json.loads(payload)["k"] for _, payload in log.changes()[1]]
    finally:
        log.close()


def test_every_kind_has_a_name_and_a_line_in_the_table() -> None:
    codes = {name: code for name, code in vars(shelve_store.Kind).items() if name.isupper()}
    assert sorted(codes.values()) == sorted(["t", "s", "p", "pd", "pp", "c", "cu", "l", "lu", "x"])
    for name, code in codes.items():
        assert f"    {code:<4}  {name}" in shelve_store.Kind.__doc__


def test_the_log_holds_the_bytes_it_held_before_the_kinds_were_named(tmp_path) -> None:
    store = write_every_kind(str(tmp_path / "tasks"))
    store.close()
    assert (tmp_path / "tasks.log").read_bytes() == pathlib.Path(GOLDEN).read_bytes()
    assert kinds_in(GOLDEN) == ["t", "t", "t", "t", "p", "p", "pp", "pd", "c", "c", "cu",
                                "l", "l", "l", "lu", "x"]


def test_a_compaction_writes_the_bytes_it_wrote_before(tmp_path) -> None:
    store = write_every_kind(str(tmp_path / "tasks"), compact=True)
    store.close()
    assert (tmp_path / "tasks.log").read_bytes() == pathlib.Path(GOLDEN_COMPACTED).read_bytes()
    assert kinds_in(GOLDEN_COMPACTED) == ["t", "s", "t", "p", "c", "l"]


def test_a_log_written_before_reads_as_before(tmp_path) -> None:
    for golden in (GOLDEN, GOLDEN_COMPACTED):
        shutil.copy(golden, tmp_path / "tasks.log")
        store = ShelveStore(str(tmp_path / "tasks"))
        try:
            record = store.load("t1")
            assert record is not None and record.seq == 2 and record.state is TaskState.SUBMITTED
            assert [m.parts[0].text for m in record.task.history] == ["hi", "more"]
            assert [e.seq for e in store.read("t1", 0)] == [1, 2]
            assert store.load("t2") is None  # purged
            [target] = store.push_targets("t1")
            assert (target.config.id, target.owner, target.delivered_seq, target.failures,
                    target.gave_up) == ("c1", "alice", 2, 1, False)
            assert store._claims == {"job": ("w1", NOW + 30.0)}
            assert store._leases == {"t1": ("w1", NOW + 90.0)}
        finally:
            store.close()
            for name in ("tasks.log", "tasks.lock"):
                (tmp_path / name).unlink()
