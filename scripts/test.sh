#!/usr/bin/env bash
# Set up .venv (only when setup.cfg / pyproject.toml changed since the last install), install
# headless Chromium for the web UI's browser tests and redis-server for the Redis tests if
# they are missing, and run the whole suite (in two worker processes).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="test,spark,drpc,metrics,ui,redis,kafka"
stamp=".venv/.squall-install-test"
want="$(cat setup.cfg pyproject.toml | sha256sum | cut -d' ' -f1) $(python3 --version 2>&1) $extras"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    python3 -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[$extras]"
    echo "$want" > "$stamp"
fi
apt_updated=""
apt_install() {  # apt-get update once, then install the named packages
    if [ -z "$apt_updated" ]; then apt-get update -qq; apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}
# The browser tests (-m browser) drive Debian's chromium; they fail without it when CI=true.
if [ ! -x /usr/bin/chromium ]; then
    if [ "$(id -u)" -eq 0 ]; then
        apt_install chromium
    else
        echo "scripts/test.sh: /usr/bin/chromium is missing and this is not root: run" \
            "'apt-get install -y chromium' as root for the browser tests" >&2
    fi
fi
# The Redis tests (tests/engine/redis) start Debian's redis-server on a loopback port; they fail
# without it when CI=true.
if ! command -v redis-server >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        apt_install redis-server
    else
        echo "scripts/test.sh: redis-server is missing and this is not root: run" \
            "'apt-get install -y redis-server' as root for the Redis tests" >&2
    fi
fi
# Strict tooling first (configured in pyproject.toml and setup.cfg): lint (with a docstring on
# every public name), format, types (mypy --strict), and the docstrings of the public names
# defined in private modules, which ruff counts as private (tests/test_docstrings.py).
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest -q -p no:cacheprovider tests/test_docstrings.py
status=0
# Two worker processes (pytest-xdist), a test file per worker at a time: the suite spends much
# of its time starting Spark drivers and JVMs, which overlap well on two cores (9 min instead
# of 15 on two cores). SQUALL_TEST_WORKERS=0 runs it in this process; arguments after
# the script's name go to pytest as they are (e.g. a file, -k, -x, or -n 0).
.venv/bin/python -m pytest -n "${SQUALL_TEST_WORKERS:-2}" --dist loadfile "$@" || status=$?
if [ "$status" -eq 5 ]; then
    # Exit 5 = no test collected (e.g. a -m/-k filter matched nothing): say so, do not fail.
    echo "pytest: no tests were collected for this selection" >&2
    status=0
fi
exit "$status"
