"""Exactly-once state from a replayable source: a stateful word count reading Kafka keeps
counts equal to the truth (not just at least the truth) through failed tuples, crashed
tasks and, in test_exactly_once_sigkill, SIGKILLs of the whole process."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import run_topology
from engine.kafka import LocalKafkaBroker
from engine.state import RewindableSpoutExecutor
from engine.testing import CrashTask, FailTuples

from . import eo_wordcount as wc
from .helpers import until

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[3]


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


@pytest.mark.timeout(300)
def test_counts_equal_the_truth_after_sigkills_at_random_points(
    kafka_broker: LocalKafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    n = 8000
    servers = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic_name, wc.PARTITIONS)
    wc.fill(servers, topic_name, n)
    db = tmp_path / "state.sqlite"
    truth = wc.truth(n)
    total = sum(truth.values())
    rng = random.Random(int(os.environ.get("SQUALL_TEST_SEED", "19")))
    seen: list[int] = []
    for _ in range(5):
        before = sum(wc.committed_counts(db, "eo-killed").values())
        child = start_child(servers, topic_name, db)
        # A random point of the run: once a random number of further words is committed,
        # plus a random fraction of a checkpoint interval.
        target = before + rng.randint(1, (total - before) // 3)
        deadline = time.monotonic() + 60
        while sum(wc.committed_counts(db, "eo-killed").values()) < target:
            assert time.monotonic() < deadline, "no progress"
            time.sleep(0.005)
        time.sleep(rng.uniform(0, 0.05))
        stop(child)
        counted = sum(wc.committed_counts(db, "eo-killed").values())
        assert counted <= total  # never a word counted twice, even between the kills
        seen.append(counted)
    child = start_child(servers, topic_name, db)
    try:
        deadline = time.monotonic() + 120
        while sum(wc.committed_counts(db, "eo-killed").values()) < total:
            assert time.monotonic() < deadline, "the last run did not finish"
            time.sleep(0.1)
        time.sleep(0.5)  # a few more checkpoints: nothing may be added
    finally:
        stop(child)
    assert wc.committed_counts(db, "eo-killed") == truth
    assert any(0 < c < total for c in seen), seen  # some kill landed mid-run


def start_child(servers: str, topic: str, db: Path) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.engine.kafka._eo_child", servers, topic, str(db)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"},
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    assert line.strip() == "READY", line
    return child


def stop(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.stdout is not None
    child.stdout.close()
