"""A stateful word count reading Kafka, for the exactly-once tests (and their SIGKILL
child): sentences in a topic -> KafkaSpout -> split -> count (state in SQLite)."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

from engine import Fields, TopologyBuilder
from engine.kafka import KafkaSpout, KafkaSpoutConfig, RecordTranslator
from engine.state import SqliteStateStore, decode
from tests.engine.state.wordcount import BasicCount, Split, sentences, truth

from .helpers import produce

__all__ = ["build", "committed_counts", "fill", "sentences", "truth"]

PARTITIONS = 2
COUNTERS = 2


def fill(servers: str, topic: str, n: int) -> None:
    """Sentence ``i`` into partition ``i % PARTITIONS``."""
    for p in range(PARTITIONS):
        produce(servers, topic, sentences(n)[p::PARTITIONS], partition=p)


def sentence(record: Any) -> list[str]:
    return [record.value().decode()]


def build(servers: str, topic: str, **options: Any) -> Any:
    config = KafkaSpoutConfig(
        servers,
        [topic],
        group_id=topic,
        record_translator=RecordTranslator(sentence, ["sentence"]),
        offset_commit_period_ms=100,
        max_poll_records=50,
        **options,
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config), PARTITIONS)
    builder.set_bolt("split", Split(), 2).shuffle_grouping("kafka")
    builder.set_bolt("count", BasicCount(), COUNTERS).fields_grouping("split", Fields("word"))
    return builder.create_topology()


def conf(db: Path) -> dict[str, Any]:
    return {
        "topology.state.provider": "sqlite",
        "topology.state.provider.config": str(db),
        "topology.state.checkpoint.interval.ms": 50,
        "topology.max.spout.pending": 200,
        "topology.message.timeout.secs": 5,
    }


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
