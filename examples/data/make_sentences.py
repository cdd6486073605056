"""Builds ``sentences.parquet`` (the main job's input) from ``storm.txt``, deterministically.

    python examples/data/make_sentences.py      # rewrites examples/data/sentences.parquet

Every line of the text, ``REPEAT`` times, in an order shuffled with a fixed seed, numbered
0, 1, 2, ... in the ``id`` column: a stable, growing offset column for the offset spout.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
REPEAT = 1_500
SEED = 20_260_101


def sentences() -> list[str]:
    lines = [line.strip() for line in (HERE / "storm.txt").read_text(encoding="utf-8").splitlines()]
    pool = [line for line in lines if line] * REPEAT
    random.Random(SEED).shuffle(pool)
    return pool


def main() -> None:
    pool = sentences()
    table = pa.table({"id": pa.array(range(len(pool)), pa.int64()), "sentence": pool})
    pq.write_table(
        table,
        HERE / "sentences.parquet",
        compression="zstd",
        row_group_size=50_000,
        use_dictionary=["sentence"],
        column_encoding={"id": "DELTA_BINARY_PACKED"},
    )
    print(f"wrote {len(pool):,} sentences to {HERE / 'sentences.parquet'}")


if __name__ == "__main__":
    main()
