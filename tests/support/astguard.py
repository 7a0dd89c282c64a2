"""Keep ``ast.parse`` atomic on CPython 3.11.0-3.11.7 (CPython gh-106905, fixed in 3.11.8).

Those releases count the AST constructor's recursion depth in one counter that the whole
interpreter shares. The constructor is C code that holds the GIL, except when one of its
allocations starts a garbage collection: finalizers (a generator's ``finally``, ``__del__``)
are Python code, and the GIL can pass to another thread there. If that thread parses too,
the shared counter is reset under the first parse, which then raises ``SystemError: AST
constructor recursion depth mismatch`` for source it parsed correctly.

In this suite the other parser is the shelve store: ``dbm.dumb`` reads its index with
``ast.literal_eval``, in executor threads. The first parser is pytest itself, which parses
test modules to show the source of a failure; its ``SystemError`` is an INTERNALERROR that
ends the whole session, so one failing test hid every other result.

:func:`install` wraps ``ast.parse`` (which ``ast.literal_eval`` calls too) so that no
collection starts while any thread parses: the constructor then runs no Python code and no
other thread can enter it. Nothing is caught or retried.
"""
from __future__ import annotations

import ast
import gc
import sys
import threading
from typing import Any

AFFECTED = (3, 11, 0) <= sys.version_info[:3] < (3, 11, 8)

_lock = threading.Lock()
_parsing = 0  # parses in progress, all threads
_collect_after = False  # whether collection was enabled when the first of them began
_original = ast.parse


def _guarded_parse(*args: Any, **kwargs: Any) -> Any:
    global _parsing, _collect_after
    with _lock:
        if _parsing == 0:
            _collect_after = gc.isenabled()
            gc.disable()
        _parsing += 1
    try:
        return _original(*args, **kwargs)
    finally:
        with _lock:
            _parsing -= 1
            if _parsing == 0 and _collect_after:
                gc.enable()


def install() -> bool:
    """Guard ``ast.parse`` on the affected releases; True if it did."""
    if not AFFECTED or ast.parse is _guarded_parse:
        return False
    ast.parse = _guarded_parse  # type: ignore[assignment]
    return True
