"""A spout task's root ids: consecutive, unlike edge ids (see ``SpoutBatchEmitter._roots``)."""

from __future__ import annotations

from engine._collector import SpoutCollector

from .test_xor import Host, route


def emitted_roots(collector: SpoutCollector, host: Host, n: int) -> list[int]:
    for i in range(n):
        collector.emit([f"w{i}"], msg_id=i)
    collector.seal()
    _, roots, _, _ = host.acker_ops.take()
    return list(roots.tolist())


def test_a_spout_task_roots_are_consecutive_and_its_edges_random() -> None:
    """Consecutive roots keep the pending map's inserts and pops side by side; the edge
    ids, whose XOR tells a tree complete, stay random."""
    host = Host()
    collector = SpoutCollector(host, 1, route("s", (3,)), acking=True)  # type: ignore[arg-type]
    first = emitted_roots(collector, host, 40)
    second = emitted_roots(collector, host, 40)
    roots = first + second
    assert roots == list(range(roots[0], roots[0] + 80))
    assert sorted(collector.pending) == roots
    edges = [e for batch in host.out[3] for e in batch.edges.tolist()]  # type: ignore[index]
    assert len(edges) == 80 and edges != sorted(edges)


def test_roots_skip_zero_when_they_reach_the_end_of_the_ids() -> None:
    host = Host()
    collector = SpoutCollector(host, 1, route("s", (3,)), acking=True)  # type: ignore[arg-type]
    collector._batch._next_root = 2**64 - 30
    assert emitted_roots(collector, host, 20) == list(range(2**64 - 30, 2**64 - 10))
    assert emitted_roots(collector, host, 20) == list(range(1, 21))
