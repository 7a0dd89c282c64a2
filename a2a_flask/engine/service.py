"""The A2A operations, protocol-neutral: models in, models (or event iterators) out.

Bindings and dialects call these after parsing; nothing here knows JSON-RPC,
REST or protocol versions.  Validation that needs the agent's configuration
(capabilities, tenants, owners, the state of a task) happens here, before any
stream starts, so that such errors go back as plain error responses.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Optional, Union

from ..concurrency import cooperate
from ..protocol.calls import (CONTROL_CHARACTER, MAX_TENANT_LENGTH, CallContext, ServedItem,
                              StreamContext, StreamItem, Wait)
from ..protocol.errors import (
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    ResourceExhaustedError,
    TaskNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
    WorkerStoppingError,
)
from ..protocol.models import (
    AgentCard,
    AgentInterface,
    CancelTaskRequest,
    Empty,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    Task,
    TaskPushConfigRequest,
    TaskPushNotificationConfig,
    TaskState,
    new_id,
    parse_timestamp,
)
from ..push.guard import UnsafeWebhookError, WebhookPolicy, header_value_problem
from . import following, once as once_
from .run import Run
from .runtime import Runtime
from ..stores.base import LogEntry, PushTarget, SequenceConflict, TaskQuery, TaskRecord, scoped

if TYPE_CHECKING:
    from ..push.delivery import PushDispatcher

ExtendedCard = Union[AgentCard, Callable[["CallContext"], AgentCard]]

MAX_PAGE_SIZE = 100
DEFAULT_PAGE_SIZE = 50


def view(task: Task, history_length: Optional[int] = None, include_artifacts: bool = True) -> Task:
    """A task as a response shows it: history cut to the newest N, artifacts optional."""
    changes: Dict[str, Any] = {}
    if history_length is not None and len(task.history) > history_length:
        changes["history"] = task.history[len(task.history) - history_length:]
    if not include_artifacts and task.artifacts:
        changes["artifacts"] = []
    return dataclasses.replace(task, **changes) if changes else task


#: The key anonymous callers' streams are counted under: no owner id is None.
ANONYMOUS = None


class StreamSlots:
    """Open streams in this process: one count per authenticated caller
    (``A2A_MAX_STREAMS_PER_CALLER``), one shared by every anonymous caller
    (``A2A_MAX_ANONYMOUS_STREAMS``).

    A slot is checked and taken in one step, before any store I/O: opens that
    yield while reading the store cannot all pass the check together.
    """

    def __init__(self) -> None:
        self._counts: Dict[Optional[str], int] = {}
        self._lock = threading.Lock()

    def open(self, key: Optional[str]) -> int:
        return self._counts.get(key, 0)

    def take(self, key: Optional[str], limit: int) -> bool:
        """Take a slot for ``key`` unless it already holds ``limit`` (0: no limit)."""
        with self._lock:
            held = self._counts.get(key, 0)
            if limit and held >= limit:
                return False
            self._counts[key] = held + 1
            return True

    def give_back(self, key: Optional[str]) -> None:
        with self._lock:
            left = self._counts.get(key, 1) - 1
            if left > 0:
                self._counts[key] = left
            else:
                self._counts.pop(key, None)


class _CountedStream:
    """A stream that holds a slot its opener took, until it is closed or dropped
    (a generator would only give it back once the response started)."""

    def __init__(self, stream: Iterator[ServedItem], slots: StreamSlots,
                 key: Optional[str]) -> None:
        self._stream, self._slots, self._key = stream, slots, key
        self._open = True

    def __iter__(self) -> "_CountedStream":
        return self

    def __next__(self) -> ServedItem:
        return next(self._stream)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._slots.give_back(self._key)
            close = getattr(self._stream, "close", None)
            if close is not None:
                close()

    def __del__(self) -> None:
        self.close()


#: Longest id a client may choose (task, context, message or webhook id).
MAX_ID_LENGTH = 256


#: Longest webhook token or credentials: each push carries them as a header.
MAX_WEBHOOK_SECRET_LENGTH = 4096


def check_id(value: str, field: str) -> None:
    """Refuse an id no task could have: too long, or with control characters."""
    if len(value) > MAX_ID_LENGTH:
        raise InvalidParamsError(f"{field} is longer than {MAX_ID_LENGTH} characters",
                                 violations=[(field, f"at most {MAX_ID_LENGTH} characters")])
    if CONTROL_CHARACTER.search(value):
        raise InvalidParamsError(f"{field} contains control characters",
                                 violations=[(field, "must not contain control characters")])


def _check_page_size(page_size: Optional[int]) -> None:
    if page_size is not None and not 1 <= page_size <= MAX_PAGE_SIZE:
        raise InvalidParamsError(f"pageSize must be between 1 and {MAX_PAGE_SIZE} inclusive",
                                 violations=[("pageSize", f"must be between 1 and {MAX_PAGE_SIZE}")])


def _check_history_length(value: Optional[int], name: str = "historyLength") -> None:
    if value is not None and value < 0:
        raise InvalidParamsError(f"{name} must be non-negative", violations=[(name, "must be >= 0")])


@dataclass
class Limits:
    """What one request may ask for (the ``A2A_MAX_*`` settings)."""

    max_parts: int = 100
    max_file_size: int = 10 * 1024 * 1024
    #: Open streams per authenticated caller in this process (0: no limit).
    max_streams_per_caller: int = 100
    #: Open streams of all anonymous callers together in this process (0: no limit); the
    #: web side works the default out from the server's connections per worker.
    max_anonymous_streams: int = 250
    #: Webhooks one task may have (0: no limit): each event is pushed to each of them.
    max_push_configs: int = 10


@dataclass
class Retried:
    """A retried send (the same ``Idempotency-Key`` and request): the first send's task."""

    #: The task as it is now; None only inside :meth:`AgentService._accept`, when the
    #: first send never made it and this one makes it under :attr:`task_id`.
    record: Optional[TaskRecord]
    task_id: str = ""


class AgentService:
    """The eleven 1.0 operations for one agent."""

    def __init__(self, card: AgentCard, runtime: Runtime, *, blocking_timeout: float,
                 keepalive: float, extended_card: Optional[ExtendedCard] = None,
                 interfaces: Optional[Callable[[], List[AgentInterface]]] = None,
                 limits: Optional[Limits] = None, push: Optional["PushDispatcher"] = None,
                 webhook_policy: Optional[WebhookPolicy] = None, auth_challenge: str = "",
                 lenient_version: bool = False,
                 stream_context: Optional[StreamContext] = None, scope: str = "",
                 idempotency_ttl: float = 86400.0, protocol_draft: bool = False,
                 long_poll_timeout: float = 30.0) -> None:
        self.card = card
        #: The agent's store scope (``A2A_STORE_SCOPE``): its tasks are stored under it,
        #: before the caller's tenant, and the tasks of another scope look missing.
        self.scope = scope
        self.runtime = runtime
        self.store = runtime.store
        self.blocking_timeout = blocking_timeout
        self.keepalive = keepalive
        self.extended_card = extended_card
        #: The interfaces of the public card as the current request sees them.
        self.interfaces = interfaces
        #: Serve a 1.0 method sent without ``A2A-Version`` as 1.0 (A2A_LENIENT_VERSION).
        self.lenient_version = lenient_version
        #: Serve the A2A 1.1 draft too (``A2A_PROTOCOL_DRAFT``; docs/generations.rst).
        self.protocol_draft = protocol_draft
        #: Longest a long-poll GetTask holds its answer (``A2A_LONG_POLL_TIMEOUT``).
        self.long_poll_timeout = long_poll_timeout
        #: Webhook delivery and the SSRF guard, when the card declares push notifications.
        self.push = push
        self.webhook_policy = webhook_policy
        #: The ``WWW-Authenticate`` challenge for callers who must authenticate.
        self.auth_challenge = auth_challenge
        self.limits = limits or Limits()
        #: How long a send's ``Idempotency-Key`` is kept (``A2A_IDEMPOTENCY_TTL``).
        self.idempotency_ttl = idempotency_ttl
        self._stream_slots = StreamSlots()
        self._stream_context = stream_context or following.stream_context(
            runtime.store, close_on_auth_required=runtime.following.close_on_auth_required)

    # ----------------------------------------------------------- helpers

    def _tenant(self, ctx: CallContext) -> str:
        """The tenant the caller's tasks are stored under: the agent's store scope and
        the caller's tenant (:func:`~a2a_flask.stores.base.scoped`), at most as long
        as the stores' tenant column."""
        stored = scoped(self.scope, ctx.tenant)
        if len(stored) > MAX_TENANT_LENGTH:
            room = MAX_TENANT_LENGTH - (len(stored) - len(ctx.tenant))
            raise InvalidParamsError(f"tenant is longer than {room} characters",
                                     violations=[("tenant", f"at most {room} characters")])
        return stored

    def visible(self, task_id: str, ctx: CallContext, field: str = "id",
                 shared: bool = False) -> TaskRecord:
        """The task if this caller may see it (this agent's, in the caller's tenant, the
        caller's); anything else looks like 'not found'.
        ``shared``: callers asking at once share one load (a crowd attaching)."""
        check_id(task_id, field)
        tenant = self._tenant(ctx)
        load = self.runtime.log.load if shared else self.store.load
        record = load(task_id) if task_id else None
        if record is None or record.tenant != tenant or record.owner != ctx.owner:
            raise TaskNotFoundError(f"Task {task_id} not found", metadata={"taskId": task_id})
        return record

    def _require_streaming(self) -> None:
        if not self.card.capabilities.streaming:
            raise UnsupportedOperationError("This agent does not support streaming")

    def _require_push(self) -> None:
        if not self.card.capabilities.push_notifications:
            raise PushNotificationNotSupportedError()

    def _check_message(self, message: Message) -> None:
        """Ids a task could have, and the part and inline-file limits."""
        check_id(message.message_id, "message.messageId")
        check_id(message.context_id, "message.contextId")
        limits = self.limits
        if len(message.parts) > limits.max_parts:
            raise InvalidParamsError(
                f"A message may have at most {limits.max_parts} parts (A2A_MAX_PARTS)",
                violations=[("message.parts", f"has {len(message.parts)} parts; "
                                              f"at most {limits.max_parts}")])
        for index, part in enumerate(message.parts):
            if isinstance(part.raw, bytes) and len(part.raw) > limits.max_file_size:
                raise InvalidParamsError(
                    f"An inline file may be at most {limits.max_file_size} bytes "
                    "(A2A_MAX_FILE_SIZE); send a url part for larger files",
                    violations=[(f"message.parts[{index}].raw",
                                 f"is {len(part.raw)} bytes; at most {limits.max_file_size}")])

    def _check_input_modes(self, message: Message) -> None:
        accepted = self.card.default_input_modes
        for index, part in enumerate(message.parts):
            media = part.media_type.split(";")[0].strip().lower()
            if media and not any(fnmatch.fnmatch(media, mode.lower()) for mode in accepted):
                raise ContentTypeNotSupportedError(
                    f"Media type {media} is not accepted; this agent takes {', '.join(accepted)}",
                    metadata={"mediaType": media},
                    violations=[(f"message.parts[{index}].mediaType", "not an accepted input mode")],
                )

    # ----------------------------------------------------------- sending

    def stream_context(self) -> StreamContext:
        """What this agent's stream renderers may ask (one object, shared by every stream)."""
        return self._stream_context

    def task_dialect(self, task_id: str, ctx: CallContext) -> str:
        """The protocol version the task was created with (dialects answer in it)."""
        return self.visible(task_id, ctx).dialect

    def _accept(self, request: SendMessageRequest, ctx: CallContext, client_task_id: str = "",
                streamed: bool = False) -> Union[Run, TaskRecord, Retried]:
        """Validate a send and start it: a new Run, or the record of a continued task;
        a send whose ``Idempotency-Key`` was bound already gets the first send's task
        (:class:`Retried`, or the continued task's record; docs/safe-retries.rst).

        ``client_task_id`` is the 0.1 way: the client names the task, which is
        continued if it exists and created (as a task, never a Message) if not.
        """
        if self.runtime.stopping:
            # A run started now could not be given the grace the running ones have.
            raise WorkerStoppingError()
        message = request.message
        check_id(client_task_id, "id")
        # Read before anything fills in the message's ids (docs/safe-retries.rst).
        once = once_.once_for(ctx.idempotency_key, request, client_task_id, self._tenant(ctx),
                              ctx.owner, self.idempotency_ttl, ctx.dialect)
        # Whether it exists: the head says so without folding the task (which
        # visible below loads, once, when it does).
        if client_task_id and self.store.head(client_task_id) is not None:
            message.task_id = client_task_id
        config = request.configuration
        if message.role is not Role.USER:
            raise InvalidParamsError("message.role must be ROLE_USER",
                                     violations=[("message.role", "must be ROLE_USER")])
        if config is not None:
            _check_history_length(config.history_length, "configuration.historyLength")
            if config.task_push_notification_config is not None:
                self._require_push()
                self.check_webhook(config.task_push_notification_config,
                                    "configuration.taskPushNotificationConfig.")
        self._check_message(message)
        self.runtime.check_message_size(message)
        self._check_input_modes(message)
        if message.task_id:
            record = self.visible(message.task_id, ctx, "message.taskId")
            if config is not None and config.task_push_notification_config is not None:
                self._check_push_room(record.task.id, config.task_push_notification_config.id,
                                      "configuration.taskPushNotificationConfig")
            before = record.seq
            if message.context_id and message.context_id != record.task.context_id:
                raise InvalidParamsError(
                    "message.contextId does not match the task's context",
                    metadata={"taskId": record.task.id, "contextId": record.task.context_id},
                    violations=[("message.contextId", "does not match the task's contextId")],
                )
            bound = "" if once is None else self._bind_once(once, record.task.id, ctx, named=True)
            if isinstance(bound, Retried):
                return bound.record or record  # the first send's turn: the task as it is now
            try:
                record = self.runtime.continue_task(
                    record, message, config.if_generation_match if config is not None else None)
            except BaseException:
                if once is not None:
                    once_.release(self.store, once, bound)
                raise
            self._register_push(config, record.task.id, ctx, before)
            if self.push is not None:
                self.push.kick(record.task.id)  # webhooks registered earlier get this turn
            return record
        task_id = client_task_id or new_id()
        context_id = message.context_id or new_id()
        message.task_id, message.context_id = task_id, context_id
        if once is None:
            run = self.runtime.start_new(message, task_id=task_id, context_id=context_id,
                                         tenant=self._tenant(ctx), owner=ctx.owner,
                                         dialect=ctx.dialect, create_task=bool(client_task_id),
                                         streamed=streamed)
        else:
            started = self._start_once(once, message, ctx, named=bool(client_task_id),
                                       streamed=streamed)
            if isinstance(started, Retried):
                return started
            run = started
        if config is not None and (config.return_immediately
                                   or config.task_push_notification_config is not None):
            # The task must exist before we answer or register a webhook (unless
            # the agent was quicker and answered with a Message: then there is none).
            if run.ensure_task() is not None:
                self._register_push(config, task_id, ctx, 0)  # the whole story
        return run

    def _start_once(self, once: once_.Once, message: Message, ctx: CallContext, *,
                    named: bool, streamed: bool) -> Union[Run, Retried]:
        """Start a keyed send's new task (``named``: the id the request names): made
        with its key bound in one store write before the agent runs (a retry finds it,
        a reply then completes it, and the binding never waits on the agent); or the
        first send's task (:meth:`_first_send`)."""
        task_id, context_id = message.task_id or "", message.context_id or ""
        value = once.value("=" + new_id() if named else task_id)
        try:
            started = self.runtime.start_claimed(
                message, once_.claim(once, value), task_id=task_id, context_id=context_id,
                tenant=self._tenant(ctx), owner=ctx.owner, dialect=ctx.dialect,
                streamed=streamed)
            if not isinstance(started, str):
                return started
            first = once_.judge(once, value, started)
            assert first is not None  # (the store bound another value)
            retried = self._first_send(first, task_id, ctx)
            if retried.record is not None:
                return retried
            # The first died before making its task: make it here, under its id (the
            # key is bound to it already).
            task_id = message.task_id = retried.task_id
            return self.runtime.start_new(message, task_id=task_id, context_id=context_id,
                                          tenant=self._tenant(ctx), owner=ctx.owner,
                                          dialect=ctx.dialect, create_task=True,
                                          streamed=streamed)
        except SequenceConflict:
            # Another try of this send (or a send naming the same id) made it meanwhile.
            return Retried(self.visible(task_id, ctx))

    def _bind_once(self, once: once_.Once, task_id: str, ctx: CallContext,
                   named: bool) -> Union[str, Retried]:
        """Bind the send's key to ``task_id`` (``named``: the task the request names)
        alone: the value this send bound, or the first send's task (:meth:`_first_send`)."""
        value = once.value("=" + new_id() if named else task_id)
        first = once_.bind(self.store, once, value)
        if first is None:
            return value
        return self._first_send(first, task_id, ctx)

    def _first_send(self, first: once_.Bound, task_id: str, ctx: CallContext) -> Retried:
        """The first send's task (``task_id``: the one the request names, for a
        ``=`` binding), once it exists; if it never came, a :class:`Retried` without a
        record naming the id to make it under."""
        first_id = task_id if first.task_id.startswith("=") else first.task_id
        # A binding older than the wait is not being made any more: its task is there,
        # or deleted (A2A_TASK_TTL), or its worker died first.
        wait = max(once_.ACCEPT_WAIT - first.age, 0.0)
        if once_.await_task(self.store, first_id, wait):
            return Retried(self.visible(first_id, ctx))
        return Retried(None, first_id)

    def send_message(self, request: SendMessageRequest, ctx: CallContext,
                     client_task_id: str = "") -> Union[Task, Message]:
        """SendMessage: blocking unless ``returnImmediately``; a Task or a Message."""
        config = request.configuration
        history_length = config.history_length if config else None
        deadline = time.monotonic() + self.blocking_timeout
        started = self._accept(request, ctx, client_task_id)
        if isinstance(started, Retried):
            assert started.record is not None  # (None only inside _accept)
            started = started.record  # a retry: answered as the first is, from the store
        if isinstance(started, Run):
            if config is not None and config.return_immediately:
                created = started.ensure_task()
                if created is None and started.reply is not None:
                    return started.reply
                assert created is not None  # ensure_task returns None only after a reply
                return view(created.task, history_length)
            # One wake-up: the run says when it has settled (no subscription to the log).
            if not started.settled.wait(self.blocking_timeout):
                started.ensure_task()  # still thinking: answer with the task as it is
            if started.error is not None:
                raise started.error
            if started.reply is not None:
                return started.reply
            settled = started.record
            if settled is not None and settled.state.settled:
                # What the run wrote last: a terminal task never changes again, and an
                # interrupted one is what a later wait would answer too.
                return view(settled.task, history_length)
            task_id = started.task_id
        else:
            if config is not None and config.return_immediately:
                return view(started.task, history_length)
            task_id = started.task.id
        record = self.runtime.wait_settled(task_id, max(deadline - time.monotonic(), 0.0))
        return view(record.task, history_length)

    def send_streaming_message(self, request: SendMessageRequest, ctx: CallContext,
                               client_task_id: str = "") -> Iterator[ServedItem]:
        """SendStreamingMessage: validated now; the returned iterator streams the events."""
        self._require_streaming()
        config = request.configuration
        history_length = config.history_length if config else None
        with self._stream_slot(ctx) as hold:
            started = self._accept(request, ctx, client_task_id, streamed=True)
            return hold(self._stream_started(started, history_length))

    def open_streams(self, owner: Optional[str]) -> int:
        """How many streams ``owner`` (:data:`ANONYMOUS`: anonymous callers together)
        has open in this process."""
        return self._stream_slots.open(owner)

    @contextlib.contextmanager
    def _stream_slot(self, ctx: CallContext) -> Iterator[Callable[[Iterator[ServedItem]],
                                                                  Iterator[ServedItem]]]:
        """Take the caller's stream slot first (429 when none is left); the body opens
        the stream and hands it to the function it gets, which ties the slot to it.
        The slot goes back if the body raises."""
        key = ANONYMOUS if ctx.principal is None else ctx.owner
        limits = self.limits
        limit = limits.max_anonymous_streams if key is ANONYMOUS else limits.max_streams_per_caller
        if not limit:  # nothing to count against
            yield lambda stream: stream
            return
        if not self._stream_slots.take(key, limit):
            if key is ANONYMOUS:
                message = (f"{limit} streams of anonymous callers are open "
                           "(A2A_MAX_ANONYMOUS_STREAMS); try again later")
            else:
                message = (f"You have {limit} streams open (A2A_MAX_STREAMS_PER_CALLER); "
                           "close one first")
            raise ResourceExhaustedError(message, metadata={"limit": limit})
        try:
            yield lambda stream: _CountedStream(stream, self._stream_slots, key)
        except BaseException:
            self._stream_slots.give_back(key)
            raise

    def _stream_started(self, started: Union[Run, TaskRecord, Retried],
                        history_length: Optional[int]) -> Iterator[ServedItem]:
        if isinstance(started, Retried):  # a retry follows the first run from its start
            assert started.record is not None
            return self._follow(started.record.task.id, 0, history_length)
        if isinstance(started, TaskRecord):
            return self._follow(started.task.id, started.seq, history_length,
                                opening=LogEntry(started.seq, view(started.task, history_length)))
        return self._run_started(started, history_length)

    def _run_started(self, run: Run, history_length: Optional[int]) -> Iterator[ServedItem]:
        if not run.decided.is_set():
            # The executor's first turn: most make their task (or reply) at once, and
            # the first event then leaves with the headers instead of after them.
            cooperate()
        # A run that ends before it made anything (stopped at shutdown before its first
        # emission, its store closed or failed) never decides: its end stops the wait.
        while not run.decided.is_set() and not run.finished.is_set():
            yield None  # the headers (then keep-alives) leave while the agent thinks
            run.decided.wait(self.keepalive)
        if run.error is not None:
            raise run.error
        if run.reply is not None:
            yield LogEntry(0, run.reply)
            return
        if not run.decided.is_set() and self.store.head(run.task_id) is None:
            if self.runtime.stopping:
                raise WorkerStoppingError()
            raise InternalError("The agent's run ended before it made a task or a reply")
        yield from self._follow(run.task_id, 0, history_length)

    def _follow(self, task_id: str, after_seq: int, history_length: Optional[int],
                opening: StreamItem = None) -> Iterator[ServedItem]:
        """The task's events after ``after_seq`` as stream items, after ``opening`` (a
        snapshot, sent at once) if there is one.

        The snapshot is yielded here rather than by a generator wrapped around this
        one: each generator a parked stream is suspended in costs it memory.  Once
        sent, it is let go: an idle stream must not keep a task (which may hold
        megabytes) alive for as long as it stays open.
        """
        if opening is not None:
            yield opening
            opening = None  # the stream sent it: this frame no longer holds the task
            yield None  # the snapshot goes out at once
        for entry in self.runtime.follow(task_id, after_seq, self.keepalive, park_outside=True):
            if entry is None or isinstance(entry, Wait) or entry.chunk:
                yield entry  # a chunk as the store read it: a 1.0 stream sends its text
            elif isinstance(entry.event, Task):
                yield LogEntry(entry.seq, view(entry.event, history_length))
            elif not (isinstance(entry.event, Message) and entry.event.role is Role.USER):
                yield entry

    # ----------------------------------------------------------- tasks

    def get_task(self, request: GetTaskRequest, ctx: CallContext) -> Task:
        """GetTask; with ``currentGeneration`` (the 1.1 draft) a long-poll: the answer
        waits until the task's generation is past it, up to ``A2A_LONG_POLL_TIMEOUT``."""
        _check_history_length(request.history_length)
        current = request.current_generation
        if current is None:
            return view(self.visible(request.id, ctx).task, request.history_length)
        check_id(request.id, "id")
        # Followed from before the load: a crowd of long-polls shares it (and the rest).
        with self.runtime.log.following(request.id):
            record = self.visible(request.id, ctx, shared=True)
            record = self.runtime.long_poll(record, current, self.long_poll_timeout)
        return view(record.task, request.history_length)

    def list_tasks(self, request: ListTasksRequest, ctx: CallContext) -> ListTasksResponse:
        _check_history_length(request.history_length)
        _check_page_size(request.page_size)
        check_id(request.context_id, "contextId")
        page_size = DEFAULT_PAGE_SIZE if request.page_size is None else request.page_size
        after = None
        if request.status_timestamp_after:
            try:
                after = parse_timestamp(request.status_timestamp_after)
            except ValueError:
                raise InvalidParamsError(
                    "statusTimestampAfter must be an RFC 3339 timestamp",
                    violations=[("statusTimestampAfter", "not an RFC 3339 timestamp")],
                ) from None
        query = TaskQuery(
            tenant=self._tenant(ctx),
            owner=ctx.owner,
            context_id=request.context_id,
            state=None if request.status is TaskState.UNSPECIFIED else request.status,
            updated_after=after,
            page_size=page_size,
            page_token=request.page_token,
        )
        page = self.store.list_tasks(query)
        tasks = [view(r.task, request.history_length, bool(request.include_artifacts))
                 for r in page.records]
        return ListTasksResponse(tasks, page.next_page_token, page_size, page.total_size)

    def cancel_task(self, request: CancelTaskRequest, ctx: CallContext) -> Task:
        self.visible(request.id, ctx)
        return self.runtime.cancel(request.id).task

    def subscribe_to_task(self, request: SubscribeToTaskRequest,
                          ctx: CallContext) -> Iterator[ServedItem]:
        """SubscribeToTask: the Task first, then live events; ``Last-Event-ID`` replays."""
        self._require_streaming()
        with self._stream_slot(ctx) as hold:
            record = self.visible(request.id, ctx, shared=True)
            resume_from = ctx.last_event_id
            if record.state.terminal and (resume_from is None or resume_from >= record.seq):
                raise UnsupportedOperationError(
                    f"Task {request.id} is {record.state.value}; a terminal task has no stream",
                    metadata={"taskId": request.id, "state": record.state.value},
                )
            return hold(self._subscription(record, resume_from))

    def _subscription(self, record: TaskRecord, resume_from: Optional[int]) -> Iterator[ServedItem]:
        if resume_from is not None:
            return self._follow(record.task.id, resume_from, None)
        return self._follow(record.task.id, record.seq, None,
                            opening=LogEntry(record.seq, record.task))

    # ----------------------------------------------------------- push configs

    def check_webhook(self, config: TaskPushNotificationConfig, prefix: str = "") -> None:
        """Refuse a webhook before anything changes: a URL the SSRF guard does not allow,
        or a token or credentials that could not be sent as HTTP headers.

        ``prefix`` names where the config sits in the request, for the violations.
        """
        check_id(config.id, prefix + "id")  # it is logged and stored as a key
        auth = config.authentication
        headers = [("token", config.token)]
        if auth is not None:
            headers += [("authentication.scheme", auth.scheme),
                        ("authentication.credentials", auth.credentials)]
        for name, value in headers:
            # Sent with every push: a long one would cost each of them its length.
            problem = (f"is longer than {MAX_WEBHOOK_SECRET_LENGTH} characters"
                       if len(value or "") > MAX_WEBHOOK_SECRET_LENGTH
                       else header_value_problem(value or ""))
            if problem:
                raise InvalidParamsError(f"{prefix}{name} {problem}",
                                         violations=[(prefix + name, problem)])
        if self.webhook_policy is None:
            return
        try:
            self.webhook_policy.check_registration(config.url)
        except UnsafeWebhookError as exc:
            raise InvalidParamsError(str(exc), violations=[(prefix + "url", str(exc))]) from None

    def _register_push(self, config: Optional[SendMessageConfiguration], task_id: str,
                       ctx: CallContext, from_seq: int) -> None:
        """Store the webhook that came with a SendMessage (already checked)."""
        if config is not None and config.task_push_notification_config is not None:
            push = dataclasses.replace(config.task_push_notification_config, task_id=task_id)
            self._store_push(push, ctx, from_seq)

    def _store_push(self, config: TaskPushNotificationConfig, ctx: CallContext,
                    from_seq: int) -> TaskPushNotificationConfig:
        stored = dataclasses.replace(config, id=config.id or new_id(), tenant=ctx.tenant)
        self.store.put_push_target(config.task_id, PushTarget(
            stored, dialect=ctx.dialect, owner=ctx.owner, delivered_seq=from_seq))
        if self.push is not None:
            self.push.kick(config.task_id)
        return stored

    def create_push_config(self, config: TaskPushNotificationConfig,
                           ctx: CallContext) -> TaskPushNotificationConfig:
        """Register a webhook; it gets the task's events from now on."""
        self._require_push()
        record = self.visible(config.task_id, ctx, "taskId")
        self.check_webhook(config)
        self._check_push_room(config.task_id, config.id, "taskId")
        return self._store_push(config, ctx, record.seq)

    def _check_push_room(self, task_id: str, config_id: str, field: str) -> None:
        """Refuse a webhook past the task's ``A2A_MAX_PUSH_CONFIGS`` (registering one
        again under its id replaces it): every event goes to every webhook, so a
        caller's registrations must not multiply what each event costs."""
        limit = self.limits.max_push_configs
        if not limit:
            return
        others = [t for t in self.store.push_targets(task_id)
                  if not config_id or t.config.id != config_id]
        if len(others) >= limit:
            raise InvalidParamsError(
                f"Task {task_id} already has {len(others)} webhooks, the most one task may "
                f"have (A2A_MAX_PUSH_CONFIGS); delete one first",
                metadata={"taskId": task_id, "limit": limit},
                violations=[(field, f"the task has {limit} webhooks already")])

    def _masked(self, config: TaskPushNotificationConfig) -> TaskPushNotificationConfig:
        auth = config.authentication
        if auth is not None and auth.credentials:
            auth = dataclasses.replace(auth, credentials="********")
        return dataclasses.replace(config, authentication=auth,
                                   token="********" if config.token else "")

    def get_push_config(self, request: TaskPushConfigRequest,
                        ctx: CallContext) -> TaskPushNotificationConfig:
        self._require_push()
        self.visible(request.task_id, ctx, "taskId")
        check_id(request.id, "id")
        for target in self.store.push_targets(request.task_id):
            if target.config.id == request.id:
                return self._masked(target.config)
        raise TaskNotFoundError(f"Push notification config {request.id} not found",
                                metadata={"taskId": request.task_id, "configId": request.id})

    def list_push_configs(self, request: ListTaskPushNotificationConfigsRequest,
                          ctx: CallContext) -> ListTaskPushNotificationConfigsResponse:
        self._require_push()
        _check_page_size(request.page_size)
        self.visible(request.task_id, ctx, "taskId")
        # Every config in one page: a task has few (the page token is never needed).
        configs = [self._masked(t.config) for t in self.store.push_targets(request.task_id)]
        return ListTaskPushNotificationConfigsResponse(configs, "")

    def delete_push_config(self, request: TaskPushConfigRequest, ctx: CallContext) -> Empty:
        self._require_push()
        self.visible(request.task_id, ctx, "taskId")
        check_id(request.id, "id")
        self.store.delete_push_config(request.task_id, request.id)
        return Empty()

    # ----------------------------------------------------------- card

    def get_extended_card(self, ctx: CallContext) -> AgentCard:
        """The extended card: for authenticated callers only (spec §3.1.11), maybe per caller."""
        if not self.card.capabilities.extended_agent_card:
            raise UnsupportedOperationError("This agent declares no extended agent card")
        if self.extended_card is None:
            raise ExtendedAgentCardNotConfiguredError()
        if ctx.principal is None:
            raise UnauthenticatedError("The extended agent card is only for authenticated "
                                       "callers; see securitySchemes in the public card",
                                       challenge=self.auth_challenge)
        card = self.extended_card(ctx) if callable(self.extended_card) else self.extended_card
        if not card.supported_interfaces and self.interfaces is not None:
            # Clients replace the public card with this one: it must say where to call.
            card = dataclasses.replace(card, supported_interfaces=self.interfaces())
        return card

    def card_for(self, request: GetExtendedAgentCardRequest, ctx: CallContext) -> AgentCard:
        """The card this caller should use (0.3 ``GetAgentCard``): the extended card for
        an authenticated caller where there is one, else the public card."""
        if (self.card.capabilities.extended_agent_card and self.extended_card is not None
                and ctx.principal is not None):
            return self.get_extended_card(ctx)
        card = self.card
        if not card.supported_interfaces and self.interfaces is not None:
            card = dataclasses.replace(card, supported_interfaces=self.interfaces())
        return card
