"""An agent for conformance test kits: behaviour chosen by the ``messageId`` prefix.

Run it::

    gunicorn -k gevent -b 127.0.0.1:8000 examples.conformance_agent:app

It declares push notifications.  Webhooks must be public addresses unless
``FLASK_A2A_PUSH_ALLOW_PRIVATE=1`` is set, which lets a local test kit
receive them on 127.0.0.1 (development only); hosts a kit registers but does
not call (``FLASK_A2A_PUSH_ALLOWED_HOSTS=example.com``) are accepted without a
DNS lookup.  ``FLASK_A2A_LEGACY_CARD=0`` serves the strict 1.0 card::

    FLASK_A2A_PUSH_ALLOW_PRIVATE=1 gunicorn -k gevent -b 127.0.0.1:8000 examples.conformance_agent:app

=================================  ==========================================================
messageId prefix                   behaviour
=================================  ==========================================================
``tck-complete-task``              completes with the text "Hello from TCK"
``tck-artifact-text``              a text artifact, then COMPLETED
``tck-artifact-file``              an inline file artifact (``raw``), then COMPLETED
``tck-artifact-file-url``          a file artifact by URL, then COMPLETED
``tck-artifact-data``              a data artifact, then COMPLETED
``tck-message-response``           a direct Message, no task
``tck-input-required``             INPUT_REQUIRED; a follow-up completes the task
``tck-reject-task``                REJECTED
``tck-stream-001``                 WORKING, a text artifact, COMPLETED
``tck-stream-003``                 the same
``tck-stream-ordering-001``        the same
``tck-stream-artifact-text``       the same
``tck-stream-002``                 COMPLETED at once
``tck-stream-artifact-file``       WORKING, an inline file artifact, COMPLETED
``tck-stream-artifact-chunked``    WORKING, one artifact in two appended chunks, COMPLETED
``test-resubscribe-message-id``    WORKING for about 4.5 s (cancelable), then COMPLETED
any other ``tck-``                 as ``tck-complete-task``
any other ``test-`` (0.3 kits)     INPUT_REQUIRED; a follow-up in the same task completes
                                   it; it can be canceled while it waits
anything else                      the text is echoed and the task completed
=================================  ==========================================================

The longest matching prefix wins.  The same messageId may arrive many times,
also as follow-ups on one task: it is never de-duplicated.
"""
import time

from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill, Part, TaskContext

a2a = A2A(
    card=AgentCard(
        name="A2A Flask conformance agent",
        description="Answers according to the messageId prefix, for protocol test kits.",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=True,
                                       extended_agent_card=False),
        default_input_modes=["text/plain", "application/json", "*/*"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(id="tck", name="Conformance behaviours",
                           description="Deterministic behaviours keyed by messageId prefix",
                           tags=["tck", "conformance"])],
    )
)

FILE_BYTES = b"Generated file content"


def complete_task(ctx: TaskContext) -> None:
    ctx.complete("Hello from TCK")


def artifact_text(ctx: TaskContext) -> None:
    ctx.artifact("Generated text content")
    ctx.complete()


def artifact_file(ctx: TaskContext) -> None:
    ctx.artifact(Part(raw=FILE_BYTES, filename="output.txt", media_type="text/plain"))
    ctx.complete()


def artifact_file_url(ctx: TaskContext) -> None:
    ctx.artifact(Part(url="https://example.com/output.txt", filename="output.txt",
                      media_type="text/plain"))
    ctx.complete()


def artifact_data(ctx: TaskContext) -> None:
    ctx.artifact(Part(data={"key": "value", "count": 42}, media_type="application/json"))
    ctx.complete()


def message_response(ctx: TaskContext) -> None:
    ctx.reply("Direct message response")


def input_required(ctx: TaskContext) -> None:
    if ctx.follow_up:
        ctx.complete("Thanks, got it")
    else:
        ctx.ask("Please provide more input")


def reject_task(ctx: TaskContext) -> None:
    ctx.reject("Task rejected")


def stream_text(ctx: TaskContext) -> None:
    ctx.working("Working")
    ctx.artifact("Streamed text content")
    ctx.complete()


def stream_completed_only(ctx: TaskContext) -> None:
    ctx.complete()


def stream_file(ctx: TaskContext) -> None:
    ctx.working("Working")
    ctx.artifact(Part(raw=FILE_BYTES, filename="output.txt", media_type="text/plain"))
    ctx.complete()


def stream_chunked(ctx: TaskContext) -> None:
    ctx.working("Working")
    chunk_id = "chunked-artifact"
    ctx.artifact("chunk-1 ", artifact_id=chunk_id, append=True)
    ctx.artifact("chunk-2", artifact_id=chunk_id, append=True, last_chunk=True)
    ctx.complete()


def slow_for_resubscribe(ctx: TaskContext) -> None:
    ctx.working("Working for a while")
    deadline = time.monotonic() + 4.5
    while time.monotonic() < deadline:
        if ctx.cancelled:
            return
        time.sleep(0.1)
    ctx.complete()


BEHAVIOURS = {
    "tck-complete-task": complete_task,
    "tck-artifact-text": artifact_text,
    "tck-artifact-file": artifact_file,
    "tck-artifact-file-url": artifact_file_url,
    "tck-artifact-data": artifact_data,
    "tck-message-response": message_response,
    "tck-input-required": input_required,
    "tck-reject-task": reject_task,
    "tck-stream-001": stream_text,
    "tck-stream-003": stream_text,
    "tck-stream-ordering-001": stream_text,
    "tck-stream-artifact-text": stream_text,
    "tck-stream-002": stream_completed_only,
    "tck-stream-artifact-file": stream_file,
    "tck-stream-artifact-chunked": stream_chunked,
    "test-resubscribe-message-id": slow_for_resubscribe,
}
#: Longest prefix first, so "tck-artifact-file-url" wins over "tck-artifact-file".
PREFIXES = sorted(BEHAVIOURS, key=len, reverse=True)


@a2a.executor
def conformance(ctx: TaskContext):
    message_id = ctx.message.message_id
    for prefix in PREFIXES:
        if message_id.startswith(prefix):
            return BEHAVIOURS[prefix](ctx)
    if message_id.startswith("tck-"):
        return complete_task(ctx)
    if message_id.startswith("test-"):
        return input_required(ctx)
    return ctx.text or "ok"


app = Flask(__name__)
app.config.from_prefixed_env()
a2a.init_app(app)
