"""Spark's Python daemon with the runner's modules imported once, before it forks workers.

Each Python worker Spark forks would otherwise import the engine (numba, numpy, pyarrow)
itself, seconds per worker; set ``spark.python.daemon.module`` to ``spark_io._daemon``
(``RUNNER_SPARK_CONF``) and every worker starts with them loaded.
"""

from __future__ import annotations

import spark_io._bolt_task  # noqa: F401  (the bolts' modules: engine, numba, numpy)
import spark_io._stream_source  # noqa: F401  (the spouts' readers: pyarrow, pyspark.sql)

if __name__ == "__main__":
    from pyspark.daemon import manager

    manager()
