"""What an agent author writes against: :class:`TaskContext` and the executor adapters.

An executor is a function that takes a :class:`TaskContext`.  It runs detached
from the HTTP request (a greenlet under gevent, a thread otherwise) inside the
Flask application context, once per incoming user message.  What it may do:

* call ``ctx.working()``, ``ctx.artifact()``, ``ctx.ask()``, ``ctx.complete()``,
  ``ctx.fail()``, ``ctx.reject()``, ``ctx.require_auth()`` to drive the task;
* call ``ctx.reply(text)`` first thing to answer with a single Message and
  create no task at all;
* **return** a string (it becomes a text artifact and the task completes), a
  :class:`~a2a_flask.protocol.models.Message` (a reply), a Part or list of Parts (an
  artifact), any other JSON value (a data artifact), or ``None``;
* be a **generator**: each yielded string is streamed as a chunk of one text
  artifact, each yielded Part or Artifact is emitted as it comes.

When the executor returns and the task is neither terminal nor waiting for
input, the task is completed.  If it **raises**, the task FAILS with a status
message naming the exception type (the traceback goes to the log, never to the
client).  An emission that would take the task past ``A2A_MAX_TASK_BYTES``
raises :class:`~a2a_flask.errors.TaskTooLargeError` and is not stored
(nor are streamed chunks still waiting to be written with it): the executor
may catch it and finish otherwise (say, with a link instead of the content);
uncaught, the task FAILS with a status message that says so.  When the task
is **canceled**, ``ctx.cancelled`` becomes true and the next ``ctx`` call
raises :class:`~a2a_flask.engine.run.TaskCancelled`; an executor that
keeps running past the grace period (``A2A_CANCEL_GRACE``) is killed under
gevent.  After ``ctx.ask()`` return: the next message on the task
calls the executor again, with the whole conversation in ``ctx.history``.
"""
from __future__ import annotations

import inspect
import json
import logging
from typing import Any, Callable, Dict, Iterable, List, Optional, Union

from ..protocol.models import Artifact, Message, Part, Role, Task, TaskState, new_id
from ..protocol.errors import StoreUnavailable, TaskTooLargeError
from ..stores.base import unscoped
from .run import Run, TaskCancelled
from .writer import agent_message
from .states import TaskClosedError

log = logging.getLogger("a2a_flask")

Content = Union[str, Part, Iterable[Part], Message, None]
Executor = Callable[["TaskContext"], Any]


def to_parts(content: Any) -> List[Part]:
    """Parts from a string, a Part, a list of Parts, or any JSON value (a data part)."""
    if isinstance(content, str):
        return [Part(text=content)]
    if isinstance(content, Part):
        return [content]
    if isinstance(content, list) and content and all(isinstance(p, Part) for p in content):
        return list(content)
    try:
        # Checked here: a value that is not JSON would be stored, then break every
        # later read of the task (GetTask, streams, pushes).
        json.dumps(content, allow_nan=False)
    except (TypeError, ValueError):
        raise TypeError(
            f"an executor gave a {type(content).__name__}, which is not JSON data; give a "
            "str, a Part, an Artifact, a Message or a JSON value (dict, list, number...)"
        ) from None
    return [Part(data=content)]


def _message(content: Content, *, task_id: str = "", context_id: str = "") -> Optional[Message]:
    if content is None:
        return None
    if isinstance(content, Message):
        return content
    if isinstance(content, str):
        return agent_message(content, task_id, context_id)
    return Message(message_id=new_id(), role=Role.AGENT, parts=to_parts(content))


class TaskContext:
    """The agent's view of one incoming message and the task it belongs to."""

    def __init__(self, run: Run) -> None:
        self._run = run
        self._last_artifact_id: Optional[str] = None

    # ------------------------------------------------------------ reading

    @property
    def message(self) -> Message:
        """The user message that started this call."""
        return self._run.message

    @property
    def text(self) -> str:
        """The text parts of :attr:`message`, joined by newlines."""
        return self._run.message.text

    @property
    def parts(self) -> List[Part]:
        return self._run.message.parts

    @property
    def files(self) -> List[Part]:
        """Parts that carry a file (``raw`` bytes or a ``url``)."""
        return [p for p in self._run.message.parts if p.is_file]

    @property
    def data(self) -> List[Any]:
        """The values of the message's data parts."""
        return [p.data for p in self._run.message.parts if p.kind == "data"]

    @property
    def metadata(self) -> Dict[str, Any]:
        return self._run.message.metadata or {}

    @property
    def task_id(self) -> str:
        return self._run.task_id

    @property
    def context_id(self) -> str:
        return self._run.context_id

    @property
    def tenant(self) -> str:
        return unscoped(self._run.tenant)[1]  # the caller's, without the agent's store scope

    @property
    def task(self) -> Optional[Task]:
        """The task as this run last saw it (None until the task exists)."""
        return self._run.task

    @property
    def history(self) -> List[Message]:
        """Every message of the task so far, oldest first, the current one last."""
        task = self._run.task
        return list(task.history) if task is not None else [self._run.message]

    @property
    def follow_up(self) -> bool:
        """True when this message continues an existing task (e.g. answers ``ask``)."""
        return self._run.follow_up

    @property
    def cancelled(self) -> bool:
        """True once a client canceled the task: stop working and return."""
        return self._run.is_cancelled()

    # ------------------------------------------------------------ writing

    def status(self, state: TaskState, content: Content = None) -> None:
        """Move the task to ``state``, with an optional status message."""
        self._run.set_status(state, _message(content))

    def working(self, content: Content = None) -> None:
        """Report progress (state WORKING), e.g. ``ctx.working("searching...")``."""
        self.status(TaskState.WORKING, content)

    def artifact(self, content: Any, *, artifact_id: Optional[str] = None, name: str = "",
                 description: str = "", append: bool = False, last_chunk: bool = False,
                 metadata: Optional[Dict[str, Any]] = None) -> str:
        """Emit an artifact, or a chunk of one, and return its id.

        With ``append=True`` and no ``artifact_id`` the chunk extends the artifact
        emitted last (the first chunk starts a new one, sent with ``append``
        false); with an explicit ``artifact_id`` the flags go out as given.
        ``last_chunk=True`` marks the end of a chunked artifact.  Under gevent the
        chunks of a burst are written to the task's log together, as soon as the
        executor yields (waits on anything, sleeps) or emits something else; a
        failure to write them is raised by its next call.
        """
        if artifact_id is None:
            extends = append and self._last_artifact_id is not None
            artifact_id = self._last_artifact_id if extends and self._last_artifact_id else new_id()
        else:
            extends = append
        chunk = Artifact(artifact_id=artifact_id, parts=to_parts(content), name=name,
                         description=description, metadata=metadata)
        self._run.add_artifact(chunk, append=extends, last_chunk=last_chunk)
        self._last_artifact_id = artifact_id
        return artifact_id

    def _text_chunk(self, text: str) -> None:
        """``artifact(text, append=True)`` for a generator's text chunk, the streaming
        idiom, without the work other arguments need (every chunk passes here)."""
        artifact_id = self._last_artifact_id
        append = artifact_id is not None
        if artifact_id is None:
            artifact_id = self._last_artifact_id = new_id()
        self._run.add_artifact(Artifact(artifact_id, [Part(text=text)]), append=append)

    def ask(self, content: Content) -> None:
        """Ask the user for more input (INPUT_REQUIRED); then return from the executor."""
        self.status(TaskState.INPUT_REQUIRED, content)

    def require_auth(self, content: Content) -> None:
        """Say credentials are needed (AUTH_REQUIRED), explaining what is missing."""
        self.status(TaskState.AUTH_REQUIRED, content)

    def complete(self, content: Content = None) -> None:
        """Finish the task successfully, with an optional final status message."""
        self.status(TaskState.COMPLETED, content)

    def fail(self, content: Content = None) -> None:
        """Finish the task as FAILED, saying why."""
        self.status(TaskState.FAILED, content)

    def reject(self, content: Content = None) -> None:
        """Refuse the task (REJECTED)."""
        self.status(TaskState.REJECTED, content)

    def reply(self, content: Content) -> None:
        """Answer with a single Message and no task (only before any task update)."""
        message = _message(content)
        assert message is not None
        self._run.set_reply(message)


def invoke(executor: Executor, run: Run) -> None:
    """Call the executor for a run and turn whatever it does into task events."""
    ctx = TaskContext(run)
    try:
        result = executor(ctx)
        if inspect.isgenerator(result):
            for item in result:
                _emit_item(ctx, item)
            run.finish()
        else:
            run.finish(_returned_artifact(run, result))
    except TaskCancelled:
        pass
    except TaskClosedError as exc:
        log.warning("executor for task %s kept going after the task closed: %s", run.task_id, exc)
    except StoreUnavailable:
        # The store logged its outage, and the run's writes waited for it as long as
        # the grace lasts; the task's state could not be written, so the keeper writes
        # FAILED as soon as the store answers again (this is the one line about it).
        if run.record is not None:
            log.warning("task %s stopped: the task store is unavailable (for longer than "
                        "A2A_STORE_GRACE, %gs); it is failed once the store answers again",
                        run.task_id, run.writer.store_grace)
            run.writer.fail_later(
                run.task_id, "The task store was unavailable while this task ran; the task "
                "stopped and can be sent again.")
            run.error = StoreUnavailable()  # a blocking send waiting on the run: 503 now
        elif run.reply is None:
            run.fail_to_start(StoreUnavailable())  # no task exists: the caller gets the 503
    except TaskTooLargeError as exc:  # a limit reached, not a bug: say which, no traceback
        log.warning("task %s failed: %s", run.task_id, exc)
        _fail_after_error(run, exc, f"The agent failed: {exc}")
    except Exception as exc:
        if run.writer.store.closed:  # the app shut down under a running executor
            log.info("executor for task %s stopped: its store was closed", run.task_id)
            return
        log.exception("executor for task %s raised", run.task_id)
        _fail_after_error(run, exc)


def _emit_item(ctx: TaskContext, item: Any) -> None:
    if isinstance(item, str):
        ctx._text_chunk(item)
    elif isinstance(item, Artifact):
        ctx._run.add_artifact(item)
    elif isinstance(item, Message):
        ctx.working(item)
    elif item is not None:
        ctx.artifact(item)


def _returned_artifact(run: Run, result: Any) -> Optional[Artifact]:
    """What a plain function's return value adds to its task: an artifact, or nothing
    (a returned Message is the reply, which completes a task that exists)."""
    if result is None:
        return None
    if isinstance(result, Message):
        run.set_reply(result)
        return None
    if isinstance(result, Artifact):
        return result
    return Artifact(artifact_id=new_id(), parts=to_parts(result))


def _fail_after_error(run: Run, exc: Exception, text: str = "") -> None:
    text = text or f"The agent failed: {type(exc).__name__}"
    try:
        record = run.ensure_task()
        if record is not None and not record.state.terminal:
            run.set_status(TaskState.FAILED, agent_message(text))
    except (TaskCancelled, TaskClosedError):
        pass
    except StoreUnavailable:  # logged by the store: record it when the store is back
        if run.record is not None:
            run.writer.fail_later(run.task_id, text)
        elif run.reply is None:
            run.fail_to_start(StoreUnavailable())  # no task exists: the caller gets the 503
    except Exception:  # the store failed too (or the task was purged): say so, once
        log.exception("could not record the failure of task %s", run.task_id)
