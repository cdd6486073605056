#!/usr/bin/env bash
# Set up .venv (if needed) and run the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test,spark,drpc,metrics]'
# Strict tooling first (configured in pyproject.toml and setup.cfg): lint, format, types.
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
status=0
.venv/bin/python -m pytest "$@" || status=$?
if [ "$status" -eq 5 ]; then
    # Exit 5 = no test collected (e.g. a -m/-k filter matched nothing): say so, do not fail.
    echo "pytest: no tests were collected for this selection" >&2
    status=0
fi
exit "$status"
