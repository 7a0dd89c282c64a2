"""Shared pieces of the property-based fuzz suite (tests/fuzz/test_fuzz_*.py).

* a hypothesis settings profile: derandomized, no example database, bounded
  example counts (``A2A_FUZZ_EXAMPLES`` scales them for a deeper local run);
* :class:`World`: an app whose executor and run launches are recorded, with
  seeded tasks (completed, input-required, working) and a seeded push config,
  and a snapshot of everything a request could change;
* strategies for hostile JSON values, strings, ids and wrongly typed values;
* the answer checks every fuzzed request goes through.

Seeded task ids are written into generated requests as markers (``SEED[...]``)
and resolved when the request is sent, so a seed that a *successful* request
changed (a cancel, a continued input-required task) can be replaced without the
strategies knowing.
"""
from __future__ import annotations

import dataclasses
import json
import re
import os
import threading
import time
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional, Tuple

from flask import Flask
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from werkzeug.http import parse_options_header

from a2a_flask import A2A, AgentCapabilities, AgentExtension
from a2a_flask.protocol.codec import encode
from a2a_flask.protocol.models import GetTaskRequest, Role, TaskState
from a2a_flask.engine.service import CallContext

from tests.conftest import make_card
from tests.support.helpers import ALICE, bearer_auth, card_v1_view, validate

from a2a_flask.engine.service import MAX_ID_LENGTH  # the id policy: longer ids are -32602

# ------------------------------------------------------------------ settings

#: Base example count per property; each test scales it.  CI runs the default;
#: ``A2A_FUZZ_EXAMPLES=2000 pytest tests/fuzz/test_fuzz_*.py`` digs deeper.
EXAMPLES = int(os.environ.get("A2A_FUZZ_EXAMPLES", "60"))

settings.register_profile(
    "a2a-fuzz",
    derandomize=True,  # a fixed seed: the same examples on every run
    database=None,  # nothing remembered between runs (CI is deterministic)
    deadline=None,
    max_examples=EXAMPLES,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                           HealthCheck.data_too_large, HealthCheck.filter_too_much,
                           HealthCheck.large_base_example],
)
#: Apply to each test (the profile is not loaded globally, so other test modules
#: that might use hypothesis keep their own settings).
FUZZ = settings.get_profile("a2a-fuzz")


def fuzz(scale: float = 1.0) -> settings:
    """The profile with ``scale`` times the base example count."""
    return settings(FUZZ, max_examples=max(10, int(EXAMPLES * scale)))


# ------------------------------------------------------------------ the world

SECRET = "7f3a9c"  # executor behaviours are keyed by texts hypothesis never draws
ASK, HOLD, DONE = f"ask-{SECRET}", f"hold-{SECRET}", f"done-{SECRET}"

SEED_COMPLETED = "SEED[completed]"
SEED_INPUT = "SEED[input]"
SEED_WORKING = "SEED[working]"
SEED_CONFIG = "SEED[config]"  # the push config id on the completed task
SEEDS = (SEED_COMPLETED, SEED_INPUT, SEED_WORKING)

OPTIONAL_EXT = "https://example.com/ext/fuzz-optional/v1"
REQUIRED_EXT = "https://example.com/ext/fuzz-required/v1"
HOOK_URL = "http://127.0.0.1:9/hook"  # the discard port: nothing listens
ROOT, V03 = "/a2a/rest", "/a2a/rest/v1"  # the REST roots of 1.0 and 0.3
#: The fuzzer calls as alice (who owns the seeds); bob is the intruder.
OWNER = "alice"
MAX_BODY = 1024 * 1024  # A2A_MAX_CONTENT_LENGTH of the fuzzed apps
MAX_PARTS = 100
MAX_FILE = 4096


@dataclasses.dataclass(frozen=True)
class Flavor:
    """What the card declares (each missing capability has its own error)."""

    name: str
    streaming: bool = True
    push: bool = True
    extended: bool = True
    required_extension: bool = False


FULL = Flavor("full")
BARE = Flavor("bare", streaming=False, push=False, extended=False)
STRICT = Flavor("strict", push=False, extended=False, required_extension=True)


class World:
    """One app under fuzz: recorded executor calls and run launches, seeded tasks."""

    def __init__(self, flavor: Flavor = FULL) -> None:
        self.flavor = flavor
        self.calls: List[Tuple[str, str]] = []
        self.launches: List[Any] = []
        self.gate = threading.Event()
        extensions = [AgentExtension(uri=OPTIONAL_EXT, description="optional")]
        if flavor.required_extension:
            extensions.append(AgentExtension(uri=REQUIRED_EXT, description="required",
                                             required=True))
        card = make_card(
            capabilities=AgentCapabilities(streaming=flavor.streaming,
                                           push_notifications=flavor.push,
                                           extensions=extensions),
            default_input_modes=["text/plain", "application/json"],
        )
        extended = make_card(name="Extended test agent") if flavor.extended else None
        self.app = Flask(f"fuzz_{flavor.name}")
        self.app.config.update(
            A2A_CANCEL_GRACE=0.2, A2A_SSE_KEEPALIVE=0.2, A2A_BLOCKING_TIMEOUT=0.5,
            A2A_PUSH_ALLOW_PRIVATE=True, A2A_MAX_CONTENT_LENGTH=MAX_BODY,
            A2A_MAX_PARTS=MAX_PARTS, A2A_MAX_FILE_SIZE=MAX_FILE, A2A_MAX_STREAMS_PER_CALLER=0,
            A2A_PUSH_MAX_ATTEMPTS=1, A2A_PUSH_TIMEOUT=1,
        )
        A2A(self.app, card=card, executor=self._execute, store="memory://",
            extended_card=extended, auth=bearer_auth())
        self.state = self.app.extensions["a2a"]["a2a"]
        self.service = self.state.service
        self.store = self.state.store
        runs = self.service.runtime.runs
        launch = runs._launch  # record launches synchronously (a test-only wrap)

        def recording_launch(run: Any) -> None:
            self.launches.append(run)
            launch(run)

        runs._launch = recording_launch  # type: ignore[method-assign]
        self.client = self.app.test_client()
        self.ids: Dict[str, str] = {}
        #: Sent with every request unless a test says otherwise: alice's credentials
        #: (and the required extension of the strict flavor).
        self.required_headers: Dict[str, str] = dict(ALICE)
        if flavor.required_extension:
            self.required_headers["A2A-Extensions"] = REQUIRED_EXT
        for slot in SEEDS:
            self.seed(slot)
        self.seed_config()

    # -- the agent

    def _execute(self, ctx: Any) -> Any:
        self.calls.append((ctx.task_id, ctx.text))
        if ctx.text == ASK:
            ctx.ask("Which one?")
            return None
        if ctx.text == HOLD:
            ctx.working("holding")
            while not self.gate.wait(0.02):
                if ctx.cancelled:
                    return None
            return "released"
        return "echo"

    # -- seeds

    def _send(self, text: str, wait_for: TaskState) -> str:
        body = {"jsonrpc": "2.0", "id": "seed", "method": "SendMessage", "params": {
            "message": {"messageId": f"seed-{time.monotonic_ns()}", "role": "ROLE_USER",
                        "parts": [{"text": text}]},
            "configuration": {"returnImmediately": True}}}
        response = self.client.post("/a2a", json=body,
                                    headers={"A2A-Version": "1.0", **self.required_headers})
        task_id = response.get_json()["result"]["task"]["id"]
        deadline = time.monotonic() + 10
        while self.store.load(task_id).state is not wait_for:
            assert time.monotonic() < deadline, f"seed {text} never reached {wait_for}"
            time.sleep(0.005)
        return task_id

    def seed(self, slot: str) -> None:
        text, state = {SEED_COMPLETED: (DONE, TaskState.COMPLETED),
                       SEED_INPUT: (ASK, TaskState.INPUT_REQUIRED),
                       SEED_WORKING: (HOLD, TaskState.WORKING)}[slot]
        self.ids[slot] = self._send(text, state)
        self.settle()

    def seed_config(self) -> None:
        self.ids[SEED_CONFIG] = "cfg-seed"
        if not self.flavor.push:
            return
        body = {"jsonrpc": "2.0", "id": "seed", "method": "CreateTaskPushNotificationConfig",
                "params": {"taskId": self.ids[SEED_COMPLETED], "id": "cfg-seed",
                           "url": HOOK_URL}}
        answer = self.client.post("/a2a", json=body, headers={"A2A-Version": "1.0",
                                                              **self.required_headers}).get_json()
        assert "result" in answer, answer

    EXPECTED = {SEED_COMPLETED: TaskState.COMPLETED, SEED_INPUT: TaskState.INPUT_REQUIRED,
                SEED_WORKING: TaskState.WORKING}

    def restore(self) -> None:
        """After a successful request: wait for its runs, replace seeds it changed."""
        self.settle()
        for slot, state in self.EXPECTED.items():
            record = self.store.load(self.ids[slot])
            if record is None or record.state is not state:
                self.seed(slot)
        if self.flavor.push and not any(
                c.id == "cfg-seed" for c in self._push_configs(self.ids[SEED_COMPLETED])):
            self.seed_config()

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until every launched run (but the held ones) has finished."""
        deadline = time.monotonic() + timeout
        for run in self.launches:
            if run.task_id == self.ids.get(SEED_WORKING) and not run.finished.is_set():
                continue
            while not run.finished.wait(0.01):
                if time.monotonic() > deadline:
                    break
        self.launches = [r for r in self.launches if not r.finished.is_set()]

    def close(self) -> None:
        self.gate.set()
        self.settle(5)
        self.state.close()

    # -- resolving markers

    def resolve(self, value: Any) -> Any:
        """Replace seed markers (exact strings, and inside longer strings) by real ids."""
        if isinstance(value, str):
            if "SEED[" not in value:
                return value
            for marker, real in self.ids.items():
                value = value.replace(marker, real)
            return value
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if isinstance(value, dict):
            return {self.resolve(k): self.resolve(v) for k, v in value.items()}
        return value

    # -- what a request could change

    def _push_configs(self, task_id: str) -> List[Any]:
        for name in ("push_configs", "push_targets"):
            reader = getattr(self.store, name, None)
            if reader is not None:
                found = reader(task_id)
                return [getattr(c, "config", c) for c in found]
        return []

    def snapshot(self) -> Dict[str, Any]:
        """Every task (id, tenant, sequence number, state), push configs, calls, launches,
        and the full GetTask view of each seeded task."""
        records = dict(self.store._records)  # the memory store's table (test-only read)
        tasks = {tid: (r.tenant, r.owner, r.seq, r.state.value) for tid, r in records.items()}
        push = {tid: sorted(repr(encode(c)) for c in self._push_configs(tid)) for tid in records}
        seeds = {}
        for slot in SEEDS:
            task = self.service.get_task(GetTaskRequest(id=self.ids[slot]),
                                         CallContext(owner=OWNER))
            seeds[slot] = encode(task)
        return {"tasks": tasks, "push": push, "seeds": seeds,
                "calls": len(self.calls), "launches": len(self.launches)}

    def assert_unchanged(self, before: Dict[str, Any], what: str) -> None:
        after = self.snapshot()
        if after == before:
            return
        lines = [f"a rejected request changed state: {what}"]
        for key in before:
            if before[key] != after[key]:
                if isinstance(before[key], dict):
                    new = {k: v for k, v in after[key].items() if before[key].get(k) != v}
                    gone = [k for k in before[key] if k not in after[key]]
                    lines.append(f"  {key}: changed/new {str(new)[:600]} gone {gone}")
                else:
                    lines.append(f"  {key}: {before[key]} -> {after[key]}")
        raise AssertionError("\n".join(lines))


# ------------------------------------------------------------------ strategies

#: Text without lone surrogates (those have their own tests).
def text(min_size: int = 0, max_size: int = 24) -> st.SearchStrategy[str]:
    return st.text(st.characters(blacklist_categories=("Cs",)), min_size=min_size,
                   max_size=max_size)


HOSTILE_STRINGS = [
    "", " ", "\t", "\x00", "a\x00b", "\u2028", "\u2029", "\x85", "\ufeff", "\u202e",
    "\u200b", "../", "../../etc/passwd", "..", ".", "%2e%2e%2f", "..\\..\\", "/", "//x",
    "a/b", "a:b", "x:cancel", "?x=1", "#frag", "%00", "%", "null", "undefined", "NaN",
    "true", "0", "-1", "<script>alert(1)</script>", "' OR 1=1 --", "${jndi:ldap://x}",
    "{{7*7}}", "\r\n", "é", "ünïcødé", "日本語", "😀", "\U0001f4a9" * 10, "ℌ𝔢𝔩𝔩𝔬",
    "\u0301\u0301\u0301", "Ａ２Ａ", "\x7f", "\x1b[31m", "a" * 257, "b" * 4096,
]
hostile_text = st.one_of(
    st.sampled_from(HOSTILE_STRINGS),
    text(),
    st.builds(lambda c, n: c * n, st.sampled_from("xé😀\x00\u2028"),
              st.sampled_from([1_000, 70_000, 300_000])),
)

#: JSON has no NaN or Infinity (json.dumps would write them; the server rightly refuses).
finite_floats = st.floats(allow_nan=False, allow_infinity=False)
keys = st.one_of(st.sampled_from(["id", "kind", "type", "text", "__proto__", "", "a" * 100]),
                 text(max_size=12))
json_scalars = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    finite_floats,
    st.sampled_from(HOSTILE_STRINGS[:30]), text(max_size=12),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=10,
)
json_objects = st.dictionaries(keys, json_values, max_size=5)


def nested(depth: int, leaf: Any = 1) -> Any:
    """A value nested ``depth`` levels deep (alternating arrays and objects)."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"n": value}
    return value


#: Depths the JSON parsers must take; deeper nesting has its own test.
deep_values = st.builds(nested, st.integers(min_value=1, max_value=200))

not_none = lambda v: v is not None  # noqa: E731

wrong_for_string = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    finite_floats, st.booleans(),
    st.lists(json_scalars, max_size=3), st.dictionaries(keys, json_scalars, max_size=3))
wrong_for_object = st.one_of(
    st.integers(), finite_floats, st.booleans(), hostile_text,
    st.lists(json_values, max_size=3))
wrong_for_list = st.one_of(
    st.integers(), finite_floats, st.booleans(), hostile_text,
    st.dictionaries(keys, json_scalars, max_size=3))
wrong_for_bool = st.one_of(
    st.integers(), finite_floats, st.sampled_from(["true", "false", "1", ""]),
    hostile_text, st.lists(json_scalars, max_size=2), st.dictionaries(keys, json_scalars,
                                                                       max_size=2))


def _int_accepted(text: str) -> bool:
    """Whether Python's int() takes a string (it is lenient: " 1", "1_0", "١")."""
    try:
        int(text)
        return True
    except ValueError:
        return False


#: Values that are not an int32 at all (any integer field answers -32602).
not_an_int = st.one_of(
    st.booleans(),
    finite_floats.filter(lambda f: not f.is_integer() or abs(f) >= 2**31),
    st.integers(min_value=2**31, max_value=2**80),
    st.integers(min_value=-(2**80), max_value=-(2**31) - 1),
    st.sampled_from(["abc", "1.5", "", " ", "0x10", "1e3", "NaN", "Infinity", "--1", "1 2",
                     "+-3", "9" * 30]),
    text(max_size=8).filter(lambda s: not _int_accepted(s)),
    st.lists(st.integers(), max_size=2), st.dictionaries(keys, st.integers(), max_size=2),
)
negative_ints = st.one_of(st.integers(min_value=-(2**31), max_value=-1),
                          st.sampled_from([-1, "-1", -1.0, "-2147483648"]))
bad_page_sizes = st.one_of(st.sampled_from([0, "0", 101, "101", 150, -1, 2**31 - 1]),
                           st.integers(min_value=-(2**31), max_value=0),
                           st.integers(min_value=101, max_value=2**31 - 1))
good_history = st.one_of(st.integers(min_value=0, max_value=2**31 - 1),
                         st.sampled_from([0, 1, "3", 2.0, 10**6]))

STATE_NAMES = [s.value for s in TaskState]
bad_states = st.one_of(
    st.sampled_from(["completed", "TASK_STATE_CANCELLED", "task_state_working", "WORKING",
                     "", " TASK_STATE_WORKING", "TASK_STATE_WORKING\x00"]),
    text().filter(lambda s: s not in STATE_NAMES),
    st.integers(min_value=len(STATE_NAMES), max_value=2**40), st.integers(max_value=-1),
    finite_floats.filter(lambda f: not f.is_integer()), st.booleans(),
    st.lists(st.sampled_from(STATE_NAMES), max_size=2),
)
USER_INDEX = list(Role).index(Role.USER)
bad_roles_v1 = st.one_of(
    st.sampled_from(["ROLE_AGENT", "ROLE_UNSPECIFIED", "user", "agent", "role_user", "USER",
                     "", 0, 2, 3, -1, 1.5, True]),
    text().filter(lambda s: s != "ROLE_USER"),
    st.lists(st.just("ROLE_USER"), min_size=1, max_size=2), st.dictionaries(keys, json_scalars,
                                                                            max_size=2),
)
#: Base64 with a character outside both alphabets.
bad_base64 = st.builds(lambda head, bad, tail: head + bad + tail,
                       st.text("ABCDabcd0123", max_size=8),
                       st.sampled_from(list("!*#$ é\x00\u2028.,;")),
                       st.text("ABCDabcd0123", max_size=8))
bad_timestamps = st.one_of(
    st.sampled_from(["yesterday", "2024-13-01T00:00:00Z", "2024-01-01", "2024-01-01T00:00:00",
                     "2024-02-30T00:00:00Z", "T", "2024-01-01T25:00:00Z", "0", "now",
                     "2024-01-01T00:00:00+25:00", "2024-01-01 00:00:00 UTC", "Z"]),
    text(min_size=1).filter(lambda s: s.strip() and not s.strip()[:1].isdigit()),
)
#: Out-of-range offsets datetime can parse but not convert to UTC (see its own test).
overflowing_timestamps = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"]

def bad_id(value: Any) -> bool:
    """An id the server's policy refuses with -32602: longer than
    MAX_ID_LENGTH or holding control characters."""
    return isinstance(value, str) and (len(value) > MAX_ID_LENGTH or any(
        ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in value))


#: Task ids nobody has: plain ones, and hostile ones (see :func:`bad_id`).
unknown_ids = st.builds(lambda n: f"no-such-task-{n}", st.integers(0, 10**9))
hostile_ids = st.one_of(
    st.sampled_from([s for s in HOSTILE_STRINGS if s]), text(min_size=1),
    st.builds(lambda n: "x" * n, st.sampled_from([1024, 65_536, 1_000_000])))

a2a_version_garbage = st.one_of(
    st.sampled_from(["2.0", "0.5", "1.1", "0.1", "1", "1.0.0.0", "v1.0", "1.0-beta", "1,0",
                     "latest", "*", "-1.0", "1.-1", "0x1.0", "1.0;q=1", "１.０", "1.0 0.3",
                     # Long numbers: test_a_huge_version_number_is_version_not_supported.
                     "99999999999999999999.0", "1." + "0" * 4000]),
    st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=20),
)
header_garbage = st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=60)
#: ``Last-Event-ID`` values that are not a resume point (ignored).  Values that
#: ``str.isdigit`` takes but ``int`` does not ("²", 5000 digits):
#: test_a_last_event_id_of_odd_digits_is_ignored.
last_event_id_garbage = header_garbage.filter(lambda v: not v.strip().isdigit())


# ------------------------------------------------------------------ oracles

#: The server's rule: Major.Minor[.patch], each at most nine digits.
_VERSION_RE = re.compile(r"^\s*(\d{1,9})\.(\d{1,9})(?:\.\d{1,9})?\s*$")


def served_version(raw: Optional[str]) -> Optional[str]:
    """The dialect a JSON-RPC ``A2A-Version`` value selects, or None (-32009).

    Spec §3.6: ``Major.Minor`` with patch numbers ignored, empty or missing = 0.3;
    0.2 is served by the 0.3 dialect."""
    if raw is None or not raw.strip():
        return "0.3"
    match = _VERSION_RE.match(raw)
    if not match:
        return None
    version = f"{int(match.group(1))}.{int(match.group(2))}"
    return {"1.0": "1.0", "0.3": "0.3", "0.2": "0.3"}.get(version)


def rest_version_ok(raw: Optional[str], route_version: str) -> bool:
    if raw is None or not raw.strip():
        return True
    match = _VERSION_RE.match(raw)
    return bool(match) and f"{int(match.group(1))}.{int(match.group(2))}" == route_version


def is_json_content_type(value: Optional[str]) -> bool:
    mimetype = parse_options_header(value or "")[0].lower()
    return mimetype in ("application/json", "application/a2a+json") or mimetype.endswith("+json")


# ------------------------------------------------------------------ answer checks

TRACEBACK_MARKERS = (b"Traceback (most recent call last)", b'File "', b'.py", line ')
#: ErrorInfo reason per JSON-RPC code (spec §2.10 and the SDK's names).
REASONS = {
    -32700: "PARSE_ERROR", -32600: "INVALID_REQUEST", -32601: "METHOD_NOT_FOUND",
    -32602: "INVALID_PARAMS", -32001: "TASK_NOT_FOUND", -32002: "TASK_NOT_CANCELABLE",
    -32003: "PUSH_NOTIFICATION_NOT_SUPPORTED", -32004: "UNSUPPORTED_OPERATION",
    -32005: "CONTENT_TYPE_NOT_SUPPORTED", -32007: "EXTENDED_AGENT_CARD_NOT_CONFIGURED",
    -32008: "EXTENSION_SUPPORT_REQUIRED", -32009: "VERSION_NOT_SUPPORTED",
    -32040: "UNAUTHENTICATED", -32041: "PERMISSION_DENIED", -32042: "RESOURCE_EXHAUSTED",
}
#: JSON-RPC errors that are failures of the HTTP exchange itself keep an HTTP status
#: (docs/protocol.rst: credentials 401/403, size 413, rate 429); every other answer is HTTP 200.
RPC_HTTP_STATUS = {("UNAUTHENTICATED", -32040): 401, ("PERMISSION_DENIED", -32041): 403,
                   ("RESOURCE_EXHAUSTED", -32042): 429, ("PAYLOAD_TOO_LARGE", -32600): 413}
#: HTTP status and gRPC status names allowed for each REST error reason (1.0.1 mapping;
#: 405 for a known path with the wrong verb is this server's documented choice).
REST_REASONS = {
    "PARSE_ERROR": {400}, "INVALID_REQUEST": {400}, "INVALID_PARAMS": {400},
    "METHOD_NOT_FOUND": {404, 405}, "TASK_NOT_FOUND": {404}, "TASK_NOT_CANCELABLE": {400, 409},
    "PUSH_NOTIFICATION_NOT_SUPPORTED": {400}, "UNSUPPORTED_OPERATION": {400},
    "CONTENT_TYPE_NOT_SUPPORTED": {400, 415}, "EXTENDED_AGENT_CARD_NOT_CONFIGURED": {400},
    "EXTENSION_SUPPORT_REQUIRED": {400}, "VERSION_NOT_SUPPORTED": {400},
    "UNAUTHENTICATED": {401}, "PERMISSION_DENIED": {403}, "RESOURCE_EXHAUSTED": {429},
    "PAYLOAD_TOO_LARGE": {413},
}
GRPC_FOR_HTTP = {
    400: {"INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE"}, 401: {"UNAUTHENTICATED"},
    403: {"PERMISSION_DENIED"}, 404: {"NOT_FOUND"}, 405: {"UNIMPLEMENTED"},
    409: {"ABORTED", "ALREADY_EXISTS", "FAILED_PRECONDITION"},
    413: {"INVALID_ARGUMENT", "RESOURCE_EXHAUSTED", "OUT_OF_RANGE"},
    415: {"INVALID_ARGUMENT"}, 429: {"RESOURCE_EXHAUSTED"},
}


def no_traceback(data: bytes, sent: bytes) -> None:
    for marker in TRACEBACK_MARKERS:
        assert marker not in data or marker in sent, f"traceback on the wire: {data[:800]!r}"


def not_html(response: Any) -> None:
    data = response.get_data()
    assert response.mimetype != "text/html", f"HTML answer {response.status_code}: {data[:300]!r}"
    assert not data.lstrip()[:1] == b"<", f"HTML-looking answer: {data[:300]!r}"


@dataclasses.dataclass(frozen=True)
class Expect:
    """What a request may get: error codes, and whether a result is acceptable."""

    codes: FrozenSet[int] = frozenset()
    ok: bool = False
    #: Also whatever the unmutated request gets (resolved per method by the tests).
    base: bool = False

    @staticmethod
    def error(*codes: int) -> "Expect":
        return Expect(frozenset(codes), False)

    @staticmethod
    def success() -> "Expect":
        return Expect(frozenset(), True)

    def __or__(self, other: "Expect") -> "Expect":
        return Expect(self.codes | other.codes, self.ok or other.ok, self.base or other.base)


def _check_error_details(error: Dict[str, Any]) -> None:
    assert isinstance(error.get("code"), int) and not isinstance(error["code"], bool), error
    assert isinstance(error.get("message"), str), error
    data = error.get("data")
    if data is not None:
        assert isinstance(data, list) and data, error
        for entry in data:
            assert isinstance(entry, dict) and isinstance(entry.get("@type"), str), error
        info = [d for d in data if d["@type"].endswith("google.rpc.ErrorInfo")]
        assert len(info) == 1, error
        if (info[0]["reason"], error["code"]) not in RPC_HTTP_STATUS and error["code"] in REASONS:
            assert info[0]["reason"] == REASONS[error["code"]], error
        metadata = info[0].get("metadata", {})
        assert all(isinstance(v, str) for v in metadata.values()), error


SENTINEL = object()


def check_rpc_envelope(body: Any, request_id: Any) -> None:
    """A JSON-RPC 2.0 response object answering ``request_id`` (None: unreadable)."""
    assert isinstance(body, dict), body
    assert body.get("jsonrpc") == "2.0", body
    assert ("result" in body) != ("error" in body), body
    assert "id" in body, body
    assert body["id"] == request_id and type(body["id"]) is type(request_id), (
        f"id {body['id']!r} answers a request whose id was {request_id!r}")
    if "error" in body:
        _check_error_details(body["error"])


def read_stream_head(response: Any, limit_events: int = 1, timeout: float = 5.0) -> List[Dict]:
    """The first SSE events of a streaming response; then the stream is closed."""
    from tests.support.helpers import parse_sse

    events: List[Dict] = []
    buffer = b""
    deadline = time.monotonic() + timeout
    try:
        for chunk in response.response:
            buffer += chunk
            while b"\n\n" in buffer:
                block, buffer = buffer.split(b"\n\n", 1)
                events.extend(parse_sse(block.decode("utf-8") + "\n\n"))
            if len(events) >= limit_events or time.monotonic() > deadline:
                break
    finally:
        response.close()
    return events


def check_rpc_answer(response: Any, *, sent: bytes, request_id: Any, expect: Expect,
                     validate_result: Optional[Callable[[Dict[str, Any]], None]] = None,
                     validate_error: Optional[Callable[[Dict[str, Any]], None]] = None
                     ) -> Tuple[Dict[str, Any], bool]:
    """Check one JSON-RPC answer; return (the body or first stream event, rejected?)."""
    status = response.status_code
    if response.mimetype == "text/event-stream":
        assert status == 200, status
        events = read_stream_head(response)
        assert events, "a stream without a first event"
        body = events[0]["data"]
        no_traceback(json.dumps(body).encode(), sent)
        check_rpc_envelope(body, request_id)
        if "error" in body:
            # An error event as the *first* event: a failure mid-way, or a 0.3
            # tasks/resubscribe on an unknown or finished task (1.0 answers those with
            # a plain JSON error before any stream starts).
            assert body["error"]["code"] != -32603, f"an internal error in a stream: {body}"
            assert body["error"]["code"] in expect.codes, body
            return body, True
        assert expect.ok, f"expected an error {sorted(expect.codes)}, got a stream {body}"
        if validate_result is not None:
            validate_result(body)
        return body, False
    data = response.get_data()
    response.close()
    assert status in (200, 401, 403, 413, 429), f"JSON-RPC answered HTTP {status}: {data[:400]!r}"
    not_html(response)
    assert response.mimetype == "application/json", response.mimetype
    no_traceback(data, sent)
    body = json.loads(data)
    check_rpc_envelope(body, request_id)
    if "error" in body:
        reason = next((d.get("reason") for d in body["error"].get("data") or []
                       if d.get("@type", "").endswith("ErrorInfo")), None)
        assert status == RPC_HTTP_STATUS.get((reason, body["error"]["code"]), 200), (status, body)
        if status == 401:
            assert response.headers.get("WWW-Authenticate"), "a 401 without WWW-Authenticate"
    else:
        assert status == 200, status
    if "error" in body:
        code = body["error"]["code"]
        assert code != -32603, f"an internal error for bad input: {body}"
        assert code in expect.codes, f"code {code} not in {sorted(expect.codes)}: {body}"
        if validate_error is not None:
            validate_error(body)
        return body, True
    assert expect.ok, f"expected an error {sorted(expect.codes)}, got a result: {str(body)[:500]}"
    if validate_result is not None:
        validate_result(body)
    return body, False


def check_rest_answer(response: Any, *, sent: bytes, statuses: Iterable[int] = (),
                      reasons: Iterable[str] = (), ok: bool = False
                      ) -> Tuple[Optional[Dict[str, Any]], bool]:
    """Check one REST answer: (the JSON body or first stream event, rejected?)."""
    status = response.status_code
    assert status < 500, f"HTTP {status}: {response.get_data()[:400]!r}"
    if response.mimetype == "text/event-stream":
        assert status == 200
        events = read_stream_head(response)
        assert events, "a stream without a first event"
        assert ok, f"expected an error {sorted(statuses)}, got a stream {events[0]}"
        no_traceback(json.dumps(events[0]["data"]).encode(), sent)
        return events[0]["data"], False
    data = response.get_data()
    response.close()
    not_html(response)
    no_traceback(data, sent)
    if status < 400:
        assert response.mimetype == "application/json", response.mimetype
        assert ok, f"expected {sorted(statuses)} {sorted(reasons)}, got {status}: {data[:400]!r}"
        return json.loads(data), False
    assert response.mimetype == "application/json", (response.mimetype, data[:300])
    body = json.loads(data)
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert error.get("code") == status, (status, body)
    assert isinstance(error.get("message"), str), body
    assert error.get("status") in GRPC_FOR_HTTP.get(status, {error.get("status")}), body
    assert isinstance(error.get("status"), str), body
    details = error.get("details")
    assert isinstance(details, list) and details, body
    assert all(isinstance(d, dict) and isinstance(d.get("@type"), str) for d in details), body
    info = [d for d in details if d["@type"].endswith("google.rpc.ErrorInfo")]
    assert len(info) == 1, body
    reason = info[0].get("reason")
    assert isinstance(reason, str) and reason.isupper(), body
    assert info[0].get("domain") == "a2a-protocol.org", body
    if reason in REST_REASONS:
        assert status in REST_REASONS[reason], (status, body)
    statuses, reasons = set(statuses), set(reasons)
    assert status in statuses, f"HTTP {status} not in {sorted(statuses)}: {body}"
    if status == 401:
        assert response.headers.get("WWW-Authenticate"), "a 401 without WWW-Authenticate"
    if reasons:
        assert reason in reasons, f"reason {reason} not in {sorted(reasons)}: {body}"
    return body, True


# ------------------------------------------------------------------ schema checks

def v1_result(definition: str) -> Callable[[Dict[str, Any]], None]:
    def check(body: Dict[str, Any]) -> None:
        validate(body["result"], definition)
    return check


def v1_card(body: Dict[str, Any]) -> None:
    validate(card_v1_view(body["result"]), "Agent Card")


def v03_whole(definition: str) -> Callable[[Dict[str, Any]], None]:
    def check(body: Dict[str, Any]) -> None:
        validate(body, definition, "v0.3")
    return check


def v01_whole(definition: str) -> Callable[[Dict[str, Any]], None]:
    """The v0.1 schema types ``error.data`` as an object; ours is the 1.0 array."""
    def check(body: Dict[str, Any]) -> None:
        if "error" in body:
            body = {**body, "error": {k: v for k, v in body["error"].items() if k != "data"}}
        validate(body, definition, "v0.1")
    return check


def either(*checks: Callable[[Dict[str, Any]], None]) -> Callable[[Dict[str, Any]], None]:
    def check(body: Dict[str, Any]) -> None:
        errors = []
        for one in checks:
            try:
                one(body)
                return
            except Exception as exc:  # noqa: BLE001 - collect, then report all
                errors.append(exc)
        raise AssertionError(f"no schema accepts {str(body)[:400]}: {errors}")
    return check


__all__ = [name for name in dir() if not name.startswith("_")]
