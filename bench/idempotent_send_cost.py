#!/usr/bin/env python
"""CPU per blocking SendMessage with an ``Idempotency-Key`` against the same send without
one, per store, in one process (docs/safe-retries.rst; goal: within 10 %).

The echo agent of ``bench/send_cost.py`` (a Flask app under gevent, driven through
the Flask test client: the worker's CPU alone), each send with a fresh message id and,
for the keyed sends, a fresh key (as ``A2AClient`` sends one per logical send).  Each
round measures every store plain then keyed, so drift on a shared machine hits both
alike; the table shows medians, the ratio keyed/plain (the baseline is the plain send
on the same store, in the same process) and the store round trips of each.

    python bench/idempotent_send_cost.py [--stores memory,sqlite,redis,postgresql,mariadb]
        [--sends 300] [--rounds 5]

Pin it for steadier figures: ``taskset -c 1 python bench/idempotent_send_cost.py``.
"""
from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import uuid  # noqa: E402
from typing import Dict, List  # noqa: E402

from send_cost import STORES, Agent, Databases  # noqa: E402  (this folder is on sys.path)


class KeyedAgent(Agent):
    """The send_cost agent, whose sends can carry a fresh ``Idempotency-Key``."""

    keyed = False

    def send(self) -> None:
        headers = {"A2A-Version": "1.0"}
        if self.keyed:
            headers["Idempotency-Key"] = str(uuid.uuid4())
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "role": "ROLE_USER", "messageId": uuid.uuid4().hex, "parts": [{"text": "hello"}]}}}
        answer = self.client.post("/a2a", json=body, headers=headers)
        if answer.status_code != 200 or b"TASK_STATE_COMPLETED" not in answer.data:
            raise RuntimeError(f"{self.store}: {answer.status_code} {answer.data[:300]!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--sends", type=int, default=300, help="sends per store, kind and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=50, help="unmeasured sends per store")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/15")
    parser.add_argument("--postgres-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--mariadb-url", default="mysql://root@127.0.0.1:3306")
    args = parser.parse_args()
    stores = args.stores.split(",")
    with tempfile.TemporaryDirectory(prefix="a2a-idem-cost-") as folder:
        databases = Databases(args, folder)
        agents: Dict[str, Agent] = {}
        try:
            for store in stores:
                agent = agents[store] = KeyedAgent(store, databases.url(store))
                for keyed in (False, True):
                    agent.keyed = keyed
                    for _ in range(args.warmup):
                        agent.send()
            cpu: Dict[str, List[List[float]]] = {store: [[], []] for store in stores}
            trips: Dict[str, List[List[float]]] = {store: [[], []] for store in stores}
            for index in range(args.rounds):
                for store in stores:
                    agent = agents[store]
                    for kind, keyed in enumerate((False, True)):
                        agent.keyed = keyed
                        ms, calls, _ = agent.measure(args.sends)
                        cpu[store][kind].append(ms)
                        trips[store][kind].append(calls)
                print(f"round {index + 1}/{args.rounds}: " + ", ".join(
                    f"{store} {cpu[store][0][-1]:.2f}/{cpu[store][1][-1]:.2f} ms"
                    for store in stores), file=sys.stderr)
            print("CPU per blocking SendMessage in one process (echo agent, gevent), without "
                  f"and with an Idempotency-Key, medians of {args.rounds} rounds of {args.sends}")
            print(f"{'store':12} {'plain ms':>9} {'keyed ms':>9} {'keyed/plain':>12} "
                  f"{'round trips':>12}")
            for store in stores:
                plain, keyed_ms = (statistics.median(cpu[store][k]) for k in (0, 1))
                calls = "/".join(f"{statistics.median(trips[store][k]):.1f}" for k in (0, 1))
                print(f"{store:12} {plain:9.2f} {keyed_ms:9.2f} {keyed_ms / plain:11.2f}x "
                      f"{calls:>12}")
        finally:
            databases.drop(agents)
    return 0


if __name__ == "__main__":
    sys.exit(main())
