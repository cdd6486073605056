"""Barrier alignment against a model: whatever the interleaving of the inputs, a checkpoint
runs after every tuple each input sent before its barrier and before any tuple it sent
after. The gate is driven directly, as the executor drives it: every input item goes
through ``admit``, and what it yields is executed; its own collector is a fake."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from engine import BasicBolt, Fields
from engine._columnar.batch import TupleBatch
from engine._model.tuple import Source, Tuple
from engine._time.clock import SystemClock
from engine.state import CHECKPOINT_STREAM_ID, PREPARE, CheckpointTupleForwarder

UPSTREAM_TASKS = (1, 2, 3)


class Recorder(BasicBolt):
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def execute(self, tuple: Any, collector: Any) -> None:
        self.log.append(("data", tuple.source_task, tuple[0]))


class FakeControl:
    """The gate's own collector: barriers forwarded, acked and failed (as batches)."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log
        self.acked: list[Tuple] = []
        self.failed: list[Tuple] = []

    def emit_batch(self, data: Any, stream: str = "default", **anchoring: Any) -> int:
        if stream == CHECKPOINT_STREAM_ID:
            self.log.append(("checkpoint", data[0][0]))
        return 1

    def ack(self, batch: TupleBatch) -> None:
        self.acked.extend(batch.tuples())

    def fail(self, batch: TupleBatch) -> None:
        self.failed.extend(batch.tuples())

    def report_error(self, error: Any) -> None:
        raise AssertionError(error)


def fake_context() -> Any:
    sources = {("split", "default"): None, ("split", CHECKPOINT_STREAM_ID): None}
    return SimpleNamespace(
        get_raw_topology=lambda: SimpleNamespace(spouts={}),
        get_this_sources=lambda: sources,
        get_component_tasks=lambda component: list(UPSTREAM_TASKS),
        clock=SystemClock(),
    )


def gate(log: list[Any]) -> tuple[CheckpointTupleForwarder, FakeControl]:
    control = FakeControl(log)
    bolt = CheckpointTupleForwarder(Recorder(log))
    bolt.bind(
        control,  # type: ignore[arg-type]
        lambda: AssertionError("a forwarder holds no acks"),  # type: ignore[arg-type,return-value]
        lambda: 0,
    )
    bolt.prepare({}, fake_context())
    return bolt, control


def deliver(bolt: CheckpointTupleForwarder, item: list[Tuple] | TupleBatch) -> None:
    """One inbox item, as the executor hands it over: what the gate yields is executed."""
    for part in bolt.admit(item):
        for t in part.tuples() if isinstance(part, TupleBatch) else part:
            bolt.delegate.execute(t, None)


def per_task_streams(counts: list[list[int]]) -> dict[int, list[tuple[str, int]]]:
    """Task -> its FIFO sequence: data tuples ``(task, i)`` with a barrier after each block."""
    streams: dict[int, list[tuple[str, int]]] = {}
    for task, blocks in zip(UPSTREAM_TASKS, counts, strict=True):
        seq: list[tuple[str, int]] = []
        n = 0
        for txid, size in enumerate(blocks, start=1):
            for _ in range(size):
                seq.append(("data", n))
                n += 1
            seq.append(("barrier", txid))
        streams[task] = seq
    return streams


@settings(max_examples=200, deadline=None)
@given(
    blocks=st.lists(st.integers(0, 4), min_size=1, max_size=4).flatmap(
        lambda first: st.tuples(
            st.just(first),
            *[st.lists(st.integers(0, 4), min_size=len(first), max_size=len(first))] * 2,
        )
    ),
    order=st.randoms(use_true_random=False),
)
def test_checkpoints_cut_every_input_at_its_barrier(blocks: Any, order: Any) -> None:
    streams = per_task_streams([list(b) for b in blocks])
    log: list[Any] = []
    bolt, out = gate(log)
    fields = {"default": Fields("n"), CHECKPOINT_STREAM_ID: Fields("txid", "action")}
    positions = dict.fromkeys(UPSTREAM_TASKS, 0)
    delivered = dict.fromkeys(UPSTREAM_TASKS, 0)  # barriers delivered per task

    def ready(task: int) -> bool:
        # as the checkpoint spout does: barrier t+1 exists only once every copy of t is in
        if positions[task] >= len(streams[task]):
            return False
        kind, txid = streams[task][positions[task]]
        return kind == "data" or all(d >= txid - 1 for d in delivered.values())

    while any(positions[t] < len(streams[t]) for t in UPSTREAM_TASKS):
        task = order.choice([t for t in UPSTREAM_TASKS if ready(t)])
        kind, value = streams[task][positions[task]]
        positions[task] += 1
        delivered[task] += kind == "barrier"
        stream = CHECKPOINT_STREAM_ID if kind == "barrier" else "default"
        values = [value, PREPARE] if kind == "barrier" else [value]
        t = Tuple(values, Source("split", stream, task, fields[stream]), 7, 1)
        # barriers come from gates as one-row batches; data as lists, or batches
        as_batch = kind == "barrier" or order.random() < 0.3
        deliver(bolt, TupleBatch.from_tuples([t]) if as_batch else [t])

    # The model: checkpoint t comes after every data tuple before barrier t on each input,
    # and before every data tuple after it; every data tuple runs once, in FIFO order.
    n_checkpoints = len(blocks[0])
    assert [e for e in log if e[0] == "checkpoint"] == [
        ("checkpoint", t) for t in range(1, n_checkpoints + 1)
    ]
    epoch = 0
    seen: dict[int, list[int]] = {t: [] for t in UPSTREAM_TASKS}
    for event in log:
        if event[0] == "checkpoint":
            epoch += 1
            continue
        _, task, n = event
        seen[task].append(n)
        bounds = [sum(blocks[UPSTREAM_TASKS.index(task)][:k]) for k in range(n_checkpoints + 1)]
        assert n >= bounds[epoch], (event, epoch)  # not from before an earlier barrier
        assert epoch == n_checkpoints or n < bounds[epoch + 1], (event, epoch)
    for task in UPSTREAM_TASKS:
        assert seen[task] == list(range(len(seen[task])))
        assert len(seen[task]) == sum(blocks[UPSTREAM_TASKS.index(task)])
    barriers = sum(1 for t in out.acked if t.source_stream == CHECKPOINT_STREAM_ID)
    assert barriers == 3 * n_checkpoints and not out.failed


def test_a_barrier_of_another_checkpoint_abandons_the_alignment_and_fails_its_copies() -> None:
    log: list[Any] = []
    bolt, out = gate(log)
    src = Source("split", CHECKPOINT_STREAM_ID, 1, Fields("txid", "action"))
    deliver(bolt, [Tuple([1, PREPARE], src, 7, 1)])
    other = Source("split", "default", 2, Fields("n"))
    data = Tuple(["x"], Source("split", "default", 1, Fields("n")), 8, 1)
    deliver(bolt, [Tuple(["y"], other, 8, 1), data])  # x held back: task 1 delivered it
    assert log == [("data", 2, "y")]
    deliver(bolt, [Tuple([1, "ROLLBACK"], src, 9, 1)])  # the spout moved on
    assert [(t._root, list(t.values)) for t in out.failed] == [(7, [1, PREPARE])]
    assert log == [("data", 2, "y"), ("data", 1, "x")]  # released
