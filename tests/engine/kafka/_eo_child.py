"""Run by test_exactly_once in a child process: the stateful word count reading Kafka
(``eo_wordcount``) on SQLite state, with a ``CheckpointedFileSink`` when a fourth argument
names its directory; prints READY once its spouts opened and runs until the
parent kills it with SIGKILL."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import uvloop

from engine import run_topology
from tests.engine.kafka import eo_wordcount as wc


async def main(servers: str, topic: str, db: str, sink: str | None) -> None:
    topology = wc.build(servers, topic, Path(sink) if sink else None)
    async with run_topology(topology, wc.conf(Path(db)), name="eo-killed") as running:
        spouts = running.task_objects("kafka").values()
        while not all(getattr(s.delegate, "_consumer", None) is not None for s in spouts):
            await asyncio.sleep(0.005)
        print("READY", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], sys.argv[2], sys.argv[3], (sys.argv[4:] or [None])[0]))
