"""The agent the raw-socket fuzz test runs under gunicorn (tests/fuzz/test_fuzz_rest.py).

Bearer auth (``alice-token``), a small body limit (``FUZZ_MAX_BODY``) and an echo
executor; ``gunicorn -k gevent tests.support.fuzz_server_app:app``.
"""
import os

from flask import Flask

from a2a_flask import A2A, AgentCapabilities

from tests.conftest import make_card
from tests.support.helpers import bearer_auth

app = Flask(__name__)
app.config.update(A2A_MAX_CONTENT_LENGTH=int(os.environ.get("FUZZ_MAX_BODY", 65536)))
A2A(app, card=make_card(capabilities=AgentCapabilities(streaming=True)),
    executor=lambda ctx: "echo: " + ctx.text, auth=bearer_auth())
