"""Run by test_offset_spout_exactly_once in a child process: the stateful word count
reading ``SparkOffsetSpout`` (``eo_offset_wordcount``) on SQLite state; prints READY once
its spouts opened (Spark is up) and runs until the parent kills it with SIGKILL."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import uvloop

from engine import run_topology
from spark_io import SessionConfig, spark_session
from tests.spark_io import eo_offset_wordcount as wc


async def main(source: str, checkpoints: str, db: str) -> None:
    topology = wc.build(Path(source), Path(checkpoints))
    async with run_topology(topology, wc.conf(Path(db)), name="spark-eo-killed"):
        print("READY", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    spark_session(SessionConfig(app_name="squall-eo-child", fast_start=True))
    uvloop.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
