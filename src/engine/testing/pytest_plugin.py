"""A pytest plugin for Squall: the ``simulation`` fixture and the ``--squall-seed`` option.

Enable it in your ``conftest.py`` (the top-level one)::

    pytest_plugins = ["engine.testing.pytest_plugin"]

Then a test runs topologies on virtual time, seeded, with a per-message report::

    def test_word_count_loses_nothing(simulation):
        result = simulation.run_topology(topology, faults=[CrashAcker(at=1.0)])
        assert result.reports["sentences"].lost == 0

The seed of a run is, in order: the ``seed`` argument (in a Hypothesis test, draw it with
``engine.testing.strategies.seeds()``), the conf's ``topology.seed``, ``--squall-seed``,
else a hash of the test's node id, so every test has its own stable seed. When a test
fails, its report gets a "squall simulation" section naming the seed and faults of the
last run, to replay it.

The fixture is session-scoped and keeps no state between runs that a test could see, so
``@given`` tests may use it without Hypothesis' function-scoped-fixture health check.
"""

from __future__ import annotations

import collections
import os
import zlib
from collections.abc import Coroutine, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from .. import StormTopology, TopologyInfo, run_topology
from .._model.faults import CrashAcker, CrashTask, Fault, MessageReport
from ._simulation import advance_time, simulate

__all__ = ["Simulation", "SimulationResult", "simulation"]

T = TypeVar("T")

_SEED_KEY = "topology.seed"
_RESULT_SECTION = "squall simulation"


@dataclass(frozen=True)
class SimulationResult:
    """What ``Simulation.run_topology`` saw: the seed it ran with, the per-spout
    ``MessageReport``s, the trace's events ``(seconds, kind, component, task, msg_id,
    root)``, the virtual seconds the run took and, if asked for, the final
    ``TopologyInfo``."""

    seed: int
    reports: Mapping[str, MessageReport]
    events: Sequence[tuple[float, str, str, int, Any, Any]]
    uptime_secs: float
    info: TopologyInfo | None = None

    def acks(self, spout: str) -> collections.Counter[Any]:
        """How many times each message id of ``spout`` was acked (1 each, for a
        reliable spout that replays failures and nothing else)."""
        return collections.Counter(
            msg_id
            for _, kind, component, _, msg_id, _ in self.events
            if kind == "ack" and component == spout
        )


class Simulation:
    """Runs coroutines and topologies on virtual time (``engine.testing.simulate``).

    Outside pytest (and without ``seed``) runs are seeded with 0.

    >>> sim = Simulation(seed=7)
    >>> # result = sim.run_topology(topology, {"topology.message.timeout.secs": 5})
    >>> # assert all(r.lost == 0 for r in result.reports.values())
    """

    def __init__(self, seed: int | None = None) -> None:
        self._seed = seed
        #: node id -> (seed, faults) of that test's last run, for failure reports
        self.last_runs: dict[str, tuple[int, tuple[Fault, ...]]] = {}

    @property
    def seed(self) -> int:
        """The current test's seed: the one given, else a stable hash of its node id."""
        if self._seed is not None:
            return self._seed
        return zlib.crc32(_current_test().encode())

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run ``main`` on a fresh virtual-time loop (``simulate``) and return its result."""
        return simulate(main)

    def run_topology(
        self,
        topology: StormTopology | Any,
        conf: Mapping[str, Any] | None = None,
        *,
        seed: int | None = None,
        faults: Sequence[Fault] = (),
        timeout_secs: float = 3600.0,
        with_info: bool = False,
    ) -> SimulationResult:
        """Run ``topology`` (or a ``GeneratedTopology``) with a trace and ``faults`` until
        it completes (every spout exhausted, nothing pending) and every crash in
        ``faults`` has happened, at most ``timeout_secs`` of virtual time (each); raises
        ``TimeoutError`` with the message reports otherwise.

        ``with_info`` also keeps ``running.info()`` (it summarizes every task's latency
        histograms, which takes a while)."""
        topology = getattr(topology, "topology", topology)
        full = dict(conf or {})
        if seed is None:
            seed = full.get(_SEED_KEY)
        if seed is None:
            seed = self.seed
        full[_SEED_KEY] = seed
        self.last_runs[_current_test()] = (seed, tuple(faults))

        crash_times = [f.at for f in faults if isinstance(f, (CrashTask, CrashAcker))]

        async def scenario() -> SimulationResult:
            async with run_topology(topology, full, trace=True, faults=faults) as running:
                try:
                    await running.wait_until_complete(timeout=timeout_secs)
                    wait = max(crash_times, default=-1.0) - running.runtime.uptime_secs()
                    if wait >= 0:
                        # Let every crash fire, then recover from it. (A crash still
                        # scheduled when the topology is killed restarts its executor
                        # after the shutdown, and the kill never returns.)
                        await advance_time(wait + 0.001)
                        await running.wait_until_complete(timeout=timeout_secs)
                except TimeoutError as exc:
                    reports = running.report()
                    raise TimeoutError(f"{exc} (seed {seed}; reports: {reports})") from exc
                trace = running.runtime.trace
                assert trace is not None
                return SimulationResult(
                    seed,
                    running.report(),
                    list(trace.events),
                    running.runtime.uptime_secs(),
                    running.info() if with_info else None,
                )

        return simulate(scenario())


def _current_test() -> str:
    # pytest sets "<node id> (<phase>)" while it runs a test.
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    return current.rsplit(" (", 1)[0]


_simulation_key = pytest.StashKey[Simulation]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("squall")
    group.addoption(
        "--squall-seed",
        type=int,
        default=None,
        help="seed of every engine.testing simulation run without an explicit seed",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_simulation_key] = Simulation(config.getoption("--squall-seed"))


@pytest.fixture(scope="session")
def simulation(pytestconfig: pytest.Config) -> Simulation:
    """Run coroutines and topologies on virtual time, seeded per test (``Simulation``).

    >>> def test_nothing_lost(simulation):
    ...     result = simulation.run_topology(topology)
    ...     assert result.reports["spout"].lost == 0
    """
    return pytestconfig.stash[_simulation_key]


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    sim = item.config.stash.get(_simulation_key, None)
    if sim is None or report.when != "call":
        return report
    last = sim.last_runs.pop(item.nodeid, None)
    if last is not None and report.failed:
        seed, faults = last
        report.sections.append(
            (
                _RESULT_SECTION,
                f"the last topology this test ran had seed={seed} and faults={list(faults)!r}; "
                f"run_topology(..., seed={seed}) replays it",
            )
        )
    return report
