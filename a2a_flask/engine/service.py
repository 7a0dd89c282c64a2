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
from ..protocol.calls import (CONTROL_CHARACTER, CallContext, ServedItem, StreamContext,
                              StreamItem, Wait)
from ..protocol.errors import (
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InvalidParamsError,
    PushNotificationNotSupportedError,
    ResourceExhaustedError,
    TaskNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
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
from . import following
from .run import Run
from .runtime import Runtime
from ..stores.base import LogEntry, PushTarget, TaskQuery, TaskRecord

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
    #: Open streams of all anonymous callers together in this process (0: no limit).
    max_anonymous_streams: int = 1000
    #: Webhooks one task may have (0: no limit): each event is pushed to each of them.
    max_push_configs: int = 10


class AgentService:
    """The eleven 1.0 operations for one agent."""

    def __init__(self, card: AgentCard, runtime: Runtime, *, blocking_timeout: float,
                 keepalive: float, extended_card: Optional[ExtendedCard] = None,
                 interfaces: Optional[Callable[[], List[AgentInterface]]] = None,
                 limits: Optional[Limits] = None, push: Optional["PushDispatcher"] = None,
                 webhook_policy: Optional[WebhookPolicy] = None, auth_challenge: str = "",
                 lenient_version: bool = False,
                 stream_context: Optional[StreamContext] = None) -> None:
        self.card = card
        self.runtime = runtime
        self.store = runtime.store
        self.blocking_timeout = blocking_timeout
        self.keepalive = keepalive
        self.extended_card = extended_card
        #: The interfaces of the public card as the current request sees them.
        self.interfaces = interfaces
        #: Serve a 1.0 method sent without ``A2A-Version`` as 1.0 (A2A_LENIENT_VERSION).
        self.lenient_version = lenient_version
        #: Webhook delivery and the SSRF guard, when the card declares push notifications.
        self.push = push
        self.webhook_policy = webhook_policy
        #: The ``WWW-Authenticate`` challenge for callers who must authenticate.
        self.auth_challenge = auth_challenge
        self.limits = limits or Limits()
        self._stream_slots = StreamSlots()
        self._stream_context = stream_context or following.stream_context(
            runtime.store, close_on_auth_required=runtime.following.close_on_auth_required)

    # ----------------------------------------------------------- helpers

    def _visible(self, task_id: str, ctx: CallContext, field: str = "id",
                 shared: bool = False) -> TaskRecord:
        """The task if this caller may see it; anything else looks like 'not found'.
        ``shared``: callers asking at once share one load (a crowd attaching)."""
        check_id(task_id, field)
        load = self.runtime.log.load if shared else self.store.load
        record = load(task_id) if task_id else None
        if record is None or record.tenant != ctx.tenant or record.owner != ctx.owner:
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
        return self._visible(task_id, ctx).dialect

    def _accept(self, request: SendMessageRequest, ctx: CallContext,
                client_task_id: str = "", streamed: bool = False) -> Union[Run, TaskRecord]:
        """Validate a send and start it: a new Run, or the record of a continued task.

        ``client_task_id`` is the 0.1 way: the client names the task, which is
        continued if it exists and created (as a task, never a Message) if not.
        """
        message = request.message
        check_id(client_task_id, "id")
        # Whether it exists: the head says so without folding the task (which
        # _visible below loads, once, when it does).
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
                self._check_webhook(config.task_push_notification_config,
                                    "configuration.taskPushNotificationConfig.")
        self._check_message(message)
        self.runtime.check_message_size(message)
        self._check_input_modes(message)
        if message.task_id:
            record = self._visible(message.task_id, ctx, "message.taskId")
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
            record = self.runtime.continue_task(record, message)
            self._register_push(config, record.task.id, ctx, before)
            if self.push is not None:
                self.push.kick(record.task.id)  # webhooks registered earlier get this turn
            return record
        task_id = client_task_id or new_id()
        context_id = message.context_id or new_id()
        message.task_id, message.context_id = task_id, context_id
        run = self.runtime.start_new(message, task_id=task_id, context_id=context_id,
                                     tenant=ctx.tenant, owner=ctx.owner, dialect=ctx.dialect,
                                     create_task=bool(client_task_id), streamed=streamed)
        if config is not None and (config.return_immediately
                                   or config.task_push_notification_config is not None):
            # The task must exist before we answer or register a webhook (unless
            # the agent was quicker and answered with a Message: then there is none).
            if run.ensure_task() is not None:
                self._register_push(config, task_id, ctx, 0)  # the whole story
        return run

    def send_message(self, request: SendMessageRequest, ctx: CallContext,
                     client_task_id: str = "") -> Union[Task, Message]:
        """SendMessage: blocking unless ``returnImmediately``; a Task or a Message."""
        config = request.configuration
        history_length = config.history_length if config else None
        deadline = time.monotonic() + self.blocking_timeout
        started = self._accept(request, ctx, client_task_id)
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

    def _stream_started(self, started: Union[Run, TaskRecord],
                        history_length: Optional[int]) -> Iterator[ServedItem]:
        if isinstance(started, TaskRecord):
            return self._follow(started.task.id, started.seq, history_length,
                                opening=LogEntry(started.seq, view(started.task, history_length)))
        return self._run_started(started, history_length)

    def _run_started(self, run: Run, history_length: Optional[int]) -> Iterator[ServedItem]:
        if not run.decided.is_set():
            # The executor's first turn: most make their task (or reply) at once, and
            # the first event then leaves with the headers instead of after them.
            cooperate()
        while not run.decided.is_set():
            yield None  # the headers (then keep-alives) leave while the agent thinks
            run.decided.wait(self.keepalive)
        if run.error is not None:
            raise run.error
        if run.reply is not None:
            yield LogEntry(0, run.reply)
            return
        yield from self._follow(run.task_id, 0, history_length)

    def _follow(self, task_id: str, after_seq: int, history_length: Optional[int],
                opening: StreamItem = None) -> Iterator[ServedItem]:
        """The task's events after ``after_seq`` as stream items, after ``opening`` (a
        snapshot, sent at once) if there is one.

        The snapshot is yielded here rather than by a generator wrapped around this
        one: each generator a parked stream is suspended in costs it memory.
        """
        if opening is not None:
            yield opening
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
        _check_history_length(request.history_length)
        return view(self._visible(request.id, ctx).task, request.history_length)

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
            tenant=ctx.tenant,
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
        self._visible(request.id, ctx)
        return self.runtime.cancel(request.id).task

    def subscribe_to_task(self, request: SubscribeToTaskRequest,
                          ctx: CallContext) -> Iterator[ServedItem]:
        """SubscribeToTask: the Task first, then live events; ``Last-Event-ID`` replays."""
        self._require_streaming()
        with self._stream_slot(ctx) as hold:
            record = self._visible(request.id, ctx, shared=True)
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

    def _check_webhook(self, config: TaskPushNotificationConfig, prefix: str = "") -> None:
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
        record = self._visible(config.task_id, ctx, "taskId")
        self._check_webhook(config)
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
        self._visible(request.task_id, ctx, "taskId")
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
        self._visible(request.task_id, ctx, "taskId")
        # Every config in one page: a task has few (the page token is never needed).
        configs = [self._masked(t.config) for t in self.store.push_targets(request.task_id)]
        return ListTaskPushNotificationConfigsResponse(configs, "")

    def delete_push_config(self, request: TaskPushConfigRequest, ctx: CallContext) -> Empty:
        self._require_push()
        self._visible(request.task_id, ctx, "taskId")
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
