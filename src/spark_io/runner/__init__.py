"""spark_io.runner: a ``StormTopology`` as one Spark Structured Streaming query.

- ``SparkRunner``: ``compile`` a topology (checked, nothing runs), ``start`` it, or ``run``
  both; ``SparkTopologyRun`` is the running query; ``CompiledTopology.describe()`` says
  where each component runs and how long its memory lasts (``Placement``).
- ``check_topology``: the refusals, without Spark.
- ``main``: ``squall submit --runner spark ARGS...`` (registered under the
  ``squall.runners`` entry point group).
- ``RUNNER_SPARK_CONF``: the settings of a session made to run topologies.

The runner stands on the engine's public interface for runners (``engine.runners``). The
face is lazy: unpickling the reader of a query's source (``_commits.NamedReader``), which
Spark does in a new process before each query's first micro-batch, imports this package
but not the compiler, the engine's runtime or Numba.
"""

import typing as _typing

from .._lazy import lazy_face as _lazy_face

if _typing.TYPE_CHECKING:
    from ._compile import (
        RUNNER_SPARK_CONF,
        CompiledTopology,
        Placement,
        SparkRunner,
        SparkTopologyRun,
        check_topology,
        failure_line,
    )
    from ._submit import main

__all__ = [
    "RUNNER_SPARK_CONF",
    "CompiledTopology",
    "Placement",
    "SparkRunner",
    "SparkTopologyRun",
    "check_topology",
    "failure_line",
    "main",
]

#: Each public name, and the module (relative to ``spark_io.runner``) that defines it.
_LAZY = {
    "CompiledTopology": "._compile",
    "Placement": "._compile",
    "RUNNER_SPARK_CONF": "._compile",
    "SparkRunner": "._compile",
    "SparkTopologyRun": "._compile",
    "check_topology": "._compile",
    "failure_line": "._compile",
    "main": "._submit",
}

__getattr__, __dir__ = _lazy_face(__name__, globals(), _LAZY)
