"""SQLite and MariaDB on one host: the fan-out test
(tests/support/fanout_case.py says what it shows)."""
from __future__ import annotations

import pytest

from tests.support.fanout_case import (  # noqa: F401
    crowd_fixture,
    test_a_thousand_watchers_see_every_chunk_and_cost_the_store_what_one_does,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]

crowd = crowd_fixture("sqlite", "mariadb")
