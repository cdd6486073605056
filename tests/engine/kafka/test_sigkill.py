"""The topology process SIGKILLed at random points, again and again, then restarted on the
same consumer group: no committed offset ever passes a tuple that was not acked, and in
the end every record was processed at least once."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.kafka import LocalKafkaBroker

from .helpers import committed, produce

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[3]
PARTITIONS = 3
PER_PARTITION = 4000


def acked(path: Path) -> set[tuple[int, int]]:
    if not path.exists():
        return set()
    found = set()
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:  # a line the kill cut short is not a record
            found.add((int(parts[0]), int(parts[1])))
    return found


def run_child(servers: str, topic: str, path: Path, seed: int) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.engine.kafka._kill_child",
            servers,
            topic,
            str(path),
            str(seed),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
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


@pytest.mark.timeout(300)
def test_sigkill_at_random_points_never_commits_past_an_unacked_tuple(
    kafka_broker: LocalKafkaBroker, topic_name: str, tmp_path: Path
) -> None:
    servers = kafka_broker.bootstrap_servers
    kafka_broker.create_topic(topic_name, PARTITIONS)
    for p in range(PARTITIONS):
        produce(servers, topic_name, range(PER_PARTITION), partition=p)
    path = tmp_path / "acked.txt"
    rng = random.Random(int(os.environ.get("SQUALL_TEST_SEED", "19")))
    kills = 0
    progress = []
    total = PARTITIONS * PER_PARTITION
    for run in range(40):
        child = run_child(servers, topic_name, path, seed=run)
        # A random point of the run: after a random number of further acks.
        target = min(len(acked(path)) + rng.randint(100, 2500), total)
        deadline = time.monotonic() + 60
        while len(acked(path)) < target and time.monotonic() < deadline:
            time.sleep(0.002)
        stop(child)
        kills += 1
        commits = committed(servers, topic_name, topic_name, PARTITIONS)
        done = acked(path)
        for p, offset in enumerate(commits):
            # Every offset below the commit was acked (and so written before the kill).
            missing = [o for o in range(offset or 0) if (p, o) not in done]
            assert missing == [], f"run {run}: partition {p} committed {offset} past {missing[:5]}"
        progress.append(commits)
        if kills >= 5 and all(c == PER_PARTITION for c in commits):
            break
    assert kills >= 5
    # A last run finishes what is left: then every record was processed at least once.
    child = run_child(servers, topic_name, path, seed=99)
    try:
        deadline = time.monotonic() + 120
        while committed(servers, topic_name, topic_name, PARTITIONS) != [PER_PARTITION] * 3:
            assert time.monotonic() < deadline, "the last run did not finish"
            time.sleep(0.1)
    finally:
        stop(child)
    done = acked(path)
    assert done == {(p, o) for p in range(PARTITIONS) for o in range(PER_PARTITION)}
    # The kills landed mid-run: some commit was strictly between the start and the end.
    assert any(0 < (c or 0) < PER_PARTITION for commits in progress for c in commits), progress
