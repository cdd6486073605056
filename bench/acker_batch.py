"""Micro-benchmark: the batch acking kernels (``acker_kernel._batch``) against plain
numpy / Python doing the same work, in the same run.

The workload is a columnar word count: batches of 1024 sentences x 8 words. Per batch:
root and edge ids for every sentence and word, each sentence's ack value (XOR of its words'
edge ids), the words' roots (``gather_roots``), the ACKs of the split bolt (one per
sentence) and of the count bolt (``ack_ops`` folds a sentence's eight word ACKs into one),
then the acker applies them to an ``AckerLedger`` that already holds ``--pending`` trees.
Two deliveries:

* ``whole``: a batch holds every op of its sentences (INIT, split acks, count acks);
* ``straddling``: a batch holds the INITs and split acks of its sentences and the count
  acks of the previous batch's (the engine's case: the acker runs between the bolts).

Figures are ns per word (8192 words per batch; apply also per op), best of ``--repeat``;
``TreeIdSource.draw`` is also timed per id at n = 1, 256 and 4096.

    python bench/acker_batch.py            # ~1 minute
    python bench/acker_batch.py --quick

The last line printed is one JSON object with the figures.

Results before the ACK folding, 0c59a42 (AMD EPYC, 2 vCPUs shared with other jobs, load
average 1.7-4, CPython 3.11.7, numpy 2.4, numba 0.68), ns per word, best of 7:

    ids (1 root + 1 spout edge per sentence, 1 edge per word)  kernel 1.4   numpy Generator 6.5   Python random 164
    TreeIdSource.draw_into per id: n=1 ~1100 (the call), n=256 5.5, n=4096 1.4
    XOR per anchor                                             kernel 1.2   np.bitwise_xor.at 9.7
    ack ops (count bolt, one per word, unfolded)               kernel 2.4   np.where 3.1
    apply unfolded (200,000 trees pending)                     14-17 (per op 11-14)

With the count bolt's ACKs folded per sentence a batch is 3 ops per sentence instead of
10, so the ledger's share falls to about a third (run it for today's figures).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

try:
    import acker_kernel
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import acker_kernel

from acker_kernel import AckerLedger, Op, TreeIdSource, ack_ops, gather_roots, xor_per_anchor

SENTENCES = 1024
WORDS = 8
INIT, ACK, FAIL, RESET = (int(op) for op in Op)


def machine() -> dict[str, object]:
    import numba

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "acker_kernel": str(Path(acker_kernel.__file__).parent),
    }


def best_ns(fn: Callable[[], object], repeat: int, inner: int = 1) -> float:
    """Best wall time of ``inner`` calls, over ``repeat`` rounds, per call."""
    fn()  # warm up (compiles or loads the kernels)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter_ns()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter_ns() - start) / inner)
    return best


# --- the naive versions: plain numpy / Python doing the same work -----------------------------


def naive_ids(rnd: random.Random, n: int) -> np.ndarray:
    # What a row-at-a-time engine does: one Python random draw per tuple (0 retried).
    out = []
    for _ in range(n):
        e = rnd.getrandbits(64)
        while e == 0:
            e = rnd.getrandbits(64)
        out.append(e)
    return np.array(out, np.uint64)


def numpy_ids(gen: np.random.Generator, n: int) -> np.ndarray:
    return gen.integers(1, 2**64, size=n, dtype=np.uint64, endpoint=False)


def numpy_xor_per_anchor(anchor: np.ndarray, edges: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, np.uint64)
    np.bitwise_xor.at(out, anchor, edges)
    return out


def numpy_ack_ops(
    roots: np.ndarray, edges: np.ndarray, acks: np.ndarray, acked: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ops = np.where(acked, np.uint8(ACK), np.uint8(FAIL)).astype(np.uint8)
    values = np.where(acked, edges ^ acks, np.uint64(0))
    return ops, roots.copy(), values


# --- the workload -------------------------------------------------------------------------------


class Batch:
    """One batch of sentences with every id and array the acking needs."""

    def __init__(self, ids: TreeIdSource) -> None:
        self.roots = ids.draw(SENTENCES)
        self.spout_edges = ids.draw(SENTENCES)
        self.anchor = np.repeat(np.arange(SENTENCES, dtype=np.int64), WORDS)
        self.word_edges = ids.draw(SENTENCES * WORDS)
        self.acks = xor_per_anchor(self.anchor, self.word_edges, SENTENCES)
        self.split = ack_ops(self.roots, self.spout_edges, self.acks, np.arange(SENTENCES))
        word_roots, _ = gather_roots(self.roots, self.anchor)
        self.count = ack_ops(word_roots, self.word_edges, None, np.arange(SENTENCES * WORDS))
        self.init = (
            np.full(SENTENCES, INIT, np.uint8),
            self.roots,
            self.spout_edges,
            np.ones(SENTENCES, np.int32),
        )

    def first_half(self) -> list[tuple[np.ndarray, ...]]:
        return [self.init, acks(self.split)]

    def second_half(self) -> list[tuple[np.ndarray, ...]]:
        return [acks(self.count)]


def acks(a: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, ...]:
    """``ack_ops``'s output as ledger ops."""
    n = a[0].shape[0]
    return (np.full(n, ACK, np.uint8), a[0], a[1], np.zeros(n, np.int32))


def concat(parts: list[tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
    return tuple(np.concatenate(column) for column in zip(*parts, strict=True))


def preload(ledger: AckerLedger, ids: TreeIdSource, pending: int) -> None:
    """Trees in flight elsewhere: INITs whose acks never come in this run."""
    if pending:
        roots = ids.draw(pending)
        ops = np.full(pending, INIT, np.uint8)
        ledger.apply(ops, roots, ids.draw(pending), np.ones(pending, np.int32), now_ns=0)


def run(args: argparse.Namespace) -> dict[str, object]:
    repeat = args.repeat
    words = SENTENCES * WORDS
    figures: dict[str, object] = {"machine": machine(), "sentences": SENTENCES, "words": WORDS}

    # 1. ids
    source = TreeIdSource(7)
    per_id = {}
    for n in (1, 256, 4096):
        out = np.empty(n, np.uint64)
        per_id[n] = best_ns(lambda out=out: source.draw_into(out), repeat, inner=200) / n
    rnd = random.Random(7)
    gen = np.random.default_rng(7)
    figures["ids_ns_per_id"] = {str(n): round(v, 2) for n, v in per_id.items()}
    n_ids = 2 * SENTENCES + words
    figures["ids_ns_per_word"] = {
        "kernel": best_ns(lambda: source.draw(n_ids), repeat, inner=20) / words,
        "numpy_generator": best_ns(lambda: numpy_ids(gen, n_ids), repeat, inner=20) / words,
        "python_random": best_ns(lambda: naive_ids(rnd, n_ids), repeat) / words,
    }

    # 2, 3: ack values and ack ops
    batch = Batch(source)
    figures["xor_per_anchor_ns_per_word"] = {
        "kernel": best_ns(
            lambda: xor_per_anchor(batch.anchor, batch.word_edges, SENTENCES), repeat, inner=20
        )
        / words,
        "numpy_xor_at": best_ns(
            lambda: numpy_xor_per_anchor(batch.anchor, batch.word_edges, SENTENCES), repeat
        )
        / words,
    }
    word_roots = batch.roots[batch.anchor]
    every = np.arange(words, dtype=np.int64)
    acked = np.ones(words, bool)
    zeros = np.zeros(words, np.uint64)
    figures["gather_roots_ns_per_word"] = {
        "kernel": best_ns(lambda: gather_roots(batch.roots, batch.anchor), repeat, inner=20)
        / words,
        "numpy_take": best_ns(lambda: batch.roots[batch.anchor], repeat, inner=20) / words,
    }
    figures["ack_ops_ns_per_word"] = {
        "kernel_folded": best_ns(
            lambda: ack_ops(word_roots, batch.word_edges, None, every), repeat, inner=20
        )
        / words,
        "numpy_where_unfolded": best_ns(
            lambda: numpy_ack_ops(word_roots, batch.word_edges, zeros, acked), repeat, inner=20
        )
        / words,
    }

    # 4. apply, on a ledger holding ``pending`` other trees
    apply_figures: dict[str, object] = {}
    batches = [Batch(source) for _ in range(args.batches + 1)]
    deliveries = {
        "whole": [concat(b.first_half() + b.second_half()) for b in batches[1:]],
        "straddling": [
            concat(b.first_half() + prev.second_half()) for prev, b in itertools.pairwise(batches)
        ],
    }
    for name, stream in deliveries.items():
        n_ops = sum(ops[0].shape[0] for ops in stream)

        def apply_only(stream: list[tuple[np.ndarray, ...]] = stream) -> int:
            ledger = AckerLedger(10**12)
            preload(ledger, TreeIdSource(99), args.pending)
            start = time.perf_counter_ns()
            for now, (ops, roots, values, tasks) in enumerate(stream):
                ledger.apply(ops, roots, values, tasks, now_ns=now)
            return time.perf_counter_ns() - start

        apply_only()  # warm up
        took = min(apply_only() for _ in range(repeat))
        apply_figures[name] = {
            "ops_per_batch": n_ops // len(stream),
            "apply_ns_per_op": round(took / n_ops, 2),
            "apply_ns_per_word": round(took / (len(stream) * words), 2),
        }
    figures["apply"] = apply_figures
    figures["pending_trees"] = args.pending
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer batches and rounds")
    parser.add_argument("--pending", type=int, default=200_000, help="trees already pending")
    args = parser.parse_args()
    args.repeat = 3 if args.quick else 7
    args.batches = 8 if args.quick else 32
    figures = run(args)
    m = figures["machine"]
    print(f"machine: {m}")  # type: ignore[index]
    print(f"{SENTENCES} sentences x {WORDS} words per batch; {args.pending} trees pending")
    print("TreeIdSource.draw_into, ns per id:", figures["ids_ns_per_id"])
    keys = (
        "ids_ns_per_word",
        "xor_per_anchor_ns_per_word",
        "gather_roots_ns_per_word",
        "ack_ops_ns_per_word",
    )
    for key in keys:
        row = figures[key]
        print(f"{key:28}", "  ".join(f"{k} {v:8.2f}" for k, v in row.items()))  # type: ignore[attr-defined]
    for name, row in figures["apply"].items():  # type: ignore[attr-defined]
        print(f"apply, {name}:")
        for k, v in row.items():
            print(f"    {k:42} {v}")
    for key in keys:
        figures[key] = {k: round(v, 2) for k, v in figures[key].items()}  # type: ignore[attr-defined]
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
