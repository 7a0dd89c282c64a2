"""A PostgreSQL primary and a synchronous standby of the test's own, for failovers.

Built on tests/support/dbservers.py's PostgresServer (each on a reserved loopback port
in a directory of its own, never the shared service): the primary starts from the
process's seed data directory (tests/support/dbseeds.py), the standby is a
``pg_basebackup -R`` of it, streaming, and the primary waits for it at every commit
(``synchronous_standby_names``)::

    with StandbyPair() as pair:
        url = pair.url          # both hosts, target_session_attrs=read-write
        pair.failover()         # the primary stopped, the standby promoted
        pair.rejoin()           # the old primary back, as the new one's standby
        pair.heal()             # both up and following, whatever happened before

The URL never changes: it names both ports, and each connection finds whichever is
the primary.  Every wait is bounded; both servers are stopped and their directories
removed on exit, failure included.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from tests.support.dbseeds import _seed
from tests.support.dbservers import START_TIMEOUT, PostgresServer, postgres_bin

#: The standby's name, as the primary's ``synchronous_standby_names`` lists it.
STANDBY_NAME = "a2a_standby"


class StandbyPair:
    """Two PostgresServers, :attr:`primary` and :attr:`standby` (roles swap at a
    failover); see the module docstring."""

    def __init__(self) -> None:
        self.directory = Path(tempfile.mkdtemp(prefix="a2a-pg-pair-"))
        if os.geteuid() == 0:  # the servers run as postgres, in directories below this one
            shutil.chown(self.directory, "postgres", "postgres")
        self.servers = []
        try:
            for name in ("one", "two"):
                (self.directory / name).mkdir()
                self.servers.append(PostgresServer(self.directory / name))
        except BaseException:
            self.close()
            raise
        self.primary, self.standby = self.servers
        self.basebackup = postgres_bin("pg_basebackup")
        self.failovers = 0

    @property
    def url(self) -> str:
        """The store URL: both hosts, in a fixed order, for a writable session."""
        one, two = self.servers
        return (f"postgresql://postgres@127.0.0.1:{one.port},127.0.0.1:{two.port}/postgres"
                "?target_session_attrs=read-write")

    # ------------------------------------------------------------ life cycle

    def start(self) -> None:
        subprocess.run(["cp", "-a", str(_seed("postgresql") / "data"),
                        str(self.primary.data)], check=True, timeout=60)
        self.primary.start()
        self._follow(self.standby, self.primary)

    def _follow(self, standby: PostgresServer, primary: PostgresServer) -> None:
        """Make ``standby`` a fresh streaming copy of ``primary``, and the primary
        wait for it at each commit."""
        standby.stop()
        shutil.rmtree(standby.data, ignore_errors=True)
        standby._run(self.basebackup or "pg_basebackup", "-h", "127.0.0.1",
                     "-p", str(primary.port), "-U", "postgres", "-D", str(standby.data),
                     "-R", "-X", "stream", "-c", "fast", "--no-sync",
                     timeout=START_TIMEOUT)
        # The copy carries the primary's settings: the standby waits for nobody when it
        # is promoted, and names itself to its primary.
        with open(standby.data / "postgresql.auto.conf", "a") as conf:
            conf.write(f"\nprimary_conninfo = 'host=127.0.0.1 port={primary.port} "
                       f"user=postgres application_name={STANDBY_NAME}'\n"
                       "synchronous_standby_names = ''\n")
        standby.start()
        self.sql(primary, f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'")
        self.sql(primary, "SELECT pg_reload_conf()")
        self._wait(lambda: self.sql(primary, "SELECT sync_state FROM pg_stat_replication "
                                             f"WHERE application_name = '{STANDBY_NAME}'")
                   == "sync", "the standby to be synchronous")

    def failover(self) -> None:
        """Stop the primary (fast: its sessions end), promote the standby; the roles
        swap, and the old primary stays down until :meth:`rejoin`."""
        self.primary.stop()
        self.standby._run(self.standby.pg_ctl or "pg_ctl", "-D", str(self.standby.data),
                          "-w", "-t", str(int(START_TIMEOUT)), "promote",
                          timeout=START_TIMEOUT + 5)
        self.primary, self.standby = self.standby, self.primary
        self.failovers += 1

    def rejoin(self) -> None:
        """The old primary back as the new primary's synchronous standby (a fresh
        base backup: its own history may have gone further than the new primary's)."""
        self._follow(self.standby, self.primary)

    def heal(self) -> None:
        """Both servers up, the standby following the primary, whatever a test left
        (a failover without a re-join, a failure midway)."""
        if self.primary.main_pid() is None:
            self.failover()  # the standby, if still one, becomes the primary
        if self.standby.main_pid() is None or not self.sql(
                self.standby, "SELECT pg_is_in_recovery()"):
            self.rejoin()

    def close(self) -> None:
        try:
            for server in self.servers:
                with contextlib.suppress(Exception):
                    server.close()
        finally:
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "StandbyPair":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # ------------------------------------------------------------ queries

    @staticmethod
    def sql(server: PostgresServer, statement: str) -> Optional[Any]:
        """Run one statement on ``server`` (autocommit); its first value, if any."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=server.port, user="postgres",
                             dbname="postgres", autocommit=True, connect_timeout=5) as conn:
            cursor = conn.execute(statement)
            row = cursor.fetchone() if cursor.description is not None else None
            return row[0] if row else None

    @staticmethod
    def _wait(predicate: Any, what: str, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {timeout:g}s waiting for {what}")
            time.sleep(0.1)
