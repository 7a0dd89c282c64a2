"""Shared fixtures: an app factory, the test client, stores, and real servers."""
from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional

import pytest
from flask import Flask

from a2a_flask import A2A, AgentCapabilities, AgentCard, AgentSkill
from a2a_flask.web.agent_state import AgentState

from tests.support.astguard import install as install_ast_guard
from tests.support.helpers import SPEC, Server
from tests.support.spawnguard import ProcessGuard, ProcessStarted

# Before anything parses: see tests/support/astguard.py (an interpreter race that ended whole sessions).
install_ast_guard()

# Python caches compiled modules unless told not to, and some machines tell it not to
# (PYTHONDONTWRITEBYTECODE, as bench/cold_start.py notes).  The suite starts hundreds of
# interpreters (gunicorn and Celery workers, CLI runs, probes), which would each compile
# the package again, and each xdist worker would rewrite every test module's asserts
# again on every run: here they compile once, as a user's Python does.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

#: Files the suite reads besides its own modules: all inside the repository.
REQUIRED_DATA = [SPEC / v / "a2a.schema.json" for v in ("v0.1", "v0.2", "v0.3", "v1.0")]
SEEDS = SPEC.parent / "seeds"


#: Set by ``.ci/run``: a test that needs a service this machine lacks (PostgreSQL,
#: MariaDB, Redis, RabbitMQ, Chromium, a server binary) fails instead of skipping,
#: and so does any other skip: CI proves what the suite says it does.
REQUIRE_SERVICES = os.environ.get("A2A_REQUIRE_SERVICES", "") not in ("", "0")


def require(reason: str) -> NoReturn:
    """What the test needs is missing (``reason`` says what, and how to get it): skip
    the test, or fail it under ``A2A_REQUIRE_SERVICES=1``."""
    if REQUIRE_SERVICES:
        pytest.fail(f"{reason} (A2A_REQUIRE_SERVICES=1: it must be there)", pytrace=False)
    pytest.skip(reason)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Servers shared by the whole session stop with it (tests/support/client_support.py)."""
    support = sys.modules.get("tests.support.client_support")
    if support is not None:  # started only if a test asked for one
        support.stop_shared()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: Any) -> Any:
    """Under ``A2A_REQUIRE_SERVICES=1`` a skip of any kind (a missing package, a
    ``skipif``) fails the test, with its reason: the CI skip count is 0."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_SERVICES and report.skipped and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped, and A2A_REQUIRE_SERVICES=1 allows no skip: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Any:
    """The same for a module skipped whole (``pytest.importorskip`` at its top)."""
    outcome = yield
    report = outcome.get_result()
    if REQUIRE_SERVICES and report.skipped:
        report.outcome = "failed"
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.longrepr = f"skipped, and A2A_REQUIRE_SERVICES=1 allows no skip: {reason}"


def pytest_configure(config: pytest.Config) -> None:
    """Register the suite's markers; stop at once, saying what is missing, if the copied
    schemas or seeds are not there (rather than failing hundreds of tests one by one).
    Under xdist, the longest files go first (tests/support/schedule.py)."""
    from tests.support import schedule

    config.pluginmanager.register(schedule, "a2a-schedule")
    config.addinivalue_line(
        "markers", "no_memory_store(reason): the store_url parametrization leaves the memory "
        "store out (it is one process's own), rather than a test per store that skips")
    config.addinivalue_line(
        "markers", "server: starts processes (gunicorn, Celery, flask, a database or a "
        "browser of its own): every test under tests/server, and elsewhere those its module "
        "declares; a test without it that starts a process fails")
    config.addinivalue_line(
        "markers", "slow: talks to the shared databases, or takes seconds by design: every "
        "test of the store_url fixture, and those its module declares "
        "(-m 'not server and not slow' is the quick run)")
    config.addinivalue_line(
        "markers", "declare(server=(...), slow=(...)): in a module's pytestmark, which of its "
        "tests are server or slow: each entry a test's name (all its parameters), a name "
        "with its parameter id, Class.name, or a fixture (every test that uses it)")
    problems = []
    for path in REQUIRED_DATA:
        try:
            json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
    if not list(SEEDS.glob("*.txt")):
        problems.append(f"{SEEDS}: no seed documents (*.txt)")
    if problems:
        raise pytest.UsageError(
            "the test data that ships in tests/ cannot be read (see tests/data/schemas/README.rst;"
            " a git checkout or the sdist has it):\n  " + "\n  ".join(problems))


#: Every test in this folder starts a process: the folder marks them ``server``.
SERVER_TESTS = Path(__file__).resolve().parent / "server"
#: A test that uses this fixture runs on every store backend, the shared databases
#: among them: ``slow``.
SLOW_FIXTURE = "store_url"


def _declared(item: pytest.Item, marker: str) -> bool:
    """Whether the ``declare`` marker of the item's module names it under ``marker``."""
    names = {item.name, getattr(item, "originalname", item.name)}
    if getattr(item, "cls", None) is not None:
        names |= {f"{item.cls.__name__}.{name}" for name in list(names)}
    return any(names & set(entry.kwargs.get(marker, ())) or
               set(item.fixturenames) & set(entry.kwargs.get(marker, ()))
               for entry in item.iter_markers("declare"))


def pytest_collection_modifyitems(items: list) -> None:
    """Mark ``server`` every test in ``tests/server/`` and those a module's ``declare``
    names; ``slow`` every test of the store_url fixture and those ``declare`` names
    (a module all of whose tests are one says ``pytestmark = pytest.mark.server`` or
    ``slow``).  Declared, never guessed from source text: a docstring changes nothing,
    and a test that starts a process without the mark fails (see :func:`_guarded`)."""
    for item in items:
        if item.path.resolve().parent == SERVER_TESTS or _declared(item, "server"):
            item.add_marker(pytest.mark.server)
        if SLOW_FIXTURE in item.fixturenames or _declared(item, "slow"):
            item.add_marker(pytest.mark.slow)


def stale_declarations(items: list, known_fixtures: Any) -> list:
    """The entries of the ``declare`` markers of the modules of ``items`` that name
    neither a test of the module nor a fixture (a test renamed since), as
    ``module: entry``; whatever part of a module was selected."""
    stale = []
    for module in {item.module for item in items if getattr(item, "module", None)}:
        for mark in getattr(module, "pytestmark", []) if isinstance(
                getattr(module, "pytestmark", []), list) else [module.pytestmark]:
            if mark.name != "declare":
                continue
            for entry in (e for values in mark.kwargs.values() for e in values):
                base = entry.split("[", 1)[0]
                owner, _, name = base.rpartition(".")
                found = (getattr(getattr(module, owner, None), name, None) if owner
                         else getattr(module, name, None))
                if found is None and entry not in known_fixtures:
                    stale.append(f"{module.__name__}: {entry}")
    return sorted(stale)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    fixtures = getattr(session._fixturemanager, "_arg2fixturedefs", None)
    stale = stale_declarations(session.items, fixtures) if fixtures is not None else []
    if stale:
        raise pytest.UsageError("pytest.mark.declare names no test or fixture: " + ", ".join(stale))


def _guarded(item: pytest.Item) -> Any:
    """Run one phase of a test not marked ``server`` under a ProcessGuard; fail it if
    it tried to start a process (even if its code caught the refusal)."""
    if item.get_closest_marker("server") is not None:
        return (yield)
    guard = ProcessGuard(item.nodeid)
    with guard:
        result = yield
    if guard.attempts:
        raise ProcessStarted(guard.message())
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    """A test not marked ``server`` starts no process (so the quick run,
    ``-m 'not server and not slow'``, starts none): see tests/support/spawnguard.py."""
    return (yield from _guarded(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    # Not teardown: it also ends the module and session fixtures of the tests before,
    # which may stop a server those (marked) tests started.
    return (yield from _guarded(item))


def make_card(**overrides: Any) -> AgentCard:
    values = dict(
        name="Test agent",
        description="An agent for tests",
        version="1.0.0",
        capabilities=AgentCapabilities(streaming=True),
        skills=[AgentSkill(id="test", name="Test", description="Tests things", tags=["test"])],
    )
    values.update(overrides)
    return AgentCard(**values)


def echo(ctx):
    return ctx.text


#: Every store backend; the SQL ones only where SQL_STORE_MODULES says (suite time).
STORES = ["memory", "shelve", "sqlite", "redis", "postgresql", "mariadb"]
SQL_STORES = ("postgresql", "mariadb")
#: Test modules whose ``store_url`` tests also run on PostgreSQL and MariaDB: the
#: store contract and the keeper.  The engine-level modules (methods, executor,
#: push, dialects...) test the engine, which is the same on every store.
SQL_STORE_MODULES = {"test_keeper", "test_sql_store"}


def pytest_generate_tests(metafunc) -> None:
    chosen = any("store_url" in (m.args[0] if isinstance(m.args[0], (list, tuple))
                                 else m.args[0].replace(" ", "").split(","))
                 for m in metafunc.definition.iter_markers("parametrize"))
    if "store_url" in metafunc.fixturenames and not chosen:  # a test may pick its stores
        module = metafunc.module.__name__.rsplit(".", 1)[-1]
        kinds = STORES if module in SQL_STORE_MODULES else [
            kind for kind in STORES if kind not in SQL_STORES]
        if metafunc.definition.get_closest_marker("no_memory_store"):
            kinds = [kind for kind in kinds if kind != "memory"]
        metafunc.parametrize("store_url", kinds, indirect=True)


@pytest.fixture
def store_url(request, tmp_path) -> str:
    """Each test using it runs once per store backend (Redis: a key prefix of its own;
    PostgreSQL: a schema; MariaDB: a database, dropped afterwards)."""
    if request.param == "memory":
        return "memory://"
    if request.param == "redis":
        redis_up()
        prefix = f"a2atest-{uuid.uuid4().hex[:12]}"
        request.addfinalizer(lambda: drop_redis_prefix(prefix))
        return f"{REDIS_URL}?prefix={prefix}"
    if request.param in SQL_STORES:
        name = f"a2atest_{uuid.uuid4().hex[:12]}"
        url = sql_test_url(request.param, name)  # first: it requires the server
        request.addfinalizer(lambda: drop_sql_database(request.param, name))
        return url
    return f"{request.param}://{tmp_path}/tasks"


REDIS_URL = os.environ.get("A2A_TEST_REDIS", "redis://127.0.0.1:6379/15")
_REDIS_UP: list = []


def redis_up() -> None:
    """Go on if the Redis server at REDIS_URL answers; otherwise :func:`require` it."""
    if not _REDIS_UP:
        try:
            import redis

            client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=5, socket_timeout=5)
            client.ping()
            client.close()
            _REDIS_UP.append("")
        except Exception as exc:  # no package, no server: say which
            _REDIS_UP.append(f"Redis server at {REDIS_URL} unavailable: {exc}")
    if _REDIS_UP[0]:
        require(_REDIS_UP[0])


def drop_redis_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}:*"))
    if keys:
        client.delete(*keys)
    client.close()


#: The servers the SQL store tests use (trust / passwordless on this machine).
POSTGRES_URL = os.environ.get("A2A_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
MARIADB_URL = os.environ.get("A2A_TEST_MARIADB", "mysql://root@127.0.0.1:3306")
_SQL_SERVERS = {"postgresql": POSTGRES_URL, "mariadb": MARIADB_URL}
_SQL_UP: dict = {}


def sql_admin(kind: str):
    """An engine on the server of ``kind`` for creating and dropping; when SQLAlchemy
    or the server is missing, :func:`require` says which."""
    if kind not in _SQL_UP:
        try:
            import sqlalchemy as sa

            url = _SQL_SERVERS[kind]
            url = url.replace("postgresql://", "postgresql+pg8000://", 1).replace(
                "mysql://", "mysql+pymysql://", 1)
            engine = sa.create_engine(url, poolclass=sa.pool.NullPool, connect_args=(
                {"timeout": 5} if kind == "postgresql" else {"connect_timeout": 5}))
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            _SQL_UP[kind] = engine
        except Exception as exc:  # no driver, no server: say which
            _SQL_UP[kind] = f"{kind} server at {_SQL_SERVERS[kind]} unavailable: {exc}"
    found = _SQL_UP[kind]
    if isinstance(found, str):
        require(found)
    return found


def sql_test_url(kind: str, name: str) -> str:
    """A store URL on a fresh schema (PostgreSQL) or database (MariaDB) called ``name``."""
    import sqlalchemy as sa

    engine = sql_admin(kind)
    if kind == "postgresql":
        return f"{POSTGRES_URL}?schema={name}"  # the store creates the schema
    with engine.begin() as conn:
        conn.execute(sa.text(f"CREATE DATABASE IF NOT EXISTS `{name}`"))
    return f"{MARIADB_URL}/{name}"


def drop_sql_database(kind: str, name: str) -> None:
    import sqlalchemy as sa

    engine = sql_admin(kind)
    with engine.begin() as conn:
        if kind == "postgresql":
            conn.execute(sa.text(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'))
        else:
            conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))


@pytest.fixture
def make_app(tmp_path) -> Callable[..., Flask]:
    """Build an app with one agent: ``make_app(executor, card=..., store=..., **config)``.

    Webhooks on ``example.com`` names pass the SSRF guard by name (the machine
    has no DNS for them); tests of the guard itself set ``push_allowed_hosts``.
    """
    created = []

    def factory(executor: Optional[Callable] = None, *, card: Optional[AgentCard] = None,
                store: Any = None, **config: Any) -> Flask:
        config.setdefault("push_allowed_hosts", "example.com,*.example.com")
        app = Flask("test_app")
        app.config.update({"A2A_" + k.upper(): v for k, v in config.items()})
        A2A(app, card=card or make_card(), executor=executor or echo, store=store)
        created.append(app)
        return app

    yield factory
    for app in created:
        for state in app.extensions.get("a2a", {}).values():
            state.close()


@pytest.fixture
def app(make_app, store_url) -> Flask:
    return make_app(store=store_url)


@pytest.fixture
def client(app):
    return app.test_client()


@pytest.fixture
def a2a(app) -> AgentState:
    """The agent's state: ``a2a.service``, ``a2a.store``, ``a2a.settings``."""
    return app.extensions["a2a"]["a2a"]


@pytest.fixture(scope="session")
def conformance_server():
    """A real ``gunicorn -k gevent`` running the conformance agent on a free port."""
    with Server("examples.conformance_agent:app") as server:
        yield server
