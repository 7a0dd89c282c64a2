"""The conftest's guard around ``ast.parse`` (see tests/support/astguard.py).

The guard is installed on the affected CPython releases only; its own behaviour is
tested on every release, by calling it directly (nothing here skips).
"""
from __future__ import annotations

import ast
import gc
from typing import Any, Dict, List

import pytest

from tests.support import astguard

SOURCE = open(ast.__file__, encoding="utf-8").read()  # thousands of nodes: many allocations
guarded_parse = astguard._guarded_parse


def test_the_guard_is_installed_exactly_on_the_affected_releases():
    assert (ast.parse is guarded_parse) is astguard.AFFECTED
    assert astguard.install() is False  # a second install (or one where unaffected) does nothing


def test_no_collection_starts_while_a_parse_runs():
    starts: List[Dict[str, Any]] = []

    def record(phase: str, info: Dict[str, Any]) -> None:
        if phase == "start":
            starts.append(info)

    # The same parse unguarded starts collections (its allocations pass gen0's threshold),
    # so this test would see them if the guard did not hold collection off.
    gc.callbacks.append(record)
    try:
        astguard._original(SOURCE)
        unguarded = len(starts)
        del starts[:]
        guarded_parse(SOURCE)
        guarded = len(starts)
    finally:
        gc.callbacks.remove(record)
    assert gc.isenabled() and unguarded > 0 and guarded == 0


def test_collection_comes_back_as_it_was():
    guarded_parse("('key', (0, 10))", mode="eval")  # dbm.dumb's literal_eval
    assert gc.isenabled()
    gc.disable()
    try:
        guarded_parse("x = 1")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_errors_are_raised_as_they_are():
    with pytest.raises(SyntaxError):
        guarded_parse("def (")
    assert gc.isenabled()
