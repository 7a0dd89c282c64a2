"""Loopback ports for the servers tests start: reserved from the moment one is chosen
until its owner lets it go, and a check that the server answering on one is ours.

Binding port 0 and closing the socket (the usual ``free_port``) reserves nothing: until
the server binds (seconds, for a database that first creates its data directory) and
while a server restarts, any other process may take the port, and a test then talks
to another test's server.  The servers here take a port number, not a socket, so the
port is reserved instead:

* ports come from a pool outside the kernel's ephemeral range
  (``/proc/sys/net/ipv4/ip_local_port_range``), so no ``bind(0)`` and no outgoing
  connection of any process is ever given one;
* a port is taken by holding an exclusive ``flock`` on ``<tmp>/a2a-test-ports/<port>.lock``:
  every test process on the machine (xdist workers, other sessions) skips a port
  another holds, and the kernel drops the lock when its process dies, so a crashed
  run leaves nothing behind;
* each xdist worker starts its search in a slice of its own
  (``PYTEST_XDIST_WORKER``), so workers rarely even try the same port;
* a port something already listens on (a service that is not ours) is skipped.

An owner (:class:`tests.support.helpers.Server`, a ``DBServer``) keeps its
reservation across stops and restarts and releases it when closed, so its port is
never free for anyone else in between.

:func:`check_listener` is the other half: a readiness check first makes sure the
socket listening on the port belongs to the process the test started (Linux
``/proc``), so an answer always comes from that server.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
import random
import socket
import tempfile
from pathlib import Path
from typing import Iterable, List, Optional, Set

#: Where the lock files live: one directory for every test process of the machine.
LOCK_DIR = Path(tempfile.gettempdir()) / "a2a-test-ports"
#: The slices the pool is cut into, one per xdist worker (more workers share).
SLICES = 16


def _pool() -> range:
    """The largest run of ports above 10000 outside the kernel's ephemeral range."""
    try:
        low, high = map(int, Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        low, high = 32768, 60999
    best = max(range(10000, low), range(max(10000, high + 1), 65536), key=len)
    # No room outside it: the locks still keep the tests apart from each other.
    return best if len(best) >= 1000 else range(20000, 30000)


POOL = _pool()


class PortInUse(RuntimeError):
    """Another process listens on a port a test's server should be serving."""


class Reservation:
    """A port held for one owner until :meth:`release` (or the process's end)."""

    def __init__(self, port: int, fd: int) -> None:
        self.port = port
        self._fd: Optional[int] = fd

    def release(self) -> None:
        """Let the port go (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            _HELD.discard(self.port)
            os.close(fd)  # drops the flock


#: Ports this process holds (a second flock of the same file from the same process
#: would conflict too; this just skips them without a system call).
_HELD: Set[int] = set()
#: The reservations :func:`free_port` hands out: kept until the process ends.
_KEPT: List[Reservation] = []


def _candidates() -> List[int]:
    """Every port of the pool, starting in this xdist worker's slice at a random place."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    index = int(worker[2:]) if worker.startswith("gw") and worker[2:].isdigit() else SLICES - 1
    width = len(POOL) // SLICES
    start = (index % SLICES) * width + random.randrange(width)
    ports = list(POOL)
    return ports[start:] + ports[:start]


def _bindable(port: int) -> bool:
    """Whether a server could bind the port now (nothing listens on it).  With
    SO_REUSEADDR, as every server we start sets it: lingering TIME_WAIT connections of
    an earlier server do not count, a listener does."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def reserve_port() -> Reservation:
    """A loopback port no other test process will choose until it is released."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):  # another user's directory: theirs to set
        LOCK_DIR.chmod(0o1777)
    for port in _candidates():
        if port in _HELD:
            continue
        try:
            fd = os.open(LOCK_DIR / f"{port}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        except OSError:
            continue  # another user's lock file we may not open: theirs
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        if not _bindable(port):
            os.close(fd)
            continue
        _HELD.add(port)
        return Reservation(port, fd)
    raise RuntimeError(f"no free loopback port in {POOL.start}-{POOL.stop - 1}")


def free_port() -> int:
    """A loopback port nothing listens on, reserved for the rest of this process (for a
    server a test starts itself, or an address where nothing answers)."""
    reservation = reserve_port()
    _KEPT.append(reservation)
    return reservation.port


#: /proc/net/tcp's states (``st``, hex): listening, and connected.
LISTEN, ESTABLISHED = "0A", "01"


def _local_inodes(port: int, state: str) -> Set[str]:
    """The inodes of the sockets on local ``port`` (any address) in ``state``; a
    connection still waiting in a listener's accept queue has none yet."""
    found: Set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as handle:
                next(handle)
                for line in handle:
                    fields = line.split()
                    # local_address is ADDR:PORT in hex.
                    if fields[3] == state and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        found.add(fields[9])
        except OSError:
            continue
    found.discard("0")
    return found


def _listening_inodes(port: int) -> Set[str]:
    """The inodes of the sockets listening on ``port`` (any local address)."""
    return _local_inodes(port, LISTEN)


def accepted_connections(port: int) -> int:
    """How many connections a server on ``port`` has accepted and holds open."""
    return len(_local_inodes(port, ESTABLISHED))


def _socket_inodes(pid: int) -> Set[str]:
    inodes: Set[str] = set()
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return inodes
    for name in names:
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{name}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    return inodes


def listener_pids(port: int) -> List[int]:
    """Every process holding a socket that listens on ``port`` (a scan of /proc)."""
    listening = _listening_inodes(port)
    pids = []
    for name in os.listdir("/proc") if listening else []:
        if name.isdigit() and listening & _socket_inodes(int(name)):
            pids.append(int(name))
    return pids


def check_listener(port: int, pids: Iterable[int], what: str) -> bool:
    """Whether one of ``pids`` (the server the test started) listens on ``port``:
    False while nothing does yet; :class:`PortInUse` at once when another process
    does, since then every answer on the port would come from the wrong server."""
    listening = _listening_inodes(port)
    if not listening:
        return False
    pids = list(pids)
    if any(listening & _socket_inodes(pid) for pid in pids):
        return True
    raise PortInUse(f"port {port} is served by another process, not the {what} the test "
                    f"started (pids {pids})")
