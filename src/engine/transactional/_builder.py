"""``TransactionalTopologyBuilder``: Storm's transactional topologies.

What it builds, for a spout ``s`` and bolts::

    s/coordinator (TransactionalSpoutCoordinator, 1 task)
        batch  -all->  s (CoordinatedBolt(TransactionalSpoutBatchExecutor), no sources)
        commit -all->  every committer bolt (its id stream)
    each bolt = CoordinatedBolt(bolt, {every component it reads: all}, id stream = commit
    for committers), reading each of those components' coord stream (direct) and their
    output with your groupings.

Batch bolts (``BatchBolt``) get one instance per attempt; a committer's ``finish_batch``
runs only once the coordinator sent the attempt's commit tuple, i.e. strictly in txid
order, after the whole batch was processed everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._model.component import BasicBolt, Bolt
from .._model.errors import InvalidComponentError, InvalidGroupingError
from .._model.fields import Fields
from .._model.grouping import CustomStreamGrouping
from .._model.topology import StormTopology, TopologyBuilder
from ..coordination import (
    COORDINATED_STREAM_ID,
    BatchBolt,
    BatchBoltExecutor,
    CoordinatedBolt,
    IdStreamSpec,
    SourceArgs,
)
from ._coordinator import (
    BATCH_STREAM_ID,
    COMMIT_STREAM_ID,
    TransactionalSpoutBatchExecutor,
    TransactionalSpoutCoordinator,
)
from ._spouts import (
    PartitionedTransactionalSpout,
    PartitionedTransactionalSpoutExecutor,
    TransactionalSpout,
)
from ._state import MemoryStateStore, StateStore, check_name

__all__ = ["Committer", "TransactionalBoltDeclarer", "TransactionalTopologyBuilder"]


class Committer:
    """Mix into a ``BatchBolt`` to make it a committer (Storm's ``ICommitter``): its
    ``finish_batch`` runs in commit order. ``set_committer_bolt`` does the same."""


@dataclass
class _BoltSpec:
    bolt: Bolt | BasicBolt
    parallelism: int
    committer: bool
    envelope: bool
    declarations: list[tuple[str, str, tuple[Any, ...]]] = field(default_factory=list)
    conf: dict[str, Any] = field(default_factory=dict)
    num_tasks: int | None = None


class TransactionalBoltDeclarer:
    """Returned by ``set_bolt``: the bolt's inputs (each input component is coordinated
    with this bolt automatically) and its configuration."""

    def __init__(self, spec: _BoltSpec) -> None:
        self._spec = spec

    def _declare(self, method: str, component: str, *args: Any) -> TransactionalBoltDeclarer:
        self._spec.declarations.append((method, component, args))
        return self

    def fields_grouping(
        self, component_id: str, fields: Fields | Iterable[str] | str, stream: str = "default"
    ) -> TransactionalBoltDeclarer:
        """``BoltDeclarer.fields_grouping`` on ``component_id``'s ``stream``. As with every
        grouping here, the bolt also gets that component's count reports, so that it
        knows when it has seen the whole of a batch."""
        return self._declare("fields_grouping", component_id, fields, stream)

    def partial_key_grouping(
        self, component_id: str, fields: Fields | Iterable[str] | str, stream: str = "default"
    ) -> TransactionalBoltDeclarer:
        """``BoltDeclarer.partial_key_grouping`` on ``component_id``'s ``stream``."""
        return self._declare("partial_key_grouping", component_id, fields, stream)

    def shuffle_grouping(
        self, component_id: str, stream: str = "default"
    ) -> TransactionalBoltDeclarer:
        """``BoltDeclarer.shuffle_grouping`` on ``component_id``'s ``stream``."""
        return self._declare("shuffle_grouping", component_id, stream)

    def local_or_shuffle_grouping(
        self, component_id: str, stream: str = "default"
    ) -> TransactionalBoltDeclarer:
        """``BoltDeclarer.local_or_shuffle_grouping`` on ``component_id``'s ``stream``."""
        return self._declare("local_or_shuffle_grouping", component_id, stream)

    def global_grouping(
        self, component_id: str, stream: str = "default"
    ) -> TransactionalBoltDeclarer:
        """``BoltDeclarer.global_grouping`` on ``component_id``'s ``stream``."""
        return self._declare("global_grouping", component_id, stream)

    def none_grouping(
        self, component_id: str, stream: str = "default"
    ) -> TransactionalBoltDeclarer:
        """``BoltDeclarer.none_grouping`` on ``component_id``'s ``stream``."""
        return self._declare("none_grouping", component_id, stream)

    def all_grouping(self, component_id: str, stream: str = "default") -> TransactionalBoltDeclarer:
        """``BoltDeclarer.all_grouping`` on ``component_id``'s ``stream``."""
        return self._declare("all_grouping", component_id, stream)

    def direct_grouping(
        self, component_id: str, stream: str = "default"
    ) -> TransactionalBoltDeclarer:
        """``BoltDeclarer.direct_grouping`` on ``component_id``'s ``stream``."""
        return self._declare("direct_grouping", component_id, stream)

    def custom_grouping(
        self, component_id: str, grouping: CustomStreamGrouping, stream: str = "default"
    ) -> TransactionalBoltDeclarer:
        """``BoltDeclarer.custom_grouping`` on ``component_id``'s ``stream``."""
        return self._declare("custom_grouping", component_id, grouping, stream)

    def set_num_tasks(self, num_tasks: int) -> TransactionalBoltDeclarer:
        """Tasks of this bolt (fixed for the topology's life); defaults to its parallelism."""
        self._spec.num_tasks = num_tasks
        return self

    def add_configuration(self, key: str, value: Any) -> TransactionalBoltDeclarer:
        """One config key for this bolt only (``BoltDeclarer.add_configuration``)."""
        self._spec.conf[key] = value
        return self

    def add_configurations(self, conf: Mapping[str, Any]) -> TransactionalBoltDeclarer:
        """``add_configuration`` for every key of ``conf``."""
        self._spec.conf.update(conf)
        return self


class TransactionalTopologyBuilder:
    """Builds a transactional topology around ``spout`` (a ``TransactionalSpout`` or a
    ``PartitionedTransactionalSpout``).

    >>> from engine.transactional import FileStateStore, TransactionalTopologyBuilder
    >>> # builder = TransactionalTopologyBuilder("counts", "numbers", NumbersSpout(), 2,
    >>> #                                        state=FileStateStore("state/"))
    >>> # builder.set_bolt("partial", PartialCount(), 2).shuffle_grouping("numbers")
    >>> # builder.set_committer_bolt("total", StoreTotal()).global_grouping("partial")
    >>> # topology = builder.build_topology()

    ``id`` names the topology's stored state in ``state`` (default: a fresh
    ``MemoryStateStore``): a topology built again with the same id and store resumes
    after the last committed transaction. Run only one topology per id and store at a
    time. ``topology.max.spout.pending`` bounds the transactions in flight (1 if unset).
    """

    def __init__(
        self,
        id: str,
        spout_id: str,
        spout: TransactionalSpout | PartitionedTransactionalSpout,
        spout_parallelism: int = 1,
        *,
        state: StateStore | None = None,
        envelope: bool = False,
    ) -> None:
        check_name("the transactional id", id)
        store = state if state is not None else MemoryStateStore()
        if not isinstance(store, StateStore):
            raise InvalidComponentError(
                f"transactional topology {id!r}: state must be a StateStore (FileStateStore, "
                f"MemoryStateStore), got {type(store).__name__}"
            )
        if isinstance(spout, PartitionedTransactionalSpout):
            spout = PartitionedTransactionalSpoutExecutor(spout, store, id)
        elif not isinstance(spout, TransactionalSpout):
            raise InvalidComponentError(
                f"transactional topology {id!r}: spout {spout_id!r} must be a "
                f"TransactionalSpout or PartitionedTransactionalSpout, got "
                f"{type(spout).__name__}"
            )
        self.id = id
        self.spout_id = spout_id
        self._spout = spout
        self._spout_parallelism = spout_parallelism
        self._store = store
        self._envelope = bool(envelope)
        self._bolts: dict[str, _BoltSpec] = {}
        self._spout_conf: dict[str, Any] = {}

    @property
    def coordinator_id(self) -> str:
        """The coordinator spout's component id: ``<spout_id>/coordinator`` (Storm's)."""
        return f"{self.spout_id}/coordinator"

    @property
    def state(self) -> StateStore:
        """Where the topology keeps its transaction state (the coordinator's progress, the
        partitioned spout's metadata): the store given, or the fresh in-memory one."""
        return self._store

    def set_bolt(
        self,
        id: str,
        bolt: Bolt | BasicBolt | BatchBolt,
        parallelism: int = 1,
        *,
        envelope: bool = False,
    ) -> TransactionalBoltDeclarer:
        """Add a bolt; a ``BatchBolt`` that is also a ``Committer`` becomes a committer."""
        return self._add(id, bolt, parallelism, isinstance(bolt, Committer), envelope)

    def set_committer_bolt(
        self, id: str, bolt: BatchBolt, parallelism: int = 1, *, envelope: bool = False
    ) -> TransactionalBoltDeclarer:
        """Add a batch bolt whose ``finish_batch`` runs in commit order."""
        return self._add(id, bolt, parallelism, True, envelope)

    def _add(
        self, id: str, bolt: Any, parallelism: int, committer: bool, envelope: bool
    ) -> TransactionalBoltDeclarer:
        if id in self._bolts or id in (self.spout_id, self.coordinator_id):
            raise InvalidComponentError(
                f"transactional topology {self.id!r}: component id {id!r} is used twice"
            )
        if isinstance(bolt, BatchBolt):
            wrapped: Bolt | BasicBolt = BatchBoltExecutor(bolt)
        elif committer:
            raise InvalidComponentError(
                f"transactional topology {self.id!r}: committer {id!r} must be a BatchBolt "
                f"(its finish_batch is the commit), got {type(bolt).__name__}"
            )
        elif isinstance(bolt, (Bolt, BasicBolt)):
            wrapped = bolt
        else:
            raise InvalidComponentError(
                f"transactional topology {self.id!r}: bolt {id!r} must be a BatchBolt, "
                f"Bolt or BasicBolt, got {type(bolt).__name__}"
            )
        spec = _BoltSpec(wrapped, parallelism, committer, bool(envelope))
        self._bolts[id] = spec
        return TransactionalBoltDeclarer(spec)

    def add_spout_configuration(self, key: str, value: Any) -> TransactionalTopologyBuilder:
        """Configuration for the spout's emitter component."""
        self._spout_conf[key] = value
        return self

    def build_topology(self) -> StormTopology:
        """The topology, wired and validated (``build_topology_builder().create_topology()``)."""
        return self.build_topology_builder().create_topology()

    def build_topology_builder(self) -> TopologyBuilder:
        """The wired ``TopologyBuilder`` (Storm's ``buildTopologyBuilder``): add plain,
        uncoordinated bolts to it — a sink after a committer, say — then
        ``create_topology()``. What a committer emits in ``finish_batch`` is anchored to
        the commit, so the commit completes only when such a bolt acked it."""
        coordinator = self.coordinator_id
        builder = TopologyBuilder()
        builder.set_spout(
            coordinator, TransactionalSpoutCoordinator(self._spout, self._store, self.id)
        )
        emitter = builder.set_bolt(
            self.spout_id,
            CoordinatedBolt(TransactionalSpoutBatchExecutor(self._spout), envelope=self._envelope),
            self._spout_parallelism,
        ).all_grouping(coordinator, BATCH_STREAM_ID)
        if self._spout_conf:
            emitter.add_configurations(self._spout_conf)
        known = {self.spout_id, *self._bolts}
        for bid, spec in self._bolts.items():
            inputs = sorted({component for _, component, _ in spec.declarations})
            for component in inputs:
                if component not in known:
                    what = (
                        "the coordinator (read the spout instead)"
                        if component == coordinator
                        else "no component of this topology"
                    )
                    raise InvalidGroupingError(
                        f"transactional topology {self.id!r}: bolt {bid!r} reads "
                        f"{component!r}, {what}; components: {sorted(known)}"
                    )
            if not inputs:
                raise InvalidGroupingError(
                    f"transactional topology {self.id!r}: bolt {bid!r} reads nothing; "
                    f"subscribe it to the spout {self.spout_id!r} or another bolt"
                )
            id_spec = (
                IdStreamSpec.make_detect_spec(coordinator, COMMIT_STREAM_ID)
                if spec.committer
                else None
            )
            coordinated = CoordinatedBolt(
                spec.bolt,
                {component: SourceArgs.all() for component in inputs},
                id_spec,
                envelope=spec.envelope,
            )
            declarer = builder.set_bolt(bid, coordinated, spec.parallelism)
            if spec.num_tasks is not None:
                declarer.set_num_tasks(spec.num_tasks)
            if spec.conf:
                declarer.add_configurations(spec.conf)
            for component in inputs:
                declarer.direct_grouping(component, COORDINATED_STREAM_ID)
            for method, component, args in spec.declarations:
                getattr(declarer, method)(component, *args)
            if spec.committer:
                declarer.all_grouping(coordinator, COMMIT_STREAM_ID)
        return builder
