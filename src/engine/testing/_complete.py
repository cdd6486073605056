"""Storm's ``Testing`` helpers in Python.

``complete_topology`` runs a topology until every mocked spout tuple is fully processed
and returns every tuple emitted, per component and stream, with the spouts' acked and
failed message ids (Storm's ``Testing.completeTopology`` + ``readTuples``)::

    result = complete_topology(topology, mocked_sources={"sentences": [["a b"], ["b c"]]})
    assert sorted(result.emitted("split")) == [["a"], ["b"], ["b"], ["c"]]
    assert result.acked("sentences") == [0, 1]
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._model.component import BasicBolt, OutputFieldsDeclarer, Spout, StreamInfo
from .._model.errors import InvalidComponentError, InvalidDeclarationError
from .._model.grouping import Grouping, GroupingKind
from .._model.topology import ComponentSpec, StormTopology, Subscription
from .._monitor.stats import TopologyInfo
from .._runtime import RunningTopology, Runtime, run_topology
from .._time.clock import Clock
from .._time.loop import run_sync

__all__ = [
    "CAPTURE_COMPONENT_ID",
    "CompleteTopologyResult",
    "FixedTupleSpout",
    "complete_topology",
    "complete_topology_async",
]

#: The system bolt that captures every emitted tuple in ``complete_topology``.
CAPTURE_COMPONENT_ID = "__capture"


class FixedTupleSpout(Spout):
    """Emits fixed tuples once each, with message ids 0, 1, ... (Storm's ``FixedTupleSpout``).

    ``tuples`` maps a stream id to its list of value lists. Failed tuples are not replayed:
    they are recorded in ``failed``. Exhausted once every tuple was acked or failed.
    """

    def __init__(
        self,
        tuples: Mapping[str, Sequence[Sequence[Any]]] | Sequence[Sequence[Any]],
        streams: Mapping[str, StreamInfo] | None = None,
        fields: Sequence[str] | None = None,
    ) -> None:
        if not isinstance(tuples, Mapping):
            tuples = {"default": tuples}
        self._items = [(stream, list(values)) for stream, vs in tuples.items() for values in vs]
        if streams is None:
            if fields is None:
                raise ValueError("FixedTupleSpout needs streams or fields to declare its output")
            from .._model.fields import Fields

            streams = {"default": StreamInfo(Fields(list(fields)))}
        self._streams = dict(streams)
        # Checked now, not at the emit: a tuple that cannot be emitted would be tried again
        # on every next_tuple, and the run would only time out.
        for i, (stream, values) in enumerate(self._items):
            info = self._streams.get(stream)
            if info is None:
                raise InvalidDeclarationError(
                    f"FixedTupleSpout has tuples for stream {stream!r}, which it does not "
                    f"declare (its streams: {sorted(self._streams)}); declare it in streams"
                )
            if len(values) != len(info.fields):
                raise InvalidDeclarationError(
                    f"FixedTupleSpout tuple {i} {values!r} has {len(values)} values, but "
                    f"stream {stream!r} declares {len(info.fields)} fields "
                    f"{list(info.fields)}; give every tuple one value per field"
                )
        self.acked: list[Any] = []
        self.failed: list[Any] = []
        self._next = 0

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self._collector = collector

    def next_tuple(self) -> None:
        if self._next < len(self._items):
            stream, values = self._items[self._next]
            self._collector.emit(values, stream=stream, msg_id=self._next)
            self._next += 1

    def ack(self, msg_id: Any) -> None:
        self.acked.append(msg_id)

    def fail(self, msg_id: Any) -> None:
        self.failed.append(msg_id)

    def is_exhausted(self) -> bool:
        return self._next >= len(self._items) and len(self.acked) + len(self.failed) >= len(
            self._items
        )

    def declare_output_fields(self, declarer: OutputFieldsDeclarer) -> None:
        for stream, info in self._streams.items():
            declarer.declare_stream(stream, info.fields, info.direct)


class _CaptureBolt(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.captured: list[tuple[str, str, list[Any]]] = []

    def execute(self, tuple: Any, collector: Any) -> None:
        self.captured.append((tuple.source_component, tuple.source_stream, list(tuple.values)))


@dataclass(frozen=True)
class CompleteTopologyResult:
    """What ``complete_topology`` saw."""

    tuples: dict[str, dict[str, list[list[Any]]]]
    acked_ids: dict[str, list[Any]]
    failed_ids: dict[str, list[Any]]
    info: TopologyInfo

    def emitted(self, component: str, stream: str = "default") -> list[list[Any]]:
        """Values of every tuple ``component`` emitted on ``stream`` (Storm's readTuples)."""
        return self.tuples.get(component, {}).get(stream, [])

    def acked(self, spout: str) -> list[Any]:
        """The message ids whose trees ``spout`` heard complete, sorted (the order acks
        arrive in is not part of the contract, so tests compare sorted lists)."""
        return sorted(self.acked_ids.get(spout, []), key=_sort_key)

    def failed(self, spout: str) -> list[Any]:
        """The message ids ``spout`` heard fail or time out, sorted."""
        return sorted(self.failed_ids.get(spout, []), key=_sort_key)


def _sort_key(x: Any) -> tuple[str, Any]:
    return (type(x).__name__, x if isinstance(x, (int, float, str)) else repr(x))


def _with_mocks_and_capture(
    topology: StormTopology, mocked_sources: Mapping[str, Any]
) -> StormTopology:
    spouts = dict(topology.spouts)
    for sid, data in mocked_sources.items():
        if sid not in spouts:
            raise InvalidComponentError(
                f"mocked_sources names {sid!r}, which is not a spout of the topology "
                f"(spouts: {sorted(spouts)})"
            )
        spec = spouts[sid]
        try:
            mock = FixedTupleSpout(data, spec.streams)
        except InvalidDeclarationError as exc:
            raise InvalidDeclarationError(f"mocked_sources[{sid!r}]: {exc}") from None
        spouts[sid] = dataclasses.replace(spec, component=mock)
    inputs = tuple(
        Subscription(cid, stream, Grouping(GroupingKind.GLOBAL))
        for cid, spec in sorted({**spouts, **topology.bolts}.items())
        for stream, info in sorted(spec.streams.items())
        if not info.direct
    )
    capture = ComponentSpec(
        id=CAPTURE_COMPONENT_ID,
        component=_CaptureBolt(),
        parallelism=1,
        num_tasks=1,
        inputs=inputs,
        streams={},
        config={},
    )
    return StormTopology(spouts=spouts, bolts={**topology.bolts, CAPTURE_COMPONENT_ID: capture})


async def complete_topology_async(
    topology: StormTopology,
    mocked_sources: Mapping[str, Any] | None = None,
    conf: Mapping[str, Any] | None = None,
    *,
    timeout_secs: float = 60.0,
    clock: Clock | None = None,
) -> CompleteTopologyResult:
    """``complete_topology`` for code already inside an event loop."""
    full = _with_mocks_and_capture(topology, mocked_sources or {})
    async with run_topology(full, conf, name="complete-topology", clock=clock) as running:
        await running.wait_until_complete(timeout=timeout_secs)
        return _collect(running)


def _collect(running: RunningTopology) -> CompleteTopologyResult:
    runtime: Runtime = running.runtime
    tuples: dict[str, dict[str, list[list[Any]]]] = {}
    acked: dict[str, list[Any]] = {}
    failed: dict[str, list[Any]] = {}
    for ex in runtime.executors:
        for instance in ex.instances.values():
            if isinstance(instance, _CaptureBolt):
                for component, stream, values in instance.captured:
                    tuples.setdefault(component, {}).setdefault(stream, []).append(values)
            elif isinstance(instance, FixedTupleSpout):
                acked.setdefault(ex.component_id, []).extend(instance.acked)
                failed.setdefault(ex.component_id, []).extend(instance.failed)
    return CompleteTopologyResult(tuples, acked, failed, running.info())


def complete_topology(
    topology: StormTopology,
    mocked_sources: Mapping[str, Any] | None = None,
    conf: Mapping[str, Any] | None = None,
    *,
    timeout_secs: float = 60.0,
) -> CompleteTopologyResult:
    """Run ``topology`` until every spout is exhausted and every tree is done.

    ``mocked_sources`` replaces spouts by ``FixedTupleSpout``s: ``{spout_id: [values, ...]}``
    for the default stream or ``{spout_id: {stream: [values, ...]}}``. Unmocked spouts must
    implement ``is_exhausted``. Runs on a fresh event loop: inside a running loop, await
    ``complete_topology_async`` instead.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "complete_topology() cannot run inside a running event loop; "
            "await complete_topology_async() instead"
        )
    return run_sync(
        complete_topology_async(topology, mocked_sources, conf, timeout_secs=timeout_secs)
    )
