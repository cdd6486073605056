"""Run by test_end_to_end in a child process: starts the end-to-end topology on a working
directory and prints ``MIDWAY`` once the transactional sink has published some rows, then
keeps running until the parent kills it with SIGKILL."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import uvloop

from engine import run_topology
from spark_io import SessionConfig, spark_session
from tests.spark_io.test_end_to_end import build


async def main(work: Path) -> None:
    async with run_topology(build(work), {"topology.max.spout.pending": 60}) as running:
        sinks = running.task_objects("exactly_once").values()
        while sum(s.rows_written for s in sinks) < 100:
            await asyncio.sleep(0.01)
        print("MIDWAY", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    spark_session(SessionConfig(app_name="squall-crash-child", fast_start=True))
    uvloop.run(main(Path(sys.argv[1])))
