"""The ``a2a-flask`` command line against a real server: as installed console script
and as ``python -m a2a_flask`` (subprocesses), and ``cli.main`` in-process for the
finer points of its output."""
from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import List, Tuple

import pytest

from a2a_flask.client import cli
from a2a_flask.client import A2AClient, TaskNotCancelableError

from tests.support.client_support import DropProxy, LocalHTTP, client_agent_server, read_live
from tests.support.helpers import ROOT, free_port

pytestmark = [pytest.mark.timeout(60), pytest.mark.declare(server=[
    "agent_server", "test_console_script_and_python_m_both_run_with_documented_exit_codes"])]


@pytest.fixture(scope="session")
def agent_server():
    """The agent of tests/support/client_agent.py on a real gunicorn (shared with other modules)."""
    return client_agent_server()


def console_script() -> str:
    """The installed ``a2a-flask`` (``pip install -e .`` puts it beside the interpreter)."""
    found = shutil.which("a2a-flask") or str(Path(sys.executable).parent / "a2a-flask")
    assert os.path.exists(found), "a2a-flask is not installed: run pip install -e ."
    return found


def run(*args: str, module: bool = False, timeout: float = 30) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "a2a_flask"] if module else [console_script()]
    return subprocess.run(command + list(args), capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def call(*args: str) -> Tuple[int, str, str]:
    """``cli.main`` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(args), stdout=out, stderr=err)
    return code, out.getvalue(), err.getvalue()


def json_lines(text: str) -> List[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def cancel_leftovers(url: str) -> None:
    with A2AClient.connect(url) as agent:
        for task in agent.list_tasks(state="working").tasks:
            try:
                agent.cancel_task(task.id)
            except TaskNotCancelableError:
                pass


# ------------------------------------------------------------------ entry points


def test_console_script_and_python_m_both_run_with_documented_exit_codes():
    for result in (run("--help"), run("--help", module=True)):
        assert result.returncode == 0, result.stderr
        assert "send" in result.stdout and "subscribe" in result.stdout
        for line in ("0    success", "2    usage error", "3    the agent could not be reached",
                     "1    the agent answered with an A2A"):
            assert line in result.stdout


def test_card(agent_server):
    result = run("card", agent_server.url, module=True)
    assert result.returncode == 0, result.stderr
    assert "Client test agent 2.0.0" in result.stdout
    assert f"using: JSONRPC 1.0 {agent_server.url}/a2a" in result.stdout
    assert "capabilities: streaming, push notifications, extended card" in result.stdout
    code, out, _ = call("card", agent_server.url, "--json")
    assert code == 0 and json.loads(out)["name"] == "Client test agent"
    code, out, _ = call("card", agent_server.url, "--extended", "--token", "member")
    assert code == 0 and "Client test agent (extended)" in out and "Secret (secret)" in out
    code, _, err = call("card", agent_server.url, "--extended")
    assert code == cli.EXIT_A2A_ERROR and "UnauthenticatedError" in err


# ------------------------------------------------------------------ send


def test_send_stream_prints_the_answer_live(agent_server):
    """Artifact text reaches stdout while the task still runs, not at the end."""
    text, live, status, stderr = read_live(
        [console_script(), "send", agent_server.url, "slow 16", "--stream"], b"chunk-0", b"chunk-15")
    assert status == 0, stderr
    assert live
    lines = text.splitlines()
    assert lines[0].startswith("[submitted] task ")
    assert lines[1] == "[working] thinking..."
    assert lines[2] == "".join(f"chunk-{i} " for i in range(16))
    assert lines[3] == "[completed]"


def test_send_waits_and_prints_the_result(agent_server):
    code, out, err = call("send", agent_server.url, "hello cli")
    assert code == 0, err
    first, second = out.splitlines()
    assert first.startswith("[completed] task ") and second == "hello cli"


def test_send_json_is_the_1_0_send_response(agent_server):
    result = run("send", agent_server.url, "hello json", "--json", module=True)
    assert result.returncode == 0, result.stderr
    [line] = json_lines(result.stdout)
    assert line["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert line["task"]["artifacts"][0]["parts"] == [{"text": "hello json"}]


def test_stream_json_is_one_stream_response_per_line(agent_server):
    result = run("send", agent_server.url, "slow 2", "--stream", "--json")
    assert result.returncode == 0, result.stderr
    lines = json_lines(result.stdout)
    assert [next(iter(line)) for line in lines] == \
        ["task", "statusUpdate", "artifactUpdate", "artifactUpdate", "statusUpdate"]
    assert lines[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert result.stderr == ""


def test_input_required_then_answer_with_task(agent_server):
    code, out, err = call("send", agent_server.url, "ask", "--json")
    assert code == 0
    task = json.loads(out)["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    code, out, err = call("send", agent_server.url, "ask")
    assert code == 0 and out.startswith("[input-required] task ") and out.rstrip().endswith(
        ": Which city?")
    assert "--task" in err  # a hint on how to answer, on stderr
    code, out, _ = call("send", agent_server.url, "Rome", "--task", task["id"], "--stream")
    assert code == 0
    assert out.splitlines()[-1] == "[completed] Forecast for Rome"


def test_file_and_data_parts(agent_server, tmp_path):
    path = tmp_path / "report.json"
    path.write_text('{"pages": 3}')
    code, out, err = call("send", agent_server.url, "parts", "--file", str(path),
                          "--data", '{"k": [1, 2]}')
    assert code == 0, err
    assert "[file report.json, application/json, 12 bytes]" in out
    assert '{"k": [1, 2]}' in out


def test_context_and_prefer_and_no_card(agent_server):
    code, out, _ = call("send", agent_server.url, "first", "--json", "--prefer", "0.1")
    assert code == 0
    context = json.loads(out)["task"]["contextId"]
    code, out, _ = call("send", agent_server.url, "second", "--context", context, "--json",
                        "--prefer", "rest")
    assert code == 0 and json.loads(out)["task"]["contextId"] == context
    code, out, _ = call("send", agent_server.url + "/a2a/rest", "direct", "--no-card",
                        "--prefer", "rest")
    assert code == 0 and out.splitlines()[-1] == "direct"


# ------------------------------------------------------------------ exit codes


def test_exit_codes(agent_server):
    result = run("get", agent_server.url, "no-such-task")
    assert result.returncode == cli.EXIT_A2A_ERROR == 1
    assert "TaskNotFoundError (-32001 TASK_NOT_FOUND)" in result.stderr
    assert result.stdout == ""
    result = run("send", f"http://127.0.0.1:{free_port()}", "hello")
    assert result.returncode == cli.EXIT_CONNECTION == 3
    assert result.stderr.startswith("connection error: ")
    assert run("send", agent_server.url).returncode == cli.EXIT_USAGE == 2
    assert call("send", agent_server.url, "x", "--data", "{bad")[0] == 2
    assert call("frobnicate")[0] == 2
    result = run("send", agent_server.url, "fail", module=True)
    assert result.returncode == cli.EXIT_TASK_FAILED == 4
    assert result.stdout.startswith("[failed] task ")


def test_timeout_is_a_connection_exit(agent_server):
    try:
        code, _, err = call("send", agent_server.url, "hold", "--timeout", "5,0.5")
        assert code == cli.EXIT_CONNECTION and err.startswith("timeout: ")
    finally:
        cancel_leftovers(agent_server.url)


def test_missing_file_is_a_usage_error(agent_server, tmp_path):
    code, _, err = call("send", agent_server.url, "--file", str(tmp_path / "nope.txt"))
    assert code == cli.EXIT_USAGE and "nope.txt" in err


# ------------------------------------------------------------------ tasks


def test_get_list_and_cancel(agent_server):
    code, out, _ = call("send", agent_server.url, "listed", "--json")
    task = json.loads(out)["task"]
    code, out, _ = call("get", agent_server.url, task["id"])
    assert code == 0
    assert f"task {task['id']}  context {task['contextId']}" in out
    assert "[completed]" in out and "  user: listed" in out and "listed" in out.splitlines()[-1]
    code, out, _ = call("list", agent_server.url, "--context", task["contextId"])
    assert code == 0 and out.startswith(task["id"]) and "(1 of 1 tasks)" in out
    code, out, _ = call("list", agent_server.url, "--context", task["contextId"], "--json")
    assert json.loads(out)["tasks"][0]["id"] == task["id"]
    code, _, err = call("list", agent_server.url, "--state", "sleeping")
    assert code == 2 and "Unknown task state" in err
    code, _, err = call("cancel", agent_server.url, task["id"])
    assert code == 1 and "TaskNotCancelableError" in err


def test_subscribe_follows_a_task_until_it_is_canceled(agent_server):
    code, out, _ = call("send", agent_server.url, "hold", "--no-wait", "--json")
    task_id = json.loads(out)["task"]["id"]
    proc = subprocess.Popen([console_script(), "subscribe", agent_server.url, task_id],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        first = proc.stdout.readline()
        assert first.startswith("[working] task " + task_id)
        code, out, _ = call("cancel", agent_server.url, task_id)
        assert code == 0 and out.startswith("[canceled] task ")
        rest, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == cli.EXIT_TASK_FAILED, err
    assert rest.strip().splitlines()[-1] == "[canceled]"


# ------------------------------------------------------------------ push, auth, tenant


def test_push_commands(agent_server):
    _, out, _ = call("send", agent_server.url, "hello", "--json")
    task_id = json.loads(out)["task"]["id"]
    with LocalHTTP() as hooks:
        webhook = hooks.url + "/hook"
        code, out, err = call("push", "set", agent_server.url, task_id, webhook, "--id", "c1",
                              "--push-token", "tok", "--auth", "Bearer secret", "--json")
        assert code == 0, err
        created = json.loads(out)
        assert created["id"] == "c1" and created["url"] == webhook
        code, out, _ = call("push", "get", agent_server.url, task_id, "c1")
        assert code == 0 and out.startswith(f"c1  task {task_id}  {webhook}")
        assert "auth Bearer" in out
        code, out, _ = call("push", "list", agent_server.url, task_id, "--json")
        assert [c["id"] for c in json.loads(out)["configs"]] == ["c1"]
        code, out, _ = call("push", "delete", agent_server.url, task_id, "c1")
        assert code == 0 and out == f"deleted push config c1 of task {task_id}\n"
        code, out, _ = call("push", "list", agent_server.url, task_id)
        assert code == 0 and out == f"(no push configs for task {task_id})\n"


def test_headers_token_and_tenant_reach_the_agent(agent_server):
    with DropProxy(agent_server.port) as proxy:
        code, out, err = call("send", proxy.url, "tenant work", "--json", "-H", "X-Trace: 42",
                              "--header", "X-Other: yes", "--token", "abc", "--tenant", "acme")
        assert code == 0, err
        sent = proxy.sent_text
    assert "X-Trace: 42" in sent and "X-Other: yes" in sent
    assert "Authorization: Bearer abc" in sent and '"tenant":"acme"' in sent
    task_id = json.loads(out)["task"]["id"]
    assert call("get", agent_server.url, task_id, "--tenant", "acme", "--token", "abc")[0] == 0
    assert call("get", agent_server.url, task_id, "--token", "abc")[0] == cli.EXIT_A2A_ERROR
    assert call("get", agent_server.url, task_id, "--tenant", "acme")[0] == cli.EXIT_A2A_ERROR
    code, _, err = call("get", agent_server.url, task_id, "--token", "bad")
    assert code == cli.EXIT_A2A_ERROR and "UnauthenticatedError" in err
    code, _, err = call("send", agent_server.url, "x", "-H", "no-colon")
    assert code == 2 and "expected 'Name: value'" in err


# ------------------------------------------------------------------ URLs that are not agents


def test_a_url_with_no_agent_says_so_and_exits_2(agent_server):
    """The host serves an agent at /a2a: other paths on it are not that agent, even
    though the host root has its card (the client used to fall back to it)."""
    result = run("card", agent_server.url + "/nope")  # as a user would, in a subprocess
    assert result.returncode == cli.EXIT_USAGE == 2, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr == (f"error: No agent at {agent_server.url}/nope: the host's card at "
                             f"{agent_server.url}/.well-known/agent-card.json is for an agent at "
                             f"{agent_server.url}/a2a, {agent_server.url}/a2a/rest\n")
    for path in ("/nope/deeper/", "/a2a/rest/nope", "/a2ax"):
        code, out, err = call("card", agent_server.url + path)
        assert code == 2 and out == "", (path, out, err)
        assert err.startswith(f"error: No agent at {agent_server.url}{path}: "), err
    with LocalHTTP({}) as empty:  # a web server with no card at all
        result = run("card", empty.url + "/nope", module=True)
    assert result.returncode == 2 and "there is no agent at" in result.stderr, result.stderr
    # The agent's own URLs still find it: its endpoint, its REST base, the card itself.
    for path in ("/a2a", "/a2a/rest/", "/.well-known/agent-card.json"):
        code, out, err = call("card", agent_server.url + path)
        assert code == 0 and "Client test agent" in out, (path, err)


def test_a_host_that_serves_the_card_only_at_its_root_is_found_from_the_endpoint(agent_server):
    """As other servers do: the card at the root names the endpoint under a path."""
    card = {"name": "Root card agent", "url": "http://127.0.0.1:1/rpc", "version": "1",
            "protocolVersion": "0.3", "capabilities": {}, "skills": []}
    with LocalHTTP({"/.well-known/agent-card.json": card}) as host:
        card["url"] = host.url + "/rpc"
        assert call("card", host.url + "/rpc")[0] == 0
        code, _, err = call("card", host.url + "/other")
    assert code == 2 and f"is for an agent at {host.url}/rpc" in err
