"""A store in a ``shelve`` file: survives restarts, shared by the workers of one host.

Every operation opens the shelf under an ``flock`` (shared to read, exclusive
to write) and closes it again, so several processes see each other's writes.
The shelf uses ``dbm.dumb`` on purpose: it exists on every Python build and
its files are portable.  Wake-ups across processes are found by watching the
shelf's index file change; within a process they are immediate.

Meant for development and modest single-host loads: each call costs a file
open.  Many workers under load want an SQL or networked store.
"""
from __future__ import annotations

import contextlib
import dbm.dumb
import fcntl
import os
import shelve as shelve_module
import time
from typing import Any, Dict, Iterator, List, Optional

from ..concurrency import Notifier
from ..protocol.models import Task
from .base import (
    Event,
    LogEntry,
    PushTarget,
    SequenceConflict,
    StoreError,
    TaskPage,
    TaskQuery,
    TaskRecord,
    TaskStore,
    is_behind,
    select_page,
)

#: How often a waiter looks for writes made by other processes (seconds).
POLL_INTERVAL = 0.05


class ShelveStore(TaskStore):
    """See the module docstring.  ``path`` is the shelf's base file name."""

    def __init__(self, path: str) -> None:
        self.path = os.path.abspath(path)
        directory = os.path.dirname(self.path)
        try:
            os.makedirs(directory, exist_ok=True)
            self._lock_path = self.path + ".lock"
            with self._shelf(write=True):
                pass
        except OSError as exc:
            raise StoreError(f"cannot open shelve store at {self.path}: {exc}") from exc
        self._notifier = Notifier()

    @contextlib.contextmanager
    def _shelf(self, write: bool = False) -> Iterator[shelve_module.Shelf]:
        with open(self._lock_path, "a+b") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX if write else fcntl.LOCK_SH)
            try:
                db: Any = dbm.dumb.open(self.path, "c" if write else "r")
                shelf: shelve_module.Shelf = shelve_module.Shelf(db, protocol=4)
                try:
                    yield shelf
                finally:
                    shelf.close()
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)

    def _version(self) -> tuple:
        try:
            st = os.stat(self.path + ".dir")
            return (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            return ()

    def create(self, record: TaskRecord, first_event: Event) -> None:
        task_id = record.task.id
        with self._shelf(write=True) as db:
            if "t:" + task_id in db:
                raise SequenceConflict(task_id)
            db[f"e:{task_id}:{record.seq}"] = first_event
            db["t:" + task_id] = record
        self._notifier.notify(task_id)

    def load(self, task_id: str) -> Optional[TaskRecord]:
        with self._shelf() as db:
            return db.get("t:" + task_id)

    def append(self, task_id: str, expected_seq: int, events: List[Event], task: Task) -> int:
        with self._shelf(write=True) as db:
            record: TaskRecord = db["t:" + task_id]
            if record.seq != expected_seq:
                raise SequenceConflict(task_id)
            seq = expected_seq
            for event in events:
                seq += 1
                db[f"e:{task_id}:{seq}"] = event
            db["t:" + task_id] = TaskRecord(
                task, seq, record.tenant, record.owner, record.dialect, record.created_at
            )
        self._notifier.notify(task_id)
        return seq

    def read(self, task_id: str, after_seq: int) -> List[LogEntry]:
        with self._shelf() as db:
            record = db.get("t:" + task_id)
            if record is None:
                return []
            seqs = range(after_seq + 1, record.seq + 1)
            return [LogEntry(s, db[f"e:{task_id}:{s}"]) for s in seqs]

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        def passed() -> bool:
            record = self.load(task_id)
            return record is None or record.seq > after_seq or record.state.terminal

        self._notifier.wait_polling(task_id, passed, self._version, timeout, POLL_INTERVAL)

    def list_tasks(self, query: TaskQuery) -> TaskPage:
        with self._shelf() as db:
            records = [db[k] for k in list(db.keys()) if k.startswith("t:")]
        return select_page(records, query)

    def put_push_target(self, task_id: str, target: PushTarget) -> None:
        with self._shelf(write=True) as db:
            targets: Dict[str, PushTarget] = db.get("p:" + task_id, {})
            targets[target.config.id] = target
            db["p:" + task_id] = targets

    def push_targets(self, task_id: str) -> List[PushTarget]:
        with self._shelf() as db:
            return list(db.get("p:" + task_id, {}).values())

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        with self._shelf(write=True) as db:
            configs = db.get("p:" + task_id, {})
            if configs.pop(config_id, None) is not None:
                db["p:" + task_id] = configs

    def record_push_progress(self, task_id: str, config_id: str, delivered_seq: int,
                             failures: int, gave_up: bool) -> None:
        with self._shelf(write=True) as db:
            targets = db.get("p:" + task_id, {})
            target = targets.get(config_id)
            if target is not None:
                target.delivered_seq, target.failures = delivered_seq, failures
                target.gave_up = gave_up
                db["p:" + task_id] = targets

    def push_backlog(self) -> List[str]:
        with self._shelf() as db:
            behind = []
            for key in [k for k in list(db.keys()) if k.startswith("p:")]:
                record: Optional[TaskRecord] = db.get("t:" + key[2:])
                if record is not None and any(is_behind(t, record.seq) for t in db[key].values()):
                    behind.append(key[2:])
            return behind

    def claim(self, key: str, owner: str, ttl: float) -> bool:
        now = time.time()
        with self._shelf(write=True) as db:
            holder, expires = db.get("c:" + key, (owner, 0.0))
            if holder != owner and expires >= now:
                return False
            db["c:" + key] = (owner, now + ttl)
            return True

    def release_claim(self, key: str, owner: str) -> None:
        with self._shelf(write=True) as db:
            if db.get("c:" + key, (None,))[0] == owner:
                del db["c:" + key]

    def acquire_lease(self, task_id: str, owner: str, ttl: float) -> None:
        with self._shelf(write=True) as db:
            db["l:" + task_id] = (owner, time.time() + ttl)

    def renew_leases(self, owner: str, task_ids: List[str], ttl: float) -> None:
        expires = time.time() + ttl
        with self._shelf(write=True) as db:
            for task_id in task_ids:
                if db.get("l:" + task_id, (None,))[0] == owner:
                    db["l:" + task_id] = (owner, expires)

    def release_lease(self, task_id: str, owner: Optional[str]) -> None:
        with self._shelf(write=True) as db:
            lease = db.get("l:" + task_id)
            if lease is not None and (owner is None or lease[0] == owner):
                del db["l:" + task_id]

    def expired_leases(self) -> List[str]:
        now = time.time()
        with self._shelf() as db:
            return [key[2:] for key in list(db.keys())
                    if key.startswith("l:") and db[key][1] < now]

    def purge(self, updated_before: str) -> int:
        with self._shelf(write=True) as db:
            gone = []
            for key in [k for k in list(db.keys()) if k.startswith("t:")]:
                record: TaskRecord = db[key]
                if record.state.terminal and record.updated_at < updated_before:
                    gone.append(record)
            for record in gone:
                task_id = record.task.id
                for seq in range(1, record.seq + 1):
                    db.pop(f"e:{task_id}:{seq}", None)
                for prefix in ("t:", "p:", "l:"):
                    db.pop(prefix + task_id, None)
        return len(gone)
