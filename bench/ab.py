"""Paired A/B of SendMessage between two configurations, for a noisy machine.

``bench.py`` compares a2a_flask with a bare route in one run; on a machine
whose load swings, two such runs a minute apart differ more than what is
being measured.  This script keeps both servers up at once, pinned to the
same CPU, and alternates short bursts of blocking SendMessage calls between
them (c=1, one keep-alive connection each), so that both see the same load;
it reports the median of the per-pair ratios of requests/s and of server CPU
per request.

Each side is ``NAME=SOURCE[,VAR=VALUE...]``: SOURCE is a directory holding an
``a2a_flask`` package and ``bench/bench_app.py`` (a checkout; ``.`` for this
one), the VARs go into that server's environment.  For example, main's code
against this branch with nothing configured, then with OpenTelemetry's no-op
provider and Prometheus metrics on::

    git archive main | (mkdir -p /tmp/main && tar -x -C /tmp/main)
    python bench/ab.py base=/tmp/main off=.
    python bench/ab.py off=. on=.,BENCH_OTEL=noop,FLASK_A2A_METRICS_PATH=/metrics
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

import requests

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench import children_of, cpu_seconds, free_port  # noqa: E402

BODY = ('{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":'
        '{"role":"ROLE_USER","messageId":"ab-%d","parts":[{"text":"hello"}]}}}')


class Side:
    """One gunicorn worker serving one source tree with one environment."""

    def __init__(self, spec: str, cpu: int) -> None:
        self.name, _, rest = spec.partition("=")
        source, *pairs = rest.split(",")
        self.root = Path(source).resolve()
        env = {**os.environ, "PYTHONPATH": str(self.root), "PYTHONUNBUFFERED": "1",
               **dict(pair.split("=", 1) for pair in pairs)}
        self.port = free_port()
        cmd = ["taskset", "-c", str(cpu), sys.executable, "-m", "gunicorn", "-k", "gevent",
               "-w", "1", "-b", f"127.0.0.1:{self.port}", "--log-level", "warning",
               "--pythonpath", str(self.root / "bench"), "bench_app:app"]
        self.proc = subprocess.Popen(cmd, cwd=self.root, env=env, start_new_session=True)
        self.session = requests.Session()
        self.url = f"http://127.0.0.1:{self.port}/a2a"
        deadline = time.monotonic() + 60
        while True:
            try:
                self.session.get(f"http://127.0.0.1:{self.port}/.well-known/agent-card.json",
                                 timeout=2)
                break
            except requests.RequestException:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} did not start")
                time.sleep(0.2)
        self.worker = children_of(self.proc.pid)[0]
        self.sent = 0

    def burst(self, count: int) -> Tuple[float, float]:
        """``count`` calls: requests/s and server CPU microseconds per request."""
        cpu = cpu_seconds(self.worker)
        start = time.perf_counter()
        for _ in range(count):
            self.sent += 1
            response = self.session.post(self.url, data=BODY % self.sent, timeout=30, headers={
                "Content-Type": "application/json", "A2A-Version": "1.0"})
            assert response.status_code == 200 and b'"result"' in response.content
        elapsed = time.perf_counter() - start
        return count / elapsed, (cpu_seconds(self.worker) - cpu) / count * 1e6

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("sides", nargs=2, metavar="NAME=SOURCE[,VAR=VALUE...]")
    parser.add_argument("--pairs", type=int, default=40, help="alternations")
    parser.add_argument("--burst", type=int, default=200, help="calls per burst")
    parser.add_argument("--server-cpu", type=int, default=0)
    args = parser.parse_args()
    sides = [Side(spec, args.server_cpu) for spec in args.sides]
    try:
        for side in sides:
            side.burst(args.burst)  # warm up
        results: Dict[str, List[Tuple[float, float]]] = {s.name: [] for s in sides}
        for i in range(args.pairs):
            order = sides if i % 2 == 0 else sides[::-1]
            for side in order:
                results[side.name].append(side.burst(args.burst))
    finally:
        for side in sides:
            side.stop()
    a, b = (results[s.name] for s in sides)
    rate_ratio = statistics.median(y[0] / x[0] for x, y in zip(a, b))
    cpu_ratio = statistics.median(y[1] / x[1] for x, y in zip(a, b) if x[1] > 0)
    for side in sides:
        runs = results[side.name]
        print(f"{side.name:>8}: {statistics.median(r for r, _ in runs):7.0f} req/s, "
              f"{statistics.median(c for _, c in runs):6.0f} us server CPU per call (medians "
              f"of {len(runs)} bursts of {args.burst})")
    names = f"{sides[1].name}/{sides[0].name}"
    print(f"{names}: requests/s x{rate_ratio:.3f}, server CPU per call x{cpu_ratio:.3f} "
          "(medians of the pairwise ratios)")


if __name__ == "__main__":
    main()
