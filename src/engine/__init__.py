"""engine: Storm's programming model on an asyncio event loop, with full acking.

Build a topology with ``TopologyBuilder``, run it with ``LocalCluster`` (synchronous, its
own loop thread) or ``run_topology`` (inside a running event loop), and test it with
``engine.testing.complete_topology``.

Every public class and function reports ``engine`` as its module (``engine.Grouping``), so
pickled topologies name only public modules.

The face is lazy: the model (topologies, components, tuples, fields, groupings, config,
errors) and the clock load with ``import engine``; the machinery that runs a topology (the
runtime, collectors, columnar batches, the CLI, and with them numpy, Numba and the acker's
compiled kernels) loads on first use of one of its names. A process that only builds,
unpickles or type-checks a topology, such as the Python process Spark starts for each
streaming source, then starts in a fraction of the time.
"""

import typing as _typing

from ._model.batch_component import BasicBatchBolt, BatchBolt
from ._model.combiner import CombinerBolt, CountCombiner, SumCombiner
from ._model.component import (
    DEFAULT_STREAM_ID,
    BasicBolt,
    Bolt,
    Component,
    OutputFieldsDeclarer,
    Spout,
    StreamInfo,
)
from ._model.config import Config
from ._model.context import TopologyContext
from ._model.errors import (
    EmitError,
    FailedException,
    InvalidComponentError,
    InvalidConfigError,
    InvalidDeclarationError,
    InvalidGroupingError,
    InvalidRebalanceError,
    ReportedFailedException,
    SquallError,
    SquallRuntimeError,
    TaskStartError,
    TopologyError,
    TopologyStateError,
    TupleStateError,
)
from ._model.fields import Fields, Values
from ._model.grouping import CustomStreamGrouping, Grouping, GroupingKind
from ._model.metrics import CountMetric, GaugeMetric
from ._model.public import lazy_exports as _lazy_exports
from ._model.public import publish as _publish
from ._model.topology import (
    BoltDeclarer,
    ComponentSpec,
    SpoutDeclarer,
    StormTopology,
    Subscription,
    TopologyBuilder,
)
from ._model.tuple import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, Tuple, is_tick_tuple
from ._time.clock import Clock, SystemClock
from ._time.virtual import submit_io

if _typing.TYPE_CHECKING:
    from ._columnar.batch import TupleBatch
    from ._columnar.batch_collector import BatchCollector
    from ._command.cli import format_stats, run_with_progress
    from ._execution.collector import (
        BasicOutputCollector,
        IBasicOutputCollector,
        IOutputCollector,
        ISpoutOutputCollector,
        OutputCollector,
        SpoutOutputCollector,
    )
    from ._monitor.stats import (
        ComponentStats,
        ErrorGroup,
        ErrorInfo,
        LatencySummary,
        TaskStats,
        TopologyInfo,
    )
    from ._runtime import RunningTopology, run_topology
    from ._runtime.cluster import LocalCluster

__all__ = [
    "DEFAULT_STREAM_ID",
    "SYSTEM_COMPONENT_ID",
    "SYSTEM_TICK_STREAM_ID",
    "BasicBatchBolt",
    "BasicBolt",
    "BasicOutputCollector",
    "BatchBolt",
    "BatchCollector",
    "Bolt",
    "BoltDeclarer",
    "Clock",
    "CombinerBolt",
    "Component",
    "ComponentSpec",
    "ComponentStats",
    "Config",
    "CountCombiner",
    "CountMetric",
    "CustomStreamGrouping",
    "EmitError",
    "ErrorGroup",
    "ErrorInfo",
    "FailedException",
    "Fields",
    "GaugeMetric",
    "Grouping",
    "GroupingKind",
    "IBasicOutputCollector",
    "IOutputCollector",
    "ISpoutOutputCollector",
    "InvalidComponentError",
    "InvalidConfigError",
    "InvalidDeclarationError",
    "InvalidGroupingError",
    "InvalidRebalanceError",
    "LatencySummary",
    "LocalCluster",
    "OutputCollector",
    "OutputFieldsDeclarer",
    "ReportedFailedException",
    "RunningTopology",
    "Spout",
    "SpoutDeclarer",
    "SpoutOutputCollector",
    "SquallError",
    "SquallRuntimeError",
    "StormTopology",
    "StreamInfo",
    "Subscription",
    "SumCombiner",
    "SystemClock",
    "TaskStartError",
    "TaskStats",
    "TopologyBuilder",
    "TopologyContext",
    "TopologyError",
    "TopologyInfo",
    "TopologyStateError",
    "Tuple",
    "TupleBatch",
    "TupleStateError",
    "Values",
    "format_stats",
    "is_tick_tuple",
    "run_topology",
    "run_with_progress",
    "submit_io",
]

#: Names loaded on first use, and the private module (relative to ``engine``) that holds each.
_LAZY = {
    "BasicOutputCollector": "._execution.collector",
    "BatchCollector": "._columnar.batch_collector",
    "ComponentStats": "._monitor.stats",
    "ErrorGroup": "._monitor.stats",
    "ErrorInfo": "._monitor.stats",
    "IBasicOutputCollector": "._execution.collector",
    "IOutputCollector": "._execution.collector",
    "ISpoutOutputCollector": "._execution.collector",
    "LatencySummary": "._monitor.stats",
    "LocalCluster": "._runtime.cluster",
    "OutputCollector": "._execution.collector",
    "RunningTopology": "._runtime",
    "SpoutOutputCollector": "._execution.collector",
    "TaskStats": "._monitor.stats",
    "TopologyInfo": "._monitor.stats",
    "TupleBatch": "._columnar.batch",
    "format_stats": "._command.cli",
    "run_topology": "._runtime",
    "run_with_progress": "._command.cli",
}


__getattr__, __dir__ = _lazy_exports(__name__, globals(), _LAZY)

_publish(__name__, globals(), [name for name in __all__ if name not in _LAZY])
