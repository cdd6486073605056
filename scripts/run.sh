#!/usr/bin/env bash
# Set up .venv (only when setup.cfg / pyproject.toml changed since the last install) and run
# the main job: the reliable word count, read from a bundled parquet file and written to
# parquet through Spark (needs Java 17+).
set -euo pipefail
cd "$(dirname "$0")/.."
extras="spark"
stamp=".venv/.squall-install-$extras"
want="$(cat setup.cfg pyproject.toml | sha256sum | cut -d' ' -f1) $(python3 --version 2>&1)"
if [ ! -x .venv/bin/python ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
    python3 -m venv .venv
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[$extras]"
    echo "$want" > "$stamp"
fi
exec .venv/bin/python examples/spark_wordcount.py "$@"
