"""Spark's Python daemon with the runner's modules imported once, before it forks workers.

Each Python worker Spark forks would otherwise import them itself, seconds per worker on a
busy machine (and several workers start at once, one per task): set
``spark.python.daemon.module`` to ``spark_io.runner._daemon`` (``RUNNER_SPARK_CONF``) and
every worker starts with them loaded. The list is what a worker running a bolt or a spout
imports after the fork (seen with an import audit hook): the engine (numba, numpy), the
spouts' readers, pyarrow's compute, parquet and dataset modules, and pandas with the
serializers of Spark's Arrow and ``transformWithStateInPandas`` workers.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on every worker's path. Python
cannot cache the bytecode of a module imported from a zip, so each process that imports
pyspark from there compiles it from source: a profile of the workers of a runner query
spent 39 % of their CPU time in ``zipimport``'s compiler. When pyspark is installed as a
package (``pip install pyspark``: its ``SPARK_HOME`` is the package folder, and the zip
holds the same files), the daemon moves the zips behind the installed package, which has
its bytecode cached; forked workers inherit that path. A separate Spark distribution
(``SPARK_HOME`` elsewhere) keeps its zip first.

Spark also puts its core jar on the workers' path (a leftover of the days its jar carried
pyspark): it holds no Python module, but each task a worker runs calls
``importlib.invalidate_caches()``, which has every zip on the path read its directory
again, 36 ms for that jar's 6,000 entries. The daemon takes Spark's jars off the path.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

__all__: list[str] = []


def prefer_installed_pyspark(path: list[str]) -> list[str]:
    """``path`` with the zips of a pip-installed pyspark (``<package>/python/lib/*.zip``)
    moved to its end, so that pyspark is imported from the package, with its bytecode."""
    zips = []
    for entry in path:
        where = Path(entry)
        if where.suffix != ".zip" or where.parent.name != "lib" or len(where.parents) < 3:
            continue
        home = where.parents[2]  # SPARK_HOME
        if home.name == "pyspark" and (home / "__init__.py").is_file():
            zips.append(entry)
    return [p for p in path if p not in zips] + zips


def without_spark_jars(path: list[str]) -> list[str]:
    """``path`` without the jars of a Spark home (``<home>/jars/*.jar``), which hold no
    Python module."""
    return [p for p in path if not (p.endswith(".jar") and Path(p).parent.name == "jars")]


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
sys.path[:] = without_spark_jars(prefer_installed_pyspark(sys.path))
for _module in PRELOADED:
    importlib.import_module(_module)

if __name__ == "__main__":
    from pyspark.daemon import manager

    manager()
