#!/usr/bin/env bash
# Each optional extra alone brings what its page uses: for every extra, a fresh venv
# with `pip install -e ".[EXTRA]"` and nothing else, then what the docs show it for
# (the services are the local ones .ci/services.sh started).  An extra that lacks a
# package its example needs fails here, not on a user's machine.
# Usage: .ci/extras_check.sh [PYTHON]
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${1:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

check() {  # check EXTRA PYTHON-CODE: install the extra alone, then run the code with it
  local extra=$1 code=$2 t0=$SECONDS
  "$PYTHON" -m venv "$WORK/$extra"
  "$WORK/$extra/bin/pip" install -q -e ".[$extra]" >"$WORK/$extra.log" 2>&1 \
    || { cat "$WORK/$extra.log"; echo "extras: .[$extra] does not install" >&2; exit 1; }
  "$WORK/$extra/bin/python" -c "$code" \
    || { echo "extras: .[$extra] alone cannot run what its page shows" >&2; exit 1; }
  echo "extras: .[$extra] alone works ($((SECONDS - t0)) s)"
}

# docs/workers-and-hosts.rst: the Redis store.
check redis "
from a2a_flask.stores import open_store
store = open_store('redis://127.0.0.1:6379/15?prefix=a2a-extras-check')
assert store.load('none') is None
store.close()"

# docs/workers-and-hosts.rst: PostgreSQL (psycopg and pg8000) and MariaDB (PyMySQL).
check sql "
from a2a_flask.stores import open_store
for url in ('postgresql://postgres@127.0.0.1:5432/postgres',
            'postgresql+pg8000://postgres@127.0.0.1:5432/postgres',
            'mysql://root@127.0.0.1:3306/mysql'):
    store = open_store(url)
    store.close()
import psycopg, pg8000, pymysql"

# docs/security.rst: a signed card and its key set.
check signing "
from cryptography.hazmat.primitives.asymmetric import ec
from flask import Flask
from a2a_flask import A2A, AgentCard, AgentSkill
app = Flask('signed')
app.config['A2A_CARD_SIGNING_KEY'] = ec.generate_private_key(ec.SECP256R1())
app.config['A2A_PUBLIC_URL'] = 'https://agent.example.com'
A2A(app, card=AgentCard(name='S', description='d', version='1.0.0', skills=[AgentSkill(
    id='s', name='S', description='d', tags=['s'])]), executor=lambda ctx: 'ok')
card = app.test_client().get('/.well-known/agent-card.json').json
assert card['signatures'], card"

# docs/observability.rst: the Prometheus page.
check prometheus "
import os
os.environ['FLASK_A2A_METRICS_PATH'] = '/metrics'
from examples.echo_agent import app
answer = app.test_client().get('/metrics')
assert answer.status_code == 200 and b'a2a_' in answer.data, answer.data[:200]"

# docs/observability.rst: spans need only the API and a provider the app sets.
check otel "
import opentelemetry.trace
from examples.echo_agent import app
assert app.test_client().get('/.well-known/agent-card.json').status_code == 200"

# docs/celery.rst: the Celery example on its default broker (Redis).
check celery "
import os
os.environ.setdefault('CELERY_BROKER_URL', 'redis://127.0.0.1:6379/15')
import examples.celery_agent as example
with example.celery.connection_for_write() as connection:
    connection.ensure_connection(max_retries=1)"
