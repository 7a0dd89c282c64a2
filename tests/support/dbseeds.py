"""Database servers of a test's own (tests/support/dbservers.py) that start in about a
second: the data directory is a copy of one initialised once per test process.

``initdb`` and ``mariadb-install-db`` take 5-8 s each on a busy machine, for every
outage case that starts its own PostgreSQL or MariaDB; a copy of a cleanly stopped
server's data directory starts as a fresh, empty server of its own (its own
directory, port and socket: the options are given at start, not kept in the data).
Redis keeps nothing worth copying: it starts as it is::

    with seeded("postgresql") as pg:             # started
        ...
    with seeded("mariadb", start=False) as db:    # not running yet: db.start() later
        ...
"""
from __future__ import annotations

import atexit
import contextlib
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Dict, Iterator

from tests.support.dbservers import SERVERS, DBServer

#: Per kind, a directory holding ``data``: a server started once and stopped cleanly.
_SEEDS: Dict[str, Path] = {}
#: The kinds whose servers initialise a data directory on their first start.
SEEDED = ("postgresql", "mariadb")


def _seed(kind: str) -> Path:
    """The data directory's parent of a server of ``kind`` initialised in this process."""
    if kind not in _SEEDS:
        directory = Path(tempfile.mkdtemp(prefix=f"a2a-{kind}-seed-"))
        atexit.register(shutil.rmtree, directory, True)
        server = SERVERS[kind](directory)  # a directory given: close() leaves it
        try:
            server.start()
        finally:
            server.close()
        _SEEDS[kind] = directory
    return _SEEDS[kind]


@contextlib.contextmanager
def seeded(kind: str, *, start: bool = True) -> Iterator[DBServer]:
    """A server of ``kind`` with a data directory of its own, copied from the seed;
    started unless ``start`` is false; stopped and removed on exit, failure included."""
    directory = Path(tempfile.mkdtemp(prefix=f"a2a-{kind}-"))
    try:
        if kind in SEEDED:
            # cp -a: the copy keeps the owner (postgres) and the 0700 mode PostgreSQL needs.
            subprocess.run(["cp", "-a", str(_seed(kind) / "data"), str(directory / "data")],
                           check=True, timeout=60)
        server = SERVERS[kind](directory)
        try:
            if start:
                server.start()
            yield server
        finally:
            server.close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
