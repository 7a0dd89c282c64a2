"""``flask a2a ...``: the app's own commands for its agents' task stores.

``init_app`` adds the :data:`~.common.a2a` group to ``app.cli`` (the package
also declares it as a ``flask.commands`` plugin, so that ``flask a2a doctor``
can say why an app whose store is down does not load).  Each command works on
one agent of the app: the only one, or the one ``flask a2a --agent NAME ...``
names; ``doctor`` checks them all.  Errors are one line on stderr and exit
status 1, never a traceback.

:mod:`.common` has the group and what the commands share; :mod:`.tasks`
reads and changes tasks (``tasks``, ``task``, ``cancel``, ``purge``);
:mod:`.stores` works on whole stores (``create-tables``, ``copy-store``);
:mod:`.doctor` checks the set-up.
"""
from __future__ import annotations

from flask import Flask

from . import doctor, stores, tasks
from .common import a2a

__all__ = ["a2a", "register", "doctor", "stores", "tasks"]


def register(app: Flask) -> None:
    """Add ``flask a2a`` to ``app.cli`` (once, whatever the number of agents)."""
    if "a2a" not in app.cli.commands:
        app.cli.add_command(a2a)
