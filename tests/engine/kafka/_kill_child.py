"""Run by test_sigkill in a child process: a KafkaSpout (two tasks over three partitions)
into a bolt that appends ``partition offset`` to a file for each tuple it acks, and fails
a few tuples at random (they are retried). It prints READY once the spout opened and runs
until the parent kills it with SIGKILL."""

from __future__ import annotations

import asyncio
import random
import sys
from typing import Any

import uvloop

from engine import Bolt, TopologyBuilder, run_topology
from engine.kafka import KafkaSpout, KafkaSpoutConfig, KafkaSpoutRetryExponentialBackoff


class AppendAcked(Bolt):
    def __init__(self, path: str, seed: int) -> None:
        self.path = path
        self.seed = seed

    def prepare(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        self.rng = random.Random(self.seed)
        self.out = open(self.path, "a")  # noqa: SIM115 - open for the bolt's life

    def execute(self, tuple: Any) -> None:
        if self.rng.random() < 0.02:
            self.collector.fail(tuple)
            return
        # Written before the ack: whatever is acked is in the file (a write the kill cuts
        # short is a partial last line, which the parent ignores).
        self.out.write(f"{tuple[1]} {tuple[2]}\n")
        self.out.flush()
        self.collector.ack(tuple)

    def cleanup(self) -> None:
        self.out.close()

    def declare_output_fields(self, declarer: Any) -> None:
        pass


async def main(servers: str, topic: str, path: str, seed: int) -> None:
    config = KafkaSpoutConfig(
        servers,
        [topic],
        group_id=topic,
        offset_commit_period_ms=20,
        max_poll_records=200,
        # Failed tuples wait a while for their retry: a commit that passed them would show.
        retry=KafkaSpoutRetryExponentialBackoff(0.2, 0.2, None, 0.5),
    )
    builder = TopologyBuilder()
    builder.set_spout("kafka", KafkaSpout(config), 2)
    builder.set_bolt("acked", AppendAcked(path, seed), 2).shuffle_grouping("kafka")
    conf = {"topology.max.spout.pending": 100}
    async with run_topology(builder.create_topology(), conf, name="killed") as running:
        spouts = running.task_objects("kafka").values()
        while not all(getattr(s, "_consumer", None) is not None for s in spouts):
            await asyncio.sleep(0.005)
        print("READY", flush=True)
        await asyncio.sleep(3600)


if __name__ == "__main__":
    uvloop.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
