"""engine: Storm's programming model on an asyncio event loop, with full acking.

Build a topology with ``TopologyBuilder``, run it with ``LocalCluster`` (synchronous, its
own loop thread) or ``run_topology`` (inside a running event loop), and test it with
``engine.testing.complete_topology``.

Every public class and function reports ``engine`` as its module (``engine.Grouping``), so
pickled topologies name only public modules.
"""

from ._batch import TupleBatch
from ._batch_collector import BatchCollector
from ._batch_component import BasicBatchBolt, BatchBolt
from ._cli import format_stats, run_with_progress
from ._clock import Clock, SystemClock
from ._cluster import LocalCluster
from ._collector import (
    BasicOutputCollector,
    IBasicOutputCollector,
    IOutputCollector,
    ISpoutOutputCollector,
    OutputCollector,
    SpoutOutputCollector,
)
from ._combiner import CombinerBolt, CountCombiner, SumCombiner
from ._component import (
    DEFAULT_STREAM_ID,
    BasicBolt,
    Bolt,
    Component,
    OutputFieldsDeclarer,
    Spout,
    StreamInfo,
)
from ._config import Config
from ._context import TopologyContext
from ._errors import (
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
from ._fields import Fields, Values
from ._grouping import CustomStreamGrouping, Grouping, GroupingKind
from ._metrics import CountMetric, GaugeMetric
from ._public import publish
from ._runtime import RunningTopology, run_topology
from ._stats import (
    ComponentStats,
    ErrorGroup,
    ErrorInfo,
    LatencySummary,
    TaskStats,
    TopologyInfo,
)
from ._topology import (
    BoltDeclarer,
    ComponentSpec,
    SpoutDeclarer,
    StormTopology,
    Subscription,
    TopologyBuilder,
)
from ._tuple import SYSTEM_COMPONENT_ID, SYSTEM_TICK_STREAM_ID, Tuple, is_tick_tuple

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
