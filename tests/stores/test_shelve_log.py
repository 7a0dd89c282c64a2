"""The shelve store's record log: torn tails, damage, records it could not read back,
compaction, the earlier dbm format."""
from __future__ import annotations

import dataclasses
import dbm.dumb
import fcntl
import json
import os
import pathlib
import shelve
import struct
import subprocess
import sys
import time
from typing import List

import pytest

from a2a_flask.protocol.models import TaskState
from a2a_flask.stores import ShelveStore, StoreError
from a2a_flask.stores import shelve as shelve_store
from a2a_flask.stores.base import PushTarget, TaskQuery, TaskRecord
from a2a_flask.stores import recordlog

from tests.stores.test_stores import (
    append,
    chunk_event,
    config,
    create,
    make_task,
    stamp,
    status_event,
    stored_snapshot_seq,
    user_turn,
)

pytestmark = pytest.mark.declare(server=["test_greenlets_share_the_store_under_gevent"])

S = TaskState


def test_a_torn_last_record_is_ignored_and_cut_wherever_it_ends(tmp_path):
    """Whatever prefix of the last write reached the file, the store opens with what
    came before it, and the next write replaces the torn bytes.  (Every byte of the
    frame header, then every 5th byte of the payload: each cut costs a flush.)"""
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    create(store, "t1")
    append(store, "t1", [user_turn("t1", "a")])
    store.close()
    complete = os.path.getsize(path + ".log")
    store = ShelveStore(path)
    append(store, "t1", [user_turn("t1", "b"), status_event("t1", S.WORKING)])
    store.close()
    with open(path + ".log", "rb") as log:
        whole = log.read()
    cuts = list(range(complete, complete + 12)) + list(range(complete + 12, len(whole), 5))
    sizes = set()  # of the file after the next write: the same wherever the torn one ended
    for cut in cuts:
        with open(path + ".log", "wb") as log:
            log.write(whole[:cut])
        store = ShelveStore(path)
        try:
            assert store.load("t1").seq == 2, cut
            assert [e.seq for e in store.read("t1", 0)] == [1, 2]
            append(store, "t1", [status_event("t1", S.COMPLETED)])  # cuts the torn tail
            sizes.add(os.path.getsize(path + ".log"))
        finally:
            store.close()
        reopened = ShelveStore(path)
        assert [e.seq for e in reopened.read("t1", 0)] == [1, 2, 3]
        assert reopened.load("t1").state is S.COMPLETED
        reopened.close()
    assert len(sizes) == 1


def test_a_flipped_byte_in_the_last_record_fails_its_checksum(tmp_path):
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    create(store, "t1")
    append(store, "t1", [status_event("t1", S.WORKING)])
    store.close()
    with open(path + ".log", "r+b") as log:
        log.seek(-5, os.SEEK_END)
        byte = log.read(1)
        log.seek(-5, os.SEEK_END)
        log.write(bytes([byte[0] ^ 0x20]))
    store = ShelveStore(path)
    assert store.load("t1").seq == 1 and store.load("t1").state is S.SUBMITTED
    store.close()


def test_a_file_that_is_not_a_log_is_refused(tmp_path):
    path = str(tmp_path / "tasks")
    with open(path + ".log", "wb") as log:
        log.write(b"something else entirely\n")
    with pytest.raises(StoreError, match="not an a2a_flask record log"):
        ShelveStore(path)


def test_compaction_keeps_live_data_drops_the_rest_and_other_processes_follow(
        tmp_path, monkeypatch):
    monkeypatch.setattr(shelve_store, "COMPACT_MIN_BYTES", 1)
    path = str(tmp_path / "tasks")
    store, other = ShelveStore(path), ShelveStore(path)
    for i in range(20):
        create(store, f"t{i}", second=i)
        append(store, f"t{i}", [user_turn(f"t{i}", "a"), status_event(f"t{i}", S.WORKING, i)])
        append(store, f"t{i}", [status_event(f"t{i}", S.COMPLETED, i)])
    store.put_push_target("t19", dataclasses.replace(
        PushTarget(config("c", token="tok"), owner="alice"), delivered_seq=2))
    store.claim("push:t19", "worker-a", 60.0)
    store.claim("push:gone", "worker-a", 0.01)
    store.acquire_lease("t19", "worker-a", 60.0)
    time.sleep(0.05)
    assert store.purge(stamp(10)) == 10
    before = os.path.getsize(path + ".log")
    inode = os.stat(path + ".log").st_ino
    store.compact()
    assert os.stat(path + ".log").st_ino != inode
    assert os.path.getsize(path + ".log") < before / 2
    for view in (store, other, ShelveStore(path)):  # the writer, a process that follows, a new one
        page = view.list_tasks(TaskQuery(page_size=100))
        assert sorted(r.task.id for r in page.records) == sorted(f"t{i}" for i in range(10, 20))
        assert [e.seq for e in view.read("t15", 0)] == [1, 2, 3, 4]
        assert view.read("t15", 2)[0].event.status.state is S.WORKING
        assert view.load("t15").state is S.COMPLETED and view.load("t3") is None
        assert [(t.config.token, t.delivered_seq) for t in view.push_targets("t19")] == [("tok", 2)]
        assert not view.claim("push:t19", "worker-b", 1.0)
        assert view.claim("push:gone", "worker-b", 1.0)
        view.release_claim("push:gone", "worker-b")
        assert view.expired_leases() == []
    # Both keep writing to the new file.
    append(other, "t15", [user_turn("t15", "late")])
    assert store.load("t15").seq == 5


def test_a_long_task_is_compacted_into_records_of_bounded_size(tmp_path, monkeypatch):
    """A record is decoded in one step (by each compaction and catch-up): a task
    of many chunks becomes many records, with yields between them, not one huge
    record that would hold the hub."""
    monkeypatch.setattr(shelve_store, "COMPACT_BATCH", 100)
    yields = []
    monkeypatch.setattr(shelve_store, "cooperate", lambda: yields.append(1))
    path = str(tmp_path / "tasks")
    store, other = ShelveStore(path), ShelveStore(path)
    create(store, "t1")
    append(store, "t1", [status_event("t1", S.WORKING)])
    record = store.load("t1")
    for i in range(450):
        record = record.after([chunk_event("t1", i)])
        store.append("t1", record.seq - 1, [chunk_event("t1", i)], record)
    store.compact()
    store.compact()  # again, from the first compaction's records
    assert len(yields) >= 8
    for view in (store, other, ShelveStore(path)):  # the writer, a follower, a new process
        assert [e.seq for e in view.entries("t1", 0)] == list(range(1, 453))
        sizes = [len(json.loads(view._payload(ref))["ev"]) for ref in view._tasks["t1"].refs]
        assert sizes == [100, 100, 100, 100, 52]
        assert [e.seq for e in view.read("t1", 440)] == list(range(441, 453))
        loaded = view.load("t1")
        assert (loaded.seq, loaded.state) == (452, S.WORKING)
        assert [p.text for p in loaded.task.artifacts[0].parts] == [f"c{i}" for i in range(450)]
    append(other, "t1", [status_event("t1", S.COMPLETED)])
    assert store.load("t1").state is S.COMPLETED


def _index(store):
    """Everything a store's index holds, as plain values (to compare two processes')."""
    def task(entry):
        return {name: getattr(entry, name) for name in shelve_store._Task.__slots__}

    return ({task_id: task(entry) for task_id, entry in store._tasks.items()},
            {k: sorted(v) for k, v in store._order.items()},
            {task_id: {c: dataclasses.astuple(t) for c, t in targets.items()}
             for task_id, targets in store._targets.items()},
            store._leases, store._claims)


def _appended_one_by_one(store, task_id, chunks, start=0):
    record = store.load(task_id)
    for i in range(start, start + chunks):
        record = record.after([chunk_event(task_id, i)])
        store.append(task_id, record.seq - 1, [chunk_event(task_id, i)], record)


def _decodes(monkeypatch):
    """A list that grows by one each time the shelve store decodes a record."""
    calls = []

    def counted(payload):
        calls.append(len(payload))
        return json.loads(payload)

    monkeypatch.setattr(shelve_store, "json", type("counting_json", (), {
        "loads": staticmethod(counted), "dumps": staticmethod(json.dumps)}))
    return calls


def test_the_writer_builds_the_index_a_process_reading_the_compacted_file_builds(
        tmp_path, monkeypatch):
    """The writer does not read its new file back: it points its index at what it
    wrote.  That index must be the one any process reading the file builds."""
    monkeypatch.setattr(shelve_store, "COMPACT_BATCH", 100)
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    for i in range(5):  # short tasks, finished
        create(store, f"s{i}", second=i)
        append(store, f"s{i}", [status_event(f"s{i}", S.WORKING, i)])
        append(store, f"s{i}", [status_event(f"s{i}", S.COMPLETED, i)])
    create(store, "long")
    append(store, "long", [status_event("long", S.WORKING)])
    _appended_one_by_one(store, "long", 260)
    store.put_push_target("s1", PushTarget(config("c", token="tok"), owner="alice"))
    store.claim("push:s1", "worker-a", 60.0)
    store.acquire_lease("long", "worker-a", 60.0)
    for round_ in range(3):  # compactions over compacted files, with writes between
        store.compact()
        assert _index(store) == _index(ShelveStore(path)), round_
        _appended_one_by_one(store, "long", 70, start=260 + 70 * round_)
        append(store, f"s{round_}", [user_turn(f"s{round_}", f"late{round_}")])
    fresh = ShelveStore(path)
    for view in (store, fresh):
        assert [e.seq for e in view.entries("long", 0)] == list(range(1, 263 + 3 * 70))
        parts = view.load("long").task.artifacts[0].parts
        assert [p.text for p in parts] == [f"c{i}" for i in range(260 + 3 * 70)]
        assert view.load("s0").seq == 4 and view.load("s0").state is S.COMPLETED
        assert view.load("s0").task.history[-1].parts[0].text == "late0"
    # Nothing is on the index that the file does not say:
    assert _index(store) == _index(fresh)


def test_a_compaction_decodes_only_the_records_it_merges(tmp_path, monkeypatch):
    monkeypatch.setattr(shelve_store, "COMPACT_BATCH", 100)
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    for i in range(20):
        create(store, f"t{i}")
        append(store, f"t{i}", [status_event(f"t{i}", S.COMPLETED)])
    create(store, "long")
    _appended_one_by_one(store, "long", 240)
    store.compact()  # everything is merged (and each snapshot moved to a record of its own)
    decoded = _decodes(monkeypatch)
    store.compact()
    assert decoded == [], "a compacted file with nothing new is copied, not decoded"
    _appended_one_by_one(store, "long", 30, start=240)
    decoded.clear()
    store.compact()
    # The 30 new records and the compacted tail they merge with (41 events: less than
    # half a batch), each once: one of them also holds the snapshot (at seq 264), moved
    # to a record of its own from the same decoding.  The two full batches and the short
    # tasks are copied.
    assert stored_snapshot_seq(store, "long") == 264
    assert len(decoded) == 30 + 1, len(decoded)
    sizes = [len(json.loads(store._payload(ref))["ev"]) for ref in store._tasks["long"].refs]
    assert sizes == [100, 100, 71]
    assert [p.text for p in ShelveStore(path).load("long").task.artifacts[0].parts] == [
        f"c{i}" for i in range(270)]


def test_a_compaction_that_fails_leaves_the_log_and_the_index_as_they_were(tmp_path,
                                                                          monkeypatch):
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    for i in range(10):
        create(store, f"t{i}")
        append(store, f"t{i}", [status_event(f"t{i}", S.WORKING)])
    before, size = _index(store), os.path.getsize(path + ".log")
    writes = []

    def full_disk(self, payload):
        writes.append(payload)
        if len(writes) > 5:
            raise OSError(28, "No space left on device")
        return real_add(self, payload)

    real_add = recordlog.Rewrite.add
    monkeypatch.setattr(recordlog.Rewrite, "add", full_disk)
    with pytest.raises(OSError):
        store.compact()
    monkeypatch.setattr(recordlog.Rewrite, "add", real_add)
    assert not os.path.exists(path + ".log.tmp")
    assert os.path.getsize(path + ".log") == size and _index(store) == before
    append(store, "t3", [status_event("t3", S.COMPLETED)])
    assert ShelveStore(path).load("t3").state is S.COMPLETED
    assert [e.seq for e in store.read("t3", 0)] == [1, 2, 3]


def test_a_log_compacted_by_an_earlier_development_version_is_read_and_compacted(tmp_path):
    """0.2 development versions compacted a task into one record holding its meta,
    snapshot ("ss") and events, each event as parsed JSON (not as its text); such a
    file must read, append and compact alike."""
    from a2a_flask.protocol.codec import encode
    from a2a_flask.stores.serial import dump_event, dumps

    def event_body(event):
        return json.loads(dump_event(event))

    path = str(tmp_path / "tasks")
    task = make_task("old", S.WORKING, second=2)
    events = [[1, event_body(make_task("old", second=1))],
              [2, event_body(status_event("old", S.WORKING, 2))],
              [3, event_body(user_turn("old", "more"))]]
    head = {"k": "t", "id": "old", "seq": 3, "cx": "ctx", "st": S.WORKING.value,
            "up": stamp(2), "task": encode(task), "ss": 2,
            "meta": ["", "", "1.0", stamp(1)], "ev": events}
    log = recordlog.RecordLog(path + ".log", path + ".lock")
    with log.locked():
        log.changes()
        log.append([dumps(head).encode()])
    log.close()
    store = ShelveStore(path)
    assert store.load("old").task.history[-1].parts[0].text == "more"
    append(store, "old", [status_event("old", S.COMPLETED, 3)])
    store.compact()
    for view in (store, ShelveStore(path)):
        loaded = view.load("old")
        assert (loaded.seq, loaded.state) == (4, S.COMPLETED)
        assert [m.parts[0].text for m in loaded.task.history] == ["hi", "more"]
        assert [e.seq for e in view.read("old", 0)] == [1, 2, 3, 4]


def test_the_log_stays_bounded_when_old_tasks_are_purged(tmp_path, monkeypatch):
    monkeypatch.setattr(shelve_store, "COMPACT_MIN_BYTES", 64 << 10)
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    sizes = []
    for round_ in range(6):
        for i in range(60):
            task_id = f"r{round_}-{i}"
            create(store, task_id, second=round_)
            append(store, task_id, [user_turn(task_id, "x" * 200)])
            append(store, task_id, [status_event(task_id, S.COMPLETED, round_)])
        store.purge(stamp(round_))  # retention: everything of earlier rounds goes
        sizes.append(os.path.getsize(path + ".log"))
    # Live data is one or two rounds (a round is at most sizes[0]), and the file grows to
    # twice what the last compaction left; without compaction it would reach 6x sizes[0].
    assert max(sizes) < 4 * sizes[0], sizes
    assert store.list_tasks(TaskQuery(page_size=100)).total_size == 60
    store.close()


# ---------------------------------------------------------------- records it cannot read back


def frames(path: str) -> List[tuple]:
    """(offset, length) of every frame of a record log file, read as the format says."""
    with open(path, "rb") as log:
        data = log.read()
    found, position = [], len(recordlog.MAGIC)
    while position + 8 <= len(data):
        length, _ = struct.unpack_from(">II", data, position)
        found.append((position, length))
        position += 8 + length
    return found


def test_a_record_longer_than_a_reader_takes_is_refused_and_nothing_is_written(
        tmp_path, monkeypatch):
    monkeypatch.setattr(recordlog, "MAX_RECORD", 2000)
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    create(store, "t1")
    before = os.path.getsize(path + ".log")
    with pytest.raises(StoreError, match="cannot be stored"):
        append(store, "t1", [user_turn("t1", "x" * 3000)])
    assert os.path.getsize(path + ".log") == before
    assert store.load("t1").seq == 1
    create(store, "t2")
    store.close()
    reopened = ShelveStore(path)
    assert [reopened.load(t).seq for t in ("t1", "t2")] == [1, 1]
    reopened.close()


def test_a_compaction_never_merges_events_into_a_record_too_long_to_read(tmp_path, monkeypatch):
    monkeypatch.setattr(shelve_store, "COMPACT_BATCH_BYTES", 8000)
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    create(store, "t1")
    for number in range(40):  # small records (one event each) that a compaction merges
        append(store, "t1", [user_turn("t1", f"{number:02d}" + "x" * 998)])
    store.compact()
    with open(path + ".log", "rb") as log:
        data = log.read()
    merged = [length for offset, length in frames(path + ".log")
              if json.loads(data[offset + 8:offset + 8 + length]).get("ev")]
    assert len(merged) >= 40 * 1000 // 8000 and max(merged) <= 8000 + 1100
    reopened = ShelveStore(path)
    assert [e.seq for e in reopened.read("t1", 0)] == list(range(1, 42))
    assert reopened.load("t1").task.history[-1].parts[0].text.startswith("39")
    reopened.close()
    store.close()


def damage(path: str, offset: int, new: bytes) -> None:
    with open(path, "r+b") as log:
        log.seek(offset)
        log.write(new)


def test_a_damaged_record_before_the_end_is_skipped_and_the_later_ones_kept(
        tmp_path, caplog):
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    create(store, "t1")
    store.claim("job", "worker-a", 600.0)  # the record to damage
    create(store, "t2")
    store.close()
    claim_at, claim_length = frames(path + ".log")[1]
    damage(path + ".log", claim_at + 8 + claim_length // 2, b"#")  # its checksum fails
    size = os.path.getsize(path + ".log")
    store = ShelveStore(path)
    assert store.load("t2").seq == 1  # read past the damage
    assert store.claim("job", "worker-b", 600.0)  # the damaged claim was lost, alone
    append(store, "t2", [status_event("t2", S.WORKING)])
    assert os.path.getsize(path + ".log") > size  # appended: nothing was cut off
    store.close()
    assert f"{8 + claim_length} bytes at offset {claim_at} cannot be read" in caplog.text
    reopened = ShelveStore(path)
    assert (reopened.load("t1").seq, reopened.load("t2").seq) == (1, 2)
    reopened.close()


@pytest.mark.parametrize("length", [0, 0xFFFFFFFF, 0x7FFFFFFF],
                         ids=["zero", "past-the-end", "over-the-limit"])
def test_a_frame_with_a_length_no_record_has_is_skipped_not_taken_for_a_torn_tail(
        tmp_path, length, caplog):
    """A damaged length, before good frames, no longer makes the next writer cut off
    every record after it."""
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    for task_id in ("t1", "t2", "t3"):
        create(store, task_id)
    store.close()
    second = frames(path + ".log")[1][0]
    damage(path + ".log", second, struct.pack(">I", length))
    size = os.path.getsize(path + ".log")
    store = ShelveStore(path)
    assert (store.load("t1").seq, store.load("t2"), store.load("t3").seq) == (1, None, 1)
    create(store, "t4")
    store.close()
    assert os.path.getsize(path + ".log") > size
    reopened = ShelveStore(path)
    assert [reopened.load(t) is not None for t in ("t1", "t2", "t3", "t4")] == [
        True, False, True, True]
    reopened.close()
    assert f"at offset {second} cannot be read" in caplog.text


def test_a_record_an_earlier_release_wrote_over_the_limit_is_not_cut_off_as_torn(
        tmp_path, monkeypatch, caplog):
    """The issue's case: a record longer than the reader takes, with other callers'
    records after it.  It was read as a torn tail, and the next writer cut the file
    there; now it is skipped (and said so) and the records after it stay."""
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    create(store, "t1")
    append(store, "t1", [user_turn("t1", "x" * 3000)])  # written while 1 GiB was the limit
    create(store, "t2")
    store.close()
    size = os.path.getsize(path + ".log")
    monkeypatch.setattr(recordlog, "MAX_RECORD", 2000)  # the reader now takes less
    store = ShelveStore(path)
    assert store.load("t2").seq == 1
    create(store, "t3")
    store.close()
    assert os.path.getsize(path + ".log") > size
    reopened = ShelveStore(path)
    assert [reopened.load(t).seq for t in ("t1", "t2", "t3")] == [1, 1, 1]
    reopened.close()
    assert "cannot be read (damaged, or a record over 2000 bytes)" in caplog.text


def test_zeros_before_good_frames_are_skipped(tmp_path):
    """What a power cut may leave on some file systems: a block allocated but never
    written, then later writes that did reach the disk."""
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    create(store, "t1")
    store.close()
    with open(path + ".log", "rb") as log:
        data = log.read()
    second = ShelveStore(str(tmp_path / "other"))
    create(second, "t2")
    second.close()
    with open(str(tmp_path / "other") + ".log", "rb") as log:
        t2_frame = log.read()[len(recordlog.MAGIC):]
    with open(path + ".log", "wb") as log:
        log.write(data + bytes(4096) + t2_frame)
    store = ShelveStore(path)
    assert (store.load("t1").seq, store.load("t2").seq) == (1, 1)
    store.close()


def test_zeros_at_the_end_are_a_torn_tail_and_cut_by_the_next_write(tmp_path):
    """What a power cut can leave: space the file system allocated but never wrote."""
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    create(store, "t1")
    store.close()
    size = os.path.getsize(path + ".log")
    with open(path + ".log", "ab") as log:
        log.write(bytes(4096))
    store = ShelveStore(path)
    assert store.load("t1").seq == 1
    append(store, "t1", [status_event("t1", S.WORKING)])
    store.close()
    assert frames(path + ".log")[-1][0] == size  # the new record starts where the zeros did
    reopened = ShelveStore(path)
    assert reopened.load("t1").state is S.WORKING
    reopened.close()


# ---------------------------------------------------------------- the earlier format


def _old_format_store(path: str) -> None:
    """A store as releases before the record log wrote it: pickles in a dbm.dumb shelf."""
    task = make_task("old", S.WORKING, second=3)
    db = dbm.dumb.open(path, "c")
    with shelve.Shelf(db, protocol=4) as shelf:
        shelf["t:old"] = TaskRecord(task, 2, "acme", "alice", "0.3", stamp(1))
        shelf["e:old:1"] = make_task("old", S.SUBMITTED, second=1)
        shelf["e:old:2"] = status_event("old", S.WORKING, 3)
        shelf["p:old"] = {"c": PushTarget(config("c", token="tok"), "0.3", "alice", 1)}
        shelf["l:old"] = ("worker-a", time.time() + 60)
        shelf["c:push:old"] = ("worker-a", time.time() + 60)


def test_a_store_of_the_earlier_format_is_migrated(tmp_path):
    path = str(tmp_path / "tasks")
    _old_format_store(path)
    store = ShelveStore(path)
    record = store.load("old")
    assert (record.seq, record.tenant, record.owner, record.dialect) == (2, "acme", "alice", "0.3")
    assert record.state is S.WORKING and record.created_at == stamp(1)
    assert [e.seq for e in store.read("old", 0)] == [1, 2]
    assert [(t.config.token, t.dialect, t.delivered_seq) for t in store.push_targets("old")] == [
        ("tok", "0.3", 1)]
    assert store.expired_leases() == [] and store.push_backlog() == ["old"]
    assert not os.path.exists(path + ".dir") and os.path.exists(path + ".dir.migrated")
    append(store, "old", [status_event("old", S.COMPLETED, 4)])
    store.close()
    again = ShelveStore(path)  # the migrated files are not read twice
    assert again.load("old").seq == 3
    again.close()


def test_an_unreadable_store_of_the_earlier_format_is_refused_with_a_clear_message(tmp_path):
    path = str(tmp_path / "tasks")
    _old_format_store(path)
    with open(path + ".dir", "a") as index:
        index.write("'t:torn', (51")  # the torn line a SIGKILL used to leave
    with pytest.raises(StoreError, match="earlier a2a_flask release.*move those files away"):
        ShelveStore(path)
    assert os.path.exists(path + ".dir")  # nothing was moved


GEVENT_SCRIPT = """
from gevent import monkey; monkey.patch_all()
import sys
import gevent
from a2a_flask.stores import ShelveStore
from tests.stores.test_stores import append, create, status_event, S

path = sys.argv[1]
first, second = ShelveStore(path), ShelveStore(path)  # two instances: the file lock is contended

def work(store, n):
    create(store, f"g{n}")
    for _ in range(5):
        append(store, f"g{n}", [status_event(f"g{n}", S.WORKING)])

jobs = [gevent.spawn(work, (first, second)[n % 2], n) for n in range(20)]
gevent.joinall(jobs, timeout=60, raise_error=True)
assert all(job.successful() for job in jobs)
assert sorted(first.load(f"g{n}").seq for n in range(20)) == [6] * 20
assert [e.seq for e in second.read("g7", 0)] == [1, 2, 3, 4, 5, 6]
print("ok")
"""


def test_greenlets_share_the_store_under_gevent(tmp_path):
    # A child process: monkey-patching this one would affect the other tests.  Flushes
    # run in gevent's thread pool and lock waits sleep cooperatively there.
    done = subprocess.run([sys.executable, "-c", GEVENT_SCRIPT, str(tmp_path / "tasks")],
                          capture_output=True, text=True, timeout=90,
                          cwd=str(pathlib.Path(__file__).parents[2]))
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_a_process_that_sees_another_compact_does_not_compact_at_every_write(
        tmp_path, monkeypatch):
    monkeypatch.setattr(shelve_store, "COMPACT_MIN_BYTES", 1)  # only the doubling rule counts
    path = str(tmp_path / "tasks")
    first, second = ShelveStore(path), ShelveStore(path)
    for i in range(30):
        create(first, f"t{i}")
    first.compact()
    inode = os.stat(path + ".log").st_ino
    for i in range(5):  # far from doubling the compacted file
        append(second, f"t{i}", [status_event(f"t{i}", S.WORKING)])
    assert os.stat(path + ".log").st_ino == inode
    assert first.load("t4").seq == 2


def test_a_write_lock_held_too_long_is_unavailable_and_reads_go_on(tmp_path, monkeypatch):
    from a2a_flask import StoreUnavailable

    monkeypatch.setattr(recordlog, "LOCK_TIMEOUT", 0.3)
    path = str(tmp_path / "tasks")
    store = ShelveStore(path)
    create(store, "t1")
    with open(path + ".lock", "a+b") as other_process:  # another open file: another lock owner
        fcntl.flock(other_process, fcntl.LOCK_EX)
        with pytest.raises(StoreUnavailable) as caught:
            append(store, "t1", [status_event("t1", S.WORKING)])
        assert "stayed locked by another process for 0.3s" in str(caught.value.__cause__)
        assert store.load("t1").seq == 1  # readers take no lock
    append(store, "t1", [status_event("t1", S.WORKING)])
    assert store.load("t1").seq == 2
    store.close()
