"""A stateful word count reading ``SparkOffsetSpout``, for the exactly-once tests (and
their SIGKILL child): sentences in parquet files -> SparkOffsetSpout -> split -> count
(state in SQLite)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine import Fields, StormTopology, TopologyBuilder
from spark_io import SparkOffsetSpout, SparkSource
from tests.engine.kafka.eo_campaign import COUNTERS
from tests.engine.state.wordcount import BasicCount, Split, sentences

FILES = 6


def fill(source: Path, n: int) -> None:
    """Sentence ``i`` with offset ``i``, over ``FILES`` parquet files of small row groups
    (Spark reads them as several partitions, in no particular offset order)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    source.mkdir(parents=True, exist_ok=True)
    text = sentences(n)
    for f in range(FILES):
        ids = list(range(f, n, FILES))
        table = pa.table({"id": ids, "sentence": [text[i] for i in ids]})
        pq.write_table(table, source / f"part-{f}.parquet", row_group_size=200)


def build(source: Path, checkpoints: Path) -> StormTopology:
    spout = SparkOffsetSpout(
        SparkSource.files(str(source), format="parquet"),
        "id",
        ["sentence"],
        checkpoint_dir=checkpoints,
        chunk_rows=250,
        commit_interval_secs=0.1,
    )
    builder = TopologyBuilder()
    builder.set_spout("sentences", spout, 2)
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", BasicCount(), COUNTERS).fields_grouping("split", Fields("word"))
    return builder.create_topology()


def conf(db: Path) -> dict[str, Any]:
    return {
        "topology.state.provider": "sqlite",
        "topology.state.provider.config": str(db),
        "topology.state.checkpoint.interval.ms": 50,
        "topology.max.spout.pending": 400,
        "topology.message.timeout.secs": 10,
    }
