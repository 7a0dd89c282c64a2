"""The blocking A2A client: one object per agent interface.

``A2AClient.connect(url)`` reads the agent's card and picks the best interface
this client speaks; ``A2AClient(url, binding=..., version=...)`` talks to a
known endpoint without a card.  Every operation takes and returns the 1.0
models of :mod:`a2a_flask.protocol.models`, whichever generation is on the wire.
"""
from __future__ import annotations

import dataclasses
import time
from contextlib import nullcontext
from typing import (Any, ContextManager, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Type,
                    Union)

import requests

from ..protocol import models as m
from ..protocol.errors import A2AException, CardVerificationError
from .card import (Prefer, binding_name, choose, fetch_card, generation, interfaces_of,
                   read_card, warn_other_origin)
from .jsonrpc import JsonRpcTransport
from .legacy import V01Transport, V03Transport
from .messages import PathLike, make_message
from .rest import RestTransport
from .stream import EventStream, StreamItem
from .transport import Timeout, Transport

#: The A2A 1.1 draft's version: 1.0's transports speak it (``Transport.draft``).
DRAFT = "1.1"

#: (binding, generation) -> the transport class speaking it.
TRANSPORTS: Dict[Tuple[str, str], Type[Transport]] = {
    ("JSONRPC", "1.0"): JsonRpcTransport,
    ("HTTP+JSON", "1.0"): RestTransport,
    ("JSONRPC", "0.3"): V03Transport,
    ("JSONRPC", "0.1"): V01Transport,
}

Reply = Union[m.Task, m.Message]
PushTarget = Union[str, m.TaskPushNotificationConfig]
Authentication = Union[m.AuthenticationInfo, Sequence[str], None]


class A2AClient:
    """A blocking client for one A2A agent interface.

    :param url: the interface URL (e.g. ``http://host/a2a`` or ``http://host/a2a/rest``).
    :param binding: ``JSONRPC`` or ``HTTP+JSON`` (``rest`` also works).
    :param version: the protocol version the interface speaks: ``1.0``, ``0.3`` or ``0.1``
        (``1.1``: the 1.1 draft, 1.0 with task generations: docs/generations.rst).
    :param card: the agent card, when known (:meth:`connect` fills it in).
    :param session: a :class:`requests.Session` to use (one is made otherwise).
    :param headers: extra headers sent with every request.
    :param token: a bearer token, sent as ``Authorization: Bearer <token>``.
    :param tenant: the tenant to address (1.0; defaults to the interface's).
    :param timeout: ``(connect, read)`` seconds, as in requests; the read timeout is
        also the longest silence tolerated on a stream.
    :param extensions: extension URIs to activate (the ``A2A-Extensions`` header).
    :param max_reconnects: how many times in a row a broken stream is re-attached.
    :param retries: how many more times a send is tried when no answer came (a broken
        connection, a timeout, HTTP 502/503/504); every try carries the send's one
        ``Idempotency-Key``, so the agent runs it once (docs/safe-retries.rst).  0: never.
    :param retry_backoff: seconds before the first retry; each next one waits twice as long.
    :param idempotent: send each send with a fresh ``Idempotency-Key`` and retry it as
        above (default); False sends no key unless a call gives one, and never retries.
        An a2a_flask agent makes a task for every keyed send (a Message reply completes it).

    It has one method per A2A operation, named as the operation's method in
    :data:`a2a_flask.protocol.operations.OPERATIONS` (``send_message`` for
    ``SendMessage``, ``create_push_config`` for ``CreateTaskPushNotificationConfig``
    ...).  The names of 0.1.0 remain as aliases of the same methods: ``send``
    (:meth:`send_message`), ``stream`` (:meth:`send_streaming_message`),
    ``subscribe`` (:meth:`subscribe_to_task`), ``cancel`` (:meth:`cancel_task`),
    ``set_push``, ``get_push``, ``list_push``, ``delete_push``
    (:meth:`create_push_config`, :meth:`get_push_config`, :meth:`list_push_configs`,
    :meth:`delete_push_config`) and ``extended_card`` (:meth:`get_extended_card`).
    """

    def __init__(self, url: str, *, binding: str = "JSONRPC", version: str = "1.0",
                 card: Optional[m.AgentCard] = None, session: Optional[requests.Session] = None,
                 headers: Optional[Mapping[str, str]] = None, token: Optional[str] = None,
                 tenant: str = "", timeout: Timeout = (5, 60), extensions: Iterable[str] = (),
                 max_reconnects: int = 3, retries: int = 3,
                 retry_backoff: float = 0.5, idempotent: bool = True) -> None:
        binding, wire = binding_name(binding), generation(version)
        draft = wire == DRAFT
        if draft:
            wire = "1.0"  # 1.0's bindings, with the draft's members and header
        transport_cls = TRANSPORTS.get((binding, wire))
        if transport_cls is None:
            raise A2AException(f"This client does not speak {binding} {version}; it speaks "
                               + ", ".join(f"{b} {v}" for b, v in TRANSPORTS))
        self._owns_session = session is None
        self.session = session if session is not None else requests.Session()
        sent = dict(headers or {})
        if token:
            sent["Authorization"] = f"Bearer {token}"
        self.card = card
        #: The interface in use (URL, binding, protocol version, tenant).
        self.interface = m.AgentInterface(url=url, protocol_binding=binding,
                                          protocol_version=version, tenant=tenant)
        self.transport: Transport = transport_cls(
            url, wire, session=self.session, headers=sent, timeout=timeout, tenant=tenant,
            extensions=list(extensions), retries=retries, retry_backoff=retry_backoff)
        self.transport.draft = draft
        self.max_reconnects = max_reconnects
        #: Whether sends carry a fresh ``Idempotency-Key`` unless a call gives one.
        self.idempotent = idempotent

    @classmethod
    def connect(cls, url: str, *, session: Optional[requests.Session] = None,
                headers: Optional[Mapping[str, str]] = None, token: Optional[str] = None,
                tenant: str = "", timeout: Timeout = (5, 60), prefer: Prefer = None,
                extensions: Iterable[str] = (), max_reconnects: int = 3,
                card_keys: Any = None, retries: int = 3,
                retry_backoff: float = 0.5, idempotent: bool = True) -> "A2AClient":
        """Resolve the agent card at ``url`` (a base URL or the card's own URL) and
        return a client for the best interface it offers.

        :param prefer: which interface to use when the card offers several: a
            binding (``jsonrpc``, ``rest``), a version (``1.0``, ``0.3``, ``0.1``) or
            both (``jsonrpc@0.3``), or a list of such, tried in order.  An
            interface that matches none is never chosen.
        :param card_keys: keys you trust (a JWKS dict, JWKs or a public key): the
            card must carry a signature one of them verifies (spec §8.4), else
            :class:`CardVerificationError`.
        :raises A2AException: when no card is found or no interface fits.
        """
        own = session is None
        session = session if session is not None else requests.Session()
        sent = dict(headers or {})
        if token:
            sent["Authorization"] = f"Bearer {token}"
        try:
            raw, card_url = fetch_card(url, session=session, headers=sent, timeout=timeout)
            if card_keys is not None:
                _verify_card(raw, card_keys, card_url)
            card = read_card(raw, card_url)
            iface = choose(interfaces_of(raw, card_url, fallback=True), prefer)
            if sent and card_keys is None:
                warn_other_origin(url, iface.url)
        except BaseException:
            if own:
                session.close()
            raise
        # The 1.1 draft where the card declares it at the same place (it is 1.0 plus
        # task generations): waits then long-poll, and streams report gaps.
        drafted = any(generation(other.protocol_version) == DRAFT
                      and other.protocol_binding == iface.protocol_binding
                      and other.url == iface.url
                      for other in interfaces_of(raw, card_url, fallback=True)) \
            and generation(iface.protocol_version) == "1.0"
        client = cls(iface.url, binding=iface.protocol_binding,
                     version=DRAFT if drafted else generation(iface.protocol_version),
                     card=card, session=session,
                     headers=headers, token=token, tenant=tenant or iface.tenant, timeout=timeout,
                     extensions=extensions, max_reconnects=max_reconnects, retries=retries,
                     retry_backoff=retry_backoff, idempotent=idempotent)
        client.interface.protocol_version = iface.protocol_version
        client._owns_session = own
        return client

    # ------------------------------------------------------------ sending

    def _request(self, message: Union[m.Message, str, None], *, file: Optional[PathLike],
                 data: Any, parts: Iterable[m.Part], context_id: Optional[str],
                 task_id: Optional[str], reference_task_ids: Iterable[str],
                 metadata: Optional[Dict[str, Any]], history_length: Optional[int],
                 accepted_output_modes: Optional[Sequence[str]], push: Optional[PushTarget],
                 return_immediately: bool,
                 if_generation_match: Optional[int] = None) -> m.SendMessageRequest:
        if isinstance(message, m.Message):
            built = dataclasses.replace(message, context_id=context_id or message.context_id,
                                        task_id=task_id or message.task_id)
        else:
            built = make_message(message, file=file, data=data, parts=parts,
                                 context_id=context_id or "", task_id=task_id or "",
                                 reference_task_ids=reference_task_ids)
        if isinstance(push, str):
            push = m.TaskPushNotificationConfig(url=push)
        config: Optional[m.SendMessageConfiguration] = m.SendMessageConfiguration(
            accepted_output_modes=list(accepted_output_modes or []),
            task_push_notification_config=push, history_length=history_length,
            return_immediately=return_immediately, if_generation_match=if_generation_match)
        if if_generation_match is not None and not self.generations:
            raise self.transport.unsupported("ifGenerationMatch", "1.1")
        if config == m.SendMessageConfiguration():
            config = None  # nothing to say: leave the member out
        return m.SendMessageRequest(message=built, configuration=config, metadata=metadata)

    def send_message(self, message: Union[m.Message, str, None] = None, *,
             file: Optional[PathLike] = None, data: Any = m.UNSET, parts: Iterable[m.Part] = (),
             context_id: Optional[str] = None, task_id: Optional[str] = None,
             reference_task_ids: Iterable[str] = (), metadata: Optional[Dict[str, Any]] = None,
             history_length: Optional[int] = None,
             accepted_output_modes: Optional[Sequence[str]] = None,
             push: Optional[PushTarget] = None, return_immediately: bool = False,
             idempotency_key: Optional[str] = None,
             if_generation_match: Optional[int] = None) -> Reply:
        """Send a message; returns the Task (or the agent's direct Message).

        ``message`` is a :class:`~a2a_flask.protocol.models.Message` or text; ``file`` (a
        path, sent as bytes with a guessed media type), ``data`` (any JSON value)
        and ``parts`` add parts.  Give ``task_id`` to answer a task waiting for
        input, ``context_id`` to continue a conversation.  By default the call
        waits until the task is terminal or needs input; ``return_immediately``
        returns at once.  The send carries ``idempotency_key`` (a fresh UUID4 by
        default) and is tried again when no answer came (see ``retries``).
        ``if_generation_match`` (the 1.1 draft, :attr:`generations`): the agent takes
        the message only if the task's generation is that one, else raises
        :class:`~a2a_flask.errors.TaskGenerationMismatchError` and nothing changes.
        """
        request = self._request(message, file=file, data=data, parts=parts,
                                context_id=context_id, task_id=task_id,
                                reference_task_ids=reference_task_ids, metadata=metadata,
                                history_length=history_length,
                                accepted_output_modes=accepted_output_modes, push=push,
                                return_immediately=return_immediately,
                                if_generation_match=if_generation_match)
        with self._once(idempotency_key):
            return self.transport.send_message(request)

    def send_streaming_message(
            self, message: Union[m.Message, str, None] = None, *,
            file: Optional[PathLike] = None, data: Any = m.UNSET, parts: Iterable[m.Part] = (),
            context_id: Optional[str] = None, task_id: Optional[str] = None,
            reference_task_ids: Iterable[str] = (), metadata: Optional[Dict[str, Any]] = None,
            history_length: Optional[int] = None,
            accepted_output_modes: Optional[Sequence[str]] = None,
            push: Optional[PushTarget] = None,
            idempotency_key: Optional[str] = None) -> EventStream:
        """Send a message and stream the answer: an :class:`EventStream` of Task,
        Message, TaskStatusUpdateEvent and TaskArtifactUpdateEvent objects, which
        re-attaches by itself if the connection drops.  Arguments as for
        :meth:`send_message`; a retried send replays the first one's events.
        """
        request = self._request(message, file=file, data=data, parts=parts,
                                context_id=context_id, task_id=task_id,
                                reference_task_ids=reference_task_ids, metadata=metadata,
                                history_length=history_length,
                                accepted_output_modes=accepted_output_modes, push=push,
                                return_immediately=False)
        with self._once(idempotency_key):
            items = self.transport.send_streaming_message(request)
        return self._event_stream(items, request.message.task_id)

    def _once(self, key: Optional[str]) -> ContextManager[Any]:
        """The scope of one logical send: keyed (and retried) unless this client is
        not :attr:`idempotent` and the call gave no key."""
        return self.transport.once(key) if key or self.idempotent else nullcontext()

    def subscribe_to_task(self, task_id: str, *,
                          last_event_id: Optional[str] = None) -> EventStream:
        """Stream a running task's events from now on (the current Task first);
        with ``last_event_id``, replay what followed that event instead (if the
        agent keeps a replayable log, as a2a_flask does)."""
        return self._event_stream(self._resume(task_id, last_event_id), task_id, last_event_id)

    def _resume(self, task_id: str, last_event_id: Optional[str]) -> Iterator[StreamItem]:
        return self.transport.subscribe_to_task(m.SubscribeToTaskRequest(id=task_id),
                                                last_event_id)

    def _event_stream(self, items: Any, task_id: str,
                      last_event_id: Optional[str] = None) -> EventStream:
        return EventStream(items, resume=self._resume, refresh=self.get_task,
                           max_reconnects=self.max_reconnects, task_id=task_id,
                           last_event_id=last_event_id)

    # ------------------------------------------------------------ tasks

    @property
    def generations(self) -> bool:
        """Whether this client speaks the A2A 1.1 draft to its agent: tasks and events
        carry ``generation``, :meth:`wait_for_task` long-polls, sends may carry
        ``if_generation_match`` (docs/generations.rst)."""
        return self.transport.draft

    def get_task(self, task_id: str, history_length: Optional[int] = None, *,
                 current_generation: Optional[int] = None) -> m.Task:
        """The task as it is now (``history_length`` limits the history returned).

        ``current_generation`` (the 1.1 draft, :attr:`generations`): a long-poll; the
        agent answers once the task's generation is past it, or at its own timeout."""
        if current_generation is not None and not self.generations:
            raise self.transport.unsupported("GetTask with currentGeneration", "1.1")
        return self.transport.get_task(m.GetTaskRequest(
            id=task_id, history_length=history_length, current_generation=current_generation))

    def wait_for_task(self, task_id: str, *, timeout: float = 300.0,
                      interval: float = 1.0) -> m.Task:
        """The task once it is terminal or interrupted (INPUT_REQUIRED, AUTH_REQUIRED),
        or as it is after ``timeout`` seconds.

        Against an agent of the 1.1 draft (:attr:`generations`) each GetTask is a
        long-poll: the agent answers when the task changes, so there are no polls in
        vain and no ``interval`` of lag; otherwise the task is polled every
        ``interval`` seconds."""
        deadline = time.monotonic() + timeout
        task = self.get_task(task_id)
        while not (task.status.state.terminal or task.status.state.interrupted):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if self.generations and task.generation:
                task = self.get_task(task_id, current_generation=task.generation)
            else:
                time.sleep(min(interval, left))
                task = self.get_task(task_id)
        return task

    def list_tasks(self, *, context_id: str = "", state: Union[m.TaskState, str, None] = None,
                   page_size: Optional[int] = None, page_token: str = "",
                   history_length: Optional[int] = None,
                   status_timestamp_after: Optional[str] = None,
                   include_artifacts: Optional[bool] = None) -> m.ListTasksResponse:
        """One page of tasks, newest first (A2A 1.0 only; older interfaces raise
        :class:`~a2a_flask.errors.UnsupportedOperationError`)."""
        request = m.ListTasksRequest(
            context_id=context_id, status=parse_state(state) if state else m.TaskState.UNSPECIFIED,
            page_size=page_size, page_token=page_token, history_length=history_length,
            status_timestamp_after=status_timestamp_after, include_artifacts=include_artifacts)
        return self.transport.list_tasks(request)

    def cancel_task(self, task_id: str, metadata: Optional[Dict[str, Any]] = None) -> m.Task:
        """Cancel a task; returns it (normally CANCELED)."""
        return self.transport.cancel_task(m.CancelTaskRequest(id=task_id, metadata=metadata))

    # ------------------------------------------------------------ push configs

    def create_push_config(self, task_id: str, url: str, *, token: str = "",
                           config_id: str = "", authentication: Authentication = None
                           ) -> m.TaskPushNotificationConfig:
        """Register a webhook for a task's updates; returns the stored config (with its id).

        ``authentication`` is an :class:`~a2a_flask.protocol.models.AuthenticationInfo` or a
        ``(scheme, credentials)`` pair the agent will send as ``Authorization``.
        """
        if authentication is not None and not isinstance(authentication, m.AuthenticationInfo):
            scheme, credentials = (list(authentication) + [""])[:2]
            authentication = m.AuthenticationInfo(scheme=scheme, credentials=credentials)
        config = m.TaskPushNotificationConfig(url=url, id=config_id, task_id=task_id, token=token,
                                              authentication=authentication)
        return self.transport.create_push_config(config)

    def get_push_config(self, task_id: str, config_id: str = ""
                        ) -> m.TaskPushNotificationConfig:
        """One push config of a task (without ``config_id``: the one named after the task)."""
        return self.transport.get_push_config(m.TaskPushConfigRequest(task_id=task_id,
                                                                      id=config_id))

    def list_push_configs(self, task_id: str) -> List[m.TaskPushNotificationConfig]:
        """Every push config of a task."""
        return self.transport.list_push_configs(
            m.ListTaskPushNotificationConfigsRequest(task_id=task_id))

    def delete_push_config(self, task_id: str, config_id: str) -> None:
        """Remove a push config (deleting one that is gone is not an error)."""
        self.transport.delete_push_config(m.TaskPushConfigRequest(task_id=task_id,
                                                                  id=config_id))

    # ------------------------------------------------------------ card

    def get_extended_card(self) -> m.AgentCard:
        """The extended agent card (authenticated callers may see more); it also
        replaces :attr:`card`."""
        raw = self.transport.get_extended_card(m.GetExtendedAgentCardRequest())
        card = read_card(raw or {}, self.transport.url)
        self.card = card
        return card

    # ------------------------------------------------------------ the names of 0.1.0
    # Released in 0.1.0, before the methods were named as their operations; kept as
    # aliases (the same functions), listed in the class docstring.

    send = send_message
    stream = send_streaming_message
    subscribe = subscribe_to_task
    cancel = cancel_task
    set_push = create_push_config
    get_push = get_push_config
    list_push = list_push_configs
    delete_push = delete_push_config
    extended_card = get_extended_card

    # ------------------------------------------------------------ lifetime

    def close(self) -> None:
        """Close the HTTP session if this client made it."""
        if self._owns_session:
            self.session.close()

    def __enter__(self) -> "A2AClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        iface = self.interface
        return f"<A2AClient {iface.protocol_binding} {iface.protocol_version} {iface.url}>"


def parse_state(state: Union[m.TaskState, str]) -> m.TaskState:
    """A TaskState from a member, its wire name, or a short name (``working``,
    ``input-required``, ``INPUT_REQUIRED``)."""
    if isinstance(state, m.TaskState):
        return state
    name = state.strip().upper().replace("-", "_")
    if not name.startswith("TASK_STATE_"):
        name = "TASK_STATE_" + name
    name = name.replace("CANCELLED", "CANCELED")
    try:
        return m.TaskState(name)
    except ValueError:
        raise ValueError(f"Unknown task state {state!r}; use one of "
                         + ", ".join(s.name.lower() for s in m.TaskState)) from None


def _verify_card(raw: Dict[str, Any], keys: Any, card_url: str) -> None:
    from ..signing.cards import CardSignatureError, verify_card

    try:
        verify_card(raw, keys)
    except CardSignatureError as exc:
        raise CardVerificationError(f"the agent card at {card_url} is not trusted: {exc}") \
            from None
