"""Regression tests of the bugs the JSON-RPC fuzzing found (test_fuzz_jsonrpc.py).

Each test is the minimal request that showed one bug (fixed since); the
properties leave out exactly these inputs.
"""
from __future__ import annotations

import base64
import json
from typing import Any, Tuple

import pytest

from tests.support.fuzz_rpc import BY_NAME, post, valid_request
from tests.support.fuzzkit import SEED_COMPLETED, World, nested



def rpc_raw(world: World, data: bytes) -> Tuple[int, str, bytes]:
    response, _ = post(world, data)
    return response.status_code, response.mimetype, response.get_data()


def assert_rpc_error(world: World, data: bytes, code: int, request_id: Any) -> None:
    before = world.snapshot()
    status, mimetype, body = rpc_raw(world, data)
    assert status == 200 and mimetype == "application/json", (status, mimetype, body[:200])
    answer = json.loads(body)
    assert answer["id"] == request_id, answer
    assert "error" in answer, f"accepted: {str(answer)[:300]}"
    assert answer["error"]["code"] == code, answer
    world.assert_unchanged(before, "regression")


@pytest.mark.parametrize("body", [
    rb'{"jsonrpc":"2.0","id":"\ud800","method":"GetTask","params":{"id":"x"}}',
    rb'{"jsonrpc":"2.0","id":1,"method":"\ud800"}',
    rb'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"\udfff"}}',
], ids=["id", "method", "task-id"])
def test_a_lone_surrogate_echoed_in_an_error_stays_json(world, body):
    status, mimetype, data = rpc_raw(world, body)
    assert status == 200 and mimetype == "application/json", (status, mimetype, data[:120])
    assert json.loads(data)["error"]["code"] in (-32600, -32601, -32602, -32001)


def test_a_lone_surrogate_in_message_text_is_invalid_params_and_starts_nothing(world):
    assert_rpc_error(world, rb'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message"'
                            rb':{"messageId":"m","role":"ROLE_USER","parts":[{"text":"\ud800"}]}}}',
                     -32602, 1)


def test_a_body_nested_too_deeply_is_a_parse_error(world):
    status, mimetype, body = rpc_raw(world, b"[" * 100_000 + b"]" * 100_000)
    assert json.loads(body)["error"]["code"] in (-32700, -32600), body


def test_a_data_part_nested_too_deeply_is_refused(world):
    deep = json.dumps(nested(100)).encode().replace(b"1", b"[" * 3000 + b"]" * 3000)
    body = (b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":'
            b'"m","role":"ROLE_USER","parts":[{"data":' + deep + b'}]}}}')
    status, mimetype, data = rpc_raw(world, body)
    assert json.loads(data)["error"]["code"] in (-32700, -32600, -32602), data


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_a_timestamp_out_of_range_in_utc_is_invalid_params(world, stamp):
    assert_rpc_error(world, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks",
                                        "params": {"statusTimestampAfter": stamp}}).encode(),
                     -32602, 1)


def test_a_deeply_nested_page_token_is_invalid_params(world):
    token = base64.urlsafe_b64encode(b"[" * 100_000).decode()
    assert_rpc_error(world, json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ListTasks",
                                        "params": {"pageToken": token}}).encode(), -32602, 1)


@pytest.mark.parametrize("page_size", [0, -5, 101])
def test_push_config_page_size_is_range_checked(world, page_size):
    assert_rpc_error(world, json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "ListTaskPushNotificationConfigs",
        "params": {"taskId": world.ids[SEED_COMPLETED], "pageSize": page_size}}).encode(),
        -32602, 1)


def test_a_huge_version_number_is_version_not_supported(world):
    before = world.snapshot()
    response, _ = post(world, valid_request(BY_NAME["GetTask"]), version="1." + "0" * 5000)
    answer = json.loads(response.get_data())
    assert answer["error"]["code"] == -32009, answer
    world.assert_unchanged(before, "regression")


@pytest.mark.parametrize("value", ["\u00b2", "1" * 5000])
def test_a_last_event_id_of_odd_digits_is_ignored(world, value):
    response, _ = post(world, valid_request(BY_NAME["GetTask"]),
                       headers={"Last-Event-ID": value})
    answer = json.loads(response.get_data())
    assert "error" not in answer, answer  # ignored: GetTask of the seeded task serves
