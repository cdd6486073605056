"""Quick start: a reliable word count that ends by itself, then prints its results.

Run it: ``python examples/quickstart.py`` (or ``squall run examples.quickstart:build``,
``squall visualize examples.quickstart:build``).
"""

import asyncio
import collections

from engine import BasicBolt, Config, Fields, Spout, TopologyBuilder, run_topology

SENTENCES = ["the cat sat on the mat", "the dog ate my homework", "four score and seven"]


class Sentences(Spout):
    """Emits each sentence 100 times with a message id, replays what fails, and says it is
    done (``is_exhausted``) once every sentence was acked."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.todo = collections.deque(range(100 * len(SENTENCES)))  # message ids
        self.acked = 0

    def next_tuple(self):  # must not block; return if there is nothing to emit
        if self.todo:
            msg_id = self.todo.popleft()
            self.collector.emit([SENTENCES[msg_id % len(SENTENCES)]], msg_id=msg_id)

    def ack(self, msg_id):  # the whole tuple tree was processed
        self.acked += 1

    def fail(self, msg_id):  # failed or timed out: replay it (at-least-once)
        self.todo.append(msg_id)

    def is_exhausted(self):  # lets wait_until_complete() return
        return self.acked == 100 * len(SENTENCES)

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])


class Split(BasicBolt):  # emits anchored to the input; the input is acked on return
    def execute(self, tuple, collector):
        for word in tuple["sentence"].split():
            collector.emit([word])

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class WordCount(BasicBolt):
    def prepare(self, conf, context):
        self.counts = collections.Counter()

    def execute(self, tuple, collector):
        self.counts[tuple["word"]] += 1


def build():
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences())
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), 2).fields_grouping("split", Fields("word"))
    conf = Config()
    conf.set_max_spout_pending(1000)
    return builder.create_topology(), conf  # create_topology validates, naming the culprit


async def main():
    topology, conf = build()
    async with run_topology(topology, conf, name="word-count") as running:
        await running.wait_until_complete(timeout=60)  # spouts exhausted, nothing pending
        counts = collections.Counter()
        for bolt in running.task_objects("count").values():  # each task's WordCount
            counts.update(bolt.counts)
        info = running.info()
    print("top words:", counts.most_common(3))
    print("sentences acked:", info.components["sentences"].acked)


if __name__ == "__main__":
    asyncio.run(main())
