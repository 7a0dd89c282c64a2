"""Property-based fuzzing of the HTTP+JSON (REST) binding, and one raw-socket check on gunicorn.

Every route of A2A 1.0 (at ``/a2a/rest`` and under a ``/{tenant}`` prefix) and of
0.3 (``/a2a/rest/v1``) gets hostile bodies, paths, query strings and headers, with
every verb.  For every answer (see :func:`tests.support.fuzzkit.check_rest_answer`):

* never 5xx, never HTML, never a traceback;
* an error is ``{"error": {"code", "status", "message", "details"}}`` whose ``code``
  is the HTTP status, whose gRPC ``status`` and ``ErrorInfo`` reason agree with it
  (1.0.1 mapping), and whose status and reason are the ones the defect calls for;
* a success is JSON (or a stream) that validates against the 1.0 schema;
* a rejected request changes nothing (tasks, push configs, executor calls, runs).

The bugs it found have their own regression tests at the end of the module.
"""
from __future__ import annotations

import dataclasses
import json
import random
import re
import socket
import time
from datetime import datetime, timezone
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple
from urllib.parse import quote, unquote, urlencode, urlsplit

import pytest
import requests
from hypothesis import event, given, note
from hypothesis import strategies as st

from a2a_flask.protocol.calls import MAX_TENANT_LENGTH

from tests.support.fuzzkit import (
    ALICE, FULL, MAX_BODY, OWNER, SEED_COMPLETED, SEED_CONFIG, SEED_WORKING,
    STATE_NAMES, Expect, a2a_version_garbage, bad_id, check_rest_answer, fuzz, header_garbage,
    hostile_ids, hostile_text, is_json_content_type, json_objects, json_values,
    last_event_id_garbage,
    overflowing_timestamps,
    rest_version_ok, text, unknown_ids, validate,
)
from tests.support.helpers import Server, card_v1_view
from tests.fuzz.test_fuzz_jsonrpc import (
    ALL_OK, ANY_A2A, BASE, BY_NAME, CANCEL_REFS, CONFIG_REFS, E001, E602, F, OK,
    SUBSCRIBE_REFS, SEND_REFS, RpcWorld, Spec, authorization_values, caller,
    content_types, field_mutations, mutations_of, unparseable,
)

# ================================================================== routes

ROOT, V03 = "/a2a/rest", "/a2a/rest/v1"
ID, TASK_ID, CONFIG_ID = "{id}", "{task_id}", "{config_id}"


@dataclasses.dataclass(frozen=True)
class Route:
    version: str  # "1.0" or "0.3"
    verbs: Tuple[str, ...]
    template: str
    name: str
    body: bool = False  # reads a JSON body
    streaming: bool = False
    capability: Optional[str] = None
    #: Per seeded task in the path: the outcome (as a JSON-RPC Expect).
    refs: Optional[Dict[str, Expect]] = None
    validate: Optional[Callable[[Any], None]] = None


def v1(definition: str) -> Callable[[Any], None]:
    return lambda body: validate(body, definition)


CARD = lambda body: validate(card_v1_view(body), "Agent Card")  # noqa: E731
PUSH_ROUTES_REFS = {**ALL_OK}
ROUTES_V1 = [
    Route("1.0", ("POST",), "/message:send", "send", body=True,
          validate=v1("Send Message Response")),
    Route("1.0", ("POST",), "/message:stream", "stream", body=True, streaming=True,
          capability="streaming", validate=v1("Stream Response")),
    Route("1.0", ("GET",), "/tasks", "list", validate=v1("List Tasks Response")),
    Route("1.0", ("GET",), "/tasks/{id}", "get", refs=ALL_OK, validate=v1("Task")),
    Route("1.0", ("POST",), "/tasks/{id}:cancel", "cancel", body=True, refs=CANCEL_REFS,
          validate=v1("Task")),
    Route("1.0", ("GET", "POST"), "/tasks/{id}:subscribe", "subscribe", streaming=True,
          capability="streaming", refs=SUBSCRIBE_REFS, validate=v1("Stream Response")),
    Route("1.0", ("POST",), "/tasks/{task_id}/pushNotificationConfigs", "push-create",
          body=True, capability="push", refs=ALL_OK,
          validate=v1("Task Push Notification Config")),
    Route("1.0", ("GET",), "/tasks/{task_id}/pushNotificationConfigs", "push-list",
          capability="push", refs=ALL_OK,
          validate=v1("List Task Push Notification Configs Response")),
    Route("1.0", ("GET",), "/tasks/{task_id}/pushNotificationConfigs/{config_id}", "push-get",
          capability="push", refs=CONFIG_REFS, validate=v1("Task Push Notification Config")),
    Route("1.0", ("DELETE",), "/tasks/{task_id}/pushNotificationConfigs/{config_id}",
          "push-delete", capability="push", refs=ALL_OK),
    Route("1.0", ("GET",), "/extendedAgentCard", "card", capability="extended", validate=CARD),
]
ROUTES_V03 = [
    Route("0.3", ("POST",), "/message:send", "send", body=True),
    Route("0.3", ("POST",), "/message:stream", "stream", body=True, streaming=True,
          capability="streaming"),
    Route("0.3", ("GET",), "/tasks", "list"),
    Route("0.3", ("GET",), "/tasks/{id}", "get", refs=ALL_OK),
    # The 0.3 cancel route does not read its body:
    # test_v03_rest_cancel_refuses_a_malformed_body.
    Route("0.3", ("POST",), "/tasks/{id}:cancel", "cancel", refs=CANCEL_REFS),
    Route("0.3", ("GET", "POST"), "/tasks/{id}:subscribe", "subscribe", streaming=True,
          capability="streaming", refs=SUBSCRIBE_REFS),
    Route("0.3", ("POST",), "/tasks/{task_id}/pushNotificationConfigs", "push-create",
          body=True, capability="push", refs=ALL_OK),
    Route("0.3", ("GET",), "/tasks/{task_id}/pushNotificationConfigs", "push-list",
          capability="push", refs=ALL_OK),
    Route("0.3", ("GET",), "/tasks/{task_id}/pushNotificationConfigs/{config_id}", "push-get",
          capability="push", refs=CONFIG_REFS),
    Route("0.3", ("DELETE",), "/tasks/{task_id}/pushNotificationConfigs/{config_id}",
          "push-delete", capability="push", refs=ALL_OK),
    Route("0.3", ("GET",), "/card", "card"),
]
ALL_ROUTES = ROUTES_V1 + ROUTES_V03
#: The verbs each path serves (several routes share a path: push configs, subscribe).
VERBS_OF: Dict[Tuple[str, str], Tuple[str, ...]] = {}
for _route in ALL_ROUTES:
    VERBS_OF[(_route.version, _route.template)] = tuple(sorted(
        set(VERBS_OF.get((_route.version, _route.template), ())) | set(_route.verbs)))
BODY_ROUTES = [r for r in ALL_ROUTES if r.body]
VERBS = ("GET", "POST", "PUT", "PATCH", "DELETE")

#: The JSON-RPC code of a defect -> the REST status and ErrorInfo reason (1.0.1 mapping).
REST_OF = {
    -32700: (400, "PARSE_ERROR"), -32600: (400, "INVALID_REQUEST"),
    -32602: (400, "INVALID_PARAMS"), -32601: (404, "METHOD_NOT_FOUND"),
    -32001: (404, "TASK_NOT_FOUND"), -32002: (400, "TASK_NOT_CANCELABLE"),
    -32003: (400, "PUSH_NOTIFICATION_NOT_SUPPORTED"), -32004: (400, "UNSUPPORTED_OPERATION"),
    -32005: (400, "CONTENT_TYPE_NOT_SUPPORTED"),
    -32007: (400, "EXTENDED_AGENT_CARD_NOT_CONFIGURED"),
    -32008: (400, "EXTENSION_SUPPORT_REQUIRED"), -32009: (400, "VERSION_NOT_SUPPORTED"),
    -32040: (401, "UNAUTHENTICATED"),
}
TOO_LARGE = (413, "PAYLOAD_TOO_LARGE")


@dataclasses.dataclass(frozen=True)
class RestExpect:
    errors: frozenset = frozenset()  # of (status, reason)
    ok: bool = False

    @staticmethod
    def of(expect: Expect) -> "RestExpect":
        return RestExpect(frozenset(REST_OF[c] for c in expect.codes), expect.ok)

    def __or__(self, other: "RestExpect") -> "RestExpect":
        return RestExpect(self.errors | other.errors, self.ok or other.ok)


def rest_error(*pairs: Tuple[int, str]) -> RestExpect:
    return RestExpect(frozenset(pairs), False)


ROUTING = rest_error((400, "INVALID_PARAMS"), (404, "TASK_NOT_FOUND"),
                     (404, "METHOD_NOT_FOUND"), (405, "METHOD_NOT_FOUND"))


# ================================================================== the world and the exchange


@pytest.fixture
def world():
    w = RpcWorld(FULL)
    yield w
    w.close()


def no_newline(value: str) -> bool:
    """Path values with a newline fall outside the REST catch-all route and get Flask's
    HTML pages: test_no_html_error_pages_on_the_agents_paths covers them."""
    return "\n" not in value


path_hostile_ids = hostile_ids.filter(lambda v: bool(v) and no_newline(v))


def segment(world: RpcWorld, value: str) -> str:
    """A path segment: seed markers resolved, then percent-encoded (``/`` included)."""
    return quote(world.resolve(value), safe="")


def build_path(world: RpcWorld, route: Route, *, tenant: Optional[str] = None,
               ids: Optional[Dict[str, str]] = None) -> str:
    ids = ids or {}
    prefix = V03 if route.version == "0.3" else ROOT
    if tenant is not None:
        prefix = f"{ROOT}/{segment(world, tenant)}"
    path = route.template
    for key, default in (("id", SEED_COMPLETED), ("task_id", SEED_COMPLETED),
                         ("config_id", SEED_CONFIG)):
        path = path.replace("{" + key + "}", segment(world, ids.get(key, default)))
    return prefix + path


def rest_exchange(world: RpcWorld, verb: str, path: str, *, expect: RestExpect, what: str,
                  body: Any = None, content_type: Optional[str] = "application/json",
                  headers: Optional[Dict[str, str]] = None,
                  query: Optional[Dict[str, str]] = None,
                  validate_result: Optional[Callable[[Any], None]] = None,
                  allow_header: Optional[Iterable[str]] = None,
                  reads_body: bool = False) -> Optional[Dict[str, Any]]:
    data = b"" if body is None else (
        body if isinstance(body, bytes) else json.dumps(world.resolve(body)).encode())
    if reads_body and len(data) > MAX_BODY:  # refused while reading, before parsing
        expect = RestExpect(frozenset({TOO_LARGE}) | {
            e for e in expect.errors if e[0] == 401 or e[1] == "VERSION_NOT_SUPPORTED"}, False)
    sent_headers = {k: v for k, v in {**world.required_headers, **(headers or {})}.items()
                    if v is not None}  # None: leave that header out
    url = path + ("?" + urlencode(query) if query else "")
    before = world.snapshot()
    note(f"{what}: {verb} {url[:300]} {data[:300]!r} {sent_headers}")
    response = world.client.open(url, method=verb, data=data, headers=sent_headers,
                                 content_type=content_type if data else None, buffered=False)
    sent = data + url.encode() + json.dumps(sent_headers).encode()
    if response.status_code == 308 and "//" in unquote(path):
        # Werkzeug merges repeated slashes with a redirect whose body is an HTML page
        # (test_no_html_error_pages_on_the_agents_paths); it changes nothing.
        response.close()
        assert urlsplit(response.headers["Location"]).path.startswith("/a2a/")
        event("308 redirect")
        world.assert_unchanged(before, what)
        return None
    statuses = {s for s, _ in expect.errors}
    reasons = {r for _, r in expect.errors}
    answer, rejected = check_rest_answer(response, sent=sent, statuses=statuses,
                                         reasons=reasons, ok=expect.ok)
    if rejected:
        status, reason = answer["error"]["code"], answer["error"]["details"][0]["reason"]
        assert (status, reason) in expect.errors, (status, reason, sorted(expect.errors))
        if status == 405 and allow_header is not None:
            allowed = {v.strip() for v in response.headers.get("Allow", "").split(",")}
            assert allowed >= set(allow_header), (allowed, allow_header)
        event(f"{status} {reason}")
        world.assert_unchanged(before, what)
    else:
        event(f"{response.status_code} ok")
        if validate_result is not None:
            validate_result(answer)
        world.restore()
    return answer


def capability_missing(world: RpcWorld, route: Route) -> bool:
    flavor = world.flavor
    return {"push": not flavor.push, "streaming": not flavor.streaming,
            "extended": not flavor.extended}.get(route.capability or "", False)


# ================================================================== strategies

#: Tenants that are one clean path segment (never ``v1``: that is the 0.3 prefix).
clean_tenants = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_~", min_size=1,
                        max_size=20).filter(lambda t: t != "v1")


def routable(value: str) -> bool:
    """Whether an id stays one segment of the route (no ``/`` or ``:``; not a dot segment)."""
    return bool(value) and "/" not in value and ":" not in value and value not in (".", "..")


_PATH_IDS: Dict[Tuple[str, str, str], st.SearchStrategy] = {}


def path_ids(route: Route) -> st.SearchStrategy[Tuple[Dict[str, str], RestExpect]]:
    """Ids for a route's path and the outcome they call for (capabilities aside)."""
    key = (route.version, route.template, route.name)
    if key not in _PATH_IDS:
        _PATH_IDS[key] = _path_ids(route)
    return _PATH_IDS[key]


def _path_ids(route: Route) -> st.SearchStrategy[Tuple[Dict[str, str], RestExpect]]:
    refs = route.refs or {}
    key = "task_id" if "{task_id}" in route.template else "id"
    seeded = st.sampled_from(sorted(refs)).map(lambda s: ({key: s}, RestExpect.of(refs[s])))
    unknown = unknown_ids.map(lambda v: ({key: v}, RestExpect.of(E001)))

    def hostile_outcome(v: str) -> RestExpect:
        if not routable(v):
            return ROUTING
        return RestExpect.of(E602 if bad_id(v) else E001)

    hostile = path_hostile_ids.map(lambda v: ({key: v}, hostile_outcome(v)))
    choices = [seeded, unknown, hostile]
    if "{config_id}" in route.template:  # a task that exists, a config that may not
        choices += [
            unknown_ids.map(lambda v: ({key: SEED_COMPLETED, "config_id": v},
                                       RestExpect.of(OK if route.name == "push-delete"
                                                     else E001))),
            path_hostile_ids.map(lambda v: (
                {key: SEED_COMPLETED, "config_id": v},
                ROUTING if not routable(v) else RestExpect.of(
                    E602 if bad_id(v) else OK if route.name == "push-delete" else E001))),
        ]
    return st.one_of(choices) if refs else st.just(({}, RestExpect(ok=True)))


def with_capability(world: RpcWorld, route: Route, expect: RestExpect) -> RestExpect:
    if not capability_missing(world, route):
        return expect
    code = -32003 if route.capability == "push" else -32004
    return RestExpect(expect.errors | {REST_OF[code]}, False)


# ================================================================== properties


nonblank_unparseable = unparseable.filter(lambda b: b.strip() != b"")


@fuzz(1.0)
@given(route=st.sampled_from(BODY_ROUTES), tenant=st.one_of(st.none(), clean_tenants),
       defect=st.sampled_from(["json", "not-object", "content-type", "too-large"]),
       data=st.data())
def test_rest_body_defects_get_their_exact_error(world, route, tenant, defect, data):
    """Bodies to every route that reads one: bad JSON is 400 PARSE_ERROR, JSON that is
    not an object is 400 INVALID_PARAMS, a non-JSON Content-Type is 415
    CONTENT_TYPE_NOT_SUPPORTED and an oversized body is 413 PAYLOAD_TOO_LARGE, before
    the path's task is even looked at."""
    if route.version == "0.3":
        tenant = None
    content_type = "application/json"
    if defect == "json":
        body, expect = data.draw(nonblank_unparseable), rest_error((400, "PARSE_ERROR"))
    elif defect == "not-object":
        body = json.dumps(data.draw(st.one_of(
            st.lists(json_values, max_size=3), st.integers(), st.text(max_size=5),
            st.booleans(), st.none()))).encode()
        expect = rest_error((400, "INVALID_PARAMS"))
    elif defect == "content-type":
        content_type = data.draw(content_types.filter(
            lambda ct: ct is not None and ct != "" and not is_json_content_type(ct)))
        body = b'{"message": {}}'
        expect = rest_error((415, "CONTENT_TYPE_NOT_SUPPORTED"))
    else:
        body = b'{"metadata": {"pad": "' + b"x" * MAX_BODY + b'"}}'
        expect = rest_error(TOO_LARGE)
    ids, _ = data.draw(path_ids(route))
    if not all(routable(v) for v in ids.values()):  # another route (or none) takes it
        expect = expect | ROUTING
    rest_exchange(world, "POST", build_path(world, route, tenant=tenant, ids=ids),
                  expect=expect, what=f"{route.version} {route.name} {defect}", body=body,
                  content_type=content_type)


# -- bodies: the JSON-RPC mutations of each operation's members, on the REST routes

def rest_body_spec(route: Route) -> Optional[Spec]:
    """The member list of a route's body, borrowed from the JSON-RPC specs (path members
    are left out: the path wins)."""
    if route.version == "1.0":
        spec = {"send": BY_NAME["SendMessage"], "stream": BY_NAME["SendStreamingMessage"],
                "cancel": BY_NAME["CancelTask"],
                "push-create": BY_NAME["CreateTaskPushNotificationConfig"]}.get(route.name)
        if spec is None:
            return None
        path_keys = {"id", "taskId"} if route.name in ("cancel", "push-create") else set()
        template = {k: v for k, v in spec.template.items() if k not in path_keys}
        fields = [f for f in spec.fields if f.path[0] not in path_keys]
        return dataclasses.replace(spec, template=template, fields=fields)
    if route.name in ("send", "stream"):
        return SEND_V03_REST
    return None


#: 0.3 REST (ProtoJSON of the 0.3 proto): ``content`` parts; ``blocking``.
SEND_V03_REST = Spec(
    "0.3", "message:send",
    {"message": {"messageId": "m-fuzz", "role": "ROLE_USER", "content": [{"text": "hello"}]},
     "configuration": {"blocking": True, "historyLength": 3}},
    [F(("message",), "obj", required=True), F(("message", "messageId"), "idstr", True),
     F(("message", "role"), "role_v1", required=True),
     F(("message", "content"), "lenient_parts"), F(("message", "contextId"), "idstr"),
     F(("message", "taskId"), "task_ref", refs=SEND_REFS), F(("message", "metadata"), "obj"),
     F(("configuration",), "lenient"), F(("configuration", "historyLength"), "int0"),
     F(("configuration", "blocking"), "lenient"), F(("metadata",), "obj"),
     F(("extra",), "extra")],
)


def rest_field_mutations(spec: Spec, field: F, flavor: Any) -> st.SearchStrategy:
    if field.kind == "lenient_parts":  # 0.3 parts reshaped on the way: any fitting code
        return json_values.map(lambda v: (v, BASE | E602 | Expect.error(-32005)))
    return field_mutations(spec, field, flavor)


def rest_mutations(spec: Spec, flavor: Any) -> st.SearchStrategy[Tuple[Dict, Expect, str]]:
    return mutations_of(spec, flavor, rest_field_mutations)


@fuzz(2.0)
@given(route=st.sampled_from([r for r in BODY_ROUTES if rest_body_spec(r)]),
       tenant=st.one_of(st.none(), clean_tenants), data=st.data())
def test_rest_body_members_get_the_error_they_deserve(world, route, tenant, data):
    """One member of a valid body mutated (wrong types, bad enums, bad base64, hostile
    ids and parts...), or the path's task id: the status and reason of the defect, or
    a valid result."""
    spec = rest_body_spec(route)
    if route.version == "0.3":
        tenant = None
    mutate_path = route.refs is not None and data.draw(st.booleans(), label="mutate path")
    if mutate_path:
        ids, expect = data.draw(path_ids(route), label="path ids")
        body = dict(spec.template)
        what = "path"
    else:
        slot = SEED_COMPLETED
        if route.name == "cancel":
            slot = data.draw(st.sampled_from([SEED_COMPLETED, SEED_WORKING]), label="task")
        ids = {"id": slot, "task_id": slot}
        if route.refs is not None:  # a valid body gets what the path's task calls for
            spec = dataclasses.replace(spec, base=route.refs[slot])
        body, rpc_expect, what = data.draw(rest_mutations(spec, world.flavor), label="body")
        expect = RestExpect.of(rpc_expect)
    refers = "SEED[" in json.dumps([body, ids if route.refs is not None else {}])
    if tenant is not None and refers:
        # The seeded tasks live under the root tenant: a path tenant hides them.
        expect = RestExpect(expect.errors | {(404, "TASK_NOT_FOUND")}, False)
    expect = with_capability(world, route, expect)
    rest_exchange(world, "POST", build_path(world, route, tenant=tenant, ids=ids),
                  expect=expect, what=f"{route.version} {route.name} {what}", body=body,
                  validate_result=route.validate, reads_body=True)


# -- query strings

def _strict_int(value: str) -> Optional[int]:
    return int(value) if value.lstrip("-").isascii() and value.lstrip("-").isdigit() and \
        value.count("-") <= 1 and not value.endswith("-") and value[:1] != "+" else None


def _lenient_int(value: str) -> bool:
    try:
        int(value)
        return True
    except ValueError:
        return False


def int_outcome(value: str, low: int, high: int = 2**31 - 1) -> RestExpect:
    """A query integer: in range ok, else 400; ``int()``'s extras (spaces, ``_``,
    other digits) may go either way."""
    bad = rest_error((400, "INVALID_PARAMS"))
    number = _strict_int(value)
    if number is not None:
        return RestExpect(ok=True) if low <= number <= high else bad
    return (bad | RestExpect(ok=True)) if _lenient_int(value) else bad


RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")


def timestamp_outcome(value: str) -> RestExpect:
    """A ``statusTimestampAfter`` value: RFC 3339 with a zone serves, the rest is 400
    (out of range in UTC too: test_rest_timestamp_out_of_range_in_utc_is_400)."""
    if not value:
        return RestExpect(ok=True)
    cleaned = value.strip()
    cleaned = cleaned[:-1] + "+00:00" if cleaned.endswith(("Z", "z")) else cleaned
    try:
        moment = datetime.fromisoformat(cleaned)
    except ValueError:
        return rest_error((400, "INVALID_PARAMS"))
    if moment.tzinfo is None:
        return rest_error((400, "INVALID_PARAMS"))
    try:
        moment.astimezone(timezone.utc)
    except OverflowError:
        return rest_error((400, "INVALID_PARAMS"))
    ok = RestExpect(ok=True)
    return ok if RFC3339.match(value) else ok | rest_error((400, "INVALID_PARAMS"))


query_ints = st.one_of(
    st.integers(-(2**33), 2**33).map(str),
    st.sampled_from(["", " ", "1.5", "1e3", "0x10", "abc", " 5", "5 ", "1_0", "٣", "-0",
                     "+5", "--1", "9" * 40, "NaN", "null", "true", "[1]", "0", "100", "101"])
    | text(max_size=6))
query_timestamps = st.one_of(
    st.sampled_from(["2024-01-01T00:00:00Z", "2024-01-01T00:00:00.5+02:00", "2024-01-01",
                     "2024-13-01T00:00:00Z", "yesterday", "", "2024-01-01T00:00:00",
                     "20240101T000000Z", "2024-01-01 00:00:00+00:00", "0"]), text(max_size=12))
query_states = st.one_of(st.sampled_from(STATE_NAMES), st.sampled_from(
    ["completed", "3", "TASK_STATE_CANCELLED", "task_state_working", ""]), text(max_size=8))
query_bools = st.one_of(st.sampled_from(["true", "false", "TRUE", "False", "1", "0", "yes", "",
                                         "tru"]), text(max_size=5))


def list_query_outcome(query: Dict[str, str]) -> RestExpect:
    outcomes = [RestExpect(ok=True)]
    for name, value in query.items():
        if name == "historyLength":
            outcomes.append(int_outcome(value, 0))
        elif name == "pageSize":
            outcomes.append(int_outcome(value, 1, 100))
        elif name == "status":
            outcomes.append(RestExpect(ok=True) if value in STATE_NAMES
                            else rest_error((400, "INVALID_PARAMS")))
        elif name == "includeArtifacts":
            outcomes.append(RestExpect(ok=True) if value.lower() in ("true", "false")
                            else rest_error((400, "INVALID_PARAMS")))
        elif name == "statusTimestampAfter":
            outcome = timestamp_outcome(value)
            outcomes.append(outcome)
        elif name == "pageToken" and value:
            outcomes.append(rest_error((400, "INVALID_PARAMS")) | RestExpect(ok=True))
        elif name == "contextId" and bad_id(value):
            outcomes.append(rest_error((400, "INVALID_PARAMS")))
    return combine(outcomes)


def combine(outcomes: List[RestExpect]) -> RestExpect:
    """Several members at once: any of their errors may come, a result only if all allow it."""
    return RestExpect(frozenset().union(*(o.errors for o in outcomes)),
                      all(o.ok for o in outcomes))


@fuzz(1.5)
@given(
    route=st.sampled_from([r for r in ALL_ROUTES if r.name in ("list", "get", "push-list")]),
    tenant=st.one_of(st.none(), clean_tenants),
    query=st.dictionaries(
        st.sampled_from(["historyLength", "pageSize", "status", "includeArtifacts",
                         "statusTimestampAfter", "pageToken", "contextId", "x-unknown",
                         "history_length"]),
        st.just(None), max_size=4),
    data=st.data(),
)
def test_rest_query_strings_with_bad_values(world, route, tenant, query, data):
    """``historyLength``, ``pageSize``, ``status``, ``includeArtifacts``,
    ``statusTimestampAfter`` and ``pageToken`` with bad values are 400 INVALID_PARAMS
    (negative, huge, float, empty and non-numeric numbers included); good ones serve."""
    if route.version == "0.3":
        tenant = None
    draws = {"historyLength": query_ints, "history_length": query_ints, "pageSize": query_ints,
             "status": query_states, "includeArtifacts": query_bools,
             "statusTimestampAfter": query_timestamps, "pageToken": text(max_size=20),
             "contextId": hostile_text.filter(lambda s: len(s) < 2000), "x-unknown": text()}
    sent = {name: data.draw(draws[name], label=name) for name in sorted(query)}
    values = dict(sent)  # what the server reads: the camelCase name wins over snake_case
    snake = values.pop("history_length", None)
    if snake is not None and "historyLength" not in values:
        values["historyLength"] = snake
    if route.name == "list":
        expect = list_query_outcome(values)
    elif route.name == "get":
        expect = int_outcome(values["historyLength"], 0) if "historyLength" in values \
            else RestExpect(ok=True)
        if tenant is not None:
            expect = RestExpect(expect.errors | {(404, "TASK_NOT_FOUND")}, False)
    else:  # push-list: pageSize 1..100 like ListTasks; 0.3 reads no query
        expect = RestExpect(ok=True)
        if route.version == "1.0" and "pageSize" in values:
            expect = int_outcome(values["pageSize"], 1, 100)
        if tenant is not None:
            expect = RestExpect(expect.errors | {(404, "TASK_NOT_FOUND")}, False)
    rest_exchange(world, "GET", build_path(world, route, tenant=tenant), query=sent,
                  expect=expect, what=f"{route.version} {route.name} query",
                  validate_result=route.validate)


# -- paths and verbs

junk_suffixes = st.one_of(
    # ("/" and "//" right under /rest: test_no_html_error_pages_on_the_agents_paths)
    st.sampled_from(["/tasks/", "/tasks//x", "/message", "/message:", "/message:sent",
                     "/message:send/", "/message:send:send", "/tasks/x:delete", "/tasks/x:",
                     "/tasks/x/pushNotificationConfig", "/tasks/x/pushNotificationConfigs/",
                     "/tasks/x/pushNotificationConfigs/y/z", "/card/x", "/extendedAgentCard/x",
                     "/v2/tasks", "/V1/tasks", "/TASKS", "/tasks.json", "/tasks?x", "/.env",
                     "/%2e%2e/%2e%2e/etc/passwd", "/tasks/%00", "/tasks/%ff%fe",
                     "/tasks/x%2Fy:cancel"]),
    st.lists(hostile_text.filter(lambda s: 0 < len(s) < 300 and no_newline(s)), min_size=1,
             max_size=3).map(
        lambda parts: "".join("/" + quote(p, safe="") for p in parts)),
)


@fuzz(2.0)
@given(verb=st.sampled_from(VERBS), path_of=st.sampled_from(sorted(VERBS_OF)), data=st.data())
def test_rest_every_route_with_every_verb_and_hostile_path(world, verb, path_of, data):
    """Every verb on every route, with seeded, unknown and hostile ids (``../``, very
    long, unicode, ``:`` and ``/`` inside) and hostile tenants, plus junk paths: 404
    for paths no route has, 405 with ``Allow`` for a wrong verb, the operation's own
    outcome otherwise."""
    verbs = VERBS_OF[path_of]
    route = next(r for r in ALL_ROUTES if (r.version, r.template) == path_of
                 and (verb in r.verbs or verb not in verbs))
    use_junk = data.draw(st.integers(0, 4), label="junk?") == 0
    tenant = None
    if route.version == "1.0" and data.draw(st.booleans(), label="tenant?"):
        tenant = data.draw(st.one_of(clean_tenants, path_hostile_ids.filter(
            lambda t: len(t) < 300)), label="tenant")
    if use_junk:
        base = V03 if route.version == "0.3" else (
            ROOT if tenant is None else f"{ROOT}/{quote(tenant, safe='')}")
        path = base + data.draw(junk_suffixes, label="junk")
        expect = ROUTING | rest_error((400, "VERSION_NOT_SUPPORTED")) | RestExpect(ok=True)
        rest_exchange(world, verb, path, expect=expect, what=f"{verb} junk")
        return
    ids, expect = data.draw(path_ids(route), label="ids")
    hostile_tenant = tenant is not None and not (routable(tenant) and tenant != "v1")
    # Routed, but no store could hold it: refused once the call is read (after the
    # body and the path ids, before the operation).
    bad_tenant = tenant is not None and not hostile_tenant and (
        len(tenant) > MAX_TENANT_LENGTH or bad_id(tenant))
    path = build_path(world, route, tenant=tenant, ids=ids)
    allow = None
    if hostile_tenant:
        expect = ROUTING | RestExpect(ok=True) | rest_error((400, "VERSION_NOT_SUPPORTED"))
    elif verb not in verbs:
        if expect != ROUTING:  # the path names this route: 405, listing its verbs
            expect = rest_error((405, "METHOD_NOT_FOUND"))
            allow = verbs
    else:
        if tenant is not None and route.refs is not None:
            expect = RestExpect(expect.errors | {(404, "TASK_NOT_FOUND")}, expect.ok and not any(
                v.startswith("SEED[") for v in ids.values()))
        if route.body and route.name in ("send", "stream"):
            expect = rest_error((400, "INVALID_PARAMS"))  # no body: the message is missing
        elif route.name == "push-create":
            expect = RestExpect(expect.errors | {(400, "INVALID_PARAMS")}, False)  # no url
        expect = with_capability(world, route, expect)
        if bad_tenant and expect != ROUTING:
            expect = rest_error((400, "INVALID_PARAMS"))
    # A body too, sometimes: read (and refused first) by the routes that take one,
    # ignored by the others.
    kind = data.draw(st.sampled_from(["none", "none", "object", "garbage", "not-object"]),
                     label="body")
    body: Any = None
    if kind != "none":
        body, body_expect = {
            "object": (data.draw(json_objects, label="object"), RestExpect.of(ANY_A2A)),
            "garbage": (data.draw(nonblank_unparseable, label="garbage"),
                        rest_error((400, "PARSE_ERROR"))),
            "not-object": (json.dumps(data.draw(st.lists(json_values, max_size=2) | st.integers(),
                                                label="not object")).encode(),
                           rest_error((400, "INVALID_PARAMS"))),
        }[kind]
        reads = route.body and verb in route.verbs
        if reads and not hostile_tenant and expect != ROUTING and allow is None:
            expect = body_expect
        elif reads or hostile_tenant or expect == ROUTING or (
                # The 0.3 cancel route ignores its body today
                # (test_v03_rest_cancel_refuses_a_malformed_body): either is right.
                route.version == "0.3" and route.name == "cancel" and verb == "POST"):
            expect = expect | body_expect
    rest_exchange(world, verb, path, expect=expect, what=f"{verb} {route.version} {route.name}",
                  validate_result=route.validate if verb in route.verbs and kind != "object"
                  else None, allow_header=allow, body=body, reads_body=route.body)


# -- headers

@fuzz(1.5)
@given(route=st.sampled_from(ALL_ROUTES),
       version=st.one_of(st.none(), st.sampled_from(["1.0", "1.0.1", "0.3", "0.3.2", "0.2", "",
                                                     " "]), a2a_version_garbage),
       version_in_query=st.booleans(),
       authorization=st.one_of(st.just("Bearer alice-token"), authorization_values),
       extensions=st.one_of(st.none(), header_garbage),
       last_event_id=st.one_of(st.none(), last_event_id_garbage),
       content_type=content_types)
def test_rest_headers_version_credentials_extensions_content_type(
        world, route, version, version_in_query, authorization, extensions, last_event_id,
        content_type):
    """Any ``A2A-Version`` (header or query), ``Authorization``, ``A2A-Extensions`` and
    ``Content-Type`` on every route: credentials first (401), then the version (400
    VERSION_NOT_SUPPORTED unless it names the route's version), then the body's
    content type; extensions garbage changes nothing."""
    headers: Dict[str, str] = {}
    query = None
    if version is not None:
        if version_in_query:
            query = {"A2A-Version": version}
        else:
            headers["A2A-Version"] = version
    headers["Authorization"] = authorization  # None: no Authorization header
    headers["A2A-Extensions"] = extensions
    headers["Last-Event-ID"] = last_event_id
    verb = route.verbs[0]
    ids = {"id": SEED_COMPLETED if route.name != "subscribe" else SEED_WORKING}
    body = None
    if route.body:
        body = {"message": {"messageId": "m-h", "role": "ROLE_USER",
                            ("content" if route.version == "0.3" else "parts"): [{"text": "h"}]},
                "configuration": {"historyLength": 1}} if route.name in ("send", "stream") \
            else {"url": "http://127.0.0.1:9/hook"} if route.name == "push-create" else {}
    if route.name == "cancel":
        ids = {"id": SEED_COMPLETED}
    # The stages, in order: credentials, version, the body's content type, the operation.
    who = caller(authorization)
    if who is None:
        expect = rest_error((401, "UNAUTHENTICATED"))
    elif not rest_version_ok(version, route.version):
        expect = rest_error((400, "VERSION_NOT_SUPPORTED"))
    elif body is not None and not is_json_content_type(content_type):
        expect = rest_error((415, "CONTENT_TYPE_NOT_SUPPORTED"))
    else:
        if who != OWNER and route.refs is not None:
            expect = RestExpect.of(E001)  # bob does not see alice's tasks
        elif route.refs is not None:
            expect = RestExpect.of(route.refs[ids.get("id", SEED_COMPLETED)])
        else:
            expect = RestExpect(ok=True)
        if route.name == "push-create" and route.version == "0.3" and expect.ok:
            expect = expect | RestExpect.of(E602)  # 0.3 wants {pushNotificationConfig: {...}}
        expect = with_capability(world, route, expect)
    rest_exchange(world, verb, build_path(world, route, ids=ids), expect=expect,
                  what=f"headers {route.version} {route.name}", body=body,
                  content_type=content_type if body is not None else None,
                  headers=headers, query=query,
                  validate_result=route.validate if who == OWNER else None)


# ================================================================== a real server, raw bytes


def raw_exchange(port: int, payload: bytes, *, half_close: bool = True,
                 timeout: float = 5.0) -> bytes:
    """Send raw bytes to the server; everything it answers until it closes (or goes quiet)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        try:
            sock.sendall(payload)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except OSError:  # the server answered (413) and closed before the body was sent
            pass
        chunks = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = sock.recv(65536)
            except socket.timeout:
                break
            except OSError:
                break
            if not chunk:
                break
            chunks.append(chunk)
        return b"".join(chunks)


def http_request(method: str, path: str, body: bytes, *, length: Optional[int] = None,
                 content_type: str = "application/json", extra: str = "",
                 chunked: bool = False) -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close",
            f"Content-Type: {content_type}", "Authorization: Bearer alice-token"]
    if path == "/a2a":
        head.append("A2A-Version: 1.0")
    if chunked:
        head.append("Transfer-Encoding: chunked")
    else:
        head.append(f"Content-Length: {len(body) if length is None else length}")
    if extra:
        head.append(extra)
    return ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body


def hostile_payloads(rng: random.Random) -> List[Tuple[str, bytes]]:
    """A few hundred hostile HTTP requests with well-formed heads (bodies lie)."""
    valid = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "raw"}]}}}).encode()
    get = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "GetTask",
                      "params": {"id": "no-such-task"}}).encode()
    rest_send = json.dumps({"message": {"messageId": "m", "role": "ROLE_USER",
                                        "parts": [{"text": "raw"}]}}).encode()
    targets = [("/a2a", valid), ("/a2a", get), ("/a2a/rest/message:send", rest_send),
               ("/a2a/rest/tasks/x:cancel", b"{}"),
               ("/a2a/rest/v1/message:send", rest_send.replace(b"parts", b"content"))]
    payloads: List[Tuple[str, bytes]] = []
    for _ in range(70):  # bodies cut short of what Content-Length promises
        path, body = rng.choice(targets)
        cut = rng.randrange(0, len(body))
        payloads.append(("truncated", http_request("POST", path, body[:cut], length=len(body))))
    for _ in range(40):  # Content-Length shorter than the body (the rest is junk)
        path, body = rng.choice(targets)
        payloads.append(("short length", http_request(
            "POST", path, body, length=rng.randrange(0, len(body)))))
    for _ in range(40):  # random bytes as bodies, honest lengths
        path, _ = rng.choice(targets)
        junk = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
        payloads.append(("junk body", http_request("POST", path, junk)))
    for _ in range(30):  # invalid UTF-8 and NUL inside otherwise valid JSON (UTF-8 encoded
        # surrogates, which json.loads lets through: test_utf8_encoded_surrogates_are_a_parse_error)
        path, body = rng.choice(targets)
        pos = rng.randrange(len(body))
        bad = body[:pos] + rng.choice([b"\xff", b"\xc3", b"\x00", b"\xc0\xaf"]) + body[pos:]
        payloads.append(("bad utf-8", http_request("POST", path, bad)))
    for size in (MAX_BODY_SERVER + 1, 2 * MAX_BODY_SERVER, 3_000_000):
        for path, _ in targets[:3]:  # oversized, announced honestly
            payloads.append(("oversized", http_request("POST", path, b"x" * size)))
    for path, _ in targets[:3]:  # oversized by announcement only (the body never comes)
        payloads.append(("announced huge", http_request("POST", path, b"{", length=10**12)))
        payloads.append(("negative length", http_request("POST", path, b"{}", length=-1)))
    for _ in range(30):  # chunked bodies holding cut JSON; every one properly terminated
        # (a chunked body cut short: test_a_truncated_chunked_body_is_an_invalid_request)
        path, body = rng.choice(targets)
        chunk = body[:rng.randrange(0, len(body) + 1)]
        framed = (f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n" if chunk else b"")
        payloads.append(("chunked", http_request("POST", path, framed + b"0\r\n\r\n",
                                                 chunked=True)))
    for path, _ in targets[:3]:  # chunked and oversized
        big = b"x" * (MAX_BODY_SERVER + 10)
        framed = f"{len(big):x}\r\n".encode() + big + b"\r\n0\r\n\r\n"
        payloads.append(("chunked oversized", http_request("POST", path, framed, chunked=True)))
    for _ in range(20):  # wrong content types and hostile headers, valid JSON-RPC body
        path, body = rng.choice(targets)
        payloads.append(("headers", http_request(
            "POST", path, body, content_type=rng.choice(["text/html", "", "a/b+json;x=\"", "*"]),
            extra=rng.choice(["A2A-Extensions: " + "x," * 500, "X-Forwarded-For: ../../",
                              "Last-Event-ID: -1", "Expect: 100-continue"]))))
    for verb in ("GET", "PUT", "DELETE", "PATCH"):  # every verb on REST routes
        for path, body in targets[2:]:
            payloads.append(("verb", http_request(verb, path, body)))
    return payloads


MAX_BODY_SERVER = 64 * 1024


def _split_response(raw: bytes) -> Tuple[int, Dict[str, str], bytes]:
    head, _, body = raw.partition(b"\r\n\r\n")
    while head.split(b" ", 2)[1:2] == [b"100"]:  # an interim 100 Continue
        head, _, body = body.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding") == "chunked":
        decoded, rest = b"", body
        while rest:
            size_line, _, rest = rest.partition(b"\r\n")
            size = int(size_line.split(b";")[0] or b"0", 16)
            if size == 0:
                break
            decoded, rest = decoded + rest[:size], rest[size + 2:]
        body = decoded
    return status, headers, body


@pytest.fixture(scope="module")
def fuzz_server():
    """gunicorn -k gevent running tests/support/fuzz_server_app.py (bearer auth, small body limit)."""
    with Server("tests.support.fuzz_server_app:app", env={"FUZZ_MAX_BODY": str(MAX_BODY_SERVER)}) as server:
        yield server


#: gunicorn's own answer to a request it cannot frame (a bad Content-Length): the app
#: never sees it, so it is not the app's JSON.
GUNICORN_REFUSAL = b"<title>Bad Request</title>"


def test_raw_hostile_bytes_against_gunicorn(fuzz_server):
    """A real ``gunicorn -k gevent``: a few hundred requests whose bodies are truncated,
    shorter or longer than their Content-Length says, oversized, chunked and cut, or
    junk.  Whatever the app answers is a non-5xx JSON error without a traceback (a
    request gunicorn itself refuses gets its own 400, and a body that never comes
    gets no answer), and the server still serves afterwards."""
    rng = random.Random(6)  # fixed seed: the same payloads on every run
    payloads = hostile_payloads(rng)
    assert len(payloads) >= 250
    problems: List[str] = []
    answered = 0
    server = fuzz_server
    log_start = server.log_path.stat().st_size
    for kind, payload in payloads:
        answer = raw_exchange(server.port, payload, half_close=kind != "announced huge",
                              timeout=3.0 if kind == "announced huge" else 5.0)
        if not answer:
            continue  # the connection closed without an answer (the body never came)
        answered += 1
        status, headers, body = _split_response(answer)
        app_answer = headers.get("content-type", "").startswith("application/json")
        if status >= 500:
            problems.append(f"{kind}: HTTP {status} {body[:200]!r} for {payload[:200]!r}")
        if b"Traceback" in body or b'.py", line' in body:
            problems.append(f"{kind}: traceback {body[:300]!r}")
        if app_answer:
            json.loads(body)
        elif not (status == 400 and GUNICORN_REFUSAL in body):
            problems.append(f"{kind}: HTTP {status} {headers.get('content-type')} "
                            f"{body[:200]!r} for {payload[:200]!r}")
    # Still serving: a JSON-RPC call, a REST call and the card.
    response = requests.post(server.url + "/a2a", json={
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": {"messageId": "m", "role": "ROLE_USER",
                               "parts": [{"text": "still there?"}]}}},
        headers={**ALICE, "A2A-Version": "1.0"}, timeout=10)
    assert response.status_code == 200 and "result" in response.json(), response.text
    assert requests.get(server.url + "/a2a/rest/tasks", headers=ALICE,
                        timeout=10).status_code == 200
    assert requests.get(server.url + "/.well-known/agent-card.json",
                        timeout=10).status_code == 200
    with open(server.log_path, "rb") as handle:
        handle.seek(log_start)
        log = handle.read().decode("utf-8", "replace")
    assert answered >= 200, answered
    assert not problems, "\n".join(problems[:20])
    internal = [line for line in log.splitlines() if "request failed" in line]
    assert not internal, "internal errors logged:\n" + "\n".join(internal[:10])


# ================================================================== bugs found, now regression tests


def raw(world: RpcWorld, verb: str, path: str, body: bytes = b"",
        headers: Optional[Dict[str, str]] = None):
    return world.client.open(path, method=verb, data=body,
                             headers=headers or world.required_headers,
                             content_type="application/json" if body else None)


def test_v03_rest_cancel_refuses_a_malformed_body(world):
    before = world.snapshot()
    path = V03 + "/tasks/" + world.ids[SEED_WORKING] + ":cancel"
    response = raw(world, "POST", path, b"{garbage")
    assert response.status_code == 400, response.get_data()[:200]
    assert response.get_json()["error"]["details"][0]["reason"] == "PARSE_ERROR"
    world.assert_unchanged(before, "regression")


def test_rest_lone_surrogate_in_an_echoed_id_stays_json(world):
    response = raw(world, "POST", ROOT + "/message:send", rb'{"message":{"messageId":"m","role":'
                   rb'"ROLE_USER","taskId":"\udfff","parts":[{"text":"x"}]}}')
    assert response.status_code in (400, 404) and response.mimetype == "application/json", (
        response.status_code, response.mimetype)


def test_rest_lone_surrogate_in_message_text_is_400_and_starts_nothing(world):
    before = world.snapshot()
    response = raw(world, "POST", ROOT + "/message:send", rb'{"message":{"messageId":"m","role":'
                   rb'"ROLE_USER","parts":[{"text":"\ud800"}]}}')
    assert response.status_code == 400, (response.status_code, response.get_data()[:200])
    world.assert_unchanged(before, "regression")


def test_rest_body_nested_too_deeply_is_400(world):
    response = raw(world, "POST", ROOT + "/message:send", b"[" * 100_000 + b"]" * 100_000)
    assert response.status_code == 400, response.status_code


@pytest.mark.parametrize("stamp", overflowing_timestamps)
def test_rest_timestamp_out_of_range_in_utc_is_400(world, stamp):
    response = raw(world, "GET", ROOT + "/tasks?" + urlencode({"statusTimestampAfter": stamp}))
    assert response.status_code == 400, response.status_code


def test_rest_deeply_nested_page_token_is_400(world):
    import base64

    token = base64.urlsafe_b64encode(b"[" * 100_000).decode()
    response = raw(world, "GET", ROOT + "/tasks?" + urlencode({"pageToken": token}))
    assert response.status_code == 400, response.status_code


def test_rest_huge_version_number_is_400(world):
    response = world.client.get(ROOT + "/tasks", headers={**ALICE,
                                                          "A2A-Version": "1." + "0" * 5000})
    assert response.status_code == 400, response.status_code


@pytest.mark.parametrize("verb,path", [("GET", "/a2a"), ("DELETE", "/a2a"), ("GET", ROOT),
                                       ("POST", ROOT + "/"), ("TRACE", ROOT + "/tasks"),
                                       ("GET", ROOT + "//tasks"),
                                       ("GET", V03 + "/tasks/%0A:cancel"),
                                       ("GET", ROOT + "/x%0Ay")])
def test_no_html_error_pages_on_the_agents_paths(world, verb, path):
    response = raw(world, verb, path)
    assert response.status_code < 500
    assert response.mimetype == "application/json", (response.status_code, response.mimetype,
                                                     response.get_data()[:80])


INCOMPLETE = "The request body ended before it was complete"


def test_a_truncated_chunked_body_is_an_invalid_request(fuzz_server):
    """A chunked body cut short (no last chunk): REST 400 and JSON-RPC -32600, both
    saying so, never a parse of what came (nor -32603)."""
    answers = {path: _split_response(raw_exchange(fuzz_server.port, http_request(
        "POST", path, b"2\r\n{}\r\n", chunked=True)))
        for path in ("/a2a/rest/message:send", "/a2a")}
    status, headers, body = answers["/a2a/rest/message:send"]
    assert status == 400 and headers["content-type"] == "application/json", (status, body[:200])
    error = json.loads(body)["error"]
    assert (error["status"], error["message"]) == ("INVALID_ARGUMENT", INCOMPLETE)
    assert error["details"][0]["reason"] == "INVALID_REQUEST"
    status, headers, body = answers["/a2a"]
    assert status == 200 and headers["content-type"] == "application/json", (status, body[:200])
    answer = json.loads(body)
    assert answer["id"] is None and (answer["error"]["code"], answer["error"]["message"]) == (
        -32600, INCOMPLETE)


def test_utf8_encoded_surrogates_are_a_parse_error(world):
    body = b'{"jsonrpc":"2.0","id":1,"method":"GetTa\xed\xa0\x80sk"}'  # ED A0 80: U+D800
    response = raw(world, "POST", "/a2a", body,
                   headers={**world.required_headers, "A2A-Version": "1.0"})
    assert response.status_code == 200 and response.mimetype == "application/json", (
        response.status_code, response.mimetype)
    answer = response.get_json()
    assert answer["id"] is None and answer["error"]["code"] == -32700, answer
    assert answer["error"]["data"][0]["reason"] == "PARSE_ERROR"


@pytest.mark.parametrize("value", ["\u00b2", "1" * 5000])
def test_rest_last_event_id_of_odd_digits_is_ignored(world, value):
    """ListTasks answers exactly as it does without the header."""
    plain = world.client.get(ROOT + "/tasks", headers=ALICE)
    response = world.client.get(ROOT + "/tasks", headers={**ALICE, "Last-Event-ID": value})
    assert plain.status_code == 200
    assert (response.status_code, response.get_json()) == (200, plain.get_json())
