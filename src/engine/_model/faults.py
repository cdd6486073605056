"""Fault injection and message tracing, for simulations and chaos tests.

Faults are plain declarative records; ``Runtime.inject`` schedules them on the runtime's
clock. Every random decision a fault makes comes from the topology's seed, so a seeded
simulation with faults is reproducible. They are carried out by wrappers that the wiring
puts around an edge's destination or a bolt's execution (``_runtime.fault_injection``): a run
without faults carries none of their code.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CrashAcker",
    "CrashTask",
    "DelayTuples",
    "DropTuples",
    "FailTuples",
    "Fault",
    "MessageReport",
    "SlowBolt",
    "Trace",
]


@dataclass(frozen=True, kw_only=True)
class _Window:
    start: float = 0.0  # seconds since the topology started, on its clock
    end: float | None = None

    def active(self, t: float) -> bool:
        """The fault applies at ``t`` seconds since the topology started."""
        return t >= self.start and (self.end is None or t < self.end)


@dataclass(frozen=True, kw_only=True)
class CrashTask:
    """At ``at`` seconds, crash the executor running task ``task_index`` of ``component``:
    what it held is lost, and it restarts with fresh objects through prepare/open."""

    component: str
    task_index: int = 0
    at: float = 0.0


@dataclass(frozen=True, kw_only=True)
class CrashAcker:
    """At ``at`` seconds, lose acker ``index``'s ledger; its trees time out and replay."""

    at: float = 0.0
    index: int = 0


@dataclass(frozen=True, kw_only=True)
class DropTuples(_Window):
    """Drop each tuple sent from ``source`` to ``target`` with ``probability``."""

    source: str = ""
    target: str = ""
    probability: float = 0.0


@dataclass(frozen=True, kw_only=True)
class DelayTuples(_Window):
    """Deliver tuples sent from ``source`` to ``target`` ``delay_secs`` late."""

    source: str = ""
    target: str = ""
    delay_secs: float = 0.0


@dataclass(frozen=True, kw_only=True)
class SlowBolt(_Window):
    """``component`` spends ``secs_per_tuple`` more (clock time) on every tuple."""

    component: str = ""
    secs_per_tuple: float = 0.0


@dataclass(frozen=True, kw_only=True)
class FailTuples(_Window):
    """``component`` fails each input with ``probability`` instead of executing it."""

    component: str = ""
    probability: float = 0.0


#: Any fault record ``run_topology(faults=...)`` and ``RunningTopology.inject`` take.
Fault = CrashTask | CrashAcker | DropTuples | DelayTuples | SlowBolt | FailTuples


@dataclass
class MessageReport:
    """What became of one spout component's messages (see ``Trace.report``).

    Every emission ends one way: acked, failed (timed out included), still in flight in
    its live spout task, abandoned, or lost.

    - ``abandoned``: emissions pending in a spout task when it crashed. Their outcome has
      no task to go to (Storm's pending map dies with its worker), so the spout never hears
      it; a spout over a durable source emits such messages again when it restarts (it
      re-reads from the position it had committed), and that emission is then reported on
      its own (counted in ``replayed``).
    - ``lost``: emissions never acked, never failed back to the spout and not in flight in
      a live task, plus the abandoned ones whose message id the component never emitted
      again. It must be 0 for a reliable topology once it is idle, spout crashes included
      when the spout replays after a restart; ``lost_ids`` names the messages.
    """

    messages: int = 0  # distinct message ids emitted
    emitted: int = 0  # emissions, replays included
    replayed: int = 0
    acked: int = 0
    failed: int = 0
    timed_out: int = 0  # also counted in failed
    in_flight: int = 0
    abandoned: int = 0
    lost: int = 0
    lost_ids: list[Any] = field(default_factory=list)


class Trace:
    """The event log of every spout message: emits, acks, fails, with clock times.

    Two runs with the same seed produce the same ``events`` (the determinism check).
    """

    def __init__(self) -> None:
        #: (seconds, kind, component, task, msg_id, root) with kind emit / ack / fail /
        #: timeout, or abandon (the emission was pending in a spout task that crashed)
        self.events: list[tuple[float, str, str, int, Any, Any]] = []
        self._sequence = 0

    def record(self, t: float, kind: str, component: str, task: int, msg_id: Any, root: Any) -> Any:
        """Log one event; returns the emission's key (``root``, or a number if None)."""
        if root is None:  # untracked (no ackers): number the emission instead
            self._sequence += 1
            root = ("untracked", self._sequence)
        self.events.append((t, kind, component, task, msg_id, root))
        return root

    def report(self, in_flight_roots: set[Any] | None = None) -> dict[str, MessageReport]:
        """Per spout component (see ``MessageReport``). Emissions still pending in a live
        spout task are ``in_flight`` when ``in_flight_roots`` names them, else ``lost``."""
        reports: dict[str, MessageReport] = {}
        open_emits: dict[Any, tuple[str, Any]] = {}
        seen: dict[str, set[Any]] = {}
        #: (component, message key) -> msg id: abandoned and not emitted again since
        orphaned: dict[tuple[str, Any], Any] = {}
        for _, kind, component, _, msg_id, root in self.events:
            rep = reports.setdefault(component, MessageReport())
            key = _hashable(msg_id)
            if kind == "emit":
                rep.emitted += 1
                ids = seen.setdefault(component, set())
                if key in ids:
                    rep.replayed += 1
                ids.add(key)
                open_emits[root] = (component, msg_id)
                orphaned.pop((component, key), None)
                continue
            open_emits.pop(root, None)
            if kind == "abandon":
                rep.abandoned += 1
                orphaned[(component, key)] = msg_id
            elif kind == "ack":
                rep.acked += 1
            else:
                rep.failed += 1
                rep.timed_out += kind == "timeout"
        for component, ids in seen.items():
            reports[component].messages = len(ids)
        for root, (component, msg_id) in open_emits.items():
            rep = reports[component]
            if in_flight_roots is not None and root in in_flight_roots:
                rep.in_flight += 1
            else:
                rep.lost += 1
                rep.lost_ids.append(msg_id)
        for (component, _), msg_id in orphaned.items():
            reports[component].lost += 1
            reports[component].lost_ids.append(msg_id)
        return reports


def _hashable(x: Any) -> Any:
    try:
        hash(x)
    except TypeError:
        return repr(x)
    return x
