#!/usr/bin/env bash
# Set up .venv (if needed) and run the main job: the reliable word count, read from a
# bundled parquet file and written to parquet through Spark (needs Java 17+).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[spark]'
exec .venv/bin/python examples/spark_wordcount.py "$@"
