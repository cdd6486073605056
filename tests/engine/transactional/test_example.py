"""examples/transactional_count.py: the count is exact after random failures and a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from examples import transactional_count


def test_exact_through_a_file_backed_transactional_map(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = transactional_count.main(
        ["--sink", "file", "--out", str(tmp_path), "--size", "900", "--batch", "100"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == "exact"
    stored, expected = out.splitlines()[-3:-1]
    assert (
        stored.split("(")[0].replace("stored:", "").split()
        == expected.replace("expected:", "").split()
    )


@pytest.mark.spark
def test_exact_through_the_transactional_spark_sink(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("pyspark")
    code = transactional_count.main(
        ["--out", str(tmp_path), "--size", "600", "--batch", "150", "--pending", "2"]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.splitlines()[-1] == "exact"
    published = sorted(p.name for p in (tmp_path / "counts").glob("squall_txid=*"))
    assert published  # the rows went through the sink's atomic publish
