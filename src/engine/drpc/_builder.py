"""``LinearDRPCTopologyBuilder``: a chain of bolts computing one DRPC function.

The topology it builds is the one Storm's builder of the same name builds::

    spout (DRPCSpout) -none-> prepare-request
        default (request, args)  -none->      bolt0 (-fields-> if bolt0 is also the last
                                               bolt and has finished_id)
        ret (request, return)    -fields->    join-result (bolt<n>)
        id (request)             -fields->    bolt<n-1>, if it has finished_id
    bolt<i> = CoordinatedBolt(your i-th bolt):
        bolt0 no sources; bolt1 {bolt0: single}; bolt<i> {bolt<i-1>: all}; each reads the
        previous one's coord stream (direct) and its output with your grouping
    bolt<n-1> -fields(id)-> bolt<n> (JoinResult) -none-> bolt<n+1> (ReturnResults)
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._model.component import BasicBolt, Bolt, OutputFieldsDeclarer
from .._model.errors import InvalidComponentError, InvalidDeclarationError, InvalidGroupingError
from .._model.fields import Fields
from .._model.grouping import CustomStreamGrouping
from .._model.topology import BoltDeclarer, StormTopology, TopologyBuilder
from ..coordination import (
    COORDINATED_STREAM_ID,
    BatchBolt,
    BatchBoltExecutor,
    CoordinatedBolt,
    FinishedCallback,
    IdStreamSpec,
    SourceArgs,
)
from ._bolts import (
    ARGS_STREAM,
    ID_STREAM,
    RETURN_STREAM,
    JoinResult,
    PrepareRequest,
    ReturnResults,
    note_bolt_error,
)
from ._server import LocalDRPC
from ._spout import DRPCSpout

__all__ = [
    "DRPC_SPOUT_ID",
    "PREPARE_REQUEST_ID",
    "LinearDRPCInputDeclarer",
    "LinearDRPCTopologyBuilder",
    "bolt_id",
]

#: Component ids of the DRPC spout and the request-preparing bolt (Storm's names).
DRPC_SPOUT_ID = "spout"
PREPARE_REQUEST_ID = "prepare-request"


def bolt_id(index: int) -> str:
    """The component id of the ``index``-th bolt of the chain: ``bolt0``, ``bolt1``, ..."""
    return f"bolt{index}"


@dataclass
class _Stage:
    bolt: Bolt | BasicBolt
    parallelism: int
    envelope: bool
    declarations: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)
    conf: dict[str, Any] = field(default_factory=dict)
    num_tasks: int | None = None


class LinearDRPCInputDeclarer:
    """Returned by ``add_bolt``: how the bolt reads the previous one's output (the
    previous component is implied), and its configuration."""

    def __init__(self, stage: _Stage) -> None:
        self._stage = stage

    def _declare(self, method: str, *args: Any) -> LinearDRPCInputDeclarer:
        self._stage.declarations.append((method, args))
        return self

    def fields_grouping(
        self, fields: Fields | Iterable[str] | str, stream: str = "default"
    ) -> LinearDRPCInputDeclarer:
        """``BoltDeclarer.fields_grouping`` on the previous bolt's ``stream``. Grouping on
        the request id (the first field) keeps each request's tuples in one task; the last
        bolt of a chain whose requests finish in ``finished_id`` must read that way."""
        return self._declare("fields_grouping", fields, stream)

    def partial_key_grouping(
        self, fields: Fields | Iterable[str] | str, stream: str = "default"
    ) -> LinearDRPCInputDeclarer:
        """``BoltDeclarer.partial_key_grouping`` on the previous bolt's ``stream``."""
        return self._declare("partial_key_grouping", fields, stream)

    def shuffle_grouping(self, stream: str = "default") -> LinearDRPCInputDeclarer:
        """``BoltDeclarer.shuffle_grouping`` on the previous bolt's ``stream``."""
        return self._declare("shuffle_grouping", stream)

    def local_or_shuffle_grouping(self, stream: str = "default") -> LinearDRPCInputDeclarer:
        """``BoltDeclarer.local_or_shuffle_grouping`` on the previous bolt's ``stream``."""
        return self._declare("local_or_shuffle_grouping", stream)

    def global_grouping(self, stream: str = "default") -> LinearDRPCInputDeclarer:
        """``BoltDeclarer.global_grouping`` on the previous bolt's ``stream``."""
        return self._declare("global_grouping", stream)

    def none_grouping(self, stream: str = "default") -> LinearDRPCInputDeclarer:
        """``BoltDeclarer.none_grouping`` on the previous bolt's ``stream``."""
        return self._declare("none_grouping", stream)

    def all_grouping(self, stream: str = "default") -> LinearDRPCInputDeclarer:
        """``BoltDeclarer.all_grouping`` on the previous bolt's ``stream``."""
        return self._declare("all_grouping", stream)

    def direct_grouping(self, stream: str = "default") -> LinearDRPCInputDeclarer:
        """``BoltDeclarer.direct_grouping`` on the previous bolt's ``stream``."""
        return self._declare("direct_grouping", stream)

    def custom_grouping(
        self, grouping: CustomStreamGrouping, stream: str = "default"
    ) -> LinearDRPCInputDeclarer:
        """``BoltDeclarer.custom_grouping`` on the previous bolt's ``stream``."""
        return self._declare("custom_grouping", grouping, stream)

    def set_num_tasks(self, num_tasks: int) -> LinearDRPCInputDeclarer:
        """Tasks of this bolt (fixed for the topology's life); defaults to its parallelism."""
        self._stage.num_tasks = num_tasks
        return self

    def add_configuration(self, key: str, value: Any) -> LinearDRPCInputDeclarer:
        """One config key for this bolt only (``BoltDeclarer.add_configuration``)."""
        self._stage.conf[key] = value
        return self

    def add_configurations(self, conf: Mapping[str, Any]) -> LinearDRPCInputDeclarer:
        """``add_configuration`` for every key of ``conf``."""
        self._stage.conf.update(conf)
        return self


class LinearDRPCTopologyBuilder:
    """Builds the topology answering DRPC calls to ``function`` with a chain of bolts.

    >>> from engine.drpc import LinearDRPCTopologyBuilder, LocalDRPC
    >>> from engine import BasicBolt
    >>> class Exclaim(BasicBolt):
    ...     def execute(self, tuple, collector):
    ...         collector.emit([tuple[0], tuple[1] + "!"])
    ...     def declare_output_fields(self, declarer):
    ...         declarer.declare(["id", "result"])
    >>> builder = LinearDRPCTopologyBuilder("exclaim")
    >>> _ = builder.add_bolt(Exclaim(), 2)
    >>> with LocalDRPC() as drpc:
    ...     topology = builder.create_local_topology(drpc)
    >>> sorted(topology.bolts)
    ['bolt0', 'bolt1', 'bolt2', 'prepare-request']

    Each bolt's tuples start with the request id, as in Storm; with ``envelope=True`` a bolt
    sees and emits only its own values and the id travels around them. The last bolt emits
    ``(id, result)`` (just ``(result,)`` when enveloped). Bolts may be ``Bolt``,
    ``BasicBolt`` or ``BatchBolt`` (one instance per request, ``finish_batch`` at its end).
    """

    def __init__(self, function: str) -> None:
        if not isinstance(function, str) or not function:
            raise InvalidComponentError(
                f"the DRPC function must be a non-empty string, got {function!r}"
            )
        self.function = function
        self._stages: list[_Stage] = []

    def add_bolt(
        self, bolt: Bolt | BasicBolt | BatchBolt, parallelism: int = 1, *, envelope: bool = False
    ) -> LinearDRPCInputDeclarer:
        """Append ``bolt`` to the chain, run by ``parallelism`` executors."""
        where = f"linear DRPC {self.function!r}, {bolt_id(len(self._stages))}"
        if isinstance(bolt, BatchBolt):
            bolt = BatchBoltExecutor(bolt)
        elif not isinstance(bolt, (Bolt, BasicBolt)):
            raise InvalidComponentError(
                f"{where}: add_bolt takes an engine Bolt, BasicBolt or BatchBolt, got "
                f"{type(bolt).__name__}"
            )
        if not isinstance(parallelism, int) or isinstance(parallelism, bool) or parallelism <= 0:
            raise InvalidComponentError(
                f"{where}: parallelism must be a positive int, got {parallelism!r}"
            )
        stage = _Stage(bolt, parallelism, bool(envelope))
        self._stages.append(stage)
        return LinearDRPCInputDeclarer(stage)

    def create_local_topology(self, drpc: LocalDRPC) -> StormTopology:
        """The topology, its spout fetching ``drpc``'s requests for this function."""
        if not self._stages:
            raise InvalidComponentError(
                f"linear DRPC {self.function!r} has no bolts; add at least one with add_bolt"
            )
        builder = TopologyBuilder()
        builder.set_spout(DRPC_SPOUT_ID, DRPCSpout(self.function, drpc))
        # a bolt's exception reaches the caller of the request it failed
        on_error = functools.partial(note_bolt_error, drpc.service_id)
        builder.set_bolt(PREPARE_REQUEST_ID, PrepareRequest()).none_grouping(DRPC_SPOUT_ID)
        wired: list[CoordinatedBolt] = []
        last = len(self._stages) - 1
        for i, stage in enumerate(self._stages):
            sources: dict[str, SourceArgs] = {}
            if i == 1:
                sources[bolt_id(0)] = SourceArgs.single()
            elif i >= 2:
                sources[bolt_id(i - 1)] = SourceArgs.all()
            id_spec = None
            if i == last and isinstance(stage.bolt, FinishedCallback):
                id_spec = IdStreamSpec.make_detect_spec(PREPARE_REQUEST_ID, ID_STREAM)
            coordinated = CoordinatedBolt(
                stage.bolt, sources, id_spec, envelope=stage.envelope, on_error=on_error
            )
            declarer = builder.set_bolt(bolt_id(i), coordinated, stage.parallelism)
            if stage.num_tasks is not None:
                declarer.set_num_tasks(stage.num_tasks)
            if stage.conf:
                declarer.add_configurations(stage.conf)
            if id_spec is not None:
                declarer.fields_grouping(PREPARE_REQUEST_ID, Fields("request"), ID_STREAM)
            if i == 0:
                if stage.declarations:
                    if id_spec is not None and (stage.num_tasks or stage.parallelism) > 1:
                        self._check_grouped_by_id(i, stage.declarations, PrepareRequest())
                    self._apply(declarer, PREPARE_REQUEST_ID, stage.declarations)
                elif id_spec is not None:
                    # the one bolt finishes requests: its args must meet the id at one task
                    declarer.fields_grouping(PREPARE_REQUEST_ID, Fields("request"), ARGS_STREAM)
                else:
                    declarer.none_grouping(PREPARE_REQUEST_ID, ARGS_STREAM)
            else:
                prev = bolt_id(i - 1)
                declarations = stage.declarations or self._default_input(i, id_spec, wired[-1])
                if id_spec is not None and (stage.num_tasks or stage.parallelism) > 1:
                    self._check_grouped_by_id(i, declarations, wired[-1])
                self._apply(declarer, prev, declarations)
                declarer.direct_grouping(prev, COORDINATED_STREAM_ID)
            wired.append(coordinated)
        stream, fields = self._result_stream(last, wired[-1])
        n = len(self._stages)
        builder.set_bolt(bolt_id(n), JoinResult(PREPARE_REQUEST_ID)).fields_grouping(
            bolt_id(n - 1), Fields(fields[0]), stream
        ).fields_grouping(PREPARE_REQUEST_ID, Fields("request"), RETURN_STREAM)
        builder.set_bolt(bolt_id(n + 1), ReturnResults()).none_grouping(bolt_id(n))
        return builder.create_topology()

    @staticmethod
    def _apply(
        declarer: BoltDeclarer, prev: str, declarations: list[tuple[str, tuple[Any, ...]]]
    ) -> None:
        for method, args in declarations:
            if method in ("fields_grouping", "partial_key_grouping"):
                fields, stream = args
                getattr(declarer, method)(prev, fields, stream)
            elif method == "custom_grouping":
                grouping, stream = args
                declarer.custom_grouping(prev, grouping, stream)
            else:
                getattr(declarer, method)(prev, *args)

    @staticmethod
    def _streams(bolt: Bolt | BasicBolt, component_id: str) -> dict[str, Any]:
        declarer = OutputFieldsDeclarer(component_id)
        bolt.declare_output_fields(declarer)
        return {s: info for s, info in declarer.streams.items() if s != COORDINATED_STREAM_ID}

    def _default_input(
        self, i: int, id_spec: IdStreamSpec | None, prev: CoordinatedBolt
    ) -> list[tuple[str, tuple[Any, ...]]]:
        """Storm leaves a later bolt without input if you declare none; here it reads the
        previous bolt's default stream: shuffled, or by request id for a last bolt that
        finishes requests (all of a request's tuples must meet the id tuple at one task)."""
        if id_spec is None:
            return [("shuffle_grouping", ("default",))]
        info = self._streams(prev, bolt_id(i - 1)).get("default")
        if info is None or not len(info.fields):
            raise InvalidGroupingError(
                f"linear DRPC {self.function!r}, {bolt_id(i)}: {bolt_id(i - 1)} has no "
                f"'default' stream to read by request id; declare a grouping with add_bolt"
            )
        return [("fields_grouping", (Fields(info.fields[0]), "default"))]

    def _check_grouped_by_id(
        self, i: int, declarations: list[tuple[str, tuple[Any, ...]]], prev: Bolt | BasicBolt
    ) -> None:
        prev_id = bolt_id(i - 1) if i else PREPARE_REQUEST_ID
        tasks = self._stages[i].num_tasks or self._stages[i].parallelism
        streams = self._streams(prev, prev_id)
        for method, args in declarations:
            ok = False
            if method == "fields_grouping":
                fields, stream = args
                names = [fields] if isinstance(fields, str) else list(fields)
                info = streams.get(stream)
                ok = info is not None and len(info.fields) > 0 and names == [info.fields[0]]
            if not ok:
                raise InvalidGroupingError(
                    f"linear DRPC {self.function!r}, {bolt_id(i)}: the last bolt finishes "
                    f"requests (finished_id) on {tasks} tasks, so "
                    f"every tuple of a request must reach the task that gets its id; read "
                    f"{prev_id} with fields_grouping on the request id (its first "
                    f"field) only, not {method}{args!r}"
                )

    def _result_stream(self, last: int, bolt: CoordinatedBolt) -> tuple[str, list[str]]:
        streams = self._streams(bolt, bolt_id(last))
        where = f"linear DRPC {self.function!r}: the last bolt ({bolt_id(last)}, " + (
            f"{type(bolt.delegate).__name__})"
        )
        if len(streams) != 1:
            raise InvalidDeclarationError(
                f"{where} must declare exactly one output stream, the results; it declares "
                f"{sorted(streams)}"
            )
        ((stream, info),) = streams.items()
        if len(info.fields) != 2:
            wanted = (
                "exactly one field, the result (the envelope adds the request id)"
                if bolt.envelope
                else "exactly two fields, the request id and the result"
            )
            declared = list(info.fields)[1:] if bolt.envelope else list(info.fields)
            raise InvalidDeclarationError(
                f"{where} must emit {wanted}; its stream {stream!r} declares {declared}"
            )
        return stream, list(info.fields)
