"""Run by test_driver_crash and test_windows in a child process (its own process group):
starts the slow word count (or, with ``windows``, the slow windowed topology; with
``windows-no-late``, the same without its late stream: one path from the window to the
leaves) on Spark and prints ``MIDWAY batch=N`` once a micro-batch N >= 1 is planned (its
offsets logged), not yet published nor committed, with an earlier one published; then
waits for the parent's SIGKILL."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from spark_io import RUNNER_SPARK_CONF, SessionConfig, SparkRunner, spark_session
from tests.spark_io.runner.topologies import SCHEMAS, slow_word_count

SENTENCES = 1000
BATCH_ROWS = 125


def main(work: Path, which: str = "word_count") -> None:
    spark = spark_session(
        SessionConfig(app_name="squall-runner-crash", fast_start=True, conf=RUNNER_SPARK_CONF)
    )
    if which.startswith("windows"):
        from tests.spark_io.runner.windows import WAVE, WINDOW_SCHEMAS, windowed

        late = which == "windows"
        SparkRunner(spark).run(
            windowed(work / "out", delay=0.3, late=late),
            {},
            checkpoint_location=work / "ck",
            schemas=WINDOW_SCHEMAS if late else {"windows": WINDOW_SCHEMAS["windows"]},
            batch_rows={"events": WAVE},
        )
        out = work / "out" / "windows"
    else:
        SparkRunner(spark).run(
            slow_word_count(work / "out", SENTENCES),
            {},
            checkpoint_location=work / "ck",
            schemas=SCHEMAS,
            batch_rows={"sentences": BATCH_ROWS},
        )
        out = work / "out"
    offsets, commits = work / "ck" / "offsets", work / "ck" / "commits"
    while True:
        planned = [int(p.name) for p in offsets.glob("[0-9]*")] if offsets.is_dir() else []
        published = list(out.glob("squall_txid=*")) if out.is_dir() else []
        if planned and published:
            batch = max(planned)
            if (
                batch >= 1
                and not (commits / str(batch)).exists()
                and not any(p.name.endswith(f"-{batch:010d}") for p in published)
            ):
                print(f"MIDWAY batch={batch}", flush=True)
                time.sleep(3600)
        time.sleep(0.005)


if __name__ == "__main__":
    main(Path(sys.argv[1]), *sys.argv[2:3])
