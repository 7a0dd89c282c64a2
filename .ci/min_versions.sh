#!/usr/bin/env bash
# The lowest versions setup.cfg allows: install them in a fresh venv and run the push
# guard, store and real-server tests against them.
#
# The floors are read from setup.cfg (install_requires and the redis extra) for
# flask, werkzeug, requests, urllib3, gevent, gunicorn and redis; each is pinned to
# the lowest release the registry has at or above its floor.  Everything else
# (their own dependencies, the test tools) resolves as pip chooses.
#
#   bash .ci/min_versions.sh              # a throw-away venv
#   MIN_VERSIONS_VENV=/tmp/minv bash .ci/min_versions.sh   # keep (and reuse) the venv
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
if [ -n "${MIN_VERSIONS_VENV:-}" ]; then
  VENV=$MIN_VERSIONS_VENV
else
  SCRATCH=$(mktemp -d)
  trap 'rm -rf "$SCRATCH"' EXIT
  VENV=$SCRATCH/venv
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
PY=$VENV/bin/python
"$PY" -m pip install -q packaging

CONSTRAINTS=$VENV/min-constraints.txt
"$PY" - >"$CONSTRAINTS" <<'EOF'
import configparser
import re
import subprocess
import sys

from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

config = configparser.ConfigParser()
config.read("setup.cfg")
lines = (config["options"]["install_requires"] + "\n"
         + config["options.extras_require"]["redis"]).splitlines()
requirements = {}
for line in lines:
    if line.strip():
        requirement = Requirement(line.strip())
        requirements[requirement.name.lower()] = requirement

for name in ("flask", "werkzeug", "requests", "urllib3", "gevent", "gunicorn", "redis"):
    if name not in requirements:
        sys.exit(f"setup.cfg has no floor for {name}")
    listing = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name],
                             capture_output=True, text=True, check=True).stdout
    found = re.search(r"Available versions: (.*)", listing)
    if found is None:
        sys.exit(f"pip index versions {name} listed no versions:\n{listing}")
    versions = []
    for text in found.group(1).split(", "):
        try:
            versions.append(Version(text))
        except InvalidVersion:
            pass
    allowed = [v for v in versions
               if not v.is_prerelease and requirements[name].specifier.contains(v)]
    if not allowed:
        sys.exit(f"no release of {name} matches {requirements[name]}")
    print(f"{name}=={min(allowed)}")
EOF
echo "lowest allowed versions:"
sed 's/^/  /' "$CONSTRAINTS"

# The sql extra too: the store tests run the SQL stores beside the others (its own
# dependencies resolve freely; only the seven packages above are pinned low).
"$PY" -m pip install -q -c "$CONSTRAINTS" -e ".[redis,sql]" \
  "pytest>=7" "pytest-timeout>=2.1" "jsonschema>=4.18" "referencing>=0.30" \
  "cryptography>=41" "hypothesis>=6.80"
# What was really installed (pip would have failed on a conflict with the pins).
"$PY" -m pip list 2>/dev/null | grep -iE '^(flask|werkzeug|requests|urllib3|gevent|gunicorn|redis) '

"$PY" -m pytest -q -rs -p no:cacheprovider \
  tests/unit/test_push_guard.py tests/unit/test_push_pin.py tests/web/test_push_headers.py \
  tests/stores/test_stores*.py tests/stores/test_shelve_log.py tests/stores/test_keeper.py \
  tests/server/test_kill9.py tests/server/test_server.py tests/server/test_server_table.py \
  tests/server/test_server_shelve.py tests/server/test_push_server.py \
  tests/web/test_card_origin.py
