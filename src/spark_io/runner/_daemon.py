"""Spark's Python daemon with the runner's modules imported once, before it forks workers.

Each Python worker Spark forks would otherwise import them itself, seconds per worker on a
busy machine (and several workers start at once, one per task): set
``spark.python.daemon.module`` to ``spark_io.runner._daemon`` (``RUNNER_SPARK_CONF``) and
every worker starts with them loaded. The list is what a worker running a bolt or a spout
imports after the fork (seen with an import audit hook): the engine (numba, numpy), the
spouts' readers, pyarrow's compute, parquet and dataset modules, and pandas with the
serializers of Spark's Arrow and ``transformWithStateInPandas`` workers.
"""

from __future__ import annotations

import importlib

__all__: list[str] = []

#: Imported by the daemon, so forked workers find them in ``sys.modules``.
PRELOADED = (
    "spark_io.runner._bolt_task",
    "spark_io.runner._stateful",
    "spark_io._stream_source",
    "pyarrow.compute",
    "pyarrow.dataset",
    "pyarrow.ipc",
    "pyarrow.parquet",
    "pandas",
    "pyspark.worker",
    "pyspark.sql.pandas.serializers",
)
for _module in PRELOADED:
    importlib.import_module(_module)

if __name__ == "__main__":
    from pyspark.daemon import manager

    manager()
