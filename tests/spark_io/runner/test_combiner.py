"""Combiner bolts on Spark: partial aggregates before the shuffle give the same rows as
every raw row through it, and the same counts as the local engine."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

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
