"""The fuzz suites' worlds: an app with seeded tasks, closed after each test."""
from __future__ import annotations

import pytest

from tests.support.fuzz_rpc import RpcWorld
from tests.support.fuzzkit import BARE, FULL, STRICT



@pytest.fixture
def world():
    w = RpcWorld(FULL)
    yield w
    w.close()


@pytest.fixture(params=[FULL, BARE], ids=lambda f: f.name)
def any_world(request):
    w = RpcWorld(request.param)
    yield w
    w.close()


@pytest.fixture
def strict_world():
    w = RpcWorld(STRICT)
    yield w
    w.close()
