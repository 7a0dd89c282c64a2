"""ProtoJSON encode/decode of the 1.0 models, and the timestamp helpers.

Every encoded value is validated against the official 1.0 JSON schema; decode
is checked for the ProtoJSON reading rules the digest lists (§2.3): camelCase
or snake_case names, unknown members ignored, ``null`` as unset, enum numbers,
and one field violation per bad member.
"""
from __future__ import annotations

import re
import uuid
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List, Tuple

import pytest

from a2a_flask.protocol import models as m
from a2a_flask.protocol.codec import camel, decode, encode
from a2a_flask.protocol.errors import InvalidParamsError

from tests.support.helpers import validate

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


# ------------------------------------------------------------------ helpers


def raw_violations(cls: type, value: Any) -> List[Tuple[str, str]]:
    """The ``(field, description)`` pairs decode() reports for ``value`` (it must fail)."""
    with pytest.raises(InvalidParamsError) as info:
        decode(cls, value)
    assert info.value.code == -32602
    assert info.value.violations, "InvalidParamsError without field violations"
    for field, description in info.value.violations:
        assert isinstance(field, str) and isinstance(description, str) and description
    return info.value.violations


def violations(cls: type, value: Any) -> List[str]:
    """The distinct fields decode() reports for ``value``, in first-reported order."""
    return list(dict.fromkeys(field for field, _ in raw_violations(cls, value)))


def all_keys(value: Any) -> List[str]:
    """Every object member name in a JSON value, recursively (``data``/``metadata`` excluded)."""
    keys: List[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            keys.append(key)
            if key not in ("data", "metadata"):
                keys.extend(all_keys(item))
    elif isinstance(value, list):
        for item in value:
            keys.extend(all_keys(item))
    return keys


def sample_message(**changes: Any) -> m.Message:
    values: Dict[str, Any] = dict(
        message_id="msg-1", role=m.Role.USER, context_id="ctx-1", task_id="task-1",
        parts=[m.Part(text="hello", media_type="text/plain")],
        metadata={"source": "test", "nested": {"n": [1, 2]}},
        extensions=["https://example.com/ext/v1"], reference_task_ids=["task-0"],
    )
    values.update(changes)
    return m.Message(**values)


def sample_task() -> m.Task:
    agent = m.Message(message_id="msg-2", role=m.Role.AGENT, context_id="ctx-1",
                      task_id="task-1", parts=[m.Part(text="done")])
    return m.Task(
        id="task-1",
        context_id="ctx-1",
        status=m.TaskStatus(state=m.TaskState.COMPLETED, message=agent, timestamp=m.utc_now()),
        artifacts=[m.Artifact(
            artifact_id="art-1", name="result", description="the result",
            parts=[m.Part(text="t"), m.Part(raw=b"\x00\x01\xfe\xff", media_type="application/x",
                                             filename="blob.bin"),
                   m.Part(url="https://example.com/f.pdf", media_type="application/pdf"),
                   m.Part(data={"k": [1, 2.5, None, True]})],
            metadata={"a": 1}, extensions=["https://example.com/ext/v1"])],
        history=[sample_message(), agent],
        metadata={"owner": "tests"},
    )


# ------------------------------------------------------------------ round trips


def test_task_round_trip_is_lossless_and_schema_valid():
    task = sample_task()
    wire = encode(task)
    validate(wire, "Task")
    assert decode(m.Task, wire) == task


def test_message_round_trip_is_lossless_and_schema_valid():
    message = sample_message()
    wire = encode(message)
    validate(wire, "Message")
    assert wire["role"] == "ROLE_USER"
    assert decode(m.Message, wire) == message


def test_event_models_round_trip_and_match_the_schema():
    status = m.TaskStatusUpdateEvent(task_id="t", context_id="c", status=m.TaskStatus(
        state=m.TaskState.WORKING, timestamp=m.utc_now()), metadata={"x": "y"})
    artifact = m.TaskArtifactUpdateEvent(task_id="t", context_id="c", append=True,
                                         last_chunk=True, artifact=m.Artifact(
                                             artifact_id="a", parts=[m.Part(text="chunk")]))
    for event, definition in ((status, "Task Status Update Event"),
                              (artifact, "Task Artifact Update Event")):
        wire = encode(event)
        validate(wire, definition)
        assert decode(type(event), wire) == event
    assert encode(artifact)["append"] is True and encode(artifact)["lastChunk"] is True


@pytest.mark.parametrize("part, wire", [
    (m.Part(text="hi"), {"text": "hi"}),
    (m.Part(text=""), {"text": ""}),
    (m.Part(text="x", media_type="text/markdown", metadata={"lang": "en"}),
     {"text": "x", "mediaType": "text/markdown", "metadata": {"lang": "en"}}),
    (m.Part(raw=b"hello"), {"raw": "aGVsbG8="}),
    (m.Part(raw=b"\xfb\xff"), {"raw": "+/8="}),
    (m.Part(raw=b""), {"raw": ""}),
    (m.Part(raw=b"%PDF", media_type="application/pdf", filename="a.pdf"),
     {"raw": "JVBERg==", "mediaType": "application/pdf", "filename": "a.pdf"}),
    (m.Part(url="https://example.com/a.png", media_type="image/png"),
     {"url": "https://example.com/a.png", "mediaType": "image/png"}),
    (m.Part(data={"a": 1, "b": [True, None]}), {"data": {"a": 1, "b": [True, None]}}),
    (m.Part(data=[1, "two", {"three": 3}]), {"data": [1, "two", {"three": 3}]}),
    (m.Part(data="just a string"), {"data": "just a string"}),
    (m.Part(data=42), {"data": 42}),
    (m.Part(data=-2.5), {"data": -2.5}),
    (m.Part(data=0), {"data": 0}),
    (m.Part(data=False), {"data": False}),
    (m.Part(data={}), {"data": {}}),
    (m.Part(data=[]), {"data": []}),
    (m.Part(data=None), {"data": None}),
], ids=["text", "empty-text", "text-meta", "raw", "raw-plus-slash", "raw-empty", "raw-file",
        "url", "data-object", "data-list", "data-string", "data-int", "data-float", "data-zero",
        "data-false", "data-empty-object", "data-empty-list", "data-null"])
def test_part_encodes_and_decodes_each_content_kind(part, wire):
    assert encode(part) == wire
    validate(wire, "Part")
    decoded = decode(m.Part, wire)
    assert decoded == part
    assert decoded.kind == part.kind


def test_raw_is_standard_padded_base64_matching_the_schema_pattern():
    for size in range(0, 8):
        raw = bytes(range(250, 250 + size)) if size < 6 else bytes(range(size))
        wire = encode(m.Part(raw=raw))
        assert re.fullmatch(r"[A-Za-z0-9+/]*={0,2}", wire["raw"]) and len(wire["raw"]) % 4 == 0
        validate(wire, "Part")
        assert decode(m.Part, wire).raw == raw


@pytest.mark.parametrize("text, raw", [
    ("aGVsbG8", b"hello"),
    ("-_8", b"\xfb\xff"),
    ("-_8=", b"\xfb\xff"),
    ("+/8=", b"\xfb\xff"),
])
def test_raw_accepts_unpadded_and_url_safe_base64(text, raw):
    assert decode(m.Part, {"raw": text}).raw == raw


@pytest.mark.parametrize("text", ["not base64!", "a", "aGVs bG8=", "====", "aGVsbG8===", "é"])
def test_bad_base64_in_raw_is_a_violation(text):
    assert violations(m.Part, {"raw": text}) == ["raw"]


@pytest.mark.parametrize("text", ["aGVsbG8-!!", "a-b$c"])
def test_bad_url_safe_base64_in_raw_is_a_violation(text):
    assert violations(m.Part, {"raw": text}) == ["raw"]


def test_bad_base64_deep_in_a_request_names_the_full_path():
    request = {"message": {"messageId": "m", "role": "ROLE_USER",
                           "parts": [{"text": "ok"}, {"raw": "%%%%"}]}}
    assert violations(m.SendMessageRequest, request) == ["message.parts[1].raw"]


# ------------------------------------------------------------------ member names


def test_encoded_members_are_camel_case():
    wire = encode(sample_task())
    validate(wire, "Task")
    keys = all_keys(wire)
    assert "contextId" in keys and "messageId" in keys and "artifactId" in keys
    assert "referenceTaskIds" in keys and "mediaType" in keys and "taskId" in keys
    assert not [k for k in keys if "_" in k], keys


def test_metadata_and_data_members_are_passed_through_unchanged():
    message = sample_message(metadata={"snake_key": {"inner_key": 1}},
                             parts=[m.Part(data={"my_field": 1})])
    wire = encode(message)
    validate(wire, "Message")
    assert wire["metadata"] == {"snake_key": {"inner_key": 1}}
    assert wire["parts"] == [{"data": {"my_field": 1}}]


@pytest.mark.parametrize("name, expected", [
    ("context_id", "contextId"), ("reference_task_ids", "referenceTaskIds"), ("id", "id"),
    ("task_push_notification_config", "taskPushNotificationConfig"), ("url", "url"),
])
def test_camel_converts_snake_case_names(name, expected):
    assert camel(name) == expected


def test_snake_case_members_are_accepted_on_input():
    request = decode(m.SendMessageRequest, {
        "message": {"message_id": "m-1", "role": "ROLE_USER", "context_id": "c-1",
                    "task_id": "t-1", "reference_task_ids": ["t-0"],
                    "parts": [{"text": "a", "media_type": "text/plain"}]},
        "configuration": {"history_length": 2, "return_immediately": True,
                          "accepted_output_modes": ["text/plain"]},
    })
    assert request.message.message_id == "m-1" and request.message.context_id == "c-1"
    assert request.message.task_id == "t-1"
    assert request.message.reference_task_ids == ["t-0"]
    assert request.message.parts[0].media_type == "text/plain"
    assert request.configuration.history_length == 2
    assert request.configuration.return_immediately is True
    assert request.configuration.accepted_output_modes == ["text/plain"]


def test_camel_case_wins_when_both_spellings_are_sent():
    message = decode(m.Message, {"messageId": "camel", "message_id": "snake",
                                 "role": "ROLE_USER", "parts": [{"text": "x"}]})
    assert message.message_id == "camel"


def test_unknown_members_are_ignored_at_every_level():
    request = decode(m.SendMessageRequest, {
        "message": {"messageId": "m", "role": "ROLE_USER", "kind": "message",
                    "parts": [{"text": "x", "kind": "text", "extra": {"deep": 1}}]},
        "configuration": {"blocking": True, "pushNotificationConfig": {"url": "x"}},
        "future": [1, 2, 3],
    })
    assert request.message.parts == [m.Part(text="x")]
    assert request.configuration == m.SendMessageConfiguration()


def test_json_null_is_treated_as_unset():
    message = decode(m.Message, {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}],
                                 "contextId": None, "taskId": None, "metadata": None,
                                 "extensions": None, "referenceTaskIds": None})
    assert message == m.Message(message_id="m", role=m.Role.USER, parts=[m.Part(text="x")])
    request = decode(m.SendMessageRequest, {"message": encode(message), "configuration": None,
                                            "metadata": None, "tenant": None})
    assert request.configuration is None and request.metadata is None and request.tenant == ""
    config = decode(m.SendMessageConfiguration, {"historyLength": None})
    assert config.history_length is None


def test_null_content_member_of_a_part_is_unset():
    part = decode(m.Part, {"text": None, "url": "https://example.com/x", "mediaType": None})
    assert part == m.Part(url="https://example.com/x")


@pytest.mark.parametrize("value, fields", [
    ({"messageId": None, "role": "ROLE_USER", "parts": [{"text": "x"}]}, ["messageId"]),
    ({"messageId": "m", "role": None, "parts": [{"text": "x"}]}, ["role"]),
    ({"messageId": "m", "role": "ROLE_USER", "parts": None}, ["parts"]),
    ({}, ["messageId", "role", "parts"]),
])
def test_null_or_missing_required_member_is_a_violation(value, fields):
    assert violations(m.Message, value) == fields


# ------------------------------------------------------------------ enums and numbers


@pytest.mark.parametrize("number, role", [(1, m.Role.USER), (2, m.Role.AGENT)])
def test_role_enum_number_is_accepted_and_re_encoded_as_name(number, role):
    message = decode(m.Message, {"messageId": "m", "role": number, "parts": [{"text": "x"}]})
    assert message.role is role
    wire = encode(message)
    validate(wire, "Message")
    assert wire["role"] == role.value


@pytest.mark.parametrize("number, state", [
    (1, m.TaskState.SUBMITTED), (2, m.TaskState.WORKING), (3, m.TaskState.COMPLETED),
    (4, m.TaskState.FAILED), (5, m.TaskState.CANCELED), (6, m.TaskState.INPUT_REQUIRED),
    (7, m.TaskState.REJECTED), (8, m.TaskState.AUTH_REQUIRED),
])
def test_task_state_enum_numbers_follow_the_proto(number, state):
    status = decode(m.TaskStatus, {"state": number})
    assert status.state is state
    wire = encode(status)
    assert wire == {"state": state.value}
    validate(wire, "Task Status")


@pytest.mark.parametrize("value", [9, -1, True, "completed", "TASK_STATE_DONE", 3.0, [3]])
def test_bad_enum_values_are_violations(value):
    assert violations(m.TaskStatus, {"state": value}) == ["state"]


def test_unspecified_enum_for_a_required_member_is_a_violation():
    assert violations(m.TaskStatus, {"state": "TASK_STATE_UNSPECIFIED"}) == ["state"]
    assert violations(m.TaskStatus, {"state": 0}) == ["state"]


@pytest.mark.parametrize("value, expected", [(5, 5), ("5", 5), (5.0, 5), (0, 0), ("-3", -3),
                                             (2**31 - 1, 2**31 - 1)])
def test_integer_members_accept_protojson_forms(value, expected):
    assert decode(m.GetTaskRequest, {"id": "t", "historyLength": value}).history_length == expected


@pytest.mark.parametrize("value", [1.5, "1.5", "ten", True, [1], {"n": 1}, 2**31, -(2**31) - 1,
                                   float("nan")])
def test_bad_integer_members_are_violations(value):
    assert violations(m.GetTaskRequest, {"id": "t", "historyLength": value}) == ["historyLength"]


@pytest.mark.parametrize("value", [float("inf"), float("-inf")])
def test_infinite_integer_members_are_violations(value):
    assert violations(m.GetTaskRequest, {"id": "t", "historyLength": value}) == ["historyLength"]


@pytest.mark.parametrize("cls, value, field", [
    (m.Message, {"messageId": 1, "role": "ROLE_USER", "parts": [{"text": "x"}]}, "messageId"),
    (m.Message, {"messageId": "m", "role": "ROLE_USER", "parts": {"text": "x"}}, "parts"),
    (m.Message, {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}],
                 "metadata": "meta"}, "metadata"),
    (m.Message, {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}],
                 "extensions": "https://e"}, "extensions"),
    (m.Message, {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}],
                 "extensions": [1]}, "extensions[0]"),
    (m.SendMessageConfiguration, {"returnImmediately": "true"}, "returnImmediately"),
    (m.SendMessageConfiguration, {"returnImmediately": 1}, "returnImmediately"),
    (m.Part, "text", ""),
    (m.Part, {"text": 1}, "text"),
    (m.Part, {"url": ["u"]}, "url"),
    (m.Part, {"text": "x", "mediaType": 5}, "mediaType"),
    (m.Part, {"text": "x", "metadata": [1]}, "metadata"),
    (m.Part, {}, ""),
    (m.Part, {"text": "x", "data": 1}, ""),
    (m.Part, {"text": "x", "raw": "aGk="}, ""),
])
def test_wrong_types_are_violations_at_the_right_path(cls, value, field):
    assert violations(cls, value) == [field]


@pytest.mark.parametrize("cls, value", [
    (m.Message, {"messageId": 1, "role": "ROLE_USER", "parts": [{"text": "x"}]}),
    (m.Message, {"messageId": "m", "role": "user", "parts": [{"text": "x"}]}),
    (m.Message, {"messageId": "m", "role": "ROLE_USER", "parts": "x"}),
    (m.TaskStatus, {"state": 99}),
])
def test_wrongly_typed_required_member_gets_exactly_one_violation(cls, value):
    assert len(raw_violations(cls, value)) == 1


def test_empty_required_list_is_a_violation():
    assert violations(m.Message, {"messageId": "m", "role": "ROLE_USER", "parts": []}) == ["parts"]


# ------------------------------------------------------------------ defaults and presence


def _plan_encoded(value: Any) -> Dict[str, Any]:
    """What a model encodes to by the rule, member by member (the compiled encoders
    write the same rule out per class; nested values go through the codec)."""
    from a2a_flask.protocol.codec import _converter, _enum_default, field_specs

    out: Dict[str, Any] = {}
    for spec in field_specs(type(value)):
        item = getattr(value, spec.attr)
        skip_default = not (spec.presence or spec.always)
        if item is None or (skip_default and (not item or item is _enum_default(spec.type))):
            continue
        convert = _converter(spec.type)
        out[spec.wire] = item if convert is None else convert(item)
    return out


def _every_model() -> List[type]:
    import dataclasses

    return [cls for cls in vars(m).values()
            if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls is not m.Part]


@pytest.mark.parametrize("cls", _every_model(), ids=lambda cls: cls.__name__)
def test_compiled_encoders_follow_the_rule_for_every_model(cls):
    from a2a_flask.protocol.codec import decode_lenient

    empty, _ = decode_lenient(cls, {})  # every member at its default
    assert encode(empty) == _plan_encoded(empty)
    filled = [sample_task(), sample_message(), sample_task().status, sample_task().artifacts[0],
              m.TaskArtifactUpdateEvent("t", "c", sample_task().artifacts[0], True, True, {"x": 0}),
              m.TaskStatusUpdateEvent("t", "c", m.TaskStatus(state=m.TaskState.UNSPECIFIED))]
    for value in filled:
        if type(value) is cls:
            assert encode(value) == _plan_encoded(value)


def test_default_values_are_omitted():
    message = m.Message(message_id="m", role=m.Role.USER, parts=[m.Part(text="x")])
    assert encode(message) == {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]}
    validate(encode(message), "Message")
    assert encode(m.AgentExtension()) == {}
    assert encode(m.SendMessageConfiguration()) == {}
    event = encode(m.TaskArtifactUpdateEvent(task_id="t", context_id="c", artifact=m.Artifact(
        artifact_id="a", parts=[m.Part(text="x")])))
    validate(event, "Task Artifact Update Event")
    assert "append" not in event and "lastChunk" not in event and "metadata" not in event
    assert encode(m.Part(text="x", media_type="", filename="")) == {"text": "x"}


def test_unspecified_enum_defaults_are_omitted():
    assert encode(m.ListTasksRequest()) == {}
    assert encode(m.ListTasksRequest(context_id="c")) == {"contextId": "c"}


def test_optional_presence_fields_keep_zero_and_false():
    config = encode(m.SendMessageConfiguration(history_length=0))
    assert config == {"historyLength": 0}
    validate(config, "Send Message Configuration")
    caps = encode(m.AgentCapabilities(streaming=False, push_notifications=False,
                                      extended_agent_card=False))
    assert caps == {"streaming": False, "pushNotifications": False, "extendedAgentCard": False}
    validate(caps, "Agent Capabilities")
    assert encode(m.AgentCapabilities()) == {}
    request = encode(m.ListTasksRequest(status=m.TaskState.WORKING, page_size=0,
                                        history_length=0, include_artifacts=False))
    assert request["pageSize"] == 0 and request["historyLength"] == 0
    assert request["includeArtifacts"] is False
    validate(request, "List Tasks Request")


def test_presence_survives_a_round_trip():
    wire = {"historyLength": 0, "returnImmediately": False}
    config = decode(m.SendMessageConfiguration, wire)
    assert config.history_length == 0
    assert encode(config) == {"historyLength": 0}  # returnImmediately has no presence
    validate(encode(config), "Send Message Configuration")
    assert decode(m.SendMessageConfiguration, {}).history_length is None


def test_always_members_are_emitted_even_when_empty():
    wire = encode(m.ListTasksResponse())
    assert wire == {"tasks": [], "nextPageToken": "", "pageSize": 0, "totalSize": 0}
    validate(wire, "List Tasks Response")


# ------------------------------------------------------------------ timestamps


def test_utc_now_has_millisecond_precision_and_z():
    before = datetime.now(timezone.utc) - timedelta(seconds=1)
    stamp = m.utc_now()
    assert TIMESTAMP.match(stamp), stamp
    moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    assert before <= moment <= datetime.now(timezone.utc) + timedelta(seconds=1)


def test_utc_now_formats_each_second_once_and_never_mixes_two(monkeypatch):
    moments = iter([100.998, 100.999, 101.0004, 3661.5])
    monkeypatch.setattr(m.time, "time", lambda: next(moments))
    assert [m.utc_now() for _ in range(4)] == [
        "1970-01-01T00:01:40.998Z", "1970-01-01T00:01:40.999Z",
        "1970-01-01T00:01:41.000Z", "1970-01-01T01:01:01.500Z"]


def test_new_ids_are_distinct_uuid4_text():
    ids = [m.new_id() for _ in range(5000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:500]:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, text)


def test_task_status_timestamp_validates_against_the_schema():
    wire = encode(m.TaskStatus(state=m.TaskState.WORKING, timestamp=m.utc_now()))
    assert TIMESTAMP.match(wire["timestamp"])
    validate(wire, "Task Status")


@pytest.mark.parametrize("moment, expected", [
    (datetime(2025, 10, 28, 10, 30, 0, 123456, tzinfo=timezone.utc), "2025-10-28T10:30:00.123Z"),
    (datetime(2025, 10, 28, 12, 30, tzinfo=timezone(timedelta(hours=2))),
     "2025-10-28T10:30:00.000Z"),
    (datetime(2025, 1, 1, 0, 0, 0, 999999, tzinfo=timezone.utc), "2025-01-01T00:00:00.999Z"),
])
def test_format_timestamp_renders_utc_milliseconds(moment, expected):
    assert m.format_timestamp(moment) == expected


@pytest.mark.parametrize("text, expected", [
    ("2025-10-28T10:30:00Z", "2025-10-28T10:30:00.000Z"),
    ("2025-10-28T10:30:00.000Z", "2025-10-28T10:30:00.000Z"),
    ("2025-10-28T10:30:00.5Z", "2025-10-28T10:30:00.500Z"),
    ("2025-10-28T10:30:00.123456789Z", "2025-10-28T10:30:00.123Z"),
    ("2025-10-28T12:30:00+02:00", "2025-10-28T10:30:00.000Z"),
    ("2025-10-28T05:00:00.250-05:30", "2025-10-28T10:30:00.250Z"),
    ("2025-10-28T00:30:00-10:00", "2025-10-28T10:30:00.000Z"),
    ("2025-12-31T23:30:00-01:00", "2026-01-01T00:30:00.000Z"),
    ("2025-10-28t10:30:00z", "2025-10-28T10:30:00.000Z"),
    ("2025-10-28T10:30:00+00:00", "2025-10-28T10:30:00.000Z"),
])
def test_parse_timestamp_normalises_offsets_to_utc_z(text, expected):
    result = m.parse_timestamp(text)
    assert result == expected
    assert TIMESTAMP.match(result)


@pytest.mark.parametrize("text", [
    "2025-10-28T10:30:00", "2025-10-28T10:30:00.123", "2025-10-28", "yesterday", "", "10:30:00Z",
])
def test_parse_timestamp_rejects_naive_or_malformed_times(text):
    with pytest.raises(ValueError):
        m.parse_timestamp(text)
