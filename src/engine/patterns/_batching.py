"""``BatchingBolt``: hold tuples until ``batch_size`` are held or a tick comes, process them
together, then ack them (or fail them all if processing raised)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._execution.collector import AnchoringOutputCollector
from .._model.component import Bolt, Component
from .._model.errors import InvalidComponentError, InvalidConfigError
from .._model.tuple import Tuple, is_tick_tuple

__all__ = ["BatchingBolt", "BatchingBoltExecutor"]


class BatchingBolt(Component):
    """Subclass it and implement ``process_batch(tuples)``; declare it with ``set_bolt``
    (it runs inside a ``BatchingBoltExecutor``). Emits through the collector given to
    ``prepare`` anchor to the whole batch unless you pass ``anchors``.

    >>> from engine.patterns import BatchingBolt
    >>> class BulkWrite(BatchingBolt):
    ...     batch_size, max_delay_secs = 500, 1.0     # at most 500 held, none over ~1 s
    ...     def prepare(self, conf, context, collector):
    ...         self.collector = collector
    ...     def process_batch(self, tuples):
    ...         write_rows([t.values for t in tuples])  # then every tuple is acked
    >>> # builder.set_bolt("write", BulkWrite(), 2).shuffle_grouping("rows")

    Every tuple is acked after ``process_batch`` returned; if it raises, every tuple of the
    batch fails (a reliable spout replays them) and the error is reported. Ticks come every
    ``max_delay_secs`` and flush whatever is held.
    """

    batch_size: int = 100
    max_delay_secs: float = 1.0

    def with_batch(self, batch_size: int, max_delay_secs: float) -> BatchingBolt:
        """Set both bounds on an instance (instead of the class attributes): flush at
        ``batch_size`` held tuples or after ``max_delay_secs``, whichever comes first.
        Returns the bolt, to chain in ``set_bolt``."""
        self.batch_size = batch_size
        self.max_delay_secs = max_delay_secs
        return self

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> Any:
        """Called once per task; ``collector`` anchors emits to the batch being processed."""

    def process_batch(self, tuples: list[Tuple]) -> Any:
        """Process the held tuples together (do not ack them: that follows)."""
        raise NotImplementedError

    def cleanup(self) -> Any:
        """Called when the topology shuts down."""

    def as_bolt(self) -> Any:
        """The ``Bolt`` that runs this one (``set_bolt`` calls it)."""
        return BatchingBoltExecutor(self)

    def validate_topology_conf(self, component_id: str, conf: Mapping[str, Any]) -> None:
        """``create_topology`` calls it with the bolt's effective config: the bounds must be
        positive, and ``max_delay_secs`` below the message timeout, or held tuples would
        time out before their batch is processed."""
        where = f"batching bolt {component_id!r} ({type(self).__name__})"
        if type(self).process_batch is BatchingBolt.process_batch:
            raise InvalidComponentError(f"{where} does not implement process_batch(tuples)")
        n = self.batch_size
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise InvalidComponentError(f"{where}: batch_size must be a positive int, got {n!r}")
        d = self.max_delay_secs
        if isinstance(d, bool) or not isinstance(d, (int, float)) or d <= 0:
            raise InvalidComponentError(f"{where}: max_delay_secs must be > 0, got {d!r}")
        timeout = conf.get("topology.message.timeout.secs")
        if timeout is not None and d >= timeout:
            raise InvalidConfigError(
                f"{where}: max_delay_secs = {d:g} is not below topology.message.timeout.secs "
                f"= {timeout}: held tuples would time out; lower max_delay_secs"
            )


class BatchingBoltExecutor(Bolt):
    """Runs a ``BatchingBolt``: holds, flushes on size or tick, acks after."""

    def __init__(self, bolt: BatchingBolt) -> None:
        self.bolt = bolt

    def declare_output_fields(self, declarer: Any) -> None:
        self.bolt.declare_output_fields(declarer)

    def component_configuration(self) -> Mapping[str, Any] | None:
        conf = dict(self.bolt.component_configuration() or {})
        conf.setdefault("topology.tick.tuple.freq.secs", self.bolt.max_delay_secs)
        return conf

    def validate_topology_conf(self, component_id: str, conf: Mapping[str, Any]) -> None:
        """The batching bolt's own check (``BatchingBolt.validate_topology_conf``)."""
        self.bolt.validate_topology_conf(component_id, conf)

    def prepare(self, conf: Mapping[str, Any], context: Any, collector: Any) -> Any:
        self.validate_topology_conf(context.get_this_component_id(), conf)
        self.held: list[Tuple] = []
        self.batches = 0
        #: emits that name no anchors are anchored to the batch being processed
        self.out = AnchoringOutputCollector(collector)
        return self.bolt.prepare(conf, context, self.out)

    def execute(self, tuple: Tuple) -> None:
        if is_tick_tuple(tuple):
            if self.held:
                self._flush()
            return
        self.held.append(tuple)
        if len(self.held) >= self.bolt.batch_size:
            self._flush()

    def _flush(self) -> None:
        tuples, self.held = self.held, []
        self.batches += 1
        out = self.out
        out.default_anchors = tuples
        try:
            self.bolt.process_batch(tuples)
        except Exception as exc:
            out.report_error(exc)
            for t in tuples:
                out.fail(t)
            return
        finally:
            out.default_anchors = None
        for t in tuples:
            out.ack(t)

    def cleanup(self) -> Any:
        return self.bolt.cleanup()
