"""The servers tests start: a server that cannot start fails its start at once, with
its log, and one whose port another process serves is never taken for it."""
from __future__ import annotations

import socket

import pytest

from tests.support import dbservers
from tests.support.helpers import Server
from tests.support.ports import PortInUse


def taken(port: int) -> socket.socket:
    """A listener of this process (not the server's) on ``port``."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(1)
    return sock


@pytest.mark.parametrize("kind", ["redis", "mariadb", "postgresql"])
def test_a_database_whose_port_is_taken_fails_at_once_with_its_log(kind):
    server = dbservers.SERVERS[kind]()
    try:
        with taken(server.port):
            with pytest.raises((dbservers.ServerExited, PortInUse, RuntimeError)) as failed:
                server.start()
        # It said why (the bind error in its log, or the port's owner), and the failed
        # start left no process behind.
        assert "in use" in str(failed.value).lower() or "another process" in str(failed.value), \
            failed.value
        assert server.pids() == []
        server.start()  # the port is free again: the same server starts
        assert server.pids()
    finally:
        server.close()


def test_a_database_restarts_on_its_own_port_and_answers_from_its_own_data():
    with dbservers.MariaDBServer() as db:
        port = db.port
        db.restart()
        assert db.port == port and db._answers()


def test_gunicorn_is_started_without_a_control_socket():
    with Server("examples.echo_agent:app") as server:
        assert "--no-control-socket" in server.proc.args
