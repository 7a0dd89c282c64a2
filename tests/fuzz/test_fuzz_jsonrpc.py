"""Property-based fuzzing of the JSON-RPC endpoint: every method of A2A 1.0, 0.3/0.2 and 0.1.

Each property sends hostile requests to an app whose executor and run launches
are recorded, with seeded tasks (completed, input-required, working, and a task
created by a 0.1 client) and a seeded push config, and asserts for every answer:

* ``application/json`` (or a stream), never HTML, never a traceback; HTTP 200, except
  for failures of the HTTP exchange itself (401 credentials, 413 size: docs/protocol.rst);
* a well-formed JSON-RPC 2.0 response: ``jsonrpc: "2.0"``, ``result`` xor
  ``error``, ``id`` echoing the request id when it was readable and null otherwise;
* an error code from the set the digest allows for that defect (exactly one code
  when the defect maps to one: bad JSON -32700, not a request -32600, non-object
  params -32602, a missing task -32001, ...) and never -32603;
* a result, when a mutated request happens to still be valid, that validates
  against the official schema of its protocol version;
* and for every rejected request: no task created or changed, no push config
  changed, no executor call, no run launched.

The world, the method specs and the mutations are in :mod:`tests.support.fuzz_rpc`.
The bugs it found have their own minimal regression tests in
``test_fuzz_jsonrpc_regressions.py``; the strategies leave out exactly those inputs
(each exclusion names its test).
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional, Tuple

from hypothesis import given, strategies as st

from a2a_flask.protocol.operations import BY_NAME as OPERATION, OPERATIONS

from tests.support.fuzz_rpc import (
    ALL_NAMES, ALL_SPECS, ANY_A2A, BASE, BY_NAME, E001, ERROR_SCHEMAS, PARAMS_V1, REMOVE,
    SERVED, SPECS_V01, SPECS_V03, SPECS_V1, Spec, authorization_values, bad_request_ids, caller,
    content_types, encode_body, exchange, final_expect, mutated_params, post, request_ids,
    unparseable, valid_request,
)
from tests.support.fuzzkit import (
    Expect, OPTIONAL_EXT, OWNER, REQUIRED_EXT, SEED_COMPLETED, SEED_CONFIG, SEED_INPUT,
    SEED_WORKING, STRICT, World, a2a_version_garbage, check_rpc_answer, check_rpc_envelope,
    fuzz, header_garbage, hostile_text, is_json_content_type, json_scalars, json_values, keys,
    last_event_id_garbage, not_html, served_version, text, wrong_for_string,
)


@fuzz(1.5)
@given(body=unparseable, version=st.sampled_from(["1.0", None]))
def test_unparseable_bodies_are_parse_errors(world, body, version):
    """Invalid JSON (bytes, truncated requests, NaN, bad UTF-8, trailing junk) is -32700
    with a null id, whatever the version header."""
    exchange(world, body, request_id=None, expect=Expect.error(-32700), what="unparseable",
             version=version)


non_requests = st.one_of(
    json_scalars.filter(lambda v: v is not None) | st.just(None),
    st.lists(json_values, max_size=4),
    st.lists(st.sampled_from(ALL_SPECS).map(valid_request), min_size=1, max_size=3),
    st.sampled_from([[], [{}], [[]]]),
)


@fuzz(1.0)
@given(body=non_requests)
def test_json_that_is_not_one_request_object_is_invalid_request(world, body):
    """Scalars, arrays and batches (even of valid requests) are -32600 with a null id."""
    exchange(world, body, request_id=None, expect=Expect.error(-32600), what="not an object")


def odd_method_names() -> st.SearchStrategy[str]:
    names = sorted(ALL_NAMES)
    transforms = [
        str.lower, str.upper, str.swapcase, lambda n: n + "\u200b", lambda n: "\u200b" + n,
        lambda n: n + " ", lambda n: " " + n, lambda n: n + "\x00", lambda n: n + "/",
        lambda n: "/" + n, lambda n: n.replace("/", "\u2215"), lambda n: n.replace("e", "\u0435"),
        lambda n: n.replace("/", "."), lambda n: n.replace("/", "//"),
        lambda n: "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in n),
        lambda n: n + "\u0301", lambda n: n * 50, lambda n: n[:-1], lambda n: n + "\n",
    ]
    return st.one_of(
        st.builds(lambda n, t: t(n), st.sampled_from(names), st.sampled_from(transforms)),
        st.sampled_from(["rpc.discover", "system.listMethods", "__init__", "constructor",
                         "toString", "__proto__", "tasks/", "message/", "tasks/list",
                         "tasks/get/../cancel", "Tasks/Get", "ListTask", "x" * 10_000]),
        hostile_text.filter(bool),
    )


def envelope_expect(body: Dict[str, Any], version: Optional[str]) -> Tuple[Expect, Any]:
    """The outcome a defective envelope may get, and the id the answer must carry."""
    request_id = body.get("id")  # None: absent or null, a notification
    if request_id is not None and (isinstance(request_id, bool)
                                   or not isinstance(request_id, (str, int))
                                   or len(str(request_id)) > 256):  # echoed in every event
        return Expect.error(-32600), None
    defects = set()
    if body.get("jsonrpc") != "2.0":
        defects.add(-32600)
    method = body.get("method")
    if not isinstance(method, str) or not method:
        defects.add(-32600)
    params = body.get("params")
    if params is not None and not isinstance(params, dict):
        defects.add(-32602)
    dialect = served_version(version)
    spec = None
    if dialect is None:
        defects.add(-32009)
    elif isinstance(method, str) and method:
        if method in SERVED[dialect]:
            spec = BY_NAME[method]
        elif method in ALL_NAMES:
            defects.add(-32009)
        else:
            defects.add(-32601)
    if defects:
        return Expect.error(*defects), request_id
    assert spec is not None
    if request_id is None:
        # Method and params are checked before the missing id is refused: params the
        # method cannot read are -32602, anything else is the refusal, -32600.
        return Expect.error(-32600, -32602), None
    return ANY_A2A, request_id


absent = st.just(REMOVE)


@fuzz(2.0)
@given(
    spec=st.sampled_from(ALL_SPECS),
    jsonrpc=st.one_of(st.just("2.0"), absent, st.sampled_from(
        ["1.0", "2", "2.0 ", " 2.0", "2.00", "", "２.０", None, 2.0, 2, True, ["2.0"]]),
        hostile_text),
    request_id=st.one_of(request_ids, bad_request_ids, absent, st.just(None)),
    method=st.one_of(st.just("KEEP"), absent, wrong_for_string, st.just(""), odd_method_names()),
    params=st.one_of(st.just("KEEP"), absent, st.just(None),
                     st.one_of(json_scalars.filter(lambda v: v is not None),
                               st.lists(json_values, max_size=3))),
    extra=st.dictionaries(text(max_size=6).map(lambda k: "x-" + k), json_values, max_size=2),
)
def test_bad_envelopes_get_the_code_of_their_defect(world, spec, jsonrpc, request_id, method,
                                                    params, extra):
    """Wrong ``jsonrpc``, ids of every JSON type, bad or unknown method names and
    non-object params: -32600 / -32601 / -32602 / -32009 as the defect says; the id is
    echoed when it was a string or an integer (even a huge one), else null.  A request
    without an id gets the code of its other defects first, and -32600 only after."""
    body: Dict[str, Any] = {**extra}
    for key, value, keep in (("jsonrpc", jsonrpc, None), ("id", request_id, None),
                             ("method", method, spec.method), ("params", params, spec.template)):
        if value == "KEEP":
            value = keep
        if value is not REMOVE:
            body[key] = value
    expect, answer_id = envelope_expect(body, spec.version)
    exchange(world, body, request_id=world.resolve(answer_id), expect=expect, what="envelope",
             version=spec.version)


@fuzz(1.5)
@given(
    spec=st.sampled_from(ALL_SPECS),
    version=st.one_of(st.none(), st.sampled_from(["1.0", "1.0.1", " 1.0 ", "01.00", "0.3",
                                                  "0.3.0", "0.2", "0.2.6", "", "  "]),
                      a2a_version_garbage),
    in_query=st.booleans(),
    extensions=st.one_of(st.none(), header_garbage, st.just(OPTIONAL_EXT),
                         st.just(f" {OPTIONAL_EXT} , urn:x, ,")),
    last_event_id=st.one_of(st.none(), last_event_id_garbage),
)
def test_version_negotiation_with_any_a2a_version(world, spec, version, in_query, extensions,
                                                  last_event_id):
    """Any ``A2A-Version`` (header or query) with any method: served versions answer the
    method (or -32009 naming the right version), garbage is -32009; ``A2A-Extensions``
    and ``Last-Event-ID`` garbage change nothing, and only requested, declared
    extensions are echoed."""
    dialect = served_version(version)
    if dialect is None:
        expect = Expect.error(-32009)
    elif spec.method in SERVED[dialect]:
        expect = spec.base
    else:
        expect = Expect.error(-32009)
    headers = {"A2A-Extensions": extensions, "Last-Event-ID": last_event_id}
    before = world.snapshot()
    response, sent = post(world, valid_request(spec), version=None if in_query else version,
                          query={"A2A-Version": version} if in_query and version is not None
                          else None, headers=headers)
    echoed = response.headers.get("A2A-Extensions")
    body, rejected = check_rpc_answer(response, sent=sent, request_id=1, expect=expect,
                                      validate_result=spec.validate)
    if echoed is not None:
        requested = [u.strip() for u in (extensions or "").split(",")]
        assert [u.strip() for u in echoed.split(",")] == [OPTIONAL_EXT], echoed
        assert OPTIONAL_EXT in requested, (echoed, extensions)
    if rejected:
        world.assert_unchanged(before, f"version {version!r}")
    else:
        world.restore()




@fuzz(1.0)
@given(spec=st.sampled_from(ALL_SPECS), content_type=content_types)
def test_wrong_content_type_is_content_type_not_supported(world, spec, content_type):
    """A body that is not declared as JSON is refused with -32005 before anything else
    is checked, echoing the id the body holds (it is parsed only to find it); JSON
    types, ``+json`` suffixes and parameters are accepted."""
    if is_json_content_type(content_type):
        expect = spec.base
    else:
        expect = Expect.error(-32005)
    request_id = 1
    exchange(world, valid_request(spec), request_id=request_id, expect=expect,
             what=f"content type {content_type!r}", version=spec.version,
             content_type=content_type, validate_result=spec.validate)


@fuzz(0.5)
@given(verb=st.sampled_from(["GET", "PUT", "DELETE", "PATCH", "TRACE"]),
       path=st.sampled_from(["/a2a", "/a2a/", "/a2a?A2A-Version=1.0"]),
       body=st.one_of(st.none(), st.sampled_from(ALL_SPECS).map(valid_request)),
       content_type=content_types)
def test_other_verbs_on_the_endpoint_are_405_json_rpc_errors(world, verb, path, body,
                                                            content_type):
    """Whatever the verb, headers or body, the JSON-RPC URL answers in JSON-RPC: 405,
    ``Allow: POST``, -32600 with a null id, and nothing changes."""
    before = world.snapshot()
    data = None if body is None else encode_body(world, body)
    response = world.client.open(path, method=verb, data=data, content_type=content_type,
                                 headers=world.required_headers)
    assert response.status_code == 405 and response.headers["Allow"] == "POST"
    not_html(response)
    assert response.mimetype == "application/json", response.mimetype
    answer = response.get_json()
    check_rpc_envelope(answer, None)
    assert answer["error"]["code"] == -32600
    world.assert_unchanged(before, f"{verb} {path}")


# ================================================================== properties: params


def params_property(world: World, spec: Spec, data: Any) -> None:
    params, expect, what = data.draw(mutated_params(spec, world.flavor), label="mutation")
    exchange(world, {"jsonrpc": "2.0", "id": "fuzz", "method": spec.method, "params": params},
             request_id="fuzz", expect=expect, what=what, version=spec.version,
             validate_result=spec.validate, validate_error=ERROR_SCHEMAS.get(spec.dialect))


@fuzz(3.0)
@given(spec=st.sampled_from(SPECS_V1), data=st.data())
def test_v1_params(any_world, spec, data):
    """Every 1.0 method, one member mutated: wrong types, missing or empty required
    members, bad enums, negative/huge/float/string historyLength and pageSize, bad
    base64, bad timestamps, hostile and unknown ids, hostile parts (and valid but
    hostile content, which must succeed or fail with the A2A error it deserves)."""
    params_property(any_world, spec, data)


@fuzz(2.0)
@given(spec=st.sampled_from(SPECS_V03), data=st.data())
def test_v03_params(any_world, spec, data):
    """The same for every 0.3 method (``kind`` parts, lowercase roles, ``blocking``)."""
    params_property(any_world, spec, data)


@fuzz(1.5)
@given(spec=st.sampled_from(SPECS_V01), data=st.data())
def test_v01_params(any_world, spec, data):
    """The same for every 0.1 method (client-chosen task ids, ``type`` parts)."""
    params_property(any_world, spec, data)


field_names = st.sampled_from(
    ["id", "taskId", "message", "parts", "role", "messageId", "configuration", "historyLength",
     "pageSize", "pageToken", "status", "tenant", "metadata", "url", "pushNotificationConfig",
     "pushNotificationConfigId", "sessionId", "contextId", "statusTimestampAfter",
     "includeArtifacts", "returnImmediately", "blocking", "authentication"])
chaos_params = st.recursive(
    st.dictionaries(field_names | keys, json_scalars | st.sampled_from(list(
        (SEED_COMPLETED, SEED_INPUT, SEED_WORKING, SEED_CONFIG))), max_size=6),
    lambda inner: st.dictionaries(field_names, inner | json_values | st.lists(inner, max_size=2),
                                  max_size=5),
    max_leaves=15,
)


@fuzz(2.0)
@given(spec=st.sampled_from(ALL_SPECS), params=chaos_params)
def test_random_params_for_every_method(world, spec, params):
    """Random objects built from the real member names: any A2A error or a valid
    result, never an internal error, and nothing changes when it is refused."""
    exchange(world, {"jsonrpc": "2.0", "id": 7, "method": spec.method, "params": params},
             request_id=7, expect=ANY_A2A, what=f"{spec.method} chaos", version=spec.version,
             validate_result=spec.validate)


@fuzz(1.0)
@given(spec=st.sampled_from(ALL_SPECS), header=st.sampled_from(["A2A-Extensions",
                                                                "X-A2A-Extensions"]),
       value=st.one_of(st.none(), header_garbage, st.just(REQUIRED_EXT),
                       st.lists(st.sampled_from([REQUIRED_EXT + "x", REQUIRED_EXT.upper(),
                                                 " " + REQUIRED_EXT + " ", OPTIONAL_EXT, "",
                                                 "urn:a2a:x", REQUIRED_EXT[:-1]]),
                                max_size=4).map(",".join)))
def test_required_extension_garbage_is_extension_support_required(strict_world, spec,
                                                                    header, value):
    """A card with a required extension: every method without that URI in
    ``A2A-Extensions`` (or ``X-A2A-Extensions``) is -32008, whatever else the header holds."""
    requested = [u.strip() for u in (value or "").split(",")]
    if REQUIRED_EXT in requested:
        expect = final_expect(spec, STRICT, BASE)
    else:
        expect = Expect.error(-32008)
    headers = {header: value} if value is not None else {}
    before = strict_world.snapshot()
    response, sent = post(strict_world, valid_request(spec), version=spec.version,
                          headers={"A2A-Extensions": "", **headers})
    body, rejected = check_rpc_answer(response, sent=sent, request_id=1, expect=expect,
                                      validate_result=spec.validate)
    if rejected:
        strict_world.assert_unchanged(before, f"extensions {value!r}")
    else:
        strict_world.restore()


# ================================================================== properties: credentials


@fuzz(1.5)
@given(spec=st.sampled_from(ALL_SPECS), authorization=authorization_values,
       body=st.one_of(st.just(None), unparseable))
def test_credentials_come_first_and_owners_are_kept_apart(world, spec, authorization, body):
    """Missing or bad credentials are HTTP 401 with ``WWW-Authenticate`` and -32040, with a
    null id whatever the body (a stranger's body is not read); bob, a valid caller who
    does not own the seeded tasks, gets -32001 for every one of them, and his ListTasks
    shows none of alice's tasks."""
    headers = {"Authorization": authorization}  # None: no Authorization header at all
    who = caller(authorization)
    request_id: Any = 1
    if who is None:
        expect, request_id = Expect.error(-32040), None
    elif body is not None:
        expect, request_id = Expect.error(-32700), None
    elif who == OWNER:
        expect = spec.base
    else:
        expect = E001 if "SEED[" in json.dumps(spec.template) else spec.base

    def not_alices(answer: Dict[str, Any]) -> None:
        if spec.validate is not None:
            spec.validate(answer)
        result = answer["result"]
        if who != OWNER and isinstance(result, dict) and "tasks" in result:
            owners = {world.store.load(t["id"]).owner for t in result["tasks"]}
            assert owners <= {who}, owners

    exchange(world, body if body is not None else valid_request(spec), request_id=request_id,
             expect=expect, what=f"Authorization {authorization!r}", version=spec.version,
             headers=headers, validate_result=not_alices)


# ================================================================== coverage of the table


def test_every_operation_of_the_table_is_fuzzed():
    """A new operation of ``a2a_flask.protocol.operations`` is fuzzed (every property
    above samples SPECS_V1) once PARAMS_V1 says what it accepts: until then this fails."""
    assert set(PARAMS_V1) == {op.name for op in OPERATIONS}
    assert [spec.method for spec in SPECS_V1] == [op.name for op in OPERATIONS]
    for spec in SPECS_V1:
        assert (spec.capability == "streaming") == OPERATION[spec.method].streaming, spec.method
