"""Exactly-once state from a replayable source: a stateful word count reading Kafka keeps
counts equal to the truth (not just at least the truth) through failed tuples, crashed
tasks and, in test_exactly_once_sigkill, SIGKILLs of the whole process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from engine import run_topology
from engine.kafka import LocalKafkaBroker
from engine.state import RewindableSpoutExecutor
from engine.testing import CrashTask, FailTuples

from . import eo_wordcount as wc
from .helpers import until

pytestmark = pytest.mark.kafka


def test_counts_equal_the_truth_through_failures_and_crashes(
    kafka_broker: LocalKafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    n = 1500
    servers = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic_name, wc.PARTITIONS)
    wc.fill(servers, topic_name, n)
    db = tmp_path / "state.sqlite"
    truth = wc.truth(n)
    faults = [
        FailTuples(component="split", probability=0.01, start=0.0, end=1.0),
        CrashTask(component="count", task_index=1, at=0.5),
        CrashTask(component="kafka", task_index=0, at=0.8),
        CrashTask(component="split", task_index=0, at=1.2),
    ]

    async def main() -> int:
        topology = wc.build(servers, topic_name)
        async with run_topology(topology, wc.conf(db), name="eo", faults=faults) as running:
            await until(
                lambda: sum(wc.committed_counts(db, "eo").values()) >= sum(truth.values()),
                timeout=90,
                what="every word counted",
            )
            spouts = running.task_objects("kafka").values()
            assert all(isinstance(s, RewindableSpoutExecutor) for s in spouts)
            return sum(s.rewinds for s in spouts)

    rewinds = asyncio.run(main())
    assert wc.committed_counts(db, "eo") == truth
    assert rewinds > 2  # the start, then rollbacks after the failures and crashes
