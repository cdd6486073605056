"""A stateful word count reading Kafka, for the exactly-once tests (and their SIGKILL
child): sentences in a topic -> KafkaSpout -> split -> count (state in SQLite)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine import Fields, TopologyBuilder
from engine.kafka import KafkaSpout, KafkaSpoutConfig, RecordTranslator
from engine.state import CheckpointedFileSink
from tests.engine.state.wordcount import BasicCount, Split, sentences, truth

from .eo_campaign import COUNTERS, committed_counts, committed_txid, kill_campaign
from .helpers import produce

__all__ = [
    "build",
    "committed_counts",
    "committed_txid",
    "fill",
    "kill_campaign",
    "published",
    "sentences",
    "truth",
]


PARTITIONS = 2


def fill(servers: str, topic: str, n: int) -> None:
    """Sentence ``i`` into partition ``i % PARTITIONS``."""
    for p in range(PARTITIONS):
        produce(servers, topic, sentences(n)[p::PARTITIONS], partition=p)


def sentence(record: Any) -> list[str]:
    return [record.value().decode()]


def build(servers: str, topic: str, sink: Path | None = None, **options: Any) -> Any:
    """The word count; with ``sink``, the counts it emits go to a ``CheckpointedFileSink``
    writing there."""
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
    if sink is not None:
        builder.set_bolt("sink", CheckpointedFileSink(sink), 2).shuffle_grouping("count")
    return builder.create_topology()


def published(sink: Path) -> list[tuple[str, int]]:
    """Every ``(word, count)`` row the sink published (files under ``_staging`` are not)."""
    rows = []
    for path in sorted(sink.glob("part-*.jsonl")):
        with open(path, encoding="utf-8") as f:
            rows.extend((word, count) for word, count in map(json.loads, f))
    return rows


def conf(db: Path) -> dict[str, Any]:
    return {
        "topology.state.provider": "sqlite",
        "topology.state.provider.config": str(db),
        "topology.state.checkpoint.interval.ms": 50,
        "topology.max.spout.pending": 200,
        "topology.message.timeout.secs": 5,
    }
