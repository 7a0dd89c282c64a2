"""Support for the client, CLI and interop tests: real servers, a connection-cutting
proxy, a webhook receiver and a static card server, all on loopback."""
from __future__ import annotations

import atexit
import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import requests

from tests.support.helpers import ROOT, Server, stop_process_group
from tests.support.ports import check_listener, reserve_port

# ------------------------------------------------------------------ servers

_SERVERS: Dict[str, Any] = {}


def shared(key: str, start: Any) -> Any:
    """One server per key for the whole test session, whichever test module asks first;
    it stops at the session's end (:func:`stop_shared`), or else when the session's
    interpreter exits."""
    if key not in _SERVERS:
        if not _SERVERS:
            atexit.register(stop_shared)
        _SERVERS[key] = start()
    return _SERVERS[key]


def stop_shared() -> None:
    """Stop every shared server: at the end of the session (tests/conftest.py), since an
    xdist worker may end without running its ``atexit`` functions (a run left one)."""
    while _SERVERS:
        _, server = _SERVERS.popitem()
        server.stop()


def client_agent_server() -> Server:
    """gunicorn (gevent) serving tests/support/client_agent.py."""
    return shared("client_agent", lambda: Server("tests.support.client_agent:app"))


class SdkServer:
    """uvicorn serving the a2a-sdk agent of tests/support/client_sdk_agent.py."""

    def __init__(self) -> None:
        self._reservation = reserve_port()  # until stop(): see tests/support/ports.py
        self.port = self._reservation.port
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"a2a-sdk-{self.port}.log"
        self._log = open(self.log_path, "wb")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "uvicorn", "tests.support.client_sdk_agent:app",
                 "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning"],
                cwd=ROOT, env={**os.environ, "A2A_SDK_PORT": str(self.port)},
                stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True)
        except BaseException:
            self._log.close()
            self._reservation.release()
            raise
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        """Until uvicorn listens on its port (this process's socket: the answer is
        ours) and the card answers; at once, with its log, if it exits."""
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited: {self.log_path.read_text()}")
            if check_listener(self.port, [self.proc.pid], "uvicorn"):
                try:
                    requests.get(self.url + "/.well-known/agent-card.json", timeout=5)
                    return
                except (requests.ConnectionError, requests.Timeout):
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start in time")
            time.sleep(0.1)

    def stop(self) -> None:
        try:
            stop_process_group(self.proc)
        finally:
            if not self._log.closed:
                self._log.close()
            self._reservation.release()


# ------------------------------------------------------------------ proxy


class DropProxy:
    """A loopback TCP proxy in front of ``port`` that records what clients send and
    cuts connections mid-response.

    Whenever a client sends bytes containing one of ``triggers`` (while cuts are
    left), the response that follows on that connection is cut after
    ``cut_after`` bytes (or ``cut_after[trigger]``): both sockets are closed, as
    a dying network would.
    """

    def __init__(self, port: int, *, triggers: Sequence[bytes] = (),
                 cut_after: Union[int, Dict[bytes, int]] = 0, cuts: int = 1) -> None:
        self.upstream = port
        self.triggers = list(triggers)
        self.cut_after = cut_after
        self.cuts_left = cuts
        self.cut_count = 0
        self.sent: List[bytes] = []  # everything clients sent, per recv
        self._lock = threading.Lock()
        self._listener = socket.socket()
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(32)
        self.port = self._listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def sent_text(self) -> str:
        with self._lock:
            return b"".join(self.sent).decode("utf-8", "replace")

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
        except OSError:
            client.close()
            return
        armed = threading.Event()
        limit = [0]  # where the armed response is cut

        def pump_up() -> None:
            tail = b""
            try:
                while True:
                    data = client.recv(65536)
                    if not data:
                        break
                    with self._lock:
                        self.sent.append(data)
                        window = tail + data
                        hit = next((t for t in self.triggers if t in window), None)
                        if self.cuts_left > 0 and hit is not None:
                            self.cuts_left -= 1
                            limit[0] = self.cut_after[hit] if isinstance(self.cut_after, dict) \
                                else self.cut_after
                            armed.set()  # before forwarding: count the whole response
                    tail = window[-64:]
                    upstream.sendall(data)
            except OSError:
                pass
            finally:
                try:
                    upstream.shutdown(socket.SHUT_WR)
                except OSError:
                    pass

        threading.Thread(target=pump_up, daemon=True).start()
        forwarded = 0
        try:
            while True:
                data = upstream.recv(65536)
                if not data:
                    break
                if armed.is_set():
                    room = limit[0] - forwarded
                    if len(data) >= room:
                        client.sendall(data[:room])
                        with self._lock:
                            self.cut_count += 1
                        break  # the cut: close both sides mid-response
                    forwarded += len(data)
                client.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()

    def __enter__(self) -> "DropProxy":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ------------------------------------------------------------------ small HTTP servers


class _Quiet(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass


class LocalHTTP:
    """A threaded loopback HTTP server: ``routes`` maps GET paths to JSON bodies; POSTs
    are recorded in ``posts`` and answered 200."""

    def __init__(self, routes: Optional[Dict[str, Any]] = None) -> None:
        owner = self
        self.routes = routes or {}
        self.posts: List[Dict[str, Any]] = []

        class Handler(_Quiet):
            def do_GET(self) -> None:
                body = owner.routes.get(self.path.split("?")[0])
                if body is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                raw = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                owner.posts.append({"path": self.path, "body": self.rfile.read(length)})
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> "LocalHTTP":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_live(command: List[str], first: bytes, last: bytes,
              timeout: float = 30) -> Tuple[str, bool, int, bytes]:
    """Run a command and read its stdout as it comes: (output, whether ``first``
    appeared while the command still ran and before ``last``, exit status, stderr)."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    output, live = b"", None
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            piece = os.read(proc.stdout.fileno(), 4096)
            if not piece:
                break
            output += piece
            if live is None and first in output:
                live = proc.poll() is None and last not in output
        proc.wait(10)
    finally:
        proc.kill()
        proc.wait()
    return output.decode(), bool(live), proc.returncode, proc.stderr.read()
