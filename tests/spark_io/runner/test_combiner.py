"""Combiner bolts on Spark: partial aggregates before the shuffle give the same rows as
every raw row through it, and the same counts as the local engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine import CombinerBolt, SumCombiner
from spark_io import SparkRunner

from ..conftest import run
from .topologies import COMBINER_SCHEMAS, combined_word_count, expected_counts, read_counts

pytestmark = pytest.mark.spark

SENTENCES = 2000


def rows(spark: Any, out: Path) -> list[tuple[str, int]]:
    return sorted((r.word, r["count"]) for r in spark.read.parquet(str(out)).collect())


@pytest.mark.parametrize("user", [False, True], ids=["CountCombiner", "user-written"])
def test_a_combiner_gives_the_same_rows_with_and_without_partials_and_the_engines_counts(
    spark: Any, tmp_path: Path, user: bool
) -> None:
    expected = expected_counts(SENTENCES)
    info = run(combined_word_count(tmp_path / "local", SENTENCES, user), {}, timeout=90)
    assert list(info.errors) == []
    assert read_counts(spark, tmp_path / "local") == expected

    runner = SparkRunner(spark)
    for combine in (True, False):
        compiled = runner.compile(
            combined_word_count(tmp_path / f"spark{combine}", SENTENCES, user),
            {},
            schemas=COMBINER_SCHEMAS,
            combine=combine,
        )
        split = compiled.layouts["split"]
        assert [s.stream for s in split.streams] == (
            ["default", "__partial:count:default"] if combine else ["default"]
        )
        running = runner.start(compiled, checkpoint_location=tmp_path / f"ck{combine}")
        assert running.await_termination(120)
    with_partials = rows(spark, tmp_path / "sparkTrue")
    assert with_partials == rows(spark, tmp_path / "sparkFalse")
    assert len(with_partials) == len(expected) * 2  # one row per word and micro-batch
    assert read_counts(spark, tmp_path / "sparkTrue") == expected


class SumOrNothing(CombinerBolt):
    """A sum whose combine takes a missing value (None) as nothing: Arrow's ``sum``."""

    arrow_combine = "sum"
    value_field = "bytes"

    def zero(self) -> int:
        return 0

    def combine(self, a: Any, b: Any) -> Any:
        return a if b is None else a + b

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["host", "total"])


def test_an_arrow_combine_over_null_values_calls_the_bolts_combine_as_the_engine_does() -> None:
    # Arrow's sum skipped nulls silently (a key of nulls only summed to null), where the
    # engine calls the bolt's combine with None: SumCombiner fails, a combine that takes
    # None gets its own answer.
    pa = pytest.importorskip("pyarrow")
    from spark_io.runner._combine import Accumulator, CombineSpec

    hosts = pa.array(["a", "b", "a", "c"])
    values = pa.array([1, None, 2, 5], pa.int64())
    tolerant = SumOrNothing()
    acc = Accumulator(CombineSpec.of("sum", tolerant, typed=True), tolerant)
    assert acc.spec.arrow == "sum"
    acc.add([hosts], values)
    acc.add([pa.array(["b"])], pa.array([None], pa.int64()))
    keys, totals, rows = acc.result()
    assert rows == 3
    got = dict(zip(keys[0].to_pylist(), totals.to_pylist(), strict=True))
    assert got == {"a": 3, "b": 0, "c": 5}  # as the engine: combine(combine(0, None), None)
    adding = SumCombiner("bytes", ["host", "total"])
    acc = Accumulator(CombineSpec.of("sum", adding, typed=True), adding)
    with pytest.raises(TypeError):  # the engine's execute_batch raises it too
        acc.add([hosts], values)


def test_an_arrow_sum_past_a_long_fails_where_it_wrapped_around() -> None:
    # Arrow's hash sum of int64 wraps silently: 2**62 + 2**62 was -2**63. The engine sums
    # Python ints, and a 2**63 does not fit the BIGINT it is written as.
    pa = pytest.importorskip("pyarrow")
    from spark_io.runner._combine import Accumulator, CombineSpec

    adding = SumCombiner("bytes", ["host", "total"])
    acc = Accumulator(CombineSpec.of("sum", adding, typed=True), adding)
    acc.add([pa.array(["a", "b"])], pa.array([2**62, -(2**62)], pa.int64()))
    acc.add([pa.array(["a", "b"])], pa.array([2**62 - 1, -(2**62)], pa.int64()))
    keys, totals, _ = acc.result()  # 2**63 - 1 and -2**63 still fit
    assert keys[0].to_pylist() == ["a", "b"]
    assert totals.to_pylist() == [2**63 - 1, -(2**63)]
    with pytest.raises(OverflowError) as info:
        acc.add([pa.array(["a", "a"])], pa.array([2**62, 2**62], pa.int64()))
    assert str(info.value) == (
        "combiner bolt 'sum': the sum of key ('a',) is 9223372036854775808, past a 64-bit "
        "integer's range"
    )
