"""Run by test_checkpoints in a child process: the stateful word count on SQLite state,
printing ``MIDWAY`` once a checkpoint committed and some sentences were acked, then running
until the parent kills it with SIGKILL."""

from __future__ import annotations

import asyncio
import sys

import uvloop

from engine import run_topology
from engine.state import CHECKPOINT_COMPONENT_ID
from tests.engine.state.wordcount import build


async def main(db: str, acked: str, n: int, idempotent: bool) -> None:
    conf = {
        "topology.state.provider": "sqlite",
        "topology.state.provider.config": db,
        "topology.state.checkpoint.interval.ms": 50,
    }
    topology = build(n, idempotent=idempotent, interval_secs=0.0005, acked_path=acked)
    async with run_topology(topology, conf, name="killed") as running:
        (checkpoints,) = running.task_objects(CHECKPOINT_COMPONENT_ID).values()
        (spout,) = running.task_objects("sentences").values()
        while len(checkpoints.completed) < 6 or len(spout.acked) < n // 4:
            await asyncio.sleep(0.005)
        print("MIDWAY", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "1"))
