"""The order pytest-xdist hands out the test files under ``-n 6 --dist loadfile``
(the README's command): the longest first.

xdist gives each worker one file at a time, by default in the order of their test
counts: the files with a few long tests (real servers, outages, Celery workers)
came last, and the run waited on the one that started last.  A worker that takes
the longest files first and the short ones as it frees up ends with the others
(longest processing time first).  Registered by tests/conftest.py; a serial run
keeps the files' own order.
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, List

import pytest

#: Seconds the slowest files took (the sum of their tests' setup, call and teardown
#: times in a whole run of the README's command on the 2-CPU machine, rounded; a
#: file under 4 s is left out).  Only the order matters: a file's number may be off
#: by half, and a file not listed (new, or renamed since) only loses its place at
#: the front.  To refresh it: ``--durations=0``, summed by file.
FILE_SECONDS: Dict[str, float] = {
    "tests/server/test_deploys.py": 75,
    "tests/stores/test_keeper.py": 57,
    "tests/web/test_celery.py": 57,
    "tests/stores/test_store_bounds_blackholed.py": 46,
    "tests/server/test_memory_redis.py": 43,
    "tests/web/test_celery_kill.py": 40,
    "tests/server/test_server.py": 36,
    "tests/stores/test_sql_store_server.py": 36,
    "tests/server/test_blips_restart.py": 35,
    "tests/server/test_memory.py": 35,
    "tests/web/test_flask_commands.py": 35,
    "tests/stores/test_blips.py": 34,
    "tests/stores/test_store_bounds.py": 34,
    "tests/server/test_deployment_recipe.py": 32,
    "tests/server/test_scale.py": 32,
    "tests/stores/test_store_pools.py": 25,
    "tests/server/test_faults_push.py": 24,
    "tests/server/test_fanout_redis.py": 24,
    "tests/web/test_push.py": 23,
    "tests/server/test_fanout_postgresql.py": 23,
    "tests/web/test_inspector.py": 23,
    "tests/server/test_readme_docs.py": 22,
    "tests/server/test_fanout.py": 22,
    "tests/stores/test_redis_sentinel_store.py": 21,
    "tests/server/test_idempotency_servers.py": 21,
    "tests/server/test_subscriber_memory.py": 21,
    "tests/server/test_pg_failover.py": 20,
    "tests/stores/test_stores_postgresql.py": 20,
    "tests/server/test_generations_server.py": 19,
    "tests/stores/test_redis_cluster_store.py": 17,
    "tests/web/test_inspector_tasks.py": 17,
    "tests/client/test_cli.py": 16,
    "tests/client/test_client.py": 16,
    "tests/web/test_methods.py": 16,
    "tests/web/test_dialects.py": 14,
    "tests/server/test_faults_stores.py": 14,
    "tests/web/test_agent_isolation.py": 14,
    "tests/stores/test_stores_mariadb.py": 14,
    "tests/web/test_observe.py": 13,
    "tests/server/test_faults_clients.py": 10,
    "tests/unit/test_config.py": 9.4,
    "tests/web/test_task_size.py": 9.4,
    "tests/web/test_card_origin.py": 9.1,
    "tests/stores/test_sql_store.py": 9.1,
    "tests/server/test_faults_processes.py": 8.8,
    "tests/server/test_kill9.py": 8.5,
    "tests/stores/test_store_bounds_boot.py": 8.5,
    "tests/stores/test_stores_redis.py": 8.1,
    "tests/stores/test_stores_shelve.py": 7.9,
    "tests/fuzz/test_fuzz_jsonrpc.py": 7.5,
    "tests/web/test_executor.py": 7.4,
    "tests/server/test_server_shelve.py": 7.2,
    "tests/stores/test_redis_store.py": 7.2,
    "tests/client/test_client_interop.py": 7.0,
    "tests/server/test_interop_sdk.py": 6.8,
    "tests/server/test_push_server.py": 6.6,
    "tests/fuzz/test_fuzz_rest.py": 6.2,
    "tests/server/test_readme.py": 6.0,
    "tests/server/test_faults_executors.py": 5.8,
    "tests/stores/test_stores_sqlite.py": 5.7,
    "tests/server/test_support_servers.py": 5.5,
    "tests/web/test_methods_cancel_subscribe.py": 5.5,
    "tests/web/test_dialects_01.py": 5.0,
    "tests/web/test_rest.py": 4.9,
    "tests/unit/test_chunks.py": 4.8,
    "tests/stores/test_stores.py": 4.7,
    "tests/web/test_jsonrpc.py": 4.7,
    "tests/unit/test_frozen.py": 4.5,
    "tests/web/test_push_headers.py": 4.4,
    "tests/unit/test_concurrency.py": 4.4,
    "tests/web/test_celery_serializer.py": 4.2,
}
#: What a test of an unlisted file is taken to last.
PER_TEST = 0.02


def file_of(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def longest_first(items: List[pytest.Item]) -> None:
    """Sort ``items`` by their file's expected time, longest first; each file's tests
    together and in their order (module fixtures start once), files of one time in
    the order they came."""
    counts = Counter(file_of(item) for item in items)
    first: Dict[str, int] = {}
    for index, item in enumerate(items):
        first.setdefault(file_of(item), index)
    expected = {path: FILE_SECONDS.get(path, PER_TEST * count) for path, count in counts.items()}
    items.sort(key=lambda item: (-expected[file_of(item)], first[file_of(item)]))


def pytest_configure(config: pytest.Config) -> None:
    # In xdist's controller: hand out the files in the order the workers collected
    # them (below), not by their test counts.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    # Only in xdist's workers, whose collection the controller schedules from.
    if hasattr(config, "workerinput"):
        longest_first(items)
