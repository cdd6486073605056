"""Stateful bolts end to end on virtual time: the checkpoint protocol, crashes, restarts."""

from __future__ import annotations

from engine import run_topology
from engine.state import CHECKPOINT_COMPONENT_ID, COMMIT, INITSTATE, PREPARE, InMemoryStateStore
from engine.testing import CrashTask, advance_time, simulate

from .wordcount import build, committed_counts, truth


def test_word_count_state_is_exact_without_faults() -> None:
    async def scenario() -> tuple[object, list[tuple[int, str]]]:
        async with run_topology(
            build(300), {"topology.seed": 1}, name="state-exact", trace=True
        ) as running:
            await running.wait_until_complete(timeout=120)
            spout = next(iter(running.task_objects(CHECKPOINT_COMPONENT_ID).values()))
            return committed_counts(running), running.report(), spout.completed

    InMemoryStateStore.clear()
    counts, report, completed = simulate(scenario())
    assert counts == truth(300)
    assert report["sentences"].lost == 0
    assert completed[0] == (0, INITSTATE)
    assert (1, PREPARE) in completed and (1, COMMIT) in completed
