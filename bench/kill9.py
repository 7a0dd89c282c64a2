#!/usr/bin/env python
"""Kill-9 durability of the file stores: 200 trials per store by default.

Each trial forks a child that writes to a fresh store (tasks of ten events,
webhooks, cursor moves, leases; the shelve child compacts often), SIGKILLs it
at a random moment, reopens the store, lists every task and reads every log
(see tests/support/killkit.py).  Prints, per store, how many stores could not be read
and how many acknowledged writes were lost; exits 1 if any were.

    python bench/kill9.py [--trials 200] [--stores shelve,sqlite] [--seed N]
"""
from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support import killkit  # noqa: E402  (after the path is set)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--stores", default=",".join(killkit.KINDS))
    parser.add_argument("--max-delay", type=float, default=0.3,
                        help="longest time the child writes before the kill (s)")
    parser.add_argument("--seed", type=int, default=None)
    options = parser.parse_args()
    seed = options.seed if options.seed is not None else time.time_ns()
    print(f"seed {seed}, {options.trials} trials per store, kill within "
          f"{options.max_delay:g} s of the first write")
    print(f"{'store':8} {'trials':>6} {'unreadable':>10} {'lost acks':>9} {'acked writes':>12} "
          f"{'seconds':>8}")
    failed = False
    for kind in options.stores.split(","):
        rng = random.Random(f"{seed}-{kind}")
        unreadable = lost = acked = 0
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="a2a-kill9-") as directory:
            for number in range(options.trials):
                outcome = killkit.trial(kind, f"{directory}/{number}/tasks", rng,
                                        options.max_delay)
                acked += outcome.acknowledged
                lost += len(outcome.lost)
                if outcome.unreadable:
                    unreadable += 1
                    print(f"  {kind} trial {number}: unreadable: {outcome.unreadable}")
                for what in outcome.lost[:3]:
                    print(f"  {kind} trial {number}: lost {what}")
        failed = failed or bool(unreadable or lost)
        print(f"{kind:8} {options.trials:>6} {unreadable:>10} {lost:>9} {acked:>12} "
              f"{time.monotonic() - started:>8.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
