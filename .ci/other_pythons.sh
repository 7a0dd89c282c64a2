#!/usr/bin/env bash
# The oldest and the newest Python the package supports (setup.cfg's classifiers):
# each in a fresh venv with the package and the few test tools the chosen tests
# need, a quick part of the suite that reaches what differs between Python versions
# (timestamps, the IP address rules, the frozen tasks' garbage-collector footprint,
# the settings, the wire formats, the app through Flask's test client, the flask
# commands).  The rest of the suite runs on the CI's own Python.
#
# Each interpreter is python3.X on PATH, else pyenv's (PYENV_ROOT, /root/.pyenv by
# default).  One that is missing fails the run under A2A_REQUIRE_SERVICES=1
# (.ci/run sets it), as .ci/services.sh does for services; otherwise it is skipped,
# saying so.
#
#   bash .ci/other_pythons.sh              # 3.9 and 3.13
#   OTHER_PYTHONS="3.10" bash .ci/other_pythons.sh
set -euo pipefail
cd "$(dirname "$0")/.."

VERSIONS=${OTHER_PYTHONS:-"3.9 3.13"}
PYENV_ROOT=${PYENV_ROOT:-/root/.pyenv}
case ${A2A_REQUIRE_SERVICES:-} in ""|0) REQUIRED=0 ;; *) REQUIRED=1 ;; esac

# What the tests below import beyond the package (the test extra holds more: a2a-sdk
# 1.x, for one, needs Python 3.10).
TOOLS=("pytest>=7" "pytest-timeout>=2.1" "hypothesis>=6.80" "jsonschema>=4.18"
       "referencing>=0.30" "cryptography>=41" "prometheus-client>=0.17")
# The collector count of test_frozen first: threads other tests leave behind would
# move it while it counts.
TESTS=(
  "tests/unit/test_frozen.py::test_a_frozen_task_leaves_the_collector_one_object"
  tests/unit/test_codec.py tests/unit/test_push_guard.py tests/unit/test_push_pin.py
  tests/unit/test_states.py tests/unit/test_operations.py tests/unit/test_lifecycles.py
  tests/unit/test_error_tree.py tests/unit/test_card_signing.py tests/unit/test_push_signing.py
  tests/unit/test_config.py tests/unit/test_astguard.py
  tests/web/test_wire_golden.py tests/web/test_extension.py tests/web/test_health.py
  tests/web/test_caller_strings.py tests/web/test_card_origin.py tests/web/test_testing.py
  tests/web/test_commands_paging.py
)

find_python() {  # find_python 3.X: the interpreter's path, or nothing
  local version=$1 found
  # (A pyenv shim on PATH answers to every name, and fails for a version not selected.)
  for found in "$(command -v "python$version" 2>/dev/null)" \
               $(ls -d "$PYENV_ROOT/versions/$version".*/bin/python 2>/dev/null | sort -V -r); do
    if [ -n "$found" ] && [ "$("$found" -c 'import sys; print("%d.%d" % sys.version_info[:2])' \
                                2>/dev/null)" = "$version" ]; then
      echo "$found"
      return
    fi
  done
}

one_python() {  # one_python 3.X PATH: a fresh venv, the package, the tests
  local version=$1 python=$2 venv=$SCRATCH/venv-$1 t0=$SECONDS
  "$python" -m venv "$venv"
  # A venv's own setuptools can be old (3.9's is 58: reading the version from
  # a2a_flask/version.py then imports the package before its dependencies are there).
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "setuptools>=64"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -e . "${TOOLS[@]}"
  echo "other pythons: $("$venv/bin/python" --version) installed in $((SECONDS - t0)) s"
  t0=$SECONDS
  "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "not server and not slow" "${TESTS[@]}"
  echo "other pythons: $("$venv/bin/python" --version) tests passed in $((SECONDS - t0)) s"
}

SCRATCH=$(mktemp -d)
trap 'rm -rf "$SCRATCH"' EXIT
missing=() jobs=() failed=()
for version in $VERSIONS; do
  python=$(find_python "$version")
  if [ -z "$python" ]; then
    echo "other pythons: no Python $version (python$version on PATH, or $PYENV_ROOT/versions/$version.*)"
    missing+=("$version")
    continue
  fi
  # Side by side (the installs wait on the network more than on the CPU); each one's
  # output is shown whole once it ends.
  one_python "$version" "$python" >"$SCRATCH/$version.log" 2>&1 &
  jobs+=("$version:$!")
done
for job in "${jobs[@]}"; do
  version=${job%%:*}
  status=0
  wait "${job#*:}" || status=$?
  echo "==== Python $version"
  grep -v "^WARNING: Location .* is ignored" "$SCRATCH/$version.log" || true
  ((status == 0)) || failed+=("$version")
done

if ((${#failed[@]})); then
  echo "other pythons: failed on Python ${failed[*]}" >&2
  exit 1
fi
if ((${#missing[@]})); then
  if ((REQUIRED)); then
    echo "other pythons: not available: Python ${missing[*]}; A2A_REQUIRE_SERVICES=1: failing" >&2
    exit 1
  fi
  echo "other pythons: not available: Python ${missing[*]}; skipped"
fi
