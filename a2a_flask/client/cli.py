"""``a2a-flask``: talk to any A2A agent from the shell.

Every command takes the agent's base URL (its card is read from
``/.well-known/agent-card.json``) and prints what happens as it happens:
state changes, streamed artifact text, the final state.  ``--json`` prints the
1.0 JSON instead, one object per line.  See ``a2a-flask --help``.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from typing import Any, Callable, Dict, Iterable, Optional, Sequence, TextIO, Tuple

from ..protocol import codec
from ..protocol import models as m
from ..protocol.errors import (A2AConnectionError, A2AError, A2AException, A2ATimeoutError,
                               NoAgentError)
from . import A2AClient, parse_state
from .card import binding_name, generation
from .stream import EventStream

EXIT_OK = 0
EXIT_A2A_ERROR = 1
EXIT_USAGE = 2
EXIT_CONNECTION = 3
EXIT_TASK_FAILED = 4
EXIT_INTERRUPTED = 130

#: States after which ``send``/``stream``/``subscribe`` exit with EXIT_TASK_FAILED.
UNSUCCESSFUL = frozenset({m.TaskState.FAILED, m.TaskState.REJECTED, m.TaskState.CANCELED})

DEFAULT_TIMEOUT = (10.0, 300.0)

EPILOG = """\
exit status:
  0    success
  1    the agent answered with an A2A or HTTP error (e.g. task not found)
  2    usage error: bad arguments, or no agent at the URL given
  3    the agent could not be reached, or timed out
  4    the task ended FAILED, REJECTED or CANCELED (send, subscribe)
  130  interrupted (Ctrl-C)

examples:
  a2a-flask card http://127.0.0.1:8000
  a2a-flask send http://127.0.0.1:8000 "tell me a story" --stream
  a2a-flask send http://127.0.0.1:8000 "Paris" --task TASK_ID
  a2a-flask send http://127.0.0.1:8000 --file report.pdf --data '{"pages": 3}'
  a2a-flask list http://127.0.0.1:8000 --state working --json
"""


# ------------------------------------------------------------------ arguments


def _header(value: str) -> Tuple[str, str]:
    name, sep, content = value.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected 'Name: value', got {value!r}")
    return name.strip(), content.strip()


def _timeout(value: str) -> Tuple[float, float]:
    try:
        numbers = [float(v) for v in value.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SECONDS or CONNECT,READ, got {value!r}") from None
    if len(numbers) not in (1, 2) or any(n <= 0 for n in numbers):
        raise argparse.ArgumentTypeError(f"expected SECONDS or CONNECT,READ, got {value!r}")
    return (numbers[0], numbers[-1])


def _json_value(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None


def _common() -> argparse.ArgumentParser:
    """Options every command accepts, before or after its own arguments."""
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("connection options")
    group.add_argument("-H", "--header", action="append", type=_header, default=[],
                       metavar="'NAME: VALUE'", help="send this header (repeatable)")
    group.add_argument("--token", help="send 'Authorization: Bearer TOKEN'")
    group.add_argument("--tenant", default="", help="the tenant to address (A2A 1.0)")
    group.add_argument("--timeout", type=_timeout, default=DEFAULT_TIMEOUT,
                       metavar="SECONDS|CONNECT,READ",
                       help="connect and read timeouts (default 10,300); the read timeout is "
                            "also the longest silence accepted on a stream")
    group.add_argument("--prefer", action="append", default=[], metavar="BINDING@VERSION",
                       help="the interface to use if the card offers several: jsonrpc, rest, "
                            "1.0, 0.3, 0.1 or e.g. jsonrpc@0.3 (repeatable, tried in order)")
    group.add_argument("--no-card", action="store_true",
                       help="URL is the endpoint itself (no agent card): its binding and "
                            "version come from --prefer (default jsonrpc@1.0)")
    group.add_argument("--retries", type=int, default=3, metavar="N",
                       help="try a send N more times when no answer came (a broken "
                            "connection, a timeout, HTTP 502/503/504), with its one "
                            "Idempotency-Key: the agent runs it once (default 3; 0: never)")
    group.add_argument("--extension", action="append", default=[], metavar="URI",
                       help="activate an extension (A2A-Extensions header; repeatable)")
    group.add_argument("--json", action="store_true",
                       help="print 1.0 JSON (one object per line for streams)")
    return common


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(
        prog="a2a-flask", description="Talk to an A2A agent: read its card, send messages, "
        "stream answers, manage tasks.", epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def command(name: str, help_text: str, under: Any = commands) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = under.add_parser(
            name, help=help_text, description=help_text, parents=[common],
            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.add_argument("url", help="the agent's base URL (or its card's URL)")
        parser.commands.setdefault(name, sub)  # type: ignore[attr-defined]
        return sub

    parser.commands = {}  # type: ignore[attr-defined]  # name -> subparser, for usage lines
    card = command("card", "show the agent card")
    card.add_argument("--extended", action="store_true", help="fetch the extended card")

    send = command("send", "send a message (and wait for, or stream, the answer)")
    send.add_argument("text", nargs="?", help="the message text")
    send.add_argument("--file", help="attach a file (sent as bytes, media type guessed)")
    send.add_argument("--data", type=_json_value, metavar="JSON", help="attach JSON data")
    send.add_argument("--context", default="", metavar="CONTEXT_ID",
                      help="continue this conversation")
    send.add_argument("--task", default="", metavar="TASK_ID",
                      help="answer this task (one waiting for input)")
    send.add_argument("--stream", action="store_true", help="show the answer as it arrives")
    send.add_argument("--idempotency-key", default=None, metavar="KEY",
                      help="name this send (default: a fresh UUID): sent again with the same "
                           "key and message, the agent answers the first send's task")
    send.add_argument("--no-wait", action="store_true",
                      help="return at once with the task (do not wait for the answer)")

    get = command("get", "show a task")
    get.add_argument("task_id")
    get.add_argument("--history", type=int, metavar="N", help="at most N history messages")

    listing = command("list", "list tasks, most recently updated first (A2A 1.0)")
    listing.add_argument("--context", default="", metavar="CONTEXT_ID")
    listing.add_argument("--state", help="only tasks in this state (e.g. working)")
    listing.add_argument("--page-size", type=int, metavar="N")
    listing.add_argument("--page-token", default="", metavar="TOKEN")
    listing.add_argument("--artifacts", action="store_true", help="include artifacts")

    cancel = command("cancel", "cancel a task")
    cancel.add_argument("task_id")

    subscribe = command("subscribe", "follow a running task's events")
    subscribe.add_argument("task_id")

    push = commands.add_parser("push", help="manage a task's push notification webhooks",
                               description="manage a task's push notification webhooks")
    actions = push.add_subparsers(dest="push_command", metavar="ACTION", required=True)
    push_set = command("set", "register a webhook for a task", actions)
    push_set.add_argument("task_id")
    push_set.add_argument("webhook", help="the URL the agent will POST updates to")
    push_set.add_argument("--id", default="", dest="config_id", help="the config id to use")
    push_set.add_argument("--push-token", default="", help="a token the agent sends back")
    push_set.add_argument("--auth", metavar="'SCHEME CREDENTIALS'",
                          help="credentials the agent sends as Authorization")
    push_get = command("get", "show a webhook config", actions)
    push_get.add_argument("task_id")
    push_get.add_argument("config_id", nargs="?", default="")
    push_list = command("list", "list a task's webhook configs", actions)
    push_list.add_argument("task_id")
    push_delete = command("delete", "remove a webhook config", actions)
    push_delete.add_argument("task_id")
    push_delete.add_argument("config_id")
    return parser


# ------------------------------------------------------------------ output


class Printer:
    """Human output: one line per state change, artifact text as it streams in."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.at_line_start = True
        self.state: Optional[m.TaskState] = None
        self.task_id = ""

    def write(self, text: str) -> None:
        if not text:
            return
        self.out.write(text)
        self.out.flush()
        self.at_line_start = text.endswith("\n")

    def line(self, text: str) -> None:
        if not self.at_line_start:
            self.write("\n")
        self.write(text + "\n")

    def status(self, status: m.TaskStatus, prefix: str = "") -> None:
        words = status_text(status)
        if status.state is self.state and not words:
            return
        self.state = status.state
        head = f"[{state_name(status.state)}]" + (f" {prefix}" if prefix else "")
        self.line(head + (f"{':' if prefix else ''} {words}" if words else ""))

    def parts(self, parts: Iterable[m.Part]) -> None:
        for part in parts:
            if part.text is not None:
                self.write(part.text)
            else:
                self.line(describe_part(part))

    def event(self, event: Any) -> None:
        if isinstance(event, m.Task):
            self.task_id = event.id
            self.status(event.status, f"task {event.id}")
            for artifact in event.artifacts:
                self.parts(artifact.parts)
        elif isinstance(event, m.Message):
            self.parts(event.parts)
        elif isinstance(event, m.TaskStatusUpdateEvent):
            self.task_id = event.task_id or self.task_id
            self.status(event.status)
        elif isinstance(event, m.TaskArtifactUpdateEvent):
            self.parts(event.artifact.parts)

    def finish(self) -> None:
        if not self.at_line_start:
            self.write("\n")


def state_name(state: m.TaskState) -> str:
    """``TASK_STATE_INPUT_REQUIRED`` -> ``input-required``."""
    return state.value.replace("TASK_STATE_", "").lower().replace("_", "-")


def status_text(status: m.TaskStatus) -> str:
    return status.message.text if status.message is not None else ""


def describe_scheme(scheme: Dict[str, Any]) -> str:
    """A 1.0 (or 0.3-style) SecurityScheme in a few words: ``Bearer``, ``API key in X-Key``."""
    http = scheme.get("httpAuthSecurityScheme") or (scheme if scheme.get("type") == "http" else None)
    if http:
        return str(http.get("scheme", "HTTP")).capitalize()
    key = scheme.get("apiKeySecurityScheme") or (scheme if scheme.get("type") == "apiKey" else None)
    if key:
        return f"API key in {key.get('location', key.get('in', '?'))} {key.get('name', '')}".rstrip()
    for member, words in (("oauth2SecurityScheme", "OAuth 2"), ("openIdConnectSecurityScheme",
                                                                "OpenID Connect"),
                          ("mtlsSecurityScheme", "mutual TLS")):
        if member in scheme:
            return words
    return str(scheme.get("type", "unknown"))


def describe_part(part: m.Part) -> str:
    if part.raw is not None:
        return (f"[file {part.filename or '(unnamed)'}, {part.media_type or 'unknown type'}, "
                f"{len(part.raw)} bytes]")
    if part.url is not None:
        return f"[file {part.url}{', ' + part.media_type if part.media_type else ''}]"
    return json.dumps(part.data, ensure_ascii=False)


def dump(value: Any, out: TextIO) -> None:
    out.write(json.dumps(value, ensure_ascii=False, separators=(",", ":")) + "\n")
    out.flush()


_EVENT_KEYS = {m.Task: "task", m.Message: "message", m.TaskStatusUpdateEvent: "statusUpdate",
               m.TaskArtifactUpdateEvent: "artifactUpdate"}


def event_json(event: Any) -> Dict[str, Any]:
    """A 1.0 StreamResponse/SendMessageResponse object: ``{"task": ...}`` etc."""
    return {_EVENT_KEYS[type(event)]: codec.encode(event)}


# ------------------------------------------------------------------ commands


class Command:
    """One parsed invocation: the client, where to print, and the exit status."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err

    def client(self) -> A2AClient:
        args = self.args
        options: Dict[str, Any] = dict(headers=dict(args.header), token=args.token,
                                       tenant=args.tenant, timeout=args.timeout,
                                       extensions=args.extension,
                                       retries=max(args.retries, 0))
        if args.no_card:
            wanted = (args.prefer or ["jsonrpc@1.0"])[0]
            binding, version = "JSONRPC", "1.0"
            for token in wanted.replace("@", " ").split():
                if token[:1].isdigit():
                    version = generation(token)
                else:
                    binding = binding_name(token)
            return A2AClient(args.url, binding=binding, version=version, **options)
        return A2AClient.connect(args.url, prefer=args.prefer or None, **options)

    def note(self, text: str) -> None:
        """A hint for people, on stderr (never in --json output)."""
        if not self.args.json:
            self.err.write(text + "\n")
            self.err.flush()

    def outcome(self, state: Optional[m.TaskState], task_id: str) -> int:
        if state is m.TaskState.INPUT_REQUIRED and task_id:
            self.note(f"(the agent waits for input: a2a-flask send {self.args.url} \"...\" "
                      f"--task {task_id})")
        return EXIT_TASK_FAILED if state in UNSUCCESSFUL else EXIT_OK

    def follow(self, events: EventStream) -> int:
        printer = Printer(self.out)
        state: Optional[m.TaskState] = None
        with events:
            for event in events:
                if self.args.json:
                    dump(event_json(event), self.out)
                else:
                    printer.event(event)
                if isinstance(event, m.Task):
                    state = event.status.state
                elif isinstance(event, m.TaskStatusUpdateEvent):
                    state = event.status.state
        printer.finish()
        return self.outcome(state, events.task_id)

    # each command ------------------------------------------------

    def card(self, client: A2AClient) -> int:
        card = client.get_extended_card() if self.args.extended else client.card
        if card is None:
            raise A2AException("No card: --no-card was given")
        if self.args.json:
            dump(codec.encode(card), self.out)
            return EXIT_OK
        lines = [f"{card.name} {card.version}".rstrip(), card.description, "", "interfaces:"]
        for iface in card.supported_interfaces:
            chosen = iface.url == client.interface.url and \
                iface.protocol_binding == client.interface.protocol_binding and \
                generation(iface.protocol_version) == generation(client.interface.protocol_version)
            lines.append(f"  {'*' if chosen else ' '} {iface.protocol_binding:<9} "
                         f"{iface.protocol_version:<5} {iface.url}"
                         f"{'  tenant=' + iface.tenant if iface.tenant else ''}")
        used = client.interface
        lines.append(f"using: {used.protocol_binding} {used.protocol_version} {used.url}")
        caps = card.capabilities
        flags = [name for name, on in (("streaming", caps.streaming),
                                       ("push notifications", caps.push_notifications),
                                       ("extended card", caps.extended_agent_card)) if on]
        lines.append("capabilities: " + (", ".join(flags) or "none"))
        for name, scheme in card.security_schemes.items():
            lines.append(f"auth: {name} ({describe_scheme(scheme)})")
        for ext in caps.extensions:
            lines.append(f"extension: {ext.uri}{' (required)' if ext.required else ''}")
        if card.skills:
            lines.append("skills:")
            for skill in card.skills:
                lines.append(f"  - {skill.name} ({skill.id}): {skill.description}")
                for example in skill.examples:
                    lines.append(f"      e.g. {example}")
        self.out.write("\n".join(lines) + "\n")
        return EXIT_OK

    def send(self, client: A2AClient) -> int:
        args = self.args
        content: Dict[str, Any] = dict(file=args.file, context_id=args.context or None,
                                       task_id=args.task or None,
                                       idempotency_key=args.idempotency_key)
        if args.data is not None:
            content["data"] = args.data
        if args.stream:
            return self.follow(client.send_streaming_message(args.text, **content))
        reply = client.send_message(args.text, return_immediately=args.no_wait, **content)
        if args.json:
            dump(event_json(reply), self.out)
        else:
            printer = Printer(self.out)
            printer.event(reply)
            printer.finish()
        if isinstance(reply, m.Task):
            return self.outcome(reply.status.state, reply.id)
        return EXIT_OK

    def get(self, client: A2AClient) -> int:
        task = client.get_task(self.args.task_id, self.args.history)
        if self.args.json:
            dump(codec.encode(task), self.out)
            return EXIT_OK
        printer = Printer(self.out)
        printer.line(f"task {task.id}  context {task.context_id}")
        printer.status(task.status)
        for message in task.history:
            who = "user" if message.role is m.Role.USER else "agent"
            printer.line(f"  {who}: {message.text or ', '.join(map(describe_part, message.parts))}")
        for artifact in task.artifacts:
            printer.line(f"artifact {artifact.name or artifact.artifact_id}:")
            printer.parts(artifact.parts)
        printer.finish()
        return EXIT_OK

    def list(self, client: A2AClient) -> int:
        args = self.args
        page = client.list_tasks(context_id=args.context, state=args.state,
                                 page_size=args.page_size, page_token=args.page_token,
                                 include_artifacts=True if args.artifacts else None)
        if args.json:
            dump(codec.encode(page), self.out)
            return EXIT_OK
        for task in page.tasks:
            self.out.write(f"{task.id}  {state_name(task.status.state):<14} "
                           f"{task.status.timestamp or '':<24}  {task.context_id}\n")
        self.out.write(f"({len(page.tasks)} of {page.total_size} tasks"
                       f"{'; next page: --page-token ' + page.next_page_token if page.next_page_token else ''})\n")
        return EXIT_OK

    def cancel(self, client: A2AClient) -> int:
        task = client.cancel_task(self.args.task_id)
        if self.args.json:
            dump(codec.encode(task), self.out)
        else:
            Printer(self.out).status(task.status, f"task {task.id}")
        return EXIT_OK

    def subscribe(self, client: A2AClient) -> int:
        return self.follow(client.subscribe_to_task(self.args.task_id))

    def push(self, client: A2AClient) -> int:
        args = self.args
        action = args.push_command
        if action == "set":
            auth = None
            if args.auth:
                scheme, _, credentials = args.auth.strip().partition(" ")
                auth = (scheme, credentials.strip())
            configs = [client.create_push_config(args.task_id, args.webhook,
                                                 token=args.push_token,
                                                 config_id=args.config_id, authentication=auth)]
        elif action == "get":
            configs = [client.get_push_config(args.task_id, args.config_id)]
        elif action == "list":
            configs = client.list_push_configs(args.task_id)
            if args.json:
                dump({"configs": codec.encode(configs)}, self.out)
                return EXIT_OK
        else:
            client.delete_push_config(args.task_id, args.config_id)
            if args.json:
                dump({}, self.out)
            else:
                self.out.write(f"deleted push config {args.config_id} of task {args.task_id}\n")
            return EXIT_OK
        if args.json:
            dump(codec.encode(configs[0]), self.out)
            return EXIT_OK
        for config in configs:
            auth_text = f"  auth {config.authentication.scheme}" if config.authentication else ""
            self.out.write(f"{config.id or '(no id)'}  task {config.task_id}  {config.url}"
                           f"{'  token ' + config.token if config.token else ''}{auth_text}\n")
        if not configs:
            self.out.write(f"(no push configs for task {args.task_id})\n")
        return EXIT_OK


def describe_error(exc: A2AException) -> str:
    """``TaskNotFoundError (-32001 TASK_NOT_FOUND): Task not found`` and the like."""
    if not isinstance(exc, A2AError):
        return f"error: {type(exc).__name__}: {exc.message}"
    lines = [f"error: {type(exc).__name__} ({exc.code} {exc.reason}): {exc.message}"]
    lines += [f"  {field or '?'}: {description}" for field, description in exc.violations]
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None, *, stdout: Optional[TextIO] = None,
         stderr: Optional[TextIO] = None) -> int:
    """Run the CLI; returns the exit status (see ``a2a-flask --help``)."""
    out, err = stdout or sys.stdout, stderr or sys.stderr
    parser = build_parser()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or a usage error (2)
        return int(exc.code or 0)
    if args.command == "send" and args.text is None and args.file is None and args.data is None:
        parser.commands["send"].print_usage(err)  # type: ignore[attr-defined]
        err.write("a2a-flask send: error: give a message text, --file or --data\n")
        return EXIT_USAGE
    if getattr(args, "state", None):
        try:
            parse_state(args.state)
        except ValueError as exc:
            err.write(f"a2a-flask list: error: {exc}\n")
            return EXIT_USAGE
    runner = Command(args, out, err)
    handler: Callable[[A2AClient], int] = getattr(runner, args.command)
    try:
        with runner.client() as client:
            return handler(client)
    except A2AConnectionError as exc:
        kind = "timeout" if isinstance(exc, A2ATimeoutError) else "connection error"
        err.write(f"{kind}: {exc.message}\n")
        return EXIT_CONNECTION
    except NoAgentError as exc:  # the host answered, but the URL is not an agent's
        err.write(f"error: {exc.message}\n")
        return EXIT_USAGE
    except A2AException as exc:
        err.write(describe_error(exc) + "\n")
        return EXIT_A2A_ERROR
    except BrokenPipeError:
        # `a2a-flask ... | head`: stop quietly, and keep Python from complaining at exit.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())
        except (AttributeError, OSError, ValueError):
            pass  # not a real file: nothing will be flushed at exit anyway
        return EXIT_OK
    except OSError as exc:  # --file that cannot be read
        err.write(f"error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.write("interrupted\n")
        return EXIT_INTERRUPTED


__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_A2A_ERROR", "EXIT_USAGE",
           "EXIT_CONNECTION", "EXIT_TASK_FAILED", "EXIT_INTERRUPTED"]
