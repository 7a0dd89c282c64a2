"""Memory stays flat on the Redis store: the cases of ``test_memory.py`` (which says
what is measured and why), in a file of their own so that parallel runs spread them.
"""
from __future__ import annotations

import pytest

from tests.server.test_memory import assert_flat
from tests.support import memory_probe

PATHS = list(memory_probe.PATHS)


@pytest.mark.parametrize("path", PATHS, ids=[f"redis-{p}" for p in PATHS])
def test_more_tasks_do_not_grow_the_heap(path, tmp_path):
    assert_flat("redis", path, tmp_path)
