#!/usr/bin/env bash
# Set up .venv (if needed) and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e .
exec .venv/bin/python examples/wordcount.py "$@"
