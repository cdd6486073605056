"""The grouping keys of stateful and windowed bolts: one per task, each in its own Spark
state partition.

Spark places a group of ``applyInPandasWithState`` (or ``transformWithStateInPandas``) in
state partition ``pmod(hash(key), P)`` (Murmur3, seed 42; ``P`` is
``spark.sql.shuffle.partitions``, fixed by the checkpoint). Grouped by the task index
itself, tasks 0 and 1 both hash to partition 1 of 2 (and to 3 of 4): the two tasks of a
bolt ran one after the other in one Spark task, on one core, and the other Spark task had
no rows. So each task gets a key of its own, the ``i``-th integer (from 0 on) whose hash
is ``i`` modulo 840 (the least common multiple of 1 to 8): for every ``P`` dividing 840
(1 to 8, 10, 12, 14, 15, 20, 24, ...), task ``i`` lands in partition ``i mod P``, so tasks
spread over the partitions as evenly as they can. The keys depend on the task index alone
(never on ``P``), so a restart finds each task's state under the same key.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = ["KEY_COLUMN", "spark_hash_int", "task_index", "task_key_column", "task_keys"]

#: The grouping column (the task's key).
KEY_COLUMN = "__task_key"

#: Keys spread evenly over any number of partitions dividing this.
SPREAD = 840

_MASK = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK


def spark_hash_int(value: int, seed: int = 42) -> int:
    """Spark's ``hash`` of an ``int`` (Murmur3 x86 32-bit, ``Murmur3_x86_32.hashInt``),
    as a signed 32-bit int."""
    k1 = (value & _MASK) * 0xCC9E2D51 & _MASK
    k1 = _rotl(k1, 15) * 0x1B873593 & _MASK
    h1 = seed ^ k1
    h1 = (_rotl(h1, 13) * 5 + 0xE6546B64) & _MASK
    h1 ^= 4
    h1 ^= h1 >> 16
    h1 = h1 * 0x85EBCA6B & _MASK
    h1 ^= h1 >> 13
    h1 = h1 * 0xC2B2AE35 & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


@functools.lru_cache(maxsize=64)
def task_keys(n: int) -> tuple[int, ...]:
    """The keys of tasks ``0`` to ``n - 1``: key ``i`` is the ``(i // 840 + 1)``-th
    non-negative int whose hash is ``i`` modulo 840."""
    keys: list[int | None] = [None] * n
    seen = [0] * SPREAD
    left = n
    k = 0
    while left:
        r = spark_hash_int(k) % SPREAD  # (Python's % is pmod)
        i = r + SPREAD * seen[r]
        seen[r] += 1
        if i < n:
            keys[i] = k
            left -= 1
        k += 1
    return tuple(k for k in keys if k is not None)


@functools.lru_cache(maxsize=64)
def _indexes(n: int) -> dict[int, int]:
    return {k: i for i, k in enumerate(task_keys(n))}


def task_index(key: int, n: int) -> int:
    """The task index of grouping key ``key`` among ``n`` tasks."""
    return _indexes(n)[int(key)]


def task_key_column(task: Any, n: int) -> Any:
    """The grouping column: the key of the task index in column ``task`` (``n`` tasks)."""
    from pyspark.sql import functions as F

    keys = F.array(*[F.lit(k).cast("int") for k in task_keys(n)])
    return F.element_at(keys, F.col(task) + 1)
