"""What users tripped over on the runner: a failure's cause hidden below Spark's text, a
spout's last micro-batch never committed, one module's ``SPARK_SCHEMAS`` for two
topologies, empty transactions, and no word on where each component runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from engine import BasicBolt, TopologyBuilder
from spark_io import SparkIOError, SparkRunner
from spark_io.runner._compile import failure_line

from ..conftest import run
from .topologies import (
    SCHEMAS,
    SUBMIT_OUT_ENV,
    CommitLog,
    committed_numbers,
    read_commits,
    word_count,
)

ROOT = Path(__file__).resolve().parents[3]
SQUALL = "import sys; from engine._command.cli import main; sys.exit(main(sys.argv[1:]))"
BOLT_FAILED = (
    "bolt 'boom' task {task} raised ValueError('cannot take 7') in execute; on Spark the "
    "Spark task fails and is retried (spark.task.maxFailures), then the query fails"
)

#: The tail of Spark's text when a bolt task fails (a foreachBatch sink computes the batch).
SPARK_TEXT = """[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: \
[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in \
foreach batch sink. Reason: An exception was raised by the Python Proxy. Return Message: \
Traceback (most recent call last):
  File "/x/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
  File "/x/pyspark/errors/exceptions/captured.py", line 262, in deco
    raise converted from None
pyspark.errors.exceptions.captured.PythonException: An exception was thrown from the Python \
worker:
Traceback (most recent call last):
  File "/x/spark_io/_bolt_task.py", line 501, in _execute
    raise BoltFailure(
spark_io._bolt_task.BoltFailure: bolt 'boom' task 2 raised ValueError('cannot take 7') in \
execute; on Spark the Spark task fails and is retried (spark.task.maxFailures), then the \
query fails
 SQLSTATE: 39000 SQLSTATE: XXKST
=== Streaming Query ===
"""


def test_the_failure_line_is_the_bolt_task_failure_below_sparks_text() -> None:
    assert failure_line(SPARK_TEXT) == BOLT_FAILED.format(task=2)


def test_the_failure_line_is_a_workers_own_exception_when_no_bolt_failed() -> None:
    text = (
        "Return Message: Traceback (most recent call last):\n"
        "pyspark.errors.exceptions.captured.PythonException: An exception was thrown:\n"
        "Traceback (most recent call last):\n"
        '  File "spouts.py", line 3, in read\n'
        "KeyError: 'sentence'\n"
        "org.apache.spark.SparkException: Job aborted\n"
    )
    assert failure_line(text) == "KeyError: 'sentence'"
    assert failure_line("spark_io._errors.SinkError: sink 'out' failed: disk full") == (
        "sink 'out' failed: disk full"
    )
    assert failure_line("org.apache.spark.SparkException: Job aborted") is None


@pytest.mark.spark
def test_a_failed_query_says_which_bolt_task_raised_what_in_one_line(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from .topologies import submit_failing

    monkeypatch.setenv(SUBMIT_OUT_ENV, str(tmp_path))
    running = SparkRunner(spark).run(
        submit_failing(), {}, checkpoint_location=tmp_path / "ck", schemas={"boom": "n BIGINT"}
    )
    with pytest.raises(SparkIOError) as info:
        running.await_termination(120)
    message = str(info.value)
    assert message in {
        f"the topology's Spark query failed: {BOLT_FAILED.format(task=t)}" for t in (1, 2)
    }


def submit(tmp_path: Path, master: str, target: str) -> subprocess.CompletedProcess[str]:
    python_path = os.pathsep.join([str(ROOT / "src"), str(ROOT)])
    return subprocess.run(
        [
            sys.executable,
            "-c",
            SQUALL,
            "submit",
            "--runner",
            "spark",
            "--master",
            master,
            "--checkpoint",
            str(tmp_path / "ck"),
            "--spark-conf",
            "spark.driver.extraJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
            f"tests.spark_io.runner.topologies:{target}",
        ],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": python_path, SUBMIT_OUT_ENV: str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=280,
    )


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(300)  # a driver of its own
def test_squall_submit_ends_on_the_bolt_and_its_exception_with_task_retries(
    tmp_path: Path,
) -> None:
    done = submit(tmp_path, "local[2,2]", "submit_failing")
    assert done.returncode == 1, done.stderr[-3000:]
    last = done.stderr.rstrip().splitlines()[-1]
    assert last in {
        f"squall submit: the topology's Spark query failed: {BOLT_FAILED.format(task=t)}"
        for t in (1, 2)
    }


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.timeout(300)  # a driver of its own
def test_squall_submit_prints_the_plan_and_takes_its_types_from_a_shared_spark_schemas(
    spark: Any, tmp_path: Path
) -> None:
    # The module's SPARK_SCHEMAS also types the word count's bolts ('split', 'count').
    done = submit(tmp_path, "local[2]", "submit_squares")
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    assert lines[:5] == [
        "squall submit: the topology on Spark",
        "component      tasks  runs in           memory",
        "spout numbers  2      streaming source  positions in Spark's offset log; up to 20 "
        "rows per task per micro-batch",
        "bolt square    2      mapInArrow        one micro-batch (fields reset at each)",
        "sink sink      1      foreachBatch      appends each micro-batch (a restarted batch "
        "appends again)",
    ]
    assert lines[-1].endswith("ended after micro-batch 0")
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted((r.n, r.square) for r in rows) == [(n, n * n) for n in range(20)]


def test_a_shared_spark_schemas_gives_each_topology_its_own_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from spark_io.runner._submit import _module_schemas

    from . import topologies

    monkeypatch.setenv(SUBMIT_OUT_ENV, str(tmp_path))
    assert _module_schemas(topologies, topologies.submit_squares()) == {
        "square": "n BIGINT, square BIGINT"
    }
    assert _module_schemas(topologies, word_count(tmp_path, 10)) == SCHEMAS


class Collect(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        pass

    def declare_output_fields(self, declarer: Any) -> None:
        pass


@pytest.mark.spark
def test_every_micro_batch_commits_its_spout_and_only_non_empty_ones_publish(
    spark: Any, tmp_path: Path
) -> None:
    # Local mode: every acked row is committed, up to 50 per task.
    builder = TopologyBuilder()
    builder.set_spout("numbers", CommitLog(100, 10, tmp_path / "local.log"), 2)
    builder.set_bolt("collect", Collect(), 2).shuffle_grouping("numbers")
    info = run(builder.create_topology(), {}, timeout=60)
    assert list(info.errors) == []
    assert {t: ends[-1] for t, ends in read_commits(tmp_path / "local.log").items()} == {
        0: 50,
        1: 50,
    }

    # Spark: one commit per micro-batch and task, the last one included; only the first
    # micro-batch has numbers below 10, so only it publishes a transaction.
    log = tmp_path / "spark.log"
    running = SparkRunner(spark).run(
        committed_numbers(log, tmp_path / "out", limit=10),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas={"below": "n BIGINT"},
    )
    assert running.await_termination(120)
    assert len(running.query.recentProgress) == 5
    assert read_commits(log) == {0: [10, 20, 30, 40, 50], 1: [10, 20, 30, 40, 50]}
    published = sorted(p.name for p in (tmp_path / "out").glob("squall_txid=*"))
    assert published == [f"squall_txid=spark-{running.id}-{0:010d}"]
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.n for r in rows) == list(range(10))

    # A restart with no new data runs nothing and commits nothing again.
    again = SparkRunner(spark).run(
        committed_numbers(log, tmp_path / "out", limit=10),
        {},
        checkpoint_location=tmp_path / "ck",
        schemas={"below": "n BIGINT"},
    )
    assert again.await_termination(120)
    assert read_commits(log) == {0: [10, 20, 30, 40, 50], 1: [10, 20, 30, 40, 50]}


@pytest.mark.spark
def test_the_plan_says_where_each_component_runs_and_how_long_its_memory_lasts(
    spark: Any, tmp_path: Path
) -> None:
    compiled = SparkRunner(spark).compile(
        word_count(tmp_path / "out", 100), {}, schemas=SCHEMAS, batch_rows={"sentences": 50}
    )
    assert compiled.describe().splitlines() == [
        "component        tasks  runs in           memory",
        "spout sentences  2      streaming source  positions in Spark's offset log; up to 50 "
        "rows per task per micro-batch",
        "bolt split       2      mapInArrow        one micro-batch (fields reset at each)",
        "bolt count       3      mapInArrow        one micro-batch (fields reset at each)",
        "sink sink        1      foreachBatch      one transaction per non-empty micro-batch "
        "(exactly once)",
    ]


def test_a_transaction_partitioned_by_an_underscore_column_reads_its_keys_back(
    tmp_path: Path,
) -> None:
    # Spark writes a micro-batch partitioned by a column "_k" as "_k=1/part-*.parquet"
    # (with "_SUCCESS" and ".crc" beside): the keys are read back from the files Spark
    # lists, where pyarrow's own listing leaves every "_" name out (no rows, no column
    # "key": ArrowInvalid, and the micro-batch fails).
    import pyarrow as pa
    import pyarrow.parquet as pq

    from spark_io import SinkTarget, SparkSinkBolt
    from spark_io._txn import MANIFEST
    from spark_io.runner._compile import _BatchSink

    class Writer:
        def save(self, location: str) -> None:
            staged = Path(location)
            (staged / "_k=1").mkdir(parents=True)
            table = pa.table({"key": pa.array([3, 1, 2], pa.int64())})
            pq.write_table(table, staged / "_k=1" / "part-0.parquet")
            (staged / "_SUCCESS").write_bytes(b"")
            (staged / "_k=1" / ".part-0.parquet.crc").write_bytes(b"x")

    out = tmp_path / "out"
    target = SinkTarget.files(str(out), "parquet", partition_by=["_k"])
    sink = SparkSinkBolt(target, ["key", "_k"], transactional=True, key_field="key")
    batches = _BatchSink.__new__(_BatchSink)
    batches._query_id = "q"
    batches._publish("sink", sink, out, None, Writer(), 0)  # type: ignore[arg-type]
    (published,) = out.glob("squall_txid=*")
    assert (published / "_k=1" / "part-0.parquet").exists()
    manifest = (published / MANIFEST).read_text()
    assert '"starts": [1]' in manifest and '"ends": [4]' in manifest
