"""Spark's Python daemon with the runner's modules imported once, before it forks workers.

Each Python worker Spark forks would otherwise import the engine (numba, numpy, pyarrow)
itself, seconds per worker; set ``spark.python.daemon.module`` to ``spark_io.runner._daemon``
(``RUNNER_SPARK_CONF``) and every worker starts with them loaded.
"""

from __future__ import annotations

import importlib

__all__: list[str] = []

# The bolts' modules (engine, numba, numpy) and the spouts' readers (pyarrow, pyspark.sql).
for _module in ("spark_io.runner._bolt_task", "spark_io._stream_source"):
    importlib.import_module(_module)

if __name__ == "__main__":
    from pyspark.daemon import manager

    manager()
