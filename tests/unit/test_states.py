"""The state machine's table, every pair: each state a task can be in, each change.

The expectations below are written out row by row, apart from the table in
``a2a_flask/engine/states.py``: a change to one must be a change to the other.
"""
from __future__ import annotations

from typing import Dict, Optional, Type, Union

import pytest

from a2a_flask import TaskNotCancelableError, UnsupportedOperationError
from a2a_flask.engine.states import TABLE, Change, TaskClosedError, transition
from a2a_flask.protocol.models import TaskState

S, C = TaskState, Change
#: What transition() answers: the state to write, None (no state change), or the error.
Expected = Union[Optional[TaskState], Type[Exception]]

OPEN: Dict[Change, Expected] = {
    C.OUTPUT: None, C.FINISH: S.COMPLETED, C.MESSAGE: None,
    C.CANCEL: S.CANCELED, C.FAIL: S.FAILED, C.ORPHAN: S.FAILED,
}
INTERRUPTED: Dict[Change, Expected] = {
    C.OUTPUT: None, C.FINISH: None, C.MESSAGE: S.WORKING,
    C.CANCEL: S.CANCELED, C.FAIL: S.FAILED, C.ORPHAN: None,
}
FINISHED: Dict[Change, Expected] = {
    C.OUTPUT: TaskClosedError, C.FINISH: None, C.MESSAGE: UnsupportedOperationError,
    C.CANCEL: TaskNotCancelableError, C.FAIL: None, C.ORPHAN: None,
}
EXPECTED: Dict[TaskState, Dict[Change, Expected]] = {
    S.SUBMITTED: OPEN, S.WORKING: OPEN,
    S.INPUT_REQUIRED: INTERRUPTED, S.AUTH_REQUIRED: INTERRUPTED,
    S.COMPLETED: FINISHED, S.FAILED: FINISHED, S.CANCELED: FINISHED, S.REJECTED: FINISHED,
}
STATES = [state for state in TaskState if state is not S.UNSPECIFIED]
#: What STATUS may ask for.
TARGETS = [S.WORKING, S.INPUT_REQUIRED, S.AUTH_REQUIRED, S.COMPLETED, S.FAILED, S.CANCELED,
           S.REJECTED]


def test_the_table_has_a_row_for_every_state_and_a_column_for_every_change():
    assert set(TABLE) == set(STATES) == set(EXPECTED)
    assert all(set(row) == set(Change) for row in TABLE.values())


@pytest.mark.parametrize("change", [c for c in Change if c is not C.STATUS],
                         ids=lambda c: c.name)
@pytest.mark.parametrize("current", STATES, ids=lambda s: s.name)
def test_every_change_in_every_state(current: TaskState, change: Change) -> None:
    expected = EXPECTED[current][change]
    if isinstance(expected, type):
        with pytest.raises(expected) as raised:
            transition(current, change, task_id="t-1")
        if issubclass(expected, (UnsupportedOperationError, TaskNotCancelableError)):
            # The caller hears which task and which state.
            assert raised.value.metadata == {"taskId": "t-1", "state": current.value}
    else:
        assert transition(current, change, task_id="t-1") is expected


@pytest.mark.parametrize("to", TARGETS, ids=lambda s: s.name)
@pytest.mark.parametrize("current", STATES, ids=lambda s: s.name)
def test_an_executor_sets_any_state_until_the_task_is_finished(current: TaskState,
                                                                to: TaskState) -> None:
    if current.terminal:
        with pytest.raises(TaskClosedError):
            transition(current, C.STATUS, to=to)
    else:
        assert transition(current, C.STATUS, to=to) is to


@pytest.mark.parametrize("to", [S.SUBMITTED, S.UNSPECIFIED, None], ids=str)
@pytest.mark.parametrize("current", [S.SUBMITTED, S.WORKING, S.INPUT_REQUIRED],
                         ids=lambda s: s.name)
def test_no_task_moves_to_submitted_or_unspecified(current: TaskState,
                                                   to: Optional[TaskState]) -> None:
    with pytest.raises(ValueError):
        transition(current, C.STATUS, to=to)
