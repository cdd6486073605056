"""Reliable word count: Storm's classic, with every word anchored and acked.

    sentences (spout, message ids, replays failures)
      -> split (BasicBolt: one anchored tuple per word)
      -> count (BasicBolt, fields grouping on "word")

Run it: ``python examples/wordcount.py`` (or ``squall run examples.wordcount:build``).
It reads the bundled text ``examples/data/storm.txt`` ``--repeat`` times, exits by itself
once every sentence is acked, and prints the top words and the topology's stats.
"""

from __future__ import annotations

import argparse
import collections
import re
import sys
import time
from pathlib import Path
from typing import Any

import uvloop

from engine import (
    BasicBolt,
    Config,
    Fields,
    Spout,
    TopologyBuilder,
    format_stats,
    run_with_progress,
)

TEXT = Path(__file__).with_name("data") / "storm.txt"
_WORD = re.compile(r"[a-z']+")


class SentenceSpout(Spout):
    """Emits each line of ``lines`` ``repeat`` times with a message id; replays failures.

    Several tasks split the sentences between them (task index i takes every n-th).
    """

    def __init__(self, lines: list[str], repeat: int = 1) -> None:
        self.lines = lines
        self.repeat = repeat

    def open(self, conf: Any, context: Any, collector: Any) -> None:
        self.collector = collector
        n_tasks = len(context.get_component_tasks(context.get_this_component_id()))
        total = len(self.lines) * self.repeat
        self.ids = range(context.get_this_task_index(), total, n_tasks)
        self.next = 0
        self.replay: collections.deque[int] = collections.deque()
        self.acked = 0
        self.failed = 0

    def next_tuple(self) -> None:
        if self.replay:
            msg_id = self.replay.popleft()
        elif self.next < len(self.ids):
            msg_id = self.ids[self.next]
            self.next += 1
        else:
            return
        self.collector.emit([self.lines[msg_id % len(self.lines)]], msg_id=msg_id)

    def ack(self, msg_id: Any) -> None:
        self.acked += 1

    def fail(self, msg_id: Any) -> None:
        self.failed += 1
        self.replay.append(msg_id)

    def is_exhausted(self) -> bool:
        return self.acked == len(self.ids)

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["sentence"])


class SplitSentence(BasicBolt):
    def execute(self, tuple: Any, collector: Any) -> None:
        for word in _WORD.findall(tuple[0].lower()):
            collector.emit([word])

    def declare_output_fields(self, declarer: Any) -> None:
        declarer.declare(["word"])


class WordCount(BasicBolt):
    def prepare(self, conf: Any, context: Any) -> None:
        self.counts: collections.Counter[str] = collections.Counter()

    def execute(self, tuple: Any, collector: Any) -> None:
        self.counts[tuple[0]] += 1


def build(
    repeat: int = 2000, split_parallelism: int = 1, count_parallelism: int = 1
) -> tuple[Any, Config]:
    """The word-count topology over the bundled text, and its config."""
    lines = [line.strip() for line in TEXT.read_text(encoding="utf-8").splitlines() if line.strip()]
    builder = TopologyBuilder()
    builder.set_spout("sentences", SentenceSpout(lines, repeat))
    builder.set_bolt("split", SplitSentence(), split_parallelism).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), count_parallelism).fields_grouping(
        "split", Fields("word")
    )
    conf = Config()
    conf.set_max_spout_pending(20_000)
    conf.set_message_timeout_secs(30)
    return builder.create_topology(), conf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Reliable word count over the bundled text.")
    parser.add_argument("--repeat", type=int, default=2000, help="passes over the text")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    topology, conf = build(args.repeat)
    counts: collections.Counter[str] = collections.Counter()

    def collect(running: Any) -> None:
        for bolt in running.task_objects("count").values():
            counts.update(bolt.counts)

    start = time.perf_counter()
    info = uvloop.run(run_with_progress(topology, conf, name="wordcount", on_complete=collect))
    elapsed = time.perf_counter() - start
    sentences = info.components["sentences"].acked
    print(
        f"\ncounted {sum(counts.values()):,} words in {sentences:,} sentences "
        f"in {elapsed:.2f} s ({sentences / elapsed:,.0f} sentences/s, every word acked)"
    )
    print(f"top {args.top} words:")
    for word, n in counts.most_common(args.top):
        print(f"  {word:<12}{n:>10,}")
    print()
    print(format_stats(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())
