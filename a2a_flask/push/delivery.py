"""Webhook delivery: every event of a task, to each of its webhooks, in order, at least once.

The task's event log is the outbox.  Each webhook is a
:class:`~a2a_flask.stores.base.PushTarget` in the store with a cursor (the
last log entry it got).  A *drain* of a task claims the task's deliveries in
the store (one process at a time, so each webhook sees its events in order),
sends each webhook what it has not had yet, moves the cursors, and follows
the log while the task runs.  Drains start when a webhook is registered or a
task is continued, and from the keeper's sweep, which also resumes what a
stopped worker left behind (its claim expires; the cursors are in the store).

A send that fails is retried with exponential backoff and jitter, without
holding up the task's other webhooks; after ``max_attempts`` failures in a row
the webhook is given up on (reported by log and signal; registering it again
resets it).  A crash between a send and its cursor update means that event is
sent again: receivers dedupe by task id and event.

A 0.3 webhook gets the whole task, not the event, so one push stands for
every event since its last: it gets the task as it is when sent (the stored
record, whose history the runtime cut to ``A2A_MAX_HISTORY``), and its cursor
moves to the last event that record holds.  A push per event would cost the
task's size per event, O(n^2) bytes for a stream of n chunks; so a push also
waits until the events it stands for have paid for it (see
:data:`TASK_PUSH_RATIO`), except when the task settled (terminal, or waiting
for input or auth), which is always pushed at once.
"""
from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Mapping, Optional, Set

from .. import signals
from ..observe.context import scoped, shown_url
from ..concurrency import Worker
from ..protocol.errors import StoreUnavailable
from ..protocol.jsontext import json_text, stream_response_text
from ..protocol.models import Message, Role, Task
from ..stores.base import LogEntry, PushTarget, TaskStore, is_behind
from ..stores.grace import ride_out
from ..stores.shared import SharedLog
from .guard import UnsafeWebhookError
from .transport import Transport, WebhookDeliveryError, WebhookResponse

log = logging.getLogger("a2a_flask.push")

#: How long a drain sleeps when the store's wait returned early with no new event
#: (seconds): a store whose wait cannot block is polled, not spun on.
IDLE_POLL = 0.5

#: How many tasks' agents a dispatcher remembers from its sweeps (a task found again
#: past it is loaded again).
MAX_KNOWN_TASKS = 10_000

#: The longest ``Retry-After`` a receiver gets honoured (seconds); it may exceed the
#: backoff's own ceiling: the receiver knows when it can take the push.
MAX_RETRY_AFTER = 3600.0

#: ``(log entry, None)`` -> the JSON body of one event's push, or None to skip it;
#: for dialects that push whole tasks (0.3), ``(None, latest task)`` -> the body.
PayloadRenderer = Callable[[Any, Optional[Task]], Optional[Any]]

#: A push to a 0.3 webhook (the whole task) waits until the events it stands for,
#: counted as a 1.0 webhook is sent them (their StreamResponse text) and times
#: this, add up to the size of the webhook's last push.  So a 0.3 webhook gets at
#: most about this many times the bytes a 1.0 webhook gets for the same events,
#: plus the pushes of settled states (one per turn of the task); a short task is
#: still pushed event by event, a long stream less often as its task grows.
TASK_PUSH_RATIO = 2


@dataclass
class RetryPolicy:
    """How often and how patiently a failing webhook is retried."""

    #: Failed attempts in a row after which a webhook is given up on.
    max_attempts: int = 8
    #: The first retry waits about this long (seconds); each next one twice as long...
    base_delay: float = 1.0
    #: ...up to this.
    max_delay: float = 300.0

    def delay(self, failures: int) -> float:
        """Seconds before the next attempt: exponential, half of it random (so that
        webhooks that failed together do not retry together)."""
        ceiling: float = min(self.max_delay, self.base_delay * 2 ** max(0, failures - 1))
        return ceiling / 2 + random.uniform(0, ceiling / 2)


@dataclass
class _Backlog:
    """What one drain knows of a whole-task (0.3) webhook's unsent events."""

    #: The log is accounted for up to this entry.
    counted: int
    #: The cursor this drain last saw the webhook at (another value: it was registered again).
    cursor: int
    #: Bytes its next pushes may take: earned by the events they stand for, spent by pushes.
    credit: int = 0
    #: Whether an event after its cursor is one a push shows (user turns are not).
    news: bool = False
    #: The size of its last push: about what the next will cost.
    last_size: int = 0

    def ready(self, settled: bool) -> bool:
        """Whether a push (or, with no news, a cursor move) is due now."""
        return not self.news or settled or self.credit >= self.last_size

    def spent(self, size: int, forced: bool) -> None:
        """A push of ``size`` bytes went out; a settled state's (``forced``) leaves no debt."""
        self.credit -= size
        if forced:
            self.credit = max(self.credit, 0)
        self.last_size, self.news = size, False


class _Claim:
    """A drain's claim on a task's deliveries (one process sends them at a time)."""

    def __init__(self, store: TaskStore, key: str, owner: str, ttl: float) -> None:
        self.store, self.key, self.owner, self.ttl = store, key, owner, ttl
        self.renewed = time.monotonic()

    def renew(self) -> bool:
        """Claim it for another ``ttl``; False if someone else holds it now."""
        self.renewed = time.monotonic()
        return self.store.claim(self.key, self.owner, self.ttl)

    def kept(self) -> bool:
        """For a long pass: renew once a third of its lifetime passed; False if lost."""
        return time.monotonic() - self.renewed <= self.ttl / 3 or self.renew()


def whole_task(target: PushTarget) -> bool:
    """Whether a webhook is pushed the whole task rather than each event (0.3)."""
    return target.dialect == "0.3"


class PushDispatcher:
    """Delivers the webhooks of one agent (see the module docstring).

    :param renderer_for: dialect version -> a factory of payload renderers (one per drain).
    :param owner: this process's name in claims (the runtime's keeper owner).
    :param sender: what signals are sent with (the :class:`~a2a_flask.A2A` object).
    :param signer: signs bodies (``X-A2A-Notification-Signature``), or None.
    :param scope: the agent's store scope: a sweep delivers only its tasks' webhooks
        (another agent on the store delivers, and signs, its own); None: every task's.
    """

    def __init__(self, store: TaskStore, transport: Transport, *,
                 renderer_for: Callable[[str], Callable[[], PayloadRenderer]],
                 owner: Callable[[], str], retry: Optional[RetryPolicy] = None,
                 claim_ttl: float = 30.0, sweep_interval: float = 2.0, signer: Any = None,
                 sender: Any = None, log: Optional[SharedLog] = None,
                 store_grace: float = 0.0, scope: Optional[str] = None) -> None:
        self.store = store
        self.scope = scope
        #: Tasks a sweep found and whether they are this agent's (a task never changes
        #: agent), the oldest dropped beyond MAX_KNOWN_TASKS.
        self._known: "OrderedDict[str, bool]" = OrderedDict()
        #: Seconds a cursor write rides out a store outage (``A2A_STORE_GRACE``): a cursor
        #: lost would send its webhook the event again.
        self.store_grace = store_grace
        #: The task logs as this process's followers read them (a drain is one of them).
        self.log = log or SharedLog(store)
        self.transport = transport
        self.renderer_for = renderer_for
        self.owner = owner
        self.retry = retry or RetryPolicy()
        self.claim_ttl = claim_ttl
        self.sweep_interval = sweep_interval
        self.signer = signer
        self.sender = sender
        self._draining: Set[str] = set()
        self._lock = threading.Lock()
        self._last_sweep = 0.0

    # ------------------------------------------------------------ starting drains

    def kick(self, task_id: str) -> None:
        """Deliver what the task's webhooks have not had (in the background)."""
        with self._lock:
            if task_id in self._draining or self.store.closed:
                return
            self._draining.add(task_id)
        Worker(scoped(lambda: self._drain(task_id), task_id), name=f"a2a-push-{task_id}")

    def sweep(self) -> None:
        """Start drains for every task with undelivered events (a keeper chore)."""
        now = time.monotonic()
        if now - self._last_sweep < self.sweep_interval:
            return
        self._last_sweep = now
        for task_id in self.store.push_backlog():
            if self._ours(task_id):
                self.kick(task_id)

    def _ours(self, task_id: str) -> bool:
        """Whether ``task_id`` is this agent's (the service kicks only tasks it checked)."""
        if self.scope is None:
            return True
        ours = self._known.get(task_id)
        if ours is None:
            record = self.store.load(task_id)
            if record is None:
                return False  # gone: nothing to deliver
            ours = self._known[task_id] = record.scope == self.scope
            if len(self._known) > MAX_KNOWN_TASKS:
                self._known.popitem(last=False)
        return ours

    # ------------------------------------------------------------ one task

    def _drain(self, task_id: str) -> None:
        key = f"push:{task_id}"
        try:
            while not self.store.closed:
                owner = self.owner()
                if not self.store.claim(key, owner, self.claim_ttl):
                    return  # another process delivers this task's events
                try:
                    self._deliver(task_id, key, owner)
                finally:
                    if not self.store.closed:
                        self.store.release_claim(key, owner)
                # Events written between our last look and the release would wait
                # for the sweep: look once more now that the claim is free.
                if not self._behind(task_id):
                    return
        except StoreUnavailable:
            pass  # the store logged its outage; the sweep starts this task again after it
        except Exception:  # a store hiccup: the sweep starts this task again
            log.exception("push delivery for task %s stopped; it resumes on the next sweep",
                          task_id)
        finally:
            with self._lock:
                self._draining.discard(task_id)

    def _behind(self, task_id: str) -> bool:
        head = self.store.head(task_id)
        return head is not None and any(
            is_behind(t, head[0]) for t in self.store.push_targets(task_id))

    def _deliver(self, task_id: str, key: str, owner: str) -> None:
        with self.log.following(task_id):
            self._deliver_following(task_id, key, owner)

    def _deliver_following(self, task_id: str, key: str, owner: str) -> None:
        renderers: Dict[str, PayloadRenderer] = {}
        backlogs: Dict[str, _Backlog] = {}  # whole-task webhooks: config id -> backlog
        retry_at: Dict[str, float] = {}  # config id -> when its next attempt is due
        idle_at: Optional[int] = None  # the seq at which the last wait returned with no news
        # The caller holds the claim; each round ends by renewing it.
        claim = _Claim(self.store, key, owner, self.claim_ttl)
        while not self.store.closed:
            # The head is all a round needs: a load would fold a long stream's
            # recent chunks once per round.
            head = self.log.head(task_id)
            targets = [t for t in self.store.push_targets(task_id) if not t.gave_up]
            if head is None or not targets:
                return
            seq, state = head
            tasked = [t for t in targets if whole_task(t)]
            if tasked:
                self._account(task_id, seq, tasked, backlogs)
            # A whole-task webhook whose push has not been paid for yet waits for
            # more events, as one that is caught up does.
            pending = [t for t in targets if t.delivered_seq < seq and (
                not whole_task(t) or backlogs[t.config.id].ready(state.settled))]
            now = time.monotonic()
            due = [t for t in pending if retry_at.get(t.config.id, 0.0) <= now]
            if due:
                events = [t for t in due if not whole_task(t)]
                if events:
                    self._deliver_entries(task_id, seq, events, renderers, retry_at, claim)
                tasks = [t for t in due if whole_task(t)]
                if tasks:
                    self._deliver_tasks(task_id, seq, state.settled, tasks, renderers,
                                        backlogs, retry_at, claim)
                idle_at = None
            elif not pending and state.settled:
                return  # all caught up; a continuation starts a new drain
            else:
                # Wait for new events, or for the next retry.
                wait = self.claim_ttl / 3
                if pending:
                    wait = min(wait, min(retry_at[t.config.id] for t in pending) - now)
                wait = max(wait, 0.01)
                if state.terminal or idle_at == seq:
                    # No event can come (the log is closed), or the store's wait
                    # returned early without one: it would return at once again,
                    # and this loop would spin without ever yielding.  Sleep.
                    time.sleep(wait if state.terminal else min(wait, IDLE_POLL))
                    idle_at = None
                else:
                    started = time.monotonic()
                    self.log.wait(task_id, seq, wait)
                    if time.monotonic() - started < wait / 2:
                        idle_at = seq  # news, or an early return: the next round tells
            if not claim.renew():
                return  # we stalled past the claim; the new holder carries on

    def _renderer(self, target: PushTarget, renderers: Dict[str, PayloadRenderer]
                  ) -> PayloadRenderer:
        renderer = renderers.get(target.config.id)
        if renderer is None:
            renderer = renderers[target.config.id] = self.renderer_for(target.dialect)()
        return renderer

    def _deliver_entries(self, task_id: str, seq: int, targets: List[PushTarget],
                         renderers: Dict[str, PayloadRenderer], retry_at: Dict[str, float],
                         claim: _Claim) -> None:
        """One pass over the log from the earliest cursor up to ``seq`` (the head
        the round saw, so that events written meanwhile wait for a round that
        looks at the targets again): each target gets its entries in order until
        one fails.

        A long pass renews the claim as it goes and stops if it was lost, so that
        two processes never send one task's events.
        """
        active = list(targets)
        for entry in self.log.entries(task_id, min(t.delivered_seq for t in targets), seq):
            if self.store.closed:
                return  # the app shut down: no more sends (nor signals) from it
            for target in list(active):
                if target.delivered_seq >= entry.seq:
                    continue
                if not claim.kept():
                    return
                render = functools.partial(_event_body, entry, self._renderer(target, renderers))
                if self._send(task_id, target, entry.seq, render, retry_at) is None:
                    active.remove(target)  # its later events wait for the retry
            if not active:
                return

    def _account(self, task_id: str, seq: int, targets: List[PushTarget],
                 backlogs: Dict[str, _Backlog]) -> None:
        """Credit whole-task webhooks with the log entries up to ``seq`` that this
        drain has not counted yet (each entry is read once per drain)."""
        for target in targets:
            backlog = backlogs.get(target.config.id)
            if backlog is None or backlog.cursor != target.delivered_seq:
                # New to this drain, or registered again (its cursor was reset).
                backlogs[target.config.id] = _Backlog(target.delivered_seq,
                                                      target.delivered_seq)
        start = min(backlogs[t.config.id].counted for t in targets)
        if start >= seq:
            return
        for entry in self.log.entries(task_id, start, seq):
            size: Optional[int] = None
            for target in targets:
                backlog = backlogs[target.config.id]
                if entry.seq <= backlog.counted:
                    continue
                backlog.counted = entry.seq
                if not _shown(entry):
                    continue
                if size is None:
                    size = len(entry.stream_response or stream_response_text(entry.event))
                backlog.credit += TASK_PUSH_RATIO * size
                # Entries a push already covered (it sent a record newer than the
                # head its round saw) earn credit but ask for no push.
                backlog.news = backlog.news or entry.seq > target.delivered_seq

    def _deliver_tasks(self, task_id: str, seq: int, settled: bool, targets: List[PushTarget],
                       renderers: Dict[str, PayloadRenderer], backlogs: Dict[str, _Backlog],
                       retry_at: Dict[str, float], claim: _Claim) -> None:
        """Push whole-task webhooks the task as it is now: one push for all the
        events since each one's cursor, which moves to the record's last event."""
        record = self.store.load(task_id)
        if record is None:
            return  # deleted meanwhile: the next round finds no head
        for target in targets:
            if self.store.closed or not claim.kept():
                return
            backlog = backlogs[target.config.id]
            if not backlog.news:
                self._advance(task_id, target, seq)  # only user turns: nothing to show
            else:
                renderer = self._renderer(target, renderers)
                render = functools.partial(_task_body, record.task, renderer)
                size = self._send(task_id, target, record.seq, render, retry_at)
                if size is not None:
                    backlog.spent(size, forced=settled)
            backlog.cursor = target.delivered_seq

    def _send(self, task_id: str, target: PushTarget, seq: int,
              render: Callable[[], Optional[bytes]], retry_at: Dict[str, float]
              ) -> Optional[int]:
        """Send one push, standing for the log up to ``seq``, to one webhook; move
        its cursor.  The bytes sent (0 if the webhook gets nothing for these
        events), or None if it must wait.

        Whatever goes wrong between rendering and the answer (a refused URL, a
        network error, a token the HTTP library will not put in a header) is a
        failure of this webhook alone: it is retried and, in the end, given up
        on; the task's other webhooks carry on.  Store errors are not caught here.
        """
        attempt = target.failures + 1
        status: Optional[int] = None
        asked: Optional[float] = None  # the receiver's Retry-After
        outcome: Optional[WebhookResponse] = None
        body: Optional[bytes] = None
        try:
            body = render()
            if body is not None:
                outcome = self.transport.post(target.config.url, body,
                                              self._headers(target, task_id, body))
                status = outcome.status
        except (UnsafeWebhookError, WebhookDeliveryError) as exc:
            # "webhook URL refused: ..." (DNS now says a private address), timeouts, resets
            error = str(exc)
        except Exception as exc:  # a bad value in this target's config, or a bug
            # The message may quote a header value (a token): the type only, the
            # rest at debug level.
            error = f"{type(exc).__name__} while sending"
            log.debug("webhook %s of task %s failed", shown_url(target.config.url), task_id,
                      exc_info=True)
        else:
            if body is None or outcome is None:  # nothing to send for these events
                self._advance(task_id, target, seq)
                return 0
            if 200 <= outcome.status < 300:
                self._sent(task_id, target, seq, outcome.status, attempt, outcome.elapsed)
                return len(body)
            error = f"HTTP {outcome.status} {outcome.reason}".strip()
            if 300 <= outcome.status < 400:
                error += " (redirects are not followed)"
            asked = outcome.retry_after
        self._failed(task_id, target, seq, status, attempt, error, retry_at, asked)
        return None

    def _headers(self, target: PushTarget, task_id: str, body: bytes) -> Mapping[str, str]:
        config = target.config
        headers = {"Content-Type": "application/a2a+json" if target.dialect == "1.0"
                   else "application/json"}
        if target.dialect == "1.0":
            headers["A2A-Version"] = "1.0"
        auth = config.authentication
        if auth is not None and auth.scheme and auth.credentials:
            headers["Authorization"] = f"{auth.scheme} {auth.credentials}"
        if config.token:
            headers["X-A2A-Notification-Token"] = config.token
        if self.signer is not None:
            headers["X-A2A-Notification-Signature"] = self.signer.sign(body, task_id=task_id)
        return headers

    # ------------------------------------------------------------ outcomes

    def _advance(self, task_id: str, target: PushTarget, seq: int) -> None:
        target.delivered_seq, target.failures = seq, 0
        ride_out(lambda: self.store.record_push_progress(task_id, target.config.id, seq, 0,
                                                         False), self.store_grace)

    def _sent(self, task_id: str, target: PushTarget, seq: int, status: int, attempt: int,
              elapsed: float) -> None:
        url = shown_url(target.config.url)
        if target.failures:
            log.info("webhook %s of task %s recovered after %d failed attempts",
                     url, task_id, target.failures)
        log.debug("pushed event %d of task %s to %s: HTTP %d in %.3fs",
                  seq, task_id, url, status, elapsed)
        self._advance(task_id, target, seq)
        signals.send(signals.push_sent, self.sender, task_id=task_id, config_id=target.config.id,
                               url=target.config.url, seq=seq, status=status, attempt=attempt)

    def _failed(self, task_id: str, target: PushTarget, seq: int, status: Optional[int],
                attempt: int, error: str, retry_at: Dict[str, float],
                retry_after: Optional[float] = None) -> None:
        url = shown_url(target.config.url)
        target.failures = attempt
        target.gave_up = attempt >= self.retry.max_attempts
        ride_out(lambda: self.store.record_push_progress(
            task_id, target.config.id, target.delivered_seq, target.failures, target.gave_up),
            self.store_grace)
        if target.gave_up:
            log.error("giving up on webhook %s (config %s) of task %s after %d failed attempts "
                      "in a row; last error: %s. Fix the receiver, then register the config "
                      "again to resume.", url, target.config.id, task_id, attempt, error)
        else:
            delay = self.retry.delay(attempt)
            if retry_after is not None:  # the receiver said when: not sooner (within reason)
                delay = max(delay, min(retry_after, MAX_RETRY_AFTER))
            retry_at[target.config.id] = time.monotonic() + delay
            log.warning("webhook %s of task %s: event %d, attempt %d/%d failed (%s); "
                        "retrying in %.1fs", url, task_id, seq, attempt,
                        self.retry.max_attempts, error, delay)
        signals.send(signals.push_failed, self.sender, task_id=task_id, config_id=target.config.id,
                                 url=target.config.url, seq=seq, status=status, attempt=attempt,
                                 error=error, gave_up=target.gave_up)


def _shown(entry: LogEntry) -> bool:
    """Whether webhooks hear of a log entry: not of a user's turn (as streams do not)."""
    return entry.chunk or not (isinstance(entry.event, Message) and entry.event.role is Role.USER)


def _encoded(payload: Any) -> Optional[bytes]:
    return None if payload is None else json_text(payload).encode()


def _event_body(entry: LogEntry, renderer: PayloadRenderer) -> Optional[bytes]:
    """The body of one event's push, or None when the webhook gets nothing for it."""
    return _encoded(renderer(entry, None)) if _shown(entry) else None


def _task_body(task: Task, renderer: PayloadRenderer) -> Optional[bytes]:
    """The body of a whole-task push."""
    return _encoded(renderer(None, task))
