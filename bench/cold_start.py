#!/usr/bin/env python
"""Cold start: ``import a2a_flask`` plus ``init_app`` in a fresh process.

Each run is a new interpreter (``python -I``-like isolation is not used, so
the installed package is what gets imported) timing, from its first line:
the import of ``a2a_flask``, then building an agent and ``init_app`` on a new
Flask app.  The ceiling, measured in the same run with alternating samples,
is a fresh process that imports Flask and builds an app.  Where the official
a2a-sdk server is installed (the test extra), the peer is measured alike: its
imports, then one agent's Starlette app with its card and JSON-RPC routes.
Prints medians over ``--runs`` processes; the target is <= 150 ms for
the total.
Bytecode caching is on in the children (one unmeasured process of each kind
writes the ``.pyc`` files first), as in an installed package.
With ``--importtime`` it also lists the slowest modules
(``python -X importtime``, cumulative microseconds) of one more process.

    python bench/cold_start.py [--runs 11] [--importtime]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench import peer_installed  # noqa: E402  (the peer phase's test of the same install)

#: Run in a fresh interpreter; prints the phase times in milliseconds as JSON.
AGENT = """
import time
started = time.perf_counter()
import a2a_flask
imported = time.perf_counter()
from flask import Flask
app = Flask("cold")
card = a2a_flask.AgentCard(name="Cold", description="cold start", version="1.0.0",
                           skills=[a2a_flask.AgentSkill(id="s", name="s", description="s", tags=["s"])])
agent = a2a_flask.A2A(card=card)

@agent.executor
def run(context):
    return "hi"

agent.init_app(app)
done = time.perf_counter()
import json
print(json.dumps({"import": (imported - started) * 1e3, "init_app": (done - imported) * 1e3,
                  "total": (done - started) * 1e3}))
"""

CEILING = """
import time
started = time.perf_counter()
from flask import Flask
app = Flask("cold")

@app.post("/")
def index():
    return "hi"

done = time.perf_counter()
import json
print(json.dumps({"total": (done - started) * 1e3}))
"""


#: The official a2a-sdk's equivalent of AGENT (its server's imports, then an app).
PEER = """
import time
started = time.perf_counter()
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from starlette.applications import Starlette
imported = time.perf_counter()

class Run(AgentExecutor):
    async def execute(self, context, event_queue):
        pass

    async def cancel(self, context, event_queue):
        pass

card = AgentCard(name="Cold", description="cold start", version="1.0.0",
                 supported_interfaces=[AgentInterface(url="http://127.0.0.1/a2a",
                                                      protocol_binding="JSONRPC",
                                                      protocol_version="1.0")],
                 capabilities=AgentCapabilities(streaming=True),
                 default_input_modes=["text/plain"], default_output_modes=["text/plain"],
                 skills=[AgentSkill(id="s", name="s", description="s", tags=["s"])])
handler = DefaultRequestHandler(agent_executor=Run(), task_store=InMemoryTaskStore(),
                                agent_card=card)
app = Starlette(routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, "/a2a")])
done = time.perf_counter()
import json
print(json.dumps({"import": (imported - started) * 1e3, "init_app": (done - imported) * 1e3,
                  "total": (done - started) * 1e3}))
"""


def child_env() -> Dict[str, str]:
    """This environment, but with bytecode caching on: a package installed by pip is
    compiled at install time, so a user's fresh process loads ``.pyc`` files.  With
    ``PYTHONDONTWRITEBYTECODE`` set (as on some CI machines) an editable checkout would
    be compiled from source in every process: 40 ms more here, not a cold start users see."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def sample(code: str) -> Dict[str, float]:
    out = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                         check=True, timeout=60, env=child_env()).stdout
    times: Dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return times


def slowest_imports(count: int) -> List[Tuple[int, str]]:
    """(cumulative us, module) of the slowest imports of ``import a2a_flask``."""
    err = subprocess.run([sys.executable, "-X", "importtime", "-c", "import a2a_flask"],
                         stderr=subprocess.PIPE, text=True, check=True, timeout=60,
                         env=child_env()).stderr
    rows = []
    for line in err.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = (part.strip() for part in line[len("import time:"):].split("|"))
        rows.append((int(cumulative), name))
    return sorted(rows, reverse=True)[:count]


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=11)
    p.add_argument("--importtime", action="store_true")
    a = p.parse_args(argv)
    agent: List[Dict[str, float]] = []
    ceiling: List[Dict[str, float]] = []
    peer: List[Dict[str, float]] = []
    with_peer = peer_installed()
    sample(AGENT)  # unmeasured: writes the bytecode caches a pip install would have made
    sample(CEILING)
    if with_peer:
        sample(PEER)
    for _ in range(a.runs):  # alternate, so drift hits all alike
        agent.append(sample(AGENT))
        ceiling.append(sample(CEILING))
        if with_peer:
            peer.append(sample(PEER))
    med = {key: statistics.median(s[key] for s in agent) for key in agent[0]}
    flask_total = statistics.median(s["total"] for s in ceiling)
    print(f"cold start, medians of {a.runs} fresh processes (ms):")
    print(f"  import a2a_flask        {med['import']:7.1f}")
    print(f"  agent + init_app        {med['init_app']:7.1f}")
    print(f"  total                   {med['total']:7.1f}   target <= 150 ms: "
          f"{'PASS' if med['total'] <= 150 else 'MISS'}")
    print(f"  bare Flask app (ceiling){flask_total:7.1f}   ratio {med['total'] / flask_total:.2f}x")
    if peer:
        sdk = {key: statistics.median(s[key] for s in peer) for key in peer[0]}
        print(f"  official a2a-sdk server {sdk['total']:7.1f}   (imports {sdk['import']:.1f}, "
              f"app {sdk['init_app']:.1f}); a2a_flask takes {med['total'] / sdk['total']:.0%} of it")
    else:
        print("  (a2a-sdk[http-server] is not installed: the official SDK is not measured)")
    if a.importtime:
        print("slowest imports (cumulative ms):")
        for micros, name in slowest_imports(15):
            print(f"  {micros / 1e3:7.1f}  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
