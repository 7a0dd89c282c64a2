"""A test not marked ``server`` starts no process: :class:`ProcessGuard` refuses every way
this interpreter starts one (subprocess, multiprocessing, ``os.fork``, ``os.system``...)
while it is active, and remembers each attempt, so the test fails even when its code
catches the error.  tests/conftest.py runs every unmarked test under it.
"""
from __future__ import annotations

import _posixsubprocess
import os
import subprocess
from types import ModuleType
from typing import Any, Callable, List, Tuple


class ProcessStarted(AssertionError):
    """A test not marked ``server`` tried to start a process."""


#: (module, attribute) of every call that starts a process.  subprocess binds its own
#: name for fork_exec; multiprocessing calls _posixsubprocess's; os.spawn* and pty call
#: os.fork through the module.
_TARGETS: Tuple[Tuple[ModuleType, str], ...] = tuple(
    (module, name) for module, name in (
        (subprocess, "_fork_exec"), (_posixsubprocess, "fork_exec"), (os, "fork"),
        (os, "forkpty"), (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system"))
    if hasattr(module, name))


class ProcessGuard:
    """``with ProcessGuard(nodeid): ...``: starting a process raises :class:`ProcessStarted`;
    :attr:`attempts` says what was tried."""

    def __init__(self, who: str) -> None:
        self.who = who
        self.attempts: List[str] = []
        self._saved: List[Tuple[ModuleType, str, Any]] = []

    def _refuse(self, what: str) -> Callable[..., Any]:
        def refuse(*args: Any, **kwargs: Any) -> Any:
            self.attempts.append(what)
            raise ProcessStarted(self.message())
        return refuse

    def message(self) -> str:
        return (f"{self.who} started a process ({', '.join(self.attempts)}) but is not marked "
                "server: put it under tests/server, or declare it in its module's pytestmark "
                "(pytest.mark.server, or pytest.mark.declare(server=[...]): see tests/conftest.py)")

    def __enter__(self) -> "ProcessGuard":
        for module, name in _TARGETS:
            self._saved.append((module, name, getattr(module, name)))
            setattr(module, name, self._refuse(f"{module.__name__}.{name}"))
        return self

    def __exit__(self, *exc: Any) -> None:
        for module, name, original in reversed(self._saved):
            setattr(module, name, original)
        self._saved.clear()
