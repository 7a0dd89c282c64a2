"""The production recipe of docs/deployment.rst, tried as written.

The nginx configuration is read from the page at test time (the ``nginx`` block
with ``upstream a2a_agent``); only its addresses, ports and certificate paths are
substituted.  nginx runs in the foreground on free loopback ports, with its own
prefix, pid, logs and temp folders under ``tmp_path`` (never the system nginx),
in front of two real ``gunicorn -k gevent`` masters (the page's two "hosts") of
``tests/support/fault_app.py`` on one SQLite store.  Through it, over TLS: a
stream's events arrive one by one as the agent emits them, the health endpoints
answer, the card names the public URL, and a send that reaches a stopping worker
comes back as the page says (a 503 ``WORKER_STOPPING`` passed on, then
acknowledged when sent again).
"""
from __future__ import annotations

import datetime
import ipaddress
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest
import requests

from a2a_flask.protocol.models import new_id

from tests.conftest import require
from tests.server.test_deploys import TERMINAL, state_in_store
from tests.server.test_readme import collect
from tests.support.helpers import (ROOT, V1, Server, free_port, parse_sse, rpc_body,
                                   stop_process_group, wait_until, worker_pids)

PAGE = ROOT / "docs" / "deployment.rst"
#: The page's two hosts and what stands for them here.
PAGE_HOSTS = ("10.0.1.11:8000", "10.0.1.12:8000")
PUBLIC_URL = "https://agent.example.com"

pytestmark = pytest.mark.timeout(240)


def page_site_config() -> str:
    """The page's nginx site configuration, as it is written."""
    blocks, _ = collect(PAGE.read_text(encoding="utf-8"), "docs/deployment.rst")
    found = [b.text for b in blocks if b.language == "nginx" and "upstream a2a_agent" in b.text]
    assert len(found) == 1, "docs/deployment.rst: one nginx block with 'upstream a2a_agent'"
    return found[0]


def substitute(text: str, old: str, new: str) -> str:
    """``text`` with ``old`` replaced; the page must still say ``old`` (or this test
    would silently run something else than the page)."""
    assert old in text, f"docs/deployment.rst's nginx block no longer says {old!r}"
    return text.replace(old, new)


def self_signed(folder: Path) -> Tuple[Path, Path]:
    """A certificate for agent.example.com and 127.0.0.1, and its key (PEM files)."""
    x509 = pytest.importorskip("cryptography.x509")
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agent.example.com")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("agent.example.com"),
                x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "fullchain.pem", folder / "privkey.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


class Nginx:
    """nginx in the foreground, serving the page's site configuration on loopback."""

    def __init__(self, folder: Path, upstreams: List[int], cert: Path, key: Path,
                 edit: Optional[Dict[str, str]] = None) -> None:
        binary = shutil.which("nginx") or next(
            (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.path.exists(p)), None)
        if binary is None:
            require("nginx is not installed (apt-get install -y nginx)")
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.https_port, self.http_port = free_port(), free_port()
        site = page_site_config()
        for page_host, port in zip(PAGE_HOSTS, upstreams):
            site = substitute(site, page_host, f"127.0.0.1:{port}")
        site = substitute(site, "listen 443 ssl;", f"listen 127.0.0.1:{self.https_port} ssl;")
        site = substitute(site, "listen 80;", f"listen 127.0.0.1:{self.http_port};")
        site = substitute(site, "/etc/ssl/agent/fullchain.pem", str(cert))
        site = substitute(site, "/etc/ssl/agent/privkey.pem", str(key))
        for old, new in (edit or {}).items():
            site = substitute(site, old, new)
        (folder / "site.conf").write_text(site)
        temp = {name: folder / name
                for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")}
        for path in temp.values():
            path.mkdir(exist_ok=True)
        # As root, nginx's workers would run as "nobody", who cannot enter tmp_path.
        user = "user root;\n" if os.geteuid() == 0 else ""
        (folder / "nginx.conf").write_text(
            f"{user}daemon off;\nworker_processes 1;\npid {folder}/nginx.pid;\n"
            f"error_log {folder}/error.log info;\n"
            "events { worker_connections 1024; }\n"
            "http {\n"
            "  log_format upstreams '$request $status upstream=$upstream_addr "
            "$upstream_status';\n"
            f"  access_log {folder}/access.log upstreams;\n"
            + "".join(f"  {name}_temp_path {path};\n" for name, path in temp.items())
            + f"  include {folder}/site.conf;\n}}\n")
        check = subprocess.run([binary, "-t", "-p", str(folder), "-e", str(folder / "error.log"),
                                "-c", str(folder / "nginx.conf")], capture_output=True, text=True,
                               timeout=30)
        assert check.returncode == 0, check.stderr
        self.log = open(folder / "nginx.out", "wb")
        self.proc = subprocess.Popen([binary, "-p", str(folder), "-e", str(folder / "error.log"),
                                      "-c", str(folder / "nginx.conf")], stdout=self.log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"https://127.0.0.1:{self.https_port}"
        self.verify = str(cert)
        wait_until(self._answers, 30, "nginx to listen")

    def _answers(self) -> bool:
        assert self.proc.poll() is None, (self.folder / "error.log").read_text()
        try:
            requests.get(f"http://127.0.0.1:{self.http_port}/", timeout=2, allow_redirects=False)
            return True
        except requests.ConnectionError:
            return False

    def access_log(self) -> str:
        return (self.folder / "access.log").read_text()

    def stop(self) -> None:
        stop_process_group(self.proc)
        self.log.close()


def hosts(store: str, count: int = 2) -> List[Server]:
    """``count`` gunicorn masters with the page's flags, one worker each."""
    env = {"FLASK_A2A_STORE": store, "FLASK_A2A_HEALTH_PATH": "/healthz",
           "FLASK_A2A_PUBLIC_URL": PUBLIC_URL}
    started: List[Server] = []
    try:
        for _ in range(count):
            started.append(Server("tests.support.fault_app:app", env=env, graceful_timeout=10,
                                  extra_args=["--worker-connections", "2000", "--keep-alive", "75",
                                              "--no-control-socket"]))
    except BaseException:
        for server in started:
            server.stop()
        raise
    return started


@pytest.fixture
def recipe(tmp_path) -> Iterator[Tuple[Nginx, List[Server], str]]:
    """nginx from the page in front of two hosts; yields (nginx, hosts, store URL)."""
    store = f"sqlite:///{tmp_path}/tasks.db"
    cert, key = self_signed(tmp_path)
    servers = hosts(store)
    try:
        proxy = Nginx(tmp_path / "nginx", [s.port for s in servers], cert, key)
        try:
            yield proxy, servers, store
        finally:
            proxy.stop()
    finally:
        for server in servers:
            server.stop()


def send(proxy: Nginx, text: str, method: str = "SendMessage", **kwargs: Any) -> requests.Response:
    message = {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": text}]}
    configuration = {"returnImmediately": True} if method == "SendMessage" else {}
    return requests.post(proxy.url + "/a2a", headers=V1, verify=proxy.verify, timeout=30,
                         json=rpc_body(method, {"message": message,
                                                "configuration": configuration}), **kwargs)


def events_of(response: requests.Response) -> Iterator[Tuple[float, Dict[str, Any]]]:
    """The SSE events of a streamed response, each with the moment it arrived."""
    buffer = ""
    for chunk in response.iter_content(chunk_size=None, decode_unicode=True):
        buffer += chunk
        complete, sep, buffer = buffer.rpartition("\n\n")
        for event in parse_sse(complete + sep) if sep else []:
            yield time.monotonic(), event


def tick_arrivals(base: str, verify: Any) -> Tuple[List[float], str]:
    """A stream of eight chunks emitted a quarter second apart: when each chunk
    arrived, and the task's state (read aside) when the first one had."""
    arrivals: List[float] = []
    state_at_first = ""
    message = {"role": "ROLE_USER", "messageId": new_id(), "parts": [{"text": "ticks 8"}]}
    with requests.post(base + "/a2a", headers=V1, verify=verify, timeout=30, stream=True,
                       json=rpc_body("SendStreamingMessage", {"message": message})) as response:
        assert response.status_code == 200, response.text
        texts = []
        for arrived, event in events_of(response):
            update = event["data"]["result"].get("artifactUpdate")
            if not update:
                continue
            arrivals.append(arrived)
            texts.append(update["artifact"]["parts"][0]["text"])
            if len(arrivals) == 1:
                task = requests.post(base + "/a2a", headers=V1, verify=verify, timeout=30,
                                     json=rpc_body("GetTask", {"id": update["taskId"]})).json()
                state_at_first = task["result"]["status"]["state"]
        assert texts == [f"tick {n};" for n in range(8)]
    return arrivals, state_at_first


def kind(event: Dict[str, Any]) -> str:
    result = event["data"]["result"]
    return next(iter(result))


def stream_through(proxy: Nginx, direct_url: str) -> None:
    """A stream through nginx delivers each event as the agent emits it."""
    # Causal: the agent works until canceled, and the client cancels only once it has
    # seen the WORKING event; a proxy holding events back would never let it.
    with send(proxy, "wait", "SendStreamingMessage", stream=True) as response:
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("text/event-stream")
        seen: List[str] = []
        for _, event in events_of(response):
            seen.append(kind(event))
            update = event["data"]["result"].get("statusUpdate")
            if update and update["status"]["state"] == "TASK_STATE_WORKING":
                cancel = requests.post(proxy.url + "/a2a", headers=V1, verify=proxy.verify,
                                       timeout=30, json=rpc_body(
                                           "CancelTask", {"id": update["taskId"]}))
                assert cancel.status_code == 200, cancel.text
        assert seen[-1] == "statusUpdate" and "statusUpdate" in seen[:-1], seen
    # Spacing: the first chunk arrives while the agent is still working (before the
    # last one is emitted), and the chunks arrive spread as a direct stream's do.
    arrivals, state_at_first = tick_arrivals(proxy.url, proxy.verify)
    assert state_at_first == "TASK_STATE_WORKING", state_at_first
    direct, _ = tick_arrivals(direct_url, None)
    assert arrivals[-1] - arrivals[0] > (direct[-1] - direct[0]) / 2, (arrivals, direct)


def test_streams_pass_through_the_page_s_nginx_one_event_at_a_time(recipe):
    proxy, servers, _ = recipe
    stream_through(proxy, servers[0].url)
    # Both requests went through nginx to a host, over HTTP/1.1 keep-alive.
    assert re.search(r"POST /a2a HTTP/1.1 200 upstream=127\.0\.0\.1:\d+ 200", proxy.access_log())


def test_the_app_s_header_keeps_streams_unbuffered_when_proxy_buffering_is_on(tmp_path):
    """``X-Accel-Buffering: no`` (sent by the app with every stream) turns nginx's
    buffering off for the stream even where ``proxy_buffering`` is left on."""
    cert, key = self_signed(tmp_path)
    (server,) = hosts(f"sqlite:///{tmp_path}/tasks.db", count=1)
    try:
        proxy = Nginx(tmp_path / "nginx", [server.port, server.port], cert, key,
                      edit={"proxy_buffering off;": "proxy_buffering on;"})
        try:
            stream_through(proxy, server.url)
        finally:
            proxy.stop()
    finally:
        server.stop()


def test_health_card_and_tls_through_the_page_s_nginx(recipe):
    proxy, _, _ = recipe
    live = requests.get(proxy.url + "/healthz", verify=proxy.verify, timeout=10)
    assert (live.status_code, live.json()) == (200, {"status": "ok"})
    ready = requests.get(proxy.url + "/healthz/ready", verify=proxy.verify, timeout=10)
    assert ready.status_code == 200, ready.text
    assert ready.json() == {"status": "ready",
                            "agents": {"a2a": {"store": "ok", "stopping": False}}}
    assert ready.headers["Cache-Control"] == "no-store"
    # TLS ends at nginx; the card names the public URL, not the host nginx reached.
    card = requests.get(proxy.url + "/.well-known/agent-card.json", verify=proxy.verify,
                        timeout=10).json()
    assert card["supportedInterfaces"][0]["url"].startswith(PUBLIC_URL + "/a2a"), card
    # A body past the app's limit reaches the app, which refuses it with its JSON error.
    large = requests.post(proxy.url + "/a2a", headers={**V1, "Content-Type": "application/json"},
                          data=b"x" * (16 * 1024 * 1024 + 1024), verify=proxy.verify, timeout=60)
    assert large.status_code == 413, large.text[:300]
    assert large.headers["Content-Type"].startswith("application/json"), large.text[:300]
    plain = requests.get(f"http://127.0.0.1:{proxy.http_port}/healthz", allow_redirects=False,
                         timeout=10, headers={"Host": "agent.example.com"})
    assert plain.status_code == 301
    assert plain.headers["Location"] == "https://agent.example.com/healthz"


def test_a_stopping_worker_s_503_is_passed_on_and_the_send_again_is_acknowledged(recipe):
    """As the page says: a POST that reaches a stopping worker (here through one of
    nginx's kept-alive connections to it) comes back to the client as 503 with
    ``Retry-After: 1`` and reason ``WORKER_STOPPING``, never sent elsewhere by nginx
    (nothing was accepted); sent again after the pause, it is acknowledged. GETs
    (readiness) are tried on the other host. Every acknowledged task completes."""
    proxy, servers, store = recipe
    acknowledged: List[str] = []
    # Open kept-alive connections from nginx to both hosts, and a task that keeps the
    # first host's worker stopping for a while.
    for _ in range(6):
        answer = send(proxy, "hello")
        assert answer.status_code == 200, answer.text
        acknowledged.append(answer.json()["result"]["task"]["id"])
    before = proxy.access_log().count("\n")
    (stopping,) = worker_pids(servers[0])
    os.kill(stopping, signal.SIGTERM)
    refused: List[requests.Response] = []
    ready_codes: List[int] = []
    for _ in range(40):
        answer = send(proxy, "sleep 1")
        if answer.status_code == 503:
            refused.append(answer)
            time.sleep(int(answer.headers["Retry-After"]))
            answer = send(proxy, "sleep 1")  # as a client does: once more, after the pause
        assert answer.status_code == 200, answer.text
        acknowledged.append(answer.json()["result"]["task"]["id"])
        ready_codes.append(requests.get(proxy.url + "/healthz/ready", verify=proxy.verify,
                                        timeout=30).status_code)
        if refused and len(acknowledged) > 12:
            break
    assert refused, proxy.access_log()
    for answer in refused:
        assert answer.headers["Retry-After"] == "1"
        error = answer.json()["error"]
        assert error["data"][0]["reason"] == "WORKER_STOPPING", error
    assert set(ready_codes) == {200}, ready_codes
    # nginx passed each refused POST on as it was: one upstream, one answer.
    log = proxy.access_log().splitlines()[before:]
    passed_on = [line for line in log if line.startswith("POST /a2a HTTP/1.1 503 ")]
    assert len(passed_on) == len(refused), log
    assert all(re.fullmatch(r".* upstream=127\.0\.0\.1:\d+ 503", line) for line in passed_on), \
        passed_on
    wait_until(lambda: all(state_in_store(store, t) in TERMINAL for t in acknowledged), 60,
               "every acknowledged task to end")
    states = {t: state_in_store(store, t) for t in acknowledged}
    assert set(states.values()) == {"TASK_STATE_COMPLETED"}, states


def test_a_worker_recycled_by_max_requests_finishes_its_runs(tmp_path):
    """gunicorn's ``--max-requests`` ends a worker without a signal: once its
    connections close it exits, and its runs (non-blocking sends, which hold no
    connection) get the grace at the exit, as on ``SIGTERM``, instead of being
    failed (docs/deployment.rst, "What a deploy does to running work")."""
    store = f"sqlite:///{tmp_path}/tasks.db"
    server = Server("tests.support.fault_app:app", env={"FLASK_A2A_STORE": store},
                    graceful_timeout=20, extra_args=["--max-requests", "3"])
    try:
        (first,) = worker_pids(server)
        # The card request of the start-up counts: the third send is the worker's last.
        acknowledged = []
        for _ in range(3):
            answer = requests.post(server.url + "/a2a", headers=V1, timeout=30, json=rpc_body(
                "SendMessage", {"message": {"role": "ROLE_USER", "messageId": new_id(),
                                            "parts": [{"text": "sleep 2"}]},
                                "configuration": {"returnImmediately": True}}))
            assert answer.status_code == 200, answer.text
            acknowledged.append(answer.json()["result"]["task"]["id"])
        wait_until(lambda: first not in worker_pids(server), 30, "the worker to be recycled")
        wait_until(lambda: all(state_in_store(store, t) in TERMINAL for t in acknowledged), 30,
                   "every task to end")
        states = {t: state_in_store(store, t) for t in acknowledged}
        assert set(states.values()) == {"TASK_STATE_COMPLETED"}, states
    finally:
        server.stop()
