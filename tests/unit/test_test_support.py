"""The suite's own machinery: reserved ports, the check that a server is ours, the
declared markers and the guard that keeps processes out of unmarked tests."""
from __future__ import annotations

import fcntl
import multiprocessing
import os
import socket
import subprocess
from types import ModuleType, SimpleNamespace

import pytest

from tests.conftest import stale_declarations
from tests.support.ports import LOCK_DIR, POOL, PortInUse, check_listener, reserve_port
from tests.support.spawnguard import ProcessGuard, ProcessStarted


def test_a_reserved_port_is_locked_against_every_other_process():
    first, second = reserve_port(), reserve_port()
    try:
        assert first.port != second.port
        assert first.port in POOL and second.port in POOL
        # Another process opens the lock file on its own: flock refuses it the port.
        fd = os.open(LOCK_DIR / f"{first.port}.lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            first.release()
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released: free again
        finally:
            os.close(fd)
    finally:
        first.release()
        second.release()


def test_the_pool_is_outside_the_ephemeral_range():
    low, high = map(int, open("/proc/sys/net/ipv4/ip_local_port_range").read().split())
    assert POOL.stop <= low or POOL.start > high


def test_a_listener_is_ours_only_when_one_of_our_pids_holds_it():
    reservation = reserve_port()
    try:
        assert not check_listener(reservation.port, [os.getpid()], "nothing")  # not yet
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", reservation.port))
            sock.listen(1)
            assert check_listener(reservation.port, [os.getpid()], "this process")
            with pytest.raises(PortInUse, match="another process"):
                check_listener(reservation.port, [os.getppid()], "the parent")
    finally:
        reservation.release()


def test_an_unmarked_test_runs_under_the_process_guard():
    assert "ProcessGuard" in subprocess._fork_exec.__qualname__  # type: ignore[attr-defined]


def test_the_guard_refuses_every_way_to_start_a_process_and_remembers_it():
    outer = subprocess._fork_exec  # type: ignore[attr-defined]
    with ProcessGuard("this test") as guard:
        with pytest.raises(ProcessStarted, match="not marked server"):
            subprocess.run(["true"])
        with pytest.raises(ProcessStarted):
            os.system("true")
        with pytest.raises(ProcessStarted):
            multiprocessing.get_context("fork").Process(target=print).start()
        try:  # a test that swallows the refusal is still caught
            subprocess.run(["true"])
        except Exception:
            pass
    assert len(guard.attempts) == 4, guard.attempts
    assert subprocess._fork_exec is outer  # type: ignore[attr-defined]  # restored


def test_a_declaration_that_names_nothing_is_reported():
    module = ModuleType("tests.x")
    module.test_here = lambda: None  # type: ignore[attr-defined]
    module.pytestmark = [pytest.mark.declare(  # type: ignore[attr-defined]
        server=["test_here", "test_gone"], slow=["test_here[redis]", "a_fixture"])]
    item = SimpleNamespace(module=module)
    assert stale_declarations([item], {"a_fixture": []}) == ["tests.x: test_gone"]


def test_markers_are_declared_not_read_from_source(request):
    """This docstring names subprocess, gunicorn and redis: nothing marks the test."""
    assert request.node.get_closest_marker("server") is None
    assert request.node.get_closest_marker("slow") is None


SPIN_REPORT = """Greenlet <...> appears to be blocked
    Reported by <GreenletTracer>
{scheduling}Blocked Stack (for thread id 0x1):
  File "/repo/tests/support/fault_app.py", line 40, in hog
    while time.monotonic() < end:
"""


@pytest.mark.parametrize("scheduling, ours", [
    ("", True),  # no scheduling line (an older report): the stack decides
    ("Scheduling: ran 0.150 s, waited for a CPU 0.300 s, of 0.470 s\n", True),  # a spin, on a busy machine
    ("Scheduling: ran 0.001 s, waited for a CPU 0.010 s, of 0.250 s\n", True),  # asleep in a blocking call
    ("Scheduling: ran 0.020 s, waited for a CPU 0.260 s, of 0.300 s\n", False),  # not given a CPU
    # Seen beside a CPU hog: the first window began in the idle hub's poll (0.109 s of
    # "sleep" in a regular expression), and inside the block the thread mostly waited.
    ("Scheduling: ran 0.005 s, waited for a CPU 0.210 s, of 0.324 s\n"
     "Inside the block: ran 0.004 s, waited for a CPU 0.110 s, of 0.120 s\n", False),
    ("Scheduling: ran 0.005 s, waited for a CPU 0.010 s, of 0.324 s\n"
     "Inside the block: ran 0.004 s, waited for a CPU 0.005 s, of 0.110 s\n", True),  # asleep in a call
    ("Scheduling: ran 0.250 s, waited for a CPU 0.020 s, of 0.300 s\n"
     "Inside the block: ran 0.100 s, waited for a CPU 0.010 s, of 0.110 s\n", True),  # a spin
], ids=["no-line", "spin-on-a-busy-machine", "blocking-call", "descheduled",
        "idle-poll-then-descheduled", "blocking-call-inside", "spin-inside"])
def test_a_blocked_report_counts_the_workers_own_time_not_the_machines(scheduling, ours):
    from tests.support.helpers import blocked_in_our_code

    assert blocked_in_our_code(SPIN_REPORT.format(scheduling=scheduling)) is ours


DISK_REPORT = """Greenlet <...> appears to be blocked
    Reported by <GreenletTracer>
{scheduling}Blocked Stack (for thread id 0x1):
  File "/repo/a2a_flask/engine/writer.py", line 155, in _write
    write(None)
  File "/repo/a2a_flask/stores/sqlite.py", line 264, in _append
    db.execute("UPDATE snapshots SET snapshot=? WHERE task_id=?", (snapshot, task_id))
"""


@pytest.mark.parametrize("scheduling, ours", [
    ("Scheduling: ran 0.042 s, waited for a CPU 0.160 s, of 0.347 s\n", False),  # asleep on the disk
    ("Scheduling: ran 0.180 s, waited for a CPU 0.010 s, of 0.200 s\n", True),  # a statement's own work
], ids=["disk-sleep", "slow-statement"])
def test_a_local_file_stores_disk_sleep_is_the_machines_not_ours(scheduling, ours):
    from tests.support.helpers import blocked_in_our_code

    assert blocked_in_our_code(DISK_REPORT.format(scheduling=scheduling)) is ours


@pytest.mark.parametrize("times, waited, verdict", [
    ({"card": 0.01, "GetTask": 1.5}, 0.0, True),  # 1.5 s of its own: a stall
    ({"card": 0.01, "GetTask": 1.5}, 1.2, False),  # 1.2 s of it waiting for a CPU
    ({"card": 0.01, "GetTask": 2.6}, 1.2, True),  # 1.4 s of its own all the same
    ({"card": 0.01, "GetTask": 0.9}, 0.0, False),
])
def test_a_probe_stalls_on_the_servers_own_time(times, waited, verdict):
    from tests.support.helpers import stalled

    assert stalled({"times": times, "waited": waited}) is verdict


def test_the_processes_serving_a_port_are_found():
    from tests.support.helpers import cpu_waited, server_pids

    reservation = reserve_port()
    try:
        with socket.socket() as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(("127.0.0.1", reservation.port))
            sock.listen(1)
            assert server_pids(f"http://127.0.0.1:{reservation.port}/a2a") == [os.getpid()]
        assert cpu_waited([os.getpid()])[os.getpid()] >= 0
    finally:
        reservation.release()
