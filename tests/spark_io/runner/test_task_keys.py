"""The task keys of stateful and windowed bolts: each task in a state partition of its own."""

from __future__ import annotations

import random
from typing import Any

import pytest

from spark_io.runner._task_keys import SPREAD, spark_hash_int, task_index, task_keys


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 16, 900])
def test_task_i_hashes_to_i_modulo_840_and_keys_map_back(n: int) -> None:
    keys = task_keys(n)
    assert len(keys) == len(set(keys)) == n
    for i, key in enumerate(keys):
        assert spark_hash_int(key) % SPREAD == i % SPREAD
        assert task_index(key, n) == i


@pytest.mark.parametrize("partitions", [2, 3, 4, 8])
def test_the_tasks_of_a_bolt_fill_every_state_partition(partitions: int) -> None:
    assert sorted(spark_hash_int(k) % partitions for k in task_keys(partitions)) == list(
        range(partitions)
    )


def test_the_hash_is_sparks(spark: Any) -> None:
    from pyspark.sql import functions as F

    from spark_io.runner._task_keys import task_key_column

    rng = random.Random(3)
    values = [0, 1, -1, 2**31 - 1, -(2**31)] + [rng.randrange(-(2**31), 2**31) for _ in range(100)]
    rows = spark.createDataFrame([(v,) for v in values], "v INT").select("v", F.hash("v")).collect()
    assert [spark_hash_int(r[0]) for r in rows] == [r[1] for r in rows]
    keyed = spark.createDataFrame([(i,) for i in range(4)], "t INT").select(
        "t", task_key_column("t", 4).alias("k")
    )
    got = keyed.select("t", F.expr("pmod(hash(k), 4)")).collect()
    assert all(r[0] == r[1] for r in got)
