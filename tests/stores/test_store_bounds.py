"""A hung or absent task store is a clear error within seconds, on every networked store
(docs/internals.rst, invariant 8), under real ``gunicorn -k gevent``:

* **frozen** (here): every process of the database SIGSTOPped for a few store
  timeouts (a partition, a stuck failover): a ``SendMessage`` answers -32603 "task
  store unavailable" (REST 503) within ``A2A_STORE_TIMEOUT`` plus a margin, the card
  keeps answering meanwhile, and after the thaw the next call works;
* **black-holed** (test_store_bounds_blackholed.py): the store's port accepts and
  never answers: the same;
* **down at start** (test_store_bounds_boot.py): the workers boot without the store,
  calls answer 503 until it is up, then work, with no restart.

The cases are three files so that parallel runs spread them.  Each database is the
test's own (tests/support/dbservers.py, started from a copied data directory:
tests/support/dbseeds.py), never the shared service.  The settings and the checks
the three share are in tests/support/store_outage.py.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.support.dbseeds import seeded
from tests.support.helpers import ROOT, Server, free_port
from tests.support.store_outage import (
    FROZEN_FOR, KINDS, CardWatch, assert_log_is_clean, assert_unavailable_within_the_bound,
    completed, env_for, send)

pytest.importorskip("sqlalchemy")
pytest.importorskip("redis")


@pytest.mark.parametrize("kind", KINDS)
def test_a_frozen_store_is_a_clear_error_within_the_bound_and_recovers(kind):
    with seeded(kind) as database, \
            Server("tests.support.fault_app:app", workers=2, env=env_for(database.url)) as server:
        assert completed(send(server, "before")), "the store works before the freeze"
        with CardWatch(server.url):
            database.freeze()
            frozen_at = time.monotonic()
            try:
                assert_unavailable_within_the_bound(server)
                # Again: the connections cut off were dropped, and the next call is
                # bounded the same way (it does not wait on a connection that hung).
                assert_unavailable_within_the_bound(server)
                time.sleep(max(0.0, FROZEN_FOR - (time.monotonic() - frozen_at)))
            finally:
                database.thaw()
        # The first call after the thaw works: nothing that hung is used again.
        answer = send(server, "after the thaw")
        assert completed(answer), answer
        for _ in range(4):  # and on both workers
            assert completed(send(server, "after the thaw, again"))
        assert_log_is_clean(server)


def test_a_bad_store_url_still_stops_the_app_at_once():
    """A URL the driver cannot read is a setting to fix, not an outage to wait out."""
    from a2a_flask.stores import StoreError, open_store

    with pytest.raises(StoreError, match="cannot use the redis store URL"):
        open_store("redis://127.0.0.1:notaport/0")
    with pytest.raises(StoreError, match="cannot use the SQL store URL"):
        open_store("postgresql+nosuchdriver://u@127.0.0.1/db")


@pytest.mark.parametrize("kind", KINDS)
def test_the_host_apps_flask_commands_run_while_the_store_is_down(kind):
    """``flask db upgrade``, ``flask shell``...: the host app's commands have nothing to
    do with A2A, and importing the app no longer reaches for the store."""
    port = free_port()  # nothing listens there
    url = {"postgresql": f"postgresql://postgres@127.0.0.1:{port}/postgres",
           "mariadb": f"mysql://root@127.0.0.1:{port}/a2a",
           "redis": f"redis://127.0.0.1:{port}/0"}[kind]
    done = subprocess.run([sys.executable, "-m", "flask", "--app", "tests.support.fault_app", "routes"],
                          cwd=ROOT, env={**os.environ, "FLASK_A2A_STORE": url},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert "/a2a" in done.stdout

# Each starts gunicorn and a database server of its own.
pytestmark = [pytest.mark.slow, pytest.mark.server]
