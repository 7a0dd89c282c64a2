"""The conftest's guard around ``ast.parse`` (see tests/astguard.py)."""
from __future__ import annotations

import ast
import gc
from typing import Any, Dict, List

import pytest

from . import astguard

pytestmark = pytest.mark.skipif(not astguard.AFFECTED, reason="this CPython has no AST race")

SOURCE = open(ast.__file__, encoding="utf-8").read()  # thousands of nodes: many allocations


def test_the_guard_is_installed():
    assert ast.parse is astguard._guarded_parse
    assert astguard.install() is False  # a second install changes nothing


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
        ast.parse(SOURCE)
        guarded = len(starts)
    finally:
        gc.callbacks.remove(record)
    assert gc.isenabled() and unguarded > 0 and guarded == 0


def test_collection_comes_back_as_it_was():
    ast.literal_eval("('key', (0, 10))")  # dbm.dumb's call, through the guard
    assert gc.isenabled()
    gc.disable()
    try:
        ast.parse("x = 1")
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_errors_are_raised_as_they_are():
    with pytest.raises(SyntaxError):
        ast.parse("def (")
    assert gc.isenabled()
