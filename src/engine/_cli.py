"""The ``squall`` command: ``squall run MODULE:FUNCTION`` runs a topology locally.

``FUNCTION`` returns a ``StormTopology`` or a ``(StormTopology, conf)`` pair. The run shows a
live line of progress and ends with a stats table; it stops by itself when every spout is
exhausted and nothing is pending, or on Ctrl-C / ``--timeout``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import importlib
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from ._errors import SquallError
from ._loop import run_sync
from ._runtime import RunningTopology, run_topology
from ._stats import TopologyInfo
from ._topology import StormTopology

__all__ = ["format_stats", "main", "run_with_progress"]


def _progress_line(info: TopologyInfo, elapsed: float, rate: float) -> str:
    spouts = [c for c in info.components.values() if c.kind == "spout"]
    acked = sum(c.acked for c in spouts)
    failed = sum(c.failed for c in spouts)
    return (
        f"{elapsed:7.1f}s  {rate:>10,.0f} tuples/s  pending {info.pending_trees:>7,}  "
        f"acked {acked:>10,}  failed {failed:>7,}  errors {len(info.errors):>4,}"
    )


def format_stats(info: TopologyInfo) -> str:
    """A table of per-component stats, like Storm UI's component summary."""
    header = (
        f"{'component':<16}{'tasks':>6}{'emitted':>12}{'transferred':>13}{'executed':>12}"
        f"{'acked':>12}{'failed':>9}{'latency ms':>14}{'capacity':>10}"
    )
    lines = [
        f"topology {info.name!r}: {info.status}, uptime {info.uptime_secs:.2f} s, seed {info.seed}",
        header,
        "-" * len(header),
    ]
    for cid, comp in info.components.items():
        if cid.startswith("__"):
            continue
        tasks = list(comp.tasks.values())
        if comp.kind == "spout":  # complete latency: spout emit -> tree acked
            lat = [t.complete_latency for t in tasks if t.complete_latency.count]
            latency = f"{max(x.p99_ms for x in lat):.2f} p99" if lat else "-"
            capacity = "-"
        else:  # execute latency
            lat = [t.execute_latency for t in tasks if t.execute_latency.count]
            latency = f"{max(x.p99_ms for x in lat):.4f} p99" if lat else "-"
            capacity = f"{max((t.capacity for t in tasks), default=0.0):.3f}"
        lines.append(
            f"{cid:<16}{len(tasks):>6}{comp.emitted:>12,}{comp.transferred:>13,}"
            f"{comp.executed:>12,}{comp.acked:>12,}{comp.failed:>9,}{latency:>14}{capacity:>10}"
        )
    acker = info.acker
    lines.append("latency: spouts complete (emit -> tree acked), bolts execute; p99 over tasks")
    lines.append(
        f"acker: {acker['ackers']} ledger(s), trees acked {acker['acked']:,}, failed "
        f"{acker['failed']:,}, timed out {acker['timed_out']:,}, still pending "
        f"{acker['pending_roots']:,}"
    )
    errors = info.errors
    if errors:
        lines.append(f"errors ({len(errors)}; last 3):")
        for e in errors[-3:]:
            lines.append(f"  [{e.component} task {e.task} at {e.time_secs:.2f}s] {e.error}")
    return "\n".join(lines)


async def run_with_progress(
    topology: StormTopology,
    conf: Mapping[str, Any] | None = None,
    *,
    name: str = "topology",
    timeout: float | None = None,
    interval: float = 1.0,
    out: TextIO | None = None,
    on_complete: Callable[[RunningTopology], Any] | None = None,
) -> TopologyInfo:
    """Run until complete (or ``timeout``), printing progress every ``interval`` seconds.

    ``on_complete(running)`` is called before the topology is stopped, to read final state.
    """
    out = out if out is not None else sys.stderr
    tty = out.isatty()
    loop = asyncio.get_running_loop()
    async with run_topology(topology, conf, name=name) as running:
        start = last_t = loop.time()
        last_n = 0
        done = asyncio.ensure_future(running.wait_until_complete(timeout))
        try:
            while not done.done():
                await asyncio.wait([done], timeout=interval)
                info = running.info()
                now = loop.time()
                n = sum(c.executed for c in info.components.values()) + sum(
                    c.emitted for c in info.components.values() if c.kind == "spout"
                )
                rate = (n - last_n) / max(now - last_t, 1e-9)
                last_n, last_t = n, now
                line = _progress_line(info, now - start, rate)
                print(f"\r{line}" if tty else line, end="" if tty else "\n", file=out, flush=True)
            if tty:
                print(file=out)
            done.result()
        finally:
            if not done.done():
                done.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await done
        if on_complete is not None:
            on_complete(running)
        return running.info()


def _parse_conf(items: list[str]) -> dict[str, Any]:
    conf: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep:
            raise SystemExit(f"squall: --conf takes key=value, got {item!r}")
        try:
            conf[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            conf[key] = raw
    return conf


def _load(target: str) -> tuple[StormTopology, dict[str, Any]]:
    module_name, sep, func_name = target.partition(":")
    if not sep or not module_name or not func_name:
        raise SystemExit(f"squall: expected MODULE:FUNCTION, got {target!r}")
    sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    try:
        func = getattr(module, func_name)
    except AttributeError:
        raise SystemExit(f"squall: module {module_name!r} has no {func_name!r}") from None
    result = func()
    conf: dict[str, Any] = {}
    if isinstance(result, tuple):
        result, conf = result[0], dict(result[1] or {})
    if not isinstance(result, StormTopology):
        raise SystemExit(
            f"squall: {target} returned {type(result).__name__}; return a StormTopology "
            f"(TopologyBuilder.create_topology()) or (topology, conf)"
        )
    return result, conf


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="squall", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="run a topology locally until it completes")
    run.add_argument("target", help="MODULE:FUNCTION returning a topology (and conf)")
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    run.add_argument("--name", default=None)
    run.add_argument("--timeout", type=float, default=None, help="seconds before giving up")
    args = parser.parse_args(argv)
    topology, conf = _load(args.target)
    conf.update(_parse_conf(args.conf))
    name = args.name or args.target.partition(":")[0].rsplit(".", 1)[-1]
    try:
        info = run_sync(run_with_progress(topology, conf, name=name, timeout=args.timeout))
    except KeyboardInterrupt:
        print("\nsquall: interrupted", file=sys.stderr)
        return 130
    except (SquallError, TimeoutError) as exc:
        print(f"squall: {exc}", file=sys.stderr)
        return 1
    print(format_stats(info))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
