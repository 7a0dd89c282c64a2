"""Every secret a store URL can carry is masked wherever the URL is shown: one
function, ``a2a_flask.stores.urls.safe_url``, for commands, log
lines and errors; ``flask a2a doctor`` and the store-outage log line on
PostgreSQL, Redis and MySQL URLs show no password."""
from __future__ import annotations

import logging
from typing import Any

import pytest
from flask import Flask

from a2a_flask import A2A
from a2a_flask.stores import base
from a2a_flask.stores.base import StoreError, report_outage
from a2a_flask.stores.urls import safe_text, safe_url

from tests.conftest import make_card
from tests.support.helpers import free_port

SECRET = "hunter2"

CASES = [
    # user info
    ("postgresql://app:hunter2@db:5432/tasks", "postgresql://app:***@db:5432/tasks"),
    ("redis://:hunter2@cache:6379/0", "redis://:***@cache:6379/0"),
    ("rediss://default:hunter2@cache/0?prefix=a2a", "rediss://default:***@cache/0?prefix=a2a"),
    ("mysql+pymysql://root:hunter2@db/tasks", "mysql+pymysql://root:***@db/tasks"),
    ("redis://u:hun@ter2@cache/0", "redis://u:***@cache/0"),  # an unencoded "@"
    ("postgresql://u:hun/ter?2#x@db/t?sslmode=require",  # SQLAlchemy's reading of it
     "postgresql://u:***@db/t?sslmode=require"),
    ("postgresql://u:hunter%402@db/t", "postgresql://u:***@db/t"),  # percent-encoded
    ("postgresql://app@db/tasks", "postgresql://app@db/tasks"),  # a user name is no secret
    ("postgresql://app:@db/tasks", "postgresql://app:@db/tasks"),  # an empty password
    # the query: libpq, redis-py and the MySQL drivers all take a password there
    ("postgresql://app@db/tasks?password=hunter2", "postgresql://app@db/tasks?password=***"),
    ("postgresql://app@db/t?sslmode=verify-full&sslpassword=hunter2&sslkey=/k.pem",
     "postgresql://app@db/t?sslmode=verify-full&sslpassword=***&sslkey=/k.pem"),
    ("redis://cache:6379/0?password=hunter2&prefix=p", "redis://cache:6379/0?password=***&prefix=p"),
    ("mysql+mysqldb://root@db/t?passwd=hunter2&charset=utf8mb4",
     "mysql+mysqldb://root@db/t?passwd=***&charset=utf8mb4"),
    ("mysql://root@db/t?pass=hunter2", "mysql://root@db/t?pass=***"),
    ("postgresql://db/t?PassWord=hunter2", "postgresql://db/t?PassWord=***"),  # any case
    ("postgresql://db/t?pass%77ord=hunter2", "postgresql://db/t?pass%77ord=***"),  # encoded
    ("postgresql://db/t?password=hunter2&password=hunter3",  # repeated
     "postgresql://db/t?password=***&password=***"),
    ("postgresql://db/t?password=hunter2;application_name=a2a",  # ";" separates too
     "postgresql://db/t?password=***;application_name=a2a"),
    ("postgresql://db/t?password=", "postgresql://db/t?password=***"),
    ("redis://cache/0?ssl_password=hunter2&ssl_keyfile=/k.pem",
     "redis://cache/0?ssl_password=***&ssl_keyfile=/k.pem"),
    ("postgresql://db/t?sslpassphrase=hunter2", "postgresql://db/t?sslpassphrase=***"),
    ("redis://cache/0?token=hunter2&api_key=hunter2&client_secret=hunter2",
     "redis://cache/0?token=***&api_key=***&client_secret=***"),
    ("redis://cache/0?user=a@b&password=hunter2", "redis://cache/0?user=a@b&password=***"),
    ("postgresql://db/t#password=hunter2", "postgresql://db/t#password=***"),  # a fragment
    ("postgresql://db/t?x=1#password=hunter2", "postgresql://db/t?x=1#password=***"),
    # both at once, and URLs that hold no secret
    ("postgresql://app:hunter2@db/t?password=hunter2&sslpassword=hunter2",
     "postgresql://app:***@db/t?password=***&sslpassword=***"),
    ("sqlite:////var/lib/a2a/tasks.db", "sqlite:////var/lib/a2a/tasks.db"),
    ("shelve://data/tasks", "shelve://data/tasks"),
    ("memory://", "memory://"),
]


@pytest.mark.parametrize("url, shown", CASES, ids=[c[0] for c in CASES])
def test_safe_url_masks_every_secret(url: str, shown: str) -> None:
    assert safe_url(url) == shown
    assert SECRET not in safe_url(url)


def test_base_keeps_the_one_function() -> None:
    assert base.safe_url is safe_url


def test_safe_text_masks_urls_and_libpq_pairs_inside_a_message() -> None:
    text = ("cannot use 'postgresql://u:hunter2@db/t?sslpassword=hunter2' (bad) nor "
            "redis://cache/0?password=hunter2; dsn: host=db password=hunter2 "
            "password='hun ter2' user=app")
    masked = safe_text(text)
    assert "hunter2" not in masked and "hun ter2" not in masked
    assert "'postgresql://u:***@db/t?sslpassword=***' (bad)" in masked
    assert "host=db password=*** password=*** user=app" in masked


def _urls() -> list:
    port = free_port()  # nothing listens there: each store's probe fails at once
    query = f"?password={SECRET}&sslpassword={SECRET}"
    return [f"postgresql://postgres:{SECRET}@127.0.0.1:{port}/tasks{query}",
            f"redis://:{SECRET}@127.0.0.1:{port}/0?password={SECRET}",
            f"mysql+pymysql://root:{SECRET}@127.0.0.1:{port}/tasks?password={SECRET}"]


@pytest.mark.parametrize("url", _urls(), ids=["postgresql", "redis", "mysql"])
def test_doctor_and_the_outage_log_line_show_no_password(url: str, caplog: Any) -> None:
    if url.startswith("redis"):
        pytest.importorskip("redis")
    else:
        pytest.importorskip("sqlalchemy")
    app = Flask("secret_store")
    app.config.update(A2A_STORE=url, A2A_STORE_TIMEOUT=2.0)
    A2A(app, card=make_card(), executor=lambda ctx: "x")
    caplog.set_level(logging.WARNING, logger="a2a_flask")
    result = app.test_cli_runner().invoke(args=["a2a", "doctor"])
    assert "store" in result.output and "***" in result.output, result.output
    assert "did not answer" in result.output, result.output  # its error line too
    assert SECRET not in result.output, result.output
    # The outage line, with an error that quotes the URL as a driver's might.
    store = app.extensions["a2a"]["a2a"].store
    base._last_report.pop(id(store), None)
    report_outage(store, StoreError(f"cannot reach {url}"))
    outage = [r.getMessage() for r in caplog.records if "task store unavailable" in r.getMessage()]
    assert outage and all(SECRET not in line for line in outage), outage
    assert all(SECRET not in r.getMessage() for r in caplog.records)
    app.extensions["a2a"]["a2a"].close()
