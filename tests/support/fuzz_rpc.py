"""The JSON-RPC methods as the fuzz suites see them (tests/fuzz).

The world (:class:`RpcWorld`: the fuzz world of :mod:`tests.support.fuzzkit` plus a
task created by a 0.1 client), one checked exchange (:func:`exchange`), what each
method of every generation accepts (:class:`Spec`, one :class:`F` per member; the
1.0 ones by operation of ``a2a_flask.protocol.operations``) and the strategies that
mutate one member at a time.  The REST suite borrows the specs for its bodies.
"""
from __future__ import annotations

import base64
import dataclasses
import fnmatch
import json
import uuid
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import urlencode

from hypothesis import event, note, strategies as st

from a2a_flask.protocol.operations import OPERATIONS
from a2a_flask.push.guard import header_value_problem

from tests.support.fuzzkit import (
    Expect, FULL, Flavor, HOOK_URL, MAX_BODY, MAX_FILE, MAX_PARTS, SEED_COMPLETED, SEED_CONFIG,
    SEED_INPUT, SEED_WORKING, STATE_NAMES, USER_INDEX, World, bad_base64, bad_id,
    bad_page_sizes, bad_roles_v1, bad_states, bad_timestamps, check_rpc_answer, deep_values,
    either, finite_floats, good_history, header_garbage, hostile_ids, hostile_text,
    json_objects, json_scalars, json_values, negative_ints, not_an_int, text, unknown_ids,
    v01_whole, v03_whole, v1_card, v1_result, wrong_for_bool, wrong_for_list, wrong_for_object,
    wrong_for_string,
)


SEED_V01 = "SEED[v01]"  # a completed task created by a 0.1 client (answers in 0.1 shapes)
FRESH = "FRESH"  # a new client-chosen task id (0.1), different for every request
FRESH_SUFFIX = "<FRESH>"  # made unique when sent (32 hex digits), so replays create anew

E602 = Expect.error(-32602)
E001 = Expect.error(-32001)
OK = Expect.success()
ANY_A2A = Expect(frozenset({-32602, -32001, -32002, -32003, -32004, -32005, -32007}), True)


# ================================================================== the world


class RpcWorld(World):
    """The fuzz world plus a task created by a 0.1 client, and fresh 0.1 ids."""

    def __init__(self, flavor: Flavor = FULL) -> None:
        super().__init__(flavor)
        body = {"jsonrpc": "2.0", "id": "seed", "method": "tasks/send",
                "params": {"id": f"v01-seed-{uuid.uuid4().hex}",
                           "message": {"role": "user", "parts": [{"type": "text",
                                                                  "text": "v01"}]}}}
        answer = self.client.post("/a2a", json=body, headers=self.required_headers).get_json()
        self.ids[SEED_V01] = answer["result"]["id"]
        self.settle()

    def resolve(self, value: Any) -> Any:
        if value == FRESH:
            return f"fresh-{uuid.uuid4().hex}"
        if isinstance(value, str) and value.endswith(FRESH_SUFFIX):
            return value[: -len(FRESH_SUFFIX)] + uuid.uuid4().hex
        return super().resolve(value)

    def snapshot(self) -> Dict[str, Any]:
        snap = super().snapshot()
        snap["v01"] = snap["tasks"].get(self.ids[SEED_V01])
        return snap


def encode_body(world: World, body: Any) -> bytes:
    """``body`` bytes as they are, anything else as JSON with seed markers resolved."""
    return body if isinstance(body, bytes) else json.dumps(world.resolve(body)).encode()


def post(world: World, body: Any, *, version: Optional[str] = "1.0",
         headers: Optional[Dict[str, str]] = None, content_type: Optional[str] = "application/json",
         query: Optional[Dict[str, str]] = None) -> Tuple[Any, bytes]:
    """POST to the JSON-RPC endpoint (alice's credentials unless ``headers`` replace them).
    Returns the (unbuffered) response and everything sent (to tell echoes from leaks)."""
    data = encode_body(world, body)
    sent_headers = dict(world.required_headers)
    if version is not None:
        sent_headers["A2A-Version"] = version
    sent_headers.update(headers or {})
    sent_headers = {k: v for k, v in sent_headers.items() if v is not None}  # None: left out
    path = "/a2a" + ("?" + urlencode(query) if query else "")
    response = world.client.post(path, data=data, headers=sent_headers,
                                 content_type=content_type, buffered=False)
    return response, data + json.dumps(sent_headers).encode() + path.encode()


def exchange(world: World, body: Any, *, request_id: Any, expect: Expect, what: str,
             validate_result: Optional[Callable] = None, validate_error: Optional[Callable] = None,
             **post_args: Any) -> Dict[str, Any]:
    """Send, check the answer, and check the state: unchanged after a rejection,
    restored (seeds re-made, runs finished) after a success."""
    before = world.snapshot()
    body = encode_body(world, body)
    if len(body) > MAX_BODY and -32040 not in expect.codes:
        # refused while reading, before parsing: HTTP 413, -32600, the id unread
        expect, request_id = Expect.error(-32600), None
    response, sent = post(world, body, **post_args)
    note(f"{what}: sent {sent[:600]!r}")
    answer, rejected = check_rpc_answer(response, sent=sent, request_id=request_id,
                                        expect=expect, validate_result=validate_result,
                                        validate_error=validate_error)
    event(f"error {answer['error']['code']}" if rejected else "result")
    if rejected:
        world.assert_unchanged(before, what)
    else:
        world.restore()
    return answer


# ================================================================== method specs


REMOVE = object()  # a mutation that deletes the member
BASE = Expect(base=True)  # a mutation whose outcome is the spec's base outcome


@dataclasses.dataclass
class F:
    """One member of a method's params and what kind of value it takes."""

    path: Tuple[Any, ...]
    kind: str
    required: bool = False
    #: For ``task_ref`` members: the outcome per seeded task (others: base).
    refs: Optional[Dict[str, Expect]] = None
    #: For ``task_ref``: the outcome for an id nobody has (0.1 send creates it).
    unknown: Expect = E001
    #: The outcome when the member is missing, null or empty, if not the usual one.
    missing: Optional[Expect] = None
    #: For ``task_ref``: unknown ids create tasks, so each one must be new (0.1 send).
    fresh: bool = False


@dataclasses.dataclass
class Spec:
    dialect: str  # "1.0", "0.3" or "0.1" (0.1 names are served by the 0.3 table)
    method: str
    template: Dict[str, Any]
    fields: List[F]
    base: Expect = OK
    validate: Optional[Callable] = None
    capability: Optional[str] = None  # "push", "streaming" or "extended"
    #: What a non-empty tenant does: the task lives under the root tenant.
    tenant: Expect = OK

    @property
    def version(self) -> Optional[str]:
        return "1.0" if self.dialect == "1.0" else None  # 0.x clients send no header


SEEDED = (SEED_COMPLETED, SEED_INPUT, SEED_WORKING, SEED_V01)
ALL_OK = {s: OK for s in SEEDED}
SEND_REFS = {SEED_COMPLETED: Expect.error(-32004), SEED_INPUT: OK, SEED_WORKING: OK,
             SEED_V01: Expect.error(-32004)}
CANCEL_REFS = {SEED_COMPLETED: Expect.error(-32002), SEED_INPUT: OK, SEED_WORKING: OK,
               SEED_V01: Expect.error(-32002)}
SUBSCRIBE_REFS = {SEED_COMPLETED: Expect.error(-32004), SEED_INPUT: OK, SEED_WORKING: OK,
                  SEED_V01: Expect.error(-32004)}
CONFIG_REFS = {SEED_COMPLETED: OK, SEED_INPUT: E001, SEED_WORKING: E001, SEED_V01: E001}


def v1_message() -> Dict[str, Any]:
    return {"messageId": "m-fuzz", "role": "ROLE_USER", "parts": [{"text": "hello"}]}


def message_fields(prefix: Tuple[Any, ...], *, role: str, parts: str, refs: Dict[str, Expect],
                   v1: bool) -> List[F]:
    fields = [
        F(prefix, "obj", required=True),
        F(prefix + ("role",), role, required=True),
        F(prefix + ("parts",), parts, required=True),
        F(prefix + ("contextId",), "idstr"),
        F(prefix + ("metadata",), "obj"),
        F(prefix + ("extensions",), "list_str"),
        F(prefix + ("referenceTaskIds",), "list_str"),
        F(prefix + ("extra",), "extra"),
    ]
    if v1 or parts == "parts03":
        fields.append(F(prefix + ("messageId",), "idstr", required=True))
        fields.append(F(prefix + ("taskId",), "task_ref", refs=refs))
    if parts == "parts03":
        fields.append(F(prefix + ("kind",), "ignored"))
    return fields


SEND_V1 = dict(
    template={"message": v1_message(),
              "configuration": {"historyLength": 3, "returnImmediately": False,
                                "acceptedOutputModes": ["text/plain"]},
              "metadata": {"k": "v"}},
    fields=message_fields(("message",), role="role_v1", parts="parts_v1", refs=SEND_REFS,
                          v1=True) + [
        F(("configuration",), "obj"),
        F(("configuration", "historyLength"), "int0"),
        F(("configuration", "returnImmediately"), "bool"),
        F(("configuration", "acceptedOutputModes"), "list_str"),
        F(("configuration", "taskPushNotificationConfig"), "push_inline_v1"),
        F(("metadata",), "obj"),
        F(("tenant",), "tenant"),
        F(("extra",), "extra"),
    ],
)

#: What each 1.0 method accepts, by operation of the table (a2a_flask.protocol.operations);
#: SPECS_V1 follows the table, and test_every_operation_of_the_table_is_fuzzed fails
#: for an operation without an entry here.
PARAMS_V1 = {spec.method: spec for spec in [
    Spec("1.0", "SendMessage", validate=v1_result("Send Message Response"), **SEND_V1),
    Spec("1.0", "SendStreamingMessage", validate=v1_result("Stream Response"),
         capability="streaming", **SEND_V1),
    Spec("1.0", "GetTask", {"id": SEED_COMPLETED, "historyLength": 5},
         [F(("id",), "task_ref", required=True, refs=ALL_OK), F(("historyLength",), "int0"),
          F(("tenant",), "tenant"), F(("extra",), "extra")],
         validate=v1_result("Task"), tenant=E001),
    Spec("1.0", "ListTasks", {"pageSize": 10, "historyLength": 1, "includeArtifacts": True},
         [F(("contextId",), "idstr"), F(("status",), "state"), F(("pageSize",), "page"),
          F(("pageToken",), "page_token"), F(("historyLength",), "int0"),
          F(("statusTimestampAfter",), "timestamp"), F(("includeArtifacts",), "bool"),
          F(("tenant",), "tenant"), F(("extra",), "extra")],
         validate=v1_result("List Tasks Response")),
    Spec("1.0", "CancelTask", {"id": SEED_COMPLETED, "metadata": {}},
         [F(("id",), "task_ref", required=True, refs=CANCEL_REFS), F(("metadata",), "obj"),
          F(("tenant",), "tenant"), F(("extra",), "extra")],
         base=Expect.error(-32002), validate=v1_result("Task"), tenant=E001),
    Spec("1.0", "SubscribeToTask", {"id": SEED_WORKING},
         [F(("id",), "task_ref", required=True, refs=SUBSCRIBE_REFS), F(("tenant",), "tenant"),
          F(("extra",), "extra")],
         validate=v1_result("Stream Response"), capability="streaming", tenant=E001),
    Spec("1.0", "CreateTaskPushNotificationConfig",
         {"taskId": SEED_COMPLETED, "url": HOOK_URL, "token": "t",
          "authentication": {"scheme": "Bearer", "credentials": "c"}},
         # taskId is not REQUIRED in the 1.0 TaskPushNotificationConfig (it is empty inside
         # a SendMessageConfiguration): without one, no task is found.
         [F(("taskId",), "task_ref", required=True, refs=ALL_OK, missing=E001 | E602),
          F(("url",), "url", True),
          F(("id",), "idstr"), F(("token",), "header"), F(("authentication",), "auth"),
          F(("authentication", "scheme"), "header", required=True),
          F(("authentication", "credentials"), "header"), F(("tenant",), "tenant"),
          F(("extra",), "extra")],
         validate=v1_result("Task Push Notification Config"), capability="push", tenant=E001),
    Spec("1.0", "GetTaskPushNotificationConfig", {"taskId": SEED_COMPLETED, "id": SEED_CONFIG},
         [F(("taskId",), "task_ref", required=True, refs=CONFIG_REFS),
          F(("id",), "config_ref", required=True), F(("tenant",), "tenant"),
          F(("extra",), "extra")],
         validate=v1_result("Task Push Notification Config"), capability="push", tenant=E001),
    Spec("1.0", "ListTaskPushNotificationConfigs", {"taskId": SEED_COMPLETED, "pageSize": 10},
         [F(("taskId",), "task_ref", required=True, refs=ALL_OK),
          # The range of pageSize: see test_push_config_page_size_is_range_checked.
          F(("pageSize",), "int_type_only"), F(("pageToken",), "str"), F(("tenant",), "tenant"),
          F(("extra",), "extra")],
         validate=v1_result("List Task Push Notification Configs Response"), capability="push",
         tenant=E001),
    Spec("1.0", "DeleteTaskPushNotificationConfig", {"taskId": SEED_COMPLETED, "id": "cfg-none"},
         [F(("taskId",), "task_ref", required=True, refs=ALL_OK), F(("id",), "idstr", True),
          F(("tenant",), "tenant"), F(("extra",), "extra")],
         capability="push", tenant=E001),
    Spec("1.0", "GetExtendedAgentCard", {},
         [F(("tenant",), "tenant"), F(("extra",), "extra")], validate=v1_card,
         capability="extended"),
]}
SPECS_V1 = [PARAMS_V1[op.name] for op in OPERATIONS if op.name in PARAMS_V1]


def v03_message() -> Dict[str, Any]:
    return {"kind": "message", "messageId": "m-fuzz", "role": "user",
            "parts": [{"kind": "text", "text": "hello"}]}


SEND_V03 = dict(
    template={"message": v03_message(),
              "configuration": {"blocking": True, "historyLength": 3,
                                "acceptedOutputModes": ["text/plain"]},
              "metadata": {"k": "v"}},
    fields=message_fields(("message",), role="role_v03", parts="parts03", refs=SEND_REFS,
                          v1=False) + [
        F(("configuration",), "obj"),
        F(("configuration", "historyLength"), "int0"),
        # ``blocking`` is read as "is it exactly false": other values are ignored.
        F(("configuration", "blocking"), "ignored"),
        F(("configuration", "acceptedOutputModes"), "list_str"),
        F(("configuration", "pushNotificationConfig"), "push_inline_v03"),
        F(("metadata",), "obj"),
        F(("extra",), "extra"),
    ],
)
GET_V0X = either(v03_whole("GetTaskResponse"), v01_whole("GetTaskResponse"))
CANCEL_V0X = either(v03_whole("CancelTaskResponse"), v01_whole("CancelTaskResponse"))
STREAM_V0X = either(v03_whole("SendStreamingMessageResponse"),
                    v01_whole("SendTaskStreamingResponse"))

SPECS_V03 = [
    Spec("0.3", "message/send", validate=v03_whole("SendMessageResponse"), **SEND_V03),
    Spec("0.3", "message/stream", validate=v03_whole("SendStreamingMessageResponse"),
         capability="streaming", **SEND_V03),
    Spec("0.3", "tasks/get", {"id": SEED_COMPLETED, "historyLength": 2},
         [F(("id",), "task_ref", required=True, refs=ALL_OK), F(("historyLength",), "int0"),
          F(("metadata",), "ignored"), F(("extra",), "extra")], validate=GET_V0X),
    Spec("0.3", "tasks/cancel", {"id": SEED_COMPLETED},
         [F(("id",), "task_ref", required=True, refs=CANCEL_REFS), F(("metadata",), "obj"),
          F(("extra",), "extra")], base=Expect.error(-32002), validate=CANCEL_V0X),
    Spec("0.3", "tasks/resubscribe", {"id": SEED_WORKING},
         [F(("id",), "task_ref", required=True, refs=SUBSCRIBE_REFS), F(("extra",), "extra")],
         validate=STREAM_V0X, capability="streaming"),
    Spec("0.3", "tasks/pushNotificationConfig/set",
         {"taskId": SEED_COMPLETED,
          "pushNotificationConfig": {"url": HOOK_URL, "token": "t",
                                     "authentication": {"schemes": ["Bearer"],
                                                        "credentials": "c"}}},
         [F(("taskId",), "task_ref", required=True, refs=ALL_OK),
          F(("pushNotificationConfig",), "obj", required=True),
          F(("pushNotificationConfig", "url"), "url", required=True),
          F(("pushNotificationConfig", "id"), "idstr"),
          F(("pushNotificationConfig", "token"), "header"),
          F(("pushNotificationConfig", "authentication"), "lenient"),
          F(("pushNotificationConfig", "authentication", "schemes"), "lenient"),
          F(("pushNotificationConfig", "authentication", "credentials"), "header"),
          F(("extra",), "extra")],
         validate=v03_whole("SetTaskPushNotificationConfigResponse"), capability="push"),
    Spec("0.3", "tasks/pushNotificationConfig/get",
         {"id": SEED_COMPLETED, "pushNotificationConfigId": SEED_CONFIG},
         [F(("id",), "task_ref", required=True, refs=CONFIG_REFS),
          F(("pushNotificationConfigId",), "config_ref_optional"), F(("extra",), "extra")],
         validate=v03_whole("GetTaskPushNotificationConfigResponse"), capability="push"),
    Spec("0.3", "tasks/pushNotificationConfig/list", {"id": SEED_COMPLETED},
         [F(("id",), "task_ref", required=True, refs=ALL_OK), F(("extra",), "extra")],
         validate=v03_whole("ListTaskPushNotificationConfigResponse"), capability="push"),
    Spec("0.3", "tasks/pushNotificationConfig/delete",
         {"id": SEED_COMPLETED, "pushNotificationConfigId": "cfg-none"},
         [F(("id",), "task_ref", required=True, refs=ALL_OK),
          F(("pushNotificationConfigId",), "idstr", required=True), F(("extra",), "extra")],
         validate=v03_whole("DeleteTaskPushNotificationConfigResponse"), capability="push"),
    Spec("0.3", "agent/getAuthenticatedExtendedCard", {}, [F(("extra",), "extra")],
         validate=v03_whole("GetAuthenticatedExtendedCardResponse"), capability="extended"),
]

SEND_01_REFS = {SEED_COMPLETED: Expect.error(-32004), SEED_INPUT: OK, SEED_WORKING: OK,
                SEED_V01: Expect.error(-32004)}
SEND_V01 = dict(
    template={"id": FRESH,
              "message": {"role": "user", "parts": [{"type": "text", "text": "hello"}]},
              "historyLength": 2, "acceptedOutputModes": ["text/plain"], "metadata": {}},
    fields=[
        # The client names the task: an unknown id creates it.
        F(("id",), "task_ref", required=True, refs=SEND_01_REFS, unknown=OK, fresh=True),
        F(("sessionId",), "idstr"),
        F(("historyLength",), "int0"), F(("acceptedOutputModes",), "list_str"),
        F(("pushNotification",), "push_inline_v01"), F(("metadata",), "obj"),
        F(("extra",), "extra"),
    ] + message_fields(("message",), role="role_v03", parts="parts01", refs={}, v1=False),
)

SPECS_V01 = [
    Spec("0.1", "tasks/send", validate=v01_whole("SendTaskResponse"), **SEND_V01),
    Spec("0.1", "tasks/sendSubscribe", validate=v01_whole("SendTaskStreamingResponse"),
         capability="streaming", **SEND_V01),
    Spec("0.1", "tasks/get", {"id": SEED_V01, "historyLength": 2},
         [F(("id",), "task_ref", required=True, refs=ALL_OK), F(("historyLength",), "int0"),
          F(("extra",), "extra")], validate=GET_V0X),
    Spec("0.1", "tasks/cancel", {"id": SEED_V01},
         [F(("id",), "task_ref", required=True, refs=CANCEL_REFS), F(("extra",), "extra")],
         base=Expect.error(-32002), validate=CANCEL_V0X),
    Spec("0.1", "tasks/resubscribe", {"id": SEED_V01},
         [F(("id",), "task_ref", required=True, refs=SUBSCRIBE_REFS), F(("extra",), "extra")],
         base=Expect.error(-32004), validate=STREAM_V0X, capability="streaming"),
    Spec("0.1", "tasks/pushNotification/set",
         {"id": SEED_COMPLETED, "pushNotificationConfig": {"url": HOOK_URL, "token": "t"}},
         [F(("id",), "task_ref", required=True, refs=ALL_OK),
          F(("pushNotificationConfig",), "obj", required=True),
          F(("pushNotificationConfig", "url"), "url", required=True),
          F(("pushNotificationConfig", "token"), "header"),
          F(("pushNotificationConfig", "authentication"), "lenient"), F(("extra",), "extra")],
         validate=v01_whole("SetTaskPushNotificationResponse"), capability="push"),
    Spec("0.1", "tasks/pushNotification/get", {"id": SEED_COMPLETED},
         # A 0.1 config is read back by the task id: present only once one was set.
         [F(("id",), "task_ref", required=True, refs={s: E001 | OK for s in SEEDED}),
          F(("extra",), "extra")],
         base=E001 | OK, validate=v01_whole("GetTaskPushNotificationResponse"),
         capability="push"),
]

SPECS = {"1.0": SPECS_V1, "0.3": SPECS_V03, "0.1": SPECS_V01}
#: 0.x errors validate against their own schemas too (1.0 has no JSON-RPC envelope schema).
ERROR_SCHEMAS = {"0.3": v03_whole("JSONRPCErrorResponse"),
                 # The 0.1 schema has no null id, which an unread body (413) must get.
                 "0.1": lambda body: body["id"] is None or v01_whole("JSONRPCResponse")(body)}
ALL_SPECS = SPECS_V1 + SPECS_V03 + SPECS_V01
BY_NAME = {spec.method: spec for spec in SPECS_V1 + SPECS_V03}
BY_NAME.update({s.method: s for s in SPECS_V01 if s.method not in BY_NAME})
NAMES_V1 = {s.method for s in SPECS_V1}
NAMES_V03 = {s.method for s in SPECS_V03} | {s.method for s in SPECS_V01}
ALL_NAMES = NAMES_V1 | NAMES_V03
SERVED = {"1.0": NAMES_V1, "0.3": NAMES_V03}


# ================================================================== mutations

INPUT_MODES = ["text/plain", "application/json"]


def media_expect(media_type: Any) -> Expect:
    """-32005 when a part's media type is not among the card's input modes."""
    if not isinstance(media_type, str):
        return E602
    media = media_type.split(";")[0].strip().lower()
    if media and not any(fnmatch.fnmatch(media, mode) for mode in INPUT_MODES):
        return Expect.error(-32005)
    return BASE


media_types = st.one_of(
    st.sampled_from(["text/plain", "TEXT/Plain; charset=utf-8", "application/json", "image/png",
                     "application/octet-stream", "", "text/*", "*/*", "x", "text/plain;;;"]),
    hostile_text)
valid_base64 = st.one_of(
    st.binary(max_size=64).map(lambda b: base64.b64encode(b).decode()),
    st.binary(max_size=64).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
    st.sampled_from([""]))


def bad_part(tag: Optional[str]) -> st.SearchStrategy[Any]:
    """A part that can only be refused with -32602 (``tag``: the 0.x discriminator)."""
    scalars_and_lists = st.one_of(json_scalars, st.lists(json_scalars, max_size=2))
    if tag is None:  # 1.0: member names are the discriminator
        return st.one_of(
            scalars_and_lists,
            st.sampled_from([{}, {"mediaType": "text/plain"}, {"kind": "text"},
                             {"type": "text", "text": None}, {"text": "a", "url": "b"},
                             {"text": "a", "data": None}, {"raw": "AA==", "url": "x"},
                             {"filename": "f.txt"}]),
            wrong_for_string.map(lambda v: {"text": v}),
            wrong_for_string.map(lambda v: {"url": v}),
            wrong_for_string.map(lambda v: {"raw": v}),
            bad_base64.map(lambda v: {"raw": v}),
            wrong_for_string.map(lambda v: {"text": "x", "mediaType": v}),
            wrong_for_string.map(lambda v: {"text": "x", "filename": v}),
            wrong_for_object.filter(lambda v: v is not None).map(
                lambda v: {"text": "x", "metadata": v}),
        )
    return st.one_of(
        scalars_and_lists,
        st.sampled_from([{tag: "bogus", "text": "x"}, {tag: 5}, {tag: "TEXT", "text": "x"},
                         {tag: "text"}, {tag: "file", "file": {}},
                         {tag: "file", "file": {"name": "n", "mimeType": "text/plain"}},
                         {tag: ["text"], "text": "x"}, {}]),
        wrong_for_string.map(lambda v: {tag: "text", "text": v}),
        wrong_for_object.filter(lambda v: v is not None).map(lambda v: {tag: "file", "file": v}),
        bad_base64.map(lambda v: {tag: "file", "file": {"bytes": v}}),
        wrong_for_string.map(lambda v: {tag: "file", "file": {"uri": v}}),
        wrong_for_string.map(lambda v: {tag: "file", "file": {"uri": "u", "name": v}}),
        wrong_for_string.map(lambda v: {tag: "file", "file": {"uri": "u", "mimeType": v}}),
        wrong_for_object.filter(lambda v: v is not None).map(
            lambda v: {tag: "text", "text": "x", "metadata": v}),
    )


def good_part(tag: Optional[str]) -> st.SearchStrategy[Tuple[Any, Expect]]:
    """A valid part, hostile content included, with its outcome (-32005 for media types
    the card does not accept)."""
    plain = lambda part: (part, BASE)  # noqa: E731
    if tag is None:
        return st.one_of(
            hostile_text.map(lambda t: plain({"text": t})),
            st.one_of(json_values, deep_values).map(lambda d: plain({"data": d})),
            st.tuples(valid_base64, media_types, hostile_text).map(
                lambda v: ({"raw": v[0], "mediaType": v[1], "filename": v[2]},
                           media_expect(v[1]))),
            st.tuples(hostile_text, media_types).map(
                lambda v: ({"url": v[0], "mediaType": v[1]}, media_expect(v[1]))),
            json_objects.map(lambda m: plain({"text": "x", "metadata": m})),
            st.just(plain({"text": "x", "kind": "bogus", "type": 5, "file": 1})),
        )
    return st.one_of(
        hostile_text.map(lambda t: plain({tag: "text", "text": t})),
        st.one_of(json_values, deep_values).map(lambda d: plain({tag: "data", "data": d})),
        st.tuples(valid_base64, media_types, hostile_text).map(
            lambda v: ({tag: "file", "file": {"bytes": v[0], "mimeType": v[1], "name": v[2]}},
                       media_expect(v[1]))),
        st.tuples(hostile_text, media_types).map(
            lambda v: ({tag: "file", "file": {"uri": v[0], "mimeType": v[1]}},
                       media_expect(v[1]))),
        st.just(plain({"text": "1.0-shaped parts pass through"})),
        st.just(plain({"type" if tag == "kind" else "kind": "text", "text": "other tag"})),
    )


def combine_parts(parts: List[Tuple[Any, Expect]]) -> Tuple[List[Any], Expect]:
    outcomes = [e for _, e in parts if e != BASE]
    return [p for p, _ in parts], (outcomes[0] if outcomes else BASE)


def parts_mutations(tag: Optional[str]) -> st.SearchStrategy[Tuple[Any, Any]]:
    first_ok = {"text": "ok"} if tag is None else {tag: "text", "text": "ok"}
    return st.one_of(
        wrong_for_list.map(lambda v: (v, E602)),
        st.just(([], E602)),
        st.lists(bad_part(tag), min_size=1, max_size=3).map(lambda ps: ([first_ok] + ps, E602)),
        # One bad media type at most per message, so the expected code is exact.
        st.lists(good_part(tag), min_size=1, max_size=4).filter(
            lambda ps: sum(e != BASE for _, e in ps) <= 1).map(combine_parts),
        st.sampled_from([MAX_PARTS - 1, MAX_PARTS + 1, 3000]).map(
            lambda n: ([first_ok] * (n + 1), BASE if n + 1 <= MAX_PARTS else E602)),
        # Inline files at and past A2A_MAX_FILE_SIZE.
        st.sampled_from([MAX_FILE, MAX_FILE + 1]).map(lambda n: (
            [big_file(tag, n)], BASE if n <= MAX_FILE else E602)),
    )


def big_file(tag: Optional[str], size: int) -> Dict[str, Any]:
    raw = base64.b64encode(b"\x01" * size).decode()
    if tag is None:
        return {"raw": raw, "mediaType": "text/plain"}
    return {tag: "file", "file": {"bytes": raw, "mimeType": "text/plain"}}


def role_mutations(kind: str) -> st.SearchStrategy[Tuple[Any, Any]]:
    if kind == "role_v1":
        good = st.sampled_from(["ROLE_USER", USER_INDEX])
        bad = bad_roles_v1
    else:  # 0.3 and 0.1 say "user"; the 1.0 name passes through
        good = st.sampled_from(["user", "ROLE_USER", USER_INDEX])
        bad = st.one_of(st.sampled_from(["agent", "ROLE_AGENT", "User", "USER", "", "system",
                                         0, 2, -1, 1.5, True, None]),
                        text().filter(lambda s: s not in ("user", "ROLE_USER")),
                        st.lists(st.just("user"), min_size=1, max_size=2))
    return st.one_of(good.map(lambda v: (v, BASE)), bad.map(lambda v: (v, E602)))


def good_secret(text: str) -> bool:
    """A webhook token the server takes (see the ``header`` fields below)."""
    return len(text) <= 4096 and not header_value_problem(text)


def push_inline(kind: str, flavor: Flavor) -> st.SearchStrategy[Tuple[Any, Any]]:
    """A push config inside a send: valid ones need the push capability (-32003)."""
    valid = Expect.success() if flavor.push else Expect.error(-32003)
    if kind == "push_inline_v1":
        good = st.builds(lambda token: {"url": HOOK_URL, "token": token},
                         hostile_text.filter(good_secret))
        bad = st.one_of(
            wrong_for_object.filter(lambda v: v is not None),
            st.sampled_from([{}, {"url": ""}, {"token": "t"}, {"url": HOOK_URL,
                                                              "authentication": {}}]),
            wrong_for_string.map(lambda v: {"url": v}),
            wrong_for_string.map(lambda v: {"url": HOOK_URL, "token": v}),
        )
    else:  # 0.3 / 0.1: {url, token, authentication: {schemes: [...]}}
        good = st.builds(lambda token: {"url": HOOK_URL, "token": token,
                                        "authentication": {"schemes": ["Bearer"]}},
                         hostile_text.filter(good_secret))
        bad = st.one_of(
            wrong_for_object.filter(lambda v: v is not None),
            st.sampled_from([{}, {"url": ""}, {"token": "t"}]),
            wrong_for_string.map(lambda v: {"url": v}),
        )
    # The push error (-32003, checked after decoding) may also come first in a bare world.
    refused = E602 if flavor.push else Expect.error(-32602, -32003)
    return st.one_of(good.map(lambda v: (v, valid)), bad.map(lambda v: (v, refused)))


def task_ref_mutations(field: F) -> st.SearchStrategy[Tuple[Any, Any]]:
    refs = field.refs or {}
    if field.fresh:  # hostile, but new: the id policy sees it with 32 more characters
        unknown = st.just((FRESH, field.unknown))
        hostile = hostile_ids.map(lambda v: (v + FRESH_SUFFIX, E602 if bad_id(v + "0" * 32)
                                             else field.unknown))
    else:
        unknown = unknown_ids.map(lambda v: (v, field.unknown))
        hostile = hostile_ids.map(lambda v: (v, E602 if bad_id(v) else field.unknown))
    choices = [
        st.sampled_from(sorted(refs)).map(lambda slot: (slot, refs[slot])) if refs else None,
        unknown, hostile,
        wrong_for_string.map(lambda v: (v, E602)),
    ]
    if field.required:
        choices.append(st.just(("", field.missing or E602)))
    return st.one_of([c for c in choices if c is not None])


def field_mutations(spec: Spec, field: F, flavor: Flavor) -> st.SearchStrategy[Tuple[Any, Any]]:
    """(new value or REMOVE, outcome or BASE) for one member."""
    kind = field.kind
    absent = field.missing or (E602 if field.required else BASE)
    common = [st.just((REMOVE, absent)), st.just((None, absent))]
    if kind == "extra":  # an unknown member (never a real name): ignored
        return st.tuples(text(max_size=8).map(lambda k: f"x-fuzz-{k}"), json_values).map(
            lambda kv: (("EXTRA", kv[0], kv[1]), BASE))
    if kind == "ignored":
        return json_values.map(lambda v: (v, BASE))
    if kind == "lenient":  # read loosely by the dialect: refusing or ignoring both fine
        return json_values.map(lambda v: (v, BASE | E602))
    if kind == "idstr":  # a client-chosen id: the id policy applies
        strategy = [wrong_for_string.map(lambda v: (v, E602)),
                    hostile_text.filter(lambda s: s or not field.required).map(
                        lambda v: (v, E602 if bad_id(v) else BASE))]
        if field.required:
            strategy.append(st.just(("", E602)))
    elif kind == "str":
        strategy = [wrong_for_string.map(lambda v: (v, E602)),
                    hostile_text.filter(lambda s: s or not field.required).map(
                        lambda v: (v, BASE))]
        if field.required:
            strategy.append(st.just(("", E602)))
    elif kind == "header":  # sent as a webhook header: test_push_headers has the rules
        strategy = [wrong_for_string.map(lambda v: (v, E602)),
                    hostile_text.filter(lambda s: s or not field.required).map(
                        lambda v: (v, E602 if header_value_problem(v) or len(v) > 4096
                                   else BASE))]
        if field.required:
            strategy.append(st.just(("", E602)))
    elif kind == "url":
        strategy = [wrong_for_string.map(lambda v: (v, E602)), st.just(("", E602)),
                    hostile_text.filter(bool).map(lambda v: (v, BASE | E602))]
    elif kind == "tenant":
        strategy = [wrong_for_string.map(lambda v: (v, E602)),
                    hostile_text.filter(bool).map(lambda v: (v, spec.tenant | E602)),
                    st.just(("", BASE))]
    elif kind == "obj":
        strategy = [wrong_for_object.filter(lambda v: v is not None).map(lambda v: (v, E602)),
                    st.one_of(json_objects, deep_values.filter(
                        lambda d: isinstance(d, dict))).map(lambda v: (v, BASE))]
        if field.required:
            strategy = strategy[:1] + [st.just(({}, E602))]
    elif kind == "auth":  # AuthenticationInfo: scheme required
        strategy = [wrong_for_object.filter(lambda v: v is not None).map(lambda v: (v, E602)),
                    st.just(({}, E602)),
                    st.tuples(hostile_text.filter(bool), hostile_text).map(
                        lambda v: ({"scheme": v[0], "credentials": v[1]},
                                   E602 if any(map(header_value_problem, v)) else BASE))]
    elif kind == "list_str":
        strategy = [wrong_for_list.map(lambda v: (v, E602)),
                    st.lists(wrong_for_string, min_size=1, max_size=3).map(lambda v: (v, E602)),
                    st.lists(hostile_text, max_size=5).map(lambda v: (v, BASE))]
    elif kind == "bool":
        strategy = [wrong_for_bool.map(lambda v: (v, E602)),
                    st.booleans().map(lambda v: (v, BASE))]
    elif kind in ("int0", "page", "int_type_only"):
        strategy = [not_an_int.map(lambda v: (v, E602))]
        if kind == "int0":
            strategy += [negative_ints.map(lambda v: (v, E602)),
                         good_history.map(lambda v: (v, BASE))]
        elif kind == "page":
            strategy += [bad_page_sizes.map(lambda v: (v, E602)),
                         st.one_of(st.integers(1, 100), st.sampled_from(["7", 100.0])).map(
                             lambda v: (v, BASE))]
        else:
            strategy += [st.integers(1, 100).map(lambda v: (v, BASE))]
    elif kind == "state":
        strategy = [bad_states.map(lambda v: (v, E602)),
                    st.sampled_from(STATE_NAMES).map(lambda s: (s, BASE))]
    elif kind == "timestamp":
        strategy = [wrong_for_string.map(lambda v: (v, E602)),
                    bad_timestamps.map(lambda v: (v, E602)),
                    # Offsets past year 1 / 9999: test_a_timestamp_out_of_range_in_utc_is_invalid_params.
                    st.sampled_from(["2024-01-01T00:00:00Z", "2024-01-01T00:00:00.123+05:30",
                                     "1970-01-01T00:00:00z", "2999-12-31T23:59:59-08:00", ""]
                                    ).map(lambda v: (v, BASE))]
    elif kind == "page_token":
        # Deeply nested JSON in a token: test_a_deeply_nested_page_token_is_invalid_params.
        strategy = [wrong_for_string.map(lambda v: (v, E602)),
                    hostile_text.filter(bool).map(lambda v: (v, E602 | BASE)),
                    st.binary(max_size=40).map(
                        lambda b: (base64.urlsafe_b64encode(b).decode(), E602 | BASE))]
    elif kind in ("role_v1", "role_v03"):
        return st.one_of(*common, role_mutations(kind)) if field.required else \
            st.one_of(st.just((REMOVE, BASE)), role_mutations(kind))
    elif kind in ("parts_v1", "parts03", "parts01"):
        tag = {"parts_v1": None, "parts03": "kind", "parts01": "type"}[kind]
        return st.one_of(*common, parts_mutations(tag))
    elif kind.startswith("push_inline"):
        return st.one_of(st.just((REMOVE, BASE)), push_inline(kind, flavor))
    elif kind == "task_ref":
        return st.one_of(*common, task_ref_mutations(field))
    elif kind == "config_ref":
        strategy = [wrong_for_string.map(lambda v: (v, E602)), st.just(("", E602)),
                    # never stored: just not found, unless no config could have it
                    hostile_ids.map(lambda v: (v, E602 if bad_id(v) else E001)),
                    unknown_ids.map(lambda v: (v, E001))]
    elif kind == "config_ref_optional":  # 0.3 get: missing means "the task's first config"
        return st.one_of(st.just((REMOVE, BASE)), st.just((None, BASE)), st.just(("", BASE)),
                         wrong_for_string.map(lambda v: (v, E602)),
                         unknown_ids.map(lambda v: (v, E001)))
    else:
        raise AssertionError(f"unknown field kind {kind}")
    return st.one_of(*common, *strategy)


def apply(template: Dict[str, Any], path: Tuple[Any, ...], value: Any) -> Dict[str, Any]:
    params = json.loads(json.dumps(template))
    if isinstance(value, tuple) and value and value[0] == "EXTRA":
        _, key, extra = value
        parent = params
        for step in path[:-1]:
            parent = parent.setdefault(step, {}) if isinstance(parent, dict) else parent
        if isinstance(parent, dict):
            parent[key] = extra
        return params
    parent = params
    for step in path[:-1]:
        if not isinstance(parent.get(step), dict):
            parent[step] = {}
        parent = parent[step]
    if value is REMOVE:
        parent.pop(path[-1], None)
    else:
        parent[path[-1]] = value
    return params


def final_expect(spec: Spec, flavor: Flavor, outcome: Any) -> Expect:
    """The outcome of one mutation in a world: BASE becomes the spec's base; a missing
    capability adds its error (and rules out a result)."""
    expect = outcome
    if outcome.base:
        expect = spec.base | dataclasses.replace(outcome, base=False)
    missing = {"push": not flavor.push, "streaming": not flavor.streaming,
               "extended": not flavor.extended}.get(spec.capability or "", False)
    if missing:  # two defects: either code may come first, a result never
        code = -32003 if spec.capability == "push" else -32004
        return Expect(expect.codes | {code}, False)
    return expect


_MUTATIONS: Dict[Any, st.SearchStrategy] = {}


def mutations_of(spec: Spec, flavor: Flavor,
                 mutate: Callable[[Spec, F, Flavor], st.SearchStrategy]
                 ) -> st.SearchStrategy[Tuple[Dict, Expect, str]]:
    """One member of ``spec`` mutated: (params, outcome, description).  Built once per
    spec and flavor (hypothesis then reuses what it learnt about the strategy)."""
    key = (spec.dialect, spec.method, spec.base, tuple(f.path for f in spec.fields), flavor,
           mutate)
    if key not in _MUTATIONS:
        def one(field: F) -> st.SearchStrategy[Tuple[Dict, Expect, str]]:
            return mutate(spec, field, flavor).map(
                lambda vo: (apply(spec.template, field.path, vo[0]),
                            final_expect(spec, flavor, vo[1]),
                            f"{spec.method} {'.'.join(map(str, field.path))}"))
        _MUTATIONS[key] = st.one_of([one(field) for field in spec.fields])
    return _MUTATIONS[key]


def mutated_params(spec: Spec, flavor: Flavor) -> st.SearchStrategy[Tuple[Dict, Expect, str]]:
    return mutations_of(spec, flavor, field_mutations)


# ================================================================== properties: envelopes

request_ids = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63), st.sampled_from([0, -1, 2**200]),
    hostile_text.filter(lambda s: len(s) < 5000))
bad_request_ids = st.one_of(
    st.booleans(), finite_floats, st.sampled_from([1.0, -0.0, 1e300]),
    st.lists(json_scalars, max_size=3), json_objects)


def valid_request(spec: Spec) -> Dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": spec.method, "params": spec.template}


def strict_json(data: bytes) -> bool:
    try:
        json.loads(data, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        return True
    except (ValueError, UnicodeDecodeError, RecursionError):
        return False


def truncated(spec: Spec, cut: float) -> bytes:
    data = json.dumps(valid_request(spec)).encode()
    return data[: int(len(data) * cut)]


unparseable = st.one_of(
    st.binary(max_size=200),
    st.builds(truncated, st.sampled_from(ALL_SPECS), st.floats(0, 0.999)),
    st.builds(lambda spec, pos, junk: (lambda d: d[:pos % (len(d) + 1)] + junk
                                       + d[pos % (len(d) + 1):])(
        json.dumps(valid_request(spec)).encode()),
        st.sampled_from(ALL_SPECS), st.integers(0, 10_000),
        st.sampled_from([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00", b"'", b",", b"}", b"NaN",
                         b"//", b"/*", b"\\"])),
    st.sampled_from([b"", b" ", b"{", b"}", b"[", b"{}}", b"{}{}", b"nul", b"tru", b"NaN",
                     b"Infinity", b"-Infinity", b'{"jsonrpc":"2.0","id":NaN,"method":"GetTask"}',
                     b'{"id":1,"jsonrpc":"2.0","method":"GetTask","params":{"id":Infinity}}',
                     b"{'jsonrpc':'2.0'}", b'{"a":1,}', b"\xef\xbb\xbf{}", b"\x00\x00\x00",
                     b'{"jsonrpc":"2.0","id":1,"method":"GetTask"} x', b'"\\x41"',
                     b"[" * 50, b'{"a":"\\u12"}', b'{"a":"\x01"}']),
).filter(lambda data: not strict_json(data))


content_types = st.one_of(
    st.none(),
    st.sampled_from(["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                     "application/xml", "application/jsonx", "json", "application/", "/json",
                     "application/json-patch", "text/json", "application/json+", "*/*", "",
                     "application/json; charset=utf-8", "application/a2a+json",
                     "APPLICATION/JSON", "application/vnd.api+json", "application/json;;",
                     "application/json, text/plain", "text/html"]),
    header_garbage,
)


# ================================================================== credentials

TOKENS = {"alice-token": "alice", "bob-token": "bob"}  # tests.support.helpers.bearer_auth
authorization_values = st.one_of(
    st.none(),  # no Authorization header at all
    st.sampled_from(["", " ", "Bearer", "Bearer ", "Bearer  ", "bearer wrong", "Basic YWxpY2U6cHc=",
                     "Bearer alice-token x", "Token alice-token", "Bearer\talice-token",
                     "alice-token", "Bearer alice", "Bearer alice-token,bob-token",
                     "BEARER bob-token", "Bearer bob-token", "bearer alice-token",
                     "Bearer " + "a" * 10_000, "Bearer \x85", "Negotiate x"]),
    header_garbage,
    header_garbage.map(lambda t: "Bearer " + t),
)


def caller(authorization: Optional[str]) -> Optional[str]:
    """Who ``BearerAuth`` takes the header for (RFC 6750: ``Bearer`` any case, one space)."""
    kind, _, token = (authorization or "").partition(" ")
    return TOKENS.get(token.strip()) if kind.lower() == "bearer" else None
