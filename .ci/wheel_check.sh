#!/usr/bin/env bash
# The release as a stranger gets it: build the sdist and the wheel, check what each
# holds, install the wheel (not editable) in a clean venv, serve examples/echo_agent.py
# from it with gunicorn and send it one message with the installed a2a-flask command.
# Usage: .ci/wheel_check.sh [PYTHON]   (PYTHON needs the `build` package: the dev extra)
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
PYTHON=${1:-python}
WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT
fail() { echo "wheel check: $*" >&2; exit 1; }

"$PYTHON" -m build --outdir "$WORK/dist" "$REPO" >"$WORK/build.log" 2>&1 \
  || { tail -40 "$WORK/build.log"; fail "python -m build failed"; }
SDIST=$(ls "$WORK"/dist/*.tar.gz)
WHEEL=$(ls "$WORK"/dist/*.whl)
VERSION=$("$PYTHON" -c "import runpy; print(runpy.run_path('a2a_flask/version.py')['__version__'])")
case "$WHEEL" in *"a2a_flask-$VERSION-py3-none-any.whl") ;; *) fail "unexpected wheel name $WHEEL";; esac

# The sdist can rebuild everything and run the suite: tests, schemas, seeds, examples, docs.
SDIST_FILES=$(tar -tzf "$SDIST")
for f in CHANGELOG.rst LICENSE README.rst setup.cfg MANIFEST.in tests/conftest.py tests/support/helpers.py \
         tests/data/schemas/README.rst tests/data/schemas/v0.1/a2a.schema.json tests/data/schemas/v0.2/a2a.schema.json \
         tests/data/schemas/v0.3/a2a.schema.json tests/data/schemas/v1.0/a2a.schema.json tests/data/schemas/v1.0/a2a.proto \
         examples/echo_agent.py docs/conf.py docs/index.rst a2a_flask/py.typed \
         a2a_flask/web/inspector/static/inspector.js; do
  grep -qx "a2a_flask-$VERSION/$f" <<<"$SDIST_FILES" || fail "the sdist lacks $f"
done
[ "$(grep -c "^a2a_flask-$VERSION/tests/data/seeds/.*\.txt$" <<<"$SDIST_FILES")" -ge 1 ] || fail "the sdist has no seeds"

# A clean venv with the wheel alone (and its dependencies from the index).
"$PYTHON" -m venv "$WORK/venv"
VPY="$WORK/venv/bin/python"
"$VPY" -m pip install -q "$WHEEL" 2>"$WORK/pip.log" || { cat "$WORK/pip.log"; fail "the wheel does not install"; }

# Run from a folder where the repository's a2a_flask/ is not importable, but the examples are.
mkdir "$WORK/run"
cp -r "$REPO/examples" "$WORK/run/examples"
cd "$WORK/run"
"$VPY" - "$WORK/venv" <<'EOF' || fail "the installed package is incomplete"
import importlib.metadata, os, sys
from importlib.resources import files

import a2a_flask

venv = os.path.realpath(sys.argv[1])
where = os.path.realpath(a2a_flask.__file__)
assert where.startswith(venv + os.sep), f"a2a_flask imported from {where}, not the venv"
assert importlib.metadata.version("a2a-flask") == a2a_flask.__version__
assert "LICENSE" in (importlib.metadata.metadata("a2a-flask").get_all("License-File") or []), \
    "the wheel carries no LICENSE"
root = files("a2a_flask")
for name in ("py.typed", "web/inspector/static/inspector.js", "web/inspector/static/inspector.css",
             "web/inspector/static/favicon.svg", "web/inspector/templates/a2a_inspector/index.html"):
    assert root.joinpath(name).is_file(), f"the wheel lacks a2a_flask/{name}"
scripts = [e for e in importlib.metadata.entry_points(group="console_scripts") if e.name == "a2a-flask"]
assert scripts and scripts[0].value == "a2a_flask.client.cli:main", scripts
print(f"installed a2a_flask {a2a_flask.__version__} at {os.path.dirname(where)}")
EOF
[ -x "$WORK/venv/bin/a2a-flask" ] || fail "no a2a-flask command in the venv"
"$WORK/venv/bin/a2a-flask" --help >/dev/null || fail "a2a-flask --help failed"

# Serve the example with the wheel's gunicorn and gevent, on a free loopback port.
PORT=$("$VPY" -c "import socket; s = socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
"$WORK/venv/bin/gunicorn" -k gevent -w 1 -b "127.0.0.1:$PORT" examples.echo_agent:app \
  >"$WORK/gunicorn.log" 2>&1 &
SERVER_PID=$!
URL="http://127.0.0.1:$PORT"
for _ in $(seq 1 100); do
  "$VPY" -c "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=1)" \
    "$URL/.well-known/agent-card.json" 2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/gunicorn.log"; fail "gunicorn exited"; }
  sleep 0.1
done

# One message through the installed CLI; the echo agent's task must complete with our text.
MESSAGE="hello from the wheel $$"
ANSWER=$(timeout 60 "$WORK/venv/bin/a2a-flask" send "$URL" "$MESSAGE" --json) \
  || { cat "$WORK/gunicorn.log"; fail "a2a-flask send failed"; }
printf '%s\n' "$ANSWER" >"$WORK/answer.json"
"$VPY" - "$MESSAGE" "$WORK/answer.json" <<'EOF' || fail "unexpected answer: $ANSWER"
import json, sys

task = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
task = task.get("task", task)
assert task["status"]["state"] == "TASK_STATE_COMPLETED", task["status"]
texts = [p.get("text") for a in task.get("artifacts", []) for p in a["parts"]]
assert sys.argv[1] in texts, texts
print(f"the echo agent served from the wheel answered {texts[0]!r}")
EOF
