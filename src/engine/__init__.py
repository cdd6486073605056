"""engine: Storm's programming model on an asyncio event loop, with full acking.

Build a topology with ``TopologyBuilder``, run it with ``LocalCluster`` (synchronous, its
own loop thread) or ``run_topology`` (inside a running event loop), and test it with
``engine.testing.complete_topology``.

Every public class and function reports ``engine`` as its module (``engine.Grouping``), so
pickled topologies name only public modules.
"""

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
    TopologyError,
    TopologyStateError,
    TupleStateError,
)
from ._model.fields import Fields, Values
from ._model.grouping import CustomStreamGrouping, Grouping, GroupingKind
from ._model.metrics import CountMetric, GaugeMetric
from ._model.public import publish
from ._model.topology import (
    BoltDeclarer,
    ComponentSpec,
    SpoutDeclarer,
    StormTopology,
    Subscription,
    TopologyBuilder,
)
from ._model.tuple import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, Tuple, is_tick_tuple
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
from ._time.clock import Clock, SystemClock

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
]

publish(__name__, globals(), __all__)
del publish
