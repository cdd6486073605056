"""The SIGKILL campaign of the exactly-once tests: a stateful word count (state in SQLite,
split -> count on ``COUNTERS`` tasks) run in a child process, killed at random points and
restarted, must end with counts equal to the truth. Free of any source's client library,
so the Kafka and the Spark tests share it."""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from engine.state import SqliteStateStore, decode

__all__ = ["COUNTERS", "committed_counts", "committed_txid", "kill_campaign"]

ROOT = Path(__file__).resolve().parents[3]
COUNTERS = 2


def committed_counts(db: Path, name: str) -> collections.Counter[str]:
    """The committed counts of every count task, read from the SQLite file."""
    total: collections.Counter[str] = collections.Counter()
    if not db.exists():
        return total
    for task in range(COUNTERS):
        store = SqliteStateStore(db, f"{name}/count/{task}")
        try:
            for key, value in store.load().items():
                total[decode(key)] += decode(value)
        finally:
            store.close()
    return total


def committed_txid(db: Path, name: str) -> int:
    """The last checkpoint the topology ``name`` committed (its checkpoint spout's txid)."""
    if not db.exists():
        return 0
    store = SqliteStateStore(db, f"{name}/__checkpoint_spout/0")
    try:
        entries = {decode(k): decode(v) for k, v in store.load().items()}
    finally:
        store.close()
    return int(entries.get("txid", 0)) if entries.get("phase") == "COMMITTED" else 0


def _wait(condition: Callable[[], bool], timeout: float, what: str) -> None:
    """Poll ``condition`` (it reads the state file another process writes) until it holds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout} s: {what}"
        time.sleep(0.005)


def kill_campaign(
    args: Sequence[str],
    db: Path,
    name: str,
    truth: collections.Counter[str],
    *,
    kills: int = 5,
    ready_timeout: float = 120,
    finish_timeout: float = 120,
) -> list[int]:
    """Run the child ``python -m args...`` (a word count writing its state to ``db`` under
    the topology name ``name``; it prints READY once running), SIGKILL it at ``kills``
    random points, start it again each time, and let the last run count everything.

    A random point: once a random number of further words is committed, plus a random
    fraction of a checkpoint interval. After each kill no word may be counted twice; after
    the last run has counted every word, three more checkpoints commit (the state is read
    between them) and must add nothing. Returns the counts seen at the kills."""
    total = sum(truth.values())
    rng = random.Random(int(os.environ.get("SQUALL_TEST_SEED", "19")))

    def counted() -> int:
        return sum(committed_counts(db, name).values())

    seen: list[int] = []
    for _ in range(kills):
        before = counted()
        child = _start(args, ready_timeout)
        target = before + rng.randint(1, max(1, (total - before) // 3))
        try:
            _wait(lambda t=target: counted() >= t, 60, f"{target} words counted")
            time.sleep(rng.uniform(0, 0.05))  # where in a checkpoint interval: the random point
        finally:
            _kill(child)
        now = counted()
        assert now <= total  # never a word counted twice, even between the kills
        seen.append(now)
    child = _start(args, ready_timeout)
    try:
        _wait(lambda: counted() >= total, finish_timeout, "the last run counts every word")
        txid = committed_txid(db, name)
        _wait(lambda: committed_txid(db, name) >= txid + 3, 30, "three more checkpoints")
    finally:
        _kill(child)
    final = committed_counts(db, name)
    assert final == truth, (seen, final - truth, truth - final)
    assert any(0 < c < total for c in seen), seen  # some kill landed mid-run
    return seen


def _start(args: Sequence[str], timeout: float) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-m", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'src'}"},
    )
    assert child.stdout is not None
    try:
        _wait_line(child, timeout)
    except BaseException:
        _kill(child)
        raise
    return child


def _wait_line(child: subprocess.Popen[str], timeout: float) -> None:
    import selectors

    assert child.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(child.stdout, selectors.EVENT_READ)
        assert sel.select(timeout), f"the child did not start within {timeout} s"
    line = child.stdout.readline()
    assert line.strip() == "READY", f"the child said {line!r} (exit code {child.poll()})"


def _kill(child: subprocess.Popen[str]) -> None:
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    assert child.stdout is not None
    child.stdout.close()
