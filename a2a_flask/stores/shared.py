"""Reads of a task's log shared by everyone in this process who follows that task.

A thousand streams of one task, each reading the store for itself, cost the
store a thousand reads per event, and a crowd of readers could take every
pooled connection from the run that writes the task.  :class:`SharedLog`
stands between the followers of a process and its store (docs/internals.rst, invariant 1
holds: the log in the store is still what everyone reads).  A task with one
follower is read as before; from the second on, the task has a *feed*:

* **one wait**: the feed's watcher (a greenlet, or a thread) waits on the store
  for news of the task and wakes the followers; they wait on the feed, each
  with its own timeout, and cost the store nothing while they wait;
* **one read per event**: entries read at the head of the log are kept in a
  window (the newest :data:`WINDOW` of them, of at most :data:`WINDOW_BYTES` of
  stored text) that every follower reads from,
  each at its own position; reads of the same place that run at once are one
  store read; a follower behind the window (a slow reader, a late joiner with
  ``Last-Event-ID``) reads the store itself, and holds no memory of others;
* **one load, one head check** for followers that ask at once; a crowd
  attaching to a task shares a snapshot at most :data:`LOAD_AGE` old (and the
  feed lets go of it once it is that old: a task may hold megabytes), and the
  head a follower checks now and then (is the task still there?) is at most
  :data:`HEAD_AGE` old.

At the head of the log the feed reads the store only when a wake-up may have
brought news (or a head read showed the store ahead of it): a follower that
finds nothing goes on to wait, and the watcher's store wait (which compares
sequence numbers) returns at once if anything was appended meanwhile, so
nothing is missed.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Dict, Hashable, Iterator, List, Optional, Sequence, Tuple

from ..concurrency import Worker
from ..protocol.errors import StoreUnavailable
from ..protocol.events import LogEntry
from ..protocol.models import TaskState
from .base import TaskRecord, TaskStore

#: Entries a feed keeps from the head of its task's log; a follower further behind
#: reads the store itself.
WINDOW = 256
#: Most bytes of stored text (what the store read: a 1.0 StreamResponse's JSON) the
#: entries of one feed's window hold together; the oldest go first, and an entry
#: larger than this alone is not kept (its followers read it from the store, those
#: asking at once in one read).  Entries of a store in memory are the store's own
#: objects and count nothing here.
WINDOW_BYTES = 8 * 1024 * 1024
#: The longest a follower waits for another's store call to return (seconds): the
#: store's own timeouts bound that call long before.
FLIGHT_LIMIT = 60.0
#: The longest one store wait of a feed's watcher (seconds): it looks whether the
#: feed still has followers at least this often.
WATCH_WAIT = 5.0
#: How old a head a follower's periodic check may get (seconds).
HEAD_AGE = 1.0
#: How old a record a follower attaching to a task with a feed may get (seconds): it
#: is the stream's opening snapshot, and the follower reads the log after it.
LOAD_AGE = 0.5

Head = Optional[Tuple[int, TaskState]]


def entry_bytes(entry: LogEntry) -> int:
    """What an entry costs a window: the length of the text its store read it from
    (0 for an entry of a store in memory, which holds the event itself)."""
    size = getattr(entry, "stored_bytes", 0)
    return size if isinstance(size, int) else 0


def wait_without_spinning(wait: Callable[[str, int, float], None], task_id: str, seq: int,
                          timeout: float, idle_at: Optional[int]) -> Optional[int]:
    """``wait(task_id, seq, timeout)`` for news after ``seq``, unless the last wait at
    this ``seq`` came back early with nothing new: a store whose wait cannot block
    (a closed log, a broken backend) would then make the caller's loop spin without
    yielding, so it sleeps a little instead.  Returns the ``idle_at`` to pass next
    time (the caller re-reads between calls)."""
    if idle_at == seq:
        time.sleep(min(timeout, 0.05))
        return None
    started = time.monotonic()
    wait(task_id, seq, timeout)
    return seq if time.monotonic() - started < timeout / 2 else None


class _Flight:
    """One store call that several callers wait for."""

    __slots__ = ("done", "result", "error")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.result: Any = None
        self.error: Optional[BaseException] = None


class _Flights:
    """Calls of the same key made at once run once; everyone gets that call's answer."""

    def __init__(self) -> None:
        self._flying: Dict[Hashable, _Flight] = {}
        self._lock = threading.Lock()

    def call(self, key: Hashable, call: Callable[[], Any]) -> Any:
        with self._lock:
            flight = self._flying.get(key)
            leads = flight is None
            if flight is None:
                flight = self._flying[key] = _Flight()
        if not leads:
            if not flight.done.wait(FLIGHT_LIMIT):
                raise StoreUnavailable()
            if flight.error is not None:
                raise flight.error
            return flight.result
        try:
            flight.result = call()
            return flight.result
        except BaseException as exc:
            flight.error = exc
            raise
        finally:
            with self._lock:
                del self._flying[key]
            flight.done.set()


class _Feed:
    """What the followers of one task share (see the module docstring)."""

    __slots__ = ("window", "top", "stale", "wakes", "seen", "checked", "waiting_at", "head",
                 "head_at", "record", "record_at", "forgetting", "dropped", "news")

    def __init__(self) -> None:
        #: Entries of the log from its head backwards, contiguous, ending at ``top``
        #: (empty when its newest entry alone was larger than WINDOW_BYTES); replaced,
        #: never changed in place, so a follower's look at it is consistent.
        self.window: List[LogEntry] = []
        #: The last sequence number the feed read (-1: none yet).
        self.top = -1
        #: Whether the store may hold entries after the window that the feed has not
        #: read: set by each wake-up, cleared by a read that found all there was.
        self.stale = True
        #: Wake-ups so far (a read that overlapped one cannot vouch for having seen it).
        self.wakes = 0
        #: The highest sequence number a head read saw.
        self.seen = -1
        #: The furthest position a read found nothing after (a follower ahead of the window).
        self.checked = -1
        #: The furthest position of a follower that waited: the watcher waits past it.
        self.waiting_at = -1
        #: The head a follower's periodic check last read, and when (monotonic).
        self.head: Head = None
        self.head_at = 0.0
        #: The record the last attaching follower loaded, and when (monotonic): let go
        #: of LOAD_AGE later (see :meth:`keep_record`).
        self.record: Optional[TaskRecord] = None
        self.record_at = 0.0
        #: Whether a worker is due to let go of the record.
        self.forgetting = False
        #: Set when the last but one follower left: the watcher stops.
        self.dropped = False
        #: Where the followers wait for the watcher's news.
        self.news = threading.Condition()

    @property
    def high(self) -> int:
        """The last sequence number the feed read (-1: none yet)."""
        return self.top

    def behind(self) -> bool:
        """Whether the store may hold entries the window has not got."""
        return self.stale or self.seen > max(self.high, self.checked)

    def after(self, seq: int) -> Optional[List[LogEntry]]:
        """The window's entries after ``seq``; None at or past its end, or before its start."""
        window = self.window
        if not window or seq >= window[-1].seq or seq < window[0].seq - 1:
            return None
        return window[seq - window[0].seq + 1:]

    def extend(self, after_seq: int, entries: Sequence[LogEntry], whole: bool,
               wakes: int) -> None:
        """Keep what a store read after ``after_seq`` found: all there was if ``whole``,
        as of ``wakes`` wake-ups."""
        high = self.high
        if after_seq < high:
            return  # a follower behind the feed read an older stretch: nothing new here
        if entries:
            kept = self.window + list(entries) if after_seq == high else list(entries)
            self.window = _newest(kept)
            self.top = kept[-1].seq
        elif whole and after_seq > self.checked:
            self.checked = after_seq
        if whole and wakes == self.wakes:
            self.stale = False

    def keep_record(self, record: TaskRecord) -> None:
        """Share ``record`` with followers attaching in the next LOAD_AGE seconds, and
        let go of it then (one worker per feed at a time)."""
        self.record, self.record_at = record, time.monotonic()
        if not self.forgetting:
            self.forgetting = True
            Worker(self._forget_record, name="a2a-feed-record")

    def _forget_record(self) -> None:
        try:
            while self.record is not None and not self.dropped:
                left = self.record_at + LOAD_AGE - time.monotonic()
                if left <= 0:
                    break
                time.sleep(left)  # cooperative under gevent (patched)
        finally:
            self.record = None
            self.forgetting = False

    def watch(self, store: TaskStore, task_id: str) -> None:
        """The watcher: wait on the store past what the feed and its followers have
        seen, and wake the followers when something may have come; until dropped."""
        idle_at: Optional[int] = None
        while not self.dropped and not store.closed:
            seq = max(self.high, self.seen, self.checked, self.waiting_at)
            try:
                idle_at = wait_without_spinning(store.wait, task_id, seq, WATCH_WAIT, idle_at)
            except Exception:  # the store's outage is the followers' to hear about
                time.sleep(min(WATCH_WAIT, 0.5))
                idle_at = None
            news = idle_at is not None  # back early: something was written
            with self.news:
                if news:
                    self.stale = True
                    self.wakes += 1
                self.news.notify_all()


def _newest(entries: List[LogEntry]) -> List[LogEntry]:
    """The newest of ``entries`` a window keeps: at most WINDOW of them, together of at
    most WINDOW_BYTES."""
    kept = entries[-WINDOW:]
    total = 0
    for index in range(len(kept) - 1, -1, -1):
        total += entry_bytes(kept[index])
        if total > WINDOW_BYTES:
            return kept[index + 1:]
    return kept


class SharedLog:
    """The reads of :class:`~.base.TaskStore` that followers make (``read``,
    ``wait``, ``load`` and their periodic head checks), shared per task while two
    or more follow it (see the module docstring)."""

    def __init__(self, store: TaskStore) -> None:
        self.store = store
        #: Followers per followed task in this process.
        self._followers: Dict[str, int] = {}
        #: A feed per task with two followers or more (one reads the store itself, as
        #: it would without this: a held stream costs no more memory).
        self._feeds: Dict[str, _Feed] = {}
        self._lock = threading.Lock()
        self._flights = _Flights()

    def join(self, task_id: str) -> None:
        """Count the caller among the task's followers (until it calls :meth:`leave`)."""
        with self._lock:
            count = self._followers[task_id] = self._followers.get(task_id, 0) + 1
            if count != 2:
                return
            feed = self._feeds[task_id] = _Feed()
        Worker(lambda: feed.watch(self.store, task_id), name=f"a2a-feed-{task_id}")

    def leave(self, task_id: str) -> None:
        """The caller no longer follows the task; a follower left alone reads the
        store itself again."""
        with self._lock:
            count = self._followers.get(task_id, 1) - 1
            if count > 0:
                self._followers[task_id] = count
            else:
                self._followers.pop(task_id, None)
            feed = self._feeds.pop(task_id, None) if count < 2 else None
        if feed is not None:
            with feed.news:
                feed.dropped = True
                feed.record = None  # now (its worker ends when it next wakes)
                feed.news.notify_all()  # whoever waits on it looks again, on its own

    @contextlib.contextmanager
    def following(self, task_id: str) -> Iterator[None]:
        """Count the caller among the task's followers for the block."""
        self.join(task_id)
        try:
            yield
        finally:
            self.leave(task_id)

    def feeds(self) -> int:
        """How many tasks have a feed now (what this holds)."""
        return len(self._feeds)

    def followed(self) -> int:
        """How many tasks have a follower now."""
        return len(self._followers)

    # ------------------------------------------------------------ reads

    def read(self, task_id: str, after_seq: int) -> Sequence[LogEntry]:
        """Entries after ``after_seq`` (a slice, as :meth:`TaskStore.read`)."""
        feed = self._feeds.get(task_id)
        if feed is None:
            return self.store.read(task_id, after_seq)
        held = feed.after(after_seq)
        if held is not None:
            return held
        if after_seq >= feed.high and not feed.behind():
            return []  # nothing since the last look: the wait will say if that changed

        def read() -> Sequence[LogEntry]:
            wakes = feed.wakes
            # Decoded once, for every follower: a store's slice decodes per look.
            entries = list(self.store.read(task_id, after_seq))
            feed.extend(after_seq, entries, len(entries) < self.store.read_slice, wakes)
            return entries

        entries: Sequence[LogEntry] = self._flights.call(("read", task_id, after_seq), read)
        return entries

    def entries(self, task_id: str, after_seq: int,
                through: Optional[int] = None) -> Iterator[LogEntry]:
        """Every entry after ``after_seq`` (up to ``through``), as :meth:`TaskStore.entries`."""
        while through is None or after_seq < through:
            entries = self.read(task_id, after_seq)
            if not entries:
                return
            for entry in entries:
                if through is not None and entry.seq > through:
                    return
                yield entry
                after_seq = entry.seq

    def head(self, task_id: str) -> Head:
        """The task's ``(seq, state)``, None if it does not exist; always read now
        (a caller may just have written: an answer read before that would be wrong)."""
        found = self.store.head(task_id)
        feed = self._feeds.get(task_id)
        if feed is not None and found is not None and found[0] > feed.seen:
            feed.seen = found[0]  # the store is ahead of the window: the next read looks
        return found

    def recent_head(self, task_id: str) -> Head:
        """The head for a follower's periodic check (is the task still there, has it
        ended?): at most :data:`HEAD_AGE` old where the task has a feed."""
        feed = self._feeds.get(task_id)
        if feed is None:
            return self.head(task_id)
        if feed.head is not None and time.monotonic() - feed.head_at < HEAD_AGE:
            return feed.head

        def head() -> Head:
            found = self.head(task_id)
            if found is not None:  # a task not found is asked again: it may be new
                feed.head, feed.head_at = found, time.monotonic()
            return found

        found: Head = self._flights.call(("head", task_id), head)
        return found

    def load(self, task_id: str, at_least: int = 0) -> Optional[TaskRecord]:
        """The task's record for a follower attaching: callers asking at once share
        one load, and where the task has a feed one of at most :data:`LOAD_AGE`, so
        it may be a little older than the call (the follower reads the log after it).
        With ``at_least``, a record of that sequence number or later (a caller that
        read the log that far: a long-poll's answer)."""
        feed = self._feeds.get(task_id)
        if feed is not None and feed.record is not None and \
                time.monotonic() - feed.record_at < LOAD_AGE and feed.record.seq >= at_least:
            return feed.record

        def load() -> Optional[TaskRecord]:
            found = self.store.load(task_id)
            if feed is not None and found is not None and not feed.dropped:
                feed.keep_record(found)
            return found

        record: Optional[TaskRecord] = self._flights.call(("load", task_id), load)
        if record is not None and record.seq < at_least:
            # A load that was under way before the log got that far: the next one
            # starts after this caller read it, so it finds it.
            record = self._flights.call(("load", task_id), load)
        return record

    # ------------------------------------------------------------ waiting

    def wait(self, task_id: str, after_seq: int, timeout: float) -> None:
        """Block until the log may hold an entry after ``after_seq`` (or ``timeout``)."""
        feed = self._feeds.get(task_id)
        if feed is None:
            self.store.wait(task_id, after_seq, timeout)
            return
        with feed.news:
            if feed.high > after_seq or feed.behind() or feed.dropped:
                return  # there is more to read first (or the feed is gone)
            if after_seq > feed.waiting_at:
                feed.waiting_at = after_seq
            feed.news.wait(timeout)
