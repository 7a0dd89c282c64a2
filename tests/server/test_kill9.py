"""A SIGKILL at any moment leaves the file stores readable, with every acknowledged write.

gunicorn SIGKILLs a worker that misses its timeout, so this is every user's
risk.  Each trial kills a writing child at a random moment (see
tests/support/killkit.py); bench/kill9.py runs the same trials 200 at a time.
"""
from __future__ import annotations

import random
import time

import pytest

from tests.support import killkit

#: Trials per store in the suite (bounded: about 6 s per store here).
TRIALS = 24


@pytest.mark.parametrize("kind", killkit.KINDS)
def test_a_store_killed_mid_write_keeps_every_acknowledged_write(tmp_path, kind):
    seed = time.time_ns()
    rng = random.Random(seed)
    acknowledged = 0
    for number in range(TRIALS):
        outcome = killkit.trial(kind, str(tmp_path / f"trial-{number}" / "tasks"), rng,
                                max_delay=0.2)
        where = f"trial {number} (seed {seed})"
        assert not outcome.unreadable, f"{where}: store unreadable: {outcome.unreadable}"
        assert not outcome.lost, f"{where}: acknowledged writes lost: {outcome.lost[:5]}"
        acknowledged += outcome.acknowledged
    assert acknowledged >= TRIALS  # every child got at least its first write through
