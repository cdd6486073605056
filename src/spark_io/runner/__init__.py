"""spark_io.runner: a ``StormTopology`` as one Spark Structured Streaming query.

- ``SparkRunner``: ``compile`` a topology (checked, nothing runs), ``start`` it, or ``run``
  both; ``SparkTopologyRun`` is the running query; ``CompiledTopology.describe()`` says
  where each component runs and how long its memory lasts (``Placement``).
- ``check_topology``: the refusals, without Spark.
- ``main``: ``squall submit --runner spark ARGS...`` (registered under the
  ``squall.runners`` entry point group).
- ``RUNNER_SPARK_CONF``: the settings of a session made to run topologies.

The runner stands on the engine's public interface for runners (``engine.runners``).
"""

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
