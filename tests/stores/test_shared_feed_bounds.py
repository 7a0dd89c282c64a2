"""What a task's feed keeps is bounded (stores/shared.py): the
record an attaching follower loaded is let go LOAD_AGE later, and the window of
entries holds at most WINDOW_BYTES of stored text (followers still get every entry
once, in order)."""
from __future__ import annotations

import gc
import threading
import time
import weakref
from typing import Any, Dict, List

import pytest

from a2a_flask.engine.runtime import Runtime
from a2a_flask.protocol.models import Artifact, Part, TaskArtifactUpdateEvent, TaskState
from a2a_flask.stores import shared
from a2a_flask.stores.shared import LOAD_AGE, SharedLog, entry_bytes

from tests.stores.test_shared_log import follow_all, wait_for, write
from tests.stores.test_stores import create, open_store, status_event


def big_chunk(number: int, size: int) -> TaskArtifactUpdateEvent:
    return TaskArtifactUpdateEvent("t1", "ctx", Artifact("a", [Part(text=f"{number:06d}" * size)]),
                                   append=number > 0)


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_the_feed_lets_go_of_its_loaded_record_after_load_age(kind: str, tmp_path: Any) -> None:
    store = open_store(kind, str(tmp_path / "tasks"))
    try:
        create(store, "t1")
        log = SharedLog(store)
        log.join("t1")
        log.join("t1")  # two followers: the task has a feed
        first = log.load("t1")
        assert first is not None and log.load("t1") is first  # shared while fresh
        feed = log._feeds["t1"]
        wait_for(lambda: feed.record is None, "the feed let go of its record",
                 limit=LOAD_AGE + 10)
        again = log.load("t1")
        assert again is not None and feed.record is again  # loaded anew, kept anew
        if kind != "memory":  # (the memory store keeps its own)
            gone = weakref.ref(again.task)
            del first, again
            wait_for(lambda: feed.record is None, "the feed let go again",
                     limit=LOAD_AGE + 10)
            gc.collect()
            assert gone() is None  # nothing else kept the task
        log.leave("t1")
        log.leave("t1")
    finally:
        store.close()


def test_a_dropped_feed_lets_go_of_its_record_at_once(tmp_path: Any) -> None:
    store = open_store("sqlite", str(tmp_path / "tasks"))
    try:
        create(store, "t1")
        log = SharedLog(store)
        log.join("t1")
        log.join("t1")
        assert log.load("t1") is not None
        feed = log._feeds["t1"]
        log.leave("t1")
        assert feed.record is None and log.feeds() == 0
        log.leave("t1")
    finally:
        store.close()


def test_the_window_holds_at_most_window_bytes_and_followers_lose_nothing(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of about 60 KB each with a window of 200 KB: the window keeps the newest
    three; a follower at the head and one that starts far back both get every entry."""
    monkeypatch.setattr(shared, "WINDOW_BYTES", 200_000)
    store = open_store("sqlite", str(tmp_path / "tasks"))
    try:
        create(store, "t1")
        write(store, [status_event("t1", TaskState.WORKING)])
        runtime = Runtime(store, lambda run: None)
        head = store.head("t1")[0]
        results: Dict[int, List[int]] = {}
        threads = follow_all(runtime, 3, {0: head, 1: head, 2: 1}, results)
        wait_for(lambda: runtime.log.feeds() == 1 and len(results) == 3, "followers attached")
        time.sleep(0.2)
        feed = runtime.log._feeds["t1"]
        sizes: List[int] = []
        seen = threading.Event()

        def watch_window() -> None:
            while not seen.is_set():
                window = feed.window
                sizes.append(sum(entry_bytes(e) for e in window))
                time.sleep(0.001)

        watcher = threading.Thread(target=watch_window, daemon=True)
        watcher.start()
        write(store, [big_chunk(n, 10_000) for n in range(12)]
              + [status_event("t1", TaskState.COMPLETED, 2)], pause=0.01)
        for thread in threads:
            thread.join(30)
        seen.set()
        watcher.join(5)
        last = store.head("t1")[0]
        assert results[0] == results[1] == list(range(head + 1, last + 1))
        assert results[2] == list(range(2, last + 1))
        assert max(sizes) <= 200_000 and max(sizes) > 0, max(sizes)
    finally:
        store.close()


def test_an_entry_larger_than_the_whole_window_is_read_from_the_store(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shared, "WINDOW_BYTES", 1_000)
    store = open_store("sqlite", str(tmp_path / "tasks"))
    try:
        create(store, "t1")
        write(store, [status_event("t1", TaskState.WORKING)])
        runtime = Runtime(store, lambda run: None)
        head = store.head("t1")[0]
        results: Dict[int, List[int]] = {}
        threads = follow_all(runtime, 4, {}, results)
        wait_for(lambda: runtime.log.feeds() == 1 and len(results) == 4, "followers attached")
        time.sleep(0.2)
        write(store, [big_chunk(n, 1_000) for n in range(5)]
              + [status_event("t1", TaskState.COMPLETED, 2)], pause=0.01)
        for thread in threads:
            thread.join(30)
        last = store.head("t1")[0]
        assert all(results[i] == list(range(head + 1, last + 1)) for i in range(4)), results
    finally:
        store.close()
