"""The default of ``A2A_MAX_ANONYMOUS_STREAMS``: a quarter of the worker's connections;
tests/server/test_anonymous_streams.py drives a real worker."""
from __future__ import annotations

from typing import List, Optional

import pytest
from flask import Flask

from a2a_flask import A2A
from a2a_flask.config import Settings
from a2a_flask.web import deploy

from tests.conftest import make_card


@pytest.mark.parametrize("args, env, limit", [
    (None, "", 250),  # no gunicorn: a quarter of gunicorn's default
    (["gunicorn", "-k", "gevent", "app:app"], "", 250),  # gunicorn's default 1000
    (["gunicorn", "--worker-connections", "400", "app:app"], "", 100),
    (["gunicorn", "--worker-connections=2000", "app:app"], "", 500),
    (["gunicorn", "app:app"], "--worker-connections 40", 10),
    (["gunicorn", "--worker-connections", "2", "app:app"], "", 1),  # never none at all
])
def test_the_default_is_a_quarter_of_the_workers_connections(
        monkeypatch: pytest.MonkeyPatch, args: Optional[List[str]], env: str, limit: int) -> None:
    monkeypatch.setattr(deploy, "_gunicorn_args", lambda: args)
    monkeypatch.setenv("GUNICORN_CMD_ARGS", env)
    assert deploy.anonymous_stream_limit(None) == limit


def test_a_setting_wins_and_unset_reads_as_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(deploy, "_gunicorn_args", lambda: None)
    assert deploy.anonymous_stream_limit(0) == 0  # no limit, as documented
    assert deploy.anonymous_stream_limit(1100) == 1100
    assert Settings.from_config({}).max_anonymous_streams is None
    assert Settings.from_config({"A2A_MAX_ANONYMOUS_STREAMS": "none"}).max_anonymous_streams is None
    assert Settings.from_config({"A2A_MAX_ANONYMOUS_STREAMS": "7"}).max_anonymous_streams == 7
    with pytest.raises(ValueError, match="A2A_MAX_ANONYMOUS_STREAMS must be >= 0"):
        Settings.from_config({"A2A_MAX_ANONYMOUS_STREAMS": -1})
    app = Flask("anonymous_default")
    A2A(app, card=make_card(), executor=lambda ctx: "x")
    assert app.extensions["a2a"]["a2a"].service.limits.max_anonymous_streams == 250
