"""The report of a running topology: ``TopologyInfo`` built from its executors and acker."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._execution.acker import AckerExecutor
from .._execution.executor import BoltExecutor, Executor, SpoutExecutor
from .._model.metrics import read_metric
from .._model.topology import StormTopology
from .._monitor.error_log import ErrorLog
from .._monitor.stats import ComponentStats, LatencySummary, TaskStats, TopologyInfo

__all__ = ["topology_info"]


def topology_info(
    *,
    name: str,
    status: str,
    seed: int,
    topology: StormTopology,
    executors: Sequence[Executor],
    acker: AckerExecutor,
    num_ackers: int,
    metrics: Mapping[int, Mapping[str, Any]],
    uptime_ns: int,
    errors: ErrorLog,
) -> TopologyInfo:
    """Per component and task: emitted, transferred, executed, acked, failed, ...; the
    acker's ledgers; every executor's queue."""
    components: dict[str, ComponentStats] = {}
    for cid in sorted(topology.components):
        spec = topology.components[cid]
        tasks: dict[int, TaskStats] = {}
        mine = [ex for ex in executors if ex.component_id == cid]
        for ex in mine:
            for t in ex.tasks:
                tasks[t] = task_stats(ex, t, metrics.get(t, {}), uptime_ns, errors)
        components[cid] = ComponentStats(
            cid, "spout" if spec.is_spout else "bolt", tasks, len(mine), errors.groups(cid)
        )
    queues = {
        f"{ex.component_id}{list(ex.tasks)}": {
            "capacity": ex.inbox.capacity,
            "queued": ex.inbox.size,
            "max_queued": ex.inbox.max_size,
            "blocked_puts": ex.inbox.blocked_puts,
        }
        for ex in executors
    }
    stats = [ledger.statistics() for ledger in acker.ledgers]
    acker_info = {
        "ackers": num_ackers,
        "pending_roots": sum(s.pending for s in stats),
        "acked": sum(s.acked for s in stats),
        "failed": sum(s.failed for s in stats),
        "timed_out": sum(s.timed_out for s in stats),
        "orphans": sum(s.orphans for s in stats),
        "timeouts_deferred_while_queued": acker.protected,
        "timed_out_while_queued": acker.timed_out_queued,
        "bytes_used": sum(s.bytes_used for s in stats),
    }
    pending = sum(ex.pending() for ex in executors if isinstance(ex, SpoutExecutor))
    return TopologyInfo(
        name=name,
        status=status,
        uptime_secs=uptime_ns / 1e9,
        seed=seed,
        components=components,
        pending_trees=pending,
        acker=acker_info,
        queues=queues,
    )


def task_stats(
    ex: Executor, task: int, metrics: Mapping[str, Any], uptime_ns: int, errors: ErrorLog
) -> TaskStats:
    emitted = {stream: r.emitted for stream, r in ex.routes[task].items()}
    transferred = ex.transferred[task]
    uptime_ns = max(1, uptime_ns)
    values = {name: read_metric(m) for name, m in metrics.items()}
    if isinstance(ex, SpoutExecutor):
        return TaskStats(
            task=task,
            emitted=emitted,
            transferred=transferred,
            executed=0,
            acked=ex.acked[task],
            failed=ex.failed[task],
            timed_out=ex.timed_out[task],
            complete_latency=ex.latency[task].summary(),
            execute_latency_ms=0.0,
            capacity=0.0,
            errors=errors.recent(task),
            pending=len(ex.collectors[task].pending) if task in ex.collectors else 0,
            metrics=values,
            error_count=errors.count(task),
        )
    assert isinstance(ex, BoltExecutor)
    executed = ex.executed[task]
    total = sum(ex.executed.values())
    busy = ex.busy_ns * (executed / total) if total else 0.0
    collector = ex.collectors.get(task)
    execute_latency = ex.execute_latency[task].summary()
    # A basic bolt acks each input as its execute returns: process = execute latency.
    # (Any other bolt's collector, rich or batch, measures it.)
    timed = ex.rich_collectors.get(task) or ex.batch_collectors.get(task)
    process_latency = (
        execute_latency if ex.is_basic or timed is None else timed.process_latency.summary()
    )
    return TaskStats(
        task=task,
        emitted=emitted,
        transferred=transferred,
        executed=executed,
        acked=collector.acked if collector else 0,
        failed=collector.failed if collector else 0,
        timed_out=0,
        complete_latency=LatencySummary.empty(),
        execute_latency_ms=busy / executed / 1e6 if executed else 0.0,
        capacity=busy / uptime_ns,
        errors=errors.recent(task),
        pending=0,
        metrics=values,
        execute_latency=execute_latency,
        process_latency=process_latency,
        error_count=errors.count(task),
    )
