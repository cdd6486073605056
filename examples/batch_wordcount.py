"""The reliable word count on columnar batches: every sentence still its own tracked tree.

Run it: ``python examples/batch_wordcount.py``.

The spout emits 1,024 sentences per call with ``emit_batch`` (one message id per row); the
split bolt gets a whole ``TupleBatch`` and emits one list of words per sentence with
``emit_flat`` (each word anchored to its sentence); the count bolt counts a batch of words
at once. Acking is Storm's, per row: a sentence is acked once each of its words was
counted, and a failed row fails only its own tree. A per-tuple bolt could take the place
of either bolt unchanged: the engine hands it one ``Tuple`` view per row.
"""

import asyncio
import collections

from engine import BasicBatchBolt, Fields, Spout, TopologyBuilder, run_topology

SENTENCES = [f"the cat {i % 7} sat on the mat {i % 11}" for i in range(100_000)]


class Sentences(Spout):
    """Emits the sentences 1,024 at a time; replays what fails; done once all are acked."""

    def open(self, conf, context, collector):
        self.collector = collector
        self.next = 0
        self.retry = []
        self.acked = 0

    def next_tuple(self):
        if self.retry:
            ids, self.retry = self.retry[:1024], self.retry[1024:]
        elif self.next < len(SENTENCES):
            ids = range(self.next, min(self.next + 1024, len(SENTENCES)))
            self.next = ids.stop
        else:
            return
        self.collector.emit_batch([[SENTENCES[i] for i in ids]], msg_ids=ids)

    def ack_batch(self, msg_ids):  # acks in bulk (``ack(msg_id)`` per row works too)
        self.acked += len(msg_ids)

    def fail(self, msg_id):
        self.retry.append(msg_id)

    def is_exhausted(self):
        return self.acked == len(SENTENCES)

    def declare_output_fields(self, declarer):
        declarer.declare(["sentence"])


class Split(BasicBatchBolt):
    def execute_batch(self, batch, collector):
        # one list of output rows per input row: anchored to it, acked when this returns
        collector.emit_flat([sentence.split() for sentence in batch.column("sentence")])

    def declare_output_fields(self, declarer):
        declarer.declare(["word"])


class WordCount(BasicBatchBolt):
    def prepare(self, conf, context):
        self.counts = collections.Counter()

    def execute_batch(self, batch, collector):
        self.counts.update(batch.column("word"))  # the words of many sentences at once


def build():
    builder = TopologyBuilder()
    builder.set_spout("sentences", Sentences())
    builder.set_bolt("split", Split(), 2).shuffle_grouping("sentences")
    builder.set_bolt("count", WordCount(), 2).fields_grouping("split", Fields("word"))
    return builder.create_topology()


async def main():
    async with run_topology(build(), {"topology.max.spout.pending": 8192}) as running:
        await running.wait_until_complete(timeout=120)
        counts = collections.Counter()
        for bolt in running.task_objects("count").values():
            counts.update(bolt.counts)
        info = running.info()
    assert counts["cat"] == len(SENTENCES)
    print("top words:", counts.most_common(4))
    print("sentences acked:", info.components["sentences"].acked)


if __name__ == "__main__":
    asyncio.run(main())
