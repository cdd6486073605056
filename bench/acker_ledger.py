"""Benchmark: ``acker_kernel.AckerLedger`` against a plain Python dict ledger, same run.

The workload is Storm-shaped: tuple trees start at a steady rate, each sends an INIT and
1-4 ACKs spread over time (so ~1 million roots are pending at once), ~1 % of the trees are
failed (their later acks become orphans), ~1 % lose an ack and time out, ~2 % get a RESET.
Ops are applied in batches as the acker executor would, and ``expire`` runs every quarter
timeout (Storm's acker sweeps once per timeout). A warm-up phase first brings the ledger to
its steady state; the dict ledger starts from that same state (copied from the kernel's
``snapshot()``), then both apply the same measured operations and must agree on every
counter.

Also measured: the first compile and the warm import (fresh subprocesses with their own
``NUMBA_CACHE_DIR``), and the bytes per pending root.

    python bench/acker_ledger.py            # the full run (~1 minute)
    python bench/acker_ledger.py --quick    # a smaller run to try things out

The last line printed is one JSON object with the figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from numba import njit

try:
    import acker_kernel
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    import acker_kernel

from acker_kernel import MAX_LOAD_FACTOR, AckerLedger, Op, Outcome

INIT, ACK, FAIL, RESET = (int(op) for op in Op)
ACKED, FAILED, TIMED_OUT = (int(o) for o in Outcome)
NS_PER_OP = 100  # simulated time: ops arrive at 10 M/s


# --- the machine ------------------------------------------------------------------------------


def machine() -> dict[str, object]:
    import llvmlite.binding
    import numba

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        thp = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text().strip()
    except OSError:
        thp = "n/a"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "llvm": ".".join(map(str, llvmlite.binding.llvm_version_info)),
        "transparent_hugepages": thp,
    }


# --- start-up: first compile and warm import -----------------------------------------------------

_STARTUP = """
import time
t0 = time.perf_counter()
import numba
t1 = time.perf_counter()
import numpy as np
from acker_kernel import AckerLedger
ledger = AckerLedger(10**9)
ops = np.zeros(4, np.uint8)
ledger.apply(ops, np.arange(4, dtype=np.uint64), np.ones(4, np.uint64), np.ones(4, np.int32), 0)
ledger.due(2 * 10**9)
ledger.expire(2 * 10**9)
t2 = time.perf_counter()
print(t1 - t0, t2 - t0)
"""


def startup_times() -> tuple[float, float, float]:
    """(first compile, warm import, of which ``import numba``) in seconds, each measured in
    a fresh interpreter from before ``import numba`` to after a first tiny apply/due/expire."""
    src = str(Path(acker_kernel.__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory(prefix="acker-bench-cache-") as cache:
        env = {
            **os.environ,
            "NUMBA_CACHE_DIR": cache,
            "PYTHONPATH": os.pathsep.join(filter(None, [src, os.environ.get("PYTHONPATH")])),
        }
        runs = []
        for _ in range(2):
            done = subprocess.run(
                [sys.executable, "-c", _STARTUP],
                env=env,
                capture_output=True,
                text=True,
                check=True,
                timeout=300,
            )
            runs.append([float(x) for x in done.stdout.split()])
    (_, first), (numba_import, warm) = runs
    return first, warm, numba_import


# --- the workload ---------------------------------------------------------------------------------


class Workload:
    """``warm`` warm-up ops, then the measured ones; parallel arrays as ``apply`` takes them."""

    def __init__(self, n_ops: int, live: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        max_acks, fail_frac, lost_frac, reset_frac = 4, 0.01, 0.01, 0.02
        ops_per_tree = 1 + (1 + max_acks) / 2 + reset_frac
        # A tree's acks land uniformly in [start, start + span): the last of k acks comes
        # k/(k+1) of the span later on average; pick the span that keeps `live` pending.
        mean_last = np.mean([k / (k + 1) for k in range(1, max_acks + 1)])
        span = int(live * ops_per_tree / mean_last)
        self.warm = span
        self.timeout_ns = int(1.5 * span) * NS_PER_OP
        n_trees = int((n_ops + 2 * self.warm) / ops_per_tree)

        # Times are in ops (one op every NS_PER_OP of simulated time).
        roots = rng.integers(0, 2**64 - 1, n_trees, dtype=np.uint64, endpoint=True)
        spout = rng.integers(1, 9, n_trees).astype(np.int32)
        start = (np.arange(n_trees) * ops_per_tree).astype(np.int64)
        n_acks = rng.integers(1, max_acks + 1, n_trees)
        first_ack = np.concatenate(([0], np.cumsum(n_acks)[:-1]))
        ack_tree = np.repeat(np.arange(n_trees), n_acks)
        ack_val = rng.integers(0, 2**64 - 1, ack_tree.shape[0], dtype=np.uint64, endpoint=True)
        init_val = np.bitwise_xor.reduceat(ack_val, first_ack)  # the acks cancel the INIT
        ack_time = start[ack_tree] + rng.integers(0, span, ack_tree.shape[0])
        ack_op = np.full(ack_tree.shape[0], ACK, np.uint8)
        fate = rng.random(n_trees)
        ack_op[first_ack[fate < fail_frac]] = FAIL  # the tree's other acks come late: orphans
        keep = np.ones(ack_tree.shape[0], bool)
        keep[first_ack[(fate >= fail_frac) & (fate < fail_frac + lost_frac)]] = False  # times out
        reset_tree = np.flatnonzero(rng.random(n_trees) < reset_frac)
        reset_time = start[reset_tree] + rng.integers(0, span // 2, reset_tree.shape[0])

        tree = np.concatenate((np.arange(n_trees), ack_tree[keep], reset_tree))
        when = np.concatenate((start, ack_time[keep], reset_time))
        ops = np.concatenate(
            (
                np.full(n_trees, INIT, np.uint8),
                ack_op[keep],
                np.full(reset_tree.shape[0], RESET, np.uint8),
            )
        )
        values = np.concatenate((init_val, ack_val[keep], np.zeros(reset_tree.shape[0], np.uint64)))
        order = _order_by_time(when, int(when.max()) + 1)[: self.warm + n_ops]
        tree = tree[order]
        self.ops = ops[order]
        self.roots = roots[tree]
        self.values = values[order]
        self.spout_tasks = np.where(self.ops == INIT, spout[tree], 0).astype(np.int32)

    def __len__(self) -> int:
        return int(self.ops.shape[0])


@njit  # not cached: Numba's cache is unreliable for a script run as __main__
def _order_by_time(when: np.ndarray, n_times: int) -> np.ndarray:
    """A stable counting sort of integer times (an argsort of 17 M floats took 3-8 s)."""
    starts = np.zeros(n_times + 1, np.int64)
    for t in when:
        starts[t + 1] += 1
    for t in range(n_times):
        starts[t + 1] += starts[t]
    order = np.empty(when.shape[0], np.int64)
    for i in range(when.shape[0]):
        t = when[i]
        order[starts[t]] = i
        starts[t] += 1
    return order


def batches(lo: int, hi: int, size: int, tick: int) -> list[tuple[int, int, int, bool]]:
    """(first op, end op, now_ns, expire after it) for the batches of ops[lo:hi]."""
    plan = []
    next_tick = (lo // tick + 1) * tick
    for a in range(lo, hi, size):
        b = min(a + size, hi)
        sweep = b >= next_tick
        if sweep:
            next_tick += tick
        plan.append((a, b, b * NS_PER_OP, sweep))
    return plan


# --- the baseline: a plain Python dict ledger, same semantics ----------------------------------------


class DictLedger:
    """Storm's acker in plain Python: root -> [value, spout task or None, failed, deadline,
    start]; the same rules as ``AckerLedger`` (a failure wins over a zero value, ...)."""

    def __init__(self, timeout_ns: int) -> None:
        self.timeout_ns = timeout_ns
        self.pending: dict[int, list] = {}
        self.acked = self.failed = self.timed_out = self.orphans = 0

    def apply(self, ops, roots, values, spout_tasks, now):
        pending = self.pending
        deadline = now + self.timeout_ns
        done = []
        for op, root, value, task in zip(
            ops.tolist(), roots.tolist(), values.tolist(), spout_tasks.tolist(), strict=True
        ):
            entry = pending.get(root)
            if op == RESET:
                if entry is not None:
                    entry[3] = deadline
                continue
            if entry is None:
                entry = pending[root] = [0, None, False, deadline, now]
            if op == INIT:
                entry[0] ^= value
                entry[1] = task
            elif op == ACK:
                entry[0] ^= value
            else:
                entry[2] = True
                entry[3] = deadline
            if entry[1] is None:
                continue
            if entry[2]:
                self.failed += 1
                done.append((root, entry[1], FAILED, now - entry[4]))
            elif entry[0] == 0:
                self.acked += 1
                done.append((root, entry[1], ACKED, now - entry[4]))
            else:
                continue
            del pending[root]
        return done

    def expire(self, now):
        pending = self.pending
        done = []
        for root in [root for root, entry in pending.items() if entry[3] <= now]:
            entry = pending.pop(root)
            if entry[1] is None:
                self.orphans += 1
            else:
                self.timed_out += 1
                done.append((root, entry[1], TIMED_OUT, now - entry[4]))
        return done

    @classmethod
    def from_kernel(cls, ledger: AckerLedger) -> DictLedger:
        new = cls(ledger.timeout_ns)
        snap = ledger.snapshot()
        tasks = np.where(snap.spout_known, snap.spout_task, -1).tolist()
        for root, value, task, failed, deadline, start in zip(
            snap.root.tolist(),
            snap.value.tolist(),
            tasks,
            snap.failed.tolist(),
            snap.deadline_ns.tolist(),
            snap.start_ns.tolist(),
            strict=True,
        ):
            new.pending[root] = [value, None if task == -1 else task, failed, deadline, start]
        return new

    def approx_bytes(self) -> int:
        """dict + lists + the int objects they own (small ints are shared, not counted)."""
        size = sys.getsizeof(self.pending)
        for root, entry in self.pending.items():
            size += sys.getsizeof(root) + sys.getsizeof(entry)
            size += sum(sys.getsizeof(x) for x in (entry[0], entry[3], entry[4]))
        return size


# --- the runs ---------------------------------------------------------------------------------------


def run(ledger, w: Workload, plan) -> tuple[float, float, int, int]:
    """Apply the planned batches; return (apply s, expire s, sweeps, completions)."""
    ops, roots, values, tasks = w.ops, w.roots, w.values, w.spout_tasks
    t_apply = t_expire = 0.0
    sweeps = completed = 0
    clock = time.perf_counter
    for a, b, now, sweep in plan:
        t0 = clock()
        completed += len(ledger.apply(ops[a:b], roots[a:b], values[a:b], tasks[a:b], now))
        t1 = clock()
        t_apply += t1 - t0
        if sweep:
            completed += len(ledger.expire(now))
            t_expire += clock() - t1
            sweeps += 1
    return t_apply, t_expire, sweeps, completed


def counters(x) -> tuple[int, int, int, int]:
    if isinstance(x, AckerLedger):
        s = x.statistics()
        return s.acked, s.failed, s.timed_out, s.orphans
    return x.acked, x.failed, x.timed_out, x.orphans


def bytes_at_max_load(capacity: int) -> float:
    """bytes_used / pending for a ledger filled to its default load factor."""
    ledger = AckerLedger(initial_capacity=capacity)
    n = int(capacity * MAX_LOAD_FACTOR)
    roots = np.arange(1, n + 1, dtype=np.uint64)
    ledger.apply(np.zeros(n, np.uint8), roots, roots, np.ones(n, np.int32), now_ns=0)
    stats = ledger.statistics()
    assert stats.capacity == capacity and stats.pending == n
    return stats.bytes_used / stats.pending


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=10_000_000, help="measured operations")
    parser.add_argument("--live", type=int, default=1_000_000, help="pending roots to keep")
    parser.add_argument("--batch", type=int, default=16_384, help="operations per apply()")
    parser.add_argument("--repeat", type=int, default=3, help="kernel runs (best is reported)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--quick", action="store_true", help="1 M ops over 100 k live roots")
    args = parser.parse_args()
    if args.quick:
        args.ops, args.live = 1_000_000, 100_000

    info = machine()
    print("machine:", ", ".join(f"{k} {v}" for k, v in info.items()))
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

    first_compile, warm_import, numba_import = startup_times()
    print(
        f"start-up: first compile {first_compile:.2f} s, warm import {warm_import:.3f} s "
        f"(of which import numba {numba_import:.3f} s)"
    )

    t0 = time.perf_counter()
    w = Workload(args.ops, args.live, args.seed)
    measured = len(w) - w.warm
    kinds = np.bincount(w.ops[w.warm :], minlength=4)
    print(
        f"workload: {measured:,} measured ops after {w.warm:,} warm-up ops "
        f"(INIT {kinds[INIT]:,}, ACK {kinds[ACK]:,}, FAIL {kinds[FAIL]:,}, "
        f"RESET {kinds[RESET]:,}), timeout {w.timeout_ns / 1e9:.3f} s simulated, "
        f"batches of {args.batch:,}; built in {time.perf_counter() - t0:.1f} s"
    )
    tick = w.timeout_ns // NS_PER_OP // 4
    warm_plan = batches(0, w.warm, args.batch, tick)
    plan = batches(w.warm, len(w), args.batch, tick)

    # The kernel: warm up to the steady state, then time the measured ops; best of N.
    results = []
    baseline: DictLedger | None = None
    for _ in range(args.repeat):
        ledger = AckerLedger(w.timeout_ns)
        run(ledger, w, warm_plan)
        if baseline is None:  # the dict ledger starts from this very state
            t0 = time.perf_counter()
            baseline = DictLedger.from_kernel(ledger)
            copy_s = time.perf_counter() - t0
        before = ledger.statistics()
        start_counters = counters(ledger)
        cpu0 = time.process_time()
        t_apply, t_expire, sweeps, completed = run(ledger, w, plan)
        cpu = time.process_time() - cpu0
        results.append((t_apply + t_expire, t_apply, t_expire, sweeps, completed, cpu))
    after = ledger.statistics()
    best = min(results)
    total, t_apply, t_expire, sweeps, completed, cpu = best
    ops_per_s = measured / total
    median = sorted(r[0] for r in results)[len(results) // 2]
    print(
        f"kernel: {ops_per_s / 1e6:.1f} M ops/s ({total * 1e9 / measured:.1f} ns/op; "
        f"apply {t_apply:.3f} s, {sweeps} expire sweeps {t_expire:.3f} s; "
        f"best of {args.repeat}, median {measured / median / 1e6:.1f} M ops/s, "
        f"CPU time {measured / cpu / 1e6:.1f} M ops/s)"
    )
    print(
        f"        pending {before.pending:,} -> {after.pending:,}, capacity "
        f"{after.capacity:,}, {completed:,} completions"
    )

    # The dict ledger: the same state, the same ops. GC off while it runs (it only helps).
    assert baseline is not None
    print(f"dict:   state copied from the kernel's snapshot() in {copy_s:.1f} s")
    gc.collect()
    gc.disable()
    try:
        d_apply, d_expire, d_sweeps, d_completed = run(baseline, w, plan)
    finally:
        gc.enable()
    dict_ops_per_s = measured / (d_apply + d_expire)
    print(
        f"dict:   {dict_ops_per_s / 1e6:.2f} M ops/s ({(d_apply + d_expire) * 1e9 / measured:.0f}"
        f" ns/op; apply {d_apply:.1f} s, {d_sweeps} sweeps {d_expire:.1f} s; gc disabled)"
    )
    kernel_delta = tuple(b - a for a, b in zip(start_counters, counters(ledger), strict=True))
    agree = kernel_delta == counters(baseline) and d_completed == completed
    print(
        f"agree:  {'yes' if agree else 'NO'} (acked, failed, timed out, orphans: kernel "
        f"{kernel_delta}, dict {counters(baseline)})"
    )
    if not agree:
        raise SystemExit("the kernel and the dict ledger disagree")

    bytes_1m = after.bytes_used / after.pending
    bytes_max_load = bytes_at_max_load(after.capacity)
    dict_bytes = baseline.approx_bytes() / len(baseline.pending)
    print(
        f"memory: {bytes_max_load:.1f} B per pending root at the default load factor "
        f"({MAX_LOAD_FACTOR}); {bytes_1m:.1f} B at this run's {after.pending:,} pending roots "
        f"in {after.capacity:,} slots; the dict ledger ~{dict_bytes:.0f} B"
    )
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    print(
        json.dumps(
            {
                "ops_per_s": round(ops_per_s),
                "dict_ops_per_s": round(dict_ops_per_s),
                "ratio_vs_dict": round(ops_per_s / dict_ops_per_s, 1),
                "bytes_per_pending_root": round(bytes_max_load, 1),
                "first_compile_s": round(first_compile, 3),
                "warm_import_s": round(warm_import, 3),
                "ops": measured,
                "pending_roots": after.pending,
                "bytes_per_pending_root_this_run": round(bytes_1m, 1),
                "dict_bytes_per_pending_root": round(dict_bytes),
                "ops_per_s_median": round(measured / median),
                "cpu_ops_per_s": round(measured / cpu),
                "batch": args.batch,
                "expire_sweeps": sweeps,
                "numba_import_s": round(numba_import, 3),
            }
        )
    )


if __name__ == "__main__":
    main()
