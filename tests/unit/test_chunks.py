"""Streamed chunks under gevent: appended together once the executor yields.

The scenarios run in a gevent-patched child process (``chunks_under_gevent.py``);
the gunicorn tests (test_server.py, test_faults_executors.py) drive the same path
through real workers.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

from a2a_flask.engine.run import MAX_UNSENT, UNSENT_SHARE, unsent_cap

pytestmark = pytest.mark.declare(server=[
    "test_a_burst_of_chunks_is_appended_in_a_few_writes_in_order",
    "test_a_chunk_is_in_the_log_once_the_executor_blocks",
    "test_the_executor_sees_its_own_chunks_in_ctx_task",
    "test_a_cancel_keeps_what_was_appended_and_stops_the_run",
    "test_a_failed_background_append_is_raised_by_the_next_call",
    "test_a_run_holds_a_bounded_number_of_chunks",
    "test_a_long_task_holds_more_chunks_per_append"])

ROOT = Path(__file__).resolve().parents[2]


def scenario(name: str) -> Dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "tests.support.chunks_under_gevent", name], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answer: Dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return answer


def test_a_burst_of_chunks_is_appended_in_a_few_writes_in_order():
    found = scenario("burst")
    assert found["texts"] == [f"{index} " for index in range(300)]
    assert found["state"] == "TASK_STATE_COMPLETED"
    assert (found["artifacts"], found["parts"]) == (1, 300)
    assert found["seqs"] == list(range(1, len(found["seqs"]) + 1))
    # The task, a handful of bursts (the run's cap, its pacing) and the completion.
    assert found["appends"] <= 10, found["appends"]


def test_a_chunk_is_in_the_log_once_the_executor_blocks():
    found = scenario("visible_once_yielded")
    assert found == {"while_blocked": ["first"], "after": ["first", "second"]}


def test_the_executor_sees_its_own_chunks_in_ctx_task():
    assert scenario("task_includes_unsent") == {"parts": ["a", "b"]}


def test_a_cancel_keeps_what_was_appended_and_stops_the_run():
    found = scenario("cancel_while_waiting")
    assert found == {"state": "TASK_STATE_CANCELED", "texts": ["kept"]}


def test_a_failed_background_append_is_raised_by_the_next_call():
    found = scenario("store_down_in_the_background")
    assert found == {"raised": "StoreUnavailable", "unrecorded": ["t-1"]}


def test_a_run_holds_a_bounded_number_of_chunks():
    found = scenario("capped")
    assert found["most_unsent"] <= found["cap"]
    assert found["count"] == 3 * found["cap"]


def test_a_long_task_holds_more_chunks_per_append():
    """On a long task the bursts grow with the log, so that an append (a store write,
    and past MAX_UNFOLDED chunks a copy of the artifact's parts) costs a chunk the
    same at any length."""
    found = scenario("cap_grows_with_the_task")
    assert found["count"] == 20_000
    assert found["over_cap"] == []
    assert found["most_unsent"] > MAX_UNSENT
    # 128-chunk bursts would take 157 appends; bursts a 32nd of the log take 84 (32 of
    # 128 up to 4,096 entries, then each 1/32 longer than the last), plus the task's.
    assert found["appends"] < 100, found["appends"]


def test_the_cap_is_the_floor_on_a_short_task_and_a_share_of_a_long_one():
    assert unsent_cap(0) == unsent_cap(1_000) == MAX_UNSENT
    assert unsent_cap(UNSENT_SHARE * 1_000) == 1_000
    assert unsent_cap(200_000) == 200_000 // UNSENT_SHARE
