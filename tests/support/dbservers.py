"""Database servers of the test's own, for outage cases: a PostgreSQL, a MariaDB and a
Redis, each on a reserved loopback port in a temporary directory, that a test may freeze
(SIGSTOP every process of it: what a network partition or a stuck failover looks like),
thaw, stop, start and restart (the same data directory and port), plus a black-holed
port (a listener that never answers).

Never the shared services: a test that stops or freezes a database starts its own::

    with PostgresServer() as pg:
        url = pg.url                 # a store URL on its own database
        with pg.frozen():            # SIGSTOP ... SIGCONT, even on failure
            ...
        pg.restart()

Every wait here is bounded; each server is stopped and its directory removed on exit,
failure included (a frozen server is thawed first).  The port is reserved from the
constructor to :meth:`DBServer.close` (tests/support/ports.py), stops and restarts
included, so no other test's server can take it meanwhile; a start is over only once
the server listening on the port is the process started here (and, for MariaDB and
Redis, answers with this server's data directory or pid); a server that exits while
starting fails the start at once, with its log.  A missing binary is
:func:`tests.conftest.require`-d: a skip for users, a failure under
``A2A_REQUIRE_SERVICES=1``.
"""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, List, Optional

from tests.support.ports import PortInUse, check_listener, reserve_port

#: The longest any start or stop may take (seconds) before the test fails.
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0


def _require(reason: str) -> None:
    from tests.conftest import require  # late: conftest imports helpers, not this module

    require(reason)


def _children(pid: int) -> List[int]:
    """The direct children of ``pid`` (Linux /proc)."""
    found: List[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as handle:
                found.extend(int(child) for child in handle.read().split())
    except OSError:
        pass
    return found


def _tree(pid: int) -> List[int]:
    """``pid`` and all its descendants, parents first."""
    out, todo = [], [pid]
    while todo:
        current = todo.pop(0)
        out.append(current)
        todo.extend(_children(current))
    return out


def _signal_all(pids: List[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _state(stat_path: str) -> Optional[str]:
    """The state letter of a /proc ``stat`` file (R, S, T, Z...); None once it is gone."""
    try:
        with open(stat_path) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return _state(f"/proc/{pid}/stat") != "Z"  # a zombie is gone for our purposes


def _stopped(pid: int) -> bool:
    """Whether every thread of ``pid`` is stopped by a signal (or the process is gone)."""
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return True
    return all(_state(f"/proc/{pid}/task/{thread}/stat") in (None, "T", "t", "Z", "X")
               for thread in threads)


class ServerExited(RuntimeError):
    """A database server exited while it was starting."""


def _tail(path: Path, size: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-size:]
    except OSError:
        return "(no log)"


class DBServer:
    """What the three servers share: a directory, a port, freeze/thaw, restart, cleanup.

    Subclasses set :attr:`kind` and implement ``_launch`` (start the server process and
    wait until it answers); one whose server is not its own child (PostgreSQL, started
    by ``pg_ctl``) implements :meth:`main_pid` and ``_shutdown`` too.
    """

    kind = ""

    #: The server's log (set by each subclass), quoted when a start fails.
    log: Path

    def __init__(self, directory: Optional[Path] = None) -> None:
        self._reservation = reserve_port()
        self.port = self._reservation.port
        self._own_dir = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix=f"a2a-{self.kind}-"))
        self.frozen_pids: List[int] = []
        self.running = False
        #: The server process, when this object started it itself.
        self.proc: Optional[subprocess.Popen] = None

    # Subclass hooks.
    def _launch(self) -> None:
        raise NotImplementedError

    def _shutdown(self) -> None:
        """Stop the server process this object started (SIGTERM, then SIGKILL)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def main_pid(self) -> Optional[int]:
        """The server's main process id (None when not running)."""
        if self.proc is None or self.proc.poll() is not None:
            return None
        return self.proc.pid

    @property
    def url(self) -> str:
        """A task store URL (``FLASK_A2A_STORE``) on this server."""
        raise NotImplementedError

    def _await(self, what: str, answers: Callable[[], bool]) -> None:
        """Wait until the process this object started listens on the port and
        ``answers()`` is true.  Fails at once, with the server's log, if the process
        exits or another one serves the port; otherwise after START_TIMEOUT."""
        deadline = time.monotonic() + START_TIMEOUT
        last: Any = None
        while True:
            if self.proc is not None and self.proc.poll() is not None:
                raise ServerExited(f"{what} exited with status {self.proc.returncode} while "
                                   f"starting; its log ends:\n{_tail(self.log)}")
            if check_listener(self.port, self.pids(), what):
                try:
                    if answers():
                        return
                except PortInUse:
                    raise
                except Exception as exc:  # not ready yet (the error is kept for the report)
                    last = exc
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start within {START_TIMEOUT:g}s "
                                   f"(last: {last!r}); its log ends:\n{_tail(self.log)}")
            time.sleep(0.2)

    # The life cycle.
    def start(self) -> None:
        """Start the server (on the same port and data as before) and wait till it answers;
        if it does not, what was started is stopped before the error is raised."""
        try:
            self._launch()
        except BaseException:
            self.stop()
            raise
        self.running = True

    def stop(self) -> None:
        """Stop the server (thawed first), bounded: SIGKILL what outlives the timeout."""
        self.thaw()
        pids = self.pids()
        if self.running or pids:
            with contextlib.suppress(Exception):
                self._shutdown()
        deadline = time.monotonic() + STOP_TIMEOUT
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal_all([pid for pid in pids if _alive(pid)], signal.SIGKILL)
        self.running = False

    def restart(self) -> None:
        self.stop()
        self.start()

    def pids(self) -> List[int]:
        """Every process of the server (the main one and its children)."""
        main = self.main_pid()
        return _tree(main) if main else []

    def freeze(self) -> None:
        """SIGSTOP every process of the server: connections stay open, nothing answers."""
        self.frozen_pids = self.pids()
        assert self.frozen_pids, f"{self.kind} is not running"
        _signal_all(self.frozen_pids, signal.SIGSTOP)
        # The signal lands when each thread next runs: on a VM whose CPU is stolen for a
        # while, a query sent right after kill() could still be answered.  Frozen means
        # stopped, so wait for that.
        deadline = time.monotonic() + 10
        while not all(_stopped(pid) for pid in self.frozen_pids):
            assert time.monotonic() < deadline, f"{self.kind} did not stop on SIGSTOP"
            time.sleep(0.01)

    def thaw(self) -> None:
        """SIGCONT what :meth:`freeze` stopped (a no-op when not frozen)."""
        pids, self.frozen_pids = self.frozen_pids, []
        _signal_all(pids, signal.SIGCONT)

    @contextlib.contextmanager
    def frozen(self) -> Iterator["DBServer"]:
        self.freeze()
        try:
            yield self
        finally:
            self.thaw()

    def close(self) -> None:
        """Stop the server, remove its directory (the one it made) and let its port go."""
        try:
            self.stop()
        finally:
            self._reservation.release()
            if self._own_dir:
                shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> "DBServer":
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def postgres_bin(name: str) -> Optional[str]:
    """The newest installed PostgreSQL's ``name`` binary (initdb, pg_ctl...)."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return found[-1] if found else shutil.which(name)


def _as_user(user: str) -> List[str]:
    """The prefix that runs a command as ``user`` (we are root in the test container)."""
    if os.geteuid() != 0:
        return []
    runuser = shutil.which("runuser")
    return [runuser, "-u", user, "--"] if runuser else ["su", user, "-s", "/bin/sh", "-c"]


class PostgresServer(DBServer):
    """A PostgreSQL cluster of the test's own (initdb + pg_ctl, as user postgres when root),
    trust authentication, listening on 127.0.0.1 only; its socket in its directory.
    ``options``: more server options (``-c ssl=on -c ...``), appended to ours."""

    kind = "postgresql"

    def __init__(self, directory: Optional[Path] = None, *, options: str = "") -> None:
        self.options = options
        self.initdb, self.pg_ctl = postgres_bin("initdb"), postgres_bin("pg_ctl")
        if not (self.initdb and self.pg_ctl):
            _require("PostgreSQL server binaries (initdb, pg_ctl) are not installed: "
                     "the PostgreSQL outage cases need a cluster of their own")
        super().__init__(directory)
        self.data = self.directory / "data"
        self.log = self.directory / "server.log"
        if os.geteuid() == 0:
            shutil.chown(self.directory, "postgres", "postgres")

    def _run(self, *args: str, timeout: float) -> None:
        cmd = [*_as_user("postgres"), *args]
        if cmd and cmd[0] == "su":  # su -c takes one string
            cmd = cmd[:4] + [" ".join(args)]
        result = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=timeout, cwd=self.directory)
        if result.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {result.stdout.decode(errors='replace')}"
                               f"\n{self.log.read_text(errors='replace') if self.log.exists() else ''}")

    def _launch(self) -> None:
        if not (self.data / "PG_VERSION").exists():
            self._run(self.initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust",
                      "--no-sync", "-E", "UTF8", timeout=START_TIMEOUT)
        options = (f"-p {self.port} -k {self.directory} -c listen_addresses=127.0.0.1"
                   " -c fsync=off -c max_connections=200 " + self.options)
        self._run(self.pg_ctl, "-D", str(self.data), "-l", str(self.log), "-o", options,
                  "-w", "-t", str(int(START_TIMEOUT)), "start", timeout=START_TIMEOUT + 5)
        # pg_ctl -w returns once the postmaster is ready, and fails when it exits (one
        # that cannot bind its only address does).  The postmaster holding the port's
        # listening socket is what makes the server on the port this one.
        if not check_listener(self.port, self.pids(), "postgres"):
            raise RuntimeError(f"postgres is not listening on {self.port}: {_tail(self.log)}")

    def _shutdown(self) -> None:
        self._run(self.pg_ctl, "-D", str(self.data), "-m", "fast", "-w", "-t",
                  str(int(STOP_TIMEOUT)), "stop", timeout=STOP_TIMEOUT + 5)

    def main_pid(self) -> Optional[int]:
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        return pid if _alive(pid) else None

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"


class MariaDBServer(DBServer):
    """A MariaDB server of the test's own (mariadb-install-db + mariadbd with its own
    datadir, socket and port; root without a password), database ``a2a`` created."""

    kind = "mariadb"

    def __init__(self, directory: Optional[Path] = None) -> None:
        self.mariadbd = shutil.which("mariadbd") or shutil.which("mysqld")
        self.install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
        if not (self.mariadbd and self.install):
            _require("MariaDB server binaries (mariadbd, mariadb-install-db) are not installed:"
                     " the MariaDB outage cases need a server of their own")
        super().__init__(directory)
        self.data = self.directory / "data"
        self.socket = self.directory / "mysqld.sock"
        self.log = self.directory / "server.log"

    def _launch(self) -> None:
        if not (self.data / "mysql").exists():
            result = subprocess.run(
                [self.install, "--no-defaults", f"--datadir={self.data}", "--user=root",
                 "--auth-root-authentication-method=normal", "--skip-test-db",
                 "--skip-name-resolve"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=START_TIMEOUT)
            if result.returncode != 0:
                raise RuntimeError(f"mariadb-install-db failed: {result.stdout.decode()}")
        self.proc = subprocess.Popen(
            [self.mariadbd, "--no-defaults", f"--datadir={self.data}", "--user=root",
             f"--socket={self.socket}", f"--port={self.port}", "--bind-address=127.0.0.1",
             f"--pid-file={self.directory / 'mysqld.pid'}", f"--log-error={self.log}",
             "--skip-name-resolve", "--skip-log-bin", "--innodb-buffer-pool-size=32M",
             "--innodb-log-file-size=16M", "--innodb-flush-log-at-trx-commit=2",
             "--max-connections=300", "--performance-schema=OFF"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self._await("mariadbd", self._answers)
        with self._connect() as conn, conn.cursor() as cursor:
            cursor.execute("CREATE DATABASE IF NOT EXISTS a2a")

    def _connect(self) -> Any:
        import pymysql

        return pymysql.connect(host="127.0.0.1", port=self.port, user="root",
                               connect_timeout=2, read_timeout=5, write_timeout=5)

    def _answers(self) -> bool:
        """It answers, from this server's data directory (not another passwordless one)."""
        with self._connect() as conn, conn.cursor() as cursor:
            cursor.execute("SELECT @@datadir")
            (datadir,) = cursor.fetchone()
        if os.path.realpath(datadir) != os.path.realpath(self.data):
            raise PortInUse(f"port {self.port} answers from {datadir}, not {self.data}")
        return True

    @property
    def url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/a2a"


class RedisServer(DBServer):
    """A redis-server of the test's own, persisting every write (append-only, fsync
    always) so a stop and start loses nothing acknowledged."""

    kind = "redis"

    def __init__(self, directory: Optional[Path] = None) -> None:
        self.binary = shutil.which("redis-server")
        if not self.binary:
            _require("redis-server is not installed: the Redis outage cases need their own")
        super().__init__(directory)
        self.log = self.directory / f"redis-{self.port}.log"

    def _launch(self) -> None:
        self.proc = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1",
             "--dir", str(self.directory), "--appendonly", "yes", "--appendfsync", "always",
             "--save", "", "--maxclients", "2000", "--logfile", str(self.log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        self._await("redis-server", self._pings)

    def _pings(self) -> bool:
        """It answers, and it is the process started here (``INFO server``'s process_id)."""
        assert self.proc is not None
        with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
            sock.settimeout(1)
            sock.sendall(b"INFO server\r\n")
            answer = sock.recv(65536)
            if not answer.startswith(b"$"):
                return False  # an error: not ready (-LOADING its append-only file...)
            head, _, _ = answer.partition(b"\r\n")
            while len(answer) < len(head) + 2 + int(head[1:]):  # the whole bulk reply
                chunk = sock.recv(65536)
                if not chunk:
                    return False
                answer += chunk
        for line in answer.decode(errors="replace").splitlines():
            if line.startswith("process_id:"):
                if int(line.split(":", 1)[1]) != self.proc.pid:
                    raise PortInUse(f"port {self.port} answers from redis pid "
                                    f"{line.split(':', 1)[1]}, not {self.proc.pid}")
                return True
        return False

    def kill(self) -> None:
        """SIGKILL (no shutdown): what a crash looks like."""
        self.thaw()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        self.running = False

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"


class BlackHole:
    """A loopback port where a store seems to be and nothing ever answers.

    ``accept=True``: connections are accepted (the TCP handshake completes) and whatever
    arrives is read and dropped, never answered: a hung server.  ``accept=False``: the
    socket listens with a backlog of 0 and never accepts: once the kernel's queue is
    full, connects hang in the handshake: a partitioned host.
    """

    def __init__(self, *, accept: bool = True) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.sock.listen(0 if not accept else 128)
        self.accept = accept
        self._conns: List[socket.socket] = []
        self._closed = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._fillers: List[socket.socket] = []
        if accept:
            self.sock.settimeout(0.2)
            self._thread = threading.Thread(target=self._serve, daemon=True,
                                            name=f"blackhole-{self.port}")
            self._thread.start()
        else:
            self._fill_backlog()

    def _fill_backlog(self) -> None:
        """Connect (and keep) a few sockets so the queue is full: later SYNs go unanswered."""
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError, OSError):
                filler.connect(("127.0.0.1", self.port))
            self._fillers.append(filler)
        time.sleep(0.2)

    def _serve(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                self._drain()
                continue
            except OSError:
                return
            conn.setblocking(False)
            self._conns.append(conn)
            self._drain()

    def _drain(self) -> None:
        for conn in list(self._conns):
            with contextlib.suppress(BlockingIOError, OSError):
                while conn.recv(65536):
                    pass

    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def postgres_url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def mariadb_url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.port}/a2a"

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(5)
        for conn in self._conns + self._fillers:
            with contextlib.suppress(OSError):
                conn.close()
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self) -> "BlackHole":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: The server class for each store kind, for tests parametrized over them.
SERVERS = {"postgresql": PostgresServer, "mariadb": MariaDBServer, "redis": RedisServer}
