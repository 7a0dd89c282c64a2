"""The fan-out test of ``tests/server/test_fanout*.py`` (one module per store),
and what it says: a crowd watching one task costs the store what one watcher does,
on real gunicorn -k gevent workers and every shared store: a thousand subscribers
of one running task each see every chunk once, in order, and the final state; the
task completes; and the store calls per event do not grow with the crowd.

Before, each watcher read the store on its own for every event: on Redis a crowd
of 200 exhausted the connection pool and failed the task it watched; on SQLite
and PostgreSQL a thousand attached so slowly that hundreds were served only
after the task had ended.  ``bench/fanout.py`` measures the same with timings.
"""
from __future__ import annotations

import contextlib
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest

from tests.conftest import drop_sql_database, sql_test_url
from tests.support.dbservers import RedisServer
from tests.support.helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import fanout  # noqa: E402

#: The task of each phase: this many chunks, over this many seconds.
CHUNKS, SECONDS = 20, 1.0
#: (store, hosts): every shared store on one host of two workers; Redis and
#: PostgreSQL also on two hosts.  One module per store runs its cases
#: (``tests/server/test_fanout*.py``), so that they spread over pytest's workers.
CASES = [("sqlite", 1), ("redis", 1), ("postgresql", 1), ("mariadb", 1), ("redis", 2),
         ("postgresql", 2)]


def store_url(kind: str, folder: str, stack: contextlib.ExitStack) -> str:
    """A fresh store of ``kind``, dropped when ``stack`` closes; Redis is a server of
    the test's own (tests/support/dbservers.py), whose command count no other test
    adds to."""
    if kind == "sqlite":
        return f"sqlite:///{folder}/tasks.db"
    if kind == "redis":
        return stack.enter_context(RedisServer(Path(folder))).url
    name = f"a2atest_{uuid.uuid4().hex[:12]}"
    url = sql_test_url(kind, name)
    stack.callback(drop_sql_database, kind, name)
    return url


def crowd_fixture(*kinds: str) -> Any:
    """The ``crowd`` fixture of a module: the CASES of ``kinds``."""
    cases = [case for case in CASES if case[0] in kinds]
    return pytest.fixture(params=cases, ids=[f"{kind}-{hosts}host" for kind, hosts in cases],
                          name="crowd")(_crowd)


def _crowd(request) -> Iterator[Tuple[List[fanout.Host], str, str, int]]:
    kind, count = request.param
    # Everything started is stopped in reverse, whatever fails: the hosts (one that
    # fails to start stops itself; those before it are on the stack), then the store.
    with tempfile.TemporaryDirectory() as folder, contextlib.ExitStack() as stack:
        url = store_url(kind, folder, stack)
        hosts = stack.enter_context(fanout.hosts_running(count, url, 2, folder))
        yield hosts, url, folder, count


def test_a_thousand_watchers_see_every_chunk_and_cost_the_store_what_one_does(crowd):
    hosts, url, folder, count = crowd
    phases = [fanout.run_phase(hosts, url, folder, watchers, CHUNKS, SECONDS, limit=90)
              for watchers in (1, 100, 1000)]
    for phase in phases:
        assert phase.complete == phase.watchers, (phase.watchers, phase.complete, phase.errors)
    one = phases[0]
    # One watcher is one worker reading; a crowd spreads over every worker of every
    # host, each of which reads once per event: per worker, the crowd costs what one
    # watcher does (twice is the bound, with room for the odd keeper round).
    workers = 2 * count
    for phase in phases[1:]:
        assert phase.reads_per_event <= workers * one.reads_per_event, (
            phase.watchers, phase.calls, one.calls)
        if phase.commands is not None:  # Redis: the server's own count
            assert phase.commands <= workers * max(one.commands or 0, 1) * 1.5, (
                phase.watchers, phase.commands, one.commands)
