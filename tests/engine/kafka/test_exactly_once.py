"""Exactly-once state from a replayable source: a stateful word count reading Kafka keeps
counts equal to the truth (not just at least the truth) through failed tuples, crashed
tasks and, in test_exactly_once_sigkill, SIGKILLs of the whole process."""

from __future__ import annotations

import asyncio
import collections
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


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_counts_equal_the_truth_after_sigkills_at_random_points(
    kafka_broker: LocalKafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    n = 8000
    servers = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic_name, wc.PARTITIONS)
    wc.fill(servers, topic_name, n)
    db = tmp_path / "state.sqlite"
    wc.kill_campaign(
        ["tests.engine.kafka._eo_child", servers, topic_name, str(db)],
        db,
        "eo-killed",
        wc.truth(n),
    )


def exactly_once_outputs(sink: Path, truth: collections.Counter[str]) -> None:
    """The counts the sink published: for each word, each of 1..its true count once."""
    published = wc.published(sink)
    assert len(published) == sum(truth.values())
    by_word: dict[str, list[int]] = collections.defaultdict(list)
    for word, count in published:
        by_word[word].append(count)
    assert {w: sorted(c) for w, c in by_word.items()} == {
        w: list(range(1, n + 1)) for w, n in truth.items()
    }


def test_checkpointed_sink_publishes_each_output_once_through_failures_and_crashes(
    kafka_broker: LocalKafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    n = 1000
    servers = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic_name, wc.PARTITIONS)
    wc.fill(servers, topic_name, n)
    db = tmp_path / "state.sqlite"
    sink = tmp_path / "out"
    truth = wc.truth(n)
    faults = [
        FailTuples(component="split", probability=0.01, start=0.0, end=1.0),
        CrashTask(component="sink", task_index=1, at=0.5),
        CrashTask(component="count", task_index=0, at=0.8),
    ]

    async def main() -> None:
        topology = wc.build(servers, topic_name, sink)
        async with run_topology(topology, wc.conf(db), name="eo-sink", faults=faults):
            await until(
                lambda: len(wc.published(sink)) >= sum(truth.values()),
                timeout=90,
                what="every count published",
            )
            txid = wc.committed_txid(db, "eo-sink")
            await until(lambda: wc.committed_txid(db, "eo-sink") >= txid + 3, timeout=30)

    asyncio.run(main())
    assert wc.committed_counts(db, "eo-sink") == truth
    exactly_once_outputs(sink, truth)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_checkpointed_sink_publishes_each_output_once_after_sigkills(
    kafka_broker: LocalKafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    n = 5000
    servers = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic_name, wc.PARTITIONS)
    wc.fill(servers, topic_name, n)
    db = tmp_path / "state.sqlite"
    sink = tmp_path / "out"
    truth = wc.truth(n)
    wc.kill_campaign(
        ["tests.engine.kafka._eo_child", servers, topic_name, str(db), str(sink)],
        db,
        "eo-killed",
        truth,
    )
    exactly_once_outputs(sink, truth)
