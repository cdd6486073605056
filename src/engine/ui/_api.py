"""The REST API's JSON, shaped like Storm UI's (``/api/v1/...``), built from ``TopologyInfo``.

Keys follow Storm UI's (``spoutId``, ``boltId``, ``completeLatency``, ``executeLatency``,
``processLatency``, ``capacity``, ``topologyStats``, ``executorStats``, ``componentErrors``);
latencies are in milliseconds (means over the window; the whole run also gives p50 / p99 /
max), ``window`` is ``":all-time"`` or a number of seconds. Additions Storm does not have:
``timedOut``, ``queue`` (inbox depth per executor), ``traceback`` on errors, ``series``
(throughput and latency per sampler interval).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from .._model.topology import StormTopology
from .._monitor.stats import ComponentStats, ErrorInfo, LatencySummary, TopologyInfo
from ._sampler import WINDOWS, Counts, StatsSampler, WindowCounts

__all__ = [
    "ALL_TIME",
    "MAX_BODY_DEPTH",
    "component_json",
    "error_json",
    "parse_body",
    "parse_window",
    "topology_json",
    "topology_summary_json",
    "window_pretty",
]

ALL_TIME = ":all-time"
#: Errors listed per component (newest last); the engine keeps its own bound per task.
LAST_ERRORS = 10
_QUEUE_KEY = re.compile(r"^(?P<component>.*)\[(?P<tasks>[\d, ]*)\]$")
#: The deepest nesting of arrays and objects a request body may have. The API's bodies nest
#: three levels; Python's JSON parser recurses per level and a body nested some thousands
#: deep would raise ``RecursionError`` inside it, so depth is checked before parsing.
MAX_BODY_DEPTH = 16
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_JSON_BRACKET = re.compile(rb"[\[\]{}]")


def parse_body(raw: bytes, what: str) -> Any:
    """The JSON value of a request body (``{}`` when empty); ``ValueError`` names ``what``
    and says what is wrong: not UTF-8, not JSON, or nested deeper than ``MAX_BODY_DEPTH``."""
    if not raw.strip():
        return {}
    depth = deepest = 0
    for bracket in _JSON_BRACKET.findall(_JSON_STRING.sub(b'""', raw)):
        depth += 1 if bracket in b"[{" else -1
        if depth > deepest:
            deepest = depth
            if deepest > MAX_BODY_DEPTH:
                raise ValueError(
                    f"{what} body nests arrays or objects more than {MAX_BODY_DEPTH} levels deep"
                )
    try:
        return json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError(f"{what} body is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} body is not JSON: {exc}") from None


def parse_window(raw: str | None) -> float | None:
    """``None`` / ``":all-time"`` / ``"all-time"``: the whole run; else seconds > 0."""
    if raw is None or raw in (ALL_TIME, "all-time", ""):
        return None
    try:
        secs = float(raw)
    except ValueError:
        secs = math.nan
    if not math.isfinite(secs) or secs <= 0:
        raise ValueError(
            f"window must be {ALL_TIME!r} or a number of seconds > 0 (e.g. "
            f"{', '.join(map(str, WINDOWS))}), got {raw!r}"
        )
    return secs


def window_pretty(window: float | None) -> str:
    """Storm UI's ``windowPretty``: ``"10 min"``, ``"3 h"``, ``"All time"``."""
    if window is None:
        return "All time"
    if window % 3600 == 0:
        return f"{window / 3600:g} h"
    if window % 60 == 0:
        return f"{window / 60:g} min"
    return f"{window:g} s"


def _window_key(window: float | None) -> str:
    return ALL_TIME if window is None else f"{window:g}"


def _ms(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _latency(summary: LatencySummary) -> dict[str, float] | None:
    if not summary.count:
        return None
    return {
        "mean": round(summary.mean_ms, 4),
        "p50": round(summary.p50_ms, 4),
        "p99": round(summary.p99_ms, 4),
        "max": round(summary.max_ms, 4),
    }


def error_json(error: ErrorInfo, uptime_secs: float) -> dict[str, Any]:
    """One error as Storm UI lists it (``errorLapsedSecs``: how long ago, from the uptime),
    with the traceback Storm does not keep."""
    return {
        "component": error.component,
        "task": error.task,
        "time": round(error.time_secs, 3),
        "errorLapsedSecs": round(max(uptime_secs - error.time_secs, 0.0), 3),
        "error": error.error,
        "traceback": error.traceback,
    }


def _executor_of(info: TopologyInfo) -> dict[tuple[str, int], tuple[list[int], dict[str, int]]]:
    """(component, task) -> (the executor's tasks, its inbox stats), from ``info.queues``."""
    found: dict[tuple[str, int], tuple[list[int], dict[str, int]]] = {}
    for key, queue in info.queues.items():
        m = _QUEUE_KEY.match(key)
        if m is None:
            continue
        tasks = [int(t) for t in m["tasks"].replace(" ", "").split(",") if t]
        for t in tasks:
            found[(m["component"], t)] = (tasks, dict(queue))
    return found


def _counts_json(kind: str, c: Counts, span_secs: float, executors: int) -> dict[str, Any]:
    out: dict[str, Any] = {
        "emitted": c.emitted,
        "transferred": c.transferred,
        "acked": c.acked,
        "failed": c.failed,
    }
    if kind == "spout":
        out["timedOut"] = c.timed_out
        out["completeLatency"] = _ms(c.complete_latency_ms)
    else:
        out["executed"] = c.executed
        out["executeLatency"] = _ms(c.execute_latency_ms)
        out["processLatency"] = _ms(c.process_latency_ms)
        # Storm's capacity: share of the window an executor spent executing (busiest one).
        out["capacity"] = round(c.busy_secs / span_secs / max(executors, 1), 4) if span_secs else 0
    return out


def _component_row(
    comp: ComponentStats, counts: WindowCounts, info: TopologyInfo
) -> dict[str, Any]:
    c = counts.component(comp.id)
    row: dict[str, Any] = {
        "spoutId" if comp.kind == "spout" else "boltId": comp.id,
        "type": comp.kind,
        "executors": comp.executors,
        "tasks": len(comp.tasks),
        **_counts_json(comp.kind, c, counts.span_secs, 1),
    }
    if comp.kind == "bolt":  # capacity: the busiest task, as Storm shows the busiest executor
        spans = [
            counts.tasks[(comp.id, t)].busy_secs / counts.span_secs if counts.span_secs else 0.0
            for t in comp.tasks
            if (comp.id, t) in counts.tasks
        ]
        row["capacity"] = round(max(spans, default=0.0), 4)
    if comp.kind == "spout":
        row["pending"] = sum(t.pending for t in comp.tasks.values())
    whole = [
        t.complete_latency if comp.kind == "spout" else t.execute_latency
        for t in comp.tasks.values()
    ]
    worst = max((s for s in whole if s.count), key=lambda s: s.p99_ms, default=None)
    row["latencyP99"] = round(worst.p99_ms, 4) if worst is not None else None
    errors = comp.errors
    row["errors"] = comp.error_count
    row["lastError"] = errors[-1].error if errors else ""
    row["errorLapsedSecs"] = (
        round(max(info.uptime_secs - errors[-1].time_secs, 0.0), 3) if errors else None
    )
    return row


def topology_summary_json(info: TopologyInfo) -> dict[str, Any]:
    """One entry of ``/api/v1/topology/summary``."""
    return {
        "id": info.name,
        "name": info.name,
        "status": info.status,
        "uptimeSeconds": round(info.uptime_secs, 3),
        "uptime": _pretty_secs(info.uptime_secs),
        "executorsTotal": sum(c.executors for c in _user(info)),
        "tasksTotal": sum(len(c.tasks) for c in _user(info)),
        "pendingTrees": info.pending_trees,
        "emitted": sum(c.emitted for c in _user(info) if c.kind == "spout"),
        "acked": sum(c.acked for c in _user(info) if c.kind == "spout"),
        "failed": sum(c.failed for c in _user(info) if c.kind == "spout"),
        "errors": info.error_count,
    }


def _user(info: TopologyInfo) -> list[ComponentStats]:
    return [c for cid, c in info.components.items() if not cid.startswith("__")]


def _pretty_secs(secs: float) -> str:
    s = int(secs)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m}m {s}s" if h else f"{m}m {s}s" if m else f"{secs:.1f}s"


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return repr(value)


def topology_json(
    info: TopologyInfo,
    topology: StormTopology,
    conf: Mapping[str, Any],
    sampler: StatsSampler,
    window: float | None,
) -> dict[str, Any]:
    """``/api/v1/topology/{id}``: the topology's stats over ``window`` and over windows."""
    counts = sampler.window(info, window)
    spouts = [c for c in _user(info) if c.kind == "spout"]
    stats = []
    for w in (*WINDOWS, None):
        wc = counts if w == window else sampler.window(info, w)
        total = Counts()
        for c in spouts:
            total = total.plus(wc.component(c.id))
        stats.append(
            {
                "window": _window_key(w),
                "windowPretty": window_pretty(w),
                "spanSeconds": round(wc.span_secs, 3),
                "emitted": total.emitted,
                "transferred": total.transferred,
                "acked": total.acked,
                "failed": total.failed,
                "timedOut": total.timed_out,
                "completeLatency": _ms(total.complete_latency_ms),
                "ackedPerSec": round(total.acked / wc.span_secs, 3) if wc.span_secs else 0.0,
            }
        )
    return {
        **topology_summary_json(info),
        "seed": info.seed,
        "window": _window_key(window),
        "windowHint": window_pretty(window),
        "spanSeconds": round(counts.span_secs, 3),
        "windows": [ALL_TIME, *(_window_key(w) for w in WINDOWS)],
        "topologyStats": stats,
        "spouts": [_component_row(c, counts, info) for c in spouts],
        "bolts": [_component_row(c, counts, info) for c in _user(info) if c.kind == "bolt"],
        "acker": dict(info.acker),
        "topologyErrors": [error_json(e, info.uptime_secs) for e in info.errors[-LAST_ERRORS:]],
        "series": sampler.series({c.id for c in spouts}),
        "configuration": {k: _jsonable(v) for k, v in sorted(conf.items())},
        "streams": [
            {
                "component": sub.component,
                "stream": sub.stream,
                "target": bolt.id,
                "grouping": repr(sub.grouping),
            }
            for bolt in topology.bolts.values()
            for sub in bolt.inputs
        ],
    }


def component_json(
    info: TopologyInfo,
    topology: StormTopology,
    component_id: str,
    sampler: StatsSampler,
    window: float | None,
) -> dict[str, Any]:
    """``/api/v1/topology/{id}/component/{component}``: per task stats, errors, streams.

    Raises ``KeyError`` for an unknown component.
    """
    comp = info.components[component_id]
    counts = sampler.window(info, window)
    executors = _executor_of(info)
    tasks = []
    for task, stats in sorted(comp.tasks.items()):
        c = counts.tasks.get((component_id, task), Counts())
        exec_tasks, queue = executors.get((component_id, task), ([task], {}))
        row: dict[str, Any] = {
            "task": task,
            "id": f"[{exec_tasks[0]}-{exec_tasks[-1]}]",
            **_counts_json(comp.kind, c, counts.span_secs, 1),
            "queue": queue,
            "errors": stats.error_count,
            "metrics": {k: _jsonable(v) for k, v in stats.metrics.items()},
        }
        if comp.kind == "spout":
            row["pending"] = stats.pending
            row["completeLatencyAllTime"] = _latency(stats.complete_latency)
        else:
            row["executeLatencyAllTime"] = _latency(stats.execute_latency)
            row["processLatencyAllTime"] = _latency(stats.process_latency)
        tasks.append(row)
    spec = topology.components[component_id]
    return {
        "id": component_id,
        "topologyId": info.name,
        "name": info.name,
        "componentType": comp.kind,
        "executors": comp.executors,
        "tasks": len(comp.tasks),
        "window": _window_key(window),
        "windowHint": window_pretty(window),
        "spanSeconds": round(counts.span_secs, 3),
        "stats": _component_row(comp, counts, info),
        "executorStats": tasks,
        "componentErrors": [error_json(e, info.uptime_secs) for e in comp.errors[-LAST_ERRORS:]],
        "inputs": [
            {"component": s.component, "stream": s.stream, "grouping": repr(s.grouping)}
            for s in spec.inputs
        ],
        "outputs": [
            {"stream": stream, "fields": list(si.fields), "direct": si.direct}
            for stream, si in spec.streams.items()
        ],
    }
