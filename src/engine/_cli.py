"""The ``squall`` command: run a topology, drive a running one, draw one.

``squall run MODULE:FUNCTION`` runs a topology in this process (``FUNCTION`` returns a
``StormTopology`` or a ``(StormTopology, conf)`` pair) with a live progress line on stderr
and a stats table at the end — also after Ctrl-C and ``--timeout``. It stops by itself when
every spout is exhausted and nothing is pending. Exit status: 0 done; 1 tuple trees failed
or errors were reported (``--fail-on`` chooses); 2 bad usage or a target that cannot be
loaded; 124 ``--timeout`` reached; 130 interrupted.

``squall list``, ``kill``, ``activate``, ``deactivate`` and ``rebalance`` act on topologies
running in another process started with ``--ui`` (or ``run_topology(..., ui=PORT)``),
through its REST API (``--url``, default ``http://127.0.0.1:8080``), like Storm's CLI.
``squall visualize MODULE:FUNCTION`` writes the topology's graph as SVG and DOT.
``squall submit --runner spark MODULE:FUNCTION ...`` runs it on Spark as one Structured
Streaming query (``spark_io``, loaded by name only then: the engine does not depend on it);
``--runner local`` is ``squall run``.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import importlib
import logging
import os
import sys
import traceback
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from squall_cli import (
    DEFAULT_UI_PORT,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_TIMEOUT,
    add_client_commands,
    positive_float,
    run_client,
)
from squall_cli import CliError as _CliError

from ._config import check_config
from ._errors import InvalidConfigError, SquallError
from ._loop import run_sync
from ._runtime import RunningTopology, run_topology
from ._stats import TopologyInfo
from ._topology import StormTopology

__all__ = ["ProgressLine", "format_stats", "main", "run_with_progress"]

FAIL_ON = ("any", "failed", "errors", "never")
RUNNERS = ("local", "spark")
#: The shortest ``--interval`` between progress lines.
MIN_INTERVAL_SECS = 0.1
#: What ``squall submit --runner spark`` hands its arguments to (by name: see ``_cmd_submit``).
SPARK_SUBMIT_MODULE = "spark_io._submit"


# --- the progress line ---------------------------------------------------------------------


def _spout_totals(info: TopologyInfo) -> tuple[int, int, int]:
    spouts = [c for cid, c in info.components.items() if c.kind == "spout" and cid[:2] != "__"]
    return (
        sum(c.emitted for c in spouts),
        sum(c.acked for c in spouts),
        sum(c.failed for c in spouts),
    )


def _progress_line(info: TopologyInfo, emit_rate: float, ack_rate: float) -> str:
    """What the spouts did: emits and tree acks (per second since the last line), not every
    hop; the clock is the topology's uptime."""
    emitted, acked, failed = _spout_totals(info)
    return (
        f"{info.uptime_secs:7.1f}s {info.status:<8} spout emitted {emitted:>11,} "
        f"({emit_rate:>9,.0f}/s)  acked {acked:>11,} ({ack_rate:>9,.0f}/s)  failed "
        f"{failed:>7,}  pending {info.pending_trees:>7,}  errors {len(info.errors):>4,}"
    )


class ProgressLine:
    """One status line kept at the bottom of a terminal, under whatever else is printed.

    On a terminal the line is redrawn in place; while it is shown, ``sys.stdout`` and
    ``sys.stderr`` are wrapped so that anything printed (user ``print``, logging) first
    erases it and it is redrawn below. Elsewhere (a pipe, a file) each update is a line.
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.tty = out.isatty()
        self.text = ""
        self._shown = False
        self._mid_line = False  # user output did not end its line: do not draw over it

    def _erase(self) -> None:
        if self._shown:
            self.out.write("\r\x1b[2K")
            self._shown = False

    def _draw(self) -> None:
        if self.text and not self._mid_line:
            self.out.write("\r\x1b[2K" + self.text)
            self.out.flush()
            self._shown = True

    def show(self, text: str) -> None:
        self.text = text
        if not self.tty:
            self.out.write(text + "\n")
            self.out.flush()
            return
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False
        self._draw()

    def user_write(self, stream: TextIO, data: str) -> int:
        self._erase()
        n = stream.write(data)
        if data:
            self._mid_line = not data.endswith("\n")
        stream.flush()
        self._draw()
        return n

    def finish(self) -> None:
        """Leave the last line on screen and end it."""
        if self.tty and self._shown:
            self.out.write("\n")
            self.out.flush()
            self._shown = False

    @contextlib.contextmanager
    def capturing(self) -> Iterator[ProgressLine]:
        """Route ``sys.stdout`` / ``sys.stderr`` through the line while the block runs."""
        if not self.tty:
            yield self
            return
        saved = sys.stdout, sys.stderr
        sys.stdout = _Through(self, saved[0])
        sys.stderr = _Through(self, saved[1])
        try:
            yield self
        finally:
            sys.stdout, sys.stderr = saved
            self.finish()


class _Through:
    """A text stream that writes through a ``ProgressLine``."""

    def __init__(self, line: ProgressLine, stream: TextIO) -> None:
        self._line = line
        self._stream = stream

    def write(self, data: str) -> int:
        return self._line.user_write(self._stream, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class _CurrentStderr:
    """Logging's stream: whatever ``sys.stderr`` is at the time of the write."""

    def write(self, data: str) -> int:
        return sys.stderr.write(data)

    def flush(self) -> None:
        sys.stderr.flush()


# --- the final table -----------------------------------------------------------------------


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
    # Pending: the spouts' trees, as the progress line and the UI count them. The ledger
    # may hold more: late acks of trees already failed, dropped at their own timeout.
    late = acker["pending_roots"] - info.pending_trees
    late_acks = f" (ledger: {late:,} late acks of finished trees, dropped at their timeout)"
    lines.append(
        f"acker: {acker['ackers']} ledger(s), trees acked {acker['acked']:,}, failed "
        f"{acker['failed']:,}, timed out {acker['timed_out']:,}, still pending "
        f"{info.pending_trees:,}{late_acks if late > 0 else ''}"
    )
    errors = info.errors
    if errors:
        lines.append(f"errors ({len(errors)}; last 3):")
        for e in errors[-3:]:
            lines.append(f"  [{e.component} task {e.task} at {e.time_secs:.2f}s] {e.error}")
    return "\n".join(lines)


# --- running -------------------------------------------------------------------------------


class _Run:
    """The state of one ``run_with_progress``: its last ``TopologyInfo`` survives a
    Ctrl-C or a timeout, so the caller can still print the table."""

    info: TopologyInfo | None = None
    ui_url: str | None = None
    #: the option whose service is starting (``--ui``, ``--prometheus``), while it starts
    starting: str | None = None


@contextlib.asynccontextmanager
async def _services(
    running: RunningTopology,
    ui: int | None,
    ui_host: str,
    ui_token: str | None,
    prometheus: int | None,
    out: TextIO,
    state: _Run,
) -> AsyncIterator[None]:
    async with contextlib.AsyncExitStack() as stack:
        if ui is not None:
            from .ui import attach_ui

            state.starting = "--ui"
            server = await stack.enter_async_context(
                attach_ui(running, ui, ui_host, token=ui_token)
            )
            state.ui_url = server.url
            print(f"squall: web UI and REST API at {server.url}", file=out, flush=True)
        if prometheus is not None:
            from .prometheus import serve_prometheus

            state.starting = "--prometheus"
            exporter = serve_prometheus(running, prometheus)
            stack.callback(exporter.close)
            print(
                f"squall: Prometheus metrics at http://127.0.0.1:{exporter.port}/metrics",
                file=out,
                flush=True,
            )
        state.starting = None
        yield


async def run_with_progress(
    topology: StormTopology,
    conf: Mapping[str, Any] | None = None,
    *,
    name: str = "topology",
    timeout: float | None = None,
    interval: float = 1.0,
    out: TextIO | None = None,
    on_complete: Callable[[RunningTopology], Any] | None = None,
    ui: int | None = None,
    ui_host: str = "127.0.0.1",
    ui_token: str | None = None,
    prometheus: int | None = None,
    _state: _Run | None = None,
) -> TopologyInfo:
    """Run until complete (or ``timeout``), showing progress every ``interval`` seconds.

    The line counts what the spouts did (emits and acks, per second) on the topology's
    clock. ``on_complete(running)`` is called before the topology is stopped, to read final
    state. ``ui=PORT`` serves the web UI and REST API on 127.0.0.1 (``ui_host``, with
    ``ui_token`` beyond loopback) while it runs; ``prometheus=PORT`` serves ``/metrics``.
    A kill through the UI ends the run like completion does.
    """
    out = out if out is not None else sys.stderr
    state = _state if _state is not None else _Run()
    line = ProgressLine(out)
    ran: RunningTopology | None = None
    try:
        async with (
            run_topology(topology, conf, name=name) as running,
            _services(running, ui, ui_host, ui_token, prometheus, out, state),
        ):
            ran = running
            last = state.info = running.info()
            done = asyncio.ensure_future(running.wait_until_complete(timeout))
            try:
                with line.capturing():
                    while not done.done():
                        await asyncio.wait([done], timeout=interval)
                        info = state.info = running.info()
                        dt = max(info.uptime_secs - last.uptime_secs, 1e-9)
                        (e1, a1, _), (e0, a0, _) = _spout_totals(info), _spout_totals(last)
                        line.show(_progress_line(info, (e1 - e0) / dt, (a1 - a0) / dt))
                        last = info
                try:
                    done.result()
                except SquallError:
                    if running.info().status != "KILLED":  # killed through the UI: an end
                        raise
                if on_complete is not None:
                    on_complete(running)
            finally:
                if not done.done():
                    done.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await done
    finally:
        if ran is not None:  # stopped now: the table shows the final state
            state.info = ran.info()
    assert state.info is not None
    return state.info


# --- loading a target ----------------------------------------------------------------------


def _parse_conf(items: list[str]) -> dict[str, Any]:
    conf: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise _CliError(f"squall: --conf takes KEY=VALUE, got {item!r}")
        try:
            conf[key] = ast.literal_eval(raw)
        except (ValueError, SyntaxError):
            conf[key] = raw
    return conf


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return ""
    f = frames[-1]
    return f" at {os.path.relpath(f.filename)}:{f.lineno}"


def _load(target: str) -> tuple[StormTopology, dict[str, Any]]:
    module_name, sep, func_name = target.partition(":")
    if not sep or not module_name or not func_name:
        raise _CliError(f"squall: expected MODULE:FUNCTION, got {target!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise _CliError(
                f"squall: cannot import {module_name!r} ({exc}); run squall from the "
                f"directory that holds it or add that directory to PYTHONPATH"
            ) from exc
        logging.getLogger("squall.cli").debug("importing %s failed", module_name, exc_info=exc)
        raise _CliError(
            f"squall: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
            f"{_where(exc)} (install the missing package; --log-level DEBUG shows the traceback)"
        ) from exc
    except Exception as exc:
        logging.getLogger("squall.cli").debug("importing %s failed", module_name, exc_info=exc)
        raise _CliError(
            f"squall: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
            f"{_where(exc)} (--log-level DEBUG shows the traceback)"
        ) from exc
    try:
        func = getattr(module, func_name)
    except AttributeError:
        raise _CliError(f"squall: module {module_name!r} has no {func_name!r}") from None
    try:
        result = func()
    except Exception as exc:
        logging.getLogger("squall.cli").debug("%s raised", target, exc_info=exc)
        raise _CliError(
            f"squall: {target}() raised {type(exc).__name__}: {exc}{_where(exc)} "
            f"(--log-level DEBUG shows the traceback)"
        ) from exc
    conf: dict[str, Any] = {}
    if isinstance(result, tuple):
        result, conf = result[0], dict(result[1] or {})
    if not isinstance(result, StormTopology):
        raise _CliError(
            f"squall: {target} returned {type(result).__name__}; return a StormTopology "
            f"(TopologyBuilder.create_topology()) or (topology, conf)"
        )
    return result, conf


def _failure(info: TopologyInfo, policy: str) -> str | None:
    _, _, failed = _spout_totals(info)
    errors = len(info.errors)
    reasons = []
    if failed and policy in ("any", "failed"):
        reasons.append(f"{failed:,} tuple tree(s) failed or timed out")
    if errors and policy in ("any", "errors"):
        reasons.append(f"{errors:,} error(s) were reported")
    if not reasons:
        return None
    return f"squall: {' and '.join(reasons)} (exit {EXIT_FAILED}; --fail-on never exits 0)"


def _check_conf(conf: Mapping[str, Any], where: str) -> None:
    try:
        check_config(conf, where)
    except InvalidConfigError as exc:
        raise _CliError(f"squall: {exc}") from None


def _cmd_run(args: argparse.Namespace, runner: Callable[[Coroutine[Any, Any, Any]], Any]) -> int:
    for option, value in (("--ui-host", args.ui_host), ("--token", args.token)):
        if value is not None and args.ui is None:
            raise _CliError(f"squall: {option} is for the web UI: add --ui [PORT] or drop it")
    overrides = _parse_conf(args.conf)
    _check_conf(overrides, "--conf: ")
    topology, conf = _load(args.target)
    _check_conf(conf, f"the conf {args.target} returned: ")
    conf.update(overrides)
    name = args.name or args.target.partition(":")[0].rsplit(".", 1)[-1]
    state = _Run()
    token = args.token or os.environ.get("SQUALL_UI_TOKEN") or None
    coro = run_with_progress(
        topology,
        conf,
        name=name,
        timeout=args.timeout,
        interval=args.interval,
        ui=args.ui,
        ui_host=args.ui_host or "127.0.0.1",
        ui_token=token,
        prometheus=args.prometheus,
        _state=state,
    )
    code = 0
    try:
        info = runner(coro)
    except KeyboardInterrupt:
        print("\nsquall: interrupted", file=sys.stderr)
        code = EXIT_INTERRUPTED
        info = state.info
    except TimeoutError as exc:
        print(f"squall: {exc} (--timeout {args.timeout:g})", file=sys.stderr)
        code = EXIT_TIMEOUT
        info = state.info
    except (SquallError, ValueError, OSError) as exc:
        if state.starting is not None:  # a port in use, a host that needs a token: usage
            hint = " (squall run: --token TOKEN)" if "token" in str(exc) and not token else ""
            raise _CliError(f"squall: {state.starting}: {exc}{hint}") from None
        print(f"squall: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if info is not None:
        print(format_stats(info), flush=True)
        if code == 0:
            reason = _failure(info, args.fail_on)
            if reason is not None:
                print(reason, file=sys.stderr)
                code = EXIT_FAILED
    return code


# --- visualize -----------------------------------------------------------------------------


def _cmd_visualize(args: argparse.Namespace) -> int:
    from .ui import topology_graph

    topology, _ = _load(args.target)
    name = args.target.partition(":")[0].rsplit(".", 1)[-1]
    graph = topology_graph(topology)
    render = {"svg": lambda: graph.to_svg(title=name), "dot": lambda: graph.to_dot(name)}
    if args.output == "-":
        sys.stdout.write(render[args.format or "dot"]())
        return 0
    if args.output is not None:
        fmt = args.format or ("dot" if args.output.endswith((".dot", ".gv")) else "svg")
        targets = [(Path(args.output), fmt)]
    else:
        formats = [args.format] if args.format else ["svg", "dot"]
        targets = [(Path(f"{name}.{fmt}"), fmt) for fmt in formats]
    for path, fmt in targets:
        path.write_text(render[fmt](), encoding="utf-8")
        print(f"squall: wrote {path} ({fmt}, {len(graph.nodes)} components)")
    return 0


# --- the parser ----------------------------------------------------------------------------

_CONF_HELP = (
    "set a topology config key, e.g. --conf topology.max.spout.pending=1000 "
    "(repeatable; VALUE is read as a Python literal - int, float, True/False, None, "
    "list - or else kept as a string; a mistyped topology.* key is an error naming the "
    "closest key; overrides the conf returned by FUNCTION)"
)


def _interval(text: str) -> float:
    """``--interval``: more than a few lines a second is a flood nobody reads."""
    value = positive_float(text)
    if value < MIN_INTERVAL_SECS:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_INTERVAL_SECS:g} s, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    assert __doc__ is not None
    parser = argparse.ArgumentParser(
        prog="squall",
        description=__doc__.split("\n")[0],
        epilog="'squall COMMAND --help' describes each command.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = sub.add_parser(
        "run",
        help="run a topology in this process until it completes",
        description="Run MODULE:FUNCTION's topology here, with a progress line on stderr "
        "(spout emits and acks per second, on the topology's clock) and a stats table on "
        "stdout at the end, after Ctrl-C and after --timeout. Exit status: 0 done; 1 tuple "
        "trees failed or errors were reported (see --fail-on); 2 bad usage or a target that "
        "cannot be loaded; 124 --timeout reached; 130 interrupted.",
    )
    run.add_argument("target", help="MODULE:FUNCTION returning a topology, or (topology, conf)")
    run.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help=_CONF_HELP)
    run.add_argument("--name", default=None, help="the topology's name (default: the module's)")
    run.add_argument(
        "--timeout", type=positive_float, default=None, help="seconds before giving up (exit 124)"
    )
    run.add_argument(
        "--fail-on",
        choices=FAIL_ON,
        default="any",
        help="exit 1 when: tuple trees failed or errors were reported (any, the default), "
        "only trees failed (failed), only errors (errors), or never",
    )
    run.add_argument(
        "--ui",
        type=int,
        nargs="?",
        const=DEFAULT_UI_PORT,
        default=None,
        metavar="PORT",
        help=f"serve the web UI and REST API while running (default port {DEFAULT_UI_PORT}; "
        f"0: any free port)",
    )
    run.add_argument(
        "--ui-host",
        default=None,
        help="address the UI binds (with --ui; default 127.0.0.1; any other needs --token)",
    )
    run.add_argument(
        "--token", default=None, help="the UI's token (with --ui; or env SQUALL_UI_TOKEN)"
    )
    run.add_argument(
        "--prometheus",
        type=int,
        default=None,
        metavar="PORT",
        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics (the metrics extra)",
    )
    run.add_argument(
        "--log-level",
        default="WARNING",
        type=str.upper,
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        help="logging level of the engine and your components (default %(default)s)",
    )
    run.add_argument(
        "--interval",
        type=_interval,
        default=1.0,
        help=f"seconds between progress lines (default %(default)s, at least "
        f"{MIN_INTERVAL_SECS:g})",
    )

    add_client_commands(sub)
    p = sub.add_parser(
        "submit",
        help="run a topology here (--runner local) or on Spark (--runner spark)",
        description="--runner local: 'squall run' with the same arguments. --runner spark: "
        "one Spark Structured Streaming query (needs the spark extra); "
        "'squall submit --runner spark --help' lists its arguments.",
    )
    p.add_argument("--runner", choices=RUNNERS, default="local")
    p.add_argument("args", nargs=argparse.REMAINDER, help="the runner's arguments")
    p = sub.add_parser("visualize", help="write a topology's graph as SVG and DOT")
    p.add_argument("target", help="MODULE:FUNCTION returning a topology, or (topology, conf)")
    p.add_argument(
        "-o",
        "--output",
        default=None,
        help="file to write ('-': stdout; default: MODULE.svg and MODULE.dot)",
    )
    p.add_argument("--format", choices=["svg", "dot"], default=None)
    return parser


def _cmd_submit(argv: list[str], runner: Callable[[Coroutine[Any, Any, Any]], Any]) -> int:
    """``squall submit [--runner local|spark] ARGS...``: ARGS go on, in order, to ``squall
    run`` or to the Spark runner's own parser."""
    chosen = "local"
    rest: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg == "--runner":
            chosen = next(it, "")
        elif arg.startswith("--runner="):
            chosen = arg.partition("=")[2]
        else:
            rest.append(arg)
    if chosen not in RUNNERS:
        raise _CliError(
            f"squall submit: --runner must be one of {', '.join(RUNNERS)}, got {chosen!r}"
        )
    if chosen == "local":
        return main(["run", *rest], runner=runner)
    # Imported by name: spark_io depends on the engine, never the reverse.
    try:
        submit = importlib.import_module(SPARK_SUBMIT_MODULE)
    except ImportError as exc:
        raise _CliError(
            f"squall: --runner spark needs spark_io and pyspark ({exc}); "
            f"pip install 'squall[spark]'"
        ) from exc
    code: int = submit.main(rest)
    return code


def main(
    argv: list[str] | None = None,
    *,
    runner: Callable[[Coroutine[Any, Any, Any]], Any] = run_sync,
) -> int:
    """The ``squall`` command; ``runner`` runs ``squall run``'s coroutine (tests pass
    ``engine.testing.simulate`` to run it in virtual time)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["submit"] and not {"-h", "--help"} & set(argv[1:2]):
        try:
            return _cmd_submit(argv[1:], runner)
        except _CliError as exc:
            print(exc, file=sys.stderr)
            return exc.code
    args = _parser().parse_args(argv)
    if args.command == "run":
        logging.basicConfig(
            level=args.log_level,
            format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
            stream=_CurrentStderr(),
            force=True,
        )
    try:
        if args.command == "run":
            return _cmd_run(args, runner)
        if args.command == "visualize":
            return _cmd_visualize(args)
        return run_client(args)
    except _CliError as exc:
        print(exc, file=sys.stderr)
        return exc.code


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
